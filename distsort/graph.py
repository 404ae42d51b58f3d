"""The Dask graph of a sort: the plan of ``distsort.plan`` run by a backend.

Builders here take names, chunk sizes and a backend module and return graph
layers; they touch no data.  Layer names are tokenized, so the same sort of the
same array gives the same graph, and each round of the network is a layer of its
own (``distsort-round03-<token>``): the dashboard and performance reports show
the time per round.

One compare-split of chunks ``lo < hi`` is seven small tasks, so that only what
crosses travels between workers:

* ``probe-top`` of ``lo`` and ``probe-bottom`` of ``hi``: a sample of each chunk;
* ``bound``: an upper bound ``kb`` on the crossing count, from the samples;
* ``tail`` (``lo``'s top ``kb``) and ``head`` (``hi``'s bottom ``kb``), the data
  that crosses;
* ``low`` and ``high``, the merges, meant to run where ``lo`` and ``hi`` live (the
  scheduler's choice: it may also move a chunk, see ``cluster.bytes_sent_by_kind``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .plan import plan_network

#: Probes per chunk: the crossing bound is exact to within ``length / PROBES``.
PROBES = 1024


@dataclass
class SortGraph:
    """Layers of a sort: ``layers[name] = {key: task}`` and their dependencies."""

    token: str
    layers: dict = field(default_factory=dict)
    dependencies: dict = field(default_factory=dict)

    def add(self, stage, tasks, deps):
        name = f"distsort-{stage}-{self.token}"
        self.layers[name] = tasks
        self.dependencies[name] = set(deps)
        return name


#: Keys of the tasks of a round: ``("distsort-r03-head-<token>", 5)``.
_ROUND_TASK = re.compile(r"^distsort-r\d+-([a-z]+)")


def round_task_kind(key):
    """What a task of a round does (``"head"``, ``"tail"``, ``"low"``, ``"probe"``, ...),
    from its key; None for keys of other tasks."""
    m = _ROUND_TASK.match(str(key[0] if isinstance(key, tuple) else key))
    return m.group(1) if m else None


def probe_stride(length):
    return max(1, length // PROBES)


def _compare_split(tasks, round_id, token, cur, lo, hi, chunks, backend, order):
    """Tasks of one compare-split; returns the keys of the new ``lo`` and ``hi``."""
    def key(kind, i):
        return (f"distsort-r{round_id:02d}-{kind}-{token}", i)

    stride = probe_stride(chunks[lo])
    limit = min(chunks[lo], chunks[hi])
    tasks[key("probe-top", lo)] = (backend.probe, cur[lo], stride, True, order)
    tasks[key("probe-bottom", hi)] = (backend.probe, cur[hi], stride, False, order)
    tasks[key("bound", lo)] = (backend.crossing_bound, key("probe-top", lo),
                               key("probe-bottom", hi), stride, limit, order)
    tasks[key("tail", lo)] = (backend.tail, cur[lo], key("bound", lo))
    tasks[key("head", hi)] = (backend.head, cur[hi], key("bound", lo))
    tasks[key("low", lo)] = (backend.merge_low, cur[lo], key("head", hi), order)
    tasks[key("high", hi)] = (backend.merge_high, cur[hi], key("tail", lo), order)
    return key("low", lo), key("high", hi)


def network_layers(graph, chunk_keys, chunks, backend, order):
    """Add one layer per round of the network; returns the keys of the sorted chunks."""
    cur = list(chunk_keys)
    for round_id, rnd in enumerate(plan_network(len(chunks))):
        tasks = {}
        for lo, hi in rnd.pairs:
            cur[lo], cur[hi] = _compare_split(
                tasks, round_id, graph.token, cur, lo, hi, chunks, backend, order)
        # A round reads chunks that any earlier round (or the prepare layer) made.
        graph.add(f"round{round_id:02d}", tasks, set(graph.layers))
    return cur


def sort_layers(graph, keys_name, values_name, chunks, backend, order, positions):
    """Prepare (copy and sort) every chunk, then run the network.

    ``keys_name`` and ``values_name`` (or None) name the input arrays, whose
    1-D chunking ``chunks`` must be regular (``distsort.plan.is_regular``).
    ``positions`` makes the values the positions ``0 .. n-1``.
    Returns the keys of the sorted chunks, in backend form.
    """
    tasks = {}
    start = 0
    for i, size in enumerate(chunks):
        value = (values_name, i) if values_name is not None else None
        tasks[("distsort-prepare-" + graph.token, i)] = (
            backend.prepare, (keys_name, i), value, order, start if positions else None)
        start += size
    deps = {keys_name} | ({values_name} if values_name else set())
    graph.add("prepare", tasks, deps)
    keys = [("distsort-prepare-" + graph.token, i) for i in range(len(chunks))]
    return network_layers(graph, keys, chunks, backend, order)


def finish_layer(graph, out_name, sorted_keys, func, *args):
    """The output array's layer: ``(out_name, i) = func(chunk_i, *args)``."""
    tasks = {(out_name, i): (func, k, *args) for i, k in enumerate(sorted_keys)}
    graph.dependencies[out_name] = set(graph.layers)
    graph.layers[out_name] = tasks
    return out_name
