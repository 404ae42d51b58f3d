"""One exchange against Batcher's network between CPU worker processes (issue 52).

    python benchmarks/exchange.py                    # G = 2, 4, 8; 2^22 float64
    python benchmarks/exchange.py --quick            # G = 2, 4; 2^18
    python benchmarks/exchange.py --workers 4 --log2n 20

For each G: a ``distributed.LocalCluster(n_workers=G, threads_per_worker=1,
processes=True)`` on loopback holds a persisted array of ``2^log2n`` float64 in ``4 G``
chunks.  ``sort`` and ``argsort`` run with ``distsort.strategy`` forced to
``"exchange"`` and to ``"network"``, and the plan's own choice is recorded.  Per
case: the bytes the workers sent each other (``distsort.cluster.bytes_sent_by_kind``,
the result's gather to the client not counted) divided by the keys' bytes, one
exchange's ``1 - 1/G`` beside it, and the wall times (warm-up first, median
reported; each run sorts a fresh copy of the input, made untimed where its chunks are,
so that no run finds a previous one's output; the clock stops once the output chunks
are on the workers, before their gather).  Every result is compared element for element with NumPy.
"""
from __future__ import annotations

import itertools
import statistics
from collections import Counter

import dask.array as da
import numpy as np
from distributed import Client, LocalCluster, futures_of, wait

import distsort
import distsort.api
from distsort.cluster import bytes_sent_by_kind, diff_sent
from driver import parser, print_table, save_rows, timings


def _sent(client, fn):
    """``(output, bytes sent between the workers)`` of ``fn()``: its output chunks made
    on the workers (persisted), and the bytes they sent each other meanwhile."""
    before = bytes_sent_by_kind(client)
    out = client.persist(fn())
    wait(out)
    return out, diff_sent(before, bytes_sent_by_kind(client))


def cases(client, g, log2n, runs, warmup):
    n = 2**log2n
    x = client.persist(da.random.default_rng(g).standard_normal(n, chunks=n // (4 * g)))
    wait(x)
    data = x.compute()
    held = {k: next(iter(w)) for k, w in client.who_has(x).items()}
    copies = itertools.count()
    want = {"sort": np.sort(data), "argsort": np.argsort(data, kind="stable")}
    with distsort.api.planning() as plans:
        distsort.sort(x)
    rows = []
    for what in ("sort", "argsort"):
        for strategy in ("exchange", "network"):
            ran = []

            fresh = {}

            def copy(fresh=fresh):
                """A fresh copy of the input, each chunk where its source is (untimed): a
                sort of the same array twice would find its output still held."""
                fresh["x"] = client.persist(x.map_blocks(np.copy, name=f"copy-{next(copies)}"))
                wait(fresh["x"])

            def run(what=what, strategy=strategy, ran=ran, fresh=fresh):
                with distsort.api.planning(strategy=strategy) as made:
                    arr = getattr(distsort, what)(fresh.pop("x"))
                ran.append(made[0].strategy)  # forced, but one run alone is the network's
                return arr

            sent = []

            kinds = []

            def check(pair, what=what, sent=sent, kinds=kinds):
                out, by_kind = pair  # each chunk to the client (no worker gathers them)
                got = np.concatenate(client.gather(futures_of(out)))
                np.testing.assert_array_equal(got, want[what])
                sent.append(sum(by_kind.values()) / data.nbytes)
                kinds.append({k: v / data.nbytes for k, v in by_kind.items()})

            with client.as_current():
                times = timings(lambda run=run: _sent(client, run), runs, warmup, after=check,
                                before=copy)
            row = {"workers": g, "n": n, "chunks": 4 * g, "what": what, "strategy": strategy,
                   "auto": plans[0].strategy, "ran": sorted(set(ran)),
                   "sent_per_key_byte": max(sent),
                   "sent_runs": sent, "sent_by_kind": kinds[-1], "one_exchange": 1 - 1 / g,
                   "seconds": statistics.median(times), "times": times,
                   "chunks_per_worker": sorted(Counter(held.values()).values())}
            print(f"G={g} {what:8s} {strategy:8s} sent {max(sent):.3f} x keys "
                  f"(1 - 1/G = {1 - 1 / g:.3f}), {row['seconds']:.2f} s", flush=True)
            rows.append(row)
    return rows


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, nargs="+", default=[2, 4, 8])
    p.add_argument("--log2n", type=int, default=22)
    args = p.parse_args()
    workers, log2n = ([2, 4], 18) if args.quick else (args.workers, args.log2n)
    rows = []
    for g in workers:
        with (LocalCluster(n_workers=g, threads_per_worker=1, processes=True,
                           host="127.0.0.1", dashboard_address=None) as cluster,
              Client(cluster) as client):
            rows += cases(client, g, log2n, args.runs, args.warmup)
    print_table(rows, [("workers", "{}"), ("what", "{}"), ("strategy", "{}"), ("auto", "{}"),
                       ("sent_per_key_byte", "{:.3f}"), ("one_exchange", "{:.3f}"),
                       ("seconds", "{:.2f}")])
    path = save_rows(rows, "exchange", "cpu-2cores", args.out, log2n=log2n,
                     threads_per_worker=1)
    print(path)


if __name__ == "__main__":
    main()
