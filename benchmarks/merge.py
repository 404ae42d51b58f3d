"""One merge of two sorted runs on the CPU: the numba merge against the NumPy fallback.

    python benchmarks/merge.py                # runs of 2^22 (2^23 keys out), one thread
    python benchmarks/merge.py --log2 20      # smaller runs

Times ``distsort.backends.cpu.numpy_backend._concat_sorted`` (what ``merge_low``/``merge_high``
run) for keys-only int64 and float64 chunks (signed codes) and keyed chunks
(int64 and float64 keys with int64 positions as values), with
``distsort.backends.cpu.merge.ENABLED`` on and off.  Prints ns per output element.
"""
from __future__ import annotations

import argparse

import numpy as np
from driver import timings

from distsort.backends import Order
from distsort.backends.cpu import merge
from distsort.backends.cpu import numpy_backend as nb


def best(fn, runs):
    """The fastest of ``runs`` runs of ``fn()``, in seconds (no warm-up)."""
    return min(timings(fn, runs, 0))


def runs_of(rng, m, dtype, order):
    def keys():
        if dtype == "float64":
            return rng.standard_normal(m)
        return rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, size=m, dtype=dtype)
    return (nb.prepare(keys(), None, order, start=0 if order.keyed else None),
            nb.prepare(keys(), None, order, start=m if order.keyed else None))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--log2", type=int, default=22, help="log2 of each run's length")
    p.add_argument("--runs", type=int, default=5, help="timed runs (the best is reported)")
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    m = 2**args.log2
    print(f"two sorted runs of 2^{args.log2}, 2^{args.log2 + 1} keys out; best of {args.runs}")
    for keyed in (False, True):
        for dtype in ("int64", "float64"):
            order = Order(keyed=keyed)
            x, y = runs_of(rng, m, dtype, order)
            line = f"{'keyed' if keyed else 'keys-only'} {dtype}:"
            results = []
            for enabled in ((True, False) if merge.numba is not None else (False,)):
                merge.ENABLED = enabled
                runs = args.runs if (enabled or not keyed) else 1  # lexsort is slow
                results.append(nb._concat_sorted(x, y, order))
                t = best(lambda x=x, y=y, order=order: nb._concat_sorted(x, y, order), runs)
                line += (f"  {'numba' if enabled else 'numpy'} {t * 1e3:8.1f} ms "
                         f"({t / (2 * m) * 1e9:5.1f} ns/key)")
            merge.ENABLED = merge.numba is not None
            same = all(np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))
                       for r in results[1:] for a, b in zip(
                           r if keyed else (r,), results[0] if keyed else (results[0],),
                           strict=True))
            print(line + ("" if same else "  RESULTS DIFFER"), flush=True)


if __name__ == "__main__":
    main()
