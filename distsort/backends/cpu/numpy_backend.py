"""NumPy backend: the CPU implementation, and the reference for every other backend.

A keys-only chunk is one array of ``total`` order codes (``distsort.core.order``) with
the sign bit flipped and viewed as signed integers (NumPy's SIMD sorts are faster
for signed than for unsigned 64-bit integers; the order is the same), decoded at
the end.  A keyed chunk is ordered by :func:`order_codes`.  Where a key and a value
fit 64 bits together (4-byte keys with 4-byte values, ...) it is one array of
:func:`keyed_codes`, a bijection of the pair's bits that is ordered as the keyed
order, held like a keys-only chunk (signed) through the network and split into keys
and values at the end: the merges compare and move one integer per element, with
no code made or undone per round.  Wider pairs are ``(keys, values)`` tuples.

Merges (``merge_low``/``merge_high``) run in one linear pass compiled with numba
(``distsort.backends.cpu.merge``, the optional ``fast`` extra) where numba is installed.
Without it they sort the concatenation of the two runs again, with the same result
bit for bit, about 3.5 times slower for keys alone and 45-50 times for keyed chunks
(``benchmarks/merge.py``; the figures: ``docs/performance.md``).
"""
from __future__ import annotations

import functools
import importlib
import sys

import numpy as np

from distsort.backends import Backend
from distsort.backends.chunk import length, split_high, split_low
from distsort.core.order import decode, encode

#: Chunks shorter than this keep the NumPy code where a compiled pass exists
#: (``distsort.backends.cpu.codes``, the gather in :func:`keyed_sort`, ``distsort.graph.verify``):
#: loading the compiled code costs time and, in each worker process, memory (LLVM)
#: that small chunks do not repay; a worker with a tight memory limit (a small
#: out-of-core sort, 8 MiB chunks in 300 MB workers) sorts small chunks, and the
#: memory it took there paused the workers for good.  Defined here, not in
#: ``distsort.backends.cpu.merge``, which imports numba.
COMPILED_FROM = 1 << 22


def sort_high(codes, low_bits):
    """``codes`` sorted where codes that agree above their ``low_bits`` bits lie in
    ascending order: by ``distsort.backends.cpu.radix.sort_high`` (the bytes above those
    bits alone) where compiled code is loaded already (the merges of a network ran in
    this process) or the chunk repays loading it (:data:`COMPILED_FROM`), else by
    NumPy's sort, with the same result."""
    if len(codes) >= COMPILED_FROM or f"{__package__}.merge" in sys.modules:
        return _compiled("radix").sort_high(codes, low_bits)
    codes.sort()
    return codes


def _compiled(name):
    """``distsort.backends.cpu.codes`` or ``merge``, imported where first used: they import
    numba (half a second or more), which a sort of small chunks as one never needs."""
    return importlib.import_module(f"{__package__}.{name}")


# Widths of a packed (key, value) code.
_CODE32_BYTES, _CODE64_BYTES = 4, 8
#: Keys of up to this many bytes: NumPy's stable argsort of their codes is a radix sort.
_RADIX_BYTES = 2


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


def keyed_perm(keys, values, descending, axis=-1):
    return np.lexsort(order_codes(keys, values, descending)[::-1], axis=axis)


def packable(keys, values):
    """Whether a key's code and a value's code fit one 64-bit code together."""
    return keys.dtype.itemsize + values.dtype.itemsize <= _CODE64_BYTES


def _code_width(keys_dtype, values_dtype):
    """The unsigned dtype of the keyed codes of a ``packable`` pair of dtypes."""
    both = keys_dtype.itemsize + values_dtype.itemsize
    return np.dtype(np.uint32 if both <= _CODE32_BYTES else np.uint64)


