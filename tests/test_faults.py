"""Faults: a worker killed mid-sort, and tasks that must be safe to re-run.

A sort that loses or duplicates one element is worse than no sort: after a worker
dies the sort either finishes with the right result (Dask recomputes what was
lost, which is only sound if no task modifies its inputs) or fails with a clear
error.  It never returns a wrong result.
"""
import importlib
import os
import signal
import time

import dask
import dask.array as da
import numpy as np
import pytest

import distsort
from distsort.backends import chunk as chunk_module
from distsort.backends.cpu import numpy_backend as npb
from distsort.core.order import encode
from backends import BACKENDS
from arrays import (DTYPES, assert_same_multiset, assert_sorted_like_numpy, bits, random_keys,
                    stable_argsort)

#: The module of each backend, by its name.
BACKEND_MODULES = {"numpy": "distsort.backends.cpu.numpy_backend",
                   "cupy": "distsort.backends.gpu.cupy_backend"}

#: Faults injected, results checked, and how each run under a fault ended.
COUNTS = {"kills": 0, "finished_correct": 0, "failed_clearly": 0, "results_checked": 0,
          "task_calls_twice": 0}


# ------------------------------------------------------------------ re-runnable tasks
TASKS = ["prepare", "probe", "crossing_bound", "head", "tail", "merge_low", "merge_high",
         "finish_keys", "finish_values", "sort_blocks"]




def _is_array(obj):
    return isinstance(obj, np.ndarray) or type(obj).__module__.startswith("cupy")


def _host(x):
    return x.get() if type(x).__module__.startswith("cupy") else np.asarray(x)


def _arrays(obj):
    """The NumPy or CuPy arrays in a task's argument or result (tuples nest)."""
    if _is_array(obj):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [a for o in obj for a in _arrays(o)]
    return []


def _same(x, y):
    ax, ay = [_host(a) for a in _arrays(x)], [_host(a) for a in _arrays(y)]
    same = all(a.dtype == b.dtype and a.shape == b.shape and np.array_equal(bits(a), bits(b))
               for a, b in zip(ax, ay, strict=False))
    return len(ax) == len(ay) and same and (ax or x == y)


def _twice(func, calls):
    """``func`` run twice on the same inputs: both results equal, inputs unchanged, and
    (NumPy) the result made read-only, so that a later task writing to it raises."""
    def wrapper(*args, **kwargs):
        before = [_host(a).copy() for a in _arrays(args)]
        first = func(*args, **kwargs)
        second = func(*args, **kwargs)
        assert _same(first, second), f"{func.__name__} gave two results on the same inputs"
        for a, b in zip(_arrays(args), before, strict=False):
            assert np.array_equal(bits(_host(a)), bits(b)), f"{func.__name__} modified its input"
        for a in _arrays(first):
            if isinstance(a, np.ndarray):
                a.flags.writeable = False
        calls[func.__name__] = calls.get(func.__name__, 0) + 1
        return first
    return wrapper


def _frozen(x):
    x = x.copy()
    x.flags.writeable = False
    return x


def _on(x, backend):
    """``x`` as the backend's array (read-only for NumPy), and how Dask should wrap it."""
    if backend == "cupy":
        import cupy
        return cupy.asarray(x), False
    return _frozen(x), True


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_task_twice_on_read_only_inputs(monkeypatch, dtype, backend):
    """Every backend task run twice: the same result and unchanged inputs; with NumPy
    every input and intermediate array is read-only as well."""
    module = importlib.import_module(BACKEND_MODULES[backend])
    calls = {}
    # The CuPy backend's group sorts sort a concatenation they own with ``sort_owned``
    # (in place, so it cannot run twice on the same inputs) instead of ``prepare``.
    tasks = [t for t in TASKS if not (t == "prepare" and backend == "cupy")]
    for name in tasks:  # head and tail are the Backend's own: the chunk module's functions
        owner = module if hasattr(module, name) else chunk_module
        monkeypatch.setattr(owner, name, _twice(getattr(owner, name), calls))
    if backend == "cupy":
        sort_owned = module.sort_owned
        monkeypatch.setattr(module, "sort_owned", lambda *a, **k: (
            calls.__setitem__("sort_owned", calls.get("sort_owned", 0) + 1) or sort_owned(*a, **k)))
        tasks.append("sort_owned")
    rng = np.random.default_rng(DTYPES.index(dtype) + 100)
    x = random_keys(rng, 1203, dtype, special_fraction=0.2, duplicates=True)
    v = random_keys(rng, 1203, "float64", special_fraction=0.2)
    grid = x[:1200].reshape(40, 30)
    chunks = (100, 0, 303, 300, 250, 250)
    (bx, asarray), (bv, _), (bg, _) = _on(x, backend), _on(v, backend), _on(grid, backend)
    dx = da.from_array(bx, chunks=(chunks,), asarray=asarray)
    dv = da.from_array(bv, chunks=(chunks[::-1],), asarray=asarray)
    dg = da.from_array(bg, chunks=(7, 30), asarray=asarray)
    out = dask.compute(distsort.sort(dx), distsort.sort(dx, descending=True),
                       distsort.argsort(dx, descending=True),
                       *distsort.sort_by_key(dx, dv, verify=True),
                       distsort.sort(dg, axis=1), distsort.argsort(dg, axis=1),
                       scheduler="sync")
    out = [_host(o) for o in out]
    assert_sorted_like_numpy(out[0], x)
    assert_sorted_like_numpy(out[1], x, descending=True)
    np.testing.assert_array_equal(out[2], stable_argsort(x, descending=True))
    assert_sorted_like_numpy(out[3], x)
    ref = dask.compute(*distsort.sort_by_key(x, v), scheduler="sync")
    np.testing.assert_array_equal(encode(out[4], canonical=True), encode(ref[1], canonical=True))
    assert_same_multiset(out[4], v)
    assert np.array_equal(out[5], np.sort(grid, axis=1), equal_nan=True)
    np.testing.assert_array_equal(out[6], np.argsort(grid, axis=1, kind="stable"))
    assert set(calls) == set(tasks), f"not every task ran: {sorted(set(tasks) - set(calls))}"
    COUNTS["task_calls_twice"] += sum(calls.values())
    COUNTS["results_checked"] += 7


