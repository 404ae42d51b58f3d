"""deploy/local/cluster.sh: start a CPU cluster on loopback, sort through it, stop it."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from backends import GPU

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "deploy" / "local" / "cluster.sh"

pytestmark = pytest.mark.skipif(shutil.which("dask") is None or shutil.which("setsid") is None,
                                reason="needs the dask command and setsid")


def _env():
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


def _script(*args, check=True, timeout=120):
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          env=_env(), timeout=timeout, check=check)


def _submit_sort(tmp_path, x, sched, chunk_size, timeout):
    """``distsort sort`` of ``x`` (saved as in.npy) to out.npy through the cluster."""
    np.save(tmp_path / "in.npy", x)
    sort = subprocess.run(
        [sys.executable, "-m", "distsort.cli", "sort", str(tmp_path / "in.npy"),
         str(tmp_path / "out.npy"), "--scheduler-file", str(sched), "--chunk-size", chunk_size,
         "--verify", "--no-progress"],
        check=False, capture_output=True, text=True, env=_env(), timeout=timeout)
    assert sort.returncode == 0, sort.stderr
    return sort


def _pids(run_dir):
    return [int((run_dir / f).read_text()) for f in ("scheduler.pid", "workers.pid")
            if (run_dir / f).exists()]


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def local_cluster(tmp_path):
    sched = tmp_path / "scheduler.json"
    run_dir = Path(str(sched) + ".d")
    opts = ["--scheduler-file", str(sched)]
    try:
        started = _script("start", *opts, "--mode", "cpu", "--workers", "2",
                          "--memory-limit", "500MiB", "--host", "127.0.0.1")
        assert "cluster up" in started.stdout, started.stderr
        pids = _pids(run_dir)
        yield sched, opts, pids
    finally:  # always: never leave processes behind, whatever failed
        _script("stop", *opts, check=False)
        for pid in _pids(run_dir):
            if _alive(pid):
                os.killpg(pid, 9)


def test_start_sort_stop(tmp_path, local_cluster):
    sched, opts, pids = local_cluster
    info = json.loads(sched.read_text())
    assert info["address"].startswith("tcp://127.0.0.1:")
    assert len(pids) == 2 and all(_alive(p) for p in pids)

    x = np.random.default_rng().standard_normal(300_000)
    sort = _submit_sort(tmp_path, x, sched, "40000", timeout=120)
    assert "2 CPU worker(s) at tcp://127.0.0.1" in sort.stdout
    assert "verified   yes" in sort.stdout
    assert np.array_equal(np.load(tmp_path / "out.npy"), np.sort(x))

    status = _script("status", *opts)
    assert "2 worker(s)" in status.stdout
    again = _script("start", *opts, "--mode", "cpu", check=False)
    assert again.returncode != 0 and "already running" in again.stderr

    stopped = _script("stop", *opts)
    assert "cluster stopped" in stopped.stdout
    assert not sched.exists()
    for pid in pids:  # the process groups are gone (give them the stop's grace time)
        assert not _alive(pid)
    assert _script("status", *opts, check=False).returncode != 0


def test_usage():
    r = _script("frobnicate", check=False)
    assert r.returncode == 2 and "start" in r.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not GPU or shutil.which("nvidia-smi") is None, reason="no CUDA GPU")
def test_gpu_workers_with_ucx(tmp_path):
    """On the device: `dask cuda worker` processes (UCX when installed), a sort through them."""
    pytest.importorskip("dask_cuda")
    sched = tmp_path / "scheduler.json"
    opts = ["--scheduler-file", str(sched)]
    run_dir = Path(str(sched) + ".d")
    try:
        started = _script("start", *opts, "--mode", "gpu", timeout=300, check=False)
        logs = {p.name: p.read_text()[-2000:] for p in run_dir.glob("*.log")}
        assert started.returncode == 0 and "cluster up" in started.stdout, (
            started.stdout, started.stderr, logs)
        mode, protocol, _ = (run_dir / "info").read_text().split()
        try:
            import distributed_ucxx  # noqa: F401
            import rmm  # noqa: F401
            assert protocol == "ucx"
        except ImportError:
            assert protocol == "tcp"
        x = np.random.default_rng().standard_normal(20_000_000).astype(np.float32)
        sort = _submit_sort(tmp_path, x, sched, "8MiB", timeout=300)
        assert "GPU worker(s)" in sort.stdout and f"at {protocol}://" in sort.stdout
        assert np.array_equal(np.load(tmp_path / "out.npy"), np.sort(x))
    finally:
        _script("stop", *opts, check=False)
        for pid in _pids(run_dir):
            if _alive(pid):
                os.killpg(pid, 9)
