"""Tables: several value arrays moved with the keys, and sorts by several keys.

:func:`sort_table` is what :func:`distsort.sort_by_key` runs when it is given a
tuple of keys or a tuple (or dict) of value arrays; :func:`lexsort` is NumPy's
``lexsort`` for Dask arrays.  Both sort the keys once, with their positions, and
move every other column with one shuffle (:func:`gather`): each chunk of the
permutation is split once by the input chunk its entries point into, and every
piece takes all the columns at once.

Several keys sort lexicographically, the last key primary, as ``numpy.lexsort``.
Where their order codes fit 64 bits together (two float32 keys, an int16 and a
datetime64, ...) they travel as one unsigned code per element
(:func:`composite_codes`): one sort.  Wider keys are sorted by successive stable
passes from the least significant group of keys (a radix sort whose digits are
the 64-bit groups), each pass one sort and one gather.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import dask.array as da
import numpy as np
from dask.base import tokenize

from distsort import api
from distsort.backends import Order, array_module_name
from distsort.graph.gather import gather
from distsort.eager import like_input, one_place
from distsort.inputs import (as_codes, as_dask_array, check_stable, code_order, from_codes,
                             numpy_keywords, validate)
from distsort.plan.options import check_local
from distsort.sort1d import argsort_by_positions, sort_1d
from distsort.core.order import TIME_KINDS, encode, time_codes
from distsort.core.xp import namespace as _namespace

__all__ = ["sort_by_key", "lexsort", "sort_table", "composite_codes", "code_groups"]

#: Bits of the widest order code a sort takes.
_CODE_BITS = 64


def _code_bits(dtype: np.dtype) -> int:
    """Bits of a key's order code (datetime64/timedelta64: 64, see ``time_codes``)."""
    return _CODE_BITS if dtype.kind in TIME_KINDS else 8 * dtype.itemsize


def code_groups(bits: Iterable[int]) -> list[tuple[int, ...]]:
    """Keys (given by their codes' widths, primary first) grouped greedily into runs
    whose codes fit 64 bits together: the sorts a lexicographic sort needs.

    >>> code_groups((32, 32, 64, 16, 8, 8))
    [(0, 1), (2,), (3, 4, 5)]
    """
    groups: list[tuple[int, ...]] = []
    width = _CODE_BITS + 1
    for i, b in enumerate(bits):
        if width + b > _CODE_BITS:
            groups.append(())
            width = 0
        groups[-1] += (i,)
        width += b
    return groups


def _key_code(block: Any, descending: bool = False) -> Any:
    """A block's order code as NumPy compares keys for equality: ``-0.0`` and ``+0.0``
    one code, every NaN one code (last), NaT last; ``descending``: codes whose
    ascending order is the descending one, NaN and NaT still last."""
    if block.dtype.kind in TIME_KINDS:
        return time_codes(block, descending)
    return encode(block, canonical=True, descending=descending)


def _code_width(dtypes: Sequence[np.dtype]) -> np.dtype:
    """The narrowest unsigned dtype that holds the codes of ``dtypes`` side by side.

    >>> _code_width([np.dtype("int8")]), _code_width([np.dtype("int16"), np.dtype("bool")])
    (dtype('uint8'), dtype('uint32'))
    """
    total = sum(_code_bits(d) for d in dtypes)
    if total > _CODE_BITS:
        raise ValueError(f"the keys' codes take {total} bits, more than {_CODE_BITS}")
    return np.dtype(f"u{1 << (max(total, 8) - 1).bit_length() - 3}")


def _composite_block(descending: bool, *blocks: Any) -> Any:
    """One unsigned code per element: the blocks' codes side by side, the first block's
    the most significant."""
    width = _code_width([b.dtype for b in blocks])
    code = _key_code(blocks[0], descending).astype(width)
    for b in blocks[1:]:
        code <<= width.type(_code_bits(b.dtype))
        code |= _key_code(b, descending).astype(width)
    return code


def composite_codes(keys: Sequence[da.Array], descending: bool = False) -> da.Array:
    """The lexicographic order codes of ``keys`` (1-D Dask arrays chunked alike, the
    FIRST most significant) whose codes fit 64 bits together: one unsigned Dask array
    of the narrowest width that holds them.  Ordered as NumPy orders the keys: equal
    codes for equal keys (``-0.0 == +0.0``, NaNs equal and last, NaT last);
    ``descending``: sorted ascending, the codes give every key's descending order,
    NaNs and NaTs still last.

    >>> import dask.array as da
    >>> a = da.from_array(np.array([1, 0, 1], dtype=np.int16), chunks=2)
    >>> b = da.from_array(np.array([-0.0, 5.0, 0.0], dtype=np.float32), chunks=2)
    >>> c = composite_codes([a, b]).compute()
    >>> c.dtype, bool(c[0] == c[2]), bool(c[1] < c[0])
    (dtype('uint64'), True, True)
    """
    width = _code_width([k.dtype for k in keys])
    xp = _namespace(keys[0]._meta)
    return da.map_blocks(_composite_block, descending, *keys, dtype=width,
                         name="distsort-keycodes-" + tokenize([k.name for k in keys],
                                                              descending),
                         meta=xp.empty((0,), dtype=width))


