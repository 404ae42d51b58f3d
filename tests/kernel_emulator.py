"""Run the CUDA kernels of ``distsort/kernels`` on the CPU (tests without a GPU).

``sort_inplace`` launches the same plan as ``distsort.backends.cupy.sort_inplace``
(``distsort.backends.passes``) on NumPy arrays, through ``emulator/emu.cpp``: the
kernel source compiled by the host C++ compiler, one std::thread per CUDA thread.
Small block shapes (a few threads, tiles of a few hundred elements) reach every code
path of the kernels (SORT, GROUP with and without the mirror, MERGE, both ways of
computing shared-memory addresses, virtual padding) in milliseconds.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from distsort.backends import passes
from distsort.kernels.loader import HERE as KERNELS, scalar_type

EMU = Path(__file__).resolve().parent / "emulator" / "emu.cpp"
CXX = os.environ.get("CXX", "g++")
#: Extra -D options of the kernels (e.g. "-DDISTSORT_ASYNC=0"), to emulate a variant.
DEFINES = os.environ.get("DISTSORT_EMU_DEFINES", "").split()


def available():
    return shutil.which(CXX) is not None


@functools.lru_cache(maxsize=None)
def build(key_dtype, value_dtype, regs, threads, tile):
    """The compiled emulator of one kernel instantiation (cached on disk by source hash)."""
    kt = scalar_type(key_dtype)
    vt = scalar_type(value_dtype) if value_dtype is not None else "NoValue"
    sources = b"".join(p.read_bytes() for p in sorted(KERNELS.glob("*.cu*"))) + EMU.read_bytes()
    tag = f"{kt}{vt}{regs}{threads}/{tile}{DEFINES}"
    tag = hashlib.sha1(sources + tag.encode()).hexdigest()[:16]
    lib = Path(tempfile.gettempdir()) / "distsort-emu" / f"{tag}.so"
    if not lib.exists():
        lib.parent.mkdir(exist_ok=True)
        tmp = lib.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run([CXX, "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread",
                        "-w", f"-I{KERNELS}", f"-DKT={kt}", f"-DVT={vt}", f"-DE_={regs}",
                        f"-DNT_={threads}", f"-DTB_={tile}", *DEFINES, str(EMU), "-o", str(tmp)],
                       check=True)
        os.replace(tmp, lib)
    so = ctypes.CDLL(str(lib))
    ll, ull, p = ctypes.c_longlong, ctypes.c_ulonglong, ctypes.c_void_p
    so.emu_pass.argtypes = [p, p, ll, ll] + [ctypes.c_int] * 6 + [ull, ll, ll, ll]
    so.emu_merge_pass.argtypes = [p, p, ll, p, p, ll, p, p] + [ctypes.c_int] * 6 + [ull, ll, ll]
    so.emu_packed_pass.argtypes = [p, p, ll, ll] + [ctypes.c_int] * 8 + [ull, ll, ll, ll]
    so.emu_crossing.argtypes = [p, p, ll, p, p, ll, ull]
    so.emu_crossing.restype = ll
    so.emu_static_hits.restype = ctypes.c_uint
    so.emu_static_all.restype = ctypes.c_uint
    so.emu_io_hits.restype = ctypes.c_uint
    return so


def _storage(a):
    return a.view(np.uint8) if a.dtype == np.bool_ else a


def _instance(tab, key_dtype, value_dtype, packed=False):
    """``(block shape, compiled emulator)`` of these dtypes under the tuning table ``tab``
    (``packed``: of their packed sort, whose shape is 8-byte keys')."""
    kdt, vdt = np.dtype(key_dtype), None if value_dtype is None else np.dtype(value_dtype)
    if packed:
        cfg = passes.config(tab, 8)
    else:
        cfg = passes.config(tab, kdt.itemsize, 0 if vdt is None else vdt.itemsize)
    return cfg, _library(kdt, vdt, cfg)


def _library(kdt, vdt, shape):
    return build(kdt.str, None if vdt is None else vdt.str, shape.regs, shape.threads, shape.tile)


def _pass_library(cfg, p, kdt, vdt):
    """``(shape, compiled emulator)`` that run pass ``p`` under ``cfg`` (``pass_shape``)."""
    shape = passes.pass_shape(cfg, p)
    return shape, _library(np.dtype(kdt), None if vdt is None else np.dtype(vdt), shape)


def packs(tab, keys, values, n):
    """Whether ``cupy.sort_inplace`` sorts these arrays packed (``cupy.kernel_shape``)."""
    if values is None or keys.ctypes.data % 8 or values.ctypes.data % 8:
        return False
    return passes.packs(keys.dtype, values.dtype, n, passes.config(tab, 8).threads)


def sort_inplace(tab, keys, values=None, descending=False, lanes=1, merge=False, packed=None):
    """``cupy.sort_inplace`` on NumPy arrays under the tuning table ``tab``.  ``packed``:
    None packs where the GPU launcher would, False never; True asserts that it does."""
    if keys.size == 0 or lanes == 0:
        return keys, values
    n = keys.size // lanes
    pack = packed is not False and not merge and packs(tab, keys, values, n)
    assert pack or not packed, "these arrays do not sort packed"
    vdt = None if values is None else values.dtype
    cfg, _ = _instance(tab, keys.dtype, vdt, pack)
    kst = _storage(keys)
    vst = kst if values is None else _storage(values)
    dm = passes.descending_mask(keys.dtype.itemsize, descending)
    if pack:
        zb = passes.split_bit(cfg.threads)
        for p, ends in passes.packed_plan(cfg, n):
            shape, so = _pass_library(cfg, p, keys.dtype, vdt)
            rc = so.emu_packed_pass(kst.ctypes.data, vst.ctypes.data, n, n, *p.args(), zb, ends,
                                    dm, p.blocks, lanes, shape.smem)
            assert rc == 0, "shared memory of the emulator too small for this tile"
        return keys, values
    for p in passes.plan(cfg, n, merge):
        shape, so = _pass_library(cfg, p, keys.dtype, vdt)
        rc = so.emu_pass(kst.ctypes.data, vst.ctypes.data, n, n, *p.args(), dm, p.blocks,
                         lanes, shape.smem)
        assert rc == 0, "shared memory of the emulator too small for this tile"
    return keys, values


def merge_runs(tab, a, av, b, bv, descending=False):
    """``cupy.merge_runs`` of sorted ``(a, av)`` and ``(b, bv)`` (values None: keys
    only) under the tuning table ``tab``: new arrays, the first pass reading the runs."""
    ma, m = a.size, a.size + b.size
    keys = np.empty(m, a.dtype)
    values = None if av is None else np.empty(m, av.dtype)
    vdt = None if av is None else av.dtype
    cfg, _ = _instance(tab, a.dtype, vdt)
    plan = passes.plan(cfg, m, merge=True)
    assert 0 < ma < m and plan, "merge_runs merges two non-empty runs"
    kst, ast, bst = _storage(keys), _storage(a), _storage(b)
    vst = kst if values is None else _storage(values)
    avs = ast if av is None else _storage(av)
    bvs = bst if bv is None else _storage(bv)
    dm = passes.descending_mask(a.dtype.itemsize, descending)
    p = plan[0]
    shape, so = _pass_library(cfg, p, a.dtype, vdt)
    rc = so.emu_merge_pass(kst.ctypes.data, vst.ctypes.data, m, ast.ctypes.data,
                           avs.ctypes.data, ma, bst.ctypes.data, bvs.ctypes.data, *p.args(),
                           dm, p.blocks, shape.smem)
    assert rc == 0, "shared memory of the emulator too small for this tile"
    for p in plan[1:]:
        shape, so = _pass_library(cfg, p, a.dtype, vdt)
        rc = so.emu_pass(kst.ctypes.data, vst.ctypes.data, m, m, *p.args(), dm, p.blocks, 1,
                         shape.smem)
        assert rc == 0
    return keys, values


def crossing_count(tab, a, av, b, bv, descending):
    """The kernel's crossing count of sorted ``a`` (top) and ``b`` (bottom)."""
    if a.size == 0 or b.size == 0:
        return 0
    _, so = _instance(tab, a.dtype, None if av is None else av.dtype)
    a, b = _storage(a), _storage(b)
    av = a if av is None else _storage(av)
    bv = b if bv is None else _storage(bv)
    return so.emu_crossing(a.ctypes.data, av.ctypes.data, a.size, b.ctypes.data,
                           bv.ctypes.data, b.size,
                           passes.descending_mask(a.dtype.itemsize, descending))


def static_phases(tab, key_dtype, value_dtype=None, packed=False):
    """``(ran, all)``: bit masks of the kernel's compile-time phases (``Static`` in
    ``sort.cu``) that ran since the last call under ``tab``, and of all of them
    (``packed``: of the packed sort's kernels)."""
    _, so = _instance(tab, key_dtype, value_dtype, packed)
    return so.emu_static_hits(), so.emu_static_all()


def io_kinds(tab, key_dtype, value_dtype=None, packed=False):
    """Bit mask of the ways of addressing global memory (``IO_*`` in ``sort.cu``: bit 0
    IO_ANY, 1 IO_ROWS, 2 IO_STRIDED, 3 IO_SHORT) that blocks used since the last call
    (``packed``: those of the packed sort's kernels)."""
    _, so = _instance(tab, key_dtype, value_dtype, packed)
    return so.emu_io_hits()
