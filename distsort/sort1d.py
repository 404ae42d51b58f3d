"""A sort, from checked inputs to its output arrays: the cluster read once, the plan
made once, the graph assembled from the plan (or, where the plan says ``eager``, its
one task run here at once).

``distsort.api``'s public functions check their arguments (``distsort.inputs``) and
call :func:`sort_1d` (1-D arrays: across chunks) or :func:`sort_along` (an axis held
in one chunk); ``distsort.tables`` does the same.

``sort_by_key(..., stable=True)``: equal keys keep their input order.  Where the plan
says ``stable`` (every chunk sorted in one task: the one-device plan, a network of one
group), that task sorts the keys with their positions and takes keys and values by
them (the backend's ``stable_sort``); at once, with no graph, where the plan also says
``eager`` (:func:`stable_at_once`).  Elsewhere the positions travel packed with the
keys or the values (``distsort.backends.packing``), or the keys are sorted with their
positions and the values gathered (:func:`stable_by_key`).
"""
from __future__ import annotations

import contextlib
import functools

import dask.array as da
import numpy as np
from dask.base import tokenize

from distsort.backends import Order, array_module_name
from distsort.backends.packing import (PACKED_PAIR_BYTES, PACKED_VALUE_BYTES, pack_positions,
                                       pack_stable, unpack_positions, unpack_stable)
from distsort.backends.registry import backend_named, get_backend
from distsort.core import config
from distsort.core.order import check_key_dtype
from distsort.core.taskkeys import HeldChunks
from distsort.core.xp import namespace
from distsort.graph.assembly import aligned, assemble
from distsort.graph.layers import Inline
from distsort.inputs import chunks_in_memory, chunks_persisted, plain_here
from distsort.plan.clusterview import ClusterView
from distsort.plan.options import planning_block, sort_options
from distsort.plan.sortplan import SortPlan, plan_sort

__all__ = ["plan_1d", "plan_chunks", "plan_here", "sorted_at_once", "sort_1d", "sort_planned",
           "sort_along", "argsort_by_positions", "stable_packed", "stable_at_once",
           "stable_by_key", "NARROW_KEY_BYTES", "POSITION_BYTES"]


def plan_1d(keys, values, positions, local, value_bytes=None, descending=False, stable=False):  # noqa: PLR0913, PLR0917
    """``(view, plan)`` of a 1-D sort: the cluster read once (``distsort.cluster.view``)
    and the plan (``distsort.plan.sortplan``); ``value_bytes`` where the values take
    more room than their own (``sort_by_key(..., stable=True)``'s positions)."""
    # imports distributed where a client is
    from distsort.cluster.locality import keep_chunks_in_place
    from distsort.cluster.view import read_view
    gpu = array_module_name(keys._meta) == "cupy"
    placed = keep_chunks_in_place()  # on the current distributed client's scheduler, if any
    view = read_view(keys.__dask_keys__(), None if values is None else values.__dask_keys__(),
                     gpu, placed)
    if value_bytes is None:
        value_bytes = 8 if positions else (values.dtype.itemsize if values is not None else 0)
    stable = stable and get_backend(keys._meta).stable
    return view, plan_chunks(keys.chunks[0], keys.dtype, view, gpu, value_bytes, positions,
                             local, descending, stable)


def plan_chunks(chunks, dtype, view, gpu, value_bytes, positions, local,  # noqa: PLR0913, PLR0917
                descending, stable=False, here=False) -> SortPlan:
    """The plan of a 1-D sort of keys of ``dtype`` in ``chunks`` on ``view`` (the other
    arguments: those of ``distsort.plan.options.sort_options``)."""
    options = sort_options(gpu, value_bytes, positions, local, dtype, descending, stable, here)
    return plan_sort(chunks, dtype.itemsize, view, options)


def plan_here(chunks, dtype, gpu, value_bytes, positions, local, descending, stable=False):  # noqa: PLR0913, PLR0917
    """The plan of a sort at once in this process (arguments as :func:`plan_chunks`'s):
    memoized by its arguments, this process's facts (``distsort.cluster.view.local_facts``)
    and the ``distsort.*`` config, since a plan is arithmetic on them alone and a call at
    once must cost little more than ``cupy.sort`` of 2^24 elements (0.56 ms on an H200).
    A ``planning()`` block's plans are made afresh, and recorded."""
    from distsort.cluster.view import local_facts
    args = (chunks, dtype, gpu, value_bytes, positions, local, descending, stable,
            local_facts(gpu))
    block = planning_block()
    settings = config.settings() if block is None else None
    if settings is not None:
        return _plan_local_cached(*args, settings)
    plan = _plan_local(*args)  # or a config value that cannot be a key
    if block is not None:
        block[1].append(plan)
    return plan


