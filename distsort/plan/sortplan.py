"""The plan of a sort, made once: ``plan_sort(chunks, itemsize, view, options)``.

Pure arithmetic on the input's chunk sizes, the element sizes, a
:class:`~distsort.cluster.view.ClusterView` and the :class:`SortOptions`; tested on tuples,
as Dask tests ``plan_rechunk``.  The :class:`SortPlan` names its strategy:

``"one-device"``
    All the chunks, their sorted copy and the radix sort's buffers fit the budget of
    the one device that sorts them (one GPU, one CPU worker, or this process on
    Dask's local schedulers): one task gathers the chunks, sorts them once and
    splits the result into the output chunks (one whole chunk into one, a plain
    array: the output's own task, ``SortPlan.one_task``).  No network, no
    round trip through the scheduler per round.  A plain CuPy array sorted here
    whose copy fits beside it, but not the radix sort's buffers too, is also sorted
    as one: its copy in place (local sort ``"bitonic"``).
``"network"``
    The bitonic network of compare-splits between chunks (``distsort.plan.network``),
    positions following where the chunks live and groups of consecutive positions
    sorted as one within the budget (``distsort.placement``).  An input of more
    chunks than the workers need (:data:`COALESCE_PER_SLOT` per slot) is coalesced
    first: the group sorts read slices of the input chunks themselves (``pieces``),
    so nothing moves twice and the task count does not grow with the input's; the
    coalesced chunks fit beside the data a slot holds (:func:`coalesced_chunks`).
``"kway"``
    One process holds the data (Dask's local schedulers, a plain array sorted here)
    and memory has room for the output beside the runs: one run per core, sorted by
    all cores at once, then one k-way merge, each output chunk by one task from its
    slice of every run (``distsort.plan.onehost``).  CPU keys alone.
``"out-of-core"``
    The data outgrow the workers' device budgets, and the network could not run in
    them (:func:`fits_in_place`): runs in host memory and a merge between them
    (``distsort.plan.outofcore``).
``"exchange"``
    Several workers (CPU, or GPU: ``distsort.backends.gpu.runs``) each have room for
    what they receive beside their chunks sorted as one run: exact splitters, one
    exchange of slices, a merge per output chunk (``distsort.plan.exchange``).

Beside the strategy the plan says how its tasks run, and nothing else decides it: the
backend (``SortPlan.backend``), each task's local sort (``distsort.plan.localsort``:
radix or in place, from the room the budget leaves beside the data), whether one task
sorts one whole chunk and runs at once with no graph (``one_task``, ``eager``), and
whether equal keys keep their input order in it (``stable``).

>>> from distsort.cluster.view import ClusterView
>>> view = ClusterView.local(cores=2, memory=16 * 2**30, chunks=4)
>>> from distsort.plan.options import SortOptions
>>> p = plan_sort((250,) * 4, 8, view, SortOptions())
>>> p.strategy, p.chunks, p.pieces
('one-device', (250, 250, 250, 250), (((0, 0, 250), (1, 0, 250), (2, 0, 250), (3, 0, 250)),))
>>> plan_sort((250,) * 4, 8, view, SortOptions(strategy="network"))[:5]
('network', (250, 250, 250, 250), None, (0, 1, 2, 3), 1)
"""
from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from typing import NamedTuple

from distsort.core.memory import RESERVE, radix_extra_bytes, usable
from distsort.plan.exchange import plan_exchange, worker_bytes as exchange_worker_bytes
from distsort.plan.kway import choose_merge
from distsort.plan.localsort import IN_PLACE, RADIX, plan_local
from distsort.plan.options import SortOptions, check_options
from distsort.plan.outofcore import (RUN_FRACTION, DiskPlan, OutOfCorePlan, bytes_moved,
                                     group_by_owner, needs_out_of_core, plan_out_of_core,
                                     run_lengths)
from distsort.plan.placement import (GROUP_COPIES, floor_pow2, group_bounds, group_size,
                                     local_group, placement)
from distsort.plan.onehost import KWAY_MIN, kway_chunks, kway_fits, kway_runs, run_bounds
from distsort.plan.network import group_steps, normalize_chunks, plan_network, regular_chunks
from distsort.plan.clusterview import ClusterView

__all__ = ["OutOfCore", "SortPlan", "plan_sort",
           "one_device_budget", "slot_budget", "usable_bytes", "coalesced_chunks", "cut_pieces",
           "one_device_bytes", "resident_bytes", "COALESCE_PER_SLOT", "CPU_BUDGET_DIVISOR",
           "PAIRS_PER_WORKER", "WORK_CHUNKS", "GROUP_WORK", "fits_in_place", "work_chunks",
           "exchange_worker_bytes"]

