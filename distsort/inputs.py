"""What the public functions accept, checked and converted before anything is planned:
Dask, NumPy and CuPy arrays (plain ones wrapped as one chunk), lists; arrays of the
other byte order; memory-mapped files; datetime keys as their order codes; the checks
of the arguments and their flags.  Labelled and lazy collections are refused with the
conversion to use.

Every backend and ``verify=True`` compare the bit patterns of keys as unsigned
integers of the machine's byte order, so keys and values of the other byte order
(``">f8"`` on a little-endian machine, as a file written elsewhere may hold) are
converted to native order chunk by chunk, lazily, before anything else sees them.

Examples
--------
>>> import numpy as np
>>> x = native_order(as_dask(np.array([3.0, -1.0, 2.0], dtype=">f8")))
>>> x.dtype.isnative, x.compute().tolist()
(True, [3.0, -1.0, 2.0])
"""
from __future__ import annotations

import functools
import math
import os
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import dask.array as da
import numpy as np
from dask.base import is_dask_collection, tokenize

try:  # NumPy >= 2
    from numpy.lib.array_utils import normalize_axis_index
except ImportError:  # pragma: no cover
    from numpy.core.multiarray import normalize_axis_index  # type: ignore[no-redef]

from distsort.backends import array_module_name
from distsort.core.order import TIME_KINDS, check_key_dtype, time_codes, time_from_codes
from distsort.core.xp import namespace
from distsort.eager import plain_runs_here

if TYPE_CHECKING:
    import dask.array as da

#: A public function, whose signature a decorator keeps.
F = TypeVar("F", bound=Callable[..., Any])


def to_native(chunk: np.ndarray) -> np.ndarray:
    """A NumPy array in native byte order, bit for bit (a new array where it was not).

    Swapped bytes, not ``astype``: NumPy converts float16 between byte orders through
    float32, which turns signalling NaNs quiet.

    >>> x = np.array([0x7C01], dtype=">u2").view(">f2")  # a signalling NaN
    >>> to_native(x).view("u2").tolist(), to_native(x).dtype.isnative
    ([31745], True)
    """
    if chunk.dtype.isnative:
        return chunk
    return chunk.byteswap().view(chunk.dtype.newbyteorder("="))


def native_order(x: da.Array) -> da.Array:
    """The Dask array ``x`` with its dtype in native byte order (converted chunk by
    chunk, when computed); ``x`` itself where it already is."""
    if x.dtype.isnative:
        return x
    import dask.array as da
    from dask.base import tokenize
    dtype = x.dtype.newbyteorder("=")
    return da.map_blocks(to_native, x, dtype=dtype, name="distsort-native-" + tokenize(x),
                         meta=np.empty((0,) * x.ndim, dtype))


def to_byte_order(chunk: Any, dtype: Any) -> Any:
    """The native-order ``chunk`` in ``dtype``'s byte order, bit for bit (the inverse of
    :func:`to_native`): what a sort of an input of ``dtype`` returns, as NumPy does.

    >>> to_byte_order(np.array([1.5, -2.0]), ">f8").dtype.str
    '>f8'
    """
    dtype = np.dtype(dtype)
    if dtype.isnative or chunk.dtype == dtype:
        return chunk
    return chunk.byteswap().view(dtype)


def like_byte_order(x: da.Array, dtype: Any) -> da.Array:
    """The Dask array ``x`` (native byte order) in ``dtype``'s byte order, chunk by
    chunk when computed; ``x`` itself where ``dtype`` is native."""
    dtype = np.dtype(dtype)
    if dtype.isnative or x.dtype == dtype:
        return x
    import dask.array as da
    from dask.base import tokenize
    return da.map_blocks(to_byte_order, x, dtype, dtype=dtype,
                         name="distsort-byteorder-" + tokenize(x, dtype.str),
                         meta=np.empty((0,) * x.ndim, dtype))


def _memmap_name(m: np.memmap, filename: str) -> str:
    """A Dask name for the read-only memory map ``m`` from what identifies its data
    (file, modification time, place in the mapping, layout): Dask's own token of a
    memmap hashes every byte of it, reading the whole file before the sort starts."""
    from dask.base import tokenize
    stat = os.stat(filename)
    return "distsort-memmap-" + tokenize(
        filename, stat.st_mtime_ns, stat.st_size, m.__array_interface__["data"][0],
        m.shape, m.strides, m.dtype.str)


