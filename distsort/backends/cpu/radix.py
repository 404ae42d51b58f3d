"""An LSD radix sort of keys alone on one core, the codes made from the keys' bits on
the way in and the keys made back on the way out (numba).

The larger-than-memory path (:mod:`distsort.io.disksort`) sorts every element twice on
the CPU, once to form its run and once in the k-way merge, and the CPU is its limit
on a machine of few cores, where NumPy's sort of float32 is several times slower
than this one (the figures: ``docs/out_of_core.md``).  This sort reads the keys once
to count every digit, then moves them once per byte (four moves for 4-byte keys; a
byte that every key shares moves nothing), the first move writing the ``total``
codes of :mod:`distsort.core.order` and the last one the keys again, so that no pass of
its own encodes or decodes.  Digits of a byte (256 destinations per move) were
faster than digits of 11 bits (three moves over 2048 destinations, which the caches
and the TLB hold less well).

The codes are those of :mod:`distsort.backends.cpu.codes` (its constants, its bit
maps): a bijection of the keys' bits, so the result is NumPy's order bit for bit
(NaNs last, ``-0.0`` before ``+0.0``), and descending is the complement.  Where
numba is not importable, :func:`sort_keys` sorts the codes with NumPy.

>>> x = np.array([1.5, -0.0, np.nan, 0.0, -2.0], np.float32)
>>> sort_keys(x).tolist()
[-2.0, -0.0, 0.0, 1.5, nan]
>>> sort_keys(np.array([3, -1, 2], np.int16), descending=True).tolist()
[3, 2, -1]
"""
from __future__ import annotations

import numpy as np

from distsort.core.order import decode, encode
from distsort.backends.cpu import merge as _merge
from distsort.backends.cpu.codes import _constants

#: Bits of a digit: 256 destinations per move (:func:`_counts` is written for bytes).
DIGIT_BITS = 8
#: Keys below this many are sorted by NumPy (the compiled code's call costs more).
RADIX_FROM = 1 << 12


@_merge._jit_inline
def _code(x, consts):  # pragma: no cover - compiled
    """The code of key bits ``x`` in the unsigned order (``consts``: a tuple of
    ``codes._constants``: ``S, shift, flip, B - 1, F, 1, 2**B - 1``; ``S`` the sign
    bit of signed keys, 0 for others; a tuple, not an array, so that they stay in
    registers).  The codes there are signed (``flip`` holds the top bit): here the
    top bit is flipped back."""
    sign, shift, flip, top, floats = consts[0], consts[1], consts[2], consts[3], consts[4]
    zero = shift - shift
    c = (((x ^ (sign | ((zero - (x >> top)) & floats))) - shift) ^ flip) & consts[6]
    return c ^ (consts[5] << top)


@_merge._jit_inline
def _key(c, consts, is_float):  # pragma: no cover - compiled
    """The key bits of a code of :func:`_code`."""
    sign, shift, flip, top, one = consts[0], consts[1], consts[2], consts[3], consts[5]
    v = (((c ^ (one << top)) ^ flip) + shift) & consts[6]
    if is_float:
        v ^= sign | ((v >> top) - one)
    elif sign:
        v ^= sign
    return v


@_merge._jit
def _counts(u, consts, passes):  # pragma: no cover - compiled
    """Where each digit's keys start in each pass, and which passes move anything
    (:func:`_starts`).  ``passes``: the key's bytes (1, 2, 4 or 8).

    The passes are written out, not looped over: a loop of ``passes`` steps per key
    took 3.1 ns per float32 key on the 2-core machine, the written-out counts 2.0
    (5.4 and 3.5 ns for float64; 2026-11-25)."""
    mask = (1 << DIGIT_BITS) - 1
    counts = np.zeros((passes, mask + 1), np.int64)
    for i in range(u.shape[0]):
        c = _code(u[i], consts)
        counts[0, c & mask] += 1
        if passes > 1:
            counts[1, (c >> 8) & mask] += 1
            if passes > 2:  # noqa: PLR2004 - the bytes of a key: 1, 2, 4 or 8
                counts[2, (c >> 16) & mask] += 1
                counts[3, (c >> 24) & mask] += 1
                if passes > 4:  # noqa: PLR2004
                    counts[4, (c >> 32) & mask] += 1
                    counts[5, (c >> 40) & mask] += 1
                    counts[6, (c >> 48) & mask] += 1
                    counts[7, (c >> 56) & mask] += 1
    return counts, _starts(counts, u.shape[0])


@_merge._jit_inline
def _starts(counts, n):  # pragma: no cover - compiled
    """Each pass's digit counts (of ``n`` keys) made where the digit's keys start
    (exclusive prefix sums), in place; returns which passes move anything: a digit
    that every key shares moves nothing."""
    live = np.zeros(counts.shape[0], np.bool_)
    for p in range(counts.shape[0]):
        live[p] = counts[p].max() < n
        total = 0
        for d in range(counts.shape[1]):
            k = counts[p, d]
            counts[p, d] = total
            total += k
    return live


