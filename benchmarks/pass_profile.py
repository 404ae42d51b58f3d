"""Time every pass of one GPU sort: where the local sort's time goes.

    python benchmarks/pass_profile.py [--n 268435456] [--dtype uint32] [--values uint32]

Runs the launches of ``distsort.backends.gpu.launcher.sort_inplace`` with a CUDA event
between launches, on fresh random keys (checked against ``cupy.sort`` afterwards), and
prints each pass (mode, top bit, global steps, blocks, ms) and the sum per mode.  With
``--runs 0`` it only sorts twice, untimed (under ``ncu``: the second sort's launches
are the ones to profile).
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import cupy
import numpy as np
from driver import cuda_span

from distsort.backends.gpu import launcher

MODES = {0: "SORT", 1: "MERGE", 2: "GROUP"}


def launches(keys, values, build=None):
    """``(pass, launch thunk)`` for each pass of an ascending sort of ``keys`` (one lane):
    the launches of ``launcher.sort_inplace``, one at a time; ``build(shape, packed)``: the
    kernels of a block shape from another build (``loader.Module(..., defines=...)``),
    default the library's."""
    return ((x.step, run) for x, run in launcher.launches(keys, values, build=build))


def fresh(n, dtype, seed):
    rs = cupy.random.RandomState(seed)
    if np.dtype(dtype).kind == "f":
        return rs.standard_normal(n, dtype=np.float64).astype(dtype)
    info = np.iinfo(dtype)
    return rs.randint(0, info.max, size=n, dtype=np.uint64).astype(dtype)


def timed_sort(keys, values, build=None):
    """``(pass, ms)`` of each pass of one sort (``launches``), timed by CUDA events."""
    spans = [(p, cuda_span(go)) for p, go in launches(keys, values, build)]
    cupy.cuda.Device().synchronize()
    return [(p, ms()) for p, ms in spans]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 28)
    ap.add_argument("--dtype", default="uint32")
    ap.add_argument("--values", default=None)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    keys = fresh(a.n, a.dtype, 1)
    values = None if a.values is None else fresh(a.n, a.values, 2)
    for _, go in launches(keys, values):  # warm-up (compiles)
        go()
    cupy.cuda.Device().synchronize()
    if a.runs == 0:
        keys[:] = fresh(a.n, a.dtype, 3)
        for _, go in launches(keys, values):
            go()
        cupy.cuda.Device().synchronize()
        return
    best = None
    for r in range(a.runs):
        keys = fresh(a.n, a.dtype, 10 + r)
        ref = cupy.sort(keys)
        values = None if a.values is None else fresh(a.n, a.values, 20 + r)
        rows = timed_sort(keys, values)
        assert bool((keys == ref).all()) or a.dtype.startswith("float") and bool(
            ((keys == ref) | (cupy.isnan(keys) & cupy.isnan(ref))).all()), "wrong order"
        total = sum(ms for _, ms in rows)
        best = rows if best is None or total < sum(ms for _, ms in best) else best
    per_mode = defaultdict(lambda: [0, 0.0])
    print(f"{a.dtype}{'+' + a.values if a.values else ''} n={a.n}: {len(best)} passes, "
          f"{sum(ms for _, ms in best):.2f} ms (best of {a.runs})")
    for p, ms in best:
        name = "ENDS" if p.pre else MODES[p.mode]  # a GROUP pass that ends a stage first
        per_mode[name][0] += 1
        per_mode[name][1] += ms
        print(f"  {name:5s} tb={p.tile_bits} top={p.top:2d} k={p.k:2d} mirror={p.mirror} "
              f"pre={p.pre:2d} blocks={p.blocks:7d} {ms:8.3f} ms")
    for m, (count, ms) in per_mode.items():
        print(f"  sum {m:5s}: {count:3d} passes {ms:8.3f} ms ({ms / count:.3f} ms each)")
    if a.json:
        Path(a.json).write_text(json.dumps({"dtype": a.dtype, "values": a.values, "n": a.n,
                                            "passes": [[*p, ms] for p, ms in best]}))


if __name__ == "__main__":
    main()
