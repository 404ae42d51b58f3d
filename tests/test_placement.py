"""Placement (positions from where chunks live), groups sorted as one, and the choice of
the local sort: pure functions on integers, NumPy sorts through permuted and grouped
graphs, and a two-worker LocalCluster whose chunks are dealt round robin."""
import dask
import dask.array as da
import numpy as np
import pytest

import distsort
from distsort import api
from distsort.cluster import locality
from distsort.backends.gpu import local_sort as cupy_local
from distsort.core.taskkeys import task_round
from distsort.plan.placement import floor_pow2, group_bounds, group_size, placement, starts
from distsort.plan.network import plan_network
from distsort.plan.sortplan import SortOptions, plan_sort
from distsort.cluster.view import read_view

from arrays import descending_of, random_keys


# ---------------------------------------------------------------- pure placement
@pytest.mark.parametrize("seed", range(20))
def test_placement_blocks_of_one_worker(seed):
    rng = np.random.default_rng(seed)
    c = int(rng.integers(1, 40))
    workers = int(rng.integers(1, 5))
    owners = [f"w{int(w)}" for w in rng.integers(0, workers, size=c)]
    group = 1 << int(rng.integers(0, 4))
    short = bool(rng.integers(0, 2))
    perm = placement(owners, group, short_last=short)
    assert sorted(perm) == list(range(c))
    if short:
        assert perm[-1] == c - 1
    # Every worker's chunks in whole aligned blocks of `group`, then the rest.
    counts = {w: owners[:c - (short and c > 1)].count(w) for w in set(owners)}
    whole = sum(n - n % group for n in counts.values())
    for b in range(0, whole, group):
        assert len({owners[i] for i in perm[b:b + group]}) == 1
    # Each worker's chunks in their original order within its blocks.
    for w in counts:
        mine = [i for i in perm[:whole] if owners[i] == w]
        assert mine == sorted(mine)


def test_placement_round_robin_and_unknown():
    assert placement(["a", "b"] * 4, 4) == (0, 2, 4, 6, 1, 3, 5, 7)
    assert placement([None] * 5) == (0, 1, 2, 3, 4)
    assert placement([]) == ()
    with pytest.raises(ValueError, match="power of two"):
        placement(["a"], group=3)


def test_group_size_and_bounds():
    assert [floor_pow2(n) for n in range(1, 10)] == [1, 2, 2, 4, 4, 4, 4, 8, 8]
    assert group_size(32, 2, 2**29, 140 * 10**9) == 16
    assert group_size(32, 2, 2**29, 2**29 * (16 + 2 * 4)) == 4  # bounded by memory
    assert group_size(32, 2, 2**29, 2**29 * (16 + 2 * 4) - 1) == 2
    assert group_size(7, 2, 1, None) == 2
    assert group_size(1, 2, 1, None) == 1
    assert group_bounds(8, 4) == ((0, 4), (4, 8))
    assert starts((3, 0), 5) == (15, 0)
    with pytest.raises(ValueError):
        group_size(4, 0, 1, None)


def test_plan_run_skips_the_group_stages():
    """A group of `g` chunks sorted as one replaces the stages of blocks <= g."""
    full, grouped = plan_network(8), plan_network(8, run=4)
    assert [r for r in full if r.stage > 4] == list(grouped)


# ---------------------------------------------------------------- local="auto"
def test_choose_local_by_budget():
    extra = cupy_local.radix_extra_bytes(2**28, 4)  # 2^28 float32 keys
    assert extra == 3 * 2**30
    assert cupy_local.choose_local(extra, extra) == "radix"
    assert cupy_local.choose_local(extra, extra - 1) == "bitonic"
    assert cupy_local.choose_local(extra, None) == "bitonic"  # budget unknown: in place
    assert cupy_local.choose_local(extra, 10 * extra, "bitonic") == "bitonic"
    assert cupy_local.choose_local(extra, 0, "radix") == "radix"
    with pytest.raises(ValueError, match="local must be"):
        cupy_local.choose_local(1, 1, "merge")


def test_choose_local_through_sort_owned(monkeypatch):
    """``sort_owned`` asks the budget only under "auto", and picks by it (budget mocked:
    the sorts themselves are replaced, so no GPU is needed)."""
    picked = []
    monkeypatch.setattr(cupy_local, "radix_sort", lambda k, v, o, *flags: picked.append("radix"))
    import types
    import sys
    fake = types.SimpleNamespace(sort_inplace=lambda k, v, d: picked.append("bitonic"))
    monkeypatch.setitem(sys.modules, "distsort.backends.gpu.launcher", fake)
    keys = np.zeros(1000, dtype=np.float32)  # only its size and dtype are read
    order = distsort.backends.Order()
    for budget, want in ((10**6, "radix"), (10**3, "bitonic")):
        monkeypatch.setattr(cupy_local, "device_budget", lambda owned, b=budget: b)
        cupy_local.sort_owned(keys, None, order, "auto")
        assert picked[-1] == want
    monkeypatch.setattr(cupy_local, "device_budget", lambda owned: pytest.fail("budget asked"))
    cupy_local.sort_owned(keys, None, order, "bitonic")
    cupy_local.sort_owned(keys, None, order, "radix")
    assert picked[-2:] == ["bitonic", "radix"]


