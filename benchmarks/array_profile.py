"""Where the time of ``distsort.sort/argsort/sort_by_key(x)`` of a CuPy array goes on
one GPU: the whole call (a CuPy array in, computed at once), the graph alone (the same
array wrapped, lazy), and the steps of the one-device sort (gather copy, order codes,
radix sort, decode) timed one by one; CuPy's own calls beside them.  ``--profile N``:
the Python functions of N calls of ``distsort.sort(x)`` by cumulative time (cProfile).

    python benchmarks/array_profile.py --log2 28
    python benchmarks/array_profile.py --log2 24 --profile 300
"""
from __future__ import annotations

import argparse
import json

from distributed_sort import make_chunk
from driver import median_time


def take_both(k, v):
    import cupy
    order = cupy.argsort(k, kind="stable")
    return k[order], v[order]


def main(argv=None):
    import cupy

    import distsort
    from distsort.inputs import wrap_plain
    from distsort.backends.gpu.local_sort import decode_codes, encode_codes
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--log2", type=int, default=28)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--profile", type=int, default=0, help="calls to profile (0: none)")
    args = p.parse_args(argv)
    n = 1 << args.log2
    x = make_chunk(1, n, "float32")
    k32, v32 = make_chunk(2, n, "uint32"), make_chunk(3, n, "uint32")

    def sync():
        cupy.cuda.Device().synchronize()

    def t(fn):
        return round(median_time(fn, args.runs, 1, sync)[0] * 1e3, 3)

    def steps():
        c = cupy.concatenate([x])
        codes = encode_codes(c, in_place=True)
        codes.sort()
        return decode_codes(codes, x.dtype)

    rows = {
        "cupy.sort": t(lambda: cupy.sort(x)),
        "distsort.sort (computed at once)": t(lambda: distsort.sort(x)),
        "distsort.sort graph only": t(lambda: distsort.sort(wrap_plain(x))),
        "step: gather copy": t(lambda: cupy.concatenate([x])),
        "step: copy + encode": t(lambda: encode_codes(cupy.concatenate([x]), in_place=True)),
        "step: copy + encode + sort + decode": t(steps),
        "cupy.argsort stable": t(lambda: cupy.argsort(x, kind="stable")),
        "distsort.argsort (computed at once)": t(lambda: distsort.argsort(x)),
        "step: argsort of codes": t(lambda: cupy.argsort(encode_codes(x, canonical=True))),
        "step: arange int64": t(lambda: cupy.arange(n, dtype="int64")),
        "step: gather keys by perm": t(lambda: x[cupy.argsort(x)]),
        "argsort + 2 takes u32": t(lambda: take_both(k32, v32)),
        "distsort.sort_by_key stable u32 (computed at once)":
            t(lambda: distsort.sort_by_key(k32, v32, stable=True)),
    }
    print(json.dumps({"n": n, "ms": rows}, indent=1))
    if args.profile:
        profile(lambda: distsort.sort(x), args.profile, sync)


def profile(call, calls, sync):
    """The top of cProfile's tables of ``calls`` calls of ``call``, by cumulative time and
    by time in the function itself."""
    import cProfile
    import pstats
    with cProfile.Profile() as prof:
        for _ in range(calls):
            call()
        sync()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(40)
    pstats.Stats(prof).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
