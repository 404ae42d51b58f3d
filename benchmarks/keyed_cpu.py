"""sort_by_key on the CPU (threaded scheduler) against sort of the keys plus a gather.

    python benchmarks/keyed_cpu.py            # 2^24 pairs in 8 chunks: float32+int32, ...
    python benchmarks/keyed_cpu.py --quick    # 2^20 only

Target (issue 26): ``sort_by_key`` within 2x of ``distsort.sort`` of the same keys
plus one gather (``values[perm]`` for a random permutation of the same length), at
2^24.  NumPy's stable argsort + take is timed as well.  Every result is compared
element for element with NumPy's order (equal keys by value) on fresh random data.
"""
from __future__ import annotations

import os
import platform

import dask
import dask.array as da
import numpy as np
from dask.diagnostics import Profiler

import distsort
from distsort.backends import merge
from driver import median_time, parser, print_table, save_rows, stage_seconds

#: (keys, values) dtypes: packed into one 64-bit code when they fit, else not.
PAIRS = [("float32", "int32"), ("int32", "float32"), ("uint16", "int16"), ("float64", "int64")]


def make(rng, n, dtype):
    """Random data of ``dtype`` with duplicate keys (a tenth drawn from few values)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        x = rng.standard_normal(n).astype(dtype)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)
    few = rng.random(n) < 0.1
    x[few] = x[rng.integers(0, 100, size=few.sum())]
    return x


def reference(k, v):
    """NumPy's keyed order for data without NaN or -0.0: by key, then value."""
    perm = np.lexsort((v, k))
    return k[perm], v[perm]


def _persisted(*arrays, threads):
    out = dask.persist(*arrays, scheduler="threads", num_workers=threads)
    return out


def case(k, v, chunks, threads, runs, warmup):
    size = -(-len(k) // chunks)
    dk, dv = (da.from_array(a, chunks=size).persist() for a in (k, v))
    perm = np.random.default_rng().permutation(len(k))
    t_sort, _ = median_time(lambda: _persisted(distsort.sort(dk), threads=threads),
                            runs, warmup)
    t_gather, _ = median_time(lambda: np.take(v, perm), runs, warmup)
    t_keyed, _ = median_time(lambda: _persisted(*distsort.sort_by_key(dk, dv), threads=threads),
                             runs, warmup)
    t_numpy, _ = median_time(lambda: np.take(v, np.argsort(k, kind="stable")), runs, warmup)
    with Profiler() as prof:
        sk, sv = _persisted(*distsort.sort_by_key(dk, dv), threads=threads)
    rk, rv = reference(k, v)
    if not (np.array_equal(sk.compute(scheduler="sync"), rk)
            and np.array_equal(sv.compute(scheduler="sync"), rv)):
        raise AssertionError("sort_by_key differs from NumPy's keyed order")
    floor = t_sort + t_gather
    return dict(sort_s=t_sort, gather_s=t_gather, sort_by_key_s=t_keyed, numpy_s=t_numpy,
                ratio=t_keyed / floor, task_seconds=stage_seconds(prof.results))


def main(argv=None):
    p = parser(__doc__)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--chunks", type=int, default=8)
    p.add_argument("--label", help="what ran, saved with the rows (e.g. a commit)")
    p.add_argument("--pairs", nargs="*", default=[f"{a}+{b}" for a, b in PAIRS],
                   help="KEYS+VALUES dtypes, e.g. float32+int32")
    args = p.parse_args(argv)
    n = 2**20 if args.quick else 2**24
    rng = np.random.default_rng()
    rows = []
    for pair in args.pairs:
        kd, vd = pair.split("+")
        k, v = make(rng, n, kd), make(rng, n, vd)
        row = dict(n=n, keys=kd, values=vd, chunks=args.chunks, threads=args.threads,
                   **case(k, v, args.chunks, args.threads, args.runs, args.warmup))
        top = ", ".join(f"{s.replace('distsort-', '')} {t:.2f}s"
                        for s, t in list(row["task_seconds"].items())[:3])
        row["top_stages"] = top
        rows.append(row)
        print(f"n=2^{n.bit_length() - 1} {pair}: sort {row['sort_s']:.3f}s + gather "
              f"{row['gather_s']:.3f}s, sort_by_key {row['sort_by_key_s']:.3f}s "
              f"({row['ratio']:.2f}x), numpy {row['numpy_s']:.3f}s  [{top}]", flush=True)
    print()
    print_table(rows, [("n", "{}"), ("keys", "{}"), ("values", "{}"), ("sort_s", "{:.3f}"),
                       ("gather_s", "{:.3f}"), ("sort_by_key_s", "{:.3f}"),
                       ("numpy_s", "{:.3f}"), ("ratio", "{:.2f}")])
    cpu = f"cpu-{os.cpu_count()}cores"
    merges = f"numba {merge.numba.__version__}" if merge.ENABLED else "numpy (no numba)"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    path = save_rows(rows, "keyed_cpu", cpu, args.out, processor=platform.processor(),
                     numpy=np.__version__, dask=dask.__version__, merges=merges,
                     load_average_1min=load, label=args.label)
    print(f"\nrows saved to {path}")


if __name__ == "__main__":
    main()
