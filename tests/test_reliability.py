"""``distsort sort`` as an adversarial user finds it: no file replaced that the run was
not asked to replace, no path written that is an input under another name, and one
exit status per outcome whatever fails (the terminal, a pipe, stderr, a header).
The numbers are the cases of docs/reliability.md."""
import errno
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from test_cli_safety import ROOT, files, leftovers, run  # noqa: F401  (a fixture)
from test_kill import starting

from distsort.cli import claims, sort, temporaries


def executable(*argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, prefix="",
               shell_redirect="", timeout=120):
    """The ``distsort`` executable (``distsort.cli.launch.run``) in a new process, after
    ``prefix`` (Python run first, to slow or patch it); ``shell_redirect``: a
    redirection of bash's (``>&-``) applied to it.  Returns (status, stdout, stderr)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    code = prefix + "\nfrom distsort.cli.launch import run\nrun()\n"
    args = [sys.executable, "-c", code, *map(str, argv)]
    if shell_redirect:
        args = ["bash", "-c", f'exec "$@" {shell_redirect}', "distsort", *args]
    r = subprocess.run(args, env=env, stdout=stdout, stderr=stderr, timeout=timeout,
                       check=False)
    text = [x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
            for x in (r.stdout, r.stderr)]
    return r.returncode, *text


@pytest.fixture
def saved(files):  # noqa: F811  (the fixture imported above)
    """test_cli_safety's ``files``: keys in.npy and values v.npy in a fresh working
    directory, and their bytes."""
    return files


def sorted_input():
    return np.sort(np.load("in.npy"))


def inputs_unchanged(saved):
    return {p: Path(p).read_bytes() for p in saved} == saved


def appear_during_sort(monkeypatch, make):
    """Call ``make()`` once the sort has written the outputs' temporaries, before
    they are published: a file or directory appears at OUTPUT while the sort runs."""
    real = sort.write_sorted

    def write_sorted(*args, **kwargs):
        result = real(*args, **kwargs)
        make()
        return result
    monkeypatch.setattr(sort, "write_sorted", write_sorted)


# ------------------------------------------------------------------ 1: claimed outputs
def test_1_an_npy_output_that_appears_during_the_sort_is_kept(saved, capsys, monkeypatch):
    appear_during_sort(monkeypatch, lambda: Path("o.npy").write_bytes(b"precious"))
    code, _, err = run(capsys, "sort", "in.npy", "o.npy", "--no-progress")
    assert code == 2 and "o.npy: appeared while the sort ran" in err, err
    assert Path("o.npy").read_bytes() == b"precious"
    assert leftovers(".") == [] and inputs_unchanged(saved)


def test_1_a_zarr_directory_that_appears_during_the_sort_is_kept(saved, capsys, monkeypatch):
    pytest.importorskip("zarr")
    Path("z").mkdir()

    def make():
        Path("z/o.zarr").mkdir()
        Path("z/o.zarr/mine.txt").write_text("precious")
    appear_during_sort(monkeypatch, make)
    code, _, err = run(capsys, "sort", "in.npy", "z/o.zarr", "--no-progress")
    assert code == 2 and "appeared while the sort ran" in err, err
    assert sorted(p.name for p in Path("z/o.zarr").iterdir()) == ["mine.txt"]
    assert Path("z/o.zarr/mine.txt").read_text() == "precious"
    assert leftovers("z") == [] and inputs_unchanged(saved)


def test_1_overwrite_replaces_only_what_was_there_at_the_start(saved, capsys, monkeypatch):
    np.save("o.npy", np.arange(3.0))

    def replace():  # another program writes a new o.npy (a new file, by rename)
        Path("new.npy").write_bytes(b"theirs")
        os.replace("new.npy", "o.npy")
    appear_during_sort(monkeypatch, replace)
    code, _, err = run(capsys, "sort", "in.npy", "o.npy", "--no-progress", "--overwrite")
    assert code == 2 and "o.npy: was replaced while the sort ran" in err, err
    assert Path("o.npy").read_bytes() == b"theirs"
    assert leftovers(".") == [] and inputs_unchanged(saved)
    # With nothing there at the start, --overwrite replaces nothing that appears.
    os.remove("o.npy")
    appear_during_sort(monkeypatch, lambda: Path("o.npy").write_bytes(b"precious"))
    code, _, err = run(capsys, "sort", "in.npy", "o.npy", "--no-progress", "--overwrite")
    assert code == 2 and "appeared while the sort ran" in err, err
    assert Path("o.npy").read_bytes() == b"precious"


def test_1_overwrite_of_an_unchanged_output_still_works(saved, capsys):
    np.save("o.npy", np.arange(3.0))
    code, _, err = run(capsys, "sort", "in.npy", "o.npy", "--no-progress", "--overwrite")
    assert code == 0, err
    np.testing.assert_array_equal(np.load("o.npy"), sorted_input())
    assert leftovers(".") == []


def test_1_an_output_held_by_another_run_is_refused(saved, capsys):
    held = claims.claim("o.npy", overwrite=False)
    try:
        code, _, err = run(capsys, "sort", "in.npy", "o.npy", "--no-progress", "--overwrite")
        assert code == 2 and "another distsort run is writing it" in err, err
        assert not Path("o.npy").exists()
    finally:
        held.release()
    assert leftovers(".") == []
    code, _, err = run(capsys, "sort", "in.npy", "o.npy", "--no-progress")
    assert code == 0, err


#: Python run before the command: its sort waits 2 s once the outputs' temporaries
#: exist, so that concurrent runs overlap whatever the machine's load.
SLOW_SORT = """
import time
import distsort.cli.sort as s
real = s.write_sorted
def slow(*a, **k):
    time.sleep(2)
    return real(*a, **k)
