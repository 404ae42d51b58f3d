"""The device memory of a GPU sort on one worker, counted buffer by buffer.

``peak`` replays a :class:`~distsort.plan.sortplan.SortPlan` step by step as the CuPy
backend runs it on one worker (``distsort.graph.layers``: group sorts, prepares, the
network's rounds and regroups) and counts every buffer each step allocates and frees:
the input's chunks (kept by the caller, or made for the sort and freed once read),
a group's gathered copy, the radix sort's buffers (taken only where the worker's
budget has room for them, as ``local_sort.choose_local`` does), the chunks a group
sort copies out, and the two outputs of each of the pairs in flight.  The plans of
``plan_sort`` must fit: on tuples, no cluster, no data.
"""
import collections
import functools

import numpy as np
import pytest

from distsort.backends.gpu.local_sort import radix_extra_bytes
from distsort.plan.placement import group_bounds
from distsort.plan.network import group_steps, plan_network, regular_chunks, spread_order
from distsort.plan.sortplan import (SortOptions, one_device_bytes, plan_sort, resident_bytes,
                                    usable_bytes)
from distsort.cluster.view import ClusterView

GiB = 2**30
#: One H200 as the benchmark sees it (``nvidia-smi``: 143771 MiB).
H200 = 143771 * 2**20


class Device:
    """Live bytes on one device, and the most they reached."""

    def __init__(self, budget):
        self.budget, self.live, self.peak = budget, 0, 0

    def alloc(self, nbytes):
        self.live += nbytes
        self.peak = max(self.peak, self.live)

    def free(self, nbytes):
        self.live -= nbytes
        assert self.live >= 0

    def sort(self, extra):
        """A local sort: the radix path's buffers where the budget has room, else in
        place (nothing)."""
        if self.live + extra <= self.budget:
            self.alloc(extra)
            self.free(extra)


class Inputs:
    """The input's chunks: all held from the start where the caller keeps them, else
    each made when first read and freed after its last reader."""

    def __init__(self, device, sizes, element, resident, readers):
        self.device, self.sizes, self.element = device, sizes, element
        self.resident, self.left = resident, collections.Counter(readers)
        self.made = set()
        if resident:
            device.alloc(sum(sizes) * element)

    def read(self, chunk):
        if not self.resident and chunk not in self.made:
            self.made.add(chunk)
            self.device.alloc(self.sizes[chunk] * self.element)

    def done(self, chunk):
        self.left[chunk] -= 1
        if not self.resident and not self.left[chunk]:
            self.device.free(self.sizes[chunk] * self.element)