@functools.cache
def _classes(dtype, descending=False):
    """The runs of ``total`` codes that the ``canonical`` map makes one code (the keys
    NumPy calls equal), as ``(start, size)``: ``-0.0, +0.0`` and every NaN for floats,
    none for other dtypes (whose runs are all of one code)."""
    if dtype.kind != "f":
        return ()
    top = 1 << (8 * dtype.itemsize)
    # The zeros' codes are consecutive (-0.0 first; descending: +0.0 first).
    first_zero = np.array([0.0 if descending else -0.0], dtype=dtype)
    zero = int(encode(first_zero, descending=descending)[0])
    # NaNs: every code above +inf's (ascending), or -inf's (descending): the top codes.
    nan = int(encode(np.array([-np.inf if descending else np.inf], dtype=dtype),
                     descending=descending)[0]) + 1
    return (zero, 2), (nan, top - nan)


def _in_class(codes, start, size):
    """Where ``codes`` lie in the run ``[start, start + size)`` (one compare: the
    subtraction wraps below ``start``)."""
    return (codes - codes.dtype.type(start)) < codes.dtype.type(size)


def _value_runs(vcodes, classes):
    """For each value code, the ``(start, size)`` of its run of ``classes`` (``(code, 1)``
    outside them)."""
    start, size = vcodes.copy(), np.ones_like(vcodes)
    for first, count in classes:
        hit = _in_class(vcodes, first, count)
        start[hit], size[hit] = first, count
    return start, size


def keyed_codes(keys, values, descending):
    """One unsigned code per element of a ``packable`` pair, ordered as the keyed order
    (:func:`order_codes`) and a bijection of the pair's bits (:func:`split_keyed_codes`
    inverts it), so a keyed chunk is sorted, merged and split like keys alone.

    The key's ``total`` code above the value's, except for keys in a run of codes that
    NumPy calls equal (``-0.0``/``+0.0``, NaNs: ``_classes``): the pairs whose key is in
    run ``C`` (start ``sC``, size ``|C|``) and value in run ``D`` are ordered by the
    value's run, then the key's code, then the value's code, so they take the codes
    ``sC << vbits + sD |C| + (k - sC) |D| + (v - sD)``, which fill the range of ``C``'s
    codes, ``[sC << vbits, (sC + |C|) << vbits)``.
    """
    width = _code_width(keys.dtype, values.dtype)
    vbits = 8 * values.dtype.itemsize
    kcodes, vcodes = encode(keys, descending=descending), encode(values)
    code = kcodes.astype(width)
    code <<= width.type(vbits)
    code |= vcodes
    for start, size in _classes(keys.dtype, descending):
        where = np.flatnonzero(_in_class(kcodes, start, size))
        if len(where):  # few: -0.0, +0.0 and NaN keys
            k, v = kcodes[where].astype(width), vcodes[where].astype(width)
            vstart, vsize = _value_runs(v, _classes(values.dtype))
            code[where] = (start << vbits) + vstart * size + (k - start) * vsize + (v - vstart)
    return code


def split_keyed_codes(codes, keys_dtype, values_dtype, descending, part=None):
    """The keys' and the values' ``total`` codes of :func:`keyed_codes` ``codes`` (new
    arrays of the dtypes' widths); ``part`` ``"keys"`` or ``"values"``: only that one
    (the other None), one pass less."""
    vbits = 8 * values_dtype.itemsize
    classes = _classes(keys_dtype, descending)
    kcodes = vcodes = None
    if part != "values" or classes:  # the keys' codes also find the runs of keys
        kcodes = (codes >> codes.dtype.type(vbits)).astype(f"u{keys_dtype.itemsize}")
    if part != "keys":
        vcodes = (codes & codes.dtype.type((1 << vbits) - 1)).astype(
            f"u{values_dtype.itemsize}")
    for start, size in classes:
        where = np.flatnonzero(_in_class(kcodes, start, size))
        if len(where):  # codes in the range of a run of keys: see keyed_codes
            rest = codes[where] - codes.dtype.type(start << vbits)
            vstart, vsize = _value_runs(rest // codes.dtype.type(size),
                                        _classes(values_dtype))
            rest -= vstart * codes.dtype.type(size)
            kcodes[where] = start + rest // vsize
            if vcodes is not None:
                vcodes[where] = vstart + rest % vsize
    return (None if part == "values" else kcodes), vcodes


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
    packed = ck.astype(np.uint64, copy=False)  # ck is ours: no copy of 8-byte codes
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
    sel = perm[pos]
    # The runs lie in ``pos`` in the order of their keys' codes, so one sort of all their
    # elements by the keyed order puts each run's in its place; by two codes where none
    # is special (random data with duplicate keys), not four.
    ks, vs = np.take(keys, sel), np.take(values, sel)
    codes = merge_codes_of(ks, vs, descending, _any_special(ks, vs))
    perm[pos] = sel[np.lexsort(codes[::-1])]
    return perm


