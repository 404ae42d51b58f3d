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

import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from .backends import Order, array_module_name
from .order import TIME_KINDS, _namespace, encode, time_codes

__all__ = ["lexsort", "sort_table", "gather", "composite_codes", "code_groups", "stable_by_key"]

#: Bits of the widest order code a sort takes.
_CODE_BITS = 64
#: Positions travel as uint32 (packed with keys of up to this many bytes in one
#: 64-bit code on the CPU) where the array has fewer than 2**32 elements.
_NARROW_KEY_BYTES = 4


def _split_by_source(perm, bounds, size=None):
    """``perm``'s entries grouped by the input chunk they point into: ``(where,
    offsets, local)``, where chunk ``i``'s are ``local[offsets[i]:offsets[i + 1]]``
    (indices into chunk ``i``), for output places ``where[offsets[i]:offsets[i + 1]]``.
    ``bounds``: the chunks' first indices; ``size``: their length where all but the
    last are that long (a division then finds the chunk, not a search).

    >>> where, offsets, local = _split_by_source(np.array([3, 0, 2, 1]), [0, 2])
    >>> offsets.tolist(), local[offsets[1]:offsets[2]].tolist()
    ([0, 2, 4], [1, 0])
    """
    xp = _namespace(perm)
    bounds = xp.asarray(bounds)
    if size:
        source = perm // perm.dtype.type(size)
    else:
        source = xp.searchsorted(bounds, perm, side="right") - 1  # empty chunks: never chosen
    # Any grouping will do (``where`` and ``local`` agree).  The chunk numbers as
    # 8 or 16-bit integers: NumPy's stable sort of those is a radix sort (3-4x faster
    # than of int64 at 2^21 elements).
    source = source.astype(np.min_scalar_type(len(bounds)))
    where = xp.argsort(source, kind="stable") if xp is np else xp.argsort(source)
    counts = xp.bincount(source, minlength=len(bounds))
    offsets = xp.zeros(len(bounds) + 1, dtype=np.int64)
    xp.cumsum(counts, out=offsets[1:])
    offsets = offsets.get() if xp is not np else offsets  # C + 1 numbers to the host
    local = perm[where].astype(np.int64)
    local -= xp.repeat(bounds, counts)  # the entries lie grouped by chunk now
    return where, offsets, local


def _part(split, i):
    _, offsets, local = split
    return local[offsets[i]:offsets[i + 1]]


def _take_all(index, *chunks):
    """Each of ``chunks`` (one input chunk of every column) at ``index``."""
    return tuple(c[index] for c in chunks)


def _assemble(split, column, *taken):
    """Column ``column`` of one output chunk, from the pieces each input chunk gave."""
    where, offsets, _ = split
    first = taken[0][column]
    out = _namespace(first).empty(len(where), dtype=first.dtype)
    for i, part in enumerate(taken):
        out[where[offsets[i]:offsets[i + 1]]] = part[column]
    return out


def gather(columns, perm):
    """``tuple(c[perm] for c in columns)`` for 1-D Dask arrays chunked alike, ``perm``
    a permutation: one shuffle for all the columns.

    Each chunk of ``perm`` is split by the input chunk its entries point into;
    every piece goes to that chunk, takes all the columns' elements and comes back:
    each element and index travels once (``2 C D + (k + 1) D`` small tasks for ``C``
    input chunks, ``D`` output chunks and ``k`` columns).  Dask's ``values[perm]``
    sends every chunk of ``perm`` to every chunk of ``values``, once per column.

    >>> import dask.array as da
    >>> a = da.from_array(np.array([10, 11, 12, 13, 14]), chunks=2)
    >>> b = da.from_array(np.array([0.0, 0.1, 0.2, 0.3, 0.4]), chunks=2)
    >>> perm = da.from_array(np.array([4, 0, 3, 1, 2]), chunks=3)
    >>> [c.compute().tolist() for c in gather((a, b), perm)]
    [[14, 10, 13, 11, 12], [0.4, 0.0, 0.3, 0.1, 0.2]]
    """
    columns = [c.rechunk(columns[0].chunks) for c in columns]
    first = columns[0]
    bounds = np.cumsum((0,) + first.chunks[0][:-1])
    sizes = first.chunks[0]
    regular = len(set(sizes[:-1])) <= 1 and sizes[-1] <= sizes[0]  # only the last shorter
    size = sizes[0] if regular else None
    token = tokenize([c.name for c in columns], perm)
    split, part, take = (f"distsort-gather-{s}-{token}" for s in ("split", "part", "take"))
    outs = [f"distsort-gather-{k}-{token}" for k in range(len(columns))]
    layer = {}
    for j in range(perm.numblocks[0]):
        layer[(split, j)] = (_split_by_source, (perm.name, j), bounds, size)
        for i in range(first.numblocks[0]):
            layer[(part, i, j)] = (_part, (split, j), i)
            layer[(take, i, j)] = (_take_all, (part, i, j)) + tuple((c.name, i) for c in columns)
        pieces = tuple((take, i, j) for i in range(first.numblocks[0]))
        for k, out in enumerate(outs):
            layer[(out, j)] = (_assemble, (split, j), k) + pieces
    graph = HighLevelGraph.from_collections(outs[0], layer, dependencies=[*columns, perm])
    return tuple(da.Array(graph, out, perm.chunks, meta=c._meta)
                 for out, c in zip(outs, columns, strict=True))


