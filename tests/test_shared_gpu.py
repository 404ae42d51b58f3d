"""The multi-worker GPU path on one GPU: two plain workers share GPU 0, each with an RMM
pool (``distsort.cluster.shared_gpu``), against NumPy element for element on fresh random data.

Placement and group sorts, both exchanges (CUDA IPC and the comm), ``sort``,
``argsort``, ``sort_by_key`` in both orders with ``verify=True``, descending, ragged
chunk counts, and out of core with two workers.  Runs where CuPy, RMM and a GPU are
(``pytest -m gpu``); skipped elsewhere.
"""
import dask
import numpy as np
import pytest

from arrays import random_keys, stable_argsort
from test_api import sort_by_key_reference

cupy = pytest.importorskip("cupy")
pytest.importorskip("rmm")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import distsort  # noqa: E402
import distsort.api  # noqa: E402
from distsort.cluster import bytes_sent_by_kind, diff_sent, gpu_available  # noqa: E402
from distsort.core.taskkeys import round_task_kind  # noqa: E402
from distsort.cluster.shared_gpu import shared_gpu_cluster  # noqa: E402
from distsort.plan.options import SortOptions  # noqa: E402
from distsort.plan.sortplan import plan_sort  # noqa: E402
from distsort.cluster.view import read_view  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not gpu_available(), reason="needs a GPU")]


@pytest.fixture(scope="module")
def client():
    with (shared_gpu_cluster(2, pool_fraction=0.2) as cluster,
          distributed.Client(cluster) as c):
        yield c


