"""The public functions: ``sort``, ``argsort``, ``sort_by_key`` and ``planning``.

Each checks its arguments (``distsort.inputs``), then hands the sort on: a 1-D array to
``distsort.sort1d`` (the cluster read once, the plan made once, the graph assembled
from the plan), an axis held in one chunk to ``sort1d.sort_along``, a stable key-value
sort to ``distsort.sort1d``.  How a sort runs is decided in ``distsort.plan`` alone.
"""
from __future__ import annotations

import math
from typing import Any

import dask.array as da
import numpy as np

from distsort.backends import Order, array_module_name
from distsort.core.xp import namespace
from distsort.eager import like_input
from distsort.inplace import sort_by_key_into, sort_into
from distsort.inputs import (as_codes, as_dask_array, check_flags, check_stable, code_order,
                             from_codes, like_byte_order, numpy_keywords, validate)
from distsort.plan.options import check_local, planning
from distsort.sort1d import (argsort_by_positions, sort_1d, sort_along, sorted_at_once,
                             stable_at_once, stable_by_key)

__all__ = ["sort", "argsort", "sort_by_key", "planning"]  # tables: distsort.tables

#: What the public functions take: a Dask array, or a NumPy or CuPy array (wrapped).
ArrayLike = Any


@numpy_keywords
@like_input("x")
def sort(x: ArrayLike, /, axis: int | None = -1, *, descending: bool = False,  # noqa: PLR0913
         stable: bool | None = None, verify: bool = False, local: str = "auto",
         out: ArrayLike | None = None) -> da.Array:
    """Sort an array; a Dask array of NumPy or CuPy chunks is sorted across chunks.

    Parameters
    ----------
    x : dask.array.Array, numpy.ndarray or cupy.ndarray
        Keys: bool, (u)int8..64, float16/32/64, datetime64 or timedelta64.  NumPy and
        CuPy arrays (and lists) are sorted at once (the inputs: ``docs/semantics.md``).
    axis : int or None, optional
        Axis to sort along (default: the last); ``None`` sorts the flattened array.  A
        1-D array is sorted across its chunks; an N-D array's axis must be in one chunk.
    descending : bool, optional
        Largest first, NaNs and NaTs still last, as ``numpy.sort(x, descending=True)``.
    stable : bool, optional
        ``True``: ``x[argsort(x)]`` bit for bit.  ``None`` or ``False`` (the default):
        the faster bit order of the same values (``docs/semantics.md``).
    verify : bool, optional
        Check on the workers that the result is sorted and a permutation of the input;
        raises :class:`distsort.VerificationError` when computed if not.
    local : {'auto', 'bitonic', 'radix'}, optional
        How each GPU sorts its chunks: CUB's radix sort where it fits, or in place.
    out : numpy.ndarray or cupy.ndarray, optional
        Sort into this array: ``out=x`` sorts ``x`` in its own memory, as
        ``ndarray.sort()`` does (an array as large as the device holds).  ``axis``: the
        last one or ``None``.  Not with ``verify``, nor ``stable=True`` for floats.

    Returns
    -------
    dask.array.Array, numpy.ndarray or cupy.ndarray
        A Dask array in: lazy, regular chunks of the same backend.  An array in: an
        array of its kind, at once, as ``numpy.sort`` gives; ``out`` where given.

    Examples
    --------
    >>> import dask.array as da, numpy as np, distsort
    >>> x = da.from_array(np.array([3.0, np.nan, -1.0, 2.0, 0.5]), chunks=2)
    >>> distsort.sort(x).compute()
    array([-1. ,  0.5,  2. ,  3. ,  nan])
    >>> distsort.sort(x, descending=True, verify=True).compute()
    array([ 3. ,  2. ,  0.5, -1. ,  nan])
    >>> y = np.array([2.0, np.nan, -1.0])
    >>> _ = distsort.sort(y, out=y)  # in place, in y's own memory
    >>> y
    array([-1.,  2., nan])
    """
    stable = check_stable(stable, False)
    check_flags(descending, verify)
    check_local(local)
    if out is not None:
        return sort_into(x, out, axis, descending, stable, verify, local)
    given = getattr(x, "dtype", None)
    order = _sort_order(given, descending, stable)
    if not verify and (out := sorted_at_once(x, axis, order, local)) is not None:
        return namespace(x, strict=True).take(x.reshape(-1), out) if order.keyed else out
    return _like_given(_sorted(x, axis, order, verify, local), given)


