"""Graph layers of the k-way out-of-core merge (``distsort.kway``).

The runs come from ``distsort.graph.run_layers``; then one task per output chunk
merges that chunk's slice of every run (:func:`merge_chunk`), and the output
arrays take the keys and the values of those tasks.  Builders take names and chunks
and touch no data.

>>> from distsort.backends import Order
>>> from distsort.backends.outofcore.hostruns import HostRuns
>>> from distsort.graph import SortGraph
>>> g = SortGraph("abc")
>>> merged = kway_layers(g, [("distsort-run-abc", 0), ("distsort-run-abc", 1)],
...                      (4, 4, 2), HostRuns(), Order(), like_gpu=False)
>>> merged
[('distsort-kway-abc', 0), ('distsort-kway-abc', 1), ('distsort-kway-abc', 2)]
>>> g.layers["distsort-kway-abc"][("distsort-kway-abc", 2)][2:4]
(8, 10)
"""
from __future__ import annotations

import itertools
import time

__all__ = ["kway_sort_layers", "kway_layers", "pick_layer", "merge_chunk"]


def merge_chunk(backend, start, stop, order, like_gpu, runs):
    """A k-way task: output elements ``start:stop`` of the merge of all ``runs``
    (``distsort.backends.outofcore.hostruns`` runs of ``backend``), from their co-ranks at the
    ends of segments the device holds; on the GPU when ``like_gpu``."""
    from .backends.outofcore.hostruns import length, run_searcher
    from .kway import KWAY_FRACTION, co_ranks, segment_bounds
    segment = backend.kway_segment(runs[0], stop - start, like_gpu, KWAY_FRACTION)
    before = run_searcher(runs, order)
    lengths = [length(r) for r in runs]
    began = time.perf_counter()
    cuts = [co_ranks(lengths, start + b, before)
            for b in segment_bounds((stop - start,), segment)[0]]
    backend.record("kway_coranks", time.perf_counter() - began)
    out = backend.merge_segments(runs, cuts, order, like_gpu)
    backend.record("kway_tasks", time.perf_counter() - began)
    return out


def kway_sort_layers(graph, keys_name, values_name, chunks, backend, order, positions,
                     run_chunks, stage, held, like_gpu, name=None):
    """Runs of ``run_chunks`` chunks (``distsort.graph.run_layers``, arguments as
    there), then :func:`kway_layers`; returns the keys of the merged output chunks."""
    from .graph import run_layers
    runs, _ = run_layers(graph, keys_name, values_name, chunks, backend, order, positions,
                         run_chunks, stage, held=held)
    return kway_layers(graph, runs, chunks, backend, order, like_gpu, name)


def kway_layers(graph, runs, chunks, backend, order, like_gpu, name=None):
    """One task per output chunk of ``chunks``: its elements of the merge of the
    ``runs`` (keys of earlier layers); returns the tasks' keys.

    ``name``: the layer is the output array's own (keys alone).  A separate layer that
    picked the keys would read each merged chunk after it: where dask-cuda had spilled
    the chunk by then, it would copy it back to the device as a plain array, which it
    could only spill again through a pageable copy."""
    name = name or "distsort-kway-" + graph.token
    ends = list(itertools.accumulate(chunks, initial=0))
    tasks = {(name, j): (merge_chunk, backend, ends[j], ends[j + 1], order, like_gpu, list(runs))
             for j in range(len(chunks))}
    graph.dependencies[name] = set(graph.layers)
    graph.layers[name] = tasks
    return list(tasks)


def pick_layer(graph, out_name, merged, func, part):
    """The output array's layer: ``(out_name, j) = func(merged[j], part)`` (the keys or
    the values of each merged chunk)."""
    graph.dependencies[out_name] = set(graph.layers)
    graph.layers[out_name] = {(out_name, j): (func, k, part) for j, k in enumerate(merged)}
    return out_name
