"""Many chunks: 1e6 float64 in 10 .. 100,000 chunks, on the threaded scheduler and on a
two-process ``LocalCluster``, with the task count and the time against 10 chunks.

    python benchmarks/many_chunks.py                 # both schedulers, every count
    python benchmarks/many_chunks.py --quick         # 10 and 1,000 chunks only
    python benchmarks/many_chunks.py --schedulers threads --counts 10 10000

Targets (issue 37): 10,000 chunks within 2x of 10 chunks, and 100,000 chunks finish;
Dask's large-graph warnings never reached.  The input is persisted first: the clock
times the sort (``distsort.sort(x)`` and its compute), not the making of the input;
``build_seconds`` is the graph construction alone.  Beside each row, the way without
distsort where the data fit one chunk, ``x.rechunk(-1).map_blocks(numpy.sort)``: what
Dask itself costs with that many input chunks.  Up to ``--lazy-up-to`` chunks, the
same input is also sorted lazily, made in the same graph (``lazy_seconds``), beside
the making of it alone (``lazy_input_seconds``, ``x.compute()``): the input's own cost
with that many chunks.  Every result is compared element for element with
``numpy.sort`` of the same data.
"""
from __future__ import annotations

import os
import warnings

import dask
import dask.array as da
import numpy as np

import distsort
from driver import median_time, parser, print_table, save_rows

N = 10**6
COUNTS = (10, 100, 1_000, 10_000, 100_000)


def distsort_tasks(graph):
    """Tasks of the sort itself (the input's excluded)."""
    return sum(1 for k in graph if str(k[0] if isinstance(k, tuple) else k)
               .startswith("distsort-"))


def case(scheduler, count, runs, warmup, client=None, lazy=False):
    made = da.random.default_rng(count).random(N, chunks=-(-N // count))
    x = client.persist(made) if client is not None else made.persist(scheduler="threads")
    if client is not None:
        import distributed
        distributed.wait(x)
    data = x.compute()

    def run(make, a=x):
        s = make(a)
        return client.compute(s).result() if client is not None else s.compute(
            scheduler="threads")

    def sort():
        return run(distsort.sort)

    def naive():  # the way without distsort, where one chunk fits: a floor for Dask's part
        return run(lambda a: a.rechunk(-1).map_blocks(np.sort))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = distsort.sort(x)
        graph = dict(s.__dask_graph__())
        got = sort()
        seconds, times = median_time(sort, runs, warmup)
        build_seconds, _ = median_time(lambda: distsort.sort(x), runs, warmup)
        naive_seconds, _ = median_time(naive, runs, warmup)
        row = {}
        if lazy:  # the input made in the sort's graph, and alone
            np.testing.assert_array_equal(run(distsort.sort, made), np.sort(data))
            row["lazy_seconds"], _ = median_time(lambda: run(distsort.sort, made), runs, 0)
            row["lazy_input_seconds"], _ = median_time(lambda: run(lambda a: a, made), runs, 0)
    np.testing.assert_array_equal(got, np.sort(data))
    large = [str(w.message) for w in caught if "large" in str(w.message).lower()]
    print(f"{scheduler} {count} chunks: {seconds:.3f} s (graph {build_seconds:.3f} s; "
          f"rechunk + sort {naive_seconds:.3f} s), {len(graph)} tasks", flush=True)
    return {"scheduler": scheduler, "chunks": count, "tasks": len(graph),
            "sort_tasks": distsort_tasks(graph), "out_chunks": len(s.chunks[0]),
            "seconds": seconds, "times": times, "build_seconds": build_seconds,
            "naive_seconds": naive_seconds, "vs_naive": seconds / naive_seconds, **row,
            "large_graph_warnings": large, "checked": True, "load_1min": os.getloadavg()[0]}


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--schedulers", nargs="+", default=["threads", "local-cluster"])
    p.add_argument("--counts", nargs="+", type=int, help="chunk counts (default: all)")
    p.add_argument("--lazy-up-to", type=int, default=10_000,
                   help="also sort the input unpersisted up to this many chunks")
    args = p.parse_args()
    counts = args.counts or ((10, 1_000) if args.quick else COUNTS)
    rows = []
    for scheduler in args.schedulers:
        if scheduler == "threads":
            with dask.config.set(scheduler="threads"):
                rows += [case(scheduler, c, args.runs, args.warmup, lazy=c <= args.lazy_up_to)
                         for c in counts]
        else:
            import distributed
            with (distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None) as cluster,
                  distributed.Client(cluster) as client):
                rows += [case(scheduler, c, args.runs, args.warmup, client,
                              lazy=c <= args.lazy_up_to) for c in counts]
    for row in rows:
        base = next((r for r in rows if r["scheduler"] == row["scheduler"]
                     and r["chunks"] == 10), None)
        if base is not None:
            row["vs_10_chunks"] = row["seconds"] / base["seconds"]
    print_table(rows, [("scheduler", "{}"), ("chunks", "{}"), ("tasks", "{}"),
                       ("sort_tasks", "{}"), ("out_chunks", "{}"), ("seconds", "{:.3f}"),
                       ("build_seconds", "{:.3f}"), ("vs_10_chunks", "{:.2f}"),
                       ("naive_seconds", "{:.3f}"), ("vs_naive", "{:.2f}"),
                       ("lazy_seconds", "{:.3f}"), ("lazy_input_seconds", "{:.3f}")])
    # The machine is shared: its load (1, 5, 15 minutes) says how far the times are noise.
    path = save_rows(rows, "many_chunks", "cpu-2cores", args.out, n=N, dtype="float64",
                     input="persisted before the clock starts (lazy_*: made in the graph)",
                     load_average=os.getloadavg())
    print(path)


if __name__ == "__main__":
    main()
