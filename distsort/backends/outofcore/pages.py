"""NumPy output chunks of a k-way merge in the pages of the runs they were merged from.

A k-way merge of host runs into NumPy chunks held the input, the runs and the output:
three times the data.  The merge reads each run from front to back, so every page of a
run that an output chunk's segments have read is free for that chunk's output; what a
NumPy chunk needs is one contiguous address range.  The runs therefore live in shared
blocks of the pinned pool (:class:`SharedBlock`: ``memfd`` files mapped one after the
other, registered with CUDA at the block's address), and each output chunk is its
pages mapped in order at an address of its own (:func:`stitch`).  The merge writes each
segment by DMA into the pages its plan (:func:`page_plan`) gives it, at their
registered addresses, and the chunk's mapping shows the same pages.  Host memory is
then the input, the runs once and a few pages per chunk.

A page is handed to a chunk only once every byte of it has been read by that chunk's
segments (the pages at the ends of its range in each run hold elements of the
neighbouring chunks, and stay), so the plan needs at most ``2 * runs + 1`` pages more
than the runs give: those come from a small spare block.  The chunk keeps the runs' blocks in use
until it is gone.

A process's resident set counts a page once per mapping: once a chunk is read through
its own mapping, RSS counts its pages twice, PSS (``/proc/PID/smaps_rollup``) once.

>>> page_plan([0, 0], [[8192, 4096]], [12288], 4096)[1]
[(0, 2, 0, 0), (2, 1, 1, 0)]
"""
from __future__ import annotations

import ctypes
import itertools
import mmap
import os
import weakref
from collections import deque

import numpy as np

#: The unit of the mapping: the system's page.
PAGE = mmap.PAGESIZE


