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

from typing import NamedTuple

from distsort.plan.network import Round, plan_network

__all__ = ["OutOfCorePlan", "plan_out_of_core", "needs_out_of_core", "run_lengths",
           "bytes_moved", "RUN_FRACTION", "SEGMENT_FRACTION", "IN_MEMORY_FRACTION"]

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


def needs_out_of_core(nbytes: int, budgets) -> bool:
    """Whether ``nbytes`` of data (keys and values) outgrow the workers' device
    budgets (bytes each; None where a worker has none): no budget, no out of core.

    >>> needs_out_of_core(16 * 2**30, [4 * 10**9]), needs_out_of_core(10**9, [4 * 10**9])
    (True, False)
    >>> needs_out_of_core(10**12, [None])
    False
    """
    budgets = list(budgets)
    if not budgets or not all(budgets):  # a worker without a budget may use its whole GPU
        return False
    return nbytes > IN_MEMORY_FRACTION * sum(budgets)


def plan_out_of_core(chunks, itemsize: int, budget: int) -> OutOfCorePlan:
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


def run_lengths(chunks, run_chunks: int) -> tuple[int, ...]:
    """Elements in each run: the sums of ``run_chunks`` consecutive chunks.

    >>> run_lengths((4, 4, 4, 4, 2), 2)
    (8, 8, 2)
    """
    return tuple(sum(chunks[i:i + run_chunks]) for i in range(0, len(chunks), run_chunks))


def bytes_moved(plan: OutOfCorePlan, lengths, itemsize: int) -> int:
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


def _fmt(n):
    from distsort.core.memory import format_bytes
    return format_bytes(n)


def group_by_owner(owners) -> tuple[int, ...]:
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
    owners = list(owners)
    if len(owners) <= 1 or not any(owners):
        return tuple(range(len(owners)))
    first = {}
    for o in owners[:-1]:
        first.setdefault(o, len(first))
    body = sorted(range(len(owners) - 1), key=lambda i: (first[owners[i]], i))
    return (*body, len(owners) - 1)
