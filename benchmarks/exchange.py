"""One exchange against Batcher's network between CPU worker processes, or between GPU
workers sharing one GPU (issue 52).

    python benchmarks/exchange.py                    # G = 2, 4, 8; 2^22 float64
    python benchmarks/exchange.py --quick            # G = 2, 4; 2^18
    python benchmarks/exchange.py --workers 4 --log2n 20
    python benchmarks/exchange.py --gpu --workers 2 4 --log2n 28 --out DIR

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

``--gpu``: G plain workers share GPU 0, each with an RMM pool
(``distsort.cluster.shared_gpu``), and hold ``2^log2n`` random float32 as CuPy chunks in
8 regular, 5 ragged and 16 chunks (``--chunkings``), chunk ``i`` on worker ``i % G``.
``sort``, ``argsort``, ``sort_by_key`` (int32 values: a permutation of the positions)
and ``lexsort`` (a small int8 key below the float32 one) run once each under both
strategies, after an untimed warm-up of every case at 2^20 (the kernels compiled on
every worker).  Each output is checked against NumPy on the host: the keys equal
``numpy.sort``'s, and the permutations are the one ``numpy.argsort(kind="stable")``
(and ``numpy.lexsort``) give, checked as such (a permutation that sorts the keys, ties
in input order) rather than by sorting again.  Rows: the bytes sent per byte of keys,
its bound where the issue sets one (``(1 - 1/G) + 0.05``; argsort: its keys and int64
positions, three times that), and the seconds until the outputs are on the workers.
On one shared GPU the seconds say little; the bytes are exact.  2^28 on 2 and 4
workers takes about four minutes on one H200 host; ``--functions`` and ``--chunkings``
run fewer cases.
"""
from __future__ import annotations

import datetime
import itertools
import statistics
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dask.array as da
import numpy as np
from distributed import Client, LocalCluster, futures_of, wait

import distsort
import distsort.api
from distsort.cluster import bytes_sent_by_kind, diff_sent
from driver import parser, print_table, save_rows, timings, wall_clock as driver_clock


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


# ---------------------------------------------------------------- GPU workers sharing GPU 0
GPU_FUNCTIONS = ("sort", "argsort", "sort_by_key", "lexsort")
GPU_CHUNKINGS = ("8", "ragged-5", "16")
#: Bytes per key byte that cross once at most, by function, where the issue bounds them:
#: the keys, or an argsort's float32 keys with their int64 positions.
PAYLOAD = {"sort": 1, "argsort": 3}


