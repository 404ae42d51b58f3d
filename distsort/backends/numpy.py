"""NumPy backend: the CPU implementation, and the reference for every other backend.

A keys-only chunk is one array of ``total`` order codes (``distsort.order``) with
the sign bit flipped and viewed as signed integers (NumPy's SIMD sorts are faster
for signed than for unsigned 64-bit integers; the order is the same), decoded at
the end.  A keyed chunk is a ``(keys, values)`` tuple, ordered by
:func:`order_codes`; where a key and a value fit 64 bits together (4-byte keys with
4-byte values, ...) it is sorted as one packed code per element and decoded, as the
GPU kernels do (:func:`keyed_sort`), and merged by the packed codes.

Merges (``merge_low``/``merge_high``) run in one linear pass compiled with numba
(``distsort.backends.merge``, the optional ``fast`` extra) where numba is installed.
Without it they sort the concatenation of the two runs again, with the same result
bit for bit.  Measured for 2^23 keys out on a 2-core VM (``benchmarks/merge.py``):
keys alone 24 ms with numba (3 ns per key) and 81-86 ms with timsort (which finds
the two runs); with int64 values 100 ms (int64 keys) and 175 ms (float64 keys)
with numba, the order codes included, and 4.4 s and 8.4 s with ``np.lexsort`` over
the order codes.
"""
from __future__ import annotations

import numpy as np

from ..order import decode, encode
from . import codes as _codes, merge as _merge


# Widths of a packed (key, value) code.
_CODE32_BYTES, _CODE64_BYTES = 4, 8
_BOTH = 2  # keys and values both have special values


def order_codes(keys, values, descending):
    """The code arrays of the keyed order, most significant first.

    The key's canonical code (NumPy's notion of equal keys), then the value's;
    where both tie (``-0.0``/``+0.0``, NaN payloads) the key's and the value's
    ``total`` codes, so that the order is one total order on bit patterns and the
    result does not depend on the chunking.  The CUDA kernels compare the same way.
    """
    codes = [encode(keys, canonical=True, descending=descending), encode(values, canonical=True)]
    if "f" in (keys.dtype.kind, values.dtype.kind):
        # For integers and bools both maps are one: their canonical codes serve again.
        codes += [encode(keys, descending=descending) if keys.dtype.kind == "f" else codes[0],
                  encode(values) if values.dtype.kind == "f" else codes[1]]
    return tuple(codes)


def _signed(codes):
    """Unsigned codes as order-preserving signed integers (in place: ``codes`` is ours)."""
    codes ^= codes.dtype.type(1 << (8 * codes.itemsize - 1))
    return codes.view(f"i{codes.itemsize}")


def _unsigned(scodes):
    """The unsigned codes of a keys-only chunk (a new array)."""
    return scodes.view(f"u{scodes.itemsize}") ^ np.dtype(f"u{scodes.itemsize}").type(
        1 << (8 * scodes.itemsize - 1))


def _keyed_perm(keys, values, descending, axis=-1):
    return np.lexsort(order_codes(keys, values, descending)[::-1], axis=axis)


def packable(keys, values):
    """Whether a key's code and a value's code fit one 64-bit code together."""
    return keys.dtype.itemsize + values.dtype.itemsize <= _CODE64_BYTES


def packed_codes(keys, values, descending, canonical=True):
    """One unsigned code per element, the key's code above the value's (``packable``
    pairs): ordered as the pair of codes.  With ``canonical`` the codes of the keyed
    order's first two arrays (:func:`order_codes`), else of its last two."""
    width = np.dtype(np.uint32 if keys.dtype.itemsize + values.dtype.itemsize <= _CODE32_BYTES
                     else np.uint64)
    code = encode(keys, canonical=canonical, descending=descending).astype(width)
    code <<= width.type(8 * values.dtype.itemsize)
    code |= encode(values, canonical=canonical)
    return code


