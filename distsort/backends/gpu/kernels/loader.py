"""Compile the CUDA kernels of this folder with NVRTC (``cupy.RawModule``), once per
device and per (key dtype, value dtype).

The kernels are templates over the key's storage type and kind (``order.cuh``) and
the tuning constants; ``name_expressions`` instantiates the few that a dtype pair
needs, so a module compiles in a second or two, the first time it is used.
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
_U = {1: "u8_t", 2: "u16_t", 4: "u32_t", 8: "u64_t"}
_KIND = {"b": 0, "u": 0, "i": 1, "f": 2}


def scalar_type(dtype) -> str:
    """The ``Scalar<U, KIND>`` of a NumPy dtype (bool is uint8 with values 0/1)."""
    dtype = np.dtype(dtype)
    return f"Scalar<{_U[dtype.itemsize]},{_KIND[dtype.kind]}>"


@functools.cache
def _headers_digest() -> str:
    """A digest of the headers that ``sort.cu`` includes: CuPy caches compiled kernels by
    their source text alone, so a changed header must change the text."""
    return hashlib.sha1(b"".join(p.read_bytes() for p in sorted(HERE.glob("*.cuh")))).hexdigest()


class Module:
    """The compiled kernels of one (key dtype, value dtype or None, items per thread E,
    threads, blocks per SM that the register budget must allow, log2 of the tuned tile:
    the phases of its MERGE passes are compiled with compile-time windows).  ``packed``:
    instead, the four ``packed_pass`` kernels of a packed key-value sort
    (``packed_pass[ends]``).
    ``defines``: extra ``-D`` options, for benchmarks (``DISTSORT_PROBE``)."""

    def __init__(self, key_dtype, value_dtype, items_per_thread, threads, min_blocks, tile_bits,
                 defines=(), packed=False):
        import cupy

        k = scalar_type(key_dtype)
        v = scalar_type(value_dtype) if value_dtype is not None else "NoValue"
        targs = f"{k},{v},{items_per_thread},{threads},{min_blocks},{tile_bits}"
        if packed:
            names = [f"packed_pass<{targs},{ends}>" for ends in range(4)]
        else:
            names = [f"bitonic_pass<{targs}>", f"merge_pass<{targs}>", f"crossing_count<{k},{v}>"]
        source = (HERE / "sort.cu").read_text() + f"\n// headers {_headers_digest()}\n"
        self.module = cupy.RawModule(code=source, options=("-std=c++17", f"-I{HERE}", *defines),
                                     name_expressions=names)
        kernels = [self.module.get_function(name) for name in names]
        if packed:
            self.packed_pass = self._passes = kernels
        else:
            self.bitonic_pass, self.merge_pass, self.crossing_count = kernels
            self._passes = kernels[:2]
        self._smem = 0

    def allow_smem(self, nbytes):
        """Raise the pass kernels' dynamic shared-memory limit (needed above 48 KB)."""
        if nbytes > self._smem:
            for kernel in self._passes:
                kernel.max_dynamic_shared_size_bytes = nbytes
            self._smem = nbytes


@functools.cache
def _module(device, key, value, items_per_thread, threads, min_blocks, tile_bits, packed):
    return Module(key, value, items_per_thread, threads, min_blocks, tile_bits, packed=packed)


def get_module(key_dtype, value_dtype, items_per_thread, threads, min_blocks, tile_bits,
               packed=False):
    """The module for these dtypes on the current device (compiled once, then cached)."""
    import cupy

    value = None if value_dtype is None else np.dtype(value_dtype).str
    return _module(cupy.cuda.Device().id, np.dtype(key_dtype).str, value, items_per_thread,
                   threads, min_blocks, tile_bits, packed)



#: The order maps of ``order.cuh`` for float keys, as elementwise kernels over their
#: unsigned storage ``T`` (``order_kernel``): one pass where CuPy's operators take five.
_ORDER_BODIES = {
    "encode": ("T u, bool canonical, bool descending", "T c",
               "c = float_code<T>(u, canonical, descending)"),
    "decode": ("T c, bool descending", "T u", "u = float_key<T>(c, descending)"),
}

_ORDER_PREAMBLE = """
#include "order.cuh"
template <typename T> __host__ __device__ T float_code(T u, bool canonical, bool descending) {
    typedef Scalar<T, KIND_FLOAT> S;
    T c = S::total(u);
    if (canonical) c = S::canon_total(c);
    return S::code(c, descending ? S::ONES : (T)0);
}
template <typename T> __host__ __device__ T float_key(T c, bool descending) {
    typedef Scalar<T, KIND_FLOAT> S;
    return S::untotal(S::uncode(c, descending ? S::ONES : (T)0));
}
"""


@functools.cache
def order_kernel(name: str):
    """The elementwise kernel ``name`` ("encode" or "decode") of the order maps of float
    keys, on their unsigned storage (CuPy compiles it once per dtype and device)."""
    import cupy

    in_params, out_params, body = _ORDER_BODIES[name]
    preamble = _ORDER_PREAMBLE + f"\n// headers {_headers_digest()}\n"
    return cupy.ElementwiseKernel(in_params, out_params, body, f"distsort_float_{name}",
                                  preamble=preamble, options=("-std=c++17", f"-I{HERE}"))


#: The kernels of ``float_bounds.cu``, in the order they run.
FLOAT_ORDER_KERNELS = ("float_bounds", "float_zeros_count", "float_zeros_write",
                       "float_nans_reverse_parts", "float_nans_reverse_whole")


@functools.cache
def _float_order(device, code_dtype):
    import cupy

    u = _U[np.dtype(code_dtype).itemsize]
    names = [f"{name}<{u}>" for name in FLOAT_ORDER_KERNELS]
    module = cupy.RawModule(code=(HERE / "float_bounds.cu").read_text(),
                            options=("-std=c++17",), name_expressions=names)
    return {name: module.get_function(full)
            for name, full in zip(FLOAT_ORDER_KERNELS, names, strict=True)}


def float_order_kernels(code_dtype):
    """The kernels of ``float_bounds.cu`` (by the names of :data:`FLOAT_ORDER_KERNELS`)
    for sorted float keys stored as ``code_dtype`` (uint32 or uint64), on the current
    device (compiled once, then cached)."""
    import cupy

    return _float_order(cupy.cuda.Device().id, np.dtype(code_dtype).str)


#: Bounds one ``slot_pass`` kernel (``select.cu``) compares with, by instantiation: a
#: pass takes the smallest that holds its bounds (each bound costs every code two
#: comparisons); more bounds take several passes.
SELECT_MAX_BOUNDS = (2, 8, 16)


@functools.cache
def _select_module(device, code_dtype):
    import cupy

    u = _U[np.dtype(code_dtype).itemsize]
    names = [f"slot_pass<{u},{m}>" for m in SELECT_MAX_BOUNDS]
    module = cupy.RawModule(code=(HERE / "select.cu").read_text(), options=("-std=c++17",),
                            name_expressions=names)
    return {m: module.get_function(name)
            for m, name in zip(SELECT_MAX_BOUNDS, names, strict=True)}


def select_kernels(code_dtype):
    """The ``slot_pass`` kernels of ``select.cu`` for codes of ``code_dtype`` (an
    unsigned dtype), by their largest count of bounds (:data:`SELECT_MAX_BOUNDS`), on
    the current device (compiled once, then cached)."""
    import cupy

    return _select_module(cupy.cuda.Device().id, np.dtype(code_dtype).str)
