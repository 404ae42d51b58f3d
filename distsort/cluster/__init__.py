"""Start or connect to a Dask cluster for distsort.

Three entry points:

* :func:`local_cuda_cluster`: one worker per GPU (``dask_cuda.LocalCUDACluster``),
  talking UCX (NVLink between GPUs of one host) with an RMM pool when
  ``distributed_ucxx`` and ``rmm`` import, TCP otherwise (with a warning);
* :func:`local_cpu_cluster`: worker processes on this host that spill to disk
  when their memory limit is reached (out-of-core sorts on the CPU);
* :func:`connect`: a ``distributed.Client`` to a scheduler address, a scheduler
  file, or a new local cluster (GPUs when there are any, the CPU otherwise).

``dask_cuda``, ``cupy``, ``rmm`` and ``distributed_ucxx`` are optional: they are
imported only when a GPU cluster is asked for.

>>> from distsort.cluster import local_cpu_cluster
>>> from distributed import Client
>>> with local_cpu_cluster(n_workers=1, memory_limit="1GiB") as cluster:
...     with Client(cluster) as client:
...         print(len(client.scheduler_info(n_workers=-1)["workers"]))
1
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import warnings
from typing import TYPE_CHECKING, Any


if TYPE_CHECKING:  # distributed and dask-cuda load only when a cluster is asked for
    from dask_cuda import LocalCUDACluster
    from distributed import Client, LocalCluster, Worker

#: A size: bytes, a string such as ``"40GB"``, or a fraction of the memory at hand.
Size = float | int | str

__all__ = ["local_cuda_cluster", "local_cpu_cluster", "connect", "gpu_available",
           "bytes_sent_by_kind", "diff_sent",
           "ucx_available", "DEVICE_MEMORY_FRACTION", "RMM_POOL_FRACTION"]

#: Spill threshold of GPU workers, as a fraction of device memory.  Dask counts
#: only the chunks it holds, not a task's scratch (a compare-split needs about
#: three chunks, CuPy's sort more), so leave a third of the device for tasks.
DEVICE_MEMORY_FRACTION = 0.65

#: Initial RMM pool, as a fraction of device memory.  The pool can still grow;
#: one pool means one CUDA IPC mapping per pair of workers for NVLink transfers.
RMM_POOL_FRACTION = 0.8


def gpu_available() -> bool:
    """Whether CuPy imports and sees at least one CUDA device.

    >>> isinstance(gpu_available(), bool)
    True
    """
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no driver, no device, CUDA_VISIBLE_DEVICES="" ...
        return False


def ucx_available() -> bool:
    """Whether the UCX comm (``distributed_ucxx``) and RMM can be used."""
    return all(importlib.util.find_spec(m) is not None for m in ("distributed_ucxx", "rmm"))


def dashboard_address_of(kw: dict[str, Any]) -> str:
    # A random port: jobs sharing a host must not fight over 8787 (distributed
    # serves its HTTP routes there even when the dashboard itself is off).
    return kw.get("dashboard_address", ":0")


def local_cuda_cluster(n_workers: int | None = None,
                       device_memory_limit: Size = DEVICE_MEMORY_FRACTION,
                       protocol: str | None = None, rmm_pool_size: Size | None = None,
                       **kw: Any) -> LocalCUDACluster:
    """A ``dask_cuda.LocalCUDACluster``: one worker process per GPU of this host.

    Parameters
    ----------
    n_workers : int, optional
        Number of GPUs to use (default: all visible ones).
    device_memory_limit : float, int or str, optional
        Spill threshold per GPU: a fraction of device memory (default
        ``DEVICE_MEMORY_FRACTION``), bytes, or a string like ``"40GB"``.  Chunks
        beyond it are moved to host memory, and from there to disk.
    protocol : {"ucx", "tcp"}, optional
        Default: ``"ucx"`` when ``distributed_ucxx`` and ``rmm`` import (UCX picks
        NVLink between GPUs of one host by itself), ``"tcp"`` otherwise, with a
        warning, since TCP is two orders of magnitude slower between GPUs.
    rmm_pool_size : float, int or str, optional
        RMM pool per GPU.  Default: ``RMM_POOL_FRACTION`` of device memory when
        ``rmm`` imports (and CuPy then allocates from it), else no pool.
    **kw
        Passed to ``LocalCUDACluster`` (``CUDA_VISIBLE_DEVICES``, ``memory_limit``,
        ``local_directory``, ``enable_nvlink``, ...).

    Examples
    --------
    >>> from distsort.cluster import local_cuda_cluster   # doctest: +SKIP
    >>> from distributed import Client                    # doctest: +SKIP
    >>> cluster = local_cuda_cluster()                    # doctest: +SKIP
    >>> client = Client(cluster)                          # doctest: +SKIP
    >>> import dask.array as da, cupy, distsort           # doctest: +SKIP
    >>> x = da.random.default_rng(0).random(2**30, chunks=2**27)  # doctest: +SKIP
    >>> s = distsort.sort(x.map_blocks(cupy.asarray)).persist()   # doctest: +SKIP
    """
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError as e:
        raise ImportError("local_cuda_cluster needs dask-cuda: pip install "
                          "'distsort[cuda13]' (or [cuda12])") from e
    if protocol is None:
        protocol = "ucx" if ucx_available() else "tcp"
        if protocol == "tcp":
            warnings.warn("distributed-ucxx or rmm is not installed: GPU workers will "
                          "exchange data over TCP, ~100x slower than NVLink",
                          RuntimeWarning, stacklevel=2)
    if rmm_pool_size is None and importlib.util.find_spec("rmm") is not None:
        rmm_pool_size = RMM_POOL_FRACTION
    if rmm_pool_size is not None:
        # CuPy must allocate from the pool, or the pool only takes memory away.
        kw.setdefault("rmm_allocator_external_lib_list", ["cupy"])
    kw["dashboard_address"] = dashboard_address_of(kw)
    return LocalCUDACluster(n_workers=n_workers, device_memory_limit=device_memory_limit,
                            protocol=protocol, rmm_pool_size=rmm_pool_size, **kw)


def local_cpu_cluster(n_workers: int | None = None, memory_limit: int | str = "auto",
                      threads_per_worker: int = 1, **kw: Any) -> LocalCluster:
    """A ``distributed.LocalCluster`` of worker processes on this host.

    Workers spill chunks to disk (``local_directory``, default the temporary
    directory) above 70% of ``memory_limit``, so arrays larger than memory sort.

    Parameters
    ----------
    n_workers : int, optional
        Worker processes (default: one per core).
    memory_limit : int, str or "auto", optional
        Per worker: bytes, a string like ``"2GiB"``, or ``"auto"`` (this host's
        memory shared evenly).
    threads_per_worker : int, optional
        Default 1: NumPy's sort and merge release the GIL for only part of the
        work, so processes scale better than threads.
    **kw
        Passed to ``LocalCluster`` (``host``, ``local_directory``, ...).

    Examples
    --------
    >>> from distributed import Client
    >>> import dask.array as da, distsort
    >>> with local_cpu_cluster(n_workers=2, memory_limit="1GiB") as cluster:
    ...     with Client(cluster) as client:
    ...         x = da.random.default_rng(1).random(100_000, chunks=25_000)
    ...         s = distsort.sort(x).compute()
    >>> bool((s[1:] >= s[:-1]).all())
    True
    """
    from distributed import LocalCluster

    if n_workers is None:
        n_workers = max(1, (os.cpu_count() or 1) // threads_per_worker)
    kw.setdefault("host", "127.0.0.1")
    kw["dashboard_address"] = dashboard_address_of(kw)
    return LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker,
                        memory_limit=memory_limit, processes=True, **kw)


def _owning_client_class() -> type[Client]:
    from distributed import Client

    class OwningClient(Client):
        """A Client that also closes the local cluster it was started with."""

        def close(self, *args, **kwargs):
            try:
                return super().close(*args, **kwargs)
            finally:
                cluster, self._distsort_cluster = getattr(self, "_distsort_cluster", None), None
                if cluster is not None:
                    close_within(cluster, CLOSE_SECONDS)

    return OwningClient


#: Seconds a local cluster may take to close before its worker processes are killed
#: (a nanny that restarts a worker killed while the cluster closes can wait for ever).
CLOSE_SECONDS = 60


def worker_pids(cluster: Any) -> set[int]:
    """The process ids of a local cluster's workers now (its nannies' children)."""
    try:
        nannies = list(getattr(cluster, "workers", {}).values())
    except RuntimeError:  # changed while read: empty, read again by the caller
        return set()
    procs = (getattr(getattr(n, "process", None), "process", None) for n in nannies)
    return {p.pid for p in procs if p is not None and p.pid is not None}


def close_within(cluster: Any, seconds: float) -> bool:
    """Close a local cluster, or, past ``seconds``, kill its worker processes that are
    still there (and what they started), none of the caller's other processes;
    returns whether it closed in time."""
    pids = worker_pids(cluster)  # before the close, which lets the nannies go
    try:
        cluster.close(timeout=seconds)
        return True
    except Exception as e:  # TimeoutError (asyncio's own before Python 3.11)
        import asyncio
        if not isinstance(e, (TimeoutError, asyncio.TimeoutError)):
            raise
        import psutil
        for pid in pids | worker_pids(cluster):
            with contextlib.suppress(psutil.Error):
                worker = psutil.Process(pid)
                for proc in (*worker.children(recursive=True), worker):
                    with contextlib.suppress(psutil.Error):
                        proc.kill()
        return False


def connect(scheduler_address: str | None = None,
            scheduler_file: str | os.PathLike[str] | None = None, gpu: bool | None = None,
            **cluster_kw: Any) -> Client:
    """A ``distributed.Client``: to a scheduler, or to a new local cluster.

    Parameters
    ----------
    scheduler_address : str, optional
        ``"tcp://host:8786"`` or ``"ucx://host:8786"``.
    scheduler_file : str, optional
        The JSON file that ``dask scheduler --scheduler-file`` writes.
    gpu : bool, optional
        For a new local cluster only: GPU workers (:func:`local_cuda_cluster`) or
        CPU workers (:func:`local_cpu_cluster`).  Default: GPUs when CuPy imports
        and a device is visible.
    **cluster_kw
        Passed to the new local cluster.

    Returns
    -------
    distributed.Client
        A local cluster started here is closed with the client.

    Examples
    --------
    >>> client = connect(gpu=False, n_workers=1, memory_limit="1GiB")
    >>> len(client.scheduler_info(n_workers=-1)["workers"])
    1
    >>> client.close()

    A cluster started with ``deploy/local/cluster.sh start --scheduler-file s.json``:

    >>> client = connect(scheduler_file="s.json")   # doctest: +SKIP
    """
    from distributed import Client

    if scheduler_address and scheduler_file:
        raise ValueError("give scheduler_address or scheduler_file, not both")
    if scheduler_address:
        return Client(scheduler_address)
    if scheduler_file:
        if not os.path.exists(scheduler_file):
            raise FileNotFoundError(f"scheduler file not found: {scheduler_file}")
        return Client(scheduler_file=scheduler_file)
    if gpu is None:
        gpu = gpu_available()
    cluster = local_cuda_cluster(**cluster_kw) if gpu else local_cpu_cluster(**cluster_kw)
    try:
        client = _owning_client_class()(cluster)
    except BaseException:
        cluster.close()
        raise
    client._distsort_cluster = cluster
    return client


def ipc_read_stats(dask_worker: Worker | None = None) -> dict[str, int | float]:
    """What this process's merges copied from other GPU workers' memory through CUDA
    IPC (``distsort.backends.share.cuda_ipc.read_stats``), ``{}`` where none ran; never
    imports CuPy itself.  Run it on the workers: ``client.run(ipc_read_stats)``."""
    ipc = sys.modules.get("distsort.backends.share.cuda_ipc")
    return ipc.read_stats() if ipc is not None else {}


def _sent_by_kind(dask_worker: Worker) -> dict[str, int]:
    from distsort.core.taskkeys import task_kind
    sent = {}
    copied = ipc_read_stats().get("bytes", 0)
    if copied:
        sent["ipc"] = copied
    for entry in dask_worker.transfer_outgoing_log:
        for key, nbytes in entry.get("keys", {}).items():
            kind = task_kind(key)
            sent[kind] = sent.get(kind, 0) + int(nbytes)
    return sent


def bytes_sent_by_kind(client: Client) -> dict[str, int]:
    """Bytes the workers have sent each other, by kind of task whose result travelled.

    From each worker's log of outgoing transfers (the recent ones that distributed
    keeps): for a sort, ``head`` and ``tail`` are the crossing elements that the
    compare-splits exchange, ``ipc`` those that merges copied from another GPU
    worker's memory (``distsort.backends.share.cuda_ipc``: then only ``share`` handles of a
    few hundred bytes travel), and anything else large is a chunk that moved.

    >>> before = bytes_sent_by_kind(client)  # doctest: +SKIP
    >>> s = distsort.sort(x).persist()  # doctest: +SKIP
    >>> diff_sent(before, bytes_sent_by_kind(client))  # doctest: +SKIP
    {'head': 1073741824, 'tail': 1073741824, 'edges': 16400, ...}
    """
    total = {}
    for sent in client.run(_sent_by_kind).values():
        for kind, nbytes in sent.items():
            total[kind] = total.get(kind, 0) + nbytes
    return total


def diff_sent(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """What ``bytes_sent_by_kind`` grew by between two readings."""
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