def _unpack(codes, keys_dtype, values_dtype, descending):
    """Keys and values from their sorted ``packed_codes`` of elements whose canonical
    codes are their total codes (none is ``special``)."""
    vbits = 8 * values_dtype.itemsize
    kcodes = (codes >> codes.dtype.type(vbits)).astype(f"u{keys_dtype.itemsize}")
    vcodes = (codes & codes.dtype.type((1 << vbits) - 1)).astype(f"u{values_dtype.itemsize}")
    return (decode(kcodes, keys_dtype, descending=descending, copy=False),
            decode(vcodes, values_dtype, copy=False))


def _special(x):
    """Where a float's canonical code is not its total code (``-0.0``, NaNs other than
    the canonical one), None for other dtypes: there the keyed order looks further."""
    if x.dtype.kind != "f":
        return None
    udt = f"u{x.dtype.itemsize}"
    u = x.view(udt)
    canonical_nan = encode(np.array([np.nan], dtype=x.dtype), canonical=True)
    canonical_nan = decode(canonical_nan, x.dtype).view(udt)[0]
    bits = 8 * x.dtype.itemsize
    special = u == np.dtype(udt).type(1 << (bits - 1))  # -0.0
    special |= np.isnan(x) & (u != canonical_nan)
    return special


def _runs_perm(keys, values, descending):
    """The keyed order's permutation, for pairs too wide to pack.

    The keys' canonical codes (their top bits, where a code and an index do not fit
    64 bits together) are packed above each element's index and sorted
    (``numpy.sort``, several times faster than ``numpy.argsort``); then only the runs
    of equal packed keys are sorted by the whole of :func:`order_codes` (no run when
    keys differ in their top bits, as random keys almost all do).
    """
    ck = encode(keys, canonical=True, descending=descending)
    n = len(ck)
    index_bits = max(1, (n - 1).bit_length())
    drop = max(0, 8 * ck.itemsize + index_bits - 64)  # low key bits that do not fit
    packed = ck.astype(np.uint64)
    if drop:
        packed >>= np.uint64(drop)
    packed <<= np.uint64(index_bits)
    packed |= np.arange(n, dtype=np.uint64)
    packed.sort()
    perm = (packed & np.uint64((1 << index_bits) - 1)).astype(np.intp)
    packed >>= np.uint64(index_bits)
    tie = packed[1:] == packed[:-1]
    if not tie.any():
        return perm
    in_run = np.zeros(n, dtype=bool)
    in_run[1:] |= tie
    in_run[:-1] |= tie
    pos = np.flatnonzero(in_run)
    run = np.cumsum(np.concatenate(([True], ~tie)))[pos]  # runs are contiguous in pos
    sel = perm[pos]
    codes = order_codes(keys[sel], values[sel], descending)
    rest = codes if drop else codes[1:]  # without dropped bits, run keys are equal
    perm[pos] = sel[np.lexsort((*rest[::-1], run))]
    return perm


def keyed_sort(keys, values, descending):
    """``(keys, values)`` sorted by the keyed order (:func:`order_codes`), new arrays.

    Pairs that fit 64 bits sort one packed code per element (``numpy.sort``) and are
    decoded from it, with no permutation; elements whose canonical codes are not their
    total codes (``-0.0``, NaN payloads) sort apart by the full order and are merged
    in.  Wider pairs sort by the keys' codes and then only the runs of equal keys.

    >>> k = np.array([2.0, -0.0, 1.0, 0.0, -0.0], dtype=np.float32)
    >>> v = np.array([5, 7, 3, 6, 6], dtype=np.int32)
    >>> sk, sv = keyed_sort(k, v, False)  # equal keys by value, then -0.0 first
    >>> sk, sv
    (array([-0.,  0., -0.,  1.,  2.], dtype=float32), array([6, 6, 7, 3, 5], dtype=int32))
    """
    if not packable(keys, values):
        perm = _runs_perm(keys, values, descending)
        return keys[perm], values[perm]
    special = [s for s in (_special(keys), _special(values)) if s is not None]
    special = special[0] | special[1] if len(special) == _BOTH else (special or [None])[0]
    if special is None or not special.any():  # canonical codes are total codes
        codes = packed_codes(keys, values, descending, canonical=False)
        codes.sort()
        return _unpack(codes, keys.dtype, values.dtype, descending)
    if not _merge.ENABLED:  # no merge of the two parts: the full order at once
        perm = _keyed_perm(keys, values, descending)
        return keys[perm], values[perm]
    normal = ~special
    codes = packed_codes(keys[normal], values[normal], descending)
    codes.sort()
    first = _unpack(codes, keys.dtype, values.dtype, descending)
    sk, sv = keys[special], values[special]
    perm = _keyed_perm(sk, sv, descending)
    return _merge_keyed(first, (sk[perm], sv[perm]), descending)


