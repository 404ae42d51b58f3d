"""Sorted runs in host memory, merged by an engine: the backend of out-of-core sorts.

A *run* is a sorted piece of the array held in host memory (pinned, on GPU workers):
the keys in the user's dtype, or a ``(keys, values)`` tuple.  It is a chunk of the
backend interface (``distsort.backends``), so ``distsort.graph.layers.network_layers`` runs
the bitonic network between runs unchanged: edges, heads and tails are host views,
crossing counts are binary searches in host memory, and the merges of a compare-split
stream through an *engine* in segments (``distsort.plan.outofcore``):

* ``"gpu"`` (``distsort.backends.outofcore.stream_gpu``): copies in, the bitonic merge kernels,
  copies out, two segments in flight on two CUDA streams;
* ``"cpu"``: NumPy, the same segments one after the other (the reference, and what CI
  runs).

Where ``distsort.plan.kway.choose_merge`` says so, the runs are merged instead in one k-way
pass: each output chunk is made (``distsort.graph.outofcore.merge_chunk``) from its
slice of every run, found by ``distsort.plan.kway.co_ranks`` with :func:`run_searcher` (for
all chunks in one task, ``kway_cuts``), and merged by :meth:`HostRuns.merge_segments`.

Order: the keys' ``total`` codes (``distsort.core.order``), or ``order_codes`` of
``(keys, values)`` (NumPy backend's keyed order): the order the GPU kernels use, so
that every engine gives the same runs bit for bit.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from distsort.core import dask_cuda_store
from distsort.backends.chunk import length, make_chunk as make_run, parts, split_high, split_low
from distsort.backends.chunk import slice_chunk as slice_run
from distsort.core.order import encode
from distsort.core.xp import host_copy
from distsort.backends import Backend
from distsort.backends.cpu.numpy_backend import crossing_bound  # probes are NumPy's codes
from distsort.backends.cpu.numpy_backend import first_not, order_codes, probe_codes


def code(run, i, order):
    """The order code of element ``i`` (a tuple, compared lexicographically)."""
    keys, values = parts(run)
    if values is None:
        return (int(encode(keys[i:i + 1], descending=order.descending)[0]),)
    return tuple(int(c[0]) for c in order_codes(keys[i:i + 1], values[i:i + 1],
                                                 order.descending))


def crossing_count(top, bottom, order):
    """``#{i : top[-1-i] > bottom[i]}``: how many elements cross between a lower run
    whose top is ``top`` and a higher run whose bottom is ``bottom`` (binary search)."""
    n = length(top)
    return first_not(min(n, length(bottom)),
                     lambda i: code(top, n - 1 - i, order) > code(bottom, i, order))


def co_rank(x, y, o, order):
    """How many of the first ``o`` elements of the merge of sorted ``x`` and ``y`` come
    from ``x`` (merge path; ``x`` first on ties).

    >>> from distsort.backends import Order
    >>> co_rank(np.array([1, 3, 5]), np.array([2, 3, 4]), 4, Order())
    2
    """
    lo = max(0, o - length(y))
    # x[i] is among the first o exactly while it is not after y[o - i - 1]
    return lo + first_not(min(o, length(x)) - lo, lambda d: code(x, lo + d, order)
                          <= code(y, o - lo - d - 1, order))


def segments(x, y, segment, order):
    """``(i0, i1, j0, j1, o0)`` of each output segment of ``segment`` elements of the
    merge of ``x`` and ``y``: it merges ``x[i0:i1]`` and ``y[j0:j1]`` into
    ``out[o0:o0 + (i1 - i0) + (j1 - j0)]``."""
    total = length(x) + length(y)
    cuts = [0] + [co_rank(x, y, o, order) for o in range(segment, total, segment)]
    cuts.append(length(x))
    out = []
    for s, (i0, i1) in enumerate(itertools.pairwise(cuts)):
        o0 = s * segment
        o1 = min(total, o0 + segment)
        out.append((i0, i1, o0 - i0, o1 - i1, o0))
    return out


def _compare(codes, pivot):
    """-1, 0 or 1 per element: ``codes`` (an array, or a tuple of arrays compared
    lexicographically) below, equal to or above ``pivot`` (the same, of one element)."""
    if not isinstance(codes, tuple):
        codes, pivot = (codes,), (pivot,)
    out = np.zeros(len(codes[0]), np.int8)
    tied = np.ones(len(codes[0]), bool)
    for c, w in zip(codes, pivot, strict=True):
        out[tied & (c < w)] = -1
        out[tied & (c > w)] = 1
        tied &= c == w
    return out


def _gather(runs, which, at):
    """``(keys, values or None)``: element ``at[n]`` of run ``which[n]`` for every n."""
    keys = np.concatenate([parts(runs[j])[0][p:p + 1] for j, p in zip(which, at, strict=True)])
    if parts(runs[0])[1] is None:
        return keys, None
    return keys, np.concatenate([parts(runs[j])[1][p:p + 1]
                                 for j, p in zip(which, at, strict=True)])


def run_searcher(runs, order):
    """``before`` of ``distsort.plan.kway.co_ranks`` on host runs: ``numpy.searchsorted`` in
    each run where the order is that of the keys themselves (ascending keys, a pivot
    that is no float zero or NaN), then, where there are values of integers, in the
    values of the pivot's equal keys; else the binary searches of every run in one step
    at a time on the codes (one NumPy call per step for all runs).  Runs that are not
    aligned (slices received from another worker may not be) take the second way:
    ``numpy.searchsorted`` copies an unaligned array whole on every call.

    >>> from distsort.backends import Order
    >>> from distsort.plan.kway import co_ranks
    >>> runs = [np.array([1., 3., 5.]), np.array([-0.0, 0.0, 3.]), np.array([np.nan])]
    >>> co_ranks([3, 3, 1], 4, run_searcher(runs, Order()))
    (2, 2, 0)
    >>> runs = [(np.array([1, 3, 3]), np.array([0, 2, 9])), (np.array([3, 3]), np.array([1, 5]))]
    >>> co_ranks([3, 2], 3, run_searcher(runs, Order(keyed=True)))
    (2, 1)
    """
    generic = _code_searcher(runs, order)
    keys = [parts(r)[0] for r in runs]
    values = [parts(r)[1] for r in runs]
    if order.descending or keys[0].dtype.kind not in "biuf" or (
            values[0] is not None and values[0].dtype.kind not in "biu") or not all(
            a.flags.aligned for a in keys + values if a is not None):
        return generic

    def before(i, p, lo, hi):
        v = keys[i][p]
        if keys[i].dtype.kind == "f" and (np.isnan(v) or v == 0):  # -0.0 < +0.0, NaNs
            return generic(i, p, lo, hi)
        # equal elements of a lower run come first, of a higher one after
        return [p if j == i else a + _count_before(keys[j], values[j], a, b, v,
                                                   None if values[i] is None
                                                   else values[i][p],
                                                   "right" if j < i else "left")
                for j, (a, b) in enumerate(zip(lo, hi, strict=True))]
    return before


def _count_before(keys, values, a, b, key, value, side):
    """Elements of ``keys[a:b]`` (sorted; ties sorted by ``values``, where given) before
    the pivot ``(key, value)``, its equals counted where ``side`` is ``"right"``."""
    if values is None:
        return int(np.searchsorted(keys[a:b], key, side))
    first, last = np.searchsorted(keys[a:b], key, "left"), np.searchsorted(keys[a:b], key,
                                                                           "right")
    return int(first + np.searchsorted(values[a + first:a + last], value, side))


def _code_searcher(runs, order):
    """``run_searcher`` on the order codes, for every order."""
    return _lockstep_before(lambda act, mid: probe_codes(*_gather(runs, act, mid), order),
                            len(runs))


def codes_searcher(runs):
    """``before`` of ``distsort.plan.kway.co_ranks`` for runs given as their order codes
    (each a tuple of code arrays, most significant first): the windows of runs that
    lie elsewhere (on disk), read into memory.

    >>> from distsort.plan.kway import co_ranks
    >>> runs = [(np.array([1, 3, 3], np.uint64),), (np.array([3, 4], np.uint64),)]
    >>> co_ranks([3, 2], 3, codes_searcher(runs))  # ties: the first run first
    (3, 0)
    """
    width = len(runs[0]) if runs else 0
    flat = [np.concatenate([r[c] for r in runs]) for c in range(width)]
    offsets = np.cumsum([0] + [len(r[0]) for r in runs[:-1]]).astype(np.int64)
    return _lockstep_before(lambda act, mid: tuple(c[offsets[act] + mid] for c in flat),
                            len(runs))


def _lockstep_before(codes_at, k):
    """``before`` of ``co_ranks`` for ``k`` runs whose codes ``codes_at(which, at)``
    gives (element ``at[n]`` of run ``which[n]`` for every n): the binary searches of
    every run in one step at a time."""
    def before(i, p, lo, hi):
        pivot = codes_at(np.full(k, i), np.full(k, p))
        a, b = np.array(lo, np.int64), np.array(hi, np.int64)
        a[i] = b[i] = p
        lower = np.arange(k) < i  # equal elements of lower runs come first
        return _search_codes(codes_at, pivot, a, b, lower).tolist()
    return before


def _search_codes(probe, pivots, a, b, lower):
    """Binary searches in lock step, one per pivot: search ``n`` narrows ``[a[n], b[n])``
    to the first element not before ``pivots`` entry ``n`` (order codes, or tuples of
    them), its equals counted before where ``lower[n]``.  ``probe(act, mid)``: the codes
    of element ``mid[m]`` of search ``act[m]``.  Returns ``a``."""
    while True:
        act = np.flatnonzero(a < b)
        if not act.size:
            return a
        mid = (a[act] + b[act]) // 2
        cmp = _compare(probe(act, mid), tuple(c[act] for c in pivots)
                       if isinstance(pivots, tuple) else pivots[act])
        go = (cmp < 0) | ((cmp == 0) & lower[act])
        a[act[go]] = mid[go] + 1
        b[act[~go]] = mid[~go]


def run_sample(run, step):
    """The elements of ``run`` at ``step - 1, 2 * step - 1, ...``, copied to the host
    (``distsort.plan.kway.brackets``; a run on a GPU gives a NumPy sample).

    >>> run_sample(np.arange(10), 3).tolist()
    [2, 5, 8]
    """
    keys, values = parts(run)
    at = slice(step - 1, None, step)
    return make_run(host_copy(keys, at), None if values is None else host_copy(values, at))


def merge_samples(samples, order):
    """The run of each sample of every run, in the order of their merge (ties: the
    lower run, then the position).

    >>> from distsort.backends import Order
    >>> merge_samples([np.array([3., 7.]), np.array([np.nan, 3.])], Order())
    array([0, 1, 0, 1])
    """
    return merge_codes([_as_codes(probe_codes(*parts(s), order)) for s in samples])


def merge_codes(codes):
    """The run of each element of ``codes`` (per run, a tuple of code arrays, most
    significant first) in the order of their merge (ties: the lower run, then the
    position).

    >>> merge_codes([(np.array([3, 7], np.uint8),), (np.array([3, 4], np.uint8),)])
    array([0, 1, 1, 0])
    """
    runs = np.concatenate([np.full(len(c[0]), j, np.int64) for j, c in enumerate(codes)])
    joined = [np.concatenate([c[w] for c in codes]) for w in range(len(codes[0]))]
    # Joined in run order, then position: a stable sort of the codes breaks ties so.
    if len(joined) == 1:
        return runs[np.argsort(joined[0], kind="stable")]
    return runs[np.lexsort(joined[::-1])]


def _as_codes(codes):
    return codes if isinstance(codes, tuple) else (codes,)


def _joined(pieces):
    """``(keys, values or None)`` of ``pieces`` one after the other."""
    keys = np.concatenate([parts(p)[0] for p in pieces])
    if parts(pieces[0])[1] is None:
        return keys, None
    return keys, np.concatenate([parts(p)[1] for p in pieces])


def count_before(run, j, pivots, order):
    """For each of ``pivots`` (``(i, p, element)``: element ``p`` of run ``i``, a run
    of one element), how many elements of ``run``, run ``j`` of the merge, come before
    it: its equals where ``j < i``.  The binary searches of all pivots go in lock step
    on the order codes (of a run on a GPU, each step's elements gathered there and
    read back: a few bytes per pivot).

    >>> from distsort.backends import Order
    >>> run = np.array([1, 3, 3, 5])
    >>> count_before(run, 1, [(0, 9, np.array([3])), (2, 0, np.array([3])),
    ...                       (1, 2, np.array([3]))], Order()).tolist()
    [1, 3, 2]
    """
    which = np.array([i for i, _, _ in pivots], np.int64)
    out = np.array([p for _, p, _ in pivots], np.int64)
    other = np.flatnonzero(which != j)
    if not other.size:
        return out
    keys, values = parts(run)
    out[other] = _search_codes(
        lambda act, mid: probe_codes(host_copy(keys, mid),
                                     None if values is None else host_copy(values, mid), order),
        probe_codes(*_joined([pivots[n][2] for n in other]), order),
        np.zeros(other.size, np.int64), np.full(other.size, length(run), np.int64),
        j < which[other])  # equal elements of a lower run come first
    return out


def pick(chunk, part):
    """Keys (``part`` 0) or values (1) of a merged output chunk."""
    return parts(chunk)[part]


@dataclass(frozen=True)
class HostRuns(Backend):
    """The backend of an out-of-core sort: runs in host memory merged by ``engine``
    (``"gpu"`` or ``"cpu"``) in segments of ``segment`` elements, within a device
    ``budget`` in bytes (None: no limit).  ``read``: how a task reads a persisted
    chunk that it names without depending on it (``distsort.cluster.held.read_held``; the
    scheduling floor hands it down).  ``runs``: elements of each run of the sort, where
    the graph knows them (the k-way merge's), so that the engine holds host memory for
    those runs and no more."""

    engine: str = "cpu"
    segment: int = 1 << 24
    budget: int | None = None
    read: Callable | None = None
    runs: tuple[int, ...] = ()

    name = "host-runs"
    #: Whether an exchange's output chunk is made by sorting its slices joined
    #: (``merge_by_sort``) rather than by the engine's k-way merge of them.
    merges_by_sort = False

    def _engine(self):
        if self.engine == "gpu":
            from distsort.backends.outofcore import stream_gpu
            return stream_gpu
        from distsort.backends.outofcore import stream_cpu
        return stream_cpu

    # -- runs from the input chunks
    def stage(self, chunk):
        """The chunk in host memory (pinned on GPU workers): taken off the GPU at once,
        so that forming a run holds nothing of the input on the device."""
        return self._engine().to_host(chunk)

    def stage_held(self, held):
        """``stage`` of a persisted chunk read where its worker holds it (``read``: a
        spilled CuPy chunk is read from its host copy).  Under a budget, a chunk that
        dask-cuda keeps on the device is spilled first and read from the host copy
        that makes: forming the runs would spill it to make room anyway, and a copy of
        the sort's own would hold the chunk in host memory twice."""
        if self.budget is not None:
            dask_cuda_store.spill(dask_cuda_store.current(), held.key)
        return self.stage(self.read(held))

    def make_run(self, keys, values, order, starts=None):
        """The sorted run of the chunks ``keys`` (and ``values``, or each chunk's positions
        from its entry of ``starts``), in host memory."""
        return self._engine().sort_run(keys, values, order, starts, self.budget, self.runs)

    # -- the backend interface of the network
    length = staticmethod(length)
    crossing_bound = staticmethod(crossing_bound)

    @staticmethod
    def probe(run, stride, top, order):
        keys, values = parts(run)
        n = len(keys)
        index = np.arange(n - 1, -1, -stride) if top else np.arange(0, n, stride)
        return probe_codes(keys[index], None if values is None else values[index], order)

    @staticmethod
    def head(run, k):
        return slice_run(run, 0, k)

    @staticmethod
    def tail(run, k):
        return slice_run(run, length(run) - k, length(run))

    def merge_low(self, a, b_head, order):
        """The ``len(a)`` smallest of ``a`` and the higher run whose head is ``b_head``."""
        return split_low(a, b_head, crossing_count(a, b_head, order),
                         lambda x, y: self._merge(x, y, order))

    def merge_high(self, b, a_tail, order):
        """The ``len(b)`` largest of ``b`` and the lower run whose tail is ``a_tail``."""
        return split_high(b, a_tail, crossing_count(a_tail, b, order),
                          lambda x, y: self._merge(x, y, order))

    def _merge(self, x, y, order):
        cuts = segments(x, y, self.segment, order)
        return self._engine().merge(x, y, cuts, order, self.budget)

    # -- the k-way merge (distsort.plan.kway, distsort.graph.outofcore.merge_chunk)
    def kway_segment(self, run, chunk, like_gpu, fraction):
        """Elements per segment of a k-way merge of runs like ``run`` into an output
        chunk of ``chunk`` elements, within ``fraction`` of the budget."""
        keys, values = parts(run)
        return self._engine().kway_segment(keys.dtype, None if values is None else
                                           values.dtype, chunk, like_gpu,
                                           self.budget, fraction)

    def merge_segments(self, runs, cuts, order, like_gpu):
        """One output chunk: each segment's slices of ``runs`` between consecutive
        co-ranks of ``cuts``, merged by the engine (on the GPU when ``like_gpu``)."""
        return self._engine().merge_segments(runs, cuts, order, like_gpu, self.budget)

    def record(self, phase, seconds):
        """Count ``seconds`` in the engine's ``phase`` (timed on the GPU engine)."""
        self._engine().record(phase, seconds)

    # -- output chunks
    def output(self, run, start, stop, part, like_gpu):
        """Keys (``part`` 0) or values (1) ``start:stop`` of a run, as an output chunk:
        on the GPU when ``like_gpu`` (the input's chunks were CuPy arrays)."""
        return self._engine().output(parts(run)[part][start:stop], like_gpu, self.budget)
