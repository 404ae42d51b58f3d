"""Sorting files larger than host memory: sorted runs on local disk, then one k-way
merge streamed from them (the engine of ``distsort sort``'s disk path,
``distsort.cli.ondisk``).

1. *Runs.*  The input is cut into runs that a few threads sort at once within the
   memory budget (keys alone by the radix sort of
   :mod:`distsort.backends.cpu.radix`, keyed ones by NumPy's stable sorts of
   distsort's order codes) and write where the output will be: into the output's own
   temporary file (the keys' runs of ``--argsort`` into one more temporary).  Every
   ``stride``-th element's order code stays in memory (:class:`RunIndex`).
2. *Merge.*  The output is cut into segments of a size the budget holds; each
   segment's boundaries are exact co-ranks (:func:`distsort.kway.co_ranks`: ties to
   the lower run, so stable orders stay stable), found from the codes in memory and
   one read of ``stride`` elements per run.  A segment reads its slice of every run
   (large sequential reads), sorts them as one and writes them into a new temporary
   at its place in the output; the runs' consumed parts are freed as the merge passes
   them (``fallocate``'s hole punching), so the disk holds the data about once, not
   twice.  The new temporary then replaces the output's, which the command publishes
   as any other (``distsort.cli.outputs.publish``).

The disk moves every byte four times (the input read, the runs written and read, the
output written): twice what a copy of the file moves.

>>> p = plan_disk_sort(10_000, 12, 60_000, tasks=3)
>>> p.runs, p.segment
((1428, 1429, 1428, 1429, 1428, 1429, 1429), 1666)
"""
from __future__ import annotations

import bisect
import contextlib
import ctypes
import errno
import itertools
import os
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .backends import Order
from .backends.cpu.numpy_backend import order_codes, stable_sort
from .backends.cpu.radix import sort_keys
from .kway import co_ranks, segment_bounds
from .libc import libc
from .order import TIME_KINDS, as_sortable, encode, from_sortable

#: Orders of the disk path: keys alone (``"sort"``), equal keys in input order
#: (``"stable"``: ``--argsort``, ``--values --stable``), or by value (``"by-value"``:
#: ``--values``, as ``distsort.sort_by_key``).
ORDERS = ("sort", "stable", "by-value")
#: Elements between two codes kept in memory per run: one read of this many
#: elements per run and co-rank.
STRIDE = 1 << 12
#: Share of the memory available that the disk path takes (others' processes and the
#: page cache, which holds the runs on their way to the disk and back, keep the rest).
MEMORY_SHARE = 0.5
#: A sort in memory holds its data about this many times over (chunks, sorted
#: copies, outputs waiting for the disk): past it, the command takes the disk path.
IN_MEMORY_COPIES = 3
#: Bytes per read or write call.
IO_BLOCK = 64 << 20
#: Reads of fewer bytes go through the page cache: a merge of many runs reads each run
#: in small consecutive slices, which the kernel's read-ahead serves while the merge
#: sorts (straight, each one waited for the disk: the merge of 151 runs of 1 GiB
#: took 1.6 times as long).
DIRECT_FROM = 1 << 20
#: Bytes per ``O_DIRECT`` read, through one staging buffer per thread.
DIRECT_BLOCK = 16 << 20
#: Bytes of a page: the unit of ``O_DIRECT`` writes and of hole punching.
PAGE = 4096
#: ``fallocate``'s flags that free a range of a file and keep its size.
_PUNCH_HOLE = 0x02 | 0x01


def needs_disk(nbytes, memory):
    """Whether a sort of ``nbytes`` (keys and values) goes through the disk: it does
    not fit ``memory`` (bytes of host memory) ``IN_MEMORY_COPIES`` times over.

    >>> needs_disk(30 * 2**30, 22 * 2**30), needs_disk(2**30, 22 * 2**30)
    (True, False)
    """
    return nbytes * IN_MEMORY_COPIES > memory


