"""Graph layers of the k-way out-of-core merge (``distsort.plan.kway``).

The runs come from ``distsort.graph.layers.run_layers``; then one task finds the co-ranks
of every output chunk's segments (:func:`kway_cuts`), one task per output chunk
merges that chunk's slice of every run (:func:`merge_chunk`), and the output arrays
take the keys and the values of those tasks.  Builders take names and chunks
and touch no data.

>>> from distsort.backends import Order
>>> from distsort.backends.outofcore.hostruns import HostRuns
>>> from distsort.graph.layers import SortGraph
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
import itertools
import time

__all__ = ["kway_sort_layers", "kway_layers", "kway_cuts", "pick_layer", "merge_chunk",
           "exchange_layers", "exchange_pivots", "run_windows", "exchange_splitters",
           "slice_between", "slices_between", "merge_slices"]


def kway_cuts(backend, chunks, order, like_gpu, runs):
    """The co-ranks in every run of the ends of each output chunk's segments (segments
    the device holds): one list per chunk of ``chunks``, each from its first rank to its
    last.  One task finds them all before any merge task runs, each search starting
    from the last co-ranks: a merge task may then reuse the run ranges it consumed
    (the GPU engine keeps a merged chunk's host copy there), which no later search may
    read."""
    from distsort.backends.outofcore.hostruns import length, run_searcher
    from distsort.plan.kway import KWAY_FRACTION, co_ranks, segment_bounds
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
                     run_chunks, stage, held, like_gpu, name=None, perm=None):
    """Runs of ``run_chunks`` chunks (``distsort.graph.layers.run_layers``, arguments as
    there), then :func:`kway_layers`, or :func:`exchange_layers` where ``perm`` groups
    the chunks by the worker holding them; returns the keys of the merged output
    chunks."""
    from distsort.graph.layers import run_layers
    from distsort.plan.outofcore import run_lengths
    # A worker forms only its own runs: where they are spread, the pinned pool is told
    # nothing (it would make blocks for every run of the sort in every worker).
    backend = dataclasses.replace(
        backend, runs=() if perm is not None else run_lengths(chunks, run_chunks))
    runs, lengths = run_layers(graph, keys_name, values_name, chunks, backend, order,
                               positions, run_chunks, stage, perm=perm, held=held)
    if perm is not None:
        return exchange_layers(graph, runs, lengths, chunks, backend, order, like_gpu, name)
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


# -- runs held by several workers (``distsort.plan.kway``, step 4)

def exchange_layers(graph, runs, lengths, chunks, backend, order, like_gpu, name=None):
    """The k-way merge of ``runs`` (of ``lengths``) held by several workers: samples,
    pivots, windows and splitters (small messages: ``distsort.plan.kway``, step 4), then each
    output chunk's slice of every run, sent to the task that merges them (one exchange
    between workers); returns the merged output chunks' keys.

    >>> from distsort.backends import Order
    >>> from distsort.backends.outofcore.hostruns import HostRuns
    >>> from distsort.graph.layers import SortGraph
    >>> g = SortGraph("abc")
    >>> exchange_layers(g, [("r", 0), ("r", 1)], (8, 2), (4, 4, 2), HostRuns(), Order(),
    ...                 like_gpu=False)[:2]
    [('distsort-kway-abc', 0), ('distsort-kway-abc', 1)]
    >>> sorted(g.layers)[:3]
    ['distsort-kway-abc', 'distsort-kway-pivots-abc', 'distsort-kway-sample-abc']
    >>> g.layers["distsort-kway-abc"][("distsort-kway-abc", 2)][-1]
    [('distsort-kway-slice-abc', 2, 0), ('distsort-kway-slice-abc', 2, 1)]
    """
    from distsort.backends.outofcore.hostruns import run_sample
    from distsort.plan.kway import sample_step
    token, k = graph.token, len(runs)
    steps = tuple(sample_step(n) for n in lengths)
    ends = tuple(itertools.accumulate(chunks))[:-1]
    samples = [(f"distsort-kway-sample-{token}", r) for r in range(k)]
    graph.add("kway-sample", {key: (run_sample, run, step)
                              for key, run, step in zip(samples, runs, steps, strict=True)},
              set(graph.layers))
    pivots = (f"distsort-kway-pivots-{token}", 0)
    graph.add("kway-pivots", {pivots: (exchange_pivots, tuple(lengths), steps, ends, order,
                                       samples)}, set(graph.layers))
    windows = [(f"distsort-kway-windows-{token}", r) for r in range(k)]
    graph.add("kway-windows", {key: (run_windows, run, r, order, pivots)
                               for r, (key, run) in enumerate(zip(windows, runs, strict=True))},
              set(graph.layers))
    splitters = (f"distsort-kway-splitters-{token}", 0)
    graph.add("kway-splitters", {splitters: (exchange_splitters, tuple(lengths), ends, order,
                                             windows)}, set(graph.layers))
    slice_name = f"distsort-kway-slice-{token}"
    graph.add("kway-slice", {(slice_name, c, r): (slice_between, run, r, c, splitters)
                             for c in range(len(chunks)) for r, run in enumerate(runs)},
              set(graph.layers))
    name = name or "distsort-kway-" + token
    tasks = {(name, c): (merge_slices, backend, size, order, like_gpu,
                         [(slice_name, c, r) for r in range(k)])
             for c, size in enumerate(chunks)}
    graph.dependencies[name] = set(graph.layers)
    graph.layers[name] = tasks
    return list(tasks)


def exchange_pivots(lengths, steps, ends, order, samples):
    """For each output chunk's end of ``ends`` (ranks), the two samples that bracket it
    (``kway.brackets``): each ``(run, position, element)`` (a run of one element), or
    None."""
    from distsort.backends.outofcore.hostruns import merge_samples, slice_run
    from distsort.plan.kway import brackets
    merged = merge_samples(samples, order)

    def pivot(handle):
        if handle is None:
            return None
        j, p = handle
        m = (p + 1) // steps[j] - 1  # the sample's index in its run's sample
        return j, p, slice_run(samples[j], m, m + 1)
    return [tuple(map(pivot, pair)) for pair in brackets(lengths, steps, merged, ends)]


def run_windows(run, j, order, pivots):
    """Run ``j``'s part of the splitters: for each end's pair of ``pivots``
    (:func:`exchange_pivots`), how many of its elements come before the low pivot, and a
    copy of those between the low and the high one (the window of the end's co-rank),
    in host memory (where the run is on a GPU too: the splitters are found there).
    """
    from distsort.backends.outofcore.hostruns import count_before, length, make_run, parts
    from distsort.core.xp import host_copy
    n = length(run)
    bounds = []
    for side, missing in ((0, 0), (1, n)):
        given = [pair[side] for pair in pivots if pair[side] is not None]
        counts = iter(count_before(run, j, given, order).tolist() if given else ())
        bounds.append([missing if pair[side] is None else next(counts) for pair in pivots])
    keys, values = parts(run)
    windows = [make_run(host_copy(keys, slice(a, b)),
                        None if values is None else host_copy(values, slice(a, b)))
               for a, b in zip(*bounds, strict=True)]
    return bounds[0], windows


def exchange_splitters(lengths, ends, order, windows):
    """The co-ranks in every run of each output chunk's start, and of the end: from
    each run's counts before the low pivots and its windows (:func:`run_windows`), the
    co-ranks within the windows (``kway.co_ranks``)."""
    from distsort.backends.outofcore.hostruns import length, run_searcher
    from distsort.plan.kway import co_ranks
    cuts = [(0,) * len(lengths)]
    for e, end in enumerate(ends):
        low = [w[0][e] for w in windows]
        pieces = [w[1][e] for w in windows]
        inside = co_ranks([length(p) for p in pieces], end - sum(low),
                          run_searcher(pieces, order))
        cuts.append(tuple(a + c for a, c in zip(low, inside, strict=True)))
    cuts.append(tuple(lengths))
    return cuts


def slice_between(run, r, c, splitters):
    """Run ``r``'s slice that output chunk ``c`` merges (a view: the merge may write
    its output there, as ``merge_segments`` does in the runs it consumed)."""
    from distsort.backends.outofcore.hostruns import slice_run
    return slice_run(run, splitters[c][r], splitters[c + 1][r])


def slices_between(run, r, first, end, splitters):
    """Run ``r``'s slices of output chunks ``first`` to ``end`` (excluded), one tuple:
    what one worker receives of that run."""
    return tuple(slice_between(run, r, c, splitters) for c in range(first, end))


def _writeable(run):
    """``run``, or a copy where a part of it is read-only (a slice received from
    another worker may be a view of the message's bytes)."""
    from distsort.backends.outofcore.hostruns import make_run, parts
    keys, values = parts(run)
    if keys.flags.writeable and (values is None or values.flags.writeable):
        return run
    return make_run(keys.copy(), None if values is None else values.copy())


def merge_slices(backend, size, order, like_gpu, slices):
    """An output chunk of ``size`` elements from its slice of every run: its segments'
    co-ranks in the slices (:func:`kway_cuts` of one chunk), then
    ``backend.merge_segments`` as in :func:`merge_chunk`; or, where the backend merges
    by sorting (``merges_by_sort``: runs on a GPU), the slices joined and sorted
    (``backend.merge_by_sort``)."""
    from distsort.backends.outofcore.hostruns import length
    began = time.perf_counter()
    total = sum(length(s) for s in slices)
    if total != size:  # the splitters and the chunking disagree: never silently
        raise RuntimeError(f"distsort internal error: slices of {total} elements "
                           f"for an output chunk of {size}")
    if backend.merges_by_sort:
        return backend.merge_by_sort(slices, order)
    cuts = kway_cuts(backend, (size,), order, like_gpu, slices)[0]
    if like_gpu:  # the output's host copy is written where its slices are
        slices = [_writeable(s) for s in slices]
    out = backend.merge_segments(slices, cuts, order, like_gpu)
    backend.record("kway_tasks", time.perf_counter() - began)
    return out
