"""distsort on the CPU (2 threads) against numpy.sort of the whole array.

    python benchmarks/cpu_sort.py            # 2^24 and 2^26, float64 and int64, 4/8/16 chunks
    python benchmarks/cpu_sort.py --quick    # 2^20 only

Target (issue 2): within 2x of numpy.sort's time at 2^26 in 8 chunks.  The merges
are numba's where it is installed (the ``fast`` extra); the JSON says which ran.
"""
from __future__ import annotations

import os
import platform

import dask
import dask.array as da
import numpy as np
from dask.diagnostics import Profiler

import distsort
from distsort.backends.cpu import merge
from driver import median_time, parser, print_table, save_rows, stage_seconds


def make(rng, n, dtype):
    if dtype == "float64":
        return rng.standard_normal(n)
    return rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, size=n, dtype=dtype)


def case(a, chunks, threads, runs, warmup):
    x = da.from_array(a, chunks=len(a) // chunks).persist()

    def run():
        return distsort.sort(x).persist(scheduler="threads", num_workers=threads)

    seconds, _ = median_time(run, runs, warmup)
    with Profiler() as prof:
        out = run()
    result = np.concatenate(dask.compute(*out.to_delayed().ravel(), scheduler="sync"))
    if not np.array_equal(result, np.sort(a)):
        raise AssertionError("distsort result differs from numpy.sort")
    return seconds, stage_seconds(prof.results)


def main(argv=None):
    p = parser(__doc__)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    sizes = [2**20] if args.quick else [2**24, 2**26]
    rng = np.random.default_rng()
    rows = []
    for n in sizes:
        for dtype in ("float64", "int64"):
            a = make(rng, n, dtype)
            t_np, _ = median_time(lambda a=a: np.sort(a), args.runs, args.warmup)
            for chunks in (4, 8, 16):
                t, stages = case(a, chunks, args.threads, args.runs, args.warmup)
                top = ", ".join(f"{k.replace('distsort-', '')} {v:.2f}s"
                                for k, v in list(stages.items())[:3])
                rows.append(dict(n=n, dtype=dtype, chunks=chunks, threads=args.threads,
                                 numpy_s=t_np, distsort_s=t, ratio=t / t_np,
                                 mkeys_s=n / t / 1e6, task_seconds=stages, top_stages=top))
                print(f"n=2^{n.bit_length() - 1} {dtype} {chunks} chunks: numpy {t_np:.3f}s "
                      f"distsort {t:.3f}s ({t / t_np:.2f}x)  [{top}]", flush=True)
    print()
    print_table(rows, [("n", "{}"), ("dtype", "{}"), ("chunks", "{}"), ("numpy_s", "{:.3f}"),
                       ("distsort_s", "{:.3f}"), ("ratio", "{:.2f}"), ("mkeys_s", "{:.1f}"),
                       ("top_stages", "{}")])
    cpu = f"cpu-{os.cpu_count()}cores"
    merges = f"numba {merge.numba.__version__}" if merge.ENABLED else "numpy (no numba)"
    path = save_rows(rows, "cpu_sort", cpu, args.out, processor=platform.processor(),
                     numpy=np.__version__, dask=dask.__version__, merges=merges)
    print(f"\nrows saved to {path}")


if __name__ == "__main__":
    main()
