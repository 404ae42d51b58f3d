"""The plan the command's sort will run, made before any work: the chunk size it
picks (:func:`distsort.cli.sizes.chunk_elements`) and the plan of those chunks
(``distsort.plan.sortplan.plan_sort``, through ``distsort.api``, with the command's plan
options), on the cluster the command would start.  The limits are checked on it
(:mod:`distsort.cli.limits`), so that a limit the check accepts is one the plan meets.
"""
from __future__ import annotations

import copy
import os

from distsort.cli.connection import Cluster, engine_request, machine, plan_options
from distsort.cli.sizes import chunk_elements


def disk_outputs(args, job):
    """Whether the disk path can write the job's outputs: .npy files, and no
    ``--report`` (Dask's profiles see no tasks there)."""
    from distsort.cli.files import file_kind
    return not args.report and all(file_kind(p) == "npy" for p in job.outputs)


def command_engine(args, job):
    """The ``distsort.plan.engine.Engine`` of the job's sort: the disk, or the GPU or
    the CPU, in this process or on a cluster, as ``choose_engine`` decides on this
    machine (:func:`distsort.cli.connection.machine`) and the command's options."""
    from distsort.plan.engine import choose_engine
    request = engine_request(args, disk=bool(job.src.n) and disk_outputs(args, job))
    return choose_engine(job.src.n, job.sort_bytes(), job.per_element(),
                         machine(args, request.gpu), request)


def local_workers(args):
    """Worker processes of the local cluster the command starts: ``--workers``, else
    one per core (``distsort.cluster.local_cpu_cluster``)."""
    return getattr(args, "workers", None) or os.cpu_count() or 1


def cpu_view(workers, memory_limit):
    """The ``ClusterView`` of a local CPU cluster of ``workers`` one-thread workers of
    ``memory_limit`` bytes each, before it starts."""
    from distsort.plan.clusterview import ClusterView
    names = tuple(f"worker-{i}" for i in range(workers))
    return ClusterView(workers=names, hosts=("127.0.0.1",) * workers,
                       threads=(1,) * workers, memory_limits=(memory_limit,) * workers)


def with_chunk_size(args, chunk_size):
    """``args`` with ``--chunk-size`` set to ``chunk_size`` (``("elements", n)``)."""
    other = copy.copy(args)
    other.chunk_size = chunk_size
    return other


def sort_options(job, args, cluster):
    """The ``SortOptions`` of the job's sort on ``cluster``, as the library makes them
    (``distsort.plan.options.sort_options``) within the command's plan options."""
    from distsort.plan.options import planning
    from distsort.plan.options import sort_options as options_of
    value_bytes = (8 if job.mode == "argsort"
                   else job.vals.dtype.itemsize if job.vals is not None else 0)
    with planning(**plan_options(args, cluster)):
        return options_of(cluster.gpu, value_bytes, job.mode == "argsort", "auto",
                          job.src.dtype, job.descending)


def job_plan(job, args, cluster, view, options=None):
    """``(chunk, plan)``: the elements per chunk the command picks for ``job`` on
    ``cluster`` (a ``Cluster`` stand-in: ``worker_memory``, ``threads`` as its slots)
    and the ``SortPlan`` of those chunks on ``view`` (``options``: the
    :func:`sort_options`, made again where not given).  Raises MemoryError where a
    chunk cannot be sorted within ``--device-memory-limit``."""
    from distsort.plan.network import regular_chunks
    from distsort.plan.sortplan import plan_sort
    n = job.src.n
    chunk = chunk_elements(args, cluster, job.src.dtype.itemsize, job.per_element(), n)
    options = options or sort_options(job, args, cluster)
    return chunk, plan_sort(regular_chunks(n, chunk), job.src.dtype.itemsize, view, options)


def planned_cpu_cluster(workers, memory_limit):
    """The stand-in ``Cluster`` of :func:`job_plan` for a local CPU cluster."""
    return Cluster(None, "", gpu=False, worker_memory=memory_limit, threads=workers)


def adjusted_chunks(args, chunk, plan, n):
    """The summary's words on ``--chunk-size`` where the plan sorts other chunks than
    the ``chunk`` elements asked for, with the reason; None where it sorts those.

    >>> from types import SimpleNamespace
    >>> from distsort.plan.sortplan import SortPlan
    >>> p = SortPlan("network", (500_000, 500_000), (), None, 1, 4, False, "auto")
    >>> print(adjusted_chunks(SimpleNamespace(chunk_size=("elements", 1000)), 1000, p, 10**6))
    --chunk-size 1000: sorted as 2 chunks of 500,000 elements: 1,000 chunks of 1,000 \
would be more than 8 per chunk sorted at once, whose tasks would cost more than their \
sorts: coalesced
    """
    from distsort.plan.network import regular_chunks
    from distsort.plan.sortplan import COALESCE_PER_SLOT
    if getattr(args, "chunk_size", None) is None or not n:
        return None
    asked = regular_chunks(n, chunk)
    if tuple(plan.chunks) == asked:
        return None
    kind, size = args.chunk_size
    got = max(plan.chunks)
    what = (f"--chunk-size {size if kind == 'elements' else f'{size}B'}: sorted as "
            f"{len(plan.chunks):,} chunks of {got:,} elements: ")
    if got > chunk:
        return what + (f"{len(asked):,} chunks of {chunk:,} would be more than "
                       f"{COALESCE_PER_SLOT} per chunk sorted at once, whose tasks would "
                       "cost more than their sorts: coalesced")
    if plan.strategy == "out-of-core":
        return what + "a chunk of that size does not fit --device-memory-limit"
    return what + "a chunk of that size does not fit a worker's memory budget"
