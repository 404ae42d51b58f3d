"""The one-host k-way strategy (``"kway"``, ``distsort.plan.onehost``): runs sorted by
threads, exact splitters by co-rank, each output chunk merged by one task; bit for bit
what NumPy and the network give, on every dtype, both orders, ragged and empty
chunks, plain arrays and Dask arrays."""
import dask
import dask.array as da
import numpy as np
import pytest

import distsort
from arrays import (DTYPES, assert_sorted_like_numpy, bits, descending_of, random_chunks,
                    random_keys, stable_argsort)
from distsort.api import planning
from distsort.backends import Order
from distsort.backends.cpu import merge as compiled
from distsort.backends.cpu.runs import ThreadRuns, merge_slices, sort_keys
from distsort.cluster.view import ClusterView
from distsort.graph.kway import sort_now
from distsort.plan.onehost import KWAY_MIN
from distsort.plan.options import SortOptions
from distsort.plan.sortplan import plan_sort
from distsort.sort1d import sort_planned
from test_api import sort_by_key_reference

#: Run the default plan (``tests/conftest.py``: other modules force the network).
STRATEGY = "auto"

GIB = 2**30
TIMES = ["datetime64[ns]", "timedelta64[s]"]


def keys_of(rng, n, dtype):
    if dtype in TIMES:  # NaT mixed in: last in both orders
        x = rng.integers(-10**6, 10**6, size=n).astype(dtype)
        x[rng.random(n) < 0.1] = np.array("NaT", dtype)
        return x
    return random_keys(rng, n, dtype, duplicates=bool(rng.integers(0, 2)))


def network_result(x, descending):
    with dask.config.set({"distsort.strategy": "network"}):
        return distsort.sort(x, descending=descending).compute()


# -- the plan, on tuples

def test_auto_chooses_kway_where_one_process_has_cores_and_room():
    view = ClusterView.local(cores=16, memory=128 * GIB, chunks=10)
    p = plan_sort((10**7,) * 10, 8, view, SortOptions())
    # fewer chunks than cores: one output chunk per core, each merged by one task
    assert (p.strategy, p.chunks, len(p.pieces), p.rounds) == ("kway", (6_250_000,) * 16, 16, 0)
    assert plan_sort((10**7,) * 10, 8, ClusterView.local(cores=2, memory=24 * GIB),
                     SortOptions()).chunks == (10**7,) * 10
    assert sum(b - a for run in p.pieces for _, a, b in run) == 10**8
    plain = plan_sort((4 * 10**8,), 4, ClusterView.local(cores=2, memory=24 * GIB),
                      SortOptions(here=True))
    assert (plain.strategy, plain.eager, len(plain.pieces)) == ("kway", True, 2)


@pytest.mark.parametrize(("n", "cores", "memory", "options"), [
    (10**8, 1, 24 * GIB, SortOptions()),                        # one core: numpy.sort
    (KWAY_MIN - 1, 2, 24 * GIB, SortOptions()),                # too small for threads
    (10**9, 2, 4 * GIB, SortOptions()),                        # no room for the output
    (10**7, 2, 24 * GIB, SortOptions(value_bytes=8, positions=True, here=True)),  # plain
    (10**7, 2, 24 * GIB, SortOptions(value_bytes=8, stable=True)),  # stable values
    (10**7, 2, 24 * GIB, SortOptions(gpu=True)),
])
def test_auto_keeps_other_strategies(n, cores, memory, options):
    view = ClusterView.local(cores=cores, memory=memory, device=80 * GIB)
    assert plan_sort((n,), 4, view, options).strategy != "kway"


def test_not_on_a_cluster_and_asked_for_where_it_cannot_run():
    two = ClusterView(workers=("a", "b"), hosts=("h", "h"), threads=(1, 1),
                      memory_limits=(GIB, GIB), owners=("a", "b"))
    assert plan_sort((10**6, 10**6), 8, two).strategy != "kway"
    with pytest.raises(ValueError, match="kway"):
        plan_sort((10**6, 10**6), 8, two, SortOptions(strategy="kway"))
    with pytest.raises(ValueError, match="kway"):
        plan_sort((10,), 8, ClusterView.local(cores=2),
                  SortOptions(strategy="kway", value_bytes=8, stable=True))


def test_runs_cover_ragged_and_empty_chunks_in_order():
    p = plan_sort((0, 7, 0, 0, 3, 5), 4, ClusterView.local(cores=4),
                  SortOptions(strategy="kway"))
    flat = [piece for run in p.pieces for piece in run]
    assert flat == [(1, 0, 3), (1, 3, 7), (4, 0, 3), (5, 0, 1), (5, 1, 5)]  # ends 3, 7, 11
    assert sum(p.chunks) == 15 and len(p.pieces) == 4