def test_a_task_that_writes_to_its_input_is_caught(monkeypatch):
    """The harness above can fail: a merge that sorts its input in place is reported."""
    calls = {}

    original = npb.merge_low

    def merge_low_in_place(a, b_head, order=None):
        a.sort()  # the bug the harness is for: a retry would see a changed input
        return original(a, b_head, order)

    monkeypatch.setattr(npb, "prepare", _twice(npb.prepare, calls))
    monkeypatch.setattr(npb, "merge_low", _twice(merge_low_in_place, calls))
    x = np.random.default_rng(0).normal(size=400)
    with pytest.raises(ValueError, match="read-only"):
        distsort.sort(da.from_array(x, chunks=100)).compute(scheduler="sync")


# ------------------------------------------------------------------ worker loss
distributed = pytest.importorskip("distributed")


class SlowMerges(distributed.WorkerPlugin):
    """Make every merge on a worker take ``delay`` seconds, so a kill lands mid-sort.

    Installed again on the worker the nanny restarts.  Tasks refer to backend
    functions by name, so they pick up the patched ones.
    """

    def __init__(self, delay, backend):
        self.delay, self.backend = delay, backend

    def setup(self, worker):
        import importlib
        backend = importlib.import_module(BACKEND_MODULES[self.backend])
        for name in ("merge_low", "merge_high"):
            func = getattr(backend, name)
            if not getattr(func, "slowed", False):
                setattr(backend, name, _slowed(func, self.delay))


def _slowed(func, delay):
    def slow(*args):
        time.sleep(delay)
        return func(*args)
    slow.slowed = True
    return slow


def _merges_done(dask_scheduler):
    """(merges finished, merges in the graph) as the scheduler sees them."""
    done = total = 0
    for ts in list(dask_scheduler.tasks.values()):
        if "-low-" in str(ts.key) or "-high-" in str(ts.key):
            total += 1
            done += ts.state in ("memory", "released", "forgotten")
    return done, total


@pytest.fixture(scope="module", params=BACKENDS)
def cluster(request):
    """(client, workers, backend): 3 CPU worker processes, or a LocalCUDACluster (a
    worker per GPU, each a process under a nanny)."""
    if request.param == "cupy":
        dask_cuda = pytest.importorskip("dask_cuda")
        cl = dask_cuda.LocalCUDACluster(threads_per_worker=1, dashboard_address=":0")
    else:
        cl = distributed.LocalCluster(processes=True, n_workers=3, threads_per_worker=1,
                                      host="127.0.0.1", dashboard_address=":0")
    with cl, distributed.Client(cl, set_as_default=False) as client:
        client.register_plugin(SlowMerges(0.03, request.param), name="slow-merges")
        yield client, len(cl.workers), request.param


def _kill_one_worker_mid_sort(client, futures, fraction):
    """SIGKILL the worker that holds the most results once ``fraction`` of the merges ran."""
    pids = client.run(os.getpid)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, total = client.run_on_scheduler(_merges_done)
        if (total and done >= fraction * total) or all(f.done() for f in futures):
            break
        time.sleep(0.02)
    assert not all(f.done() for f in futures), (
        f"the sort ended before the fault ({done} of {total} merges done)")
    held = client.run_on_scheduler(
        lambda dask_scheduler: {a: len(ws.has_what) for a, ws in dask_scheduler.workers.items()})
    victim = max(held, key=held.get)
    os.kill(pids[victim], signal.SIGKILL)
    COUNTS["kills"] += 1
    return victim


