"""One exchange between workers for in-memory sorts (``distsort.plan.exchange``,
``distsort.graph.exchange``): the plan on tuples, the splitters against brute force, and
whole sorts on 2, 3 and 4 CPU worker processes against NumPy, with the bytes they send
and the stages of tasks that depend across workers."""
import collections
import contextlib
import dataclasses
import itertools
import re

import dask
import dask.array as da
import numpy as np
import pytest
from arrays import (DTYPES, assert_sorted_like_numpy, bits, brute_co_ranks, loopback_client,
                    random_keys, stable_argsort)
from test_api import sort_by_key_reference

import distsort
import distsort.api
from distsort.backends import Order
from distsort.cluster.view import ClusterView
from distsort.plan.exchange import (exchange_fits, exchange_steps, output_owners,
                                    plan_exchange, worker_runs)
from distsort.plan.options import SortOptions
from distsort.plan.sortplan import plan_sort

STRATEGY = "auto"  # conftest: the plan decides


# ---------------------------------------------------------------- the plan, on integers
def _view(workers, owners, memory=2**30):
    names = tuple("abcdefgh"[:workers])
    return ClusterView(workers=names, hosts=("h",) * workers, threads=(1,) * workers,
                       memory_limits=(memory,) * workers, owners=tuple(owners))


def test_runs_are_the_chunks_each_worker_holds_against_brute_force():
    rng = np.random.default_rng(1)
    for _ in range(200):
        w = int(rng.integers(1, 6))
        workers = tuple("abcdef"[:w])
        c = int(rng.integers(1, 12))
        sizes = tuple(int(s) for s in rng.integers(0, 4, c))
        owners = tuple(None if rng.random() < 0.3 else workers[int(rng.integers(w))]
                       for _ in range(c))
        runs = worker_runs(sizes, owners, workers)
        flat = sorted(itertools.chain(*runs))
        assert flat == [i for i in range(c) if sizes[i]]  # every non-empty chunk once
        for run in runs:
            assert list(run) == sorted(run) and run
            known = {owners[i] for i in run if owners[i] is not None}
            assert len(known) <= 1  # one worker's chunks


def test_the_plan_takes_the_exchange_from_three_workers_where_memory_allows():
    four = _view(4, "abcd" * 4)
    p = plan_sort((1000,) * 16, 8, four)
    assert p.strategy == "exchange" and p.rounds == 0 and p.backend == "host-runs"
    assert [tuple(i for i, _, _ in run) for run in p.pieces] == [
        (0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15)]
    assert p.chunks == (1000,) * 16
    # two workers: the network's one round sends what the exchange would
    assert plan_sort((1000,) * 8, 8, _view(2, "ab" * 4)).strategy == "network"
    # too little memory beside the run for what a worker receives: the network
    assert plan_sort((1000,) * 16, 8, _view(4, "abcd" * 4, memory=4 * 30_000)).strategy == \
        "network"
    # forced either way
    forced = SortOptions(strategy="network")
    assert plan_sort((1000,) * 16, 8, four, forced).strategy == "network"
    two = plan_sort((1000,) * 8, 8, _view(2, "ab" * 4), SortOptions(strategy="exchange"))
    assert two.strategy == "exchange" and two.group == 2


def _gpu_view(workers, owners, device):
    return dataclasses.replace(_view(workers, owners), device_limits=(device,) * workers)