#: An input of more chunks than this per slot is coalesced before the network.
COALESCE_PER_SLOT = 8
#: CPU memory budgets are this fraction of a worker's memory limit (or of this
#: machine's memory): Dask spills from 60% of it, and the process's own memory (the
#: libraries, numba's compiler) takes a good part of the rest.
CPU_BUDGET_DIVISOR = 4
#: Pairs of the network in flight per worker: one merging while the next one's crossing
#: part travels (per core on the local schedulers).
PAIRS_PER_WORKER = 2
#: Chunk-sized buffers a slot's share of the network needs beyond its chunks: the two
#: outputs of each pair in flight, and one to spare.
WORK_CHUNKS = 2 * PAIRS_PER_WORKER + 1
#: Chunk-sized buffers beside a slot's chunks while a group sort of one chunk runs: its
#: gathered copy and the chunk it copies out (or the radix sort's buffer), beside the
#: outputs of the pairs in flight of the groups sorted before it.
GROUP_WORK = GROUP_COPIES + 2 * PAIRS_PER_WORKER


class OutOfCore(NamedTuple):
    """How an out-of-core sort runs: its ``engine`` (``"gpu"``, ``"cpu"``) and device
    ``budget``, the runs' ``plan``, ``perm`` (chunks grouped by the worker holding
    them, or None), ``stage`` (CuPy chunks taken off the GPU first by tasks of their
    own), ``held`` (persisted chunks read where they are held: ``distsort.cluster.held``) and
    ``merge`` between the runs: ``"kway"`` (one pass), ``"exchange"`` (one pass over
    runs on several workers, which exchange slices once) or ``"network"``
    (``distsort.plan.kway.choose_merge``)."""

    engine: str
    budget: int
    plan: OutOfCorePlan
    perm: tuple[int, ...] | None
    stage: bool
    held: bool
    merge: str = "network"

    @property
    def one_pass(self) -> bool:
        """Whether the runs are merged in one k-way pass (``"kway"``, ``"exchange"``)."""
        return self.merge in ("kway", "exchange")


class SortPlan(NamedTuple):
    """A sort, decided.

    ``chunks``: the regular chunking of the network's positions, which is the
    output's.  ``pieces``: where the input is read as it is (one-device, coalesced
    network), for each group of ``group`` consecutive positions the input chunks'
    slices ``(chunk, start, stop)`` it gathers, in order; None where the input is
    rechunked to ``chunks`` and position ``p`` takes input chunk ``perm[p]``.
    ``window``: pairs of the network in flight; ``share``: GPU chunks shared through
    CUDA IPC; ``local``: each task's local sort, ``"radix"`` or ``"bitonic"`` (in place;
    ``distsort.plan.localsort``); ``out_of_core``: an :class:`OutOfCore`.
    ``engine``: ``"gpu"`` (CuPy chunks), ``"cpu"`` or ``"disk"``.  ``one_task``: one whole input
    chunk sorted into the one output chunk by one task; ``eager``: that task is run at
    once, with no graph (a plain array sorted in this process); ``stable``: equal keys
    keep their input order in the one task that sorts every chunk
    (``sort_by_key(..., stable=True)``: the backend's ``stable_sort``).  ``disk``: the
    runs on disk of a sort through the disk (``engine`` ``"disk"``:
    ``distsort.plan.engine``), else None.
    """

    strategy: str
    chunks: tuple[int, ...]
    pieces: tuple[tuple[tuple[int, int, int], ...], ...] | None
    perm: tuple[int, ...] | None
    group: int
    window: int = 1
    share: bool = False
    local: str = RADIX
    out_of_core: OutOfCore | None = None
    engine: str = "cpu"
    one_task: bool = False
    eager: bool = False
    stable: bool = False
    disk: DiskPlan | None = None

    @property
    def backend(self) -> str:
        """The backend its tasks run on (``distsort.backends.backend_named``):
        ``"host-runs"`` out of core and for an exchange between CPU workers,
        ``"device-runs"`` for one between GPU workers, ``"cuda-ipc"`` for GPU chunks
        shared between the workers of one host, else ``"cupy"`` or ``"numpy"``.

        >>> SortPlan("network", (4, 4), None, (0, 1), 1, engine="gpu", share=True).backend
        'cuda-ipc'
        >>> SortPlan("exchange", (4, 4), None, None, 2, engine="gpu").backend
        'device-runs'
        """
        if self.strategy == "exchange" and self.engine == "gpu":
            return "device-runs"
        if self.out_of_core is not None or self.strategy == "exchange":
            return "host-runs"
        if self.share:
            return "cuda-ipc"
        return "cupy" if self.engine == "gpu" else "numpy"

    @property
    def sorted_as_one(self) -> bool:
        """Whether every chunk is sorted in one task, in input order, with no merge
        after: the one-device plan, or a network whose one group holds every chunk (a
        network of one worker).

        >>> SortPlan("network", (4, 4), None, (0, 1), 2, 2).sorted_as_one
        True
        >>> SortPlan("network", (4, 4), None, (1, 0), 2, 2).sorted_as_one
        False
        """
        if self.strategy == "one-device":
            return True
        n = len(self.chunks)
        return (self.strategy == "network" and self.pieces is None
                and self.out_of_core is None
                and self.group > 1 and self.rounds == 0  # one group task (a chunk alone: none)
                and tuple(self.perm or range(n)) == tuple(range(n)))

    @property
    def rechunk(self) -> bool:
        """Whether the input is rechunked to ``chunks`` first (else read as it is)."""
        return self.pieces is None

    @property
    def rounds(self) -> int:
        """Rounds of the network the sort runs: between chunks (the rounds inside a
        group as one), between the runs out of core (none for the k-way merge), none
        on one device.

        >>> SortPlan("network", (10,) * 8, None, tuple(range(8)), 2).rounds
        5
        >>> SortPlan("one-device", (10,) * 8, ((),), None, 8).rounds
        0
        """
        ooc = self.out_of_core
        if ooc is not None:
            return 0 if ooc.one_pass else len(ooc.plan.rounds)
        if self.strategy in ("one-device", "kway", "exchange"):
            return 0
        return len(group_steps(plan_network(len(self.chunks), run=self.group), self.group))


