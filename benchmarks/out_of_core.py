"""Out-of-core sorts: arrays larger than the GPUs' device budget (``distsort.plan.outofcore``).

One dask-cuda worker per GPU with ``device_memory_limit=BUDGET``; the input is a
persisted Dask array made on the workers (CuPy chunks, which dask-cuda spills to host
memory beyond the budget; or ``--host-input``: NumPy chunks in host memory, sorted on
the GPUs).  Timed: ``distsort.sort(x).persist()`` until every output chunk is in
memory.  Beside the time, the run's own floor: pinned host<->device bandwidth measured
on the workers in the same run, times the bytes the chosen merge copies each way
(``kway.kway_bytes_moved`` for the k-way merge, ``outofcore.bytes_moved`` for the
network between runs, plus taking CuPy input off the GPU and, after the network,
putting the output back).  ``phases``: the worker's seconds per phase and its spills
(``distsort.backends.outofcore.stream_gpu.phase_seconds``).  Every output is checked on the
workers (``distsort.graph.verify``: sorted within and across chunks, the count, and
order-free 64-bit checksums of the keys and pairs).

    python benchmarks/out_of_core.py --gpus 1 --size 16GiB --chunks 16 --budget 4GB
    python benchmarks/out_of_core.py --gpus 2 --size 32GiB --chunks 32 --budget 4GB
    python benchmarks/out_of_core.py --dtypes uint64 uint32+uint32 --host-input
    python benchmarks/out_of_core.py --shared-workers 2    # two workers on GPU 0
    python benchmarks/out_of_core.py --shared-workers 2 --merges network kway
    python benchmarks/out_of_core.py --plot RESULT.json    # the PNG of a saved run
"""
from __future__ import annotations

import contextlib
import itertools
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

import driver


def _generate(seed, n, dtype, gpu, block_info=None):
    import numpy as np
    i = block_info[None]["chunk-location"][0]
    size = block_info[None]["chunk-shape"][0]
    import cupy
    rng = cupy.random.default_rng(seed * 100_003 + i)
    if np.dtype(dtype).kind == "f":
        out = rng.standard_normal(size, dtype=dtype)
    else:
        out = rng.integers(0, np.iinfo(dtype).max, size, dtype=dtype, endpoint=True)
    return out if gpu else out.get()  # NumPy's generator: a minute for 2^32 floats


def make_input(n, chunks, dtype, seed, gpu):
    import dask.array as da
    import numpy as np
    size = -(-n // chunks)
    meta = __import__("cupy" if gpu else "numpy").empty(0, dtype=dtype)
    return da.map_blocks(_generate, seed, n, np.dtype(dtype).name, gpu,
                         chunks=(driver_chunks(n, size),), dtype=dtype, meta=meta)


def driver_chunks(n, size):
    return tuple(min(size, n - i) for i in range(0, n, size))


def _pinned_bandwidth(dask_worker=None, nbytes=1 << 30):
    """Pinned H2D, D2H, and each direction while both run, in bytes/s (median of 5)."""
    import statistics

    import cupy
    import numpy as np
    h = np.frombuffer(cupy.cuda.alloc_pinned_memory(nbytes), np.uint8, nbytes)
    g = np.frombuffer(cupy.cuda.alloc_pinned_memory(nbytes), np.uint8, nbytes)
    h[:] = 7
    d, e = cupy.empty(nbytes, np.uint8), cupy.empty(nbytes, np.uint8)
    s1, s2 = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)

    def rate(fn):
        times = []
        for _ in range(5):
            cupy.cuda.Device().synchronize()
            t = time.perf_counter()
            fn()
            s1.synchronize()
            s2.synchronize()
            times.append(time.perf_counter() - t)
        return nbytes / statistics.median(times)

    h2d = rate(lambda: d.set(h, stream=s1))
    d2h = rate(lambda: d.get(out=g, stream=s1, blocking=False))
    assert (g == 7).all()  # the copies moved the bytes
    e[:] = d
    both = rate(lambda: (d.set(h, stream=s1), e.get(out=g, stream=s2, blocking=False)))
    h = g = None
    # CuPy's pinned pool would keep the 2 GiB locked in the worker: its host memory
    # would count in every row's peak
    cupy.get_default_pinned_memory_pool().free_all_blocks()
    return {"h2d": h2d, "d2h": d2h, "duplex_each": both}


def _stats_push(dask_worker=None):
    """Start counting device allocations (RMM) and reset the peak resident set."""
    Path("/proc/self/clear_refs").write_text("5")
    try:
        import rmm.statistics as st
        st.enable_statistics()
        before = st.get_statistics().current_bytes
        st.push_statistics()
        return before
    except (ImportError, AttributeError, RuntimeError):
        return None


