"""sort_by_key's two orders of equal keys: by value and by position (stable).

    python benchmarks/sort_by_key_orders.py             # CPU: 2^22 float32 keys, chunks of 2^19
    python benchmarks/sort_by_key_orders.py --log2 24 --chunk-log2 21
    python benchmarks/sort_by_key_orders.py --quick
    python benchmarks/sort_by_key_orders.py --gpu --gpu-log2 26 27 28   # CuPy, one GPU

Keys with many duplicates (rounded random floats), values int32 and int64; Dask's
threaded scheduler with 2 threads.  Rows: ``by value`` (``stable=False``),
``stable`` (values of 4 bytes packed under their positions; 8-byte values: argsort
then a gather), ``argsort+gather`` (the gather path forced for 4-byte values too,
to compare), and for reference ``sort`` and ``argsort`` of the keys alone.  Every
result is checked against NumPy element for element.

``--gpu`` (issue 37: ``stable=True`` within 1.3x of the default order) times
``stable=True`` against the default order on CuPy for float32+int32, uint32+uint32,
uint16+int16 and float64+int64 pairs with many equal keys, the two taking turns run
by run: on the one-device plan (``array``: ``sort_by_key`` of CuPy arrays, computed
by Dask's synchronous scheduler in a task on one dask-cuda worker) and on the network
(``network``: a persisted Dask array of ``--chunks`` CuPy chunks on that worker,
``distsort.strategy`` "network", ``distsort.group`` each of ``--groups``: "auto" sorts
every chunk in one group there, 1 sorts them alone and merges them in the network's
rounds), from the call (or ``persist()``) until every result is on the device, the
device synchronized.  Every result is compared bit for bit with the order of CuPy's stable
argsort (CUB's radix sort: keys, then by value for the default order; NumPy's
stable argsort agrees with it on 2^20 keys of every pair, checked first).  The keys
hold no NaN or -0.0, where CUB's order and NumPy's differ.  ``--worker cpu`` runs the
same on NumPy chunks and a CPU worker (to try the scenario without a GPU).
"""
from __future__ import annotations

import os
import platform
import statistics
import time

import dask
import dask.array as da
import driver
import numpy as np

import distsort
from distsort.api import _sort_1d
from distsort.graph.gather import gather
from distsort.backends import Order


def argsort_then_gather(keys, values):
    out_keys, perm = _sort_1d(keys, None, Order(keyed=True), positions=True)
    return out_keys, gather((values,), perm)[0]


#: (keys, values) dtypes of ``--gpu``.
GPU_PAIRS = [("float32", "int32"), ("uint32", "uint32"), ("uint16", "int16"),
             ("float64", "int64")]


