"""distsort.cluster on the CPU: local clusters, connecting, and the GPU choices (faked)."""
import json
import sys
import types
import warnings
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

import distsort  # noqa: E402
from distsort import cluster as cl  # noqa: E402
from distsort.cluster import locality  # noqa: E402
from distsort.core import taskkeys  # noqa: E402
from distsort.core.taskkeys import round_task_kind, task_round  # noqa: E402
from distsort.plan.network import plan_network  # noqa: E402
from arrays import assert_only_crossing_parts_travel  # noqa: E402


def _sorts_on(client):
    x = np.random.default_rng().standard_normal(30_000)
    s = client.compute(distsort.sort(da.from_array(x, chunks=7_000))).result()
    assert np.array_equal(s, np.sort(x))


def test_local_cpu_cluster():
    with (cl.local_cpu_cluster(n_workers=2, memory_limit="300MiB") as cluster,
          distributed.Client(cluster) as client):
        workers = client.scheduler_info(n_workers=-1)["workers"].values()
        assert len(workers) == 2
        assert all(w["memory_limit"] == 300 * 2**20 and w["nthreads"] == 1
                   for w in workers)
        assert all(w["host"] == "127.0.0.1" for w in workers)
        _sorts_on(client)


def test_connect_new_local_cluster_is_closed_with_the_client():
    client = cl.connect(gpu=False, n_workers=1, memory_limit="300MiB")
    cluster = client.cluster
    try:
        assert isinstance(cluster, distributed.LocalCluster)
        _sorts_on(client)
    finally:
        client.close()
    assert cluster.status.name == "closed"


def test_connect_to_address_and_scheduler_file(tmp_path, cluster_client):
    address = cluster_client.scheduler.address
    with cl.connect(scheduler_address=address) as client:
        assert client.scheduler.address == address
        _sorts_on(client)
    sched = tmp_path / "scheduler.json"
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, host="127.0.0.1",
                                  dashboard_address=":0",
                                  scheduler_kwargs={"scheduler_file": str(sched)}) as lc:
        assert json.loads(sched.read_text())["address"] == lc.scheduler_address
        with cl.connect(scheduler_file=str(sched)) as client:
            assert client.scheduler.address == lc.scheduler_address
            _sorts_on(client)
        assert lc.status.name == "running"  # not ours to close


def test_chunks_stay_on_their_workers(cluster_client):
    """Each compare-split runs where the chunk it keeps lives: only heads and tails
    (and probes) travel between the two workers, read from their transfer logs.
    Without the scheduler plugin of ``distsort.cluster.locality`` every one of 12 such sorts
    moved whole chunks here; several sorts, so that a lucky placement cannot pass."""
    rng = np.random.default_rng()
    with cluster_client.as_current():
        for _ in range(4):
            x = rng.standard_normal(4 * 2**19)  # 4 chunks of 4 MiB
            dx = da.from_array(x, chunks=2**19).persist()
            distributed.wait(dx)
            before = cl.bytes_sent_by_kind(cluster_client)
            s = distsort.sort(dx).persist()
            distributed.wait(s)
            sent = cl.diff_sent(before, cl.bytes_sent_by_kind(cluster_client))
            assert_only_crossing_parts_travel(sent, workers=2)
            assert np.array_equal(s.compute(), np.sort(x))
    assert cluster_client.run_on_scheduler(_has_plugin)


class _PairsInFlight(distributed.SchedulerPlugin):
    """Counts compare-split pairs between their ``tail`` and both their merges."""

    name = "test-pairs-in-flight"

    def __init__(self, partner):
        self.partner = partner  # (round, hi) -> lo
        self.started, self.merged, self.most = set(), {}, 0

    def transition(self, key, start, finish, *args, **kwargs):
        kind = round_task_kind(key)
        if kind is None:
            return
        rnd = task_round(key)
        if kind == "tail" and finish == "processing":
            self.started.add((rnd, key[1]))
        elif kind in ("low", "high") and finish == "memory":
            pair = (rnd, key[1] if kind == "low" else self.partner[rnd, key[1]])
            self.merged[pair] = self.merged.get(pair, 0) + 1
        done = sum(1 for v in self.merged.values() if v == 2)
        self.most = max(self.most, len(self.started) - done)


