"""Exact quantiles and top k (distsort.select) beside the local sorts, a full sort,
NumPy and dask.array.

    python benchmarks/selection.py                      # CPU: 2^26 float64 in 8 chunks
    python benchmarks/selection.py --quick              # 2^20
    python benchmarks/selection.py --gpu --gib 16 --dtype float32 --chunks 8 --runs 3 \\
        --out benchmarks/results/                       # one GPU, about 2 minutes

Rows, on one lognormal array (skewed, where merged per-chunk percentiles err):

* ``local sorts``: every chunk sorted where it lies (``map_blocks`` of the array
  module's sort), the cost the quantiles are measured against (target: at most 1.2x);
* ``distsort median+5q``: ``distsort.median`` and ``distsort.quantile`` of 5 q,
  computed together (they share their samples and passes);
* ``distsort sort``: a full ``distsort.sort``, all of its output chunks persisted;
  the row names the plan's strategy (``strategy``: on one GPU that holds the array
  twice, ``one-device radix``, one radix sort of the whole array, which costs about what
  the local sorts cost, a radix sort's time growing with n alone);
* ``distsort topk`` and ``dask topk``: the ``--k`` largest (target: at most 0.3x the
  full sort);
* ``dask percentile``: ``dask.array.percentile`` of the same 6 (its largest relative
  error against the exact values is in ``max_rel_error``), timed once, outside the
  rounds: on the GPU on a host copy of the chunks, made before its clock starts (it
  takes NumPy chunks only);
* ``numpy median+5q`` (CPU only): ``numpy.median`` and ``numpy.quantile`` of the
  whole array in memory.

The input is persisted first (on the GPU drawn there, chunk by chunk); every timed
call persists its result (the GPU's device synchronized before the clock stops).  The
cases take turns, one run each in every round (median of ``--runs`` rounds), so that
a shared machine's load weighs on all alike; the rows are written after every round.
Before the rounds the results are checked: the quantiles against those read from the
full sort's output (``assume_sorted``, a separate method), which is checked to be
sorted chunk by chunk and across chunks, and against NumPy on the CPU; the top k
against ``dask.array.topk``.
"""
from __future__ import annotations

import datetime as _dt
import os
import statistics
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np

import distsort
from distsort.plan.options import planning
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
        sizes = tuple(min(size, n - i) for i in range(0, n, size))
        x = _gpu_lognormal(sizes, dtype)
        return x.persist(scheduler="threads"), n, cupy.cuda.Device().synchronize
    x = da.random.default_rng(0).lognormal(size=n, chunks=size).astype(dtype)
    return x.persist(), n, lambda: None


def _gpu_lognormal(sizes, dtype):
    """A Dask array of lognormal(0, 1) CuPy chunks of ``sizes``, each drawn on the
    device (seeded by its index)."""
    import cupy

    def block(block_id=None):
        i = block_id[0]
        return cupy.random.RandomState(i + 1).lognormal(0.0, 1.0, size=sizes[i], dtype=dtype)
    return da.map_blocks(block, chunks=(sizes,), dtype=dtype, meta=cupy.empty(0, dtype))


def host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def out_path(args, device):
    """``--out`` as given, or in it where it names a folder (a new or existing one
    ending in ``/``), or the results folder's default name."""
    if not args.out:
        return None
    out = Path(args.out)
    if out.is_dir() or args.out.endswith(os.sep):
        date = _dt.date.today().isoformat()
        return str(out / f"select_{device}_{date}.json")
    return str(out)


def check_sorted(s, sync):
    """That every chunk of ``s`` (persisted) is sorted, the chunks follow each other in
    order, and they hold every element."""
    blocks = dask.compute(*s.to_delayed().ravel(), scheduler="threads")
    sync()
    assert sum(b.size for b in blocks) == s.shape[0], "the sort lost elements"
    last = None
    for b in blocks:
        if b.size:
            assert bool((b[1:] >= b[:-1]).all()), "a chunk of the sort is not sorted"
            assert last is None or float(last) <= float(b[0]), "chunks out of order"
            last = b[-1]


