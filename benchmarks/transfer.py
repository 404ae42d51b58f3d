"""How fast Dask moves a CuPy array from one GPU worker to another (UCX over NVLink).

    python benchmarks/transfer.py [--sizes 64MiB 1GiB] [--runs 5] [--out DIR]

On a ``distsort.cluster.local_cuda_cluster`` of two GPUs, per size and run: a fresh
random array on worker A, then a task on worker B that needs it (one way), or one
array on each worker and a task on each side that needs the other's (both ways at
once, as in a compare-split).  Reported per transfer: the worker's own record of
the fetch (``transfer_incoming_log``: request, frames, deserialization) and the wall
time of the consuming task as the client sees it (round trips included); and, as
the ceiling, ``cudaMemcpyPeer`` of the same bytes inside worker A.  UCX settings
come from the environment (``UCX_*``), read when the workers start.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from dask.utils import parse_bytes
from distributed import wait
from distributed_sort import device_name, make_chunk, peer_bandwidth, sync_workers


def consume(x):
    return int(x.nbytes)


def last_fetch(dask_worker):
    rec = dask_worker.transfer_incoming_log[-1]
    return rec["duration"], rec["total"]


def one_size(client, a, b, nbytes, runs, seed):
    rows = []
    for r in range(runs + 1):  # the first run warms up connections and IPC handles
        xa = client.submit(make_chunk, seed + 2 * r, nbytes // 4, "float32", workers=[a],
                           pure=False)
        xb = client.submit(make_chunk, seed + 2 * r + 1, nbytes // 4, "float32", workers=[b],
                           pure=False)
        wait([xa, xb])
        sync_workers(client)  # the arrays are made before the clock starts
        t = time.perf_counter()
        client.submit(consume, xa, workers=[b], pure=False).result()
        one_way = time.perf_counter() - t
        fetch_b = client.run(last_fetch, workers=[b])[b][0]
        xa2 = client.submit(make_chunk, seed + 2 * r + 100, nbytes // 4, "float32",
                            workers=[a], pure=False)
        wait([xa2])
        sync_workers(client)
        t = time.perf_counter()
        client.gather([client.submit(consume, xa2, workers=[b], pure=False),
                       client.submit(consume, xb, workers=[a], pure=False)])
        both = time.perf_counter() - t
        fetches = client.run(last_fetch)
        if r:
            rows.append({"one_way_fetch_s": fetch_b, "one_way_task_s": one_way,
                         "both_ways_fetch_s": max(f[0] for f in fetches.values()),
                         "both_ways_task_s": both})
        del xa, xb, xa2
    med = {k: statistics.median(row[k] for row in rows) for k in rows[0]}
    return {"bytes": nbytes, **med, "runs": rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", nargs="+", default=["64MiB", "256MiB", "1GiB", "4GiB"])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--label", default=os.environ.get("TRANSFER_LABEL", "default"))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from distributed import Client
    from distsort.cluster import local_cuda_cluster
    with local_cuda_cluster(n_workers=2, device_memory_limit=0) as cluster, \
            Client(cluster) as client:
        a, b = sorted(client.scheduler_info(n_workers=-1)["workers"])
        env = {k: v for k, v in os.environ.items() if k.startswith("UCX_")}
        print(f"{args.label}: {device_name(False)}, UCX env {env}")
        print(f"{'bytes':>12} {'fetch':>9} {'GB/s':>7} {'task':>9} {'both fetch':>11} "
              f"{'GB/s':>7} {'both task':>10} {'peer':>9} {'GB/s':>7}")
        rows = []
        for i, size in enumerate(args.sizes):
            nbytes = parse_bytes(size)
            row = one_size(client, a, b, nbytes, args.runs, 1000 * i)
            row["peer_copy_s"] = nbytes / 1e9 / peer_bandwidth(client, nbytes)
            gb = nbytes / 1e9
            print(f"{nbytes:12d} {row['one_way_fetch_s'] * 1e3:7.2f}ms "
                  f"{gb / row['one_way_fetch_s']:7.1f} {row['one_way_task_s'] * 1e3:7.2f}ms "
                  f"{row['both_ways_fetch_s'] * 1e3:9.2f}ms {gb / row['both_ways_fetch_s']:7.1f} "
                  f"{row['both_ways_task_s'] * 1e3:8.2f}ms {row['peer_copy_s'] * 1e3:7.2f}ms "
                  f"{gb / row['peer_copy_s']:7.1f}")
            rows.append(row)
        if args.out:
            out = Path(args.out) / f"transfer_{args.label}.json"
            out.write_text(json.dumps({"device": device_name(False),
                                       "date": time.strftime("%Y-%m-%d"), "label": args.label,
                                       "ucx_env": env, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
