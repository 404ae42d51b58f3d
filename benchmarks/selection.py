"""Exact quantiles and top k (distsort.select) beside the local sorts, a full sort,
NumPy and dask.array.

    python benchmarks/selection.py                      # CPU: 2^26 float64 in 8 chunks
    python benchmarks/selection.py --quick              # 2^20
    python benchmarks/selection.py --gpu --gib 16 --dtype float32 --chunks 8   # one GPU

Rows, on one lognormal array (skewed, where merged per-chunk percentiles err):

* ``local sorts``: every chunk sorted where it lies (``map_blocks`` of the array
  module's sort), the cost the quantiles are measured against (target: at most 1.2x);
* ``distsort median+5q``: ``distsort.median`` and ``distsort.quantile`` of 5 q,
  computed together (they share the local sorts);
* ``dask percentile``: ``dask.array.percentile`` of the same 6 (its largest relative
  error against the exact values is in ``max_rel_error``);
* ``numpy median+5q`` (CPU only): ``numpy.median`` and ``numpy.quantile`` of the
  whole array in memory;
* ``distsort sort``: a full ``distsort.sort``;
* ``distsort topk`` and ``dask topk``: the ``--k`` largest (target: at most 0.3x
  the full sort).

The input is persisted first; every timed call persists its result (the GPU's
device synchronized before the clock stops).  The cases take turns, one run each in
every round (median of ``--runs`` rounds), so that a shared machine's load weighs on
all alike; the results are checked against NumPy (CPU) and ``dask.array.topk``.
"""
from __future__ import annotations

import os
import statistics
import time

import dask
import dask.array as da
import numpy as np

import distsort
from driver import parser, print_table, save_rows

QS = [0.01, 0.1, 0.25, 0.75, 0.999]


def arguments(argv):
    p = parser(__doc__)
    p.add_argument("--gpu", action="store_true", help="CuPy chunks on the GPU")
    p.add_argument("--n", type=int, help="elements (default 2^26, --quick 2^20)")
    p.add_argument("--gib", type=float, help="size in GiB instead of --n")
    p.add_argument("--dtype", default="float64")
    p.add_argument("--chunks", type=int, default=8)
    p.add_argument("--k", type=int, default=10**6)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    return p.parse_args(argv)


def make(args):
    dtype = np.dtype(args.dtype)
    n = (int(args.gib * 2**30) // dtype.itemsize if args.gib
         else args.n or (2**20 if args.quick else 2**26))
    size = -(-n // args.chunks)
    if args.gpu:
        import cupy
        x = da.random.default_rng(0).lognormal(size=n, chunks=size).map_blocks(
            lambda b: cupy.asarray(b, dtype), dtype=dtype, meta=cupy.empty(0, dtype))
        return x.persist(), n, cupy.cuda.Device().synchronize
    x = da.random.default_rng(0).lognormal(size=n, chunks=size).astype(dtype)
    return x.persist(), n, lambda: None


def host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def main(argv=None):
    args = arguments(argv)
    x, n, sync = make(args)
    xp_sort = x._meta.__class__.__module__.split(".")[0]
    sort_block = __import__(xp_sort).sort
    k = min(args.k, n)

    def persist(*arrays):
        return dask.persist(*arrays, scheduler="threads", num_workers=args.threads)

    exact = np.concatenate([np.atleast_1d(host(a)) for a in dask.compute(
        distsort.median(x), distsort.quantile(x, QS), scheduler="threads")])
    # dask.array.percentile needs its q in increasing order (else its values are off)
    order = np.argsort([0.5, *QS])
    qs100 = np.array([0.5, *QS])[order] * 100
    exact = exact[order]
    # dask.array.percentile takes NumPy chunks only (its q is a NumPy array): on the GPU it
    # is measured on a host copy of the chunks, made in the timed call
    on_host = x.map_blocks(host, meta=np.empty(0, x.dtype)) if args.gpu else x
    approx = host(da.percentile(on_host, qs100).compute(scheduler="threads"))
    error = float(np.max(np.abs(approx - exact) / np.abs(exact)))
    cases = [("local sorts", lambda: persist(x.map_blocks(sort_block)), {}),
             ("distsort median+5q", lambda: persist(distsort.median(x),
                                                    distsort.quantile(x, QS)), {}),
             ("dask percentile", lambda: persist(da.percentile(on_host, qs100)),
              {"max_rel_error": error, "percentiles": qs100.tolist(), "exact": exact.tolist(),
               "dask": approx.tolist()})]
    if not args.gpu:
        a = x.compute()
        check = np.array([np.median(a), *np.quantile(a, QS)])[order]
        if not np.array_equal(check, exact):
            raise AssertionError("distsort's quantiles differ from NumPy's")
        cases.append(("numpy median+5q", lambda: (np.median(a), np.quantile(a, QS)), {}))
    top = host(distsort.topk(x, k).compute(scheduler="threads"))
    if not np.array_equal(top, host(da.topk(x, k).compute(scheduler="threads"))):
        raise AssertionError("distsort.topk differs from dask.array.topk")
    cases += [("distsort sort", lambda: persist(distsort.sort(x)), {}),
              ("distsort topk", lambda: persist(distsort.topk(x, k)), {"k": k}),
              ("dask topk", lambda: persist(da.topk(x, k)), {"k": k})]
    # Round robin: every run times each case once in turn, so that a load that comes
    # and goes (a shared machine) weighs on all cases alike.
    times = {name: [] for name, _, _ in cases}
    for _ in range(args.warmup):
        for _, fn, _ in cases:
            fn()
            sync()
    for _ in range(args.runs):
        for name, fn, _ in cases:
            began = time.perf_counter()
            fn()
            sync()
            times[name].append(time.perf_counter() - began)
            print(f"{name}: {times[name][-1]:.3f}s", flush=True)
    rows = [dict(case=name, n=n, dtype=args.dtype, chunks=args.chunks,
                 seconds=statistics.median(times[name]), times=times[name], **extra)
            for name, _, extra in cases]
    base = {r["case"]: r["seconds"] for r in rows}
    for r in rows:
        r["vs_local_sorts"] = r["seconds"] / base["local sorts"]
        r["vs_sort"] = r["seconds"] / base["distsort sort"]
    print()
    print_table(rows, [("case", "{}"), ("seconds", "{:.3f}"), ("vs_local_sorts", "{:.2f}"),
                       ("vs_sort", "{:.2f}"), ("max_rel_error", "{:.2e}")])
    if args.gpu:
        import cupy
        device = "1x" + cupy.cuda.runtime.getDeviceProperties(0)["name"].decode().split()[-1]
    else:
        device = f"cpu-{os.cpu_count()}cores"
    path = save_rows(rows, "select", device, args.out, numpy=np.__version__,
                     dask=dask.__version__, threads=args.threads, quantiles=[0.5, *QS],
                     distribution="lognormal(0, 1)", load_average=os.getloadavg())
    print(f"\nrows saved to {path}")


if __name__ == "__main__":
    main()
