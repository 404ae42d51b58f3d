"""CuPy chunks that a dask-cuda worker spills fast: output chunks without a copy.

An out-of-core sort of CuPy chunks ends with its output in pinned host memory (the
sorted runs) and hands each output chunk to the user on the GPU.  A dask-cuda worker
then holds more than its device limit and spills chunks back to host memory through
distributed's "dask" serialization: a fresh pageable copy, for all but a budget's
worth of the output, which took longer than the rest of the sort
(``docs/performance.md``).

The output chunks are therefore made by :func:`host_backed`: plain CuPy arrays whose
device memory is a :class:`HostCopy`, which remembers the host copy it was filled
from and a fingerprint of their contents (a position-dependent 64-bit hash, one
pass over the device array).  Importing this module wraps
distributed's "dask" serializer of CuPy arrays, the one dask-cuda spills with: for such
an array, still whole and unchanged (a task that wrote into the chunk in place changed
the fingerprint), it hands the host copy over as the frame, without a copy.  The host
copy of a chunk that a k-way merge made is the run ranges it consumed, several pieces:
such a chunk spills as one frame per piece, which its deserialization (wrapped too)
joins on the device.  Other
contiguous arrays of some size (the input chunks an out-of-core sort spills to make
room) are copied through the staging ring (:func:`staged_copy`: several threads, where
CuPy's serializer makes one pageable copy), the rest go to CuPy's own serializer.  The
header and bytes are those CuPy's serializer would make, so the chunk spills, reads
(``distsort.cluster.held``) and comes back as any CuPy array does (a host copy of an output
chunk from page-locked memory, at the link's speed).  The host copy stays with the
chunk, spilled or not, and keeps its pinned block in use.
"""
from __future__ import annotations

import time
from collections import defaultdict

import cupy
import numpy as np
from distributed.protocol import dask_deserialize, dask_serialize

_FINGERPRINT = cupy.ElementwiseKernel(
    "raw W words, uint64 n", "uint64 part",
    """
    unsigned long long acc = 0;
    for (unsigned long long j = i; j < n; j += _ind.size()) {
        unsigned long long z = (unsigned long long)words[j] + (j + 1) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        acc += z ^ (z >> 31);
    }
    part = acc;
    """,
    "distsort_fingerprint")

#: Seconds and counts of this process's spills of CuPy arrays: ``spill_free`` (handed
#: over the host copy), ``spill_copied`` and ``spill_copied_bytes`` (CuPy's
#: serializer), ``spill_copied_<why>`` (:func:`_why_copied`); reported with
#: ``stream_gpu.phase_seconds``.
SPILLS: dict = defaultdict(float)

#: Threads of the fingerprint's grid-stride loop (partial sums summed once more).
_LANES = 1 << 16


def fingerprint(x) -> int:
    """A hash of the bytes of the contiguous CuPy array ``x`` and of their positions
    (a write anywhere, a permutation, changes it)."""
    raw = x.reshape(-1).view(np.uint8)
    width = next(w for w in (8, 4, 2, 1) if raw.size % w == 0)
    words = raw.view(f"u{width}")
    parts = cupy.empty(min(_LANES, max(words.size, 1)), np.uint64)
    _FINGERPRINT(words, np.uint64(words.size), parts)
    return int(parts.sum(dtype=np.uint64))


class HostCopy(cupy.cuda.UnownedMemory):
    """Device memory (owned by the array it was allocated for) that remembers the host
    copy it was filled from (``host``: a tuple of contiguous NumPy pieces, the array's
    bytes in order), the array's ``shape`` and ``dtype``, and the fingerprint of its
    contents then."""

    host = None
    shape = dtype = None
    fingerprint = None


def host_backed(host, device=None):
    """The NumPy array ``host`` (contiguous; page-locked for speed) on the GPU: a plain
    CuPy array whose memory remembers ``host`` (module doc).  ``device``: a CuPy array
    already equal to ``host`` (a k-way merge leaves its output in both), else a copy.
    With ``device``, ``host`` may also be a sequence of contiguous pieces whose
    concatenation equals it (the run ranges a k-way merge consumed): the chunk then
    spills as one frame per piece."""
    if device is None:
        device = cupy.asarray(host)
    pieces = (host,) if isinstance(host, np.ndarray) else tuple(host)
    pieces = tuple(p.reshape(-1) for p in pieces if p.size) or (np.empty(0, device.dtype),)
    if sum(p.nbytes for p in pieces) != device.nbytes:
        raise ValueError("the host pieces do not hold the array's bytes")
    # the device named: an empty array's pointer is null, which CuPy cannot place alone
    memory = HostCopy(device.data.ptr, device.nbytes, device, device.device.id)
    memory.host, memory.fingerprint = pieces, fingerprint(device)
    memory.shape, memory.dtype = device.shape, device.dtype
    return cupy.ndarray(device.shape, device.dtype, cupy.cuda.MemoryPointer(memory, 0))


