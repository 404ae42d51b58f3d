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
def sort(x: ArrayLike, /, axis: int | None = -1, *, descending: bool = False,
         stable: bool | None = None, verify: bool = False, local: str = "auto") -> da.Array:
    """Sort an array; a Dask array of NumPy or CuPy chunks is sorted across chunks.

    Parameters
    ----------
    x : dask.array.Array, numpy.ndarray or cupy.ndarray
        Keys: bool, (u)int8..64, float16/32/64, datetime64 or timedelta64.  NumPy
        and CuPy arrays are wrapped as one chunk, neither hashed nor copied, and
        sorted at once; lists and tuples are converted with ``numpy.asarray``.  DataFrames, Series
        and xarray objects are refused with the conversion to use (TypeError).
    axis : int or None, optional
        Axis to sort along (default: the last).  A 1-D array is sorted globally,
        whatever its chunking.  ``None`` sorts the flattened array.  For an N-D
        array the axis must be held in one chunk.
    descending : bool, optional
        Sort from largest to smallest, NaNs and NaTs still last, as
        ``numpy.sort(x, descending=True)`` (NumPy >= 2.5).
    stable : bool, optional
        ``True``: keys that NumPy calls equal keep their input order, so the
        result is ``x[argsort(x)]`` bit for bit, as ``numpy.sort(x, stable=True)``
        (``-0.0`` and ``+0.0``, NaNs of any sign and payload; float keys then sort
        with their positions, as :func:`argsort` does).  ``None`` or ``False``
        (the default, NumPy's): the faster bit order, the same values, with
        ``-0.0`` before ``+0.0`` and NaNs by their bits (``docs/semantics.md``).
        Other dtypes give the same bits either way.
    verify : bool, optional
        Check on the workers (on the GPU for CuPy chunks), before the result can be
        read, that it is sorted and a permutation of the input (counts and
        order-independent 64-bit checksums: a few elementwise passes over the
        input and the output, no sort).  Raises
        :class:`distsort.VerificationError` when computed if not.
    local : {'auto', 'bitonic', 'radix'}, optional
        How each GPU sorts its chunks (NumPy chunks ignore it).  ``'auto'``
        (default): CUB's radix sort (``cupy.sort``/``cupy.argsort`` on distsort's
        order codes, so the result is the same) where the plan finds room for the
        extra chunk-sized buffers it needs in the device budget the cluster reports
        (dask-cuda's ``device_memory_limit``, else the device's capacity) beside the
        data, else the in-place bitonic kernels; ``'bitonic'`` always sorts in
        place; ``'radix'`` always uses the radix sort.  A radix sort whose buffers
        cannot be allocated sorts in place, with a warning on the ``"distsort"``
        logger.

    Returns
    -------
    dask.array.Array, numpy.ndarray or cupy.ndarray
        For a Dask array: lazy, with the same dtype (in native byte order) and
        length and chunks of the same backend; a 1-D result has a regular chunking
        (equal chunks, the last possibly shorter), whatever the input's was.  For a
        NumPy or CuPy array (or a list): an array of its kind, computed at once, as
        ``numpy.sort`` gives (``distsort.eager``; a ``numpy.memmap`` gives a Dask
        array, read in chunks).

    Notes
    -----
    How a 1-D sort runs is planned once (``distsort.plan.sortplan``, ``docs/plan.md``).
    Where all the chunks, a sorted copy and the radix sort's buffers fit the one
    device that sorts them (this process on Dask's local schedulers, or a
    cluster's only worker), they are sorted as one in one task, with no network.
    Otherwise each chunk, or each group of chunks of one worker, is sorted and the
    network of compare-splits merges them; an input of many small chunks is
    coalesced into one chunk per GPU or CPU thread first.  Past the workers'
    device budgets the sort runs out of core.

    NumPy's order: NaNs (any sign and payload) sort last and keep their bits;
    NaT sorts last; both for either order.  The dtype is kept, byte order included.  datetime64 and
    timedelta64 (any unit) are sorted through their int64 view, mapped
    elementwise so that NaT comes last, and come back with their dtype.  Not
    supported: complex, object, string and structured dtypes (TypeError), and
    N-D arrays whose sort axis is split over several chunks (ValueError).  The
    input's chunks are never modified.  ``numpy.sort(dask_array)`` does not
    come here: NumPy computes the whole array and sorts it in memory.

    Examples
    --------
    >>> import dask.array as da, numpy as np, distsort
    >>> x = da.from_array(np.array([3.0, np.nan, -1.0, 2.0, 0.5]), chunks=2)
    >>> distsort.sort(x).compute()
    array([-1. ,  0.5,  2. ,  3. ,  nan])
    >>> distsort.sort(x, descending=True).compute()
    array([ 3. ,  2. ,  0.5, -1. ,  nan])
    >>> distsort.sort(x, verify=True).compute()  # checked on the workers before it is read
    array([-1. ,  0.5,  2. ,  3. ,  nan])
    >>> t = np.array(["2026-03-01", "NaT", "2025-12-24"], dtype="datetime64[D]")
    >>> distsort.sort(da.from_array(t, chunks=2)).compute()
    array(['2025-12-24', '2026-03-01',        'NaT'], dtype='datetime64[D]')
    """
    stable = check_stable(stable, False)
    check_flags(descending, verify)
    check_local(local)
    given = getattr(x, "dtype", None)
    # Floats are the one kind whose keys NumPy calls equal can differ in bits: a stable
    # sort takes them by their positions, as argsort does.
    by_position = stable and given is not None and np.dtype(given).kind == "f"
    order = Order(descending=bool(descending), keyed=by_position)
    if not verify and (out := sorted_at_once(x, axis, order, local)) is not None:
        return namespace(x, strict=True).take(x.reshape(-1), out) if by_position else out
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
    return _like_given(from_codes(out, dtype, descending), given)


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
def sort_by_key(keys: ArrayLike, values: ArrayLike, *, descending: bool = False,
                stable: bool | None = False, verify: bool = False,
                local: str = "auto") -> tuple[da.Array, da.Array]:
    """Sort 1-D ``keys`` and move ``values`` with them; tables: several value arrays,
    several keys.

    Parameters
    ----------
    keys : dask.array.Array, numpy.ndarray or cupy.ndarray, or a tuple of them
        1-D keys, as for :func:`sort` (N-D keys are flattened).  A tuple holds
        several keys, sorted lexicographically as ``numpy.lexsort`` sorts them:
        the LAST key is the primary one (see :func:`distsort.lexsort`).
    values : array of the same shape and backend, or a tuple or dict of them
        Values of 1, 2, 4 or 8 bytes (bool, integers, floats, datetime64,
        timedelta64).  A tuple or dict holds several value arrays (the columns
        of a table); they all move by one permutation, in one shuffle, and come
        back in the same structure.  With several value arrays or several keys,
        equal keys keep their input order (as with ``stable=True``).
    descending : bool, optional
        Largest keys first.
    stable : bool, optional
        How equal keys are ordered.  ``False`` (the default): by value, ascending
        in NumPy's order (``numpy.lexsort((values, keys))``); where that order calls
        pairs equal and keeps their input order (``-0.0`` and ``+0.0``, NaNs of
        any sign and payload, as keys or values), distsort orders them by their
        bits, whatever the input order: key, then value, each ``-0.0`` before
        ``+0.0`` and NaNs with the sign bit clear before those with it set (k =
        ``[1, 1, 1, 1]``, v = ``[-nan, nan, 0.0, -0.0]`` gives v = ``[-0.0, 0.0,
        nan, -nan]``, where lexsort gives ``[0.0, -0.0, -nan, nan]``).  ``True``: by
        position, as in the input (``values[numpy.argsort(keys, kind="stable")]``):
        where the plan sorts every chunk in one task (the one-device plan, a network
        of one group) the keys are sorted with their positions and keys and values
        taken by them in that task; elsewhere
        integer keys and values of up to 4 bytes together are sorted as one integer
        with their positions between them, and other keys are sorted with their
        positions and the values gathered (measured within 1.3x of the default
        order's time, often below it: ``docs/performance.md``); on CuPy chunks
        values of up to 4 bytes travel packed with their positions as 8 bytes, wider
        ones are gathered after an argsort (``distsort.sort1d.stable_by_key``).  Both
        orders are deterministic, whatever the chunking and backend.  NumPy and the array
        API have no key-value sort to follow; the default stays ``False``, the
        order distsort always gave, and the faster one.
    verify : bool, optional
        Check on the workers (on the GPU for CuPy chunks), before the result can be
        read, that the keys are sorted and that the keys and the (key, value)
        pairs are permutations of the input's (counts and order-independent
        64-bit checksums).  Raises :class:`distsort.VerificationError` when
        computed if not.  (With ``stable=True`` and values of 8 bytes, the
        argsort is checked and the gather is Dask's.)
    local : {'auto', 'bitonic', 'radix'}, optional
        How each GPU sorts its chunks, as for :func:`sort`.

    Returns
    -------
    (dask.array.Array, dask.array.Array)
        The sorted keys and the values moved with them (tuples and dicts as given);
        lazy where any input is a Dask array, else arrays of the inputs' kind, computed
        at once (as for :func:`sort`).

    Examples
    --------
    >>> import dask.array as da, numpy as np, distsort
    >>> k = da.from_array(np.array([3, 1, 2, 1]), chunks=2)
    >>> v = da.from_array(np.array([30.0, 11.0, 20.0, 10.0]), chunks=2)
    >>> sk, sv = distsort.sort_by_key(k, v)
    >>> sk.compute(), sv.compute()
    (array([1, 1, 2, 3]), array([10., 11., 20., 30.]))
    >>> distsort.sort_by_key(k, v, stable=True)[1].compute()  # equal keys: input order
    array([11., 10., 20., 30.])
    >>> sk, cols = distsort.sort_by_key(k, {"v": v, "i": np.arange(4)})  # a table
    >>> cols["v"].compute(), cols["i"].compute()
    (array([11., 10., 20., 30.]), array([1, 3, 2, 0]))
    >>> (second, first), _ = distsort.sort_by_key((v, k), v)  # by k, then by v
    >>> first.compute(), second.compute()
    (array([1, 1, 2, 3]), array([10., 11., 20., 30.]))
    """
    stable = check_stable(stable, False)
    check_flags(descending, verify)
    order = Order(descending=bool(descending), keyed=True)
    check_local(local)
    if stable and not verify and (out := stable_at_once(keys, values, order, local)):
        return out
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
