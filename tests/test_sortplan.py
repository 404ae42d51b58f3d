"""``distsort.plan.sortplan.plan_sort`` on tuples, for every strategy (as Dask tests
``plan_rechunk``): no cluster, no data."""
import dataclasses
import itertools

import numpy as np
import pytest

from distsort.plan.placement import group_bounds
from distsort.plan.options import SortOptions
from distsort.plan.sortplan import (COALESCE_PER_SLOT, coalesced_chunks, cut_pieces,
                                    one_device_budget, plan_sort, slot_budget)
from distsort.plan.network import is_regular, regular_chunks
from distsort.cluster.view import ClusterView

GiB = 2**30


def local(chunks, cores=2, memory=16 * GiB, device=None):
    return ClusterView.local(cores=cores, memory=memory, device=device, chunks=len(chunks))


def workers(count, owners, threads=1, memory=4 * GiB, device=None, budget=None):
    names = tuple(f"w{i}" for i in range(count))
    return ClusterView(workers=names, hosts=("h",) * count, threads=(threads,) * count,
                       memory_limits=(memory,) * count, device_limits=(device,) * count,
                       device_budgets=(budget,) * count, owners=tuple(owners))


def covered(plan, chunks):
    """Every input element, read once by the plan's pieces, in the pieces' order."""
    seen = [(i, e) for group in plan.pieces for i, a, b in group for e in range(a, b)]
    assert sorted(seen) == [(i, e) for i, c in enumerate(chunks) for e in range(c)]
    sizes = [sum(b - a for _, a, b in group) for group in plan.pieces]
    bounds = group_bounds(len(plan.chunks), plan.group) if plan.strategy == "network" \
        else ((0, len(plan.chunks)),)
    assert sizes == [sum(plan.chunks[lo:hi]) for lo, hi in bounds]


# ---------------------------------------------------------------- one device
@pytest.mark.parametrize("chunks", [(1000,), (300, 300, 300, 100), (0, 5, 0, 7), (0,)])
def test_one_device_when_everything_fits(chunks):
    p = plan_sort(chunks, 8, local(chunks))
    assert p.strategy == "one-device" and p.perm is None and p.out_of_core is None
    assert is_regular(p.chunks) and sum(p.chunks) == sum(chunks)
    covered(p, chunks)


def test_one_device_keeps_the_inputs_regular_chunking_but_coalesces_tiny_chunks():
    assert plan_sort((250,) * 4, 4, local((1,) * 4)).chunks == (250,) * 4
    tiny = (10,) * 10_000  # 2 cores: more than 16 chunks are coalesced, one per core
    p = plan_sort(tiny, 8, local(tiny))
    assert p.strategy == "one-device" and p.chunks == (50_000, 50_000)
    covered(p, tiny)


def test_one_device_needs_room_for_the_radix_buffers():
    n = 10**6
    need = 2 * n * 4 + 3 * n * 4  # the gathered and sorted copies, the radix buffers
    # one core (several: the k-way merge of runs sorted at once, tests/test_onehost.py)
    fits = local((n,), cores=1, memory=int(need / 0.95) * 4 + 64)  # a quarter: the budget
    assert plan_sort((n,), 4, fits).strategy == "one-device"
    short = local((n,), cores=1, memory=need * 3)
    assert plan_sort((n,), 4, short).strategy == "network"
    # argsort: int64 positions and the permutation's buffers
    assert plan_sort((n,), 4, fits, SortOptions(value_bytes=8, positions=True)).strategy \
        == "network"


def test_one_device_on_one_gpu_worker_but_not_on_two():
    owners = ("w0",) * 8
    one = workers(1, owners, device=80 * 10**9)
    p = plan_sort((2**24,) * 8, 4, one, SortOptions(gpu=True))
    assert p.strategy == "one-device" and len(p.pieces) == 1
    two = workers(2, ("w0", "w1") * 4, device=80 * 10**9)
    # two GPU workers with room: one exchange between them (``test_exchange.py``)
    assert plan_sort((2**24,) * 8, 4, two, SortOptions(gpu=True)).strategy == "exchange"
    assert plan_sort((2**24,) * 8, 4, two, SortOptions(gpu=True, strategy="network")
                     ).strategy == "network"
    # A GPU whose memory is not known: never sorted as one.
    assert plan_sort((100,) * 8, 4, local((100,) * 8), SortOptions(gpu=True)).strategy \
        == "network"


