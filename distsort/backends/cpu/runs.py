"""Runs in this process's memory, sorted and merged by its threads: the tasks of the
one-host k-way sort (``distsort.plan.onehost``, ``distsort.graph.kway``).

A run is a 1-D NumPy array of keys in the order of their ``total`` codes
(``distsort.core.order``: NaN last in both orders, ``-0.0`` before ``+0.0``), the
order every other path of distsort gives, bit for bit.  :func:`sort_keys` makes one
with ``numpy.sort`` (which releases the GIL, so runs sort on all cores at once) and
the k slices of an output chunk are merged by the compiled two-way merge
(``distsort.backends.cpu.merge.merge_keys_into``) in a tree of ``log2(k)`` levels, or,
for ascending integers and floats with no NaN, by NumPy's stable sort, which finds the
k runs and merges them as fast, with no numba to load; where this machine's
``numpy.sort`` (SIMD quicksort on most x86 CPUs) re-sorts the k runs faster than
Timsort merges them (many runs: timed once per dtype and k, :func:`resort_wins`), by
that.

>>> runs = [sort_keys(np.array([3.0, np.nan, -0.0])), sort_keys(np.array([0.0, 1.0]))]
>>> merge_slices(runs, (0, 0), (3, 2), Order()).tolist()
[-0.0, 0.0, 1.0, 3.0, nan]
"""
from __future__ import annotations

import functools
import importlib
import threading
from dataclasses import dataclass

import numpy as np

from distsort.backends.chunk import make_chunk, parts, slice_chunk
from distsort.backends.cpu.numpy_backend import keyed_sort, merge_keyed_runs
from distsort.backends.outofcore.hostruns import HostRuns
from distsort.backends.outofcore.runs import positions
from distsort.backends import Order
from distsort.core.order import decode, encode

__all__ = ["ThreadRuns", "sort_keys", "sort_run", "merge_slices"]

#: Bytes of the narrowest floats that ``numpy.sort`` sorts keeping their bits (it does
#: not keep the NaNs' of any width, nor any of float16's).
NUMPY_FLOAT_BYTES = 4


def sort_keys(keys, descending=False, original=None):
    """``keys`` (an array this call owns) sorted in the order of their ``total`` codes,
    in place where it can.  Ascending integers: ``numpy.sort`` alone.  Ascending floats
    of 4 or 8 bytes with no NaN, given ``original`` (arrays holding the same keys):
    ``numpy.sort``, then its zeros rewritten, as many ``-0.0`` first as ``original``
    holds (NumPy's sort keeps neither the signs of zeros nor the bits of NaNs).  Else
    the codes sorted and turned back into keys.

    >>> sort_keys(np.array([np.nan, 0.0, -1.0, -0.0])).tolist()
    [-1.0, -0.0, 0.0, nan]
    >>> k = np.array([0.0, -0.0, 2.0, -0.0])
    >>> np.signbit(sort_keys(k.copy(), original=[k])).tolist()
    [True, True, False, False]
    >>> sort_keys(np.array([1, 3, 2], np.int8), descending=True).tolist()
    [3, 2, 1]
    """
    kind = keys.dtype.kind
    if not descending and kind in "biu":
        keys.sort()
        return keys
    if (not descending and kind == "f" and keys.dtype.itemsize >= NUMPY_FLOAT_BYTES
            and original is not None and not _has_nan(keys)):
        keys.sort()
        _codes_order_zeros(keys, original)
        return keys
    codes = encode(keys, descending=descending)
    codes.sort()
    return decode(codes, keys.dtype, descending=descending, copy=False)


def _has_nan(keys):
    """Whether ``keys`` may hold a NaN: their sum is NaN (so it is for infinities of
    both signs: the slower path, never a wrong one), in one pass with no copy."""
    with np.errstate(all="ignore"):
        return bool(np.isnan(np.add.reduce(keys)))


def _codes_order_zeros(keys, original=None):
    """Sorted floats (no NaN) put in the order of their codes: their zeros (equal to
    NumPy, in any order) ``-0.0`` first, as many as ``original`` holds (arrays of the
    same keys; None: ``keys`` themselves, whose bits the sort kept)."""
    zero = keys.dtype.type(0)
    lo, hi = np.searchsorted(keys, zero, "left"), np.searchsorted(keys, zero, "right")
    if hi > lo:
        negative = (int(np.count_nonzero(np.signbit(keys[lo:hi]))) if original is None else
                    sum(int(np.count_nonzero(np.signbit(a[a == 0]))) for a in original))
        keys[lo:lo + negative] = -zero
        keys[lo + negative:hi] = zero


