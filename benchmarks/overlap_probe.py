"""How much of a pass is global memory, how much the phases, and how much they overlap.

    python benchmarks/overlap_probe.py [--n 268435456] [--pairs uint32+uint32 float64]

Times every pass of one sort three ways, with the kernel compiled under
``DISTSORT_PROBE`` (``sort.cu``): 0 the pass itself, 1 its global loads and stores
only, 2 its phases only (on whatever shared memory holds).  Per pass kind it prints
the three times: where full = io + phases, the two do not overlap at all; where
full = max(io, phases), they overlap completely.  The full sort is checked against
``cupy.sort`` / ``cupy.lexsort``.
"""
from __future__ import annotations

import argparse
import functools
import json
from collections import defaultdict
from pathlib import Path

import cupy
import numpy as np

from pass_profile import MODES, fresh, launches, timed_sort

from distsort.backends.gpu import launcher
from distsort.backends.gpu.kernels.loader import Module


def pass_times(build, keys, values, reps):
    """Median ms of each pass (``reps`` runs after a warm-up), the arrays refilled with
    fresh random elements before every run."""
    times = []
    for r in range(reps + 1):  # the first run compiles and warms up
        keys[:] = fresh(keys.size, keys.dtype, 100 + r)
        if values is not None:
            values[:] = fresh(values.size, values.dtype, 200 + r)
        times.append([ms for _, ms in timed_sort(keys, values, build)])
    return np.median(np.array(times[1:]), axis=0)


def probe(pair, n, reps, defines=(), probes=(0, 1, 2)):
    """Per-pass times of a sort of ``n`` elements of ``pair`` ("uint32", "uint32+uint32") under each
    of ``probes``, and a check of the library's kernel (probe 0) on fresh data."""
    kd, _, vd = pair.partition("+")
    vd = vd or None
    keys, values = fresh(n, kd, 1), None if vd is None else fresh(n, vd, 2)
    cfg, packed = launcher.kernel_shape(keys, values)

    def build(*extra):  # the kernels of each block shape under `defines` and `extra`
        @functools.cache
        def module(shape, packed):
            return Module(kd, vd, shape.items_per_thread, shape.threads, shape.min_blocks,
                          shape.tile_bits, defines=(*extra, *defines), packed=packed)
        return module

    rows = {}
    for probe_id in probes:
        rows[probe_id] = pass_times(build(f"-DDISTSORT_PROBE={probe_id}"), keys, values, reps)
    library = build()  # the library's kernels (probe 0)
    plan = [p for p, _ in launches(keys, values, library)]
    keys, values = fresh(n, kd, 3), None if vd is None else fresh(n, vd, 4)
    ref = cupy.sort(keys) if vd is None else cupy.lexsort(cupy.stack([values, keys]))
    refk = ref if vd is None else keys[ref]
    refv = None if vd is None else values[ref]
    for _, go in launches(keys, values, library):
        go()
    ok = bool((keys == refk).all()) and (vd is None or bool((values == refv).all()))
    kinds = defaultdict(lambda: np.zeros(4))
    out = []
    for i, p in enumerate(plan):
        kind = "ENDS" if p.pre else MODES[p.mode]
        t = [rows[j][i] if j in rows else np.nan for j in (0, 1, 2)]
        kinds[kind] += [1, *t]
        out.append({"pass": list(p), "kind": kind, "full_ms": t[0], "io_ms": t[1],
                    "phases_ms": t[2]})
    total = {j: float(rows[j].sum()) if j in rows else float("nan") for j in (0, 1, 2)}
    print(f"{pair} n={n} {'packed ' * packed}{' '.join(defines)}: {len(plan)} passes, "
          f"full {total[0]:.2f} ms, io only {total[1]:.2f}, phases only {total[2]:.2f}, "
          f"checked {ok}")
    print(f"  {'kind':6s} {'passes':>6s} {'full':>8s} {'io':>8s} {'phases':>8s}  (ms per pass)")
    for kind, (c, f, io, ph) in kinds.items():
        print(f"  {kind:6s} {int(c):6d} {f / c:8.3f} {io / c:8.3f} {ph / c:8.3f}")
    return {"pair": pair, "n": n, "config": cfg._asdict(), "packed": packed, "ok": ok,
            "passes": out}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 28)
    ap.add_argument("--pairs", nargs="+", default=["uint32+uint32", "float64", "uint32"])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--define", action="append", default=[],
                    help="an extra -D option of the kernels (repeatable)")
    ap.add_argument("--full-only", action="store_true", help="time the library's passes only")
    a = ap.parse_args()
    defines = tuple(f"-D{d}" for d in a.define)
    probes = (0,) if a.full_only else (0, 1, 2)
    res = [probe(pair, a.n, a.reps, defines, probes) for pair in a.pairs]
    if a.json:
        dev = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
        Path(a.json).write_text(json.dumps({"device": dev, "results": res}, indent=1,
                                           default=float))


if __name__ == "__main__":
    main()
