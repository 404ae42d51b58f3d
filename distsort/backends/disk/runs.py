"""Sorted runs of the disk path and what one task does to them: sort a piece of the
input into a run (:func:`sort_piece`), keep it in memory or write it at its place in a
file (:class:`RunStore`), take its samples and read a window of its order codes for
the co-ranks (:func:`probe_codes`), read a segment's slice of every run
(:meth:`RunStore.read_slices`), merge them (:func:`sort_piece` again: the slices in
run order, sorted stably) and free on the disk what the merge has passed
(:class:`Frontier`).  The plan (runs, segments, co-ranks) is the out-of-core plan's
(``distsort.plan.outofcore.plan_disk_sort``, ``distsort.plan.kway``).

>>> keys, _ = sort_piece(np.array([3, 1, 2], np.int32), None, "sort", False)
>>> keys.tolist(), [c.tolist() for c in run_sample(keys, None, "sort", False, 2)]
([1, 2, 3], [[2147483650]])
"""
from __future__ import annotations

import threading

import numpy as np

from distsort.backends import Order
from distsort.backends.cpu.numpy_backend import order_codes, stable_sort
from distsort.backends.disk.buffers import scratch
from distsort.core.order import TIME_KINDS, encode

__all__ = ["RunStore", "Frontier", "sort_piece", "probe_codes", "run_sample",
           "sortable_dtype", "ORDERS", "FREE_FROM"]

#: Orders of the disk path: keys alone (``"sort"``), equal keys in input order
#: (``"stable"``: ``--argsort``, ``--values --stable``), or by value (``"by-value"``:
#: ``--values``, as ``distsort.sort_by_key``).
ORDERS = ("sort", "stable", "by-value")
#: Bytes of a run consumed by the merge before they are freed on the disk (one
#: ``fallocate`` each; a merge of 202 runs of 5 MiB punched 40,804 holes, 6.6 s).
FREE_FROM = 1 << 20


def sortable_dtype(dtype):
    """The dtype :func:`distsort.core.order.as_sortable` gives for ``dtype`` (what the runs
    hold)."""
    return np.dtype(np.uint64) if np.dtype(dtype).kind in TIME_KINDS else np.dtype(dtype)


def probe_codes(keys, payload, order, descending):
    """The order codes of elements, most significant first (a tuple of arrays)."""
    if order == "sort":
        return (encode(keys, descending=descending),)
    if order == "stable":
        return (encode(keys, canonical=True, descending=descending),)
    return tuple(order_codes(keys, payload, descending))


def sort_piece(keys, payload, order, descending, out=None):
    """``(keys, payload)`` sorted in ``order``; equal elements keep their order (so
    a segment made of the runs' slices in run order merges them stably).  Keys alone
    are sorted into ``out`` where given (through this thread's scratch)."""
    if payload is None:
        # Imported here: it compiles with numba, which the command would otherwise
        # import at its start (a quarter second) for sorts that never come here.
        from distsort.backends.cpu.radix import sort_keys
        tmp = scratch("tmp", len(keys), keys.dtype) if out is not None else None
        return sort_keys(keys, descending, out=out, tmp=tmp), None
    if order == "by-value":
        perm = np.lexsort(order_codes(keys, payload, descending)[::-1])
        return keys[perm], payload[perm]
    return stable_sort(keys, payload, Order(descending, keyed=True))


def run_sample(keys, payload, order, descending, step):
    """The order codes of a sorted run's samples: its elements at ``step - 1,
    2 * step - 1, ...`` (``distsort.plan.kway.Samples``), each code array contiguous."""
    at = slice(step - 1, None, step)
    codes = probe_codes(keys[at], None if payload is None else payload[at], order, descending)
    return tuple(np.ascontiguousarray(c) for c in codes)


class RunStore:
    """Where the sorted runs of ``lengths`` lie: those that ``kept`` marks (a bool per
    run; empty: none) in memory, the others in ``regions`` on the disk (the keys'
    Region and the payload's, or None), each at its place in the input's order."""

    def __init__(self, regions, lengths, kept=()):
        self.regions, self.lengths = tuple(regions), tuple(lengths)
        self.kept = tuple(kept) or (False,) * len(self.lengths)
        self.starts = np.cumsum((0,) + self.lengths).tolist()
        self._held = {}
        #: Whether every range freed so far gave its disk space back.
        self.punched = True

    def put(self, r, keys, payload):
        """Run ``r`` sorted: kept (the arrays themselves) or written."""
        if self.kept[r]:
            self._held[r] = (keys, payload)
            return
        for region, part in zip(self.regions, (keys, payload), strict=True):
            if region is not None:
                region.write(self.starts[r], part)

    def read(self, part, j, lo, hi, out=None):
        """Elements ``lo:hi`` of run ``j``'s keys (``part`` 0) or payload (1), into
        ``out`` where given."""
        if j in self._held:
            held = self._held[j][part][lo:hi]
            if out is None:
                return held
            out[...] = held
            return out
        return self.regions[part].read(self.starts[j] + lo, self.starts[j] + hi, out)

    def codes(self, j, lo, hi, order, descending):
        """The order codes of elements ``lo:hi`` of run ``j`` (a window of the search
        for co-ranks)."""
        keys = self.read(0, j, lo, hi)
        payload = self.read(1, j, lo, hi) if order == "by-value" else None
        return tuple(probe_codes(keys, payload, order, descending))

    def read_slices(self, first, last, keys, payload):
        """Each run's slice ``first[j]:last[j]`` one after the other into ``keys`` (and
        ``payload``, or None): a merge segment's input, in run order."""
        o = 0
        for j, (a, b) in enumerate(zip(first, last, strict=True)):
            self.read(0, j, a, b, keys[o:o + b - a])
            if payload is not None:
                self.read(1, j, a, b, payload[o:o + b - a])
            o += b - a

    def free(self, j, lo, hi):
        """Give back the disk space of elements ``lo:hi`` of run ``j``."""
        if j in self._held or not self.punched:
            return
        for region in self.regions:
            if region is not None:
                self.punched &= region.free(self.starts[j] + lo, self.starts[j] + hi)

    def __len__(self):
        return len(self.lengths)


class Frontier:
    """Frees the runs' elements that every segment up to some point has read, in
    pieces of ``FREE_FROM`` bytes or more: segments finish out of order, the runs are
    freed in order."""

    def __init__(self, store, itemsize):
        self.store, self._least = store, max(1, FREE_FROM // itemsize)
        self._ends, self._next = {}, 0
        self._lock = threading.Lock()
        self._freed = [0] * len(store)

    def done(self, segment, ends):
        """Segment ``segment`` (counted from 0) has read every run up to ``ends``."""
        with self._lock:
            self._ends[segment] = ends
            while self._next in self._ends:
                ends = self._ends.pop(self._next)
                self._next += 1
                for j, e in enumerate(ends):
                    whole = e == self.store.lengths[j]
                    if e - self._freed[j] >= self._least or (whole and e > self._freed[j]):
                        self.store.free(j, self._freed[j], e)
                        self._freed[j] = e
