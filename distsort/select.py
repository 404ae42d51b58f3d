"""Exact quantiles, top k, unique values and searches of arrays too large for one device.

Dask answers these approximately (``dask.array.percentile`` merges per-chunk
percentiles) or in one chunk (``dask.array.unique``, ``dask.array.topk`` for a large
k).  distsort answers them exactly and keeps the work spread:

* :func:`quantile`, :func:`percentile`, :func:`median` (and their ``nan`` forms) sort
  no chunk: a random sample of every chunk brackets each rank they need between two
  sample codes, one pass over every chunk counts the elements below each bracket and
  keeps the few inside it, and only those are sorted (a second pass finds a rank the
  sample missed).  No merge, no exchange; equal to NumPy's for every ``method``.
  ``assume_sorted``: co-rank search across the sorted chunks instead.
* :func:`topk` and :func:`argtopk` bracket the k-th largest (or smallest) the same
  way, keep what lies above the bracket in one pass per chunk, and sort only that.
* :func:`unique` flags the first of every run of equal elements of
  :func:`distsort.sort`'s output, chunk by chunk: the output keeps the sort's
  chunks (their lengths are known once computed).
* :func:`searchsorted` searches every chunk of a sorted array and adds the counts:
  the sorted array is never gathered.

Dask arrays in give lazy Dask arrays out; NumPy or CuPy arrays in give arrays (or
scalars, as NumPy does) out, computed at once.  See ``docs/select.md``.

>>> import dask.array as da, numpy as np, distsort
>>> x = da.from_array(np.array([4.0, 1.0, 3.0, 2.0, 5.0, 0.0]), chunks=4)
>>> distsort.median(x).compute()
array(2.5)
>>> distsort.topk(x, 2).compute()
array([5., 4.])
"""
from __future__ import annotations

import itertools
import math
import operator
import warnings
from functools import reduce

import dask.array as da
import numpy as np
from dask.base import tokenize

from distsort.backends import array_module_name
from distsort.backends.cpu import select as tasks
from distsort.core.order import check_key_dtype
from distsort.eager import compute_now, is_plain
from distsort.graph import select as layers

__all__ = ["quantile", "percentile", "median", "nanquantile", "nanpercentile", "nanmedian",
           "topk", "argtopk", "unique", "searchsorted"]


def _as_dask(x, what="x"):
    """``x`` as a Dask array with known chunks (plain arrays as one chunk)."""
    from distsort.api import as_dask_array
    x = as_dask_array(x, what)
    check_key_dtype(x.dtype, what)
    if any(math.isnan(s) for s in x.shape):
        raise ValueError(f"{what} has unknown chunk sizes; call {what}.compute_chunk_sizes() "
                         "(or persist it) first")
    return x


def _blocks(x):
    """The keys of ``x``'s chunks in C order and their numbers of elements."""
    index = list(itertools.product(*(range(n) for n in x.numblocks)))
    sizes = [reduce(operator.mul, (c[i] for c, i in zip(x.chunks, idx, strict=True)), 1)
             for idx in index]
    return [(x.name, *idx) for idx in index], sizes


def _meta(x, shape_ndim, dtype):
    module = array_module_name(x._meta)
    if module == "cupy":
        import cupy
        return cupy.empty((0,) * shape_ndim, dtype)
    return np.empty((0,) * shape_ndim, dtype)


def _array(g, key, x, shape, dtype, *collections):
    """A Dask array of one chunk of ``shape`` whose value the task ``key`` gives."""
    name = f"distsort-select-out-{g.token}"
    g.layers[name] = {(name, *(0,) * len(shape)): key}
    return da.Array(g.graph(x, *collections), name, tuple((s,) for s in shape),
                    meta=_meta(x, len(shape), dtype))


def _done(result, plain):
    """``result`` computed where the input was plain (a 0-d NumPy result as a scalar)."""
    if not plain:
        return result
    out = compute_now(result)
    if isinstance(out, np.ndarray) and out.ndim == 0:
        return out[()]
    return out


# -- quantiles

