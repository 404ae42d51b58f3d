"""Memory pressure: refuse a chunk that cannot fit on a GPU, saying what would fit.

A chunk too large for the device should fail at once with advice, not deep
inside a kernel launch with an opaque out-of-memory error, or after Dask spilled
everything else to make room in vain.

The test is against the device's *capacity*, not its free memory: a device that
is merely full (of other chunks, an RMM pool, the CuPy pool's cache) is handled
by spilling (dask-cuda moves other chunks to the host), so a chunk that fits an
empty device must never be refused.  The arithmetic is pure and tested on
integers; :func:`device_capacity` is the only part that asks a GPU.

Examples
--------
>>> check_chunk_fits(1000, 8, capacity_bytes=10**6)  # 24 kB of 950 kB usable: fine
>>> check_chunk_fits(100_000, 8, capacity_bytes=2 * 10**6)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
MemoryError: a chunk of 100000 elements ... rechunk with x.rechunk(79166)
"""
from __future__ import annotations

from typing import Any

__all__ = ["check_chunk_fits", "largest_fitting_chunk", "device_capacity", "format_bytes"]

#: Part of a device kept for the CUDA context, kernels' modules and small buffers.
RESERVE = 0.05


_DECIMAL_STEP = 1000


def format_bytes(n: float) -> str:
    """``n`` bytes in decimal units, as Dask prints them.

    >>> format_bytes(0), format_bytes(1536), format_bytes(64 * 10**9)
    ('0 B', '1.5 kB', '64.0 GB')
    """
    for unit in ("B", "kB", "MB", "GB"):
        if n < _DECIMAL_STEP:
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def largest_fitting_chunk(itemsize: int, capacity_bytes: int, copies: int = 3,
                          reserve: float = RESERVE) -> int:
    """The most elements of ``itemsize`` bytes of which ``copies`` fit in a device.

    >>> largest_fitting_chunk(4, 1200, copies=3, reserve=0)
    100
    >>> largest_fitting_chunk(4, 1200, copies=3)  # 5% kept back: 1140 bytes usable
    95
    """
    if itemsize <= 0 or copies <= 0 or not 0 <= reserve < 1:
        raise ValueError(f"need itemsize > 0, copies > 0 and 0 <= reserve < 1, got "
                         f"{itemsize}, {copies} and {reserve}")
    return _usable(capacity_bytes, reserve) // (int(itemsize) * int(copies))


def _usable(capacity_bytes: int, reserve: float) -> int:
    return max(0, int(capacity_bytes) - int(-(-int(capacity_bytes) * reserve // 1)))


def check_chunk_fits(length: int, itemsize: int, capacity_bytes: int, *, copies: int = 3,
                     reserve: float = RESERVE) -> None:
    """Raise MemoryError, saying which chunk size would fit, unless a chunk fits a device.

    Parameters
    ----------
    length : int
        Elements in the chunk.
    itemsize : int
        Bytes per element: the key's, plus the value's (8 for argsort).
    capacity_bytes : int
        The device's memory (``cupy.cuda.runtime.memGetInfo()[1]``), not what is
        free now: a full device is a matter for spilling (see the module's notes).
    copies : int, optional
        How many chunk-sized buffers the step holds at once (the input and its
        sorted copy in ``prepare``; two chunks and the output in a merge).
    reserve : float, optional
        Fraction of the device kept for the CUDA context and small buffers.

    Raises
    ------
    MemoryError
        With the largest chunk that fits, in elements and bytes, and the
        ``x.rechunk(...)`` call that makes it.

    Examples
    --------
    >>> check_chunk_fits(10, 4, capacity_bytes=120, reserve=0)
    >>> try:
    ...     check_chunk_fits(11, 4, capacity_bytes=120, reserve=0)
    ... except MemoryError as err:
    ...     print(err)  # doctest: +NORMALIZE_WHITESPACE
    a chunk of 11 elements of 4 bytes (44 B) needs 132 B of GPU memory (3 chunk-sized
    buffers) but the GPU has 120 B (120 B usable): the largest chunk that fits has 10
    elements (40 B); rechunk with x.rechunk(10)
    """
    need = int(length) * int(itemsize) * int(copies)
    fits = largest_fitting_chunk(itemsize, capacity_bytes, copies, reserve)
    if int(length) <= fits:
        return
    advice = (f"the largest chunk that fits has {fits} elements "
              f"({format_bytes(fits * int(itemsize))}); rechunk with x.rechunk({fits})"
              if fits else "not even one element fits")
    raise MemoryError(
        f"a chunk of {length} elements of {itemsize} bytes "
        f"({format_bytes(int(length) * int(itemsize))}) needs {format_bytes(need)} of GPU "
        f"memory ({copies} chunk-sized buffers) but the GPU has "
        f"{format_bytes(int(capacity_bytes))} ({format_bytes(_usable(capacity_bytes, reserve))}"
        f" usable): {advice}")


#: Each device's capacity, asked once: ``cudaMemGetInfo`` costs more than a small sort's
#: planning (it was asked three times per call of ``distsort.sort`` on a CuPy array).
_CAPACITY: dict[int, int] = {}


def device_capacity() -> int:
    """Bytes of memory of the current CUDA device (what :func:`check_chunk_fits` needs)."""
    import cupy

    device = cupy.cuda.runtime.getDevice()
    if device not in _CAPACITY:
        _CAPACITY[device] = int(cupy.cuda.runtime.memGetInfo()[1])
    return _CAPACITY[device]


def _worker_device_budget(dask_worker: Any = None) -> int | None:
    """This worker's device budget: dask-cuda's ``device_memory_limit`` (bytes), or None."""
    from distsort.core import dask_cuda_store
    return dask_cuda_store.spill_budget(getattr(dask_worker, "data", None))
