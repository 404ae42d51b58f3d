"""Pinned host memory for out-of-core runs: page-locked, kept for reuse.

Copies between the GPU and host memory run at the link's speed only from page-locked
memory; a copy from pageable memory goes through the driver's staging buffers at a
fraction of it.  Making fresh memory resident is what costs (the kernel zeroes every
page), far more than locking it, and it dominates an out-of-core sort run for the
first time in a worker, so this module makes it cheaper and rarer:

* a block is shared memory (``pages.SharedBlock``: ``memfd`` files mapped one after
  the other, so that a NumPy output chunk can map the pages it takes over again,
  ``pages``), faulted in by several threads at once, a file each
  (``MADV_POPULATE_WRITE``; each page touched where the kernel lacks it), then
  registered with ``cudaHostRegister`` in one call;
* a block whose arrays are all gone goes back to a free list by size, and the next run
  of that size takes it without locking anything: the runs of a sort, and of the next
  sort of the same shape, come in a few sizes;
* where a request finds no free block of its size, one spare of that size is made in
  the background (a sort's next run or output chunk will ask for it), so that the first
  sort in a worker faults memory in while the GPU works; where a sort has said which
  blocks it will ask for (:meth:`PinnedPool.expect`), no more blocks of a size than
  that are made, since a block that no request takes stays locked for nothing.

``register`` and ``unregister`` are the two calls into CUDA; the pool's logic is tested
on the CPU with stand-ins.  Figures: ``docs/performance.md``.
"""
from __future__ import annotations

import ctypes
import functools
import os
import threading
import weakref
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from distsort.backends.outofcore import pages

#: Bytes the blocks are rounded to.
PAGE = 2 << 20


def _cuda_register(address, nbytes):
    import cupy
    cupy.cuda.runtime.hostRegister(address, nbytes, 0)


def _cuda_unregister(address):
    import cupy
    cupy.cuda.runtime.hostUnregister(address)


def _host_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not Linux: no cap
        return None


#: Threads that fault a new block in, a file of it each (``pages.SharedBlock``): the
#: kernel zeroes the pages of different files in parallel.
POPULATE_THREADS = 16
_MADV_POPULATE_WRITE = 23  # Linux 5.14


def _madvise():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        return libc.madvise
    except (OSError, AttributeError):
        return None


def populate(view, threads=POPULATE_THREADS, step=None):
    """Make every page of the ``uint8`` array ``view`` (page aligned) resident, from
    ``threads`` threads, each on a piece of whole pages (of ``step`` bytes, where
    given).

    >>> block = pages.SharedBlock(4 * PAGE); view = np.frombuffer(block.buffer, np.uint8)
    >>> populate(view, step=block.file_bytes); int(view.sum())
    0
    >>> del view; block.close()
    """
    madvise, address = _madvise(), view.ctypes.data
    step = step or -(-view.size // threads // PAGE) * PAGE or PAGE

    def one(start):
        stop = min(view.size, start + step)
        if madvise is None or madvise(address + start, stop - start, _MADV_POPULATE_WRITE):
            view[start:stop:4096] = 0  # an older kernel: touch every page
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(0, view.size, step)))


def new_block(size, register=_cuda_register):
    """A ``pages.SharedBlock`` of ``size`` bytes (whole pages), faulted in
    (:func:`populate`, a file per thread) and handed to ``register`` (address, size):
    page-locked for CUDA.  Anonymous memory in transparent huge pages faulted in at
    4-10 GB/s from 8 or 16 threads on the H200 host, the files of a shared block at
    10-14 GB/s (small pages: the host gives shared memory no huge ones)."""
    block = pages.SharedBlock(size)
    populate(np.frombuffer(block.buffer, np.uint8), step=block.file_bytes)  # not in a copy
    register(block.base, size)
    return block


