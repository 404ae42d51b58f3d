"""The cluster a command runs on: connected to, or started locally (GPUs when
present), and moving chunks between host and GPU memory."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

import numpy as np

from distsort.cli.errors import RUNTIME_FAILURE, CLIError
from distsort.cli.sizes import fmt_bytes


@dataclass
class Cluster:
    """The client (None: the local threaded scheduler) and what the summary says of it."""

    client: object
    description: str
    gpu: bool
    worker_memory: int = 0
    close: object = field(default=None, repr=False)
    #: Threads of the local scheduler (``client`` None); 0: Dask's default.
    threads: int = 0


def _worker_has_gpu():
    from distsort.cluster import gpu_available
    return gpu_available()


def _local_options(args, gpu):
    """``connect``'s keywords for a local cluster, from the command's options.  The
    workers' warnings (memory use, ...) stay out of the command's output; errors not."""
    kw = {"silence_logs": logging.ERROR}
    if gpu and getattr(args, "device_memory_limit", None):
        kw["device_memory_limit"] = args.device_memory_limit
    if getattr(args, "workers", None):
        kw["n_workers"] = args.workers
    if not gpu and getattr(args, "memory_limit", None):
        kw["memory_limit"] = args.memory_limit
    if getattr(args, "spill_dir", None):
        kw["local_directory"] = args.spill_dir
    return kw


#: Threads beyond one per core for the in-process sort.  Reads and writes block in
#: the kernel (a write waits for the disk once the page cache holds enough dirty
#: pages), and a thread that waits there would leave its core idle (the figures:
#: ``docs/performance.md``).
IN_PROCESS_EXTRA_THREADS = 2


def in_process_threads(cores=None):
    """Threads that sort an input in this process: one per core and a few that may
    wait for the disk.

    >>> in_process_threads(2)
    4
    """
    return (cores or os.cpu_count() or 1) + IN_PROCESS_EXTRA_THREADS


def wants_gpu(args):
    """Whether the command sorts on GPUs (``distsort.plan.engine.use_gpu``), GPUs
    looked for only where ``--device auto`` asks."""
    from distsort import cluster as cl
    from distsort.plan.engine import use_gpu
    device = getattr(args, "device", "auto")
    return use_gpu(device, device == "auto" and cl.gpu_available())


def first_gpu():
    """Name and memory (bytes) of CUDA device 0, asked without creating a context
    (a local cluster may still start), or None."""
    try:
        import cupy
        props = cupy.cuda.runtime.getDeviceProperties(0)
    except Exception:  # noqa: BLE001  (no CuPy, driver or device: no GPU to use here)
        return None
    name = props["name"]
    return (name.decode() if isinstance(name, bytes) else str(name)), int(props["totalGlobalMem"])


def cluster_asked(args):
    """Whether the options ask for a cluster: a scheduler, ``--workers``,
    ``--memory-limit`` or ``--spill-dir``."""
    return bool(args.scheduler_address or args.scheduler_file or getattr(args, "workers", None)
                or getattr(args, "memory_limit", None) or getattr(args, "spill_dir", None))


def machine(args, gpu):
    """The ``distsort.plan.engine.Machine`` of the command: the host memory available
    now, GPU 0's memory where it sorts on GPUs (``gpu``), and the options' limits."""
    import psutil

    from distsort.plan.engine import Machine
    device = first_gpu() if gpu else None
    return Machine(psutil.virtual_memory().available, device[1] if device else 0,
                   int(getattr(args, "host_memory_limit", None) or 0),
                   int(getattr(args, "device_memory_limit", None) or 0))


def engine_request(args, disk=False):
    """The ``distsort.plan.engine.Request`` of the command's options (``disk``:
    whether its outputs are ones the disk path writes)."""
    from distsort.plan.engine import Request
    return Request(wants_gpu(args), cluster_asked(args), disk)


def fits_in_process(args, job):
    """Sort with threads of this process, not a cluster of worker processes
    (``distsort.plan.engine.fits_in_process``, on this machine)?"""
    from distsort.plan.engine import fits_in_process as fits
    request = engine_request(args)
    if request.cluster:
        return False
    return fits(job.src.n, job.sort_bytes(), job.per_element(), machine(args, request.gpu),
                request)


def _in_process(args):
    """The threads of this process, on GPU 0 where the command sorts on GPUs."""
    import psutil
    threads, cores = in_process_threads(), os.cpu_count()
    memory = psutil.virtual_memory().available // (cores or 1)
    gpu = first_gpu() if wants_gpu(args) else None
    if gpu is None:
        return Cluster(None, f"{threads} threads of this process on {cores} cores "
                             "(the input fits in memory; --workers N starts worker "
                             "processes)", gpu=False, worker_memory=memory, threads=threads)
    return Cluster(None, f"GPU 0 ({gpu[0]}, {fmt_bytes(gpu[1])}) and {threads} threads of "
                         "this process (the input fits this host; --workers N starts "
                         "worker processes, one per GPU)", gpu=True, worker_memory=memory,
                   threads=threads)


def open_cluster(args, local_scheduler_ok=False, in_process_ok=False):
    """Connect as asked, or start a local cluster (GPUs when present); with
    ``local_scheduler_ok`` or ``in_process_ok`` (no cluster asked for), the local
    threaded scheduler instead (on GPU 0 for ``in_process_ok`` where the command
    sorts on GPUs)."""
    from distsort import cluster as cl
    address, file = args.scheduler_address, args.scheduler_file
    if not (address or file) and local_scheduler_ok:
        return Cluster(None, "local threaded scheduler", gpu=False)
    if not (address or file) and in_process_ok:
        return _in_process(args)
    if file and not os.path.exists(file):
        raise CLIError(f"scheduler file {file}: no such file")
    kw = {}
    if not (address or file):
        gpu = wants_gpu(args)
        kw = _local_options(args, gpu)
    try:
        client = cl.connect(address, file, gpu=gpu if not (address or file) else None, **kw)
    except (OSError, TimeoutError) as e:
        raise CLIError(f"cannot reach the scheduler: {e}", RUNTIME_FAILURE) from e
    try:
        workers = client.scheduler_info(n_workers=-1)["workers"]
        if not workers:
            client.wait_for_workers(1, timeout=60)
            workers = client.scheduler_info(n_workers=-1)["workers"]
        if address or file:
            from distsort.plan.engine import use_gpu
            device = getattr(args, "device", "auto")
            gpu = use_gpu(device, device == "auto" and all(
                client.run(_worker_has_gpu).values()))
        mem = min((w.get("memory_limit") or 0) for w in workers.values())
    except BaseException:
        client.close()
        raise
    kind = "GPU" if gpu else "CPU"
    desc = (f"{len(workers)} {kind} worker(s) at {client.scheduler.address}"
            + (f", {fmt_bytes(mem)} memory limit each" if mem else ""))
    return Cluster(client, desc, gpu, mem, client.close)


def check_visible(cluster, paths):
    """Every worker must see the files (a shared filesystem across hosts)."""
    if cluster.client is None:
        return
    for p in map(os.path.abspath, paths):
        seen = cluster.client.run(os.path.exists, p)
        missing = [w for w, ok in seen.items() if not ok]
        if missing:
            raise CLIError(f"{p} is not visible to worker {missing[0]}: the workers need "
                           "the files on a filesystem they share")


def plan_options(args, cluster):
    """The plan options of ``--device-memory-limit`` (``distsort.api.planning``): the
    budget of a worker's sort, and the out-of-core merges on the GPUs where the command
    sorts on GPUs, whatever the workers report; none without the option."""
    limit = getattr(args, "device_memory_limit", None)
    if not limit:
        return {}
    return {"device_memory_limit": int(limit), "engine": "gpu" if cluster.gpu else "cpu"}


def on_gpu(x):
    """Whether the Dask array ``x`` has CuPy chunks."""
    from distsort.core.xp import namespace
    return namespace(x._meta).__name__ == "cupy"


def to_device(x, gpu):
    """NumPy chunks to CuPy chunks on GPU workers (and back with ``to_host``)."""
    if not gpu or on_gpu(x):
        return x
    import cupy
    return x.map_blocks(cupy.asarray, dtype=x.dtype, meta=cupy.empty((0,), x.dtype))


def to_host(x, gpu):
    """CuPy chunks back to NumPy (out-of-core sorts of NumPy chunks give NumPy chunks)."""
    if not gpu or not on_gpu(x):
        return x
    import cupy
    return x.map_blocks(cupy.asnumpy, dtype=x.dtype, meta=np.empty((0,), x.dtype))


def gather(cluster, arrays):
    """The computed arrays, here (from the workers, or the local scheduler)."""
    import dask

    from distsort.cli.progress import local_scheduler
    if cluster.client is None:
        return dask.compute(*arrays, scheduler=local_scheduler())
    return cluster.client.compute(arrays, sync=True)