def _plan_local(chunks, dtype, gpu, value_bytes, positions, local, descending, stable, facts):  # noqa: PLR0913, PLR0917
    """:func:`plan_here`'s plan, on this process's ``facts``."""
    return plan_chunks(chunks, dtype, ClusterView.local(*facts, 1), gpu, value_bytes,
                       positions, local, descending, stable, here=True)


@functools.lru_cache(maxsize=256)
def _plan_local_cached(*args):
    """:func:`_plan_local`, memoized (its last argument: the config it is read under)."""
    return _plan_local(*args[:-1])


def sorted_at_once(x, axis, order, local):
    """What ``sort`` (``order.keyed`` False: the keys) or ``argsort`` (True: the
    positions) of ``x`` gives, where ``x`` is a plain 1-D NumPy or CuPy array whose plan
    says ``eager``: what the one-chunk task does (the backend's ``sort_chunk``), done
    here, with no graph built.  None elsewhere: the graph runs the sort.

    The graph, its names and Dask arrays cost about 0.4 ms a call on an H200's host,
    two thirds of ``cupy.sort`` of 2^24 float32."""
    if axis not in (None, 0, -1) or not plain_here(x):
        return None
    check_key_dtype(x.dtype, "x")
    plan = plan_here((x.shape[0],), x.dtype, type(x) is not np.ndarray,
                     8 if order.keyed else 0, order.keyed, local, order.descending)
    if not plan.eager:
        return None
    if plan.strategy == "kway":  # runs sorted and merged by threads, here
        from distsort.graph.kway import sort_now
        return sort_now(x, plan, order, _backend_of(plan))
    return backend_named(plan.backend).sort_chunk(x, order, plan.local, int(order.keyed),
                                                  (order, x.dtype))


def sort_1d(keys, values, order, positions, verify=False, what="sort", local="auto"):  # noqa: PLR0913, PLR0917
    """Globally sort a 1-D array; returns the output (keys, values) Dask arrays.

    Validate (the callers), plan (:func:`plan_1d`), build the graph
    (:func:`sort_planned`)."""
    planned = plan_1d(keys, values, positions, local, descending=order.descending)
    return sort_planned(keys, values, order, positions, planned, verify, what)


def _inputs_read(keys, values, plan, view):
    """``(reads, carried)``: what the sort's tasks take for each input array (by name):
    its name, or, where the plan reads the chunks as they are (``pieces``), the chunks
    themselves (``distsort.graph.layers.Inline``: on Dask's local schedulers, chunks in
    memory) or their keys (``distsort.core.taskkeys.HeldChunks``: on a ``distributed``
    cluster whose scheduler plugin holds them, every chunk a future in the array's own
    graph, where ``view`` located it); and the inputs whose graphs the outputs carry."""
    sources = [keys] + ([values] if values is not None else [])
    if plan.pieces is None:
        return {a.name: a.name for a in sources}, sources
    if view.distributed:
        owners = view.owners + (view.value_owners or ())
        # One chunk is read by its key: its one task (``one_task``) depends on it alone.
        if not (view.placed and None not in owners and keys.numblocks[0] > 1
                and all(map(chunks_persisted, sources))):
            return {a.name: a.name for a in sources}, sources
        from distsort.cluster.held import read_held_chunks
        return {a.name: HeldChunks(a.__dask_keys__(), read_held_chunks, keep=a)
                for a in sources}, []
    held = {a.name: chunks_in_memory(a) for a in sources}
    reads = {name: name if c is None else Inline(c) for name, c in held.items()}
    return reads, [a for a in sources if held[a.name] is None]


def _backend_of(plan):
    """The backend the plan names; one host's k-way sort, runs of this process's
    threads (``ThreadRuns``); out of core, the host runs of its plan (reading
    persisted chunks where they are held: ``distsort.cluster.held``)."""
    if plan.strategy == "kway":
        from distsort.backends.cpu.runs import ThreadRuns
        return ThreadRuns()
    if plan.backend == "device-runs":  # an exchange's runs on the workers' GPUs
        from distsort.backends.gpu.runs import DeviceRuns
        return DeviceRuns(local=plan.local)
    from distsort.backends.outofcore.hostruns import HostRuns
    if plan.strategy == "exchange":  # NumPy runs, merged in host memory
        return HostRuns(plan.engine)
    ooc = plan.out_of_core
    if ooc is None:
        return backend_named(plan.backend)
    from distsort.cluster.held import read_held
    return HostRuns(ooc.engine, ooc.plan.segment, ooc.budget, read_held)