def test_budgets():
    v = workers(2, (), threads=4, memory=16 * GiB, device=8 * GiB)
    assert one_device_budget(v, SortOptions()) is None  # two workers
    assert slot_budget(v, SortOptions()) == GiB  # a quarter over 4 threads
    assert slot_budget(v, SortOptions(gpu=True)) == 8 * GiB
    assert slot_budget(v, SortOptions(gpu=True, device_memory_limit=10**6)) == 10**6
    assert one_device_budget(dataclasses.replace(v, workers=("a",), hosts=(None,)),
                             SortOptions()) is None  # the scheduler did not answer


# ---------------------------------------------------------------- network
def test_network_follows_the_owners_and_groups_within_a_worker():
    owners = ("w0", "w1") * 4
    p = plan_sort((100,) * 8, 8, workers(2, owners))
    assert (p.strategy, p.pieces, p.perm, p.group) == ("network", None,
                                                        (0, 2, 4, 6, 1, 3, 5, 7), 4)
    assert p.window == 4 and p.rechunk
    p = plan_sort((100,) * 8, 8, workers(2, owners), SortOptions(group=1, placement="identity"))
    assert (p.perm, p.group) == (tuple(range(8)), 1)


def test_network_of_a_ragged_input_is_rechunked_with_no_owners():
    p = plan_sort((5, 1, 7, 3), 4, workers(2, ("w0", "w1", "w0", "w1")))
    assert p.chunks == (4, 4, 4, 4) and p.perm == (0, 1, 2, 3)


@pytest.mark.parametrize("count", [40, 100, 1000, 10_000])
def test_many_chunks_are_coalesced_by_owner(count):
    rng = np.random.default_rng(count)
    chunks = tuple(int(c) for c in rng.integers(0, 20, size=count))
    owners = tuple(rng.choice(["w0", "w1", None], size=count))
    view = workers(2, owners)
    p = plan_sort(chunks, 8, view)
    assert p.strategy == "network" and not p.rechunk
    assert len(p.chunks) <= 2 * COALESCE_PER_SLOT  # positions follow the slots, not the input
    covered(p, chunks)
    # The chunks of one worker are read together: owners appear in runs.
    read = [owners[i] for group in p.pieces for i, _, _ in group]
    assert len([k for k, _ in itertools.groupby(read)]) <= 3


def test_a_single_chunk_too_large_for_a_slot_is_cut():
    n = 10**6
    gpu = SortOptions(gpu=True)
    # the caller's array, the slot's sorted share and a group sort of a part of it fit
    p = plan_sort((n,), 4, local((n,), device=4 * 4 * n), gpu)
    assert p.strategy == "network" and len(p.chunks) >= 4 and p.group >= 1
    assert min(p.chunks) >= 4096
    covered(p, (n,))
    big = local((n,), device=10 * 4 * n)  # fits three times: one chunk, not cut
    assert plan_sort((n,), 4, big, SortOptions(gpu=True, strategy="network")).chunks == (n,)


