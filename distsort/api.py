"""The public functions: validation, backend choice, and the output arrays."""
from __future__ import annotations

import math

import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

try:  # NumPy >= 2
    from numpy.lib.array_utils import normalize_axis_index
except ImportError:  # pragma: no cover
    from numpy.core.multiarray import normalize_axis_index

from .backends import Order, array_module_name, get_backend
from .graph import SortGraph, finish_layer, sort_layers
from .order import check_dtype
from .plan import normalize_chunks
from .verify import check_lanes, verified

__all__ = ["sort", "argsort", "sort_by_key"]


def as_dask_array(x, what="x"):
    """``x`` as a Dask array; NumPy and CuPy arrays are wrapped with ``chunks="auto"``."""
    if isinstance(x, da.Array):
        array_module_name(x._meta)
        return x
    if type(x).__module__.split(".")[0] == "cupy":
        return da.from_array(x, chunks="auto", asarray=False)
    if isinstance(x, np.ndarray):
        array_module_name(x)  # refuses subclasses (masked arrays, matrices) at once
    else:
        x = np.asarray(x)
    check_dtype(x.dtype, what)
    return da.from_array(x, chunks="auto")


def _check_known_chunks(x, what):
    if any(math.isnan(c) for dim in x.chunks for c in dim):
        raise ValueError(
            f"{what} has unknown chunk sizes; call {what}.compute_chunk_sizes() "
            "(or persist it) before sorting")


def _module(meta):
    if array_module_name(meta) == "cupy":
        import cupy
        return cupy
    return np


def _sort_1d(keys, values, order, positions, verify=False, what="sort"):
    """Globally sort a 1-D array; returns the output (keys, values) Dask arrays."""
    from .locality import (keep_chunks_in_place, pairs_in_flight,  # import distributed
                           share_crossing_parts, worker_hosts)
    keep_chunks_in_place()  # on the current distributed client's scheduler, if any
    hosts = worker_hosts()
    window = pairs_in_flight(hosts=hosts)
    share = share_crossing_parts(hosts=hosts) and array_module_name(keys._meta) == "cupy"
    chunks = normalize_chunks(keys.chunks[0])
    if chunks != keys.chunks[0]:
        keys = keys.rechunk((chunks,))
    if values is not None and values.chunks[0] != chunks:
        values = values.rechunk((chunks,))
    backend = get_backend(keys._meta, share)
    token = tokenize(keys.name, values.name if values is not None else None, order, positions,
                     window, share)
    graph = SortGraph(token)
    sorted_keys = sort_layers(graph, keys.name, values.name if values is not None else None,
                              chunks, backend, order, positions, window)
    sources = [keys] + ([values] if values is not None else [])
    layers, deps = dict(graph.layers), dict(graph.dependencies)
    for src in sources:
        layers.update(src.dask.layers)
        deps.update(src.dask.dependencies)

    def output(name, func, args, meta):
        finish_layer(graph, name, sorted_keys, func, *args)
        layers[name], deps[name] = graph.layers[name], graph.dependencies[name]
        return da.Array(HighLevelGraph(dict(layers), dict(deps)), name, (chunks,), meta=meta)

    out_keys = output("distsort-sort-" + token, backend.finish_keys, (order, keys.dtype),
                      keys._meta)
    out_values = None
    if order.keyed:
        value_meta = (values._meta if values is not None
                      else _module(keys._meta).empty((0,), dtype=np.int64))
        out_values = output("distsort-sort-values-" + token, backend.finish_values, (),
                            value_meta)
    if verify:  # the outputs can only be read once a check of them against the input passed
        return verified(keys, values, out_keys, out_values, order, positions, what)
    return out_keys, out_values


def _validate(x, axis, what="x"):
    """Validate ``x`` and ``axis``; returns ``(x, axis)`` with ``x`` flattened for ``axis=None``."""
    x = as_dask_array(x, what)
    check_dtype(x.dtype, what)
    _check_known_chunks(x, what)
    if axis is None:
        return x.reshape(-1) if x.ndim != 1 else x, 0
    axis = normalize_axis_index(axis, x.ndim)
    if x.ndim > 1 and x.numblocks[axis] > 1:
        raise ValueError(
            f"axis {axis} is split over {x.numblocks[axis]} chunks; distsort sorts an N-D "
            f"array along an axis held in one chunk: rechunk it with "
            f"x.rechunk({{{axis}: -1}}), or sort the flattened array with axis=None")
    return x, axis


def _sort_along(x, axis, order, want, verify=False):
    """Sort the lanes of an N-D array along ``axis`` (held in one chunk), block by block."""
    backend = get_backend(x._meta)
    index = 0 if want == "keys" else 1
    dtype = x.dtype if want == "keys" else np.int64

    def block(b):
        out = backend.sort_blocks(b, None, axis, order, positions=(want == "values"))
        if verify:  # in the same task: the block is only returned once checked
            check_lanes(b, out[0], out[1], axis, order, "argsort" if index else "sort")
        return out[index]

    name = f"distsort-{want}-axis{axis}-" + tokenize(x.name, order, axis, want, verify)
    return x.map_blocks(block, dtype=dtype, name=name,
                        meta=_module(x._meta).empty((0,) * x.ndim, dtype=dtype))


