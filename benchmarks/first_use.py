"""The first GPU sort of a fresh process against the later ones: what compiling costs.

    python benchmarks/first_use.py --out first_use.json
    python benchmarks/first_use.py --modes shipped --log2 24 28

Each case runs in a fresh Python process with an empty CuPy kernel cache (a fresh
``CUPY_CACHE_DIR``, as on a fresh machine): the array is made (CuPy compiles its own
kernels for that, before the clock starts), then the first sort is timed, then
``--runs`` later sorts (median).  ``mode`` ``shipped``: the kernels come from the
binaries shipped in the package (``distsort/backends/gpu/kernels/shipped``);
``nvrtc``: the shipped binaries are ignored, so the kernels compile on first use, as
before they were shipped.  Every result is compared element for element with
``cupy.sort``.  Each row says how many modules NVRTC compiled (the loader's INFO lines).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from driver import parser, print_table, save_rows

#: case: (call, dtype).  ``in_place``: ``distsort.sort(x, out=x, local="bitonic")`` (the
#: bitonic kernels alone); ``copy``: ``distsort.sort(x)`` (CUB's radix sort and the float
#: order fix-ups of ``float_bounds.cu``); ``argsort``: int64 positions with the keys.
CASES = {"in_place:float32": ("in_place", "float32"), "in_place:uint64": ("in_place", "uint64"),
         "copy:float32": ("copy", "float32"), "argsort:float32": ("argsort", "float32")}


def child(case, mode, log2, runs):
    """One case in this (fresh) process; prints its row as JSON."""
    import logging
    import statistics
    import time

    import cupy
    import numpy as np

    import distsort
    from distsort.backends.gpu.kernels import shipped

    if mode == "nvrtc":
        shipped.find = lambda *args, **kwargs: "ignored by benchmarks/first_use.py"
    compiles = []

    class Count(logging.Handler):
        def emit(self, record):
            if "with NVRTC" in record.getMessage():
                compiles.append(record.getMessage())

    logging.getLogger("distsort.backends.gpu.kernels.loader").addHandler(Count())
    logging.getLogger("distsort.backends.gpu.kernels.loader").setLevel(logging.INFO)
    call, dtype = CASES[case]
    n = 1 << log2
    rng = cupy.random.default_rng()

    def fresh():
        if dtype == "float32":
            return rng.standard_normal(n, dtype=cupy.float32)
        return (rng.random(n) * 2.0**64).astype(cupy.uint64)

    def once():
        x = fresh()
        want = cupy.sort(x)
        cupy.cuda.Device().synchronize()
        start = time.perf_counter()
        if call == "in_place":
            got = distsort.sort(x, out=x, local="bitonic")
        elif call == "copy":
            got = distsort.sort(x)
        else:
            got = x[distsort.argsort(x, local="bitonic")]
        cupy.cuda.Device().synchronize()
        seconds = time.perf_counter() - start
        ok = bool(cupy.array_equal(got, want, equal_nan=True)) if dtype == "float32" \
            else bool(cupy.array_equal(got, want))
        return seconds, ok

    first, ok = once()
    later = [once() for _ in range(runs)]
    row = {"case": case, "mode": mode, "n": n, "first_s": first,
           "later_s": statistics.median(s for s, _ in later),
           "nvrtc_modules": len(compiles), "checked": ok and all(k for _, k in later),
           "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
           "numpy": np.__version__, "cupy": cupy.__version__}
    row["first_extra_s"] = row["first_s"] - row["later_s"]
    print(json.dumps(row))


def run_case(case, mode, log2, runs):
    """Run one case in a fresh process with an empty CuPy kernel cache; its row."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "CUPY_CACHE_DIR": cache}
        out = subprocess.run([sys.executable, __file__, "--child", case, "--mode", mode,
                              "--log2", str(log2), "--runs", str(runs)],
                             env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        return {"case": case, "mode": mode, "n": 1 << log2, "error": out.stderr[-2000:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    p.add_argument("--modes", nargs="+", default=["shipped", "nvrtc"],
                   choices=["shipped", "nvrtc"])
    p.add_argument("--log2", type=int, nargs="+", default=[24])
    p.add_argument("--child", help=argparse_hidden())
    p.add_argument("--mode", help=argparse_hidden())
    args = p.parse_args()
    if args.child:
        return child(args.child, args.mode, args.log2[0], args.runs)
    rows = [run_case(case, mode, log2, args.runs)
            for log2 in args.log2 for case in args.cases for mode in args.modes]
    print_table(rows, [(c, "{}") for c in ("case", "mode", "n", "first_s", "later_s",
                                            "first_extra_s", "nvrtc_modules", "checked")])
    device = next((r["device"] for r in rows if "device" in r), "GPU")
    print(save_rows(rows, "first_use", device.split()[-1], args.out,
                    runs=args.runs, clock="wall, device synchronized"))
    return None


def argparse_hidden():
    import argparse
    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
