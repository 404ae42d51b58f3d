"""``verify=True``: prove, on the workers, that a sort's output is sorted and a
permutation of its input, before the output can be read.

Every chunk of the input and of the output gets a small :class:`Summary`, computed
where the chunk lives (on the GPU for CuPy chunks; one implementation, the array
module chosen by the chunk's type): its length, the sum modulo 2**64 of a 64-bit
mixing hash (splitmix64) of every key's bit pattern, the same for every
(key, value) pair (for argsort the pair is (key, position)), the order codes of
its first and last elements and the number of neighbours out of order.  One
*check* task compares the sums (order-independent, so the input's and output's
chunkings need not agree) and the chunk boundaries and raises
:class:`VerificationError` on any difference.  Every output chunk depends on the
check, so a wrong result cannot be read.

The check works on the output arrays the user gets (after ``finish_keys`` /
``finish_values``), so it covers every step of the backend, and it needs nothing
from a backend: only NumPy or CuPy arrays.

Builders here take names and chunk counts and touch no data; their layer names
are tokenized like those of ``distsort.graph.layers``.

Examples
--------
>>> import numpy as np
>>> from distsort.backends import Order
>>> s = summarize(np.array([3, 1, 2]), order=Order())
>>> s.count, s.disorder
(3, 1)
>>> summarize(np.array([1, 2, 3])).keys == summarize(np.array([3, 1, 2])).keys
True
"""
from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import numpy as np

from distsort.backends import Order
# NumPy chunks this long are hashed compiled
from distsort.backends.cpu.numpy_backend import COMPILED_FROM
from distsort.core.order import TIME_KINDS, as_sortable
from distsort.core.xp import namespace as _namespace

__all__ = ["VerificationError", "Summary", "summarize", "check", "check_lanes",
           "chunk_summaries", "verified"]

#: Elements hashed per step: bounds the temporaries (a few uint64 arrays of this
#: length, 32 MiB each), whatever the chunk size, on the GPU as on the CPU.
BLOCK = 1 << 22
#: On the CPU, blocks small enough that the temporaries stay in the core's cache: several
#: times faster than blocks of ``BLOCK`` (``docs/performance.md``).
CPU_BLOCK = 1 << 16
_MOD = 1 << 64
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
#: Values are hashed with another salt than keys, so that a pair's hash is not
#: symmetric in key and value.
_VALUE_SALT = np.uint64(0x2545F4914F6CDD1D)


class VerificationError(RuntimeError):
    """A sort's output is not sorted, or not a permutation of its input.

    Raised when a result computed with ``verify=True`` is read: the output of a
    faulty run is never returned.
    """


@dataclass(frozen=True)
class Summary:
    """What the check needs to know of one chunk (a few integers, whatever its size).

    ``keys`` and ``pairs`` are sums modulo 2**64 of per-element hashes (``pairs``
    is 0 without values); ``first``/``last`` are the first and last elements, (key,)
    or (key, value) as NumPy arrays of one element (None when empty, or when no
    order was asked), and ``order`` the order they were checked in; ``disorder``
    counts the neighbours out of order and ``where`` is the first of them.
    """

    count: int
    keys: int
    pairs: int
    first: tuple | None = None
    last: tuple | None = None
    disorder: int = 0
    where: int = -1
    order: object = None


def _bits64(x):
    """The bit patterns of ``x``, zero-extended to uint64 (NaN payloads and -0.0 kept)."""
    width = np.uint8 if x.dtype == np.bool_ else np.dtype(f"u{x.dtype.itemsize}")
    return x.view(width).astype(np.uint64)


def mix64(z):
    """splitmix64's finalizer of uint64 ``z`` (a new array; wraps modulo 2**64).

    A bijection of 64-bit words that spreads every input bit over the output, so
    that a sum of hashes changes when one element changes, is lost or repeated.
    """
    z = z + _GOLDEN
    z ^= z >> np.uint64(30)
    z *= _MIX1
    z ^= z >> np.uint64(27)
    z *= _MIX2
    z ^= z >> np.uint64(31)
    return z