def sort(x, axis=-1, *, descending=False, verify=False):
    """Sort an array; a Dask array of NumPy or CuPy chunks is sorted across chunks.

    Parameters
    ----------
    x : dask.array.Array, numpy.ndarray or cupy.ndarray
        Keys: bool, (u)int8..64 or float16/32/64.  NumPy and CuPy arrays are
        wrapped with ``dask.array.from_array(x, chunks="auto")``.
    axis : int or None, optional
        Axis to sort along (default: the last).  A 1-D array is sorted globally,
        whatever its chunking.  ``None`` sorts the flattened array.  For an N-D
        array the axis must be held in one chunk.
    descending : bool, optional
        Sort from largest to smallest: exactly the reverse of the ascending
        result (NaNs first).
    verify : bool, optional
        Check on the workers (on the GPU for CuPy chunks), before the result can be
        read, that it is sorted and a permutation of the input (counts and
        order-independent 64-bit checksums: a few elementwise passes over the
        input and the output, no sort).  Raises
        :class:`distsort.VerificationError` when computed if not.

    Returns
    -------
    dask.array.Array
        Lazy, with the same dtype and length and chunks of the same backend.
        A 1-D result has a regular chunking (equal chunks, the last possibly
        shorter), whatever the input's was.

    Notes
    -----
    NumPy's order: NaNs (any sign and payload) sort last and keep their bits;
    ``-0.0`` sorts just before ``+0.0``.  Not supported: complex, object,
    string, datetime and structured dtypes (TypeError), and N-D arrays whose
    sort axis is split over several chunks (ValueError).  The input's chunks
    are never modified.

    Examples
    --------
    >>> import dask.array as da, numpy as np, distsort
    >>> x = da.from_array(np.array([3.0, np.nan, -1.0, 2.0, 0.5]), chunks=2)
    >>> distsort.sort(x).compute()
    array([-1. ,  0.5,  2. ,  3. ,  nan])
    >>> distsort.sort(x, descending=True).compute()
    array([ nan,  3. ,  2. ,  0.5, -1. ])
    >>> distsort.sort(x, verify=True).compute()  # checked on the workers before it is read
    array([-1. ,  0.5,  2. ,  3. ,  nan])
    """
    x, axis = _validate(x, axis)
    order = Order(descending=bool(descending))
    if x.ndim == 1:
        return _sort_1d(x, None, order, positions=False, verify=verify)[0]
    return _sort_along(x, axis, order, "keys", verify)


def argsort(x, axis=-1, *, descending=False, stable=True, verify=False):
    """Indices that sort an array, as int64; 1-D arrays are sorted across chunks.

    Parameters
    ----------
    x : dask.array.Array, numpy.ndarray or cupy.ndarray
        Keys, as for :func:`sort`.
    axis : int or None, optional
        As for :func:`sort`; with ``None`` the indices are into the flattened array.
    descending : bool, optional
        Largest keys first; equal keys keep their original order.
    stable : bool, optional
        Accepted for NumPy compatibility: the result is always stable, equal to
        ``numpy.argsort(x, kind="stable")`` element for element.
    verify : bool, optional
        Check on the workers (on the GPU for CuPy chunks), before the result can be
        read, that the keys it points to are sorted and that the (key, index)
        pairs are those of the input (counts and order-independent 64-bit
        checksums).  Raises :class:`distsort.VerificationError` when computed
        if not.

    Returns
    -------
    dask.array.Array
        int64 indices, chunked like :func:`sort`'s result.

    Examples
    --------
    >>> import dask.array as da, numpy as np, distsort
    >>> x = da.from_array(np.array([2, 1, 2, 0]), chunks=3)
    >>> distsort.argsort(x).compute()
    array([3, 1, 0, 2])
    >>> distsort.argsort(x, descending=True).compute()
    array([0, 2, 1, 3])
    """
    x, axis = _validate(x, axis)
    order = Order(descending=bool(descending), keyed=True)
    if x.ndim == 1:
        return _sort_1d(x, None, order, positions=True, verify=verify, what="argsort")[1]
    return _sort_along(x, axis, order, "values", verify)


def sort_by_key(keys, values, *, descending=False, verify=False):
    """Sort 1-D ``keys`` and move ``values`` with them.

    Parameters
    ----------
    keys : dask.array.Array, numpy.ndarray or cupy.ndarray
        1-D keys, as for :func:`sort` (N-D keys are flattened).
    values : array of the same shape and backend
        Values of 1, 2, 4 or 8 bytes (bool, integers, floats).
    descending : bool, optional
        Largest keys first.
    verify : bool, optional
        Check on the workers (on the GPU for CuPy chunks), before the result can be
        read, that the keys are sorted and that the keys and the (key, value)
        pairs are permutations of the input's (counts and order-independent
        64-bit checksums).  Raises :class:`distsort.VerificationError` when
        computed if not.

    Returns
    -------
    (dask.array.Array, dask.array.Array)
        The sorted keys and the values moved with them.  Equal keys are ordered
        by value (NumPy's order), so every backend and chunking gives the same
        result.

    Examples
    --------
    >>> import dask.array as da, numpy as np, distsort
    >>> k = da.from_array(np.array([3, 1, 2, 1]), chunks=2)
    >>> v = da.from_array(np.array([30.0, 11.0, 20.0, 10.0]), chunks=2)
    >>> sk, sv = distsort.sort_by_key(k, v)
    >>> sk.compute(), sv.compute()
    (array([1, 1, 2, 3]), array([10., 11., 20., 30.]))
    """
    keys, values = as_dask_array(keys, "keys"), as_dask_array(values, "values")
    known = not any(math.isnan(d) for d in keys.shape + values.shape)
    if known and keys.shape != values.shape:  # before flattening: (2, 3) is not (3, 2)
        raise ValueError(f"keys and values must have the same shape, got {keys.shape} "
                         f"and {values.shape}")
    keys, _ = _validate(keys, None, "keys")
    values, _ = _validate(values, None, "values")
    if array_module_name(keys._meta) != array_module_name(values._meta):
        raise TypeError("keys and values must both have NumPy chunks or both CuPy chunks")
    order = Order(descending=bool(descending), keyed=True)
    return _sort_1d(keys, values, order, positions=False, verify=verify, what="sort_by_key")