def block_size(n, dtype):
    """Bytes of the block that holds ``n`` elements of ``dtype``: whole pages, one at
    least.

    >>> block_size(1, "uint8") == PAGE, block_size(PAGE // 4 + 1, "float32") == 2 * PAGE
    (True, True)
    """
    return max(PAGE, -(-(int(n) * np.dtype(dtype).itemsize) // PAGE) * PAGE)


#: Free blocks are unlocked before the pool locks more than this part of host memory.
CAP_FRACTION = 0.5


class PinnedPool:
    """Page-locked host blocks handed out as NumPy arrays, reused by size.

    Free blocks of other sizes are unlocked first where locking a new one would take the
    pool past ``cap`` bytes (default: half of host memory): sorts of many shapes do not
    keep page-locked memory they no longer use.  ``spares``: make a spare block of a
    size in the background where none is left free (``_spare``).

    >>> pool = PinnedPool(register=lambda a, n: None, unregister=lambda a: None,
    ...                   spares=False)
    >>> a = pool.empty(1000, "float32"); a[:] = 1; address = a.ctypes.data
    >>> del a
    >>> pool.empty(1000, "float32").ctypes.data == address   # the same block again
    True
    >>> pool.stats()["locked_bytes"] == PAGE
    True
    """

    def __init__(self, register=_cuda_register, unregister=_cuda_unregister, cap=None,
                 spares=True):
        self._register, self._unregister = register, unregister
        host = _host_memory()
        self.cap = cap if cap is not None else (int(host * CAP_FRACTION) if host else None)
        self._free = defaultdict(list)  # size -> [SharedBlock]
        self._lock = threading.Lock()
        self._pending = {}  # size -> Future of the spare block being made
        self._spares = ThreadPoolExecutor(1, "distsort-pinned-spare") if spares else None
        self.locked_bytes = 0
        self.peak_bytes = 0
        self.in_use = 0
        self._made = defaultdict(int)  # size -> blocks locked now (free or in use)
        self._demand = None  # size -> blocks the current sort asks for (``expect``)
        self._blocks = {}  # address -> every block locked now (``source``)

    def _new_block(self, size):
        block = new_block(size, self._register)
        with self._lock:
            self.locked_bytes += size
            self._made[size] += 1
            self._blocks[block.base] = block
        return block

    def expect(self, sizes):
        """A sort will ask for blocks of these ``sizes`` (bytes, as :func:`block_size`
        rounds them; a size as often as blocks of it): spares are made only while fewer
        blocks of a size are locked.  None: not known (one spare of a size wherever
        none is free).

        >>> pool = PinnedPool(register=lambda a, n: None, unregister=lambda a: None)
        >>> pool.expect([PAGE, PAGE]); a = pool.empty(10, "uint8"); pool.settle()
        >>> b = pool.empty(10, "uint8"); pool.settle(); pool.stats()["locked_bytes"] // PAGE
        2
        """
        demand = None
        if sizes is not None:
            demand = defaultdict(int)
            for size in sizes:
                demand[int(size)] += 1
        with self._lock:
            self._demand = demand

    def _take(self, size):
        with self._lock:
            free = self._free[size]
            return free.pop() if free else None, self._pending.get(size)

    def empty(self, n, dtype):
        """An uninitialized array of ``n`` elements of ``dtype`` in a locked block."""
        dtype = np.dtype(dtype)
        size = block_size(n, dtype)
        block, pending = self._take(size)
        if block is None and pending is not None:
            pending.result()  # a spare of this size is being made: wait for it
            block, _ = self._take(size)
        if block is None:
            if self.cap is not None and self.locked_bytes + size > self.cap:
                self.trim()
            block = self._new_block(size)
        with self._lock:
            self.in_use += size
            self.peak_bytes = max(self.peak_bytes, self.in_use)
        self._spare(size)
        array = np.frombuffer(block.buffer, dtype, n)
        # Views keep ``array`` (their base) alive: the block returns when all are gone.
        weakref.finalize(array, self._release, block, size)
        return array

    def source(self, array):
        """``(block, byte)``: the block of this pool where ``array`` lies and the
        offset of its first byte there; None where it lies elsewhere.

        >>> pool = PinnedPool(register=lambda a, n: None, unregister=lambda a: None,
        ...                   spares=False)
        >>> a = pool.empty(1000, "float32"); pool.source(a[10:])[1], pool.source(a.copy())
        (40, None)
        """
        address = array.ctypes.data
        with self._lock:
            for base, block in self._blocks.items():
                if base <= address < base + len(block):
                    return block, address - base
        return None

    def _spare(self, size):
        """Make one more block of ``size`` in the background where none is free: a sort
        asks for several blocks of each size (its runs, its output chunks), and the next
        one is then faulted in while the GPU works on this one."""
        with self._lock:
            if (self._spares is None or self._free[size] or size in self._pending
                    or (self.cap is not None and self.locked_bytes + size > self.cap)
                    or (self._demand is not None
                        and self._made[size] >= self._demand.get(size, 0))):
                return
            self._pending[size] = self._spares.submit(self._make_spare, size)

    def _make_spare(self, size):
        try:
            block = self._new_block(size)
        except (OSError, RuntimeError, ValueError):  # best effort: a request makes its own
            block = None
        with self._lock:
            if block is not None:
                self._free[size].append(block)
            self._pending.pop(size, None)

    def settle(self):
        """Wait for the spare blocks being made."""
        with self._lock:
            pending = list(self._pending.values())
        for f in pending:
            f.result()

    def _release(self, block, size):
        with self._lock:
            self._free[size].append(block)
            self.in_use -= size

    def trim(self):
        """Unlock and unmap every free block (what the next sort of that size would take)."""
        with self._lock:
            blocks = [(b, s) for s, bs in self._free.items() for b in bs]
            self._free.clear()
        for block, size in blocks:
            self._unregister(block.base)
            with self._lock:
                del self._blocks[block.base]
                self.locked_bytes -= size
                self._made[size] -= 1
            block.close()

    def stats(self):
        """Bytes locked, in use now, and at most in use since the pool began."""
        return {"locked_bytes": self.locked_bytes, "in_use_bytes": self.in_use,
                "peak_in_use_bytes": self.peak_bytes}


@functools.cache
def pool():
    """This process's pool (made on first use)."""
    return PinnedPool()