def _sort_order(given: Any, descending: bool, stable: bool) -> Order:
    """The ``Order`` of :func:`sort` of keys of dtype ``given`` (None: not known yet)."""
    # Floats are the one kind whose keys NumPy calls equal can differ in bits: a stable
    # sort takes them by their positions, as argsort does.
    by_position = stable and given is not None and np.dtype(given).kind == "f"
    return Order(descending=bool(descending), keyed=by_position)


def _sorted(x: ArrayLike, axis: int | None, order: Order, verify: bool, local: str) -> da.Array:
    """:func:`sort` of ``x`` as a Dask array (``order.keyed``: float keys taken by their
    positions), in native byte order."""
    descending, by_position = order.descending, order.keyed
    x, axis = validate(x, axis)
    dtype = x.dtype
    order = code_order(dtype, order)
    x = as_codes(x, descending)
    if x.ndim == 1 and by_position:
        out = argsort_by_positions(x, order.descending, verify, local, "sort")[0]
    elif x.ndim == 1:
        out = sort_1d(x, None, order, positions=False, verify=verify, local=local)[0]
    else:
        out = sort_along(x, axis, order, "keys", verify)
    return from_codes(out, dtype, descending)


def _like_given(out: da.Array, given: Any) -> da.Array:
    """The sorted ``out`` in the byte order of the input's dtype ``given``, as NumPy
    returns it (the sorts run in native order: ``distsort.inputs.native_order``)."""
    return out if given is None else like_byte_order(out, given)


@numpy_keywords
@like_input("x")
def argsort(x: ArrayLike, /, axis: int | None = -1, *, descending: bool = False,
            stable: bool | None = True, verify: bool = False, local: str = "auto") -> da.Array:
    """Indices that sort an array, as int64; 1-D arrays are sorted across chunks.

    Equal keys keep their input order, as in ``numpy.argsort(x, kind="stable")``.

    Parameters
    ----------
    x : dask.array.Array, numpy.ndarray or cupy.ndarray
        Keys, as for :func:`sort`.
    axis : int or None, optional
        As for :func:`sort`; with ``None`` the indices are into the flattened array.
    descending : bool, optional
        Largest keys first, NaNs and NaTs still last; equal keys keep their
        original order (as ``numpy.argsort(x, descending=True, stable=True)``,
        NumPy >= 2.5).
    stable : bool, optional
        Accepted for NumPy compatibility: the result is always stable, equal to
        ``numpy.argsort(x, kind="stable")`` element for element.
    verify : bool, optional
        Check on the workers (on the GPU for CuPy chunks), before the result can be
        read, that the keys it points to are sorted and that the (key, index)
        pairs are those of the input (counts and order-independent 64-bit
        checksums).  Raises :class:`distsort.VerificationError` when computed
        if not.
    local : {'auto', 'bitonic', 'radix'}, optional
        How each GPU sorts its chunks, as for :func:`sort`.

    Returns
    -------
    dask.array.Array, numpy.ndarray or cupy.ndarray
        int64 indices, chunked like :func:`sort`'s result (computed at once for a
        NumPy or CuPy array, as for :func:`sort`).

    Examples
    --------
    >>> import dask.array as da, numpy as np, distsort
    >>> x = da.from_array(np.array([2, 1, 2, 0]), chunks=3)
    >>> distsort.argsort(x).compute()
    array([3, 1, 0, 2])
    >>> distsort.argsort(x, descending=True).compute()
    array([0, 2, 1, 3])
    """
    check_stable(stable, True)
    check_flags(descending, verify)
    order = Order(descending=bool(descending), keyed=True)
    check_local(local)
    if not verify and (out := sorted_at_once(x, axis, order, local)) is not None:
        return out
    x, axis = validate(x, axis)
    order = code_order(x.dtype, order)
    x = as_codes(x, descending)
    if x.ndim == 1:
        return sort_1d(x, None, order, positions=True, verify=verify, what="argsort",
                        local=local)[1]
    return sort_along(x, axis, order, "values", verify)


