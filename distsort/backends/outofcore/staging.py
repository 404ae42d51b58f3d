"""Copies between pageable host memory and the GPU through a small ring of pinned buffers.

A copy from pageable memory goes through the driver's own staging and one thread, at a
fraction of the link's speed, however many threads ask for it.  A :class:`StagingRing` holds two
pinned buffers for each of its threads (pinned once, when the ring is made, and reused
by every copy after, one block of :func:`distsort.backends.outofcore.pinned.new_block`);
each thread copies its pieces of the array into one buffer (host
memory bandwidth, the GIL released) while the other buffer's copy to the GPU runs on
the thread's own stream.  Back from the GPU the same, in the other order.

:func:`ring` is this process's ring for the current device (made on first use).
"""
from __future__ import annotations

import contextlib
import functools
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

#: Bytes of each pinned buffer, and threads of the ring (two buffers each).
BUFFER_BYTES = 32 << 20
THREADS = 8


def pieces(nbytes, size, workers):
    """``[(offset, length), ...]`` of each worker's pieces of at most ``size`` bytes,
    dealt out in turn so that all workers cover the array together from its start.

    >>> pieces(10, 4, 2)
    [[(0, 4), (8, 2)], [(4, 4)]]
    """
    out = [[] for _ in range(workers)]
    for i, o in enumerate(range(0, nbytes, size)):
        out[i % workers].append((o, min(size, nbytes - o)))
    return out


def _bytes(x):
    return x.reshape(-1).view(np.uint8)


class StagingRing:
    """``threads`` threads, each with its stream and two pinned buffers of
    ``buffer_bytes``, copying pageable NumPy arrays to and from CuPy arrays."""

    def __init__(self, threads=THREADS, buffer_bytes=BUFFER_BYTES):
        import cupy

        from distsort.backends.outofcore.pinned import PAGE, new_block
        self.device = cupy.cuda.Device().id
        self.size = -(-int(buffer_bytes) // PAGE) * PAGE
        self._block = new_block(2 * threads * self.size)  # pinned once, kept
        ring = np.frombuffer(self._block.buffer, np.uint8)
        self._bufs = [ring[b * self.size:(b + 1) * self.size] for b in range(2 * threads)]
        self._streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(threads)]
        self._events = [cupy.cuda.Event(disable_timing=True) for _ in range(2 * threads)]
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="distsort-staging")
        self.threads = threads
        self._lock = threading.Lock()

    def _run(self, work, dst, src):
        jobs = pieces(src.nbytes, self.size, self.threads)
        with self._lock:  # one copy at a time: a spill may come from another thread
            futures = [self._pool.submit(work, w, dst, src, p) for w, p in enumerate(jobs) if p]
            for f in futures:
                f.result()

    def to_device(self, dst, src):
        """Copy the pageable NumPy array ``src`` into the contiguous CuPy array ``dst``
        (same bytes); returns when the copy is done."""
        if src.nbytes:
            self._run(self._h2d, _bytes(dst), _bytes(np.ascontiguousarray(src)))

    def to_host(self, dst, src):
        """Copy the contiguous CuPy array ``src`` into the NumPy array ``dst``."""
        if src.nbytes:
            self._run(self._d2h, _bytes(dst), _bytes(src))

    def _h2d(self, w, dst, src, jobs):
        import cupy
        stream = self._streams[w]
        with cupy.cuda.Device(self.device):
            for j, (o, n) in enumerate(jobs):
                b = 2 * w + j % 2
                self._events[b].synchronize()  # the buffer's last copy has left it
                np.copyto(self._bufs[b][:n], src[o:o + n])
                dst[o:o + n].set(self._bufs[b][:n], stream=stream)
                self._events[b].record(stream)
            stream.synchronize()

    def _d2h(self, w, dst, src, jobs):
        import cupy
        stream = self._streams[w]
        with cupy.cuda.Device(self.device):
            def issue(j):
                o, n = jobs[j]
                b = 2 * w + j % 2
                src[o:o + n].get(out=self._bufs[b][:n], stream=stream, blocking=False)
                self._events[b].record(stream)
            issue(0)
            for j, (o, n) in enumerate(jobs):
                if j + 1 < len(jobs):
                    issue(j + 1)
                b = 2 * w + j % 2
                self._events[b].synchronize()
                np.copyto(dst[o:o + n], self._bufs[b][:n])

    def close(self):
        """Stop the threads and unlock the buffers."""
        import cupy
        self._pool.shutdown()
        address = self._bufs[0].ctypes.data
        self._bufs = []
        cupy.cuda.runtime.hostUnregister(address)
        with contextlib.suppress(BufferError):  # a view is still held: it keeps the block
            self._block.close()


@functools.cache
def _ring(device):
    return StagingRing()


def ring():
    """This process's ring for the current CUDA device."""
    import cupy
    return _ring(cupy.cuda.Device().id)
