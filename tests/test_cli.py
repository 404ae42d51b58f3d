"""The ``distsort`` command end to end, on real files, on loopback clusters.

Most runs go to the session's two-process cluster (``cluster_client``).  Runs that
inject a failure into the writers use an in-process cluster, where the tests'
monkeypatches reach the tasks.
"""
import errno
import hashlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from arrays import assert_sorted_like_numpy, bits, descending_of, random_keys, stable_argsort
from backends import GPU
from distsort import cli
from distsort.cli import bench as bench_cmd, outputs, sort as sort_cmd

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def address(cluster_client):
    return cluster_client.scheduler.address


@pytest.fixture(scope="module")
def inproc_address():
    """A cluster whose workers are threads of this process: monkeypatches reach tasks."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def python_c(code, *argv, timeout=120):
    """``python -c code argv...`` in a fresh process that imports this checkout."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True,
                          text=True, env=env, timeout=timeout, check=False)


def sort_args(address, *argv):
    return ("sort", *argv, "--scheduler-address", address, "--no-progress")


def sha(path):
    path = Path(path)
    if path.is_dir():
        h = hashlib.sha256()
        for p in sorted(path.rglob("*")):
            if p.is_file():
                h.update(str(p.relative_to(path)).encode() + p.read_bytes())
        return h.hexdigest()
    return hashlib.sha256(path.read_bytes()).hexdigest()


def leftovers(directory):
    return [p.name for p in Path(directory).iterdir() if "distsort-tmp" in p.name]


def save_npy(path, x):
    np.save(path, x)
    return path


def save_zarr(path, x, chunk):
    zarr = pytest.importorskip("zarr")
    z = zarr.open_array(str(path), mode="w", shape=x.shape, dtype=x.dtype, chunks=(chunk,))
    z[:] = x
    return path


def load(path):
    if str(path).endswith(".zarr"):
        import zarr
        return zarr.open_array(str(path), mode="r")[:]
    return np.load(path)


@pytest.fixture
def rng():
    return np.random.default_rng()


# ------------------------------------------------------------------ end to end

@pytest.mark.parametrize("dtype", ["float32", "int16", "uint64"])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_npy(tmp_path, capsys, address, rng, dtype, descending):
    x = random_keys(rng, 50_021, dtype, duplicates=True)
    src = save_npy(tmp_path / "in.npy", x)
    before = sha(src)
    out = tmp_path / "out.npy"
    extra = ["--descending"] if descending else []
    code, stdout, err = run(capsys, *sort_args(address, src, out, "--chunk-size", "6000",
                                               "--verify", *extra))
    assert code == 0, err
    ref = np.sort(x)
    if descending:
        ref = descending_of(ref)
    got = np.load(out)
    assert got.dtype == x.dtype
    if dtype == "float32":  # NaNs (any payload) last, for both orders
        nan = np.isnan(got)
        assert np.array_equal(nan, np.isnan(ref))
        assert np.array_equal(got[~nan], ref[~nan])
        assert sorted(bits(got).tolist()) == sorted(bits(x).tolist())
    else:
        assert np.array_equal(got, ref)
    assert sha(src) == before
    # The chunking as it is (the last chunk short), not the --chunk-size setting.
    # The rounds the plan runs: at most the 10 of the network on 9 chunks (fewer where
    # consecutive chunks are sorted as one group on a worker).
    rounds = re.search(r"chunks\s+9 \(8 x 6,000 \+ 1 x 2,021 elements\).*; (\d+) network "
                       r"rounds", stdout)
    assert rounds and 0 < int(rounds.group(1)) <= 10, stdout
    assert "verified   yes" in stdout
    assert leftovers(tmp_path) == []


def test_sort_zarr_to_zarr_and_npy(tmp_path, capsys, address, rng):
    x = rng.standard_normal(40_000)
    src = save_zarr(tmp_path / "in.zarr", x, chunk=3_000)
    before = sha(src)
    for out in (tmp_path / "out.zarr", tmp_path / "out.npy"):
        code, _, err = run(capsys, *sort_args(address, src, out, "--chunk-size", "80000B",
                                              "--verify"))
        assert code == 0, err
        assert np.array_equal(load(out), np.sort(x))
    # ... and a .npy into zarr
    code, _, err = run(capsys, *sort_args(address, tmp_path / "out.npy", tmp_path / "b.zarr",
                                          "--descending"))
    assert code == 0, err
    assert np.array_equal(load(tmp_path / "b.zarr"), np.sort(x)[::-1])
    assert sha(src) == before
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("descending", [False, True])
def test_argsort(tmp_path, capsys, address, rng, descending):
    x = rng.integers(-50, 50, 30_011).astype(np.float64)  # many ties: stability matters
    src = save_npy(tmp_path / "in.npy", x)
    out = tmp_path / "idx.npy"
    extra = ["--descending"] if descending else []
    code, _, err = run(capsys, *sort_args(address, src, out, "--argsort", "--chunk-size",
                                          "4096", "--verify", *extra))
    assert code == 0, err
    got = np.load(out)
    assert got.dtype == np.int64
    ref = stable_argsort(x, descending)
    assert np.array_equal(got, ref)


@pytest.mark.parametrize("descending", [False, True])
def test_sort_by_key_values(tmp_path, capsys, address, rng, descending):
    k = rng.integers(0, 1000, 25_000).astype(np.int32)
    v = rng.standard_normal(25_000).astype(np.float32)
    ks, vs = save_npy(tmp_path / "k.npy", k), save_zarr(tmp_path / "v.zarr", v, 7_000)
    hashes = sha(ks), sha(vs)
    extra = ["--descending"] if descending else []
    code, _, err = run(capsys, *sort_args(address, ks, tmp_path / "ko.npy", "--values", vs,
                                          "--values-output", tmp_path / "vo.npy",
                                          "--chunk-size", "3000", "--verify", *extra))
    assert code == 0, err
    perm = np.lexsort((v, -k if descending else k))  # ties by value, ascending
    assert np.array_equal(np.load(tmp_path / "ko.npy"), k[perm])
    assert np.array_equal(np.load(tmp_path / "vo.npy"), v[perm])
    assert (sha(ks), sha(vs)) == hashes


def test_big_endian_npy(tmp_path, capsys, address, rng):
    x = rng.standard_normal(20_000).astype(">f8")
    src = save_npy(tmp_path / "in.npy", x)
    code, _, err = run(capsys, *sort_args(address, src, tmp_path / "o.npy", "--chunk-size",
                                          "3000", "--verify"))
    assert code == 0, err
    got = np.load(tmp_path / "o.npy")
    assert got.dtype == np.float64 and np.array_equal(got, np.sort(x))


def test_local_cluster_default_chunks(tmp_path, capsys, rng):
    """No scheduler given: the command starts (and stops) a local CPU cluster."""
    x = rng.integers(0, 2**32, 200_000, dtype=np.uint32)
    src = save_npy(tmp_path / "in.npy", x)
    code, out, err = run(capsys, "sort", src, tmp_path / "out.npy", "--workers", "2",
                         "--memory-limit", "400MiB", "--device", "cpu", "--no-progress",
                         "--chunk-size", "128KiB")
    assert code == 0, err
    assert np.array_equal(np.load(tmp_path / "out.npy"), np.sort(x))
    assert re.search(r"cluster\s+2 CPU worker\(s\) at tcp://127\.0\.0\.1", out)
    rounds = re.search(r"chunks\s+7 \(6 x 32,768 \+ 1 x 3,392 elements\), 128\.00 kiB of "
                       r"keys each; (\d+) network rounds", out)
    assert rounds and 0 < int(rounds.group(1)) <= 6, out


def test_verify_moves_no_chunk_between_workers(tmp_path, capsys, rng):
    """The verify summary of a chunk runs where the chunk is, restricted strictly.
    Restricted loosely, the scheduler's work stealing gave it to the idle worker while
    its own sorted a larger chunk, and the chunk went with it (36 MiB sent for 12 MiB of
    crossing in 2 of 3 runs of this sort on two worker processes)."""
    distributed = pytest.importorskip("distributed")
    from distributed.diagnostics.plugin import SchedulerPlugin

    class Spy(SchedulerPlugin):
        def __init__(self):
            self.seen = []

        def transition(self, key, start, finish, *args, **kwargs):
            if finish == "processing" and str(key[0]).startswith("distsort-verify-summary"):
                ts = self.scheduler.tasks[key]
                held = {ws.address for d in ts.dependencies for ws in d.who_has}
                self.seen.append((key, ts.loose_restrictions, ts.processing_on.address, held))

    src = save_npy(tmp_path / "in.npy", rng.standard_normal(2**23).astype(np.float32))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        spy = Spy()
        spy.scheduler = cluster.scheduler
        cluster.scheduler.add_plugin(spy)
        code, out, err = run(capsys, *sort_args(cluster.scheduler_address, src,
                                                tmp_path / "o.npy", "--verify",
                                                "--chunk-size", "24MiB"))
    assert code == 0, err
    assert re.search(r"chunks\s+2 \(1 x 6,291,456 \+ 1 x 2,097,152 elements\)", out), out
    assert len(spy.seen) == 4  # two input chunks, two output chunks
    for key, loose, worker, held in spy.seen:
        assert not loose and held == {worker}, (key, loose, worker, held)