def as_dask(x: Any) -> da.Array:
    """A NumPy array (a memory map included) as a Dask array with ``chunks="auto"``.

    A memory map's chunks are read from the file when the sort needs them (no copy
    of the whole file up front); one opened for writing (``mode="r+"``, ``"w+"``,
    ``"c"``), whose data may change without the file's, is named by its data.

    >>> import numpy as np, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "x.npy"); np.save(p, np.arange(5))
    >>> as_dask(np.load(p, mmap_mode="r")).compute()
    array([0, 1, 2, 3, 4])
    """
    import dask.array as da
    if not isinstance(x, np.memmap):
        return da.from_array(x, chunks="auto")
    plain = x.view(np.ndarray)  # the same memory, without the subclass
    name = _memmap_name(x, x.filename) if x.mode == "r" and x.filename else None
    return da.from_array(plain, chunks="auto", name=name or None,
                         meta=np.empty((0,) * x.ndim, x.dtype))


def chunks_in_memory(x: da.Array) -> list[Any] | None:
    """The chunks of the 1-D Dask array ``x`` where its graph holds them as arrays (an
    array persisted on Dask's local schedulers, a wrapped NumPy or CuPy array), in
    order; else None (chunks that tasks make, or futures of a ``distributed`` client).

    >>> import dask.array as da
    >>> x = da.arange(6, chunks=4)
    >>> chunks_in_memory(x) is None, [c.tolist() for c in chunks_in_memory(x.persist())]
    (True, [[0, 1, 2, 3], [4, 5]])
    """
    from dask.highlevelgraph import MaterializedLayer
    layer = getattr(x.__dask_graph__(), "layers", {}).get(x.name)
    if not isinstance(layer, MaterializedLayer):  # another layer would be materialized
        return None
    mapping = layer.mapping
    chunks = [mapping.get((x.name, i)) for i in range(x.numblocks[0])]
    kinds = set(map(type, chunks))
    if all(k.__module__.split(".")[0] in ("numpy", "cupy") and hasattr(k, "shape")
           for k in kinds):
        return chunks
    return None


def chunks_persisted(x: da.Array) -> bool:
    """Whether every chunk of the 1-D Dask array ``x`` is a future of a ``distributed``
    client in its graph (``client.persist(x)``): then its chunks stay on the workers
    while ``x`` lives.

    >>> import dask.array as da
    >>> chunks_persisted(da.arange(6, chunks=4).persist())  # arrays, not futures
    False
    """
    from dask.highlevelgraph import MaterializedLayer
    layer = getattr(x.__dask_graph__(), "layers", {}).get(x.name)
    if not isinstance(layer, MaterializedLayer):
        return False
    chunks = [layer.mapping.get((x.name, i)) for i in range(x.numblocks[0])]
    return all(type(c).__name__ == "Future" and type(c).__module__.startswith("distributed")
               for c in chunks)