def _positions(start, shape, axis=-1):
    lane = np.arange(start, start + shape[axis], dtype=np.int64)
    index = [None] * len(shape)
    index[axis] = slice(None)
    return np.broadcast_to(lane[tuple(index)], shape).copy()


def prepare(keys, values, order, start=None):
    """Copy and sort one chunk; ``start`` asks for positions as the values."""
    keys = np.asarray(keys)
    if not order.keyed:
        codes = _codes.signed_codes(keys, order.descending)  # one compiled pass, or None
        if codes is None:
            codes = _signed(encode(keys, descending=order.descending))
        codes.sort()
        return codes
    values = _positions(start, keys.shape) if start is not None else np.asarray(values)
    return keyed_sort(keys, values, order.descending)


def length(chunk):
    return len(chunk[0]) if isinstance(chunk, tuple) else len(chunk)


def probe_codes(keys, values, order):
    """Probe form of sampled elements: codes, or the tuple of :func:`order_codes`."""
    if values is None:
        return encode(keys, descending=order.descending)
    return order_codes(keys, values, order.descending)


def probe(chunk, stride, top, order):
    """Codes of every ``stride``-th element from the top or bottom of a chunk."""
    index = np.arange(length(chunk) - 1, -1, -stride) if top else np.arange(0, length(chunk),
                                                                             stride)
    if isinstance(chunk, tuple):
        return probe_codes(chunk[0][index], chunk[1][index], order)
    return chunk[index]  # keys-only chunks hold (signed) codes already


def _greater(a, b):
    """Elementwise ``a > b`` for probes: code arrays, or tuples compared lexicographically."""
    if not isinstance(a, tuple):
        return a > b
    greater = np.zeros(len(a[0]), dtype=bool)
    equal = np.ones(len(a[0]), dtype=bool)
    for x, y in zip(a, b, strict=False):
        greater |= equal & (x > y)
        equal &= x == y
    return greater


