"""Graph layers of selection by rank (``distsort.select``): names and chunks, no data.

Every chunk is sorted where it lies (a *run* of order codes,
``distsort.backends.cpu.select.sorted_run``); the element of any rank is then found
without a merge or an exchange, as the k-way merge finds its splitters between workers
(``distsort.plan.kway``, step 4): each run sends a sample, one task brackets every rank
between two samples (``kway.brackets``), each run sends the few codes between them, and
one task picks the codes of the ranks (:func:`rank_layers`).  Quantiles read a few ranks
(:func:`quantile_layers`); the top k read one rank, the threshold, then take from every
chunk what lies above it (:func:`topk_layers`); searches count in every sorted chunk
(:func:`searchsorted_layers`); unique values flag the first of every run of equal codes
of a sorted array (:func:`unique_layers`).

>>> g = Layers("abc")
>>> runs = run_layer(g, [("x", 0), ("x", 1)])
>>> runs[1][0].startswith("distsort-select-run-"), runs[1][1]
(True, 1)
>>> rank_layers(g, runs, (5, 3), [4])
('distsort-select-pick-abc', 0)
>>> list(g.layers)[1:3]
['distsort-select-sample-abc', 'distsort-select-bounds-abc']
"""
from __future__ import annotations

import functools
import itertools
import warnings

import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from distsort.backends.cpu import select as tasks
from distsort.core.xp import namespace
from distsort.plan.kway import brackets
from distsort.plan.select import sample_steps, top_rank

__all__ = ["Layers", "run_layer", "rank_layers", "quantile_layers", "topk_layers",
           "searchsorted_layers", "unique_layers"]


class Layers:
    """Layers named ``distsort-select-<kind>-<token>``, each depending on all before it
    and on the input collections of :meth:`graph`."""

    def __init__(self, token):
        self.token = token
        self.layers = {}

    def add(self, kind, tasks_by_index):
        """A layer of ``{index: task}``; returns its keys in the order given."""
        name = f"distsort-select-{kind}-{self.token}"
        layer = {(name, *np.atleast_1d(i).tolist()): t for i, t in tasks_by_index.items()}
        self.layers[name] = layer
        return list(layer)

    def add_one(self, kind, task):
        return self.add(kind, {0: task})[0]

    def graph(self, *collections):
        """A HighLevelGraph of these layers over the graphs of ``collections``."""
        layers, deps = {}, {}
        for c in collections:
            layers.update(c.__dask_graph__().layers)
            deps.update(c.__dask_graph__().dependencies)
        below = set(layers)
        for name, layer in self.layers.items():
            layers[name], deps[name] = layer, set(below)
            below.add(name)
        return HighLevelGraph(layers, deps)


def run_layer(g, chunks, **options):
    """One sorted run of codes per chunk key of ``chunks`` (``sorted_run(**options)``).
    The layer's name comes from the chunks and the options alone: selections of one
    array computed together (a median and quantiles) share its runs."""
    sort = functools.partial(tasks.sorted_run, **options)
    name = "distsort-select-run-" + tokenize(chunks, sorted(options.items()))
    g.layers[name] = {(name, i): (sort, c) for i, c in enumerate(chunks)}
    return list(g.layers[name])