def test_a_summary_kept_on_a_worker_that_leaves_runs_elsewhere():
    """A verify summary restricted strictly to its chunk's worker must not wait forever
    for that worker once it has left while the chunk is still held elsewhere."""
    distributed = pytest.importorskip("distributed")
    from distsort.cluster.locality import keep_chunks_in_place

    with (distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                   dashboard_address=None) as cluster,
          distributed.Client(cluster) as client):
        assert keep_chunks_in_place(client)
        a, b = sorted(cluster.scheduler.workers)
        gate = distributed.Event()
        busy = client.submit(gate.wait, 60, workers=[a], key="busy")  # a's one thread
        chunk = client.submit(np.arange, 10, workers=[b], key="chunk")
        distributed.wait(chunk)
        summary = client.submit(np.sum, chunk, workers=[a], allow_other_workers=False,
                                key=("distsort-verify-summary-test", 0))
        time.sleep(0.5)  # queued behind the gate on a
        name = next(n for n, w in cluster.workers.items() if w.address == a)
        client.sync(cluster.workers[name].close, executor_wait=False)
        assert summary.result(timeout=30) == 45
        gate.set()
        del busy


def test_default_chunks_keep_every_worker_busy(tmp_path, capsys, address, rng):
    """Equal chunks, as many as the workers sort at once (not one 32 MiB chunk for one
    of two workers, or 67,108,864 + 32,891,136 elements for 381 MiB)."""
    x = rng.standard_normal(2**23 + 5).astype(np.float32)
    src = save_npy(tmp_path / "in.npy", x)
    code, out, err = run(capsys, *sort_args(address, src, tmp_path / "o.npy"))
    assert code == 0, err
    assert re.search(r"chunks\s+2 \(1 x 4,194,307 \+ 1 x 4,194,306 elements\)", out), out
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.sort(x))


def test_report(tmp_path, capsys, address, rng):
    pytest.importorskip("bokeh")
    src = save_npy(tmp_path / "in.npy", rng.standard_normal(20_000))
    report = tmp_path / "report.html"
    code, out, err = run(capsys, *sort_args(address, src, tmp_path / "o.npy", "--report",
                                            report, "--chunk-size", "5000"))
    assert code == 0, err
    assert re.search(rf"report\s+{re.escape(str(report))}$", out, re.M)  # the summary names it
    text = report.read_text()
    assert "<html" in text.lower() and "distsort" in text
    # Self-contained: Bokeh's scripts inline, so it opens on a node without internet.
    assert "cdn.bokeh.org" not in text and "Bokeh" in text


def test_report_in_process(tmp_path, capsys, rng):
    """--report keeps the sort in this process (no worker processes are started)."""
    pytest.importorskip("bokeh")
    x = rng.standard_normal(40_000)
    src = save_npy(tmp_path / "in.npy", x)
    report = tmp_path / "report.html"
    code, out, err = run(capsys, "sort", src, tmp_path / "o.npy", "--report", report,
                         "--chunk-size", "5000", "--no-progress")
    assert code == 0, err
    assert re.search(r"cluster\s+\d+ threads of this process", out), out
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.sort(x))
    text = report.read_text()
    assert "<html" in text.lower() and "distsort-" in text  # the sort's task names
    assert "cdn.bokeh.org" not in text and "Bokeh" in text


def test_report_without_bokeh(tmp_path, capsys, inproc_address, monkeypatch):
    monkeypatch.setattr(sort_cmd, "_has_bokeh", lambda: False)  # the in-process scheduler's view
    src = save_npy(tmp_path / "in.npy", np.arange(100.0))
    code, _, err = run(capsys, *sort_args(inproc_address, src, tmp_path / "o.npy", "--report",
                                          tmp_path / "r.html"))
    assert code == 2 and "bokeh" in err
    assert not (tmp_path / "o.npy").exists() and not (tmp_path / "r.html").exists()


def test_empty_input(tmp_path, capsys, address):
    src = save_npy(tmp_path / "in.npy", np.empty(0, np.float32))
    code, _, err = run(capsys, *sort_args(address, src, tmp_path / "o.npy", "--verify"))
    assert code == 0, err
    got = np.load(tmp_path / "o.npy")
    assert got.shape == (0,) and got.dtype == np.float32


# ------------------------------------------------------------------ dtypes, groups, URLs

def times(rng, n, dtype):
    t = rng.integers(-10**12, 10**12, n).astype(dtype)
    t[rng.random(n) < 0.05] = np.array("NaT", dtype=dtype)
    t[rng.random(n) < 0.2] = t[0]  # duplicates
    return t


@pytest.mark.parametrize("verify", ["fused", "reread"])
def test_sort_datetime_and_timedelta(tmp_path, capsys, address, rng, verify):
    t = times(rng, 20_011, "datetime64[s]")
    d = times(rng, 20_011, "timedelta64[ms]")
    src, vals = save_npy(tmp_path / "t.npy", t), save_npy(tmp_path / "d.npy", d)
    code, _, err = run(capsys, *sort_args(address, src, tmp_path / "o.npy", "--chunk-size",
                                          "3000", f"--verify={verify}"))
    assert code == 0, err
    got = np.load(tmp_path / "o.npy")
    assert got.dtype == t.dtype and np.array_equal(bits(got), bits(np.sort(t)))  # NaT last
    code, _, err = run(capsys, *sort_args(address, src, tmp_path / "k.npy", "--values", vals,
                                          "--values-output", tmp_path / "v.npy", "--stable",
                                          "--chunk-size", "3000", f"--verify={verify}"))
    assert code == 0, err
    perm = np.argsort(t, kind="stable")
    assert np.array_equal(bits(np.load(tmp_path / "k.npy")), bits(t[perm]))
    assert np.array_equal(bits(np.load(tmp_path / "v.npy")), bits(d[perm]))
    code, _, err = run(capsys, *sort_args(address, vals, tmp_path / "a.npy", "--argsort",
                                          "--descending", "--chunk-size", "3000"))
    assert code == 0, err
    assert np.array_equal(np.load(tmp_path / "a.npy"), stable_argsort(d, descending=True))


@pytest.mark.parametrize("verify", ["fused", "reread"])
def test_stable_values(tmp_path, capsys, address, rng, verify):
    k = rng.integers(0, 30, 30_001).astype(np.float32)
    k[::7], k[1::7], k[2::13] = -0.0, 0.0, np.nan  # NumPy calls -0.0 and +0.0 equal
    v = rng.integers(0, 1000, k.size)
    src, vals = save_npy(tmp_path / "k.npy", k), save_npy(tmp_path / "v.npy", v)
    for stable in (True, False):
        code, _, err = run(capsys, *sort_args(
            address, src, tmp_path / "ko.npy", "--values", vals, "--values-output",
            tmp_path / "vo.npy", "--chunk-size", "4000", f"--verify={verify}", "--overwrite",
            *(["--stable"] if stable else [])))
        assert code == 0, err
        perm = np.argsort(k, kind="stable") if stable else np.lexsort((v, k))
        assert np.array_equal(np.load(tmp_path / "vo.npy"), v[perm])
        if stable:
            assert np.array_equal(bits(np.load(tmp_path / "ko.npy")), bits(k[perm]))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_zarr_group_arrays(tmp_path, capsys, address, rng, zarr_format):
    """The layout ``xarray.to_zarr`` writes: arrays inside a group, read and written."""
    zarr = pytest.importorskip("zarr")
    x = rng.standard_normal(30_011)
    group = zarr.open_group(str(tmp_path / "grp.zarr"), mode="w", zarr_format=zarr_format)
    group.create_array("data/x", shape=x.shape, dtype=x.dtype, chunks=(7000,))[:] = x
    code, _, err = run(capsys, *sort_args(address, tmp_path / "grp.zarr/data/x",
                                          tmp_path / "grp.zarr/data/sorted", "--verify",
                                          "--chunk-size", "5000"))
    assert code == 0, err
    out = zarr.open_group(str(tmp_path / "grp.zarr"), mode="r")["data/sorted"]
    assert out.metadata.zarr_format == zarr_format
    assert np.array_equal(out[:], np.sort(x))
    assert leftovers(tmp_path / "grp.zarr/data") == []
    code, _, err = run(capsys, *sort_args(address, tmp_path / "grp.zarr", tmp_path / "o.npy"))
    assert code == 2 and "zarr group" in err and "grp.zarr/data/x" in err


