"""Persisted chunks read where a worker holds them (``distsort.cluster.held``): reading a
store without moving anything, and whole out-of-core sorts whose stage tasks take no
dependency on the input, on a two-worker cluster."""
from types import SimpleNamespace

import dask
import dask.array as da
import numpy as np
import pytest

import distsort
from distsort.cluster.held import host_view, peek
from distsort.core.taskkeys import HOLDER, Held, held_keys

from arrays import persisted_on_two_workers


class Spilled:
    """What dask-cuda keeps in host memory for a spilled CuPy array."""

    def __init__(self, a, serializer="dask", kind="cupy.ndarray"):
        self.header = {"type": kind, "serializer": serializer,
                       "sub-header": {"shape": a.shape, "typestr": a.dtype.str,
                                      "strides": a.strides}}
        self.frames = [memoryview(a.ravel(order="K")).cast("B")]  # the bytes in memory order


class Store(dict):
    """A dask-cuda ``DeviceHostFile`` as far as ``peek`` looks at it: reading an item
    through the store itself is recorded (it would move the chunk to the device)."""

    def __init__(self, device=(), host=()):
        super().__init__()
        self.device_buffer = SimpleNamespace(fast=SimpleNamespace(d=dict(device)))
        self.host = dict(host)
        self.read_through = []

    def __getitem__(self, key):
        self.read_through.append(key)
        if key in self.host:
            return "unspilled"
        return self.device_buffer.fast.d[key]


def test_a_spilled_chunk_is_read_as_a_read_only_view_of_its_host_copy():
    a = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    store = Store(host={("x", 0): Spilled(a)})
    got = peek(store, ("x", 0))
    assert np.shares_memory(got, a) and np.array_equal(got, a) and got.dtype == a.dtype
    assert not got.flags.writeable
    assert store.read_through == []


def test_device_chunks_as_they_are_and_anything_else_through_the_store():
    dev = object()
    a = np.arange(6, dtype=np.int64)
    store = Store(device={("x", 0): dev},
                  host={("x", 1): Spilled(a, serializer="pickle"),
                        ("x", 2): Spilled(a, kind="cudf.DataFrame")})
    assert peek(store, ("x", 0)) is dev
    assert peek(store, ("x", 1)) == "unspilled" and peek(store, ("x", 2)) == "unspilled"
    assert store.read_through == [("x", 1), ("x", 2)]
    assert peek({("y", 0): a}, ("y", 0)) is a  # a plain store (not dask-cuda)
    with pytest.raises(KeyError):
        peek(store, ("x", 9))


def test_host_view_refuses_what_is_not_one_copy_of_the_bytes():
    a = np.arange(8, dtype=np.int32)
    s = Spilled(a)
    s.frames = [s.frames[0][:16]]  # a partial frame
    assert host_view(s) is None
    s.frames = [memoryview(a).cast("B")] * 2  # split frames
    assert host_view(s) is None
    assert host_view("not spilled") is None
    f = np.asfortranarray(np.arange(6, dtype=np.uint16).reshape(2, 3))
    assert np.array_equal(host_view(Spilled(f)), f)


def test_held_keys_and_held_arguments_are_no_dependencies():
    from dask._task_spec import convert_legacy_graph
    task = convert_legacy_graph({("x", 0): 1, ("s", 0): (len, Held(("x", 0)))})[("s", 0)]
    assert task.dependencies == frozenset()
    assert held_keys(task) == [("x", 0)]
    assert held_keys(None) == []


@pytest.fixture
def held_path(monkeypatch):
    """Out-of-core sorts of NumPy chunks staged and read as held chunks, as CuPy ones
    are on GPU workers (so that the graph and the scheduler's part run on the CPU)."""
    from distsort.plan import sortplan
    real = sortplan._plan_out_of_core

    def staged(*args, **kwargs):
        planned = real(*args, **kwargs)
        return planned and (planned[0]._replace(stage=True, held=True), planned[1])

    monkeypatch.setattr(sortplan, "_plan_out_of_core", staged)
    with dask.config.set({"distsort.device-memory-limit": int(3 * 1000 * 16 / 0.85) + 1}):
        yield


def _holder_state(dask_scheduler=None):
    cs = dask_scheduler.clients.get(HOLDER)
    plugin = dask_scheduler.plugins["distsort-keep-chunks-in-place"]
    return (0 if cs is None else len(cs.wants_what)), len(plugin.holds), len(plugin.readers)


