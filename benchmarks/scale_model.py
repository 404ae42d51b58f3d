"""How distsort's network would scale to many GPUs: a cost model, fitted to runs.

    python benchmarks/scale_model.py --measure-cpu   # CPU runs, 2..8 workers (~2 min)
    python benchmarks/scale_model.py                 # fit and predict: table + JSON

The bitonic network on P GPUs, each holding one sorted run (its chunks sorted as
one), takes ``L (L + 1) / 2`` rounds, ``L = log2 P``.  A round costs

    latency(P) + crossing bytes / link bandwidth + merged bytes / merge rate

per GPU, where ``latency(P) = a + b P`` is the trip through the Dask scheduler
(``b``: the scheduler's time per task, paid for every task of the round), the
crossing bytes are the elements that change sides in the compare-split (the
fraction per round comes from simulating the network on random data, here, in
NumPy), and the link is NVLink inside a node and InfiniBand between nodes.  A
sample sort beside it: local sort, one round for the splitters, one all-to-all
(each GPU sends ``1 - 1/P`` of its data once) and a second local sort of what it
received, either as Dask tasks (``P^2`` pieces through the scheduler) or through a
collective all-to-all (one task per GPU).  distsort's one exchange
(``strategy="exchange"``) beside both: a local sort, three trips through the scheduler
(``EXCHANGE_STAGES``), one all-to-all of ``p^2`` slice tasks (or a collective), and a
merge of what arrived; and RMG sort's published 8-GPU figure (``RMG_SORT``).

Fitted to: the two-H200 rows of ``benchmarks/results/distributed_sort_2xH200_2026-11-22.json``
(local sort rate, merge rate, per-round latency, with the measured
cudaMemcpyPeer bandwidth), the local radix rate of issue 22 (2^28 float32, 7.0 ms),
and CPU runs made here with 2..8 worker processes on loopback (``--measure-cpu``):
how the time per round grows with the workers (``b``).  Link bandwidths beyond
the measured NVLink are assumptions, printed with the table.
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


def sample_sort_seconds(p, per_gpu, fit, b, collective=True, links="ib"):
    """A sample sort: local sort, splitters, one all-to-all, a local sort of what
    arrived; ``collective``: the exchange is one task per GPU (else ``p^2`` pieces)."""
    sort = per_gpu / RADIX_BYTES_S
    exchange = all_to_all_seconds(p, per_gpu, links)
    tasks = p if collective else p * p
    latency = 2 * (fit["round_latency_s"] + b * (p - 2)) + b / TASKS_PER_GPU_ROUND * tasks
    return 2 * sort + exchange + latency


#: Stages of an exchange's tasks that depend across workers (``distsort.plan.exchange``):
#: the windows (after the samples' pivots), the slices (after the splitters), the merges.
EXCHANGE_STAGES = 3
#: Published (RMG sort, BTW'23): 8 A100s sort 32e9 uint32 in 3.09 s, one all-to-all.
RMG_SORT = dict(gpus=8, keys=32e9, itemsize=4, seconds=3.09)


def exchange_seconds(p, per_gpu, fit, b, links="ib", collective=False):
    """distsort's one exchange (``strategy="exchange"``): a local radix sort of each
    GPU's run, :data:`EXCHANGE_STAGES` trips through the scheduler, one all-to-all of
    the slices (``p^2`` Dask tasks, or one task per GPU where ``collective``: an
    all-to-all of the ecosystem), and a merge of what arrived at the merge rate."""
    trips = EXCHANGE_STAGES * (fit["round_latency_s"] + b * (p - 2))
    tasks = p if collective else p * p
    return (per_gpu / RADIX_BYTES_S + trips + all_to_all_seconds(p, per_gpu, links)
            + per_gpu / fit["merge_bytes_s"] + b / TASKS_PER_GPU_ROUND * tasks)


def rmg_rows(fit, b, crossing):
    """Both designs on RMG sort's published case (8 GPUs of one node, NVLink)."""
    p = RMG_SORT["gpus"]
    per_gpu = RMG_SORT["keys"] * RMG_SORT["itemsize"] / p
    return dict(gpus=p, per_gpu_bytes=per_gpu, published_s=RMG_SORT["seconds"],
                bitonic_nvlink_s=bitonic_seconds(p, per_gpu, fit, b, crossing[p],
                                                 links="nvlink"),
                exchange_nvlink_s=exchange_seconds(p, per_gpu, fit, b, links="nvlink"),
                ideal_sample_nvlink_s=sample_sort_seconds(p, per_gpu, fit, 0, True,
                                                          links="nvlink"))


