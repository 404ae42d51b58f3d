"""sort_by_key's two orders of equal keys on the CPU: by value and by position (stable).

    python benchmarks/sort_by_key_orders.py             # 2^22 float32 keys, chunks of 2^19
    python benchmarks/sort_by_key_orders.py --log2 24 --chunk-log2 21
    python benchmarks/sort_by_key_orders.py --quick

Keys with many duplicates (rounded random floats), values int32 and int64; Dask's
threaded scheduler with 2 threads.  Rows: ``by value`` (``stable=False``),
``stable`` (values of 4 bytes packed under their positions; 8-byte values: argsort
then a gather), ``argsort+gather`` (the gather path forced for 4-byte values too,
to compare), and for reference ``sort`` and ``argsort`` of the keys alone.  Every
result is checked against NumPy element for element.
"""
from __future__ import annotations

import os
import platform

import dask
import dask.array as da
import driver
import numpy as np

import distsort
from distsort.api import _sort_1d
from distsort.gather import gather
from distsort.backends import Order


def argsort_then_gather(keys, values):
    out_keys, perm = _sort_1d(keys, None, Order(keyed=True), positions=True)
    return out_keys, gather((values,), perm)[0]


def main(argv=None):
    p = driver.parser(__doc__)
    p.add_argument("--log2", type=int, default=22)
    p.add_argument("--chunk-log2", type=int, default=19)
    args = p.parse_args(argv)
    log2, chunk_log2 = (18, 15) if args.quick else (args.log2, args.chunk_log2)
    n, chunk = 2**log2, 2**chunk_log2
    rng = np.random.default_rng()
    k = np.round(rng.random(n, dtype=np.float32) * (n // 8)).astype(np.float32)
    keys = da.from_array(k, chunks=chunk)
    perm = np.argsort(k, kind="stable")
    rows = []

    def compute(*xs):
        return dask.compute(*xs, scheduler="threads", num_workers=2)

    def case(name, vdtype, build, check):
        t, times = driver.median_time(lambda: check(compute(*build())), args.runs, args.warmup)
        rows.append({"case": name, "values": vdtype, "n": n, "chunk": chunk, "seconds": t,
                     "runs": times})

    for vdtype in ("int32", "int64"):
        v = rng.integers(-2**31, 2**31, size=n).astype(vdtype)
        values = da.from_array(v, chunks=chunk)
        by_value = np.lexsort((v, k))

        def check(out, v=v, ref=perm):
            assert np.array_equal(out[0], k[ref]) and np.array_equal(out[1], v[ref])

        case("by value", vdtype, lambda values=values: distsort.sort_by_key(keys, values),
             lambda out, v=v, ref=by_value: check(out, v, ref))
        case("stable", vdtype,
             lambda values=values: distsort.sort_by_key(keys, values, stable=True), check)
        case("argsort+gather", vdtype, lambda values=values: argsort_then_gather(keys, values),
             check)
    case("sort (keys)", "-", lambda: (distsort.sort(keys),),
         lambda out: np.testing.assert_array_equal(out[0], np.sort(k)))
    case("argsort (keys)", "-", lambda: (distsort.argsort(keys),),
         lambda out: np.testing.assert_array_equal(out[0], perm))
    path = driver.save_rows(rows, "sort_by_key_orders", f"cpu-{os.cpu_count()}cores", args.out,
                            processor=platform.processor(), threads=2,
                            numpy=np.__version__, dask=dask.__version__)
    print(f"2^{log2} float32 keys, chunks of 2^{chunk_log2}, threads=2; median of {args.runs}; "
          f"rows in {path}")
    driver.print_table(rows, [("case", "{}"), ("values", "{}"), ("seconds", "{:.2f}")])


if __name__ == "__main__":
    main()