@numpy_keywords
def sort_by_key(keys: ArrayLike, values: ArrayLike, *, descending: bool = False,  # noqa: PLR0913
                stable: bool | None = False, verify: bool = False,
                local: str = "auto",
                out: tuple[ArrayLike, ArrayLike] | None = None) -> tuple[da.Array, da.Array]:
    """Sort 1-D ``keys`` (or several) and move ``values`` (or a table's) with them.

    Parameters
    ----------
    keys : dask.array.Array, numpy.ndarray or cupy.ndarray, or a tuple of them
        1-D keys, as for :func:`sort` (N-D keys are flattened).  A tuple holds several
        keys, sorted as ``numpy.lexsort`` sorts them: the LAST key is the primary one.
    values : array of the same shape and backend, or a tuple or dict of them
        Values of 1, 2, 4 or 8 bytes; several (a table's columns) move by one
        permutation and come back in the same structure.
    descending : bool, optional
        Largest keys first.
    stable : bool, optional
        Equal keys: ``False`` (the default), by value (``numpy.lexsort((values,
        keys))``); ``True``, by position, as in the input.  With several value arrays
        or keys, always by position (``docs/semantics.md``).
    verify : bool, optional
        Check on the workers that the keys are sorted and the keys and the pairs are
        permutations of the input's (:class:`distsort.VerificationError`).
    local : {'auto', 'bitonic', 'radix'}, optional
        How each GPU sorts its chunks, as for :func:`sort`.
    out : (array, array), optional
        ``(keys, values)`` sorts both in their own memory, as :func:`sort`'s ``out``
        (NumPy or CuPy arrays; not with ``stable=True`` or ``verify``).

    Returns
    -------
    (dask.array.Array, dask.array.Array)
        The sorted keys and the values moved with them (tuples and dicts as given);
        lazy where an input is a Dask array, else at once; ``out`` where given.

    Examples
    --------
    >>> import dask.array as da, numpy as np, distsort
    >>> k = da.from_array(np.array([3, 1, 2, 1]), chunks=2)
    >>> v = da.from_array(np.array([30.0, 11.0, 20.0, 10.0]), chunks=2)
    >>> sk, sv = distsort.sort_by_key(k, v)
    >>> sk.compute(), sv.compute()
    (array([1, 1, 2, 3]), array([10., 11., 20., 30.]))
    >>> sk, cols = distsort.sort_by_key(k, {"v": v, "i": np.arange(4)})  # a table, stable
    >>> cols["v"].compute(), cols["i"].compute()
    (array([11., 10., 20., 30.]), array([1, 3, 2, 0]))
    >>> k, v = np.array([3, 1, 2, 1]), np.array([30.0, 11.0, 20.0, 10.0])
    >>> _ = distsort.sort_by_key(k, v, out=(k, v))  # both in their own memory
    >>> k, v
    (array([1, 1, 2, 3]), array([10., 11., 20., 30.]))
    """
    stable = check_stable(stable, False)
    check_flags(descending, verify)
    order = Order(descending=bool(descending), keyed=True)
    check_local(local)
    if out is not None:
        return sort_by_key_into(keys, values, out, descending, stable, verify, local)
    if stable and not verify and (out := stable_at_once(keys, values, order, local)):
        return out
    return _sorted_by_key(keys, values, order, stable, verify, local)


def _sorted_by_key(keys: ArrayLike, values: ArrayLike, order: Order, stable: bool,  # noqa: PLR0913, PLR0917
                   verify: bool, local: str) -> tuple[da.Array, da.Array]:
    """:func:`sort_by_key` of ``keys`` and ``values`` as Dask arrays."""
    descending = order.descending
    given_keys, given_values = getattr(keys, "dtype", None), getattr(values, "dtype", None)
    keys, values = as_dask_array(keys, "keys"), as_dask_array(values, "values")
    known = not any(math.isnan(d) for d in keys.shape + values.shape)
    if known and keys.shape != values.shape:  # before flattening: (2, 3) is not (3, 2)
        raise ValueError(f"keys and values must have the same shape, got {keys.shape} "
                         f"and {values.shape}")
    keys, _ = validate(keys, None, "keys")
    values, _ = validate(values, None, "values")
    if array_module_name(keys._meta) != array_module_name(values._meta):
        raise TypeError("keys and values must both have NumPy chunks or both CuPy chunks")
    key_dtype, keys = keys.dtype, as_codes(keys, descending)
    order = code_order(key_dtype, order)
    if stable:
        out_keys, out_values = stable_by_key(keys, values, order, verify, local)
        return (_like_given(from_codes(out_keys, key_dtype, descending), given_keys),
                _like_given(out_values, given_values))
    value_dtype, values = values.dtype, as_codes(values)
    out_keys, out_values = sort_1d(keys, values, order, positions=False, verify=verify,
                                   what="sort_by_key", local=local)
    return (_like_given(from_codes(out_keys, key_dtype, descending), given_keys),
            _like_given(from_codes(out_values, value_dtype), given_values))
