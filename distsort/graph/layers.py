"""The Dask graph of a sort: the plan of ``distsort.plan.network`` run by a backend.

Builders here take names, chunk sizes and a backend module and return graph
layers; they touch no data.  Layer names are tokenized, so the same sort of the
same array gives the same graph, and each round of the network is a layer of its
own (``distsort-round03-<token>``).  Task keys follow ``distsort.core.taskkeys``
(``("distsort-low-r03-<token>", i)``: one task prefix per kind, one task group per
kind and round).

Each chunk, as soon as it is made (sorted by ``prepare`` or by a merge), gets an
``edges`` task: a sample of its top and bottom elements, taken while the chunk is
still in device memory (out of core, any later read of a chunk may first copy it
back from the host).  One compare-split of chunks ``lo < hi`` is then four tasks,
so that only what crosses travels between workers:

* ``tail`` (``lo``'s top ``kb``) and ``head`` (``hi``'s bottom ``kb``), the data
  that crosses, where ``kb`` is an upper bound on the crossing count from the two
  chunks' edges; each side computes the same ``kb`` itself (a few microseconds)
  rather than wait for a task of its own: every task on the way from a chunk to its
  merge costs a round trip through the scheduler, milliseconds that a small sort
  on GPUs notices;
* ``low`` and ``high``, the merges, meant to run where ``lo`` and ``hi`` live (the
  scheduler plugin of ``distsort.cluster.locality`` keeps them there).

A backend that can share whole chunks between workers without moving them (``share``:
GPU workers of one host, ``distsort.backends.share.ipc_backend``) needs no edges, heads or
tails: a compare-split is a ``share`` of each chunk (handles, made as soon as the
chunk is launched) and the merges ``low`` and ``high``, each reading the partner's
crossing elements through its share; one trip through the scheduler per round.

Left alone, a worker makes the ``tail`` and ``head`` of all its pairs while it
waits for the first crossing part to arrive, receives the other side's, and holds
more than its chunks (on two CPU workers with 8 chunks each: 8 pairs in flight and
up to 13 chunks' worth).  So the pairs of all rounds are put in one sequence
(``plan.spread_order`` within a round) and only ``window`` consecutive pairs run at
once: the ``tail`` and ``head`` of pair ``s`` also wait for the edges of pair
``s - window``'s new chunks.  A worker then holds its chunks plus the received parts
and outputs of the pairs in the window.
"""
from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass, field

import numpy as np

from distsort.backends.chunk import make_chunk, slice_chunk
from distsort.backends.chunk import parts as parts_of
from distsort.plan.placement import group_bounds, starts
from distsort.plan.network import group_steps, plan_network, spread_order
from distsort.core.taskkeys import Held, HeldChunks, task_name
from distsort.core.xp import namespace as _namespace

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

    def output(self):
        """A copy of the sort's layers, to which one output array's layer is added.

        Each output array (the keys, the values of a keyed sort) must carry only the
        layers it reads.  Were the values' graph to carry the keys' output layer too,
        Dask would not always cull it (``HighLevelGraph.cull`` keeps a whole layer
        when as many keys are wanted as the layer holds, whichever keys they are), and
        its linear fusion would see the last merges with two dependents there but one
        in the keys' own graph: ``k.persist()`` sends ``(distsort-sort-<token>, i)`` as
        an alias of a task fused with the merge, ``v.persist()`` then sends the same
        key as a task depending on the merge itself, and the scheduler, holding both
        under one key, asks for a worker while a dependency is not computed
        (``decide_worker``'s assertion), loses the worker and never finishes.

        >>> g = SortGraph("t")
        >>> _ = g.add("round00", {("distsort-low-r00-t", 0): 1}, ())
        >>> out = g.output()
        >>> out.layers["distsort-sort-t"] = {}
        >>> sorted(g.layers), sorted(out.layers)
        (['distsort-round00-t'], ['distsort-round00-t', 'distsort-sort-t'])
        """
        return SortGraph(self.token, dict(self.layers),
                         {name: set(deps) for name, deps in self.dependencies.items()})


