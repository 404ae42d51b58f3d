"""Sorting files larger than host memory: sorted runs on local disk, then one k-way
merge streamed from them (the engine of ``distsort sort``'s disk path,
``distsort.cli.ondisk``).

1. *Runs.*  The input is cut into runs that a few threads sort at once within a
   share of the memory budget (keys alone by the radix sort of
   :mod:`distsort.backends.cpu.radix`, keyed ones by NumPy's stable sorts of
   distsort's order codes).  As many runs as the rest of the budget holds stay in
   memory (spread over the input, so that the disk is busy evenly); the others are
   written where the output will be: into the output's own temporary file (the keys'
   runs of ``--argsort`` into one more temporary).  Every ``stride``-th element's
   order code stays in memory (:class:`Splitters`).
2. *Merge.*  The output is cut into segments of a size the budget holds; each
   segment's boundaries are exact co-ranks (ties to the lower run, so stable orders
   stay stable), found from the codes in memory and one read of about two strides
   per run (:class:`Splitters`).  A segment takes its slice of every run
   (from memory, or by large sequential reads), sorts them as one and writes them
   into a new temporary at its place in the output; the runs' consumed parts on the
   disk are freed as the merge passes them (``fallocate``'s hole punching), so the
   disk holds the data about once, not twice.  The new temporary then replaces the
   output's, which the command publishes as any other
   (``distsort.cli.outputs.publish``).

The disk moves every byte of the input and the output once, and every byte of the
runs it holds twice: with a share ``m`` of the data kept in memory, ``2 + 2 * (1 - m)``
times the data, against a copy's two.  Two threads read, one writes and one per core
sorts (:class:`Pipeline`), so that the disk and the cores are busy at once.

>>> p = plan_disk_sort(10_000, 12, 60_000, tasks=3)
>>> p.runs, p.segment
((1428, 1429, 1428, 1429, 1428, 1429, 1429), 1666)
>>> p = plan_disk_sort(10_000, 12, 30_000, tasks=3, kept_bytes=4)
>>> len(p.runs), p.kept_elements  # elements of the runs kept in memory
(40, 5250)
"""
from __future__ import annotations

import bisect
import contextlib
import ctypes
import errno
import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from distsort.backends import Order
from distsort.backends.cpu.numpy_backend import first_not, order_codes, stable_sort
from distsort.plan.kway import segment_bounds
from distsort.core.libc import libc
from distsort.core.order import TIME_KINDS, as_sortable, encode, from_sortable

