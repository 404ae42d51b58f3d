"""Graph layers of the k-way out-of-core merge (``distsort.kway``).

The runs come from ``distsort.graph.run_layers``; then one task finds the co-ranks
of every output chunk's segments (:func:`kway_cuts`), one task per output chunk
merges that chunk's slice of every run (:func:`merge_chunk`), and the output arrays
take the keys and the values of those tasks.  Builders take names and chunks
and touch no data.

>>> from distsort.backends import Order
>>> from distsort.backends.outofcore.hostruns import HostRuns
>>> from distsort.graph import SortGraph
>>> g = SortGraph("abc")
>>> merged = kway_layers(g, [("distsort-run-abc", 0), ("distsort-run-abc", 1)],
...                      (4, 4, 2), HostRuns(), Order(), like_gpu=False)
>>> merged
[('distsort-kway-abc', 0), ('distsort-kway-abc', 1), ('distsort-kway-abc', 2)]
>>> g.layers["distsort-kway-abc"][("distsort-kway-abc", 2)][2]  # output chunk 2
2
>>> g.layers["distsort-kway-cuts-abc"][("distsort-kway-cuts-abc", 0)][2]  # its sizes
(4, 4, 2)
"""
from __future__ import annotations

import dataclasses
import time

__all__ = ["kway_sort_layers", "kway_layers", "kway_cuts", "pick_layer", "merge_chunk"]


def kway_cuts(backend, chunks, order, like_gpu, runs):
    """The co-ranks in every run of the ends of each output chunk's segments (segments
    the device holds): one list per chunk of ``chunks``, each from its first rank to its
    last.  One task finds them all before any merge task runs, each search starting
    from the last co-ranks: a merge task may then reuse the run ranges it consumed
    (the GPU engine keeps a merged chunk's host copy there), which no later search may
    read."""
    from .backends.outofcore.hostruns import length, run_searcher
    from .kway import KWAY_FRACTION, co_ranks, segment_bounds
    began = time.perf_counter()
    before = run_searcher(runs, order)
    lengths = [length(r) for r in runs]
    out, last, start = [], None, 0
    for size in chunks:
        segment = backend.kway_segment(runs[0], size, like_gpu, KWAY_FRACTION)
        cuts = []
        for b in segment_bounds((size,), segment)[0]:
            last = co_ranks(lengths, start + b, before, start=last)
            cuts.append(last)
        out.append(cuts)
        start += size
    backend.record("kway_coranks", time.perf_counter() - began)
    return out


def merge_chunk(backend, j, order, like_gpu, cuts, runs):
    """A k-way task: output chunk ``j`` of the merge of all ``runs``
    (``distsort.backends.outofcore.hostruns`` runs of ``backend``), between the co-ranks
    ``cuts[j]`` of :func:`kway_cuts`; on the GPU when ``like_gpu``."""
    began = time.perf_counter()
    out = backend.merge_segments(runs, cuts[j], order, like_gpu)
    backend.record("kway_tasks", time.perf_counter() - began)
    return out


def kway_sort_layers(graph, keys_name, values_name, chunks, backend, order, positions,
                     run_chunks, stage, held, like_gpu, name=None):
    """Runs of ``run_chunks`` chunks (``distsort.graph.run_layers``, arguments as
    there), then :func:`kway_layers`; returns the keys of the merged output chunks."""
    from .graph import run_layers
    from .outofcore import run_lengths
    backend = dataclasses.replace(backend, runs=run_lengths(chunks, run_chunks))
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
    cuts = ("distsort-kway-cuts-" + graph.token, 0)
    graph.add("kway-cuts", {cuts: (kway_cuts, backend, tuple(chunks), order, like_gpu,
                                   list(runs))}, set(graph.layers))
    tasks = {(name, j): (merge_chunk, backend, j, order, like_gpu, cuts, list(runs))
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
