"""The k-way merge of out-of-core runs: splitters and segments on integers against
brute force, the host runs' searches, the cost model, and whole sorts through the
k-way layers under a tiny budget on every dtype (NumPy engine), on one worker and
with runs on two workers that exchange slices."""
import itertools

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import distsort
import distsort.api
from distsort.plan import sortplan
from distsort.backends import Order
from distsort.backends import chunk
from distsort.backends.outofcore import hostruns
from distsort.plan import kway
from distsort.graph import outofcore as outofcore_graph
from distsort.plan.kway import brackets, choose_merge, co_ranks, searcher, segment_bounds

from arrays import (DTYPES, assert_sorted_like_numpy, bits, brute_co_ranks, forget_transfers,
                    persisted_on_two_workers, random_keys, received_keys, stable_argsort)

ORDERS = [Order(), Order(descending=True), Order(keyed=True),
          Order(descending=True, keyed=True)]


# ---------------------------------------------------------------- splitters
@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.integers(0, 6), max_size=12).map(sorted).map(tuple),
                min_size=1, max_size=7))
def test_co_ranks_equal_the_stable_merge_on_integers(runs):
    total = sum(len(r) for r in runs)
    for rank in range(total + 1):
        got = co_ranks([len(r) for r in runs], rank, searcher(runs))
        assert got == brute_co_ranks(runs, rank)


def test_co_ranks_clip_out_of_range_ranks():
    runs = [(1, 2), (3,)]
    assert co_ranks((2, 1), -5, searcher(runs)) == (0, 0)
    assert co_ranks((2, 1), 99, searcher(runs)) == (2, 1)
    assert co_ranks((), 0, searcher([])) == ()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 6), max_size=25).map(sorted).map(tuple),
                          st.integers(1, 4)), min_size=1, max_size=6))
def test_brackets_hold_each_rank_between_two_samples_near_it(runs_steps):
    """The samples ``brackets`` picks for a rank have ranks on either side of it
    (counted by brute force in the stable merge), within ``2 * sum(steps) + max(steps)``
    of each other: the windows the exact search of several workers reads."""
    runs = [r for r, _ in runs_steps]
    steps = [s for _, s in runs_steps]
    lengths = [len(r) for r in runs]
    samples = sorted((r[p], j, p) for j, (r, s) in enumerate(zip(runs, steps, strict=True))
                     for p in range(s - 1, len(r), s))
    merged = [j for _, j, _ in samples]
    total = sum(lengths)

    def rank(handle, missing):
        if handle is None:
            return missing
        j, p = handle
        return sum(searcher(runs)(j, p, [0] * len(runs), lengths))
    ranks = list(range(total + 1))
    for r, (low, high) in zip(ranks, brackets(lengths, steps, merged, ranks), strict=True):
        assert low is None or (runs[low[0]][low[1]], low[0], low[1]) in samples
        lo, hi = rank(low, 0), rank(high, total)
        assert lo <= r <= hi
        assert hi - lo <= 2 * sum(steps) + max(steps)


@pytest.mark.parametrize("order", ORDERS, ids=repr)
@pytest.mark.parametrize("dtype", ["float32", "int16", "uint8", "float64", "bool"])
@pytest.mark.parametrize("samples_per_run", [3, 1 << 16])
def test_splitters_of_several_workers_equal_the_co_ranks_of_one(monkeypatch, order, dtype,
                                                                samples_per_run):
    """Samples, pivots, windows, splitters (``outofcore_graph.exchange_*``: what runs on
    several workers find with small messages) give the co-ranks that one worker's search
    of all the runs gives, for every output chunk's end."""
    monkeypatch.setattr(kway, "SAMPLES_PER_RUN", samples_per_run)
    rng = np.random.default_rng(samples_per_run + len(dtype))
    engine = hostruns.HostRuns()
    made = []
    for n in (37, 0, 50, 50, 11):
        k = random_keys(rng, n, dtype, duplicates=True)
        v = rng.integers(-3, 3, n).astype(np.int32) if order.keyed else None
        made.append(engine.make_run([k], None if v is None else [v], order))
    lengths = tuple(chunk.length(r) for r in made)
    ends = (0, 1, 17, 60, 61, 120, sum(lengths) - 1)
    steps = tuple(kway.sample_step(n) for n in lengths)
    samples = [hostruns.run_sample(r, s) for r, s in zip(made, steps, strict=True)]
    pivots = outofcore_graph.exchange_pivots(lengths, steps, ends, order, samples)
    windows = [outofcore_graph.run_windows(r, j, order, pivots) for j, r in enumerate(made)]
    cuts = outofcore_graph.exchange_splitters(lengths, ends, order, windows)
    before = hostruns.run_searcher(made, order)
    want = [co_ranks(lengths, e, before) for e in ends]
    assert cuts == [(0,) * len(made), *want, lengths]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=8), st.integers(1, 13))
