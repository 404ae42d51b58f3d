"""``distsort sort`` on an input larger than host memory: the plan's choice of the disk
path, the room it needs on the disk, and the sort into the outputs' temporaries
(:mod:`distsort.io.disksort`), published as every other output."""
from __future__ import annotations

import os
import shutil
import time
from contextlib import ExitStack
from pathlib import Path

import numpy as np

from distsort.io import disksort
from distsort.io.disksort import (MEMORY_SHARE, DiskJob, Region, can_free, disk_room, disk_sort,
                                  element_bytes, merged_file, needs_disk, plan_disk_sort,
                                  sortable_dtype, summaries)
from distsort.cli.errors import VERIFY_FAILED, CLIError
from distsort.cli.files import file_kind
from distsort.cli.outputs import Output, publish
from distsort.cli.streams import quiet
from distsort.cli.sizes import fmt_bytes
from distsort.cli.temporaries import remove, temporary_name

#: Disk space kept free beyond what the sort writes (the filesystem's own blocks,
#: others' small files): 1% of the data and 64 MiB.
ROOM_MARGIN = (0.01, 64 << 20)
_NO_PUNCH = ", both in full (this filesystem cannot free the runs as they are merged)"


def _cluster_asked(args):
    return bool(args.scheduler_address or args.scheduler_file or getattr(args, "workers", None)
                or getattr(args, "memory_limit", None) or getattr(args, "spill_dir", None))


def host_budget(args, job):
    """Bytes of host memory the disk path may hold, where the command takes it; else
    None.  It does where the sort runs in this process on the CPU, the outputs are
    .npy files, no ``--report`` is asked for (Dask's profiles see no tasks here) and
    the data outgrow the host's memory (``needs_disk``):
    ``--host-memory-limit``, or the memory available now (psutil)."""
    import psutil

    from distsort.cli.connection import _wants_gpu
    if (_cluster_asked(args) or _wants_gpu(args) or not job.src.n or args.report
            or any(file_kind(p) != "npy" for p in job.outputs)):
        return None
    limit = getattr(args, "host_memory_limit", None)
    memory = limit or psutil.virtual_memory().available
    if not needs_disk(job.src.n * job.sort_bytes(), memory):
        return None
    return int(memory if limit else memory * MEMORY_SHARE)


def _order(job):
    if job.mode == "sort":
        return "sort"
    return "stable" if job.mode == "argsort" or job.stable else "by-value"


def _payload_size(job):
    """Bytes of what travels with a key: argsort's positions, the values, or nothing."""
    return 8 if job.mode == "argsort" else (job.vals.dtype.itemsize if job.vals else 0)


def plan_for(job, memory):
    """The disk plan of ``job`` within ``memory`` bytes (tasks: one sorting per core
    and two reading or writing; the runs that the rest of the memory holds kept
    there)."""
    per = element_bytes(job.src.dtype.itemsize, _payload_size(job), _order(job))
    kept = sortable_dtype(job.src.dtype).itemsize + _payload_size(job)
    return plan_disk_sort(job.src.n, per, memory, tasks=(os.cpu_count() or 1) + 2,
                          stride=disksort.STRIDE, kept_bytes=kept)


def check_room(job, plan):
    """Refuse, before anything is written, a sort whose runs and outputs the disk of
    the outputs cannot hold; returns whether the runs are freed behind the merge."""
    n = job.src.n
    written = n - plan.kept_elements
    key, payload = job.src.dtype.itemsize, _payload_size(job)
    out_sizes = [8] if job.mode == "argsort" else [key] + ([payload] if job.vals else [])
    need, runs, punch = {}, {}, True
    for path, size in zip(job.outputs, out_sizes, strict=True):
        d = str(Path(path).resolve().parent)
        punch &= can_free(d)
        need[d] = need.get(d, 0) + n * size
        runs[d] = runs.get(d, 0) + written * size  # the runs not kept in memory
    if job.mode == "argsort":  # the keys' runs: a temporary beside OUTPUT
        d = str(Path(job.outputs[0]).resolve().parent)
        runs[d] += written * key
    # Segments finish out of order: up to ``tasks`` of them written before the runs
    # they read are freed.
    flight = plan.tasks * plan.segment * (key + payload)
    for d, out in need.items():
        margin = int(ROOM_MARGIN[0] * runs[d]) + ROOM_MARGIN[1]
        room = disk_room(runs[d], out, flight, punch) + margin
        free = shutil.disk_usage(d).free
        if free < room:
            raise CLIError(
                f"{d}: not enough free disk space for a sort larger than memory: it needs "
                f"{fmt_bytes(room)} ({room:,} bytes: the runs, then the output as they are "
                f"merged{'' if punch else _NO_PUNCH}), "
                f"{fmt_bytes(free)} ({free:,} bytes) is free; free space there or write "
                "OUTPUT elsewhere")
    return punch


