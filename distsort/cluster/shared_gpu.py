"""Several Dask workers on one GPU, each with an RMM pool.

dask-cuda starts at most one worker per device ("Can not scale beyond visible
devices").  Plain ``distributed`` workers can share one: each process makes an RMM
pool on the device and CuPy allocates from it.  The whole multi-worker GPU path
(placement, group sorts, CUDA IPC and comm exchanges, rounds across workers, out of
core with several workers) then runs on a one-GPU machine.  Its speed says little,
since the workers share one device; its results are what it is for.

>>> RMMPool(0.4).fraction
0.4
"""
from __future__ import annotations

from distributed import LocalCluster
from distributed.diagnostics.plugin import WorkerPlugin

__all__ = ["RMMPool", "shared_gpu_cluster"]


class RMMPool(WorkerPlugin):
    """A worker plugin: an RMM pool of ``fraction`` of the device's memory, from which
    CuPy then allocates.  It is set up before the worker runs any task, so every CuPy
    array of the worker comes from the pool (and can be shared through CUDA IPC).  The
    pool counts what it hands out (``rmm.statistics``): the driver sees the whole pool
    as used, and the room left in it is read there.

    >>> RMMPool(1.5)
    Traceback (most recent call last):
    ...
    ValueError: fraction must be in (0, 1], got 1.5
    """

    name = "distsort-rmm-pool"

    def __init__(self, fraction):
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
        self.fraction = fraction

    def setup(self, worker=None):
        import cupy
        import rmm
        import rmm.statistics
        from rmm.allocators.cupy import rmm_cupy_allocator

        total = cupy.cuda.runtime.memGetInfo()[1]
        # RMM wants a multiple of 256 bytes; the pool still grows past it when needed.
        rmm.reinitialize(pool_allocator=True,
                         initial_pool_size=int(total * self.fraction) // 256 * 256)
        rmm.statistics.enable_statistics()
        cupy.cuda.set_allocator(rmm_cupy_allocator)


def shared_gpu_cluster(n_workers=2, pool_fraction=None, device=0, **kw):
    """A ``distributed.LocalCluster`` of ``n_workers`` processes (one thread each)
    sharing GPU ``device``, each with an RMM pool (:class:`RMMPool`).

    Parameters
    ----------
    n_workers : int, optional
        Worker processes (default 2).
    pool_fraction : float, optional
        Each worker's initial pool, as a fraction of the device's memory (default:
        ``distsort.cluster.RMM_POOL_FRACTION / n_workers``).
    device : int, optional
        The GPU the workers share (their ``CUDA_VISIBLE_DEVICES``).
    **kw
        Passed to ``LocalCluster`` (``memory_limit``, ``local_directory``, ...).

    The workers report no device budget (they are not dask-cuda workers): a sort on
    them runs out of core only where the Dask config ``distsort.device-memory-limit``
    asks for it.

    Examples
    --------
    >>> from distributed import Client                                 # doctest: +SKIP
    >>> import cupy, dask.array as da, distsort                        # doctest: +SKIP
    >>> with shared_gpu_cluster() as cluster, Client(cluster):          # doctest: +SKIP
    ...     x = da.random.default_rng(0).random(2**24, chunks=2**21)
    ...     s = distsort.sort(x.map_blocks(cupy.asarray)).compute()
    """
    from distsort.cluster import RMM_POOL_FRACTION, dashboard_address_of

    if pool_fraction is None:
        pool_fraction = RMM_POOL_FRACTION / n_workers
    kw.setdefault("host", "127.0.0.1")
    kw["dashboard_address"] = dashboard_address_of(kw)
    env = {**kw.pop("env", {}), "CUDA_VISIBLE_DEVICES": str(device)}
    return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                        plugins=(RMMPool(pool_fraction),), env=env, **kw)
