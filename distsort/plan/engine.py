"""The engine of the command's sort, decided once from integers: the CPU or the GPUs,
in threads of the command's process or on a cluster of worker processes, or the disk
(an input larger than host memory: runs on the disk, ``outofcore.plan_disk_sort``).

The command (``distsort.cli``) reads the machine (host memory available, GPU 0's
memory) and its options into a :class:`Machine` and a :class:`Request`, and acts on
the :class:`Engine` that :func:`choose_engine` returns; a sort through the disk runs
the ``SortPlan`` of :func:`disk_sort_plan`, whose ``engine`` is ``"disk"``.

>>> GB = 10**9
>>> choose_engine(10**6, 8, 8, Machine(available=16 * GB))
Engine(name='cpu', in_process=True, memory=0)
>>> choose_engine(10**9, 8, 8, Machine(available=16 * GB))  # 24 GB > 16 GB: the disk
Engine(name='disk', in_process=True, memory=12000000000)
>>> choose_engine(10**6, 8, 8, Machine(available=16 * GB), Request(cluster=True))
Engine(name='cpu', in_process=False, memory=0)
"""
from __future__ import annotations

from typing import NamedTuple

from distsort.plan.outofcore import MEMORY_SHARE, DiskPlan, needs_disk
from distsort.plan.sortplan import SortPlan, usable_bytes

__all__ = ["ENGINES", "Engine", "Machine", "Request", "choose_engine", "disk_budget",
           "disk_sort_plan", "fits_in_process", "use_gpu", "IN_PROCESS_SHARE",
           "IN_PROCESS_GPU_COPIES", "IN_PROCESS_GPU_HOST_COPIES"]

#: The engines a sort runs on.
ENGINES = ("cpu", "gpu", "disk")
#: An input sorted by threads of the command's process takes at most this share of
#: the memory available now (the chunks, their merges and what waits to be written).
IN_PROCESS_SHARE = 8
#: The sort's data (keys and values), this many times over, fits one GPU for the
#: command's process to sort it there: the chunks, the merges' outputs before their
#: inputs are freed, and the radix sort's buffers.
IN_PROCESS_GPU_COPIES = 3
#: ... and twice over in host memory: chunks read and not yet on the GPU, sorted
#: ones waiting for the disk.
IN_PROCESS_GPU_HOST_COPIES = 2


class Machine(NamedTuple):
    """Bytes the command's machine offers and its options bound (0: none).

    ``available``: host memory available now; ``gpu_memory``: GPU 0's memory (0: no
    GPU this process can use, or none asked for); ``host_limit``:
    ``--host-memory-limit``; ``device_limit``: ``--device-memory-limit``."""

    available: int
    gpu_memory: int = 0
    host_limit: int = 0
    device_limit: int = 0


class Request(NamedTuple):
    """What the command asks for: ``gpu``, a sort on GPUs (:func:`use_gpu`);
    ``cluster``, a cluster (a scheduler, ``--workers``, ``--memory-limit`` or
    ``--spill-dir``); ``disk``, outputs the disk path writes (.npy files, no
    ``--report``)."""

    gpu: bool = False
    cluster: bool = False
    disk: bool = True


class Engine(NamedTuple):
    """The decision: ``name`` (one of :data:`ENGINES`), ``in_process`` (threads of the
    command's process rather than worker processes) and, for the disk, ``memory``:
    the bytes of host memory the sort through the disk may hold."""

    name: str
    in_process: bool
    memory: int = 0


#: The plain request: the CPU, no cluster, outputs the disk path writes.
ASKED = Request()


def use_gpu(device: str, present: bool) -> bool:
    """Whether the sort runs on GPUs: ``--device gpu``, or ``auto`` where GPUs are
    ``present`` (on this host, or on every worker of a running cluster).

    >>> use_gpu("gpu", False), use_gpu("auto", True), use_gpu("cpu", True)
    (True, True, False)
    """
    return device == "gpu" or (device == "auto" and bool(present))