def _code_bits(dtype):
    """Bits of a key's order code (datetime64/timedelta64: 64, see ``time_codes``)."""
    return _CODE_BITS if dtype.kind in TIME_KINDS else 8 * dtype.itemsize


def code_groups(bits):
    """Keys (given by their codes' widths, primary first) grouped greedily into runs
    whose codes fit 64 bits together: the sorts a lexicographic sort needs.

    >>> code_groups((32, 32, 64, 16, 8, 8))
    [(0, 1), (2,), (3, 4, 5)]
    """
    groups, width = [], _CODE_BITS + 1
    for i, b in enumerate(bits):
        if width + b > _CODE_BITS:
            groups.append(())
            width = 0
        groups[-1] += (i,)
        width += b
    return groups


def _key_code(block):
    """A block's order code as NumPy compares keys for equality: ``-0.0`` and ``+0.0``
    one code, every NaN one code (last), NaT last."""
    if block.dtype.kind in TIME_KINDS:
        return time_codes(block)
    return encode(block, canonical=True)


def _composite_block(*blocks):
    """One unsigned code per element: the blocks' codes side by side, the first block's
    the most significant."""
    total = sum(_code_bits(b.dtype) for b in blocks)
    width = np.dtype(f"u{max(1, 1 << (max(total, 8) - 1).bit_length() - 3)}")
    code = _key_code(blocks[0]).astype(width)
    for b in blocks[1:]:
        code <<= width.type(_code_bits(b.dtype))
        code |= _key_code(b).astype(width)
    return code


def composite_codes(keys):
    """The lexicographic order codes of ``keys`` (1-D Dask arrays chunked alike, the
    FIRST most significant) whose codes fit 64 bits together: one unsigned Dask array
    of the narrowest width that holds them.  Ordered as NumPy orders the keys: equal
    codes for equal keys (``-0.0 == +0.0``, NaNs equal and last, NaT last).

    >>> import dask.array as da
    >>> a = da.from_array(np.array([1, 0, 1], dtype=np.int16), chunks=2)
    >>> b = da.from_array(np.array([-0.0, 5.0, 0.0], dtype=np.float32), chunks=2)
    >>> c = composite_codes([a, b]).compute()
    >>> c.dtype, bool(c[0] == c[2]), bool(c[1] < c[0])
    (dtype('uint64'), True, True)
    """
    total = sum(_code_bits(k.dtype) for k in keys)
    if total > _CODE_BITS:
        raise ValueError(f"the keys' codes take {total} bits, more than {_CODE_BITS}")
    width = np.dtype(f"u{max(1, 1 << (max(total, 8) - 1).bit_length() - 3)}")
    xp = _namespace(keys[0]._meta)
    return da.map_blocks(_composite_block, *keys, dtype=width,
                         name="distsort-keycodes-" + tokenize([k.name for k in keys]),
                         meta=xp.empty((0,), dtype=width))


def _argsort(keys, descending, verify, local, what):
    """``(sorted keys, permutation)`` of 1-D ``keys`` (order codes or keys distsort
    sorts), equal keys in input order.

    NumPy keys of up to 4 bytes (fewer than 2**32 of them) carry uint32 positions:
    key and position then pack into one 64-bit code that the CPU backend sorts and
    merges as one integer (``distsort.backends.numpy.keyed_codes``), where int64
    positions make a 12-byte pair that it sorts by permutation.  Measured with
    ``benchmarks/keyed_cpu.py --stable`` (2^24 float32 keys with int32 values, 8
    chunks, 2 threads): see ``benchmarks/results/keyed_cpu_cpu-2cores_2026-11-25.json``.
    """
    from .api import _sort_1d
    order = Order(descending=bool(descending), keyed=True)
    n = keys.shape[0]
    if (array_module_name(keys._meta) == "numpy" and n < 2**32
            and keys.dtype.itemsize <= _NARROW_KEY_BYTES):
        positions = da.arange(n, chunks=keys.chunks, dtype=np.uint32)
        return _sort_1d(keys, positions, order, positions=False, verify=verify, what=what,
                        local=local)
    return _sort_1d(keys, None, order, positions=True, verify=verify, what=what, local=local)