@_merge._jit
def _move(src, dst, at, p, first, last, consts, is_float):  # noqa: PLR0913, PLR0917  # pragma: no cover - compiled
    """One pass: ``src`` to ``dst`` by digit ``p`` (``at``: where each digit's keys
    go); the first pass reads keys and writes codes, the last writes keys again."""
    mask = (1 << DIGIT_BITS) - 1
    for i in range(src.shape[0]):
        x = _code(src[i], consts) if first else src[i]
        d = (x >> (p * DIGIT_BITS)) & mask
        dst[at[d]] = _key(x, consts, is_float) if last else x
        at[d] += 1


def _radix(u, out, tmp, consts, is_float):
    """``out`` = the keys of bits ``u`` sorted by their codes, through ``tmp``
    (scratch of ``u``'s size and dtype; ``u`` is left as it was)."""
    passes = u.dtype.itemsize  # digits of a byte: see _counts
    counts, live = _counts(u, consts, passes)
    todo = [p for p in range(passes) if live[p]]
    if not todo:  # every key equal
        out[:] = u
        return
    src = u
    for n, p in enumerate(todo):
        dst = out if (len(todo) - 1 - n) % 2 == 0 else tmp  # the last pass: ``out``
        _move(src, dst, counts[p], p, n == 0, n == len(todo) - 1, consts, is_float)
        src = dst


def sort_keys(keys, descending=False, out=None, tmp=None):
    """Keys of a 1-D NumPy array sorted in NumPy's order (``descending``: the
    reverse, NaNs still last), into ``out`` (a new array where None); ``tmp``: scratch of
    the keys' size and dtype (allocated where None).  ``keys`` is left as it was.

    >>> sort_keys(np.array([True, False, True])).tolist()
    [False, True, True]
    """
    keys = np.ascontiguousarray(keys)
    out = np.empty_like(keys) if out is None else out
    if not _merge.ENABLED or keys.shape[0] < RADIX_FROM:
        codes = encode(keys, descending=descending)
        codes.sort()
        out[...] = decode(codes, keys.dtype, descending=descending, copy=False)
        return out
    width = keys.dtype.itemsize
    udt = np.dtype(f"u{width}")
    tmp = np.empty(keys.shape[0], udt) if tmp is None else tmp.view(udt)
    consts, is_float = _constants(keys.dtype, descending)
    consts = tuple(consts)  # NumPy scalars: numba keeps their width
    _radix(keys.view(udt), out.view(udt), tmp, consts, is_float)
    return out


@_merge._jit
def _high_counts(codes, first, passes):  # pragma: no cover - compiled
    """:func:`_counts` of raw unsigned codes, for the bytes from ``first`` up."""
    radix = 1 << DIGIT_BITS
    counts = np.zeros((passes, radix), np.int64)
    for i in range(codes.shape[0]):
        c = codes[i]
        for p in range(passes):
            counts[p, (c >> ((first + p) * DIGIT_BITS)) & (radix - 1)] += 1
    return counts, _starts(counts, codes.shape[0])


@_merge._jit
def _high_move(src, dst, at, byte):  # pragma: no cover - compiled
    """One stable pass of raw codes from ``src`` to ``dst`` by their byte ``byte``."""
    mask = (1 << DIGIT_BITS) - 1
    for i in range(src.shape[0]):
        x = src[i]
        d = (x >> (byte * DIGIT_BITS)) & mask
        dst[at[d]] = x
        at[d] += 1


def sort_high(codes, low_bits):
    """Unsigned ``codes`` sorted, where codes that agree above their ``low_bits``
    lowest bits already lie in ascending order (a position or an index below a key's
    code, in input order): a stable sort of the bytes above those bits alone does it
    (two moves for a 2-byte key's code in a 64-bit code, not eight).  ``codes`` is
    overwritten; the result is ``codes`` or a new array.

    >>> c = np.array([3 << 8 | 0, 1 << 8 | 1, 3 << 8 | 2, 1 << 8 | 3], np.uint64)
    >>> (sort_high(c, 8) >> 8).tolist(), (sort_high(c, 8) & 255).tolist()
    ([1, 1, 3, 3], [1, 3, 0, 2])
    """
    if not _merge.ENABLED or codes.shape[0] < RADIX_FROM:
        codes.sort()
        return codes
    first = low_bits // DIGIT_BITS  # lower bits in the digits: still in order, see above
    counts, live = _high_counts(codes, first, codes.itemsize - first)
    src, spare = codes, None
    for p in np.flatnonzero(live):
        spare = np.empty_like(codes) if spare is None else spare
        _high_move(src, spare, counts[p], first + p)
        src, spare = spare, src
    return src
