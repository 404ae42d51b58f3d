"""What the tasks of ``distsort.select`` do to chunks: order codes, sorted runs, samples,
windows, and NumPy's quantile formulas.  NumPy or CuPy chunks alike (``distsort.core.xp``);
everything a task returns beyond a run is small and on the host.

Elements are compared as their order codes (``distsort.core.order``): unsigned integers,
so every search is an exact ``searchsorted`` on both array modules, NaN (and NaT) last.
``total`` codes keep every element's bits (quantiles, top-k values); ``canonical`` ones
call ``-0.0`` and ``+0.0`` equal and every NaN one NaN, as NumPy's comparisons do
(unique values, searches, positions of the top k).

>>> run = sorted_run(np.array([3.0, np.nan, -1.0, 2.0]))
>>> values_of(run, np.float64).tolist()[:3]
[-1.0, 2.0, 3.0]
>>> window_counts(run, [(None, None)])[0][:2]
(0, 0)
"""
from __future__ import annotations

import itertools

import numpy as np

from distsort.core.order import TIME_KINDS, decode, encode, time_codes, time_from_codes
from distsort.core.xp import namespace

__all__ = ["codes_of", "values_of", "sorted_run", "to_host", "run_sample", "window_counts",
           "pick_codes", "quantile_ranks", "quantile_finish", "valid_count",
           "count_before"]


def to_host(a):
    """A NumPy copy of ``a`` (a CuPy array), or ``a`` itself (a NumPy one)."""
    return a if namespace(a) is np else a.get()


def codes_of(chunk, *, canonical=False, descending=False):
    """Order codes of ``chunk`` (any numeric dtype, datetime64, timedelta64), raveled.

    ``descending`` complements the ascending codes: the exact reverse of the ascending
    order, NaN and NaT lowest, which is what the smallest ``k`` (``topk(x, -k)``) read
    from the top of a run need (not NumPy's descending sort, which keeps NaN last)."""
    from distsort.backends.gpu.local_sort import encode_codes  # one pass for CuPy floats
    chunk = chunk.ravel()
    codes = (time_codes(chunk) if chunk.dtype.kind in TIME_KINDS
             else encode_codes(chunk, canonical=canonical))
    if descending:
        namespace(codes).invert(codes, out=codes)
    return codes


def values_of(codes, dtype, *, descending=False):
    """The elements of ``dtype`` whose ``total`` codes are ``codes`` (a new array)."""
    dtype = np.dtype(dtype)
    codes = ~codes if descending else codes
    if dtype.kind in TIME_KINDS:
        return time_from_codes(codes, dtype)
    return decode(codes, dtype)


def sorted_run(chunk, *, canonical=False, descending=False, presorted=False):
    """The codes of ``chunk``, sorted (the chunk's local sort).  ``presorted``: the
    chunk is sorted already (NumPy's order), so are its codes.

    >>> sorted_run(np.array([5, 1, 4, 2], np.int8)).tolist()
    [129, 130, 132, 133]
    """
    codes = codes_of(chunk, canonical=canonical, descending=descending)
    if not presorted:
        codes.sort()
    return codes


def run_sample(run, step):
    """Every ``step``-th code of ``run`` (``distsort.plan.kway.sample_step``), on the host."""
    return to_host(run[step - 1::step])


def window_counts(run, bounds):
    """For each ``(low, high)`` of ``bounds`` (codes, or None for the run's start or
    end): ``(below, at_low, between, at_high)``, the counts of the run's codes below
    ``low`` and equal to it, the codes strictly between (a host copy) and the count
    equal to ``high``.  Samples bracket the ranks, so ``between`` stays small even
    where many elements are equal.

    >>> out = window_counts(np.array([1, 2, 2, 3, 5, 5, 7], np.uint8), [(2, 5)])
    >>> out[0][0], out[0][1], out[0][2].tolist(), out[0][3]
    (1, 2, [3], 2)
    """
    xp, n = namespace(run), run.size
    fill = run.dtype.type(0)
    lows = xp.asarray([fill if lo is None else lo for lo, _ in bounds], dtype=run.dtype)
    highs = xp.asarray([fill if hi is None else hi for _, hi in bounds], dtype=run.dtype)
    found = [to_host(xp.searchsorted(run, v, side=s)).tolist()
             for v, s in ((lows, "left"), (lows, "right"), (highs, "left"), (highs, "right"))]
    out = []
    for t, (lo, hi) in enumerate(bounds):
        a, b = (0, 0) if lo is None else (found[0][t], found[1][t])
        c, d = (n, n) if hi is None else (found[2][t], found[3][t])
        if lo is not None and hi is not None and lo == hi:
            c = d = b  # one value brackets the rank: its count is all it takes
        out.append((a, b - a, to_host(run[b:c]), d - c))
    return out


