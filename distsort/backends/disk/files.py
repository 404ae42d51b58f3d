"""Files of runs on disk: ranges of elements read and written in large transfers, past
the page cache where the filesystem allows it (``O_DIRECT``), and freed behind a
streamed merge (``fallocate``'s hole punching); the disk path's I/O
(:mod:`distsort.backends.disk.runs`).

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as d:
...     path = os.path.join(d, "f")
...     with open(path, "wb") as f:
...         _ = f.write(bytes(40))
...     r = Region(path, 8, np.dtype(np.uint32), 8)
...     r.write(2, np.array([7, 8], np.uint32))
...     r.read(0, 5).tolist()
[0, 0, 7, 8, 0]
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import os
from dataclasses import dataclass

import numpy as np

from distsort.backends.disk.buffers import PAGE, scratch
from distsort.core.libc import libc

__all__ = ["Region", "punch_hole", "can_free", "merged_file", "IO_BLOCK", "DIRECT_FROM",
           "DIRECT_BLOCK"]

#: Bytes per read or write call.
IO_BLOCK = 64 << 20
#: Reads of fewer bytes go through the page cache: a merge of many runs reads each run
#: in small consecutive slices, which the kernel's read-ahead serves while the merge
#: sorts (straight, each one waited for the disk: the merge of 151 runs of 1 GiB
#: took 1.6 times as long).
DIRECT_FROM = 1 << 20
#: Bytes per ``O_DIRECT`` read, through one staging buffer per thread.
DIRECT_BLOCK = 16 << 20
#: ``fallocate``'s flags that free a range of a file and keep its size.
_PUNCH_HOLE = 0x02 | 0x01


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
