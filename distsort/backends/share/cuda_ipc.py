"""Chunks shared between the GPU workers of one host through CUDA IPC.

Sent as data, a compare-split costs two trips through the scheduler after the
chunks are sorted (each side needs the other's edges to cut its crossing part,
then the other's crossing part), and distributed's fetch of the part over UCX,
each longer than ``cudaMemcpyPeer`` of the part takes (the figures:
``docs/performance.md``).  A :class:`Shared` chunk travels as CUDA IPC
handles instead (its memory, and an event recorded once the chunk is complete):
the partner maps the memory, makes its stream wait for the event, finds the
crossing count by binary search across the two GPUs, and copies just the
crossing elements with the copy engine (``cudaMemcpyAsync`` over NVLink).  One
trip, started while the sorts still run, and only what crosses moves.

Lifetime: the owner holds the share (chunk and event) until the partner's merge
says (``keepalive``) that its copy is done; a thread of the reader's process waits for
the copy and says so, while the merge's task ends as soon as its kernels are
queued (the report to the scheduler then overlaps the copy and the merge).  Dask's
reference to the share would not do: the active memory manager may drop the
owner's replica while the partner reads.  Mappings stay open, at most ``MAPPINGS``
of them: an RMM pool then maps once per pair of processes (mapping a pool of
100 GB takes about a second: ``docs/performance.md``).

Not supported: workers that allocate from CuPy's own pool instead of an RMM pool
(``distsort.cluster.local_cuda_cluster`` and dask-cuda's ``rmm_pool_size`` give
one).  CuPy's pool may free a block that a partner still has mapped, which CUDA
leaves undefined; set ``distsort.exchange`` to ``"comm"`` for such workers.

Only for workers of one host that may map each other's memory (no container
boundary between them): ``distsort.sort`` uses it when the config value
``distsort.exchange`` says so, or (``"auto"``) when every worker reports the same
host (``distsort.plan.sortplan``).  A share that reaches another
host raises an error in the merge that reads it, naming that setting.
"""
from __future__ import annotations

import ctypes
import functools
import logging
import os
import queue
import socket
import threading
import time
import uuid
import weakref
from collections import OrderedDict
from contextlib import contextmanager

import cupy
import numpy as np

from distsort.backends.share.keepalive import mark_read, process_pins

logger = logging.getLogger(__name__)

#: Mappings of other processes' allocations kept open per process.
MAPPINGS = 16

_LOCAL = weakref.WeakValueDictionary()  # key -> Shared made by this process
_MAPPED = OrderedDict()  # (host, pid, handle) -> base pointer, least recently used first
_READ = {"parts": 0, "bytes": 0, "map_s": 0.0}  # what this process copied from peers
_lock = threading.Lock()
_rt = cupy.cuda.runtime
_copied = queue.SimpleQueue()  # (device, event after the copies, imported event, ticket)
_releaser = [None]  # the thread that marks shares read once their copies are done


@functools.lru_cache(maxsize=1)
def host_id():
    """This machine's boot id (hostname where there is none): processes that share it
    share the GPUs."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return socket.gethostname()


@functools.lru_cache(maxsize=1)
def _libcuda():
    return ctypes.CDLL("libcuda.so.1")


def _allocation_base(ptr):
    """Start of the allocation holding device pointer ``ptr`` (an IPC handle maps a whole
    allocation: an RMM pool, or one block of CuPy's pool)."""
    _rt.setDevice(_rt.getDevice())  # a current context for the driver call
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    rc = _libcuda().cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size),
                                            ctypes.c_uint64(ptr))
    if rc != 0:
        raise RuntimeError(f"cuMemGetAddressRange failed (CUresult {rc})")
    return base.value


def _describe(a):
    """``(handle, offset, dtype, size)`` of a contiguous 1-D device array."""
    if a.size == 0:
        return None, 0, a.dtype.str, 0
    base = _allocation_base(a.data.ptr)
    return _rt.ipcGetMemHandle(base), a.data.ptr - base, a.dtype.str, a.size


class Shared:
    """A chunk (a CuPy array or a ``(keys, values)`` tuple) that pickles as CUDA IPC
    handles: of its memory, and of an event that completes when the chunk does."""

    def __init__(self, chunk):
        self.chunk = chunk  # held: keeps the memory alive for the reader
        arrays = chunk if isinstance(chunk, tuple) else (chunk,)
        self._desc = tuple(_describe(a) for a in arrays)
        self._event = cupy.cuda.Event(disable_timing=True, interprocess=True)
        # After the kernels that make the chunk, in the order of this worker's stream.
        self._event.record(cupy.cuda.get_current_stream())
        self._key = uuid.uuid4().hex
        _LOCAL[self._key] = self
        # Held beyond Dask's reference to the share until the partner has copied from it.
        self._ticket = process_pins().pin(self)

    def __reduce__(self):
        return Remote, (self._desc, _rt.ipcGetEventHandle(self._event.ptr),
                        isinstance(self.chunk, tuple), host_id(), os.getpid(), self._key,
                        self._ticket)

    def __sizeof__(self):  # the memory is the chunk's, counted there
        return 256


