"""Local (one GPU) sort: distsort's in-place bitonic kernels against cupy.sort (radix),
cupy.lexsort (thrust merge sort) and a one-launch-per-step bitonic kernel.

    python benchmarks/local_sort.py --out DIR [--quick] [--huge-gb 120] [--variants]
    python benchmarks/local_sort.py --ab ROW.json [--reps 7]   (one side of local_sort_ab.sh)
    python benchmarks/local_sort.py --ab-report NEW.json... --old OLD.json...

Every timed result is checked against cupy.sort's on the same fresh random input
(CUDA events, one warm-up, median of several runs; the input is refilled before each
run and never zeros).  Writes ``local_sort_<device>_<date>.json`` and a PNG plot.
``PYTHONPATH=TREE`` imports distsort from another source tree, so that the same
measurement compares two trees (``benchmarks/local_sort_ab.sh``).
"""
from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import statistics
from pathlib import Path

import cupy
import numpy as np
from driver import cuda_clock, timings

from distsort.backends.gpu import cupy_backend as cpb

HERE = Path(__file__).resolve().parent
_mod = cupy.RawModule(code=(HERE / "bitonic_baseline.cu").read_text(), options=("-std=c++17",))
KIND = {"uint32": 0, "uint64": 1, "float32": 2, "float64": 3}


def fill(x, seed):
    _mod.get_function("fill_random")((4096,), (256,), (x, np.int64(x.size), np.uint64(seed),
                                                       np.int32(KIND[x.dtype.name])))


def timed(fn, prepare, reps):
    """Median ms of ``fn()`` (CUDA events) over ``reps`` runs after one warm-up, and the
    last run's result; ``prepare(r)`` before run ``r`` (0: the warm-up)."""
    run, kept = itertools.count(), {}
    times = timings(fn, reps, 1, before=lambda: prepare(next(run)), clock=cuda_clock,
                    after=lambda out: kept.update(out=out))
    return statistics.median(times), kept["out"]


