"""The command interrupted at random points: SIGINT, SIGTERM and SIGKILL, over many
seeds and small inputs, a plain sort or a keys-and-values pair, over no output or
an old one (--overwrite).

After each interrupt: the inputs are unchanged; OUTPUT is absent, old or new, never
partial (and its values output is of the same pair); the exit status and message
say what happened (0: published; 130 "no output written": absent or old; 130
"published": new; killed: any of absent, old, new); and a re-run (in this process)
succeeds, removes what the interrupted run left, and gives the right result.

``DISTSORT_KILLS`` (default 15: each interrupt starts Python and distsort, a second or
two on 2 cores; set more for a longer stress run) sets the number of interrupts; the
counts go to ``COUNTS`` (and with ``DISTSORT_COUNTS`` to a file, see conftest.py).
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from distsort import cli

ROOT = Path(__file__).resolve().parents[1]
KILLS = int(os.environ.get("DISTSORT_KILLS", "15"))
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
#: What Python prints when SIGINT comes while it starts, before it runs any code of
#: the command (it exits 1).
STARTUP = "Fatal Python error: init_import_site"


def starting(err):
    """A SIGINT that came before distsort's first line (``distsort.cli.launch.run``): while
    Python started, or imported the module that holds that line; Python's traceback."""
    return STARTUP in err or (err.rstrip().endswith("KeyboardInterrupt")
                              and "in run\n" not in err)
COUNTS = {"interrupts": 0, "exit_ok": 0, "exit_interrupted": 0, "killed": 0,
          "before_first_line": 0, "finished_first": 0,
          "output_absent": 0, "output_old": 0, "output_new": 0, "output_partial": 0,
          "partial_outputs": 0, "mixed_pairs": 0, "inputs_changed": 0,
          "wrong_exit_codes": 0, "tracebacks": 0, "failed_reruns": 0}


def state(path, old, new):
    """``"absent"``, ``"old"``, ``"new"`` or ``"partial"`` for the file at ``path``."""
    if not Path(path).exists():
        return "absent"
    data = Path(path).read_bytes()
    return "old" if data == old else "new" if data == new else "partial"


def leftovers(directory):
    return sorted(p.name for p in Path(directory).iterdir() if ".distsort-" in p.name)


def expected(tmp_path, argv, outputs):
    """The bytes of the outputs of an uninterrupted run of ``argv``."""
    ref = tmp_path / "ref"
    ref.mkdir(exist_ok=True)
    moved = [str(ref / a) if a in outputs else a for a in argv if a != "--overwrite"]
    assert cli.main([*moved, "--overwrite"]) == 0
    return [(ref / p).read_bytes() for p in outputs]


def judge(code, err, seen, sig):
    """The problems with what an interrupted run left (none: an empty list)."""
    problems = []
    if "partial" in seen:
        problems.append("partial_outputs")
    if seen[0] != "absent" and len(set(seen)) != 1:  # OUTPUT present: its pair is whole
        problems.append("mixed_pairs")
    if code == 0:
        right = seen[0] == "new"
    elif code == cli.INTERRUPTED:
        right = (seen[0] == "new") == ("interrupted after the output was published" in err)
    elif code == -signal.SIGKILL:
        right = sig == signal.SIGKILL
    elif starting(err):  # before distsort's first line: nothing written
        right = code in (1, -sig) and seen[0] != "new"
    else:  # killed by SIGINT/SIGTERM while the interpreter started: nothing written
        right = code == -sig and seen[0] != "new"
    if not right:
        problems.append("wrong_exit_codes")
    if "Traceback" in err and not starting(err):
        problems.append("tracebacks")
    return problems