@pytest.mark.parametrize("allowed_failures, fraction", [(3, 0.4), (0, 0.6)])
def test_worker_killed_mid_sort_gives_the_right_result_or_a_clear_error(
        cluster, allowed_failures, fraction):
    """With retries allowed Dask recomputes what died with the worker; with none, a task
    that was running there fails the sort (KilledWorker).  Never a wrong result."""
    client, workers, backend = cluster
    client.wait_for_workers(workers, timeout=60)
    client.run_on_scheduler(_set_allowed_failures, n=allowed_failures)
    rng = np.random.default_rng(allowed_failures)
    x = random_keys(rng, 24_000, "float64", special_fraction=0.05)
    v = rng.integers(-1000, 1000, size=len(x)).astype(np.int32)
    dx = da.from_array(x, chunks=3_000)  # 8 chunks: 6 rounds of 4 compare-splits
    dv = da.from_array(v, chunks=4_000)
    if backend == "cupy":  # chunks made on the workers, so a lost one can be made again
        import cupy
        dx, dv = (a.map_blocks(cupy.asarray, meta=cupy.empty((0,), a.dtype)) for a in (dx, dv))
    # Groups of one: the merges the kill waits for are the whole network's, however few
    # workers there are (on one GPU the plan would sort the 8 chunks as one group, with
    # no merge at all).
    with dask.config.set({"distsort.group": 1}):
        wanted = [distsort.sort(dx, verify=True), distsort.argsort(dx),
                  *distsort.sort_by_key(dx, dv)]
    futures = client.compute(wanted)
    _kill_one_worker_mid_sort(client, futures, fraction)
    try:
        out = [_host(o) for o in client.gather(futures)]
    except distributed.KilledWorker as err:  # a clear error, naming the lost task
        # (a task of the sort or of its input, or the task that joins a result's chunks,
        # the future's own: whichever was running on the victim)
        graph_keys = {k for w in wanted for k in dict(w.__dask_graph__())}
        graph_keys |= {f.key for f in futures}
        assert err.args[0] in graph_keys or "distsort" in str(err)
        assert "worker" in str(err).lower()
        COUNTS["failed_clearly"] += 1
        return
    finally:
        client.run_on_scheduler(_set_allowed_failures, n=3)
    assert_sorted_like_numpy(out[0], x)
    np.testing.assert_array_equal(out[1], stable_argsort(x))
    rk, rv = dask.compute(*distsort.sort_by_key(x, v), scheduler="sync")
    # Keys NumPy calls equal (-0.0 and 0.0) with equal values may come in either
    # order, so the keys are compared as values and as a multiset of bit patterns.
    assert np.array_equal(out[2], rk, equal_nan=True)
    assert_same_multiset(out[2], x)
    np.testing.assert_array_equal(out[3], rv)
    COUNTS["finished_correct"] += 1
    COUNTS["results_checked"] += 4


def _set_allowed_failures(dask_scheduler, n):
    dask_scheduler.allowed_failures = n


# ------------------------------------------------------------------ the command
@pytest.mark.parametrize("fault", ["unsorted", "changed"])
@pytest.mark.parametrize("verify", ["--verify", "--verify=reread"])
def test_command_never_publishes_a_faulty_sort(tmp_path, monkeypatch, capsys, fault, verify):
    """A backend that returns a wrong chunk (two elements swapped, or one changed) is
    caught by the checks fused into ``distsort sort``: exit status 1, no OUTPUT, no
    temporary left.  The command sorts with threads of this process, so the
    monkeypatch reaches its tasks."""
    from distsort import cli
    from distsort.backends.cpu import numpy_backend as npb
    real = npb.finish_keys

    def faulty(chunk, order, dtype):
        out = np.array(real(chunk, order, dtype))
        if len(out) > 1 and fault == "unsorted":
            out[[0, -1]] = out[[-1, 0]]
        elif len(out) and fault == "changed":
            out[len(out) // 2] += 1
        return out
    monkeypatch.setattr(npb, "finish_keys", faulty)
    x = np.random.default_rng().permutation(30_000).astype(np.int64)  # distinct keys
    np.save(tmp_path / "in.npy", x)
    code = cli.main(["sort", str(tmp_path / "in.npy"), str(tmp_path / "o.npy"), "--device",
                     "cpu", "--chunk-size", "7000", verify, "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and "verification failed" in err
    assert ("out of order" in err or "not sorted" in err) if fault == "unsorted" \
        else "checksum" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.npy"]
    monkeypatch.setattr(npb, "finish_keys", real)  # and the same command, unharmed, publishes
    assert cli.main(["sort", str(tmp_path / "in.npy"), str(tmp_path / "o.npy"), "--device",
                     "cpu", "--chunk-size", "7000", verify, "--no-progress"]) == 0
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.sort(x))
