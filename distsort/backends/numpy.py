"""NumPy backend: the CPU implementation, and the reference for every other backend.

Chunks are kept as order codes (``distsort.order``): a keys-only chunk is one
array of ``total`` codes; a keyed chunk is ``(codes, keys, values)`` with
``canonical`` codes, ordered by code and then by the value's code.  Merges use
NumPy's stable sort, which merges two sorted runs in linear time.
"""
from __future__ import annotations

import numpy as np

from ..order import decode, encode


def _value_codes(values):
    return encode(values, canonical=True)


def _positions(start, shape, axis=-1):
    lane = np.arange(start, start + shape[axis], dtype=np.int64)
    index = [None] * len(shape)
    index[axis] = slice(None)
    return np.broadcast_to(lane[tuple(index)], shape).copy()


def prepare(keys, values, order, start=None):
    """Copy and sort one chunk; ``start`` asks for positions as the values."""
    keys = np.asarray(keys)
    if not order.keyed:
        codes = encode(keys, descending=order.descending)
        codes.sort()
        return codes
    values = _positions(start, keys.shape) if start is not None else np.asarray(values)
    codes = encode(keys, canonical=True, descending=order.descending)
    perm = np.lexsort((_value_codes(values), codes))
    return codes[perm], keys[perm], values[perm]


def length(chunk):
    return len(chunk[0]) if isinstance(chunk, tuple) else len(chunk)


def probe(chunk, stride, top, order=None):
    """Codes of every ``stride``-th element from the top or bottom of a chunk."""
    n = length(chunk)
    index = np.arange(n - 1, -1, -stride) if top else np.arange(0, n, stride)
    if isinstance(chunk, tuple):
        return chunk[0][index], _value_codes(chunk[2][index])
    return chunk[index]


def _greater(a, b):
    """Elementwise ``a > b`` for probes (codes, or (codes, value codes) pairs)."""
    if isinstance(a, tuple):
        return (a[0] > b[0]) | ((a[0] == b[0]) & (a[1] > b[1]))
    return a > b


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


def head(chunk, k):
    """The first ``k`` elements: a view (nothing writes to chunks; pickling copies only the view)."""
    if isinstance(chunk, tuple):
        return tuple(x[:k] for x in chunk)
    return chunk[:k]


def tail(chunk, k):
    """The last ``k`` elements, as a view."""
    n = length(chunk)
    if isinstance(chunk, tuple):
        return tuple(x[n - k:] for x in chunk)
    return chunk[n - k:]


def _element(chunk, i):
    if isinstance(chunk, tuple):
        return chunk[0][i], _value_codes(chunk[2][i:i + 1])[0]
    return chunk[i]


def crossing_count(a_top, b_bottom):
    """``#{i : a_top[-1-i] > b_bottom[i]}``, by binary search (the predicate is monotone)."""
    lo, hi = 0, min(length(a_top), length(b_bottom))
    n = length(a_top)
    while lo < hi:
        mid = (lo + hi) // 2
        if _element(a_top, n - 1 - mid) > _element(b_bottom, mid):
            lo = mid + 1
        else:
            hi = mid
    return lo


def _concat_sorted(x, y):
    if isinstance(x, tuple):
        codes, keys, values = (np.concatenate(pair) for pair in zip(x, y))
        perm = np.lexsort((_value_codes(values), codes))
        return codes[perm], keys[perm], values[perm]
    out = np.concatenate((x, y))
    out.sort(kind="stable")  # timsort: two sorted runs merge in linear time
    return out


def _slice(chunk, start, stop):
    if isinstance(chunk, tuple):
        return tuple(x[start:stop] for x in chunk)
    return chunk[start:stop]


def merge_low(a, b_head, order=None):
    """The ``len(a)`` smallest of ``a`` and the higher chunk whose head is ``b_head``."""
    k = crossing_count(a, b_head)
    if k == 0:
        return a
    n = length(a)
    return _concat_sorted(_slice(a, 0, n - k), _slice(b_head, 0, k))


def merge_high(b, a_tail, order=None):
    """The ``len(b)`` largest of ``b`` and the lower chunk whose tail is ``a_tail``."""
    k = crossing_count(a_tail, b)
    if k == 0:
        return b
    n = length(a_tail)
    return _concat_sorted(_slice(a_tail, n - k, n), _slice(b, k, length(b)))


def finish_keys(chunk, order, dtype):
    if isinstance(chunk, tuple):
        return chunk[1]
    return decode(chunk, dtype, descending=order.descending)


def finish_values(chunk):
    return chunk[2]


def sort_blocks(keys, values, axis, order, positions=False):
    """Sort every lane of an N-D block along ``axis``; returns ``(keys, values)``."""
    keys = np.asarray(keys)
    if not order.keyed:
        codes = np.sort(encode(keys, descending=order.descending), axis=axis)
        return decode(codes, keys.dtype, descending=order.descending), None
    values = _positions(0, keys.shape, axis) if positions else np.asarray(values)
    codes = encode(keys, canonical=True, descending=order.descending)
    perm = np.lexsort((_value_codes(values), codes), axis=axis)
    return (np.take_along_axis(keys, perm, axis=axis),
            np.take_along_axis(values, perm, axis=axis))