s.write_sorted = slow
"""


def test_1_of_concurrent_runs_on_one_output_exactly_one_wins(saved):
    """Three runs with --overwrite over an old output (without it, a run that came
    last would be refused by the existing output alone)."""
    np.save("o.npy", np.arange(3.0))
    argv = ["sort", "in.npy", "o.npy", "--no-progress", "--overwrite"]
    results = [None] * 3

    def one(i):
        results[i] = executable(*argv, prefix=SLOW_SORT)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = sorted(r[0] for r in results)
    assert codes == [0, 2, 2], results
    for code, _, err in results:
        assert code == 0 or ("another distsort run is writing it" in err
                             or "already exists" in err), err
        assert "Traceback" not in err
    np.testing.assert_array_equal(np.load("o.npy"), sorted_input())
    assert leftovers(".") == [] and inputs_unchanged(saved)


def test_1_a_lock_left_by_a_killed_run_is_removed(saved, capsys):
    lock = temporaries.lock_name(str(Path("o.npy").resolve()))
    Path(lock).write_text("")  # as a run killed with SIGKILL leaves it
    code, _, err = run(capsys, "sort", "in.npy", "o.npy", "--no-progress")
    assert code == 0, err
    assert leftovers(".") == []


# ------------------------------------------------------------------ 2: identities
@pytest.mark.parametrize("option", ["--report", "OUTPUT", "--values-output"])
def test_2_a_hard_link_of_an_input_is_the_input(saved, capsys, option):
    os.link("in.npy", "hl.npy")
    os.link("v.npy", "hv.npy")
    argv = {"--report": ["in.npy", "o.npy", "--report", "hl.npy"],
            "OUTPUT": ["in.npy", "hl.npy", "--overwrite"],
            "--values-output": ["in.npy", "o.npy", "--values", "v.npy", "--values-output",
                                "hv.npy", "--overwrite"]}[option]
    code, _, err = run(capsys, "sort", *argv, "--no-progress")
    assert code == 2 and "under another name" in err, err
    assert inputs_unchanged(saved) and not Path("o.npy").exists()
    assert leftovers(".") == []


def test_2_a_hard_link_of_a_file_inside_a_zarr_input(tmp_path, capsys, monkeypatch):
    zarr = pytest.importorskip("zarr")
    monkeypatch.chdir(tmp_path)
    z = zarr.open_array("in.zarr", mode="w", shape=(1000,), dtype="f8", chunks=(300,))
    z[:] = np.random.default_rng().standard_normal(1000)
    before = {p: p.read_bytes() for p in Path("in.zarr").rglob("*") if p.is_file()}
    os.link("in.zarr/zarr.json", "zj.html")
    os.link("in.zarr/c/1", "chunk.npy")
    for argv in (["in.zarr", "o.npy", "--report", "zj.html"],
                 ["in.zarr", "chunk.npy", "--overwrite"]):
        code, _, err = run(capsys, "sort", *argv, "--no-progress")
        assert code == 2 and "is the input in.zarr/" in err, err
    assert {p: p.read_bytes() for p in Path("in.zarr").rglob("*") if p.is_file()} == before
    assert zarr.open_array("in.zarr", mode="r").shape == (1000,)


# ------------------------------------------------------------------ 7-9: the streams
def test_7_stdout_on_a_full_device_after_publishing(saved):
    with open("/dev/full", "w") as full:
        code, _, err = executable("sort", "in.npy", "o.npy", "--verify", stdout=full)
    assert code == 3 and "(stdout)" in err and "o.npy complete" in err, err
    assert "no output written" not in err and "Traceback" not in err
    np.testing.assert_array_equal(np.load("o.npy"), sorted_input())
    assert leftovers(".") == []


def test_8_stdout_closed(saved):
    code, _, err = executable("sort", "in.npy", "o.npy", "--verify", shell_redirect=">&-")
    assert code == 0 and err == "", err
    np.testing.assert_array_equal(np.load("o.npy"), sorted_input())


def test_8_no_stdout_in_process(saved, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdout", None)
    assert sort.sys.stdout is None
    code = run(capsys, "sort", "in.npy", "o.npy", "--verify")[0]
    assert code == 0
    np.testing.assert_array_equal(np.load("o.npy"), sorted_input())


@pytest.mark.parametrize("both", [False, True], ids=["stdout", "stdout and stderr"])
def test_9_a_pipe_whose_reader_leaves(saved, both):
    """``distsort sort ... --progress | head -c 10`` (with ``2>&1``: ``both``)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-c", "from distsort.cli.launch import run; run()", "sort", "in.npy",
         "o.npy", "--progress", "--verify"], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if both else subprocess.PIPE)
    head = proc.stdout.read(10)
    proc.stdout.close()
    err = b"" if both else proc.stderr.read()
    proc.wait(120)
    assert len(head) == 10 and proc.returncode == 0, err
    assert b"Traceback" not in err and b"rror" not in err, err
    np.testing.assert_array_equal(np.load("o.npy"), sorted_input())