def test_segment_bounds_cut_each_chunk_into_fitting_equal_segments(chunks, segment):
    bounds = segment_bounds(tuple(chunks), segment)
    ends = list(itertools.accumulate(chunks, initial=0))
    assert len(bounds) == len(chunks)
    for j, b in enumerate(bounds):
        assert (b[0], b[-1]) == (ends[j], ends[j + 1])
        sizes = [y - x for x, y in itertools.pairwise(b)]
        assert all(0 <= s <= segment for s in sizes)
        assert max(sizes) - min(sizes) <= 1  # equal, to one element
        assert len(sizes) == max(1, -(-chunks[j] // segment))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 5), max_size=15).map(sorted).map(tuple),
                min_size=1, max_size=5), st.integers(1, 9))
def test_segments_of_co_ranks_merge_to_the_sorted_whole(runs, segment):
    """Each segment's slices, sorted on their own and put one after the other, are the
    merge: the plan a device engine follows."""
    total = sum(len(r) for r in runs)
    lengths = [len(r) for r in runs]
    cuts = [co_ranks(lengths, b, searcher(runs))
            for b in segment_bounds((total,), segment)[0]]
    out = []
    for c0, c1 in itertools.pairwise(cuts):
        assert all(a <= b for a, b in zip(c0, c1, strict=True))
        out += sorted(v for r, a, b in zip(runs, c0, c1, strict=True) for v in r[a:b])
    assert out == sorted(v for r in runs for v in r)


def _sorted_run(rng, n, dtype, order, float_values=False):
    keys = random_keys(rng, n, dtype, duplicates=True)
    values = None
    if order.keyed:  # integer values are searched in place, float ones on their codes
        values = (random_keys(rng, n, "float32", duplicates=True) if float_values
                  else rng.integers(0, 3, n).astype(np.int32))
    run = chunk.make_chunk(keys, values)
    perm = sorted(range(n), key=lambda i: hostruns.code(run, i, order))
    return chunk.make_chunk(keys[perm], None if values is None else values[perm])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=1, max_size=5), st.sampled_from(ORDERS),
       st.sampled_from(["int8", "float16", "float32", "uint64", "bool"]),
       st.integers(0, 2**32 - 1))
def test_host_run_searcher_equals_the_reference_on_codes(sizes, order, dtype, seed):
    """The host runs' lock-step searches give the co-ranks of the runs' order codes
    (NaN, -0.0/+0.0, descending and the keyed tie-break by integer or float values
    included)."""
    rng = np.random.default_rng(seed)
    runs = [_sorted_run(rng, n, dtype, order, float_values=seed % 2) for n in sizes]
    codes = [tuple(hostruns.code(r, i, order) for i in range(hostruns.length(r)))
             for r in runs]
    for rank in range(sum(sizes) + 1):
        got = co_ranks(sizes, rank, hostruns.run_searcher(runs, order))
        assert got == co_ranks(sizes, rank, searcher(codes))


