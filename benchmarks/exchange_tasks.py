"""What the exchange's slice stage costs in tasks, between CPU worker processes (issue 52).

    python benchmarks/exchange_tasks.py               # G = 8 workers, 2^22 float64
    python benchmarks/exchange_tasks.py --quick       # G = 4, 2^20

On a ``distributed.LocalCluster(n_workers=G, threads_per_worker=1, processes=True)``
on loopback, each worker holds one sorted run of ``n / G`` random float64, and the
output is ``C = 4 G`` chunks, chunk ``c`` merged on worker ``c * G // C``.  The splitters
are exact (computed here, untimed): what is timed is the slice stage and the merges,
from the graph's submission until every output chunk is on its worker.

- ``slice per (chunk, run)``: ``C G`` slice tasks and ``C`` merges (the graph of
  ``distsort.graph.exchange``);
- ``slice per (worker, run)``: ``G^2`` tasks, each run's slices for one destination
  worker as one tuple, and the same ``C`` merges (each takes its slice from the tuple);
- ``p2p shuffle``: distributed's P2P shuffle (``dask.dataframe`` ``shuffle(...,
  method="p2p")``, the machinery of ``rechunk(method="p2p")``), of each run's elements by
  their output chunk, then a sort of each output partition;

and two quantities of the scheduler: its time per task (``2000`` independent no-op
tasks dealt to the G workers, wall time over their count) and the time of a trip
through it (a chain of 20 dependent no-op tasks, each on the other worker of two,
wall time per task).  And the whole ``distsort.sort`` with ``strategy="exchange"`` of
the same data held in ``4 G`` and in ``G`` chunks (chunk ``i`` on worker ``i % G``),
with each run's plan (its strategy, runs and slice tasks: the forced exchange falls
back to the network where the scheduler shows the chunks on one worker); run it on
two trees to compare them.
Every output is compared with NumPy (the shuffle's as a multiset: its partitions
are by hash).
"""
from __future__ import annotations

import itertools
import os
import statistics

import numpy as np
from distributed import Client, LocalCluster, wait

from driver import parser, print_table, save_rows, timings


def _run(seed, size):
    return np.sort(np.random.default_rng(seed).standard_normal(size))


def _slice(run, a, b):
    return run[a:b]


def _slices(run, cuts):
    return tuple(run[a:b] for a, b in itertools.pairwise(cuts))


def _merge(*slices):
    # what each variant's merge does alike: a sort of the concatenated slices
    return np.sort(np.concatenate(slices))


def _merge_from(k, *tuples):
    return _merge(*(t[k] for t in tuples))


def _noop(*args):
    return None


def _cuts(runs, chunks):
    """Exact co-ranks: ``cuts[c][r]`` is where output chunk ``c`` starts in run ``r``
    (distinct random floats: no ties to break)."""
    data = np.sort(np.concatenate(runs))
    ends = np.cumsum((0, *chunks))
    out = []
    for e in ends:
        if e == len(data):
            out.append([len(r) for r in runs])
        else:
            out.append([int(np.searchsorted(r, data[e], side="left")) for r in runs])
    return out


def _by_chunk(client, runs, cuts, workers, owner):
    """``C G`` slice tasks, ``C`` merges."""
    g, c = len(runs), len(cuts) - 1
    slices = [[client.submit(_slice, runs[r], cuts[k][r], cuts[k + 1][r], pure=False,
                             workers=[workers[r]]) for r in range(g)] for k in range(c)]
    return [client.submit(_merge, *slices[k], pure=False, workers=[workers[owner[k]]])
            for k in range(c)]


def _by_worker(client, runs, cuts, workers, owner):
    """``G^2`` slice tasks (one per run and destination worker), ``C`` merges."""
    g, c = len(runs), len(cuts) - 1
    mine = [[k for k in range(c) if owner[k] == d] for d in range(g)]
    tuples = {(r, d): client.submit(
        _slices, runs[r], [cuts[k][r] for k in mine[d]] + [cuts[mine[d][-1] + 1][r]],
        pure=False, workers=[workers[r]]) for r in range(g) for d in range(g) if mine[d]}
    return [client.submit(_merge_from, mine[owner[k]].index(k),
                          *(tuples[r, owner[k]] for r in range(g)), pure=False,
                          workers=[workers[owner[k]]]) for k in range(c)]


def _p2p(client, runs, cuts, chunks):
    """distributed's P2P shuffle of the elements (``runs``: futures, each held on its
    worker) by output chunk, then one sort per output partition."""
    import dask
    import dask.dataframe as dd
    import pandas as pd

    def frame(run, r):
        dest = np.zeros(len(run), dtype=np.int64)
        for k in range(1, len(cuts) - 1):
            dest[cuts[k][r]:] += 1
        return pd.DataFrame({"x": run, "dest": dest})

    parts = [dask.delayed(frame)(run, r) for r, run in enumerate(runs)]
    meta = pd.DataFrame({"x": np.array([], np.float64), "dest": np.array([], np.int64)})
    df = dd.from_delayed(parts, meta=meta, verify_meta=False)
    with dask.config.set({"dataframe.shuffle.method": "p2p"}):
        out = df.shuffle("dest", npartitions=len(chunks)).map_partitions(
            lambda p: p.sort_values("x"), meta=df._meta)
    return client.persist(out)