def test_9_bad_input_with_stderr_full(saved):
    Path("text.npy").write_text("not an array\n")
    with open("/dev/full", "w") as full:
        code, _, _ = executable("sort", "text.npy", "o.npy", stderr=full)
    assert code == 2
    with open("/dev/full", "w") as full:  # and the status of a good run stays 0
        code, _, _ = executable("sort", "in.npy", "o.npy", stderr=full)
    assert code == 0
    np.testing.assert_array_equal(np.load("o.npy"), sorted_input())


# ------------------------------------------------------------------ 10: headers
def npy_with_shape(path, shape_text):
    """A .npy file of 1,000 float64 whose header says ``shape_text`` instead."""
    np.save(path, np.random.default_rng().standard_normal(1000))
    data = Path(path).read_bytes()
    size = int.from_bytes(data[8:10], "little")
    header = data[10:10 + size].decode("latin1").replace("(1000,)", shape_text)
    header = header.rstrip() + " " * (size - len(header.rstrip()) - 1) + "\n"
    assert len(header) == size
    Path(path).write_bytes(data[:10] + header.encode("latin1") + data[10 + size:])


@pytest.mark.parametrize("shape, message", [
    ("(99999999999999999999,)", "its header says 99,999,999,999,999,999,999 elements"),
    ("(-1000,)", "corrupt .npy header: shape (-1000,)"),
    ("(1001,)", "corrupt or truncated .npy file"),
    ("(1000.5,)", "corrupt .npy header"),
])
def test_10_corrupt_npy_headers(saved, capsys, shape, message):
    npy_with_shape("bad.npy", shape)
    for argv in (["bad.npy", "o.npy"], ["in.npy", "o.npy", "--values", "bad.npy",
                                         "--values-output", "vo.npy"]):
        code, _, err = run(capsys, "sort", *argv)
        assert code == 2 and message in err and "Traceback" not in err, err
        assert not Path("o.npy").exists() and leftovers(".") == []


