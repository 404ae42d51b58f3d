"""sort_by_key on the CPU (threaded scheduler) against sort of the keys plus a gather.

    python benchmarks/keyed_cpu.py            # 2^24 pairs in 8 chunks: float32+int32, ...
    python benchmarks/keyed_cpu.py --quick    # 2^20 only
    python benchmarks/keyed_cpu.py --stable   # stable=True against the default order, 2^24
    python benchmarks/keyed_cpu.py --table    # 3 columns and 2 keys in one call, 2^22

``--stable`` (issue 37: ``stable=True`` within 1.3x of the default order) times, for
each pair, the default order, ``stable=True`` and the values packed under their
positions (one network of 12-byte pairs: what ``stable=True`` did before, still the
GPU's choice), the three taking turns run by run, for each of ``--strategies``: on
the default plan (``auto``: one task sorts all the keys with their positions and takes
the values by them) and on the network (``network``: the keys sorted with uint32
positions where they have up to 4 bytes, then one gather of the values).  ``--table``
times a float64 key with int64 and float32 columns: ``sort_by_key(k, (a, b))``
(an argsort and one gather of both columns), an argsort and one gather per column,
and Dask's ``a[argsort(k)]``; and ``lexsort`` of two keys whose codes fit 64 bits (one
sort) and of two that do not (two passes).  Wall time is the median of the runs, and
the process time of the same runs (two threads: less sensitive to other load on a
shared machine) is saved beside it.

Target (issue 26): ``sort_by_key`` within 2x of ``distsort.sort`` of the same keys
plus one gather (``values[perm]`` for a random permutation of the same length), at
2^24.  NumPy's stable argsort + take is timed as well.  Every result is compared
element for element with NumPy's order (equal keys by value) on fresh random data.
"""
from __future__ import annotations

import os
import platform
import statistics

import dask
import dask.array as da
import numpy as np
from dask.diagnostics import Profiler

import distsort
from distsort.backends.packing import PACKED_VALUE_BYTES
from distsort.sort1d import argsort_by_positions
from distsort.graph.gather import gather
from distsort.backends.cpu import merge
from driver import (median_time, parser, print_table, save_rows, stage_seconds, timings,
                    wall_and_process_clock)

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


def timed(fn, runs, warmup):
    """Median wall and process seconds of ``fn()`` (persisting what it returns)."""
    times = timings(lambda: _persisted(*fn(), threads=2), runs, warmup,
                    clock=wall_and_process_clock)
    return tuple(statistics.median(clock) for clock in zip(*times, strict=True))


def interleaved(cases, runs, warmup):
    """``{name: (wall seconds, process seconds)}`` of every run of each of ``cases``
    (``(name, fn)``, ``fn()`` persisted), the cases taking turns within each run."""
    for _ in range(warmup):
        for _, fn in cases:
            _persisted(*fn(), threads=2)
    out = {name: ([], []) for name, _ in cases}
    for _ in range(runs):
        for name, fn in cases:
            ((wall, cpu),) = timings(lambda fn=fn: _persisted(*fn(), threads=2), 1, 0,
                                     clock=wall_and_process_clock)
            out[name][0].append(wall)
            out[name][1].append(cpu)
    return out


def packed_under_positions(dk, dv):
    """The stable order with the values packed under their positions (8 bytes), one
    network: ``distsort.sort1d.stable_by_key``'s path for CuPy chunks."""
    from distsort.backends.packing import pack_positions, unpack_positions
    from distsort.sort1d import sort_1d
    from distsort.backends import Order
    packed = dv.map_blocks(pack_positions, dtype=np.uint64)
    sk, sp = sort_1d(dk, packed, Order(keyed=True), positions=False)
    return sk, sp.map_blocks(unpack_positions, dv.dtype, dtype=dv.dtype)