def sort_planned(keys, values, order, positions, planned, verify=False, what="sort"):  # noqa: PLR0913, PLR0917
    """The output (keys, values) Dask arrays of a 1-D sort planned as ``planned`` (the
    ``(view, plan)`` of :func:`plan_1d`), assembled by ``distsort.graph.assembly``.
    ``positions`` with ``values``: equal keys keep their input order (a plan that says
    ``stable``)."""
    view, plan = planned
    block = planning_block()
    if block is not None:  # the plan this sort runs
        block[1].append(plan)
    keys, values = aligned(keys, values, plan)
    reads, sources = _inputs_read(keys, values, plan, view)
    return assemble(keys, values, order, positions, plan, _backend_of(plan), reads, sources,
                    verify, what)


def sort_along(x, axis, order, want, verify=False):
    """Sort the lanes of an N-D array along ``axis`` (held in one chunk), block by block."""
    backend = get_backend(x._meta)
    index = 0 if want == "keys" else 1
    dtype = x.dtype if want == "keys" else np.int64

    def block(b):
        out = backend.sort_blocks(b, None, axis, order, positions=order.keyed)
        if verify:  # in the same task: the block is only returned once checked
            from distsort.graph.verify import check_lanes
            check_lanes(b, out[0], out[1], axis, order, "argsort" if index else "sort")
        return out[index]

    name = f"distsort-{want}-axis{axis}-" + tokenize(x.name, order, axis, want, verify)
    return x.map_blocks(block, dtype=dtype, name=name,
                        meta=namespace(x._meta, strict=True).empty((0,) * x.ndim, dtype=dtype))


#: Positions travel as uint32 (packed with keys of up to this many bytes in one
#: 64-bit code on the CPU) where the array has fewer than 2**32 elements.
NARROW_KEY_BYTES = 4


def argsort_by_positions(keys, descending, verify, local, what):
    """``(sorted keys, permutation)`` of 1-D ``keys`` (order codes or keys distsort
    sorts), equal keys in input order.

    NumPy keys of up to 4 bytes (fewer than 2**32 of them) carry uint32 positions:
    key and position then pack into one 64-bit code that the CPU backend sorts and
    merges as one integer (``distsort.backends.cpu.numpy_backend.keyed_codes``), where int64
    positions make a 12-byte pair that it sorts by permutation
    (``benchmarks/keyed_cpu.py --stable``; the figures: ``docs/performance.md``).
    """
    order = Order(descending=bool(descending), keyed=True)
    n = keys.shape[0]
    if (array_module_name(keys._meta) == "numpy" and n < 2**32
            and keys.dtype.itemsize <= NARROW_KEY_BYTES):
        positions = da.arange(n, chunks=keys.chunks, dtype=np.uint32)
        return sort_1d(keys, positions, order, positions=False, verify=verify, what=what,
                       local=local)
    return sort_1d(keys, None, order, positions=True, verify=verify, what=what, local=local)


#: Bytes of a position beside each value in a stable one-device sort (the planned room).
POSITION_BYTES = 8


def stable_packed(keys, values, descending, verify, local):
    """``stable=True`` of NumPy integer keys and values of :data:`PACKED_PAIR_BYTES`
    together: one keys-only sort of their packed codes, no positions moved beside them
    and no gather (``benchmarks/keyed_cpu.py --stable``)."""
    if values.chunks != keys.chunks:
        values = values.rechunk(keys.chunks)
    token = tokenize(keys, values, descending)
    packed = da.map_blocks(pack_stable, keys, values, descending, dtype=np.uint64,
                           name="distsort-pack-" + token)
    out, _ = sort_1d(packed, None, Order(descending=False), positions=False,
                     verify=verify, what="sort_by_key", local=local)
    return tuple(out.map_blocks(unpack_stable, part, keys.dtype, values.dtype, descending,
                                dtype=dtype, name=f"distsort-unpack{part}-" + token)
                 for part, dtype in enumerate((keys.dtype, values.dtype)))