#: NumPy takes scalar, 1-D and 2-D ``q``.
_Q_MAX_DIMS = 2

def _check_axis(x, axis):
    if axis is None or (x.ndim == 1 and axis in (0, -1)):
        return
    raise NotImplementedError("distsort's quantiles are of the whole array (axis=None); "
                              f"got axis={axis!r} for an array of {x.ndim} dimensions")


def _quantiles(x, q, method, axis, keepdims, *, skip_nan, median, what, scale=1,  # noqa: PLR0913
               assume_sorted=False):
    plain = is_plain(x)
    weak_q = type(q) in (int, float)
    q = np.asanyarray(np.true_divide(q, scale) if scale != 1 else q)
    if q.ndim > _Q_MAX_DIMS:
        raise ValueError("q must be a scalar or 1d")
    if not median and not (q.size == 0 or (q.min() >= 0 and q.max() <= 1)):
        raise ValueError(f"{what} must be in the range [0, {scale}]")
    x = _as_dask(x)
    _check_axis(x, axis)
    keys, sizes = _blocks(x)
    if sum(sizes) == 0 and not median:
        if not skip_nan:
            raise IndexError("index -1 is out of bounds for axis 0 with size 0")
        with warnings.catch_warnings():  # NumPy's answer: the mean of nothing
            warnings.simplefilter("ignore", RuntimeWarning)
            return _constant(np.nanmean(np.empty(0, x.dtype)), x, plain)
    if not median:
        tasks.quantile_ranks(2, q, method, x.dtype)  # an unknown method: ValueError now
    dtype = _numpy_dtype(x.dtype, q, method, weak_q, skip_nan, median)
    g = layers.Layers(tokenize(x.name, q, method, skip_nan, median, weak_q, assume_sorted))
    key = layers.quantile_layers(g, keys, sizes, q, method, x.dtype, weak_q=weak_q,
                                 module=array_module_name(x._meta), skip_nan=skip_nan,
                                 median=median, presorted=bool(assume_sorted))
    shape = () if median else q.shape
    out = _array(g, key, x, shape, dtype)
    if keepdims:
        out = out.reshape(shape + (1,) * x.ndim)
    return _done(out, plain)


def _numpy_dtype(dtype, q, method, weak_q, skip_nan, median):  # noqa: PLR0913, PLR0917
    """The dtype of NumPy's answer, from two elements of ``dtype``: NumPy's error
    where it refuses the dtype (bool with interpolation, datetimes in the nan forms)."""
    two = np.array([0, 1]).astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if median:
            return np.asarray((np.nanmedian if skip_nan else np.median)(two)).dtype
        fn = np.nanquantile if skip_nan else np.quantile
        return np.asarray(fn(two, float(q) if weak_q else q, method=method)).dtype


def _constant(value, x, plain):
    if plain:
        return value
    value = np.asarray(value)
    if array_module_name(x._meta) == "cupy":
        import cupy
        value = cupy.asarray(value)
    return da.from_array(value, chunks=())


