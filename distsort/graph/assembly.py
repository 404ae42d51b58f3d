"""A 1-D sort's output arrays, assembled from its plan: the layers of the plan's
strategy (``distsort.graph.layers``, ``distsort.graph.outofcore``), one output layer
per array, and the checks of ``verify=True`` (``distsort.graph.verify``).

Nothing here decides: the :class:`~distsort.plan.sortplan.SortPlan` says which layers
(one task for one whole chunk, the groups and the network, runs and their merge), the
backend it names runs the tasks, and the callers hand down how each input is read.
No data is touched and no cluster is asked.
"""
from __future__ import annotations

import dask.array as da
import numpy as np
from dask.base import tokenize

from distsort.core.xp import namespace
from distsort.graph.layers import (SortGraph, chunk_output_layer, finish_layer, graph_over,
                                   plan_layers, run_output_layer)

__all__ = ["aligned", "assemble"]


def aligned(keys, values, plan):
    """``keys`` rechunked as the plan's chunks where it reads them so, and ``values``
    chunked as the keys (the tasks read them side by side)."""
    if plan.rechunk and keys.chunks[0] != plan.chunks:
        keys = keys.rechunk((plan.chunks,))
    if values is not None and values.chunks[0] != keys.chunks[0]:
        values = values.rechunk(keys.chunks)
    return keys, values


def _sorted_chunks(graph, keys, vname, order, positions, plan, backend, reads):  # noqa: PLR0913, PLR0917
    """The keys of the sorted chunks (runs out of core, the merged chunks of a k-way
    merge), or None where one task sorts the one chunk into the output."""
    if plan.strategy == "kway":  # keys alone: the merged chunks are the output's
        from distsort.graph.kway import kway_sort_layers
        offsets = np.cumsum((0, *keys.chunks[0])).tolist() if positions else None
        return kway_sort_layers(graph, (reads[keys.name], reads.get(vname)), plan.pieces,
                                plan.chunks, backend, order,
                                None if order.keyed else "distsort-sort-" + graph.token,
                                offsets)
    if plan.strategy == "exchange":  # one exchange between workers
        from distsort.graph.exchange import exchange_sort_layers
        runs = tuple(tuple(i for i, _, _ in run) for run in plan.pieces)
        return exchange_sort_layers(graph, reads[keys.name], reads.get(vname), keys.chunks[0],
                                    runs, plan.chunks, backend, order, positions)
    ooc = plan.out_of_core
    if ooc is not None and ooc.one_pass:  # keys alone: the merged chunks are the output's
        from distsort.graph.outofcore import kway_sort_layers
        return kway_sort_layers(
            graph, keys.name, vname, plan.chunks, backend, order, positions,
            ooc.plan.run_chunks, ooc.stage, ooc.held, like_gpu=plan.engine == "gpu",
            name=None if order.keyed else "distsort-sort-" + graph.token,
            perm=ooc.perm if ooc.merge == "exchange" else None)
    if plan.one_task and vname is None:
        return None
    return plan_layers(graph, plan, reads[keys.name], reads.get(vname), keys.chunks[0],
                       backend, order, positions)


def _picked(out, name, merged, part):
    """The output layer ``name`` of a k-way merge: the merge's own (keys alone), else
    part ``part`` of each merged chunk."""
    if name not in out.layers:
        from distsort.backends.outofcore.hostruns import pick
        from distsort.graph.outofcore import pick_layer
        pick_layer(out, name, merged, pick, part)


def _output(graph, name, part, finish, args, meta, how):
    """One output array: the sort's layers and its own (``part`` 0 the keys, 1 the
    values), never the other output's (``SortGraph.output``)."""
    plan, backend, sorted_keys, source, sources = how
    out = graph.output()
    ooc = plan.out_of_core
    if plan.strategy == "kway":
        _picked(out, name, sorted_keys, part)
    elif sorted_keys is None:
        chunk_output_layer(out, name, source, backend, args[0], plan.local, part, args)
    elif plan.strategy == "exchange":  # gated: never fused into the merge, whose key
        from distsort.backends.outofcore.hostruns import pick  # places it (taskkeys.OWNED)
        finish_layer(out, name, sorted_keys, pick, part)
    elif ooc is None:
        finish_layer(out, name, sorted_keys, finish, *args)
    elif ooc.one_pass:
        _picked(out, name, sorted_keys, part)
    else:
        run_output_layer(out, name, sorted_keys, plan.chunks, ooc.plan.run_chunks,
                         backend.output, part, plan.engine == "gpu")
    return da.Array(graph_over(sources, out.layers, out.dependencies), name, (plan.chunks,),
                    meta=meta)


def assemble(keys, values, order, positions, plan, backend, reads, sources,  # noqa: PLR0913, PLR0917
             verify=False, what="sort"):
    """The output ``(keys, values)`` Dask arrays of a 1-D sort of ``keys`` (and
    ``values``, chunked as :func:`aligned` makes them) by ``plan``, its tasks run by
    ``backend``, each input read as ``reads`` says (by its name: the name, or its chunks
    held where they are) and the output graphs carrying ``sources``' graphs.
    ``positions`` with ``values``: equal keys keep their input order (a plan that says
    ``stable``).  ``verify``: the outputs are read only once checked against the input.
    """
    stable = positions and values is not None
    if stable and not plan.stable:
        raise ValueError("a stable sort with values runs on a plan that sorts every "
                         "chunk as one")
    vname = values.name if values is not None else None
    # The plan by its repr, one string: Dask's token walks every piece of it one by one.
    graph = SortGraph(tokenize(keys.name, vname, order, positions, repr(plan)))
    sorted_keys = _sorted_chunks(graph, keys, vname, order, positions, plan, backend, reads)
    how = (plan, backend, sorted_keys, reads[keys.name], sources)
    # Keyed chunks may hold packed (key, value) codes: finishing them needs both dtypes.
    value_dtype = values.dtype if values is not None else None
    key_args = (order, keys.dtype) + ((value_dtype,) if value_dtype is not None else ())
    out_of_core = plan.out_of_core is not None or plan.strategy == "exchange"  # runs
    out_keys = _output(graph, "distsort-sort-" + graph.token, 0,
                       None if out_of_core else backend.finish_keys, key_args, keys._meta, how)
    out_values = None
    if order.keyed:
        value_meta = (values._meta if values is not None
                      else namespace(keys._meta, strict=True).empty((0,), dtype=np.int64))
        out_values = _output(graph, "distsort-sort-values-" + graph.token, 1,
                             None if out_of_core else backend.finish_values,
                             (order, keys.dtype, value_dtype), value_meta, how)
    if verify:  # the outputs can only be read once a check of them against the input passed
        from distsort.graph.verify import verified
        return verified(keys, values, out_keys, out_values, order, positions and not stable,
                        what)
    return out_keys, out_values