# -- the tasks

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("descending", [False, True])
def test_runs_and_merge_give_the_code_order(dtype, descending):
    rng = np.random.default_rng(abs(hash((dtype, descending))) % 2**32)
    x = keys_of(rng, 3000, dtype)
    cuts = np.sort(rng.integers(0, len(x) + 1, size=int(rng.integers(1, 9))))
    runs = [sort_keys(p.copy(), descending, [p]) for p in np.split(x, cuts)]
    for numba_on in (True, False):
        compiled.ENABLED = numba_on and compiled.numba is not None
        try:
            out = merge_slices(runs, [0] * len(runs), [len(r) for r in runs],
                               Order(descending=descending))
        finally:
            compiled.ENABLED = compiled.numba is not None
        assert_sorted_like_numpy(out, x, descending)


@pytest.mark.parametrize("seed", range(12))
def test_plain_arrays_on_many_threads_equal_numpy(seed):
    rng = np.random.default_rng(500 + seed)
    dtype = DTYPES[seed]
    n = int(rng.integers(1, 5000))
    x = keys_of(rng, n, dtype)
    cores = int(rng.integers(2, 9))
    plan = plan_sort((n,), x.dtype.itemsize, ClusterView.local(cores=cores),
                     SortOptions(strategy="kway", here=True))
    assert plan.strategy == "kway" and plan.eager
    for descending in (False, True):
        out = sort_now(x, plan, Order(descending=descending), ThreadRuns())
        assert_sorted_like_numpy(out, x, descending)


@pytest.mark.parametrize("seed", range(12))
def test_dask_arrays_equal_numpy_and_the_network(seed):
    rng = np.random.default_rng(700 + seed)
    dtype = DTYPES[seed]
    n = int(rng.integers(0, 4000))
    x = keys_of(rng, n, dtype)
    chunks = random_chunks(rng, n, ["regular", "ragged", "one"][seed % 3] if n < 300
                           else ["regular", "ragged"][seed % 2])
    d = da.from_array(x, chunks=(chunks,))
    cores = int(rng.integers(2, 7))
    view = ClusterView.local(cores=cores, chunks=len(chunks))
    for descending in (False, True):
        options = SortOptions(strategy="kway")
        plan = plan_sort(chunks, x.dtype.itemsize, view, options)
        if n == 0:  # nothing to merge: another strategy
            assert plan.strategy != "kway"
            continue
        s = sort_planned(d, None, Order(descending=descending), False, (view, plan))[0]
        assert any(name.startswith("distsort-run-") for name in s.dask.layers)
        got = s.compute()
        assert_sorted_like_numpy(got, x, descending)
        np.testing.assert_array_equal(bits(got), bits(network_result(d, descending)))


def test_the_public_api_takes_the_strategy_and_verifies():
    rng = np.random.default_rng(9)
    x = random_keys(rng, 20_000, "float64")
    with planning(strategy="kway") as plans:
        out = distsort.sort(x, descending=True)
        lazy = distsort.sort(da.from_array(x, chunks=3000), verify=True)
    assert [p.strategy for p in plans] == ["kway", "kway"]
    assert isinstance(out, np.ndarray)
    assert_sorted_like_numpy(out, x, descending=True)
    assert_sorted_like_numpy(lazy.compute(), x)
    with dask.config.set({"distsort.strategy": "kway"}):
        assert_sorted_like_numpy(distsort.sort(x), x)


@pytest.mark.parametrize("dtype", TIMES)
@pytest.mark.parametrize("descending", [False, True])
def test_datetimes_with_nat(dtype, descending):
    rng = np.random.default_rng(11)
    x = keys_of(rng, 5000, dtype)
    with planning(strategy="kway") as plans:
        plain = distsort.sort(x, descending=descending)
        lazy = distsort.sort(da.from_array(x, chunks=700), descending=descending).compute()
    assert [p.strategy for p in plans] == ["kway", "kway"]
    ref = np.sort(x)
    ref = descending_of(ref) if descending else ref
    for out in (plain, lazy):  # NaT != NaT: compared as integers
        assert out.dtype == x.dtype
        np.testing.assert_array_equal(out.view("i8"), ref.view("i8"))


# -- keys with values or positions: argsort, sort_by_key, tables

@pytest.mark.parametrize("seed", range(12))
def test_keyed_runs_equal_numpy(seed):
    rng = np.random.default_rng(900 + seed)
    dtype = DTYPES[seed]
    n = int(rng.integers(1, 4000))
    x = keys_of(rng, n, dtype)
    v = random_keys(rng, n, ["int32", "float64", "uint8"][seed % 3], duplicates=True)
    chunks = random_chunks(rng, n, ["regular", "ragged"][seed % 2])
    d, dv = da.from_array(x, chunks=(chunks,)), da.from_array(v, chunks=(chunks,))
    view = ClusterView.local(cores=int(rng.integers(2, 7)), chunks=len(chunks))
    for descending in (False, True):
        order = Order(descending=descending, keyed=True)
        plan = plan_sort(chunks, x.dtype.itemsize, view,
                         SortOptions(strategy="kway", value_bytes=8, positions=True))
        keys, perm = sort_planned(d, None, order, True, (view, plan))
        assert plan.strategy == "kway"
        np.testing.assert_array_equal(perm.compute(), stable_argsort(x, descending))
        assert_sorted_like_numpy(keys.compute(), x, descending)
        plan = plan_sort(chunks, x.dtype.itemsize, view,
                         SortOptions(strategy="kway", value_bytes=v.dtype.itemsize))
        keys, values = sort_planned(d, dv, order, False, (view, plan))
        ref_keys, ref_values = sort_by_key_reference(x, v, descending)
        got = dask.compute(keys, values)
        assert_sorted_like_numpy(got[0], x, descending)
        np.testing.assert_array_equal(got[1], ref_values)  # -0.0 == +0.0, NaN: any order
        with dask.config.set({"distsort.strategy": "network"}):
            net = dask.compute(*distsort.sort_by_key(d, dv, descending=descending))
        for mine, theirs in zip(got, net, strict=True):  # bit for bit the network's
            np.testing.assert_array_equal(bits(mine), bits(theirs))