def pick_codes(ranks, bounds, windows):
    """The codes of ``ranks`` of the merge of all runs, from each run's
    :func:`window_counts` (``windows``, one list per run) of the ``bounds`` of every
    rank: a host array.

    >>> w = [window_counts(np.array(r, np.uint8), [(2, 5)]) for r in ([1, 2, 3], [2, 4, 5])]
    >>> pick_codes([3], [(2, 5)], w).tolist()  # ranks 0..5: 1 2 2 3 4 5
    [3]
    """
    out = []
    for t, (rank, (lo, hi)) in enumerate(zip(ranks, bounds, strict=True)):
        parts = [w[t] for w in windows]
        left = int(rank) - sum(p[0] for p in parts)
        at_low = sum(p[1] for p in parts)
        between = np.sort(np.concatenate([p[2] for p in parts]))
        if left < at_low:
            out.append(lo)
        elif left - at_low < between.size:
            out.append(between[left - at_low])
        else:
            if hi is None or left - at_low - between.size >= sum(p[3] for p in parts):
                raise RuntimeError(f"distsort internal error: rank {rank} outside its window")
            out.append(hi)
    dtype = windows[0][0][2].dtype if windows and ranks else np.uint64
    return np.asarray(out, dtype=dtype)


def valid_count(run, dtype):
    """How many codes of ``run`` (``total`` codes of ``dtype``) are not NaN or NaT."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        limit = encode(np.array([np.inf], dtype))[0]
    elif dtype.kind in TIME_KINDS:
        limit = time_codes(np.array([np.iinfo(np.int64).max]).view(dtype))[0]
    else:
        return int(run.size)
    xp = namespace(run)
    return int(to_host(xp.searchsorted(run, xp.asarray([limit], dtype=run.dtype),
                                       side="right"))[0])


# -- NumPy's quantiles, from the elements of a few ranks

#: NumPy's private quantile helpers that give its results bit for bit (NumPy 2.x).
_NUMPY_HELPERS = ("_QuantileMethods", "_get_indexes", "_get_gamma", "_lerp")


def _numpy_quantiles():
    """NumPy's module of quantile formulas: its own, so that every ``method`` gives
    NumPy's bits; a NumPy without them is named in the error, not answered otherwise."""
    try:
        from numpy.lib import _function_base_impl as impl
    except ImportError:
        impl = None
    if impl is None or not all(hasattr(impl, name) for name in _NUMPY_HELPERS):
        raise NotImplementedError(f"distsort's quantiles need NumPy's quantile helpers "
                                  f"{_NUMPY_HELPERS}, which NumPy {np.__version__} lacks")
    return impl


def _method(method):
    methods = _numpy_quantiles()._QuantileMethods
    if method not in methods:
        raise ValueError(f"{method!r} is not a valid method. Use one of: {methods.keys()}")
    return methods[method]


def _indexes(n, q, method, dtype):
    """NumPy's ``_quantile`` up to its partition: ``(virtual, previous, next)``
    indexes, ``previous`` None where the method needs no interpolation."""
    props = _method(method)
    virtual = np.asanyarray(props["get_virtual_index"](n, q))
    if props["fix_gamma"] is None or (method == "linear"
                                      and np.issubdtype(virtual.dtype, np.integer)):
        return virtual, None, None
    previous, nxt = _numpy_quantiles()._get_indexes(np.empty(0, dtype), virtual, n)
    return virtual, previous, nxt


def _supports_nans(dtype):
    return np.issubdtype(dtype, np.inexact) or np.dtype(dtype).kind in TIME_KINDS


def quantile_ranks(n, q, method, dtype):
    """The ranks (sorted, distinct) whose elements NumPy's quantile ``method`` reads
    for ``q`` (in [0, 1], an array) of ``n`` elements of ``dtype``; the last too where
    NaN may occur (NaN anywhere makes every quantile NaN).

    >>> quantile_ranks(10, np.array([0.5, 1.0]), "linear", np.float64).tolist()
    [4, 5, 9]
    >>> quantile_ranks(10, np.array([0.5]), "lower", np.int64).tolist()
    [4]
    """
    if n == 0:
        raise IndexError("index -1 is out of bounds for axis 0 with size 0")
    virtual, previous, nxt = _indexes(n, q, method, dtype)
    parts = [virtual.ravel()] if previous is None else [previous.ravel(), nxt.ravel()]
    if _supports_nans(dtype):
        parts.append(np.array([-1]))
    ranks = np.concatenate(parts).astype(np.int64)
    return np.unique(np.where(ranks < 0, ranks + n, ranks))


