"""Static counts of the GPU kernels without a GPU: registers, spills and SASS instructions.

Compiles ``bitonic_pass`` (``packed_pass`` for uint32+uint32) as the loader does
(``distsort/backends/gpu/kernels/loader.py``: the source of ``sort.cu``, ``-std=c++17 -I<kernels>``,
one instantiation per dtype pair under a tuning table) with
``nvcc -cubin -arch=sm_XX -Xptxas -v``, disassembles it with ``cuobjdump -sass``
and prints, per kernel: registers, spill bytes, instructions in all and in the phases
(``run_phase``), and every loop (a backward branch) with its instruction mix and its
instructions per element (a phase loop handles E elements per iteration, a global load
or store loop one batch).  A loop that contains another (a run-time phase: its steps
are an inner loop over a switch) is executed as  outer - inner + steps * (one case);
the compile-time phases are straight-line loop bodies.

    python benchmarks/sass_stats.py [--arch 90] [--major 9] [--source path/to/sort.cu]

Needs nvcc and cuobjdump (``pip install nvidia-cuda-cuobjdump`` where the CUDA
toolkit lacks it).
"""
from __future__ import annotations

import argparse
import collections
import re
import subprocess
import tempfile
from pathlib import Path


from distsort.backends.gpu import launch_plan as launch, tuning
from distsort.backends.gpu.kernels.loader import HERE as KERNELS, scalar_type

ROOT = Path(__file__).resolve().parents[1]

PAIRS = [("uint32", None), ("uint32", "uint32"), ("float64", None)]


def instantiation(key, value, cfg, packed, with_tile=True):
    k = scalar_type(key)
    v = scalar_type(value) if value else "NoValue"
    ku = k.split("<")[1].split(",")[0]
    vu = scalar_type(value).split("<")[1].split(",")[0] if value else "u8_t"
    targs = f"{k}, {v}, {cfg.items_per_thread}, {cfg.threads}, {cfg.min_blocks}"
    if with_tile:  # v6 on: the tuned tile is a template parameter
        targs += f", {cfg.tile_bits}"
    if packed:  # the packed kernels, all four
        return "".join(f"template __global__ void packed_pass<{targs}, {ends}>(u32_t*, u32_t*, "
                       "long long, long long, int, int, int, int, int, int, int, u64_t);\n"
                       for ends in range(4))
    return (f"template __global__ void bitonic_pass<{targs}>({ku}*, {vu}*, long long, "
            "long long, int, int, int, int, int, int, u64_t);\n")


def op(text):
    words = [w for w in text.split() if not w.startswith("@")]
    return words[0].split(".")[0] if words else ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="90")
    ap.add_argument("--major", type=int, default=9, help="tuning table (tuning.TABLES)")
    ap.add_argument("--source", default=str(KERNELS / "sort.cu"))
    ap.add_argument("--no-tile-param", action="store_true",
                    help="kernels before v6 (no TB template parameter)")
    args = ap.parse_args()
    tab = tuning.table(args.major)
    src = Path(args.source).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        cu = Path(tmp) / "inst.cu"
        text = f'#include "{src}"\n'
        for key, value in PAIRS:
            cfg, packed = launch.kernel_shape(tab, key, value, 1 << 28)
            print(f"{key}+{value}: {cfg}")
            text += instantiation(key, value, cfg, packed, not args.no_tile_param)
        cu.write_text(text)
        cubin = Path(tmp) / "k.cubin"
        r = subprocess.run(["nvcc", "-std=c++17", f"-arch=sm_{args.arch}", "-cubin",
                            "-Xptxas", "-v", f"-I{src.parent}", str(cu), "-o", str(cubin)],
                           capture_output=True, text=True, check=True)
        for line in r.stderr.splitlines():
            if "registers" in line or "spill" in line or "Compiling entry" in line:
                print("  ptxas:", line.split("info    :")[-1].strip())
        sass = subprocess.run(["cuobjdump", "-sass", str(cubin)], capture_output=True,
                              text=True, check=True).stdout
    funcs, cur = {}, None
    for line in sass.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m and cur is not None:
            cur.append((int(m.group(1), 16), m.group(2).strip()))
    for name, ins in funcs.items():
        calls = [int(m.group(1), 16) for _, t in ins
                 if (m := re.search(r"CALL\.REL\.NOINC (0x[0-9a-f]+)", t))]
        start = min(calls) if calls else ins[-1][0] + 1
        nphase = sum(a >= start for a, _ in ins)
        print(f"\n{name}: {len(ins)} instructions, {nphase} in run_phase")
        for a, t in ins:
            m = re.search(r"BRA (0x[0-9a-f]+)", t)
            if not (m and op(t) == "BRA") or int(m.group(1), 16) >= a:
                continue
            lo = int(m.group(1), 16)
            body = [op(x) for y, x in ins if lo <= y <= a]
            c = collections.Counter(body)
            kind = ("load" if c["LDG"] else "store" if c["STG"] else
                    "phase" if c["LDS"] and c["STS"] else "inner")
            print(f"  {'run_phase' if lo >= start else 'body':9s} {kind:5s} loop {lo:#7x}-{a:#7x}:"
                  f" {len(body):4d} instr  LDG {c['LDG']} STG {c['STG']} LDS {c['LDS']}"
                  f" STS {c['STS']} MNMX {c['VIMNMX'] + c['IMNMX']} IMAD {c['IMAD']}"
                  f" SEL {c['SEL']} ISETP {c['ISETP']} BRX {c['BRX']}")


if __name__ == "__main__":
    main()