def test_device_budget_in_a_dask_cuda_worker(monkeypatch):
    """A worker that tracks its device data: its limit less what it holds and what the
    task owns (not the driver's free memory, which an RMM pool hides)."""
    from distsort.core import memory
    monkeypatch.setattr(cupy_local, "_dask_cuda_limits", lambda: (100 * 2**30, 60 * 2**30))
    assert cupy_local.device_budget(4 * 2**30) == 36 * 2**30
    monkeypatch.setattr(cupy_local, "_dask_cuda_limits", lambda: (100, 160))
    assert cupy_local.device_budget() == 0
    monkeypatch.setattr(memory, "device_capacity", lambda: 1000)
    monkeypatch.setattr(cupy_local, "_dask_cuda_limits", lambda: (None, 100))
    assert cupy_local.device_budget(50) == 950 - 150  # capacity less the reserve


def test_api_refuses_unknown_local():
    x = da.from_array(np.arange(4.0), chunks=2)
    for f in (distsort.sort, distsort.argsort):
        with pytest.raises(ValueError, match="local must be"):
            f(x, local="fast")
    with pytest.raises(ValueError, match="local must be"):
        distsort.sort_by_key(x, x, local=None)


# ---------------------------------------------------------------- permuted, grouped graphs
@pytest.mark.parametrize("seed", range(6))
def test_permuted_grouped_sorts_match_numpy(seed, monkeypatch):
    """Any permutation of the input chunks and any group size give NumPy's results;
    argsort's indices stay the input's."""
    rng = np.random.default_rng(100 + seed)
    dtype = ["float32", "int64", "uint8", "float64", "int16", "float16"][seed]
    chunk = int(rng.integers(1, 50))
    c = int(rng.integers(2, 40))
    n = chunk * (c - 1) + int(rng.integers(1, chunk + 1))
    group = 1 << int(rng.integers(0, 4))
    keys = random_keys(rng, n, dtype, duplicates=True)
    values = rng.integers(-5, 5, size=n).astype(np.int32)
    short = n % chunk != 0
    perm = list(rng.permutation(c - 1 if short else c)) + ([c - 1] if short else [])
    real = api.plan_sort
    monkeypatch.setattr(api, "plan_sort", lambda chunks, *a, **k: real(chunks, *a, **k)._replace(
        chunks=tuple(chunks), pieces=None, perm=tuple(perm), group=group))
    x, v = da.from_array(keys, chunks=chunk), da.from_array(values, chunks=chunk)
    with dask.config.set(scheduler="sync"):
        for descending in (False, True):
            want = descending_of(np.sort(keys)) if descending else np.sort(keys)
            got = distsort.sort(x, descending=descending).compute()
            np.testing.assert_array_equal(got.view(f"u{keys.itemsize}"),
                                          want.view(f"u{keys.itemsize}")) if dtype[0] != "f" \
                else np.testing.assert_array_equal(got, want)
        idx = distsort.argsort(x).compute()
        np.testing.assert_array_equal(idx, np.argsort(keys, kind="stable"))
        sk, sv = distsort.sort_by_key(x, v)
        ref = np.lexsort((values, keys))
        np.testing.assert_array_equal(sk.compute(), keys[ref])
        np.testing.assert_array_equal(sv.compute(), values[ref])


# ---------------------------------------------------------------- on a LocalCluster
def _round_robin(client, rng, chunks, chunk, dtype="float64"):
    """A persisted array whose chunk i lies on worker i % 2 (and the NumPy data)."""
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    data = [random_keys(rng, chunk, dtype) for _ in range(chunks)]
    futures = [client.scatter(d, workers=[workers[i % 2]]) for i, d in enumerate(data)]
    parts = [da.from_delayed(f, (chunk,), dtype=dtype, meta=np.empty(0, dtype))
             for f in futures]
    x = client.persist(da.concatenate(parts))
    import distributed
    with client.as_current():
        distributed.wait(x)
    return x, np.concatenate(data), workers


def _ran_on(stream):
    """Key -> (worker, whether it fetched data) from a task stream."""
    out = {}
    for t in stream:
        moved = any(s["action"] == "transfer" for s in t.get("startstops", ()))
        out[t["key"]] = (t["worker"], moved)
    return out


