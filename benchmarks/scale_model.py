"""How distsort would scale to many GPUs: a cost model of the network and of the one
exchange, fitted to runs.

    python benchmarks/exchange_tasks.py              # the scheduler's times (~3 min)
    python benchmarks/scale_model.py                 # fit and predict: tables + JSON
    python benchmarks/scale_model.py --chunks-per-gpu 4 --per-gpu 34359738368

The bitonic network on P GPUs, each holding one sorted run (its chunks sorted as
one), takes ``L (L + 1) / 2`` rounds, ``L = log2 P``.  A round costs

    latency + b P + crossing bytes / link bandwidth + merged bytes / merge rate

per GPU: a trip through the Dask scheduler (``b``: its time per task, 2 tasks per GPU
and round), the elements that change sides in the compare-split (the fraction per
round comes from simulating the network on random data, here, in NumPy) over NVLink
inside a node and InfiniBand between nodes, and a merge.

distsort's one exchange (``strategy="exchange"``) in parts: a local radix sort of each
GPU's run; the splitter search (every run's samples gathered and sorted in one task,
every run's windows around each output chunk's end gathered in one task); one
all-to-all (``1 - 1/P`` of each GPU's data once); a merge of the ``P`` slices that
arrived (a radix sort of them, or ``log2 P`` merge passes, the faster); a trip through
the scheduler per task layer on its critical path (``EXCHANGE_LAYERS``) and the
scheduler's time for each of its tasks (``P^2`` slices among them).  Beside it, the
same exchange as one collective (one task per GPU that runs it all, its splitter
rounds and all-to-all as collectives, explicit-comms style: one trip, ``P`` tasks, each
end's windows sent to its owner only); an ideal sample sort (local sort, one
all-to-all, local merge: nothing else); and RMG sort's published 8-GPU figure
(``RMG_SORT``).  The parts table says what makes up the gap, and the time per task at
which the collective comes within 1.2x of the ideal.

Fitted to: the two-H200 rows of ``benchmarks/results/distributed_sort_2xH200_2026-11-22.json``
(local sort rate, merge rate, per-round latency, with the measured
cudaMemcpyPeer bandwidth), the local radix rate of issue 22 (2^28 float32, 7.0 ms), and
the scheduler's time per task and per trip measured with 8 CPU worker processes on
loopback (``benchmarks/exchange_tasks.py``).  Link bandwidths beyond the measured
NVLink are assumptions, printed with the tables.  ``--measure-cpu`` makes the older
CPU runs of the network (2..8 workers), reported beside the fit.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import statistics
from pathlib import Path

import numpy as np
from driver import median_time, timings

from distsort.plan.network import plan_network

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
GPU_RUNS = RESULTS / "distributed_sort_2xH200_2026-11-22.json"

#: Measured: cudaMemcpyPeer between the two H200s, one way, peer access on (docs/performance.md).
NVLINK_GBS = 396.0
#: Assumed: one 400 Gb/s InfiniBand NIC per GPU, about 45 GB/s of payload.
IB_GBS = 45.0
#: Assumed: GPUs per node linked by NVLink (an 8-GPU HGX node).
NODE_GPUS = 8
#: Measured (issue 22): cupy.sort of 2^28 float32 on one H200, 7.0 ms.
RADIX_BYTES_S = 2**28 * 4 / 7.0e-3


# ---------------------------------------------------------------- crossing fractions
def crossing_fractions(p, m=256, seed=0):
    """Per round of the network on ``p`` sorted runs of ``m`` random keys: the mean
    fraction of a run that crosses to its partner (simulated in NumPy)."""
    rng = np.random.default_rng(seed)
    runs = [np.sort(rng.random(m)) for _ in range(p)]
    out = []
    for rnd in plan_network(p):
        fr = []
        for lo, hi in rnd.pairs:
            a, b = runs[lo], runs[hi]
            k = int(np.sum(a[::-1] > b))  # the predicate is monotone: a count is k
            fr.append(k / m)
            both = np.sort(np.concatenate((a, b)))
            runs[lo], runs[hi] = both[:m], both[m:]
        out.append((rnd, float(np.mean(fr)) if fr else 0.0))
    return out


def partner_distance(rnd):
    """The largest distance between the two runs of a pair in the round."""
    return max(hi - lo for lo, hi in rnd.pairs) if rnd.pairs else 0


# ---------------------------------------------------------------- fits
def fit_gpu(path=GPU_RUNS, bandwidth_gbs=NVLINK_GBS):
    """Local (bitonic) sort rate, merge rate and per-round latency from the measured
    rows: each row's time = its local sorts + rounds x latency + crossing bytes over
    the link + merged bytes / merge rate, solved in least squares."""
    rows = json.loads(Path(path).read_text())["rows"]
    sort_rate = statistics.median(r["bytes"] / r["gpus"] / r["local_sort_s"] for r in rows)
    lhs, rhs, used = [], [], []
    for r in rows:
        c, g = r["chunks"], r["gpus"]
        if c < 2:
            continue
        per_gpu = r["bytes"] / g
        rounds = len(plan_network(c))
        # Each GPU merges all its chunks in every round; sorts them one by one first.
        sorts = per_gpu / sort_rate
        moved = r["moved_bytes"] / g / (bandwidth_gbs * 1e9)
        lhs.append([rounds, rounds * per_gpu])
        rhs.append(r["seconds"] - sorts - moved)
        used.append((r["gpus"], r["dtype"], r["bytes"], c, r["seconds"]))
    (latency, per_byte), *_ = np.linalg.lstsq(np.array(lhs), np.array(rhs), rcond=None)
    predicted = np.array(lhs) @ [latency, per_byte]
    return dict(sort_bytes_s=sort_rate, merge_bytes_s=1 / per_byte, round_latency_s=latency,
                rows=used, residual_s=list(map(float, np.array(rhs) - predicted)))


#: Tasks per GPU and round that pass through the scheduler (the IPC exchange: a share
#: and a merge per chunk; ``distsort.graph.layers``).
TASKS_PER_GPU_ROUND = 2


def fit_cpu(path):
    """From the CPU runs: the time per round beyond the sorts and merges, per worker
    count (reported), and the scheduler's time per task (measured alone), which gives
    ``b = TASKS_PER_GPU_ROUND x task time``.  A slope fitted to the time per round
    would mostly measure the 2 shared cores running up to 8 worker processes."""
    doc = json.loads(Path(path).read_text())
    xs, ys = [], []
    for r in doc["rows"]:
        extra = r["seconds"] - r["local_sort_s"] - r["rounds"] * r["merge_s"]
        xs.append(r["workers"])
        ys.append(extra / max(1, r["rounds"]))
    slope, a = np.polyfit(xs, ys, 1) if len(set(xs)) > 1 else (0.0, ys[0])
    task = doc.get("scheduler_task_s", 0.0)
    return dict(a_s=float(a), slope_s_per_worker=float(slope),
                points=list(zip(xs, ys, strict=False)),
                scheduler_task_s=task, b_s_per_worker=TASKS_PER_GPU_ROUND * task)


def scheduler_task_seconds(tasks=2000):
    """The scheduler's time per task: independent no-op tasks on one worker thread,
    wall time over their count (the worker's own part is microseconds)."""
    import distributed
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cl, \
            distributed.Client(cl) as client:
        seconds = median_time(
            lambda: distributed.wait(client.map(_noop, range(tasks), pure=False)), 3, 0)[0]
    return seconds / tasks


def _noop(i):
    return i


# ---------------------------------------------------------------- predictions
def bitonic_seconds(p, per_gpu, fit, b, fractions, radix=True, links="ib"):
    """Predicted time of distsort on ``p`` GPUs with ``per_gpu`` bytes each."""
    sort = per_gpu / (RADIX_BYTES_S if radix else fit["sort_bytes_s"])
    t = sort
    for rnd, frac in fractions:
        far = links == "ib" and partner_distance(rnd) >= NODE_GPUS
        bw = (IB_GBS if far else NVLINK_GBS) * 1e9
        t += (fit["round_latency_s"] + b * (p - 2) + frac * per_gpu / bw
              + per_gpu / fit["merge_bytes_s"])
    return t


def all_to_all_seconds(p, per_gpu, links="ib"):
    """One all-to-all of ``per_gpu`` bytes per GPU: ``1 - 1/p`` of it leaves each GPU,
    the part bound for other nodes over InfiniBand, the rest over NVLink, at once."""
    off = (1 - 1 / p) * per_gpu
    if links == "ib" and p > NODE_GPUS:
        far = (1 - NODE_GPUS / p) * per_gpu
        return max(far / (IB_GBS * 1e9), (off - far) / (NVLINK_GBS * 1e9))
    return off / (NVLINK_GBS * 1e9)


# ---------------------------------------------------------------- the exchange
#: Published (RMG sort, BTW'23): 8 A100s sort 32e9 uint32 in 3.09 s, one all-to-all.
RMG_SORT = dict(gpus=8, keys=32e9, itemsize=4, seconds=3.09)
#: Task layers on the exchange's critical path (``distsort.graph.exchange``): the run,
#: its samples, the pivots, the windows, the splitters, the slices, the merges and the
#: output chunks: each a trip through the scheduler before the next can start.
EXCHANGE_LAYERS = 8
#: Of those, the stages whose tasks depend across workers (``tests/test_exchange.py``).
EXCHANGE_STAGES = 3
#: Measured: the scheduler's time per task and per dependent trip, CPU worker processes.
EXCHANGE_TASKS = RESULTS / "exchange_tasks_cpu-2cores_2026-11-29.json"


def exchange_constants(path=EXCHANGE_TASKS):
    """The scheduler's time per task and per trip (a dependent task on another worker)
    measured by ``benchmarks/exchange_tasks.py``, and its slice-stage rows."""
    doc = json.loads(Path(path).read_text())
    sched = next(r for r in doc["rows"] if r["what"] == "scheduler")
    return dict(task_s=sched["task_s"], trip_s=sched["trip_s"], path=str(path),
                rows=[r for r in doc["rows"] if r["what"] != "scheduler"])


def merge_seconds(p, per_gpu, fit):
    """A GPU's merge of the ``p`` slices it received: a radix sort of them as one, or a
    tree of ``ceil(log2 p)`` two-way merge passes at the fitted merge rate, whichever
    is faster (issue 52: the GPU engine picks the same way)."""
    passes = max(1, int(np.ceil(np.log2(max(2, p)))))
    return min(per_gpu / RADIX_BYTES_S, passes * per_gpu / fit["merge_bytes_s"])


def ideal_seconds(p, per_gpu, fit, links="ib"):
    """An ideal sample sort: a local radix sort, one all-to-all, a local merge; no
    splitters, no scheduler."""
    return (per_gpu / RADIX_BYTES_S + all_to_all_seconds(p, per_gpu, links)
            + merge_seconds(p, per_gpu, fit))


def link_in(p, links="ib"):
    """Bytes/s into one GPU from all the others: NVLink in a node, else InfiniBand."""
    return (IB_GBS if links == "ib" and p > NODE_GPUS else NVLINK_GBS) * 1e9


def splitter_parts(p, per_gpu, itemsize=4, chunks_per_gpu=1):
    """Bytes of the splitter search (``distsort.plan.exchange.samples_per_run``): every
    run's samples, gathered in one task (the pivots) and sorted there (on a GPU, at the
    radix rate); and every run's window around each output chunk's end (about two
    sample steps), gathered in one task (the splitters), or spread over the owners of
    the ends (one collective)."""
    from distsort.plan.exchange import samples_per_run
    n = int(per_gpu // itemsize)
    c = chunks_per_gpu * p
    s = samples_per_run(n, c)
    window = 2 * -(-n // s)
    return dict(samples_per_run=s, samples_bytes=p * s * itemsize,
                windows_bytes=p * (c - 1) * window * itemsize,
                windows_per_owner_bytes=c * window * itemsize,
                sample_sort_s=p * s * itemsize / RADIX_BYTES_S)


def exchange_parts(p, per_gpu, fit, sched, links="ib", design="tasks", *, itemsize=4,  # noqa: PLR0913
                   chunks_per_gpu=1):
    """The exchange's time on ``p`` GPUs in parts (seconds): the local sort, the
    all-to-all, the merge, the splitter search, the trips through the scheduler and
    its time per task.  ``design``: ``"tasks"`` (the graph of
    ``distsort.graph.exchange``: a run, samples and windows per GPU, one pivots and one
    splitters task, ``p^2`` slice tasks, and a merge and an output task per output
    chunk, ``C = chunks_per_gpu p``);
    ``"collective"``: one task per GPU that runs the whole exchange, its splitter
    rounds and all-to-all as collectives (explicit-comms style): one trip, ``p``
    tasks, the samples all-gathered and each end's windows sent to its owner only."""
    c = chunks_per_gpu * p
    sp = splitter_parts(p, per_gpu, itemsize, chunks_per_gpu)
    bw = link_in(p, links)
    parts = dict(sort=per_gpu / RADIX_BYTES_S, all_to_all=all_to_all_seconds(p, per_gpu, links),
                 merge=merge_seconds(p, per_gpu, fit))
    if design == "tasks":
        tasks = 3 * p + 2 + p * p + 2 * c
        parts["splitters"] = ((sp["samples_bytes"] + sp["windows_bytes"]) / bw
                              + sp["sample_sort_s"])
        parts["trips"] = EXCHANGE_LAYERS * sched["trip_s"]
    else:
        tasks = p
        parts["splitters"] = ((sp["samples_bytes"] + sp["windows_per_owner_bytes"]) / bw
                              + sp["sample_sort_s"])
        parts["trips"] = sched["trip_s"]
    parts["tasks"] = tasks * sched["task_s"]
    parts["task_count"] = tasks
    return parts


def exchange_total(parts):
    return sum(v for k, v in parts.items() if k != "task_count")


def break_even_task_s(p, per_gpu, fit, sched, links="ib", target=1.2, **kw):
    """The scheduler's time per task at which the collective exchange takes ``target``
    times the ideal sample sort (None: not even at zero)."""
    ideal = ideal_seconds(p, per_gpu, fit, links)
    rest = exchange_total(exchange_parts(p, per_gpu, fit, dict(sched, task_s=0.0), links,
                                         "collective", **kw))
    spare = target * ideal - rest
    return spare / p if spare > 0 else None


def rmg_rows(fit, b, crossing, sched):
    """Both designs on RMG sort's published case (8 GPUs of one node, NVLink)."""
    p = RMG_SORT["gpus"]
    per_gpu = RMG_SORT["keys"] * RMG_SORT["itemsize"] / p
    kw = dict(links="nvlink")
    return dict(gpus=p, per_gpu_bytes=per_gpu, published_s=RMG_SORT["seconds"],
                bitonic_nvlink_s=bitonic_seconds(p, per_gpu, fit, b, crossing[p],
                                                 links="nvlink"),
                exchange_tasks_nvlink_s=exchange_total(exchange_parts(
                    p, per_gpu, fit, sched, design="tasks", **kw)),
                exchange_collective_nvlink_s=exchange_total(exchange_parts(
                    p, per_gpu, fit, sched, design="collective", **kw)),
                ideal_sample_nvlink_s=ideal_seconds(p, per_gpu, fit, "nvlink"))


def predict(fit, b, per_gpu, gpus, crossing, sched, chunks_per_gpu=1):
    """Rows of predictions: the network (``b``: the scheduler's time per GPU and round;
    ``_b0``: without it, a lower bound), the exchange as Dask tasks and as one
    collective, the ideal sample sort, and the exchange's parts."""
    rows = []
    for p in gpus:
        fr = crossing[p]
        kw = dict(chunks_per_gpu=chunks_per_gpu)
        tasks = exchange_parts(p, per_gpu, fit, sched, design="tasks", **kw)
        coll = exchange_parts(p, per_gpu, fit, sched, design="collective", **kw)
        ideal = ideal_seconds(p, per_gpu, fit)
        row = dict(gpus=p, rounds=len(fr), per_gpu_bytes=per_gpu,
                   crossing_per_gpu_bytes=sum(f for _, f in fr) * per_gpu,
                   bitonic_nvlink_b0_s=bitonic_seconds(p, per_gpu, fit, 0, fr, links="nvlink"),
                   bitonic_ib_b0_s=bitonic_seconds(p, per_gpu, fit, 0, fr, links="ib"),
                   bitonic_ib_s=bitonic_seconds(p, per_gpu, fit, b, fr, links="ib"),
                   ideal_sample_ib_s=ideal,
                   exchange_tasks_ib_s=exchange_total(tasks),
                   exchange_collective_ib_s=exchange_total(coll),
                   exchange_tasks_parts=tasks, exchange_collective_parts=coll,
                   splitters=splitter_parts(p, per_gpu, chunks_per_gpu=chunks_per_gpu),
                   break_even_task_s=break_even_task_s(p, per_gpu, fit, sched, **kw))
        row["tasks_vs_ideal"] = row["exchange_tasks_ib_s"] / ideal
        row["collective_vs_ideal"] = row["exchange_collective_ib_s"] / ideal
        rows.append(row)
    return rows


COLUMNS = [("gpus", "gpus", "{}"), ("rounds", "rounds", "{}"),
           ("bitonic_nvlink_b0_s", "network NVLink b=0", "{:.2f}"),
           ("bitonic_ib_b0_s", "network IB b=0", "{:.2f}"),
           ("bitonic_ib_s", "network IB", "{:.2f}"),
           ("ideal_sample_ib_s", "ideal sample sort", "{:.3f}"),
           ("exchange_tasks_ib_s", "exchange, tasks", "{:.2f}"),
           ("tasks_vs_ideal", "/ ideal", "{:.1f}"),
           ("exchange_collective_ib_s", "exchange, collective", "{:.3f}"),
           ("collective_vs_ideal", "/ ideal", "{:.2f}")]

PARTS = ("sort", "all_to_all", "merge", "splitters", "trips", "tasks")


def table(rows):
    """A Markdown table of the predictions (seconds)."""
    lines = ["| " + " | ".join(h for _, h, _ in COLUMNS) + " |",
             "|" + "---|" * len(COLUMNS)]
    for r in rows:
        vals = [fmt.format(r[k]) for k, _, fmt in COLUMNS]
        lines.append("| " + " | ".join(vals) + " |")
    return "\n".join(lines)


def parts_table(rows):
    """The exchange's parts (seconds), as tasks / as one collective, and the time per
    task at which the collective takes 1.2x the ideal."""
    head = ["gpus", "task count", *PARTS, "break-even task time"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        t, c = r["exchange_tasks_parts"], r["exchange_collective_parts"]
        cells = [str(r["gpus"]), f"{t['task_count']} / {c['task_count']}"]
        cells += [f"{t[k]:.3f} / {c[k]:.3f}" for k in PARTS]
        be = r["break_even_task_s"]
        cells.append("none" if be is None else f"{be * 1e6:.0f} us")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------- CPU runs
def measure_cpu(workers=(2, 4, 8), chunk=2**17, runs=3):
    """distsort on W CPU worker processes (one chunk each), against its local sorts and
    merges timed alone; every result compared with numpy.sort element for element."""
    import dask
    import dask.array as da
    import distributed

    import distsort
    from distsort.backends.cpu import numpy_backend as nb
    from distsort.backends import Order
    rng = np.random.default_rng(22)
    order = Order()
    a = nb.prepare(rng.random(chunk), None, order)
    b = nb.prepare(rng.random(chunk), None, order)
    sort_s = median_time(lambda: nb.prepare(rng.random(chunk), None, order), 5, 0)[0]
    merge_s = median_time(lambda: nb.merge_low(a, b, order), 5, 0)[0]
    rows = []
    for w in workers:
        with distributed.LocalCluster(n_workers=w, threads_per_worker=1, processes=True,
                                      host="127.0.0.1", dashboard_address=None) as cl, \
                distributed.Client(cl) as client, dask.config.set({"distsort.group": 1}):
            held = {}

            def place(w=w, client=client, held=held):
                """Fresh data, persisted on the workers before the clock starts."""
                held["data"] = rng.random(w * chunk)
                held["x"] = client.persist(da.from_array(held["data"], chunks=chunk))
                distributed.wait(held["x"])

            def check(out, held=held):
                np.testing.assert_array_equal(out, np.sort(held.pop("data")))
                del held["x"]

            times = timings(lambda client=client, held=held:
                            client.compute(distsort.sort(held["x"])).result(),
                            runs, 1, before=place, after=check)
            rounds = len(plan_network(w))
            # Merges of one round run in parallel on the workers, as do the sorts.
            rows.append(dict(workers=w, chunk=chunk, rounds=rounds,
                             seconds=statistics.median(times), runs=times,
                             local_sort_s=sort_s, merge_s=merge_s))
            print(rows[-1], flush=True)
    return rows


def save(doc, name):
    date = _dt.date.today().isoformat()
    path = RESULTS / f"{name}_{date}.json"
    doc = {"date": date, "host": platform.node(), **doc}
    path.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--measure-cpu", action="store_true", help="make the CPU runs first")
    p.add_argument("--cpu-runs", help="JSON of CPU runs (default: the newest saved)")
    p.add_argument("--per-gpu", default=2**33, type=int, help="bytes per GPU (8 GiB)")
    p.add_argument("--gpus", type=int, nargs="+", default=[2, 8, 16, 128, 1024])
    p.add_argument("--chunks-per-gpu", type=int, default=1, help="output chunks per GPU")
    p.add_argument("--exchange-tasks", default=EXCHANGE_TASKS,
                   help="JSON of benchmarks/exchange_tasks.py (the scheduler's times)")
    args = p.parse_args(argv)
    if args.measure_cpu:
        import os
        task = scheduler_task_seconds()
        print(f"scheduler: {task * 1e6:.0f} us per task", flush=True)
        rows = measure_cpu()
        path = save({"scenario": "scale_model_cpu", "device": f"cpu-{os.cpu_count()}cores",
                     "scheduler_task_s": task, "rows": rows},
                    f"scale_model_cpu_cpu-{os.cpu_count()}cores")
        print(f"CPU runs saved to {path}")
        args.cpu_runs = args.cpu_runs or path
    cpu_path = args.cpu_runs or max(RESULTS.glob("scale_model_cpu_*.json"), default=None)
    fit = fit_gpu()
    cpu = fit_cpu(cpu_path) if cpu_path else dict(a_s=0.0, b_s_per_worker=0.0, points=[])
    sched = exchange_constants(args.exchange_tasks)
    # one scheduler for both designs: the time per task measured with the exchange's
    b = TASKS_PER_GPU_ROUND * sched["task_s"]
    crossing = {g: crossing_fractions(g) for g in {*args.gpus, RMG_SORT["gpus"]}}
    rows = predict(fit, b, args.per_gpu, args.gpus, crossing, sched, args.chunks_per_gpu)
    print(f"fit (2x H200): bitonic sort {fit['sort_bytes_s'] / 1e9:.1f} GB/s, merge "
          f"{fit['merge_bytes_s'] / 1e9:.0f} GB/s, latency {fit['round_latency_s'] * 1e3:.1f} "
          f"ms/round, residuals {[round(r * 1e3, 1) for r in fit['residual_s']]} ms; "
          f"radix sort {RADIX_BYTES_S / 1e9:.0f} GB/s; scheduler (CPU, "
          f"{sched['path']}): {sched['task_s'] * 1e6:.0f} us/task, "
          f"{sched['trip_s'] * 1e3:.1f} ms/trip; "
          f"assumed: NVLink {NVLINK_GBS:.0f} GB/s, IB {IB_GBS:.0f} GB/s per GPU, "
          f"{NODE_GPUS} GPUs per node; {args.per_gpu / 2**30:.0f} GiB of uint32 per GPU, "
          f"{args.chunks_per_gpu} output chunk(s) per GPU")
    print(table(rows))
    print("\nThe exchange's parts, seconds: as Dask tasks / as one collective")
    print(parts_table(rows))
    rmg = rmg_rows(fit, b, crossing, sched)
    print(f"\nRMG sort's case ({rmg['gpus']} GPUs, {rmg['per_gpu_bytes'] / 1e9:.0f} GB each, "
          f"NVLink): published {rmg['published_s']:.2f} s (A100s); predicted on H200s: "
          f"network {rmg['bitonic_nvlink_s']:.2f} s, exchange as tasks "
          f"{rmg['exchange_tasks_nvlink_s']:.2f} s, as one collective "
          f"{rmg['exchange_collective_nvlink_s']:.2f} s, ideal sample sort "
          f"{rmg['ideal_sample_nvlink_s']:.2f} s")
    path = save({"scenario": "scale_model_exchange", "fit_gpu": fit, "fit_cpu": cpu,
                 "scheduler": sched, "rmg_sort": rmg,
                 "assumed": dict(ib_gb_s=IB_GBS, node_gpus=NODE_GPUS, nvlink_gb_s=NVLINK_GBS,
                                 itemsize=4, chunks_per_gpu=args.chunks_per_gpu),
                 "rows": rows}, "scale_model_prediction_exchange")
    print(f"saved to {path}")


if __name__ == "__main__":
    main()
