"""One host's CPU cores against what a user of NumPy, pandas or dask.dataframe would do
instead, each case in one run against its alternative, every result checked against NumPy.

    python benchmarks/one_host.py                  # the full set (about 1.2 GB to 5 GB held)
    python benchmarks/one_host.py --quick          # small sizes (a smoke test)
    python benchmarks/one_host.py --cases plain --max-plain 200000000

Cases (issue 53):
- ``readme``: README's snippet, 10^8 float64 from ``da.random`` in 10 chunks,
  ``sort(x)[:5].compute()`` against ``numpy.sort(x.compute())[:5]``;
- ``plain``: plain NumPy float32 from 10^7 to 4·10^8 elements against ``numpy.sort``
  (``--max-plain`` caps the size where memory is short);
- ``tables``: 10^7 rows, ``sort_by_key(key, (v1, v2), stable=True)`` against pandas'
  ``sort_values("key", kind="stable")`` and ``dask.dataframe.sort_values`` on the same
  chunks, and ``lexsort((k2, key))`` against ``numpy.lexsort`` (pandas and
  dask.dataframe where installed);
- ``command``: ``distsort sort`` of a 1.4 GiB float32 ``.npy`` against NumPy's load,
  sort and save, each in a new process;
- ``large`` (only when named): a plain float32 array of ``--large-gib`` GiB (16 by
  default; about 4x that held) against ``numpy.sort`` (and polars where installed).

Times are wall seconds; ``ratio`` is distsort's over the alternative's.  The machine
is named by its core count (``cpu-<cores>cores``) unless ``--device`` says otherwise.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from driver import parser, print_table, save_rows, timed_command


#: CPU seconds of this process's threads in the last :func:`_timed` call: on a shared
#: machine the wall times depend on the load, the CPU seconds much less.
LAST_CPU = [0.0]


def _timed(fn):
    start, cpu = time.perf_counter(), time.process_time()
    out = fn()
    LAST_CPU[0] = time.process_time() - cpu
    return time.perf_counter() - start, out


def _row(case, size, mine, theirs, against, cpu=None, **extra):
    """A result row; ``cpu``: (distsort's, the alternative's) CPU seconds, where both ran
    in this process."""
    row = dict(case=case, n=size, distsort_s=round(mine, 3), other_s=round(theirs, 3),
               against=against, ratio=round(mine / theirs, 3), load=os.getloadavg()[0],
               **extra)
    if cpu is not None:
        row.update(distsort_cpu_s=round(cpu[0], 3), other_cpu_s=round(cpu[1], 3))
    print(row, flush=True)  # as it comes: a long run shows its progress
    return row


def readme(n, chunks):
    import dask.array as da

    import distsort
    x = da.random.default_rng(0).random(n, chunks=n // chunks)  # as README has it
    other, ref = _timed(lambda: np.sort(x.compute()))
    other_cpu = LAST_CPU[0]
    mine, head = _timed(lambda: distsort.sort(x)[:5].compute())  # noqa: PLW0108  (the sort timed)
    cpu = (LAST_CPU[0], other_cpu)
    assert np.array_equal(head, ref[:5]), "distsort's first five differ from numpy.sort's"
    assert np.array_equal(distsort.sort(x).compute(), ref), "distsort differs from numpy.sort"
    return [_row("readme sort(x)[:5]", n, mine, other, "x.compute() + numpy.sort", cpu,
                 chunks=chunks, dtype="float64")]


def plain(sizes, rng):
    import distsort
    rows = []
    for n in sizes:
        a = rng.random(n, dtype=np.float32)
        other, ref = _timed(lambda a=a: np.sort(a))
        other_cpu = LAST_CPU[0]
        mine, out = _timed(lambda a=a: distsort.sort(a))
        assert np.array_equal(out, ref), "distsort differs from numpy.sort"
        del out, ref
        rows.append(_row("plain float32", n, mine, other, "numpy.sort",
                         (LAST_CPU[0], other_cpu), dtype="float32"))
    return rows


def large(gib, rng):
    """One plain float32 array of ``gib`` GiB: distsort against ``numpy.sort`` and, where
    installed, polars' sort of a Series (multithreaded)."""
    import distsort
    n = int(gib * 2**30) // 4
    a = rng.random(n, dtype=np.float32)
    other, ref = _timed(lambda: np.sort(a))
    other_cpu = LAST_CPU[0]
    mine, out = _timed(lambda: distsort.sort(a))
    assert np.array_equal(out, ref), "distsort differs from numpy.sort"
    del out
    rows = [_row("large float32", n, mine, other, "numpy.sort", (LAST_CPU[0], other_cpu),
                 dtype="float32", bytes=n * 4)]
    try:
        import polars as pl
    except ImportError:
        return rows
    series = pl.Series(a)
    theirs, got = _timed(series.sort)
    assert np.array_equal(got.to_numpy(), ref), "polars differs from numpy.sort"
    rows.append(_row("large float32", n, mine, theirs, "polars Series.sort",
                     dtype="float32", bytes=n * 4))
    return rows