def test_the_plan_takes_the_exchange_between_gpu_workers_where_it_fits():
    gpu = SortOptions(gpu=True)
    # two GPU workers: the radix sort of what arrives costs less than the network's bytes
    two = plan_sort((1000,) * 8, 4, _gpu_view(2, "ab" * 4, 10**9), gpu)
    assert (two.strategy, two.backend, two.group) == ("exchange", "device-runs", 2)
    assert [tuple(i for i, _, _ in run) for run in two.pieces] == [(0, 2, 4, 6), (1, 3, 5, 7)]
    four = plan_sort((1000,) * 16, 8, _gpu_view(4, "abcd" * 4, 10**9), gpu)
    assert (four.strategy, four.chunks) == ("exchange", (1000,) * 16)
    # device budgets not known (no GPU reported), or too small beside the radix sort's
    # buffers: the network, unless forced
    assert plan_sort((1000,) * 16, 8, _view(4, "abcd" * 4), gpu).strategy == "network"
    # a worker's run of 4000 float64 keys: 32 kB, its input 32 kB, the radix sort 96 kB
    tight = _gpu_view(4, "abcd" * 4, 150_000)
    assert plan_sort((1000,) * 16, 8, tight, gpu).strategy == "network"
    roomy = _gpu_view(4, "abcd" * 4, 180_000)
    assert plan_sort((1000,) * 16, 8, roomy, gpu).strategy == "exchange"
    # in place: no buffers beside the run (but the merged chunks' room still counts)
    bitonic = SortOptions(gpu=True, local="bitonic")
    assert plan_sort((1000,) * 16, 8, tight, bitonic).strategy == "exchange"
    forced = plan_sort((1000,) * 16, 8, tight, SortOptions(gpu=True, strategy="exchange"))
    assert (forced.strategy, forced.backend) == ("exchange", "device-runs")
    assert plan_sort((1000,) * 16, 8, roomy, SortOptions(gpu=True, strategy="network")
                     ).strategy == "network"

    # the GPU engine runs the tasks, with the plan's local sort
    from distsort.backends.gpu.runs import DeviceRuns
    from distsort.sort1d import _backend_of
    bitonic = plan_sort((1000,) * 16, 8, tight, SortOptions(gpu=True, local="bitonic"))
    assert _backend_of(bitonic) == DeviceRuns(local="bitonic")
    assert type(_backend_of(plan_sort((1000,) * 16, 8, _view(4, "abcd" * 4)))).__name__ == \
        "HostRuns"


def test_the_memory_rule_counts_the_run_and_what_arrives():
    # worker 0 merges chunks 0-1 (200 elements) beside its run of 100: (100 + 400) * 8
    assert exchange_fits((100, 100), (100,) * 4, 8, (4000 / 0.95 + 1,) * 2)
    assert not exchange_fits((100, 100), (100,) * 4, 8, (3999,) * 2)
    assert output_owners(5, 2) == (0, 0, 0, 1, 1)
    assert plan_exchange((3,) * 4, 8, "ab", (None,) * 4, (None, None)) is None  # unknown


def _splitters(runs, chunks, order):
    """The co-ranks of every output chunk's ends, by the tasks of the exchange."""
    from distsort.backends.outofcore.hostruns import run_sample
    from distsort.graph.outofcore import exchange_pivots, exchange_splitters, run_windows
    lengths = tuple(len(r) for r in runs)
    steps = exchange_steps(lengths, len(chunks))
    ends = tuple(itertools.accumulate(chunks))[:-1]
    pivots = exchange_pivots(lengths, steps, ends, order,
                             [run_sample(r, s) for r, s in zip(runs, steps, strict=True)])
    windows = [run_windows(r, j, order, pivots) for j, r in enumerate(runs)]
    return exchange_splitters(lengths, ends, order, windows)


def test_splitters_equal_brute_force_co_ranks_ties_by_run():
    rng = np.random.default_rng(2)
    for trial in range(60):
        k = int(rng.integers(2, 6))
        runs = [np.sort(rng.integers(0, 1 + trial % 7 * 5, int(rng.integers(0, 300))))
                for _ in range(k)]
        n = sum(len(r) for r in runs)
        if not n:
            continue
        chunks = tuple(int(c) for c in da.core.normalize_chunks(int(rng.integers(1, n + 1)),
                                                               (n,))[0])
        cuts = _splitters(runs, chunks, Order())
        tuples = [tuple(r.tolist()) for r in runs]
        for rank, cut in zip(itertools.accumulate((0, *chunks)), cuts, strict=True):
            assert tuple(cut) == brute_co_ranks(tuples, rank)


