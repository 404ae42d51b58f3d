"""dask-cuda's worker store read through ``distsort.core.dask_cuda_store``, on stores laid out
as dask-cuda lays them out (``DeviceHostFile``, JIT-unspilling's ``ProxifyHostFile``)
and on plain ones."""
from types import SimpleNamespace

from distsort.core import dask_cuda_store as store


class LRU(dict):
    """dask-cuda's device tier: a dict (``d``) behind accessors that would move data."""

    def __init__(self, items, weight):
        super().__init__()
        self.d, self.total_weight = dict(items), weight

    def __contains__(self, key):
        raise AssertionError("read through the LRU's accessors")


def device_host_file(limit=8_000, held=3_000):
    fast = LRU({("x", 0): "on device"}, held)
    return SimpleNamespace(device_memory_limit=limit, host={("x", 1): "serialized"},
                           device_buffer=SimpleNamespace(n=limit, fast=fast))


def test_limits_of_each_layout():
    assert store.limits(device_host_file()) == (8_000, 3_000)
    proxify = SimpleNamespace(device_memory_limit=5_000,
                              manager=SimpleNamespace(_dev=SimpleNamespace(mem_usage=lambda: 7)))
    assert store.limits(proxify) == (5_000, 7)
    assert store.limits({}) == (None, None)
    assert store.spill_budget(device_host_file()) == 8_000
    assert store.spill_budget(proxify) is None  # no device buffer: no spill budget
    assert store.spill_budget(SimpleNamespace(device_buffer=SimpleNamespace(n=0))) is None


def test_tiers_are_read_without_moving_data():
    data = device_host_file()
    assert store.tier_of(data, ("x", 0)) == ("device", "on device")
    assert store.tier_of(data, ("x", 1)) == ("host", "serialized")
    assert store.tier_of(data, ("x", 2)) == (None, None)
    assert store.tier_of({("x", 0): 1}, ("x", 0)) == (None, None)  # a plain store


def test_current_outside_a_worker():
    assert store.current() is None
