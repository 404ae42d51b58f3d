"""One GPU as users meet it: distsort beside the naive way, every result checked.

    python benchmarks/one_gpu.py --parts array dask big shared --out one_gpu.json
    python benchmarks/one_gpu.py --plot one_gpu.json        # the PNG beside the JSON

Parts (each adds its rows to ``--out``, replacing that part's earlier rows):

* ``array``: ``distsort.sort/argsort/sort_by_key(x)`` of a CuPy array (a CuPy result,
  computed at once: ``distsort.eager``), no cluster, against ``cupy.sort`` /
  ``cupy.argsort(kind="stable")`` / argsort + take, and beside Dask's floor: the naive
  way through Dask's own ``compute`` of a one-chunk array
  (``da.from_array(x, chunks=-1, asarray=False, name=False).map_blocks(...)``); all three
  results compared element for element.
* ``dask``: a persisted Dask array of CuPy chunks on one dask-cuda worker, from
  ``persist()`` to every chunk sorted, against ``x.rechunk(-1).map_blocks(cupy.sort)``.
  distsort runs first and its result is checked on the GPU (``CHEAP_CHECK``); the
  naive way runs last (where it runs out of memory, the workers are restarted, so that
  its failed tasks hold no device memory for the next row), and up to
  ``--compare-up-to`` its result and distsort's are compared element for element.
* ``big``: more float32 than one GPU can sort the naive way, made lazily on one worker
  (``--big-worker``: dask-cuda's under ``--device-memory-limit``, or a plain one with an
  RMM pool), sorted and checked on the GPU (``CHEAP_CHECK``).
* ``shared``: two workers sharing GPU 0 (``distsort.cluster.shared_gpu``) beside one such
  worker, the same persisted input; checked as ``big``.

Every time is the median of ``--runs`` after ``--warmup``, each worker's device
synchronized before the clock stops.  Scripts that start clusters run them under
``if __name__ == "__main__"``; no CUDA work happens here before a cluster starts
(the ``array`` part, which starts none, runs last).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from dask.utils import format_bytes, parse_bytes

from distsort.api import planning

from distributed_sort import (empty_like_chunks, make_chunk, placed_input, release, round_times,
                              sync_workers, verification)
from driver import RESULTS, median_time, parser, print_table

PARTS = ("dask", "big", "shared", "array")

#: call:dtype:log2 of the length, of the ``array`` part; sort_by_key's values are uint32.
ARRAY_CASES = [f"{call}:{dtype}" for call in ("sort", "argsort")
               for dtype in ("float32:24", "float32:28", "float32:30", "uint64:28")] + [
    f"sort_by_key:uint32:{k}" for k in (24, 28, 30)]

#: How rows too large to hold a second result beside them are checked (on the GPU).
CHEAP_CHECK = "sorted within and across chunks, count and order-free checksum of the input"

#: bytes:chunks of float32, of the ``dask`` part.
DASK_CASES = ["16GiB:8", "16GiB:32", "16GiB:128", "32GiB:16"]


def device_name():
    """The GPU's name, without making a CUDA context in this process."""
    import subprocess
    out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
                         capture_output=True, text=True, check=False).stdout.strip()
    return out or "unknown GPU"


def _sync():
    import cupy
    cupy.cuda.Device().synchronize()


# ------------------------------------------------------------------ plain CuPy arrays
def naive(call, x, v):
    import cupy
    if call == "sort":
        return cupy.sort(x)
    order = cupy.argsort(x, kind="stable")
    return order if call == "argsort" else (x[order], v[order])


def dask_floor(call, x, v):
    """The naive way through Dask's own ``compute`` of a one-chunk array, named without
    hashing: what any Dask call on a plain array costs beyond the sort itself."""
    import cupy
    import dask
    import dask.array as da

    def wrap(a):
        return da.from_array(a, chunks=-1, asarray=False, name=False)

    if call == "sort":
        return wrap(x).map_blocks(cupy.sort).compute()
    order = wrap(x).map_blocks(cupy.argsort, kind="stable", dtype="int64")
    if call == "argsort":
        return order.compute()
    return dask.compute(*(da.map_blocks(_take, wrap(a), order, dtype=a.dtype) for a in (x, v)))