def test_more_samples_for_more_chunks_and_few_next_to_the_data():
    n = 2**19
    few, many = exchange_steps((n,), 4)[0], exchange_steps((n,), 64)[0]
    assert few > many >= 1
    for g in (2, 4, 8):  # samples of all runs: under 2% of the data
        assert g * (n // exchange_steps((n,), 4 * g)[0]) < 0.02 * g * n


# ---------------------------------------------------------------- on worker processes
@pytest.fixture(scope="module")
def clusters():
    """Clients of 2, 3 and 4 worker processes on loopback, each started once for the
    module when a test first asks for it."""
    pytest.importorskip("distributed")
    with contextlib.ExitStack() as stack:
        started = {}

        def of(g):
            if g not in started:
                started[g] = stack.enter_context(loopback_client(g))
            return started[g]
        yield of


@pytest.fixture
def client(clusters, request):
    """The client of ``request.param`` worker processes (one cluster per count)."""
    return clusters(request.param)


#: Tests on ``g`` workers: ``g`` and a cluster of ``g`` worker processes.
ON_WORKERS = pytest.mark.parametrize(("client", "g"), [(g, g) for g in (2, 3, 4)],
                                     indirect=["client"])
ON_FOUR = pytest.mark.parametrize("client", [4], indirect=True)


def _persisted_on(client, x, chunks, g, blocks=False):
    """``x`` in ``chunks`` (empty ones too), chunk ``i`` held on worker ``i % g`` (by
    address), or in ``blocks`` (chunk ``i`` of ``c`` on worker ``i * g // c``): a Dask
    array of futures, as ``client.persist`` makes."""
    import distributed
    from dask.highlevelgraph import HighLevelGraph
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])[:g]
    ends = np.cumsum((0, *chunks))
    name = "held-" + dask.base.tokenize(x, chunks, g, blocks)
    held = (lambda i: i * g // len(chunks)) if blocks else (lambda i: i % g)
    futures = {(name, i): client.scatter(x[a:b], workers=[workers[held(i)]], hash=False)
               for i, (a, b) in enumerate(itertools.pairwise(ends))}
    graph = HighLevelGraph.from_collections(name, futures)
    # persisted under its own keys, held where they were scattered, before any sort
    out = client.persist(da.Array(graph, name, (tuple(chunks),), dtype=x.dtype))
    with client.as_current():
        distributed.wait(out)
    return out


def _ragged(rng, n, g):
    """A ragged chunking of ``n`` with empty chunks, ``3 g`` chunks or so."""
    cuts = np.sort(rng.integers(0, n + 1, 3 * g))
    return (0, *(int(c) for c in np.diff(np.concatenate([[0], cuts, [n]]))))


def _exchange(fn):
    with distsort.api.planning(strategy="exchange") as plans:
        out = fn()
    assert plans and all(p.strategy == "exchange" for p in plans), plans
    return out


@ON_WORKERS
@pytest.mark.parametrize("dtype", DTYPES)
def test_sorts_equal_numpy_on_worker_processes(client, g, dtype):
    """Every dtype, both directions, ``argsort`` stable both ways, on ragged chunks with
    empty ones, of which worker 0 holds only empty ones in one layout of two."""
    rng = np.random.default_rng(g * 100 + len(dtype))
    n = 2000 + g
    x = random_keys(rng, n, dtype, duplicates=True)
    chunks = _ragged(rng, n, g)
    if g > 2 and DTYPES.index(dtype) % 2:  # worker 0 (chunks 0, g, 2g, ...) holds no element
        chunks = _emptied(chunks, g)
        assert not any(chunks[::g]) and sum(chunks) == n
    xd = _persisted_on(client, x, chunks, g)
    with client.as_current():
        sorts = [_exchange(lambda d=d: distsort.sort(xd, descending=d)) for d in (False, True)]
        args = [_exchange(lambda d=d: distsort.argsort(xd, descending=d)) for d in (False, True)]
        got = client.compute([*sorts, *args], sync=True)
    for out, descending in zip(got[:2], (False, True), strict=True):
        assert_sorted_like_numpy(out, x, descending=descending)
    for out, descending in zip(got[2:], (False, True), strict=True):
        assert np.array_equal(out, stable_argsort(x, descending=descending))
    assert sorts[0].chunks[0] == tuple(da.core.normalize_chunks(sorts[0].chunks[0][0], (n,))[0])


def _emptied(chunks, g):
    """``chunks`` with the elements of those held by worker 0 (``i % g == 0``) moved to
    the next chunk: that worker holds only empty chunks."""
    out = list(chunks)
    for i in range(0, len(out) - 1, g):
        out[i + 1] += out[i]
        out[i] = 0
    if (len(out) - 1) % g == 0:  # the last chunk is worker 0's: to the one before it
        out[-2] += out[-1]
        out[-1] = 0
    return tuple(out)


@ON_WORKERS
def test_keyed_sorts_equal_numpy_on_worker_processes(client, g):
    """``sort_by_key`` stable (descending but at two workers) and not, with a table of
    values, and ``lexsort``, on ragged chunks (at four workers, worker 0's all empty)."""
    rng = np.random.default_rng(g)
    n = 3001
    x = random_keys(rng, n, ("int16", "float32", "float64")[g - 2], duplicates=True)
    v = rng.integers(-2**40, 2**40, n)
    w = rng.standard_normal(n)
    chunks = _ragged(rng, n, g)
    if g == 4:
        chunks = _emptied(chunks, g)
    xd, vd, wd = (_persisted_on(client, a, chunks, g) for a in (x, v, w))
    descending = g != 2
    want = stable_argsort(x, descending=descending)
    with client.as_current():
        keys, vals = _exchange(lambda: distsort.sort_by_key(xd, vd, descending=descending,
                                                             stable=True))
        table = _exchange(lambda: distsort.sort_by_key(xd, (vd, wd)))
        lex = _exchange(lambda: distsort.lexsort([vd % 3, xd]))
        got = client.compute([keys, vals, table[0], *table[1], lex], sync=True)
    assert np.array_equal(bits(got[0]), bits(x[want])) and np.array_equal(got[1], v[want])
    assert_sorted_like_numpy(got[2], x)
    for col, ref in ((got[3], v), (got[4], w)):  # equal keys' values in any order
        assert sorted(zip(bits(got[2]).tolist(), col.tolist(), strict=True)) == sorted(
            zip(bits(x).tolist(), ref.tolist(), strict=True))
    assert np.array_equal(got[5], np.lexsort([v % 3, x]))


def _sent_per_byte(client, fn, nbytes):
    """The result of ``fn()``, and the bytes the workers sent each other to make its
    output chunks (their gather to the client afterwards not counted), per byte."""
    import distributed

    from distsort.cluster import bytes_sent_by_kind, diff_sent
    before = bytes_sent_by_kind(client)
    out = client.persist(fn())
    with client.as_current():
        distributed.wait(out)
    sent = diff_sent(before, bytes_sent_by_kind(client))
    return client.compute(out, sync=True), sum(sent.values()) / nbytes, sent


@ON_WORKERS
def test_each_element_crosses_once_whatever_the_placement(client, g):
    """``sort`` sends at most ``(1 - 1/G) + 0.05`` of the data between the workers,
    ``argsort`` twice that (keys and positions), wherever the chunks are held."""
    rng = np.random.default_rng(g)
    n = 2**18 // (4 * g) * (4 * g)
    x = rng.standard_normal(n)
    for layout in range(2):  # chunks dealt in turn, then in blocks of one worker each
        xd = _persisted_on(client, x, (n // (4 * g),) * (4 * g), g, blocks=bool(layout))
        with client.as_current():
            got, sent, kinds = _sent_per_byte(client, lambda a=xd: _exchange(
                lambda: distsort.sort(a)), x.nbytes)
            assert np.array_equal(got, np.sort(x))
            assert sent <= (1 - 1 / g) + 0.05, str(kinds)
            got, sent, kinds = _sent_per_byte(client, lambda a=xd: _exchange(
                lambda: distsort.argsort(a)), x.nbytes)
            assert np.array_equal(got, np.argsort(x, kind="stable"))
            assert sent <= 2 * ((1 - 1 / g) + 0.05), str(kinds)


def _stages(client, fn):
    """Stages of tasks that depend across workers: the longest chain of dependencies
    between tasks run on different workers, as the task stream recorded where each ran.
    A single task that gathers small results from every worker (the pivots, the
    splitters: ``taskkeys.GATHERED``) passes its inputs' stage on to its dependents
    (their inputs arrive with its result)."""
    from distributed import get_task_stream

    from distsort.core.taskkeys import GATHERED
    arr = fn()
    graph = dict(arr.__dask_graph__())
    # (a persisted chunk, a future of its own key, is no dependency of itself)
    deps = {k: set(dask.core.get_dependencies(graph, k)) - {k} for k in graph}
    with get_task_stream(client) as ts:
        client.compute(arr, sync=True)
    where = {}
    for rec in ts.data:
        where[rec["key"]] = rec["worker"]
    stage = {}

    def of(key):
        if key not in stage:
            gathered = isinstance(key, tuple) and str(key[0]).startswith(GATHERED)
            stage[key] = max((of(d) + (not gathered and d in where and key in where
                                       and where[d] != where[key]) for d in deps.get(key, ())),
                             default=0)
        return stage[key]
    return max(map(of, graph))


@ON_FOUR
def test_at_most_three_stages_depend_across_workers(client):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(40_000)
    xd = _persisted_on(client, x, (2500,) * 16, 4)
    with client.as_current():
        ex = _stages(client, lambda: _exchange(lambda: distsort.sort(xd)))
        with distsort.api.planning(strategy="network"):
            net = _stages(client, lambda: distsort.sort(xd))
    assert ex <= 3 < net


@ON_FOUR
def test_the_plan_chooses_the_exchange_on_four_workers_by_itself(client):
    rng = np.random.default_rng(8)
    x = rng.standard_normal(20_000)
    xd = _persisted_on(client, x, (1250,) * 16, 4)
    with client.as_current():
        with distsort.api.planning() as plans:
            s = distsort.sort(xd)
        assert plans[0].strategy == "exchange"
        assert np.array_equal(client.compute(s, sync=True), np.sort(x))
    # a sort of the view alone as on a cluster of two: the network
    view = dataclasses.replace(_view(2, "ab" * 8))
    assert plan_sort((1250,) * 16, 8, view).strategy == "network"


# ---------------------------------------------------------------- the GPU engine's steps
@pytest.fixture
def device_runs(monkeypatch):
    """Exchanges run by the GPU engine's backend (``distsort.backends.gpu.runs``) on
    NumPy chunks: runs joined and sorted, samples and windows copied to the host, each
    output chunk made by sorting its slices joined (``merges_by_sort``)."""
    import distsort.sort1d
    from distsort.backends.gpu.runs import DeviceRuns
    planned = distsort.sort1d._backend_of
    used = []

    def backend_of(plan):
        if plan.strategy != "exchange":
            return planned(plan)
        used.append(DeviceRuns(engine="cpu", local=plan.local))
        return used[-1]
    monkeypatch.setattr(distsort.sort1d, "_backend_of", backend_of)
    return used


@ON_FOUR
@pytest.mark.parametrize("g", [2, 3])
def test_the_gpu_engine_equals_numpy_on_worker_processes(client, device_runs, g):
    rng = np.random.default_rng(60 + g)
    n = 4001 + g
    x = random_keys(rng, n, "float32", duplicates=True)
    v = rng.integers(-2**40, 2**40, n)
    chunks = _ragged(rng, n, g)
    xd, vd = (_persisted_on(client, a, chunks, g) for a in (x, v))
    with client.as_current():
        outs = [_exchange(lambda: distsort.sort(xd, descending=g == 3)),
                _exchange(lambda: distsort.argsort(xd, descending=g == 3)),
                *_exchange(lambda: distsort.sort_by_key(xd, vd)),
                _exchange(lambda: distsort.lexsort([vd % 5, xd]))]
        got = client.compute(outs, sync=True)
    assert device_runs and all(b.merges_by_sort for b in device_runs)
    assert_sorted_like_numpy(got[0], x, descending=g == 3)
    assert np.array_equal(got[1], stable_argsort(x, descending=g == 3))
    keys, values = sort_by_key_reference(x, v)
    assert np.array_equal(bits(got[2]), bits(keys)) and np.array_equal(got[3], values)
    assert np.array_equal(got[4], np.lexsort([v % 5, x]))


@ON_FOUR
def test_the_gpu_engine_sends_each_element_once(client, device_runs):
    g = 3
    n = 2**18 // (4 * g) * (4 * g)
    x = np.random.default_rng(9).standard_normal(n)
    xd = _persisted_on(client, x, (n // (4 * g),) * (4 * g), g)
    with client.as_current():
        got, sent, kinds = _sent_per_byte(client, lambda: _exchange(
            lambda: distsort.sort(xd)), x.nbytes)
        assert np.array_equal(got, np.sort(x)) and sent <= (1 - 1 / g) + 0.05, str(kinds)
        got, sent, kinds = _sent_per_byte(client, lambda: _exchange(
            lambda: distsort.argsort(xd)), x.nbytes)
        assert np.array_equal(got, np.argsort(x, kind="stable"))
        assert sent <= 2 * ((1 - 1 / g) + 0.05), str(kinds)
    assert device_runs


def test_the_gpu_engine_hands_its_local_sort_arrays_it_owns(monkeypatch):
    """On CuPy pieces, ``DeviceRuns`` joins the pieces into new arrays (the local sort
    overwrites them: never the input chunks nor a received slice) and says which values
    are increasing positions (a run's, joined in input order), run here with NumPy in
    CuPy's place and a recording local sort."""
    import types

    from distsort.backends.gpu import local_sort
    from distsort.backends.gpu import runs
    from distsort.backends.outofcore.stream_cpu import sort_pair
    fake = types.SimpleNamespace(concatenate=np.concatenate, ravel=np.ravel,
                                 asarray=np.asarray, arange=np.arange)
    monkeypatch.setattr(runs, "_array_module", lambda engine: engine == "gpu" and fake)
    calls = []

    def sort_owned(keys, values, order, local, increasing_values=False):
        calls.append((keys, values, local, increasing_values))
        return runs.make_chunk(*sort_pair(keys, values, order))
    monkeypatch.setattr(local_sort, "sort_owned", sort_owned)
    chunks = [np.array([5.0, 1.0]), np.array([3.0])]
    backend = runs.DeviceRuns(local="bitonic")
    keys, values = backend.make_run(chunks, None, Order(keyed=True), starts=[0, 7])
    assert keys.tolist() == [1.0, 3.0, 5.0] and values.tolist() == [1, 7, 0]
    (k, v, local, increasing), = calls
    assert local == "bitonic" and increasing and v.dtype == np.int64
    assert not any(np.shares_memory(k, c) for c in chunks)
    slices = [(keys[:2], values[:2]), (np.array([2.0]), np.array([4]))]
    merged = backend.merge_by_sort(slices, Order(keyed=True))
    assert merged[0].tolist() == [1.0, 2.0, 3.0] and merged[1].tolist() == [1, 4, 7]
    k, v, _, increasing = calls[-1]
    assert not increasing  # slices of several runs: positions in no order
    assert not any(np.shares_memory(a, b) for a in (k, v) for s in slices for b in s)
    assert backend.merge_by_sort([np.array([2.0, 4.0]), np.array([3.0])], Order()).tolist() == \
        [2.0, 3.0, 4.0]
    assert calls[-1][1] is None


# ---------------------------------------------------------------- stages, on the graph
def _view_of(g):
    """``read_view`` as on ``g`` workers of ample memory, where no chunk is held yet
    (the plan deals chunk ``i`` of ``c`` to worker ``i * g // c``, as the scheduler
    plugin reads it: ``distsort.plan.exchange.worker_runs``)."""
    def read(keys, value_keys=None, gpu=False, placed=False):
        def unknown(ks):
            return (None,) * len(list(ks))
        return ClusterView(workers=tuple(range(g)), hosts=("h",) * g, threads=(1,) * g,
                           memory_limits=(2**34,) * g, owners=unknown(keys),
                           value_owners=None if value_keys is None else unknown(value_keys))
    return read


def _graph_stages(arr, g):
    """Stages of tasks that depend across workers on the graph of ``arr`` alone, each
    task placed as the scheduler plugin places it (``distsort.core.taskkeys``): an
    exchange's run, samples, windows and slices on their run's worker, a merge on its
    owner's, a gather's parts where their positions are and its takes where their
    source chunk is, a task that ``keeps`` a dependency's chunk (or follows one of its
    own index) there, an input chunk ``i`` of ``c`` on worker ``i * g // c``; the
    gathered pivots and splitters count as on another worker than their dependents."""
    from distsort.core.taskkeys import GATHERED, keeps
    graph = dict(arr.__dask_graph__())
    deps = {k: set(dask.core.get_dependencies(graph, k)) - {k} for k in graph}
    count = collections.Counter(k[0] for k in graph if isinstance(k, tuple))
    where = {}

    def at(key):
        if key not in where:
            name = str(key[0]) if isinstance(key, tuple) else str(key)
            if name.startswith(GATHERED):
                where[key] = None
            elif name.startswith(("distsort-exch-slice-", "distsort-exch-merge-")):
                where[key] = key[2]
            elif name.startswith(("distsort-exch-run-", "distsort-exch-sample-",
                                  "distsort-exch-windows-")):
                where[key] = key[1]
            elif name.startswith(("distsort-gather-part-", "distsort-gather-take-")):
                # a part of a permutation's chunk j (key[2]) picks what source chunk i
                # (key[1]) gives; the take runs where that chunk is
                j, i = (key[2], 2) if "-part-" in name else (key[1], 1)
                where[key] = at(next(d for d in deps[key] if len(d) == 2 and d[1] == j
                                     and (i == 2) == ("-split-" in str(d[0]))))
            else:
                follows = [d for d in deps[key] if keeps(key, d)] or [
                    d for d in deps[key] if isinstance(d, tuple) and d[1:] == key[1:]]
                where[key] = at(follows[0]) if follows else (
                    key[1] * g // count[key[0]] if isinstance(key, tuple) and len(key) == 2
                    else None)
        return where[key]

    stage = {}

    def of(key):
        if key not in stage:
            stage[key] = max((of(d) + (at(key) is not None and at(d) != at(key))
                              for d in deps[key]), default=0)
        return stage[key]
    return max(map(of, graph))


def test_stages_across_workers_stay_constant_from_2_to_16_workers(monkeypatch):
    """On the graph: ``sort``, ``argsort`` and ``sort_by_key`` take three stages of
    tasks that depend across workers (windows, slices, merges) whatever ``G`` is; a
    stable ``sort_by_key`` of NumPy values two more (its values gathered by the sorted
    positions: the positions' parts to the values' workers, the values taken back), a
    ``lexsort`` of two keys two exchanges and two gathers (the next key's codes by the
    first exchange's positions, the positions by the second's).  The network's grow
    with ``G``."""
    import distsort.eager
    import distsort.tables
    from distsort.cluster import view
    for module in (distsort.eager, distsort.tables):  # G workers: no gather in one task
        monkeypatch.setattr(module, "one_place", lambda arrays: False)
    rng = np.random.default_rng(9)
    want = {"sort": 3, "argsort": 3, "sort_by_key": 3, "stable sort_by_key": 5, "lexsort": 10}
    for g in (2, 3, 4, 5, 8, 16):
        monkeypatch.setattr(view, "read_view", _view_of(g))
        x = da.from_array(rng.standard_normal(60 * g), chunks=20)  # 3 chunks per worker
        v = da.from_array(rng.integers(0, 9, 60 * g), chunks=20)
        sorts = {"sort": lambda x=x: distsort.sort(x, descending=True),
                 "argsort": lambda x=x: distsort.argsort(x),
                 "sort_by_key": lambda x=x, v=v: distsort.sort_by_key(x, v)[1],
                 "stable sort_by_key": lambda x=x, v=v: distsort.sort_by_key(x, v,
                                                                            stable=True)[1],
                 "lexsort": lambda x=x, v=v: distsort.lexsort([x, v])}
        got = {what: _graph_stages(_exchange(fn), g) for what, fn in sorts.items()}
        assert got == want, (g, got)
        # one slice task per (owner, run), not per (output chunk, run): G^2, not 3 G^2
        layers = _exchange(sorts["sort"]).__dask_graph__().layers
        assert sum(len(v) for k, v in layers.items() if "exch-slice" in k) == g * g
        with distsort.api.planning(strategy="network"):
            network = _graph_stages(distsort.sort(x), g)
        assert network > 3 or g < 4, (g, network)  # one round between two workers


# ---------------------------------------------------------------- a worker lost mid-sort
def _kill_once(marker, name):
    """A worker plugin that makes ``distsort.graph.outofcore.<name>`` end its worker's
    process the first time any worker runs it (``marker``, a file, says it has): the
    task key names the function, and each worker looks it up in the module as it
    unpickles the task."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class KillOnce(WorkerPlugin):
        def setup(self, worker):
            import os

            from distsort.graph import outofcore
            original = getattr(outofcore, name)
            original = getattr(original, "__wrapped__", original)  # the last plugin's marker

            def killing(*args, **kwargs):
                try:
                    os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                except FileExistsError:
                    return original(*args, **kwargs)
                os._exit(1)

            killing.__wrapped__ = original
            setattr(outofcore, name, killing)
    return KillOnce()


@pytest.mark.slow  # about 5 s each on a quiet machine (a worker started again)
@pytest.mark.parametrize("name", ["slice_between", "merge_slices"])
def test_a_worker_killed_mid_exchange_still_gives_the_sort(tmp_path, name):
    """Three worker processes; the first task of the slices (or of the merges) ends its
    own worker's process.  Where the input can be made again (a lazy array), the sort
    still equals NumPy's; where it was persisted on the lost worker, the sort raises an
    error that says so.  Never a wrong result."""
    pytest.importorskip("distributed")
    rng = np.random.default_rng(11)
    x = rng.standard_normal(6000)
    with loopback_client(3) as client:
        workers = set(client.scheduler_info()["workers"])
        client.register_plugin(_kill_once(str(tmp_path / "lazy"), name))
        lazy = da.from_array(x, chunks=500)
        with client.as_current():
            s = _exchange(lambda: distsort.sort(lazy))
            a = _exchange(lambda: distsort.argsort(lazy))
            got_s, got_a = client.compute([s, a], sync=True)
        assert (tmp_path / "lazy").exists()  # a worker was lost mid-sort
        assert workers - set(client.scheduler_info()["workers"])
        assert np.array_equal(got_s, np.sort(x))
        assert np.array_equal(got_a, np.argsort(x, kind="stable"))
        # persisted on the three workers, as by ``client.persist``: part of it is lost
        client.wait_for_workers(3, timeout=60)  # the lost one, started again
        held = _persisted_on(client, x, (500,) * 12, 3)
        client.register_plugin(_kill_once(str(tmp_path / "held"), name), name="again")
        with client.as_current():
            s = _exchange(lambda: distsort.sort(held))
            try:
                got = client.compute(s, sync=True)
            except RuntimeError as e:  # the lost worker held chunks of the input
                assert re.search(r"input chunk .* was lost with worker tcp://.* which left",
                                 str(e)), e
            else:  # the lost worker held none the sort still had to read
                assert np.array_equal(got, np.sort(x))
        assert (tmp_path / "held").exists()