def trial(tmp_path, rng, duration):
    """One interrupted run, its checks and a re-run: ``(exit status, OUTPUT's state,
    problems, what happened)``; ``(None, seconds)`` where the run ended before the
    signal."""
    n = int(rng.integers(1, 60_000))
    keys = rng.standard_normal(n).astype(rng.choice(["f8", "f4", "i4"]))
    np.save(tmp_path / "in.npy", keys)
    pair = bool(rng.integers(2))
    argv = ["sort", "in.npy", "o.npy", "--no-progress", "--chunk-size", "4000",
            *(["--verify"] if rng.integers(2) else [])]
    if pair:
        np.save(tmp_path / "v.npy", rng.integers(0, 50, n))
        argv += ["--values", "v.npy", "--values-output", "ov.npy"]
    outputs = ["o.npy", "ov.npy"][:1 + pair]
    for p in outputs:
        Path(tmp_path / p).unlink(missing_ok=True)
    if rng.integers(2):  # an old output to replace
        argv.append("--overwrite")
        for i, p in enumerate(outputs):
            np.save(tmp_path / p, np.arange(3) + i)
    olds = [(tmp_path / p).read_bytes() if (tmp_path / p).exists() else None for p in outputs]
    inputs = {p: (tmp_path / p).read_bytes() for p in ("in.npy", "v.npy")[:1 + pair]}
    news = expected(tmp_path, argv, outputs)

    sig = SIGNALS[int(rng.integers(len(SIGNALS)))]
    # A third of the interrupts anywhere in the run, the others near its end (the
    # sort, the publication, the summary).
    delay = float(rng.uniform(0, duration) if rng.integers(3) == 0 else
                  rng.uniform(0.8 * duration, 1.05 * duration))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", "from distsort.cli.launch import run; run()",
                             *argv], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    t0 = time.perf_counter()
    time.sleep(delay)
    if proc.poll() is not None:  # done before the signal: no interrupt, tried again
        proc.communicate()
        return None, time.perf_counter() - t0
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    seen = [state(tmp_path / p, o, w) for p, o, w in zip(outputs, olds, news, strict=True)]
    problems = judge(proc.returncode, err, seen, sig)
    if {p: (tmp_path / p).read_bytes() for p in inputs} != inputs:
        problems.append("inputs_changed")
    rerun = [a for a in argv if a != "--overwrite"] + ["--overwrite"]
    if (cli.main(rerun) != 0 or [(tmp_path / p).read_bytes() for p in outputs] != news
            or leftovers(tmp_path)):
        problems.append("failed_reruns")
    detail = f"{sig.name} at {delay:.2f} s: exit {proc.returncode}, outputs {seen}; {err}"
    return proc.returncode, seen[0], problems, detail


def test_interrupts_at_random_points(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    seed = int(os.environ.get("DISTSORT_KILL_SEED", "0")) or None
    rng = np.random.default_rng(seed)
    for name in ("in.npy", "v.npy"):
        np.save(tmp_path / name, rng.integers(0, 50, 60_000))
    t0 = time.perf_counter()  # an uninterrupted run's length: the interrupts fall within it
    subprocess.run([sys.executable, "-c", "from distsort.cli.launch import run; run()", "sort",
                    "in.npy", "o.npy", "--no-progress", "--overwrite", "--verify",
                    "--values", "v.npy", "--values-output", "ov.npy"], cwd=tmp_path,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                   check=True)
    duration = time.perf_counter() - t0
    found, runs = [], [duration]
    while COUNTS["interrupts"] < KILLS and COUNTS["finished_first"] < 3 * KILLS:
        result = trial(tmp_path, rng, float(np.median(runs[-9:])))
        if result[0] is None:  # the machine is quicker now: a shorter window
            COUNTS["finished_first"] += 1
            runs.append(result[1])
            continue
        code, output, problems, detail = result
        capsys.readouterr()  # the re-runs' summaries
        COUNTS["interrupts"] += 1
        COUNTS[{0: "exit_ok", cli.INTERRUPTED: "exit_interrupted"}.get(code, "killed")] += 1
        COUNTS["before_first_line"] += starting(detail)
        COUNTS[f"output_{output}"] += 1
        for p in problems:
            COUNTS[p] += 1
        found += [f"{problems}: {detail}"] if problems else []
    with capsys.disabled():
        print("\n" + "\n".join([*found, str(COUNTS)]))
    assert not found and COUNTS["interrupts"] == KILLS, COUNTS