#: On GPUs, positions are packed above values of at most this many bytes
#: (:func:`_pack`): one network, no shuffle.
_PACKED_VALUE_BYTES = 4


def _pack(values, block_info=None):
    """uint64 ``position << 32 | value bits``: ordered by position, the value recoverable.
    The positions are made in the block's own array module (CuPy chunks stay on the GPU)."""
    start = block_info[0]["array-location"][0][0]
    positions = _namespace(values).arange(start, start + values.size, dtype=np.uint64)
    bits = values.view(f"u{values.dtype.itemsize}").astype(np.uint64)
    return (positions << np.uint64(32)) | bits


def _unpack(packed, dtype):
    dtype = np.dtype(dtype)
    return (packed & np.uint64(0xFFFFFFFF)).astype(f"u{dtype.itemsize}").view(dtype)


def stable_by_key(keys, values, order, verify, local="auto"):
    """Position-stable key-value sort of 1-D Dask arrays (``keys`` keys or order
    codes): equal keys keep their input order.  Returns the sorted keys and values.

    NumPy chunks: the keys are sorted with their positions (:func:`_argsort`: uint32
    positions packed with keys of up to 4 bytes) and the values gathered by them
    (:func:`gather`).  CuPy chunks with values of at most 4 bytes (and fewer than
    2**32 elements): the values travel through the network packed under their
    positions (8 bytes), so the keyed sort's tie-break by value is one by position:
    one network, no shuffle; wider values: an argsort and a gather.

    Measured on the CPU (2^24 float32 keys with int32 values, 8 chunks, 2 threads
    on a shared 2-core VM, process time of the median run): the default order
    1.31-1.37 s, argsort with uint32 positions + gather 1.67-1.73 s (1.22-1.32x),
    values packed under positions 1.96-2.15 s (1.5-1.6x: a 12-byte pair, which the
    CPU backend merges by codes computed per comparison, 4x slower than the 8-byte
    codes of the default order).  ``benchmarks/keyed_cpu.py --stable`` times it.
    """
    from .api import _module, _sort_1d
    n = keys.shape[0]
    gpu = array_module_name(keys._meta) == "cupy"
    if gpu and values.dtype.itemsize <= _PACKED_VALUE_BYTES and n < 2**32:
        packed = values.map_blocks(_pack, dtype=np.uint64,
                                   meta=_module(values._meta).empty((0,), dtype=np.uint64),
                                   name="distsort-pack-" + tokenize(values))
        out_keys, out_packed = _sort_1d(keys, packed, order, positions=False, verify=verify,
                                        what="sort_by_key", local=local)
        return out_keys, out_packed.map_blocks(
            _unpack, values.dtype, dtype=values.dtype,
            name="distsort-unpack-" + tokenize(out_packed, values.dtype))
    out_keys, perm = _argsort(keys, order.descending, verify, local, "sort_by_key")
    return out_keys, gather((values,), perm)[0]


def _lexsort_perm(keys, descending=False, verify=False, local="auto"):
    """The permutation that sorts 1-D ``keys`` (Dask arrays chunked alike, the LAST
    primary) lexicographically, ties in input order."""
    from .api import _sort_1d
    bits = [_code_bits(k.dtype) for k in keys[::-1]]  # primary first
    groups = [tuple(len(keys) - 1 - i for i in g) for g in code_groups(bits)]
    perm = None
    for group in groups[::-1]:  # least significant first: each pass is stable
        codes = composite_codes([keys[i] for i in group])
        if perm is not None:
            (codes,) = gather((codes,), perm)
        order = Order(descending=bool(descending), keyed=True)
        step = _sort_1d(codes, None, order, positions=True, verify=verify, what="lexsort",
                        local=local)[1]
        perm = step if perm is None else gather((perm,), step)[0]
    return perm


def _as_columns(values):
    """``(names, arrays)`` of a tuple or dict of value arrays (names None for a tuple)."""
    if isinstance(values, dict):
        return tuple(values), tuple(values.values())
    return None, tuple(values)


def _columns_like(names, arrays):
    return dict(zip(names, arrays, strict=True)) if names is not None else tuple(arrays)