def _unpack(codes, keys_dtype, values_dtype, descending):
    """Keys and values (new arrays) from unsigned :func:`keyed_codes` ``codes``."""
    kcodes, vcodes = split_keyed_codes(codes, keys_dtype, values_dtype, descending)
    return (decode(kcodes, keys_dtype, descending=descending, copy=False),
            decode(vcodes, values_dtype, copy=False))


def keyed_sort(keys, values, descending):
    """``(keys, values)`` sorted by the keyed order (:func:`order_codes`), new arrays.

    Pairs that fit 64 bits sort one code per element (:func:`keyed_codes`,
    ``numpy.sort``) and are decoded from it, with no permutation.  Wider pairs sort by
    the keys' codes and then only the runs of equal keys (:func:`_runs_perm`).

    >>> k = np.array([2.0, -0.0, 1.0, 0.0, -0.0], dtype=np.float32)
    >>> v = np.array([5, 7, 3, 6, 6], dtype=np.int32)
    >>> sk, sv = keyed_sort(k, v, False)  # equal keys by value, then -0.0 first
    >>> sk, sv
    (array([-0.,  0., -0.,  1.,  2.], dtype=float32), array([6, 6, 7, 3, 5], dtype=int32))
    """
    if not packable(keys, values):
        perm = _runs_perm(keys, values, descending)
        if len(perm) >= COMPILED_FROM and _compiled("merge").ENABLED:
            return _compiled("merge").take_pairs(keys, values, perm)
        return np.take(keys, perm), np.take(values, perm)  # take: faster than keys[perm]
    codes = keyed_codes(keys, values, descending)
    codes.sort()
    return _unpack(codes, keys.dtype, values.dtype, descending)


def stable_sort(keys, values, order):
    """``(keys, values)`` (new arrays) sorted by key alone, equal keys (as NumPy calls
    them: ``-0.0`` and ``+0.0``, every NaN) in their order here.

    The permutation comes from the keys' canonical codes: of keys of up to 2 bytes by
    NumPy's stable argsort (a radix sort); of wider ones packed above each element's
    index in one 64-bit integer, whose sort (of the bytes above the index alone:
    :func:`sort_high`) breaks ties by the index, where they fit
    together, else by :func:`_runs_perm`.  Keys and values are then taken by it
    together (their bits, untouched).

    >>> from distsort.backends import Order
    >>> k = np.array([2.0, 0.0, 1.0, -0.0, 0.0], dtype=np.float32)
    >>> stable_sort(k, np.array([10, 20, 30, 40, 50]), Order(keyed=True))
    (array([ 0., -0.,  0.,  1.,  2.], dtype=float32), array([20, 40, 50, 30, 10]))
    """
    keys, values = np.asarray(keys), np.asarray(values)
    n = len(keys)
    canonical = encode(keys, canonical=True, descending=order.descending)
    index_bits = max(1, (n - 1).bit_length())
    if keys.dtype.itemsize <= _RADIX_BYTES:
        perm = np.argsort(canonical, kind="stable")
    elif keys.dtype.itemsize * 8 + index_bits <= _CODE64_BYTES * 8:
        perm = canonical.astype(np.uint64)
        perm <<= np.uint64(index_bits)
        perm |= np.arange(n, dtype=np.uint64)
        perm = sort_high(perm, index_bits)  # the index ascends
        perm &= np.uint64((1 << index_bits) - 1)
        perm = perm.view(np.int64)
    else:
        perm = _runs_perm(keys, np.arange(n, dtype=np.int64), order.descending)
    if n >= COMPILED_FROM and _compiled("merge").ENABLED:
        return _compiled("merge").take_pairs(keys, values, perm)
    return np.take(keys, perm), np.take(values, perm)