# ------------------------------------------------------------------ 11, 12: the report
def no_sort(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the sort ran")
    monkeypatch.setattr(sort, "_sort_and_summarize", refuse)


def test_11_a_report_naming_a_directory_is_refused_first(saved, capsys, monkeypatch):
    no_sort(monkeypatch)
    Path("d").mkdir()
    code, _, err = run(capsys, "sort", "in.npy", "o.npy", "--report", "d")
    assert code == 2 and "--report d: is a directory" in err, err
    assert leftovers(".") == [] and leftovers("d") == []


def test_11_a_report_in_a_read_only_place_is_refused_first(saved, capsys, monkeypatch):
    no_sort(monkeypatch)
    if os.getuid() == 0:  # root writes in any directory it may not create files in /proc
        place = "/proc/r.html"
    else:
        Path("ro").mkdir()
        os.chmod("ro", 0o500)
        place = "ro/r.html"
    code, _, err = run(capsys, "sort", "in.npy", "o.npy", "--report", place)
    assert code == 2 and f"--report {place}: cannot write in directory" in err, err
    assert not Path("o.npy").exists() and leftovers(".") == []


def test_12_a_full_disk_on_the_report_alone(saved, capsys, monkeypatch):
    import contextlib

    @contextlib.contextmanager
    def report_on_a_full_disk(path):
        yield
        with open(path, "w") as f:  # a part written, then the disk is full
            f.write("<!DOCTYPE html>")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
    monkeypatch.setattr(sort, "_has_bokeh", lambda: True)
    monkeypatch.setattr(sort, "in_process_report", report_on_a_full_disk)
    code, _, err = run(capsys, "sort", "in.npy", "o.npy", "--report", "r.html",
                       "--no-progress")
    assert code == 3 and "no space left on device (report r.html)" in err, err
    assert "(output)" not in err and "no output written" not in err
    assert "o.npy complete" in err
    assert not Path("r.html").exists() and leftovers(".") == []
    np.testing.assert_array_equal(np.load("o.npy"), sorted_input())


# ------------------------------------------------------------------ 13: signals
#: Python run before the command: its ``main`` sends the process ``SIG`` as it returns,
#: after the command's handlers are put back (where a signal came in the probe).
SIGNAL_AFTER_MAIN = """
import os, signal
import distsort.cli.command as c
real = c.main
def main(*a, **k):
    status = real(*a, **k)
    os.kill(os.getpid(), signal.{sig})
    return status
c.main = main
"""


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_13_a_signal_after_the_status_is_decided_keeps_it(saved, sig):
    code, _, err = executable("sort", "in.npy", "o.npy", "--no-progress",
                              prefix=SIGNAL_AFTER_MAIN.format(sig=sig))
    assert code == 0 and "Traceback" not in err and "no output written" not in err, err
    np.testing.assert_array_equal(np.load("o.npy"), sorted_input())


def test_13_a_signal_in_the_first_tens_of_milliseconds(saved):
    """SIGINT and SIGTERM at 0..60 ms of the process: 130 with one line once
    ``distsort.cli.launch`` runs; before it, only Python's own ends (nothing written)."""
    rng = np.random.default_rng(13)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for i in range(6):
        sig = (signal.SIGINT, signal.SIGTERM)[i % 2]
        proc = subprocess.Popen([sys.executable, "-c", "from distsort.cli.launch import run; run()",
                                 "sort", "in.npy", "o.npy", "--no-progress"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(float(rng.uniform(0, 0.06)))
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        if proc.returncode in (0, 130):
            assert "Traceback" not in err, err
        else:  # Python had not yet run distsort's first line
            assert proc.returncode in (-sig, 1) and (err == "" or starting(err)), err
        assert not Path("o.npy").exists() or proc.returncode == 0
        Path("o.npy").unlink(missing_ok=True)
    assert leftovers(".") == []


# ------------------------------------------------------------------ the probe
#: The probe's bounds: runs, seconds (no run starts after), seed (``DISTSORT_PROBE_*``).
PROBE_RUNS = int(os.environ.get("DISTSORT_PROBE_RUNS", "8"))
PROBE_SECONDS = float(os.environ.get("DISTSORT_PROBE_SECONDS", "20"))
PROBE_SEED = int(os.environ.get("DISTSORT_PROBE_SEED", "49"))
STREAMS = ("plain", "stdout closed", "stdout full", "stdout pipe left", "stderr full",
           "both in a pipe left")


def probe_argv(rng, n):
    """Random odd options for a sort of ``n`` keys, and its outputs."""
    argv = ["sort", "in.npy", "o.npy"]
    outputs = ["o.npy"]
    if rng.integers(3) == 0:
        argv += ["--values", "v.npy", "--values-output", "ov.npy"]
        outputs.append("ov.npy")
        argv += ["--stable"] * int(rng.integers(2))
    elif rng.integers(3) == 0:
        argv.append("--argsort")
    argv += ["--descending"] * int(rng.integers(2))
    argv += [["--verify"], ["--verify=reread"], []][int(rng.integers(3))]
    argv += [["--progress"], ["--no-progress"], []][int(rng.integers(3))]
    if rng.integers(2):
        argv += ["--chunk-size", str(int(rng.integers(1000, max(1001, n + 1))))]
    return argv, outputs


def probe_run(argv, stream, sig, delay, rng):
    """Run the executable with ``stream``'s redirection, sending ``sig`` after ``delay``
    seconds (None: no signal); returns (status, stderr, where stderr was seen)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-c", "from distsort.cli.launch import run; run()", *argv]
    full = open("/dev/full", "w")  # noqa: SIM115  (closed below)
    out = {"plain": subprocess.DEVNULL, "stdout full": full}.get(stream, subprocess.PIPE)
    err = {"stderr full": full, "both in a pipe left": subprocess.STDOUT}.get(
        stream, subprocess.PIPE)
    if stream == "stdout closed":
        cmd = ["bash", "-c", 'exec "$@" >&-', "distsort", *cmd]
        out = None
    try:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err)
        t0 = time.monotonic()
        if proc.stdout is not None:  # the reader takes a few bytes and leaves
            proc.stdout.read(int(rng.integers(0, 60)))
            proc.stdout.close()
        if sig is not None:
            time.sleep(max(0.0, delay - (time.monotonic() - t0)))
            if proc.poll() is None:
                proc.send_signal(sig)
            else:
                sig = None
        text = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        proc.wait(120)
    finally:
        full.close()
    return proc.returncode, text, sig


def probe_problems(code, err, sig, stream, seen, exists_refused):
    """What is wrong with a probe run's outcome (an empty list: nothing)."""
    problems = []
    if "partial" in seen:
        problems.append("a partial output")
    if seen[0] != "absent" and len(set(seen)) != 1:
        problems.append("a mixed pair")
    if "Traceback" in err and not starting(err):
        problems.append("a traceback")
    if "no output written" in err and seen[0] == "new":
        problems.append("'no output written' beside a new output")
    if sig is None:
        want = (2 if exists_refused else 3 if stream == "stdout full" else 0)
        if code != want:
            problems.append(f"exit {code}, not {want}")
        if want in (0, 3) and seen[0] != "new":
            problems.append("no new output")
    elif code == 0 and seen[0] != "new" or code not in (0, 2, 3, 130, 1, -sig):
        problems.append(f"exit {code} after {sig.name}")
    elif code in (1, -sig) and not (sig == signal.SIGKILL or starting(err) or not err):
        problems.append(f"exit {code} after {sig.name}: {err!r}")
    return problems


def test_probe_kills_pipes_and_odd_options(saved, capsys):
    """A bounded random probe (``PROBE_RUNS`` runs within ``PROBE_SECONDS``, seeded by
    ``DISTSORT_PROBE_SEED``): odd options, an old output with or without
    ``--overwrite``, stdout and stderr closed, full or a pipe whose reader leaves,
    and SIGINT, SIGTERM or SIGKILL at a random moment.  After each: the inputs
    unchanged, OUTPUT absent, old or new (never partial), the exit status the table's,
    no traceback, and nothing left once the next run's clean-up has run."""
    from test_kill import expected, state
    rng = np.random.default_rng(PROBE_SEED)
    tmp = Path.cwd()
    t0, found, runs = time.monotonic(), [], 0
    while runs < PROBE_RUNS and time.monotonic() - t0 < PROBE_SECONDS:
        runs += 1
        n = int(rng.integers(1, 40_000))
        np.save("in.npy", rng.standard_normal(n).astype(rng.choice(["f8", "f4", "i4"])))
        np.save("v.npy", rng.integers(0, 50, n))
        inputs = {p: Path(p).read_bytes() for p in ("in.npy", "v.npy")}
        argv, outputs = probe_argv(rng, n)
        for p in outputs:
            Path(p).unlink(missing_ok=True)
        old_output = bool(rng.integers(2))
        if old_output:
            for i, p in enumerate(outputs):
                np.save(p, np.arange(3) + i)
            argv += ["--overwrite"] * int(rng.integers(4) > 0)
        olds = [Path(p).read_bytes() if Path(p).exists() else None for p in outputs]
        news = expected(tmp, argv, outputs)
        capsys.readouterr()
        stream = STREAMS[(runs - 1) % len(STREAMS)]  # each in turn
        sig = [None, None, None, signal.SIGINT, signal.SIGTERM, signal.SIGKILL][
            int(rng.integers(6))]
        delay = float(rng.uniform(0, 3))
        code, err, sig = probe_run(argv, stream, sig, delay, rng)
        seen = [state(p, o, w) for p, o, w in zip(outputs, olds, news, strict=True)]
        refused = old_output and "--overwrite" not in argv
        problems = probe_problems(code, err, sig, stream, seen, refused)
        if {p: Path(p).read_bytes() for p in inputs} != inputs:
            problems.append("an input changed")
        temporaries.clean_directory(".")  # what the next run does first
        if leftovers("."):
            problems.append(f"left {leftovers('.')}")
        if problems:
            found.append(f"{problems}: {argv} {stream} {sig and sig.name} at {delay:.2f} s: "
                         f"exit {code}, outputs {seen}; {err}")
    assert not found, "\n".join(found)
    assert runs >= min(PROBE_RUNS, 3)