@pytest.mark.parametrize("descending", [False, True])
def test_tables_and_lexsort_equal_numpy(descending):
    rng = np.random.default_rng(31)
    n = 30_000
    key = rng.integers(0, 500, size=n).astype(np.float32)
    k2 = rng.normal(size=n)
    cols = {"a": rng.integers(0, 10**6, size=n), "b": rng.random(n)}
    chunks = 4_000
    with planning(strategy="kway") as plans:
        sk, out = distsort.sort_by_key(da.from_array(key, chunks=chunks),
                                       {c: da.from_array(a, chunks=chunks)
                                        for c, a in cols.items()},
                                       descending=descending, stable=True)
        perm = distsort.lexsort((da.from_array(k2, chunks=chunks),
                                 da.from_array(key, chunks=chunks)))
        sk, a, b, perm = dask.compute(sk, out["a"], out["b"], perm)
    assert plans and {p.strategy for p in plans} == {"kway"}
    ref = stable_argsort(key, descending)
    np.testing.assert_array_equal(sk, key[ref])
    np.testing.assert_array_equal(a, cols["a"][ref])
    np.testing.assert_array_equal(b, cols["b"][ref])
    np.testing.assert_array_equal(perm, np.lexsort((k2, key)))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "uint8", "bool"])
def test_numpy_merge_of_runs_without_nan_keeps_the_code_order(dtype):
    """Runs of ascending keys with no NaN are merged by NumPy's stable sort: ``-0.0``
    before ``+0.0`` still, bit for bit the order of the codes."""
    from distsort.core.order import decode, encode
    rng = np.random.default_rng(5)
    x = random_keys(rng, 5000, dtype, special_fraction=0.0)
    if x.dtype.kind == "f":
        x[rng.random(len(x)) < 0.3] = rng.choice(np.array([0.0, -0.0], dtype), 1)
        x[::7] = -x[::7]
    x[np.isnan(x)] = 1.0
    runs = [sort_keys(p.copy(), original=[p]) for p in np.array_split(x, 5)]
    assert all(np.isnan(r).sum() == 0 for r in runs)
    out = merge_slices(runs, [0] * 5, [len(r) for r in runs], Order())
    ref = decode(np.sort(encode(x)), x.dtype)
    np.testing.assert_array_equal(bits(out), bits(ref))
    with planning(strategy="kway"):
        plain = distsort.sort(x)
        lazy = distsort.sort(da.from_array(x, chunks=700)).compute()
    np.testing.assert_array_equal(bits(plain), bits(ref))
    np.testing.assert_array_equal(bits(lazy), bits(ref))


@pytest.mark.parametrize("quick_wins", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int16"])
def test_runs_resorted_where_that_is_faster_keep_the_code_order(monkeypatch, dtype, quick_wins):
    """Where the machine's quicksort re-sorts k runs faster than Timsort merges them
    (``resort_wins``, timed: forced here both ways), the merge still gives the order of
    the codes, zeros' signs included."""
    from distsort.backends.cpu import runs as cpu_runs
    from distsort.core.order import decode, encode
    monkeypatch.setattr(cpu_runs, "_sort_costs", lambda dtype, k: (1.0, 0.0) if quick_wins
                        else (0.0, 1.0))
    rng = np.random.default_rng(6)
    n = 2 * cpu_runs.RESORT_SAMPLE
    x = random_keys(rng, n, dtype, special_fraction=0.0)
    if x.dtype.kind == "f":
        x[np.isnan(x)] = 2.0
        x[rng.random(n) < 0.2] = np.array(0.0, dtype)
        x[rng.random(n) < 0.2] = np.array(-0.0, dtype)
    assert cpu_runs.resort_wins(x.dtype.str, 6, n) is quick_wins
    runs = [sort_keys(p.copy(), original=[p]) for p in np.array_split(x, 6)]
    out = merge_slices(runs, [0] * 6, [len(r) for r in runs], Order())
    np.testing.assert_array_equal(bits(out), bits(decode(np.sort(encode(x)), x.dtype)))