def test_file_urls(tmp_path, capsys, address, rng):
    x = random_keys(rng, 20_011, "float64")
    src = save_npy(tmp_path / "in.npy", x)
    out = f"file://{tmp_path}/out.npy"
    code, _, err = run(capsys, *sort_args(address, f"file://{src}", out, "--verify"))
    assert code == 0, err
    assert_sorted_like_numpy(np.load(tmp_path / "out.npy"), x)
    save_zarr(tmp_path / "in.zarr", x, 3000)
    code, _, err = run(capsys, *sort_args(address, f"file://{tmp_path}/in.zarr",
                                          tmp_path / "out.zarr"))
    assert code == 0, err
    assert_sorted_like_numpy(load(tmp_path / "out.zarr"), x)


def test_memory_urls_in_process(tmp_path, capsys, rng):
    """fsspec's memory filesystem: read by this process's threads (the in-process sort)."""
    fsspec = pytest.importorskip("fsspec")
    zarr = pytest.importorskip("zarr")
    x = random_keys(rng, 10_007, "int32")
    for b in (False, True):  # a big-endian file too: read in native order
        y = x.astype(">i4") if b else x
        with fsspec.open(f"memory://distsort-test/x{b}.npy", "wb") as f:
            np.save(f, y)
        code, _, err = run(capsys, "sort", f"memory://distsort-test/x{b}.npy",
                           tmp_path / f"o{b}.npy", "--verify", "--chunk-size", "3000",
                           "--no-progress")
        assert code == 0, err
        assert np.array_equal(np.load(tmp_path / f"o{b}.npy"), np.sort(x))
    group = zarr.open_group("memory://distsort-test/g.zarr", mode="w")
    group.create_array("a", shape=x.shape, dtype=x.dtype, chunks=(4000,))[:] = x
    code, _, err = run(capsys, "sort", "memory://distsort-test/g.zarr/a", tmp_path / "z.npy",
                       "--no-progress")
    assert code == 0, err
    assert np.array_equal(np.load(tmp_path / "z.npy"), np.sort(x))
    code, _, err = run(capsys, "sort", "memory://distsort-test/none.npy", tmp_path / "n.npy")
    assert code == 2 and "no such file" in err


def test_url_errors(tmp_path, capsys, monkeypatch):
    import fsspec.core
    monkeypatch.setattr(fsspec.core, "url_to_fs",
                        lambda url: (_ for _ in ()).throw(ImportError("Install s3fs to access S3")))
    code, _, err = run(capsys, "sort", "s3://bucket/x.npy", tmp_path / "o.npy")
    assert code == 2 and "s3://bucket/x.npy" in err and "Install s3fs" in err
    monkeypatch.setitem(sys.modules, "fsspec", None)  # fsspec not installed
    code, _, err = run(capsys, "sort", "gs://bucket/x.npy", tmp_path / "o.npy")
    assert code == 2 and "needs fsspec" in err and "pip install fsspec" in err
    src = save_npy(tmp_path / "in.npy", np.arange(5.0))
    code, _, err = run(capsys, "sort", src, "s3://bucket/o.npy")
    assert code == 2 and "URLs are read only" in err


# ------------------------------------------------------------------ verification

def _corrupt(monkeypatch, how):
    """Make distsort.sort return a wrong answer (with plain Dask operations)."""
    import dask.array as da
    import distsort
    real = distsort.sort

    def wrong_sort(x, **kw):
        s = real(x, **kw)
        if how == "unsorted":  # swap the first two elements
            return da.concatenate([s[1:2], s[0:1], s[2:]]).rechunk(s.chunks)
        return da.where(da.arange(len(s), chunks=s.chunks) == 5, s[4], s)  # a duplicate
    monkeypatch.setattr(distsort, "sort", wrong_sort)


@pytest.mark.parametrize("how", ["unsorted", "not a permutation"])
def test_verify_catches_wrong_output(tmp_path, capsys, address, rng, monkeypatch, how):
    x = rng.permutation(20_000).astype(np.float64)  # distinct: any swap is visible
    src = save_npy(tmp_path / "in.npy", x)
    _corrupt(monkeypatch, how)
    code, _, err = run(capsys, *sort_args(address, src, tmp_path / "o.npy", "--verify",
                                          "--chunk-size", "5000"))
    assert code == 1
    assert "verification failed" in err
    assert ("out of order" in err) if how == "unsorted" else ("checksum" in err)
    assert not (tmp_path / "o.npy").exists()
    assert leftovers(tmp_path) == []


def test_verify_reread(tmp_path, capsys, address, rng):
    """--verify=reread: the written output is read back and checked chunk by chunk."""
    x = rng.standard_normal(30_000)
    src = save_npy(tmp_path / "in.npy", x)
    for out in (tmp_path / "o.npy", tmp_path / "o.zarr"):
        code, stdout, err = run(capsys, *sort_args(address, src, out, "--chunk-size", "7000",
                                                   "--verify=reread"))
        assert code == 0, err
        assert np.array_equal(load(out), np.sort(x))
        assert "verified   yes" in stdout and "read back matches" in stdout
        assert re.search(r"reread [\d.]+ s", stdout)


def test_verify_reread_catches_a_bad_write(tmp_path, capsys, inproc_address, rng,
                                           monkeypatch):
    """A write that changes the data on its way to disk passes the fused check (the
    sorted chunks are right) and is caught by reading the output back."""
    real = cli.NpyFile.__setitem__

    def bad_write(self, key, value):
        value = np.array(value)
        if len(value):
            value[len(value) // 2] += 1  # one element changed on the way to disk
        real(self, key, value)
    monkeypatch.setattr(cli.NpyFile, "__setitem__", bad_write)
    src = save_npy(tmp_path / "in.npy", rng.permutation(20_000).astype(np.int64))
    code, _, err = run(capsys, *sort_args(inproc_address, src, tmp_path / "o.npy",
                                          "--chunk-size", "5000", "--verify"))
    assert code == 0, err  # the fused check sees the sorted chunks, not the disk
    code, _, err = run(capsys, *sort_args(inproc_address, src, tmp_path / "p.npy",
                                          "--chunk-size", "5000", "--verify=reread"))
    assert code == 1 and "differ from the sorted data" in err
    assert not (tmp_path / "p.npy").exists() and leftovers(tmp_path) == []


def test_in_process_summary(tmp_path, capsys, rng):
    """No cluster asked for and a small input: threads of this process sort it; the
    summary gives the true chunking, where the time went and the disk floor."""
    x = rng.standard_normal(12_345).astype(np.float32)
    src = save_npy(tmp_path / "in.npy", x)
    code, out, err = run(capsys, "sort", src, tmp_path / "o.npy", "--device", "cpu",
                         "--chunk-size", "4000", "--verify", "--no-progress")
    assert code == 0, err
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.sort(x))
    assert "threads of this process" in out
    assert re.search(r"chunks\s+4 \(3 x 4,000 \+ 1 x 345 elements\)", out)
    m = re.search(r"wall time\s+([\d.]+) s in all; start ([\d.]+) s; plan [\d.]+ s; "
                  r"read\+sort\+write ([\d.]+) s; publish [\d.]+ s\n", out)
    assert re.search(r"timeline\s+read [\d.]+-[\d.]+ s \(busy [\d.]+ s\), sort .*, "
                     r"write .*, verify .*; seconds since the start", out), out
    assert m, out
    wall, start, pipeline = map(float, m.groups())
    assert wall >= start + pipeline - 0.01  # each printed to 0.01 s
    assert re.search(r"disk floor\s+[\d.]+ s to read and write it once .*; the command "
                     r"took [\d.]+x it", out)