def _positions(start, shape, axis=-1):
    lane = np.arange(start, start + shape[axis], dtype=np.int64)
    index = [None] * len(shape)
    index[axis] = slice(None)
    return np.broadcast_to(lane[tuple(index)], shape).copy()


def _ascending(x, look=64):
    """Whether ``x`` is in ascending order: its first ``look`` elements, then (only
    where those are) all of it, so that unsorted data costs almost nothing."""
    first = x[:look]
    return bool((first[1:] >= first[:-1]).all() and (x[1:] >= x[:-1]).all())


def _sort_codes_by_key(codes, keys_dtype, vbits, descending):
    """:func:`keyed_codes` ``codes`` (unsigned, ``vbits`` value bits) of values in
    ascending order (positions), sorted.  Pairs of equal keys already lie in the keyed
    order, so a stable sort of the keys' bits alone sorts them (:func:`sort_high`);
    then only the codes of the runs of keys NumPy calls equal (``-0.0``/``+0.0``,
    NaNs: ``_classes``), whose key bits hold part of the value, are sorted again: they
    lie together, as their keys do."""
    codes = sort_high(codes, vbits)
    for start, size in _classes(keys_dtype, descending):
        lo, hi = (np.searchsorted(codes, codes.dtype.type(b << vbits))
                  if b < 1 << (8 * keys_dtype.itemsize) else len(codes)
                  for b in (start, start + size))
        codes[lo:hi].sort()
    return codes


def prepare(keys, values, order, start=None):
    """Copy and sort one chunk; ``start`` asks for positions as the values.

    A chunk already in order is not sorted again (keys-only codes; the packed stable
    codes of ``distsort.api`` come sorted); keyed pairs of one 64-bit code whose
    unsigned values ascend (the positions of a stable sort) are sorted by the key's
    bits alone (:func:`_sort_codes_by_key`)."""
    keys = np.asarray(keys)
    if not order.keyed:
        codes = (_compiled("codes").signed_codes(keys, order.descending)  # one compiled
                 if keys.size >= COMPILED_FROM else None)  # pass, or None
        if codes is None:
            codes = _signed(encode(keys, descending=order.descending))
        if not _ascending(codes):
            codes.sort()
        return codes
    values = _positions(start, keys.shape) if start is not None else np.asarray(values)
    if not packable(keys, values):
        return keyed_sort(keys, values, order.descending)
    # One code per element, through the network as keys are.
    codes = keyed_codes(keys, values, order.descending)
    if codes.itemsize == _CODE64_BYTES and values.dtype.kind == "u" and _ascending(values):
        codes = _sort_codes_by_key(codes, keys.dtype, 8 * values.dtype.itemsize,
                                   order.descending)
        return _signed(codes)
    codes = _signed(codes)
    codes.sort()
    return codes


#: Keys turned into their codes at a time by :func:`sort_memory` (a small buffer).
_CODE_BLOCK = 1 << 16