def _gathered(chunks, bounds):
    """The slices ``bounds`` of ``chunks``, one after the other, in a new array."""
    pieces = [np.asarray(c).ravel()[a:b] for c, (a, b) in zip(chunks, bounds, strict=True)]
    return np.concatenate(pieces) if len(pieces) != 1 else pieces[0].copy()


def sort_run(order, bounds, chunks, values=None, firsts=None):
    """A run: the slices ``bounds`` (rows ``(start, stop)``) of the input ``chunks``,
    gathered into a new array and sorted (:func:`sort_keys`); keyed (``order.keyed``),
    a ``(keys, values)`` pair in the keyed order (``numpy_backend.keyed_sort``), the
    values the same slices of ``values`` or, from ``firsts`` (each slice's first
    element's index), the positions.

    >>> from distsort.backends import Order
    >>> sort_run(Order(keyed=True), [(1, 3)], [np.array([5, 4, 4])], firsts=[1])
    (array([4, 4]), array([1, 2]))
    """
    keys = _gathered(chunks, bounds)
    if not order.keyed:
        slices = [np.asarray(c).ravel()[a:b] for c, (a, b) in zip(chunks, bounds, strict=True)]
        run = sort_keys(keys, order.descending, slices)
        if len(run) and not _numpy_merges([run], order.descending):
            warm_merge(keys.dtype.str, None, order.descending)
        return run
    if values is None:
        values = positions(firsts, [np.empty(b - a) for a, b in bounds])
    else:
        values = _gathered(values, bounds)
    warm_merge(keys.dtype.str, values.dtype.str, order.descending)
    return keyed_sort(keys, values, order.descending)


@functools.lru_cache(maxsize=64)
def warm_merge(keys_dtype, values_dtype, descending):
    """Start, once per process and dtypes, a thread that loads the compiled merge
    (numba's import and its cached machine code: 2 s and more on a busy machine)
    while the runs sort, so that the merges find it ready."""
    threading.Thread(target=_merge_tiny, args=(keys_dtype, values_dtype, descending),
                     daemon=True, name="distsort-warm-merge").start()


def _merge_tiny(keys_dtype, values_dtype, descending):
    one = np.zeros(1, keys_dtype)
    if values_dtype is None:
        merge_slices([one, one], (0, 0), (1, 1), Order(descending, False))
    else:
        pair = make_chunk(one, np.zeros(1, values_dtype))
        merge_slices([pair, pair], (0, 0), (1, 1), Order(descending, True))


def merge_slices(runs, first, last, order, out=None):
    """The merge of ``runs[j][first[j]:last[j]]`` for every run ``j`` (ties: the lower
    run first), written into ``out`` where given; pairs of slices are merged level by
    level, the last level into ``out``.  Keyed runs (``(keys, values)``): a new pair."""
    pieces = [slice_chunk(r, a, b) for r, a, b in zip(runs, first, last, strict=True)
              if b > a]
    if order.keyed:
        return _merged_keyed(pieces, runs[0], order.descending)
    n = sum(len(p) for p in pieces)
    out = np.empty(n, runs[0].dtype) if out is None else out
    if len(pieces) <= 1:
        out[:] = pieces[0] if pieces else out[:0]
        return out
    if _numpy_merges(pieces, order.descending):
        # Timsort finds the k runs and merges them: as fast as the compiled merge of
        # two, and no numba to load (seconds, in a new process on a busy machine).
        # Equal keys are equal bits here but for zeros, put in order below.
        np.concatenate(pieces, out=out)
        out.sort(kind=None if resort_wins(out.dtype.str, len(pieces), n) else "stable")
        if out.dtype.kind == "f":
            _codes_order_zeros(out)
        return out
    compiled = _merges()
    if not compiled.ENABLED:  # a stable sort of the codes keeps the runs' order on ties
        codes = encode(np.concatenate(pieces), descending=order.descending)
        codes.sort(kind="stable")
        out[:] = decode(codes, out.dtype, descending=order.descending, copy=False)
        return out
    while len(pieces) > 2:  # noqa: PLR2004  (pairs, level by level)
        merged = [_merged(pieces[i], pieces[i + 1], None, order)
                  for i in range(0, len(pieces) - 1, 2)]
        pieces = merged + pieces[len(pieces) - len(pieces) % 2:]
    return _merged(pieces[0], pieces[1], out, order)