@pytest.mark.parametrize("n", [10**5, 10**6])
def test_a_plain_array_with_no_room_beside_it_is_refused_not_cut_into_crumbs(n):
    """A budget that leaves no room for the sort's copy beside the caller's array (a
    network of one-element chunks would be planned): MemoryError pointing to out of core;
    a little more room and the array is cut into chunks of at least MIN_CUT."""
    from distsort.plan.sortplan import MIN_CUT
    gpu = SortOptions(gpu=True)
    with pytest.raises(MemoryError, match="out of core"):
        plan_sort((n,), 8, local((n,), device=8 * n + 8 * n // 4), gpu)
    p = plan_sort((n,), 8, local((n,), device=8 * n * 3), gpu)
    assert p.strategy == "network" and len(p.chunks) > 1 and min(p.chunks[:-1]) >= MIN_CUT
    covered(p, (n,))


def test_coalesced_chunks_and_cut_pieces():
    assert coalesced_chunks(10, 4, 1, None) == (3, 3, 3, 1)
    assert coalesced_chunks(0, 4, 1, None) == (0,)
    assert cut_pieces((0,), (5,), ((0, 2), (2, 5))) == (((0, 0, 2),), ((0, 2, 5),))
    assert cut_pieces((2, 0, 1), (1, 0, 4), ((0, 5),)) == (((2, 0, 4), (0, 0, 1)),)


# ---------------------------------------------------------------- out of core
def test_out_of_core_past_the_device_budgets():
    chunks = (2**28,) * 16
    owners = ("w0", "w1") * 8
    p = plan_sort(chunks, 4, workers(2, owners, device=8 * 10**9, budget=2 * 10**9),
                  SortOptions(gpu=True))
    assert p.strategy == "out-of-core" and p.pieces is None and p.rechunk
    ooc = p.out_of_core
    assert ooc.engine == "gpu" and ooc.budget == 2 * 10**9 and ooc.stage
    assert ooc.perm[:8] == (0, 2, 4, 6, 8, 10, 12, 14)
    assert ooc.plan.run_chunks == 1 and not ooc.held  # the plugin is not registered
    placed = dataclasses.replace(workers(2, owners, budget=2 * 10**9), placed=True)
    assert plan_sort(chunks, 4, placed, SortOptions(gpu=True)).out_of_core.held


def test_out_of_core_engine_and_config_budget():
    chunks = (1000,) * 10
    view = local(chunks)
    assert plan_sort(chunks, 4, view).strategy == "one-device"
    p = plan_sort(chunks, 4, view, SortOptions(device_memory_limit=10_000))
    assert (p.strategy, p.out_of_core.engine, p.out_of_core.perm) == ("out-of-core", "cpu", None)
    one = (10**6,)  # one chunk larger than a run: cut, two chunks to a run
    p = plan_sort(one, 4, local(one), SortOptions(device_memory_limit=10**6))
    assert p.strategy == "out-of-core" and len(p.chunks) > 1 and p.out_of_core.plan.run_chunks == 2


def test_out_of_core_strategy_is_forced_where_the_data_would_fit():
    """``distsort.strategy="out-of-core"`` runs out of core even where the data fit the
    budget in place (it used to take the network, which on a GPU then refused a budget
    this small for one chunk); it needs a budget to size its runs."""
    chunks = (6,)
    view = local(chunks)
    options = SortOptions(gpu=True, value_bytes=8, positions=True, device_memory_limit=170)
    p = plan_sort(chunks, 1, view, options._replace(strategy="out-of-core"))
    assert p.strategy == "out-of-core" and p.out_of_core.engine == "gpu"
    with pytest.raises(ValueError, match="needs a device budget"):
        plan_sort(chunks, 1, view, SortOptions(strategy="out-of-core"))


def test_strategy_setting():
    chunks = (100,) * 4
    assert plan_sort(chunks, 8, local(chunks), SortOptions(strategy="network")).strategy \
        == "network"
    assert plan_sort(chunks, 8, local(chunks, memory=1),
                     SortOptions(strategy="one-device")).strategy == "one-device"
    with pytest.raises(ValueError, match="distsort.strategy"):
        plan_sort(chunks, 8, local(chunks), SortOptions(strategy="fast"))


def test_chunks_sized_for_the_workers_are_not_coalesced():
    """20 chunks of 8 MiB on two CPU workers of 300 MB (the command's --chunk-size for
    them) stay as they are: coalesced into one per slot, a compare-split's chunks would
    not fit a worker.  Chunks of 8 KiB are coalesced."""
    from distsort.plan.network import regular_chunks
    from distsort.plan.options import SortOptions
    from distsort.plan.sortplan import plan_sort
    from distsort.cluster.view import ClusterView

    def plan(chunk):
        chunks = regular_chunks(20 * chunk, chunk)
        view = ClusterView(workers=("a", "b"), hosts=("h", "h"), threads=(1, 1),
                           memory_limits=(300_000_000,) * 2, device_limits=(None, None),
                           device_budgets=(None, None), owners=(None,) * len(chunks))
        return plan_sort(chunks, 8, view, SortOptions()).chunks

    assert plan(2**20) == (2**20,) * 20
    assert len(plan(2**10)) < 20


def test_one_gpu_keeps_room_beside_the_data_it_holds():
    """On one GPU, the chunks the network works on fit beside the data held there (the
    input the caller keeps as well as the sort's copy; ``tests/test_device_bytes.py``
    counts every buffer): 32 GiB of float32 in 16 persisted chunks under a 125 GiB
    budget are sorted as one where the radix sort takes one buffer beside the keys,
    else by the network in chunks of which ``WORK_CHUNKS`` fit beside both copies;
    100 GB made for the sort in 50 chunks are sorted in memory; 100 GB kept by the
    caller leave no room for a sorted copy: out of core."""
    from distsort.plan.sortplan import WORK_CHUNKS
    gib = 2**30

    def plan(total, chunks, device, spill, persisted=True, **options):
        n = total // 4
        view = ClusterView(workers=("a",), hosts=("h",), threads=(1,),
                           device_limits=(device,), device_budgets=(spill,),
                           owners=("a" if persisted else None,) * chunks)
        return plan_sort(regular_chunks(n, -(-n // chunks)), 4, view,
                         SortOptions(gpu=True, **options))

    assert plan(32 * gib, 16, 125 * gib, None, in_place=True).strategy == "one-device"
    p = plan(32 * gib, 16, 125 * gib, None)
    assert p.strategy == "network" and p.out_of_core is None
    assert 2 * 32 * gib + WORK_CHUNKS * 4 * p.chunks[0] <= 0.95 * 125 * gib
    for device, spill in ((139 * gib, None), (125 * gib, 125 * gib)):
        p = plan(10**11, 50, device, spill, persisted=False, in_place=True)
        assert p.strategy == "network" and p.out_of_core is None
        assert 10**11 + WORK_CHUNKS * 4 * p.chunks[0] <= 0.95 * device
    assert plan(10**11, 50, 125 * gib, 125 * gib).strategy == "out-of-core"
    # past dask-cuda's default limit (0.65 of the device) the data go out of core
    assert plan(10**11, 50, 90 * gib, 90 * gib, persisted=False).strategy == "out-of-core"


def test_the_plan_says_how_its_tasks_run():
    """Beside the strategy, the plan names the backend, each task's local sort, whether
    one task sorts one whole chunk and runs at once (a plain array here), and whether
    equal keys keep their order in the one task that sorts every chunk."""
    local = ClusterView.local(cores=2, memory=16 * 2**30, chunks=1)
    one = plan_sort((1000,), 8, local, SortOptions(here=True))
    assert (one.backend, one.local, one.one_task, one.eager) == ("numpy", "radix", True, True)
    assert not plan_sort((1000,), 8, local, SortOptions()).eager  # a Dask array: a graph
    bitonic = plan_sort((1000,), 8, local, SortOptions(here=True, local="bitonic"))
    assert (bitonic.local, bitonic.one_task, bitonic.eager) == ("bitonic", False, False)
    assert not plan_sort((500, 500), 8, local, SortOptions(here=True)).one_task
    stable = SortOptions(value_bytes=12, stable=True)
    assert plan_sort((500, 500), 8, local, stable).stable
    assert not plan_sort((500, 500), 8, local, stable._replace(strategy="network")).stable
    gpu = ClusterView(workers=("a", "b"), hosts=("h", "h"), threads=(1, 1),
                      device_limits=(8 * 10**9,) * 2, owners=("a", "b"))
    network = SortOptions(gpu=True, strategy="network")
    shared = plan_sort((10**6, 10**6), 4, gpu, network)
    assert (shared.strategy, shared.backend, shared.engine) == ("network", "cuda-ipc", "gpu")
    assert plan_sort((10**6, 10**6), 4, gpu, network._replace(exchange="comm")).backend == "cupy"
    exchanged = plan_sort((10**6, 10**6), 4, gpu, SortOptions(gpu=True))
    assert (exchanged.strategy, exchanged.backend, exchanged.engine) == (
        "exchange", "device-runs", "gpu")
    ooc = plan_sort((100,) * 8, 8, local, SortOptions(device_memory_limit=4000, engine="cpu"))
    assert (ooc.strategy, ooc.backend) == ("out-of-core", "host-runs")