def page_plan(starts, ends, out_ends, page=PAGE):
    """Where each segment of an output chunk writes, and which pages the chunk maps.

    ``starts[r]``: the byte of run ``r``'s file where the chunk's range begins;
    ``ends[s][r]``: the byte where it ends after segment ``s`` (non-decreasing in
    ``s``); ``out_ends[s]``: the chunk's bytes after segment ``s``.  After segment
    ``s`` has read its slices, each run's whole pages read so far are free, and the
    chunk's pages up to ``out_ends[s]`` take them in turn (run by run), or pages of a
    spare block (source ``len(starts)``) where none is free.

    Returns ``(writes, pages, spare)``: ``writes[s]``, the pieces of segment ``s``'s
    bytes as ``(out_byte, nbytes, source, source_byte)``; ``pages``, the chunk's pages as
    ``(out_page, count, source, source_page)``, consecutive ones joined; ``spare``, the
    spare pages taken.

    >>> writes, pages, spare = page_plan([100], [[5000], [9000]], [4900, 8900], 1000)
    >>> pages   # segment 0 read 4 whole pages of the run (page 0 is the last chunk's)
    [(0, 4, 0, 1), (4, 1, 1, 0), (5, 4, 0, 5)]
    >>> writes[1], spare
    ([(4900, 100, 1, 900), (5000, 3900, 0, 5000)], 1)
    """
    k = len(starts)
    nxt = [-(-a // page) for a in starts]  # each run's first page not yet free
    free = deque()  # (source, first page, stop)
    pages, spare, mapped, writes, done = [], 0, 0, [], 0
    for ends_s, out_end in zip(ends, out_ends, strict=True):
        for r, b in enumerate(ends_s):
            if b // page > nxt[r]:  # whole pages read since the last segment
                free.append((r, nxt[r], b // page))
                nxt[r] = b // page
        need = -(-out_end // page)
        while mapped < need:
            if free:
                r, first, stop = free.popleft()
                take = min(stop - first, need - mapped)
                if take < stop - first:
                    free.appendleft((r, first + take, stop))
            else:
                r, first, take = k, spare, need - mapped
                spare += take
            _join(pages, (mapped, take, r, first))
            mapped += take
        writes.append(_writes(pages, done, out_end, page))
        done = out_end
    return writes, pages, spare


def _join(pages, piece):
    if pages:
        o, n, r, p = pages[-1]
        if r == piece[2] and o + n == piece[0] and p + n == piece[3]:
            pages[-1] = (o, n + piece[1], r, p)
            return
    pages.append(piece)


def _writes(pages, lo, hi, page):
    """The bytes ``[lo, hi)`` of the chunk, cut where ``pages`` change source."""
    out = []
    for o, n, r, p in pages:
        a, b = max(lo, o * page), min(hi, (o + n) * page)
        if a < b:
            out.append((a, b - a, r, p * page + a - o * page))
    return out


class PagedChunk:
    """One part (keys or values) of a NumPy output chunk of a k-way merge, in the pages
    of the runs it consumes (:func:`paged_chunk` makes it).  The engine copies each
    segment's merged bytes to :meth:`targets` (pinned, registered addresses), in
    segment order, then takes the chunk as :meth:`array`."""

    def __init__(self, plan, blocks, views, keep, nbytes):
        self._writes, self._pages, _ = plan
        self._blocks, self._views, self._keep, self.nbytes = blocks, views, keep, nbytes

    def targets(self, s):
        """``(first byte of the chunk, host uint8 array)`` of each piece of segment
        ``s``."""
        return [(o, self._views[r][p:p + n]) for o, n, r, p in self._writes[s]]

    def array(self, dtype):
        """The chunk, as an array of ``dtype`` (call once its copies are done)."""
        self._views = None
        out = stitch(self._pages, self.nbytes, self._blocks, self._keep)
        return out.view(dtype)


def paged_chunk(arrays, cuts, pool):
    """A :class:`PagedChunk` for the merge of ``arrays`` (one part of each run, in
    blocks of the pinned ``pool``) between the co-ranks ``cuts`` (one tuple per
    segment end, the first one the chunk's start); None where some run is elsewhere."""
    found = [pool.source(a) for a in arrays]
    if not arrays or any(f is None for f in found):
        return None
    size = arrays[0].dtype.itemsize
    starts = [at + c * size for (_, at), c in zip(found, cuts[0], strict=True)]
    ends = [[at + c * size for (_, at), c in zip(found, cs, strict=True)]
            for cs in cuts[1:]]
    out_ends = list(itertools.accumulate((sum(b) - sum(a)) * size
                                         for a, b in itertools.pairwise(cuts)))
    plan = page_plan(starts, ends, out_ends)
    blocks = [block for block, _ in found]
    keep = [arrays]
    if plan[2]:
        spare = pool.empty(plan[2] * PAGE, np.uint8)
        block, at = pool.source(spare)
        assert at == 0  # noqa: S101 (pool arrays begin their blocks)
        blocks.append(block)
        keep.append(spare)
    views = [np.frombuffer(b.buffer, np.uint8) for b in blocks]
    return PagedChunk(plan, blocks, views, keep, out_ends[-1] if out_ends else 0)


# -- the mapping ------------------------------------------------------------------
_MAP_FIXED = 0x10
_PROT_NONE = 0


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc


_LIBC = []  # made on first use


def _mmap(address, size, prot, flags, fd=-1, offset=0):
    if not _LIBC:
        _LIBC.append(_libc())
    out = _LIBC[0].mmap(address, size, prot, flags, fd, offset)
    if out in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "distsort: mmap of shared pages failed")
    return out


#: Bytes of each file of a :class:`SharedBlock`, at least, and files of a block, at
#: most.  The kernel faults the pages of one file in one at a time: 4-5 GB/s for one
#: ``memfd`` from 8 or 16 threads, 10-14 GB/s with a file per thread (one H200 host,
#: 2026-11-28); each file holds a descriptor as long as its block lives.
FILE_BYTES = 128 << 20
MAX_FILES = 16


def _memfd():
    """A new ``memfd``; where the process is out of descriptors, its soft limit is
    raised to the hard one first (as dask's scheduler does)."""
    try:
        return os.memfd_create("distsort-run", os.MFD_CLOEXEC)
    except OSError as e:
        import errno
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if e.errno != errno.EMFILE or soft >= hard:
            raise
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return os.memfd_create("distsort-run", os.MFD_CLOEXEC)


class SharedBlock:
    """``size`` bytes (whole pages) of shared memory at one address: ``memfd`` files of
    ``file_bytes`` (default: :data:`FILE_BYTES`, or larger for at most
    :data:`MAX_FILES`) mapped one after the other, whose pages :func:`stitch` can map
    again elsewhere.  ``buffer``: the bytes, for ``numpy.frombuffer``; ``base``: their
    address.  :meth:`close` unmaps them: no array may be left on them.

    >>> block = SharedBlock(3 * PAGE, file_bytes=2 * PAGE)
    >>> len(block), [(at, n) for _, at, n in block.pieces(PAGE, 2 * PAGE)]
    (12288, [(4096, 4096), (0, 4096)])
    >>> block.close()
    """

    def __init__(self, size, file_bytes=None):
        file_bytes = file_bytes or max(FILE_BYTES, -(-size // MAX_FILES // PAGE) * PAGE)
        self.size, self.file_bytes, self.files = size, file_bytes, []
        self.base = _mmap(None, size, _PROT_NONE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        try:
            for at in range(0, size, file_bytes):
                n = min(file_bytes, size - at)
                self.files.append(_memfd())
                os.ftruncate(self.files[-1], n)
                _mmap(self.base + at, n, mmap.PROT_READ | mmap.PROT_WRITE,
                      mmap.MAP_SHARED | _MAP_FIXED, self.files[-1])
        except BaseException:
            self.close()
            raise
        self.buffer = (ctypes.c_char * size).from_address(self.base)

    def __len__(self):
        return self.size

    def pieces(self, offset, nbytes):
        """``(fd, offset in the file, bytes)`` of the block's bytes from ``offset`` on."""
        while nbytes > 0:
            i, at = divmod(offset, self.file_bytes)
            n = min(nbytes, self.file_bytes - at)
            yield self.files[i], at, n
            offset, nbytes = offset + n, nbytes - n

    def close(self):
        if self.base:
            _LIBC[0].munmap(self.base, self.size)
            self.base = 0
        for fd in self.files:
            os.close(fd)
        self.files = []


def stitch(pages, nbytes, blocks, keep, page=PAGE):
    """A ``uint8`` array of ``nbytes`` whose pages are ``pages`` (as :func:`page_plan`
    gives them) of the :class:`SharedBlock` ``blocks[source]``, each at its page
    ``source_page`` there.  ``keep``: what must live as long as the array (the blocks'
    arrays); the mapping goes when the array and its views are gone.

    >>> block = SharedBlock(2 * PAGE); b = np.frombuffer(block.buffer, np.uint8)
    >>> b[:PAGE] = ord("a"); b[PAGE:] = ord("b")
    >>> out = stitch([(0, 1, 0, 1), (1, 1, 0, 0)], PAGE + 3, [block], [])
    >>> bytes(out[PAGE - 1:PAGE + 2])
    b'baa'
    >>> out[PAGE] = ord("c"); chr(b[0])   # the same pages
    'c'
    """
    size = max(page, -(-nbytes // page) * page)
    base = _mmap(None, size, _PROT_NONE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        for o, n, r, p in pages:
            at = base + o * page
            for fd, offset, m in blocks[r].pieces(p * page, n * page):
                _mmap(at, m, mmap.PROT_READ | mmap.PROT_WRITE,
                      mmap.MAP_SHARED | _MAP_FIXED, fd, offset)
                at += m
    except BaseException:
        _LIBC[0].munmap(base, size)
        raise
    array = np.frombuffer((ctypes.c_char * nbytes).from_address(base), np.uint8)
    weakref.finalize(array, _unmap, base, size, keep)
    return array


def _unmap(base, size, keep):
    _LIBC[0].munmap(base, size)
