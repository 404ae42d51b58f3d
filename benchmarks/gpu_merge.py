"""One compare-split merge on the GPU: the merge that reads its two runs in place
(``distsort.backends.gpu.cupy_backend.merge_runs``) against copying them into the output first
and merging there (``sort_inplace(merge=True)``, what the merges did up to v10).

    python benchmarks/gpu_merge.py [--cases uint32:28 uint64:30] [--runs 5] [--out DIR]

A case ``dtype:log2`` (``dtype+vdtype:log2`` for key-value) merges two sorted runs of
fresh random keys, half of the output each (what a compare-split of random chunks
keeps), into 2^log2 elements.  Each result is checked against ``cupy.sort`` of the
concatenation (key-value: ``cupy.lexsort`` of (value, key)).  Prints ms and GB/s of
output written, and the passes of each way.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import cupy
import numpy as np
from driver import timings

from distsort.backends.gpu import cupy_backend as cpb


def random_run(rng_seed, n, dtype):
    rs = cupy.random.RandomState(rng_seed)
    if np.dtype(dtype).kind == "f":
        x = rs.standard_normal(n, dtype=np.float32 if dtype == "float32" else np.float64)
    else:
        x = rs.randint(0, np.iinfo(dtype).max, size=n, dtype=dtype)
    return x.astype(dtype, copy=False)


def sorted_run(seed, n, dtype, vdtype):
    keys = random_run(seed, n, dtype)
    values = None if vdtype is None else random_run(seed + 1, n, vdtype)
    return cpb.make_chunk(*cpb.sort_inplace(keys, values))


def copy_then_merge(a, b):
    """The merge up to v10: the runs copied into a V-shaped output, merged there."""
    (ak, av), (bk, bv) = cpb.parts(a), cpb.parts(b)
    keys = cupy.concatenate([ak[::-1], bk])
    values = None if av is None else cupy.concatenate([av[::-1], bv])
    return cpb.make_chunk(*cpb.sort_inplace(keys, values, merge=True))


def check(out, a, b):
    (ak, av), (bk, bv) = cpb.parts(a), cpb.parts(b)
    keys, values = cpb.parts(out)
    ck = cupy.concatenate([ak, bk])
    if av is None:
        return bool((keys == cupy.sort(ck)).all())
    perm = cupy.lexsort(cupy.stack([cupy.concatenate([av, bv]), ck]))
    return bool((keys == ck[perm]).all() and (values == cupy.concatenate([av, bv])[perm]).all())


def median_seconds(fn, runs):
    """Median wall seconds of ``fn()``, the device idle when the clock starts and
    synchronized before it stops; one warm-up run first (it compiles)."""
    sync = cupy.cuda.Device().synchronize
    return statistics.median(timings(fn, runs, 1, before=sync, sync=sync,
                                     after=lambda out: None))


def one_case(case, runs, seed):
    dtypes, log2 = case.split(":")
    dtype, _, vdtype = dtypes.partition("+")
    vdtype = vdtype or None
    n = 1 << int(log2)
    a = sorted_run(seed, n // 2, dtype, vdtype)
    b = sorted_run(seed + 7, n - n // 2, dtype, vdtype)
    ok = check(cpb.merge_runs(a, b), a, b) and check(copy_then_merge(a, b), a, b)
    row = {"case": case, "n": n, "checked": ok,
           "passes": cpb.pass_count(n, dtype, vdtype, merge=True),
           "in_place_read_ms": median_seconds(lambda: cpb.merge_runs(a, b), runs) * 1e3,
           "copy_then_merge_ms": median_seconds(lambda: copy_then_merge(a, b), runs) * 1e3}
    nbytes = n * (np.dtype(dtype).itemsize + (np.dtype(vdtype).itemsize if vdtype else 0))
    row["bytes"] = nbytes
    a = b = None  # frees the runs before the pool is emptied
    cupy.get_default_memory_pool().free_all_blocks()
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+",
                    default=["uint32:28", "float32:31", "uint64:30", "uint32+uint32:28"])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"{name}: one merge of two sorted runs (half each), median of {args.runs}")
    print(f"{'case':>18} {'passes':>6} {'read in place':>14} {'GB/s':>6} "
          f"{'copy, merge':>12} {'checked':>8}")
    rows = []
    for i, case in enumerate(args.cases):
        row = one_case(case, args.runs, 100 * i)
        gb = row["bytes"] / 1e9
        print(f"{case:>18} {row['passes']:6d} {row['in_place_read_ms']:11.2f} ms "
              f"{gb / row['in_place_read_ms'] * 1e3:6.0f} {row['copy_then_merge_ms']:9.2f} ms "
              f"{str(row['checked']):>8}")
        rows.append(row)
    if args.out:
        out = Path(args.out) / f"gpu_merge_{name.replace(' ', '_')}.json"
        out.write_text(json.dumps({"device": name, "date": time.strftime("%Y-%m-%d"),
                                   "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