def _merged_keyed(pieces, like, descending):
    """The merge of keyed slices ``pieces`` (new arrays), pairs level by level."""
    if not pieces:
        return slice_chunk(like, 0, 0)
    if len(pieces) == 1:
        return make_chunk(*(p.copy() for p in parts(pieces[0])))
    while len(pieces) > 1:
        merged = [merge_keyed_runs(pieces[i], pieces[i + 1], descending)
                  for i in range(0, len(pieces) - 1, 2)]
        pieces = merged + pieces[len(pieces) - len(pieces) % 2:]
    return pieces[0]


def _numpy_merges(pieces, descending):
    """Whether NumPy's stable sort merges these runs in distsort's order: ascending
    integers, and floats of 4 or 8 bytes with no NaN (each run's last element: NaNs sort
    last), whose zeros are put in order after."""
    kind, size = pieces[0].dtype.kind, pieces[0].dtype.itemsize
    if descending or kind not in "biuf":
        return False
    return kind != "f" or (size >= NUMPY_FLOAT_BYTES
                           and not np.isnan([p[-1] for p in pieces]).any())


#: Elements of the sample on which :func:`resort_wins` times the two sorts.
RESORT_SAMPLE = 2**18
_RESORT_LOCK = threading.Lock()


def resort_wins(dtype, k, n):
    """Whether ``numpy.sort``'s default kind sorts ``n`` elements of ``dtype`` made of
    ``k`` sorted runs faster than its stable kind merges them.  Timsort's cost per
    element grows with log k, a quicksort's with log n: so the time per element of
    each, on :data:`RESORT_SAMPLE` elements of this machine, the quicksort's scaled by
    log n.  (The two differ by machine: on a 2-core EPYC VM, 2^18 float32, the
    quicksort is 6x slower than Timsort at k = 2 and 1.6x at k = 16.)"""
    if k <= 2 or n < RESORT_SAMPLE:  # noqa: PLR2004  (one merge pass: Timsort's)
        return False
    stable, quick = _sort_costs(dtype, k)
    return bool(quick * np.log2(n) / np.log2(RESORT_SAMPLE) < stable)


#: (dtype, k) -> the two costs of :func:`_sort_costs`, timed once per process.
_SORT_COSTS: dict = {}


def _sort_costs(dtype, k):
    """Seconds per element of NumPy's stable and default sorts of ``k`` concatenated
    sorted runs of random ``dtype`` keys, the best of three, timed once per process:
    the merges of many threads wait for the first one's timing (under the lock) and
    read it, rather than each timing the sorts again one after the other."""
    import time
    with _RESORT_LOCK:
        if (dtype, k) in _SORT_COSTS:
            return _SORT_COSTS[dtype, k]
        rng = np.random.default_rng(0)
        keys = rng.integers(0, 2**31, RESORT_SAMPLE).astype(dtype)
        runs = np.concatenate([np.sort(p) for p in np.array_split(keys, k)])
        best = {}
        for kind in ("stable", None):
            times = []
            for _ in range(3):
                start = time.perf_counter()
                np.sort(runs, kind=kind)
                times.append(time.perf_counter() - start)
            best[kind] = min(times) / RESORT_SAMPLE
        _SORT_COSTS[dtype, k] = best["stable"], best[None]
        return _SORT_COSTS[dtype, k]


def _merges():
    """``distsort.backends.cpu.merge``, imported where first used (it imports numba)."""
    return importlib.import_module("distsort.backends.cpu.merge")


def _merged(x, y, out, order):
    out = np.empty(len(x) + len(y), x.dtype) if out is None else out
    return _merges().merge_keys_into(x, y, out, order.descending)


@dataclass(frozen=True)
class ThreadRuns(HostRuns):
    """The backend of the one-host k-way sort: runs of keys in this process's memory
    (:func:`sort_run`), each output chunk one segment, merged by :func:`merge_slices`;
    the k-way graph of ``distsort.graph.outofcore`` (co-ranks, merge tasks) runs on it
    as on host runs."""

    name = "thread-runs"

    def kway_segment(self, run, chunk, like_gpu, fraction):
        """One segment per output chunk: the merge needs no device."""
        return max(1, chunk)

    def merge_segments(self, runs, cuts, order, like_gpu, out=None):
        """One output chunk (into ``out``, where given) from the slices of ``runs``
        between its first and last co-ranks of ``cuts``."""
        return merge_slices(runs, cuts[0], cuts[-1], order, out)

    def record(self, phase, seconds):
        """Phases are timed on the GPU engine alone."""