def host_copy(x):
    """The pieces of the host copy that ``x`` was made from (:func:`host_backed`) where
    ``x`` is that whole array and unchanged since, else None."""
    memory = getattr(getattr(x, "data", None), "mem", None)
    if not isinstance(memory, HostCopy):
        return None
    if (x.data.ptr != memory.ptr or x.shape != memory.shape or x.dtype != memory.dtype
            or not x.flags.c_contiguous or fingerprint(x) != memory.fingerprint):
        return None
    return memory.host


#: Contiguous CuPy arrays of at least this many bytes spill through the staging ring
#: (``staged_copy``); smaller ones through CuPy's serializer.
STAGED_BYTES = 64 << 20


def staged_copy(x):
    """A pageable host copy of the contiguous CuPy array ``x``, made through the staging
    ring (``distsort.backends.outofcore.staging``): several threads fault the new pages
    in and copy beside the link, where CuPy's serializer makes one pageable copy."""
    from distsort.backends.outofcore.staging import ring
    host = np.empty(x.shape, x.dtype)
    cupy.cuda.Device().synchronize()  # whatever still writes ``x`` on another stream
    ring().to_host(host, x)
    return host


def _why_copied(x):
    """Why :func:`host_copy` found no host copy of ``x`` (a phase name's suffix)."""
    memory = getattr(getattr(x, "data", None), "mem", None)
    if not isinstance(memory, HostCopy):
        return "plain"
    if x.data.ptr != memory.ptr or x.shape != memory.shape or x.dtype != memory.dtype:
        return "view"
    return "noncontiguous" if not x.flags.c_contiguous else "changed"


def join_frames(frames):
    """One device buffer (CuPy ``uint8``) holding ``frames`` (host buffers) one after
    the other: a chunk spilled in pieces (:func:`host_backed`), read back."""
    out = cupy.empty(sum(memoryview(f).nbytes for f in frames), np.uint8)
    o = 0
    for f in frames:
        piece = np.frombuffer(f, np.uint8)
        out[o:o + piece.size].set(piece)
        o += piece.size
    return out


def is_pinned(a) -> bool:
    """Whether the NumPy array ``a`` lies in page-locked memory that CUDA knows."""
    try:
        attributes = cupy.cuda.runtime.pointerGetAttributes(a.ctypes.data)
    except cupy.cuda.runtime.CUDARuntimeError:
        return False
    return getattr(attributes, "type", getattr(attributes, "memoryType", 0)) == 1  # host


#: The header's mark of a chunk spilled as its host copy (:func:`_backed_again`).
_HOST_BACKED = "distsort-host-backed"


def _backed_again(device, frames):
    """``device``, a chunk spilled as its host copy and read back from ``frames``,
    backed by that same host copy again, so that it spills for free again: a task that
    reads an output chunk dask-cuda has spilled (the keys or the values picked from a
    keyed k-way merge's chunk, a user's later computation) would otherwise hold a plain
    copy that spills only through pageable memory.  Only page-locked frames (the pinned
    runs, which live on anyway) are kept: frames read from disk or received from
    another worker are fresh copies, which the chunk would otherwise hold on to."""
    pieces = [np.frombuffer(f, np.uint8).view(device.dtype) for f in frames]
    if not device.flags.c_contiguous or not all(is_pinned(p) for p in pieces if p.size):
        return device
    return host_backed(pieces, device)


def _install():
    """Make distributed's "dask" serialization of CuPy arrays hand over the host copy of
    :func:`host_backed` arrays (one frame per piece, which its deserialization joins on
    the device); every other array goes to CuPy's own serializer."""
    cupy_serialize = dask_serialize.dispatch(cupy.ndarray)  # loads distributed's first
    if getattr(cupy_serialize, "distsort", False):
        return
    cupy_deserialize = dask_deserialize.dispatch(cupy.ndarray)

    def deserialize(header, frames):
        backed = header.get(_HOST_BACKED)
        if len(frames) == 1 and not backed:
            return cupy_deserialize(header, frames)
        device = cupy.ndarray(header["shape"], header["typestr"], join_frames(frames).data,
                              strides=header["strides"])
        return _backed_again(device, frames) if backed else device

    def serialize(x):
        began = time.perf_counter()
        host = host_copy(x)
        backed = host is not None
        if backed:
            SPILLS["spill_free"] += time.perf_counter() - began
        elif x.flags.c_contiguous and x.nbytes >= STAGED_BYTES:
            host = (staged_copy(x),)
            SPILLS["spill_staged"] += time.perf_counter() - began
            SPILLS["spill_staged_bytes"] += x.nbytes
        else:
            out = cupy_serialize(x)
            SPILLS["spill_copied"] += time.perf_counter() - began
            SPILLS["spill_copied_bytes"] += x.nbytes
            SPILLS[f"spill_copied_{_why_copied(x)}"] += 1
            return out
        header = x.__cuda_array_interface__.copy()  # as CuPy's serializer makes it
        header["strides"] = tuple(x.strides)
        header[_HOST_BACKED] = backed
        return header, [memoryview(p.reshape(-1).view(np.uint8)) for p in host]

    serialize.distsort = True
    dask_serialize.register(cupy.ndarray)(serialize)
    dask_deserialize.register(cupy.ndarray)(deserialize)


_install()
