"""One driver for every benchmark scenario: arguments, cluster, timed runs, table, JSON rows.

A scenario script builds its cases and hands each to :func:`timings`, which times the
runs (warm-up first, the median reported, every worker synchronized before the
clock stops), prints a table and saves the rows under ``benchmarks/results/``.

The scripts' repeated timings go through :func:`timings` (or :func:`median_time`,
:func:`cuda_span`, :func:`timed_command`), with the clock that suits each: wall time,
wall and process time, or CUDA events.  Functions that a worker runs (``client.run``)
stay self-contained: they cannot import this module there.

The scripts run from the repository root as ``python benchmarks/NAME.py``, with
distsort importable: installed (``pip install -e .`` in a clone) or on ``PYTHONPATH``
(``PYTHONPATH=. python benchmarks/NAME.py``; the suite, ``distsort bench`` and the A/B
scripts set it to the tree they measure).  Their sibling modules (this one,
``distributed_sort``, ...) are found because Python puts a script's directory first on
its path; no script changes ``sys.path``.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from dask.utils import key_split

#: ``distsort bench`` names the directory (the working directory or its --out).
RESULTS = Path(os.environ.get("DISTSORT_RESULTS") or Path(__file__).resolve().parent / "results")


def parser(description):
    """Arguments every scenario takes."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--runs", type=int, default=3, help="timed runs per case (median reported)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs first")
    p.add_argument("--out", help="JSON file for the rows (default: benchmarks/results/...)")
    p.add_argument("--quick", action="store_true", help="smallest sizes only (smoke test)")
    return p


def _nothing():
    return None


def wall_clock():
    """Start a wall clock (``time.perf_counter``); the function returned gives the
    seconds since.  Every timing of the driver takes a clock of this shape."""
    start = time.perf_counter()
    return lambda: time.perf_counter() - start


def wall_and_process_clock():
    """Start a wall clock and a process-time clock: ``(wall seconds, CPU seconds of
    every thread of this process)`` since."""
    wall, cpu = time.perf_counter(), time.process_time()
    return lambda: (time.perf_counter() - wall, time.process_time() - cpu)


def cuda_clock():
    """Start a clock of CUDA events on the current stream: the function returned records
    the end, waits for it, and gives the milliseconds of GPU time between."""
    import cupy
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()

    def elapsed():
        stop.record()
        stop.synchronize()
        return cupy.cuda.get_elapsed_time(start, stop)
    return elapsed


def cuda_span(fn):
    """Run ``fn()`` between two CUDA events without waiting for them: the function
    returned gives its milliseconds once the device has got there (after a
    ``synchronize``), so that consecutive spans time launches that overlap as they run."""
    import cupy
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    fn()
    stop.record()
    return lambda: cupy.cuda.get_elapsed_time(start, stop)


def timings(fn, runs, warmup=1, *, sync=_nothing, before=_nothing, after=None,  # noqa: PLR0913
            clock=wall_clock):
    """The times of ``fn()`` by ``clock`` (:func:`wall_clock`, :func:`cuda_clock`, ...)
    over ``runs`` runs, after ``warmup`` runs done the same way whose times are dropped.
    ``before()`` runs untimed before each run, ``sync()`` before the clock stops;
    ``after(result)``, untimed, once it stopped (a check, or a place to keep the result).
    Without ``after`` the result is dropped as soon as ``fn`` returns."""
    times = []
    for i in range(warmup + runs):
        before()
        elapsed = clock()
        result = fn()
        if after is None:
            result = None
        sync()
        took = elapsed()
        if i >= warmup:
            times.append(took)
        if after is not None:
            after(result)
            result = None
    return times


def median_time(fn, runs, warmup, sync=_nothing, before=_nothing):
    """Median wall time of ``fn()`` over ``runs`` after ``warmup`` runs, and every run's;
    ``sync`` before the clock stops, ``before`` (untimed) before it starts."""
    times = timings(fn, runs, warmup, sync=sync, before=before)
    return statistics.median(times), times


def timed_command(cmd, env=None, *, peak=False):
    """Wall seconds of the command ``cmd`` (a list) and its standard output, and with
    ``peak`` its peak resident memory in bytes (polled every 0.2 s, through psutil).
    A failed command prints its output and exits."""
    if peak:
        import psutil
    start = wall_clock()
    if peak:
        proc = psutil.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
        most = 0
        while proc.poll() is None:
            try:
                most = max(most, proc.memory_info().rss)
            except psutil.Error:
                break
            time.sleep(0.2)
        stdout, stderr = proc.communicate()
        returncode = proc.returncode
    else:
        r = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True)
        stdout, stderr, returncode = r.stdout, r.stderr, r.returncode
    wall = start()
    if returncode:
        sys.stderr.write(stdout + stderr)
        raise SystemExit(f"{' '.join(map(str, cmd))}: exit status {returncode}")
    return (wall, stdout, most) if peak else (wall, stdout)


def stage_seconds(profile):
    """Task seconds per stage from ``dask.diagnostics.Profiler`` results.

    Stages are the scheduler's task prefixes (``distsort-low``, ...: Dask's
    ``key_split``), which fold the rounds together so the table stays short.
    """
    totals = defaultdict(float)
    for r in profile:
        totals[key_split(r.key)] += r.end_time - r.start_time
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def print_table(rows, columns):
    """A plain table of ``columns`` (name, format) for ``rows`` (dicts)."""
    head = [name for name, _ in columns]
    body = [[fmt.format(row.get(name, "")) if name in row else "" for name, fmt in columns]
            for row in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(head)]
    line = "  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))
    print(line)
    print("-" * len(line))
    for b in body:
        print("  ".join(c.rjust(w) for c, w in zip(b, widths, strict=True)))


def save_rows(rows, scenario, device, out=None, **meta):
    """Write the rows and the run's context as JSON; returns the path."""
    date = _dt.date.today().isoformat()
    path = Path(out) if out else RESULTS / f"{scenario}_{device.replace(' ', '-')}_{date}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"scenario": scenario, "device": device, "date": date,
           "host": platform.node(), "python": platform.python_version(), **meta,
           "rows": rows}
    path.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return path


def cluster_options(p):
    """Arguments of scenarios that run on a cluster: connect to one instead of starting it."""
    p.add_argument("--scheduler-address", help="connect to this Dask scheduler")
    p.add_argument("--scheduler-file", help="connect through this scheduler file")
    return p


def connect(args):
    """A ``distributed.Client`` when asked for one, else None (local schedulers)."""
    if not (args.scheduler_address or args.scheduler_file):
        return None
    from distributed import Client
    return Client(args.scheduler_address, scheduler_file=args.scheduler_file)