def _gpu_chunks(name, n, rng):
    if name.startswith("ragged-"):
        cuts = np.sort(rng.integers(0, n + 1, size=int(name.split("-")[1]) - 1))
        return tuple(int(c) for c in np.diff(np.concatenate([[0], cuts, [n]])))
    return tuple(int(c) for c in da.core.normalize_chunks(-(-n // int(name)), (n,))[0])


def _placed(client, g, arrays, chunks):
    """Persisted Dask arrays of CuPy chunks of each of ``arrays``, chunk ``i`` made on
    worker ``i % g`` from its slice scattered there."""
    import cupy
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])[:g]
    ends = np.cumsum((0, *chunks))
    out = []
    for x in arrays:
        parts = []
        for i, (a, b) in enumerate(itertools.pairwise(ends)):
            host = client.scatter(x[a:b], workers=[workers[i % g]], hash=False)
            f = client.submit(cupy.asarray, host, workers=[workers[i % g]], pure=False)
            parts.append(da.from_delayed(f, (b - a,), dtype=x.dtype,
                                         meta=cupy.empty(0, x.dtype)))
        out.append(client.persist(da.concatenate(parts)))
    wait(out)
    return out


def _on_host(client, arr):
    """A persisted Dask array of CuPy chunks in one NumPy array: each chunk copied to the
    host on its worker and gathered here (no worker concatenates them)."""
    import cupy
    host = client.persist(arr.map_blocks(cupy.asnumpy, dtype=arr.dtype,
                                         meta=np.empty(0, arr.dtype)))
    return np.concatenate(client.gather(futures_of(host)))


def _indices(p, n):
    """``p`` holds ``n`` indices into an array of ``n``.  With the checks below (the
    keys they take equal ``numpy.sort``'s, and indices of equal keys increase) they make
    a permutation: two equal indices would take equal keys, next to each other."""
    assert p.shape == (n,) and (n == 0 or 0 <= p.min() <= p.max() < n)


def _check_permutation(p, x, want):
    """``p`` is ``numpy.argsort(x, kind="stable")``: a permutation that sorts ``x``
    (``want``: ``numpy.sort(x)``), equal keys in input order."""
    _indices(p, x.size)
    xs = x[p]
    np.testing.assert_array_equal(xs, want)
    tie = xs[1:] == xs[:-1]
    assert (p[1:][tie] > p[:-1][tie]).all(), "equal keys out of input order"


def _checks(x, v, w, want):
    """Each function's check of its host outputs against NumPy."""
    def sort(out):
        np.testing.assert_array_equal(out[0], want)

    def argsort(out):
        _check_permutation(out[0], x, want)

    def sort_by_key(out):
        keys, values = out  # values: a permutation of the positions, as labels
        np.testing.assert_array_equal(keys, want)
        _indices(values, x.size)
        key_of = np.empty_like(x)
        key_of[v] = x
        assert np.array_equal(key_of[values].view(np.uint32), keys.view(np.uint32))
        tie = keys[1:] == keys[:-1]
        assert (values[1:][tie] > values[:-1][tie]).all(), "equal keys not by value"

    def lexsort(out):  # numpy.lexsort((w, x)): x, then w, then the position
        p = out[0]
        _indices(p, x.size)
        xs, ws = x[p], w[p]
        np.testing.assert_array_equal(xs, want)
        tie = xs[1:] == xs[:-1]
        assert (ws[1:][tie] >= ws[:-1][tie]).all()
        both = tie & (ws[1:] == ws[:-1])
        assert (p[1:][both] > p[:-1][both]).all()
    return {"sort": sort, "argsort": argsort, "sort_by_key": sort_by_key, "lexsort": lexsort}


def _call(what, dx, dv, dw):
    if what == "sort":
        return [distsort.sort(dx)]
    if what == "argsort":
        return [distsort.argsort(dx)]
    if what == "sort_by_key":
        return list(distsort.sort_by_key(dx, dv))
    return [distsort.lexsort([dw, dx])]


def _inputs(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n, dtype=np.float32)
    v = rng.permutation(n).astype(np.int32)
    w = rng.integers(0, 8, n, dtype=np.int8)
    return x, v, w


def gpu_cases(client, g, inputs, want, chunkings, functions, clock):  # noqa: PLR0913, PLR0917
    """The rows of G workers sharing GPU 0: every function under both strategies on
    each chunking of ``inputs`` (:func:`_inputs`), checked against NumPy (``want``:
    ``numpy.sort`` of the keys)."""
    x, v, w = inputs
    n = x.size
    checks = _checks(x, v, w, want)
    dx, dv, dw = _placed(client, g, _inputs(2**20, 1), (2**20 // (2 * g),) * (2 * g))
    for what in functions:  # warm-up: the kernels compiled on every worker
        for strategy in ("exchange", "network"):
            with distsort.api.planning(strategy=strategy):
                outs = _call(what, dx, dv, dw)
            wait(client.persist(outs))  # made on the workers, not brought here
    print(f"[{clock():6.1f} s] G={g}: warmed up", flush=True)
    rows = []
    # The checks run on threads of this process (NumPy releases the GIL), beside the
    # next sorts; the outputs wait in host memory until checked.
    pool = ThreadPoolExecutor(4)
    for name in chunkings:
        chunks = _gpu_chunks(name, n, np.random.default_rng(len(name)))
        dx, dv, dw = _placed(client, g, inputs, chunks)
        checked = []
        for what in functions:
            for strategy in ("exchange", "network"):
                began = time.perf_counter()
                with distsort.api.planning(strategy=strategy) as plans:
                    outs = _call(what, dx, dv, dw)
                before = bytes_sent_by_kind(client)
                outs = client.persist(outs)
                wait(outs)
                seconds = time.perf_counter() - began
                by_kind = diff_sent(before, bytes_sent_by_kind(client))
                checked.append(pool.submit(checks[what], [_on_host(client, o) for o in outs]))
                del outs
                sent = sum(by_kind.values()) / x.nbytes
                bound = round(PAYLOAD[what] * ((1 - 1 / g) + 0.05), 3) if what in PAYLOAD else None
                row = {"workers": g, "n": n, "chunks": name, "chunking": list(chunks),
                       "what": what, "strategy": strategy,
                       "ran": sorted({p.strategy for p in plans}),
                       "sent_per_key_byte": sent, "bound": bound,
                       "within_bound": None if bound is None else sent <= bound,
                       "sent_by_kind": {k: b / x.nbytes for k, b in by_kind.items()},
                       "one_exchange": 1 - 1 / g, "seconds": seconds,
                       "checked": "equal to NumPy"}
                rows.append(row)
                print(f"[{clock():6.1f} s] G={g} {name:8s} {what:11s} {strategy:8s} "
                      f"ran {','.join(row['ran'])}: sent {sent:.3f} x keys "
                      f"(bound {'-' if bound is None else f'{bound:.3f}'}), "
                      f"{seconds:.2f} s", flush=True)
        del dx, dv, dw
        for done in checked:
            done.result()  # a wrong output raises here
        print(f"[{clock():6.1f} s] G={g} {name}: all {len(checked)} outputs equal to NumPy",
              flush=True)
    pool.shutdown()
    return rows


def gpu_main(args):
    from distsort.cluster.shared_gpu import shared_gpu_cluster
    clock = driver_clock()
    inputs = _inputs(2**args.log2n, 0)
    want = np.sort(inputs[0])
    print(f"[{clock():6.1f} s] 2^{args.log2n} float32 keys made and sorted by NumPy",
          flush=True)
    rows = []
    for g in args.workers:
        with (shared_gpu_cluster(g, pool_fraction=0.6 / g) as cluster, Client(cluster) as client):
            client.wait_for_workers(g)
            rows += gpu_cases(client, g, inputs, want, args.chunkings, args.functions, clock)
    print_table(rows, [("workers", "{}"), ("chunks", "{}"), ("what", "{}"),
                       ("strategy", "{}"), ("sent_per_key_byte", "{:.3f}"),
                       ("bound", "{}"), ("seconds", "{:.2f}")])
    out = args.out
    if out and Path(out).suffix != ".json":  # a folder
        out = str(Path(out) / f"exchange_gpu-shared-{'-'.join(map(str, args.workers))}workers"
                  f"-log2n{args.log2n}_{datetime.date.today().isoformat()}.json")
    path = save_rows(rows, "exchange", "gpu-shared", out, log2n=args.log2n,
                     threads_per_worker=1)
    failed = [r for r in rows if r["within_bound"] is False and r["strategy"] == "exchange"]
    print(path)
    if failed:
        raise SystemExit(f"{len(failed)} exchange rows sent more than their bound")


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, nargs="+", default=None,
                   help="worker counts (default 2 4 8; --gpu: 2 4)")
    p.add_argument("--log2n", type=int, default=None,
                   help="log2 of the elements (default 22; --gpu: 24)")
    p.add_argument("--gpu", action="store_true",
                   help="CuPy chunks on workers sharing GPU 0 (distsort.cluster.shared_gpu)")
    p.add_argument("--functions", nargs="+", default=list(GPU_FUNCTIONS),
                   choices=GPU_FUNCTIONS, help="--gpu: the functions run")
    p.add_argument("--chunkings", nargs="+", default=list(GPU_CHUNKINGS),
                   help="--gpu: chunk counts ('8', '16', ...) or 'ragged-K'")
    args = p.parse_args()
    if args.gpu:
        args.workers = args.workers or [2, 4]
        args.log2n = args.log2n or (20 if args.quick else 24)
        gpu_main(args)
        return
    workers, log2n = ([2, 4], 18) if args.quick else (args.workers or [2, 4, 8],
                                                      args.log2n or 22)
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