def disk_budget(nbytes: int, machine: Machine, request: Request = ASKED) -> int:
    """Bytes of host memory a sort of ``nbytes`` (keys and values) through the disk
    holds, where it goes through the disk; else 0.  It does on the CPU in the
    command's process (no cluster asked for), into outputs the disk path writes, where
    the data outgrow the memory (``outofcore.needs_disk``): ``host_limit``, or the
    memory available (of which it takes ``MEMORY_SHARE``).

    >>> disk_budget(10**6, Machine(available=0, host_limit=10**6))
    1000000
    >>> disk_budget(10**6, Machine(available=8 * 10**6)), disk_budget(10**6, Machine(2 * 10**6))
    (0, 1500000)
    """
    if request.cluster or request.gpu or not request.disk or not nbytes:
        return 0
    memory = machine.host_limit or machine.available
    if not needs_disk(nbytes, memory):
        return 0
    return int(memory if machine.host_limit else memory * MEMORY_SHARE)


def fits_in_process(n: int, sort_bytes: int, per_element: int, machine: Machine,
                    request: Request = ASKED) -> bool:
    """Sort ``n`` elements with threads of the command's process, not a cluster of
    worker processes?

    Yes where no cluster is asked for and the job takes a small share of the memory
    available: on the CPU, ``n * per_element`` (bytes an element takes, its chunk's
    share) of the host's (and no device limit, which only a cluster's workers
    take); on a GPU, the data (``n * sort_bytes``, keys and values) twice over of the
    host's, and three times over of GPU 0's usable memory, or a ``device_limit`` it
    holds (out of core, the runs in host memory).  Starting worker processes costs
    seconds (a GPU worker 4-9 s) and every chunk is sent to them and back: an input
    that fits one host is sorted sooner in this process.

    >>> fits_in_process(10**6, 8, 8, Machine(available=64 * 10**6))
    True
    >>> gpu = Request(gpu=True)
    >>> fits_in_process(10**9, 8, 8, Machine(10**11, gpu_memory=30 * 10**9), gpu)
    True
    >>> fits_in_process(10**9, 8, 8, Machine(10**11, gpu_memory=20 * 10**9), gpu)
    False
    """
    if request.cluster:
        return False
    if not request.gpu:
        return not machine.device_limit and n * per_element * IN_PROCESS_SHARE <= machine.available
    data = n * sort_bytes
    if not machine.gpu_memory or data * IN_PROCESS_GPU_HOST_COPIES > machine.available:
        return False
    usable = usable_bytes(machine.gpu_memory)
    if machine.device_limit:
        return machine.device_limit <= usable
    return data * IN_PROCESS_GPU_COPIES <= usable


def choose_engine(n: int, sort_bytes: int, per_element: int, machine: Machine,
                  request: Request = ASKED) -> Engine:
    """The engine of a sort of ``n`` elements (``sort_bytes`` of keys and values each,
    ``per_element`` bytes held each in memory) on ``machine`` as ``request`` asks: the
    disk where :func:`disk_budget` gives one, else the GPU or the CPU, in this process
    where :func:`fits_in_process`.

    >>> choose_engine(10**6, 8, 8, Machine(10**8), Request(gpu=True))  # no GPU 0 here
    Engine(name='gpu', in_process=False, memory=0)
    """
    memory = disk_budget(n * sort_bytes, machine, request)
    if memory:
        return Engine("disk", True, memory)
    return Engine("gpu" if request.gpu else "cpu",
                  fits_in_process(n, sort_bytes, per_element, machine, request))


def disk_sort_plan(disk: DiskPlan) -> SortPlan:
    """The ``SortPlan`` of a sort through the disk: out of core, its output chunks the
    runs, on the engine ``"disk"``, carrying ``disk``.

    >>> from distsort.plan.outofcore import plan_disk_sort
    >>> p = disk_sort_plan(plan_disk_sort(10_000, 12, 60_000, tasks=3))
    >>> p.strategy, p.engine, len(p.chunks), p.disk.segment
    ('out-of-core', 'disk', 7, 1666)
    """
    return SortPlan("out-of-core", tuple(disk.runs), None, None, 1, engine="disk", disk=disk)