# ---------------------------------------------------------------- the cost model
def test_cost_model_prefers_one_pass_and_keeps_the_network_for_tiny_budgets():
    """One k-way pass (an exchange of slices where the runs are on several workers)
    unless the budget is so small that its slices are a few elements."""
    from distsort.plan.outofcore import bytes_moved, plan_out_of_core, run_lengths

    def choice(chunks, itemsize, budget, workers=1):
        p = plan_out_of_core(chunks, itemsize, budget)
        lengths = run_lengths(chunks, p.run_chunks)
        return choose_merge(lengths, itemsize, budget, bytes_moved(p, lengths, itemsize),
                            workers)

    assert choice((2**28,) * 16, 4, 4 * 10**9) == "kway"  # 16 GiB, 4 GB: 2x vs 6x
    assert choice((2**28,) * 24, 4, 4 * 10**9) == "kway"
    assert choice((2**27,) * 16, 16, 4 * 10**9) == "kway"  # argsort-sized elements
    assert choice((64,) * 16, 4, 1000) == "network"  # slices of a few elements
    assert choice((2**28,) * 16, 4, 4 * 10**9, workers=2) == "exchange"  # runs on two
    assert choice((64,) * 16, 4, 1000, workers=2) == "network"
    assert choice((10,) * 4, 4, 10**6) == "network"  # one run: nothing to merge
    # keyed CuPy output picked from the merged chunks on the device: each pick may copy
    # its spilled chunk back from pinned memory, at the link's speed
    p = plan_out_of_core((2**27,) * 16, 8, 4 * 10**9)
    lengths = run_lengths((2**27,) * 16, p.run_chunks)
    network = bytes_moved(p, lengths, 8)
    assert choose_merge(lengths, 8, 4 * 10**9, network, picked_bytes=2**34) == "kway"
    assert choose_merge(lengths, 8, 4 * 10**9, network, picked_bytes=2**36) == "network"
    assert choose_merge(lengths, 8, 4 * 10**9, network // 3, picked_bytes=2**34) == "network"


# ---------------------------------------------------------------- whole sorts
def _budget(chunk, itemsize, runs_of=3):
    return int(runs_of * chunk * itemsize / 0.85) + 1


@pytest.fixture
def kway_always(monkeypatch):
    """The k-way merge wherever there is more than one run (the cost model keeps the
    network for budgets this tiny)."""
    monkeypatch.setattr(sortplan, "choose_merge",
                        lambda lengths, *a, **k: "kway" if len(lengths) > 1 else "network")


def _run(fn, chunk, itemsize, runs_of):
    with dask.config.set({"distsort.device-memory-limit": _budget(chunk, itemsize, runs_of),
                          "distsort.out-of-core-engine": "cpu"}):
        out = fn()
    first = out[0] if isinstance(out, tuple) else out
    merges = [t for layer in first.dask.layers.values() for t in layer.values()
              if isinstance(t, tuple) and t and getattr(t[0], "__name__", "") == "merge_chunk"]
    return out, bool(merges)


def _assert_equal_bits(got, want):
    assert got.dtype == want.dtype and np.array_equal(bits(got), bits(want))


def _sorts_and_argsort(x, xd):
    """``(make, bytes per element, check)`` of the sort of ``xd`` (a Dask array of
    ``x``) in both orders and its argsort, checked against NumPy."""
    k = x.dtype.itemsize
    return [(lambda: distsort.sort(xd), k, lambda g: assert_sorted_like_numpy(g, x)),
            (lambda: distsort.sort(xd, descending=True), k,
             lambda g: assert_sorted_like_numpy(g, x, descending=True)),
            (lambda: distsort.argsort(xd), k + 8,
             lambda g: _assert_equal_bits(g, stable_argsort(x)))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,chunk,runs_of", [(777, 50, 3), (10, 3, 1)])
def test_kway_sorts_equal_numpy_bit_for_bit(kway_always, dtype, n, chunk, runs_of):
    """Out of core through the k-way merge: sorts equal NumPy's (and the in-memory
    path's bit patterns), argsort and stable sort_by_key NumPy's stable order."""
    rng = np.random.default_rng(n + chunk)
    x = random_keys(rng, n, dtype, duplicates=True)
    values = rng.integers(-50, 50, n).astype(np.int16)
    wide = rng.integers(-2**60, 2**60, n)  # int64 values: the argsort-and-gather path
    xd, vd, wd = (da.from_array(a, chunks=chunk) for a in (x, values, wide))
    k = x.dtype.itemsize
    cases = [
        *_sorts_and_argsort(x, xd),
        (lambda: distsort.argsort(xd, descending=True), k + 8,
         lambda g: _assert_equal_bits(g, stable_argsort(x, descending=True))),
        (lambda: distsort.sort_by_key(xd, vd, stable=True)[1], k + 8,
         lambda g: _assert_equal_bits(g, values[stable_argsort(x)])),
        (lambda: distsort.sort_by_key(xd, wd, descending=True, stable=True)[1], k + 8,
         lambda g: _assert_equal_bits(g, wide[stable_argsort(x, descending=True)])),
    ]
    for fn, itemsize, check in cases:
        out, used = _run(fn, chunk, itemsize, runs_of)
        assert used == (n > _budget(chunk, itemsize, runs_of) * 0.85 / itemsize)
        got = out.compute(scheduler="sync")
        check(got)
        _assert_equal_bits(got, fn().compute(scheduler="sync"))  # the in-memory path


@pytest.mark.parametrize("dtype", ["float32", "int16", "uint64"])
def test_no_merge_reads_the_run_ranges_an_earlier_merge_consumed(kway_always, monkeypatch,
                                                                 dtype):
    """The GPU engine keeps a merged chunk's host copy in the run ranges it consumed:
    with every merge task overwriting its ranges with garbage once it is done, the
    sorts still equal NumPy's (no search or later merge reads those ranges)."""
    from distsort.backends.outofcore import stream_cpu
    merge = stream_cpu.merge_segments

    def merge_then_poison(runs_, cuts, order, like_gpu, budget):
        out = merge(runs_, cuts, order, like_gpu, budget)
        out = tuple(p.copy() for p in out) if isinstance(out, tuple) else out.copy()
        for r, run in enumerate(runs_):
            for part in (run if isinstance(run, tuple) else (run,)):
                part[cuts[0][r]:cuts[-1][r]] = np.array(-1).astype(part.dtype)
        return out
    monkeypatch.setattr(stream_cpu, "merge_segments", merge_then_poison)
    rng = np.random.default_rng(7)
    x = random_keys(rng, 901, dtype, duplicates=True)
    values = rng.integers(-50, 50, 901).astype(np.int16)
    xd, vd = da.from_array(x, chunks=40), da.from_array(values, chunks=40)
    for fn, itemsize, want in [
            (lambda: distsort.sort(xd), x.dtype.itemsize, None),
            (lambda: distsort.argsort(xd, descending=True), x.dtype.itemsize + 8,
             stable_argsort(x, descending=True)),
            (lambda: distsort.sort_by_key(xd, vd, stable=True)[1], x.dtype.itemsize + 8,
             values[stable_argsort(x)])]:
        out, used = _run(fn, 40, itemsize, 3)
        assert used
        got = out.compute(scheduler="sync")
        if want is None:
            assert_sorted_like_numpy(got, x)
        else:
            _assert_equal_bits(got, want)


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 400), st.integers(8, 70), st.integers(1, 4),
       st.sampled_from(["int16", "float32", "float64", "uint8"]), st.booleans(),
       st.integers(0, 2**32 - 1))
