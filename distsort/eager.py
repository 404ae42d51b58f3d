"""Plain arrays in, plain arrays out: the public calls follow NumPy and CuPy.

``numpy.sort`` of an ndarray returns an ndarray and ``cupy.sort`` a CuPy array; so
do :func:`distsort.sort`, :func:`distsort.argsort`, :func:`distsort.sort_by_key` and
:func:`distsort.lexsort` when none of their array arguments is a Dask collection (or
a ``numpy.memmap``, which is read in chunks as a file is): they compute the sort at
once and return arrays of the input's kind.  With any Dask array among the inputs
they return lazy Dask arrays, as Dask's own functions do.

The sort is planned the same way either way (``distsort.plan.sortplan``).  Where no
``distributed`` client is the scheduler, or inside a worker's task (whose arrays are
here: its client would send them to the scheduler in the graph): a plain 1-D array
that the plan sorts as one chunk is sorted by the function of that one task, called at
once (``distsort.api._sorted_at_once``, no graph built); other plans whose outputs are one
chunk each, in a graph of a few tasks, run here, in order, through ``dask.core.get``.
A call of Dask's scheduler costs about 3 ms, five times ``cupy.sort`` of 2^24 float32 on
an H200.  Other graphs (many chunks sorted in place, a cluster) run on the scheduler in
effect, and each output's chunks are joined into one array.
"""
from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import dask
import dask.array as da
import dask.core
import numpy as np
from dask.base import get_scheduler, is_dask_collection

#: A public function, whose signature a decorator keeps.
F = TypeVar("F", bound=Callable[..., Any])

SMALL_GRAPH = 16  # tasks: one-device plans take 1 to 8; a network of chunks takes more


def _leaves(structure: Any) -> list[Any]:
    """The arrays of an argument or a result: itself, or the items of a tuple, list or
    dict (sort_by_key's tables)."""
    if isinstance(structure, dict):
        return list(structure.values())
    if isinstance(structure, (tuple, list)):
        return list(structure)
    return [structure]


def is_plain(argument: Any) -> bool:
    """Whether an argument holds no Dask collection and no memory map.

    >>> import dask.array as da
    >>> is_plain(np.arange(3)), is_plain({"a": np.arange(3)}), is_plain([1, 2])
    (True, True, True)
    >>> is_plain(da.arange(3)), is_plain((np.arange(3), da.arange(3)))
    (False, False)
    """
    return not any(is_dask_collection(a) or isinstance(a, np.memmap)
                   for a in _leaves(argument))


def runs_here(arrays: Sequence[Any] | None = None) -> bool:
    """Whether Dask's local schedulers, not a ``distributed`` client, would compute
    ``arrays`` (or any collection): their work may then run in this process.

    >>> runs_here()
    True
    """
    if (arrays is None and "distributed" not in sys.modules
            and dask.config.get("scheduler", None) is None
            and dask.config.get("get", None) is None):
        return True  # no client exists before distributed is imported: skip its import
    scheduler = get_scheduler(collections=arrays)
    return scheduler is None or (getattr(scheduler, "__module__", "") or "").startswith("dask.")


def in_task() -> bool:
    """Whether this thread runs a task of a ``distributed`` worker.

    >>> in_task()
    False
    """
    if "distributed" not in sys.modules:
        return False
    from distributed import get_worker
    try:
        get_worker()
    except ValueError:
        return False
    return True


def plain_runs_here() -> bool:
    """Whether a sort of plain arrays runs in this process: where no ``distributed``
    client is the scheduler, and in a worker's task, whose arrays are here (its
    client would send them to the scheduler inside the graph, as a 256 MiB graph
    of a 2^26 sort did: a second for what takes 40 ms here)."""
    return in_task() or runs_here()


def _runs_here(arrays: Sequence[da.Array]) -> bool:
    """Whether ``arrays`` (of plain inputs) are computed in this thread, without Dask's
    scheduler: one chunk each, a few tasks, and plain arrays sorted in this process
    (:func:`plain_runs_here`)."""
    if not plain_runs_here():
        return False
    if any(a.npartitions != 1 for a in arrays):
        return False
    return sum(len(a.__dask_graph__()) for a in arrays) <= SMALL_GRAPH


def _compute(arrays: Sequence[da.Array]) -> list[Any]:
    """The NumPy or CuPy arrays of ``arrays`` (Dask arrays), computed together."""
    if not arrays:
        return []
    if _runs_here(arrays):
        graph: dict = {}
        for a in arrays:
            graph.update(a.__dask_graph__())
        chunks = dask.core.get(graph, [a.__dask_keys__() for a in arrays])
        return [_one_chunk(c) for c in chunks]
    if in_task():  # Dask's threads here, not the worker's client (plain_runs_here)
        return list(dask.compute(*arrays, scheduler="threads"))
    return list(dask.compute(*arrays))


def _one_chunk(nested: Any) -> Any:
    while isinstance(nested, (list, tuple)):  # nested once per dimension, as keys are
        (nested,) = nested
    return nested


def compute_now(result: Any) -> Any:
    """``result`` (a Dask array, or a tuple of arrays, tuples and dicts of them) with
    every Dask array computed, in one pass, and the structure kept."""
    parts = result if isinstance(result, tuple) else (result,)
    arrays = [a for p in parts for a in _leaves(p) if isinstance(a, da.Array)]
    done = dict(zip(map(id, arrays), _compute(arrays), strict=True))

    def swap(part: Any) -> Any:
        if isinstance(part, dict):
            return {k: done.get(id(v), v) for k, v in part.items()}
        if isinstance(part, tuple):
            return tuple(done.get(id(v), v) for v in part)
        return done.get(id(part), part)

    return tuple(map(swap, parts)) if isinstance(result, tuple) else swap(result)


def like_input(*names: str) -> Callable[[F], F]:
    """Decorate a public sort whose array arguments are ``names``: where all are plain
    (:func:`is_plain`), its lazy result is computed at once (:func:`compute_now`)."""
    def decorate(function: F) -> F:
        where = [(list(inspect.signature(function).parameters).index(n), n) for n in names]

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            result = function(*args, **kwargs)  # validates the arguments first
            if type(result) is not tuple and not isinstance(result, da.Array):
                return result  # computed already (distsort.api._sorted_at_once)
            given = [args[i] if i < len(args) else kwargs.get(n) for i, n in where]
            return compute_now(result) if all(map(is_plain, given)) else result
        return cast(F, call)
    return decorate


def one_place(arrays: Sequence[da.Array]) -> bool:
    """Whether all chunks of ``arrays`` are computed in one process: Dask's local
    schedulers, or a ``distributed`` cluster of one worker (one query of the
    scheduler, ``locality.worker_hosts``; no answer counts as several workers).

    >>> import dask.array as da
    >>> one_place([da.arange(4, chunks=2)])
    True
    """
    if runs_here(arrays):
        return True
    from distsort.cluster.locality import worker_hosts
    hosts = worker_hosts()
    return hosts is not None and len(hosts) == 1 and hosts[0] is not None