def placed(client, x, chunks, where="roundrobin"):
    """A persisted Dask array of CuPy chunks of ``x``, chunk ``i`` made on worker
    ``i % 2`` (round robin) or in two blocks (``"blocks"``); and the owners."""
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    bounds = np.cumsum((0,) + tuple(chunks))
    owners = [workers[i % 2] if where == "roundrobin" else workers[2 * i // len(chunks)]
              for i in range(len(chunks))]
    futures = [client.submit(cupy.asarray, x[a:b], workers=[w], pure=False)
               for a, b, w in zip(bounds[:-1], bounds[1:], owners, strict=True)]
    parts = [da.from_delayed(f, (n,), dtype=x.dtype, meta=cupy.empty(0, x.dtype))
             for f, n in zip(futures, chunks, strict=True)]
    out = da.concatenate(parts).persist()
    distributed.wait(out)
    return out, owners


def ragged(rng, n, count):
    cuts = np.sort(rng.integers(0, n + 1, size=count - 1))
    return tuple(int(c) for c in np.diff(np.concatenate([[0], cuts, [n]])))


def check_all(client, x, v, dx, dv, descending):
    """sort, argsort and sort_by_key in both orders (verify=True) against NumPy."""
    outs = [distsort.sort(dx, descending=descending, verify=True),
            distsort.argsort(dx, descending=descending, verify=True),
            *distsort.sort_by_key(dx, dv, descending=descending, verify=True),
            *distsort.sort_by_key(dx, dv, descending=descending, stable=True, verify=True)]
    got = [cupy.asnumpy(o) for o in client.compute(outs, sync=True)]
    perm = stable_argsort(x, descending=descending)
    assert np.array_equal(got[0], x[perm], equal_nan=True)
    np.testing.assert_array_equal(got[1], perm)
    rk, rv = sort_by_key_reference(x, v, descending)
    assert np.array_equal(got[2], rk, equal_nan=True)
    assert np.array_equal(got[3], rv, equal_nan=True)
    assert np.array_equal(got[4], x[perm], equal_nan=True)
    assert np.array_equal(got[5], v[perm], equal_nan=True)


def test_two_workers_share_the_gpu(client):
    """Two processes, each allocating from its own RMM pool on device 0."""
    def where():
        import rmm
        mr = rmm.mr.get_current_device_resource()  # a pool under rmm.statistics' counter
        return (cupy.cuda.runtime.getDevice(), type(mr).__name__,
                type(mr.get_upstream()).__name__, "rmm" in repr(cupy.cuda.get_allocator()))
    got = list(client.run(where).values())
    assert got == [(0, "StatisticsResourceAdaptor", "PoolMemoryResource", True)] * 2, got


def test_placement_and_group_sorts(client):
    """The network (``distsort.strategy`` "network"; by default two workers take the
    exchange, ``test_exchange_gpu.py``), chunks dealt round robin: each worker's chunks
    get consecutive positions, are sorted as groups where they lie, and the result is
    NumPy's."""
    rng = np.random.default_rng()
    n, count = 8 * 40_000, 8
    x = random_keys(rng, n, "float32", special_fraction=0.05)
    chunks = (n // count,) * count
    dx, owners = placed(client, x, chunks)
    plan = plan_sort(chunks, 4, read_view(dx.__dask_keys__(), gpu=True),
                     SortOptions(gpu=True, strategy="network"))
    ordered = [owners[i] for i in plan.perm]
    assert plan.strategy == "network" and plan.group >= 2, plan
    assert ordered[: count // 2] == [ordered[0]] * (count // 2) != ordered[count // 2:]
    with dask.config.set({"distsort.strategy": "network"}):
        s = distsort.sort(dx)
    assert any(name.startswith("distsort-group-") for name in s.dask.layers)
    got = cupy.asnumpy(client.compute(s, sync=True))
    assert np.array_equal(got, np.sort(x), equal_nan=True)


@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_one_device_strategy(client, descending):
    """Every chunk gathered on one GPU, sorted once and split (``distsort.strategy``
    "one-device"): chunks of both workers, ragged, NumPy's results."""
    rng = np.random.default_rng()
    n = int(rng.integers(100_000, 200_000))
    x = random_keys(rng, n, "float32", special_fraction=0.05, duplicates=True)
    v = random_keys(rng, n, "uint64")
    chunks = ragged(rng, n, 5)
    (dx, _), (dv, _) = placed(client, x, chunks), placed(client, v, chunks)
    with dask.config.set({"distsort.strategy": "one-device"}):
        names = list(distsort.sort(dx).dask.layers)
        assert not any(name.startswith("distsort-round") for name in names)
        assert sum(name.startswith("distsort-group-") for name in names) == 1
        check_all(client, x, v, dx, dv, descending)


@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize("exchange", ["ipc", "comm"])
def test_exchanges(client, exchange, descending):
    """The network's crossing parts copied through CUDA IPC or sent through the comm: the
    same results, and only what the exchange should move travels."""
    rng = np.random.default_rng()
    n = int(rng.integers(150_000, 250_000))
    x = random_keys(rng, n, "float64", special_fraction=0.02, duplicates=True)
    v = random_keys(rng, n, "int16")
    chunks = ragged(rng, n, 6)
    (dx, _), (dv, _) = placed(client, x, chunks, "blocks"), placed(client, v, chunks, "blocks")
    before = bytes_sent_by_kind(client)
    with dask.config.set({"distsort.exchange": exchange, "distsort.group": 1,
                          "distsort.strategy": "network"}):
        s = distsort.sort(dx, descending=descending)
        distributed.wait(s.persist())
        sent = diff_sent(before, bytes_sent_by_kind(client))
        kinds = {round_task_kind(k) for k in dict(s.dask)}
        if exchange == "ipc":
            assert sent.get("ipc", 0) > 0 and "share" in kinds and "head" not in kinds, sent
        else:
            assert sent.get("ipc", 0) == 0 and "head" in kinds and "share" not in kinds, sent
        check_all(client, x, v, dx, dv, descending)


@pytest.mark.parametrize("count", [2, 3, 5, 7, 12])
def test_ragged_chunk_counts(client, count):
    rng = np.random.default_rng()
    n = count * 3000 + int(rng.integers(0, 3000))
    x = random_keys(rng, n, "int32", duplicates=count % 2 == 0)
    v = random_keys(rng, n, "float32")
    chunks = ragged(rng, n, count)
    (dx, _), (dv, _) = placed(client, x, chunks), placed(client, v, chunks)
    check_all(client, x, v, dx, dv, descending=count % 2 == 1)


def ooc_budget(chunk, itemsize):
    """A device budget in which a run holds three chunks (``test_out_of_core._budget``):
    eight chunks on two workers then outgrow half their budgets."""
    return int(3 * chunk * itemsize / 0.85) + 1


@pytest.mark.parametrize("merge", ["network", "kway"])
def test_out_of_core_two_workers(client, merge):
    """Device budgets far below the data: the out-of-core merge on both workers, by
    the network between runs or by the k-way merge with one exchange of slices."""
    rng = np.random.default_rng()
    chunk, count = 20_000, 8
    n = chunk * count
    x = random_keys(rng, n, "float32", special_fraction=0.02)
    v = random_keys(rng, n, "uint16")
    (dx, _), (dv, _) = placed(client, x, (chunk,) * count), placed(client, v, (chunk,) * count)
    perm = stable_argsort(x)
    cases = [(4, lambda: [distsort.sort(dx, verify=True)], [x[perm]]),
             (12, lambda: [distsort.argsort(dx, verify=True)], [perm]),
             (6, lambda: list(distsort.sort_by_key(dx, dv, verify=True)),
              list(sort_by_key_reference(x, v)))]
    for itemsize, make, want in cases:
        with dask.config.set({"distsort.device-memory-limit": ooc_budget(chunk, itemsize),
                              "distsort.out-of-core-merge": merge}):
            outs = make()
        assert any(name.startswith("distsort-run-") for name in outs[0].dask.layers)
        assert any(name.startswith("distsort-kway-slice-") for name in outs[0].dask.layers
                   ) == (merge == "kway")
        got = client.compute(outs, sync=True)
        for g, w in zip(got, want, strict=True):
            assert np.array_equal(cupy.asnumpy(g), w, equal_nan=True)


def test_results_persisted_one_at_a_time(client):
    """Both results of ``sort_by_key`` persisted one after the other while the first is
    held, in both orders (``stable=True`` with 8-byte values is an argsort and a
    gather), and a second sort of the same input (issue 34 saw the scheduler fail an
    assertion in ``decide_worker`` here).  Last in this module, since a failure can take
    a worker down; a bounded wait, so that a hang fails the test."""
    rng = np.random.default_rng()
    n, count = 8 * 25_000, 8
    x = random_keys(rng, n, "uint32", duplicates=True)
    v = random_keys(rng, n, "int64")
    chunks = (n // count,) * count
    (dx, _), (dv, _) = placed(client, x, chunks), placed(client, v, chunks)
    held = []
    for stable in (False, True):
        for out in distsort.sort_by_key(dx, dv, stable=stable):
            held.append(out.persist())
            distributed.wait(held[-1], timeout=60)
    held.append(distsort.sort(dx).persist())
    distributed.wait(held[-1], timeout=60)
    perm = stable_argsort(x)
    want = [*sort_by_key_reference(x, v), x[perm], v[perm], x[perm]]
    got = [cupy.asnumpy(o) for o in client.compute(held, sync=True)]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_the_exchange_between_workers_takes_cupy_chunks(client):
    """The one exchange (``distsort.plan.exchange``) between the two workers: the plan's
    own choice for CuPy chunks where they fit, and what forcing it gives (the checks of
    ``test_exchange_gpu.py``, on this module's cluster with ``verify=True``)."""
    rng = np.random.default_rng()
    x = random_keys(rng, 12_000, "float32")
    dx, _ = placed(client, x, (3000,) * 4)
    with distsort.api.planning() as plans:
        s = distsort.sort(dx)
    assert plans[0].strategy == "exchange", plans
    assert np.array_equal(cupy.asnumpy(client.compute(s, sync=True)), np.sort(x),
                          equal_nan=True)
    n = 60_000
    x = random_keys(rng, n, "float64", special_fraction=0.02, duplicates=True)
    v = random_keys(rng, n, "int16")
    chunks = ragged(rng, n, 5)
    (dx, _), (dv, _) = placed(client, x, chunks), placed(client, v, chunks)
    for descending in (False, True):
        with distsort.api.planning(strategy="exchange") as plans:
            check_all(client, x, v, dx, dv, descending)
        assert plans and {p.strategy for p in plans} == {"exchange"}, plans