def key_hashes(keys):
    """The mixed bit pattern of every key (uint64): their sum is order-independent."""
    return mix64(_bits64(keys))


def pair_hashes(key_hash, values):
    """The hash of every (key, value) pair, from :func:`key_hashes` and the values."""
    vh = _bits64(values)
    vh ^= _VALUE_SALT
    return mix64(key_hash + mix64(vh))


def _sum64(xp, h):
    return int(xp.sum(h, dtype=np.uint64))


def _hash_sums_py(kbits, vbits, start, mode):
    """The sums of :func:`key_hashes` and :func:`pair_hashes` in one pass, element by
    element (compiled with numba: :func:`_hash_sums`); ``kbits`` and ``vbits`` are
    unsigned views of the keys and values; ``mode`` 0: keys only, 1: pairs with
    ``vbits``, 2: pairs with the positions ``start, start + 1, ...``.  mix64 is
    written out (the compiled code calls nothing)."""
    keys = np.uint64(0)
    pairs = np.uint64(0)
    for i in range(kbits.shape[0]):
        z = np.uint64(kbits[i]) + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        kh = z ^ (z >> np.uint64(31))
        keys += kh
        if mode != 0:
            v = np.uint64(vbits[i]) if mode == 1 else np.uint64(start + i)
            z = (v ^ _VALUE_SALT) + _GOLDEN
            z = (z ^ (z >> np.uint64(30))) * _MIX1
            z = (z ^ (z >> np.uint64(27))) * _MIX2
            z = kh + (z ^ (z >> np.uint64(31))) + _GOLDEN
            z = (z ^ (z >> np.uint64(30))) * _MIX1
            z = (z ^ (z >> np.uint64(27))) * _MIX2
            pairs += z ^ (z >> np.uint64(31))
    return keys, pairs


_HASH_SUMS = []


def _hash_sums():
    """:func:`_hash_sums_py` compiled with numba (``nogil``: threads hash chunks at
    once), or None where numba is not installed (or ``DISTSORT_NUMBA=0``)."""
    if not _HASH_SUMS:
        from distsort.backends.cpu import merge
        _HASH_SUMS.append(merge.numba.njit(cache=True, nogil=True)(_hash_sums_py)
                          if merge.ENABLED else None)
    return _HASH_SUMS[0]


def _disorder_py(keys, bits, descending, total, floating):  # noqa: PLR0913, PLR0917
    """``(count, first)``: the neighbours out of order in ``keys`` (alone, no values)
    and the first of them (-1 where none), in one pass (compiled with numba:
    :func:`_disorder`), in the order of :func:`_before`: NaNs last; ``total``:
    ``-0.0`` before ``+0.0`` (``descending``: after it); compared by value, never by
    the sort's codes.  ``bits``: the keys' unsigned view (their sign bits).  No branch
    on the data (the first is a minimum), so that numba vectorizes the loop: about 20x
    the NumPy blocks' speed."""
    n = keys.shape[0]
    count = 0
    first = n
    top = np.uint64(8 * bits.itemsize - 1)
    for i in range(1, n):
        a = keys[i - 1]
        b = keys[i]
        bad = (b > a) if descending else (b < a)  # False where either is NaN
        if floating:
            neg_a = (np.uint64(bits[i - 1]) >> top) != 0
            neg_b = (np.uint64(bits[i]) >> top) != 0
            zeros = (a == b) and total and ((neg_a and not neg_b) if descending
                                            else (neg_b and not neg_a))
            bad = (a != a and b == b) or bad or zeros  # noqa: PLR0124  (NaN, then a number)
        count += np.int64(bad)
        first = min(first, i - 1 if bad else n)
    return count, first if count else -1


_DISORDER = []


