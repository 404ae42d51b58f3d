"""The largest arrays one GPU sorts: with a copy (``distsort.sort(x)``) and in place
(``distsort.sort(x, out=x)``), beside ``cupy.sort``.

    python benchmarks/in_place_largest.py --gb 60 120 --out in_place_largest.json
    python benchmarks/in_place_largest.py --gb 60 --dtype float32

For each size, one array of ``--dtype`` is allocated on the GPU and filled with random
values in slices (no second array of its size), then each form sorts it: ``cupy.sort``,
the copying form (the copy is freed before the next form), and the in-place form,
each on fresh data.  A form that cannot run says why in its row (``refused``: the
error's type and first words).  No NumPy copy fits beside such arrays, so every
result is checked on the GPU, in slices: sorted (each slice and across the slices'
ends, NaNs last) and a permutation of the input by count and two order-free checksums
(the sum and the sum of squares of the values' bits, modulo 2^64).
"""
from __future__ import annotations

import time

from driver import parser, print_table, save_rows

#: Elements per slice of the fills and the checks.
SLICE = 1 << 27


def fill(x, seed):
    import cupy
    rng = cupy.random.default_rng(seed)
    bits = x.view(f"u{x.dtype.itemsize}")
    for a in range(0, x.size, SLICE):
        m = min(SLICE, x.size - a)
        if x.dtype.kind == "f":
            x[a:a + m] = rng.standard_normal(m, dtype=x.dtype)
        else:
            bits[a:a + m] = (rng.random(m) * float(1 << (8 * x.itemsize))).astype(bits.dtype)


def checksums(x):
    """Count and two order-free checksums of ``x``'s bits, modulo 2^64."""
    import cupy
    u = x.view(f"u{x.dtype.itemsize}")
    total = square = 0
    for a in range(0, x.size, SLICE):
        part = u[a:a + SLICE].astype(cupy.uint64)
        total = (total + int(part.sum(dtype=cupy.uint64))) % (1 << 64)
        square = (square + int((part * part).sum(dtype=cupy.uint64))) % (1 << 64)
    return x.size, total, square


def is_sorted(x):
    """Whether ``x`` is ascending (NaNs last), checked in slices that overlap by one."""
    import cupy
    for a in range(0, x.size - 1, SLICE):
        part = x[a:a + SLICE + 1]
        if x.dtype.kind == "f":
            nan = cupy.isnan(part)
            ok = bool(((part[1:] >= part[:-1]) | nan[1:]).all()) and not bool(
                (nan[:-1] & ~nan[1:]).any())
        else:
            ok = bool((part[1:] >= part[:-1]).all())
        if not ok:
            return False
    return True


def sort_form(form, x):
    """Sort ``x`` by ``form``; ``(seconds, result)``."""
    import cupy

    import distsort
    cupy.cuda.Device().synchronize()
    start = time.perf_counter()
    if form == "cupy.sort":
        out = cupy.sort(x)
    elif form == "copy":
        out = distsort.sort(x)
    else:
        out = distsort.sort(x, out=x)
    cupy.cuda.Device().synchronize()
    return time.perf_counter() - start, out


def row_of(form, x, seed):
    """One form's row on ``x`` refilled from ``seed``."""
    import cupy
    fill(x, seed)
    before = checksums(x)
    row = {"form": form, "dtype": str(x.dtype), "elements": x.size, "gb": x.nbytes / 1e9}
    try:
        seconds, out = sort_form(form, x)
    except MemoryError as err:
        cupy.get_default_memory_pool().free_all_blocks()
        row["refused"] = f"{type(err).__name__}: {str(err)[:160]}"
        return row
    row["seconds"] = seconds
    row["checked"] = is_sorted(out) and checksums(out) == before
    del out
    cupy.get_default_memory_pool().free_all_blocks()
    return row


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--gb", type=float, nargs="+", default=[60.0, 120.0],
                   help="array sizes in GB (10^9 bytes)")
    p.add_argument("--dtype", default="uint32", choices=["uint32", "float32", "uint64",
                                                        "float64"])
    p.add_argument("--forms", nargs="+", default=["cupy.sort", "copy", "in_place"],
                   choices=["cupy.sort", "copy", "in_place"])
    args = p.parse_args()
    import cupy
    import numpy as np

    import distsort
    warm = cupy.arange(1 << 20, dtype=args.dtype)[::-1].copy()  # kernels loaded before timing
    distsort.sort(warm, out=warm, local="bitonic")
    distsort.sort(warm)
    rows = []
    for gb in args.gb:
        n = int(gb * 1e9) // np.dtype(args.dtype).itemsize
        x = cupy.empty(n, dtype=args.dtype)
        free = cupy.cuda.runtime.memGetInfo()[0]
        for seed, form in enumerate(args.forms):
            row = row_of(form, x, seed)
            row["free_gb_beside_input"] = free / 1e9
            rows.append(row)
            print(row, flush=True)
        del x
        cupy.get_default_memory_pool().free_all_blocks()
    print_table(rows, [(c, "{}") for c in ("form", "dtype", "gb", "seconds", "checked", "refused")])
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode().split()[-1]
    print(save_rows(rows, "in_place_largest", name, args.out,
                    clock="wall, device synchronized", runs=1))


if __name__ == "__main__":
    main()