def sort_memory(keys, values, order, lanes=1):
    """Sort C-contiguous ``keys`` (``lanes`` rows, each on its own) and ``values`` with
    them in their own memory, in distsort's order (``Backend.sort_memory``).  Keys
    alone: turned into their order codes in place, a block at a time, sorted by
    ``ndarray.sort`` and turned back in place (no buffer of the keys' size).  With
    values: sorted as a chunk (:func:`prepare`), then written back.

    >>> from distsort.backends import Order
    >>> x = np.array([2.0, np.nan, -1.0, 0.0, -0.0], dtype=np.float32)
    >>> sort_memory(x, None, Order(descending=True)); x
    array([ 2.,  0., -0., -1., nan], dtype=float32)
    """
    if values is not None:
        run = prepare(keys.reshape(-1), values.reshape(-1), order)
        keys.reshape(-1)[:] = finish_keys(run, order, keys.dtype, values.dtype)
        values.reshape(-1)[:] = finish_values(run, order, keys.dtype, values.dtype)
        return
    flat = keys.reshape(-1)
    codes = flat.view(f"u{keys.dtype.itemsize}")
    for start in range(0, flat.size, _CODE_BLOCK):
        part = slice(start, start + _CODE_BLOCK)
        codes[part] = encode(flat[part], descending=order.descending)
    codes.reshape(lanes, -1).sort(axis=-1)
    decode(codes, keys.dtype, descending=order.descending, copy=False)


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
    """The code arrays a keyed merge of pairs too wide to pack compares, in the keyed
    order of :func:`order_codes`: the key's and the value's code, or all four order
    codes where the runs hold ``special`` floats (whose canonical codes tie several
    bit patterns).  Without special elements the canonical codes are the total ones,
    which cost less."""
    if not special:
        return encode(keys, descending=descending), encode(values)
    return order_codes(keys, values, descending)


def _plain_keys(keys, descending):
    """Whether a sorted run's keys hold no ``-0.0``, ``+0.0`` or NaN (one search): then
    its keyed order is that of the (key, value) ``total`` codes, whatever the values."""
    if keys.dtype.kind != "f" or not len(keys):
        return True
    if np.isnan(keys[-1]):  # NaNs last, for both orders
        return False
    ascending = keys[::-1] if descending else keys  # no NaN here: the zeros together
    zero = keys.dtype.type(0)
    return np.searchsorted(ascending, zero, "left") == np.searchsorted(ascending, zero, "right")


def _merge_keyed(x, y, descending):
    """The sorted union of two keyed runs (the keyed order is total: no ties to break)."""
    merge = _compiled("merge")
    if merge.ENABLED and _plain_keys(x[0], descending) and _plain_keys(y[0], descending):
        return merge.merge_pairs(x, y, descending)  # codes made in the merge: no arrays
    if merge.ENABLED:  # one linear pass (numba); the same result as the code below
        special = _any_special(*x, *y)
        return merge.merge_keyed(x, y, merge_codes_of(*x, descending, special),
                                  merge_codes_of(*y, descending, special))
    keys, values = (np.concatenate(pair) for pair in zip(x, y, strict=False))
    return keyed_sort(keys, values, descending)


def _concat_sorted(x, y, order):
    """The sorted union of two sorted runs, ``x`` from the lower chunk (first on ties)."""
    if isinstance(x, tuple):
        return _merge_keyed(x, y, order.descending)
    if _compiled("merge").ENABLED:  # one linear pass (numba); as the code below
        return _compiled("merge").merge_codes(x, y)
    out = np.concatenate((x, y))
    out.sort(kind="stable")  # timsort: two sorted runs merge in linear time
    return out


def merge_keyed_runs(x, y, descending):
    """The sorted union (new arrays) of two keyed runs ``(keys, values)`` in the keyed
    order, ``x`` from the lower run: the k-way merge's (``distsort.backends.cpu.runs``).

    >>> merge_keyed_runs((np.array([1.0, 3.0]), np.array([0, 1])),
    ...                  (np.array([2.0]), np.array([2])), False)[1].tolist()
    [0, 2, 1]
    """
    return _merge_keyed(x, y, descending)


def merge_low(a, b_head, order):
    """The ``len(a)`` smallest of ``a`` and the higher chunk whose head is ``b_head``."""
    return split_low(a, b_head, crossing_count(a, b_head, order),
                     lambda x, y: _concat_sorted(x, y, order))


def merge_high(b, a_tail, order):
    """The ``len(b)`` largest of ``b`` and the lower chunk whose tail is ``a_tail``."""
    return split_high(b, a_tail, crossing_count(a_tail, b, order),
                      lambda x, y: _concat_sorted(x, y, order))