class _Held(distributed.WorkerPlugin):
    """The most bytes of distinct NumPy buffers a worker held (views counted once),
    leaving out the persisted input."""

    name = "test-held"

    def __init__(self, skip):
        self.skip, self.most = skip, 0  # the input's keys and the futures they alias

    def setup(self, worker):
        self.worker = worker

    def transition(self, key, start, finish, **kwargs):
        seen = {}
        for k, v in self.worker.data.items():
            if not str(k[0] if isinstance(k, tuple) else k).startswith(self.skip):
                for part in v if isinstance(v, tuple) else (v,):
                    a = part
                    while isinstance(a.base, np.ndarray):
                        a = a.base
                    seen[id(a)] = a.nbytes
        self.most = max(self.most, sum(seen.values()))


def _most_held(dask_worker=None):
    return dask_worker.plugins["test-held"].most


def test_pairs_in_flight_and_memory_stay_bounded(cluster_client):
    """16 chunks on 2 workers: at most ``pairs_in_flight()`` (2 per worker) pairs between
    their tail and their merges (without the window a round's 8 pairs start at once),
    and no worker holds more than its 8 chunks plus 3 per pair it has in flight."""
    n, c = 2**20, 16
    workers = sorted(cluster_client.scheduler_info()["workers"])
    parts = [cluster_client.submit(np.random.default_rng(i).standard_normal, n,
                                   workers=[workers[i % 2]], pure=False) for i in range(c)]
    partner = {(r, hi): lo for r, rnd in enumerate(plan_network(c))
               for lo, hi in rnd.pairs}
    # Every chunk sorted alone (no groups of a worker's chunks): the full network's rounds.
    with cluster_client.as_current(), dask.config.set({"distsort.group": 1}):
        x = da.concatenate([da.from_delayed(f, (n,), dtype=float) for f in parts]).persist()
        distributed.wait(x)
        cluster_client.register_plugin(_PairsInFlight(partner))
        cluster_client.register_plugin(_Held((x.name, "standard_normal")))
        window = locality.pairs_in_flight()
        s = distsort.sort(x).persist()
        distributed.wait(s)
        held = cluster_client.run(_most_held)  # before a compute gathers the chunks
        assert np.array_equal(s.compute(), np.sort(x.compute()))
    assert window == 4
    most = cluster_client.run_on_scheduler(
        lambda dask_scheduler: dask_scheduler.plugins["test-pairs-in-flight"].most)
    assert 2 <= most <= window
    for most in held.values():
        assert most <= (c // 2 + 3 * window // 2) * n * 8, most / (n * 8)


def _has_plugin(dask_scheduler=None):
    return taskkeys.PLUGIN_NAME in dask_scheduler.plugins


def test_keeps_reads_the_chunk_position():
    """Which tasks the plugin restricts: distsort's tasks of the same chunk position."""
    chunk = ("distsort-low-r02-abc", 3)
    assert taskkeys.keeps(("distsort-high-r03-abc", 3), chunk)
    assert taskkeys.keeps(("distsort-edges-r02-abc", 3), chunk)
    assert taskkeys.keeps(("distsort-sort-abc", 3), chunk)  # the output's task
    assert taskkeys.keeps(("distsort-prepare-abc", 3), ("array-xyz", 3))
    assert not taskkeys.keeps(("distsort-low-r03-abc", 2), chunk)  # the partner's
    assert not taskkeys.keeps(("other-task", 3), chunk)
    assert not taskkeys.keeps("distsort-sort-abc", chunk)


def test_plugin_registration_without_a_client_or_when_it_fails(monkeypatch):
    def no_client():
        raise ValueError("No clients found")
    monkeypatch.setattr(distributed, "default_client", no_client)
    assert locality.keep_chunks_in_place() is False  # no distributed client: nothing to do

    class Refusing:
        asynchronous = False
        scheduler = type("S", (), {"address": "tcp://nowhere:1"})()

        def register_plugin(self, plugin, name=None):
            raise RuntimeError("no module named distsort")

    monkeypatch.setattr(locality, "_registered", {})
    with pytest.warns(RuntimeWarning, match="could not register its scheduler plugin"):
        assert locality.keep_chunks_in_place(Refusing()) is False
    assert locality.keep_chunks_in_place(Refusing()) is False  # warned once


def test_bytes_sent_by_kind_sees_a_chunk_that_moves(cluster_client):
    """The check above can fail: a task pinned to the other worker pulls a whole chunk."""
    workers = sorted(cluster_client.scheduler_info()["workers"])
    a = cluster_client.submit(np.ones, 2**19, key="chunk-a", workers=[workers[0]])
    before = cl.bytes_sent_by_kind(cluster_client)
    cluster_client.submit(np.sum, a, key="sum-a", workers=[workers[1]]).result()
    sent = cl.diff_sent(before, cl.bytes_sent_by_kind(cluster_client))
    assert sent.get("chunk", 0) >= 2**22
    with pytest.raises(AssertionError, match="whole chunks travel"):
        assert_only_crossing_parts_travel(sent, workers=1)


def test_connect_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="scheduler file"):
        cl.connect(scheduler_file=str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="not both"):
        cl.connect(scheduler_address="tcp://127.0.0.1:1", scheduler_file="x.json")


