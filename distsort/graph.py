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
  scheduler plugin of ``distsort.locality`` keeps them there).

Left alone, a worker makes the ``tail`` and ``head`` copies of all its pairs while
it waits for the first crossing part to arrive, and then holds about twice its
chunks (measured on CPU workers: 16 chunks' worth on a worker of 8).  So the pairs
of all rounds are put in one sequence (``plan.spread_order`` within a round) and
only ``window`` consecutive pairs run at once: the ``bound`` of pair ``s`` also
waits for two tiny ``done`` tasks, one per merge of pair ``s - window``.  A worker
then holds its chunks plus the copies and outputs of the pairs in the window.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .plan import plan_network, spread_order

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


def done(chunk):
    """A token that a chunk is computed: what a later pair waits for, without the chunk."""
    return None


def after(gate, func, *args):
    """``func(*args)``, once the keys in ``gate`` are computed (their values are unused)."""
    return func(*args)


def _compare_split(tasks, round_id, token, cur, lo, hi, chunks, backend, order, gate=()):
    """Tasks of one compare-split, which starts once the keys of ``gate`` are computed;
    returns the keys of the new ``lo`` and ``hi``."""
    def key(kind, i):
        return (f"distsort-r{round_id:02d}-{kind}-{token}", i)

    stride = probe_stride(chunks[lo])
    limit = min(chunks[lo], chunks[hi])
    tasks[key("probe-top", lo)] = (backend.probe, cur[lo], stride, True, order)
    tasks[key("probe-bottom", hi)] = (backend.probe, cur[hi], stride, False, order)
    bound = (backend.crossing_bound, key("probe-top", lo), key("probe-bottom", hi),
             stride, limit, order)
    tasks[key("bound", lo)] = (after, list(gate), *bound) if gate else bound
    tasks[key("tail", lo)] = (backend.tail, cur[lo], key("bound", lo))
    tasks[key("head", hi)] = (backend.head, cur[hi], key("bound", lo))
    # A merge also waits for its own chunk's copy (made on the same worker), so that
    # the chunk it replaces is freed when it ends.
    tasks[key("low", lo)] = (after, [key("tail", lo)], backend.merge_low, cur[lo],
                             key("head", hi), order)
    tasks[key("high", hi)] = (after, [key("head", hi)], backend.merge_high, cur[hi],
                              key("tail", lo), order)
    return key("low", lo), key("high", hi)


def network_layers(graph, chunk_keys, chunks, backend, order, window=None):
    """Add one layer per round of the network; returns the keys of the sorted chunks.

    At most ``window`` pairs (None: no limit) are between their ``bound`` and their
    merges at once."""
    cur = list(chunk_keys)
    rounds = plan_network(len(chunks))
    total = sum(len(r.pairs) for r in rounds)
    tokens = []  # per pair of the sequence: its done tokens, if a later pair waits
    for round_id, rnd in enumerate(rounds):
        tasks = {}
        for lo, hi in spread_order(rnd.pairs, len(chunks)):
            s = len(tokens)
            gate = tokens[s - window] if window and s >= window else ()
            cur[lo], cur[hi] = _compare_split(
                tasks, round_id, graph.token, cur, lo, hi, chunks, backend, order, gate)
            late = window and s + window < total  # a later pair waits for this one
            tokens.append(_done_tokens(tasks, round_id, graph.token, cur, lo, hi) if late
                          else ())
        # A round reads chunks that any earlier round (or the prepare layer) made.
        graph.add(f"round{round_id:02d}", tasks, set(graph.layers))
    return cur


def _done_tokens(tasks, round_id, token, cur, lo, hi):
    keys = [(f"distsort-r{round_id:02d}-done-{token}", i) for i in (lo, hi)]
    for k in keys:
        tasks[k] = (done, cur[k[1]])
    return keys


def sort_layers(graph, keys_name, values_name, chunks, backend, order, positions,
                window=None):
    """Prepare (copy and sort) every chunk, then run the network.

    ``keys_name`` and ``values_name`` (or None) name the input arrays, whose
    1-D chunking ``chunks`` must be regular (``distsort.plan.is_regular``).
    ``positions`` makes the values the positions ``0 .. n-1``; ``window`` limits the
    pairs in flight (``network_layers``).
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
    return network_layers(graph, keys, chunks, backend, order, window)


def finish_layer(graph, out_name, sorted_keys, func, *args):
    """The output array's layer: ``(out_name, i) = func(chunk_i, *args)``."""
    tasks = {(out_name, i): (func, k, *args) for i, k in enumerate(sorted_keys)}
    graph.dependencies[out_name] = set(graph.layers)
    graph.layers[out_name] = tasks
    return out_name