def predict(fit, b, per_gpu, gpus, crossing):
    """Rows of predictions; ``_b0`` columns: no scheduler cost growing with the GPUs (a
    lower bound), the others with ``b`` per GPU and round."""
    rows = []
    for p in gpus:
        fr = crossing[p]
        row = dict(gpus=p, rounds=len(fr), per_gpu_bytes=per_gpu,
                   crossing_per_gpu_bytes=sum(f for _, f in fr) * per_gpu,
                   bitonic_nvlink_b0_s=bitonic_seconds(p, per_gpu, fit, 0, fr, links="nvlink"),
                   bitonic_ib_b0_s=bitonic_seconds(p, per_gpu, fit, 0, fr, links="ib"),
                   bitonic_ib_s=bitonic_seconds(p, per_gpu, fit, b, fr, links="ib"),
                   sample_collective_ib_b0_s=sample_sort_seconds(p, per_gpu, fit, 0, True),
                   sample_collective_ib_s=sample_sort_seconds(p, per_gpu, fit, b, True),
                   sample_tasks_ib_s=sample_sort_seconds(p, per_gpu, fit, b, False),
                   exchange_ib_s=exchange_seconds(p, per_gpu, fit, b),
                   exchange_collective_ib_s=exchange_seconds(p, per_gpu, fit, b,
                                                             collective=True))
        row["exchange_vs_ideal"] = (row["exchange_collective_ib_s"]
                                    / row["sample_collective_ib_b0_s"])
        row["latency_share_bitonic_ib_b0"] = (len(fr) * fit["round_latency_s"]
                                              / row["bitonic_ib_b0_s"])
        rows.append(row)
    return rows


COLUMNS = [("gpus", "gpus", "{}"), ("rounds", "rounds", "{}"),
           ("crossing_per_gpu_bytes", "crossing GB/GPU", "{:.0f}"),
           ("bitonic_nvlink_b0_s", "bitonic NVLink b=0", "{:.2f}"),
           ("bitonic_ib_b0_s", "bitonic IB b=0", "{:.2f}"),
           ("latency_share_bitonic_ib_b0", "latency share", "{:.2f}"),
           ("bitonic_ib_s", "bitonic IB", "{:.2f}"),
           ("sample_collective_ib_b0_s", "sample all-to-all IB b=0", "{:.2f}"),
           ("sample_collective_ib_s", "sample all-to-all IB", "{:.2f}"),
           ("sample_tasks_ib_s", "sample P^2 tasks IB", "{:.2f}"),
           ("exchange_ib_s", "exchange P^2 tasks IB", "{:.2f}"),
           ("exchange_collective_ib_s", "exchange all-to-all IB", "{:.2f}"),
           ("exchange_vs_ideal", "exchange all-to-all / ideal", "{:.2f}")]


def table(rows):
    """A Markdown table of the predictions (seconds; GB)."""
    lines = ["| " + " | ".join(h for _, h, _ in COLUMNS) + " |",
             "|" + "---|" * len(COLUMNS)]
    for r in rows:
        vals = [fmt.format(r[k] / 1e9 if k.endswith("bytes") else r[k]) for k, _, fmt in COLUMNS]
        lines.append("| " + " | ".join(vals) + " |")
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
    p.add_argument("--gpus", type=int, nargs="+", default=[2**k for k in range(1, 11)])
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
    b = max(0.0, cpu["b_s_per_worker"])
    crossing = {g: crossing_fractions(g) for g in args.gpus}
    rows = predict(fit, b, args.per_gpu, args.gpus, crossing)
    print(f"fit (2x H200): bitonic sort {fit['sort_bytes_s'] / 1e9:.1f} GB/s, merge "
          f"{fit['merge_bytes_s'] / 1e9:.0f} GB/s, latency {fit['round_latency_s'] * 1e3:.1f} "
          f"ms/round, residuals {[round(r * 1e3, 1) for r in fit['residual_s']]} ms; "
          f"scheduler {cpu['scheduler_task_s'] * 1e6:.0f} us/task, so +{b * 1e3:.2f} ms/round "
          f"per GPU; CPU runs' time per round {[(w, round(y * 1e3)) for w, y in cpu['points']]}"
          f" ms ({cpu_path}); assumed: NVLink "
          f"{NVLINK_GBS:.0f} GB/s, IB {IB_GBS:.0f} GB/s per GPU, {NODE_GPUS} GPUs per node")
    print(table(rows))
    rmg = rmg_rows(fit, b, {RMG_SORT["gpus"]: crossing_fractions(RMG_SORT["gpus"])})
    print(f"RMG sort's case ({rmg['gpus']} GPUs, {rmg['per_gpu_bytes'] / 1e9:.0f} GB each, "
          f"NVLink): published {rmg['published_s']:.2f} s (A100s); predicted on H200s: "
          f"bitonic {rmg['bitonic_nvlink_s']:.2f} s, exchange {rmg['exchange_nvlink_s']:.2f} s, "
          f"ideal sample sort {rmg['ideal_sample_nvlink_s']:.2f} s")
    path = save({"scenario": "scale_model", "fit_gpu": fit, "fit_cpu": cpu, "rmg_sort": rmg,
                 "assumed": dict(ib_gb_s=IB_GBS, node_gpus=NODE_GPUS, nvlink_gb_s=NVLINK_GBS),
                 "rows": rows}, "scale_model_prediction")
    print(f"saved to {path}")


if __name__ == "__main__":
    main()