def check_flag(name: str, value: Any) -> bool:
    """``value`` as a bool: True, False, or NumPy's bools; TypeError for anything else
    (``descending="yes"`` must not be taken as True).

    >>> check_flag("descending", np.True_)
    True
    >>> check_flag("descending", "yes")
    Traceback (most recent call last):
    ...
    TypeError: descending must be True or False, got 'yes'
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def numpy_keywords(function: F) -> F:
    """Decorate a public function so that NumPy's ``kind=`` and ``order=``, which it
    does not take, get a TypeError that says what to use instead.

    >>> import distsort
    >>> distsort.sort(np.arange(3), kind="stable")
    Traceback (most recent call last):
    ...
    TypeError: distsort.sort() has no kind=: use stable=True or stable=False
    """
    @functools.wraps(function)
    def checked(*args: Any, **kwargs: Any) -> Any:
        if "kind" in kwargs:
            raise TypeError(f"distsort.{function.__name__}() has no kind=: use stable=True "
                            "or stable=False")
        if "order" in kwargs:
            raise TypeError(f"distsort.{function.__name__}() has no order= (structured "
                            "dtypes are not sorted): sort one field, or use sort_by_key")
        return function(*args, **kwargs)
    return cast(F, checked)


#: Libraries whose objects carry labels (an index, coordinates) or are lazy: refused,
#: never converted, so that nothing is computed and no label is silently dropped.
_LABELLED = ("pandas", "xarray", "dask", "dask_expr", "dask_cudf", "cudf", "polars",
             "pyarrow", "modin")


_TABLE_NDIM = 2


def _conversion(x: Any, what: str) -> tuple[str, str | None]:  # noqa: PLR0911
    """``(conversion, labels lost)``: how to make ``x``, a labelled or lazy collection,
    an array distsort sorts, and what that array does not carry."""
    library = type(x).__module__.split(".")[0]
    lazy = library in ("dask", "dask_expr", "dask_cudf") or is_dask_collection(x)
    if lazy and type(x).__module__.startswith("dask.bag"):
        return (f"dask.array.from_delayed on each of "
                f"{what}.map_partitions(numpy.asarray).to_delayed() (its length given), "
                f"or numpy.asarray({what}.compute())"), None
    if lazy and library == "dask" and not hasattr(type(x), "to_dask_array"):
        # a Delayed, a Bag, ...: a Delayed answers every attribute asked of it
        return f"dask.array.from_delayed(...), or {what}.compute()", None
    table = type(x).__name__ == "DataFrame" or getattr(x, "ndim", 1) == _TABLE_NDIM
    if hasattr(x, "data_vars"):  # xarray.Dataset
        return f'{what}["var"].data', "variable names, dimension names and coordinates"
    if library == "xarray":  # DataArray, Variable
        return f"{what}.data", "dimension names and coordinates"
    if lazy and hasattr(x, "to_dask_array"):  # dask DataFrame, Series or Index
        if table:
            return f'{what}["col"].to_dask_array(lengths=True)', "index labels"
        return f"{what}.to_dask_array(lengths=True)", "index labels"
    if lazy:  # a dask Bag, Delayed, ...: no array form without computing it
        return f"dask.array.from_delayed(...), or {what}.compute()", None
    if table:
        return f'{what}["col"].to_numpy()', "index labels"
    if hasattr(x, "to_cupy"):
        return f"{what}.to_cupy()", "index labels"
    return f"{what}.to_numpy()", "index labels"


def _refuse_collection(x: Any, what: str) -> None:
    """TypeError for a DataFrame, Series, xarray object or other lazy collection.

    Such objects are never passed to ``np.asarray``: for a lazy one that computes
    it on the client, and for any of them the labels would be silently lost.
    """
    kind = type(x)
    lazy = is_dask_collection(x)
    if kind.__module__.split(".")[0] not in _LABELLED and not lazy:
        return
    conversion, lost = _conversion(x, what)
    raise TypeError(
        f"distsort sorts arrays, not {kind.__module__}.{kind.__name__}: convert {what} "
        f"with {conversion}" + (f" (its {lost} are not carried)" if lost else "")
        + ("; nothing was computed" if lazy else ""))


def as_dask_array(x: Any, what: str = "x") -> da.Array:
    """``x`` as a Dask array; NumPy and CuPy arrays are wrapped as one chunk
    (:func:`wrap_plain`), which the plan may cut (``distsort.plan.sortplan``).

    DataFrames, Series, xarray objects and other lazy collections are refused with
    the conversion to use; lists and tuples of numbers are converted.
    """
    if isinstance(x, da.Array):
        array_module_name(x._meta)
        return native_order(x)
    if type(x).__module__.split(".")[0] == "cupy":
        array_module_name(x)
        return wrap_plain(x)
    _refuse_collection(x, what)
    if isinstance(x, np.ndarray) and not isinstance(x, np.memmap):
        array_module_name(x)  # refuses subclasses (masked arrays, matrices) at once
    elif not isinstance(x, np.ndarray):
        x = np.asarray(x)
    check_key_dtype(x.dtype, what)
    # A memory map is cut as it is read (distsort.inputs.as_dask); an array in
    # memory is wrapped whole, unhashed.
    return native_order(as_dask(x) if isinstance(x, np.memmap) else wrap_plain(x))


def wrap_plain(x: Any) -> da.Array:
    """A NumPy or CuPy array as a Dask array of one chunk, without hashing or copying
    its data (``dask.array.from_array`` does both: seconds per GiB, see
    ``docs/performance.md``).

    The name is unique to the call (a random UUID), so two wraps never share keys;
    the array is read, never written, when the result is computed.

    >>> w = wrap_plain(np.arange(5))
    >>> w.chunks, w.name.startswith("array-"), w.name == wrap_plain(np.arange(5)).name
    (((5,),), True, False)
    """
    name = "array-" + uuid.uuid4().hex
    return da.Array({(name,) + (0,) * x.ndim: x}, name, tuple((s,) for s in x.shape),
                    meta=x[(slice(0, 0),) * x.ndim], dtype=x.dtype)


def as_codes(x: da.Array, descending: bool = False) -> da.Array:
    """datetime64/timedelta64 ``x`` as its uint64 order codes, lazily and elementwise
    (NaT last for both orders: ``distsort.core.order.time_codes``, whose ``descending``
    codes sort ascending into the descending order); other arrays as they are."""
    if x.dtype.kind not in TIME_KINDS:
        return x
    meta = namespace(x._meta, strict=True).empty((0,) * x.ndim, dtype=np.uint64)
    return da.map_blocks(time_codes, x, descending, dtype=np.uint64, meta=meta,
                         name="distsort-timecodes-" + tokenize(x, descending))


def from_codes(codes: da.Array, dtype: Any, descending: bool = False) -> da.Array:
    """The inverse of :func:`as_codes` for an array of ``dtype``."""
    if np.dtype(dtype).kind not in TIME_KINDS:
        return codes
    meta = namespace(codes._meta, strict=True).empty((0,) * codes.ndim, dtype=dtype)
    return da.map_blocks(time_from_codes, codes, dtype, descending, dtype=dtype, meta=meta,
                         name="distsort-fromtimecodes-" + tokenize(codes, dtype, descending))


def code_order(dtype: Any, order: Any) -> Any:
    """The order in which the codes of keys of ``dtype`` (:func:`as_codes`) sort: the
    descending order of times is in their codes (NaT last), so they sort ascending."""
    if np.dtype(dtype).kind in TIME_KINDS and order.descending:
        return type(order)(descending=False, keyed=order.keyed)
    return order


def check_known_chunks(x: da.Array, what: str) -> None:
    """ValueError where ``x``'s chunk sizes are not known."""
    if any(math.isnan(s) for s in x.shape):  # a sum of the chunks: NaN where one is
        raise ValueError(
            f"{what} has unknown chunk sizes; call {what}.compute_chunk_sizes() "
            "(or persist it) before sorting")