def test_disk_floor_measured_beside_the_sort(tmp_path, capsys, rng, monkeypatch, address):
    """On a cluster the disk measurement runs in the background: the sort does not wait
    for it (here it finishes only once the output is being published), and the
    summary still gives the floor it measured."""
    x = rng.standard_normal(12_345).astype(np.float32)
    src = save_npy(tmp_path / "in.npy", x)
    publishing = threading.Event()
    measure, publish = sort_cmd.disk_floor, sort_cmd.publish

    def late_floor(*args):
        publishing.wait(timeout=30)
        return dict(measure(*args), floor=123.0)

    def flagged_publish(outputs):
        publishing.set()
        return publish(outputs)

    monkeypatch.setattr(sort_cmd, "disk_floor", late_floor)
    monkeypatch.setattr(sort_cmd, "publish", flagged_publish)
    t0 = time.perf_counter()
    code, out, err = run(capsys, *sort_args(address, src, tmp_path / "o.npy"))
    assert code == 0, err
    assert time.perf_counter() - t0 < 30  # the sort went on while the probe waited
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.sort(x))
    assert re.search(r"disk floor\s+123\.00 s to read and write it once", out), out


def test_disk_floor_measured_before_an_in_process_sort(tmp_path, capsys, rng, monkeypatch):
    """In this process the sort's threads would slow the measurement down: the sort
    starts once the disk is measured."""
    x = rng.standard_normal(12_345).astype(np.float32)
    src = save_npy(tmp_path / "in.npy", x)
    events = []
    measure, write_sorted = sort_cmd.disk_floor, sort_cmd.write_sorted

    def slow_floor(*args):
        time.sleep(0.5)
        events.append("measured")
        return measure(*args)

    def logged_write(*args):
        events.append("sorting")
        return write_sorted(*args)

    monkeypatch.setattr(sort_cmd, "disk_floor", slow_floor)
    monkeypatch.setattr(sort_cmd, "write_sorted", logged_write)
    code, out, err = run(capsys, "sort", src, tmp_path / "o.npy", "--device", "cpu",
                         "--no-progress")
    assert code == 0, err
    assert "threads of this process" in out and events == ["measured", "sorting"]
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.sort(x))


def test_failed_disk_floor_only_drops_its_line(tmp_path, capsys, rng, monkeypatch):
    x = rng.standard_normal(1000).astype(np.float32)
    src = save_npy(tmp_path / "in.npy", x)

    def broken(*args):
        raise RuntimeError("no measurement")

    monkeypatch.setattr(sort_cmd, "disk_floor", broken)
    code, out, err = run(capsys, "sort", src, tmp_path / "o.npy", "--device", "cpu",
                         "--no-progress")
    assert code == 0, err
    assert "disk floor" not in out and "wall time" in out
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.sort(x))


def test_in_process_sort_imports_no_cluster_library(tmp_path, rng):
    """``import distsort`` leaves dask.array for the first sort, and a sort by threads
    of this process never imports distributed; the public functions, the scheduler
    plugin and the cluster module are still there when asked for."""
    x = rng.standard_normal(5000).astype(np.float32)
    src = save_npy(tmp_path / "in.npy", x)
    code = (
        "import sys\n"
        "import distsort\n"
        "light = 'dask.array' not in sys.modules\n"
        "from distsort.cli import main\n"
        f"assert main(['sort', {str(src)!r}, {str(tmp_path / 'o.npy')!r}, '--device', "
        "'cpu', '--no-progress']) == 0\n"
        "print('light', light, 'distributed', 'distributed' in sys.modules)\n"
        "from distsort import sort, argsort, sort_by_key\n"
        "from distsort.cluster.plugin import KeepChunksInPlace\n"
        "from distributed.diagnostics.plugin import SchedulerPlugin\n"
        "assert issubclass(KeepChunksInPlace, SchedulerPlugin)\n"
        "assert callable(distsort.cluster.connect) and 'sort' in dir(distsort)\n")
    r = python_c(code)
    assert r.returncode == 0, r.stderr
    assert "light True distributed False" in r.stdout, r.stdout
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.sort(x))


def test_verify_runs_each_merge_once(tmp_path, capsys, rng):
    """--verify summarizes the sorted chunks that the store writes: no merge runs a
    second time for it (fused into the store's tasks, the merges ran twice)."""
    from dask.callbacks import Callback
    x = rng.standard_normal(12_345).astype(np.float32)
    src = save_npy(tmp_path / "in.npy", x)
    ran = []
    with Callback(posttask=lambda key, *_: ran.append(key)):
        code, out, err = run(capsys, "sort", src, tmp_path / "o.npy", "--device", "cpu",
                             "--chunk-size", "4000", "--verify", "--no-progress")
    assert code == 0, err
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.sort(x))
    merges = [k for k in ran if re.match(r"distsort-(low|high)-", k[0])]
    assert merges and all(re.match(r"distsort-(low|high)-r\d\d-", k[0]) for k in merges)
    assert len(set(merges)) == len(merges)


def test_the_executable(tmp_path, rng):
    """``distsort`` (``command.run``): the exit status of ``main``, the atexit handlers
    run and the output flushed though the interpreter's teardown is skipped, and
    dask.array loaded without xarray and pandas (which the command never needs)."""
    x = rng.standard_normal(5000).astype(np.float32)
    src = save_npy(tmp_path / "in.npy", x)
    code = (
        "import atexit, sys\n"
        "from distsort.cli.command import run\n"
        "atexit.register(lambda: print('atexit', 'xarray' in sys.modules, "
        "'pandas' in sys.modules))\n"
        "sys.argv = ['distsort', *sys.argv[1:]]\n"
        "run()\n")
    args = [str(src), str(tmp_path / "o.npy"), "--device", "cpu", "--no-progress"]
    r = python_c(code, "sort", *args)
    assert r.returncode == 0, r.stderr
    assert "distsort sort: done" in r.stdout and "atexit False False" in r.stdout, r.stdout
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.sort(x))
    r = python_c(code, "sort", *args)
    assert r.returncode == 2 and "already exists" in r.stderr, r.stderr


def test_lean_import_leaves_xarray_importable():
    pytest.importorskip("xarray")
    code = ("import sys\n"
            "from distsort.cli.command import import_dask_array_lean\n"
            "import_dask_array_lean()\n"
            "assert 'dask.array' in sys.modules and 'xarray' not in sys.modules\n"
            "import xarray, dask.array as da\n"
            "assert xarray.DataArray(da.arange(3, chunks=2)).sum().compute() == 3\n")
    r = python_c(code)
    assert r.returncode == 0, r.stderr


def test_since_process_start():
    """The command's wall time counts from the process's start, to 10 ms (psutil's
    figure, from the boot time in whole seconds, may be off by up to a second)."""
    import psutil
    from distsort.cli.command import _since_process_start
    r = python_c("from distsort.cli.command import _since_process_start as f; print(f())",
                 timeout=60)
    assert r.returncode == 0, r.stderr
    assert 0 < float(r.stdout) < 10  # a fresh process: its imports, not our uptime
    ours = _since_process_start()
    assert abs(ours - (time.time() - psutil.Process().create_time())) < 1.1


def test_device_memory_limit_sorts_out_of_core(tmp_path, capsys, rng):
    """--device-memory-limit: an input larger than the budget is sorted out of core
    (the summary says how), verified; a chunk that alone outgrows it is refused with
    the options that fix it, and nothing is written."""
    x = rng.standard_normal(30_000).astype(np.float32)
    src = save_npy(tmp_path / "in.npy", x)
    code, out, err = run(capsys, "sort", src, tmp_path / "o.npy", "--device", "cpu",
                         "--chunk-size", "2000", "--device-memory-limit", "30kB",
                         "--verify", "--no-progress")
    assert code == 0, err
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.sort(x))
    assert re.search(r"memory\s+out of core: 117\.19 kiB sorted within 29\.30 kiB of device "
                     r"memory per worker, as \d+ runs", out), out
    assert "verified   yes" in out
    code, _, err = run(capsys, "sort", src, tmp_path / "p.npy", "--device", "cpu",
                       "--chunk-size", "20000", "--device-memory-limit", "30kB")
    assert code == 2 and "does not fit the device budget" in err and "--chunk-size" in err
    assert not (tmp_path / "p.npy").exists() and leftovers(tmp_path) == []