def _disorder():
    """:func:`_disorder_py` compiled (as :func:`_hash_sums`), or None."""
    if not _DISORDER:
        from distsort.backends.cpu import merge
        _DISORDER.append(merge.numba.njit(cache=True, nogil=True)(_disorder_py)
                         if merge.ENABLED else None)
    return _DISORDER[0]


def _compiled_disorder(keys, values, order):
    """``(count, first)`` of the keys' neighbours out of ``order`` by the compiled
    kernel, or None where it does not serve (values, CuPy, short chunks, float16, no
    numba)."""
    if (values is not None or not isinstance(keys, np.ndarray)
            or keys.shape[0] < COMPILED_FROM or keys.dtype == np.float16):
        return None
    kernel = _disorder()
    if kernel is None:
        return None
    keys = np.ascontiguousarray(keys)
    floating = keys.dtype.kind == "f"
    count, first = kernel(keys.view(np.uint8) if keys.dtype == np.bool_ else keys,
                          _unsigned(keys), bool(order.descending), not order.keyed, floating)
    return int(count), int(first)


def _unsigned(x):
    return x.view(np.uint8 if x.dtype == np.bool_ else np.dtype(f"u{x.dtype.itemsize}"))


def _compiled_sums(keys, values, start):
    """(keys, pairs) sums mod 2**64 by the compiled kernel, or None where it does not
    serve (CuPy, short chunks, no numba)."""
    if not isinstance(keys, np.ndarray) or keys.shape[0] < COMPILED_FROM:
        return None
    kernel = _hash_sums()
    if kernel is None:
        return None
    kbits = _unsigned(np.ascontiguousarray(keys))
    mode = 0 if values is None and start is None else 1 if values is not None else 2
    vbits = _unsigned(np.ascontiguousarray(values)) if values is not None else kbits[:0]
    k, p = kernel(kbits, vbits, 0 if start is None else start, mode)
    return int(k), int(p)


def native(x):
    """``x`` in native byte order, bit for bit (a copy only where it was not): hashes
    and comparisons then see the values, whatever byte order they came in."""
    return x if x.dtype.isnative else x.byteswap().view(x.dtype.newbyteorder("="))


def _exact(xp, x):
    """Float ``x`` as int64 sign and magnitude: the same order as the values, exactly
    (``-0.0`` and ``+0.0`` equal).  A GPU compares floats with subnormals flushed to
    zero (CuPy: ``1e-45 == 0.0`` for float32), which would take correctly sorted
    subnormals and zeros for equal keys out of order; NaNs are told apart separately.

    >>> _exact(np, np.array([-1e-45, -0.0, 0.0, 1e-45], dtype=np.float32)).tolist()
    [-1, 0, 0, 1]
    """
    u = x.view(f"u{x.dtype.itemsize}")
    magnitude = (u & u.dtype.type((1 << (8 * x.dtype.itemsize - 1)) - 1)).astype(np.int64)
    return xp.where(xp.signbit(x), -magnitude, magnitude)


def _before(xp, b, a, total, descending=False):  # noqa: PLR0913, PLR0917
    """Mask: ``b`` comes strictly before ``a`` in NumPy's order, by comparing the values
    (never the sort's order codes, so a wrong code cannot pass unseen): NaNs last, for
    both orders; with ``total`` also ``-0.0`` before ``+0.0`` (keys sorted alone;
    ``descending``: after it)."""
    if a.dtype.kind != "f":
        return b > a if descending else b < a
    na, nb = xp.isnan(a), xp.isnan(b)
    ea, eb = _exact(xp, a), _exact(xp, b)
    bad = (((eb > ea) if descending else (eb < ea)) & ~na & ~nb) | (na & ~nb)
    if total:
        low, high = (a, b) if descending else (b, a)
        bad |= (eb == ea) & ~na & ~nb & xp.signbit(low) & ~xp.signbit(high)
    return bad


def _same(xp, a, b):
    """Mask: ``a`` and ``b`` are equal keys (``-0.0 == +0.0``, NaNs equal to each other)."""
    if a.dtype.kind != "f":
        return a == b
    na, nb = xp.isnan(a), xp.isnan(b)
    return ((_exact(xp, a) == _exact(xp, b)) & ~na & ~nb) | (na & nb)


