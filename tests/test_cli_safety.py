"""``distsort sort`` never writes over or into an input, publishes its outputs all or
none (also when killed), leaves no temporaries that a later run does not remove, and
refuses bad option values before any work, saying what is allowed."""
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from distsort import cli
from distsort.cli import outputs, temporaries

ROOT = Path(__file__).resolve().parents[1]


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def leftovers(directory):
    return sorted(p.name for p in Path(directory).iterdir() if ".distsort-" in p.name)


@pytest.fixture
def files(tmp_path, monkeypatch):
    """Keys and values in a fresh directory, which is the working directory."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng()
    np.save("in.npy", rng.standard_normal(20_000))
    np.save("v.npy", rng.integers(0, 100, 20_000))
    return {p: Path(p).read_bytes() for p in ("in.npy", "v.npy")}


# ------------------------------------------------------------------ inputs stay inputs
@pytest.mark.parametrize("argv, message", [
    (["in.npy", "o.npy", "--report", "in.npy"], "--report in.npy: is an input"),
    (["in.npy", "o.npy", "--report", "o.npy"], "--report o.npy: is an output too"),
    (["in.npy", "o.npy", "--report", "./v.npy", "--values", "v.npy", "--values-output",
      "vo.npy"], "is an input"),
    (["in.npy", "o.npy", "--values", "v.npy", "--values-output", "v.npy"], "is an input"),
    (["in.npy", "o.npy", "--values", "v.npy", "--values-output", "in.npy"], "is an input"),
    (["in.npy", "in.npy/x.npy"], "lies inside the input in.npy"),
    (["in.npy", "o.npy", "--spill-dir", "in.npy"], "--spill-dir in.npy: is an input"),
    (["in.npy", "link.npy", "--overwrite"], "is an input"),
])
def test_no_path_written_is_an_input(files, capsys, argv, message):
    os.symlink("in.npy", "link.npy")
    code, _, err = run(capsys, "sort", *argv)
    assert code == 2 and message in err, err
    assert {p: Path(p).read_bytes() for p in files} == files
    assert not Path("o.npy").exists() and not Path("vo.npy").exists()


def test_no_output_inside_a_zarr_input(tmp_path, capsys, monkeypatch):
    zarr = pytest.importorskip("zarr")
    monkeypatch.chdir(tmp_path)
    z = zarr.open_array("in.zarr", mode="w", shape=(100,), dtype="f8", chunks=(30,))
    z[:] = np.arange(100.0)
    before = sorted(p.name for p in Path("in.zarr").rglob("*"))
    for argv in (["in.zarr", "in.zarr/sorted.npy"], ["in.zarr", "in.zarr/c/s.zarr"],
                 ["in.zarr", "o.npy", "--report", "in.zarr/r.html"]):
        code, _, err = run(capsys, "sort", *argv)
        assert code == 2 and "inside the input in.zarr" in err, err
    code, _, err = run(capsys, "sort", "in.zarr", "c/../in.zarr", "--overwrite")
    assert code == 2 and "is an input" in err
    assert sorted(p.name for p in Path("in.zarr").rglob("*")) == before


def test_no_output_replaces_a_directory_holding_an_input(tmp_path, capsys, monkeypatch):
    pytest.importorskip("zarr")
    monkeypatch.chdir(tmp_path)
    Path("d.zarr").mkdir()
    np.save("d.zarr/in.npy", np.arange(5.0))
    code, _, err = run(capsys, "sort", "d.zarr/in.npy", "d.zarr", "--overwrite")
    assert code == 2 and "holds the input" in err, err
    assert np.load("d.zarr/in.npy").tolist() == [0, 1, 2, 3, 4]


# ------------------------------------------------------------------ publishing
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_after_publishing_says_the_output_is_complete(files, capsys, monkeypatch,
                                                               sig):
    real = outputs.Output.finish

    def finish(self):  # the renames are done: a signal comes now
        real(self)
        os.kill(os.getpid(), sig)
    monkeypatch.setattr(outputs.Output, "finish", finish)
    code, _, err = run(capsys, "sort", "in.npy", "o.npy", "--no-progress")
    assert code == 130 and "interrupted after the output was published" in err, err
    assert "no output written" not in err
    np.testing.assert_array_equal(np.load("o.npy"), np.sort(np.load("in.npy")))
    assert leftovers(".") == []


def kill_after_renames(k, argv):
    """Run the command in a process that dies (os._exit) after ``k`` renames of its
    publication, as a SIGKILL between them would leave it."""
    code = f"""
import os, sys
import distsort.cli.outputs as outputs
count = [0]
def counted(real):
    def rename(src, dst):
        real(src, dst)
        if ".distsort-" in str(src) + str(dst):
            count[0] += 1
            if count[0] == {k}:
                os._exit(9)
    return rename