def _proc_kib(path, field):
    for line in Path(path).read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return None


def _stats_pop(dask_worker=None):
    """``(peak device bytes allocated since the push, peak host RSS bytes, PSS bytes
    now)``.  RSS counts a page once per mapping: NumPy output chunks of the k-way
    merge map their runs' pages a second time (``distsort.backends.outofcore.pages``),
    which RSS counts twice once the chunks are read, PSS once."""
    peak = None
    try:
        import rmm.statistics as st
        peak = st.pop_statistics().peak_bytes
    except (ImportError, AttributeError, RuntimeError):
        pass
    return (peak, _proc_kib("/proc/self/status", "VmHWM"),
            _proc_kib("/proc/self/smaps_rollup", "Pss"))


def _device_name(dask_worker=None):
    import cupy
    return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()


def _pinned_stats(dask_worker=None):
    from distsort.backends.outofcore import pinned
    return pinned.pool().stats()


def _phase_seconds(dask_worker=None):
    """The GPU engine's seconds per phase since the last call (then reset)."""
    from distsort.backends.outofcore import stream_gpu
    return {k: round(v, 3) for k, v in stream_gpu.phase_seconds(reset=True).items()}


def stage_spans(events):
    """Wall seconds from the first start to the last stop of each stage's tasks."""
    spans = defaultdict(lambda: [math.inf, -math.inf, 0.0])
    for e in events:
        stage = _stage(e["key"])
        if stage.startswith("distsort-r") and stage[10:12].isdigit():
            stage = "distsort-rounds"
        for kind, start, stop in ((s["action"], s["start"], s["stop"])
                                  for s in e["startstops"]):
            if kind == "compute":
                spans[stage][0] = min(spans[stage][0], start)
                spans[stage][1] = max(spans[stage][1], stop)
                spans[stage][2] += stop - start
    return {k: {"span": round(b - a, 3), "busy": round(c, 3)}
            for k, (a, b, c) in sorted(spans.items(), key=lambda kv: kv[1][0])}


def timeline(events, since):
    """``[key, start, stop]`` of every task's compute, in seconds after ``since`` (where
    a first sort waits)."""
    out = [[str(e["key"]), round(s["start"] - since, 3), round(s["stop"] - since, 3)]
           for e in events for s in e["startstops"] if s["action"] == "compute"]
    return sorted(out, key=lambda t: t[1])


def _stage(key):
    """``distsort-run``, ``distsort-rounds``, ``sort``, ... of a task key (a tuple, or a
    list once it went through the task stream's messages)."""
    name = str(key[0] if isinstance(key, (tuple, list)) else key)
    stage = name.rsplit("-", 1)[0]
    if stage.startswith("distsort-r") and stage[10:12].isdigit():
        stage = "distsort-rounds"
    return stage


def _summarize(keys, values=None, order=None):
    """``verify.summarize`` on the GPU (host chunks are copied there first: hashing 16 GiB
    with NumPy takes a minute)."""
    import cupy

    from distsort.graph import verify
    return verify.summarize(cupy.asarray(keys), None if values is None
                            else cupy.asarray(values), order=order)


def check(client, x, v, out, order_what):
    """Every output chunk sorted and, against the input, the same count and checksums."""
    import dask
    from distsort.graph import verify
    from distsort.backends import Order
    keyed = v is not None
    order = Order(keyed=keyed)
    outk, outv = (out if keyed else (out, None))
    n_in, n_out = x.numblocks[0], outk.numblocks[0]
    ins = [dask.delayed(_summarize)(k, vv) for k, vv in
           zip(x.to_delayed(), v.to_delayed() if keyed else [None] * n_in, strict=True)]
    outs = [dask.delayed(_summarize)(k, vv, order=order) for k, vv in
            zip(outk.to_delayed(), outv.to_delayed() if keyed else [None] * n_out, strict=True)]
    ins, outs = client.compute([ins, outs], sync=True)
    return verify.check(ins, outs, outk.chunks[0], order_what)


