"""distsort across GPUs: dask-cuda workers, UCX over NVLink, against its floor.

    python benchmarks/distributed_sort.py --gpus 1 2 --sizes 4GiB 16GiB 64GiB \\
        --dtypes float32 uint64

For every (GPUs, dtype, size): wall time from a persisted input to a persisted
output (every worker's device synchronized before the clock stops), bytes moved
between workers, time per round, and three references: the same sort on fewer
GPUs (the rows with --gpus 1), rechunk to one chunk + ``cupy.sort`` where it
fits on one GPU, and the floor = local sort time + bytes moved / NVLink
bandwidth (measured here with ``cudaMemcpyPeer``).

``--cpu`` runs the same scenarios with NumPy chunks on CPU worker processes
(a check of the code paths and of the schedules where no GPU is at hand).

``--ab-report NEW.json... --old OLD.json...`` compares two trees' rows of the same
cases (``benchmarks/distributed_ab.sh``): the median of every timed run of each tree
per case, and the ratio new/old.
"""
from __future__ import annotations

import contextlib
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path

import dask
import numpy as np
from dask.utils import format_bytes, parse_bytes

from distsort.cluster import bytes_sent_by_kind, diff_sent, ipc_read_stats
from distsort.core.taskkeys import round_task_kind, task_kind, task_round
from driver import cluster_options, connect, median_time, parser, print_table, save_rows


SPLITMIX = r"""
    unsigned long long z = seed + (unsigned long long)i * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    out = z ^ (z >> 31);
"""


