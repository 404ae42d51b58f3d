"""Linear-time merges of two sorted runs, compiled with numba (an optional accelerator).

NumPy has no merge: the NumPy backend merged by concatenating the two runs and
sorting again, with timsort for keys alone (which finds the two runs) and with
``np.lexsort`` over the order codes for keyed chunks (which sorts the whole again and
does not see the runs).  The merge rounds were most of a CPU sort's time, so this
module merges in one pass instead (``benchmarks/merge.py``; the figures:
``docs/performance.md``).  The functions are compiled with
``numba.njit(nogil=True)``, so that the merges of one Dask round run on several
threads at once, and ``cache=True``, so that each process compiles a signature once
per machine, not once per run.

numba is optional (the ``fast`` extra): where it cannot be imported, ``ENABLED`` is
False and the backend keeps its NumPy code.  Tests set ``ENABLED`` to compare both.
numba (LLVM) adds about 100 MB to each process that merges; ``DISTSORT_NUMBA=0`` in
the environment leaves it unimported, for workers whose memory limit is that tight.

Keyed runs of pairs too wide to pack into one code (``numpy.keyed_codes``) whose keys
hold no ``-0.0``, ``+0.0`` or NaN are ordered by the (key, value) ``total`` codes
alone: :func:`merge_pairs` makes those codes from the bits inside the loop (a few
register operations) instead of reading code arrays made by NumPy for every merge,
which halved the merge of float64 keys with int64 values.

The result is the one the NumPy code gives, bit for bit: keys-only chunks hold
``total`` codes, a bijection of the keys' bits, and a keyed chunk is ordered by the
tuple of :func:`distsort.backends.cpu.numpy_backend.order_codes`, which ends with bijective
codes of the key and the value, so equal tuples are equal elements and a sorted
result is unique.  Ties still take the element of the lower run first, as the
stable sorts did.  Nothing is written to the inputs.
"""
from __future__ import annotations

import os

import numpy as np

try:
    if os.environ.get("DISTSORT_NUMBA", "1") == "0":
        raise ImportError("DISTSORT_NUMBA=0")
    import numba
except ImportError:  # pragma: no cover - depends on the environment
    numba = None

#: Whether the merges below are used (numba importable); tests switch it off.
ENABLED = numba is not None


def _jit(fn):
    return numba.njit(cache=True, nogil=True)(fn) if numba is not None else fn


def _jit_inline(fn):
    return numba.njit(cache=True, nogil=True, inline="always")(fn) if numba is not None else fn


@_jit_inline
def _take_front(x, y, out, i, j, o):  # pragma: no cover - compiled
    """One step from the front: the smaller head (``x``'s on ties) to ``out[o]``.  A
    select, not a branch on the data, so random keys cost no mispredictions."""
    a = x[i]
    b = y[j]
    t = b < a
    out[o] = b if t else a
    return i + 1 - t, j + t, o + 1


@_jit
def _merge_codes(x, y, out):  # pragma: no cover - compiled
    """Merge ascending ``x`` and ``y`` into ``out``.

    From both ends at once: the front takes the smaller head (``x``'s on ties), the
    back the larger tail (``y``'s on ties), two independent chains of dependent loads
    that the CPU overlaps (20-25% faster than one chain).  After
    ``min(len(x), len(y))`` steps from each end (they cannot cross) the middle is
    merged from the front.
    """
    nx, ny = len(x), len(y)
    i = j = o = 0                           # front: next of x, of y, of out
    p, q, r = nx - 1, ny - 1, nx + ny - 1   # back: last of x, of y, of out
    for _ in range(min(nx, ny)):
        i, j, o = _take_front(x, y, out, i, j, o)
        c = x[p]
        d = y[q]
        u = c > d
        out[r] = c if u else d
        p -= u
        q -= 1 - u
        r -= 1
    while i <= p and j <= q:
        i, j, o = _take_front(x, y, out, i, j, o)
    out[o:o + p + 1 - i] = x[i:p + 1]
    o += p + 1 - i
    out[o:o + q + 1 - j] = y[j:q + 1]


@_jit_inline
def _less(c, j, d, i):  # pragma: no cover - compiled
    """Whether code tuple ``c`` at ``j`` is below ``d`` at ``i`` (4 arrays each, in order)."""
    if c[0][j] != d[0][i]:  # the first code decides almost always: a predictable branch
        return c[0][j] < d[0][i]
    if c[1][j] != d[1][i]:
        return c[1][j] < d[1][i]
    if c[2][j] != d[2][i]:
        return c[2][j] < d[2][i]
    return c[3][j] < d[3][i]