def quantile(x, q, axis=None, method="linear", keepdims=False, *, assume_sorted=False):
    """The ``q``-th quantiles of all elements of ``x``, exactly as ``numpy.quantile``.

    No chunk is sorted: random samples bracket the ranks that the quantiles read,
    one pass over every chunk counts the elements below each bracket and keeps those
    inside it, and only those are sorted (``docs/select.md``); nothing is merged or
    exchanged.  Exact whatever the sample: a rank it missed is found by a second pass.

    Parameters
    ----------
    x : dask.array.Array, numpy.ndarray or cupy.ndarray
        Any numeric dtype, datetime64 or timedelta64 (as NumPy allows each
        ``method``).  Its chunk sizes must be known.
    q : float or array of floats
        Quantiles in [0, 1] (a scalar, 1-D or 2-D).
    axis : None
        The whole array (also 0 or -1 for a 1-D one); other axes raise
        NotImplementedError.
    method : str
        Any of ``numpy.quantile``'s: ``"linear"`` (default), ``"lower"``,
        ``"higher"``, ``"midpoint"``, ``"nearest"``, ``"inverted_cdf"``,
        ``"averaged_inverted_cdf"``, ``"closest_observation"``,
        ``"interpolated_inverted_cdf"``, ``"hazen"``, ``"weibull"``,
        ``"median_unbiased"``, ``"normal_unbiased"``.
    keepdims : bool
        As NumPy's.
    assume_sorted : bool
        ``x``'s chunks, read in order, are sorted already (a :func:`distsort.sort`
        output, or any array whose chunks are each sorted in NumPy's order): the
        ranks are read from them, with no sort.

    Returns
    -------
    dask.array.Array of ``q``'s shape (one chunk) for a Dask array; for a NumPy or
    CuPy array what ``numpy.quantile`` returns (a scalar for a scalar ``q``).  A NaN
    (or NaT) anywhere makes every quantile NaN, as in NumPy.

    Examples
    --------
    >>> import dask.array as da, numpy as np, distsort
    >>> x = da.from_array(np.arange(10.0), chunks=3)
    >>> distsort.quantile(x, [0.25, 0.9]).compute()
    array([2.25, 8.1 ])
    >>> float(distsort.quantile(np.arange(10.0), 0.5, method="lower"))
    4.0
    """
    return _quantiles(x, q, method, axis, keepdims, skip_nan=False, median=False,
                      what="Quantiles",
                      assume_sorted=assume_sorted)


def percentile(x, q, axis=None, method="linear", keepdims=False, *, assume_sorted=False):
    """The ``q``-th percentiles (``q`` in [0, 100]) of all elements of ``x``, exactly
    as ``numpy.percentile``: :func:`quantile` of ``q / 100``.

    >>> import dask.array as da, numpy as np, distsort
    >>> distsort.percentile(da.arange(101, chunks=10), [50, 99]).compute()
    array([50., 99.])
    """
    return _quantiles(x, q, method, axis, keepdims, skip_nan=False, median=False,
                      what="Percentiles", scale=100,
                      assume_sorted=assume_sorted)


def median(x, axis=None, keepdims=False, *, assume_sorted=False):
    """The median of all elements of ``x``, exactly as ``numpy.median`` (the mean of
    the middle two for an even count).

    >>> import numpy as np, distsort
    >>> float(distsort.median(np.array([3, 1, 2, 10])))
    2.5
    """
    return _quantiles(x, 0.5, "linear", axis, keepdims, skip_nan=False, median=True,
                      what="Quantiles",
                      assume_sorted=assume_sorted)


def nanquantile(x, q, axis=None, method="linear", keepdims=False, *, assume_sorted=False):
    """:func:`quantile` of the elements that are not NaN (or NaT), as
    ``numpy.nanquantile``: NaN where all are.

    >>> import numpy as np, distsort
    >>> float(distsort.nanquantile(np.array([1.0, np.nan, 3.0]), 0.5))
    2.0
    """
    return _quantiles(x, q, method, axis, keepdims, skip_nan=True, median=False,
                      what="Quantiles",
                      assume_sorted=assume_sorted)


def nanpercentile(x, q, axis=None, method="linear", keepdims=False, *, assume_sorted=False):
    """:func:`percentile` of the elements that are not NaN, as ``numpy.nanpercentile``."""
    return _quantiles(x, q, method, axis, keepdims, skip_nan=True, median=False,
                      what="Percentiles", scale=100,
                      assume_sorted=assume_sorted)


def nanmedian(x, axis=None, keepdims=False, *, assume_sorted=False):
    """:func:`median` of the elements that are not NaN, as ``numpy.nanmedian``."""
    return _quantiles(x, 0.5, "linear", axis, keepdims, skip_nan=True, median=True,
                      what="Quantiles",
                      assume_sorted=assume_sorted)


# -- top k