def make_chunk(seed, n, dtype, cpu=False):
    """Fresh random keys on this worker's GPU: normal floats, integers over all bits."""
    dtype = np.dtype(dtype)
    if cpu:
        rng = np.random.default_rng(seed)
        if dtype.kind == "f":
            return rng.standard_normal(n).astype(dtype)
        return rng.integers(0, 256, size=n * dtype.itemsize, dtype=np.uint8).view(dtype)
    import cupy
    if dtype.kind == "f":
        return cupy.random.default_rng(seed).standard_normal(n, dtype=dtype)
    fill = cupy.ElementwiseKernel("uint64 seed", "uint64 out", SPLITMIX, "distsort_splitmix")
    words = cupy.empty(-(-n * dtype.itemsize // 8), dtype=cupy.uint64)
    fill(np.uint64(seed * 0x632BE59BD9B4E019 % 2**64), words)
    return words.view(cupy.uint8)[: n * dtype.itemsize].view(dtype)


def empty_like_chunks(dtype, cpu):
    if cpu:
        return np.empty(0, dtype)
    import cupy
    return cupy.empty(0, dtype)


#: Where the input's chunks are made (--placement): as the scheduler likes, in
#: contiguous blocks of chunks per worker, or dealt round robin.
PLACEMENTS = ("scheduler", "blocks", "roundrobin")


def chunk_worker(i, count, workers, placement):
    """The worker chunk ``i`` of ``count`` is made on, or None (the scheduler picks).

    >>> [chunk_worker(i, 4, ["a", "b"], "blocks") for i in range(4)]
    ['a', 'a', 'b', 'b']
    >>> [chunk_worker(i, 4, ["a", "b"], "roundrobin") for i in range(4)]
    ['a', 'b', 'a', 'b']
    """
    if placement == "scheduler":
        return None
    if placement == "blocks":
        return workers[i * len(workers) // count]
    if placement == "roundrobin":
        return workers[i % len(workers)]
    raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")


def placed_input(client, n, dtype, chunks_per_gpu, seed, cpu=False, placement="blocks"):
    """A persisted Dask array of CuPy chunks, spread evenly over the workers
    (``chunk_worker``): in contiguous blocks, round robin, or where the scheduler puts
    them.  distsort gives network positions by where chunks live, so all three should
    sort in about the same time."""
    import dask.array as da
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    count = len(workers) * chunks_per_gpu
    step = -(-n // count)
    sizes = [min(step, n - i * step) for i in range(count)]
    where = [chunk_worker(i, count, workers, placement) for i in range(count)]
    futures = [client.submit(make_chunk, seed + i, size, dtype, cpu,
                             workers=None if w is None else [w], pure=False)
               for i, (size, w) in enumerate(zip(sizes, where, strict=False))]
    arrays = [da.from_delayed(f, (size,), dtype=dtype, meta=empty_like_chunks(dtype, cpu))
              for f, size in zip(futures, sizes, strict=False)]
    return da.concatenate(arrays).persist(), futures


def sync_workers(client, cpu=False):
    if cpu:
        return

    def sync():
        import cupy
        cupy.cuda.Device().synchronize()
    client.run(sync)


def _moved(dask_worker):
    return dask_worker.transfer_outgoing_bytes_total + ipc_read_stats().get("bytes", 0)


def moved_bytes(client):
    """Bytes between workers: Dask's transfers, and what merges read from another
    worker's GPU memory through CUDA IPC."""
    return sum(client.run(_moved).values())


#: distributed's own intervals of its batched streams, in seconds.
BATCH_DEFAULTS = {"scheduler": 0.005, "worker": 0.002, "client": 0.01}


def batch_interval(client, seconds=None):
    """Set how long distributed's batched streams (scheduler to workers, workers to
    scheduler, client to scheduler) gather messages before sending; None: distributed's
    own (``BATCH_DEFAULTS``).  Each task of a compare-split waits for its predecessor
    through two of them."""
    def get(side):
        return BATCH_DEFAULTS[side] if seconds is None else seconds

    def scheduler(dask_scheduler):
        for stream in dask_scheduler.stream_comms.values():
            stream.interval = get("scheduler")

    def worker(dask_worker):
        dask_worker.batched_stream.interval = get("worker")

    client.run_on_scheduler(scheduler)
    client.run(worker)
    client.scheduler_comm.interval = get("client")


def _stage(key):
    """The stage of a distsort task: its round (``r03``) or, outside the rounds, its
    kind (``prepare``, ``edges``, ``sort``); None for other keys."""
    if not str(key[0] if isinstance(key, tuple) else key).startswith("distsort-"):
        return None
    r = task_round(key)
    return task_kind(key) if r is None else f"r{r:02d}"


def round_times(task_stream):
    """Seconds per stage: first start to last stop of each round's (and prepare's) tasks."""
    spans = defaultdict(lambda: [np.inf, -np.inf])
    for t in task_stream:
        stage = _stage(t["key"])
        if stage is None:
            continue
        for ss in t["startstops"]:
            spans[stage][0] = min(spans[stage][0], ss["start"])
            spans[stage][1] = max(spans[stage][1], ss["stop"])
    return {k: round(v[1] - v[0], 4) for k, v in sorted(spans.items())}


def task_times(task_stream):
    """Per task kind of the network (``head``, ``low``, ...): seconds computing, seconds
    receiving its inputs from other workers, and the longest single transfer (with the
    bytes sent by kind, a host-staged transfer stands out): where a round's time went."""
    out = defaultdict(lambda: {"compute_s": 0.0, "transfer_s": 0.0, "longest_transfer_s": 0.0})
    for t in task_stream:
        kind = round_task_kind(t["key"])
        if kind is None:
            continue
        row = out[kind]
        for ss in t["startstops"]:
            span = ss["stop"] - ss["start"]
            if ss["action"] == "compute":
                row["compute_s"] += span
            elif ss["action"] == "transfer":
                row["transfer_s"] += span
                row["longest_transfer_s"] = max(row["longest_transfer_s"], span)
    return {k: {a: round(b, 4) for a, b in v.items()} for k, v in sorted(out.items())}


def timeline(task_stream, most=64):
    """``[stage or kind, worker, action, start, stop]`` of every distsort task's
    transfers and computations, seconds from the first start (None when there are more
    than ``most`` tasks): the scheduler's round trips between tasks show as gaps."""
    rows = []
    for t in task_stream:
        stage = _stage(t["key"])
        if stage is None:
            continue
        name = round_task_kind(t["key"]) or stage
        rows += [[name, t["worker"], ss["action"], ss["start"], ss["stop"]]
                 for ss in t["startstops"]]
    if not rows or len(rows) > most:
        return None
    t0 = min(r[3] for r in rows)
    workers = sorted({r[1] for r in rows})
    return sorted([n, workers.index(w), a, round(b - t0, 4), round(e - t0, 4)]
                  for n, w, a, b, e in rows)


def count_spills(dask_worker):
    """Count bytes dask-cuda moves device -> host and back on this worker (from now on);
    ``spill_counts`` reads them.  Nothing to count where the worker's data is not a
    device/host buffer (CPU workers, JIT unspill)."""
    buf = getattr(dask_worker.data, "device_buffer", None)
    if not hasattr(buf, "fast_to_slow_callbacks"):
        return False
    if hasattr(dask_worker, "_distsort_spills"):  # counting already
        return True
    counts = dask_worker._distsort_spills = {"to_host": 0, "from_host": 0}
    from dask.sizeof import sizeof

    def out(key, value):
        counts["to_host"] += sizeof(value)

    def back(key, value):
        counts["from_host"] += sizeof(value)

    buf.fast_to_slow_callbacks.append(out)
    buf.slow_to_fast_callbacks.append(back)
    return True


def spill_counts(client, since=None):
    """Bytes spilled to host and read back, summed over workers (since ``count_spills``,
    or since the counts ``since``)."""
    per = client.run(lambda dask_worker: dict(getattr(dask_worker, "_distsort_spills", {})))
    total = {k: sum(c.get(k, 0) for c in per.values()) for k in ("to_host", "from_host")}
    return total if since is None else {k: v - since[k] for k, v in total.items()}


def verification(s, x):
    """Delayed: True when ``s`` is sorted (within and across chunks) and a permutation of
    ``x``, by distsort.graph.verify's summaries computed where each chunk lives (64-bit
    checksums of the keys); raises distsort.graph.verify.VerificationError otherwise."""
    from dask import delayed

    from distsort.graph.verify import check, chunk_summaries
    return delayed(check)(chunk_summaries(x), chunk_summaries(s, descending=False), s.chunks[0])


def check_sorted(client, s, x):
    """Sorted, and a permutation of ``x`` (on the workers); AssertionError otherwise."""
    from distsort.graph.verify import VerificationError
    try:
        client.compute(verification(s, x), sync=True)
    except VerificationError as e:
        raise AssertionError(f"distributed sort is wrong: {e}") from e


def peer_bandwidth(client, nbytes=2**32):
    """GB/s of one cudaMemcpyPeer from device 0 to device 1, measured on a worker."""
    def measure():
        import cupy
        rt = cupy.cuda.runtime
        if rt.getDeviceCount() < 2:
            return None
        with cupy.cuda.Device(0):  # without peer access the copy is staged through the host
            if rt.deviceCanAccessPeer(0, 1):
                # already enabled (UCX may have done it)
                with contextlib.suppress(rt.CUDARuntimeError):
                    rt.deviceEnablePeerAccess(1)
            src = cupy.empty(nbytes, dtype=np.uint8)
        with cupy.cuda.Device(1):
            dst = cupy.empty(nbytes, dtype=np.uint8)
        for _ in range(3):
            cupy.cuda.runtime.memcpyPeer(dst.data.ptr, 1, src.data.ptr, 0, nbytes)
        cupy.cuda.Device(1).synchronize()
        start = time.perf_counter()
        for _ in range(5):
            cupy.cuda.runtime.memcpyPeer(dst.data.ptr, 1, src.data.ptr, 0, nbytes)
        cupy.cuda.Device(1).synchronize()
        return 5 * nbytes / (time.perf_counter() - start) / 1e9
    return next(iter(client.run(measure).values()))


def local_sort_seconds(client, n, dtype, runs, cpu=False):
    """distsort's local sort of one chunk of ``n`` keys on one worker: in place on the
    GPU (CUDA events; a fresh chunk each run, one chunk in memory at a time)."""
    def measure_cpu():
        from distsort.backends import Order
        from distsort.backends.cpu import numpy_backend as backend
        x = make_chunk(1, n, dtype, cpu=True)
        return median_time(lambda: backend.prepare(x, None, Order(), None), runs, 1)[0]

    def measure():
        import cupy
        from distsort.backends.gpu import cupy_backend as backend
        times = []
        for r in range(runs + 1):
            x = None
            x = make_chunk(1 + r, n, dtype)
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            backend.sort_inplace(x)
            stop.record()
            stop.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
        return float(np.median(times[1:]))
    return next(iter(client.run(measure_cpu if cpu else measure).values()))


def one_chunk_sort(client, x, runs, cpu=False):
    """Rechunk to one chunk + cupy.sort (numpy.sort with --cpu), when it fits: on
    several GPUs, everything sorted on one of them (the baseline a user without
    distsort has).  The result is checked against NumPy's sort of a sample."""
    if cpu:
        sort = np.sort
    else:
        import cupy
        sort = cupy.sort

    state = {}

    def run():
        state.pop("y", None)
        y = x.rechunk(-1).map_blocks(sort).persist()
        from distributed import wait
        wait(y)
        state["y"] = y
    try:
        seconds = median_time(run, runs, 1, lambda: sync_workers(client, cpu))[0]
        check_sorted(client, _signless_zeros(state.pop("y").rechunk(x.chunks)),
                     _signless_zeros(x))
        return seconds
    except Exception as e:  # out of memory: does not fit, which is the point
        return f"failed: {type(e).__name__}"


def _signless_zeros(x):
    """``x`` with -0.0 made +0.0: ``cupy.sort`` and ``numpy.sort`` order the two zeros as
    equal, distsort's check (and sort) puts -0.0 first, and normal samples hold both."""
    return x + x.dtype.type(0) if x.dtype.kind == "f" else x


def release(client, state):
    """Drop the last run's result and wait until the scheduler has forgotten its keys,
    so that the next run computes them again (the same keys: the input is the same).
    An alias of the input under a new name would do it without waiting, but dask-cuda
    counts an alias as a second copy and spills chunks to host at large sizes."""
    s = state.pop("s", None)
    if s is None:
        return
    keys = {str(k) for k in s.__dask_keys__()}
    del s
    while client.run_on_scheduler(_known, keys=keys) or any(client.run(_held, keys=keys).values()):
        time.sleep(0.01)


def _known(keys, dask_scheduler=None):
    return any(str(k) in keys for k in dask_scheduler.tasks)


def _held(keys, dask_worker=None):
    """Whether the worker still holds any of ``keys`` (it frees them after the scheduler
    forgets them: a next run started before then holds two results at once)."""
    return any(str(k) in keys for k in dask_worker.data)


def run_case(client, n, dtype, args, workers, placement="blocks", local="auto"):
    import distributed

    import distsort
    client.run(count_spills)
    x, _ = placed_input(client, n, dtype, args.chunks_per_gpu, n % 9973, args.cpu, placement)
    distributed.wait(x)
    state = {}

    def run():
        state["s"] = distsort.sort(x, local=local).persist()
        distributed.wait(state["s"])

    spilled_before = spill_counts(client)
    seconds, times = median_time(run, args.runs, args.warmup,
                                 lambda: sync_workers(client, args.cpu),
                                 lambda: release(client, state))
    spilled_timed = spill_counts(client, since=spilled_before)
    # The bytes moved are read around one more, untimed run: reading the workers'
    # counters and logs takes round trips that the timed runs should not include.
    release(client, state)
    before, kinds = moved_bytes(client), bytes_sent_by_kind(client)
    spilled = spill_counts(client)
    with distributed.get_task_stream(client) as ts:
        run()
        sync_workers(client, args.cpu)
    state["moved"] = moved_bytes(client) - before
    state["ipc"] = client.run(ipc_read_stats)
    state["kinds"] = diff_sent(kinds, bytes_sent_by_kind(client))
    spilled = spill_counts(client, since=spilled)
    check_sorted(client, state["s"], x)
    chunk = -(-n // (workers * args.chunks_per_gpu))
    row = dict(dtype=dtype, bytes=n * np.dtype(dtype).itemsize, n=n,
               chunks=workers * args.chunks_per_gpu, seconds=seconds, runs=times,
               gkeys_s=n / seconds / 1e9, moved_bytes=state["moved"],
               rounds=round_times(ts.data), sent_by_kind=state["kinds"],
               tasks=task_times(ts.data), timeline=timeline(ts.data), spilled=spilled,
               spilled_in_timed_runs=spilled_timed, ipc_stats=state["ipc"])
    release(client, state)  # the sorted array: room for the reference measurements
    state.clear()
    # The floor's local sort: one GPU's whole share in one piece (= a chunk when
    # --chunks-per-gpu is 1), the least sorting a GPU must do.
    row["local_sort_s"] = local_sort_seconds(client, chunk * args.chunks_per_gpu, dtype, 3,
                                             args.cpu)
    if (args.one_chunk and workers == 1) or args.rechunk_cupy_sort:
        row["one_chunk_sort_s"] = one_chunk_sort(client, x, args.runs, args.cpu)
    return row


def largest_case(client, nbytes, dtype, chunks, cpu=False):
    """Sort ``nbytes`` made on the workers and checked there, never held twice.

    The input is a lazy graph (not persisted), so each random chunk is freed once
    sorted; the checks are reductions computed with the sort.
    """
    import dask.array as da
    from dask import delayed

    import distsort
    n = nbytes // np.dtype(dtype).itemsize
    step = -(-n // chunks)
    sizes = [min(step, n - i * step) for i in range(chunks)]
    parts = [da.from_delayed(delayed(make_chunk, pure=True)(1000 + i, size, dtype, cpu), (size,),
                             dtype=dtype, meta=empty_like_chunks(dtype, cpu))
             for i, size in enumerate(sizes)]
    x = da.concatenate(parts)
    s = distsort.sort(x)
    from distsort.graph.verify import VerificationError
    start = time.perf_counter()
    try:
        verified = bool(client.compute(verification(s, x), sync=True))
    except VerificationError:
        verified = False
    seconds = time.perf_counter() - start
    return dict(case="largest", dtype=dtype, bytes=nbytes, n=n, chunks=chunks,
                seconds_with_checks=seconds, verified=verified)


def cuda_cluster(gpus, args):
    """One worker per GPU, or ``--workers-per-gpu`` workers sharing each GPU."""
    from distsort.cluster import (DEVICE_MEMORY_FRACTION, RMM_POOL_FRACTION, local_cpu_cluster,
                                  local_cuda_cluster)
    share = args.workers_per_gpu
    if args.cpu:
        return local_cpu_cluster(n_workers=gpus * share, memory_limit=args.memory_limit)
    if share == 1:
        limit = {} if args.device_memory_limit is None else {
            "device_memory_limit": args.device_memory_limit}
        return local_cuda_cluster(n_workers=gpus, protocol=args.protocol, **limit)
    # dask-cuda rotates this list per worker; each worker uses the first entry.
    visible = ",".join(str(i % gpus) for i in range(gpus * share))
    return local_cuda_cluster(CUDA_VISIBLE_DEVICES=visible, protocol=args.protocol,
                              device_memory_limit=DEVICE_MEMORY_FRACTION / share,
                              rmm_pool_size=RMM_POOL_FRACTION / share)


def clusters(args):
    """``(gpus, client)`` for each cluster to measure: the one asked for with
    --scheduler-address/--scheduler-file (one worker per GPU assumed), else local ones."""
    client = connect(args)
    if client is not None:
        with client:
            yield len(client.scheduler_info(n_workers=-1)["workers"]), client
        return
    from distributed import Client
    for gpus in args.gpus:
        with cuda_cluster(gpus, args) as cluster, Client(cluster) as client:
            yield gpus, client


def ab_report(new_paths, old_paths, out, trees, what):
    """Per case (dtype, bytes, chunks): the median of every timed run of each tree (its
    rows in ``new_paths`` and ``old_paths``, from ``--out`` of each tree's own run) and
    the ratio new/old; written to ``out`` with every row (phases and timelines), for
    the reasons of a difference.  ``trees``: what each side is, ``what``: the runs, in
    words."""
    sides = {side: [json.loads(Path(f).read_text()) for f in paths]
             for side, paths in (("new", new_paths), ("old", old_paths))}
    first = sides["new"][0]
    report = {"scenario": "distributed_sort A/B", "what": what, "device": first["device"],
              "date": first["date"], "trees": dict(zip(("new", "old"), trees, strict=True)),
              "cases": [], "rows": {side: [r for d in docs for r in d["rows"]]
                                    for side, docs in sides.items()}}
    print(f"{'dtype':<8} {'bytes':>10} {'chunks':>6} {'new s':>8} {'old s':>8} "
          f"{'new/old':>8} {'runs':>5}")
    cases = sorted({(r["dtype"], r["bytes"], r["chunks"]) for r in report["rows"]["new"]})
    for dtype, nbytes, chunks in cases:
        case = {"dtype": dtype, "bytes": nbytes, "chunks": chunks}
        for side, rows in report["rows"].items():
            runs = [t for r in rows if (r["dtype"], r["bytes"], r["chunks"])
                    == (dtype, nbytes, chunks) for t in r["runs"]]
            case[side] = {"median_s": statistics.median(runs), "runs": runs}
        case["ratio"] = case["new"]["median_s"] / case["old"]["median_s"]
        report["cases"].append(case)
        print(f"{dtype:<8} {format_bytes(nbytes):>10} {chunks:>6} "
              f"{case['new']['median_s']:8.4f} {case['old']['median_s']:8.4f} "
              f"{case['ratio']:8.3f} {len(case['new']['runs']):5d}")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(report, indent=1, default=str) + "\n")
    print("wrote", out)


def _fraction_or_bytes(text):
    try:
        return float(text)
    except ValueError:
        return text


def main(argv=None):
    p = cluster_options(parser(__doc__))
    p.add_argument("--gpus", type=int, nargs="+", default=[1, 2])
    p.add_argument("--sizes", nargs="+", default=["4GiB", "16GiB", "64GiB"])
    p.add_argument("--dtypes", nargs="+", default=["float32", "uint64"])
    p.add_argument("--chunks-per-gpu", type=int, default=1)
    p.add_argument("--protocol", default=None, help="ucx or tcp (default: ucx if available)")
    p.add_argument("--workers-per-gpu", type=int, default=1,
                   help="several workers share each GPU (checks larger schedules on few GPUs)")
    p.add_argument("--one-chunk", action="store_true", help="also time rechunk + cupy.sort "
                   "(one-GPU rows)")
    p.add_argument("--rechunk-cupy-sort", action="store_true",
                   help="on every row, also time x.rechunk(-1).map_blocks(cupy.sort): "
                   "everything on one GPU")
    p.add_argument("--placement", nargs="+", choices=PLACEMENTS, default=["blocks"],
                   help="where the input's chunks are made; each value is a row of its own")
    p.add_argument("--local", nargs="+", choices=["auto", "bitonic", "radix"],
                   default=["auto"], help="distsort.sort(local=...); each value a row")
    p.add_argument("--cpu", action="store_true", help="NumPy chunks on CPU workers")
    p.add_argument("--memory-limit", default="auto", help="per CPU worker (--cpu)")
    p.add_argument("--largest", help="instead: sort this many bytes (e.g. 160GB) of the "
                   "first dtype, made lazily on the workers, in --chunks-per-gpu chunks per GPU")
    p.add_argument("--device-memory-limit", type=_fraction_or_bytes, default=None,
                   help="spill threshold of each GPU worker: a fraction of device memory "
                   "or a size (default: distsort.cluster.DEVICE_MEMORY_FRACTION)")
    p.add_argument("--exchange", nargs="+", choices=["auto", "ipc", "comm"], default=["auto"],
                   help="how crossing parts travel between GPUs (config distsort.exchange); "
                   "each value is a row of its own")
    p.add_argument("--batch-interval", nargs="+", default=["default"],
                   help="ms that distributed's batched streams wait, or 'default' (its "
                   "own: 5, 2 and 10 ms); each value is a row of its own")
    p.add_argument("--max-bytes-per-gpu", default="40GiB",
                   help="skip cases whose data per GPU exceeds this")
    p.add_argument("--ab-report", nargs="+", metavar="JSON",
                   help="instead: compare these rows (--out of this tree's runs) with --old")
    p.add_argument("--old", nargs="+", metavar="JSON", help="the other tree's rows")
    p.add_argument("--trees", nargs=2, default=("this tree", "the other tree"),
                   help="what the new and the old tree are, for the report")
    p.add_argument("--what", default="", help="how the rows were measured, for the report")
    args = p.parse_args(argv)
    if args.ab_report:
        return ab_report(args.ab_report, args.old, args.out, args.trees, args.what)
    rows, bandwidth = [], None
    for gpus, client in clusters(args):
        if args.largest:
            row = largest_case(client, parse_bytes(args.largest), args.dtypes[0],
                               gpus * args.workers_per_gpu * args.chunks_per_gpu, args.cpu)
            row["gpus"], row["workers"] = gpus, gpus * args.workers_per_gpu
            print(row, flush=True)
            rows.append(row)
            continue
        if gpus > 1 and bandwidth is None and not args.cpu:
            bandwidth = peer_bandwidth(client)
            print(f"NVLink cudaMemcpyPeer: {bandwidth:.0f} GB/s", flush=True)
        for interval in args.batch_interval:
            batch_interval(client, None if interval == "default" else float(interval) / 1e3)
            for exchange in args.exchange if gpus > 1 else args.exchange[:1]:
                with dask.config.set({"distsort.exchange": exchange}):
                    run_cases(client, gpus, args, rows, exchange=exchange,
                              batch_interval_ms=interval)
    finish(rows, bandwidth, args)


def run_cases(client, gpus, args, rows, **settings):
    """Every (dtype, size) on this cluster; ``settings`` are recorded in the rows."""
    for dtype in args.dtypes:
        for size in args.sizes:
            nbytes = parse_bytes(size)
            if nbytes / gpus > parse_bytes(args.max_bytes_per_gpu):
                continue
            n = nbytes // np.dtype(dtype).itemsize
            for placement in args.placement:
                for local in args.local:
                    row = run_case(client, n, dtype, args, gpus * args.workers_per_gpu,
                                   placement, local)
                    row["gpus"], row["workers"] = gpus, gpus * args.workers_per_gpu
                    row["protocol"] = client.scheduler.address.split(":")[0]
                    row.update(settings, placement=placement, local=local)
                    rows.append(row)
                    report_row(rows, row, gpus, nbytes, args, settings)


def report_row(rows, row, gpus, nbytes, args, settings):
    """Save the rows so far (a run stopped at its time limit keeps them) and print one
    line for ``row``."""
    save_rows(rows, "distributed_sort", "partial", args.out, gpus=args.gpus)
    print(f"{gpus} GPU {row['dtype']} {format_bytes(nbytes)} {settings}: "
          f"{row['seconds']:.3f}s moved {format_bytes(row['moved_bytes'])} "
          f"rounds {row['rounds']} runs {[round(t, 3) for t in row['runs']]} "
          f"tasks {row['tasks']} spilled {row['spilled']} "
          f"(timed runs: {row['spilled_in_timed_runs']}) placement {row['placement']} "
          f"local {row['local']} rechunk+sort {row.get('one_chunk_sort_s')}", flush=True)


def device_name(cpu):
    if cpu:
        import os
        return f"cpu-{os.cpu_count()}cores"
    import cupy
    return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()


def finish(rows, bandwidth, args):
    device = device_name(args.cpu)
    if args.largest:
        path = save_rows(rows, "largest_sort", device, args.out, gpus=args.gpus)
        print(f"rows saved to {path}")
        return
    for r in rows:
        if bandwidth and r["gpus"] > 1 and r["workers"] == r["gpus"]:
            r["floor_s"] = r["local_sort_s"] + r["moved_bytes"] / (bandwidth * 1e9)
            r["over_floor"] = r["seconds"] / r["floor_s"]
        one = [q for q in rows if q["gpus"] == 1 and q["workers"] == 1
               and q["dtype"] == r["dtype"] and q["bytes"] * r["gpus"] == r["bytes"]
               and q.get("batch_interval_ms") == r.get("batch_interval_ms")]
        if one and r["gpus"] > 1:
            r["weak_scaling_time_ratio"] = r["seconds"] / one[0]["seconds"]
    print_table(rows, [("gpus", "{}"), ("workers", "{}"), ("dtype", "{}"), ("bytes", "{:.3g}"),
                       ("chunks", "{}"), ("placement", "{}"), ("local", "{}"),
                       ("seconds", "{:.3f}"),
                       ("one_chunk_sort_s", "{}"), ("gkeys_s", "{:.2f}"), ("moved_bytes", "{:.3g}"),
                       ("local_sort_s", "{:.3f}"), ("floor_s", "{:.3f}"),
                       ("over_floor", "{:.2f}"), ("weak_scaling_time_ratio", "{:.2f}")])
    path = save_rows(rows, "distributed_sort", device, args.out, nvlink_peer_gb_s=bandwidth,
                     gpus=args.gpus)
    print(f"rows saved to {path}")


if __name__ == "__main__":
    main()
