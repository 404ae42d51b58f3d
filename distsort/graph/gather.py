"""One shuffle of several 1-D Dask arrays by one permutation (``values[perm]`` for many
columns at once): the graph builder and the functions its tasks run.

Used by ``sort_by_key(..., stable=True)`` on NumPy chunks and by the tables of
:mod:`distsort.tables`.
"""
from __future__ import annotations

import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from distsort.core.xp import namespace as _namespace

__all__ = ["gather"]


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


def _take_here(split, *chunks):
    """One output chunk of one column, taken from every input chunk of it in this task
    (:func:`_split_by_source`'s ``split`` of the output's indices)."""
    return _assemble(split, 0, *((chunk[_part(split, i)],) for i, chunk in enumerate(chunks)))


def gather(columns, perm, together=False):
    """``tuple(c[perm] for c in columns)`` for 1-D Dask arrays chunked alike, ``perm``
    a permutation: one shuffle for all the columns.

    Each chunk of ``perm`` is split by the input chunk its entries point into.  Where
    the chunks may be apart (``together`` False, the default), every piece goes to
    that chunk, takes all the columns' elements and comes back: each element and
    index travels once (``2 C D + (k + 1) D`` small tasks for ``C``
    input chunks, ``D`` output chunks and ``k`` columns).  Dask's ``values[perm]``
    sends every chunk of ``perm`` to every chunk of ``values``, once per column.
    Where the caller knows that they are together in one process
    (``distsort.eager.one_place``), nothing travels: each output chunk of a column is
    taken from all the input chunks in one task (``(k + 1) D`` tasks; on one GPU a
    task costs about a millisecond, more than its takes).

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
    token = tokenize([c.name for c in columns], perm, together)
    split, part, take = (f"distsort-gather-{s}-{token}" for s in ("split", "part", "take"))
    outs = [f"distsort-gather-{k}-{token}" for k in range(len(columns))]
    layer = {}
    for j in range(perm.numblocks[0]):
        layer[(split, j)] = (_split_by_source, (perm.name, j), bounds, size)
        if together:
            for out, c in zip(outs, columns, strict=True):
                layer[(out, j)] = (_take_here, (split, j)) + tuple(
                    (c.name, i) for i in range(first.numblocks[0]))
            continue
        for i in range(first.numblocks[0]):
            layer[(part, i, j)] = (_part, (split, j), i)
            layer[(take, i, j)] = (_take_all, (part, i, j)) + tuple((c.name, i) for c in columns)
        pieces = tuple((take, i, j) for i in range(first.numblocks[0]))
        for k, out in enumerate(outs):
            layer[(out, j)] = (_assemble, (split, j), k) + pieces
    graph = HighLevelGraph.from_collections(outs[0], layer, dependencies=[*columns, perm])
    return tuple(da.Array(graph, out, perm.chunks, meta=c._meta)
                 for out, c in zip(outs, columns, strict=True))
