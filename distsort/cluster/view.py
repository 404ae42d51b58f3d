"""What a sort needs to know about where it runs, read once: a :class:`ClusterView`.

:func:`read_view` asks the current ``distributed`` scheduler, in one query, for its
workers (hosts, threads, memory limits) and the worker holding each input chunk, and
the workers once per set of workers for their device memory (dask-cuda's
``device_memory_limit``, the GPU's capacity); without a client it describes this
process (Dask's local schedulers).  Nothing below the plan (``distsort.plan.sortplan``)
asks the scheduler again: the plan is pure arithmetic on the view (the dataclass
itself is ``distsort.plan.clusterview``'s, beside the plan).
"""
from __future__ import annotations

import functools
import os
from collections.abc import Iterable

from distsort.plan.clusterview import ClusterView

__all__ = ["ClusterView", "read_view"]


@functools.cache
def _local_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX
        return None


@functools.cache
def cores():
    """This host's cores (a constant, read once: ``os.cpu_count`` reads ``/sys``)."""
    return os.cpu_count() or 1


def local_facts(gpu):
    """``(cores, memory, device limit or None)`` of this process: what
    :meth:`ClusterView.local` takes besides the chunk count."""
    return cores(), _local_memory(), _local_device() if gpu else None


def _local_device():
    from distsort.backends.gpu.local_sort import device_limit
    return device_limit()


def _scheduler_facts(keys, value_keys, dask_scheduler=None):
    """On the scheduler: its workers' ``(address, host, nthreads, memory_limit)`` and
    the first worker (by address) holding each of ``keys`` and ``value_keys``."""
    from distsort.cluster.locality import _first_holders

    def holders(ks):
        return _first_holders(ks, dask_scheduler=dask_scheduler)

    workers = [(ws.address, ws.host, ws.nthreads, ws.memory_limit or None)
               for ws in dask_scheduler.workers.values()]
    return workers, holders(keys), (holders(value_keys) if value_keys is not None else None)


def _device_facts(gpu, dask_worker=None):
    """On a worker: ``(dask-cuda's device_memory_limit or None, its device limit or
    None)``; the GPU is asked only for a sort of CuPy chunks."""
    from distsort.core.memory import _worker_device_budget
    budget = _worker_device_budget(dask_worker)
    limit = None
    if gpu:
        try:
            limit = _local_device()
        except Exception:  # noqa: BLE001  (no GPU here: no bound from memory)
            limit = None
    return budget, limit


_device_cache: dict = {}  # (scheduler, workers, gpu) -> device facts of each worker


def read_view(keys: Iterable = (), value_keys: Iterable | None = None, gpu: bool = False,
              placed: bool = False) -> ClusterView:
    """The :class:`ClusterView` of a sort of the chunks ``keys`` (and ``value_keys``)
    on the current ``distributed`` client, else on this process.

    >>> read_view([("x", 0), ("x", 1)]).owners  # no client: Dask's local schedulers
    (None, None)
    """
    from distsort.cluster.locality import _current_client
    keys = list(keys)
    client = _current_client()
    if client is None:
        return ClusterView.local(*local_facts(gpu), len(keys))
    unknown = ClusterView(hosts=(None,), owners=(None,) * len(keys), cores=cores())
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
        placed=placed, cores=cores())