def _scheduler(client, workers):
    """Seconds per independent no-op task; seconds per task of a chain that alternates
    between two workers (a trip through the scheduler and a transfer)."""
    tasks = 2000
    per_task = statistics.median(timings(lambda: wait(client.map(
        _noop, range(tasks), pure=False)), 3, 1)) / tasks

    def chain():
        f = client.submit(_noop, pure=False, workers=[workers[0]])
        for i in range(1, 21):
            f = client.submit(_noop, f, pure=False, workers=[workers[i % 2]])
        wait(f)
    per_hop = statistics.median(timings(chain, 3, 1)) / 21
    return per_task, per_hop


def cases(client, g, log2n, runs_, warmup):
    n = 2**log2n
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    size = n // g
    runs = [client.submit(_run, r, size, pure=False, workers=[workers[r]]) for r in range(g)]
    wait(runs)
    local = client.gather(runs)
    want = np.sort(np.concatenate(local))
    c = 4 * g
    chunks = tuple(int(s) for s in np.diff(np.linspace(0, n, c + 1).astype(np.int64)))
    cuts = _cuts(local, chunks)
    owner = [k * g // c for k in range(c)]
    rows = []

    def check_chunks(futures):
        got = np.concatenate(client.gather(futures))
        np.testing.assert_array_equal(got, want)

    def check_frame(out):
        got = np.sort(out.compute()["x"].to_numpy())
        np.testing.assert_array_equal(got, want)

    variants = {
        "slice per (chunk, run)": (lambda: _by_chunk(client, runs, cuts, workers, owner),
                                   check_chunks, c * g),
        "slice per (worker, run)": (lambda: _by_worker(client, runs, cuts, workers, owner),
                                    check_chunks, g * g),
        "p2p shuffle": (lambda: _p2p(client, runs, cuts, chunks), check_frame, None),
    }
    for what, (make, check, slice_tasks) in variants.items():
        def fn(make=make):
            out = make()
            wait(out)
            return out
        times = timings(fn, runs_, warmup, after=check)
        rows.append({"workers": g, "n": n, "chunks": c, "what": what,
                     "slice_tasks": slice_tasks, "seconds": statistics.median(times),
                     "times": times})
        print(rows[-1], flush=True)
    rows += _distsort_rows(client, g, n, runs_, warmup)
    task_s, hop_s = _scheduler(client, workers)
    rows.append({"workers": g, "what": "scheduler", "task_s": task_s, "trip_s": hop_s})
    print(rows[-1], flush=True)
    return rows


def _slice_tasks(arr):
    """The slice tasks of the graph of ``arr`` (of the tree measured)."""
    return sum(len(layer) for name, layer in arr.__dask_graph__().layers.items()
               if "exch-slice" in name)


def _held_in_turn(client, data, c, g):
    """``data`` in ``c`` chunks, chunk ``i`` held on worker ``i % g``: a Dask array of
    futures, as ``client.persist`` makes."""
    import dask.array as da
    from dask.highlevelgraph import HighLevelGraph
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])[:g]
    ends = np.linspace(0, len(data), c + 1).astype(np.int64)
    name = f"held-{c}"
    futures = {(name, i): client.scatter(data[a:b], workers=[workers[i % g]], hash=False)
               for i, (a, b) in enumerate(itertools.pairwise(ends))}
    x = da.Array(HighLevelGraph.from_collections(name, futures), name,
                 (tuple(int(b - a) for a, b in itertools.pairwise(ends)),), dtype=data.dtype)
    x = client.persist(x)
    wait(x)
    return x


def _distsort_rows(client, g, n, runs_, warmup):
    """``distsort.sort`` (the exchange forced) of data held in ``4 G`` and in ``G``
    chunks, chunk ``i`` on worker ``i % G``."""
    import distsort
    import distsort.api
    rows = []
    for c in (4 * g, g):
        x = _held_in_turn(client, np.random.default_rng(g).standard_normal(n), c, g)
        want = np.sort(x.compute())

        ran = []

        def fn(x=x, ran=ran):
            with distsort.api.planning(strategy="exchange") as plans:
                arr = distsort.sort(x)
            # forced, but the network where the scheduler's view shows one worker holding
            # chunks; the slice tasks of this very graph
            ran.append((plans[0].strategy, plans[0].group, _slice_tasks(arr)))
            out = client.persist(arr)
            wait(out)
            return out

        def check(out, want=want):
            np.testing.assert_array_equal(out.compute(), want)
        times = timings(fn, runs_, warmup, after=check)
        rows.append({"workers": g, "n": n, "chunks": c, "what": "distsort exchange sort",
                     "ran": ran, "slice_tasks": max(t for _, _, t in ran),
                     "seconds": statistics.median(times), "times": times})
        print(rows[-1], flush=True)
    return rows


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--log2n", type=int, default=22)
    args = p.parse_args()
    g, log2n = (4, 20) if args.quick else (args.workers, args.log2n)
    with (LocalCluster(n_workers=g, threads_per_worker=1, processes=True, host="127.0.0.1",
                       dashboard_address=None) as cluster,
          Client(cluster) as client):
        rows = cases(client, g, log2n, args.runs, args.warmup)
    print_table(rows, [("what", "{}"), ("chunks", "{}"), ("slice_tasks", "{}"),
                       ("seconds", "{:.3f}"), ("task_s", "{:.6f}"), ("trip_s", "{:.6f}")])
    load = os.getloadavg()
    path = save_rows(rows, "exchange_tasks", f"cpu-{os.cpu_count()}cores", args.out,
                     log2n=log2n, threads_per_worker=1, load_average=load)
    print(path)


if __name__ == "__main__":
    main()
