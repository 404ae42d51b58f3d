"""Runs on a worker's GPU: the backend of one exchange between GPU workers
(``distsort.plan.exchange``, ``distsort.graph.exchange``).

Each worker's CuPy chunks are joined on its GPU and sorted as one run by the CuPy
backend's local sort (``distsort.backends.gpu.local_sort.sort_owned``: CUB's radix sort
on the order codes, or in place where the plan says so).  The samples, windows and
splitters that cut the runs are small and found in host memory
(``distsort.backends.outofcore.hostruns``: ``run_sample``, ``count_before``); the
slices stay CuPy arrays, sent once to the worker that owns their output chunk, which
joins them and sorts them again (:meth:`DeviceRuns.merge_by_sort`).  That sort is
the run's own: distsort's order is a total order on bit patterns (keyed: key, then
value), so sorting the joined slices gives the merge, equal elements included; an
argsort's values are the input positions, so its ties stay in input order.

With ``engine="cpu"`` NumPy chunks take the same steps, sorted by the NumPy engine of
host runs (``stream_cpu.sort_pair``): the tests of the exchange's graph run them on the
CPU.

>>> from distsort.backends import Order
>>> runs = DeviceRuns(engine="cpu")
>>> a = runs.make_run([np.array([3.0, -0.0]), np.array([np.nan, 0.0])], None, Order())
>>> a.tolist()
[-0.0, 0.0, 3.0, nan]
>>> k, v = runs.make_run([np.array([2, 1]), np.array([1, 0])], None, Order(keyed=True),
...                      starts=[10, 40])
>>> k.tolist(), v.tolist()
([0, 1, 1, 2], [41, 11, 40, 10])
>>> runs.merge_by_sort([(k[:2], v[:2]), (np.array([1]), np.array([12]))],
...                    Order(keyed=True))[1].tolist()
[41, 11, 12]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from distsort.backends.chunk import make_chunk, parts
from distsort.backends.outofcore.hostruns import HostRuns

__all__ = ["DeviceRuns", "sort_joined"]


def _array_module(engine):
    """CuPy for the ``"gpu"`` engine, NumPy for the ``"cpu"`` one."""
    if engine == "gpu":
        import cupy
        return cupy
    return np


def _joined(pieces, xp):
    """The 1-D ``pieces`` one after the other, in a new array of ``xp`` (ours to sort):
    on the GPU, a piece in host memory (a chunk that dask-cuda spilled, read as a view
    of its host copy: ``distsort.cluster.held``) is copied there."""
    return xp.concatenate([xp.ravel(xp.asarray(p)) for p in pieces])


def sort_joined(keys, values, order, local="radix", starts=None, xp=np):  # noqa: PLR0913, PLR0917
    """The run of the ``keys`` pieces (and ``values``, or each piece's positions from
    its entry of ``starts``), joined in a new array of ``xp`` and sorted in distsort's
    order: CuPy by the CuPy backend's ``local`` sort, NumPy by the host runs' NumPy
    engine."""
    k = _joined(keys, xp)
    if starts is not None:
        v = xp.concatenate([xp.arange(s, s + p.size, dtype=np.int64)
                            for s, p in zip(starts, keys, strict=True)])
    else:
        v = None if values is None else _joined(values, xp)
    if xp is np:
        from distsort.backends.outofcore.stream_cpu import sort_pair
        return make_chunk(*sort_pair(k, v, order))
    from distsort.backends.gpu.local_sort import sort_owned
    # Positions joined in input order increase: a stable sort by the key orders them.
    return sort_owned(k, v, order, local, increasing_values=starts is not None)


@dataclass(frozen=True)
class DeviceRuns(HostRuns):
    """The backend of an exchange between GPU workers: runs and the merged output
    chunks on the workers' GPUs, sorted by ``local`` (``"radix"`` or ``"bitonic"``,
    the plan's ``SortPlan.local``); ``engine="cpu"``: in host memory, by NumPy."""

    engine: str = "gpu"
    local: str = "radix"

    name = "device-runs"
    merges_by_sort = True

    def make_run(self, keys, values, order, starts=None):
        """The sorted run of the chunks ``keys`` (and ``values``, or each chunk's
        positions from its entry of ``starts``), on the engine's device."""
        return sort_joined(keys, values, order, self.local, starts,
                           _array_module(self.engine))

    def merge_by_sort(self, slices, order):
        """An output chunk from its slice of every run: the slices joined and sorted."""
        keys = [parts(s)[0] for s in slices]
        values = None if parts(slices[0])[1] is None else [parts(s)[1] for s in slices]
        return sort_joined(keys, values, order, self.local, xp=_array_module(self.engine))

    def record(self, phase, seconds):
        """Phases are timed on the out-of-core GPU engine alone."""
