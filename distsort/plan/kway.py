"""The k-way merge of out-of-core runs, in integers alone: splitters, segments, cost.

An out-of-core sort forms ``k`` sorted runs (``distsort.plan.outofcore``).  Instead of the
bitonic network between them, one pass merges all ``k`` at once:

1. *Splitters.*  For an output rank ``r``, the co-ranks ``c`` (``c[j]`` elements of
   run ``j``, ``sum(c) == r``) are the first ``r`` elements of the merge.  Equal
   elements are taken from the run of lower index first, then by position, so a
   stable order of the runs stays stable.  :func:`co_ranks` finds them by a k-way
   binary search: the middle element of the widest window is a pivot, its count in
   every run (a binary search in each) says on which side of rank ``r`` it lies, and
   every window shrinks to that side.
2. *Segments.*  Each output chunk is cut into segments of at most ``segment``
   elements (:func:`segment_bounds`): a segment's ``k`` slices (between the co-ranks
   of its two ends) fit the device together, are merged there and written into the
   output chunk where they belong.
3. *Cost.*  :func:`choose_merge` picks the k-way merge or the network between runs
   from the bytes each copies and the copies each makes; tiny budgets (thousands of
   slices of a few elements) keep the network.  Runs on several workers take the
   k-way merge of step 4, measured faster than the network there.
4. *Runs on several workers.*  No worker can search runs it does not hold, so the
   co-ranks of the output chunks' ends come in two steps of small messages: every run
   sends a sample (every ``step``-th element, :func:`sample_step`), one task merges the
   samples and brackets each end's rank between two of them (:func:`brackets`), every
   run counts its elements before those two and sends what lies between (a *window*),
   and one task finds the exact co-ranks within the windows (:func:`co_ranks`).  Then
   each output chunk's slice of every run goes to the worker that merges it: one
   exchange of the data between workers.

Examples
--------
>>> runs = [(1, 3, 5, 7), (2, 3, 6), (0, 8)]
>>> co_ranks([len(r) for r in runs], 4, searcher(runs))
(2, 1, 1)
>>> segment_bounds((5, 5, 3), 2)
((0, 1, 3, 5), (5, 6, 8, 10), (10, 11, 13))
"""
from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

#: ``before(i, p, lo, hi)`` of :func:`co_ranks`: each run's count before element ``p``
#: of run ``i``, within the windows ``[lo, hi]``.
Before = Callable[[int, int, Sequence[int], Sequence[int]], Sequence[int]]
IntArray = npt.NDArray[np.int64]

__all__ = ["co_ranks", "searcher", "segment_bounds", "kway_segment", "kway_bytes_moved",
           "choose_merge", "sample_step", "brackets", "Samples", "KWAY_FRACTION", "COPY_SECONDS",
           "LINK_BYTES_PER_S", "SAMPLES_PER_RUN"]

#: Part of the budget a k-way segment takes: two segments in flight, each its slices
#: and the radix sort's buffers (``4 * segment`` key-sized arrays, see
#: ``distsort.core.memory.radix_extra_bytes``).
KWAY_FRACTION = 0.8
#: Seconds a copy costs beyond its bytes (launch, the driver's setup): what makes
#: thousands of tiny slices dearer than the network's few large ones.
COPY_SECONDS = 20e-6
#: Bytes per second of a pinned host-device copy in the cost model (an H200 host's
#: link in each direction; only ratios matter for the choice).
LINK_BYTES_PER_S = 50e9


def co_ranks(lengths: Sequence[int], rank: int, before: Before,
             start: Sequence[int] | None = None) -> tuple[int, ...]:
    """How many elements of each of the ``k`` sorted runs of ``lengths`` are among
    the first ``rank`` of their merge (ties: lower run first, then position).

    ``before(i, p, lo, hi)`` returns, for every run ``j``, how many of its elements
    come before element ``p`` of run ``i`` in the merge, clipped to
    ``[lo[j], hi[j]]`` (a search within that window suffices; :func:`searcher` for
    tuples).  Clipped counts decide the side of ``rank`` exactly: the co-ranks lie in
    the windows.

    ``start``: the co-ranks of a rank at most ``rank`` (the previous segment's end),
    where every window starts, since co-ranks never decrease with the rank; ``before``
    then looks at no element below them (a streamed merge may have freed those).

    >>> co_ranks((3, 2), 2, searcher([(1, 1, 1), (1, 1)]))  # ties: the first run first
    (2, 0)
    >>> runs = [(1, 3, 5, 7), (2, 3, 6), (0, 8)]
    >>> co_ranks((4, 3, 2), 6, searcher(runs), start=(2, 1, 1))
    (3, 2, 1)
    """
    lo = [0] * len(lengths) if start is None else [int(c) for c in start]
    hi = [int(n) for n in lengths]
    rank = max(0, min(int(rank), sum(hi)))
    step = 0
    while sum(lo) < rank < sum(hi):
        i = max(range(len(lo)), key=lambda j: hi[j] - lo[j])
        p = _pivot(lo[i], hi[i], rank - sum(lo), sum(hi) - sum(lo), step)
        step += 1
        counts = before(i, p, lo, hi)
        if sum(counts) < rank:  # element p of run i is among the first ``rank``
            lo = [max(a, int(c)) for a, c in zip(lo, counts, strict=True)]
            lo[i] = p + 1
        else:
            hi = [min(b, int(c)) for b, c in zip(hi, counts, strict=True)]
            hi[i] = p
    return tuple(lo if sum(lo) == rank else hi)