def baseline_sort(a):
    """One launch per step (seed 004), flip form with virtual padding."""
    n = a.size
    p = max(1, (n - 1).bit_length())
    pairs = 1 << (p - 1)
    step = _mod.get_function("bitonic_step")
    grid = (-(-pairs // 256),)
    launches = 0
    for s in range(1, p + 1):
        step(grid, (256,), (a, np.int64(n), np.int64(pairs), np.int32(s), np.int32(0), np.int32(1)))
        launches += 1
        for j in range(s - 2, -1, -1):
            step(grid, (256,), (a, np.int64(n), np.int64(pairs), np.int32(s), np.int32(j),
                                np.int32(0)))
            launches += 1
    return launches


def bench_keys(dtype, n, reps, others, seed):
    x = cupy.empty(n, dtype=dtype)
    row = {"dtype": dtype, "n": n, "passes": cpb.pass_count(n, dtype)}
    ms, _ = timed(lambda: cpb.sort_inplace(x), lambda r: fill(x, seed + r), reps)
    fill(x, seed + reps)
    ref = cupy.sort(x)
    cpb.sort_inplace(x)
    row["distsort_ok"] = bool((x == ref).all())
    row["distsort_ms"] = ms
    del ref
    ms, out = timed(lambda: cupy.sort(x), lambda r: fill(x, seed + r), reps)
    row["cupy_sort_ms"] = ms
    del out
    if others and dtype == "uint32":
        ms, _ = timed(lambda: baseline_sort(x), lambda r: fill(x, seed + r), 1)
        ref = cupy.sort(x)
        fill(x, seed)
        ref = cupy.sort(x)
        baseline_sort(x)
        row["per_step_ms"], row["per_step_ok"] = ms, bool((x == ref).all())
        del ref
    if others:
        ms, idx = timed(lambda: cupy.lexsort(x[None]), lambda r: fill(x, seed + r), 1)
        row["lexsort_ms"] = ms
        row["lexsort_ok"] = bool((x[idx][1:] >= x[idx][:-1]).all())
        del idx
    for k in [k for k in list(row) if k.endswith("_ms")]:
        row[k.replace("_ms", "_gkeys")] = n / row[k] / 1e6
    return row


def bench_kv(n, reps, seed):
    k = cupy.empty(n, dtype=np.uint32)
    v = cupy.empty(n, dtype=np.uint32)
    prep = lambda r: (fill(k, seed + r), fill(v, seed + 1000 + r))  # noqa: E731
    ms, _ = timed(lambda: cpb.sort_inplace(k, v), prep, reps)
    prep(reps)
    perm = cupy.lexsort(cupy.stack([v, k]))
    rk, rv = k[perm], v[perm]
    del perm
    cpb.sort_inplace(k, v)
    ok = bool((k == rk).all() and (v == rv).all())
    del rk, rv
    ms_c, _ = timed(lambda: v[cupy.argsort(k)], prep, reps)
    return {"dtype": "uint32+uint32", "n": n, "passes": cpb.pass_count(n, "uint32", "uint32"),
            "distsort_ms": ms, "distsort_ok": ok, "distsort_gkeys": n / ms / 1e6,
            "cupy_argsort_take_ms": ms_c, "cupy_argsort_take_gkeys": n / ms_c / 1e6}


def memory_check(n, values=False):
    """Pool bytes and cudaMemGetInfo before and after an in-place sort of ``n`` uint32
    keys (with ``values``: and as many uint32 values, a packed sort)."""
    x = cupy.empty(n, dtype=np.uint32)
    v = cupy.empty(n, dtype=np.uint32) if values else None
    pool = cupy.get_default_memory_pool()
    for seed in (99, 98):  # the first sort compiles and warms up
        fill(x, seed)
        if values:
            fill(v, seed + 1)
        cupy.cuda.runtime.deviceSynchronize()
        before = (pool.used_bytes(), pool.total_bytes(), cupy.cuda.runtime.memGetInfo()[0])
        cpb.sort_inplace(x, v)
        cupy.cuda.runtime.deviceSynchronize()
        after = (pool.used_bytes(), pool.total_bytes(), cupy.cuda.runtime.memGetInfo()[0])
    return {"n": n, "values": values, "array_bytes": x.nbytes * (2 if values else 1),
            "pool_used_before": before[0], "pool_used_after": after[0],
            "pool_total_before": before[1], "pool_total_after": after[1],
            "free_before": before[2], "free_after": after[2]}


def huge(gb):
    """Sort a uint32 array of ``gb`` GB in place, filled on the device; check on the device."""
    n = int(gb * 1e9) // 4
    cupy.get_default_memory_pool().free_all_blocks()
    x = cupy.empty(n, dtype=np.uint32)
    fill(x, 1234)
    chk = _mod.get_function("check_u32")

    def check():
        out = cupy.zeros(3, dtype=np.uint64)
        chk((132 * 16,), (256,), (x, np.int64(n), out))
        return [int(v) for v in out.get()]

    before = check()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    cpb.sort_inplace(x)
    stop.record()
    stop.synchronize()
    ms = cupy.cuda.get_elapsed_time(start, stop)
    after = check()
    free = cupy.cuda.runtime.memGetInfo()
    row = {"n": n, "bytes": x.nbytes, "ms": ms, "gkeys": n / ms / 1e6,
           "passes": cpb.pass_count(n, "uint32"), "violations_before": before[0],
           "violations_after": after[0], "sum_equal": before[1] == after[1],
           "xor_equal": before[2] == after[2], "free_after": free[0], "total": free[1]}
    x = None  # free the array before the pool is emptied
    cupy.get_default_memory_pool().free_all_blocks()
    return row


VARIANTS = [  # (threads, smem, row_bytes, E for <= 4-byte elements, min blocks per SM)
    (128, 74 * 1024, 128, 32, 3),    # Hopper's table: 2^14 tile, three blocks per SM (12 warps)
    (256, 113 * 1024, 128, 32, 2),   # 2^14 tile, two blocks per SM (16 warps; table until v11)
    (512, 227 * 1024, 128, 32, 1),   # 2^15 tile, one block per SM (fewer passes)
    (512, 113 * 1024, 128, 16, 2),   # 2^14 tile, two blocks per SM (32 warps)
    (256, 113 * 1024, 64, 32, 2),    # 64-byte rows: one more step per GROUP pass
    (1024, 227 * 1024, 128, 16, 1),  # 2^15 tile, 32 warps in one block
]


def variants(n, seed):
    """uint32, float64 and uint32+uint32 2^28 under other block shapes (tuning
    exploration); each result is checked against cupy.sort / lexsort."""
    rows = []
    for threads, smem, row_bytes, items, minb in VARIANTS:
        tune = {"threads": threads, "smem": smem, "row_bytes": row_bytes,
                "items_per_thread": [items, 16, 8], "min_blocks": minb}
        os.environ["DISTSORT_TUNING"] = json.dumps(tune)
        row = {"tuning": tune}
        try:
            for dtype in ["uint32", "float64"]:
                r = bench_keys(dtype, n, 3, False, seed)
                row[dtype] = {k: r[k] for k in ("distsort_ms", "distsort_ok", "passes")}
            r = bench_kv(n, 3, seed)
            row["uint32+uint32"] = {k: r[k] for k in ("distsort_ms", "distsort_ok", "passes")}
            row["ms"] = row["uint32"]["distsort_ms"]
            row["ok"] = all(row[d]["distsort_ok"] for d in ("uint32", "float64", "uint32+uint32"))
        except Exception as exc:  # a variant that does not build or launch
            print("variant failed", tune, repr(exc), flush=True)
            row["ms"], row["ok"] = float("inf"), False
        rows.append(row)
        print("variant", json.dumps(row), flush=True)
    del os.environ["DISTSORT_TUNING"]
    return rows


AB_CASES = ["uint32", "float64", "uint32+uint32"]


def ab_times(dtype, n, reps, seed):
    """ms of each of ``reps`` sorts of ``n`` fresh random keys (``dtype`` "k+v": keys and
    values), after one warm-up; each result checked against cupy.sort / cupy.lexsort of
    a copy of its input.  ``(times, all checked equal)``."""
    kd, _, vd = dtype.partition("+")
    k = cupy.empty(n, dtype=kd)
    v = cupy.empty(n, dtype=vd) if vd else None
    times, ok = [], True
    for r in range(reps + 1):
        fill(k, seed + r)
        if v is not None:
            fill(v, seed + 1000 + r)
        k0, v0 = k.copy(), None if v is None else v.copy()
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        cpb.sort_inplace(k, v)
        stop.record()
        stop.synchronize()
        if v is None:
            ok &= bool((k == cupy.sort(k0)).all())
        else:
            perm = cupy.lexsort(cupy.stack([v0, k0]))
            ok &= bool((k == k0[perm]).all() and (v == v0[perm]).all())
        del k0, v0
        if r:
            times.append(cupy.cuda.get_elapsed_time(start, stop))
    return times, ok


def ab_side(path, reps, n=1 << 28):
    """One tree's side of an A/B comparison: the times of ``AB_CASES``, written to ``path``."""
    dev = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    out = {"device": dev, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "tree": str(Path(cpb.__file__).resolve().parents[2]), "n": n, "cases": {}}
    for i, dtype in enumerate(AB_CASES):
        seed = 100 * i + int.from_bytes(os.urandom(2), "little")  # fresh data in each run
        times, ok = ab_times(dtype, n, reps, seed)
        out["cases"][dtype] = {"ms": times, "ok": ok}
        print(dtype, f"median {statistics.median(times):.3f} ms", "ok" if ok else "WRONG",
              flush=True)
    Path(path).write_text(json.dumps(out, indent=1))


def ab_report(new_paths, old_paths, out_dir):
    """The median of every run of each tree per case, and the ratio new/old; JSON in
    ``out_dir`` named by device and date."""
    sides = {name: [json.loads(Path(p).read_text()) for p in paths]
             for name, paths in (("new", new_paths), ("old", old_paths))}
    first = sides["new"][0]
    report = {"device": first["device"], "date": first["date"], "n": first["n"],
              "trees": {s: rows[0]["tree"] for s, rows in sides.items()}, "cases": {}}
    print(f"\n{'case (2^28)':<14} {'new ms':>10} {'old ms':>10} {'new/old':>8} {'runs':>4} "
          f"{'ok':>4}")
    for case in AB_CASES:
        row = {}
        for side, rows in sides.items():
            times = [t for r in rows for t in r["cases"][case]["ms"]]
            row[side] = {"median_ms": statistics.median(times), "runs": len(times),
                         "ok": all(r["cases"][case]["ok"] for r in rows)}
        row["ratio"] = row["new"]["median_ms"] / row["old"]["median_ms"]
        report["cases"][case] = row
        ok = row["new"]["ok"] and row["old"]["ok"]
        print(f"{case!s:<14} {row['new']['median_ms']:10.3f} {row['old']['median_ms']:10.3f} "
              f"{row['ratio']:8.4f} {row['new']['runs']:4d} {ok!s:>4}")
    device = report["device"].replace(" ", "_")
    out = Path(out_dir) / f"local_sort_ab_{device}_{report['date'][:10]}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    print("wrote", out)


def plot(result, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    for dtype in ["uint32", "float32", "uint64", "float64", "uint32+uint32"]:
        rows = [r for r in result["rows"] if r["dtype"] == dtype and r["n"] & (r["n"] - 1) == 0]
        if not rows:
            continue
        ax.plot([r["n"] for r in rows], [r["distsort_gkeys"] for r in rows], "o-",
                label=f"distsort {dtype}")
        if dtype == "uint32":
            ax.plot([r["n"] for r in rows], [r["cupy_sort_gkeys"] for r in rows], "s--",
                    label="cupy.sort uint32 (radix, not in place)")
            sub = [r for r in rows if "per_step_gkeys" in r]
            ax.plot([r["n"] for r in sub], [r["per_step_gkeys"] for r in sub], "x:",
                    label="bitonic, one launch per step, uint32")
            sub = [r for r in rows if "lexsort_gkeys" in r]
            ax.plot([r["n"] for r in sub], [r["lexsort_gkeys"] for r in sub], "^:",
                    label="cupy.lexsort uint32 (thrust merge sort)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("keys")
    ax.set_ylabel("Gkeys/s")
    ax.set_title(f"Local sort on {result['device']} ({result['date']})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--huge-gb", type=float, default=0)
    ap.add_argument("--variants", action="store_true")
    ap.add_argument("--ab", metavar="JSON", help="time AB_CASES at 2^28 only, write JSON")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--ab-report", nargs="+", metavar="JSON", help="the new tree's --ab files")
    ap.add_argument("--old", nargs="+", metavar="JSON", help="the old tree's --ab files")
    ap.add_argument("--report-dir", default=str(HERE / "results"))
    args = ap.parse_args()
    if args.ab:
        return ab_side(args.ab, args.reps)
    if args.ab_report:
        return ab_report(args.ab_report, args.old, args.report_dir)
    dev = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    date = datetime.date.today().isoformat()
    result = {"device": dev, "date": date, "rows": [], "method":
              "CUDA events, 1 warm-up, median of 5 runs (3 above 2^26; 1 for per-step and "
              "lexsort), input refilled with fresh random keys before each run"}
    lo = 16
    plan = [("uint32", 30), ("float32", 30), ("uint64", 29), ("float64", 29)]
    if args.quick:
        plan = [("uint32", 28), ("float64", 28)]
        lo = 20
    for dtype, hi in plan:
        for p in range(lo, hi + 1, 4 if args.quick else 1):
            n = 1 << p
            others = (p % 2 == 0) and not args.quick
            row = bench_keys(dtype, n, 5 if p <= 26 else 3, others, seed=p)
            result["rows"].append(row)
            print(json.dumps(row), flush=True)
    for n in [(1 << 28) + 1, 3 << 26]:
        row = bench_keys("uint32", n, 3, False, seed=7)
        result["rows"].append(row)
        print(json.dumps(row), flush=True)
    for p in ([28] if args.quick else range(16, 29, 2)):
        row = bench_kv(1 << p, 5 if p <= 26 else 3, seed=p)
        result["rows"].append(row)
        print(json.dumps(row), flush=True)
    result["memory"] = memory_check(1 << 28)
    result["memory_kv"] = memory_check(1 << 28, values=True)
    print(json.dumps(result["memory"]), json.dumps(result["memory_kv"]), flush=True)
    if args.variants:
        result["variants"] = variants(1 << 28, 5)
        best = min((v for v in result["variants"] if v["ok"]),  # all three dtypes
                   key=lambda v: sum(v[d]["distsort_ms"] for d in ("uint32", "float64",
                                                                    "uint32+uint32")))
        result["best_tuning"] = best["tuning"]
    if args.huge_gb:
        result["huge"] = huge(args.huge_gb)
        print(json.dumps(result["huge"]), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"local_sort_{dev.replace(' ', '_')}_{date}"
    (out / f"{stem}.json").write_text(json.dumps(result, indent=1))
    plot(result, out / f"{stem}.png")
    print(f"\n{'dtype':<14} {'n':>12} {'passes':>6} {'ms':>10} {'Gkeys/s':>8} {'cupy ms':>10}")
    for r in result["rows"]:
        cupy_ms = f"{r.get('cupy_sort_ms', r.get('cupy_argsort_take_ms', 0)):.2f}"
        print(f"{r['dtype']!s:<14} {r['n']:12d} {r['passes']:6d} {r['distsort_ms']:10.2f} "
              f"{r['distsort_gkeys']:8.2f} {cupy_ms:>10} {r['distsort_ok']}")


if __name__ == "__main__":
    main()