def test_property_kway_equals_the_network(n, chunk, runs_of, dtype, descending, seed):
    """The k-way merge and the network give the same outputs, bit for bit."""
    rng = np.random.default_rng(seed)
    x = random_keys(rng, n, dtype, duplicates=True)
    xd = da.from_array(x, chunks=chunk)
    ops = [lambda: distsort.sort(xd, descending=descending),
           lambda: distsort.argsort(xd, descending=descending)]
    for op, itemsize in zip(ops, (x.dtype.itemsize, x.dtype.itemsize + 8), strict=True):
        outs = []
        for merge in ("kway", "network"):
            with pytest.MonkeyPatch.context() as m:
                m.setattr(sortplan, "choose_merge", lambda *a, merge=merge, **k: merge)
                out, used = _run(op, chunk, itemsize, runs_of)
            assert used == (merge == "kway" and any(
                n.startswith("distsort-run-") for n in out.dask.layers))
            outs.append(out)
        got, want = outs
        _assert_equal_bits(got.compute(scheduler="sync"), want.compute(scheduler="sync"))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "uint64", "int16", "float64"])
@pytest.mark.parametrize("host_input", [False, True])
def test_gpu_engine_kway_equals_the_in_memory_path(kway_always, dtype, host_input):
    """The GPU engine's k-way merge (CuPy chunks, or NumPy chunks sorted on the GPU)
    against NumPy and the in-memory GPU path, bit for bit."""
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(11)
    n, chunk = 300_001, 20_000
    x = random_keys(rng, n, dtype, duplicates=True)
    values = rng.integers(0, 2**31, n).astype(np.uint32)
    xp = np if host_input else cupy
    xd = da.from_array(xp.asarray(x), chunks=chunk, asarray=False)
    vd = da.from_array(xp.asarray(values), chunks=chunk, asarray=False)
    config = {"distsort.device-memory-limit": _budget(chunk, 12, 4),
              "distsort.out-of-core-engine": "gpu"}
    with dask.config.set(config):
        outs = [distsort.sort(xd), distsort.sort(xd, descending=True),
                distsort.argsort(xd, descending=True), *distsort.sort_by_key(xd, vd)]
        # keys of 2 bytes fit one run; argsort's 10 or more bytes per element do not
        assert _run(lambda: outs[2], chunk, 12, 4)[1]
        got = dask.compute(*outs, scheduler="sync")
    with dask.config.set({"distsort.device-memory-limit": None}):
        want = dask.compute(distsort.sort(xd), distsort.sort(xd, descending=True),
                            distsort.argsort(xd, descending=True),
                            *distsort.sort_by_key(xd, vd), scheduler="sync")
    host = (lambda a: a) if host_input else (lambda a: a.get())
    got, want = [host(g) for g in got], [host(w) for w in want]
    assert_sorted_like_numpy(got[0], x)
    assert_sorted_like_numpy(got[1], x, descending=True)
    _assert_equal_bits(got[2], stable_argsort(x, descending=True))
    for g, w in zip(got, want, strict=True):
        _assert_equal_bits(g, w)