def usable_bytes(capacity: int) -> int:
    """Bytes of a device of ``capacity`` bytes that a sort counts on: the capacity less
    its reserve (``distsort.core.memory.RESERVE``, for the CUDA context and libraries).

    >>> usable_bytes(100 * 10**9)
    95000000000
    """
    return usable(capacity, RESERVE)


def _limit_of(limit: int | float | None, budgets: Sequence[int | None]) -> int | None:
    """The smallest of ``budgets`` (None where not known), or ``limit`` where set."""
    if limit:
        return int(limit)
    known = [b for b in budgets if b]
    return min(known) if known else None


def _gpu_limits(view: ClusterView) -> tuple[int | None, ...]:
    """Each GPU worker's bytes: its device limit, or dask-cuda's ``device_memory_limit``
    where that is smaller (past it dask-cuda spills); this process's GPU on Dask's local
    schedulers.

    >>> _gpu_limits(ClusterView(workers=("a", "b"), device_limits=(9, 9), device_budgets=(8, None)))
    (8, 9)
    """
    if not view.workers:
        return (view.device,)
    budgets = view.device_budgets or (None,) * len(view.device_limits)
    return tuple(min(filter(None, (limit, budget)), default=None)
                 for limit, budget in zip(view.device_limits, budgets, strict=False))


