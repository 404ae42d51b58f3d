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
import operator
import warnings

import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from distsort.backends.cpu import bands
from distsort.backends.cpu import select as tasks
from distsort.core.xp import namespace
from distsort.plan.kway import brackets
from distsort.plan.select import bands_pay, rank_margin, sample_sizes, sample_steps, top_rank

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
    their median; ``skip_nan``: of the elements that are not NaN (``nanquantile``).

    No chunk is sorted: bands from random samples, one counting pass per chunk
    (:func:`band_layers`).  ``presorted``: every chunk is sorted already, so none is
    sorted again (its ``canonical`` codes are, whichever of ``-0.0`` and ``+0.0`` came
    first): the ranks are read from the runs (:func:`rank_layers`); so they are where
    the ranks are so many that their bands would hold much of the array
    (``distsort.plan.select.bands_pay``), after every chunk is sorted."""
    n = sum(lengths)
    nans = skip_nan and np.dtype(dtype).kind in "fmM"
    if not presorted and bands_pay(lengths, _ranks(n, q, method, dtype, median) if n else []):
        samples = sample_layer(g, chunks, lengths, nans=nans)
        planned = g.add_one("bands", (plan_quantiles, samples, tuple(lengths), q, method,
                                      dtype, median, nans))
        codes = band_layers(g, chunks, (operator.getitem, planned, 0), dtype)
        ranks, counts = (_ranks_of, planned), (operator.getitem, planned, 1)
        return g.add_one("quantile", (finish_quantile, n, q, method, dtype, ranks, codes,
                                      weak_q, module, median, counts))
    # sorted already, or so many ranks that their bands would hold much of the array
    runs = (run_layer(g, chunks, presorted=True, canonical=True) if presorted
            else run_layer(g, chunks))
    if nans:
        counts = g.add("valid", {i: (tasks.valid_count, r, dtype) for i, r in enumerate(runs)})
        ranks = g.add_one("ranks", (nan_ranks, counts, q, method, dtype, median))
        codes = rank_layers(g, runs, lengths, ranks)
        return g.add_one("quantile", (finish_quantile, n, q, method, dtype, ranks, codes,
                                      weak_q, module, median, counts))
    ranks = _ranks(n, q, method, dtype, median) if n else []
    codes = rank_layers(g, runs, lengths, ranks)
    return g.add_one("quantile", (finish_quantile, n, q, method, dtype, ranks, codes,
                                  weak_q, module, median))


def plan_quantiles(samples, lengths, q, method, dtype, median, nans):  # noqa: PLR0913, PLR0917
    """``(bands, counts)``: the :class:`~distsort.backends.cpu.bands.Bands` of the
    ranks the quantiles read and, where NaNs are left out (``nans``), the count of the
    other elements of every chunk (None otherwise)."""
    codes = [s[0] for s in samples]
    if nans:
        counts = [int(n) - s[1] for n, s in zip(lengths, samples, strict=True)]
        ranks = nan_ranks(counts, q, method, dtype, median)
    else:
        counts = None
        ranks = _ranks(sum(lengths), q, method, dtype, median) if sum(lengths) else []
    return bands.plan_bands(codes, lengths, ranks, rank_margin), counts


def _ranks_of(planned):
    return list(planned[0].ranks)


def sample_layer(g, chunks, lengths, **options):
    """A random sample of every chunk's codes (``bands.sample_codes(**options)``), of
    ``distsort.plan.select.sample_sizes``; chunk ``i``'s positions drawn from seed ``i``.
    The layer's name comes from the chunks and the options alone: selections of one
    array computed together (a median and quantiles) share its samples."""
    sample = functools.partial(bands.sample_codes, **options)
    name = "distsort-select-draw-" + tokenize(chunks, sorted(options.items()))
    g.layers[name] = {(name, i): (sample, c, s, i) for i, (c, s)
                      in enumerate(zip(chunks, sample_sizes(lengths), strict=True))}
    return list(g.layers[name])


def band_layers(g, chunks, planned, dtype, **options):
    """The key of a task whose result is the host array of the codes (of ``dtype``'s
    elements) of the ranks of the bands ``planned`` (a task giving ``bands.Bands``):
    a counting pass per chunk,
    the ranks found from the passes, a second pass per chunk that runs only where the
    sample missed a rank (it returns at once otherwise), the codes.  ``options``: those
    of ``bands.run_pass``."""
    first = _passes(g, "pass", chunks, bands.run_pass, planned, options)
    found = g.add_one("found", (bands.find_ranks, planned, first))
    again = _passes(g, "again", chunks, bands.run_again, planned, options, found)
    return g.add_one("codes", (_codes_found, planned, found, again, dtype))


def _passes(g, kind, chunks, run, planned, options, *extra):  # noqa: PLR0913, PLR0917
    offsets = options.pop("offsets", None)
    tasks_by_index = {}
    for i, c in enumerate(chunks):
        opts = dict(options, **({"offset": offsets[i]} if offsets is not None else {}))
        tasks_by_index[i] = (functools.partial(run, **opts), c, planned, *extra)
    if offsets is not None:
        options["offsets"] = offsets
    return g.add(kind, tasks_by_index)


def _codes_found(planned, found, again, dtype):
    return np.asarray(bands.ranks_found(planned, found, again), tasks.code_dtype(dtype))


# -- top k

def topk_layers(g, chunks, lengths, k, dtype, *, positions, module):
    """The key of the task that gives the top ``k`` of the chunks (keys, of
    ``lengths``) as ``dask.array.topk`` (``k < 0``: the smallest), or their positions
    (``argtopk``; ties: the later first for ``k > 0``, the earlier for ``k < 0``, as
    the reverse of a stable ascending sort and that sort give them).

    No chunk is sorted: a random sample of every chunk brackets the k-th largest, one
    pass per chunk keeps what lies above the bracket's lower end (about ``k`` elements
    in all), and one task sorts those and takes ``k``."""
    kk, descending, last_equal = abs(int(k)), k < 0, k > 0
    n = sum(lengths)
    out_dtype = np.dtype(np.int64) if positions else np.dtype(dtype)
    if kk == 0 or n == 0:
        return g.add_one("top", (_empty, out_dtype, module))
    kk = min(kk, n)
    # values come back bit for bit; positions treat ties as NumPy does
    options = {"canonical": positions, "descending": descending}
    samples = sample_layer(g, chunks, lengths, **options)
    planned = g.add_one("bands", (plan_top, samples, tuple(lengths), kk))
    offsets = tuple(itertools.accumulate(lengths, initial=0))
    options = dict(options, positions=positions, offsets=offsets)
    first = _passes(g, "pass", chunks, bands.run_pass, planned, dict(options))
    found = g.add_one("found", (bands.top_slots, planned, first, positions))
    again = _passes(g, "again", chunks, bands.run_again, planned, dict(options), found)
    return g.add_one("top", (finish_top, planned, found, first, again, kk, dtype, descending,
                             positions, last_equal, module))


def plan_top(samples, lengths, k):
    """The bands of the top ``k``: the k-th largest's rank, open upwards."""
    return bands.plan_bands([s[0] for s in samples], lengths, [top_rank(sum(lengths), k)],
                            rank_margin, above=True)


def _empty(dtype, module):
    out = np.empty(0, dtype)
    if module == "cupy":
        import cupy
        return cupy.asarray(out)
    return out


def finish_top(planned, found, first, again, k, dtype, descending, positions, last_equal,  # noqa: PLR0913, PLR0917
               module):
    """The top ``k`` from the codes the passes kept (``bands.top_kept``): the largest
    codes first, ties by position (from the last where ``last_equal``); their values,
    or their positions."""
    codes, where = bands.top_kept(planned, found, first, again, k, positions)
    xp = namespace(codes)
    if positions:
        by_place = xp.argsort(where)
        by_place = by_place[::-1] if last_equal else by_place
        order = by_place[_stable_argsort(xp, ~codes[by_place])][:k]
        out = where[order]
    else:
        top = xp.sort(codes)[::-1][:k]
        out = tasks.values_of(xp.ascontiguousarray(top), dtype, descending=descending)
    if module == "cupy" and xp is np:
        import cupy
        return cupy.asarray(out)
    return out


def _stable_argsort(xp, a):
    """``argsort`` that keeps equal elements in order (CuPy's always does)."""
    return np.argsort(a, kind="stable") if xp is np else xp.argsort(a)


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