os.replace = counted(os.replace)
outputs.rename_noreplace = counted(outputs.rename_noreplace)  # the outputs' installs
from distsort.cli import main
sys.exit(main(sys.argv[1:]))
"""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code, *argv], env=env, timeout=120,
                          capture_output=True, text=True, check=False)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_values_overwrite_killed_between_renames_leaves_a_whole_pair(files, capsys, k):
    """Old pair in place, a new one published with --overwrite, the process killed
    after ``k`` of its 4 renames: the keys are never beside values of another pair,
    and the next run puts the old pair back (or keeps the new one) and says so."""
    np.save("ko.npy", np.arange(3))
    np.save("vo.npy", np.arange(3) * 10)
    old = (Path("ko.npy").read_bytes(), Path("vo.npy").read_bytes())
    argv = ["sort", "in.npy", "ko.npy", "--values", "v.npy", "--values-output", "vo.npy",
            "--overwrite", "--no-progress"]
    assert kill_after_renames(k, argv).returncode == 9

    def pair():
        return tuple(Path(p).read_bytes() if Path(p).exists() else None
                     for p in ("ko.npy", "vo.npy"))
    if Path("ko.npy").exists():  # OUTPUT present: its pair is whole
        keys, values = np.load("ko.npy"), np.load("vo.npy")
        assert pair() == old or len(keys) == len(values) == 20_000
    temporaries.clean_directory(".")  # what the next run does first
    x, v = np.load("in.npy"), np.load("v.npy")
    if pair() != old:  # committed: the new pair, complete
        order = np.lexsort((v, x))
        np.testing.assert_array_equal(np.load("ko.npy"), x[order])
        np.testing.assert_array_equal(np.load("vo.npy"), v[order])
    assert leftovers(".") == []
    assert {p: Path(p).read_bytes() for p in files} == files
    code, _, err = run(capsys, *argv)  # and a re-run succeeds
    assert code == 0, err


def test_stale_temporaries_of_dead_owners_are_removed(files, capsys):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = temporaries.host_tag()
    stale = [f".o.npy.distsort-tmp-{dead.pid}-{host}-0123abcd",
             f".distsort-probe-{dead.pid}-{host}-89abcdef"]
    alive = f".o.npy.distsort-tmp-{os.getppid()}-{host}-0123abcd"
    for name in [*stale, alive]:
        Path(name).write_bytes(b"x" * 1000)
    code, _, err = run(capsys, "sort", "in.npy", "o.npy", "--no-progress")
    assert code == 0, err
    assert leftovers(".") == [alive]


def test_stale_temporaries_of_another_host_are_named(files, capsys):
    name = ".o.npy.distsort-tmp-1-ffffff-0123abcd"
    assert temporaries.host_tag() != "ffffff"
    Path(name).write_bytes(b"x")
    code, _, err = run(capsys, "sort", "in.npy", "o.npy", "--no-progress")
    assert code == 0 and name in err and "another host" in err
    assert Path(name).exists()


def test_a_long_output_name_fits(files, capsys):
    name = "s" * 247 + ".npy"  # 251 characters: legal, its temporaries must fit too
    code, _, err = run(capsys, "sort", "in.npy", name, "--no-progress")
    assert code == 0, err
    np.testing.assert_array_equal(np.load(name), np.sort(np.load("in.npy")))
    assert all(len(temporaries.temporary_name(name, k)) <= temporaries.NAME_MAX
               for k in temporaries.KINDS)


def test_an_interrupted_zarr_write_leaves_no_directory(tmp_path, monkeypatch):
    """A chunk write still running when the output is discarded must not re-create
    the temporary directory that the clean-up removed."""
    zarr = pytest.importorskip("zarr")
    out = outputs.Output(str(tmp_path / "o.zarr"), np.dtype("f8"), 1000, 100).create()
    real = zarr.Array.__setitem__
    started = threading.Event()

    def slow(self, key, value):
        started.set()
        time.sleep(0.5)
        real(self, key, value)
    monkeypatch.setattr(zarr.Array, "__setitem__", slow)
    errors = []

    def write(start):
        try:
            out.target[start:start + 100] = np.arange(100.0)
        except OSError as e:
            errors.append(e)
    writers = [threading.Thread(target=write, args=(i * 100,)) for i in range(2)]
    writers[0].start()
    started.wait(5)
    out.discard()
    writers[1].start()
    for t in writers:
        t.join()
    assert not Path(out.tmp).exists() and leftovers(tmp_path) == []
    assert len(errors) == 1  # the write that came after the discard was refused


# ------------------------------------------------------------------ option values
@pytest.mark.parametrize("option, allowed", [
    (["--chunk-size", ""], "use a size in bytes with a unit"),
    (["--chunk-size", " "], "use a size in bytes with a unit"),
    (["--chunk-size", "1.5"], "use a size in bytes with a unit"),
    (["--chunk-size", "1"], "1000..2**47"),
    (["--chunk-size", "7B"], "1KiB..1PiB"),
    (["--chunk-size", "999999999999999999999999"], "1000..2**47"),
    (["--chunk-size", "1000"], "at most 100,000"),  # 20,000 elements: fine ...
    (["--workers", "1000"], "use a whole number from 1 to"),
    (["--workers", "-1"], "use a whole number from 1 to"),
    (["--workers", "0"], "use a whole number from 1 to"),
    (["--memory-limit", "lots"], "a size in bytes (e.g. 2GiB), a share"),
    (["--scheduler-address", "not a url"], "use PROTOCOL://HOST:PORT"),
    (["--scheduler-file", "in.npy"], "not a scheduler file"),
    (["--scheduler-file", "s.json"], "names no address"),
])
def test_bad_option_values_are_usage_errors(files, capsys, option, allowed, monkeypatch):
    Path("s.json").write_text('{"id": 1}')
    if option == ["--chunk-size", "1000"]:  # ... but not on an input of 10**8 + 1
        np.lib.format.open_memmap("in.npy", mode="w+", dtype="i1", shape=(10**8 + 1,))
    t0 = time.perf_counter()
    code, _, err = run(capsys, "sort", "in.npy", "o.npy", *option)
    assert code == 2 and allowed in err, err
    assert "Traceback" not in err and time.perf_counter() - t0 < 5
    assert not Path("o.npy").exists()


def test_device_gpu_without_cuda_is_a_usage_error(files, capsys, monkeypatch):
    from distsort import cluster
    monkeypatch.setattr(cluster, "gpu_available", lambda: False)
    code, _, err = run(capsys, "sort", "in.npy", "o.npy", "--device", "gpu")
    assert code == 2 and "--device gpu: no CUDA GPU" in err and "--device cpu" in err


@pytest.mark.parametrize("content", [b"hello\n", b"\x93NUMPZ\x01\x00", b""])
def test_not_a_npy_file(files, capsys, content):
    Path("junk.npy").write_bytes(content)
    code, _, err = run(capsys, "sort", "junk.npy", "o.npy")
    assert code == 2 and "junk.npy: not a .npy file" in err, err
    assert "pickle" not in err


def test_a_corrupt_zarr_chunk_is_named(tmp_path, capsys, monkeypatch):
    zarr = pytest.importorskip("zarr")
    monkeypatch.chdir(tmp_path)
    z = zarr.open_array("in.zarr", mode="w", shape=(1000,), dtype="f8", chunks=(100,))
    z[:] = np.random.default_rng().standard_normal(1000)
    Path("in.zarr/c/3").write_bytes(b"not zstd")
    code, _, err = run(capsys, "sort", "in.zarr", "o.npy", "--no-progress")
    assert code == 2 and "cannot read zarr chunk 3 (elements 300..399)" in err, err
    assert not Path("o.npy").exists() and leftovers(".") == []


def command(*argv, **kw):
    """The ``distsort`` executable (its entry point) in a new process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-c", "from distsort.cli.launch import run; run()",
                             *argv], env=env, stderr=subprocess.PIPE, text=True, **kw)