def _lexsort_perm(keys: Sequence[da.Array], descending: bool = False,  # noqa: PLR0913, PLR0917
                  verify: bool = False, local: str = "auto",
                  together: bool | None = None) -> da.Array:
    """The permutation that sorts 1-D ``keys`` (Dask arrays chunked alike, the LAST
    primary) lexicographically, ties in input order.  ``together``: the gathers' (the
    caller's :func:`~distsort.eager.one_place`, else asked here)."""
    if together is None:
        together = one_place(keys)
    bits = [_code_bits(k.dtype) for k in keys[::-1]]  # primary first
    groups = [tuple(len(keys) - 1 - i for i in g) for g in code_groups(bits)]
    perm: da.Array | None = None
    for group in groups[::-1]:  # least significant first: each pass is stable
        # The descending order is in the codes (NaNs and NaTs last): they sort ascending.
        codes = composite_codes([keys[i] for i in group], bool(descending))
        if perm is not None:
            (codes,) = gather((codes,), perm, together=together)
        order = Order(descending=False, keyed=True)
        step = sort_1d(codes, None, order, positions=True, verify=verify, what="lexsort",
                        local=local)[1]
        perm = step if perm is None else gather((perm,), step, together=together)[0]
    assert perm is not None  # keys is not empty: one group at least
    return perm


def _as_columns(values: tuple | dict) -> tuple[tuple | None, Sequence[Any]]:
    """``(names, arrays)`` of a tuple or dict of value arrays (names None for a tuple)."""
    if isinstance(values, dict):
        return tuple(values), tuple(values.values())
    return None, tuple(values)


def _columns_like(names: tuple | None, arrays: Sequence[Any]) -> dict | tuple:
    return dict(zip(names, arrays, strict=True)) if names is not None else tuple(arrays)


def _validated(arrays: Iterable[Any], what: str, shape: tuple | None = None,
               chunks: tuple | None = None) -> tuple[list[da.Array], tuple | None]:
    """The arrays validated and flattened as :func:`distsort.sort_by_key` does, all of
    one shape and one backend, chunked alike (like the first, or as ``chunks``)."""
    out, backend = [], None
    for i, given in enumerate(arrays):
        name = f"{what}[{i!r}]"
        a = as_dask_array(given, name)
        if shape is None:
            shape = a.shape
        if not any(np.isnan(d) for d in a.shape + shape) and a.shape != shape:
            raise ValueError(f"keys and values must have the same shape, got {shape} and "
                             f"{a.shape} ({name})")
        flat, _ = validate(a, None, name)
        module = array_module_name(flat._meta)
        if backend not in (None, module):
            raise TypeError("keys and values must all have NumPy chunks or all CuPy chunks")
        backend = module
        if flat.size == 0:  # dask does not rechunk empty arrays: one empty chunk
            flat = da.from_array(flat._meta, chunks=((0,),), asarray=False)
        chunks = chunks or flat.chunks
        out.append(flat if flat.chunks == chunks else flat.rechunk(chunks))
    return out, shape


@numpy_keywords
@like_input("keys")
def lexsort(keys: tuple | list, *, verify: bool = False, local: str = "auto") -> da.Array:
    """Indices that sort 1-D arrays lexicographically, as int64: ``numpy.lexsort``.

    Parameters
    ----------
    keys : tuple of arrays, or a 2-D array
        Dask, NumPy or CuPy arrays of one shape (flattened, as with ``axis=None``),
        of the dtypes :func:`distsort.sort` takes, or a 2-D array whose rows are
        the keys.  As in ``numpy.lexsort``, the LAST key
        is the primary one, the one before it the secondary, and so on.
    verify : bool, optional
        Check each sort as :func:`distsort.argsort` does.
    local : {"auto", "bitonic", "radix"}, optional
        How each GPU sorts its chunks, as for :func:`distsort.sort`.

    Returns
    -------
    dask.array.Array, numpy.ndarray or cupy.ndarray
        int64 indices: ``numpy.lexsort(keys)`` element for element (equal keys in
        input order, ``-0.0`` equal to ``+0.0``, NaNs and NaTs last); computed at
        once where no key is a Dask array (as for :func:`distsort.sort`).

    Notes
    -----
    Keys whose order codes fit 64 bits together sort as one code per element, in
    one sort; wider keys take one sort and one gather per group of keys that fits
    64 bits (see :mod:`distsort.tables`).

    Examples
    --------
    >>> import dask.array as da, numpy as np, distsort
    >>> first = da.from_array(np.array([1, 2, 1, 2]), chunks=2)
    >>> last = da.from_array(np.array([0.5, 0.5, 0.1, 0.9]), chunks=2)
    >>> distsort.lexsort((first, last)).compute()  # by last, then by first
    array([2, 0, 1, 3])
    """
    keys = _key_rows(keys)
    check_local(local)
    keys, _ = _validated(keys, "keys")
    return _lexsort_perm(keys, verify=verify, local=local)