def _validated(arrays, what, shape=None, chunks=None):
    """The arrays validated and flattened as :func:`distsort.sort_by_key` does, all of
    one shape and one backend, chunked alike (like the first, or as ``chunks``)."""
    from .api import _validate, as_dask_array
    out, backend = [], None
    for i, given in enumerate(arrays):
        name = f"{what}[{i!r}]"
        a = as_dask_array(given, name)
        if shape is None:
            shape = a.shape
        if not any(np.isnan(d) for d in a.shape + shape) and a.shape != shape:
            raise ValueError(f"keys and values must have the same shape, got {shape} and "
                             f"{a.shape} ({name})")
        flat, _ = _validate(a, None, name)
        module = array_module_name(flat._meta)
        if backend not in (None, module):
            raise TypeError("keys and values must all have NumPy chunks or all CuPy chunks")
        backend = module
        if flat.size == 0:  # dask does not rechunk empty arrays: one empty chunk
            flat = da.from_array(flat._meta, chunks=((0,),), asarray=False)
        chunks = chunks or flat.chunks
        out.append(flat if flat.chunks == chunks else flat.rechunk(chunks))
    return out, shape


def lexsort(keys, *, verify=False, local="auto"):
    """Indices that sort 1-D arrays lexicographically, as int64: ``numpy.lexsort``.

    Parameters
    ----------
    keys : tuple of arrays
        Dask, NumPy or CuPy arrays of one shape (flattened, as with ``axis=None``),
        of the dtypes :func:`distsort.sort` takes.  As in ``numpy.lexsort``, the
        LAST key is the primary one, the one before it the secondary, and so on.
    verify : bool, optional
        Check each sort as :func:`distsort.argsort` does.
    local : {"auto", "bitonic", "radix"}, optional
        How each GPU sorts its chunks, as for :func:`distsort.sort`.

    Returns
    -------
    dask.array.Array
        int64 indices: ``numpy.lexsort(keys)`` element for element (equal keys in
        input order, ``-0.0`` equal to ``+0.0``, NaNs and NaTs last).

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
    from .api import _check_local
    if not isinstance(keys, (tuple, list)) or not keys:
        raise TypeError("lexsort takes a non-empty tuple of key arrays (the last primary)")
    _check_local(local)
    keys, _ = _validated(keys, "keys")
    return _lexsort_perm(keys, verify=verify, local=local)


def sort_table(keys, values, *, descending=False, verify=False, local="auto"):
    """What :func:`distsort.sort_by_key` does for a tuple of keys or a tuple (or dict)
    of value arrays: the sorted keys and the values in the same structure.

    Equal keys keep their input order.  One key: it is sorted with its positions
    (:func:`_argsort`) and the value arrays are gathered together (:func:`gather`).
    Several keys (the last primary, as ``numpy.lexsort``): their permutation
    (:func:`_lexsort_perm`) gathers the keys and the values together.

    >>> import dask.array as da
    >>> k = da.from_array(np.array([2.0, 1.0, 2.0, 0.5]), chunks=2)
    >>> cols = {"a": np.array([1, 2, 3, 4]), "b": np.array([0.1, 0.2, 0.3, 0.4])}
    >>> sk, out = sort_table(k, cols)
    >>> sk.compute().tolist(), out["a"].compute().tolist(), out["b"].compute().tolist()
    ([0.5, 1.0, 2.0, 2.0], [4, 2, 1, 3], [0.4, 0.2, 0.1, 0.3])
    """
    from .api import _check_local, _as_codes, _from_codes
    _check_local(local)
    several = isinstance(keys, tuple)
    names, columns = _as_columns(values) if isinstance(values, (tuple, dict)) else (None,
                                                                                   (values,))
    if several and not keys:
        raise ValueError("sort_by_key needs at least one key array")
    key_list, shape = _validated(keys if several else (keys,), "keys")
    columns, _ = _validated(columns, "values", shape, key_list[0].chunks)
    if several:
        perm = _lexsort_perm(key_list, descending, verify, local)
        moved = gather((*key_list, *columns), perm)
        out_keys, out_values = moved[:len(key_list)], moved[len(key_list):]
    else:
        (key,) = key_list
        sorted_codes, perm = _argsort(_as_codes(key), descending, verify, local,
                                      "sort_by_key")
        out_keys = _from_codes(sorted_codes, key.dtype)
        out_values = gather(columns, perm) if columns else ()
    if not isinstance(values, (tuple, dict)):
        return out_keys, out_values[0]
    return out_keys, _columns_like(names, out_values)
