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
from distsort.io.disksort import (IN_MEMORY_COPIES, DiskJob, Region, can_free, disk_room,
                                  disk_sort, element_bytes, merged_file, plan_disk_sort,
                                  sortable_dtype, summaries)
from distsort.cli.errors import BAD_INPUT, VERIFY_FAILED, CLIError
from distsort.cli.metrics import step_spans
from distsort.cli.outputs import Output, publish
from distsort.cli.sizes import fmt_bytes, size_text, smallest_passing
from distsort.cli.streams import quiet
from distsort.cli.temporaries import remove, temporary_name
from distsort.plan.engine import disk_sort_plan

#: Disk space kept free beyond what the sort writes (the filesystem's own blocks,
#: others' small files): 1% of the data and 64 MiB.
ROOM_MARGIN = (0.01, 64 << 20)
_NO_PUNCH = ", both in full (this filesystem cannot free the runs as they are merged)"


def host_budget(args, job):
    """Bytes of host memory the disk path may hold, where the command takes it
    (``distsort.plan.engine.disk_budget``: in this process on the CPU, into .npy
    outputs, no ``--report``, the data outgrowing the host's memory); else None.
    Refuses (exit 2) a memory within which the disk plan cuts too many runs."""
    from distsort.cli.connection import engine_request, machine
    from distsort.cli.planned import disk_outputs
    from distsort.plan.engine import disk_budget
    if not job.src.n:
        return None
    request = engine_request(args, disk=disk_outputs(args, job))
    memory = disk_budget(job.src.n * job.sort_bytes(), machine(args, False), request)
    return checked_memory(args, job, memory) if memory else None


def checked_memory(args, job, memory):
    """``memory``, the disk path's budget (``Engine.memory``), where the disk plan within
    it works (:func:`disk_plan_works`); else refused (exit 2), naming the smallest
    ``--host-memory-limit`` that works."""
    if not disk_plan_works(job, memory):
        raise CLIError(_too_little_memory(job, memory, getattr(args, "host_memory_limit", None)),
                       BAD_INPUT)
    return memory


#: Runs at most of a sort through the disk: each merge segment reads a slice of every
#: run, and the segments are about as many as the runs, so the merge's cost grows with
#: their square (20,000 float64 on the 2-core machine: 129 runs merged in 1.0 s, 278 in
#: 4.8 s, 556 in 24.4 s, 1,112 not in 120 s; ``--host-memory-limit 1`` made 2,000 runs
#: of one element of a 2,000-element input, and no end).
MAX_DISK_RUNS = 128


def disk_plan_works(job, memory):
    """Whether the disk plan of ``job`` within ``memory`` bytes makes at most
    :data:`MAX_DISK_RUNS` runs."""
    return _runs(job, memory) <= MAX_DISK_RUNS


def smallest_host_memory(job):
    """The smallest ``--host-memory-limit`` that sorts ``job``: through the disk in at
    most :data:`MAX_DISK_RUNS` runs, or in memory (``needs_disk``), whichever is
    smaller."""
    in_memory = job.src.n * job.sort_bytes() * IN_MEMORY_COPIES
    on_disk = smallest_passing(lambda m: disk_plan_works(job, m), 1, in_memory)
    return min(in_memory, on_disk or in_memory)


def _too_little_memory(job, memory, limit):
    smallest = smallest_host_memory(job)
    what = f"--host-memory-limit {fmt_bytes(limit)}" if limit else (
        f"the {fmt_bytes(memory)} of host memory available to it")
    return (f"{what} is too little for {fmt_bytes(job.src.nbytes)} of input: the sort "
            f"through the disk would cut {_runs(job, memory):,} runs, more than "
            f"the {MAX_DISK_RUNS} its merge takes (each segment reads a slice of every "
            f"run: the merge's time grows with the square of the runs); the smallest "
            f"limit that works here: --host-memory-limit "
            f"{size_text(smallest)}")


def _order(job):
    if job.mode == "sort":
        return "sort"
    return "stable" if job.mode == "argsort" or job.stable else "by-value"


def _payload_size(job):
    """Bytes of what travels with a key: argsort's positions, the values, or nothing."""
    return 8 if job.mode == "argsort" else (job.vals.dtype.itemsize if job.vals else 0)


def _tasks():
    """Tasks of the disk path at once: one sorting per core, and two reading or
    writing."""
    return (os.cpu_count() or 1) + 2


def plan_for(job, memory):
    """The disk plan of ``job`` within ``memory`` bytes (:func:`_tasks`; the runs that
    the rest of the memory holds kept there)."""
    per = element_bytes(job.src.dtype.itemsize, _payload_size(job), _order(job))
    kept = sortable_dtype(job.src.dtype).itemsize + _payload_size(job)
    return plan_disk_sort(job.src.n, per, memory, tasks=_tasks(),
                          stride=disksort.STRIDE, kept_bytes=kept)


def _fewest_runs(job, memory):
    """Runs the disk plan within ``memory`` cuts at least: no run is longer than the
    memory's share of one task (``plan_disk_sort``), counted without making the plan
    (a limit of 1 byte would make one run per element)."""
    per = element_bytes(job.src.dtype.itemsize, _payload_size(job), _order(job))
    return -(-job.src.n // max(1, int(memory) // (_tasks() * per)))


def _runs(job, memory):
    """Runs of the disk plan within ``memory`` (at least as many, where too many to make
    the plan for)."""
    fewest = _fewest_runs(job, memory)
    return fewest if fewest > MAX_DISK_RUNS else len(plan_for(job, memory).runs)


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
        data = disk_room(runs[d], out, flight, punch)
        room = data + margin
        free = shutil.disk_usage(d).free
        if free < room:
            raise CLIError(
                f"{d}: not enough free disk space for a sort larger than memory: it needs "
                f"{fmt_bytes(room)} ({room:,} bytes: {fmt_bytes(data)} for the runs, then "
                f"the output as they are merged{'' if punch else _NO_PUNCH}, and "
                f"{fmt_bytes(margin)} kept free for the filesystem), "
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
    plan = disk_sort_plan(plan_for(job, memory)).disk  # the SortPlan of the engine "disk"
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
        facts["spans"] = step_spans(done["intervals"])
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