def _take(a, order):
    return a[order]


def with_distsort(call, x, v):
    import distsort
    if call == "sort_by_key":
        return distsort.sort_by_key(x, v, stable=True)  # argsort + take's order
    return getattr(distsort, call)(x)


def same(a, b):
    import cupy
    if isinstance(a, tuple):
        return all(same(p, q) for p, q in zip(a, b, strict=True))
    return bool(cupy.array_equal(a, b))


def array_row(case, args):
    """One ``array`` row (``case``: call:dtype:log2 of the length)."""
    call, dtype, k = case.split(":")
    n = 1 << int(k)
    x = make_chunk(int(k), n, dtype)
    v = make_chunk(int(k) + 100, n, "uint32") if call == "sort_by_key" else None
    t_naive = median_time(lambda: naive(call, x, v), args.runs, args.warmup, _sync)[0]
    t_ds = median_time(lambda: with_distsort(call, x, v), args.runs, args.warmup, _sync)[0]
    t_floor = median_time(lambda: dask_floor(call, x, v), args.runs, args.warmup, _sync)[0]
    want = naive(call, x, v)
    ok = same(with_distsort(call, x, v), want) and same(dask_floor(call, x, v), want)
    return dict(part="array", case=f"{call} {dtype} 2^{k}", call=call, dtype=dtype, n=n,
                seconds=t_ds, naive_s=t_naive, ratio=t_ds / t_naive, target=1.3,
                dask_floor_s=t_floor, beyond_floor_s=t_ds - t_floor,
                beyond_naive_s=t_ds - t_naive, checked="element for element", correct=ok)


def array_rows(args):
    """``array`` rows: the public call on a CuPy array against CuPy's own."""
    import cupy
    for case in args.array_cases:
        yield array_row(case, args)
        cupy.get_default_memory_pool().free_all_blocks()


# ------------------------------------------------------------------ persisted Dask arrays
def timed_persist(client, make, args):
    """Median seconds of ``make().persist()`` until every chunk is in memory, and
    ``{"s": the last result}`` (held until ``release``); each run starts once the
    previous result is forgotten."""
    import distributed
    state = {}

    def run():
        state["s"] = make().persist()
        distributed.wait(state["s"])
        # wait() returns on errors too: a failed run must not count.  (No future may stay
        # referenced from here, or release() would wait for it forever.)
        error = next((f.exception() for f in distributed.futures_of(state["s"])
                      if f.status == "error"), None)
        if error is not None:
            raise error

    try:
        seconds = median_time(run, args.runs, args.warmup, lambda: sync_workers(client),
                              lambda: release(client, state))[0]
    except Exception:
        release(client, state)
        raise
    return seconds, state


def failure(e):
    """How a row records a run that failed (out of memory, mostly)."""
    return f"failed: {type(e).__name__}: {str(e)[:160]}"


def dask_rows(args):
    """``dask`` rows: persisted CuPy chunks on one dask-cuda worker."""
    from distributed import Client

    from distsort.cluster import local_cuda_cluster
    with (local_cuda_cluster(n_workers=1, protocol="tcp",
                             device_memory_limit=args.device_memory_limit) as cluster,
          Client(cluster) as client):
        for case in args.dask_cases:
            yield dask_row(client, case, args)
            client.run(_free_pools)