def peak(plan, in_chunks, itemsize, options, resident, budget):
    """The most bytes the device holds while ``plan`` sorts ``in_chunks`` (keys of
    ``itemsize`` bytes) on one worker whose budget is ``budget``."""
    dev = Device(budget)
    element = itemsize + options.value_bytes

    # The network's group sorts run beside the merges of the pairs in flight of the
    # groups sorted before them (in the rounds, ``rounds`` counts those).
    pairs = min(plan.window, len(plan.chunks) // 2)
    beside = 2 * pairs * max(plan.chunks) * element if plan.strategy == "network" else 0

    def sort(n, separate, flight=0):
        """A group sort of ``n`` elements: its gathered copy, the radix sort's buffers
        where they fit, the chunks copied out (``separate``), the gathered run freed;
        ``flight`` bytes of merges' outputs beside it."""
        dev.alloc(flight + n * element)
        dev.sort(radix_extra_bytes(n, itemsize, options.value_bytes, options.positions,
                                   options.in_place))
        if separate:
            dev.alloc(n * element)
            dev.free(n * element)
        dev.free(flight)

    group_stage(dev, plan, in_chunks, itemsize + (0 if options.positions else
                                                  options.value_bytes), resident,
                functools.partial(sort, flight=beside))
    if plan.strategy != "one-device":
        rounds(dev, plan, element, sort)
    return dev.peak


def group_stage(dev, plan, in_chunks, in_element, resident, sort):
    """The group sorts (prepares, where a group is one chunk), reading the input."""
    if plan.pieces is not None:
        groups = [[(i, b - a) for i, a, b in g] for g in plan.pieces]
        sizes, kept = list(in_chunks), resident
    else:  # the plan's chunks: the input's, or made from it (rechunked), then read
        groups = [[(plan.perm[p], plan.chunks[p]) for p in range(lo, hi)]
                  for lo, hi in group_bounds(len(plan.chunks), plan.group)]
        sizes, kept = list(plan.chunks), resident
        if resident and tuple(in_chunks) != plan.chunks:
            dev.alloc(sum(in_chunks) * in_element)
            kept = False
    inputs = Inputs(dev, sizes, in_element, kept, [i for g in groups for i, _ in g])
    for g in groups:
        for i, _ in g:
            inputs.read(i)
        sort(sum(n for _, n in g), separate=plan.strategy != "one-device"
             and plan.group < len(plan.chunks))
        for i, _ in g:
            inputs.done(i)


def rounds(dev, plan, element, sort):
    """The network's rounds: the pairs' merges (at most ``plan.window`` pairs in flight,
    each holding its two outputs beside its two chunks) and the regroups (beside the
    pairs still in flight), each freeing the chunks it replaces."""
    chunk = [c * element for c in plan.chunks]
    flight = collections.deque()
    for rnd in group_steps(plan_network(len(plan.chunks), run=plan.group), plan.group):
        if rnd is None:
            for lo, hi in group_bounds(len(plan.chunks), plan.group):
                sort(sum(plan.chunks[lo:hi]), separate=True)
                dev.free(sum(chunk[lo:hi]))
            continue
        for lo, hi in spread_order(rnd.pairs, len(plan.chunks)):
            dev.alloc(chunk[lo] + chunk[hi])
            flight.append(chunk[lo] + chunk[hi])
            if len(flight) == plan.window:  # the oldest pair's chunks are freed
                dev.free(flight.popleft())


def one_worker(chunks, device, budget=None, persisted=True):
    return ClusterView(workers=("a",), hosts=("h",), threads=(1,), device_limits=(device,),
                       device_budgets=(budget,),
                       owners=("a" if persisted else None,) * len(chunks))


def check(total_bytes, count, itemsize, view_of, options, expect=None):
    """Plan the sort of ``total_bytes`` in ``count`` chunks, count its buffers: the peak
    fits the budget (without the optional radix buffers, what the plan counts on)."""
    n = total_bytes // itemsize
    chunks = regular_chunks(n, -(-n // count))
    view = view_of(chunks)
    plan = plan_sort(chunks, itemsize, view, options)
    if expect is not None:
        assert plan.strategy == expect, plan[:5]
    if plan.strategy == "out-of-core":
        return plan, None
    budget = view.device_budgets[0] or view.device_limits[0]
    resident = bool(resident_bytes(chunks, itemsize, view, options))
    with_radix = peak(plan, chunks, itemsize, options, resident, budget)
    planned = peak(plan, chunks, itemsize, options, resident, 0)  # every sort in place
    assert planned <= usable_bytes(budget)
    assert with_radix <= budget
    return plan, with_radix


# ---------------------------------------------------------------- the benchmark's rows
@pytest.mark.parametrize("count", [8, 32, 128])
def test_16_gib_persisted_on_one_h200_sorted_as_one(count):
    spill = int(0.9 * H200)  # the benchmark's dask-cuda worker
    plan, most = check(16 * GiB, count, 4, lambda c: one_worker(c, spill, spill),
                       SortOptions(gpu=True, in_place=True), "one-device")
    assert most == 3 * 16 * GiB  # the input, its gathered copy, CUB's buffer


def test_32_gib_persisted_on_one_h200_sorted_as_one_by_the_radix_path():
    """The naive way needs four times the data (the input, rechunk's copy, cupy.sort's
    copy and CUB's buffer): it runs out of memory; the one-device sort needs three."""
    spill = int(0.9 * H200)
    _, most = check(32 * GiB, 16, 4, lambda c: one_worker(c, spill, spill),
                    SortOptions(gpu=True, in_place=True), "one-device")
    assert most == 3 * 32 * GiB < usable_bytes(spill) < 4 * 32 * GiB


def test_100_gb_lazy_on_one_h200_sorted_in_memory():
    """100 GB of float32 in 50 chunks made for the sort: the network in device memory
    (not out of core, which would take the data through host memory), every step
    within the budget; its group sorts' copies and the pairs in flight counted (they
    ran out of device memory when not)."""
    spill = int(0.9 * H200)
    plan, most = check(10**11, 50, 4, lambda c: one_worker(c, spill, spill, persisted=False),
                       SortOptions(gpu=True, in_place=True), "network")
    assert 10**11 < most <= usable_bytes(spill)


def test_100_gb_persisted_goes_out_of_core():
    """Kept by the caller, 100 GB leave no room for a sorted copy beside them."""
    spill = int(0.9 * H200)
    check(10**11, 50, 4, lambda c: one_worker(c, spill, spill),
          SortOptions(gpu=True, in_place=True), "out-of-core")


# ---------------------------------------------------------------- any plan fits
def test_one_device_bytes_is_the_count():
    for n, itemsize, options in ((1000, 4, SortOptions(gpu=True, in_place=True)),
                                 (1000, 8, SortOptions(gpu=True)),
                                 (999, 4, SortOptions(gpu=True, value_bytes=8, positions=True))):
        view = one_worker((n,), 10**9)
        plan = plan_sort((n,), itemsize, view, options)
        assert plan.strategy == "one-device"
        assert peak(plan, (n,), itemsize, options, True, 10**9) == one_device_bytes(
            n, itemsize, options)


@pytest.mark.parametrize("seed", range(100))
def test_every_plan_on_one_gpu_fits_its_budget(seed):
    """Random sizes, chunk counts (few and large, or many), budgets, keys alone or an
    argsort, the input kept by the caller or not."""
    rng = np.random.default_rng(seed)
    itemsize = int(rng.choice([2, 4, 8]))
    options = SortOptions(gpu=True, in_place=bool(rng.integers(2)))
    if rng.integers(3) == 0:
        options = options._replace(value_bytes=8, positions=True, in_place=False)
    budget = int(rng.integers(10**6, 10**8))
    total = int(budget * rng.uniform(0.05, 0.9)) // itemsize * itemsize
    count = int(rng.integers(1, 300) if rng.integers(2) else rng.integers(1, 9))
    persisted = bool(rng.integers(2))
    check(total, count, itemsize, lambda c: one_worker(c, budget, budget, persisted), options)