def crossing_bound(top_probe, bottom_probe, stride, limit, order=None):
    """Upper bound on the crossing count, from the probes of two chunks.

    Sample ``j`` compares ``A[mA-1-j*stride]`` with ``B[j*stride]``; the predicate
    ``A[mA-1-i] > B[i]`` holds for ``i < k`` and fails after, so the first
    sample where it fails bounds ``k``.
    """
    count = min(length(top_probe), length(bottom_probe), -(-limit // stride))
    pick = (lambda p: tuple(x[:count] for x in p)) if isinstance(top_probe, tuple) else (
        lambda p: p[:count])
    fails = np.flatnonzero(~_greater(pick(top_probe), pick(bottom_probe)))
    return int(min(limit, fails[0] * stride)) if len(fails) else int(limit)


def _slice(chunk, start, stop):
    if isinstance(chunk, tuple):
        return tuple(x[start:stop] for x in chunk)
    return chunk[start:stop]


def head(chunk, k):
    """The first ``k`` elements: a view (nothing writes to chunks; pickling copies only
    the view)."""
    return _slice(chunk, 0, k)


def tail(chunk, k):
    """The last ``k`` elements, as a view."""
    return _slice(chunk, length(chunk) - k, length(chunk))


def _element(chunk, i, order):
    if isinstance(chunk, tuple):
        return tuple(c[0] for c in order_codes(chunk[0][i:i + 1], chunk[1][i:i + 1],
                                                order.descending))
    return chunk[i]


def first_not(count, before):
    """The first ``i < count`` where the monotone predicate ``before(i)`` fails (binary
    search), or ``count``: a crossing count, or a merge path's co-rank.

    >>> first_not(10, lambda i: i < 4)
    4
    """
    lo, hi = 0, count
    while lo < hi:
        mid = (lo + hi) // 2
        if before(mid):
            lo = mid + 1
        else:
            hi = mid
    return lo


def crossing_count(a_top, b_bottom, order):
    """``#{i : a_top[-1-i] > b_bottom[i]}``, by binary search (the predicate is monotone)."""
    n = length(a_top)
    return first_not(min(n, length(b_bottom)), lambda i: _element(a_top, n - 1 - i, order)
                     > _element(b_bottom, i, order))


def _any_special(*arrays):
    return any(s is not None and s.any() for s in map(_special, arrays))


def merge_codes_of(keys, values, descending, special=True):
    """The code arrays a keyed merge compares, in the keyed order of
    :func:`order_codes`: for ``packable`` pairs one packed code, two where the runs
    hold ``special`` floats (whose canonical codes tie several bit patterns: the packed
    canonical codes, then the total ones); for others the key's and the value's code,
    or all four order codes where ``special``.  Without special elements the
    canonical codes are the total ones, which cost less."""
    if not special:
        if packable(keys, values):
            return (packed_codes(keys, values, descending, canonical=False),)
        return encode(keys, descending=descending), encode(values)
    if not packable(keys, values):
        return order_codes(keys, values, descending)
    return (packed_codes(keys, values, descending),
            packed_codes(keys, values, descending, canonical=False))


def _merge_keyed(x, y, descending):
    """The sorted union of two keyed runs (the keyed order is total: no ties to break)."""
    if _merge.ENABLED:  # one linear pass (numba); the same result as the code below
        special = _any_special(*x, *y)
        return _merge.merge_keyed(x, y, merge_codes_of(*x, descending, special),
                                  merge_codes_of(*y, descending, special))
    keys, values = (np.concatenate(pair) for pair in zip(x, y, strict=False))
    return keyed_sort(keys, values, descending)


def _concat_sorted(x, y, order):
    """The sorted union of two sorted runs, ``x`` from the lower chunk (first on ties)."""
    if isinstance(x, tuple):
        return _merge_keyed(x, y, order.descending)
    if _merge.ENABLED:  # one linear pass (numba); the same result as the code below
        return _merge.merge_codes(x, y)
    out = np.concatenate((x, y))
    out.sort(kind="stable")  # timsort: two sorted runs merge in linear time
    return out


def merge_low(a, b_head, order):
    """The ``len(a)`` smallest of ``a`` and the higher chunk whose head is ``b_head``."""
    k = crossing_count(a, b_head, order)
    if k == 0:
        return a
    n = length(a)
    if k == n:  # every element crosses: the head is the new chunk, no merge
        return _slice(b_head, 0, k)
    return _concat_sorted(_slice(a, 0, n - k), _slice(b_head, 0, k), order)


def merge_high(b, a_tail, order):
    """The ``len(b)`` largest of ``b`` and the lower chunk whose tail is ``a_tail``."""
    k = crossing_count(a_tail, b, order)
    if k == 0:
        return b
    n = length(a_tail)
    if k == length(b):
        return _slice(a_tail, n - k, n)
    return _concat_sorted(_slice(a_tail, n - k, n), _slice(b, k, length(b)), order)


def finish_keys(chunk, order, dtype):
    if isinstance(chunk, tuple):
        return chunk[0]
    keys = _codes.keys_from_signed(chunk, dtype, order.descending)  # one compiled pass
    if keys is not None:
        return keys
    return decode(_unsigned(chunk), dtype, descending=order.descending, copy=False)


def finish_values(chunk):
    return chunk[1]


def sort_blocks(keys, values, axis, order, positions=False):
    """Sort every lane of an N-D block along ``axis``; returns ``(keys, values)``."""
    keys = np.asarray(keys)
    if not order.keyed:
        codes = np.sort(encode(keys, descending=order.descending), axis=axis)
        return decode(codes, keys.dtype, descending=order.descending), None
    values = _positions(0, keys.shape, axis) if positions else np.asarray(values)
    perm = _keyed_perm(keys, values, order.descending, axis=axis)
    return (np.take_along_axis(keys, perm, axis=axis),
            np.take_along_axis(values, perm, axis=axis))