def rank_bounds(lengths, steps, samples, ranks):
    """For each of ``ranks``, the codes of the two samples that bracket it
    (``kway.brackets``), each None for the start or the end of the merge."""
    codes = np.concatenate(samples)
    which = np.repeat(np.arange(len(samples)), [len(s) for s in samples])
    merged = which[np.argsort(codes, kind="stable")]  # ties: the lower run first
    ranks = [int(r) for r in np.asarray(ranks).tolist()]

    def code(handle):
        if handle is None:
            return None
        j, p = handle
        return samples[j][(p + 1) // steps[j] - 1]
    return [(code(lo), code(hi)) for lo, hi in brackets(lengths, steps, merged, ranks)]


def pick_one(run, ranks):
    """The codes of ``ranks`` of a single run, on the host."""
    return tasks.to_host(run[namespace(run).asarray(np.asarray(ranks, np.int64))])


def rank_layers(g, runs, lengths, ranks):
    """The key of a task whose result is the host array of the codes of ``ranks`` (a
    list, or the key of a task that gives one) of the merge of ``runs`` (of
    ``lengths``): samples, bounds, windows, pick."""
    if len(runs) == 1:
        return g.add_one("pick", (pick_one, runs[0], ranks))
    steps = sample_steps(lengths)
    samples = g.add("sample", {i: (tasks.run_sample, r, s)
                               for i, (r, s) in enumerate(zip(runs, steps, strict=True))})
    bounds = g.add_one("bounds", (rank_bounds, tuple(lengths), steps, samples, ranks))
    windows = g.add("window", {i: (tasks.window_counts, r, bounds) for i, r in enumerate(runs)})
    return g.add_one("pick", (tasks.pick_codes, ranks, bounds, windows))


# -- quantiles

def nan_ranks(counts, q, method, dtype, median):
    """The ranks a quantile (or a median) of the elements that are not NaN reads."""
    return _ranks(sum(counts), q, method, dtype, median) if sum(counts) else []


def _ranks(n, q, method, dtype, median):
    if median:
        return sorted({(n - 1) // 2, n // 2} | ({n - 1} if tasks._supports_nans(dtype) else set()))
    return tasks.quantile_ranks(n, q, method, dtype).tolist()


def finish_quantile(n, q, method, dtype, ranks, codes, weak_q, module, median, counts=None):  # noqa: PLR0913, PLR0917
    """The quantiles (or the median) from the codes of their ranks, as an array of
    ``module`` ("numpy" or "cupy"); ``counts``: the elements not NaN of every run,
    where NaNs are left out."""
    if counts is not None:
        n = sum(counts)
    values = tasks.values_of(np.asarray(codes), dtype)
    if n == 0:  # NumPy's answer to an empty median, or to an all-NaN nan-quantile
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out = (np.mean(np.empty(0, dtype)) if median else
                   np.full(np.shape(q), np.nan, dtype))
    elif median:
        out = tasks.median_finish(n, dtype, ranks, values)
    else:
        out = tasks.quantile_finish(n, q, method, dtype, ranks, values, weak_q)
    out = np.asarray(out)
    if module == "cupy":
        import cupy
        return cupy.asarray(out)
    return out


def quantile_layers(g, chunks, lengths, q, method, dtype, *, weak_q, module,  # noqa: PLR0913
                    skip_nan=False, median=False, presorted=False):
    """The key of the task that gives the quantiles ``q`` (``method``, as
    ``numpy.quantile``) of the chunks ``chunks`` (keys, of ``lengths`` elements), or
    their median; ``skip_nan``: of the elements that are not NaN (``nanquantile``);
    ``presorted``: every chunk is sorted already, so none is sorted again (its
    ``canonical`` codes are, whichever of ``-0.0`` and ``+0.0`` came first)."""
    runs = (run_layer(g, chunks, presorted=True, canonical=True) if presorted
            else run_layer(g, chunks))
    n = sum(lengths)
    if skip_nan and np.dtype(dtype).kind in "fmM":
        counts = g.add("valid", {i: (tasks.valid_count, r, dtype) for i, r in enumerate(runs)})
        ranks = g.add_one("ranks", (nan_ranks, counts, q, method, dtype, median))
        codes = rank_layers(g, runs, lengths, ranks)
        return g.add_one("quantile", (finish_quantile, n, q, method, dtype, ranks, codes,
                                      weak_q, module, median, counts))
    ranks = _ranks(n, q, method, dtype, median) if n else []
    codes = rank_layers(g, runs, lengths, ranks)
    return g.add_one("quantile", (finish_quantile, n, q, method, dtype, ranks, codes,
                                  weak_q, module, median))


# -- top k

def allot_equal(counts, k, last_equal):
    """How many elements equal to the threshold each chunk gives, of ``counts``
    (``(greater, equal)`` per chunk): what the top ``k`` lacks after all the greater
    ones, from the last chunks first where ``last_equal``, else from the first."""
    need = k - sum(c[0] for c in counts)
    out = [0] * len(counts)
    order = range(len(counts) - 1, -1, -1) if last_equal else range(len(counts))
    for i in order:
        out[i] = min(need, counts[i][1])
        need -= out[i]
    return out


def select_chunk(chunk, offset, threshold, allotted, i, last_equal, descending, canonical):  # noqa: PLR0913, PLR0917
    """Chunk ``i``'s part of the top k (``top_select``), or nothing without a threshold."""
    if len(threshold) == 0:
        return np.empty(0, np.uint8), np.empty(0, np.int64)
    return tasks.top_select(chunk, offset, threshold[0], allotted[i], last_equal,
                            descending=descending, canonical=canonical)


def select_run(run, counts, allotted, i):
    """Run ``i``'s part of the top k: its codes above the threshold (``counts``:
    ``(greater, equal)``) and the ``allotted[i]`` equal to it, the last of the sorted
    run; host codes, with no positions."""
    take = counts[0] + allotted[i]
    return tasks.to_host(run[run.size - take:]), np.zeros(take, np.int64)


def finish_top(parts, dtype, descending, positions, last_equal, module):
    """The top k from every chunk's part: the codes from the largest, ties by
    position (from the last where ``last_equal``); their values, or their
    ``positions``."""
    codes = np.concatenate([p[0] for p in parts]).astype(tasks.code_dtype(dtype))
    where = np.concatenate([p[1] for p in parts])
    order = np.lexsort((-where if last_equal else where, ~codes))
    out = where[order] if positions else tasks.values_of(codes[order], dtype,
                                                         descending=descending)
    if module == "cupy":
        import cupy
        return cupy.asarray(out)
    return out


def topk_layers(g, chunks, lengths, k, dtype, *, positions, module):
    """The key of the task that gives the top ``k`` of the chunks (keys, of
    ``lengths``) as ``dask.array.topk`` (``k < 0``: the smallest), or their positions
    (``argtopk``; ties: the later first for ``k > 0``, the earlier for ``k < 0``, as
    the reverse of a stable ascending sort and that sort give them)."""
    kk, descending, last_equal = abs(int(k)), k < 0, k > 0
    canonical = positions  # values come back bit for bit; positions treat ties as NumPy
    run_lengths = tuple(min(kk, n) for n in lengths)
    runs = run_layer(g, chunks, canonical=canonical, descending=descending, top=kk)
    total = sum(run_lengths)
    threshold = rank_layers(g, runs, run_lengths, [top_rank(total, kk)] if total else [])
    counts = g.add("count", {i: (_counts, r, threshold) for i, r in enumerate(runs)})
    allotted = g.add_one("allot", (allot_equal, counts, min(kk, total), last_equal))
    offsets = (0, *itertools.accumulate(lengths))
    if positions:  # positions come from the chunks themselves
        parts = g.add("select", {i: (select_chunk, c, offsets[i], threshold, allotted, i,
                                     last_equal, descending, canonical)
                                 for i, c in enumerate(chunks)})
    else:  # values: the top of each sorted run holds them all
        parts = g.add("select", {i: (select_run, r, counts[i], allotted, i)
                                 for i, r in enumerate(runs)})
    return g.add_one("top", (finish_top, parts, dtype, descending, positions, last_equal,
                             module))


def _counts(run, threshold):
    return tasks.threshold_counts(run, threshold[0]) if len(threshold) else (0, 0)


# -- searches in a sorted array

def sum_counts(*parts):
    """The sum of every sorted chunk's counts before the values."""
    return functools.reduce(lambda a, b: a + b, parts)


def searchsorted_layers(g, sorted_chunks, v_chunks, v_index, side):
    """One task per chunk of ``v_chunks`` (block indices ``v_index``): how many
    elements of the sorted array (``sorted_chunks``, keys in order) come before each
    value; each the sum of the counts in every sorted chunk (``count_before``), which
    is exact for any array whose chunks are each sorted and, for a globally sorted one,
    its global position.  Returns the keys of the sums."""
    parts = g.add("count", {(i, j): (tasks.count_before, s, v, side)
                            for i, v in enumerate(v_chunks)
                            for j, s in enumerate(sorted_chunks)})
    per_v = len(sorted_chunks)
    return g.add("searchsorted", {idx: (sum_counts, *parts[i * per_v:(i + 1) * per_v])
                                  for i, idx in enumerate(v_index)})


# -- unique values of a sorted array

def unique_layers(g, sorted_chunks, offsets):
    """Per chunk of a sorted array (``sorted_chunks``, keys in order): the positions of
    the first element of every run of equal elements (NumPy's equality: ``-0.0 ==
    +0.0``, every NaN equal), and a task of every chunk's first such position and count.
    Returns ``(flags, summary)``."""
    lasts = g.add("last", {i: (tasks.last_code, c) for i, c in enumerate(sorted_chunks)})
    flags = g.add("flags", {i: (tasks.first_of_runs, c, (_previous, lasts[:i]))
                            for i, c in enumerate(sorted_chunks)})
    summary = g.add_one("summary", (tasks.flag_summary, offsets, flags))
    return flags, summary


def _previous(lasts):
    """The last code of the nearest earlier chunk that is not empty, or None."""
    return next((c for c in reversed(lasts) if c is not None), None)
