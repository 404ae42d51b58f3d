"""Limits that fail fast: ``distsort sort --memory-limit`` below what a worker needs is
refused before any worker starts (exit 2), and workers that keep dying end the command
(exit 3) instead of being restarted for ever."""
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from distsort.cli import limits

psutil = pytest.importorskip("psutil")
ROOT = Path(__file__).resolve().parents[1]


def command(*argv, stdout=subprocess.PIPE, **config):
    """``distsort argv...`` in a fresh process (its own local cluster), as a user runs it;
    ``config``: ``distsort.*`` Dask config values for it and its workers."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.update({f"DASK_DISTSORT__{k.upper()}": str(v) for k, v in config.items()})
    return subprocess.Popen([sys.executable, "-m", "distsort.cli", *map(str, argv)],
                            stdout=stdout, stderr=subprocess.PIPE, text=True, env=env)


@pytest.fixture(scope="module")
def input_38mib(tmp_path_factory):
    """5,000,000 random float64: 38 MiB."""
    path = tmp_path_factory.mktemp("limits") / "x.npy"
    np.save(path, np.random.default_rng().standard_normal(5_000_000))
    return path


def _named_limit(err):
    """The smallest limit the message names, as the option's text."""
    m = re.search(r"needs at least --memory-limit (\d+[KMG]iB)", err)
    assert m, err
    return m.group(1)


@pytest.mark.parametrize("limit", ["10KB", "100MB"])
def test_memory_limit_too_small_fails_fast(tmp_path, input_38mib, limit):
    t0 = time.perf_counter()
    proc = command("sort", input_38mib, tmp_path / "o.npy", "--memory-limit", limit,
                   "--no-progress")
    out, err = proc.communicate(timeout=60)
    seconds = time.perf_counter() - t0
    assert proc.returncode == 2, err
    assert seconds < 30, seconds
    assert f"--memory-limit {limit} is too small" in err
    assert _named_limit(err)
    assert not (tmp_path / "o.npy").exists()


@pytest.mark.slow
def test_the_named_limit_works(tmp_path, input_38mib):
    """The smallest limit the refusal names sorts the input, with no worker lost."""
    proc = command("sort", input_38mib, tmp_path / "o.npy", "--memory-limit", "100MB")
    _, err = proc.communicate(timeout=60)
    limit = _named_limit(err)
    proc = command("sort", input_38mib, tmp_path / "o.npy", "--memory-limit", limit,
                   "--workers", 2, "--no-progress")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "Restarting" not in err and "exceeded" not in err
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), np.sort(np.load(input_38mib)))


def test_a_chunk_that_fits_is_named():
    """Where some chunk fits the limit given, the refusal names it, and the chunk size
    named passes the check under that limit; a limit at the smallest one named
    passes too."""
    from types import SimpleNamespace
    job = SimpleNamespace(src=SimpleNamespace(n=5_000_000, dtype=np.dtype(np.float64),
                                              nbytes=40_000_000),
                          vals=None, mode="sort", descending=False, per_element=lambda: 8)

    def args(limit, chunk=None):
        return SimpleNamespace(memory_limit=limit, workers=2, chunk_size=chunk,
                               scheduler_address=None, scheduler_file=None, device="cpu",
                               device_memory_limit=None, spill_dir=None)
    with pytest.raises(limits.CLIError) as e:
        limits.check_memory_limit(args("300MB"), job)
    elements = int(re.search(r"--chunk-size (\d+) \(elements", str(e.value)).group(1))
    limits.check_memory_limit(args("300MB", ("elements", elements)), job)
    limits.check_memory_limit(args(_named_limit(str(e.value))), job)


#: Seconds a worker process lives before it is killed: long enough to have started (the
#: command counts a worker that dies before it joins, too), short enough that the sort
#: cannot finish between the kills on a fast machine.
JOINED = 0.5


def _kill_workers(proc, log, stop, killed):
    """Once the sort runs (its label in ``log``, the command's stdout), kill ``proc``'s
    worker processes (its nannies' spawned children) each time they are back in the
    cluster.  Killed while the cluster starts, they would fail its start instead."""
    while "sorting" not in log.read_text() and not stop.wait(0.1):
        pass
    parent = psutil.Process(proc.pid)
    while not stop.is_set():
        try:
            children = parent.children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for child in children:
            try:
                # Up a second: it joined the cluster (and took tasks) before it dies.
                if ("spawn_main" in " ".join(child.cmdline())
                        and time.time() - child.create_time() > JOINED):
                    child.kill()
                    killed.append(child.pid)
            except psutil.Error:
                pass
        stop.wait(0.2)


def test_workers_that_keep_dying_end_the_command(tmp_path, input_38mib):
    log = tmp_path / "stdout"
    with open(log, "w") as stdout:
        # The network on 16 chunks (not one group sort of the whole input), so that the
        # sort runs long enough for its workers to be killed again and again.
        proc = command("sort", input_38mib, tmp_path / "o.npy", "--workers", 2,
                       "--memory-limit", "1GiB", "--chunk-size", "2500000B", "--progress",
                       stdout=stdout, strategy="network", group=1)
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_workers, args=(proc, log, stop, killed), daemon=True)
    killer.start()
    t0 = time.perf_counter()
    try:
        _, err = proc.communicate(timeout=240)
    finally:
        stop.set()
        killer.join()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, err
    assert "the sort was stopped after" in err and "worker deaths" in err, err
    assert len(set(killed)) > limits.deaths_allowed()
    assert not (tmp_path / "o.npy").exists()
    print(f"exit 3 after {len(set(killed))} kills, {time.perf_counter() - t0:.1f} s")


@pytest.mark.parametrize("wait", ["result", "progress bar"])
def test_the_watch_outlives_polls_that_fail(wait, capsys):
    """A poll of the scheduler's events that fails does not end the watch (the
    workers that die between tasks would then be restarted for ever): the deaths are
    counted at the next polls, and the sort waiting on the client's futures (in
    ``result()``, or in the command's progress bar) ends with exit 3 as they are
    cancelled; the client stays open for the caller to close."""
    import dask
    from distributed import Client, LocalCluster

    from distsort.cli.progress import compute
    with (LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster,
          Client(cluster) as client):
        polls = []

        def get_events(topic):
            polls.append(topic)
            if len(polls) <= 3:
                raise OSError("the scheduler did not answer")
            now = time.time()  # a removal more at each poll
            return [(now, {"action": "remove-worker", "worker": f"w{i}", "expected": False})
                    for i in range(len(polls))]

        client.get_events = get_events
        # No worker: each waits until it is cancelled.
        future = client.submit(sum, [1, 2])
        raised = []

        def sort():
            try:
                with limits.end_on_worker_deaths(client, allowed=2, poll=0.01):
                    if wait == "result":
                        future.result(timeout=20)
                    else:
                        compute(client, [dask.delayed(sum)([1, 2])], True, "sorting ...")
            except limits.CLIError as e:
                raised.append(e)

        # In a thread: a wait that never ends fails the test instead of hanging it.
        waiting = threading.Thread(target=sort, daemon=True)
        waiting.start()
        waiting.join(timeout=10)
        assert not waiting.is_alive() and raised
        assert raised[0].code == limits.RUNTIME_FAILURE and "worker deaths" in str(raised[0])
        assert len(polls) > 3 and future.cancelled()
        assert client.status == "running"
        if wait == "progress bar":
            assert "sorting ..." in capsys.readouterr().out