@_jit_inline
def _put_pair(xk, xv, yk, yv, ok, ov, i, j, o, t):  # noqa: PLR0913, PLR0917  # pragma: no cover - compiled
    """One step of a keyed merge: pair ``j`` of y where ``t``, else pair ``i`` of x, to
    ``ok[o]``, ``ov[o]``.  Both pairs are loaded before the select, so no branch."""
    a, b, c, d = xk[i], yk[j], xv[i], yv[j]
    ok[o] = b if t else a
    ov[o] = d if t else c
    return i + 1 - t, j + t, o + 1


@_jit_inline
def _put_rest(xk, xv, yk, yv, ok, ov, i, j, o):  # noqa: PLR0913, PLR0917  # pragma: no cover - compiled
    """The pairs left in x from ``i`` and in y from ``j`` (one of them none) to the
    outputs from ``o``."""
    nx = len(xk) - i
    ok[o:o + nx] = xk[i:]
    ov[o:o + nx] = xv[i:]
    ok[o + nx:] = yk[j:]
    ov[o + nx:] = yv[j:]


# numba compiles this with plain array arguments (no tuples of arrays), two runs and two outputs.
@_jit
def _merge_keyed(xk, xv, yk, yv, xc, yc, ok, ov):  # noqa: PLR0913, PLR0917  # pragma: no cover - compiled
    """Merge keyed runs into ``ok``, ``ov`` by their code tuples ``xc``, ``yc``.

    Keys and values move together, by selects as in :func:`_merge_codes` (only from
    the front: merging from both ends measured no faster here, where the merge moves
    and reads three arrays per run).
    """
    i = j = o = 0
    while i < len(xk) and j < len(yk):
        t = _less(yc, j, xc, i)  # y first only if below: ties take x's element first
        i, j, o = _put_pair(xk, xv, yk, yv, ok, ov, i, j, o, t)
    _put_rest(xk, xv, yk, yv, ok, ov, i, j, o)


@_jit_inline
def _code(u, c):  # pragma: no cover - compiled
    """The ``total`` code (``distsort.core.order.encode``) of the unsigned bits ``u``, from
    the constants ``c`` of :func:`_encoding`: the same map for every dtype, in registers."""
    mask = (u >> c[0]) * c[1] | c[2]  # floats: all ones for negative keys, else the sign
    # numba widens narrow unsigned operands: the difference is cut back to the width.
    return (((u ^ mask) - c[3]) & c[5]) ^ c[4]


# numba compiles this with plain array arguments, as _merge_keyed.
@_jit
def _merge_pairs(xk, xv, yk, yv, kc, vc, ok, ov):  # noqa: PLR0913, PLR0917  # pragma: no cover - compiled
    """Merge keyed runs into ``ok``, ``ov`` by the (key, value) ``total`` codes, made here
    from the bits (``kc``, ``vc``: :func:`_encoding`) instead of read from code arrays."""
    i = j = o = 0
    while i < len(xk) and j < len(yk):
        ka, kb = _code(xk[i], kc), _code(yk[j], kc)
        t = (kb < ka) | ((kb == ka) & (_code(yv[j], vc) < _code(xv[i], vc)))  # ties: x first
        i, j, o = _put_pair(xk, xv, yk, yv, ok, ov, i, j, o, t)
    _put_rest(xk, xv, yk, yv, ok, ov, i, j, o)


@_jit
def _take_pairs(k, v, perm, ok, ov):  # pragma: no cover - compiled
    """``ok, ov = k[perm], v[perm]`` in one loop: the two random loads of an index
    overlap (a quarter faster than two ``numpy.take``)."""
    for i in range(len(perm)):
        j = perm[i]
        ok[i] = k[j]
        ov[i] = v[j]


def take_pairs(keys, values, perm):
    """``keys[perm], values[perm]`` (new arrays), gathered together."""
    ok, ov = np.empty(len(perm), dtype=keys.dtype), np.empty(len(perm), dtype=values.dtype)
    _take_pairs(_bits(np.ascontiguousarray(keys)), _bits(np.ascontiguousarray(values)),
                np.ascontiguousarray(perm), _bits(ok), _bits(ov))
    return ok, ov


def _encoding(dtype, descending=False):
    """Constants of :func:`_code` for ``dtype``: shift to the sign bit, the float mask's
    multiplier (all ones for floats, 0 otherwise), the bits always flipped (the sign for
    signed kinds), the count subtracted (``distsort.core.order.code_shift``), the final
    complement (descending) and the width's mask."""
    from distsort.core.order import code_shift
    udt = np.dtype(f"u{dtype.itemsize}")
    bits = 8 * dtype.itemsize
    ones = (1 << bits) - 1
    sign = 1 << (bits - 1)
    fmul, flip = 0, 0
    if dtype.kind == "f":
        fmul, flip = ones, sign
    elif dtype.kind == "i":
        flip = sign
    return np.array([bits - 1, fmul, flip, code_shift(dtype, descending),
                     ones if descending else 0, ones], dtype=udt)


