"""dask-cuda's worker store, read in one place.

A dask-cuda worker keeps its data in a ``DeviceHostFile``: a device tier (an LRU of
the chunks on the GPU, ``device_buffer.fast``), a host tier (spilled chunks,
serialized) and disk.  Its limits and the bytes it holds are not public API, so
distsort reads them here alone, each with a fallback where the attribute is not
there (another dask-cuda layout, a plain ``distributed`` worker, no worker at all):
then the store is treated as a plain mapping with no device limit.

>>> spill_budget({}), device_tier({}), limits({})
(None, None, (None, None))
"""
from __future__ import annotations

import sys
from typing import Any


def current() -> Any | None:
    """The store (``Worker.data``) of the worker this task runs in; None outside one
    (and at once where ``distributed`` was never imported: no worker runs here)."""
    if "distributed" not in sys.modules:
        return None
    try:
        from distributed import get_worker
        return get_worker().data
    except Exception:  # noqa: BLE001  (not in a worker)
        return None


def spill_budget(data: Any) -> int | None:
    """The budget past which dask-cuda spills device data (its ``device_memory_limit``,
    as its device buffer holds it), in bytes; None where the store has none."""
    n = getattr(getattr(data, "device_buffer", None), "n", None)
    return int(n) if isinstance(n, (int, float)) and n > 0 else None


def limits(data: Any) -> tuple[int | None, int | None]:
    """``(device_memory_limit, device bytes held)`` of a dask-cuda store, each None where
    not known (the limit: the store's own, or its device tier's, which is all that
    dask-cuda 26.10's ``DeviceHostFile`` keeps; the bytes held: the device tier's
    weight, or the proxy manager's use under JIT-unspilling)."""
    limit = getattr(data, "device_memory_limit", None) or spill_budget(data)
    held = None
    for path in (("device_buffer", "fast", "total_weight"), ("manager", "_dev", "mem_usage")):
        obj = data
        try:
            for name in path:
                obj = getattr(obj, name)
            held = int(obj() if callable(obj) else obj)
            break
        except Exception:  # noqa: BLE001  (another dask-cuda layout)
            continue
    return (int(limit) if limit else None), held


def device_tier(data: Any) -> Any | None:
    """The LRU of the chunks a dask-cuda store keeps on the device (``len``,
    ``total_weight``, ``evict()``), or None for another store."""
    return getattr(getattr(data, "device_buffer", None), "fast", None)


def spill(data: Any, key: Any) -> bool:
    """Move ``key`` from a dask-cuda store's device tier to its host tier (dask-cuda's
    own spill); False where it is not on the device, or the store is another.

    >>> spill({}, "x")
    False
    """
    fast = device_tier(data)
    if fast is None or key not in getattr(fast, "d", fast):
        return False
    try:
        fast.evict(key)
    except (KeyError, TypeError):  # gone meanwhile, or an LRU that evicts no given key
        return False
    return True


def tier_of(data: Any, key: Any) -> tuple[str | None, Any]:
    """``("device", value)`` or ``("host", serialized value)``: where a dask-cuda store
    keeps ``key``, read without moving it (the device tier's dict, not the LRU's
    accessors); ``(None, None)`` for another store, or a key in neither tier."""
    fast = device_tier(data)
    if fast is None:
        return None, None
    on_device = getattr(fast, "d", fast)  # the LRU's dict: reading it moves nothing
    if key in on_device:
        return "device", on_device[key]
    host = getattr(data, "host", None)
    if host is not None and key in host:
        return "host", host[key]
    return None, None
