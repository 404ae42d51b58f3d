"""``sort_by_key(..., stable=True)``: equal keys keep their input order.

Where the plan says ``stable`` (every chunk sorted in one task: the one-device plan, a
network of one group), that task sorts the keys with their positions and takes keys
and values by them (the backend's ``stable_sort``); at once, with no graph, where the
plan also says ``eager`` (:func:`stable_at_once`).  Elsewhere the positions travel
packed with the keys or the values (``distsort.backends.packing``), or the keys are
sorted with their positions and the values gathered (:func:`stable_by_key`).
"""
from __future__ import annotations

import contextlib

import dask.array as da
import numpy as np
from dask.base import tokenize

from distsort.backends import Order, array_module_name
from distsort.backends.packing import (PACKED_PAIR_BYTES, PACKED_VALUE_BYTES, pack_positions,
                                       pack_stable, unpack_positions, unpack_stable)
from distsort.backends.registry import backend_named
from distsort.core.order import check_key_dtype
from distsort.core.xp import namespace
from distsort.inputs import plain_here
from distsort.sort1d import plan_1d, plan_here, sort_1d, sort_planned

__all__ = ["argsort_by_positions", "stable_packed", "stable_at_once", "stable_by_key",
           "NARROW_KEY_BYTES", "POSITION_BYTES"]

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