def test_positions_follow_round_robin_chunks(cluster_client):
    """8 chunks dealt round robin on 2 workers: each worker's 4 chunks take one block of
    positions, so the 3 rounds of stages 2 and 4 pair chunks of one worker and move no
    chunk; the result is NumPy's."""
    import distributed
    client = cluster_client
    rng = np.random.default_rng(7)
    x, data, workers = _round_robin(client, rng, 8, 500)
    owners = locality.chunk_owners(x.__dask_keys__(), client)
    assert owners == [workers[i % 2] for i in range(8)]
    with client.as_current(), dask.config.set({"distsort.group": 1}):
        plan = plan_sort(x.chunks[0], 8, read_view(x.__dask_keys__()), SortOptions(group=1))
        assert (plan.perm, plan.group) == ((0, 2, 4, 6, 1, 3, 5, 7), 1)
        perm = plan.perm
        s = distsort.sort(x)
        with distributed.get_task_stream(client=client) as ts:
            got = client.compute(s).result()
    np.testing.assert_array_equal(got, np.sort(data))
    ran = _ran_on(ts.data)
    early = [k for k in ran if isinstance(k, tuple) and task_round(k) in (0, 1, 2)]
    assert len(early) >= 3 * 4 * 2  # tails, heads and merges of 3 rounds of 4 pairs
    for key in early:
        worker, moved = ran[key]
        position = key[1]
        assert worker == owners[perm[position]], key
        assert not moved, key


def test_groups_sort_on_their_worker(cluster_client):
    """With groups ("auto": 4 chunks per worker), each worker sorts its own chunks as
    one without fetching any; argsort's indices are the input's."""
    import distributed
    client = cluster_client
    rng = np.random.default_rng(8)
    x, data, workers = _round_robin(client, rng, 8, 300, "float32")
    with client.as_current():
        plan = plan_sort(x.chunks[0], 4, read_view(x.__dask_keys__()),
                         SortOptions(value_bytes=8, positions=True))
        assert (plan.perm, plan.group) == ((0, 2, 4, 6, 1, 3, 5, 7), 4)
        with distributed.get_task_stream(client=client) as ts:
            got = client.compute(distsort.argsort(x)).result()
    np.testing.assert_array_equal(got, np.argsort(data, kind="stable"))
    ran = _ran_on(ts.data)
    groups = [k for k in ran if isinstance(k, tuple) and str(k[0]).startswith("distsort-group-")]
    assert len(groups) == 2
    assert {ran[k][0] for k in groups} == set(workers)
    assert not any(ran[k][1] for k in groups)
    # The network: one round across the workers (the mirror of stage 8), then each
    # group sorted as one again on its worker instead of two rounds of pairs.
    rounds = sorted({task_round(k) for k in ran if isinstance(k, tuple)} - {None})
    assert rounds == [0, 1]
    regroups = [k for k in ran if isinstance(k, tuple) and "-regroup-" in str(k[0])]
    assert len(regroups) == 2 and {ran[k][0] for k in regroups} == set(workers)
    # Each regroup's parts (its run cut into chunks) run on its worker, fetching nothing.
    parts = [k for k in ran if isinstance(k, tuple) and "-part-" in str(k[0])]
    assert len(parts) == 8
    group_of = {k[1]: ran[k][0] for k in regroups}
    for k in parts:
        assert ran[k] == (group_of[k[1] // 4 * 4], False), k


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int32", "uint64", "float16",
                                   "float32", "float64"])
def test_radix_order_matches_numpy_backend(dtype, monkeypatch):
    """The radix path's order codes and stable sorts, run on NumPy arrays (``cupy``
    stood in by NumPy's stable sorts), give the NumPy backend's results bit for bit."""
    import sys
    import types
    from distsort.backends import Order
    from distsort.backends.cpu import numpy_backend as npb
    fake = types.SimpleNamespace(argsort=lambda a: np.argsort(a, kind="stable"))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    rng = np.random.default_rng(abs(hash(dtype)) % 2**32)
    u = f"u{np.dtype(dtype).itemsize}"
    for n in (0, 1, 7, 1000):
        keys = random_keys(rng, n, dtype, duplicates=True)
        values = random_keys(rng, n, "float32", duplicates=True)
        for descending in (False, True):
            got = cupy_local.radix_sort(keys.copy(), None, Order(descending))
            want = npb.finish_keys(npb.prepare(keys, None, Order(descending)),
                                   Order(descending), keys.dtype)
            np.testing.assert_array_equal(got.view(u), want.view(u))
            keyed = Order(descending, keyed=True)
            pos = np.arange(3, 3 + n, dtype=np.int64)
            k, v = cupy_local.radix_sort(keys.copy(), pos, keyed, increasing_values=True)
            wk, wv = npb.prepare(keys, None, keyed, start=3)
            np.testing.assert_array_equal(k.view(u), wk.view(u))
            np.testing.assert_array_equal(v, wv)
            k, v = cupy_local.radix_sort(keys.copy(), values.copy(), keyed)
            wk, wv = npb.keyed_sort(keys, values, descending)
            np.testing.assert_array_equal(k.view(u), wk.view(u))
            np.testing.assert_array_equal(v.view("u4"), wv.view("u4"))


def test_local_group_keeps_groups_on_one_worker():
    from distsort.plan.placement import local_group
    assert local_group(["a"] * 4 + ["b"] * 4, 4) == 4
    assert local_group(["a"] * 3 + ["b"] * 5, 4) == 1
    assert local_group(["a", "a", None, "b"], 2) == 2
    perm = placement(["a", "b", "a", "b", "b", "b"], 2)
    assert local_group([["a", "b", "a", "b", "b", "b"][i] for i in perm], 2) == 2