class _Progress:
    def __init__(self, enabled, stream=None):
        self.enabled, self.stream = enabled, stream or quiet()

    def __call__(self, label, done, total):
        if self.enabled:
            what = "forming runs" if label == "runs" else "merging"
            end = "\n" if done == total else ""
            print(f"\r{what}: {done}/{total}", end=end, file=self.stream, flush=True)


def sort_on_disk(job, args, memory, facts):
    """Sort ``job`` through the disk within ``memory`` bytes into its outputs'
    temporaries, verify (``--verify``) and publish; adds to ``facts``."""
    t0 = time.perf_counter()
    plan = plan_for(job, memory)
    punch = check_room(job, plan)
    dtypes = [np.dtype(np.int64)] if job.mode == "argsort" else (
        [job.src.dtype] + ([job.vals.dtype] if job.vals else []))
    dtypes = [d.newbyteorder("=") for d in dtypes]  # the readers give native order
    outputs = [Output(p, d, job.src.n, plan.segment, claim=c)
               for p, d, c in zip(job.outputs, dtypes, job.claims, strict=True)]
    job.written = outputs
    with ExitStack() as stack:
        stack.callback(lambda: [o.discard() for o in outputs])
        for o in outputs:
            o.create()
        runs, merged = _regions(job, outputs, stack)
        # Times sorted descending: their codes hold the order, and sort ascending.
        codes_descending = job.descending and job.src.dtype.kind not in "mM"
        summarize_in, summarize_out = (summaries(_order(job), codes_descending,
                                                 job.mode == "argsort")
                                       if args.verify else (None, None))
        read_keys, keys_at = _reader(job.src)
        disk_job = DiskJob(job.src.n, dtypes[0] if job.mode != "argsort" else
                           job.src.dtype.newbyteorder("="), read_keys,
                           (lambda a, b: job.vals.reader[a:b]) if job.vals else None,
                           job.mode == "argsort", _order(job), job.descending,
                           tuple(runs), tuple(merged), summarize_in, summarize_out,
                           keys_at)
        facts["plan"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        done = disk_sort(disk_job, plan, progress=_Progress(args.progress))
        facts["seconds"] = time.perf_counter() - t1
        if args.verify:
            _judge(job, done)
            facts["verified"] = "fused"
        for o, m in zip(outputs, [m for m in merged if m is not None], strict=True):
            os.replace(m.path, o.tmp)
        t2 = time.perf_counter()
        publish(outputs[::-1])
        facts["publish"] = time.perf_counter() - t2
    facts.update(chunks=done["chunks"], rounds=0, disk_path={
        "memory": memory, "runs": done["runs"], "segments": done["segments"],
        "freed": done["freed"] and punch, "run_seconds": done["run_seconds"],
        "kept_runs": done["kept_runs"], "kept_elements": done["kept_elements"],
        "merge_seconds": done["merge_seconds"],
        "directory": str(Path(job.outputs[0]).resolve().parent)})
    return facts


def _regions(job, outputs, stack):
    """The Regions of the keys' and the payload's runs (in the outputs' temporaries;
    argsort's keys in one more beside OUTPUT) and of the merged outputs (new
    temporaries, removed on leaving ``stack`` unless renamed), None where there is
    none."""
    targets = [o.target for o in outputs]
    runs = [Region(t.path, t.offset, sortable_dtype(t.dtype), job.src.n) for t in targets]
    if job.mode == "argsort":  # positions are the output; the keys' runs beside it
        keys_runs = temporary_name(outputs[0].final, "tmp")
        stack.callback(remove, keys_runs)
        with open(keys_runs, "wb"):
            pass
        runs.insert(0, Region(keys_runs, 0, sortable_dtype(job.src.dtype), job.src.n))
    elif len(runs) == 1:
        runs.append(None)
    merged = [stack.enter_context(merged_file(temporary_name(o.final, "tmp"),
                                              Region(t.path, t.offset, t.dtype, job.src.n)))
              for o, t in zip(outputs, targets, strict=True)]
    merged = [None] + merged if job.mode == "argsort" else merged + [None] * (2 - len(merged))
    return runs, merged


def _reader(src):
    """``read_keys`` and ``keys_at`` of a DiskJob: a native .npy file read straight
    into the buffer given, other inputs through their readers (which convert the byte
    order)."""
    from distsort.cli.files import NpyFile
    r = src.reader
    if isinstance(r, NpyFile) and r.dtype.isnative:
        region = Region(r.path, r.offset, r.dtype, src.n)
        return region.read, region.at
    return (lambda a, b, out: r[a:b]), None


def _judge(job, done):
    from distsort.graph.verify import VerificationError, check
    from distsort.cli.verification import WHAT
    try:
        check(done["inputs"], done["outputs"], done["chunks"], WHAT[job.mode])
    except VerificationError as e:
        raise CLIError(str(e), VERIFY_FAILED) from e