def pair_chunk(n, kdtype, vdtype, seed, xp_name):
    """``n`` keys with many equal ones (about 16 of each; every uint16 many times),
    no NaN or -0.0, and random values, made on the device (``xp_name``: "cupy" or
    "numpy")."""
    import importlib
    xp = importlib.import_module(xp_name)
    rs = xp.random.RandomState(seed)
    kdtype, vdtype = np.dtype(kdtype), np.dtype(vdtype)
    if kdtype.kind == "f":
        keys = (xp.round(rs.standard_normal(n) * max(1, n // 64)) + 0.0).astype(kdtype)
    else:
        keys = rs.randint(0, min(max(2, n // 16), np.iinfo(kdtype).max), size=n,
                          dtype=np.int64).astype(kdtype)
    if vdtype.kind == "f":
        values = rs.standard_normal(n).astype(vdtype)
    else:
        info = np.iinfo(vdtype)
        values = rs.randint(max(info.min, -2**62), min(info.max, 2**62), size=n,
                            dtype=np.int64).astype(vdtype)
    return keys, values


def stable_perm(xp, keys, by_value=None):
    """The stable argsort of ``keys`` (CuPy's argsort is CUB's radix sort, a stable
    one; NumPy's with kind="stable"); ``by_value``: equal keys by value, then position."""
    def argsort(x):
        return xp.argsort(x, kind="stable") if xp is np else xp.argsort(x)
    if by_value is None:
        return argsort(keys)
    first = argsort(by_value)
    return first[argsort(keys[first])]


def check_pair(sk, sv, keys, values, stable):
    """Whether ``(sk, sv)`` is ``keys, values`` in the stable order (``stable``) or by
    key, then value, bit for bit; runs where the arrays are."""
    import importlib
    xp = importlib.import_module(type(keys).__module__.split(".")[0])
    perm = stable_perm(xp, keys, None if stable else values)
    return all(bool(xp.array_equal(a.view(f"u{a.dtype.itemsize}"),
                                   b[perm].view(f"u{b.dtype.itemsize}")))
               for a, b in ((sk, keys), (sv, values)))


def cub_is_numpys_stable_order():
    """CuPy's argsort against NumPy's stable one on 2^20 keys of each pair (the check's
    premise)."""
    import cupy
    for kdtype, vdtype in GPU_PAIRS:
        keys, values = pair_chunk(2**20, kdtype, vdtype, 1, "cupy")
        for by in (None, values):
            expected = stable_perm(np, keys.get(), None if by is None else by.get())
            if not np.array_equal(stable_perm(cupy, keys, by).get(), expected):
                raise AssertionError(f"CuPy's argsort is not NumPy's stable one: {kdtype}")


def turns(cases, runs, warmup, sync, before=lambda: None):
    """``{name: seconds of each run}`` of ``cases`` (``(name, fn)``) taking turns run
    by run, after ``warmup`` turns; ``sync`` before the clock stops, ``before``
    (untimed) before it starts."""
    out = {name: [] for name, _ in cases}
    for i in range(warmup + runs):
        for name, fn in cases:
            (seconds,) = driver.timings(fn, 1, 0, sync=sync, before=before)
            if i >= warmup:
                out[name].append(seconds)
    return out


def order_row(path, n, kdtype, vdtype, times, checked, chunks):
    row = {"path": path, "n": n, "log2": n.bit_length() - 1, "keys": kdtype,
           "values": vdtype, "chunks": chunks, "checked": checked}
    for name, t in times.items():
        row[f"{name}_s"], row[f"{name}_times"] = statistics.median(t), t
    row["ratio"] = row["stable_s"] / row["default_s"]
    return row


def array_row(log2, kdtype, vdtype, xp_name, runs, warmup):
    """The one-device plan: ``sort_by_key`` of CuPy (or NumPy) arrays, computed where
    this runs (on the worker, beside nothing else)."""
    import importlib
    xp = importlib.import_module(xp_name)
    sync = xp.cuda.Device().synchronize if xp_name == "cupy" else (lambda: None)
    n = 2**log2
    keys, values = pair_chunk(n, kdtype, vdtype, log2, xp_name)
    out = {}

    def run(stable):
        out[stable] = dask.compute(*distsort.sort_by_key(keys, values, stable=stable),
                                   scheduler="sync")
    times = turns([("default", lambda: run(False)), ("stable", lambda: run(True))],
                  runs, warmup, sync)
    checked = all(check_pair(*out[s], keys, values, s) for s in (False, True))
    return order_row("array", n, kdtype, vdtype, times, checked, 1)


def network_row(client, log2, kdtype, vdtype, group, args):
    """The network: persisted ``--chunks`` chunks on one worker, ``distsort.strategy``
    "network" and ``distsort.group`` ``group`` ("auto": one group of every chunk, on
    one worker; 1: every chunk sorted alone, then merged in the network's rounds);
    each run from ``persist()`` until every chunk is sorted."""
    import distributed
    from distributed_sort import sync_workers

    xp = __import__(args.xp)
    n, chunks = 2**log2, args.chunks
    size = n // chunks
    pairs = [client.submit(pair_chunk, size, kdtype, vdtype, 1000 * log2 + i, args.xp,
                           pure=False) for i in range(chunks)]
    keys, values = (da.concatenate([
        da.from_delayed(dask.delayed(lambda p, part=part: p[part])(f), (size,), dtype=d,
                        meta=xp.empty((0,), dtype=d))
        for f in pairs]).persist() for part, d in enumerate((kdtype, vdtype)))
    distributed.wait([keys, values])
    del pairs
    state = {}
    config = {"distsort.strategy": "network", "distsort.group": group}

    def run(stable):
        with dask.config.set(config):
            state["s"] = dask.persist(*distsort.sort_by_key(keys, values, stable=stable))
        distributed.wait(list(state["s"]))
    times = turns([("default", lambda: run(False)), ("stable", lambda: run(True))],
                  args.runs, args.warmup, lambda: sync_workers(client, args.xp != "cupy"),
                  lambda: release_all(client, state))
    release_all(client, state)
    checked = True
    for stable in (False, True):
        with dask.config.set(config):
            sk, sv = distsort.sort_by_key(keys, values, stable=stable)
        checked &= dask.delayed(check_pair)(sk, sv, keys, values, stable).compute()
    row = order_row("network", n, kdtype, vdtype, times, checked, chunks)
    row["group"] = group
    return row


def release_all(client, state):
    """``distributed_sort.release`` of every array of the last run's result."""
    from distributed_sort import _held, _known
    arrays = state.pop("s", None)
    if arrays is None:
        return
    keys = {str(k) for a in arrays for k in a.__dask_keys__()}
    del arrays
    while client.run_on_scheduler(_known, keys=keys) or any(client.run(_held, keys=keys).values()):
        time.sleep(0.01)


def gpu_main(args):
    """``--gpu``: the rows of both paths, saved after each (a partial run keeps its rows)."""
    from distributed import Client, LocalCluster
    rows = []
    device = "cpu-worker" if args.xp == "numpy" else None

    def save():
        return driver.save_rows(rows, "sort_by_key_orders", device or gpu_name(), args.out,
                                runs=args.runs, warmup=args.warmup, numpy=np.__version__,
                                dask=dask.__version__)

    def report(row):
        rows.append(row)
        print(f"{row['path']} {row.get('group', '')} 2^{row['log2']} {row['keys']}+"
              f"{row['values']}: default {row['default_s'] * 1e3:.1f} ms, stable "
              f"{row['stable_s'] * 1e3:.1f} ms, {row['ratio']:.2f}x, checked "
              f"{row['checked']}", flush=True)
        save()

    if args.xp == "cupy":
        from distsort.cluster import local_cuda_cluster
        cluster = local_cuda_cluster(n_workers=1, protocol="tcp")
    else:
        cluster = LocalCluster(n_workers=1, threads_per_worker=2, processes=True)
    with cluster, Client(cluster) as client:
        if args.xp == "cupy":
            client.submit(cub_is_numpys_stable_order, pure=False).result()
        for log2 in args.gpu_log2 if "array" in args.paths else ():
            for kdtype, vdtype in GPU_PAIRS:
                report(client.submit(array_row, log2, kdtype, vdtype, args.xp, args.runs,
                                     args.warmup, pure=False).result())
        for group in args.groups if "network" in args.paths else ():
            for log2 in args.gpu_log2:
                for kdtype, vdtype in GPU_PAIRS:
                    report(network_row(client, log2, kdtype, vdtype, group, args))
    driver.print_table(rows, [("path", "{}"), ("group", "{}"), ("log2", "{}"),
                              ("keys", "{}"), ("values", "{}"), ("default_s", "{:.4f}"),
                              ("stable_s", "{:.4f}"), ("ratio", "{:.2f}"),
                              ("checked", "{}")])
    print(f"rows in {save()}")


def _group(text):
    return text if text == "auto" else int(text)


def gpu_name():
    """The GPU's model, as results files name it (``H200``)."""
    import cupy
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    return next((w for w in name.split() if w[:1] in "HABL" and w[1:2].isdigit()), name)


def main(argv=None):
    p = driver.parser(__doc__)
    p.add_argument("--log2", type=int, default=22)
    p.add_argument("--chunk-log2", type=int, default=19)
    p.add_argument("--gpu", action="store_true",
                   help="stable=True against the default order on CuPy (one device, network)")
    p.add_argument("--gpu-log2", type=int, nargs="+", default=[26, 27, 28])
    p.add_argument("--chunks", type=int, default=8, help="chunks of the network rows")
    p.add_argument("--groups", nargs="+", default=["auto"], type=_group,
                   help="distsort.group of the network rows: auto, 1, 2, ...")
    p.add_argument("--paths", nargs="+", choices=["array", "network"],
                   default=["array", "network"], help="the --gpu rows to take")
    p.add_argument("--worker", choices=["cuda", "cpu"], default="cuda",
                   help="--gpu on CuPy and a dask-cuda worker, or on NumPy and a CPU one")
    args = p.parse_args(argv)
    if args.gpu:
        args.xp = "cupy" if args.worker == "cuda" else "numpy"
        return gpu_main(args)
    log2, chunk_log2 = (18, 15) if args.quick else (args.log2, args.chunk_log2)
    n, chunk = 2**log2, 2**chunk_log2
    rng = np.random.default_rng()
    k = np.round(rng.random(n, dtype=np.float32) * (n // 8)).astype(np.float32)
    keys = da.from_array(k, chunks=chunk)
    perm = np.argsort(k, kind="stable")
    rows = []

    def compute(*xs):
        return dask.compute(*xs, scheduler="threads", num_workers=2)

    def case(name, vdtype, build, check):
        t, times = driver.median_time(lambda: check(compute(*build())), args.runs, args.warmup)
        rows.append({"case": name, "values": vdtype, "n": n, "chunk": chunk, "seconds": t,
                     "runs": times})

    for vdtype in ("int32", "int64"):
        v = rng.integers(-2**31, 2**31, size=n).astype(vdtype)
        values = da.from_array(v, chunks=chunk)
        by_value = np.lexsort((v, k))

        def check(out, v=v, ref=perm):
            assert np.array_equal(out[0], k[ref]) and np.array_equal(out[1], v[ref])

        case("by value", vdtype, lambda values=values: distsort.sort_by_key(keys, values),
             lambda out, v=v, ref=by_value: check(out, v, ref))
        case("stable", vdtype,
             lambda values=values: distsort.sort_by_key(keys, values, stable=True), check)
        case("argsort+gather", vdtype, lambda values=values: argsort_then_gather(keys, values),
             check)
    case("sort (keys)", "-", lambda: (distsort.sort(keys),),
         lambda out: np.testing.assert_array_equal(out[0], np.sort(k)))
    case("argsort (keys)", "-", lambda: (distsort.argsort(keys),),
         lambda out: np.testing.assert_array_equal(out[0], perm))
    path = driver.save_rows(rows, "sort_by_key_orders", f"cpu-{os.cpu_count()}cores", args.out,
                            processor=platform.processor(), threads=2,
                            numpy=np.__version__, dask=dask.__version__)
    print(f"2^{log2} float32 keys, chunks of 2^{chunk_log2}, threads=2; median of {args.runs}; "
          f"rows in {path}")
    driver.print_table(rows, [("case", "{}"), ("values", "{}"), ("seconds", "{:.2f}")])


if __name__ == "__main__":
    main()
