"""What a sort needs to know about where it runs, read once: a :class:`ClusterView`.

:func:`read_view` asks the current ``distributed`` scheduler, in one query, for its
workers (hosts, threads, memory limits) and the worker holding each input chunk, and
the workers once per set of workers for their device memory (dask-cuda's
``device_memory_limit``, the GPU's capacity); without a client it describes this
process (Dask's local schedulers).  Nothing below the plan (``distsort.sortplan``)
asks the scheduler again: the plan is pure arithmetic on the view.

>>> v = ClusterView.local(cores=4, memory=16 * 2**30)
>>> v.distributed, v.slots(gpu=False), v.slots(gpu=True)
(False, 4, 1)
"""
from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["ClusterView", "read_view"]


@dataclass(frozen=True)
class ClusterView:
    """The workers of a sort and where its input chunks live.

    ``workers`` is empty on Dask's local schedulers (this process sorts); otherwise
    ``hosts``, ``threads``, ``memory_limits`` (bytes, None: none),
    ``device_limits`` (bytes a worker's chunks may take on its GPU: dask-cuda's
    ``device_memory_limit``, else the GPU's capacity; None: no GPU or not known) and
    ``device_budgets`` (dask-cuda's ``device_memory_limit`` alone: the budget past
    which a sort runs out of core) have one entry per worker.  ``owners``: the worker
    holding each key chunk (None: not in memory); ``value_owners`` the same for the
    values (None: no values).  ``placed``: distsort's scheduler plugin is registered.
    ``cores``, ``memory`` and ``device`` describe this process, for the local
    schedulers.
    """

    workers: tuple = ()
    hosts: tuple | None = None  # None: no client; (None,): a client that did not answer
    threads: tuple = ()
    memory_limits: tuple = ()
    device_limits: tuple = ()
    device_budgets: tuple = ()
    owners: tuple = ()
    value_owners: tuple | None = None
    placed: bool = False
    cores: int = 1
    memory: int | None = None
    device: int | None = None

    @classmethod
    def local(cls, cores=1, memory=None, device=None, chunks=0):
        """The view of Dask's local schedulers: this process, ``chunks`` lazy chunks."""
        return cls(cores=cores, memory=memory, device=device, owners=(None,) * chunks)

    @property
    def distributed(self) -> bool:
        """Whether a ``distributed`` client runs the sort."""
        return self.hosts is not None

    def slots(self, gpu: bool) -> int:
        """Chunks sorted at once: one per GPU (one on the local schedulers), one per
        thread of CPU workers (one per core on the local schedulers).

        >>> ClusterView(workers=("a", "b"), hosts=("h", "h"), threads=(4, 2)).slots(False)
        6
        """
        if not self.workers:
            return 1 if gpu else max(1, self.cores)
        if gpu:
            return len(self.workers)
        return max(1, sum(int(t or 1) for t in self.threads))


def _local_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX
        return None


def _local_device():
    from .backends.gpu.local_sort import device_limit
    return device_limit()


def _scheduler_facts(keys, value_keys, dask_scheduler=None):
    """On the scheduler: its workers' ``(address, host, nthreads, memory_limit)`` and
    the first worker (by address) holding each of ``keys`` and ``value_keys``."""
    from .locality import _first_holders

    def holders(ks):
        return _first_holders(ks, dask_scheduler=dask_scheduler)

    workers = [(ws.address, ws.host, ws.nthreads, ws.memory_limit or None)
               for ws in dask_scheduler.workers.values()]
    return workers, holders(keys), (holders(value_keys) if value_keys is not None else None)


def _device_facts(gpu, dask_worker=None):
    """On a worker: ``(dask-cuda's device_memory_limit or None, its device limit or
    None)``; the GPU is asked only for a sort of CuPy chunks."""
    from .memory import _worker_device_budget
    budget = _worker_device_budget(dask_worker)
    limit = None
    if gpu:
        try:
            limit = _local_device()
        except Exception:  # noqa: BLE001  (no GPU here: no bound from memory)
            limit = None
    return budget, limit


_device_cache: dict = {}  # (scheduler, workers, gpu) -> device facts of each worker


def read_view(keys=(), value_keys=None, gpu=False, placed=False) -> ClusterView:
    """The :class:`ClusterView` of a sort of the chunks ``keys`` (and ``value_keys``)
    on the current ``distributed`` client, else on this process.

    >>> read_view([("x", 0), ("x", 1)]).owners  # no client: Dask's local schedulers
    (None, None)
    """
    from .locality import _current_client
    keys = list(keys)
    client = _current_client()
    if client is None:
        return ClusterView.local(os.cpu_count() or 1, _local_memory(),
                                 _local_device() if gpu else None, len(keys))
    unknown = ClusterView(hosts=(None,), owners=(None,) * len(keys), cores=os.cpu_count() or 1)
    if client.asynchronous:
        return unknown
    try:
        workers, owners, vowners = client.run_on_scheduler(
            _scheduler_facts, keys, None if value_keys is None else list(value_keys))
    except Exception:  # noqa: BLE001  (no answer: sized as for one worker, no locality)
        return unknown
    addresses = tuple(w[0] for w in workers)
    cache_key = (getattr(client.scheduler, "address", None), tuple(sorted(addresses)), gpu)
    if cache_key not in _device_cache:
        try:
            facts = client.run(_device_facts, gpu)
        except Exception:  # noqa: BLE001  (no answer: no device bounds)
            facts = {}
        _device_cache[cache_key] = facts
    facts = _device_cache[cache_key]
    device = [facts.get(a, (None, None)) for a in addresses]
    return ClusterView(
        workers=addresses, hosts=tuple(w[1] for w in workers) or (None,),
        threads=tuple(w[2] for w in workers), memory_limits=tuple(w[3] for w in workers),
        device_budgets=tuple(d[0] for d in device), device_limits=tuple(d[1] for d in device),
        owners=tuple(owners), value_owners=None if vowners is None else tuple(vowners),
        placed=placed, cores=os.cpu_count() or 1)