def _key_rows(keys: Any) -> tuple[Any, ...] | list[Any]:
    """The key arrays of ``lexsort``'s ``keys``: a tuple or list of arrays, or the rows
    of a 2-D array, as ``numpy.lexsort`` takes them (which reads a 1-D array as keys of
    one element each: refused here, as a mistake for one key)."""
    ndim = getattr(keys, "ndim", None)
    if ndim == _ROWS_NDIM:
        if any(np.isnan(d) for d in keys.shape):
            raise ValueError("lexsort's key array has unknown chunk sizes; call "
                             "keys.compute_chunk_sizes() first")
        return tuple(keys[i] for i in range(keys.shape[0]))
    if not isinstance(keys, (tuple, list)) or not keys:
        raise TypeError("lexsort takes a non-empty tuple of key arrays, or a 2-D array whose "
                        "rows are the keys (the last primary); one key: lexsort((key,))")
    return keys


#: A key array whose rows are the keys.
_ROWS_NDIM = 2


def sort_table(keys: Any, values: Any, *, descending: bool = False, verify: bool = False,
               local: str = "auto") -> tuple[Any, Any]:
    """What :func:`distsort.sort_by_key` does for a tuple of keys or a tuple (or dict)
    of value arrays: the sorted keys and the values in the same structure.

    Equal keys keep their input order.  One key: it is sorted with its positions
    (``distsort.argsort_by_positions``) and the value arrays are gathered together
    (:func:`distsort.graph.gather.gather`).
    Several keys (the last primary, as ``numpy.lexsort``): their permutation
    (:func:`_lexsort_perm`) gathers the keys and the values together.

    >>> import dask.array as da
    >>> k = da.from_array(np.array([2.0, 1.0, 2.0, 0.5]), chunks=2)
    >>> cols = {"a": np.array([1, 2, 3, 4]), "b": np.array([0.1, 0.2, 0.3, 0.4])}
    >>> sk, out = sort_table(k, cols)
    >>> sk.compute().tolist(), out["a"].compute().tolist(), out["b"].compute().tolist()
    ([0.5, 1.0, 2.0, 2.0], [4, 2, 1, 3], [0.4, 0.2, 0.1, 0.3])
    """
    check_local(local)
    several = isinstance(keys, tuple)
    names, columns = _as_columns(values) if isinstance(values, (tuple, dict)) else (None,
                                                                                   (values,))
    if several and not keys:
        raise ValueError("sort_by_key needs at least one key array")
    key_list, shape = _validated(keys if several else (keys,), "keys")
    columns, _ = _validated(columns, "values", shape, key_list[0].chunks)
    # every gather's, asked once (none where there is nothing to gather)
    together = bool(several or columns) and one_place([*key_list, *columns])
    if several:
        perm = _lexsort_perm(key_list, descending, verify, local, together)
        moved = gather((*key_list, *columns), perm, together=together)
        out_keys, out_values = moved[:len(key_list)], moved[len(key_list):]
    else:
        (key,) = key_list
        order = code_order(key.dtype, Order(descending=bool(descending)))
        sorted_codes, perm = argsort_by_positions(as_codes(key, descending), order.descending,
                                                  verify, local, "sort_by_key")
        out_keys = from_codes(sorted_codes, key.dtype, descending)
        out_values = gather(columns, perm, together=together) if columns else ()
    if not isinstance(values, (tuple, dict)):
        return out_keys, out_values[0]
    return out_keys, _columns_like(names, out_values)


@numpy_keywords
@like_input("keys", "values")
def sort_by_key(keys: Any, values: Any, *, descending: bool = False,  # noqa: PLR0913
                stable: bool | None = None, verify: bool = False,
                local: str = "auto", out: tuple[Any, Any] | None = None) -> tuple[Any, Any]:
    """``distsort.sort_by_key``: :func:`distsort.api.sort_by_key` for one key array and
    one value array, :func:`sort_table` for a tuple of keys or a tuple (or dict) of
    value arrays (the docstring below is the API's)."""
    if out is not None and (isinstance(keys, tuple) or isinstance(values, (tuple, dict))):
        raise TypeError("out= of sort_by_key takes one key array and one value array; "
                        "sort a table without out=")
    if out is not None:
        return api.sort_by_key(keys, values, descending=descending, stable=stable,
                               verify=verify, local=local, out=out)
    if isinstance(keys, tuple) or isinstance(values, (tuple, dict)):
        check_stable(stable, False)  # any order asked for: ties keep input order
        return sort_table(keys, values, descending=descending, verify=verify, local=local)
    return api.sort_by_key(keys, values, descending=descending, stable=stable,
                           verify=verify, local=local)


sort_by_key.__doc__ = api.sort_by_key.__doc__