def one_case(client, args, dtype, seed, budget, workers, first=False):
    import dask
    import numpy as np
    from distributed import wait

    import distsort
    from distsort.api import planning
    from distsort.plan.kway import kway_bytes_moved
    from distsort.plan.outofcore import bytes_moved, run_lengths
    keyed = "+" in dtype
    kdt, vdt = (dtype.split("+") if keyed else (dtype, None))
    per = np.dtype(kdt).itemsize + (np.dtype(vdt).itemsize if keyed else 0)
    n = args.size // per
    gpu = not args.host_input
    x = make_input(n, args.chunks, kdt, seed, gpu)
    v = make_input(n, args.chunks, vdt, seed + 7, gpu) if keyed else None
    x, v = (x.persist(), v.persist() if keyed else None)
    wait([x] + ([v] if keyed else []))
    # NumPy chunks on dask-cuda workers are sorted on their GPUs: no option needed
    with planning(merge=args.merge) as plans:
        out = distsort.sort_by_key(x, v) if keyed else distsort.sort(x)
    ooc = plans[-1].out_of_core
    before = client.run(_stats_push)
    client.run(_phase_seconds)  # reset
    since = time.time()
    t = time.perf_counter()
    out = dask.persist(*out) if keyed else out.persist()
    wait(list(out) if keyed else out)
    client.run(lambda: __import__("cupy").cuda.Device().synchronize())
    seconds = time.perf_counter() - t
    events = [e for e in client.get_task_stream(start=since)
              if _stage(e["key"]).startswith(("distsort", "sort"))]
    stats = client.run(_stats_pop)
    phases = client.run(_phase_seconds)
    ok = check(client, x, v, out, "sort_by_key" if keyed else "sort")
    chunks = x.chunks[0]
    plan = ooc.plan
    lengths = run_lengths(chunks, plan.run_chunks)
    network = bytes_moved(plan, lengths, per)
    merge = ooc.merge  # the plan's choice (``kway.choose_merge``)
    stage_in = n * per if gpu else 0  # CuPy input taken off the GPU
    if ooc.one_pass:  # the merged chunks stay on the device for CuPy output
        h2d, d2h = kway_bytes_moved(n * per), kway_bytes_moved(n * per) + stage_in
    else:  # the network's output chunks are put back on the device
        h2d, d2h = network + stage_in, network + stage_in
    row = {"dtype": dtype, "bytes": n * per, "chunks": len(chunks), "gpus": workers,
           "budget": budget, "input": "cupy" if gpu else "numpy", "seconds": seconds,
           "runs": plan.runs, "run_chunks": plan.run_chunks, "merge": merge,
           "rounds": len(plan.rounds) if merge == "network" else 0,
           "h2d_bytes": h2d, "d2h_bytes": d2h, "checked": bool(ok),
           "stages": stage_spans(events),
           "tasks": timeline(events, since) if first else None,
           "peak_device": [s[0] for s in stats.values()],
           "device_before": list(before.values()),
           "peak_host_rss": [s[1] for s in stats.values()],
           "host_pss_after": [s[2] for s in stats.values()],
           "phases": list(phases.values())}
    del out
    return row


@contextlib.contextmanager
def _cluster(args, budget):
    """One dask-cuda worker per GPU under ``budget``; or ``--shared-workers`` plain
    workers sharing GPU 0, the budget given as ``distsort.device-memory-limit`` (read
    where the sort is planned, here)."""
    import dask
    if not args.shared_workers:
        from distsort.cluster import local_cuda_cluster
        with local_cuda_cluster(n_workers=args.gpus, device_memory_limit=budget) as cluster:
            yield cluster
        return
    from distsort.cluster.shared_gpu import shared_gpu_cluster
    with (dask.config.set({"distsort.device-memory-limit": budget}),
          shared_gpu_cluster(args.shared_workers,
                             pool_fraction=0.8 / args.shared_workers) as cluster):
        yield cluster


def add_floor(row, bw, gpus=None):
    """The plan's copies at the bandwidth measured on the workers (the two directions
    overlap, each at its rate while both run); each GPU moves its share (``gpus``:
    the devices, where workers share one)."""
    each = bw["duplex_each"]
    g = gpus or row["gpus"]
    row["floor_s"] = max(row["h2d_bytes"], row["d2h_bytes"]) / g / each
    row["time_over_floor"] = row["seconds"] / row["floor_s"]
    return row


def _when(row):
    """A row's place among the sorts of its worker, for the plot."""
    if row.get("first_in_worker", row.get("warmup")):
        return "first sort (cold)"
    return f"first {row['dtype']} sort" if row.get("warmup") else "warm"