def main(argv=None):  # noqa: PLR0915
    args = arguments(argv)
    x, n, sync = make(args)
    sync()
    xp_sort = x._meta.__class__.__module__.split(".")[0]
    sort_block = __import__(xp_sort).sort
    k = min(args.k, n)
    if args.gpu:
        import cupy
        device = "1x" + cupy.cuda.runtime.getDeviceProperties(0)["name"].decode().split()[-1]
    else:
        device = f"cpu-{os.cpu_count()}cores"
    path = out_path(args, device)

    def persist(*arrays):
        return dask.persist(*arrays, scheduler="threads", num_workers=args.threads)

    # -- checks, before any clock
    exact = np.concatenate([np.atleast_1d(host(a)) for a in dask.compute(
        distsort.median(x), distsort.quantile(x, QS), scheduler="threads")])
    with planning() as plans:
        s = distsort.sort(x)
    strategy = f"{plans[0].strategy} {plans[0].local}"
    (s,) = persist(s)
    sync()
    check_sorted(s, sync)
    from_sorted = np.concatenate([np.atleast_1d(host(a)) for a in dask.compute(
        distsort.median(s, assume_sorted=True), distsort.quantile(s, QS, assume_sorted=True),
        scheduler="threads")])
    if not np.array_equal(exact, from_sorted):
        raise AssertionError(f"quantiles {exact} differ from the sorted output's {from_sorted}")
    del s
    # dask.array.percentile needs its q in increasing order (else its values are off)
    order = np.argsort([0.5, *QS])
    qs100 = np.array([0.5, *QS])[order] * 100
    exact = exact[order]
    top = host(distsort.topk(x, k).compute(scheduler="threads"))
    if not np.array_equal(top, host(da.topk(x, k).compute(scheduler="threads"))):
        raise AssertionError("distsort.topk differs from dask.array.topk")

    # -- dask.array.percentile, once: on the GPU on a host copy made first
    on_host = x.map_blocks(host, meta=np.empty(0, x.dtype)) if args.gpu else x
    (on_host,) = persist(on_host)
    began = time.perf_counter()
    (approx,) = persist(da.percentile(on_host, qs100))
    percentile_time = time.perf_counter() - began
    approx = host(approx.compute())
    del on_host
    error = float(np.max(np.abs(approx - exact) / np.abs(exact)))
    print(f"dask percentile: {percentile_time:.3f}s (once), largest relative error "
          f"{error:.2e}", flush=True)
    once = [dict(case="dask percentile", n=n, dtype=args.dtype, chunks=args.chunks,
                 seconds=percentile_time, times=[percentile_time], max_rel_error=error,
                 percentiles=qs100.tolist(), exact=exact.tolist(), dask=approx.tolist(),
                 note="timed once, outside the rounds" + (", on a host copy of the chunks"
                                                          if args.gpu else ""))]

    cases = [("local sorts", lambda: persist(x.map_blocks(sort_block)), {}),
             ("distsort median+5q", lambda: persist(distsort.median(x),
                                                    distsort.quantile(x, QS)), {}),
             ("distsort sort", lambda: persist(distsort.sort(x)), {"strategy": strategy}),
             ("distsort topk", lambda: persist(distsort.topk(x, k)), {"k": k}),
             ("dask topk", lambda: persist(da.topk(x, k)), {"k": k})]
    if not args.gpu:
        a = x.compute()
        check = np.array([np.median(a), *np.quantile(a, QS)])[order]
        if not np.array_equal(check, exact):
            raise AssertionError("distsort's quantiles differ from NumPy's")
        cases.append(("numpy median+5q", lambda: (np.median(a), np.quantile(a, QS)), {}))
    times = {name: [] for name, _, _ in cases}
    for _ in range(args.warmup):
        for _, fn, _ in cases:
            fn()
            sync()
    # Round robin: every run times each case once in turn, so that a load that comes
    # and goes (a shared machine) weighs on all cases alike.
    for _ in range(args.runs):
        for name, fn, _ in cases:
            began = time.perf_counter()
            fn()
            sync()
            times[name].append(time.perf_counter() - began)
            print(f"{name}: {times[name][-1]:.3f}s", flush=True)
        rows = _rows(cases, times, once, n, args)
        written = save_rows(rows, "select", device, path, numpy=np.__version__,
                            dask=dask.__version__, threads=args.threads,
                            quantiles=[0.5, *QS], distribution="lognormal(0, 1)",
                            rounds=len(times["local sorts"]), load_average=os.getloadavg())
    print()
    print_table(rows, [("case", "{}"), ("seconds", "{:.3f}"), ("vs_local_sorts", "{:.2f}"),
                       ("vs_sort", "{:.2f}"), ("max_rel_error", "{:.2e}")])
    print(f"\nrows saved to {written}")


def _rows(cases, times, once, n, args):
    rows = [dict(case=name, n=n, dtype=args.dtype, chunks=args.chunks,
                 seconds=statistics.median(times[name]), times=list(times[name]), **extra)
            for name, _, extra in cases] + once
    base = {r["case"]: r["seconds"] for r in rows}
    for r in rows:
        r["vs_local_sorts"] = r["seconds"] / base["local sorts"]
        r["vs_sort"] = r["seconds"] / base["distsort sort"]
    return rows


if __name__ == "__main__":
    main()