def stable_at_once(keys, values, order, local):
    """``sort_by_key(keys, values, stable=True)`` of plain 1-D arrays of one length,
    where their plan says ``eager`` and ``stable``: what its one task does (the
    backend's ``stable_sort``, then the outputs' finish), done here, with no graph
    built.  None elsewhere (:func:`stable_by_key`)."""
    if not plain_here(keys, values) or keys.shape != values.shape:
        return None
    check_key_dtype(keys.dtype, "keys")
    check_key_dtype(values.dtype, "values")
    gpu = type(keys) is not np.ndarray
    try:
        plan = plan_here((keys.shape[0],), keys.dtype, gpu,
                         values.dtype.itemsize + POSITION_BYTES, False, local,
                         order.descending, stable=True)
    except MemoryError:  # the argsort's own plan decides (stable_by_key)
        return None
    if not (plan.eager and plan.stable):
        return None
    backend = backend_named(plan.backend)
    backend.check_fits(keys.shape[0], keys.dtype.itemsize + values.dtype.itemsize)
    run = backend.stable_sort(keys, values, order)
    dtypes = (order, keys.dtype, values.dtype)
    return backend.finish_keys(run, *dtypes), backend.finish_values(run, *dtypes)


def _stable_as_one(keys, values, order, local):
    """:func:`stable_by_key`'s outputs where the plan says ``stable``: the one task
    that sorts every chunk keeps equal keys in input order, with room planned for the
    values and the positions beside the keys.  None elsewhere, and where there is no
    room at all (a budget for out-of-core runs of narrower pairs): the argsort's own
    plan then decides."""
    planned = None
    with contextlib.suppress(MemoryError):
        planned = plan_1d(keys, values, False, local, stable=True,
                          value_bytes=values.dtype.itemsize + POSITION_BYTES)
    if planned is None or not planned[1].stable:  # no shuffle, no merge
        return None
    return sort_planned(keys, values, order, True, planned, what="sort_by_key")


def _positions_packed(keys, values, order, verify, local):
    """CuPy values of :data:`PACKED_VALUE_BYTES` sorted packed under their positions:
    the keyed sort's tie-break by value is one by position; one network, no shuffle."""
    packed = values.map_blocks(
        pack_positions, dtype=np.uint64, name="distsort-pack-" + tokenize(values),
        meta=namespace(values._meta, strict=True).empty((0,), dtype=np.uint64))
    out_keys, out_packed = sort_1d(keys, packed, order, positions=False, verify=verify,
                                   what="sort_by_key", local=local)
    return out_keys, out_packed.map_blocks(
        unpack_positions, values.dtype, dtype=values.dtype,
        name="distsort-unpack-" + tokenize(out_packed, values.dtype))


def stable_by_key(keys, values, order, verify, local="auto"):
    """Position-stable key-value sort of 1-D Dask arrays (``keys`` keys or order
    codes): equal keys keep their input order.  Returns the sorted keys and values.

    Without ``verify``, where the plan says ``stable``: the one task sorts the keys'
    canonical codes with their positions (on a GPU: one stable radix sort of the keys)
    and takes keys and values by them (:func:`_stable_as_one`): no argsort output, no
    gather, no packing.  Other NumPy integer keys and values of at most 4 bytes
    together (fewer than 2**32): one sort of uint64 codes that hold the key's code, the
    position and the value's bits (:func:`stable_packed`), nothing to gather.  Other
    NumPy chunks: the keys are sorted with their positions (:func:`argsort_by_positions`:
    uint32 positions packed with keys of up to 4 bytes) and the values gathered by them
    (:func:`distsort.graph.gather.gather`); with ``verify`` the argsort is checked (the
    summaries of a keyed output check equal keys ordered by value).  CuPy chunks with
    values of at most 4 bytes (and fewer than 2**32 elements): the values travel
    through the network packed under their positions (:func:`_positions_packed`);
    wider values: an argsort and a gather.  On the CPU, values packed under positions
    would make a 12-byte pair, which the CPU backend merges by codes computed per
    comparison: slower than the sort by positions and gather
    (``benchmarks/keyed_cpu.py --stable``; the figures: ``docs/performance.md``).
    """
    if not verify and (out := _stable_as_one(keys, values, order, local)) is not None:
        return out
    n = keys.shape[0]
    gpu = array_module_name(keys._meta) == "cupy"
    if gpu and values.dtype.itemsize <= PACKED_VALUE_BYTES and n < 2**32:
        return _positions_packed(keys, values, order, verify, local)
    if (not gpu and n < 2**32 and keys.dtype.kind in "iu"
            and keys.dtype.itemsize + values.dtype.itemsize <= PACKED_PAIR_BYTES):
        return stable_packed(keys, values, order.descending, verify, local)
    out_keys, perm = argsort_by_positions(keys, order.descending, verify, local, "sort_by_key")
    from distsort.eager import one_place
    from distsort.graph.gather import gather
    return out_keys, gather((values,), perm, together=one_place([values, perm]))[0]
