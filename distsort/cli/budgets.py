"""``--device-memory-limit`` checked before any work, on the plan the command's sort
would run (:mod:`distsort.cli.planned`).

Below a few kilobytes the out-of-core plan cut an input into chunks of a few hundred
bytes (``--device-memory-limit 1KB``: 424-byte chunks, under the 1 KiB that
``--chunk-size`` takes) and thousands of runs, whose merges never ended on 200,000
elements.  So a limit below :data:`MIN_DEVICE_LIMIT`, or one under which the plan
makes more than :data:`MAX_OUT_OF_CORE_RUNS` runs (or refuses the chunks), is refused
(exit 2), naming the smallest limit that works.
"""
from __future__ import annotations

import os

from distsort.cli.errors import BAD_INPUT, CLIError
from distsort.cli.sizes import fmt_bytes, size_text, smallest_passing

#: The smallest ``--device-memory-limit``: below it the out-of-core plan cuts chunks
#: under the 1 KiB of keys that ``--chunk-size`` takes (two chunks to a run).
MIN_DEVICE_LIMIT = 16 << 10
#: Runs at most of an out-of-core sort under ``--device-memory-limit``: the runs are
#: merged by a network (or a k-way merge) of tasks whose number grows faster than the
#: runs'.  400,000 float64 on the 2-core machine's CPU workers (under load): 31 runs
#: sorted in 6.3 s, 62 in 15.5 s, 230 in 216 s.
MAX_OUT_OF_CORE_RUNS = 64
#: The largest limit the search for the smallest looks at: 1 PiB.
_LARGEST = 1 << 50


def _planned(args, job, in_process):
    """``(Cluster stand-in, ClusterView)`` of the sort the command would run; None for
    a running cluster (its workers are not known before it is reached)."""
    import psutil

    from distsort.plan.clusterview import ClusterView
    from distsort.cli.connection import Cluster, first_gpu, in_process_threads, wants_gpu
    from distsort.cli.planned import cpu_view, local_workers, planned_cpu_cluster
    if args.scheduler_address or args.scheduler_file:
        return None
    gpu = wants_gpu(args)
    device = first_gpu()[1] if gpu and first_gpu() else None
    cores = os.cpu_count() or 1
    if in_process:
        memory = psutil.virtual_memory().available
        return (Cluster(None, "", gpu, worker_memory=memory // cores,
                        threads=in_process_threads()),
                ClusterView.local(cores, memory, device))
    if gpu:  # one worker per GPU
        count = _gpu_count()
        view = ClusterView(workers=tuple(f"worker-{i}" for i in range(count)),
                           hosts=("127.0.0.1",) * count, threads=(1,) * count,
                           device_limits=(device,) * count)
        return Cluster(None, "", True, threads=count), view
    workers = local_workers(args)
    memory = psutil.virtual_memory().total // workers
    return planned_cpu_cluster(workers, memory), cpu_view(workers, memory)


def _gpu_count():
    """GPUs a local GPU cluster starts a worker on (1 where CuPy cannot say)."""
    try:
        import cupy
        return max(1, int(cupy.cuda.runtime.getDeviceCount()))
    except Exception:  # noqa: BLE001  (no CuPy or driver: the command sorts on the CPU)
        return 1


def plan_runs(args, job, limit, planned):
    """Runs of the out-of-core plan under ``limit`` (0: sorted in memory); the plan's
    MemoryError where it refuses the chunks (a chunk alone does not fit)."""
    from distsort.cli.planned import job_plan, with_chunk_size
    cluster, view = planned
    options = with_chunk_size(args, args.chunk_size)
    options.device_memory_limit = limit
    try:
        _, plan = job_plan(job, options, cluster, view)
    except MemoryError as e:
        return e
    return plan.out_of_core.plan.runs if plan.out_of_core is not None else 0


def _chunk(args, job, planned):
    """Elements of the chunks the command picks."""
    from distsort.cli.sizes import chunk_elements
    cluster, _ = planned
    return chunk_elements(args, cluster, job.src.dtype.itemsize, job.per_element(), job.src.n)


def check_device_memory_limit(args, job, in_process):
    """Refuse (exit 2) a ``--device-memory-limit`` below :data:`MIN_DEVICE_LIMIT`, or
    one under which the plan refuses the chunks or cuts more than
    :data:`MAX_OUT_OF_CORE_RUNS` runs, naming the smallest limit that works.
    ``in_process``: the sort runs in this process
    (:func:`distsort.cli.connection.fits_in_process`)."""
    limit = getattr(args, "device_memory_limit", None)
    if not limit or not job.src.n:
        return
    planned = _planned(args, job, in_process)

    def passes(value):
        if value < MIN_DEVICE_LIMIT:
            return False
        if planned is None:
            return True
        runs = plan_runs(args, job, value, planned)
        return isinstance(runs, int) and runs <= MAX_OUT_OF_CORE_RUNS

    if passes(limit):
        return
    runs = None if planned is None else plan_runs(args, job, limit, planned)
    why = (f"below the smallest, {fmt_bytes(MIN_DEVICE_LIMIT)}" if limit < MIN_DEVICE_LIMIT
           else f"{runs} (here: --chunk-size {_chunk(args, job, planned)} elements)"
           if isinstance(runs, MemoryError)
           else f"it would cut the data into {runs:,} runs, more than the "
                f"{MAX_OUT_OF_CORE_RUNS} an out-of-core sort takes")
    smallest = smallest_passing(passes, MIN_DEVICE_LIMIT, _LARGEST)
    fix = (f"--device-memory-limit {size_text(smallest)}" if smallest
           else "a larger --device-memory-limit")
    raise CLIError(f"--device-memory-limit {fmt_bytes(limit)} is too small for "
                   f"{fmt_bytes(job.src.nbytes)} of input: {why}; the smallest that works "
                   f"here: {fix}", BAD_INPUT)
