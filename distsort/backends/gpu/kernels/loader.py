"""Load the CUDA kernels of this folder: shipped compiled, or compiled with NVRTC
(``cupy.RawModule``), once per device and per (key dtype, value dtype).

The kernels are templates over the key's storage type and kind (``order.cuh``) and
the tuning constants.  The package ships the instantiations most sorts need compiled
for sm_80, sm_90 and sm_100 (``shipped.py``; built by ``python -m
distsort.backends.gpu.kernels.build``): where the device runs one of them and it was
built from these sources, its kernels are loaded from it (milliseconds).  Elsewhere
``name_expressions`` instantiates the few that a dtype pair needs, compiled by NVRTC
in a second or two the first time they are used (CuPy then caches them on disk), and
an INFO line on this module's logger says why.
"""
from __future__ import annotations

import functools
import hashlib
import logging
from pathlib import Path

import numpy as np

from distsort.backends.gpu.kernels import shipped

HERE = Path(__file__).resolve().parent
_U = {1: "u8_t", 2: "u16_t", 4: "u32_t", 8: "u64_t"}
_KIND = {"b": 0, "u": 0, "i": 1, "f": 2}


def scalar_type(dtype) -> str:
    """The ``Scalar<U, KIND>`` of a NumPy dtype (bool is uint8 with values 0/1)."""
    dtype = np.dtype(dtype)
    return f"Scalar<{_U[dtype.itemsize]},{_KIND[dtype.kind]}>"


#: The NVRTC options of the sort kernels (beside ``-I`` this folder); the shipped
#: binaries are built with the same (``build.py``).
OPTIONS = ("-std=c++17",)

log = logging.getLogger(__name__)


def module_names(key_dtype, value_dtype, items_per_thread, threads, min_blocks, tile_bits,  # noqa: PLR0913, PLR0917
                 packed=False) -> list[str]:
    """The name expressions of the kernels of one :class:`Module` (the instantiations of
    ``sort.cu``'s templates it holds).

    >>> module_names("uint32", None, 32, 128, 3, 14)[0]
    'bitonic_pass<Scalar<u32_t,0>,NoValue,32,128,3,14>'
    """
    k = scalar_type(key_dtype)
    v = scalar_type(value_dtype) if value_dtype is not None else "NoValue"
    targs = f"{k},{v},{items_per_thread},{threads},{min_blocks},{tile_bits}"
    if packed:
        return [f"packed_pass<{targs},{ends}>" for ends in range(4)]
    return [f"bitonic_pass<{targs}>", f"merge_pass<{targs}>", f"crossing_count<{k},{v}>"]


def _capability():
    import cupy
    cc = cupy.cuda.Device().compute_capability
    return int(cc[:-1]), int(cc[-1])


@functools.cache
def _binary(device, path):
    """The shipped binary at ``path``, loaded on ``device`` (once)."""
    import cupy
    return cupy.RawModule(path=str(path))


def load_kernels(source, names, compile_module):
    """The kernels ``names`` of ``source`` on the current device: from the shipped
    binary where it holds them (``shipped.find``), else from ``compile_module()``
    (NVRTC), with an INFO line saying why.  Returns ``(module, functions)``."""
    import cupy
    found = shipped.find(source, _capability(), names)
    if isinstance(found, str):
        log.info("distsort: compiling %s of %s with NVRTC: %s", names[0], source, found)
        module = compile_module()
        return module, [module.get_function(n) for n in names]
    path, mangled = found
    module = _binary(cupy.cuda.Device().id, path)
    return module, [module.get_function(mangled[n]) for n in names]


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

        names = module_names(key_dtype, value_dtype, items_per_thread, threads, min_blocks,
                             tile_bits, packed)

        def compile_module():
            source = (HERE / "sort.cu").read_text() + f"\n// headers {_headers_digest()}\n"
            return cupy.RawModule(code=source, options=(*OPTIONS, f"-I{HERE}", *defines),
                                  name_expressions=names)

        if defines:  # a benchmark's build: never the shipped one
            self.module = compile_module()
            kernels = [self.module.get_function(name) for name in names]
        else:
            self.module, kernels = load_kernels("sort.cu", names, compile_module)
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

    names = float_order_names(code_dtype)

    def compile_module():
        return cupy.RawModule(code=(HERE / "float_bounds.cu").read_text(), options=OPTIONS,
                              name_expressions=names)

    _, kernels = load_kernels("float_bounds.cu", names, compile_module)
    return dict(zip(FLOAT_ORDER_KERNELS, kernels, strict=True))


def float_order_names(code_dtype) -> list[str]:
    """The name expressions of the kernels of ``float_bounds.cu`` for codes of
    ``code_dtype``.

    >>> float_order_names("uint64")[0]
    'float_bounds<u64_t>'
    """
    u = _U[np.dtype(code_dtype).itemsize]
    return [f"{name}<{u}>" for name in FLOAT_ORDER_KERNELS]


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
