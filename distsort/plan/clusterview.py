"""The workers of a sort and where its input chunks live: a :class:`ClusterView`.

Pure data, the input of the plan (``distsort.plan.sortplan``); ``distsort.cluster.view.read_view``
fills it in from the scheduler, once per sort.

>>> v = ClusterView.local(cores=4, memory=16 * 2**30)
>>> v.distributed, v.slots(gpu=False), v.slots(gpu=True)
(False, 4, 1)
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ClusterView"]


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

    workers: tuple[str, ...] = ()
    hosts: tuple[str | None, ...] | None = None  # None: no client; (None,): no answer
    threads: tuple[int, ...] = ()
    memory_limits: tuple[int | None, ...] = ()
    device_limits: tuple[int | None, ...] = ()
    device_budgets: tuple[int | None, ...] = ()
    owners: tuple[str | None, ...] = ()
    value_owners: tuple[str | None, ...] | None = None
    placed: bool = False
    cores: int = 1
    memory: int | None = None
    device: int | None = None

    @classmethod
    def local(cls, cores: int = 1, memory: int | None = None, device: int | None = None,
              chunks: int = 0) -> ClusterView:
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