class Remote:
    """A :class:`Shared` chunk as another process receives it."""

    def __init__(self, desc, event, is_tuple, host, pid, key, ticket):
        self.desc, self.event, self.is_tuple = desc, event, is_tuple
        self.host, self.pid, self.key, self.ticket = host, pid, key, ticket

    def __sizeof__(self):
        return 256


def share(chunk):
    """``chunk`` as a :class:`Shared` (no copy, no wait)."""
    return Shared(chunk)


@contextmanager
def opened(chunk):
    """``(plain chunk, borrowed)``: the chunk as CuPy arrays, ``borrowed`` when they are
    another process's memory.  The current stream then waits for the owner's kernels;
    copy what crosses with :func:`copy_in` (on the current stream) before the block
    ends: the owner may free the memory once what the stream had queued by then is
    done."""
    if not isinstance(chunk, (Shared, Remote)):
        yield chunk, False
        return
    own = chunk if isinstance(chunk, Shared) else None
    if own is None and chunk.pid == os.getpid() and chunk.host == host_id():
        own = _LOCAL.get(chunk.key)  # pickled and back (spilled)
        if own is None:
            raise RuntimeError("distsort: a shared chunk was read after its owner freed it")
    if own is not None:  # this process's own share: read in place, then unpinned
        try:
            yield own.chunk, False
        finally:
            mark_read(*own._ticket)
        return
    if chunk.host != host_id():
        raise RuntimeError(
            "distsort: a chunk shared through CUDA IPC reached another host; set the Dask "
            "config value distsort.exchange to 'comm' (or the environment variable "
            "DASK_DISTSORT__EXCHANGE=comm) for clusters of several hosts")
    start = time.perf_counter()
    arrays = [_map(chunk, d) for d in chunk.desc]
    event = _rt.ipcOpenEventHandle(chunk.event)
    stream = cupy.cuda.get_current_stream()
    try:
        _rt.streamWaitEvent(stream.ptr, event)
        with _lock:
            _READ["map_s"] += time.perf_counter() - start
        yield (tuple(arrays) if chunk.is_tuple else arrays[0]), True
    finally:
        _release_when_copied(stream, event, chunk.ticket)


def _release_when_copied(stream, event, ticket):
    """Mark the share read once what ``stream`` has queued so far (the copies from it)
    is done, without waiting here: the merge that follows on the stream need not."""
    done = cupy.cuda.Event(disable_timing=True)
    done.record(stream)
    with _lock:
        if _releaser[0] is None or not _releaser[0].is_alive():
            _releaser[0] = threading.Thread(target=_release_copied, daemon=True,
                                            name="distsort-ipc-release")
            _releaser[0].start()
    _copied.put((cupy.cuda.Device().id, done, event, ticket))


def _release_copied():
    while True:
        device, done, event, ticket = _copied.get()
        try:
            _rt.setDevice(device)
            done.synchronize()
            _rt.eventDestroy(event)
        except Exception:  # noqa: BLE001  (a failed device: the merge's task reports it)
            logger.exception("distsort: waiting for a copy from a shared chunk failed")
        mark_read(*ticket)  # the owner may free the memory now


def _map(chunk, desc):
    handle, offset, dtype, size = desc
    dtype = np.dtype(dtype)
    if size == 0:
        return cupy.empty(0, dtype=dtype)
    key = (chunk.host, chunk.pid, handle)
    with _lock:
        base = _MAPPED.pop(key, None)
        if base is None:
            base = _rt.ipcOpenMemHandle(handle, _rt.cudaIpcMemLazyEnablePeerAccess)
        _MAPPED[key] = base
        while len(_MAPPED) > MAPPINGS:
            cupy.cuda.Device().synchronize()  # no copy still reads the mapping
            _rt.ipcCloseMemHandle(_MAPPED.popitem(last=False)[1])
    device = cupy.cuda.Device().id  # mapped into this device's address space
    mem = cupy.cuda.UnownedMemory(base + offset, size * dtype.itemsize, None, device)
    return cupy.ndarray((size,), dtype, cupy.cuda.MemoryPointer(mem, 0))


def copy_in(a):
    """A copy of ``a`` (in another GPU's memory) in this device's, by the copy engine."""
    out = cupy.empty_like(a)
    if a.size:
        _rt.memcpyAsync(out.data.ptr, a.data.ptr, a.nbytes, _rt.memcpyDefault,
                        cupy.cuda.get_current_stream().ptr)
        with _lock:
            _READ["parts"] += 1
            _READ["bytes"] += a.nbytes
    return out


def read_stats():
    """``{"parts", "bytes", "map_s"}``: arrays this process copied from other processes'
    GPU memory, their bytes, and the seconds spent mapping them."""
    with _lock:
        return dict(_READ)