def test_stage_tasks_read_held_chunks_on_their_holders(cluster_client, held_path):
    from dask._task_spec import convert_legacy_graph
    from distributed import get_task_stream, wait
    rng = np.random.default_rng(5)
    x = rng.standard_normal(16_000)
    with cluster_client.as_current():
        xd, workers = persisted_on_two_workers(cluster_client, x, 1000)
        wait(xd)
        s, a = distsort.sort(xd), distsort.argsort(xd)
        tasks = convert_legacy_graph(dict(s.__dask_graph__()))
        stage = [t for k, t in tasks.items() if "distsort-stagek" in str(k)]
        assert len(stage) == 16 and all(t.dependencies == frozenset() for t in stage)
        with get_task_stream(cluster_client) as ts:
            got_s, got_a = cluster_client.compute([s, a], sync=True)
    assert np.array_equal(got_s, np.sort(x))
    assert np.array_equal(got_a, np.argsort(x, kind="stable"))
    ran = {(t["key"][0], t["key"][1]): t["worker"] for t in ts.data
           if "distsort-stagek" in str(t["key"])}
    assert ran and all(w == workers[i % 2] for (_, i), w in ran.items())
    assert cluster_client.run_on_scheduler(_holder_state) == (0, 0, 0)


def test_a_persisted_input_dropped_at_once_is_still_read(cluster_client, held_path):
    """``sort(x.persist()).persist()``: nothing but the sort's graph refers to the input
    chunks when it arrives; the scheduler plugin holds them until they are read."""
    from distributed import wait
    x = np.random.default_rng(6).integers(-50, 50, 8000).astype(np.int32)
    with cluster_client.as_current():
        for _ in range(3):
            y = distsort.sort(cluster_client.persist(da.from_array(x, chunks=1000)))
            y = cluster_client.persist(y)
            wait(y)
            assert np.array_equal(y.compute(), np.sort(x))
            del y
    assert cluster_client.run_on_scheduler(_holder_state) == (0, 0, 0)


def test_a_chunk_read_away_from_its_holder_is_fetched_and_a_lost_one_named(cluster_client):
    from distributed import wait

    from distsort.cluster.held import read_held
    a = np.arange(100)
    workers = sorted(cluster_client.scheduler_info(n_workers=-1)["workers"])
    x = cluster_client.persist(da.from_array(a, chunks=50), workers=[workers[0]])
    with cluster_client.as_current():
        wait(x)
    key = x.__dask_keys__()[1]
    got = cluster_client.submit(read_held, Held(key), workers=[workers[1]], pure=False)
    assert np.array_equal(got.result(), a[50:])
    lost = cluster_client.submit(read_held, Held(("gone", 0)), pure=False)
    with pytest.raises(KeyError, match="released before the sort read it"):
        lost.result()


def _chunk(seed, size):
    import cupy
    return cupy.random.default_rng(seed).standard_normal(size, dtype=np.float32)


def _spilled(keys, dask_worker=None):
    return sorted(str(k) for k in keys if k in dask_worker.data.host)


@pytest.mark.gpu
def test_spilled_cupy_chunks_are_read_from_their_host_copies():
    """A dask-cuda worker holding 16 chunks within a 4-chunk limit: the sort reads the
    spilled ones without moving them back to the device, and equals NumPy's."""
    pytest.importorskip("dask_cuda")
    cupy = pytest.importorskip("cupy")
    from distributed import Client, wait

    from distsort.cluster import local_cuda_cluster
    size, n = 1 << 18, 16
    with (local_cuda_cluster(n_workers=1, device_memory_limit=4 * 4 * size + 1,
                             protocol="tcp") as cluster,
          Client(cluster) as client):
        x = da.concatenate([da.from_delayed(dask.delayed(_chunk)(i, size), (size,),
                                            np.float32, meta=cupy.empty(0, np.float32))
                            for i in range(n)])
        x = client.persist(x)
        wait(x)
        keys = x.__dask_keys__()
        before = set(next(iter(client.run(_spilled, keys).values())))
        assert len(before) >= n - 4
        y = distsort.sort(x)
        assert any("distsort-stagek" in str(k) for k in y.__dask_graph__())
        got = y.compute().get()
        after = set(next(iter(client.run(_spilled, keys).values())))
        ref = np.sort(np.concatenate([_chunk(i, size).get() for i in range(n)]))
    assert before <= after  # no spilled chunk went back to the device
    assert np.array_equal(got, ref)