def _bits(a):
    """``a`` viewed as unsigned integers of its width: moved bit for bit, and one
    compiled signature per width rather than per dtype."""
    return a.view(f"u{a.itemsize}")


def _four(codes):
    """Pad 1 or 2 code arrays to 4 (repeating them) so one kernel serves all: the
    repeats are only read on ties of the arrays before them, which they repeat."""
    return tuple(codes) * (4 // len(codes))


# Outputs are allocated here, not in the compiled code: numba's allocation of large
# arrays measured twice as slow as the whole merge into a NumPy array.

def merge_codes(x, y):
    """Merge two ascending runs of signed codes (a keys-only chunk) into a new array."""
    out = np.empty(len(x) + len(y), dtype=x.dtype)
    _merge_codes(np.ascontiguousarray(x), np.ascontiguousarray(y), out)
    return out


def merge_pairs(x, y, descending):
    """Merge two keyed runs ``(keys, values)`` ordered by their (key, value) ``total``
    codes: the keyed order where no key is ``-0.0``, ``+0.0`` or NaN.  Returns new
    ``(keys, values)`` arrays of the runs' dtypes."""
    (xk, xv), (yk, yv) = x, y
    ok = np.empty(len(xk) + len(yk), dtype=xk.dtype)
    ov = np.empty(len(xv) + len(yv), dtype=xv.dtype)
    _merge_pairs(_bits(np.ascontiguousarray(xk)), _bits(np.ascontiguousarray(xv)),
                 _bits(np.ascontiguousarray(yk)), _bits(np.ascontiguousarray(yv)),
                 _encoding(xk.dtype, descending), _encoding(xv.dtype), _bits(ok), _bits(ov))
    return ok, ov


def merge_keyed(x, y, x_codes, y_codes):
    """Merge two keyed runs ``(keys, values)``, ascending by their code tuples.

    ``x_codes``/``y_codes`` are the runs' codes (1, 2 or 4 arrays: the packed codes
    or the :func:`order_codes` of ``distsort.backends.cpu.numpy_backend.merge_codes_of``).
    Returns new ``(keys, values)`` arrays of the runs' dtypes.
    """
    (xk, xv), (yk, yv) = x, y
    if xk.dtype != yk.dtype or xv.dtype != yv.dtype:
        raise TypeError("the runs of a merge must have the same dtypes")
    ok = np.empty(len(xk) + len(yk), dtype=xk.dtype)
    ov = np.empty(len(xv) + len(yv), dtype=xv.dtype)
    _merge_keyed(_bits(np.ascontiguousarray(xk)), _bits(np.ascontiguousarray(xv)),
                 _bits(np.ascontiguousarray(yk)), _bits(np.ascontiguousarray(yv)),
                 _four(x_codes), _four(y_codes), _bits(ok), _bits(ov))
    return ok, ov


@_jit
def _merge_keys(x, y, c, out):  # pragma: no cover - compiled
    """Merge runs of keys ``x`` and ``y`` (their bits), each sorted by ``total`` codes,
    into ``out`` by those codes, made here from the bits (``c``: :func:`_encoding`);
    ties take ``x``'s element first.  From both ends at once, as
    :func:`_merge_codes`."""
    nx, ny = len(x), len(y)
    i = j = o = 0
    p, q, r = nx - 1, ny - 1, nx + ny - 1
    for _ in range(min(nx, ny)):
        a = x[i]
        b = y[j]
        t = _code(b, c) < _code(a, c)
        out[o] = b if t else a
        i += 1 - t
        j += t
        o += 1
        e = x[p]
        d = y[q]
        u = _code(e, c) > _code(d, c)
        out[r] = e if u else d
        p -= u
        q -= 1 - u
        r -= 1
    while i <= p and j <= q:
        a = x[i]
        b = y[j]
        t = _code(b, c) < _code(a, c)
        out[o] = b if t else a
        i += 1 - t
        j += t
        o += 1
    out[o:o + p + 1 - i] = x[i:p + 1]
    o += p + 1 - i
    out[o:o + q + 1 - j] = y[j:q + 1]


def merge_keys_into(x, y, out, descending=False):
    """Merge two runs of keys ``x`` and ``y`` (of one dtype, each in the order of its
    ``total`` codes: ``distsort.core.order``) into ``out`` (``len(x) + len(y)``
    elements), ties taking ``x``'s first.

    >>> out = np.empty(5)
    >>> merge_keys_into(np.array([-0.0, 2.0]), np.array([0.0, 1.0, np.nan]), out).tolist()
    [-0.0, 0.0, 1.0, 2.0, nan]
    """
    _merge_keys(_bits(np.ascontiguousarray(x)), _bits(np.ascontiguousarray(y)),
                _encoding(x.dtype, descending), _bits(out))
    return out