def _topk(a, k, axis, positions):
    plain = is_plain(a)
    a = _as_dask(a, "a")
    if a.ndim != 1 or axis not in (0, -1):
        raise NotImplementedError("distsort's topk takes 1-D arrays (axis=-1)")
    k = operator.index(k)
    keys, sizes = _blocks(a)
    count = min(abs(k), sum(sizes))
    g = layers.Layers(tokenize(a.name, k, positions))
    dtype = np.dtype(np.int64) if positions else a.dtype
    key = layers.topk_layers(g, keys, sizes, k, a.dtype, positions=positions,
                             module=array_module_name(a._meta))
    return _done(_array(g, key, a, (count,), dtype), plain)


def topk(a, k, axis=-1, split_every=None):
    """The ``k`` largest elements of ``a``, largest first; ``k < 0``: the ``|k|``
    smallest, smallest first (``dask.array.topk``'s signature and conventions).

    Any ``k``, larger than a chunk too: random samples bracket the k-th largest from
    below, one pass over every chunk keeps the elements above the bracket (about
    ``|k|`` in all), and only those are sorted (one chunk of ``|k|``, as Dask's).  NaN counts as
    the largest (NumPy's order).  ``split_every`` is accepted and unused.

    >>> import dask.array as da, numpy as np, distsort
    >>> x = da.from_array(np.array([3, 1, 2, 5, 5, 4]), chunks=2)
    >>> distsort.topk(x, 3).compute(), distsort.topk(x, -2).compute()
    (array([5, 5, 4]), array([1, 2]))
    """
    return _topk(a, k, axis, positions=False)


def argtopk(a, k, axis=-1, split_every=None):
    """Positions (int64) of :func:`topk`'s elements, in its order.  Equal elements:
    for ``k > 0`` in the order of ``numpy.argsort(a, kind="stable")[::-1]`` (the later
    first), for ``k < 0`` of ``numpy.argsort(a, kind="stable")`` (the earlier first).

    >>> import dask.array as da, numpy as np, distsort
    >>> x = da.from_array(np.array([3, 1, 2, 5, 5, 4]), chunks=2)
    >>> distsort.argtopk(x, 3).compute()
    array([4, 3, 5])
    """
    return _topk(a, k, axis, positions=True)


# -- unique values

def _positions(block, block_info=None):
    from distsort.core.xp import namespace
    start = block_info[0]["array-location"][0][0]
    return namespace(block).arange(start, start + block.size, dtype=np.int64)


def _codes(block):
    return tasks.codes_of(block, canonical=True)