def test_reads_laid_out_in_blocks(tmp_path, capsys, cluster_client, address, rng):
    """On a cluster, chunk i of c is read on worker i * W // c (workers by address):
    the network's neighbours start on one worker, and only the one round across the
    two workers sends data (1.25 GiB before, 256 MiB after, for 512 MiB in 16 chunks)."""
    import distributed
    x = rng.standard_normal(16_000).astype(np.float32)
    src = save_npy(tmp_path / "in.npy", x)
    with distributed.get_task_stream(client=cluster_client) as ts:
        code, out, err = run(capsys, *sort_args(address, src, tmp_path / "o.npy",
                                                "--chunk-size", "1000"))
    assert code == 0, err
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.sort(x))
    workers = sorted(cluster_client.scheduler_info(n_workers=-1)["workers"])
    reads = {t["key"][1]: t["worker"] for t in ts.data
             if isinstance(t["key"], tuple) and str(t["key"][0]).startswith("distsort-read-")}
    assert reads == {i: workers[i * 2 // 16] for i in range(16)}


def test_device_memory_limit_on_a_cluster(tmp_path, capsys, address, rng):
    x = rng.integers(-1000, 1000, 20_000).astype(np.int16)
    src = save_npy(tmp_path / "in.npy", x)
    code, out, err = run(capsys, *sort_args(address, src, tmp_path / "o.npy", "--argsort",
                                            "--chunk-size", "1000",
                                            "--device-memory-limit", "40kB", "--verify"))
    assert code == 0, err
    assert "out of core" in out
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.argsort(x, kind="stable"))


def test_out_of_core_routing():
    """--device-memory-limit is a plan option of the sort (no Dask config): on GPU workers
    the out-of-core merges run on the GPUs, and an input over the budget is planned out
    of core, in NumPy chunks; without the option nothing changes."""
    from types import SimpleNamespace

    import dask
    import dask.array as da

    import distsort
    from distsort.api import planning
    from distsort.cli.connection import Cluster, plan_options
    gpu = Cluster(None, "", gpu=True)
    options = plan_options(SimpleNamespace(device_memory_limit=10**6), gpu)
    assert options == {"device_memory_limit": 10**6, "engine": "gpu"}
    assert plan_options(SimpleNamespace(device_memory_limit=None), gpu) == {}
    x = da.from_array(np.arange(10**6, dtype=np.float64)[::-1], chunks=10**5)
    with planning(**options) as plans:
        distsort.sort(x), distsort.sort(x[:1000])
    assert plans[0].strategy == "out-of-core" and plans[0].out_of_core.engine == "gpu"
    assert plans[0].out_of_core.budget == 10**6 and plans[1].strategy != "out-of-core"
    assert dask.config.get("distsort.device-memory-limit", None) in (None, 0, "0")


def test_in_process_on_one_gpu_decision(monkeypatch):
    """With a GPU, this process sorts on GPU 0 when the data, three times over, fit it
    (or a device budget it holds, out of core) and twice over fit the host; any
    cluster option starts a cluster instead.  No GPU needed: the device is described,
    not asked."""
    from types import SimpleNamespace

    import psutil

    from distsort.cli import connection
    monkeypatch.setattr(connection, "wants_gpu", lambda args: True)
    monkeypatch.setattr(connection, "first_gpu", lambda: ("Fake GPU", 100 * 10**9))
    args = SimpleNamespace(scheduler_address=None, scheduler_file=None, workers=None,
                           memory_limit=None, spill_dir=None, report=None,
                           device_memory_limit=None, device="auto")

    def job(n):
        src = SimpleNamespace(n=n, dtype=np.dtype(np.float32))
        return SimpleNamespace(src=src, sort_bytes=lambda: 4, per_element=lambda: 4)

    host = psutil.virtual_memory().available
    small = min(10**9, host // 16)  # elements: fits the fake GPU and this host
    assert connection.fits_in_process(args, job(small))
    assert not connection.fits_in_process(args, job(8 * 10**9))  # 96 GB > 95 GB usable
    for option in ("workers", "memory_limit", "spill_dir"):
        assert not connection.fits_in_process(SimpleNamespace(**{**vars(args), option: 1}),
                                              job(small))
    # Out of core on GPU 0: a budget it holds, whatever the input's size (within the host's)
    budget = SimpleNamespace(**{**vars(args), "device_memory_limit": 8 * 10**9})
    assert connection.fits_in_process(budget, job(small))
    huge = SimpleNamespace(**{**vars(args), "device_memory_limit": 99 * 10**9})
    assert not connection.fits_in_process(huge, job(small))
    cpu = SimpleNamespace(**{**vars(args), "device_memory_limit": 8 * 10**9})
    monkeypatch.setattr(connection, "wants_gpu", lambda args: False)
    assert not connection.fits_in_process(cpu, job(small))  # a CPU cluster, as before
    monkeypatch.setattr(connection, "wants_gpu", lambda args: True)
    cluster = connection.open_cluster(args, in_process_ok=True)
    assert cluster.client is None and cluster.gpu and "GPU 0 (Fake GPU" in cluster.description
    monkeypatch.setattr(connection, "first_gpu", lambda: None)  # CuPy sees no device
    assert not connection.fits_in_process(args, job(small))


def test_write_behind_starts_writeback(tmp_path, monkeypatch):
    """Each chunk written to a .npy output asks the kernel to start writing it back at
    once (the range just written); the Dask config value turns it off."""
    import dask

    from distsort.cli import files
    calls = []
    monkeypatch.setattr(files, "libc", lambda name, *argtypes: (
        (lambda *a: calls.append(a) or 0) if name == "sync_file_range" else None))
    x = np.arange(1000, dtype=np.int32)
    np.save(tmp_path / "o.npy", np.zeros_like(x))
    out = files.open_npy(tmp_path / "o.npy")
    out[100:300] = x[100:300]
    assert [c[1:] for c in calls] == [(out.offset + 400, 800, files.SYNC_FILE_RANGE_WRITE)]
    with dask.config.set({"distsort.write-behind": False}):
        out[300:400] = x[300:400]
    assert len(calls) == 1
    assert np.array_equal(np.load(tmp_path / "o.npy")[100:400], x[100:400])


def test_write_behind_is_harmless_where_it_runs(tmp_path):
    """The real call (Linux) on a real file: the data are written all the same."""
    from distsort.cli import files
    x = np.random.default_rng().standard_normal(10_000)
    np.save(tmp_path / "o.npy", np.zeros_like(x))
    out = files.open_npy(tmp_path / "o.npy")
    out[0:10_000] = x
    assert np.array_equal(np.load(tmp_path / "o.npy"), x)


# ------------------------------------------------------------------ bad input

def test_missing_input(tmp_path, capsys):
    code, _, err = run(capsys, "sort", tmp_path / "nope.npy", tmp_path / "o.npy")
    assert code == 2
    assert "no such file" in err and err.count("\n") == 1
    assert not (tmp_path / "o.npy").exists()


def test_unreadable_input(tmp_path, capsys, monkeypatch):
    (tmp_path / "dir.npy").mkdir()
    code, _, err = run(capsys, "sort", tmp_path / "dir.npy", tmp_path / "o.npy")
    assert code == 2 and "is a directory" in err
    (tmp_path / "text.npy").write_text("not an array")
    code, _, err = run(capsys, "sort", tmp_path / "text.npy", tmp_path / "o.npy")
    assert code == 2 and "not a .npy file" in err
    src = save_npy(tmp_path / "in.npy", np.arange(10.0))
    if os.geteuid() != 0:  # root reads anything: simulate the permission error instead
        src.chmod(0)
    else:
        monkeypatch.setattr(os, "access", lambda p, mode: False)
    code, _, err = run(capsys, "sort", src, tmp_path / "o.npy")
    assert code == 2 and "permission denied" in err
    assert not (tmp_path / "o.npy").exists()


@pytest.mark.parametrize("dtype", ["complex128", "U3"])
def test_unsupported_dtype(tmp_path, capsys, address, dtype):
    x = np.arange(100).astype(dtype)
    src = save_npy(tmp_path / "in.npy", x)
    code, _, err = run(capsys, *sort_args(address, src, tmp_path / "o.npy"))
    assert code == 2
    assert "cannot sort" in err and dtype.split("[")[0][:4] in err
    assert str(src) in err  # the message names the file
    assert not (tmp_path / "o.npy").exists() and leftovers(tmp_path) == []


def test_unsupported_values_dtype_and_shape(tmp_path, capsys, address):
    k = save_npy(tmp_path / "k.npy", np.arange(10))
    v = save_npy(tmp_path / "v.npy", np.arange(10) * 1j)
    code, _, err = run(capsys, *sort_args(address, k, tmp_path / "o.npy", "--values", v,
                                          "--values-output", tmp_path / "vo.npy"))
    assert code == 2 and "complex" in err
    short = save_npy(tmp_path / "short.npy", np.arange(9))
    code, _, err = run(capsys, *sort_args(address, k, tmp_path / "o.npy", "--values", short,
                                          "--values-output", tmp_path / "vo.npy"))
    assert code == 2 and "9 elements" in err
    square = save_npy(tmp_path / "sq.npy", np.ones((3, 3)))
    code, _, err = run(capsys, *sort_args(address, square, tmp_path / "o.npy"))
    assert code == 2 and "1-D" in err


def test_existing_output(tmp_path, capsys, address, rng):
    x = rng.standard_normal(10_000)
    src = save_npy(tmp_path / "in.npy", x)
    out = save_npy(tmp_path / "out.npy", np.arange(3.0))
    before = sha(out)
    code, _, err = run(capsys, *sort_args(address, src, out))
    assert code == 2 and "already exists" in err and "--overwrite" in err
    assert sha(out) == before
    code, _, err = run(capsys, *sort_args(address, src, out, "--overwrite"))
    assert code == 0, err
    assert np.array_equal(np.load(out), np.sort(x))
    # never over the input, even with --overwrite
    in_hash = sha(src)
    code, _, err = run(capsys, *sort_args(address, src, src, "--overwrite"))
    assert code == 2 and "input" in err and sha(src) == in_hash
    # an existing zarr output is replaced as a whole
    zout = save_zarr(tmp_path / "o.zarr", np.arange(50_000.0), 1000)
    code, _, err = run(capsys, *sort_args(address, src, zout, "--overwrite"))
    assert code == 0, err
    assert np.array_equal(load(zout), np.sort(x))
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("argv, message", [
    ((), "required"),
    (("sort", "a.npy"), "required"),
    (("sort", "a.npy", "b.npy", "--chunk-size", "lots"), "not a size"),
    (("sort", "a.npy", "b.npy", "--argsort", "--values", "v.npy", "--values-output", "w.npy"),
     "exclude"),
    (("sort", "a.npy", "b.npy", "--values", "v.npy"), "go together"),
    (("sort", "a.txt", "b.npy"), "unsupported file type"),
])
def test_usage_errors(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "a.npy", np.arange(5))
    np.save(tmp_path / "v.npy", np.arange(5))
    (tmp_path / "a.txt").write_text("1 2 3")
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err


def test_missing_output_directory_and_scheduler_file(tmp_path, capsys):
    src = save_npy(tmp_path / "in.npy", np.arange(5.0))
    code, _, err = run(capsys, "sort", src, tmp_path / "no" / "o.npy")
    assert code == 2 and "does not exist" in err
    code, _, err = run(capsys, "sort", src, tmp_path / "o.npy", "--scheduler-file",
                       tmp_path / "none.json")
    assert code == 2 and "scheduler file" in err


# ------------------------------------------------------------------ failures mid-run

@pytest.fixture
def npy_input(tmp_path, rng):
    x = rng.standard_normal(60_000)
    src = save_npy(tmp_path / "in.npy", x)
    return src, sha(src)


def test_interrupted_run_leaves_nothing(tmp_path, capsys, inproc_address, npy_input,
                                        monkeypatch):
    """Ctrl-C after part of the output is written: exit 130, no output, no temporary."""
    src, before = npy_input
    real = sort_cmd.compute
    seen = []

    def compute_then_interrupt(client, collections, progress, label):
        real(client, collections, progress, label)  # the temporary is fully written
        seen.extend(leftovers(tmp_path))
        raise KeyboardInterrupt
    monkeypatch.setattr(sort_cmd, "compute", compute_then_interrupt)
    code, _, err = run(capsys, *sort_args(inproc_address, src, tmp_path / "o.npy",
                                          "--chunk-size", "10000"))
    assert code == 130 and "interrupted" in err
    assert seen, "the temporary output should have existed while writing"
    assert not (tmp_path / "o.npy").exists() and leftovers(tmp_path) == []
    assert sha(src) == before


def test_disk_full_while_writing(tmp_path, capsys, inproc_address, npy_input, monkeypatch):
    src, before = npy_input
    real = cli.NpyFile.__setitem__
    calls = []

    def setitem(self, key, value):
        calls.append(key)
        if len(calls) > 2:  # a few chunks land, then the disk fills up
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.path)
        real(self, key, value)
    monkeypatch.setattr(cli.NpyFile, "__setitem__", setitem)
    for out in (tmp_path / "o.npy", tmp_path / "o2.npy"):
        code, _, err = run(capsys, *sort_args(inproc_address, src, out, "--chunk-size", "8000"))
        assert code == 3 and "no space left on device" in err
        assert not out.exists() and leftovers(tmp_path) == []
        calls.clear()
    assert sha(src) == before


def test_disk_full_when_reserving(tmp_path, capsys, inproc_address, npy_input, monkeypatch):
    src, before = npy_input

    def fallocate(fd, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(os, "posix_fallocate", fallocate)
    code, _, err = run(capsys, *sort_args(inproc_address, src, tmp_path / "o.npy"))
    assert code == 3 and "no space left on device" in err
    assert not (tmp_path / "o.npy").exists() and leftovers(tmp_path) == []
    assert sha(src) == before


def test_worker_failure_is_runtime_error(tmp_path, capsys, inproc_address, npy_input,
                                         monkeypatch):
    src, before = npy_input
    out = save_zarr(tmp_path / "o.zarr", np.arange(10.0), 5)
    old = sha(out)

    def broken(self, key):
        raise RuntimeError("disk controller on fire")
    monkeypatch.setattr(cli.NpyFile, "__getitem__", broken)
    code, _, err = run(capsys, *sort_args(inproc_address, src, out, "--overwrite"))
    assert code == 3 and "disk controller on fire" in err and err.count("\n") == 1
    assert sha(out) == old  # the old output survives a failed --overwrite
    assert leftovers(tmp_path) == [] and sha(src) == before


@pytest.fixture
def pair(tmp_path, rng):
    """Keys and values files, and where ``--values`` runs write their outputs."""
    k = rng.integers(0, 1000, 30_000).astype(np.int32)
    v = rng.standard_normal(30_000)
    ks, vs = save_npy(tmp_path / "k.npy", k), save_npy(tmp_path / "v.npy", v)
    return ks, vs, tmp_path / "ko.npy", tmp_path / "vo.npy"


def pair_args(address, pair, *extra):
    ks, vs, ko, vo = pair
    return sort_args(address, ks, ko, "--values", vs, "--values-output", vo,
                     "--chunk-size", "8000", *extra)


def test_values_write_fails(tmp_path, capsys, inproc_address, pair, monkeypatch):
    """The disk fills up while the values are written: neither output appears."""
    real = cli.NpyFile.__setitem__

    def setitem(self, key, value):
        if Path(self.path).name.startswith(".vo.npy.distsort-tmp"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.path)
        real(self, key, value)
    monkeypatch.setattr(cli.NpyFile, "__setitem__", setitem)
    code, _, err = run(capsys, *pair_args(inproc_address, pair))
    assert code == 3 and "no space left on device" in err
    assert not pair[2].exists() and not pair[3].exists()
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("overwrite", [False, True])
def test_values_pair_keys_rename_fails(tmp_path, capsys, inproc_address, pair, monkeypatch,
                                       overwrite):
    """The values are renamed into place, then renaming the keys fails: the values'
    rename is undone (an old pair comes back whole) and no temporary is left."""
    ko, vo = pair[2], pair[3]
    if overwrite:
        save_npy(ko, np.arange(3))
        save_npy(vo, np.arange(3.0))
    old = {p: sha(p) for p in (ko, vo) if p.exists()}
    published = []

    def hooked(real):
        def rename(src, dst):
            src, dst = str(src), str(dst)
            into_place = "distsort-tmp" in src and not src.endswith("-old") \
                and "distsort-tmp" not in dst
            if into_place and Path(dst) == ko.resolve():
                raise OSError(errno.EIO, os.strerror(errno.EIO), dst)
            real(src, dst)
            if into_place:
                published.append(Path(dst).name)
        return rename
    # the outputs are renamed into place by rename_noreplace, put back by os.replace
    monkeypatch.setattr(os, "replace", hooked(os.replace))
    monkeypatch.setattr(outputs, "rename_noreplace", hooked(outputs.rename_noreplace))
    code, _, err = run(capsys, *pair_args(inproc_address, pair, "--verify",
                                          *(["--overwrite"] if overwrite else [])))
    assert code == 3 and "I/O error" in err
    assert published == ["vo.npy"]  # the values first; the keys' rename failed
    assert {p: sha(p) for p in (ko, vo) if p.exists()} == old
    assert leftovers(tmp_path) == []


def test_values_pair_interrupt_between_renames(tmp_path, capsys, inproc_address, pair,
                                               monkeypatch):
    """Ctrl-C right after the values' rename: it waits for a safe point, and the
    values' rename is undone before the command stops."""
    real = outputs.Output.install

    def install(self):
        real(self)
        if self.path.endswith("vo.npy"):
            os.kill(os.getpid(), signal.SIGINT)
    monkeypatch.setattr(outputs.Output, "install", install)
    code, _, err = run(capsys, *pair_args(inproc_address, pair))
    assert code == 130 and "interrupted" in err
    assert not pair[2].exists() and not pair[3].exists()
    assert leftovers(tmp_path) == []


def test_values_pair_published_values_first(tmp_path, capsys, address, pair, monkeypatch):
    published = []

    def hooked(real):
        def rename(src, dst):
            real(src, dst)
            if "distsort-tmp" in str(src) and "distsort-tmp" not in str(dst):
                published.append(Path(dst).name)
        return rename
    monkeypatch.setattr(os, "replace", hooked(os.replace))
    monkeypatch.setattr(outputs, "rename_noreplace", hooked(outputs.rename_noreplace))
    code, _, err = run(capsys, *pair_args(address, pair))
    assert code == 0, err
    assert published == ["vo.npy", "ko.npy"]
    assert leftovers(tmp_path) == []


def test_signal_while_deferred_is_delivered_after():
    """A Ctrl-C that comes while outputs are renamed is held, then delivered, not lost."""
    from distsort.cli.signals import signals_deferred
    with pytest.raises(KeyboardInterrupt), signals_deferred() as caught:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs here: it must only record the signal
        assert caught == [signal.SIGINT]


_LOST_IN_A_CALLBACK = """
import signal, sys, time, weakref
from distsort.cli.errors import Interrupted
from distsort.cli.signals import interrupts_not_lost, sigterm_interrupts

class Lock:
    pass

def callback(ref):  # as an import lock's, where the signal's handler raised
    raise KeyboardInterrupt() if sys.argv[1] == "INT" else Interrupted()

signal.signal(signal.SIGINT, signal.default_int_handler)
with sigterm_interrupts(), interrupts_not_lost():
    lock = Lock()
    ref = weakref.ref(lock, callback)
    try:
        del lock  # the callback's exception is ignored ...
        time.sleep(5)  # ... and the interrupt comes again here
        print("lost")
    except (KeyboardInterrupt, Interrupted) as e:
        print("interrupted:", type(e).__name__)
"""


@pytest.mark.parametrize("sig", ["INT", "TERM"])
def test_an_interrupt_in_a_callback_is_not_lost(sig):
    """A signal whose handler raised inside a callback whose exceptions Python ignores
    (as an import lock's weak reference, seen in one interrupted run in about 30) is
    delivered again, not printed as "Exception ignored" and lost."""
    t0 = time.perf_counter()
    out = python_c(_LOST_IN_A_CALLBACK, sig, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ("interrupted: KeyboardInterrupt" if sig == "INT" else
                                  "interrupted: Interrupted"), out.stdout
    assert "Exception ignored" not in out.stderr and "Traceback" not in out.stderr
    assert time.perf_counter() - t0 < 30


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_subprocess(tmp_path, rng, sig):
    """A real Ctrl-C (SIGINT), or a batch system's SIGTERM, to a running ``distsort sort``."""
    x = rng.standard_normal(4_000_000)
    src = save_npy(tmp_path / "in.npy", x)
    before = sha(src)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "distsort.cli", "sort", str(src), str(tmp_path / "o.npy"),
         "--workers", "2", "--memory-limit", "500MiB", "--device", "cpu", "--chunk-size",
         "1MiB", "--verify", "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    try:
        deadline = time.time() + 60
        while not leftovers(tmp_path) and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert leftovers(tmp_path), "the sort never started writing"
        time.sleep(0.3)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err.decode()
    assert b"interrupted" in err
    assert not (tmp_path / "o.npy").exists() and leftovers(tmp_path) == []
    assert sha(src) == before


# ------------------------------------------------------------------ out of core

def _spilled(stdout):
    m = re.search(r"([\d.]+) (B|kiB|MiB|GiB) spilled to disk", stdout)
    assert m, stdout
    return float(m.group(1)) * {"B": 1, "kiB": 2**10, "MiB": 2**20, "GiB": 2**30}[m.group(2)]


def out_of_core(tmp_path, capsys, n, memory_limit, chunk):
    """Sort an .npy larger than the workers' memory; they must spill, and be right."""
    from numpy.lib.format import open_memmap
    src = tmp_path / "big.npy"
    m = open_memmap(src, mode="w+", dtype=np.float64, shape=(n,))
    rng = np.random.default_rng()
    for i in range(0, n, 10_000_000):
        m[i:i + 10_000_000] = rng.standard_normal(min(10_000_000, n - i))
    m.flush()
    del m
    before = sha(src)
    code, out, err = run(capsys, "sort", src, tmp_path / "out.npy", "--workers", "2",
                         "--memory-limit", memory_limit, "--device", "cpu", "--chunk-size",
                         chunk, "--verify", "--spill-dir", tmp_path / "spill", "--no-progress")
    print(out)
    assert code == 0, err
    assert _spilled(out) > 0
    assert "verified   yes" in out
    got = np.load(tmp_path / "out.npy", mmap_mode="r")
    x = np.load(src, mmap_mode="r")
    step = 50_000_000
    for i in range(0, n, step):  # sorted, chunk by chunk and across the cuts
        part = np.asarray(got[i:i + step + 1])
        assert np.all(part[1:] >= part[:-1])
    assert np.isclose(float(np.sum(got, dtype=np.float64)), float(np.sum(x, dtype=np.float64)))
    assert sha(src) == before
    return out


def test_out_of_core_small(tmp_path, capsys):
    """80 MB of float64 in 20 chunks (15 network rounds) through two workers limited to
    200 MB each, which spill past 70% of it and whose interpreter takes ~70 MB: the
    chunks (and their copies) cannot stay in memory.  numba's merges add about 110 MB to
    each worker (LLVM), so the limit grows with them.  (160 MB in chunks of 8 MiB made
    the same 20 chunks and rounds, and spilled 10 GiB in a thrash: minutes on 2 cores.)"""
    from distsort.backends.cpu import merge
    out_of_core(tmp_path, capsys, 10_000_000, "300MB" if merge.ENABLED else "200MB", "4MiB")


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("DISTSORT_SLOW") != "1", reason="set DISTSORT_SLOW=1")
def test_out_of_core_6gb(tmp_path, capsys):
    """6 GB of float64 through two workers limited to 2 GB each."""
    out_of_core(tmp_path, capsys, 750_000_000, "2GB", "128MiB")


# ------------------------------------------------------------------ demo and bench

def test_demo_local_scheduler(capsys):
    code, out, err = run(capsys, "demo", "--size", "2MiB", "--no-progress", "--device", "cpu")
    assert code == 0, err
    assert "verified   yes: equal to numpy.sort" in out
    assert re.search(r"seed \d+", out)


def test_demo_on_cluster(capsys, address):
    code, out, err = run(capsys, "demo", "--size", "1MiB", "--dtype", "int64",
                         "--scheduler-address", address, "--no-progress", "--chunk-size",
                         "100000")
    assert code == 0, err
    assert "verified   yes" in out and "2 CPU worker(s)" in out


def test_demo_fails_when_the_sort_is_wrong(capsys, monkeypatch):
    _corrupt(monkeypatch, "unsorted")
    code, out, _ = run(capsys, "demo", "--size", "256KiB", "--no-progress", "--device", "cpu")
    assert code == 1 and "NO: differs" in out


def test_bench(tmp_path, capsys, monkeypatch):
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    main = "\nif __name__ == '__main__':\n"
    (bench / "cpu_sort.py").write_text(
        "import sys" + main + "    print('| n | Gkeys/s |')\n"
        "    print('| 10 |', ' '.join(sys.argv[1:]), '|')\n")
    (bench / "cpu_broken.py").write_text(main + "    raise SystemExit(4)\n")
    (bench / "_helpers.py").write_text(main + "    pass\n")
    (bench / "driver.py").write_text("def helper(): pass\n")  # a module, not a scenario
    monkeypatch.setattr(bench_cmd, "benchmarks_dir", lambda: bench)
    code = cli.main(["bench", "cpu_sort", "--", "--sizes", "1e6"])
    out = capsys.readouterr().out
    assert code == 0 and "== cpu_sort ==" in out
    code, out, _ = run(capsys, "bench", "--list")
    assert code == 0 and out.split() == ["cpu_broken", "cpu_sort"]
    code, _, err = run(capsys, "bench", "cpu_broken")
    assert code == 3 and "exit status 4" in err
    code, _, err = run(capsys, "bench", "gpu_nothing")
    assert code == 2 and "no benchmark scenario" in err


def test_bench_names_the_suites_scenarios(tmp_path, capfd):
    """``distsort bench`` speaks the scenario names of docs/benchmarks.md (suite.py's),
    not only script names: ``distsort bench cpu_merge`` ran nothing before."""
    code = cli.main(["bench", "--list"])
    out = capfd.readouterr().out
    assert code == 0
    listed = [line.split()[0] for line in out.splitlines() if "GPU" in line]
    assert {"cpu_sort", "cpu_merge", "local_sort", "distributed_sort"} <= set(listed)
    assert "keyed_cpu" in out.split("scripts that also run alone:")[1]
    assert cli.main(["bench", "cpu_merge", "--out", str(tmp_path), "--", "--dry-run"]) == 0
    printed = capfd.readouterr().out
    assert "== cpu_merge ==" in printed and "merge.py --runs 7" in printed


def test_bench_results_not_in_checkout(tmp_path, monkeypatch, capfd):
    """Results go to the working directory or --out, never into the source checkout."""
    bench = tmp_path / "src" / "benchmarks"
    bench.mkdir(parents=True)
    (bench / "cpu_sort.py").write_text(
        "import os, pathlib\nif __name__ == '__main__':\n"
        "    pathlib.Path(os.environ['DISTSORT_RESULTS'], 'r.json').write_text('{}')\n")
    monkeypatch.setattr(bench_cmd, "benchmarks_dir", lambda: bench)
    work, out = tmp_path / "work", tmp_path / "out"
    work.mkdir()
    out.mkdir()
    monkeypatch.chdir(work)
    assert cli.main(["bench", "cpu_sort"]) == 0
    assert cli.main(["bench", "cpu_sort", "--out", str(out)]) == 0
    assert (work / "r.json").exists() and (out / "r.json").exists()
    assert not list(bench.parent.rglob("r.json"))


def test_bench_passes_args_through(tmp_path, monkeypatch, capfd):
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    (bench / "cpu_sort.py").write_text(
        "import sys\nif __name__ == '__main__':\n    print('ARGS', *sys.argv[1:])\n")
    monkeypatch.setattr(bench_cmd, "benchmarks_dir", lambda: bench)
    assert cli.main(["bench", "--", "--sizes", "1e6", "--repeat", "3"]) == 0
    assert "ARGS --sizes 1e6 --repeat 3" in capfd.readouterr().out


def test_help_documents_exit_codes(capsys):
    code, out, _ = run(capsys, "sort", "--help")
    assert code == 0
    for status in ("0", "1", "2", "3", "130"):
        assert re.search(rf"^\s+{status}\s+\w", out, re.M)


# ------------------------------------------------------------------ GPU (on the device)

@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="no CUDA GPU")
def test_sort_on_local_gpu_cluster(tmp_path, capsys):
    """``--device gpu --workers 1``: a LocalCUDACluster (UCX when available), CuPy chunks,
    files on disk."""
    pytest.importorskip("dask_cuda")
    x = np.random.default_rng().standard_normal(3_000_000).astype(np.float32)
    k = np.random.default_rng().integers(0, 1000, 3_000_000).astype(np.int64)
    src, keys = save_npy(tmp_path / "in.npy", x), save_npy(tmp_path / "k.npy", k)
    code, out, err = run(capsys, "sort", src, tmp_path / "o.npy", "--device", "gpu",
                         "--workers", "1", "--chunk-size", "1MiB", "--verify", "--no-progress")
    assert code == 0, err
    assert "GPU worker(s)" in out and "verified   yes" in out
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.sort(x))
    code, out, err = run(capsys, "sort", keys, tmp_path / "ko.npy", "--values", src,
                         "--values-output", tmp_path / "vo.npy", "--device", "gpu",
                         "--workers", "1", "--descending", "--chunk-size", "2MiB", "--verify",
                         "--no-progress")
    assert code == 0, err
    perm = np.lexsort((x, -k))
    assert np.array_equal(np.load(tmp_path / "ko.npy"), k[perm])
    assert np.array_equal(np.load(tmp_path / "vo.npy"), x[perm])


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="no CUDA GPU")
def test_sort_on_one_gpu_in_process(tmp_path, capsys):
    """No cluster asked for, an input that fits GPU 0: this process sorts it there with
    CuPy chunks (keys, argsort and key-value), verified and equal to NumPy's sort; no
    worker process starts."""
    rng = np.random.default_rng()
    x = rng.standard_normal(3_000_000).astype(np.float32)
    x[rng.integers(0, x.size, 1000)] = np.nan
    k = rng.integers(0, 1000, 3_000_000).astype(np.int64)
    src, keys = save_npy(tmp_path / "in.npy", x), save_npy(tmp_path / "k.npy", k)
    code, out, err = run(capsys, "sort", src, tmp_path / "o.npy", "--chunk-size", "1MiB",
                         "--verify", "--no-progress")
    assert code == 0, err
    assert "GPU 0 (" in out and "threads of this process" in out and "verified   yes" in out
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.sort(x), equal_nan=True)
    code, out, err = run(capsys, "sort", src, tmp_path / "a.npy", "--argsort",
                         "--chunk-size", "3MiB", "--verify", "--no-progress")
    assert code == 0 and "GPU 0 (" in out, err
    assert np.array_equal(np.load(tmp_path / "a.npy"), np.argsort(x, kind="stable"))
    code, out, err = run(capsys, "sort", keys, tmp_path / "ko.npy", "--values", src,
                         "--values-output", tmp_path / "vo.npy", "--descending",
                         "--chunk-size", "2MiB", "--verify", "--no-progress")
    assert code == 0 and "GPU 0 (" in out, err
    perm = np.lexsort((x, -k))  # equal keys: by value, NaN last
    assert np.array_equal(np.load(tmp_path / "ko.npy"), k[perm])
    assert np.array_equal(np.load(tmp_path / "vo.npy"), x[perm], equal_nan=True)


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="no CUDA GPU")
def test_out_of_core_on_a_local_gpu_cluster(tmp_path, capsys):
    """--device-memory-limit below the input: NumPy chunks to the out-of-core path, whose
    merges run on the GPU; verified, and equal to NumPy's sort."""
    pytest.importorskip("dask_cuda")
    x = np.random.default_rng().standard_normal(6_000_000).astype(np.float32)
    src = save_npy(tmp_path / "in.npy", x)
    code, out, err = run(capsys, "sort", src, tmp_path / "o.npy", "--device", "gpu",
                         "--workers", "1", "--chunk-size", "1MiB", "--device-memory-limit",
                         "8MB", "--verify", "--no-progress")
    assert code == 0, err
    assert "GPU worker(s)" in out and "out of core" in out and "verified   yes" in out
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.sort(x))


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="no CUDA GPU")
def test_out_of_core_on_one_gpu_in_process(tmp_path, capsys):
    """--device-memory-limit and no cluster asked for: this process sorts out of core on
    GPU 0, its threads reading and writing while the device takes one step at a time;
    keys and argsort, verified, equal to NumPy."""
    x = np.random.default_rng().standard_normal(6_000_000).astype(np.float32)
    src = save_npy(tmp_path / "in.npy", x)
    code, out, err = run(capsys, "sort", src, tmp_path / "o.npy", "--chunk-size", "1MiB",
                         "--device-memory-limit", "8MB", "--verify", "--no-progress")
    assert code == 0, err
    assert "GPU 0 (" in out and "out of core" in out and "verified   yes" in out
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.sort(x))
    code, out, err = run(capsys, "sort", src, tmp_path / "a.npy", "--argsort", "--descending",
                         "--chunk-size", "500000", "--device-memory-limit", "20MB",
                         "--verify", "--no-progress")
    assert code == 0 and "out of core" in out, err
    assert np.array_equal(np.load(tmp_path / "a.npy"),
                          np.argsort(-x.astype(np.float64), kind="stable"))


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="no CUDA GPU")
def test_demo_on_gpus(capsys):
    pytest.importorskip("dask_cuda")
    code, out, err = run(capsys, "demo", "--size", "64MiB", "--no-progress")
    assert code == 0, err
    assert "GPU worker(s)" in out and "verified   yes" in out
