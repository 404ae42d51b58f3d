"""One driver for every benchmark scenario: arguments, cluster, timed runs, table, JSON rows.

A scenario script builds its cases and calls ``run_case``; the driver times the
runs (warm-up first, the median reported, every worker synchronized before the
clock stops), prints a table and saves the rows under ``benchmarks/results/``.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
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


def median_time(fn, runs, warmup, sync=lambda: None, before=lambda: None):
    """Median wall time of ``fn()`` over ``runs`` after ``warmup`` runs; ``sync`` before
    the clock stops, ``before`` (untimed) before it starts."""
    for _ in range(warmup):
        before()
        fn()
        sync()
    times = []
    for _ in range(runs):
        before()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


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