#: Orders of the disk path: keys alone (``"sort"``), equal keys in input order
#: (``"stable"``: ``--argsort``, ``--values --stable``), or by value (``"by-value"``:
#: ``--values``, as ``distsort.sort_by_key``).
ORDERS = ("sort", "stable", "by-value")
#: Elements between two codes kept in memory per run, at most: a segment's end reads
#: and sorts about two strides of every run (:class:`Splitters`).  Where runs are many
#: and segments small, the plan takes a stride that keeps those reads to an eighth of a
#: segment, down to ``MIN_STRIDE`` (more codes in memory instead).
STRIDE = 1 << 12
MIN_STRIDE = 1 << 8
#: Bytes of a run consumed by the merge before they are freed on the disk (one
#: ``fallocate`` each; a merge of 202 runs of 5 MiB punched 40,804 holes, 6.6 s).
FREE_FROM = 1 << 20
#: Share of the memory available that the disk path takes: others' processes keep the
#: rest, and the page cache, which large reads and writes bypass (``O_DIRECT``) and the
#: small ones (the splitters' windows, partial pages) need little of.
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
#: Threads that read (:class:`Pipeline`): a merge segment reads a slice of every run,
#: many small reads that one thread waits for one by one.
READERS = 2
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
    flight at once, the elements between two codes kept in memory, and which runs
    stay in memory (a bool per run; the others go to the disk)."""

    runs: tuple
    segment: int
    tasks: int
    stride: int = STRIDE
    kept: tuple = ()

    @property
    def n(self):
        return sum(self.runs)

    def is_kept(self, r):
        return bool(self.kept) and self.kept[r]

    @property
    def kept_elements(self):
        """Elements of the runs kept in memory."""
        return sum(n for r, n in enumerate(self.runs) if self.is_kept(r))


def plan_disk_sort(n, per_element, memory, tasks=3, stride=STRIDE, kept_bytes=0):  # noqa: PLR0913, PLR0917
    """Runs and segments of a sort of ``n`` elements of ``per_element`` bytes
    (:func:`element_bytes`) within ``memory`` bytes, ``tasks`` of them at once.

    ``stride``: the samples' stride at most (see ``STRIDE``).
    ``kept_bytes``: the bytes an element of a sorted run takes (its key and payload);
    where given, the tasks take ``WORK_SHARE`` of the memory (more where that makes
    over ``MAX_RUNS`` runs) and runs stay in memory as far as the tasks leave room for
    them (:func:`spread`), else every run goes to the disk.

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
    count = -(-n // piece)
    cuts = [n * r // count for r in range(count + 1)] if count else [0]
    runs = tuple(b - a for a, b in itertools.pairwise(cuts))
    kept = ()
    if kept_bytes and runs:
        room = int(memory) - int(tasks) * int(per_element) * max(runs)
        kept = spread(max(0, room) // (max(runs) * int(kept_bytes)), len(runs))
    segment = max(1, min(piece, n))
    stride = min(int(stride), max(MIN_STRIDE, segment // (16 * max(1, len(runs)))))
    return DiskPlan(runs, segment, int(tasks), max(1, stride), kept)


def spread(k, count):
    """``k`` of ``count`` places marked True, evenly apart (all where ``k >= count``).

    >>> spread(2, 5), spread(9, 3)
    ((False, False, True, False, True), (True, True, True))
    """
    k = min(int(k), count)
    return tuple((i + 1) * k // count > i * k // count for i in range(count))


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
    whole pages; False where the filesystem refuses it, nothing read.  Where ``data``
    lies in memory as the range lies in the file (its address is ``pos`` modulo a
    page: :func:`scratch`), its whole pages are read in place; the rest (or all of it,
    elsewhere) into this thread's page-aligned staging buffer and copied from there.

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
        lo = min(len(data), -pos % PAGE)
        hi = lo + (len(data) - lo) // PAGE * PAGE
        if hi > lo and (data.ctypes.data - pos) % PAGE == 0:
            # A refusal comes at the first read: the pages in place, before any copy.
            return (_read_pages(fd, path, data[lo:hi], pos + lo)
                    and _read_staged(fd, path, data[:lo], pos)
                    and _read_staged(fd, path, data[hi:], pos + hi))
        return _read_staged(fd, path, data, pos)
    finally:
        os.close(fd)


def _read_pages(fd, path, data, pos):
    """Whole pages at page-aligned ``pos`` straight into ``data`` (page-aligned)."""
    done = 0
    while done < len(data):
        got = _pread(fd, path, data[done:done + IO_BLOCK], pos + done)
        if got is None:
            return False
        if got <= 0:
            raise EOFError(f"{path}: file ends before byte {pos + len(data)}")
        done += got
    return True


def _read_staged(fd, path, data, pos):
    """Any bytes through this thread's staging buffer (whole pages read, the bytes
    wanted copied out)."""
    if not len(data):
        return True
    block = min(DIRECT_BLOCK, -(-(pos % PAGE + len(data)) // PAGE) * PAGE)
    stage = scratch("stage", block, np.uint8, pos=0)
    done = 0
    while done < len(data):
        at = pos + done
        lo = at - at % PAGE
        head = at - lo
        want = min(len(data) - done, block - head)
        span = -(-(head + want) // PAGE) * PAGE
        got = _pread(fd, path, stage[:span], lo)
        if got is None:
            return False
        got -= head
        if got <= 0:
            raise EOFError(f"{path}: file ends before byte {pos + len(data)}")
        got = min(got, want)
        data[done:done + got] = stage[head:head + got]
        done += got
    return True


def _pread(fd, path, view, pos):
    """One ``O_DIRECT`` read; None where the filesystem refuses it, which it does at
    the first read of a file or never."""
    try:
        got = os.preadv(fd, [view], pos)
    except OSError as e:
        if e.errno != errno.EINVAL or _DIRECT_OK.get(("read", path)):
            raise
        _DIRECT_OK["read", path] = False
        return None
    _DIRECT_OK["read", path] = True
    return got


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


class Buffers:
    """Named buffers kept for the next task that takes them: fresh memory costs the
    kernel a page fault and a page of zeros every 4 KiB, up to 1.5 s of system time
    per GiB on the 2-core machine (``docs/out_of_core.md``)."""

    def __init__(self):
        self._raw = {}

    def array(self, name, n, dtype, pos=None):
        """An array of ``n`` elements of ``dtype`` in the buffer ``name``.  With
        ``pos``, its address is ``pos`` modulo a page: laid out in memory as a range
        starting at byte ``pos`` of a file, so that its whole pages can be read and
        written with ``O_DIRECT``.  The task that takes it must be done with it before
        the buffer's next task takes it.

        >>> b = Buffers()
        >>> a = b.array("x", 10, np.float32, pos=4100)
        >>> (a.ctypes.data - 4100) % PAGE, b.array("x", 5, np.int8).base is a.base
        (0, True)
        """
        dtype = np.dtype(dtype)
        need = n * dtype.itemsize + PAGE
        raw = self._raw.get(name)
        if raw is None or raw.size < need:
            raw = self._raw[name] = np.empty(need, np.uint8)
        shift = 0 if pos is None else (pos - raw.ctypes.data) % PAGE
        return raw[shift:shift + n * dtype.itemsize].view(dtype)


_local = threading.local()


def scratch(name, n, dtype, pos=None):
    """:meth:`Buffers.array` of this thread's buffers (the radix sort's scratch, the
    staging buffer of ``O_DIRECT`` reads).

    >>> scratch("x", 3, np.int8).base is scratch("x", 2, np.int8).base
    True
    """
    if not hasattr(_local, "buffers"):
        _local.buffers = Buffers()
    return _local.buffers.array(name, n, dtype, pos)


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


# ------------------------------------------------------------------ co-ranks
class Splitters:
    """Exact co-ranks of the runs' merge (ties: the lower run first, then position, so
    that stable orders stay stable), from the order codes of every ``stride``-th
    element of each run kept in memory (``samples[j]``: a tuple of code arrays, most
    significant first) and reads of the runs' codes (``read(j, lo, hi)``).

    For a rank, the samples bound each run's co-rank to a window of about two strides
    (:meth:`windows`); the windows' codes are read and sorted stably in run order,
    which is the merge's order, and the rank's place among them gives the co-ranks:
    one read per run and one sort, where a k-way binary search compares a pivot with
    every run at every step.  Nothing below ``start`` (an earlier rank's co-ranks: a
    streamed merge frees what lies below them) is read.

    >>> runs = [np.array(r, np.uint32) for r in ([1, 3, 5, 7], [2, 3, 6], [0, 8])]
    >>> split = Splitters([4, 3, 2], [(r[::2],) for r in runs], 2,
    ...                   lambda j, lo, hi: (runs[j][lo:hi],))
    >>> split(4), split(6, start=(2, 1, 1))
    ((2, 1, 1), (3, 2, 1))
    """

    def __init__(self, lengths, samples, stride, read):
        self.lengths = np.array([int(n) for n in lengths], np.int64)
        self.samples, self.stride, self._read = samples, int(stride), read
        width = len(samples[0]) if samples else 1
        codes = [np.concatenate([s[c] for s in samples]) if samples else np.zeros(0, np.uint64)
                 for c in range(width)]
        counts = [len(s[0]) for s in samples]
        runs = np.repeat(np.arange(len(samples)), counts)
        order = _merge_order(codes, runs)  # the samples in the merge's order
        self._pivots = [c[order] for c in codes]
        self._run = runs[order]
        self._pos = order - np.cumsum([0, *counts])[:-1][self._run] if len(order) else order

    def __call__(self, rank, start=None):
        lo, hi = self.windows(rank, start)
        need = int(rank) - int(lo.sum())
        if need <= 0:
            return tuple(lo.tolist())
        if need >= int((hi - lo).sum()):
            return tuple(hi.tolist())
        live = np.flatnonzero(hi > lo)
        parts = [self._read(j, int(lo[j]), int(hi[j])) for j in live]
        codes = [np.concatenate([p[c] for p in parts]) for c in range(len(parts[0]))]
        runs = np.repeat(live, (hi - lo)[live])
        taken = np.bincount(runs[_merge_order(codes, runs)[:need]], minlength=len(lo))
        return tuple((lo + taken).tolist())

    def windows(self, rank, start=None):
        """Each run's co-rank of ``rank`` lies in ``[lo[j], hi[j]]``: bounds from the
        last sample that the first ``rank`` elements surely hold and the first they
        surely do not."""
        lo = np.zeros_like(self.lengths) if start is None else np.array(start, np.int64)
        hi = self.lengths.copy()
        first, _ = self._search(lambda g: self._bounds(g)[1].sum() <= rank)
        if first is not None:
            lo = np.maximum(lo, self._bounds(first)[0])
        _, after = self._search(lambda g: self._bounds(g)[0].sum() < rank)
        if after is not None:
            hi = np.minimum(hi, self._bounds(after)[1])
        return lo, np.maximum(hi, lo)

    def _search(self, holds):
        """The last pivot where ``holds`` (true up to some pivot, then false) and the
        first where it does not (None where there is none)."""
        a = first_not(len(self._run), holds)
        return (a - 1 if a else None), (a if a < len(self._run) else None)

    def _bounds(self, g):
        """How many elements of each run come before pivot ``g`` (a sample): at least
        ``lower``, at most ``upper``, from the samples of each run before it."""
        pivot = tuple(c[g] for c in self._pivots)
        i = self._run[g]
        q = np.array([self._pos[g] if j == i else _bisect(s, pivot, j < i)
                      for j, s in enumerate(self.samples)], np.int64)
        upper = np.minimum(self.lengths, q * self.stride)
        lower = np.where(q > 0, (q - 1) * self.stride + 1, 0)
        return lower, upper


def _merge_order(codes, runs):
    """The order of elements given in run order (``runs``: each one's run, ascending)
    in the merge: by their codes (a list, most significant first), ties in the order
    given (a stable sort)."""
    if len(codes) == 1:
        return np.argsort(codes[0], kind="stable")
    return np.lexsort(codes[::-1])


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


class RunStore:
    """Where the sorted runs lie: the plan's kept runs in memory, the others in
    ``regions`` on the disk (the keys' Region and the payload's, or None), each at its
    place in the input's order."""

    def __init__(self, regions, plan):
        self.regions, self.plan = tuple(regions), plan
        self.starts = np.cumsum((0,) + tuple(plan.runs)).tolist()
        self._held = {}
        #: Whether every range freed so far gave its disk space back.
        self.punched = True

    def put(self, r, keys, payload):
        """Run ``r`` sorted: kept (the arrays themselves) or written."""
        if self.plan.is_kept(r):
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

    def free(self, j, lo, hi):
        """Give back the disk space of elements ``lo:hi`` of run ``j``."""
        if j in self._held or not self.punched:
            return
        for region in self.regions:
            if region is not None:
                self.punched &= region.free(self.starts[j] + lo, self.starts[j] + hi)

    def __len__(self):
        return len(self.plan.runs)


def form_runs(job, plan, pipeline, progress=None):
    """Sort the input's runs into a :class:`RunStore` over ``job.runs``; returns it, the
    runs' code samples and the input pieces' summaries."""
    store = RunStore(job.runs, plan)
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
        sample = slice(0, None, plan.stride)
        codes = probe_codes(keys[sample], None if payload is None else payload[sample],
                            job.order, job.codes_descending)
        return r, keys, payload, tuple(np.ascontiguousarray(c) for c in codes), summary

    def write(state, slot):
        r, keys, payload, codes, summary = state
        store.put(r, keys, payload)
        return codes, summary

    done = pipeline(range(len(plan.runs)), read, sort, write, progress, "runs")
    return store, [d[0] for d in done], [d[1] for d in done]


def merge_runs(job, plan, store, samples, pipeline, progress=None):
    """Merge the runs of ``store`` into ``job.outputs`` segment by segment, freeing
    the runs on the disk behind the merge; returns the output segments' lengths and
    summaries."""
    lengths = plan.runs
    keys_dtype = job.runs[0].dtype
    payload_dtype = None if job.runs[1] is None else job.runs[1].dtype

    def read_codes(j, lo, hi):
        keys = store.read(0, j, lo, hi)
        payload = store.read(1, j, lo, hi) if job.order == "by-value" else None
        return probe_codes(keys, payload, job.order, job.codes_descending)

    split = Splitters(lengths, samples, plan.stride, read_codes)
    ranks = segment_bounds((plan.n,), plan.segment)[0]
    freed = _Frontier(store, keys_dtype.itemsize)

    def cuts():
        c = tuple(0 for _ in lengths)
        for rank in ranks[1:]:
            after = split(rank, start=c)
            yield c, after
            c = after

    def read(item, slot):
        s, (c0, c1) = item
        m = sum(c1) - sum(c0)
        keys = slot.array("in", m, keys_dtype)
        payload = None if payload_dtype is None else slot.array("payload", m, payload_dtype)
        o = 0
        for j, (a, b) in enumerate(zip(c0, c1, strict=True)):
            store.read(0, j, a, b, keys[o:o + b - a])
            if payload is not None:
                store.read(1, j, a, b, payload[o:o + b - a])
            o += b - a
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
                    total=len(ranks) - 1)
    return [d[0] for d in done], [d[1] for d in done], store.punched


class _Frontier:
    """Frees the runs' elements that every segment up to some point has read, in
    pieces of ``FREE_FROM`` bytes or more: segments finish out of order, the runs are
    freed in order."""

    def __init__(self, store, itemsize):
        self.store, self._least = store, max(1, FREE_FROM // itemsize)
        self._ends, self._next = {}, 0
        self._lock = threading.Lock()
        self._freed = [0] * len(store)

    def done(self, segment, ends):
        with self._lock:
            self._ends[segment] = ends
            while self._next in self._ends:
                ends = self._ends.pop(self._next)
                self._next += 1
                for j, e in enumerate(ends):
                    whole = e == self.store.plan.runs[j]
                    if e - self._freed[j] >= self._least or (whole and e > self._freed[j]):
                        self.store.free(j, self._freed[j], e)
                        self._freed[j] = e


class Pipeline:
    """Tasks of three steps: ``read`` on one of ``READERS`` threads, ``sort`` on one of
    ``cpus`` threads, ``write`` on the writing thread, ``tasks`` of them in flight (each
    with :class:`Buffers` of its own, passed to every step as ``slot``).

    The disk reads and writes while the cores sort, as a copy of the file would: tasks
    that read, sort and write in turn left a core idle whenever two of them waited for
    the disk, and the disk idle whenever all of them sorted.

    >>> with Pipeline(tasks=2, cpus=1) as p:
    ...     p(range(4), lambda i, s: i, lambda i, s: i * i, lambda i, s: i + 1)
    [1, 2, 5, 10]
    """

    def __init__(self, tasks, cpus):
        self.tasks = int(tasks)
        self._pools = [ThreadPoolExecutor(READERS, thread_name_prefix="distsort-read"),
                       ThreadPoolExecutor(int(cpus), thread_name_prefix="distsort-sort"),
                       ThreadPoolExecutor(1, thread_name_prefix="distsort-write"),
                       ThreadPoolExecutor(self.tasks, thread_name_prefix="distsort-task")]

    def __call__(self, items, read, sort, write, progress=None, label="", total=None):  # noqa: PLR0913, PLR0917
        """``write(sort(read(item)))`` of every item, results in order;
        ``progress(label, done, total)`` after each."""
        reader, sorter, writer, tasks = self._pools

        def one(item):
            slot = _task_buffers()
            state = reader.submit(read, item, slot).result()
            state = sorter.submit(sort, state, slot).result()
            return writer.submit(write, state, slot).result()
        return _bounded(tasks, one, items, self.tasks, progress, label, total)

    def __enter__(self):
        return self

    def __exit__(self, kind, error, trace):
        for pool in self._pools[::-1]:  # the tasks first: they wait for the others
            pool.shutdown(wait=True, cancel_futures=error is not None)


def _task_buffers():
    """The buffers of the task thread calling (one per task in flight)."""
    if not hasattr(_local, "task"):
        _local.task = Buffers()
    return _local.task


def _bounded(pool, fn, items, tasks, progress, label, total=None):  # noqa: PLR0913, PLR0917
    """``fn`` of every item on ``pool``, at most ``tasks`` at once (memory): the next
    item goes as soon as any task ends, not the oldest (a task whose write waits for
    the disk would hold the next read back).  Results in order;
    ``progress(label, done, total)`` as they come."""
    items = list(items) if total is None else items
    total = len(items) if total is None else total
    free = threading.Semaphore(tasks)
    futures, reported = [], 0

    def report():
        nonlocal reported
        done = sum(f.done() for f in futures)
        for f in futures:
            if f.done() and f.exception() is not None:
                raise f.exception()
        if progress and done > reported:
            reported = done
            progress(label, done, total)

    for item in items:
        while not free.acquire(timeout=0.5):
            report()
        report()
        futures.append(pool.submit(fn, item))
        futures[-1].add_done_callback(lambda _: free.release())
    results = []
    for f in futures:
        results.append(f.result())
    report()
    return results


def disk_sort(job, plan, threads=None, progress=None):
    """Form the runs and merge them (module docstring), sorting on ``threads``
    threads (default: one per core); returns ``facts``: the runs' count, the
    segments', whether the runs were freed behind the merge, and the summaries of
    ``--verify`` (``inputs``, ``outputs``, ``chunks``)."""
    import time
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