def dask_row(client, case, args):
    """One ``dask`` row (``case``: bytes:chunks).  distsort runs first and its result is
    checked on the GPU (``CHEAP_CHECK``); the naive way runs last, and its result is
    compared with distsort's element for element up to ``--compare-up-to``.  A way that
    fails is recorded as failed, and the workers are restarted after it: an
    out-of-memory task's traceback holds the device memory it had taken."""
    import cupy
    import dask.array as da

    import distsort
    size, chunks = case.split(":")
    nbytes, chunks = parse_bytes(size), int(chunks)
    n = nbytes // 4
    x, _ = placed_input(client, n, "float32", chunks, seed=chunks, cpu=False)
    row = dict(part="dask", case=f"{format_bytes(nbytes)} float32 in {chunks}",
               dtype="float32", bytes=nbytes, n=n, chunks=chunks, workers=1, target=1.15)
    with planning() as plans:
        distsort.sort(x)
    row["plan"] = plan_summary(plans[0])
    # Both results beside the input and the naive sort's buffers (four times the data)
    # fit the device up to --compare-up-to.
    elementwise = nbytes <= parse_bytes(args.compare_up_to)
    try:
        row.update(profile(client, x, args))  # the same keys as the timed runs': first
        row["seconds"], s = timed_persist(client, lambda: distsort.sort(x), args)
    except Exception as e:  # noqa: BLE001  (recorded)
        client.restart()
        return dict(row, seconds=failure(e), correct=False)
    _, ok = checked_seconds(client, s["s"], x)
    if not elementwise:
        release(client, s)
    y = {}
    try:
        row["naive_s"], y = timed_persist(
            client, lambda: x.rechunk(-1).map_blocks(cupy.sort), args)
    except Exception as e:  # noqa: BLE001  (recorded)
        row["naive_s"], elementwise = failure(e), False
        release(client, s)
        client.restart()
    if elementwise:  # float32 normals hold no zeros: cupy.sort's order is NumPy's
        ok = ok and bool(da.equal(s["s"], y["s"].rechunk(s["s"].chunks)).all().compute())
    release(client, y)
    release(client, s)
    if isinstance(row["naive_s"], float):
        row["ratio"] = row["seconds"] / row["naive_s"]
    return dict(row, correct=ok,
                checked=CHEAP_CHECK + (", and element for element with the naive result"
                                       if elementwise else ""))


def plan_summary(plan):
    """What a sort's plan decided, for the row: strategy, chunks, group, rounds."""
    return dict(strategy=plan.strategy, chunks=len(plan.chunks), chunk=plan.chunks[0],
                group=plan.group, rounds=plan.rounds)


def profile(client, x, args):
    """Where one more run's time goes: building the graph (``distsort.sort(x)``, nothing
    computed), and the span of each stage of tasks (first start to last stop)."""
    import distributed

    import distsort
    graph_s = median_time(lambda: distsort.sort(x), args.runs, 1)[0]
    state = {}
    with distributed.get_task_stream(client) as ts:
        state["s"] = distsort.sort(x).persist()
        distributed.wait(state["s"])
        sync_workers(client)
    release(client, state)
    return {"graph_s": graph_s, "stages_s": round_times(ts.data)}


def _free_pools():
    import cupy
    cupy.get_default_memory_pool().free_all_blocks()


