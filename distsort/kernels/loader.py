"""Compile the CUDA kernels of this folder with NVRTC (``cupy.RawModule``), once per
device and per (key dtype, value dtype).

The kernels are templates over the key's storage type and kind (``order.cuh``) and
the tuning constants; ``name_expressions`` instantiates the few that a dtype pair
needs, so a module compiles in a second or two, the first time it is used.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
_U = {1: "u8_t", 2: "u16_t", 4: "u32_t", 8: "u64_t"}
_KIND = {"b": 0, "u": 0, "i": 1, "f": 2}


def scalar_type(dtype) -> str:
    """The ``Scalar<U, KIND>`` of a NumPy dtype (bool is uint8 with values 0/1)."""
    dtype = np.dtype(dtype)
    return f"Scalar<{_U[dtype.itemsize]},{_KIND[dtype.kind]}>"


class Module:
    """The compiled kernels of one (key dtype, value dtype or None, E, threads, blocks
    per SM that the register budget must allow, log2 of the tuned tile: the phases of
    its MERGE passes are compiled with compile-time windows).  ``defines``: extra
    ``-D`` options, for benchmarks (``DISTSORT_PROBE``)."""

    def __init__(self, key_dtype, value_dtype, regs, threads, min_blocks, tile, defines=()):
        import cupy

        k = scalar_type(key_dtype)
        v = scalar_type(value_dtype) if value_dtype is not None else "NoValue"
        self.pass_name = f"bitonic_pass<{k},{v},{regs},{threads},{min_blocks},{tile}>"
        self.merge_name = f"merge_pass<{k},{v},{regs},{threads},{min_blocks},{tile}>"
        self.cross_name = f"crossing_count<{k},{v}>"
        source = (HERE / "sort.cu").read_text()
        self.module = cupy.RawModule(
            code=source, options=("-std=c++17", f"-I{HERE}", *defines),
            name_expressions=[self.pass_name, self.merge_name, self.cross_name])
        self.bitonic_pass = self.module.get_function(self.pass_name)
        self.merge_pass = self.module.get_function(self.merge_name)
        self.crossing_count = self.module.get_function(self.cross_name)
        self._smem = 0

    def allow_smem(self, nbytes):
        """Raise the pass kernels' dynamic shared-memory limit (needed above 48 KB)."""
        if nbytes > self._smem:
            self.bitonic_pass.max_dynamic_shared_size_bytes = nbytes
            self.merge_pass.max_dynamic_shared_size_bytes = nbytes
            self._smem = nbytes


@functools.lru_cache(maxsize=None)
def _module(device, key, value, regs, threads, min_blocks, tile):
    return Module(key, value, regs, threads, min_blocks, tile)


def get_module(key_dtype, value_dtype, regs, threads, min_blocks, tile):
    """The module for these dtypes on the current device (compiled once, then cached)."""
    import cupy

    value = None if value_dtype is None else np.dtype(value_dtype).str
    return _module(cupy.cuda.Device().id, np.dtype(key_dtype).str, value, regs, threads,
                   min_blocks, tile)