def plot(path):
    import json

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    doc = json.loads(Path(path).read_text())
    rows = [r for r in doc["rows"] if "floor_s" in r]
    labels = [f"{r['dtype']} {r['bytes'] / 2**30:.0f} GiB\n{r['gpus']} GPU, "
              f"{r.get('workers', r['gpus'])} workers, {r['input']} input"
              f"\n{r.get('merge', '')}, {_when(r)}"
              + (f"\n{r['blocks']}" if "blocks" in r else "") for r in rows]
    fig, ax = plt.subplots(figsize=(1.8 * len(rows) + 2, 4))
    xs = range(len(rows))
    ax.bar([i - 0.2 for i in xs], [r["seconds"] for r in rows], 0.4, label="distsort")
    ax.bar([i + 0.2 for i in xs], [r["floor_s"] for r in rows], 0.4, label="floor (PCIe)")
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_ylabel("seconds")
    ax.set_title(f"out of core, budget {rows[0]['budget'] / 1e9:.0f} GB per GPU "
                 f"({doc['device']}, {doc['date']})")
    ax.legend()
    fig.tight_layout()
    out = Path(path).with_suffix(".png")
    fig.savefig(out, dpi=100)
    return out


def main():
    p = driver.parser(__doc__.splitlines()[0])
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--size", default="16GiB", help="bytes of keys (and values) per case")
    p.add_argument("--chunks", type=int, default=16)
    p.add_argument("--budget", default="4GB", help="device_memory_limit of each worker")
    p.add_argument("--dtypes", nargs="+", default=["float32"],
                   help="key dtypes; KEY+VALUE for key-value sorts")
    p.add_argument("--host-input", action="store_true",
                   help="NumPy chunks in host memory (sorted on the GPUs)")
    p.add_argument("--shared-workers", type=int, default=0,
                   help="N workers sharing GPU 0 (distsort.cluster.shared_gpu), each with the "
                        "budget as distsort.device-memory-limit, instead of dask-cuda's")
    p.add_argument("--merges", nargs="+", default=["auto"],
                   choices=["auto", "kway", "network"],
                   help="distsort.out-of-core-merge of each case, in turn (kway on "
                        "several workers: one exchange of slices)")
    p.add_argument("--plot", help="only draw the PNG of this JSON")
    args = p.parse_args()
    if args.plot:
        print(plot(args.plot))
        return
    from dask.utils import parse_bytes
    from distributed import Client

    args.size = parse_bytes(args.size)
    budget = parse_bytes(args.budget)
    with _cluster(args, budget) as cluster, Client(cluster) as client:
        bw = next(iter(client.run(_pinned_bandwidth).values()))
        print(f"pinned H2D {bw['h2d'] / 1e9:.1f} GB/s, D2H {bw['d2h'] / 1e9:.1f} GB/s, "
              f"both at once {bw['duplex_each'] / 1e9:.1f} GB/s each", flush=True)
        device = next(iter(client.run(_device_name).values()))
        client.get_task_stream(start=time.time())  # starts the stream: the first case's stages
        rows = []
        for dtype, merge in itertools.product(args.dtypes, args.merges):
            args.merge = merge
            for run in range(args.warmup + args.runs):
                row = add_floor(one_case(client, args, dtype, 1000 + run, budget,
                                         args.shared_workers or args.gpus, not rows), bw,
                                gpus=1 if args.shared_workers else args.gpus)
                row["merge_option"] = merge
                row["workers"] = args.shared_workers or args.gpus
                row["gpus"] = 1 if args.shared_workers else args.gpus
                row["warmup"] = run < args.warmup
                row["first_in_worker"] = not rows
                row["first_of_dtype"] = run == 0
                row["host_rss_over_data"] = max(row["peak_host_rss"]) / row["bytes"]
                row["pinned"] = next(iter(client.run(_pinned_stats).values()))
                rows.append(row)
                scenario = (f"out_of_core_{args.shared_workers}workers_1gpu"
                            if args.shared_workers else f"out_of_core_{args.gpus}gpu")
                # saved after every case: kept on a timeout
                path = driver.save_rows(rows, scenario, f"{args.gpus}x{device}", args.out,
                                        bandwidth=bw, argv=sys.argv[1:])
                print({k: row[k] for k in ("dtype", "merge", "input", "bytes", "seconds", "floor_s",
                                           "time_over_floor", "checked", "peak_device",
                                           "peak_host_rss", "host_rss_over_data",
                                           "host_pss_after", "stages",
                                           "phases", "pinned", "first_in_worker")},
                      flush=True)
    timed = [r for r in rows if not r["warmup"]]
    driver.print_table(timed, [("dtype", "{}"), ("input", "{}"), ("gpus", "{}"),
                               ("seconds", "{:.2f}"), ("floor_s", "{:.2f}"),
                               ("time_over_floor", "{:.2f}"), ("checked", "{}")])
    print(path)
    try:
        print(plot(path))
    except ImportError:
        print("matplotlib not installed: no PNG (draw it with --plot)")


if __name__ == "__main__":
    main()