# ------------------------------------------------------------------ beyond the naive way
def lazy_input(n, chunks, dtype="float32"):
    """A lazy Dask array of fresh random chunks made where they are computed: nothing
    is held twice (the sort and the checks share each chunk's one task)."""
    import dask.array as da
    from dask import delayed
    step = -(-n // chunks)
    sizes = [min(step, n - i * step) for i in range(chunks)]
    return da.concatenate([
        da.from_delayed(delayed(make_chunk, pure=True)(1000 + i, size, dtype), (size,),
                        dtype=dtype, meta=empty_like_chunks(dtype, False))
        for i, size in enumerate(sizes)])


def chunk_summaries(x):
    from distsort.graph.verify import chunk_summaries as summaries
    return summaries(x)


def checked_seconds(client, s, x):
    """Seconds to compute ``s`` with the checks (``verification``) and whether they
    passed: sorted within and across chunks, same count and checksum as ``x``."""
    from distsort.graph.verify import VerificationError
    start = time.perf_counter()
    try:
        ok = bool(client.compute(verification(s, x), sync=True))
    except VerificationError as e:
        print("check failed:", e, flush=True)
        ok = False
    return time.perf_counter() - start, ok


def one_worker(kind, device_memory_limit):
    """One worker on GPU 0: dask-cuda's, whose ``device_memory_limit`` is the device
    budget (the sort runs in memory where the data and the network's working chunks
    fit it: ``distsort.plan.sortplan.fits_in_place``), or a plain one with an RMM pool (no
    budget)."""
    if kind == "dask-cuda":
        from distsort.cluster import local_cuda_cluster
        return local_cuda_cluster(n_workers=1, protocol="tcp",
                                  device_memory_limit=device_memory_limit)
    from distsort.cluster.shared_gpu import shared_gpu_cluster
    return shared_gpu_cluster(1, pool_fraction=0.9)


def big_rows(args):
    """``big``: ``--big`` bytes of float32 in ``--big-chunks`` chunks on one worker."""
    from distributed import Client

    import distsort
    nbytes = parse_bytes(args.big)
    n = nbytes // 4
    with (one_worker(args.big_worker, args.device_memory_limit) as cluster,
          Client(cluster) as client):
        x = lazy_input(n, args.big_chunks)
        with planning() as plans:
            s = distsort.sort(x)
        # The input made and summarized alone (what the checked sort also does).
        start = time.perf_counter()
        client.compute(chunk_summaries(x), sync=True)
        input_s = time.perf_counter() - start
        seconds, ok = checked_seconds(client, s, x)
        row = dict(part="big", case=f"{format_bytes(nbytes)} float32 in {args.big_chunks}, "
                   f"{args.big_worker} worker", dtype="float32", bytes=nbytes, n=n,
                   chunks=args.big_chunks, workers=1, worker=args.big_worker,
                   device_memory_limit=args.device_memory_limit,
                   plan=plan_summary(plans[0]), seconds_with_checks=seconds,
                   input_with_checks_s=input_s, correct=ok, checked=CHEAP_CHECK,
                   naive="does not fit: rechunk(-1) + cupy.sort needs 4x the data")
        yield row


def shared_rows(args):
    """``shared``: 16 GiB of float32 in 8 chunks on two workers sharing GPU 0, beside
    one worker; the persisted input made where the scheduler puts it."""
    from distributed import Client

    import distsort
    from distsort.cluster.shared_gpu import shared_gpu_cluster
    nbytes = parse_bytes(args.shared)
    n = nbytes // 4
    for workers in (1, 2):
        with (shared_gpu_cluster(workers, pool_fraction=0.8 / workers) as cluster,
              Client(cluster) as client):
            x, _ = placed_input(client, n, "float32", 8 // workers, seed=8, cpu=False)
            with planning() as plans:
                distsort.sort(x)
            seconds, s = timed_persist(client, lambda x=x: distsort.sort(x), args)
            _, ok = checked_seconds(client, s["s"], x)
            release(client, s)
            yield dict(part="shared", case=f"{format_bytes(nbytes)} float32 in 8, "
                       f"{workers} worker(s) on one GPU", dtype="float32", bytes=nbytes, n=n,
                       chunks=8, workers=workers, seconds=seconds, correct=ok,
                       plan=plan_summary(plans[0]), checked=CHEAP_CHECK)


# ------------------------------------------------------------------ rows, table, plot
def save(rows, path, variant):
    """Add ``rows`` to the JSON at ``path``, replacing earlier rows of the same part,
    case and ``variant`` (the code measured, e.g. "before" and "after" a change)."""
    import datetime
    doc = json.loads(path.read_text()) if path.exists() else {
        "scenario": "one_gpu", "device": device_name(),
        "date": datetime.date.today().isoformat(), "rows": []}
    cases = {(r["part"], r["case"]) for r in rows}
    doc["rows"] = [r for r in doc["rows"]
                   if not ((r["part"], r["case"]) in cases and r.get("variant") == variant)]
    doc["rows"] += [dict(r, variant=variant) for r in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return path


def plot(path):
    """A PNG beside the JSON: distsort's time over the naive way's per row."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    doc = json.loads(Path(path).read_text())
    rows = [r for r in doc["rows"] if r.get("ratio")]
    variants = list(dict.fromkeys(r.get("variant", "") for r in rows))  # as measured
    cases = list(dict.fromkeys(r["case"] for r in rows))
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(cases) * len(variants) + 1.5))
    height = 0.8 / max(1, len(variants))
    for j, variant in enumerate(variants):
        by = {r["case"]: r["ratio"] for r in rows if r.get("variant", "") == variant}
        ys = [i + j * height for i, c in enumerate(cases) if c in by]
        ratios = [by[c] for c in cases if c in by]
        ax.barh(ys, ratios, height=height, label=variant or None)
        for y, r in zip(ys, ratios, strict=True):
            ax.text(r, y, f" {r:.2f}x", va="center", fontsize=8)
    ax.set_yticks([i + height * (len(variants) - 1) / 2 for i in range(len(cases))], cases)
    ax.set_xscale("log")
    for target in (1.15, 1.3):
        ax.axvline(target, color="grey", linestyle=":", linewidth=1)
    ax.axvline(1, color="black", linewidth=1)
    ax.invert_yaxis()
    ax.set_xlabel("distsort time / naive time (log scale; lines at 1, 1.15, 1.3)")
    ax.set_title(f"distsort on one GPU vs the naive way: {doc['device']}, {doc['date']}")
    if any(variants):
        ax.legend()
    fig.tight_layout()
    out = Path(path).with_suffix(".png")
    fig.savefig(out, dpi=110)
    return out


def main(argv=None):
    p = parser(__doc__)
    p.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    p.add_argument("--variant", default="", help="names the code measured in the rows")
    p.add_argument("--array-cases", nargs="+", default=ARRAY_CASES,
                   help="array part: call:dtype:log2(length)")
    p.add_argument("--dask-cases", nargs="+", default=DASK_CASES,
                   help="dask part: bytes:chunks of float32")
    p.add_argument("--device-memory-limit", type=float, default=0.9,
                   help="dask and big parts: the dask-cuda worker's spill threshold (a "
                   "fraction of device memory; high, so neither way spills)")
    p.add_argument("--compare-up-to", default="16GiB",
                   help="dask part: compare with the naive result element for element up "
                   "to this size (larger: CHEAP_CHECK)")
    p.add_argument("--big", default="100GB", help="big part: bytes of float32")
    p.add_argument("--big-chunks", type=int, default=50)
    p.add_argument("--big-worker", choices=["dask-cuda", "plain"], default="dask-cuda",
                   help="big part: the worker (see one_worker)")
    p.add_argument("--shared", default="16GiB", help="shared part: bytes of float32")
    p.add_argument("--plot", help="only draw the PNG of this JSON")
    args = p.parse_args(argv)
    if args.plot:
        print("plot saved to", plot(args.plot))
        return
    if args.quick:  # the smallest case of each part
        args.array_cases = [c for c in args.array_cases if c.endswith(":24")]
        args.dask_cases, args.shared = ["1GiB:8"], "1GiB"
        args.big, args.big_chunks = "4GB", 8
    path = Path(args.out) if args.out else RESULTS / "one_gpu.json"
    makers = {"array": array_rows, "dask": dask_rows, "big": big_rows,
              "shared": shared_rows}
    rows = []
    for part in sorted(args.parts, key=PARTS.index):
        for row in makers[part](args):
            rows.append(row)
            print(row, flush=True)
            save(rows, path, args.variant)  # a run stopped later keeps these
    columns = ("case", "seconds", "naive_s", "ratio", "dask_floor_s", "seconds_with_checks",
               "correct")
    print_table([{k: shown(r[k]) for k in columns if k in r} for r in rows],
                [(c, "{}") for c in columns])
    print("rows saved to", path)


def shown(value):
    """A table cell: numbers to four significant digits, failures shortened."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)[:40]


if __name__ == "__main__":
    main()