def probe_stride(length):
    return max(1, length // PROBES)


def after(gate, func, *args):
    """``func(*args)``, once the keys in ``gate`` are computed (their values are unused)."""
    return func(*args)


def _none():
    return None


def edges(probe, chunk, stride, order):
    """``(top, bottom)`` samples of a chunk: every ``stride``-th element from each end."""
    return probe(chunk, stride, True, order), probe(chunk, stride, False, order)


def crossing_part(part, chunk, crossing_bound, lo_edges, hi_edges, stride, limit, order):
    """``part(chunk, kb)`` (the backend's ``head`` or ``tail``), ``kb`` the crossing bound
    of the pair from its chunks' edges."""
    return part(chunk, crossing_bound(lo_edges[0], hi_edges[1], stride, limit, order))


class _Network:
    """The tasks of the rounds, built pair by pair in the order of the sequence."""

    def __init__(self, graph, chunk_keys, chunks, backend, order):
        self.graph, self.chunks, self.backend, self.order = graph, chunks, backend, order
        self.cur = list(chunk_keys)
        self.stride = probe_stride(chunks[0])  # a lower chunk is never the short last one
        self.edges = {}  # chunk key -> key of its edges

    def key(self, round_id, kind, i):
        return (task_name(kind, self.graph.token, round_id), i)

    def add_edges(self, tasks, round_id, i):
        """The edges task of chunk ``i`` as it is now (``round_id`` None: the first)."""
        k = (task_name("edges", self.graph.token, round_id), i)
        tasks[k] = (edges, self.backend.probe, self.cur[i], self.stride, self.order)
        self.edges[self.cur[i]] = k
        return k

    def compare_split_shared(self, tasks, round_id, lo, hi, gate):
        """One compare-split of a backend that shares whole chunks (``share``): each
        merge reads the partner's crossing elements through the share; ``gate``: keys
        the shares wait for (a share holds its chunk in device memory)."""
        b, key, cur = self.backend, (lambda kind, i: self.key(round_id, kind, i)), self.cur
        for i in (lo, hi):
            tasks[key("share", i)] = (after, list(gate), b.share, cur[i])
        # A merge also waits for its own chunk's share, so that the partner is not kept
        # waiting behind it on this worker.
        tasks[key("low", lo)] = (after, [key("share", lo)], b.merge_low_shared, cur[lo],
                                 key("share", hi), self.order)
        tasks[key("high", hi)] = (after, [key("share", hi)], b.merge_high_shared, cur[hi],
                                  key("share", lo), self.order)
        cur[lo], cur[hi] = key("low", lo), key("high", hi)

    def mark_done(self, tasks, round_id, lo, hi):
        """Keys that are computed (as None, on each chunk's worker) once the new chunks
        of the pair are: a gate that moves no data (a gate on the chunks would fetch them)."""
        keys = [self.key(round_id, "done", i) for i in (lo, hi)]
        for k, i in zip(keys, (lo, hi), strict=False):
            tasks[k] = (after, [self.cur[i]], _none)
        return keys

    def compare_split(self, tasks, round_id, lo, hi, gate):
        """The tasks of one compare-split; ``gate``: keys its tail and head wait for."""
        b, key, cur = self.backend, (lambda kind, i: self.key(round_id, kind, i)), self.cur
        limit = min(self.chunks[lo], self.chunks[hi])
        bound = (b.crossing_bound, self.edges[cur[lo]], self.edges[cur[hi]], self.stride,
                 limit, self.order)
        tasks[key("tail", lo)] = (after, list(gate), crossing_part, b.tail, cur[lo], *bound)
        tasks[key("head", hi)] = (after, list(gate), crossing_part, b.head, cur[hi], *bound)
        # A merge also waits for its own chunk's part (made on the same worker), so that
        # the chunk it replaces is freed when it ends.
        tasks[key("low", lo)] = (after, [key("tail", lo)], b.merge_low, cur[lo],
                                 key("head", hi), self.order)
        tasks[key("high", hi)] = (after, [key("head", hi)], b.merge_high, cur[hi],
                                  key("tail", lo), self.order)
        cur[lo], cur[hi] = key("low", lo), key("high", hi)


def network_layers(graph, chunk_keys, chunks, backend, order, window=None, run=1,
                   local="radix"):
    """Add one layer per round of the network; returns the keys of the sorted chunks.

    At most ``window`` pairs (None: no limit) are between their ``tail`` and ``head``
    and their merges at once.  ``run``: every ``run`` consecutive chunks hold one
    sorted run already (``plan.plan_network``); then the rounds of a stage whose pairs
    lie inside such groups are replaced by one sort of each group as one
    (``group_steps``), on its worker."""
    net = _Network(graph, chunk_keys, chunks, backend, order)
    steps = group_steps(plan_network(len(chunks), run=run), run)
    shared = backend.shares
    if steps and not shared:
        tasks = {}
        for i in range(len(chunks)):
            net.add_edges(tasks, None, i)
        graph.add("edges", tasks, set(graph.layers))
    total = sum(len(r.pairs) for r in steps if r is not None)
    made = []  # per pair of the sequence: keys that say its new chunks are made
    for round_id, rnd in enumerate(steps):
        tasks = {}
        later = round_id + 1 < len(steps)
        if rnd is None:  # the group's own rounds: one sort of each group
            regroup_tasks(net, tasks, round_id, run, local, edges=later and not shared)
            graph.add(f"round{round_id:02d}", tasks, set(graph.layers))
            continue
        for lo, hi in spread_order(rnd.pairs, len(chunks)):
            s = len(made)
            gate = made[s - window] if window and s >= window else ()
            if shared:
                net.compare_split_shared(tasks, round_id, lo, hi, gate)
                made.append(net.mark_done(tasks, round_id, lo, hi)
                            if window and s + window < total else [])
                continue
            net.compare_split(tasks, round_id, lo, hi, gate)
            edges = later or (window and s + window < total)
            made.append([net.add_edges(tasks, round_id, i) for i in (lo, hi)] if edges
                        else [])
        # A round reads chunks that any earlier round (or the prepare layer) made.
        graph.add(f"round{round_id:02d}", tasks, set(graph.layers))
    return net.cur


def regroup_tasks(net, tasks, round_id, run, local, edges):
    """One task per group of ``run`` positions sorting its current chunks as one
    (``regroup``), and the chunks (slices) it gives as the new chunks."""
    graph, cur = net.graph, net.cur
    for lo, hi in group_bounds(len(cur), run):
        # Keyed by its first position, as the chunk it reads there: the scheduler plugin
        # (``taskkeys.keeps``) then runs it on that chunk's worker, which holds the group.
        gkey = (task_name("regroup", graph.token, round_id), lo)
        tasks[gkey] = (regroup, net.backend, local, net.order, list(net.chunks[lo:hi]),
                       list(cur[lo:hi]))
        for i in range(lo, hi):
            cur[i] = net.key(round_id, "part", i)
            tasks[cur[i]] = (operator.getitem, gkey, i - lo)
            if edges:
                net.add_edges(tasks, round_id, i)


def regroup(backend, local, order, sizes, parts):
    """The backend chunks ``parts`` sorted as one run (``backend.sort_run``), as chunks
    of ``sizes``, each in storage of its own (:func:`split_run`)."""
    keyed = isinstance(parts[0], tuple)
    xp = _namespace(parts[0][0] if keyed else parts[0])
    if keyed:
        k, v = (xp.concatenate([p[j] for p in parts]) for j in (0, 1))
    else:
        k, v = xp.concatenate(parts), None
    run = backend.sort_run(k, v, order, local)
    del k, v, parts  # the run alone is held while its chunks are copied out
    return split_run(run, sizes, separate=True)


def split_run(run, sizes, separate):
    """The sorted ``run`` as chunks of ``sizes``: slices of it, or, ``separate``, copies
    each in storage of its own.

    The network's chunks are copies: a merge replaces one chunk at a time, and a slice
    holds its whole run, so the runs of a round's partly merged groups would stay on
    the device beside the merges' outputs (at worst a second copy of the data; the
    copies cost one pass over the group, the run freed as the task ends).  A
    one-device sort's chunks, and those of a group that holds every chunk (no merge
    follows), are the output's: slices.  A run of one chunk is that chunk's own storage.

    >>> [c.base is None for c in split_run(np.arange(4), (3, 1), separate=True)]
    [True, True]
    """
    ends = list(itertools.accumulate(sizes))
    chunks = (slice_chunk(run, e - n, e) for e, n in zip(ends, sizes, strict=False))
    if not separate or len(sizes) == 1:
        return tuple(chunks)
    return tuple(make_chunk(*(None if a is None else a.copy() for a in parts_of(c)))
                 for c in chunks)


def sort_layers(graph, keys_name, values_name, chunks, backend, order, positions,
                window=None, perm=None, group=1, local="radix"):
    """Prepare (copy and sort) every chunk, then run the network.

    ``keys_name`` and ``values_name`` (or None) name the input arrays, whose
    1-D chunking ``chunks`` must be regular (``distsort.plan.network.is_regular``).
    ``positions`` makes the values the positions ``0 .. n-1``; ``window`` limits the
    pairs in flight (``network_layers``).  ``perm`` (``distsort.plan.placement.placement``)
    feeds input chunk ``perm[p]`` to position ``p`` of the network (None: chunk ``p``);
    positions stay the input's element indices.  ``group`` (a power of two): every
    ``group`` consecutive positions are sorted as one (``group_prepare``) and the
    network starts past them.  ``local``: the plan's local sort (``SortPlan.local``),
    for backends that have more than one.
    Returns the keys of the sorted chunks, in backend form.
    """
    perm = tuple(range(len(chunks))) if perm is None else tuple(perm)
    keys = [(task_name("prepare", graph.token), p) for p in range(len(chunks))]
    if group > 1:
        pieces = tuple(tuple((perm[p], 0, chunks[perm[p]]) for p in range(lo, hi))
                       for lo, hi in group_bounds(len(chunks), group))
        pieces_layers(graph, keys, pieces, chunks, chunks, keys_name, values_name, backend,
                      order, group, local, positions, separate=group < len(chunks))
    else:
        first = starts(perm, chunks[0]) if positions else (None,) * len(chunks)
        tasks = {}
        for p, i in enumerate(perm):
            value = (values_name, i) if values_name is not None else None
            tasks[keys[p]] = (backend.prepare, (keys_name, i), value, order, first[p], local)
        graph.add("prepare", tasks, input_names(keys_name, values_name))
    return network_layers(graph, keys, chunks, backend, order, window, run=group, local=local)


def input_names(keys_name, values_name):
    """The names of the arrays whose chunks a layer reads by key (those read in place
    depend on no layer)."""
    return {n for n in (keys_name, values_name) if n and not isinstance(n, READ_IN_PLACE)}


class Inline:
    """An input's chunks, held in this process, handed to the tasks that read them
    instead of their keys (``distsort.inputs.chunks_in_memory``: an array persisted on
    Dask's local schedulers, a wrapped NumPy or CuPy array).  Dask neither walks nor
    copies it: the scheduler then orders, tracks and releases no key per input chunk,
    which for 10,000 chunks cost it more than the sort.

    >>> Inline(("a", "b")).take([1, 0]).chunks
    ('b', 'a')
    """

    __slots__ = ("chunks",)

    def __init__(self, chunks):
        self.chunks = tuple(chunks)

    def take(self, indices):
        return Inline(map(self.chunks.__getitem__, indices))


#: What a task may take instead of its input chunks' keys: their ``take(indices)`` is
#: what a task reads, their ``chunks`` the chunks themselves.
READ_IN_PLACE = (Inline, HeldChunks)


def chunk_reads(source, indices):
    """What a task takes to read the input chunks ``indices`` of ``source`` (an array's
    name, its chunks :class:`Inline`, or the keys of its persisted chunks
    ``HeldChunks``)."""
    if isinstance(source, READ_IN_PLACE):
        return source.take(indices)
    return [(source, i) for i in indices]


def pieces_layers(graph, keys, pieces, in_chunks, chunks, keys_name, values_name, backend,
                  order, group, local, positions, separate=True):
    """The tasks that sort each group of ``group`` consecutive positions as one
    (``group_prepare``, one task on one worker) from the slices ``pieces[g]``
    (``(input chunk, start, stop)``) of the input chunks (of sizes ``in_chunks``), and
    the chunks of sizes ``chunks`` they give, as the keys ``keys``: copies, or slices of
    the sorted run where not ``separate`` (:func:`split_run`).  ``keys_name`` and
    ``values_name`` may be :data:`READ_IN_PLACE`."""
    offsets = np.cumsum((0, *in_chunks), dtype=np.int64)
    tasks, parts = {}, {}
    for (lo, hi), mine in zip(group_bounds(len(chunks), group), pieces, strict=True):
        # Keyed by its first position: the scheduler plugin (``taskkeys.keeps``: a
        # ``distsort-group`` task reads input chunks of any index) runs it where its
        # input lives.
        gkey = (task_name("group", graph.token), lo)
        # Arrays, not lists: Dask walks every list of a task for keys (a group sort of
        # 10,000 input chunks spent a second there).
        rows = np.array(mine, dtype=np.int64).reshape(-1, 3)
        read, bounds = rows[:, 0].tolist(), rows[:, 1:]
        firsts = offsets[rows[:, 0]] + rows[:, 1] if positions else None
        values = chunk_reads(values_name, read) if values_name is not None else None
        tasks[gkey] = (group_prepare, backend, local, order, firsts, bounds,
                       list(chunks[lo:hi]), chunk_reads(keys_name, read), values, separate)
        for p in range(lo, hi):
            parts[keys[p]] = (operator.getitem, gkey, p - lo)
    graph.add("group", tasks, input_names(keys_name, values_name))
    graph.add("prepare", parts, {f"distsort-group-{graph.token}"})


def group_prepare(backend, local, order, firsts, bounds, sizes, keys, values,
                  separate=True):
    """Sort the slices ``bounds`` (rows ``(start, stop)``) of the input chunks ``keys``
    (and of ``values``, or positions from ``firsts``, the index of each slice's first
    element, where not None) as one run; returns it as chunks of ``sizes`` elements
    (slices of the run, or copies where ``separate``: :func:`split_run`).  ``keys`` and
    ``values``: the chunks, or :data:`READ_IN_PLACE`.
    Both ``firsts`` and ``values``: equal keys in the order of their positions, the
    values moving with them (``backend.stable_sort``; ``stable=True`` of
    ``sort_by_key``), the slices in position order."""
    keys, values = (c.chunks if isinstance(c, READ_IN_PLACE) else c for c in (keys, values))
    xp = _namespace(keys[0])
    bounds = bounds.tolist()

    stable = firsts is not None and values is not None

    def gathered(arrays):  # a new array: the sort below owns it
        parts = [xp.asarray(c).ravel()[a:b] for c, (a, b) in zip(arrays, bounds, strict=True)]
        if stable and len(parts) == 1:  # a stable sort only reads: no copy
            return parts[0]
        return xp.concatenate(parts)

    # A chunk too large for the device is refused before it is gathered.
    vbytes = values[0].dtype.itemsize if values is not None else 8 if firsts is not None else 0
    backend.check_fits(max((b - a for a, b in bounds), default=0), keys[0].dtype.itemsize + vbytes)
    k = gathered(keys)
    increasing = firsts is not None and bool(np.all(firsts[1:] > firsts[:-1]))
    if stable:
        if not increasing:
            raise ValueError("a stable group sort reads its slices in position order")
        run = backend.stable_sort(k, gathered(values), order)
        v = None
    else:
        v = (_positions_of(xp, firsts, bounds) if firsts is not None
             else gathered(values) if values is not None else None)
        run = backend.sort_owned(k, v, order, local, increasing_values=increasing)
    del k, v  # the run alone is held while its chunks are copied out
    return split_run(run, sizes, separate)


def chunk_output_layer(graph, out_name, source, backend, order, local, part, finish_args):
    """The output array's layer of a one-chunk sort (``SortPlan.one_task``): one task,
    ``sort_chunk``, reads the input's chunk (``source``: the input's name, or its chunk
    :class:`Inline`) and gives part ``part`` (0 the keys, 1 an argsort's positions) of
    the sorted chunk; no other task runs.

    Each output sorts on its own, so neither reads the other's tasks and no task
    has two dependents to be fused differently in different graphs (the reason of
    ``_output_layer``'s gate): computing argsort's positions gathers no key."""
    inline = isinstance(source, Inline)
    graph.layers[out_name] = {(out_name, 0): (sort_chunk, backend, local, order, part,
                                              source if inline else (source, 0),
                                              finish_args)}
    graph.dependencies[out_name] = set() if inline else {source}
    return out_name


def sort_chunk(backend, local, order, part, chunk, finish_args):
    """Part ``part`` of one whole ``chunk`` sorted on its own: ``backend.sort_chunk``,
    or a sort by ``prepare`` then ``finish_keys``/``finish_values`` (``finish_args``)."""
    if isinstance(chunk, Inline):
        chunk = chunk.chunks[0]
    return backend.sort_chunk(chunk, order, local, part, finish_args)


def _positions_of(xp, firsts, bounds):
    """The positions of the elements of the slices ``bounds`` whose first elements are
    at ``firsts``: one ``arange`` where the slices follow each other (one-device, most
    group sorts), else one per slice.

    >>> _positions_of(np, np.array([0, 2, 9]), [(0, 2), (0, 1), (0, 2)]).tolist()
    [0, 1, 2, 9, 10]
    """
    lengths = np.array([b - a for a, b in bounds], dtype=np.int64)
    if np.array_equal(firsts[1:], firsts[:-1] + lengths[:-1]):
        return xp.arange(int(firsts[0]), int(firsts[0]) + int(lengths.sum()), dtype="int64")
    return xp.concatenate([xp.arange(int(f), int(f) + int(n), dtype="int64")
                           for f, n in zip(firsts, lengths, strict=True)])


def plan_layers(graph, plan, keys_name, values_name, in_chunks, backend, order, positions):
    """The layers of a ``distsort.plan.sortplan.SortPlan`` on the input arrays ``keys_name``
    and ``values_name`` (or None), chunked as ``in_chunks`` (``plan.chunks`` where
    the plan rechunks them); returns the keys of the sorted chunks (runs, out of
    core), in backend form."""
    if plan.out_of_core is not None:
        ooc = plan.out_of_core
        return out_of_core_layers(graph, keys_name, values_name, plan.chunks, backend, order,
                                  positions, ooc.plan.run_chunks, stage=ooc.stage,
                                  window=plan.window, perm=ooc.perm, held=ooc.held)
    if plan.pieces is None:
        return sort_layers(graph, keys_name, values_name, plan.chunks, backend, order,
                           positions, plan.window, plan.perm, plan.group, plan.local)
    keys = [(task_name("prepare", graph.token), p) for p in range(len(plan.chunks))]
    pieces_layers(graph, keys, plan.pieces, in_chunks, plan.chunks, keys_name, values_name,
                  backend, order, plan.group, plan.local, positions,
                  separate=plan.strategy != "one-device" and plan.group < len(plan.chunks))
    if plan.strategy == "one-device":
        return keys
    return network_layers(graph, keys, plan.chunks, backend, order, plan.window,
                          run=plan.group, local=plan.local)


def finish_layer(graph, out_name, sorted_keys, func, *args):
    """The output array's layer: ``(out_name, i) = func(chunk_i, *args)``."""
    return _output_layer(graph, out_name, {(out_name, i): (func, k, *args)
                                           for i, k in enumerate(sorted_keys)})


def _output_layer(graph, out_name, tasks):
    """Add an output array's layer, ``tasks``, each of which also waits for one key
    of the sort's own (``distsort-outputs-<token>``, None, computed once).

    With two dependencies an output task is never fused with the task that makes its
    chunk.  Dask fuses a task into its only dependent and leaves the dependent's key
    as an alias of the fused task: the keys' output would be an alias in a graph of
    the keys alone, where the last merge has one dependent, and a plain task in a
    graph of both outputs, where it has two.  Sent once each way (``k.persist()``,
    then ``dask.compute(k, v)`` of the same lazy arrays), one key would have two
    different tasks, which the scheduler does not reconcile ("Detected different
    `run_spec`": failures and deadlocks).  With the gate, every graph that holds an
    output key holds the same task for it.
    """
    gate = task_name("outputs", graph.token)
    layer = {key: (after, [gate], *task) for key, task in tasks.items()}
    layer[gate] = (_none,)
    graph.dependencies[out_name] = set(graph.layers)
    graph.layers[out_name] = layer
    return out_name


def out_of_core_layers(graph, keys_name, values_name, chunks, backend, order, positions,
                       run_chunks, stage, window=None, perm=None, held=False):
    """Runs of ``run_chunks`` chunks each (:func:`run_layers`), then the network between
    runs; returns the keys of the sorted runs."""
    runs, lengths = run_layers(graph, keys_name, values_name, chunks, backend, order,
                               positions, run_chunks, stage, perm, held)
    return network_layers(graph, runs, lengths, backend, order, window)


def run_layers(graph, keys_name, values_name, chunks, backend, order, positions,
               run_chunks, stage, perm=None, held=False):
    """Runs of ``run_chunks`` chunks each (``backend.make_run``, on the GPU as one);
    returns the runs' keys and their lengths.

    ``backend`` is a ``distsort.backends.outofcore.hostruns.HostRuns``.  With ``stage``, every
    input chunk is first copied to host memory by a task of its own (``backend.stage``,
    where the chunk lives), so that forming a run holds no input chunk on the device;
    with ``held`` too, those tasks read persisted chunks where a worker holds them, with
    no dependency on them (``backend.stage_held``, ``distsort.cluster.held``).
    ``perm`` (``outofcore.group_by_owner``): position ``p`` takes input chunk
    ``perm[p]`` (its elements keep their own positions for argsort).
    Arguments otherwise as ``sort_layers``; ``chunks`` regular.
    """
    from distsort.plan.outofcore import run_lengths

    perm = tuple(range(len(chunks))) if perm is None else tuple(perm)
    offsets = [0]
    for size in chunks:
        offsets.append(offsets[-1] + size)
    deps = {keys_name} | ({values_name} if values_name else set())
    names = [keys_name] + ([values_name] if values_name else [])
    if stage:
        tasks = {}
        for j, name in enumerate(names):
            for i in range(len(chunks)):
                tasks[(f"distsort-stage{'kv'[j]}-{graph.token}", i)] = (
                    (backend.stage_held, Held((name, i))) if held else (backend.stage, (name, i)))
        graph.add("stage", tasks, deps)
        names = [f"distsort-stage{'kv'[j]}-{graph.token}" for j in range(len(names))]
    tasks = {}
    for r, lo in enumerate(range(0, len(chunks), run_chunks)):
        idx = perm[lo:lo + run_chunks]
        pieces = [[(name, i) for i in idx] for name in names]
        tasks[("distsort-run-" + graph.token, r)] = (
            backend.make_run, pieces[0], pieces[1] if len(pieces) > 1 else None, order,
            [offsets[i] for i in idx] if positions else None)
        # by position: the last (maybe short) chunk stays last (group_by_owner)
    graph.add("run", tasks, set(graph.layers) | deps)
    runs = [("distsort-run-" + graph.token, r) for r in range(len(tasks))]
    return runs, run_lengths([chunks[i] for i in perm], run_chunks)


def run_output_layer(graph, out_name, sorted_runs, chunks, run_chunks, func, *args):
    """The output array's layer from sorted runs: ``(out_name, j) = func(run, start,
    stop, *args)``, chunk ``j`` being elements ``start:stop`` of its run."""
    tasks = {}
    for j, size in enumerate(chunks):
        r, first = divmod(j, run_chunks)
        start = first * chunks[0]
        tasks[(out_name, j)] = (func, sorted_runs[r], start, start + size, *args)
    return _output_layer(graph, out_name, tasks)


def graph_over(collections, layers, dependencies):
    """One ``HighLevelGraph``: new ``layers`` (``{name: {key: task}}``, with their
    ``dependencies``) on top of the graphs of the Dask ``collections`` they read.

    The single place where distsort's layers join the graphs of the arrays they sort.
    """
    from dask.highlevelgraph import HighLevelGraph
    all_layers, all_deps = {}, {}
    for c in collections:
        g = c.__dask_graph__()
        if not isinstance(g, HighLevelGraph):
            g = HighLevelGraph.from_collections(c.__dask_layers__()[0], g)
        all_layers.update(g.layers)
        all_deps.update(g.dependencies)
    all_layers.update(layers)
    all_deps.update({name: set(d) for name, d in dependencies.items()})
    return HighLevelGraph(all_layers, all_deps)