def stable_case(k, v, chunks, runs, warmup):
    size = -(-len(k) // chunks)
    dk, dv = (da.from_array(a, chunks=size).persist() for a in (k, v))
    row = {}
    cases = [("default", lambda: distsort.sort_by_key(dk, dv)),
             ("stable", lambda: distsort.sort_by_key(dk, dv, stable=True))]
    if v.dtype.itemsize <= PACKED_VALUE_BYTES:  # packs under 32-bit positions
        cases.append(("packed", lambda: packed_under_positions(dk, dv)))
    # Interleaved, run by run: load from other work on a shared machine falls on every
    # case alike.
    for name, (wall, cpu) in interleaved(cases, runs, warmup).items():
        row[f"{name}_s"], row[f"{name}_cpu_s"] = statistics.median(wall), statistics.median(cpu)
        row[f"{name}_times"] = wall
    perm = np.argsort(k, kind="stable")
    for _, fn in cases[1:]:
        sk, sv = dask.compute(*fn())
        if not (np.array_equal(sk, k[perm]) and np.array_equal(sv, v[perm])):
            raise AssertionError("the stable order differs from NumPy's stable argsort")
    row["ratio"] = row["stable_s"] / row["default_s"]
    row["ratio_cpu"] = row["stable_cpu_s"] / row["default_cpu_s"]
    row["load_1min"] = os.getloadavg()[0]
    return row


def table_rows(rng, n, chunks, runs, warmup):
    """A float64 key with int64 and float32 columns, and two-key sorts."""
    k, a, b = make(rng, n, "float64"), make(rng, n, "int64"), make(rng, n, "float32")
    size = -(-n // chunks)
    dk, dva, dvb = (da.from_array(x, chunks=size).persist() for x in (k, a, b))

    def per_column():
        sk, perm = argsort_by_positions(dk, False, False, "auto", "sort_by_key")
        return (sk, *(gather((c,), perm)[0] for c in (dva, dvb)))

    def dask_take():
        perm = distsort.argsort(dk)
        return distsort.sort(dk), dva[perm], dvb[perm]

    def table():
        sk, (sa, sb) = distsort.sort_by_key(dk, (dva, dvb))
        return sk, sa, sb

    rows = []
    for name, fn in (("sort_by_key(k, (a, b))", table),
                     ("argsort + a gather per column", per_column),
                     ("argsort + a[perm] per column (dask)", dask_take)):
        wall, cpu = timed(fn, runs, warmup)
        rows.append(dict(case="table", n=n, how=name, seconds=wall, cpu_seconds=cpu))
    perm = np.argsort(k, kind="stable")
    sk, sa, sb = dask.compute(*table())
    if not all(np.array_equal(x, y[perm]) for x, y in ((sk, k), (sa, a), (sb, b))):
        raise AssertionError("the table differs from NumPy's stable argsort")
    for kd in (("int16", "float32"), ("int64", "float64")):
        k2, k1 = make(rng, n, kd[0]), make(rng, n, kd[1])
        d2, d1 = (da.from_array(x, chunks=size).persist() for x in (k2, k1))
        wall, cpu = timed(lambda d2=d2, d1=d1: (distsort.lexsort((d2, d1)),), runs, warmup)
        if not np.array_equal(distsort.lexsort((d2, d1)).compute(), np.lexsort((k2, k1))):
            raise AssertionError("lexsort differs from NumPy's")
        rows.append(dict(case="lexsort", n=n, how=f"{kd[1]} primary, {kd[0]} secondary",
                         seconds=wall, cpu_seconds=cpu))
    return rows


def main(argv=None):
    p = parser(__doc__)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--chunks", type=int, default=8)
    p.add_argument("--label", help="what ran, saved with the rows (e.g. a commit)")
    p.add_argument("--pairs", nargs="*", default=[f"{a}+{b}" for a, b in PAIRS],
                   help="KEYS+VALUES dtypes, e.g. float32+int32")
    p.add_argument("--stable", action="store_true",
                   help="stable=True against the default order and the packed order")
    p.add_argument("--strategies", nargs="+", default=["auto"],
                   help="distsort.strategy values for --stable (auto, network)")
    p.add_argument("--table", action="store_true",
                   help="several value columns and two keys in one call (2^22)")
    args = p.parse_args(argv)
    n = 2**20 if args.quick else 2**24
    rng = np.random.default_rng()
    if args.stable or args.table:
        return tables_main(args, rng, n)
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


def tables_main(args, rng, n):
    """``--stable`` and ``--table``: their rows, printed and saved."""
    rows = []
    for strategy, pair in ((s, p) for s in args.strategies for p in args.pairs
                           if args.stable):
        kd, vd = pair.split("+")
        with dask.config.set({"distsort.strategy": strategy}):
            row = dict(case="stable", strategy=strategy, n=n, keys=kd, values=vd,
                       chunks=args.chunks,
                       **stable_case(make(rng, n, kd), make(rng, n, vd), args.chunks,
                                     args.runs, args.warmup))
        rows.append(row)
        print(f"{strategy} n=2^{n.bit_length() - 1} {pair}: default {row['default_s']:.3f}s "
              f"({row['default_cpu_s']:.2f} cpu), stable {row['stable_s']:.3f}s "
              f"({row['stable_cpu_s']:.2f} cpu), packed {row.get('packed_s', 0):.3f}s "
              f"({row.get('packed_cpu_s', 0):.2f} cpu): stable/default {row['ratio']:.2f}x "
              f"wall, {row['ratio_cpu']:.2f}x cpu (load {row['load_1min']:.1f})", flush=True)
    if args.table:
        for row in table_rows(rng, n // 4, args.chunks, args.runs, args.warmup):
            rows.append(row)
            print(f"{row['case']} n={row['n']} {row['how']}: {row['seconds']:.3f}s "
                  f"({row['cpu_seconds']:.2f} cpu)", flush=True)
    cpu = f"cpu-{os.cpu_count()}cores"
    name = "keyed_cpu_" + "_".join(w for w, on in (("stable", args.stable),
                                                   ("table", args.table)) if on)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    path = save_rows(rows, name, cpu, args.out, numpy=np.__version__, dask=dask.__version__,
                     load_average_1min=load, label=args.label)
    print(f"\nrows saved to {path}")


if __name__ == "__main__":
    main()
