"""Out of core: the plan of a sort larger than the GPUs' memory, in integers alone.

A worker's device budget ``B`` (dask-cuda's ``device_memory_limit``, or the Dask
config value ``distsort.device-memory-limit``) bounds what a sort keeps on its GPU.
Past it, distsort keeps the chunks as **sorted runs in pinned host memory** and
streams them through the GPU; nothing goes through Dask's spilling.  The design and
its measured figures: ``docs/out_of_core.md``.

1. *Runs.*  Every ``G`` consecutive chunks (``G`` as large as the budget allows)
   are copied to the GPU, sorted there as one (the in-place bitonic kernels: no second
   copy), and copied back to pinned host memory: the network's first
   ``L (L + 1) / 2`` rounds (``L = log2 G``) on resident data, for one trip each way.
2. *One k-way merge between runs* (``distsort.plan.kway``), where its cost model says so
   (``kway.choose_merge``: slices that are not tiny).  Each output chunk
   is one task: the co-ranks of its segments' ends in the ``R = ceil(C / G)`` runs
   (a k-way binary search in host memory, one task for all chunks before any merge),
   then each segment's ``R`` slices copied to the GPU, sorted there as one by CUB's
   radix sort on the order codes, and copied back (and kept on the device for CuPy
   output), two segments in flight on two streams.  Runs on several workers (each forms
   the runs of the chunks it holds) find the co-ranks from samples and windows, small
   messages, and send each output chunk's slices once to the worker that merges it
   (``outofcore_graph.exchange_layers``).
3. *Otherwise the network between runs* (tiny budgets): the
   bitonic network on the runs (``distsort.plan.network.plan_network``), where a compare-split
   of two host runs is a binary search for the crossing count in host memory and two
   merges that stream through the GPU in segments.
4. *Finish.*  After the network, each output chunk is a slice of a run (copied to the
   GPU for CuPy output); after the k-way merge the merged chunks are the output.
5. *Runs on disk.*  Files larger than host memory (the command's disk path,
   ``distsort.io.disksort``) take the same plan with the host's memory as the budget
   and the runs on disk (:func:`plan_disk_sort`): runs of equal sizes, as many kept in
   memory as fit, one k-way merge in segments whose ends' co-ranks come from the runs'
   samples (``kway.Samples``) and a window of every run (``kway.co_ranks``).

Host memory (``distsort.backends.outofcore``): the input stays where it is (pageable
input reaches the GPU through a small ring of pinned buffers filled by several
threads; a CuPy chunk still on the device is spilled by dask-cuda first and read from
that copy); the runs are page-locked blocks made once per worker, as many as the
sort's runs, and reused by later sorts.  Each merged segment is copied back into the
run memory it was merged from: for CuPy output into the run ranges it read (on the
stream that read them), which are the output chunk's host copy; for NumPy output into
the run pages its chunk has read whole, which the chunk then maps at one address
(``distsort.backends.outofcore.pages``).  Host memory holds the input and the runs,
once, for either output.

The floor: with ``N`` bytes of keys (and values) and pinned copies at ``b`` bytes/s in
each direction while both run (separate DMA engines), the k-way merge moves every byte
once each way to form the runs and once each way to merge them::

    floor = (2 * N + N_in) / b      (N_in = N for CuPy input taken off the GPU, else 0)

16 GiB of float32 with a 4 GB budget: runs of 3 chunks of 1 GiB, 6 runs, 32 GiB each
way (``kway.kway_bytes_moved``; 48 GiB device to host for CuPy input).  The network
between the same runs moves ``(1 + r) * N`` with ``r = 6`` rounds of 2 or 3
compare-splits: 98 GiB each way (``bytes_moved``).  Measured times against this floor:
``docs/out_of_core.md``.
Not counted in the floor: pageable input (NumPy chunks, CuPy chunks that dask-cuda has
spilled, read where it keeps them: ``distsort.cluster.held``) is copied into the staging ring on
the host; CuPy input still on the device is spilled first, through the same ring; the
CuPy output chunks, which dask-cuda spills again, spill to their pinned host copies
without a copy (``distsort.backends.outofcore.hostbacked``).

Examples
--------
>>> p = plan_out_of_core((2**28,) * 16, itemsize=4, budget=4 * 10**9)
>>> p.run_chunks, p.runs, len(p.rounds)
(3, 6, 6)
>>> p.segment >= 2**24
True
"""
from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from distsort.plan.kway import segment_bounds
from distsort.plan.network import Round, plan_network