def test_gpu_available_without_cupy(monkeypatch):
    monkeypatch.setattr(cl.importlib.util, "find_spec",
                        lambda name: None if name == "cupy" else object())
    assert cl.gpu_available() is False


def test_gpu_available_with_a_broken_cupy(monkeypatch):
    fake = types.ModuleType("cupy")
    fake.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(
        getDeviceCount=lambda: (_ for _ in ()).throw(RuntimeError("no CUDA driver"))))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(cl.importlib.util, "find_spec", lambda name: object())
    assert cl.gpu_available() is False
    fake.cuda.runtime.getDeviceCount = lambda: 2
    assert cl.gpu_available() is True


@pytest.fixture
def fake_dask_cuda(monkeypatch):
    """A stand-in ``dask_cuda`` that records what LocalCUDACluster was given."""
    calls = []
    module = types.ModuleType("dask_cuda")
    module.LocalCUDACluster = lambda **kw: calls.append(kw) or kw
    monkeypatch.setitem(sys.modules, "dask_cuda", module)
    return calls


def test_cuda_cluster_with_ucx(fake_dask_cuda, monkeypatch):
    monkeypatch.setattr(cl, "ucx_available", lambda: True)
    monkeypatch.setattr(cl.importlib.util, "find_spec", lambda name: object())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kw = cl.local_cuda_cluster(n_workers=2)
    assert kw["protocol"] == "ucx" and kw["n_workers"] == 2
    assert kw["rmm_pool_size"] == cl.RMM_POOL_FRACTION
    assert kw["rmm_allocator_external_lib_list"] == ["cupy"]
    assert kw["device_memory_limit"] == cl.DEVICE_MEMORY_FRACTION
    assert 0 < cl.DEVICE_MEMORY_FRACTION < cl.RMM_POOL_FRACTION < 1


def test_cuda_cluster_falls_back_to_tcp_with_a_warning(fake_dask_cuda, monkeypatch):
    monkeypatch.setattr(cl, "ucx_available", lambda: False)
    monkeypatch.setattr(cl.importlib.util, "find_spec", lambda name: None)
    with pytest.warns(RuntimeWarning, match="TCP") as record:
        kw = cl.local_cuda_cluster(device_memory_limit="40GB")
    assert len(record) == 1
    assert kw["protocol"] == "tcp" and kw["rmm_pool_size"] is None
    assert "rmm_allocator_external_lib_list" not in kw
    assert kw["device_memory_limit"] == "40GB"


