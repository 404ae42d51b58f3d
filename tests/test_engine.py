"""``distsort.plan.engine.choose_engine`` on tuples of integers: the command's engine
(the CPU, the GPU or the disk; threads of its process or a cluster), no machine read."""
import itertools

import pytest

from distsort.plan.engine import (ENGINES, IN_PROCESS_GPU_COPIES, IN_PROCESS_SHARE, Engine,
                                  Machine, Request, choose_engine, disk_budget, disk_sort_plan,
                                  fits_in_process, use_gpu)
from distsort.plan.outofcore import IN_MEMORY_COPIES, MEMORY_SHARE, plan_disk_sort
from distsort.plan.sortplan import usable_bytes

GB = 10**9


def test_device_option():
    assert [use_gpu(d, p) for d in ("gpu", "auto", "cpu") for p in (False, True)] == [
        True, True, False, True, False, False]


def test_disk_where_the_data_outgrow_the_host():
    host = Machine(available=16 * GB)
    edge = 16 * GB // IN_MEMORY_COPIES  # bytes that fit exactly
    assert disk_budget(edge, host) == 0
    assert disk_budget(edge + 1, host) == int(16 * GB * MEMORY_SHARE)
    # --host-memory-limit: all of it, whatever is available
    assert disk_budget(edge + 1, host._replace(host_limit=GB)) == GB
    assert disk_budget(GB // 3, host._replace(host_limit=GB)) == 0
    assert disk_budget(0, Machine(available=0)) == 0


@pytest.mark.parametrize("request_", [Request(gpu=True), Request(cluster=True),
                                      Request(disk=False)])
def test_disk_only_in_process_on_the_cpu_into_npy(request_):
    assert disk_budget(100 * GB, Machine(available=GB), request_) == 0
    assert choose_engine(10**10, 10, 10, Machine(available=GB), request_).name != "disk"


def test_in_process_on_the_cpu():
    n, per = 10**6, 12
    at = Machine(available=n * per * IN_PROCESS_SHARE)
    assert fits_in_process(n, 8, per, at)
    assert not fits_in_process(n + 1, 8, per, at)
    assert not fits_in_process(n, 8, per, at, Request(cluster=True))
    # a device limit is taken by a cluster's workers only
    assert not fits_in_process(n, 8, per, at._replace(device_limit=GB))


def test_in_process_on_one_gpu():
    gpu, n = Request(gpu=True), 10**9
    card = Machine(available=10**12, gpu_memory=100 * GB)
    edge = usable_bytes(100 * GB) // (8 * IN_PROCESS_GPU_COPIES)
    assert fits_in_process(edge, 8, 8, card, gpu)
    assert not fits_in_process(edge + 1, 8, 8, card, gpu)
    assert not fits_in_process(10, 8, 8, card._replace(gpu_memory=0), gpu)  # no GPU 0
    assert not fits_in_process(n, 8, 8, card._replace(available=2 * 8 * n - 1), gpu)
    # out of core on GPU 0: a budget it holds, whatever the input's size
    assert fits_in_process(10 * n, 8, 8, card._replace(device_limit=8 * GB), gpu)
    assert not fits_in_process(n, 8, 8, card._replace(device_limit=99 * GB), gpu)


def test_choices_on_a_grid():
    """Every engine named, the disk in this process, and the decision is the disk's
    where it gives a budget, else the in-process test's."""
    seen = set()
    grid = itertools.product((0, 10**3, 10**9), (4, 16), (GB, 64 * GB),
                             (0, 80 * GB), (0, GB), (0, 4 * GB),
                             (False, True), (False, True), (False, True))
    for n, size, avail, card, host, dev, gpu, cluster, disk in grid:
        m, r = Machine(avail, card, host, dev), Request(gpu, cluster, disk)
        e = choose_engine(n, size, 2 * size, m, r)
        seen.add(e.name)
        budget = disk_budget(n * size, m, r)
        assert e == (Engine("disk", True, budget) if budget else
                     Engine("gpu" if gpu else "cpu", fits_in_process(n, size, 2 * size, m, r)))
    assert seen == set(ENGINES)


def test_the_disk_plan_is_a_sort_plan():
    disk = plan_disk_sort(10_000, 12, 30_000, tasks=3, kept_bytes=4)
    plan = disk_sort_plan(disk)
    assert plan.engine == "disk" and plan.disk is disk and plan.strategy == "out-of-core"
    assert sum(plan.chunks) == 10_000 and plan.chunks == disk.runs