def unique(x, return_index=False, return_inverse=False, return_counts=False):
    """The sorted unique elements of ``x``, as ``numpy.unique`` (``equal_nan``: one
    NaN), and optionally the first position of each, the inverse and the counts.

    Built on :func:`distsort.sort` (on :func:`distsort.sort_by_key` of the elements'
    order codes and their positions where positions are asked for): every chunk of the
    sorted array flags the first of each run of equal elements, so the output keeps
    the sort's chunking instead of one chunk.  For a Dask array the outputs' chunk
    lengths are unknown (NaN) until computed (``compute_chunk_sizes()``); the
    inverse has ``x``'s shape and known chunks.  ``-0.0`` and ``+0.0`` are one value,
    as in NumPy (which of the two comes back may differ from NumPy's).

    >>> import dask.array as da, numpy as np, distsort
    >>> x = da.from_array(np.array([3, 1, 3, 2, 1, 3]), chunks=4)
    >>> values, counts = distsort.unique(x, return_counts=True)
    >>> values.compute(), counts.compute()
    (array([1, 2, 3]), array([2, 1, 3]))
    """
    from distsort.api import sort
    from distsort.tables import sort_by_key
    plain = is_plain(x)
    x = _as_dask(x)
    shape = x.shape
    x = x.ravel() if x.ndim != 1 else x
    token = tokenize(x.name, return_index, return_inverse, return_counts)
    meta_ints = _meta(x, 1, np.int64)
    positioned = return_index or return_inverse
    if positioned:
        pos = x.map_blocks(_positions, dtype=np.int64, meta=meta_ints)
        codes = x.map_blocks(_codes, dtype=tasks.code_dtype(x.dtype),
                             meta=_meta(x, 1, tasks.code_dtype(x.dtype)))
        _, (pos_sorted, x_sorted) = sort_by_key(codes, (pos, x))
    else:
        x_sorted, pos_sorted = sort(x), None
    g = layers.Layers(token)
    keys = [(x_sorted.name, i) for i in range(x_sorted.numblocks[0])]
    offsets = (0, *itertools.accumulate(x_sorted.chunks[0]))
    flags, summary = layers.unique_layers(g, keys, offsets)
    unknown = ((math.nan,) * len(keys),)
    collections = [x_sorted] + ([pos_sorted] if positioned else [])
    outputs = [("values", lambda i, k: (_take, k, flags[i]), x.dtype, unknown)]
    if return_index:
        outputs.append(("index", lambda i, k: (_take, (pos_sorted.name, i), flags[i]),
                        np.int64, unknown))
    if return_inverse:
        outputs.append(("groups", lambda i, k: (tasks.group_ids, flags[i], x_sorted.chunks[0][i],
                                                summary, i), np.int64, x_sorted.chunks))
    if return_counts:
        outputs.append(("counts", lambda i, k: (tasks.unique_counts, flags[i], offsets[i],
                                                summary, i), np.int64, unknown))
    made = {}
    for kind, task, dtype, chunks in outputs:
        name = g.add(kind, {i: task(i, k) for i, k in enumerate(keys)})[0][0]
        made[kind] = (name, dtype, chunks)
    graph = g.graph(*collections)
    arrays = {kind: da.Array(graph, name, chunks, meta=_meta(x, 1, dtype))
              for kind, (name, dtype, chunks) in made.items()}
    result = [arrays["values"]]
    if return_index:
        result.append(arrays["index"])
    if return_inverse:
        _, inverse = sort_by_key(pos_sorted, arrays["groups"])
        result.append(inverse.reshape(shape) if len(shape) != 1 else inverse)
    if return_counts:
        result.append(arrays["counts"])
    if len(result) == 1:
        return _done(result[0], plain)
    return _done(tuple(result), plain)


def _take(chunk, where):
    return chunk[where]


# -- searches

def searchsorted(a, v, side="left", sorter=None):
    """Where the values ``v`` would be inserted in the sorted 1-D array ``a`` to keep
    it sorted, as ``numpy.searchsorted`` (NaN and NaT sort last; ``v`` and ``a`` are
    compared in their common dtype).

    ``a``: a distsort output, or any Dask array whose chunks, read in order, are sorted.
    It is never gathered: ``v`` goes to every chunk of ``a``, which counts its elements
    before each value, and the counts are added (int64, ``v``'s shape and chunks).

    >>> import dask.array as da, numpy as np, distsort
    >>> a = distsort.sort(da.from_array(np.array([5, 1, 4, 2, 3]), chunks=2))
    >>> distsort.searchsorted(a, np.array([0, 3, 9]), side="right").compute()
    array([0, 3, 5])
    """
    if sorter is not None:
        raise NotImplementedError("distsort.searchsorted takes a sorted array; sorter is "
                                  "not supported")
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right' (got {side!r})")
    plain = is_plain(a) and is_plain(v)
    scalar = np.ndim(v) == 0 and not isinstance(v, da.Array)
    a = _as_dask(a, "a")
    if a.ndim != 1:
        raise ValueError("a must be 1-D")
    v = _as_dask(v if not scalar else np.asarray([v]) if not hasattr(v, "reshape")
                 else v.reshape(1), "v")
    g = layers.Layers(tokenize(a.name, v.name, side))
    sorted_keys = [(a.name, i) for i in range(a.numblocks[0])]
    v_index = list(itertools.product(*(range(n) for n in v.numblocks)))
    names = layers.searchsorted_layers(g, sorted_keys, [(v.name, *i) for i in v_index],
                                       v_index, side)
    out = da.Array(g.graph(a, v), names[0][0], v.chunks, meta=_meta(v, v.ndim, np.int64))
    if scalar:
        out = out.reshape(())
    return _done(out, plain)