def one_device_budget(view: ClusterView, options: SortOptions) -> int | None:
    """Bytes the one device of a sort may hold, or None where there is not one device
    (several workers, a scheduler that did not answer) or its memory is not known.

    >>> from distsort.cluster.view import ClusterView
    >>> one_device_budget(ClusterView.local(memory=16 * 2**30), SortOptions())
    4294967296
    >>> one_device_budget(ClusterView(workers=("a",), hosts=("h",), threads=(2,),
    ...                               device_limits=(8 * 10**9,)), SortOptions(gpu=True))
    8000000000
    """
    if options.gpu:
        devices = _gpu_limits(view)
    elif view.workers:
        devices = tuple(m and m // CPU_BUDGET_DIVISOR for m in view.memory_limits)
    else:
        devices = (view.memory and view.memory // CPU_BUDGET_DIVISOR,)
    if len(devices) != 1 or view.hosts == (None,):
        return None
    return _limit_of(options.device_memory_limit, devices)


def slot_budget(view: ClusterView, options: SortOptions) -> int | None:
    """Bytes one slot (a GPU, a CPU worker's thread) may hold, the smallest over the
    workers; None where not known.

    >>> from distsort.cluster.view import ClusterView
    >>> v = ClusterView(workers=("a", "b"), hosts=("h", "h"), threads=(2, 1),
    ...                 memory_limits=(8000, 4000))
    >>> slot_budget(v, SortOptions())  # a quarter of 8000 over 2 threads, of 4000 over 1
    1000
    """
    if options.gpu:
        devices = _gpu_limits(view)
    elif view.workers:
        devices = tuple(m and m // CPU_BUDGET_DIVISOR // max(1, t or 1)
                        for m, t in zip(view.memory_limits, view.threads, strict=True))
    else:
        devices = (view.memory and view.memory // CPU_BUDGET_DIVISOR // max(1, view.cores),)
    return _limit_of(options.device_memory_limit, devices)


def one_device_bytes(n: int, itemsize: int, options: SortOptions) -> int:
    """Device bytes a one-device sort of ``n`` keys of ``itemsize`` bytes holds at its
    peak: the input (held by the caller, or read whole by the one task), the gathered
    copy that is sorted, and the radix sort's buffers (``radix_extra_bytes``); the
    output chunks are slices of the sorted copy.

    >>> one_device_bytes(10, 4, SortOptions()), one_device_bytes(10, 4, SortOptions(in_place=True))
    (200, 120)
    >>> one_device_bytes(10, 4, SortOptions(value_bytes=8, positions=True))  # argsort
    640
    """
    element = itemsize + options.value_bytes
    return n * (_input_element(itemsize, options) + element) + radix_extra_bytes(
        n, itemsize, options.value_bytes, increasing_values=options.positions,
        in_place=options.in_place)


def _fits_one_device(n: int, itemsize: int, options: SortOptions, budget: int | None) -> bool:
    """Whether ``n`` elements, their sorted copy and the radix path's buffers fit."""
    return budget is not None and one_device_bytes(n, itemsize, options) <= usable_bytes(budget)


def _copy_fits_in_place(n: int, itemsize: int, options: SortOptions,
                        budget: int | None) -> bool:
    """Whether a plain CuPy array sorted here (``options.here``) and its copy fit the
    device, where the radix sort's buffers do not fit beside them: then the copy is
    sorted in place (the plan's local sort, ``plan_local``, is the bitonic kernels),
    not cut into a network of chunks on one device.

    >>> gpu = SortOptions(gpu=True, here=True, in_place=True)
    >>> _copy_fits_in_place(10, 4, gpu, 100), _copy_fits_in_place(10, 4, gpu, 50)
    (True, False)
    >>> _copy_fits_in_place(10, 4, gpu._replace(local="radix"), 100)  # radix asked for
    False
    """
    if not (options.gpu and options.here) or options.local == RADIX or budget is None:
        return False
    data = n * (_input_element(itemsize, options) + itemsize + options.value_bytes)
    return data <= usable_bytes(budget)


def _input_element(itemsize: int, options: SortOptions) -> int:
    """Bytes of an input element: the key's and its value's (argsort's positions are
    made by the sort)."""
    return itemsize + (0 if options.positions else options.value_bytes)


def resident_bytes(chunks: Sequence[int], element: int, view: ClusterView,
                   options: SortOptions) -> int:
    """Bytes of the input that stay on a GPU sort's devices for the whole sort, beside
    the sort's own copy: the chunks held by a worker (persisted: the caller keeps them),
    and on Dask's local schedulers the whole input (a plain array is the caller's).  A
    lazy input's chunks are made for the sort and freed once read: none.  CPU sorts:
    none (their budgets are a part of the memory for that).

    >>> from distsort.cluster.view import ClusterView
    >>> v = ClusterView(workers=("a",), hosts=("h",), owners=("a", None))
    >>> resident_bytes((10, 20), 4, v, SortOptions(gpu=True))
    40
    >>> resident_bytes((10, 20), 4, v, SortOptions())
    0
    """
    if not options.gpu:
        return 0
    if not view.workers:
        return sum(chunks) * element
    owners = view.owners if len(view.owners) == len(chunks) else (None,) * len(chunks)
    return sum(c for c, o in zip(chunks, owners, strict=True) if o is not None) * element


def coalesced_chunks(n: int, slots: int, element: int, budget: int | None,
                     held: int = 0) -> tuple:
    """The regular chunking of a coalesced input: one chunk per slot, smaller where it
    would not fit ``budget`` beside the slot's share of the data and ``held`` more
    bytes (its share of the input the caller keeps, and an input chunk a group sort
    reads in part) and ``memory.RESERVE``: :data:`GROUP_WORK` chunks (a group sort's
    copies beside the outputs of the pairs in flight).  Where nothing larger than one
    element fits, chunks of one element each: the caller keeps the input's own chunks.

    >>> coalesced_chunks(10**6, 2, 8, None)
    (500000, 500000)
    >>> coalesced_chunks(10**6, 2, 8, 25 * 10**6)  # 4 MB held, 6 chunks in 19.75 MB
    (411458, 411458, 177084)
    >>> len(coalesced_chunks(10**6, 2, 8, 10**7))  # 4 MB held, 5.5 MB for 6 chunks
    9
    >>> c = coalesced_chunks(10**6, 2, 8, 10**7, held=4 * 10**6)  # the input kept too
    >>> len(c), c[0]
    (32, 31250)
    """
    return regular_chunks(n, _coalesced_size(n, slots, element, budget, held))


def _coalesced_size(n: int, slots: int, element: int, budget: int | None, held: int) -> int:
    """The chunk size of :func:`coalesced_chunks` (at least 1)."""
    m = -(-n // max(1, slots))
    if budget is not None:
        room = usable_bytes(budget) - m * element - held
        m = min(m, room // (GROUP_WORK * max(1, element)))
    return max(1, m)


def cut_pieces(order: Sequence[int], chunks: Sequence[int],
               bounds: Sequence[tuple[int, int]]) -> tuple[tuple[tuple[int, int, int], ...], ...]:
    """The slices ``(chunk, start, stop)`` of the input chunks (of sizes ``chunks``,
    taken in the order ``order``) that make each range ``bounds`` (``(start, stop)``
    element offsets into that sequence); empty slices are left out.

    >>> cut_pieces((1, 0, 2), (3, 3, 3), ((0, 4), (4, 9)))
    (((1, 0, 3), (0, 0, 1)), ((0, 1, 3), (2, 0, 3)))
    """
    out: list[tuple[tuple[int, int, int], ...]] = []
    k, at = 0, 0  # the k-th chunk of ``order`` starts at element ``at``
    for start, stop in bounds:
        mine: list[tuple[int, int, int]] = []
        while k < len(order) and at < stop:
            i = order[k]
            lo, hi = max(start, at) - at, min(stop, at + chunks[i]) - at
            if hi > lo:
                mine.append((i, lo, hi))
            if at + chunks[i] <= stop:
                at += chunks[i]
                k += 1
            else:
                break
        out.append(tuple(mine))
    return tuple(out)


def fits_in_place(chunks: Sequence[int], element: int, budgets: Sequence[int | None],
                  resident: int = 0) -> bool:
    """Whether the network sorts ``chunks`` (elements of ``element`` bytes) in the
    devices' memory: each device's share of the data, of the ``resident`` bytes of the
    input that the caller keeps beside the sort's copy (:func:`resident_bytes`), and
    :func:`work_chunks` of the largest chunk (the outputs of the pairs in flight) fit
    its budget (bytes; None: unknown, so no).  Then the data stay on the devices,
    sorted in place, however much of the budget they take: out of core would move them
    through host memory (93 GiB on one 139 GiB H200 passed a worker's 126 GiB host
    limit).

    >>> fits_in_place((500,) * 50, 4, [120_000])  # 100 kB of data, 10 kB working
    True
    >>> fits_in_place((500,) * 50, 4, [120_000], resident=100_000)  # the input kept
    False
    >>> fits_in_place((25_000,), 4, [120_000])  # one chunk: no room for its output
    False
    """
    known = [b for b in budgets if b]
    if not budgets or len(known) != len(budgets) or not chunks:
        return False
    share = -(-(sum(chunks) * element + resident) // len(known))
    return all(share + work_chunks(len(chunks)) * max(chunks) * element <= usable_bytes(b)
               for b in known)


def work_chunks(count: int) -> int:
    """Chunk-sized buffers beside the chunks of a network of ``count`` chunks: the
    outputs of the pairs in flight (no more pairs than the chunks make), and one to
    spare (:data:`WORK_CHUNKS` from four chunks on).

    >>> [work_chunks(c) for c in (1, 2, 3, 4, 100)]
    [1, 3, 3, 5, 5]
    """
    return 1 + 2 * min(PAIRS_PER_WORKER, count // 2)


def _plan_out_of_core(chunks: tuple[int, ...], itemsize: int, view: ClusterView,
                      options: SortOptions) -> tuple[OutOfCore, tuple[int, ...]] | None:
    """An :class:`OutOfCore` and its regular chunking where the data outgrow the
    workers' device budgets, else None."""
    gpu = options.gpu
    engine = "gpu" if gpu else options.engine
    reported = view.device_budgets if (engine != "cpu" and view.device_budgets) else (None,)
    if engine == "auto":
        engine = "gpu" if any(reported) else "cpu"
    budgets: list[int | None] = (
        [int(options.device_memory_limit)] * max(1, len(view.hosts or [None]))
        if options.device_memory_limit else list(reported))
    element = itemsize + options.value_bytes
    n = sum(chunks)
    resident = resident_bytes(chunks, _input_element(itemsize, options), view, options)
    # On GPUs whose budgets are known, whatever the network cannot sort in them runs
    # out of core, however small: every byte of it is counted (``fits_in_place``).
    needed = (gpu and bool(budgets) and all(budgets)) or needs_out_of_core(n * element, budgets)
    forced = options.strategy == "out-of-core"
    if forced and not (budgets and all(budgets)):
        raise ValueError("distsort.strategy 'out-of-core' needs a device budget: set "
                         "distsort.device-memory-limit, or sort on dask-cuda workers")
    if not forced and (not needed or fits_in_place(chunks, element, budgets, resident)):
        return None
    budget = min(b for b in budgets if b)
    regular = normalize_chunks(chunks)
    if len(chunks) == 1 and element * n > budget * RUN_FRACTION:
        # One chunk (a plain array) too large for a run: cut, two chunks to a run.
        regular = regular_chunks(n, max(1, int(budget * RUN_FRACTION) // (2 * element)))
    plan = plan_out_of_core(regular, element, budget)
    many = len(view.hosts or []) > 1
    owners = (view.owners if regular == tuple(chunks) and len(view.owners) == len(regular)
              else (None,) * len(regular))
    perm = group_by_owner(owners) if many else None
    held = bool(gpu and view.placed and None not in owners
                and (view.value_owners is None or None not in view.value_owners))
    lengths = run_lengths(regular, plan.run_chunks)
    picked = n * element if gpu and options.value_bytes else 0  # keyed CuPy output
    merge = options.merge
    if merge == "auto" or len(lengths) <= 1:
        merge = choose_merge(lengths, element, budget, bytes_moved(plan, lengths, element),
                             workers=len(view.hosts or [None]), picked_bytes=picked)
    elif merge == "kway" and perm is not None:  # runs on several workers
        merge = "exchange"
    return OutOfCore(engine, budget, plan, perm, gpu, held, merge), regular


def shares_chunks(exchange: str, hosts: Sequence[str | None], gpu: bool) -> bool:
    """Whether GPU chunks are shared through CUDA IPC (``distsort.backends.share``): the
    Dask config value ``distsort.exchange`` (``exchange``) where it names one, else with
    several workers, all on one host."""
    if not gpu or exchange != "auto":
        return gpu and exchange == "ipc"
    return bool(hosts) and len(hosts) > 1 and None not in hosts and len(set(hosts)) == 1


def _group_room(room: int | None, chunk_bytes: int) -> int | None:
    """Bytes a slot's group sorts may count on (``placement.group_size``): ``room`` less
    the outputs of the slot's pairs in flight, whose merges may run beside a group sort
    (``None``: unbounded)."""
    return None if room is None else max(0, room - 2 * PAIRS_PER_WORKER * chunk_bytes)


#: The fewest elements a plain array is cut into chunks of: a budget that leaves room
#: for fewer beside the data would plan a network of thousands of tiny chunks.
MIN_CUT = 1024


def _no_room_message(nbytes: int, budget: int, held: int) -> str:
    from distsort.core.memory import format_bytes
    return (f"distsort: {format_bytes(nbytes)} of data do not fit a device budget of "
            f"{format_bytes(budget)} beside the {format_bytes(held)} of input the sort holds "
            "there; "
            "sort it out of core (a dask-cuda cluster, or "
            "dask.config.set({'distsort.device-memory-limit': ...}) on one GPU), sort a "
            "plain array in its own memory (distsort.sort(x, out=x)), or free device memory")


def _slot_room(chunks: Sequence[int], itemsize: int, view: ClusterView,
               options: SortOptions) -> tuple[int, int | None]:
    """``(held, room)``: bytes of the input a slot holds beside its share of the sort
    (its share of the input the caller keeps, and an input chunk made for the sort
    that a group sort reads in part), and the bytes of its budget left beside them
    (None: the budget is not known)."""
    n, slots, budget = sum(chunks), view.slots(options.gpu), slot_budget(view, options)
    ie = _input_element(itemsize, options)
    resident = resident_bytes(chunks, ie, view, options)
    held = -(-resident // max(1, slots)) + (
        0 if resident >= n * ie else max(chunks, default=0) * ie)
    return held, None if budget is None else max(0, usable_bytes(budget) - held)


def _network(chunks: tuple[int, ...], itemsize: int, view: ClusterView, options: SortOptions,
             window: int) -> SortPlan:
    """The network's plan: coalesced where the input has too many chunks (or one too
    large for a slot), else on its own chunking made regular."""
    gpu, element = options.gpu, itemsize + options.value_bytes
    slots, budget = view.slots(gpu), slot_budget(view, options)
    n, regular = sum(chunks), normalize_chunks(chunks)
    fixed = options.group
    grouped = view.workers or gpu  # the local schedulers' CPU cores run pairs at once
    share = shares_chunks(options.exchange, view.hosts or (), gpu)
    owners = (list(view.owners) if options.placement == "auto"
              and len(view.owners) == len(chunks) else [None] * len(chunks))
    # Beside a slot's share of the data: its share of the input the caller keeps, and
    # an input chunk made for the sort that a group sort reads in part (its rest is
    # held for the next; a kept chunk is counted once, as the caller's).
    held, room = _slot_room(chunks, itemsize, view, options)
    # One chunk (a plain array) larger than a group sort fits is cut; many small ones
    # are coalesced.
    too_large = len(chunks) == 1 and budget is not None and room is not None and (
        (1 + GROUP_COPIES) * n * element > room)
    # Only small chunks are coalesced: larger ones, which the user or the command chose
    # to fit the workers' memory (a compare-split holds several at once), are kept.
    small = budget is None or (
        (1 + GROUP_COPIES) * COALESCE_PER_SLOT * regular[0] * element <= budget)
    size = (_coalesced_size(n, slots, element, budget, held)
            if too_large or (small and len(regular) > slots * COALESCE_PER_SLOT) else 0)
    if too_large and size < min(n, MIN_CUT):
        if gpu and budget is not None:  # a device's memory is a hard bound
            raise MemoryError(_no_room_message(n * element, budget, held))
        size = -(-n // (slots * COALESCE_PER_SLOT))  # a CPU's budget is a share of RAM
    if too_large or (size and size >= regular[0]):
        # Coalesced, unless beside the data held only chunks smaller than the input's
        # own would fit: then the network runs on the input's chunks, sorted in place.
        out = regular_chunks(n, size)
        group = (int(fixed) if fixed != "auto" else
                 group_size(len(out), slots, out[0] * element, _group_room(room, out[0] * element))
                 if grouped else 1)
        order = placement(owners) if view.workers else tuple(range(len(chunks)))
        ends = [min(n, b * out[0]) for b in range(len(out) + 1)]
        per_position = cut_pieces(order, chunks, tuple(zip(ends[:-1], ends[1:], strict=True)))
        if fixed == "auto" and view.workers:
            group = local_group([owners[p[0][0]] if p else None for p in per_position], group)
        pieces = tuple(sum(per_position[lo:hi], ()) for lo, hi in group_bounds(len(out), group))
        return SortPlan("network", out, pieces, None, group, window, share)
    c = len(regular)
    if fixed != "auto":
        group = int(fixed)
    elif grouped and c > 1 and view.hosts != (None,):
        group = group_size(c, slots, regular[0] * element,
                           _group_room(room, regular[0] * element))
    else:
        group = 1
    if not view.workers or c == 1:
        return SortPlan("network", regular, None, tuple(range(c)), group, window, share)
    if regular != tuple(chunks):  # rechunked: the new chunks are held nowhere yet
        owners = [None] * c
    align = max(group, floor_pow2(c // len(view.workers)))  # whole blocks of a worker's
    perm = placement(owners, align, short_last=regular[-1] < regular[0])
    if fixed == "auto":  # a group sort should move no chunk between workers
        group = local_group([owners[i] for i in perm], group)
    return SortPlan("network", regular, None, perm, group, window, share)


def plan_sort(chunks: Sequence[int], itemsize: int, view: ClusterView,
              options: SortOptions | None = None) -> SortPlan:
    """The :class:`SortPlan` of a 1-D sort of an input chunked as ``chunks`` (any
    chunking), keys of ``itemsize`` bytes, on ``view`` (``distsort.cluster.view``).

    >>> import dataclasses
    >>> from distsort.cluster.view import ClusterView
    >>> two = ClusterView(workers=("a", "b"), hosts=("h", "h"), threads=(1, 1),
    ...                   memory_limits=(2**30, 2**30), owners=("a", "b") * 4)
    >>> p = plan_sort((100,) * 8, 8, two)
    >>> p.strategy, p.perm, p.group
    ('network', (0, 2, 4, 6, 1, 3, 5, 7), 4)
    >>> p = plan_sort((10,) * 1000, 8, dataclasses.replace(two, owners=(None,) * 1000))
    >>> p.strategy, p.chunks, p.group, len(p.pieces[0])
    ('network', (5000, 5000), 1, 500)
    """
    chunks = tuple(map(int, chunks))
    options = SortOptions() if options is None else options
    check_options(options)
    workers = len(view.hosts or ()) if view.distributed else view.cores
    window = PAIRS_PER_WORKER * max(1, workers)
    planned = _plan_out_of_core(chunks, itemsize, view, options)
    if planned is not None:  # the host runs' engine sorts with its own buffers
        ooc, regular = planned
        plan = SortPlan("out-of-core", regular, None, None, 1, window, False, RADIX, ooc)
        return _decided(plan, chunks, itemsize, options, None)
    kway = _kway(chunks, itemsize, view, options)
    if kway is not None:
        return kway
    n = sum(chunks)
    budget = one_device_budget(view, options)
    one = options.strategy == "one-device" or (
        options.strategy == "auto" and (_fits_one_device(n, itemsize, options, budget)
                                        or _copy_fits_in_place(n, itemsize, options, budget)))
    if one:
        out = normalize_chunks(chunks)
        if len(out) > view.slots(options.gpu) * COALESCE_PER_SLOT:  # tiny chunks out too
            out = coalesced_chunks(n, view.slots(options.gpu), itemsize + options.value_bytes,
                                   None)
        every = zip(range(len(chunks)), itertools.repeat(0), chunks)  # each chunk whole
        whole = tuple(p for p in every if p[2]) if 0 in chunks else tuple(every)
        plan = SortPlan("one-device", out, (whole or ((0, 0, 0),),), None, len(out), window)
        data = n * (_input_element(itemsize, options) + itemsize + options.value_bytes)
        room = None if budget is None else usable_bytes(budget) - data
        return _decided(plan, chunks, itemsize, options, room)
    exchange = _exchange(chunks, itemsize, view, options, window)
    if exchange is not None:
        return _decided(exchange, chunks, itemsize, options, None)
    plan = _network(chunks, itemsize, view, options, window)
    room = _slot_room(chunks, itemsize, view, options)[1]
    if room is not None:  # beside the slot's share of the data, a task's own copy
        element = itemsize + options.value_bytes
        slots = view.slots(options.gpu)
        room -= -(-n * element // max(1, slots)) + plan.group * plan.chunks[0] * element
    return _decided(plan, chunks, itemsize, options, room)


def _kway(chunks: tuple[int, ...], itemsize: int, view: ClusterView,
          options: SortOptions) -> SortPlan | None:
    """The one-host k-way plan (``distsort.plan.onehost``) where it runs, else None:
    asked for, or on ``auto``, CPU keys (with values or positions, but not
    ``stable=True`` values, and not a plain argsort) held by this process (Dask's local
    schedulers, a plain array here) with several cores, at least
    :data:`~distsort.plan.onehost.KWAY_MIN` elements and room in its budget for the
    input, the runs and the output.  ``pieces``: each run's slices of the input
    chunks; ``eager``: a plain array here, sorted at once by threads.

    >>> from distsort.cluster.view import ClusterView
    >>> p = _kway((6, 0, 4), 4, ClusterView.local(cores=2), SortOptions(strategy="kway"))
    >>> p.strategy, p.chunks, p.pieces
    ('kway', (5, 5), (((0, 0, 5),), ((0, 5, 6), (2, 0, 4))))
    """
    n = sum(chunks)
    if options.strategy not in ("auto", "kway") or n == 0:
        return None
    if options.gpu or options.stable or view.workers:
        if options.strategy == "kway":
            raise ValueError("distsort.strategy='kway' sorts CPU keys, or keys with values "
                             "or positions (stable=False), in one process (Dask's local "
                             "schedulers, or a plain NumPy array)")
        return None
    if options.here and (options.value_bytes or options.positions):
        return None  # a plain argsort: one task, at once
    if options.strategy == "auto":
        budget = one_device_budget(view, options)
        if view.cores <= 1 or n < KWAY_MIN or not kway_fits(
                n, itemsize, None if budget is None else usable_bytes(budget)):
            return None
    runs = kway_runs(n, view.cores)
    pieces = cut_pieces(tuple(range(len(chunks))), chunks, run_bounds(n, runs))
    out = kway_chunks(normalize_chunks(chunks), view.cores)
    plan = SortPlan("kway", out, pieces, None, 1, max(1, view.cores))
    return _decided(plan, chunks, itemsize, options, None)._replace(eager=options.here)


def _exchange(chunks: tuple[int, ...], itemsize: int, view: ClusterView, options: SortOptions,
              window: int) -> SortPlan | None:
    """The plan of one exchange between workers (``distsort.plan.exchange``) where the
    options allow it and it serves (``distsort.strategy: exchange`` forces it wherever
    two workers, or cores on Dask's local schedulers, hold chunks), else None.  Its
    ``pieces`` are each run's input chunks, whole; ``group`` the number of runs.

    CuPy chunks (``options.gpu``): runs and merges on each worker's GPU, within its
    device limit (:func:`_gpu_limits`) beside the input it keeps and the radix sort's
    buffers (none where the local sort is in place).

    >>> import dataclasses
    >>> from distsort.cluster.view import ClusterView
    >>> two = ClusterView(workers=("a", "b"), hosts=("h", "h"), threads=(1, 1),
    ...                   device_limits=(10**9, 10**9), owners=("a", "b") * 4)
    >>> _exchange((1000,) * 8, 4, two, SortOptions(gpu=True), 4).group
    2
    >>> tight = dataclasses.replace(two, device_limits=(50_000, 50_000))  # 80 kB at the peak
    >>> _exchange((1000,) * 8, 4, tight, SortOptions(gpu=True), 4) is None
    True
    """
    if options.strategy not in ("auto", "exchange"):
        return None
    forced = options.strategy == "exchange"
    workers: tuple[Hashable, ...] = view.workers or (tuple(range(view.cores)) if forced else ())
    owners = view.owners if len(view.owners) == len(chunks) else (None,) * len(chunks)
    budgets: tuple[int | None, ...]
    if options.device_memory_limit:
        budgets = (int(options.device_memory_limit),) * len(workers)
    elif options.gpu:
        budgets = _gpu_limits(view) if view.workers else ()
    else:
        limits = view.memory_limits or (None,) * len(workers)
        budgets = tuple(m and m // CPU_BUDGET_DIVISOR for m in limits)
    if len(budgets) != len(workers):  # not known for every worker: no room
        budgets = (None,) * len(workers)
    resident = scratch = 0
    if options.gpu:  # the input's chunks stay while the run sorts, in the device's memory
        resident = _input_element(itemsize, options)
        if options.local != IN_PLACE:  # a merge's values (positions too) are in no order
            scratch = radix_extra_bytes(1, itemsize, options.value_bytes)
    planned = plan_exchange(chunks, itemsize + options.value_bytes, workers, owners, budgets,
                            forced, resident, options.gpu, scratch)
    if planned is None:
        return None
    runs, out = planned
    pieces = tuple(tuple((i, 0, chunks[i]) for i in run) for run in runs)
    return SortPlan("exchange", out, pieces, None, len(runs), window)


def _decided(plan: SortPlan, chunks: tuple[int, ...], itemsize: int, options: SortOptions,
             room: int | None) -> SortPlan:
    """``plan`` with what it decides beyond the strategy: the engine, each task's local
    sort (``distsort.plan.localsort.plan_local``: the radix sort where its buffers for
    the largest task fit ``room``, the bytes a task may allocate beside the data),
    whether one task sorts one whole chunk (and at once, where the input is a plain
    array here: ``options.here``), and whether equal keys keep their input order in
    it (``options.stable``)."""
    task = sum(chunks) if plan.strategy == "one-device" else plan.group * plan.chunks[0]
    local = plan_local(options.local, options.gpu, task, itemsize, options.value_bytes,
                       options.positions, options.in_place, room)
    one_task = (plan.strategy == "one-device" and len(chunks) == 1 and len(plan.chunks) == 1
                and options.local != IN_PLACE)
    stable = (options.stable and plan.sorted_as_one
              and (not options.gpu or local != IN_PLACE))
    return plan._replace(local=local, engine="gpu" if options.gpu else "cpu",
                         one_task=one_task, eager=one_task and options.here, stable=stable)

