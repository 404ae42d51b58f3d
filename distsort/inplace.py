"""Sorts into the caller's memory: ``distsort.sort(x, out=x)`` and
``distsort.sort_by_key(k, v, out=(k, v))``.

NumPy and CuPy sort an array in its own memory with ``ndarray.sort()``; distsort's
form is ``out=``, as NumPy's functions write into a given array.  ``out`` is ``x``
itself (sorted in place: no copy, so an array as large as the device's free memory
allows, 120 GB of uint32 on a 141 GB H200), or another array of its kind, shape and
dtype, into which ``x`` is copied and then sorted.  The order is distsort's:
``docs/semantics.md`` (NaN last in both orders, ``-0.0`` before ``+0.0``; ties of
``sort_by_key`` broken by the value).

How it sorts is the plan's (``distsort.plan.localsort.plan_own_memory``): on the GPU,
CUB's radix sort where its buffers fit the device's free memory, else the in-place
bitonic kernels (also where the radix sort's allocation fails, with a log line);
NumPy arrays by their order codes, made and undone in place, and ``ndarray.sort``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from distsort.backends import Order
from distsort.backends.registry import get_backend
from distsort.core.order import TIME_KINDS, check_dtype
from distsort.core.xp import address, namespace
from distsort.plan.localsort import plan_own_memory, sorts_in_place

__all__ = ["check_out", "sort_into", "sort_by_key_into"]


def _is_plain_array(a: Any) -> bool:
    kind = type(a)
    return kind is np.ndarray or (kind.__module__ == "cupy" and kind.__name__ == "ndarray")


def check_out(x: Any, out: Any, what: str = "x", name: str = "out") -> None:
    """Raise TypeError or ValueError unless ``out`` can take the sort of ``x``: both
    NumPy or both CuPy arrays, of one shape and one dtype (a native one that distsort
    sorts, not a time), ``out`` C-contiguous and writeable.

    >>> check_out(np.arange(3.0), np.empty(3))
    >>> check_out(np.arange(3.0), np.empty(3, np.float32))
    Traceback (most recent call last):
    ...
    TypeError: out must have x's dtype float64, got float32
    >>> check_out(np.arange(6.0), np.empty(12)[::2])
    Traceback (most recent call last):
    ...
    ValueError: out must be C-contiguous (numpy.ascontiguousarray makes a contiguous copy)
    """
    if not _is_plain_array(x):
        raise TypeError(f"out= sorts a NumPy or CuPy array in memory; {what} is a "
                        f"{type(x).__module__}.{type(x).__name__} (a Dask array's sort is "
                        "lazy: sort it without out=, then store it with dask.array.store)")
    if type(out) is not type(x):
        raise TypeError(f"{name} must be an array of {what}'s kind "
                        f"({type(x).__module__}.ndarray), got {type(out).__module__}."
                        f"{type(out).__name__}")
    if out.dtype != x.dtype:
        raise TypeError(f"{name} must have {what}'s dtype {x.dtype}, got {out.dtype}")
    if out.dtype.kind in TIME_KINDS or not out.dtype.isnative:
        raise TypeError(f"{name}= sorts bool, integer and float arrays of native byte order, "
                        f"got {out.dtype!r}: sort it without {name}=")
    check_dtype(out.dtype, name)
    if out.shape != x.shape:
        raise ValueError(f"{name} must have {what}'s shape {x.shape}, got {out.shape}")
    if not out.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous ({namespace(out).__name__}"
                         ".ascontiguousarray makes a contiguous copy)")
    if not getattr(out.flags, "writeable", True):
        raise ValueError(f"{name} is read-only")


def _refuse_flags(stable: bool, verify: bool, float_keys: bool, keyed: bool) -> None:
    if verify:
        raise ValueError("verify=True checks a sorted copy against its input; out= "
                         "overwrites the input: check the result, or sort without out=")
    if stable and (keyed or float_keys):
        raise ValueError("stable=True orders equal keys by their input positions, which "
                         "a sort in place does not keep: sort without out=")


def _fill(out: Any, x: Any) -> None:
    """``x`` copied into ``out`` unless they are one memory already."""
    if not (address(out) == address(x) and out.strides == x.strides):
        out[...] = x.copy() if namespace(x).may_share_memory(x, out) else x


def _sort_memory(keys: Any, values: Any, order: Order, local: str, lanes: int) -> None:
    """``keys`` (and ``values``) sorted in their memory by the local sort the plan
    chose for them (``plan_own_memory``, on the room the backend reports)."""
    backend = get_backend(keys)
    value_bytes = 0 if values is None else values.dtype.itemsize
    keys_in_place = values is None and sorts_in_place(keys.dtype, order.descending)
    chosen = plan_own_memory(local, backend.name == "cupy", keys.size, keys.dtype.itemsize,
                             value_bytes, keys_in_place, backend.room(), lanes)
    backend.sort_memory(keys, values, order, chosen, lanes)


def sort_into(x: Any, out: Any, axis: int | None, descending: bool, stable: bool,  # noqa: PLR0913, PLR0917
              verify: bool, local: str) -> Any:
    """``distsort.sort(x, axis, ..., out=out)``: ``x`` sorted into ``out`` (checked by
    :func:`check_out`); returns ``out``.  ``axis``: ``None`` sorts the array's memory
    as one flat array (``out`` keeps its shape); the last axis sorts each row.

    >>> x = np.array([[3, 1, 2], [9, 7, 8]])
    >>> sort_into(x, x, -1, False, False, False, "auto")
    array([[1, 2, 3],
           [7, 8, 9]])
    >>> sort_into(x, x, None, True, False, False, "auto")
    array([[9, 8, 7],
           [3, 2, 1]])
    """
    check_out(x, out)
    _refuse_flags(stable, verify, x.dtype.kind == "f", keyed=False)
    if axis is None or x.ndim <= 1:
        if axis not in (None, 0, -1):
            raise np.exceptions.AxisError(axis, x.ndim)
        lanes = 1
    else:
        if not isinstance(axis, (int, np.integer)) or axis not in (-1, x.ndim - 1):
            raise ValueError(f"out= sorts along the last axis, or the flattened array "
                             f"(axis=None); got axis={axis!r}: sort without out=, or "
                             "move the axis last (numpy.moveaxis) into a contiguous array")
        lanes = x.size // x.shape[-1] if x.shape[-1] else 0
    _fill(out, x)
    if out.size and lanes:
        # one lane: the memory as one flat run (a view: ``out`` is C-contiguous), which
        # a sort of the N-D array would take row by row
        keys = out.reshape(-1) if lanes == 1 else out
        _sort_memory(keys, None, Order(descending=bool(descending)), local, lanes)
    return out


def sort_by_key_into(keys: Any, values: Any, out: Any, descending: bool, stable: bool,  # noqa: PLR0913, PLR0917
                     verify: bool, local: str) -> tuple[Any, Any]:
    """``distsort.sort_by_key(keys, values, ..., out=(out_keys, out_values))``: the
    keys sorted into ``out_keys`` and the values moved with them into ``out_values``
    (each checked by :func:`check_out`; flattened, as ``sort_by_key`` flattens N-D
    keys), ties by the value; returns ``out``.

    >>> k, v = np.array([3, 1, 2, 1]), np.array([30.0, 11.0, 20.0, 10.0])
    >>> sort_by_key_into(k, v, (k, v), False, False, False, "auto")
    (array([1, 1, 2, 3]), array([10., 11., 20., 30.]))
    """
    if not (isinstance(out, tuple) and len(out) == 2):  # noqa: PLR2004
        raise TypeError("out= of sort_by_key is a tuple (out_keys, out_values): the "
                        "keys' and the values' own memory, (keys, values) to sort in place")
    out_keys, out_values = out
    check_out(keys, out_keys, "keys", "out_keys")
    check_out(values, out_values, "values", "out_values")
    if keys.shape != values.shape:
        raise ValueError(f"keys and values must have the same shape, got {keys.shape} "
                         f"and {values.shape}")
    _refuse_flags(stable, verify, keys.dtype.kind == "f", keyed=True)
    _fill(out_keys, keys)
    _fill(out_values, values)
    if out_keys.size:
        _sort_memory(out_keys.reshape(-1), out_values.reshape(-1),
                     Order(descending=bool(descending), keyed=True), local, 1)
    return out_keys, out_values