def _pivot(lo: int, hi: int, need: int, width: int, step: int) -> int:
    """A position in ``[lo, hi)``: where the rank sought would fall if the runs were
    alike (``need`` of the ``width`` elements of all windows), on even steps; the
    middle on odd ones, so that the widest window at least halves every other step.

    >>> _pivot(0, 100, 10, 400, 0), _pivot(0, 100, 10, 400, 1)
    (2, 50)
    """
    if step % 2:
        return (lo + hi) // 2
    return min(hi - 1, lo + (hi - lo) * need // width)


def searcher(runs: Sequence[Sequence[Any]]) -> Before:
    """``before`` of :func:`co_ranks` for runs held as sorted sequences of
    comparable items (the reference the host engines are tested against).

    >>> searcher([(1, 2), (2, 3)])(1, 0, [0, 0], [2, 2])  # the 2 of run 1
    [2, 0]
    """
    def before(i: int, p: int, lo: Sequence[int], hi: Sequence[int]) -> list[int]:
        v = runs[i][p]
        out: list[int] = []
        for j, run in enumerate(runs):
            if j == i:
                out.append(p)
            else:  # equal items of a lower run come first, of a higher one after
                find = bisect.bisect_right if j < i else bisect.bisect_left
                out.append(find(run, v, lo[j], hi[j]))
        return out
    return before


#: Samples a run gives the splitters of a merge between workers: the windows between
#: two samples that bracket a rank hold about ``runs * length / SAMPLES_PER_RUN``
#: elements, and all samples are merged in one task.
SAMPLES_PER_RUN = 1 << 16


def sample_step(length: int) -> int:
    """Elements between two samples of a run of ``length`` elements: its samples are
    the elements at ``step - 1, 2 * step - 1, ...``.

    >>> sample_step(10), sample_step(2**30)
    (1, 16384)
    """
    return max(1, -(-int(length) // SAMPLES_PER_RUN))


class Samples:
    """The samples of ``k`` sorted runs (of ``lengths``; run ``j``'s at positions
    ``step - 1, 2 * step - 1, ...`` with ``step = steps[j]``) in the order of their
    merge (``merged``: the run of each sample, ties to the lower run), and what they say
    of ranks without a search in any run (step 4): runs on several workers, runs on
    disk.

    A sample of run ``i`` whose ``m``-th it is, with ``m_j`` samples of run ``j``
    before it, is at position ``(m + 1) * step_i - 1``, and each other run has at least
    ``m_j * step_j`` elements before it and fewer than its next sample's position
    (:meth:`bounds`).  Both bounds' sums rise with the samples, so the samples that
    bracket a rank are found by binary searches, all ranks' in lock step
    (:meth:`brackets`), and between them lies a window of about two steps of every run
    that holds the rank's co-ranks (:meth:`windows`).  Memory: a position per sample.

    >>> s = Samples((4, 4), (2, 2), (0, 1, 0, 1))  # runs (1, 3, 5, 7), (2, 4, 6, 8)
    >>> [b.tolist() for b in s.bounds([1])], s.sample(1)
    ([[[2, 1]], [[3, 1]]], (1, 1))
    >>> [w.tolist() for w in s.windows([4])]  # the co-ranks of rank 4: (2, 2)
    [[[2, 1]], [[3, 3]]]
    """

    def __init__(self, lengths: Sequence[int] | IntArray, steps: Sequence[int] | IntArray,
                 merged: Sequence[int] | IntArray) -> None:
        self.lengths = np.asarray(lengths, np.int64)
        self.steps = np.asarray(steps, np.int64)
        self.merged = np.asarray(merged, np.int64)
        #: Where each run's samples stand in the merge of all samples.
        by_run = np.argsort(self.merged, kind="stable")
        counts = np.bincount(self.merged, minlength=len(self.lengths))
        self._places = np.split(by_run, np.cumsum(counts)[:-1])

    def __len__(self) -> int:
        return len(self.merged)

    def _seen(self, t: IntArray) -> IntArray:
        """Each run's samples before each sample of ``t`` (an array): ``(len(t), k)``."""
        return np.stack([np.searchsorted(p, t) for p in self._places], axis=-1).reshape(
            len(t), len(self._places))

    def bounds(self, t: Sequence[int] | IntArray) -> tuple[IntArray, IntArray]:
        """``(lower, upper)``, each ``(len(t), k)``: at least and at most how many
        elements of each run come before each sample of ``t`` (indices in the merge of
        all samples); for a sample's own run, its position."""
        t = np.asarray(t, np.int64)
        seen = self._seen(t)
        rows, i = np.arange(len(t)), self.merged[t]
        pos = (seen[rows, i] + 1) * self.steps[i] - 1
        lower = seen * self.steps
        upper = np.where(seen < self.lengths // self.steps, (seen + 1) * self.steps - 1,
                         self.lengths)
        lower[rows, i] = upper[rows, i] = pos
        return lower, upper

    def sample(self, t: int) -> tuple[int, int]:
        """``(run, position)`` of sample ``t``."""
        i = int(self.merged[t])
        return i, int((np.searchsorted(self._places[i], t) + 1) * self.steps[i] - 1)

    def brackets(self, ranks: Sequence[int] | IntArray) -> tuple[IntArray, IntArray]:
        """For each of ``ranks``, the samples whose ranks bracket it: ``low``, the last
        sample that surely has at most the rank's elements before it, and ``high``, the
        first that surely has at least them; -1 for the start (low) and ``len(self)``
        for the end (high) of the merge."""
        ranks = np.asarray(ranks, np.int64)
        after = self._first(ranks, lambda lower, upper, r: upper > r)
        return after - 1, self._first(ranks, lambda lower, upper, r: lower >= r)

    def _first(self, ranks: IntArray,
               holds: Callable[[IntArray, IntArray, IntArray], npt.NDArray[np.bool_]],
               ) -> IntArray:
        """For each rank, the first sample where ``holds(lower, upper, rank)`` (of the
        sums of its bounds; false, then true), or ``len(self)``: binary searches in lock
        step."""
        a, b = np.zeros(len(ranks), np.int64), np.full(len(ranks), len(self), np.int64)
        while (act := np.flatnonzero(a < b)).size:
            mid = (a[act] + b[act]) // 2
            lower, upper = self.bounds(mid)
            ok = holds(lower.sum(axis=1), upper.sum(axis=1), ranks[act])
            b[act[ok]] = mid[ok]
            a[act[~ok]] = mid[~ok] + 1
        return a

    def windows(self, ranks: Sequence[int] | IntArray) -> tuple[IntArray, IntArray]:
        """``(lo, hi)``, each ``(len(ranks), k)``: each run's co-rank of each rank lies in
        ``[lo[r, j], hi[r, j]]``."""
        low, high = self.brackets(ranks)
        k = len(self.lengths)
        lo, hi = np.zeros((len(low), k), np.int64), np.tile(self.lengths, (len(low), 1))
        has = np.flatnonzero(low >= 0)
        lo[has] = self.bounds(low[has])[0]
        has = np.flatnonzero(high < len(self))
        hi[has] = self.bounds(high[has])[1]
        return lo, np.maximum(hi, lo)


def brackets(lengths: Sequence[int], steps: Sequence[int], merged: Sequence[int] | IntArray,
             ranks: Sequence[int]) -> list[tuple[tuple[int, int] | None, tuple[int, int] | None]]:
    """For each of ``ranks``, two samples of the runs of ``lengths`` whose ranks in the
    merge bracket it: ``(low, high)``, each ``(run, position)``, or None for the start
    (low) or the end (high) of the merge (:meth:`Samples.brackets`).  The co-ranks of a
    rank lie between the counts of each run's elements before ``low`` and before
    ``high``.

    ``steps``: each run's :func:`sample_step`; ``merged``: the run of each sample, in
    the order of the merge of all samples (ties: the lower run first).

    >>> brackets((4, 4), (2, 2), (0, 1, 0, 1), (4,))  # runs (1, 3, 5, 7), (2, 4, 6, 8)
    [((1, 1), (0, 3))]
    >>> brackets((4, 4), (2, 2), (0, 1, 0, 1), (0, 8))
    [(None, (0, 1)), ((1, 3), None)]
    """
    samples = Samples(lengths, steps, merged)
    low, high = samples.brackets(ranks)
    return [(samples.sample(a) if a >= 0 else None,
             samples.sample(b) if b < len(samples) else None)
            for a, b in zip(low.tolist(), high.tolist(), strict=True)]


def segment_bounds(chunks: Sequence[int], segment: int) -> tuple[tuple[int, ...], ...]:
    """Output ranks that cut each chunk of ``chunks`` into segments of at most
    ``segment`` elements, of equal sizes: one tuple per chunk, from its first rank to
    its end.

    >>> segment_bounds((4, 0, 3), 10)
    ((0, 4), (4, 4), (4, 7))
    """
    out: list[tuple[int, ...]] = []
    start = 0
    segment = max(1, int(segment))
    for size in chunks:
        pieces = max(1, -(-int(size) // segment))
        out.append(tuple(start + size * s // pieces for s in range(pieces + 1)))
        start += size
    return tuple(out)


def kway_segment(budget: int | float, itemsize: int) -> int:
    """Elements of a k-way segment under a device ``budget``: two in flight, each its
    slices and the radix sort's buffers (``4 * segment`` elements).

    >>> kway_segment(4 * 10**9, 4)
    100000000
    """
    return max(1, int(budget * KWAY_FRACTION) // (8 * int(itemsize)))


def kway_bytes_moved(nbytes: int) -> int:
    """Bytes the k-way merge copies to the device (the same back): the runs once to
    form them, every element once more to merge them.

    >>> kway_bytes_moved(100)
    200
    """
    return 2 * nbytes


def choose_merge(lengths: Sequence[int], itemsize: int, budget: int | float,
                 network_bytes: int, workers: int = 1, picked_bytes: int = 0) -> str:
    """``"kway"``, ``"exchange"`` or ``"network"``: the merge between the runs of
    ``lengths`` (elements of ``itemsize`` bytes) under a device ``budget``, by the time
    each takes to copy (bytes at ``LINK_BYTES_PER_S``, ``COPY_SECONDS`` a copy).

    The network copies ``network_bytes`` (``outofcore.bytes_moved``) in segments of
    two slices; a k-way segment copies one slice of every run, so with many runs and
    a small budget its slices shrink to a few elements.  Runs held by several
    ``workers`` take the k-way merge as ``"exchange"``: each output chunk's slices go
    once to the worker that merges it, less than the network sends between workers
    (on two workers sharing one H200, later sorts of 16 GiB of float32 in 4.58-5.38 s
    against the network's 8.63-10.85 s: ``docs/out_of_core.md``).  ``picked_bytes``: output
    that tasks of their own take from the merged chunks on the device (the keys and
    the values of keyed CuPy output): dask-cuda may have spilled a merged chunk by
    then (to its pinned host copy, for free), and each of the two picks may copy it
    back at the link's speed.

    >>> choose_merge((3 * 2**28,) * 5 + (2**28,), 4, 4 * 10**9, 98 * 2**32)
    'kway'
    >>> choose_merge((2,) * 1000, 4, 64, 16 * 2**10)  # slices of no element
    'network'
    >>> choose_merge((3 * 2**28,) * 5 + (2**28,), 4, 4 * 10**9, 98 * 2**32, workers=2)
    'exchange'
    >>> choose_merge((3 * 2**27,) * 5 + (2**27,), 8, 4 * 10**9, 98 * 2**30,
    ...              picked_bytes=2**34)  # keyed CuPy output: picked on the device
    'kway'
    >>> choose_merge((3 * 2**27,) * 5 + (2**27,), 8, 4 * 10**9, 36 * 2**30,
    ...              picked_bytes=2**34)  # a network of few rounds
    'network'
    """
    if len(lengths) <= 1:
        return "network"
    total = sum(lengths)
    nbytes = total * itemsize
    segments = -(-total // kway_segment(budget, itemsize))
    kway = kway_bytes_moved(nbytes) / LINK_BYTES_PER_S + 2 * segments * (
        len(lengths) + 1) * COPY_SECONDS + 2 * picked_bytes / LINK_BYTES_PER_S
    network_segment = max(1, int(budget * KWAY_FRACTION) // (4 * itemsize))
    copies = 3 * -(-network_bytes // (network_segment * itemsize))
    network = network_bytes / LINK_BYTES_PER_S + copies * COPY_SECONDS
    if kway > network:
        return "network"
    return "exchange" if workers > 1 else "kway"
