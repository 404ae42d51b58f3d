"""Small calls on the CPU: ``distsort.sort`` of 1,000 elements, the first call in a fresh
process (imports included) and in steady state, and the graph construction of a 1 GiB
NumPy array.  A NumPy array in gives a NumPy array out, computed at once
(``distsort.eager``); the graph is timed on the same array wrapped as the call wraps it
(``distsort.api.wrap_plain``), which stays lazy.

    python benchmarks/small_calls.py               # 7 fresh processes, 200 steady calls
    python benchmarks/small_calls.py --quick       # 3 and 20

Targets (issue 34): the first call under 0.5 s, graph construction under 50 ms.  Beside
each row its floor, measured in the same run: a fresh process that imports NumPy and
sorts (``numpy.sort``), and one that imports Dask and sorts the same array with
``dask.array.from_array(x).map_blocks(numpy.sort).compute()`` (Dask's own
``compute`` imports ``distributed`` where it is installed, whatever the scheduler).
The three programs take turns, process by process, so that other load on a shared
machine falls on each alike.  Caches are warm, as for an installed package: a first,
untimed process writes distsort's bytecode (``__pycache__``; the processes run with
``PYTHONDONTWRITEBYTECODE`` unset, where a checkout that never wrote it would compile
distsort's modules in every process, about 60 ms here) and numba's cache.  Every
result is compared element for element with ``numpy.sort``.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import numpy as np

from driver import parser, print_table, save_rows, timings

#: Fresh-process programs: each prints the seconds from its first import to a checked result.
PROGRAMS = {
    "distsort.sort(x)": (
        "import numpy as np, distsort\n"
        "x = np.random.default_rng(0).random(1000)\n"
        "r = distsort.sort(x)\n"),
    "numpy.sort(x)": (
        "import numpy as np\n"
        "x = np.random.default_rng(0).random(1000)\n"
        "r = np.sort(x)\n"),
    "dask.array map_blocks(numpy.sort)": (
        "import numpy as np, dask.array as da\n"
        "x = np.random.default_rng(0).random(1000)\n"
        "r = da.from_array(x).map_blocks(np.sort).compute()\n"),
}
_WRAP = ("import time, sys\nt0 = time.perf_counter()\n{body}"
         "t1 = time.perf_counter()\nimport numpy\n"
         "assert (r == numpy.sort(x)).all()\n"
         "print(t1 - t0, 'numba' in sys.modules, 'distributed' in sys.modules)\n")


def fresh(programs, runs):
    """``{name: (seconds in each of runs new interpreters, what they imported)}`` of the
    ``programs`` (``{name: body}``), which take turns, after one untimed process each."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def once(body):
        out = subprocess.run([sys.executable, "-c", _WRAP.format(body=body)], check=True,
                             capture_output=True, text=True, env=env).stdout.split()
        return float(out[0]), {"numba": out[1] == "True", "distributed": out[2] == "True"}

    for body in programs.values():  # caches written, as an installed package has them
        once(body)
    times = {name: [] for name in programs}
    imported = {}
    for _ in range(runs):
        for name, body in programs.items():
            seconds, imported[name] = once(body)
            times[name].append(seconds)
    return {name: (times[name], imported[name]) for name in programs}


def steady(calls):
    import distsort
    x = np.random.default_rng(1).random(1000)
    distsort.sort(x)
    last = {}
    times = timings(lambda: distsort.sort(x), calls, 0, after=lambda r: last.update(r=r))
    np.testing.assert_array_equal(last["r"], np.sort(x))
    return times


def graph_construction(runs):
    """Seconds of ``distsort.sort(wrap_plain(x))`` (the graph, nothing computed) for a
    1 GiB float64 NumPy array, wrapped as the call on ``x`` itself wraps it."""
    import distsort
    from distsort.api import wrap_plain
    distsort.sort(np.arange(10.0))  # imports done
    x = np.random.default_rng(2).random(2**27)
    last = {}
    times = timings(lambda: distsort.sort(wrap_plain(x)), runs, 0,
                    after=lambda s: last.update(graph=s))
    return times, len(last["graph"].__dask_graph__()), last["graph"].chunks


def main():
    p = parser(__doc__.splitlines()[0])
    args = p.parse_args()
    processes, calls = (3, 20) if args.quick else (7, 200)
    rows = []
    for name, (times, imported) in fresh(PROGRAMS, processes).items():
        rows.append({"case": "first call, fresh process", "call": name,
                     "seconds": statistics.median(times), "times": times, **imported})
    times = steady(calls)
    rows.append({"case": "steady state", "call": "distsort.sort(x)",
                 "seconds": statistics.median(times), "times": times[:20]})
    times, tasks, chunks = graph_construction(max(3, args.runs))
    rows.append({"case": "graph construction, 1 GiB float64",
                 "call": "distsort.sort(wrap_plain(x))",
                 "seconds": statistics.median(times), "times": times, "tasks": tasks,
                 "chunks": json.dumps(chunks)})
    print_table(rows, [("case", "{}"), ("call", "{}"), ("seconds", "{:.4f}")])
    # The machine is shared: its load (1, 5, 15 minutes) says how far the times are noise.
    print(save_rows(rows, "small_calls", "cpu-2cores", args.out, elements=1000,
                    bytecode="cached (written by an untimed first process)",
                    load_average=os.getloadavg()))


if __name__ == "__main__":
    main()