def test_a_closed_pipe_on_stdout_is_no_error(files):
    proc = command("sort", "in.npy", "o.npy", "--no-progress", stdout=subprocess.PIPE)
    proc.stdout.close()  # as `| head -0` would: every write to stdout fails (EPIPE)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "Broken pipe" not in err and "rror" not in err, err
    np.testing.assert_array_equal(np.load("o.npy"), np.sort(np.load("in.npy")))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("delay", [0.3, 0.6])
def test_a_signal_while_the_command_starts(files, sig, delay):
    # A signal after the whole run would test nothing: send it within the first half of
    # the time an unsignalled run takes here.
    t0 = time.monotonic()
    command("sort", "in.npy", "whole.npy", "--no-progress", stdout=subprocess.DEVNULL).wait(120)
    delay = min(delay, (time.monotonic() - t0) / 2)
    Path("whole.npy").unlink()
    for _ in range(5):  # again where it came while Python itself started (under load)
        proc = command("sort", "in.npy", "o.npy", "--no-progress", stdout=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        if "Fatal Python error: init_import_site" not in err:
            break
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert err.strip() == "distsort: interrupted; no output written"
    assert not Path("o.npy").exists() and leftovers(".") == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_does_not_wait_for_running_sorts(files, sig):
    """The sort of a chunk in hand takes 60 s here (400 MB of float64 took 20 s on 2
    cores): an interrupt must end the command at once, not when it is done."""
    code = """
import os, time
import distsort.backends.cpu.numpy_backend as npb
real = npb.prepare
def slow(*args, **kwargs):
    open("sorting", "w").close()
    time.sleep(60)
    return real(*args, **kwargs)
npb.prepare = slow
from distsort.cli.launch import run
run()
"""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", code, "sort", "in.npy", "o.npy",
                             "--no-progress", "--chunk-size", "5000"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not Path("sorting").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    t0 = time.monotonic()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert time.monotonic() - t0 < 5 and proc.returncode == 130, err
    assert not Path("o.npy").exists() and leftovers(".") == []


def test_local_workers_keep_their_warnings_out_of_the_output():
    """Worker processes log "memory use is high" warnings to the command's stderr: a
    local cluster's workers log errors only."""
    import logging

    from distsort.cli.args import build_parser
    from distsort.cli.connection import _local_options
    args = build_parser().parse_args(["sort", "in.npy", "o.npy", "--workers", "2"])
    assert _local_options(args, gpu=False)["silence_logs"] == logging.ERROR