def _out_of_order(xp, keys, values, order):
    """Boolean mask ``bad[..., i]``: element ``i + 1`` comes before element ``i`` (last
    axis), in ``order``: keys alone in NumPy's total order (descending: its reverse, NaNs
    still last);
    with values (argsort's positions), equal keys in ascending order of value.

    >>> from distsort.backends import Order
    >>> _out_of_order(np, np.array([-0.0, 0.0, np.nan, 1.0]), None, Order()).tolist()
    [False, False, True]
    """
    a, b = keys[..., :-1], keys[..., 1:]
    total = not order.keyed
    bad = _before(xp, b, a, total, order.descending)
    if values is not None:
        bad |= _same(xp, a, b) & _before(xp, values[..., 1:], values[..., :-1], False)
    return bad


def _element(keys, values, i):
    """Element ``i``, (key,) or (key, value), each as its bytes and dtype: compared
    bit for bit between summaries (a NaN equals itself), and as values across chunk
    boundaries (:func:`_pair_out_of_order`)."""
    def one(x):
        part = x[i:i + 1] if i >= 0 else x[i:]
        part = part.get() if hasattr(part, "get") else np.asarray(part)  # CuPy: to the host
        return part.tobytes(), part.dtype.str
    return (one(keys),) if values is None else (one(keys), one(values))


def _pair_out_of_order(last, first, order):
    """``first`` (an element of the next chunk) comes before ``last`` (of this one)."""
    both = [np.frombuffer(a + b, dtype) for (a, dtype), (b, _) in zip(last, first,
                                                                      strict=True)]
    return bool(_out_of_order(np, both[0], both[1] if len(both) > 1 else None, order)[0])


# The running sums go in and come back: the loop over blocks keeps them, not this helper.
def _hash_block(xp, keys, values, start, lo, hi, total_keys, total_pairs):  # noqa: PLR0913, PLR0917
    """The sums with the hashes of elements ``lo:hi`` added (array by array)."""
    kh = key_hashes(keys[lo:hi])
    total_keys += _sum64(xp, kh)
    if values is not None or start is not None:
        v = (values[lo:hi] if values is not None
             else xp.arange(start + lo, start + hi, dtype=np.int64))
        total_pairs += _sum64(xp, pair_hashes(kh, v))
    return total_keys, total_pairs


def summarize(keys, values=None, *, start=None, order=None):
    """Summarize one 1-D chunk of keys (and values) of NumPy or CuPy.

    Parameters
    ----------
    keys : numpy.ndarray or cupy.ndarray
        The keys, in their own dtype.
    values : array like ``keys``, optional
        Values paired with the keys.
    start : int, optional
        Without ``values``: pair the keys with the positions ``start, start + 1, ...``
        (argsort's input).
    order : distsort.backends.Order, optional
        Also check that the chunk is sorted in this order (the output's summary).

    Returns
    -------
    Summary

    Examples
    --------
    >>> import numpy as np
    >>> a = summarize(np.array([2.0, np.nan]), start=10)
    >>> b = summarize(np.array([np.nan, 2.0]), np.array([11, 10]))
    >>> (a.count, a.keys, a.pairs) == (b.count, b.keys, b.pairs)
    True
    """
    xp = _namespace(keys)
    keys, values = native(keys), None if values is None else native(values)
    n = int(keys.shape[0])
    total_keys = total_pairs = disorder = 0
    where = -1
    first = last = None
    step = min(BLOCK, CPU_BLOCK) if xp is np else BLOCK
    compiled = _compiled_sums(keys, values, start)
    if compiled is not None:
        total_keys, total_pairs = compiled
    ordered = None if order is None else _compiled_disorder(keys, values, order)
    if ordered is not None:
        disorder, where = ordered
    for lo in range(0, n if compiled is None or (order is not None and ordered is None)
                    else 0, step):
        hi = min(n, lo + step)
        if compiled is None:
            total_keys, total_pairs = _hash_block(xp, keys, values, start, lo, hi,
                                                  total_keys, total_pairs)
        if order is not None and ordered is None:
            # One element of overlap, so that the pair across the block edge is compared.
            base = max(0, lo - 1)
            part_values = None if values is None else values[base:hi]
            bad = _out_of_order(xp, keys[base:hi], part_values, order)
            count = int(xp.count_nonzero(bad))
            if count and where < 0:
                where = base + int(xp.argmax(bad))
            disorder += count
    if order is not None and n:
        first, last = _element(keys, values, 0), _element(keys, values, -1)
    return Summary(n, total_keys % _MOD, total_pairs % _MOD, first, last, disorder, where,
                   order)


