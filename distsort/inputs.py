"""What the public functions accept besides plain arrays in native byte order: arrays
of the other byte order, memory-mapped files, and the checks of their flags.

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
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np

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