def _frame_sorts(key, v1, v2, chunks):
    """Seconds of pandas' and dask.dataframe's stable sort by ``key`` (None where not
    installed), and pandas' result."""
    try:
        import pandas as pd
    except ImportError:
        return None, None, None
    df = pd.DataFrame({"key": key, "v1": v1, "v2": v2})
    pandas_s, ref = _timed(lambda: df.sort_values("key", kind="stable"))
    try:
        import dask.dataframe as dd
    except ImportError:
        return pandas_s, None, ref
    ddf = dd.from_pandas(df, npartitions=chunks)
    dask_s, got = _timed(lambda: ddf.sort_values("key").compute())
    assert np.array_equal(got["key"].to_numpy(), ref["key"].to_numpy())
    return pandas_s, dask_s, ref


def tables(n, chunks, rng):
    import distsort
    key = rng.random(n, dtype=np.float32)
    v1, v2 = rng.integers(0, 2**62, size=n), rng.random(n)
    mine, (sk, (s1, s2)) = _timed(lambda: distsort.sort_by_key(key, (v1, v2), stable=True))
    perm = np.argsort(key, kind="stable")
    assert all(np.array_equal(a, b[perm]) for a, b in ((sk, key), (s1, v1), (s2, v2)))
    pandas_s, dask_s, _ = _frame_sorts(key, v1, v2, chunks)
    rows = []
    what = "sort_by_key(key, (v1, v2), stable=True)"
    if pandas_s is not None:
        rows.append(_row(what, n, mine, pandas_s, "pandas sort_values(kind='stable')"))
    if dask_s is not None:
        rows.append(_row(what, n, mine, dask_s, f"dask.dataframe sort_values, {chunks} parts"))
    k2 = rng.integers(0, 1000, size=n)
    other, ref = _timed(lambda: np.lexsort((key, k2)))
    mine, got = _timed(lambda: distsort.lexsort((key, k2)))
    assert np.array_equal(got, ref), "distsort.lexsort differs from numpy.lexsort"
    rows.append(_row("lexsort((key, k2))", n, mine, other, "numpy.lexsort"))
    try:
        import pandas as pd
    except ImportError:
        return rows
    df = pd.DataFrame({"key": key, "k2": k2})
    other, _ = _timed(lambda: df.sort_values(["k2", "key"], kind="stable"))
    rows.append(_row("lexsort((key, k2))", n, mine, other,
                     "pandas sort_values(['k2', 'key'], kind='stable')"))
    return rows


_NUMPY_SORT = ("import sys, numpy as np; a = np.load(sys.argv[1]); "
               "np.save(sys.argv[2], np.sort(a))")


def command(nbytes, rng):
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        src, mine_out, theirs_out = (os.path.join(tmp, f) for f in
                                     ("in.npy", "distsort.npy", "numpy.npy"))
        np.save(src, rng.random(nbytes // 4, dtype=np.float32))
        env = dict(os.environ)
        theirs, _ = timed_command([sys.executable, "-c", _NUMPY_SORT, src, theirs_out], env)
        mine, _ = timed_command([sys.executable, "-m", "distsort.cli", "sort", src, mine_out],
                                env)
        same = subprocess.run(["cmp", "-s", mine_out, theirs_out], check=False).returncode
        assert same == 0, "the command's output differs from numpy.sort's"
    return [_row("command distsort sort", nbytes // 4, mine, theirs,
                 "numpy load + sort + save", dtype="float32", bytes=nbytes)]


CASES = ("readme", "plain", "tables", "command", "large")


def warm_up(rng):
    """Each call once on small inputs, untimed: imports, numba's compiled merges
    (cached on disk after the first process) and thread pools are ready."""
    import dask.array as da

    import distsort
    a = rng.random(10**6, dtype=np.float32)
    distsort.sort(a)
    distsort.sort(da.from_array(a.astype(np.float64), chunks=10**5)).compute()
    distsort.sort_by_key(a, (a.view(np.int32), a), stable=True)
    distsort.lexsort((a, a.view(np.int32) % 7))


def main(argv=None):
    p = parser(__doc__)
    p.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES[:-1]))
    p.add_argument("--large-gib", type=float, default=16, help="the large case's GiB")
    p.add_argument("--max-plain", type=float, default=4e8,
                   help="largest plain array (elements; mind the memory: 5 copies held)")
    p.add_argument("--device", help="the machine's name in the results (default: cpu-<cores>cores)")
    args = p.parse_args(argv)
    rng = np.random.default_rng(53)
    quick = args.quick
    warm_up(rng)
    rows = []
    if "readme" in args.cases:
        rows += readme(10**6 if quick else 10**8, 10)
    if "plain" in args.cases:
        sizes = [10**6] if quick else [10**7, 10**8, 2 * 10**8, 4 * 10**8]
        rows += plain([s for s in sizes if s <= args.max_plain], rng)
    if "tables" in args.cases:
        rows += tables(10**5 if quick else 10**7, 10, rng)
    if "command" in args.cases:
        rows += command(2**20 if quick else int(1.4 * 2**30), rng)
    if "large" in args.cases:
        rows += large(1 / 64 if quick else args.large_gib, rng)
    print_table(rows, [("case", "{}"), ("n", "{:.3g}"), ("distsort_s", "{:.2f}"),
                       ("other_s", "{:.2f}"), ("ratio", "{:.2f}"), ("against", "{}")])
    device = args.device or f"cpu-{os.cpu_count()}cores"
    path = save_rows(rows, "one_host", device, args.out, cores=os.cpu_count(),
                     load=os.getloadavg(), numpy=np.__version__)
    print("saved", path)


if __name__ == "__main__":
    main()