def check(inputs, outputs, chunks, what="sort"):
    """Compare the summaries of the input and the output; True or VerificationError.

    ``inputs`` and ``outputs`` are lists of :class:`Summary` (the outputs made
    with an ``order``), ``chunks`` the output's chunk lengths.

    Examples
    --------
    >>> import numpy as np
    >>> from distsort.backends import Order
    >>> x = [summarize(np.array([3, 1])), summarize(np.array([2]))]
    >>> out = [summarize(np.array([1, 2]), order=Order()), summarize(np.array([3]), order=Order())]
    >>> check(x, out, (2, 1))
    True
    >>> check(x, out[:1], (2,))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    distsort.graph.verify.VerificationError: ... the output has 2 elements, the input 3 (1 lost)
    """
    def fail(message):
        raise VerificationError(f"distsort.{what} verification failed: {message}")

    n_in, n_out = sum(s.count for s in inputs), sum(s.count for s in outputs)
    if n_in != n_out:
        change = f"{n_in - n_out} lost" if n_in > n_out else f"{n_out - n_in} duplicated"
        fail(f"the output has {n_out} elements, the input {n_in} ({change})")
    for i, (s, size) in enumerate(zip(outputs, chunks, strict=False)):
        if s.count != size:
            fail(f"output chunk {i} has {s.count} elements, {size} expected")
    for i, s in enumerate(outputs):
        if s.disorder:
            fail(f"output chunk {i} is not sorted: {s.disorder} neighbours out of order, "
                 f"the first at element {s.where} (the next one comes before it)")
    full = [(i, s) for i, s in enumerate(outputs) if s.count]
    for (i, a), (j, b) in itertools.pairwise(full):
        if _pair_out_of_order(a.last, b.first, b.order):
            fail(f"output chunks {i} and {j} are out of order: the first element of "
                 f"chunk {j} comes before the last of chunk {i}")
    if sum(s.keys for s in inputs) % _MOD != sum(s.keys for s in outputs) % _MOD:
        fail("the output's keys are not a permutation of the input's (their checksums "
             "differ): a key was lost, duplicated or changed")
    if sum(s.pairs for s in inputs) % _MOD != sum(s.pairs for s in outputs) % _MOD:
        pair = "(key, index)" if what == "argsort" else "(key, value)"
        fail(f"the output's {pair} pairs are not a permutation of the input's (their "
             "checksums differ): a value was lost, duplicated, changed or moved to "
             "another key")
    return True


