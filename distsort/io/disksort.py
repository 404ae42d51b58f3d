"""Sorting files larger than host memory: the out-of-core sort with its runs on local
disk (the driver of ``distsort sort``'s disk path, ``distsort.cli.ondisk``).

The plan is the out-of-core plan's (``distsort.plan.outofcore.plan_disk_sort``): runs,
then one k-way merge in segments (``distsort.plan.kway``); where the runs live and what
a task does to them is the disk backend's (``distsort.backends.disk``).

1. *Runs.*  The input is cut into runs that a few threads sort at once within a
   share of the memory budget (keys alone by the radix sort of
   :mod:`distsort.backends.cpu.radix`, keyed ones by NumPy's stable sorts of
   distsort's order codes).  As many runs as the rest of the budget holds stay in
   memory (spread over the input, so that the disk is busy evenly); the others are
   written where the output will be: into the output's own temporary file (the keys'
   runs of ``--argsort`` into one more temporary).  Every ``stride``-th element's
   order code stays in memory: the runs' samples (``kway.Samples``).
2. *Merge.*  The output is cut into segments of a size the budget holds
   (``kway.segment_bounds``); each segment's boundaries are exact co-ranks (ties to the
   lower run, so stable orders stay stable): the samples bound each run's co-rank to
   a window of about two strides (``kway.Samples.windows``), one read of every window
   gives its codes, and ``kway.co_ranks`` finds the co-ranks within them
   (:func:`co_ranks_on_disk`).  A segment takes its slice of every run (from memory,
   or by large sequential reads), sorts them as one and writes them into a new
   temporary at its place in the output; the runs' consumed parts on the disk are
   freed as the merge passes them (``fallocate``'s hole punching), so the disk holds
   the data about once, not twice.  The new temporary then replaces the output's,
   which the command publishes as any other (``distsort.cli.outputs.publish``).

The disk moves every byte of the input and the output once, and every byte of the
runs it holds twice: with a share ``m`` of the data kept in memory, ``2 + 2 * (1 - m)``
times the data, against a copy's two.  Two threads read, one writes and one per core
sorts (``distsort.backends.disk.pipeline.Pipeline``), so that the disk and the cores
are busy at once.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

from distsort.backends import Order
from distsort.backends.disk.files import Region, can_free, merged_file
from distsort.backends.disk.pipeline import READERS, Pipeline
from distsort.backends.disk.runs import (ORDERS, Frontier, RunStore, run_sample, sort_piece,
                                         sortable_dtype)
from distsort.backends.outofcore.hostruns import codes_searcher, merge_codes
from distsort.core.order import TIME_KINDS, as_sortable, from_sortable
from distsort.plan.kway import Samples, co_ranks, segment_bounds
from distsort.plan.outofcore import (IN_MEMORY_COPIES, MEMORY_SHARE, STRIDE, disk_room,
                                     element_bytes, needs_disk, plan_disk_sort)

#: What the command's disk path (``distsort.cli.ondisk``, which reaches the engine
#: through this module alone) takes from here.
__all__ = ["DiskJob", "disk_sort", "summaries", "co_ranks_on_disk", "Region", "can_free",
           "merged_file", "sortable_dtype", "plan_disk_sort", "element_bytes", "needs_disk",
           "disk_room", "IN_MEMORY_COPIES", "MEMORY_SHARE", "STRIDE", "READERS", "ORDERS"]


# ------------------------------------------------------------------ the sort
@dataclass
class DiskJob:
    """What the disk path sorts and where.

    ``read_keys(start, stop, out)`` / ``read_payload(start, stop)`` read the input
    (into ``out`` where it can; the payload: the values, or None; ``positions``:
    argsort's int64 positions instead), keys of ``dtype``;
    ``runs``: a :class:`Region` for the keys' runs and one for the payload's (or
    None); ``outputs``: the Regions the merge writes the keys and the payload into
    (None: not an output, as argsort's keys), in the outputs' dtypes.
    """

    n: int
    dtype: np.dtype
    read_keys: object
    read_payload: object
    positions: bool
    order: str
    descending: bool
    runs: tuple
    outputs: tuple
    #: Optional summaries of ``--verify``: ``summarize_in(keys, payload, start)`` of
    #: each input piece, ``summarize_out(keys, payload)`` of each output segment.
    summarize_in: object = None
    summarize_out: object = None
    #: The byte offset in the input file of element ``i`` (``keys_at(i)``) where
    #: ``read_keys`` reads a file straight: its buffer is then laid out as the file is,
    #: and whole pages are read in place (:func:`_direct_read`).
    keys_at: object = None

    @property
    def times_descending(self):
        """Whether the keys are times sorted descending: then their codes hold the
        order (``distsort.core.order.time_codes``, NaT last) and sort ascending."""
        return self.descending and np.dtype(self.dtype).kind in TIME_KINDS

    @property
    def codes_descending(self):
        """Whether the keys' codes (:func:`distsort.core.order.as_sortable`) sort descending."""
        return self.descending and not self.times_descending


def _payload(job, start, stop):
    if job.positions:
        return np.arange(start, stop, dtype=np.int64)
    return None if job.read_payload is None else as_sortable(job.read_payload(start, stop))


def form_runs(job, plan, pipeline, progress=None):
    """Sort the input's runs into a ``RunStore`` over ``job.runs``; returns it, the
    runs' samples (``run_sample``) and the input pieces' summaries."""
    store = RunStore(job.runs, plan.runs, plan.kept)
    bounds = store.starts

    def read(r, slot):
        start, stop = bounds[r], bounds[r + 1]
        at = None if job.keys_at is None else job.keys_at(start)
        buf = slot.array("in", stop - start, job.dtype, at)
        keys = as_sortable(job.read_keys(start, stop, buf), job.times_descending)
        return r, buf, keys, _payload(job, start, stop)

    def sort(state, slot):
        r, buf, keys, payload = state
        start = bounds[r]
        summary = job.summarize_in(keys, payload, start) if job.summarize_in else None
        kept = plan.is_kept(r)
        out = (np.empty(len(keys), keys.dtype) if kept
               else slot.array("out", len(keys), keys.dtype, job.runs[0].at(start)))
        keys, payload = sort_piece(keys, payload, job.order, job.codes_descending, out)
        if kept:  # a run kept must not lie in a task's buffers, which the next task takes
            keys, payload = (None if a is None else a.copy() if np.may_share_memory(a, buf)
                             else a for a in (keys, payload))
        codes = run_sample(keys, payload, job.order, job.codes_descending, plan.stride)
        return r, keys, payload, codes, summary

    def write(state, slot):
        r, keys, payload, codes, summary = state
        store.put(r, keys, payload)
        return codes, summary

    done = pipeline(range(len(plan.runs)), read, sort, write, progress, "runs")
    return store, [d[0] for d in done], [d[1] for d in done]


def co_ranks_on_disk(rank, lo, hi, codes):
    """The co-ranks of ``rank`` in runs that lie on disk, each run's within
    ``[lo[j], hi[j]]`` (a window of ``kway.Samples.windows``, clipped below at the
    previous segment's end: what lies below may be freed): each window read once
    (``codes(j, lo, hi)``: the order codes of elements ``lo:hi`` of run ``j``), and
    ``kway.co_ranks`` within them.

    >>> runs = [np.array(r, np.uint32) for r in ([1, 3, 5, 7], [2, 3, 6], [0, 8])]
    >>> co_ranks_on_disk(4, [0, 0, 0], [4, 3, 2], lambda j, lo, hi: (runs[j][lo:hi],))
    (2, 1, 1)
    """
    lo, hi = [int(a) for a in lo], [int(b) for b in hi]
    need = int(rank) - sum(lo)
    if need <= 0 or need >= sum(hi) - sum(lo):
        return tuple(lo if need <= 0 else hi)
    live = [j for j in range(len(lo)) if hi[j] > lo[j]]
    windows = [codes(j, lo[j], hi[j]) for j in live]
    inside = co_ranks([hi[j] - lo[j] for j in live], need, codes_searcher(windows))
    for j, c in zip(live, inside, strict=True):
        lo[j] += c
    return tuple(lo)


def merge_runs(job, plan, store, samples, pipeline, progress=None):
    """Merge the runs of ``store`` into ``job.outputs`` segment by segment, freeing
    the runs on the disk behind the merge; returns the output segments' lengths and
    summaries."""
    keys_dtype = job.runs[0].dtype
    payload_dtype = None if job.runs[1] is None else job.runs[1].dtype
    ranks = segment_bounds((plan.n,), plan.segment)[0]
    lows, highs = Samples(plan.runs, (plan.stride,) * len(plan.runs),
                          merge_codes(samples)).windows(ranks[1:])
    freed = Frontier(store, keys_dtype.itemsize)

    def codes(j, lo, hi):
        return store.codes(j, lo, hi, job.order, job.codes_descending)

    def cuts():
        c = (0,) * len(plan.runs)
        for rank, window_lo, window_hi in zip(ranks[1:], lows, highs, strict=True):
            lo = np.maximum(window_lo, c)  # the windows start at the last co-ranks
            after = co_ranks_on_disk(rank, lo, np.maximum(window_hi, lo), codes)
            yield c, after
            c = after

    def read(item, slot):
        s, (c0, c1) = item
        m = sum(c1) - sum(c0)
        keys = slot.array("in", m, keys_dtype)
        payload = None if payload_dtype is None else slot.array("payload", m, payload_dtype)
        store.read_slices(c0, c1, keys, payload)
        freed.done(s, c1)
        return sum(c0), keys, payload

    into = next((r for r in job.outputs if r is not None), None)

    def sort(state, slot):
        rank, keys, payload = state
        out = (slot.array("out", len(keys), keys.dtype, into.at(rank))
               if payload is None and keys.dtype == into.dtype else None)
        keys, payload = sort_piece(keys, payload, job.order, job.codes_descending, out)
        summary = job.summarize_out(keys, payload) if job.summarize_out else None
        return rank, keys, payload, summary

    def write(state, slot):
        rank, keys, payload, summary = state
        for i, (region, part) in enumerate(zip(job.outputs, (keys, payload), strict=True)):
            if region is not None:  # the keys (0) in the codes of their order
                region.write(rank, from_sortable(part, region.dtype,
                                                 job.times_descending and i == 0))
        return len(keys), summary

    done = pipeline(enumerate(cuts()), read, sort, write, progress, "merge",
                    total=len(ranks) - 1, middle="merge")
    return [d[0] for d in done], [d[1] for d in done], store.punched


def disk_sort(job, plan, threads=None, progress=None):
    """Form the runs and merge them (module docstring), sorting on ``threads``
    threads (default: one per core); returns ``facts``: the runs' count, the
    segments', whether the runs were freed behind the merge, the steps' ``intervals``
    (:class:`~distsort.backends.disk.pipeline.Pipeline`), and the summaries of
    ``--verify`` (``inputs``, ``outputs``, ``chunks``)."""
    with Pipeline(plan.tasks, threads or os.cpu_count() or 1) as pipeline:
        t0 = time.perf_counter()
        store, samples, ins = form_runs(job, plan, pipeline, progress)
        t1 = time.perf_counter()
        chunks, outs, punched = merge_runs(job, plan, store, samples, pipeline, progress)
        t2 = time.perf_counter()
    return {"runs": len(plan.runs), "segments": len(chunks), "freed": punched,
            "kept_runs": sum(map(plan.is_kept, range(len(plan.runs)))),
            "kept_elements": plan.kept_elements,
            "run_seconds": t1 - t0, "merge_seconds": t2 - t1,
            "intervals": pipeline.intervals, "inputs": ins, "outputs": outs,
            "chunks": tuple(chunks)}


def summaries(order, descending, positions=False):
    """``summarize_in`` and ``summarize_out`` of a :class:`DiskJob` for ``--verify``
    (``distsort.graph.verify``): each input piece with its payload (values, or argsort's
    positions), each output segment with its order.  In the ``"stable"`` order of
    values (not ``positions``) the keys are ordered alone (``-0.0`` equal to ``+0.0``)
    and the (key, value) pairs checksummed, in one summary."""
    import dataclasses

    from distsort.graph.verify import summarize

    def summarize_in(keys, payload, start):
        return summarize(keys, payload)

    if order == "sort":
        return summarize_in, lambda k, p: summarize(k, order=Order(descending))
    keyed = Order(descending, keyed=True)
    if order == "stable" and not positions:
        def summarize_out(k, p):
            ordered = summarize(k, order=keyed)
            return dataclasses.replace(summarize(k, p), first=ordered.first,
                                       last=ordered.last, disorder=ordered.disorder,
                                       where=ordered.where, order=ordered.order)
        return summarize_in, summarize_out
    return summarize_in, lambda k, p: summarize(k, p, order=keyed)

