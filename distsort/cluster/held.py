"""Persisted input chunks read where a worker holds them, without moving them first.

A task that takes a chunk as a dependency gets it as a live object: a dask-cuda
worker whose chunk was spilled to host memory first copies it back to the device
(``DeviceHostFile``) and, to stay within its limit, evicts another chunk through
pageable memory; an out-of-core sort of spilled CuPy chunks paid that twice per chunk,
more than half of its time (``docs/performance.md``).  The stage tasks of an out-of-core
sort only need the chunk's bytes on the host, so for a persisted input they take a
:class:`Held` reference instead of a dependency and read the chunk where the worker
keeps it (:func:`read_held`): a spilled CuPy chunk as a read-only NumPy view of its
host copy, a chunk on the device or in a plain store as it is.  The group sorts of many
small persisted chunks on a ``distributed`` cluster read them the same way, all of a
group's chunks through one :class:`~distsort.core.taskkeys.HeldChunks` argument
(:func:`read_held_chunks`): a dependency per chunk cost the scheduler more than the sort.

Without a dependency the scheduler would neither place the task nor keep the chunk
alive for it.  :class:`distsort.cluster.plugin.KeepChunksInPlace` does both when the
graph arrives: it restricts the task to the chunk's holder and holds the chunk for a
client of its own (``distsort.core.taskkeys.HOLDER``) until the task ends.
"""
from __future__ import annotations

import numpy as np

from distsort.core import dask_cuda_store
from distsort.core.taskkeys import Held

def read_held(held: Held):
    """The chunk ``held`` refers to, from this worker's store where it is there (see
    :func:`peek`), else from the worker that has it."""
    from distributed import get_worker
    try:
        return peek(get_worker().data, held.key)
    except KeyError:
        return _fetch(held.key)


def read_held_chunks(keys):
    """The chunks ``keys``, in order: those in this worker's store read where they lie
    (:func:`peek`), the others brought from the workers that have them, together."""
    from distributed import get_worker
    data, chunks, away = get_worker().data, {}, []
    for key in keys:
        try:
            chunks[key] = peek(data, key)
        except KeyError:
            away.append(key)
    if away:
        chunks.update(zip(away, _fetch_all(away), strict=True))
    return [chunks[k] for k in keys]


def peek(data, key):
    """The value of ``key`` in a worker's store ``data``, read where it lies: dask-cuda's
    device tier as it is, a CuPy array in its host tier as a NumPy view of the host copy
    (:func:`host_view`), anything else by the store itself.  Raises KeyError where the
    store lacks ``key``."""
    tier, value = dask_cuda_store.tier_of(data, key)
    if tier == "device":
        return value
    if tier == "host":
        view = host_view(value)
        if view is not None:
            return view
    return data[key]


def host_view(serialized):
    """A read-only NumPy view of a CuPy array's host copy, as dask-cuda's spilling keeps
    it (``DeviceSerialized``: distributed's "dask" serialization, one frame), or None
    for anything else.

    >>> class Spilled:
    ...     header = {"type": "cupy.ndarray", "serializer": "dask",
    ...               "sub-header": {"shape": (2, 2), "typestr": "<i2", "strides": (4, 2)}}
    ...     frames = [memoryview(np.arange(4, dtype=np.int16)).cast("B")]
    >>> host_view(Spilled()).tolist()
    [[0, 1], [2, 3]]
    """
    header, frames = getattr(serialized, "header", None), getattr(serialized, "frames", None)
    if (not isinstance(header, dict) or header.get("type") != "cupy.ndarray"
            or header.get("serializer") != "dask" or not frames or len(frames) != 1):
        return None
    sub = header.get("sub-header", {})
    try:
        dtype, shape = np.dtype(sub["typestr"]), tuple(sub["shape"])
        frame = np.frombuffer(frames[0], dtype=np.uint8)
        if frame.size != dtype.itemsize * int(np.prod(shape)):
            return None  # not one plain copy of the array's bytes
        view = np.ndarray(shape, dtype, buffer=frame, strides=tuple(sub["strides"]))
    except (KeyError, TypeError, ValueError):
        return None
    view.flags.writeable = False  # the user's chunk: nothing may change it
    return view


def _fetch(key):
    """``key``'s value from whichever worker has it: the task ran away from the chunk's
    holder (a worker was lost) or the chunk is no longer known (released before the
    graph arrived)."""
    return _fetch_all([key])[0]


def _fetch_all(keys):
    """The values of ``keys`` from whichever workers have them, in one task."""
    from distributed import Future, worker_client
    with worker_client() as client:  # leaves the worker's thread pool while it waits
        gone, lost_with = client.run_on_scheduler(_released, keys=list(keys))
        if lost_with is not None:
            raise RuntimeError(f"distsort: input chunk {gone!r} was lost with worker "
                               f"{lost_with}, which left the cluster during the sort, and "
                               "cannot be made again (it came from scattered data); "
                               "persist the input again and sort it again")
        if gone is not None:
            raise KeyError(f"distsort: input chunk {gone!r} was released before the sort "
                           "read it; keep a reference to the persisted input until the "
                           "sort is computed")
        # A task of its own, so that the scheduler brings the chunks (a bare Future of a
        # key that this client did not compute is never told of it).
        return client.submit(_same, [Future(k, client) for k in keys], pure=False).result()


def _same(x):
    return x


def _released(keys, dask_scheduler=None):
    """``(key, worker)``: the first of ``keys`` that the scheduler neither has nor is
    computing (a lost chunk being recomputed), and the worker it was lost with, where
    the scheduler forgot it as scattered data of a worker that left (else None);
    ``(None, None)`` where it has them all."""
    for key in keys:
        ts = dask_scheduler.tasks.get(key)
        if ts is None or ts.state in ("released", "forgotten", "erred"):
            return key, _lost_with(dask_scheduler, key)
    return None, None


def _lost_with(scheduler, key):
    """The worker whose removal lost ``key``, held there alone (the scheduler's
    ``remove-worker`` events), or None: asked of a key no longer computing, one the
    scheduler cannot make again (scattered data, or persisted from it)."""
    for _, event in reversed(scheduler.get_events("all")):
        if isinstance(event, dict) and event.get("action") == "remove-worker" and (
                key in event.get("lost-scattered-tasks", ())
                or key in event.get("lost-computed-tasks", ())):
            return event.get("worker")
    return None