def check_lanes(keys, sorted_keys, values, axis, order, what="sort"):
    """Check one N-D block sorted lane by lane along ``axis`` (``verify=True`` there).

    ``keys`` is the input block, ``sorted_keys`` and ``values`` (the positions along
    the axis for argsort, else None) what the backend made of it.  Every lane must
    be sorted and hold the input lane's keys (and, for argsort, the pairs
    (key, position)).  Returns True or raises :class:`VerificationError`.

    Examples
    --------
    >>> import numpy as np
    >>> from distsort.backends import Order
    >>> x = np.array([[3, 1, 2], [0, 5, 4]])
    >>> check_lanes(x, np.sort(x, axis=1), None, 1, Order())
    True
    """
    xp = _namespace(keys)
    keys, sorted_keys = native(keys), native(sorted_keys)
    k_in, k_out = xp.moveaxis(keys, axis, -1), xp.moveaxis(sorted_keys, axis, -1)
    if k_in.shape != k_out.shape:
        raise VerificationError(f"distsort.{what} verification failed: the output block "
                                f"has shape {sorted_keys.shape}, the input {keys.shape}")
    h_in, h_out = key_hashes(k_in), key_hashes(k_out)
    ok = bool(xp.all(xp.sum(h_in, axis=-1, dtype=np.uint64)
                     == xp.sum(h_out, axis=-1, dtype=np.uint64)))
    v_out = None
    if values is not None:
        v_out = xp.moveaxis(values, axis, -1)
        v_in = xp.broadcast_to(xp.arange(k_in.shape[-1], dtype=values.dtype), k_in.shape)
        ok &= bool(xp.all(xp.sum(pair_hashes(h_in, v_in), axis=-1, dtype=np.uint64)
                          == xp.sum(pair_hashes(h_out, v_out), axis=-1, dtype=np.uint64)))
    if not ok:
        raise VerificationError(f"distsort.{what} verification failed: a lane of the output "
                                "is not a permutation of the input lane")
    if bool(xp.any(_out_of_order(xp, k_out, v_out, order))):
        raise VerificationError(f"distsort.{what} verification failed: a lane of the output "
                                "is not sorted")
    return True


def release(chunk, passed):
    """An output chunk, once the check has ``passed`` (the task's only other input)."""
    return chunk


def _summary(keys, values, start, order):
    hashed = summarize(as_sortable(keys), as_sortable(values), start=start, order=order)
    if order is None or not order.descending or keys.dtype.kind not in TIME_KINDS:
        return hashed
    # Times descending, NaT last: the order is that of their descending codes, ascending;
    # the checksums stay those of the input's codes.
    ordered = summarize(as_sortable(keys, True), as_sortable(values), start=start,
                        order=Order(descending=False, keyed=order.keyed))
    return dataclasses.replace(hashed, first=ordered.first, last=ordered.last,
                               disorder=ordered.disorder, where=ordered.where,
                               order=ordered.order)


def summary_tasks(name, keys, values, chunks, positions=False, order=None):
    """``{(name, i): summary of chunk i}`` of the arrays named ``keys`` and ``values``
    (or None), whose 1-D chunk lengths are ``chunks``.

    With ``positions`` the keys are paired with their positions (argsort's input);
    with an ``order`` each chunk's order is checked too (an output's summary).

    >>> summary_tasks("s", "x", None, (2, 3), positions=True)[("s", 1)][3]
    2
    """
    starts = np.concatenate([[0], np.cumsum(chunks, dtype=np.int64)[:-1]]).tolist()
    return {(name, i): (_summary, (keys, i), None if values is None else (values, i),
                        starts[i] if positions else None, order)
            for i in range(len(chunks))}


def chunk_summaries(keys, values=None, *, positions=False, descending=None, keyed=False):
    """A delayed :class:`Summary` of every chunk of 1-D Dask arrays (nothing computed).

    Computed with the tasks that make the chunks (in one ``compute``), each summary
    runs where its chunk already is: no chunk is read or moved again for it.  With
    ``descending`` (True or False, not None) each chunk's order is checked too (an
    output's summary), equal keys ordered by value where ``keyed``.  datetime64 and
    timedelta64 chunks are summarized as their order codes.

    Examples
    --------
    >>> import dask, dask.array as da, numpy as np
    >>> x = da.from_array(np.array([3, 1, 2, 5]), chunks=2)
    >>> s = dask.compute(*chunk_summaries(x, descending=False))
    >>> [(c.count, c.disorder) for c in s]
    [(2, 1), (2, 0)]
    """
    order = None if descending is None else Order(descending=bool(descending), keyed=keyed)
    from dask.base import tokenize
    from dask.delayed import Delayed

    from distsort.graph.layers import graph_over
    name = "distsort-verify-summary-" + tokenize(
        keys.name, None if values is None else values.name, positions, order)
    sources = [keys] + ([] if values is None else [values])
    tasks = summary_tasks(name, keys.name, None if values is None else values.name,
                          keys.chunks[0], positions, order)
    graph = graph_over(sources, {name: tasks}, {name: {a.name for a in sources}})
    return [Delayed(k, graph, layer=name) for k in tasks]