__all__ = ["OutOfCorePlan", "plan_out_of_core", "needs_out_of_core", "run_lengths",
           "bytes_moved", "RUN_FRACTION", "SEGMENT_FRACTION", "IN_MEMORY_FRACTION",
           "DiskPlan", "plan_disk_sort", "needs_disk", "element_bytes", "spread", "disk_room",
           "run_cuts", "IN_MEMORY_COPIES", "MEMORY_SHARE", "WORK_SHARE", "MAX_RUNS", "STRIDE",
           "MIN_STRIDE"]

#: Part of the budget a run may take on the GPU while it is sorted in place (the rest:
#: the CUDA context's share of the pool, the crossing count, what Dask holds there).
RUN_FRACTION = 0.85
#: Part of the budget the segments of a streaming merge take: two segments in flight,
#: each its two inputs and its output (``2 * 2 * segment`` elements).
SEGMENT_FRACTION = 0.8
#: Above this part of the workers' budgets, a sort runs out of core: an in-memory
#: compare-split holds its chunk, the partner's crossing part and its output.
IN_MEMORY_FRACTION = 0.5


class OutOfCorePlan(NamedTuple):
    """How an out-of-core sort runs: ``run_chunks`` chunks per run, ``runs`` runs,
    the network ``rounds`` between runs, and merges in segments of ``segment``
    elements."""

    run_chunks: int
    runs: int
    rounds: tuple[Round, ...]
    segment: int


def needs_out_of_core(nbytes: int, budgets: Iterable[int | None]) -> bool:
    """Whether ``nbytes`` of data (keys and values) outgrow the workers' device
    budgets (bytes each; None where a worker has none): no budget, no out of core.

    >>> needs_out_of_core(16 * 2**30, [4 * 10**9]), needs_out_of_core(10**9, [4 * 10**9])
    (True, False)
    >>> needs_out_of_core(10**12, [None])
    False
    """
    limits = list(budgets)
    if not limits or not all(limits):  # a worker without a budget may use its whole GPU
        return False
    return nbytes > IN_MEMORY_FRACTION * sum(b for b in limits if b)