def _split_chunk(chunk, keys_dtype, values_dtype, descending, part):
    """The keys' or the values' codes (``part``) of a chunk of :func:`keyed_codes`."""
    if values_dtype is None:
        raise TypeError("a keyed chunk of packed codes is finished with its values' dtype")
    return split_keyed_codes(_unsigned(chunk), np.dtype(keys_dtype), np.dtype(values_dtype),
                             descending, part)


def finish_keys(chunk, order, dtype, values_dtype=None):
    """The keys of a sorted chunk; ``values_dtype``: the values' dtype, for keyed chunks
    of packed codes (:func:`keyed_codes`)."""
    if isinstance(chunk, tuple):
        return chunk[0]
    if order.keyed:
        codes = _split_chunk(chunk, dtype, values_dtype, order.descending, "keys")[0]
        return decode(codes, dtype, descending=order.descending, copy=False)
    keys = (_compiled("codes").keys_from_signed(chunk, dtype, order.descending)  # one
            if chunk.size >= COMPILED_FROM else None)  # compiled pass, or None
    if keys is not None:
        return keys
    return decode(_unsigned(chunk), dtype, descending=order.descending, copy=False)


def finish_values(chunk, order=None, keys_dtype=None, values_dtype=None):
    """The values of a sorted keyed chunk (the dtypes: for chunks of packed codes)."""
    if isinstance(chunk, tuple):
        return chunk[1]
    vcodes = _split_chunk(chunk, keys_dtype, values_dtype, order.descending, "values")[1]
    return decode(vcodes, values_dtype, copy=False)


def sort_blocks(keys, values, axis, order, positions=False):
    """Sort every lane of an N-D block along ``axis``; returns ``(keys, values)``."""
    keys = np.asarray(keys)
    if not order.keyed:
        codes = np.sort(encode(keys, descending=order.descending), axis=axis)
        return decode(codes, keys.dtype, descending=order.descending), None
    values = _positions(0, keys.shape, axis) if positions else np.asarray(values)
    perm = keyed_perm(keys, values, order.descending, axis=axis)
    return (np.take_along_axis(keys, perm, axis=axis),
            np.take_along_axis(values, perm, axis=axis))


class NumPyBackend(Backend):
    """The CPU backend (this module's functions): keys alone as signed order codes, keyed
    chunks as packed (key, value) codes or ``(keys, values)`` pairs.  One sort of its
    own, whatever the local sort a plan names."""

    name = "numpy"
    stable = True

    def prepare(self, keys, values, order, start=None, local="radix"):
        return prepare(keys, values, order, start)

    def sort_run(self, keys, values, order, local="radix"):
        if values is None:  # keys-only chunks hold order codes, ordered as integers
            keys.sort()
            return keys
        return prepare(keys, values, order, None)

    # Each method calls this module's function by its name when it runs.
    def probe(self, chunk, stride, top, order):
        return probe(chunk, stride, top, order)

    def crossing_bound(self, top_probe, bottom_probe, stride, limit, *order):
        return crossing_bound(top_probe, bottom_probe, stride, limit, *order)

    def merge_low(self, a, b_head, order):
        return merge_low(a, b_head, order)

    def merge_high(self, b, a_tail, order):
        return merge_high(b, a_tail, order)

    def finish_keys(self, chunk, order, dtype, *values_dtype):
        return finish_keys(chunk, order, dtype, *values_dtype)

    def finish_values(self, chunk, *dtypes):
        return finish_values(chunk, *dtypes)

    def sort_blocks(self, keys, values, axis, order, positions=False):
        return sort_blocks(keys, values, axis, order, positions=positions)

    def stable_sort(self, keys, values, order):
        return stable_sort(keys, values, order)

    def sort_memory(self, keys, values, order, local="radix", lanes=1):
        return sort_memory(keys, values, order, lanes)


#: The CPU backend.
BACKEND = NumPyBackend()