def verify_layers(token, inputs, outputs, chunks, order, positions, what="sort"):
    """The tasks that check a 1-D sort, and the output layers gated by the check.

    Parameters
    ----------
    token : str
        Makes the layer names unique (``distsort-verify-<stage>-<token>``).
    inputs : (str, str or None)
        Names of the input keys and values arrays.
    outputs : (str, str or None)
        Names of the sorted keys and values arrays (chunks ``chunks``).
    chunks : (tuple of int, tuple of int)
        The chunk lengths of the inputs and of the outputs: a sort that reads its
        input as it is chunked (the "one-device" strategy) writes other chunks, and
        argsort's positions start where each input chunk starts.
    order : distsort.backends.Order
    positions : bool
        The values are the positions ``0 .. n-1`` (argsort); ``inputs[1]`` is None.

    Returns
    -------
    layers : dict
        ``{name: {key: task}}`` for the summaries, the check and the gated outputs.
    dependencies : dict
        ``{name: set of names}``.
    gated : (str, str or None)
        Names of the gated keys and values outputs (``verified-<output name>``).
    """
    summary_in = f"distsort-verify-input-{token}"
    summary_out = f"distsort-verify-output-{token}"
    check_name = f"distsort-verify-check-{token}"
    in_chunks, chunks = chunks
    layers = {
        summary_in: summary_tasks(summary_in, *inputs, in_chunks, positions),
        summary_out: summary_tasks(summary_out, *outputs, chunks, order=order),
        check_name: {(check_name, 0): (
            check, [(summary_in, i) for i in range(len(in_chunks))],
            [(summary_out, i) for i in range(len(chunks))], tuple(chunks), what)},
    }
    deps = {summary_in: {n for n in inputs if n is not None},
            summary_out: {n for n in outputs if n is not None},
            check_name: {summary_in, summary_out}}
    gated = []
    for source in outputs:
        if source is None:
            gated.append(None)
            continue
        name = f"verified-{source}"  # unique: the source's name is tokenized
        layers[name] = {(name, i): (release, (source, i), (check_name, 0))
                        for i in range(len(chunks))}
        deps[name] = {source, check_name}
        gated.append(name)
    return layers, deps, tuple(gated)


def verified(keys, values, out_keys, out_values, order, positions, what="sort"):
    """The outputs of a 1-D sort, gated by a check of their summaries against the input's.

    ``keys`` and ``values`` (or None) are the Dask arrays that were sorted (chunked
    alike), ``out_keys`` and ``out_values`` (or None) the outputs.  Returns the gated
    ``(out_keys, out_values)``: the same data, readable only once the check passed.
    """
    import dask.array as da
    from dask.base import tokenize

    from distsort.graph.layers import graph_over
    token = tokenize(out_keys.name, None if out_values is None else out_values.name)
    outputs = [a for a in (out_keys, out_values) if a is not None]
    new, deps, gated = verify_layers(
        token, (keys.name, None if values is None else values.name),
        tuple(None if a is None else a.name for a in (out_keys, out_values)),
        (keys.chunks[0], out_keys.chunks[0]), order, positions, what)
    inputs = [a for a in (keys, values) if a is not None]  # the outputs may read them inline
    graph = graph_over(inputs + outputs, new, deps)
    return tuple(None if name is None else
                 da.Array(graph, name, a.chunks, meta=a._meta)
                 for name, a in zip(gated, (out_keys, out_values), strict=False))
