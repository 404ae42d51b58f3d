"""Graph layers of the one exchange between workers (``distsort.plan.exchange``).

One run per worker (``distsort-exch-run``: the chunks it holds, sorted as one), then
the splitters of the out-of-core merge between workers (``distsort.graph.outofcore``:
samples, pivots, windows, splitters), every run's slices of each owner's output chunks
(one task per owner and run, keyed ``(name, owner, run)``), and one merge per output
chunk, keyed ``(name, chunk, owner)`` by the run whose worker owns it
(``distsort.core.taskkeys.OWNED``: the scheduler plugin runs it there, so the slices of
that run stay where they are).  Builders take names and chunks and touch no data.

>>> from distsort.backends import Order
>>> from distsort.backends.outofcore.hostruns import HostRuns
>>> from distsort.graph.layers import SortGraph
>>> g = SortGraph("abc")
>>> exchange_sort_layers(g, "x", None, (3, 3, 2, 2), ((0, 1), (2, 3)), (4, 4, 2),
...                      HostRuns(), Order(), positions=False)
... # doctest: +NORMALIZE_WHITESPACE
[('distsort-exch-merge-abc', 0, 0), ('distsort-exch-merge-abc', 1, 0),
 ('distsort-exch-merge-abc', 2, 1)]
>>> [arg[1:] for arg in g.layers["distsort-exch-merge-abc"][("distsort-exch-merge-abc", 2, 1)][-1]]
[(('distsort-exch-slice-abc', 1, 0), 0), (('distsort-exch-slice-abc', 1, 1), 0)]
"""
from __future__ import annotations

import itertools
from operator import getitem

import numpy as np

__all__ = ["exchange_sort_layers", "exchange_run"]


def exchange_run(backend, order, starts, keys, values):
    """A worker's run: its input chunks ``keys`` (and ``values``, or positions from
    ``starts``, each chunk's first element's index, where not None) sorted as one
    (``backend.make_run``).  ``keys``, ``values``: chunks, or what reads them in place
    (``distsort.graph.layers.READ_IN_PLACE``)."""
    keys, values = (getattr(c, "chunks", c) for c in (keys, values))
    return backend.make_run(list(keys), None if values is None else list(values), order,
                            None if starts is None else starts.tolist())


def _run_layer(graph, keys_read, values_read, in_chunks, runs, backend, order, positions):  # noqa: PLR0913, PLR0917
    """One task per run of ``runs`` (input chunk indices): its chunks sorted as one."""
    from distsort.graph.layers import chunk_reads, input_names
    offsets = np.cumsum((0, *in_chunks), dtype=np.int64)
    name = f"distsort-exch-run-{graph.token}"
    tasks = {}
    for r, idx in enumerate(runs):
        values = chunk_reads(values_read, idx) if values_read is not None else None
        tasks[(name, r)] = (exchange_run, backend, order,
                            offsets[list(idx)] if positions else None,
                            chunk_reads(keys_read, idx), values)
    graph.add("exch-run", tasks, input_names(keys_read, values_read))
    return list(tasks)


def exchange_sort_layers(graph, keys_read, values_read, in_chunks, runs, chunks, backend,  # noqa: PLR0913, PLR0917
                         order, positions, like_gpu=False):
    """The layers of an exchange: runs of the input chunks ``runs`` (indices into
    ``in_chunks``, read as ``keys_read`` and ``values_read`` say: names, or
    ``READ_IN_PLACE``), the splitters of the output ``chunks``, the slices and one merge
    per output chunk; returns the merged chunks' keys (``backend`` a
    ``distsort.backends.outofcore.hostruns.HostRuns``, runs of NumPy chunks, or a
    ``distsort.backends.gpu.runs.DeviceRuns``, runs on the workers' GPUs: each a run,
    keys and values)."""
    from distsort.backends.outofcore.hostruns import run_sample
    from distsort.graph.outofcore import (exchange_pivots, exchange_splitters, merge_slices,
                                          run_windows, slices_between)
    from distsort.plan.exchange import exchange_steps, output_owners
    token = graph.token
    run_keys = _run_layer(graph, keys_read, values_read, in_chunks, runs, backend, order,
                          positions)
    lengths = tuple(sum(in_chunks[i] for i in idx) for idx in runs)
    steps = exchange_steps(lengths, len(chunks))
    ends = tuple(itertools.accumulate(chunks))[:-1]
    k = f"distsort-exch-{{}}-{token}"  # "exchange": Dask's key_split drops it (hex-like)
    samples = [(k.format("sample"), r) for r in range(len(runs))]
    graph.add("exch-sample", {key: (run_sample, run, step) for key, run, step
                                  in zip(samples, run_keys, steps, strict=True)},
              set(graph.layers))
    pivots = (k.format("pivots"), 0)
    graph.add("exch-pivots", {pivots: (exchange_pivots, lengths, steps, ends, order,
                                           samples)}, set(graph.layers))
    windows = [(k.format("windows"), r) for r in range(len(runs))]
    graph.add("exch-windows", {key: (run_windows, run, r, order, pivots) for r, (key, run)
                                   in enumerate(zip(windows, run_keys, strict=True))},
              set(graph.layers))
    splitters = (k.format("splitters"), 0)
    graph.add("exch-splitters", {splitters: (exchange_splitters, lengths, ends, order,
                                                 windows)}, set(graph.layers))
    owners = output_owners(len(chunks), len(runs))
    first = {d: owners.index(d) for d in set(owners)}  # each owner's chunks: consecutive
    # one slice task per (owner, run), its slices of the owner's chunks as one tuple:
    # R^2 tasks, not C R (``benchmarks/exchange_tasks.py``)
    graph.add("exch-slice", {(k.format("slice"), d, r): (slices_between, run, r, first[d],
                                                         first[d] + owners.count(d), splitters)
                             for d in first for r, run in enumerate(run_keys)},
              set(graph.layers))
    merge = k.format("merge")
    tasks = {(merge, c, d): (merge_slices, backend, size, order, like_gpu,
                             [(getitem, (k.format("slice"), d, r), c - first[d])
                              for r in range(len(runs))])
             for c, (size, d) in enumerate(zip(chunks, owners, strict=True))}
    graph.dependencies[merge] = set(graph.layers)
    graph.layers[merge] = tasks
    return list(tasks)