def test_cuda_cluster_explicit_protocol_and_pool(fake_dask_cuda, monkeypatch):
    monkeypatch.setattr(cl, "ucx_available", lambda: False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an explicit choice is not warned about
        kw = cl.local_cuda_cluster(protocol="tcp", rmm_pool_size="10GB",
                                   CUDA_VISIBLE_DEVICES="0,1")
    assert kw["protocol"] == "tcp" and kw["rmm_pool_size"] == "10GB"
    assert kw["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_cuda_cluster_without_dask_cuda(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask_cuda", None)  # import fails
    with pytest.raises(ImportError, match="dask-cuda"):
        cl.local_cuda_cluster()


def test_module_imports_no_gpu_library():
    """Importing distsort.cluster and the CLI imports no GPU library that distsort did not."""
    import subprocess
    gpu = "('cupy', 'dask_cuda', 'rmm', 'distributed_ucxx')"
    code = (f"import sys, distsort; before = {{m for m in {gpu} if m in sys.modules}}; "
            "import distsort.cluster, distsort.cli; "
            f"print(sorted(m for m in {gpu} if m in sys.modules and m not in before))")
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=root).stdout
    assert out.strip() == "[]"


def test_the_command_imports_numba_only_where_it_sorts_on_disk():
    """numba takes a quarter second to import: the command's start (its modules, the
    disk path's plan) does without it; the disk path's sort imports it."""
    import subprocess
    code = ("import sys, distsort.cli.command, distsort.cli.sort, distsort.cli.ondisk; "
            "print('numba' in sys.modules)")
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=root).stdout
    assert out.strip() == "False"


def test_a_cluster_that_does_not_close_in_time_has_its_workers_killed():
    """``close_within``: a local cluster whose close outlasts the time given (a nanny
    restarting a worker killed as the cluster closes) has its worker processes killed,
    so that the command ends instead of waiting for ever; the caller's other processes
    live on."""
    import subprocess
    import sys
    from types import SimpleNamespace

    from distsort.cluster import close_within

    def sleeper():
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])

    def nanny(proc):  # a Nanny as far as the cluster's worker processes go
        return SimpleNamespace(process=SimpleNamespace(process=proc))

    class Stuck:
        def __init__(self, worker):
            self.workers = {"w": nanny(worker)}

        def close(self, timeout=None):
            raise TimeoutError(f"not closed in {timeout} s")

    class Closes(Stuck):
        def close(self, timeout=None):
            pass

    worker, other = sleeper(), sleeper()
    try:
        assert close_within(Closes(worker), 1) and worker.poll() is None
        assert not close_within(Stuck(worker), 1)
        assert worker.wait(timeout=10) != 0  # killed
        assert other.poll() is None  # not the cluster's
    finally:
        worker.kill()
        other.kill()


def _sorts_in_a_task(n, seed):
    """On a worker: sorts of plain NumPy arrays, one that its plan sorts at once and a
    keyed one that builds a graph, with the task stream's keys seen meanwhile."""
    import distributed
    rng = np.random.default_rng(seed)
    k, v = rng.standard_normal(n), rng.integers(0, 9, n)
    s = distsort.sort(k)
    sk, sv = distsort.sort_by_key(k, v)
    order = np.lexsort((v, k))
    ok = (np.array_equal(s, np.sort(k)) and np.array_equal(sk, k[order])
          and np.array_equal(sv, v[order]))
    return ok, type(sk).__name__, distributed.get_worker().address


def test_plain_arrays_in_a_task_are_sorted_there(cluster_client):
    """distsort called on plain arrays inside a task sorts them in the task, as
    ``numpy.sort`` would: the worker's client would send the arrays to the scheduler
    inside a graph and run it on the cluster."""
    before = cluster_client.run_on_scheduler(
        lambda dask_scheduler: len(dask_scheduler.transition_log))
    ok, kind, _ = cluster_client.submit(_sorts_in_a_task, 50_000, 3, pure=False).result()
    assert ok and kind == "ndarray"
    keys = cluster_client.run_on_scheduler(
        lambda dask_scheduler: [str(t[0]) for t in list(dask_scheduler.transition_log)])
    assert not [k for k in keys[before:] if "distsort" in k], keys[before:][:5]


def test_one_place_is_one_process_or_one_worker(cluster_client):
    """Where the gathers of stable sorts take each output chunk in one task: Dask's
    local schedulers, not a cluster of two workers."""
    from distsort.eager import one_place
    x = da.arange(4, chunks=2)
    assert one_place([x])
    with cluster_client.as_current():
        assert not one_place([x])