def element_bytes(key_size, payload_size, order):
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
    """Run lengths (elements, in input order), elements per merge segment, tasks in
    flight at once and the elements between two codes kept in memory."""

    runs: tuple
    segment: int
    tasks: int
    stride: int = STRIDE

    @property
    def n(self):
        return sum(self.runs)


def plan_disk_sort(n, per_element, memory, tasks=3, stride=STRIDE):
    """Runs and segments of a sort of ``n`` elements of ``per_element`` bytes
    (:func:`element_bytes`) within ``memory`` bytes, ``tasks`` of them at once.

    >>> plan_disk_sort(10, 4, 1000, tasks=2).runs
    (10,)
    >>> plan_disk_sort(0, 4, 1000).runs
    ()
    """
    piece = max(1, int(memory) // (int(tasks) * int(per_element)))
    count = -(-n // piece)
    cuts = [n * r // count for r in range(count + 1)] if count else [0]
    runs = tuple(b - a for a, b in itertools.pairwise(cuts))
    return DiskPlan(runs, max(1, min(piece, n)), int(tasks), int(stride))


def disk_room(run_bytes, output_bytes, flight_bytes, punch):
    """Bytes of free disk the sort needs beside its input: the runs (in the outputs'
    temporaries and, for ``--argsort``, the keys' runs), then the merged outputs as
    they grow, less the runs freed behind them (``punch``), with the segments in
    flight; without hole punching, both in full.

    >>> disk_room(100, 100, 10, True), disk_room(100, 100, 10, False)
    (110, 200)
    """
    return run_bytes + (flight_bytes if punch else output_bytes)


# ------------------------------------------------------------------ files
@dataclass(frozen=True)
class Region:
    """``n`` elements of ``dtype`` at byte ``offset`` of the file ``path``."""

    path: str
    offset: int
    dtype: np.dtype
    n: int

    def read(self, start, stop, out=None):
        """Elements ``start:stop`` with large reads (into ``out`` where given): past the
        page cache (:func:`_direct_read`) from ``DIRECT_FROM`` bytes where the
        filesystem allows it."""
        out = np.empty(stop - start, self.dtype) if out is None else out
        data = out.view(np.uint8)
        if len(data) < DIRECT_FROM or not _direct_read(self.path, data, self.at(start)):
            _buffered_read(self.path, data, self.at(start))
        return out

    def at(self, start):
        """The byte offset in the file of element ``start``."""
        return self.offset + start * self.dtype.itemsize

    def write(self, start, values):
        """``values`` at element ``start``: the whole pages of the range straight to
        the disk (``O_DIRECT``) where ``values`` lies in memory as the range lies in
        the file (:func:`scratch`), the rest through the page cache."""
        values = np.ascontiguousarray(values)
        data = memoryview(values.view(np.uint8))
        pos = self.at(start)
        lo = min(len(data), -pos % PAGE)
        hi = lo + (len(data) - lo) // PAGE * PAGE
        if hi > lo and (values.ctypes.data - pos) % PAGE == 0 and _direct_write(
                self.path, data[lo:hi], pos + lo):
            _buffered_write(self.path, data[:lo], pos)
            _buffered_write(self.path, data[hi:], pos + hi)
        else:
            _buffered_write(self.path, data, pos)

    def free(self, start, stop):
        """Give the disk space of elements ``start:stop`` back (whole pages inside the
        range; their contents read as zeros afterwards).  False where the filesystem
        cannot."""
        lo = -(-self.at(start) // PAGE) * PAGE
        hi = self.at(stop) // PAGE * PAGE
        if hi <= lo:
            return True
        return punch_hole(self.path, lo, hi - lo)


def _buffered_read(path, data, pos):
    """``data`` (a uint8 array) filled from byte ``pos`` through the page cache."""
    view = memoryview(data)
    with open(path, "rb", buffering=0) as f:
        done = 0
        while done < len(view):
            got = os.preadv(f.fileno(), [view[done:done + IO_BLOCK]], pos + done)
            if not got:
                raise EOFError(f"{path}: file ends before byte {pos + len(view)}")
            done += got


def _direct_read(path, data, pos):
    """``data`` (a uint8 array) filled from byte ``pos`` with ``O_DIRECT`` reads of
    whole pages into this thread's page-aligned staging buffer, copied from there;
    False where the filesystem refuses it, nothing read.

    Through the page cache the 2-core machine spent 0.8-1.8 s of CPU per GiB read
    from the disk (the cache's pages found, filled, evicted); straight, 0.05 s, and
    the copy out of the staging buffer about as much (``docs/out_of_core.md``).  The
    runs' partial pages written through the cache are flushed by the kernel before a
    direct read of them.
    """
    flag = getattr(os, "O_DIRECT", 0)
    if not len(data):
        return True
    if not flag or _DIRECT_OK.get(("read", path)) is False:
        return False
    try:
        fd = os.open(path, os.O_RDONLY | flag)
    except OSError as e:
        if e.errno != errno.EINVAL:
            raise
        _DIRECT_OK["read", path] = False
        return False
    try:
        block = min(DIRECT_BLOCK, -(-(pos % PAGE + len(data)) // PAGE) * PAGE)
        stage = scratch("stage", block, np.uint8, pos=0)
        done = 0
        while done < len(data):
            at = pos + done
            lo = at - at % PAGE
            head = at - lo
            want = min(len(data) - done, block - head)
            span = -(-(head + want) // PAGE) * PAGE
            try:
                got = os.preadv(fd, [stage[:span]], lo) - head
            except OSError as e:
                if e.errno != errno.EINVAL or _DIRECT_OK.get(("read", path)):
                    raise
                _DIRECT_OK["read", path] = False  # refused before anything was read
                return False
            _DIRECT_OK["read", path] = True
            if got <= 0:
                raise EOFError(f"{path}: file ends before byte {pos + len(data)}")
            got = min(got, want)
            data[done:done + got] = stage[head:head + got]
            done += got
        return True
    finally:
        os.close(fd)


def _buffered_write(path, data, pos):
    """``data`` at byte ``pos`` through the page cache (the pieces ``O_DIRECT`` cannot
    take: partial pages, or every byte where the filesystem refuses it)."""
    if not len(data):
        return
    fd = os.open(path, os.O_WRONLY)
    try:
        while data:
            n = os.pwrite(fd, data[:IO_BLOCK], pos)
            data, pos = data[n:], pos + n
    finally:
        os.close(fd)


def _direct_write(path, data, pos):
    """``data`` (whole pages, page-aligned in memory) at byte ``pos`` (page-aligned)
    with ``O_DIRECT``; False where the filesystem refuses it (tmpfs), nothing written.

    Through the page cache a machine of two cores wrote a fraction of what it wrote
    straight (``docs/out_of_core.md``): copying into the cache and writing it back
    takes CPU time that the sort needs.
    """
    flag = getattr(os, "O_DIRECT", 0)
    known = _DIRECT_OK.get(path)
    if not flag or known is False:
        return False
    fd = os.open(path, os.O_WRONLY | flag)
    try:
        while data:
            try:
                n = os.pwrite(fd, data[:IO_BLOCK], pos)
            except OSError as e:
                if e.errno != errno.EINVAL or known:
                    raise
                _DIRECT_OK[path] = False  # refused before anything was written
                return False
            _DIRECT_OK[path] = known = True
            data, pos = data[n:], pos + n
        return True
    finally:
        os.close(fd)


#: Whether each file took ``O_DIRECT`` writes (key: its path) and reads (key:
#: ``("read", path)``); absent: not tried yet.
_DIRECT_OK = {}


_scratch = threading.local()


def scratch(name, n, dtype, pos=None):
    """An array of ``n`` elements of ``dtype`` in this thread's buffer ``name``, kept
    for its next task: fresh memory costs the kernel a page fault and a page of zeros
    every 4 KiB, about a tenth of a sort's time here.  With ``pos``, its address is
    ``pos`` modulo a page: laid out in memory as a range starting at byte ``pos`` of a
    file, so that its whole pages can be written with ``O_DIRECT``.  The task that
    takes it must be done with it before the thread takes its next task.

    >>> a = scratch("x", 10, np.float32, pos=4100)
    >>> (a.ctypes.data - 4100) % PAGE, scratch("x", 5, np.int8).base is a.base
    (0, True)
    """
    dtype = np.dtype(dtype)
    need = n * dtype.itemsize + PAGE
    raw = getattr(_scratch, name, None)
    if raw is None or raw.size < need:
        raw = np.empty(need, np.uint8)
        setattr(_scratch, name, raw)
    shift = 0 if pos is None else (pos - raw.ctypes.data) % PAGE
    return raw[shift:shift + n * dtype.itemsize].view(dtype)


def punch_hole(path, offset, nbytes):
    """Free ``nbytes`` at ``offset`` of ``path`` (Linux ``fallocate`` with
    ``FALLOC_FL_PUNCH_HOLE``); False where the system or the filesystem cannot."""
    f = libc("fallocate", ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    if f is None:
        return False
    fd = os.open(path, os.O_WRONLY)
    try:
        if f(fd, _PUNCH_HOLE, offset, nbytes) != 0:
            if ctypes.get_errno() in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                return False
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), path)
        return True
    finally:
        os.close(fd)


def can_free(directory):
    """Whether files in ``directory`` can give space back by hole punching (tried on a
    scratch file of 64 KiB)."""
    import tempfile
    with tempfile.NamedTemporaryFile(dir=directory, prefix=".distsort-probe-") as f:
        f.write(b"\1" * (64 << 10))
        f.flush()
        try:
            return punch_hole(f.name, 4096, 8192)
        except OSError:
            return False


# ------------------------------------------------------------------ order
def sortable_dtype(dtype):
    """The dtype :func:`distsort.order.as_sortable` gives for ``dtype`` (what the runs
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
        tmp = scratch("tmp", len(keys), keys.dtype) if out is not None else None
        return sort_keys(keys, descending, out=out, tmp=tmp), None
    if order == "by-value":
        perm = np.lexsort(order_codes(keys, payload, descending)[::-1])
        return keys[perm], payload[perm]
    return stable_sort(keys, payload, Order(descending, keyed=True))


def summaries(order, descending, positions=False):
    """``summarize_in`` and ``summarize_out`` of a :class:`DiskJob` for ``--verify``
    (``distsort.verify``): each input piece with its payload (values, or argsort's
    positions), each output segment with its order.  In the ``"stable"`` order of
    values (not ``positions``) the keys are ordered alone (``-0.0`` equal to ``+0.0``)
    and the (key, value) pairs checksummed, in one summary."""
    import dataclasses

    from .verify import summarize

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


# ------------------------------------------------------------------ co-ranks
class RunIndex:
    """The ``before`` of :func:`distsort.kway.co_ranks` for runs on disk: the order
    codes of every ``stride``-th element of each run in memory, and blocks of
    ``stride`` elements read from the runs when a search narrows to one (a few
    recent ones kept).

    ``read(j, start, stop)`` gives the order codes of elements ``start:stop`` of run
    ``j``; ``samples[j]`` those of its elements ``0, stride, 2 * stride, ...``.
    """

    def __init__(self, lengths, samples, stride, read, cached=1024):
        self.lengths, self.samples, self.stride = list(lengths), samples, stride
        self._read, self._cached = read, cached
        self._blocks = OrderedDict()

    def _block(self, j, b):
        key = (j, b)
        if key in self._blocks:
            self._blocks.move_to_end(key)
            return self._blocks[key]
        lo = b * self.stride
        codes = self._read(j, lo, min(self.lengths[j], lo + self.stride))
        self._blocks[key] = codes
        if len(self._blocks) > self._cached:
            self._blocks.popitem(last=False)
        return codes

    def element(self, j, p):
        codes = self._block(j, p // self.stride)
        return tuple(int(c[p % self.stride]) for c in codes)

    def count(self, j, pivot, lo, hi, right):
        """Elements of run ``j`` before ``pivot`` (equal ones too where ``right``),
        clipped to ``[lo, hi]``; nothing outside that window is read."""
        if lo >= hi:
            return lo
        q = _bisect(self.samples[j], pivot, right)  # samples before the pivot
        if q == 0:
            return lo
        b = q - 1  # the count lies in block b: after its first element, by its end
        start = b * self.stride
        stop = min(self.lengths[j], start + self.stride)
        if stop <= lo or start >= hi:
            return min(max(stop, lo), hi)
        codes = self._block(j, b)
        a, z = max(start, lo), min(stop, hi)
        part = tuple(c[a - start:z - start] for c in codes)
        return a + _bisect(part, pivot, right)

    def __call__(self, i, p, lo, hi):
        pivot = self.element(i, p)
        return [p if j == i else self.count(j, pivot, lo[j], hi[j], j < i)
                for j in range(len(self.lengths))]


def _bisect(codes, pivot, right):
    """Elements of sorted ``codes`` (a tuple of arrays, compared lexicographically)
    before ``pivot`` (a tuple of ints), equal ones too where ``right``.

    >>> _bisect((np.array([1, 2, 2, 3]),), (2,), True), _bisect((np.array([1, 2]),), (2,), False)
    (3, 1)
    """
    if len(codes) == 1:
        return int(np.searchsorted(codes[0], codes[0].dtype.type(pivot[0]),
                                   side="right" if right else "left"))

    def at(m):
        return tuple(int(c[m]) for c in codes)
    if right:
        return bisect.bisect_right(range(len(codes[0])), pivot, key=at)
    return bisect.bisect_left(range(len(codes[0])), pivot, key=at)


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


def _payload(job, start, stop):
    if job.positions:
        return np.arange(start, stop, dtype=np.int64)
    return None if job.read_payload is None else as_sortable(job.read_payload(start, stop))


def form_runs(job, plan, pool, progress=None):
    """Sort the input's runs into ``job.runs``; returns the runs' code samples and the
    input pieces' summaries."""
    bounds = np.cumsum((0,) + plan.runs).tolist()

    def one(r):
        start, stop = bounds[r], bounds[r + 1]
        keys = as_sortable(job.read_keys(start, stop, scratch("in", stop - start, job.dtype)))
        payload = _payload(job, start, stop)
        summary = job.summarize_in(keys, payload, start) if job.summarize_in else None
        out = scratch("out", len(keys), keys.dtype, job.runs[0].at(start))
        keys, payload = sort_piece(keys, payload, job.order, job.descending, out)
        for region, part in zip(job.runs, (keys, payload), strict=True):
            if region is not None:
                region.write(start, part)
        sample = slice(0, None, plan.stride)
        codes = probe_codes(keys[sample], None if payload is None else payload[sample],
                            job.order, job.descending)
        return tuple(np.ascontiguousarray(c) for c in codes), summary

    done = _bounded(pool, one, range(len(plan.runs)), plan.tasks, progress, "runs")
    return [d[0] for d in done], [d[1] for d in done]


def merge_runs(job, plan, samples, pool, progress=None):
    """Merge the runs into ``job.outputs`` segment by segment, freeing the runs behind
    the merge; returns the output segments' lengths and summaries."""
    lengths = plan.runs
    starts = np.cumsum((0,) + lengths).tolist()
    keys_run, payload_run = job.runs

    def read_codes(j, lo, hi):
        keys = keys_run.read(starts[j] + lo, starts[j] + hi)
        payload = (payload_run.read(starts[j] + lo, starts[j] + hi)
                   if job.order == "by-value" else None)
        return probe_codes(keys, payload, job.order, job.descending)

    search = RunIndex(lengths, samples, plan.stride, read_codes)
    ranks = segment_bounds((plan.n,), plan.segment)[0]
    freed = _Frontier(job.runs, starts, len(ranks) - 1)

    def cuts():
        c = tuple(0 for _ in lengths)
        for rank in ranks[1:]:
            after = co_ranks(lengths, rank, search, start=c)
            yield c, after
            c = after

    def one(item):
        s, (c0, c1) = item
        m = sum(c1) - sum(c0)
        keys = scratch("in", m, keys_run.dtype)
        payload = None if payload_run is None else np.empty(m, payload_run.dtype)
        o = 0
        for j, (a, b) in enumerate(zip(c0, c1, strict=True)):
            keys_run.read(starts[j] + a, starts[j] + b, keys[o:o + b - a])
            if payload is not None:
                payload_run.read(starts[j] + a, starts[j] + b, payload[o:o + b - a])
            o += b - a
        freed.done(s, c1)
        rank = sum(c0)
        into = next((r for r in job.outputs if r is not None), None)
        out = (scratch("out", m, keys.dtype, into.at(rank))
               if payload is None and keys.dtype == into.dtype else None)
        keys, payload = sort_piece(keys, payload, job.order, job.descending, out)
        summary = job.summarize_out(keys, payload) if job.summarize_out else None
        for region, part in zip(job.outputs, (keys, payload), strict=True):
            if region is not None:
                region.write(rank, from_sortable(part, region.dtype))
        return m, summary

    done = _bounded(pool, one, enumerate(cuts()), plan.tasks, progress, "merge",
                    total=len(ranks) - 1)
    return [d[0] for d in done], [d[1] for d in done], freed.punched


class _Frontier:
    """Frees the runs' elements that every segment up to some point has read: segments
    finish out of order, the runs are freed in order."""

    def __init__(self, runs, starts, segments):
        self.runs, self.starts = [r for r in runs if r is not None], starts
        self._ends, self._next = {}, 0
        self._lock = threading.Lock()
        self._freed = [0] * (len(starts) - 1)
        self.punched = True

    def done(self, segment, ends):
        with self._lock:
            self._ends[segment] = ends
            while self._next in self._ends:
                ends = self._ends.pop(self._next)
                self._next += 1
                for j, e in enumerate(ends):
                    if e > self._freed[j] and self.punched:
                        for run in self.runs:
                            self.punched &= run.free(self.starts[j] + self._freed[j],
                                                     self.starts[j] + e)
                        self._freed[j] = e


def _bounded(pool, fn, items, tasks, progress, label, total=None):
    """``fn`` of every item on ``pool``, at most ``tasks`` at once (memory), results
    in order; ``progress(label, done, total)`` after each."""
    items = list(items) if total is None else items
    total = len(items) if total is None else total
    futures, results = [], []
    for item in items:
        futures.append(pool.submit(fn, item))
        while len(futures) - len(results) >= tasks:
            results.append(futures[len(results)].result())
            if progress:
                progress(label, len(results), total)
    for f in futures[len(results):]:
        results.append(f.result())
        if progress:
            progress(label, len(results), total)
    return results


def disk_sort(job, plan, threads=None, progress=None):
    """Form the runs and merge them (module docstring); returns ``facts``: the runs'
    count, the segments', whether the runs were freed behind the merge, and the
    summaries of ``--verify`` (``inputs``, ``outputs``, ``chunks``)."""
    import time
    threads = threads or plan.tasks
    with ThreadPoolExecutor(threads, thread_name_prefix="distsort-disk") as pool:
        try:
            t0 = time.perf_counter()
            samples, ins = form_runs(job, plan, pool, progress)
            t1 = time.perf_counter()
            chunks, outs, punched = merge_runs(job, plan, samples, pool, progress)
            t2 = time.perf_counter()
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return {"runs": len(plan.runs), "segments": len(chunks), "freed": punched,
            "run_seconds": t1 - t0, "merge_seconds": t2 - t1,
            "inputs": ins, "outputs": outs, "chunks": tuple(chunks)}


@contextlib.contextmanager
def merged_file(path, like):
    """A new file at ``path`` starting with the first ``like.offset`` bytes (the .npy
    header) of ``like.path``; removed unless the caller renames it."""
    with open(like.path, "rb") as f:
        header = f.read(like.offset)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, header)
        os.ftruncate(fd, like.offset + like.n * like.dtype.itemsize)
    finally:
        os.close(fd)
    try:
        yield Region(path, like.offset, like.dtype, like.n)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
