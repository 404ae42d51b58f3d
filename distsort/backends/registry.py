"""Which backend a sort's tasks run on: the one its plan names, or the one of its arrays.

>>> import numpy as np
>>> get_backend(np.empty(0)) is backend_named("numpy")
True
"""
from __future__ import annotations

from distsort.backends import Array, Backend, array_module_name

__all__ = ["backend_named", "get_backend"]


def backend_named(name: str) -> Backend:
    """The backend a plan names (``SortPlan.backend``): ``"numpy"``, ``"cupy"``,
    ``"cuda-ipc"`` or ``"device-runs"`` (an exchange's runs on GPUs, with the radix
    sort; host runs are made with their plan: ``HostRuns``).

    >>> backend_named("numpy").name, backend_named("device-runs").name
    ('numpy', 'device-runs')
    """
    if name == "device-runs":
        from distsort.backends.gpu.runs import DeviceRuns
        return DeviceRuns()
    if name == "cupy":
        from distsort.backends.gpu.cupy_backend import BACKEND
    elif name == "cuda-ipc":
        from distsort.backends.share.ipc_backend import BACKEND
    elif name == "numpy":
        from distsort.backends.cpu.numpy_backend import BACKEND
    else:
        raise ValueError(f"no backend named {name!r}")
    return BACKEND


def get_backend(meta: Array, share: bool = False) -> Backend:
    """The backend for arrays like ``meta``; ``share``: CuPy chunks are shared
    between workers through CUDA IPC (``share.ipc_backend``; workers of one host only)."""
    if array_module_name(meta) == "cupy":
        return backend_named("cuda-ipc" if share else "cupy")
    return backend_named("numpy")
