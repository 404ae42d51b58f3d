"""The one-host k-way sort (``distsort.plan.onehost``): its layers for a Dask array,
and the same tasks run at once by threads for a plain array.

One task per run gathers its slices of the input chunks (``SortPlan.pieces``) and
sorts them (``ThreadRuns``: ``numpy.sort``, all cores at once); one task finds the
co-ranks of every output chunk's ends across the runs
(``distsort.graph.outofcore.kway_cuts``); one task per output chunk merges its
slice of every run (``merge_chunk``), and is the output array's own task.  Builders
take names and chunks and touch no data.

>>> from distsort.backends import Order
>>> from distsort.backends.cpu.runs import ThreadRuns
>>> from distsort.graph.layers import SortGraph
>>> g = SortGraph("abc")
>>> plan_pieces = (((0, 0, 4),), ((0, 4, 6), (1, 0, 2)))
>>> kway_sort_layers(g, ("x", None), plan_pieces, (4, 4), ThreadRuns(), Order(), "out-abc")
[('out-abc', 0), ('out-abc', 1)]
>>> g.layers["distsort-run-abc"][("distsort-run-abc", 1)][4]
[('x', 0), ('x', 1)]
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from distsort.graph.layers import chunk_reads, input_names
from distsort.graph.outofcore import kway_cuts, kway_layers

__all__ = ["kway_sort_layers", "run_task", "sort_now"]


def run_task(backend, order, bounds, chunks, values=None, firsts=None):  # noqa: PLR0913, PLR0917
    """A run from its slices ``bounds`` of the input ``chunks`` (and of ``values``, or
    positions from ``firsts``, each slice's first index; the chunks, or ``Inline``
    chunks read in place)."""
    from distsort.backends.cpu.runs import sort_run
    chunks, values = (getattr(c, "chunks", c) for c in (chunks, values))
    return sort_run(order, bounds, chunks, values, firsts)


def _rows(pieces):
    """``(chunk indices, (start, stop) rows)`` of one run's pieces."""
    rows = np.array(pieces, dtype=np.int64).reshape(-1, 3)
    return rows[:, 0].tolist(), rows[:, 1:].tolist()


def kway_sort_layers(graph, sources, pieces, chunks, backend, order, name, offsets=None):  # noqa: PLR0913, PLR0917
    """The runs (one task each, from ``pieces``: for each run, its slices ``(chunk,
    start, stop)`` of the inputs read as ``sources``, the keys' and the values' or
    None, each a name or chunks read in place), the co-ranks and the merges into
    output chunks of ``chunks``, the last layer named ``name`` (the output array's
    where keys alone; None: its own); returns its keys.  ``offsets``: each input
    chunk's first index, where the values are the positions."""
    keys_source, values_source = sources
    run_name = "distsort-run-" + graph.token
    tasks = {}
    for r, mine in enumerate(pieces):
        read, bounds = _rows(mine)
        firsts = (None if offsets is None
                  else [offsets[i] + a for i, (a, _) in zip(read, bounds, strict=True)])
        values = None if values_source is None else chunk_reads(values_source, read)
        tasks[(run_name, r)] = (run_task, backend, order, bounds, chunk_reads(keys_source, read),
                                values, firsts)
    graph.layers[run_name] = tasks
    graph.dependencies[run_name] = input_names(keys_source, values_source)
    return kway_layers(graph, list(tasks), chunks, backend, order, False, name)


def sort_now(x, plan, order, backend, threads=None):
    """``x`` (a plain 1-D NumPy array) sorted by ``plan`` (a ``"kway"`` plan of one
    chunk) at once, on ``threads`` threads (the plan's ``window``: one per core): the
    runs sorted at once, the co-ranks found, each output chunk's slices merged into
    its place in one new array.

    >>> from distsort.backends import Order
    >>> from distsort.backends.cpu.runs import ThreadRuns
    >>> from distsort.plan.sortplan import SortPlan
    >>> plan = SortPlan("kway", (3, 3), (((0, 0, 3),), ((0, 3, 6),)), None, 1, 2)
    >>> sort_now(np.array([5, 1, 4, 0, 3, 2]), plan, Order(), ThreadRuns()).tolist()
    [0, 1, 2, 3, 4, 5]
    """
    threads = threads or plan.window
    out = np.empty(x.shape[0], x.dtype)
    with ThreadPoolExecutor(max(1, threads)) as pool:
        runs = list(pool.map(lambda mine: run_task(backend, order, _rows(mine)[1],
                                                   [x] * len(mine)), plan.pieces))
        cuts = kway_cuts(backend, plan.chunks, order, False, runs)
        ends = np.cumsum((0,) + tuple(plan.chunks)).tolist()
        done = pool.map(lambda j: backend.merge_segments(runs, cuts[j], order, False,
                                                         out[ends[j]:ends[j + 1]]),
                        range(len(plan.chunks)))
        for _ in done:  # errors raised here
            pass
    return out