def validate(x: Any, axis: int | None, what: str = "x") -> tuple[da.Array, int]:
    """Validate ``x`` and ``axis``; returns ``(x, axis)`` with ``x`` flattened for ``axis=None``."""
    x = as_dask_array(x, what)
    check_key_dtype(x.dtype, what)
    check_known_chunks(x, what)
    if x.size == 0 and x.ndim != 1:  # Dask does not reshape or rechunk these: one chunk
        x = wrap_plain(namespace(x._meta, strict=True).empty(
            x.shape if axis is not None else (0,), dtype=x.dtype))
    if axis is None:
        return x.reshape(-1) if x.ndim != 1 else x, 0
    axis = normalize_axis_index(axis, x.ndim)
    if x.ndim > 1 and x.numblocks[axis] > 1:
        raise ValueError(
            f"axis {axis} is split over {x.numblocks[axis]} chunks; distsort sorts an N-D "
            f"array along an axis held in one chunk: rechunk it with "
            f"x.rechunk({{{axis}: -1}}), or sort the flattened array with axis=None")
    return x, axis


def check_stable(stable: bool | None, default: bool) -> bool:
    """``stable`` as a bool; None (NumPy's "not given") means ``default``."""
    if stable is None:
        return default
    if not isinstance(stable, (bool, np.bool_)):  # a typo'd kind string must not pass
        raise TypeError(f"stable must be True, False or None, got {stable!r}")
    return bool(stable)


def check_flags(descending: Any, verify: Any) -> None:
    """TypeError unless ``descending`` and ``verify`` are bools (not ``"yes"``)."""
    check_flag("descending", descending)
    check_flag("verify", verify)


def plain_here(*arrays: Any) -> bool:
    """Whether ``arrays`` are plain 1-D NumPy (or all CuPy) arrays of native byte order
    and no datetime dtype, sorted in this process (``eager.plain_runs_here``): what
    ``distsort.sort1d.sorted_at_once`` and ``distsort.sort1d.stable_at_once`` sort with
    no graph."""
    kinds = {type(a) for a in arrays}
    if len(kinds) != 1:
        return False
    (kind,) = kinds
    if not (kind is np.ndarray or kind.__module__ == "cupy" and kind.__name__ == "ndarray"):
        return False
    return (all(a.ndim == 1 and a.dtype.isnative and a.dtype.kind not in TIME_KINDS
                for a in arrays) and plain_runs_here())