def plan_out_of_core(chunks: Sequence[int], itemsize: int, budget: int) -> OutOfCorePlan:
    """The plan for a regular chunking ``chunks`` (``distsort.plan.network.is_regular``) of
    elements of ``itemsize`` bytes (keys and values) under a device ``budget`` in bytes.

    Raises MemoryError when one chunk alone cannot be sorted within the budget, with
    the chunk size that would fit.

    >>> plan_out_of_core((100,) * 10, 4, budget=1000).run_chunks
    2
    >>> plan_out_of_core((100,) * 10, 4, budget=400)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    MemoryError: a chunk of 100 elements of 4 bytes (400 B) does not fit ... at most 85 elements...
    """
    m = int(chunks[0]) if chunks else 0
    usable = int(budget * RUN_FRACTION)
    if m * itemsize > usable:
        fit = usable // itemsize
        raise MemoryError(
            f"a chunk of {m} elements of {itemsize} bytes ({_fmt(m * itemsize)}) does not "
            f"fit the device budget of {_fmt(budget)} for out-of-core sorting (runs take "
            f"{RUN_FRACTION:.0%} of it): rechunk to at most {fit} elements, or raise the "
            f"budget")
    g = max(1, min(len(chunks), usable // max(1, m * itemsize)))
    runs = -(-len(chunks) // g)
    segment = max(1, int(budget * SEGMENT_FRACTION) // (4 * itemsize))
    return OutOfCorePlan(g, runs, plan_network(runs), segment)


def run_lengths(chunks: Sequence[int], run_chunks: int) -> tuple[int, ...]:
    """Elements in each run: the sums of ``run_chunks`` consecutive chunks.

    >>> run_lengths((4, 4, 4, 4, 2), 2)
    (8, 8, 2)
    """
    return tuple(sum(chunks[i:i + run_chunks]) for i in range(0, len(chunks), run_chunks))


def bytes_moved(plan: OutOfCorePlan, lengths: Sequence[int], itemsize: int) -> int:
    """Bytes the plan copies host to device (the same device to host): the runs once,
    then both runs of every compare-split of the network (the floor's numerator).

    >>> p = plan_out_of_core((100,) * 8, 4, budget=1000)
    >>> p.runs, len(p.rounds), bytes_moved(p, run_lengths((100,) * 8, p.run_chunks), 4)
    (4, 3, 12800)
    """
    moved = sum(lengths)
    for rnd in plan.rounds:
        moved += sum(lengths[lo] + lengths[hi] for lo, hi in rnd.pairs)
    return moved * itemsize


def _fmt(n: int | float) -> str:
    from distsort.core.memory import format_bytes
    return format_bytes(n)


def group_by_owner(owners: Iterable[Hashable | None]) -> tuple[int, ...]:
    """Network positions for chunks held by ``owners`` (a worker per chunk, None where
    unknown): the chunks of one worker take consecutive positions, so that runs form
    where their chunks are and the early rounds pair runs of one worker.  The last
    chunk, which may be shorter, keeps the last position (only the last run may be
    short).  Returns ``perm``: position ``p`` takes chunk ``perm[p]``.

    >>> group_by_owner(["a", "b", "a", "b", "a"])
    (0, 2, 1, 3, 4)
    >>> group_by_owner([None, None, None])
    (0, 1, 2)
    """
    held = list(owners)
    if len(held) <= 1 or not any(held):
        return tuple(range(len(held)))
    first: dict[Hashable | None, int] = {}
    for o in held[:-1]:
        first.setdefault(o, len(first))
    body = sorted(range(len(held) - 1), key=lambda i: (first[held[i]], i))
    return (*body, len(held) - 1)


# -- runs on disk: files larger than host memory (``distsort.io.disksort``)
#
# The same plan with the runs in files instead of pinned memory: runs that the host's
# memory bounds (``tasks`` sorting at once, :func:`element_bytes` each per element),
# as many kept in memory as the rest of it holds, then one k-way merge in segments
# whose ends' co-ranks come from every ``stride``-th element of each run kept in
# memory (``kway.Samples``) and one read of a window of every run (``kway.co_ranks``).

#: A sort in memory holds its data about this many times over (chunks, sorted
#: copies, outputs waiting for the disk): past it, the command takes the disk path.
IN_MEMORY_COPIES = 3
#: Share of the memory available that the disk path takes: others' processes keep the
#: rest, and the page cache, which large reads and writes bypass (``O_DIRECT``) and the
#: small ones (the windows of the co-ranks, partial pages) need little of.
MEMORY_SHARE = 0.75
#: Share of the disk path's memory that its tasks in flight take (each one run or
#: segment, :func:`element_bytes` per element); the runs that the rest holds stay in
#: memory.  Runs cut to fit this share still pass the disk in large sequential
#: transfers, and every byte kept in memory saves two trips through the disk.
WORK_SHARE = 0.3
#: Runs at most that a smaller share for the tasks may make: each merge segment reads a
#: slice of every run and searches every run for its co-ranks (1 GiB within 61 MiB:
#: the merge of 504 runs of 2 MiB took 35.8 s, of 151 runs of 6.8 MiB 6.9 s), so the
#: tasks take more of the memory rather than cut more runs.
MAX_RUNS = 64
#: Elements between two samples kept in memory per run, at most: a segment's end reads
#: and searches a window of about two strides of every run (``kway.Samples``).  Where
#: runs are many and segments small, the plan takes a stride that keeps those reads to
#: an eighth of a segment, down to ``MIN_STRIDE`` (more samples in memory instead).
STRIDE = 1 << 12
MIN_STRIDE = 1 << 8


def needs_disk(nbytes: int, memory: int) -> bool:
    """Whether a sort of ``nbytes`` (keys and values) goes through the disk: it does
    not fit ``memory`` (bytes of host memory) ``IN_MEMORY_COPIES`` times over.

    >>> needs_disk(30 * 2**30, 22 * 2**30), needs_disk(2**30, 22 * 2**30)
    (True, False)
    """
    return nbytes * IN_MEMORY_COPIES > memory


def element_bytes(key_size: int, payload_size: int, order: str) -> int:
    """Bytes of host memory an element takes while a task sorts it: read, scratch and
    sorted copies of keys alone; keyed, the keys and the payload read and moved, up to
    four 8-byte order codes and the permutation.

    >>> element_bytes(4, 0, "sort"), element_bytes(4, 8, "stable")
    (12, 64)
    """
    if order == "sort":
        return 3 * key_size
    return 2 * (key_size + payload_size) + 5 * 8


@dataclass(frozen=True)
class DiskPlan:
    """How a sort through the disk runs: run lengths (elements, in input order),
    elements per merge segment, tasks in flight at once, the elements between two
    samples kept in memory, and which runs stay in memory (a bool per run; the others
    go to the disk)."""

    runs: tuple[int, ...]
    segment: int
    tasks: int
    stride: int = STRIDE
    kept: tuple[bool, ...] = ()

    @property
    def n(self) -> int:
        return sum(self.runs)

    def is_kept(self, r: int) -> bool:
        return bool(self.kept) and self.kept[r]

    @property
    def kept_elements(self) -> int:
        """Elements of the runs kept in memory."""
        return sum(n for r, n in enumerate(self.runs) if self.is_kept(r))


def plan_disk_sort(n: int, per_element: int, memory: int, tasks: int = 3,  # noqa: PLR0913, PLR0917
                   stride: int = STRIDE, kept_bytes: int = 0) -> DiskPlan:
    """Runs and segments of a sort of ``n`` elements of ``per_element`` bytes
    (:func:`element_bytes`) within ``memory`` bytes, ``tasks`` of them at once.

    ``stride``: the samples' stride at most (see ``STRIDE``).
    ``kept_bytes``: the bytes an element of a sorted run takes (its key and payload);
    where given, the tasks take ``WORK_SHARE`` of the memory (more where that makes
    over ``MAX_RUNS`` runs) and runs stay in memory as far as the tasks leave room for
    them (:func:`spread`), else every run goes to the disk.

    >>> p = plan_disk_sort(10_000, 12, 60_000, tasks=3)
    >>> p.runs, p.segment
    ((1428, 1429, 1428, 1429, 1428, 1429, 1429), 1666)
    >>> p = plan_disk_sort(10_000, 12, 30_000, tasks=3, kept_bytes=4)
    >>> len(p.runs), p.kept_elements  # elements of the runs kept in memory
    (40, 5250)
    >>> plan_disk_sort(10, 4, 1000, tasks=2).runs
    (10,)
    >>> plan_disk_sort(0, 4, 1000).runs
    ()
    >>> plan_disk_sort(12, 12, 120, tasks=1, kept_bytes=8).kept  # 36 bytes for the task
    (False, True, True, True)
    """
    piece = max(1, int(memory) // (int(tasks) * int(per_element)))
    if kept_bytes:
        piece = min(piece, max(1, int(memory * WORK_SHARE) // (int(tasks) * int(per_element)),
                               -(-n // MAX_RUNS)))
    runs = run_cuts(n, piece)
    kept: tuple[bool, ...] = ()
    if kept_bytes and runs:
        room = int(memory) - int(tasks) * int(per_element) * max(runs)
        kept = spread(max(0, room) // (max(runs) * int(kept_bytes)), len(runs))
    segment = max(1, min(piece, n))
    stride = min(int(stride), max(MIN_STRIDE, segment // (16 * max(1, len(runs)))))
    return DiskPlan(runs, segment, int(tasks), max(1, stride), kept)


def spread(k: int, count: int) -> tuple[bool, ...]:
    """``k`` of ``count`` places marked True, evenly apart (all where ``k >= count``).

    >>> spread(2, 5), spread(9, 3)
    ((False, False, True, False, True), (True, True, True))
    """
    k = min(int(k), count)
    return tuple((i + 1) * k // count > i * k // count for i in range(count))


def disk_room(run_bytes: int, output_bytes: int, flight_bytes: int, punch: bool) -> int:
    """Bytes of free disk the sort needs beside its input: the runs (in the outputs'
    temporaries and, for ``--argsort``, the keys' runs), then the merged outputs as
    they grow, less the runs freed behind them (``punch``), with the segments in
    flight; without hole punching, both in full.

    >>> disk_room(100, 100, 10, True), disk_room(100, 100, 10, False)
    (110, 200)
    """
    return run_bytes + (flight_bytes if punch else output_bytes)


def run_cuts(n: int, piece: int) -> tuple[int, ...]:
    """Lengths of the runs that cut ``n`` elements into as few runs of at most
    ``piece`` elements as there can be, of equal sizes (``kway.segment_bounds``).

    >>> run_cuts(10, 4), run_cuts(0, 4)
    ((3, 3, 4), ())
    """
    if not n:
        return ()
    return tuple(b - a for a, b in itertools.pairwise(segment_bounds((n,), piece)[0]))