def quantile_finish(n, q, method, dtype, ranks, values, weak_q=False):
    """NumPy's quantiles from ``values``, the elements of ``ranks``
    (:func:`quantile_ranks`) of the sorted ``n`` elements: the same formulas
    (``numpy.lib._function_base_impl``), so the same bits.

    >>> v = np.arange(10.0)
    >>> r = quantile_ranks(10, np.array(0.25), "linear", v.dtype)
    >>> float(quantile_finish(10, np.array(0.25), "linear", v.dtype, r, v[r], weak_q=True))
    2.25
    """
    impl = _numpy_quantiles()
    ranks = np.asarray(ranks)

    def take(index):
        index = np.asarray(index, np.int64)
        return values[np.searchsorted(ranks, np.where(index < 0, index + n, index))]
    virtual, previous, nxt = _indexes(n, q, method, dtype)
    if previous is None:
        result = take(virtual)
        result = result[()] if result.ndim == 0 else result
    else:
        gamma = impl._get_gamma(virtual, previous, _method(method))
        gamma = float(gamma) if weak_q else gamma.reshape(virtual.shape)
        result = impl._lerp(take(previous), take(nxt), gamma)
    last = values[-1:]
    if _supports_nans(dtype) and np.isnan(last).any():
        if np.ndim(result) == 0:
            return last[0]
        np.copyto(result, last[0])
    return result


# -- searches in a sorted array

def count_before(chunk, v, side):
    """For each of ``v``: how many elements of the sorted ``chunk`` come before it
    (``side`` as in ``numpy.searchsorted``), as int64 on ``chunk``'s array module.
    Both are cast to one dtype first, as ``numpy.searchsorted`` compares them."""
    xp = namespace(chunk)
    v = xp.asarray(v)
    if chunk.dtype != v.dtype:
        common = np.promote_types(chunk.dtype, v.dtype)
        chunk, v = chunk.astype(common), v.astype(common)
    return xp.searchsorted(codes_of(chunk, canonical=True), codes_of(v, canonical=True),
                           side=side).astype(np.int64).reshape(v.shape)


def code_dtype(dtype):
    """The unsigned dtype of the codes of ``dtype`` (uint64 for datetime64 and timedelta64)."""
    dtype = np.dtype(dtype)
    return np.dtype(np.uint64) if dtype.kind in TIME_KINDS else np.dtype(f"u{dtype.itemsize}")


def median_finish(n, dtype, ranks, values):
    """NumPy's median from ``values``, the elements of ``ranks`` of the sorted ``n``:
    the mean of the middle one or two (``numpy.median``), NaN where the last is."""
    ranks = np.asarray(ranks)
    middle = values[np.searchsorted(ranks, sorted({(n - 1) // 2, n // 2}))]
    out = np.mean(middle, axis=0)
    if _supports_nans(dtype) and np.isnan(values[-1:]).any():
        return values[-1]
    return out


# -- unique values of a sorted array

def last_code(chunk):
    """The ``canonical`` code of a sorted chunk's last element (an int), or None."""
    if chunk.size == 0:
        return None
    return int(to_host(codes_of(chunk[chunk.size - 1:], canonical=True))[0])


def first_of_runs(chunk, previous):
    """Positions in the sorted ``chunk`` of the first element of every run of equal
    elements (``canonical`` codes: ``-0.0 == +0.0``, every NaN equal); ``previous``:
    the code of the element before the chunk, or None.

    >>> first_of_runs(np.array([-0.0, 0.0, 1.0, np.nan, np.nan]), None).tolist()
    [0, 2, 3]
    """
    xp = namespace(chunk)
    codes = codes_of(chunk, canonical=True)
    if codes.size == 0:
        return xp.empty(0, np.int64)
    new = xp.empty(codes.size, bool)
    new[1:] = codes[1:] != codes[:-1]
    new[:1] = True if previous is None else codes[:1] != codes.dtype.type(previous)
    return xp.flatnonzero(new).astype(np.int64)


def flag_summary(offsets, flags):
    """``(before, after)``: for every chunk, how many runs of equal elements start in
    the chunks before it, and the position where the next run after it starts (the
    array's length where none does), from every chunk's :func:`first_of_runs`."""
    sizes = [int(f.size) for f in flags]
    firsts = [None if f.size == 0 else int(to_host(f[:1])[0]) + o
              for f, o in zip(flags, offsets, strict=False)]
    before = [0, *itertools.accumulate(sizes)][:-1]
    after, nxt = [], offsets[-1]
    for first in reversed(firsts):
        after.append(nxt)
        nxt = nxt if first is None else first
    return before, after[::-1]


def unique_counts(flags, offset, summary, i):
    """How many elements each run of equal elements that starts in chunk ``i`` holds."""
    xp = namespace(flags)
    ends = xp.concatenate([flags + int(offset), xp.asarray([summary[1][i]], np.int64)])
    return xp.diff(ends)


def group_ids(flags, size, summary, i):
    """For each element of chunk ``i`` (``size`` elements), the index of its run of
    equal elements in the whole array: ``numpy.unique``'s inverse, in sorted order."""
    xp = namespace(flags)
    start = xp.zeros(size, np.int64)
    start[flags] = 1
    out = xp.cumsum(start)
    out += summary[0][i] - 1
    return out