# ---------------------------------------------------------------- runs on two workers
@pytest.mark.parametrize("dtype", ["float32", "int64", "uint16", "float16"])
def test_runs_on_two_workers_exchange_slices_once_and_equal_numpy(cluster_client, dtype):
    """``distsort.out-of-core-merge: kway`` on two workers: each forms the runs of the
    chunks it holds, and the k-way merge takes its splitters from samples and windows
    and each output chunk's slices from both (``exchange``); sorts, argsorts and stable
    keyed sorts equal NumPy's bit for bit."""
    from distributed import wait

    from distsort.cluster.locality import chunk_owners
    rng = np.random.default_rng(len(dtype))
    n, chunk = 3001, 200
    x = random_keys(rng, n, dtype, duplicates=True)
    values = rng.integers(-2**40, 2**40, n)
    workers = sorted(cluster_client.scheduler_info(n_workers=-1)["workers"])
    xd, vd = (cluster_client.persist(da.from_array(a, chunks=chunk)) for a in (x, values))
    k = x.dtype.itemsize
    cases = [
        *_sorts_and_argsort(x, xd),
        (lambda: distsort.sort_by_key(xd, vd, descending=True, stable=True)[1], k + 8,
         lambda g: _assert_equal_bits(g, values[stable_argsort(x, descending=True)])),
    ]
    with cluster_client.as_current():
        wait([xd, vd])
        assert len(set(chunk_owners(xd.__dask_keys__(), cluster_client))) == len(workers)
        for fn, itemsize, check in cases:
            with distsort.api.planning(device_memory_limit=_budget(chunk, itemsize),
                                       engine="cpu", merge="kway") as plans:
                out = fn()
            assert [p.out_of_core.merge for p in plans] == ["exchange"] * len(plans)
            layers = set(out.dask.layers)
            assert any(name.startswith("distsort-kway-slice-") for name in layers)
            check(cluster_client.compute(out).result())


def test_the_merge_option_is_checked_and_chosen_by_the_plan():
    """``distsort.out-of-core-merge`` refuses unknown values and, on one process, gives
    the plan the merge asked for (the k-way merge of one worker, not the exchange)."""
    x = da.from_array(np.arange(1000.0)[::-1], chunks=100)
    with (pytest.raises(ValueError, match="out-of-core-merge must be one of"),
          distsort.api.planning(device_memory_limit=2000, engine="cpu", merge="fast")):
        distsort.sort(x)
    for merge in ("kway", "network"):  # one process: the k-way merge of one worker
        with distsort.api.planning(device_memory_limit=2000, engine="cpu",
                                   merge=merge) as plans:
            s = distsort.sort(x)
        assert plans[0].out_of_core.merge == merge
        assert np.array_equal(s.compute(scheduler="sync"), np.arange(1000.0))


def test_runs_on_two_workers_send_slices_and_small_results_only(cluster_client):
    """Between the two workers go the output chunks' slices and the splitters' small
    messages: no staged chunk, no run (each forms where its chunks are, and its sample
    and windows are taken where it is)."""
    from distributed import wait
    from distributed.utils import key_split
    rng = np.random.default_rng(5)
    x = rng.standard_normal(6000)
    xd, _ = persisted_on_two_workers(cluster_client, x, 500)
    with cluster_client.as_current():
        wait(xd)
        forget_transfers(cluster_client)
        with distsort.api.planning(device_memory_limit=_budget(500, 8), engine="cpu",
                                   merge="kway") as plans:
            s = distsort.sort(xd)
        assert plans[0].out_of_core.merge == "exchange"
        got = cluster_client.compute(s, sync=True)
        received = {key_split(k) for k in received_keys(cluster_client)}
    assert np.array_equal(got, np.sort(x))
    assert "distsort-kway-slice" in received
    assert not {n for n in received if n.startswith(("distsort-run", "distsort-stage"))}
