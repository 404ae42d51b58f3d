"""Run the CUDA kernels of ``distsort/backends/gpu/kernels`` on the CPU (tests without a GPU).

``sort_inplace`` and ``merge_runs`` walk the launches that the GPU launcher walks
(``distsort.backends.gpu.launch_plan``) on NumPy arrays, through ``emulator/emu.cpp``: the
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
import threading
from pathlib import Path

import numpy as np

from distsort.backends.gpu import launch_plan as launch, passes
from distsort.backends.gpu.kernels.loader import HERE as KERNELS, scalar_type

EMU = Path(__file__).resolve().parent / "emulator" / "emu.cpp"
CXX = os.environ.get("CXX", "g++")
#: Extra -D options of the kernels (e.g. "-DDISTSORT_ASYNC=0"), to emulate a variant.
DEFINES = os.environ.get("DISTSORT_EMU_DEFINES", "").split()


def available():
    return shutil.which(CXX) is not None


@functools.cache
def build(key_dtype, value_dtype, items_per_thread, threads, tile_bits):
    """The compiled emulator of one kernel instantiation (cached on disk by source hash)."""
    kt = scalar_type(key_dtype)
    vt = scalar_type(value_dtype) if value_dtype is not None else "NoValue"
    sources = b"".join(p.read_bytes() for p in sorted(KERNELS.glob("*.cu*"))) + EMU.read_bytes()
    tag = f"{kt}{vt}{items_per_thread}{threads}/{tile_bits}{DEFINES}"
    tag = hashlib.sha1(sources + tag.encode()).hexdigest()[:16]
    lib = Path(tempfile.gettempdir()) / "distsort-emu" / f"{tag}.so"
    if not lib.exists():
        lib.parent.mkdir(exist_ok=True)
        tmp = lib.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run([CXX, "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread",
                        "-w", f"-I{KERNELS}", f"-DKT={kt}", f"-DVT={vt}",
                        f"-DE_={items_per_thread}", f"-DNT_={threads}", f"-DTB_={tile_bits}",
                        *DEFINES, str(EMU), "-o", str(tmp)],
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


def _library(key_dtype, value_dtype, shape):
    """The compiled emulator of these dtypes under the block shape ``shape``."""
    vdt = None if value_dtype is None else np.dtype(value_dtype).str
    return build(np.dtype(key_dtype).str, vdt, shape.items_per_thread, shape.threads,
                 shape.tile_bits)


def _instance(tab, key_dtype, value_dtype, packed=False):
    """The compiled emulator of these dtypes under the tuning table ``tab`` (``packed``: of
    their packed sort, whose shape is 8-byte keys')."""
    kdt, vdt = np.dtype(key_dtype), None if value_dtype is None else np.dtype(value_dtype)
    if packed:
        return _library(kdt, vdt, passes.config(tab, 8))
    return _library(kdt, vdt, passes.config(tab, kdt.itemsize, 0 if vdt is None else vdt.itemsize))


#: The launches (``gpu.launch_plan.Launch``) that the last ``sort_inplace`` or ``merge_runs`` ran.
ran = []


def _walk(plan, key_dtype, value_dtype, call):
    """Run each launch of ``plan``: ``call(library, launch)``, recorded in ``ran``."""
    ran.clear()
    for x in plan:
        rc = call(_library(key_dtype, value_dtype, x.shape), x)
        assert rc == 0, "shared memory of the emulator too small for this tile"
        ran.append(x)


def _aligned(keys, values):
    return values is not None and keys.ctypes.data % 8 == 0 and values.ctypes.data % 8 == 0


def packs(tab, keys, values, n):
    """Whether the GPU launcher sorts these arrays packed (``gpu.launch_plan.kernel_shape``)."""
    vdt = None if values is None else values.dtype
    return launch.kernel_shape(tab, keys.dtype, vdt, n, _aligned(keys, values))[1]


def sort_inplace(tab, keys, values=None, descending=False, lanes=1, merge=False, packed=None):
    """``cupy.sort_inplace`` on NumPy arrays under the tuning table ``tab``: the launches
    of ``gpu.launch_plan.sort_launches``.  ``packed``: None packs where the GPU launcher would,
    False never; True asserts that it does."""
    if keys.size == 0 or lanes == 0:
        return keys, values
    n = keys.size // lanes
    vdt = None if values is None else values.dtype
    plan = launch.sort_launches(tab, keys.dtype, vdt, n, lanes, merge,
                                packed is not False and _aligned(keys, values))
    assert not packed or plan[0].kernel == "packed_pass", "these arrays do not sort packed"
    kst = _storage(keys)
    vst = kst if values is None else _storage(values)
    dm = passes.descending_mask(keys.dtype.itemsize, descending)

    def call(so, x):
        run = so.emu_packed_pass if x.kernel == "packed_pass" else so.emu_pass
        ends = (x.ends,) if x.kernel == "packed_pass" else ()
        return run(kst.ctypes.data, vst.ctypes.data, n, n, *x.ints, *ends, dm, *x.grid,
                   x.shape.smem)

    _walk(plan, keys.dtype, vdt, call)
    return keys, values


def merge_runs(tab, a, av, b, bv, descending=False):
    """``cupy.merge_runs`` of sorted ``(a, av)`` and ``(b, bv)`` (values None: keys
    only) under the tuning table ``tab``: new arrays, the launches of
    ``gpu.launch_plan.merge_launches`` (the first pass reading the runs)."""
    ma, m = a.size, a.size + b.size
    assert 0 < ma < m, "merge_runs merges two non-empty runs"
    keys = np.empty(m, a.dtype)
    values = None if av is None else np.empty(m, av.dtype)
    vdt = None if av is None else av.dtype
    kst, ast, bst = _storage(keys), _storage(a), _storage(b)
    vst = kst if values is None else _storage(values)
    avs = ast if av is None else _storage(av)
    bvs = bst if bv is None else _storage(bv)
    dm = passes.descending_mask(a.dtype.itemsize, descending)

    def call(so, x):
        if x.kernel == "merge_pass":
            return so.emu_merge_pass(kst.ctypes.data, vst.ctypes.data, m, ast.ctypes.data,
                                     avs.ctypes.data, ma, bst.ctypes.data, bvs.ctypes.data,
                                     *x.ints, dm, x.grid[0], x.shape.smem)
        return so.emu_pass(kst.ctypes.data, vst.ctypes.data, m, m, *x.ints, dm, *x.grid,
                           x.shape.smem)

    _walk(launch.merge_launches(tab, a.dtype, vdt, m), a.dtype, vdt, call)
    return keys, values


def crossing_count(tab, a, av, b, bv, descending):
    """The kernel's crossing count of sorted ``a`` (top) and ``b`` (bottom)."""
    if a.size == 0 or b.size == 0:
        return 0
    so = _instance(tab, a.dtype, None if av is None else av.dtype)
    a, b = _storage(a), _storage(b)
    av = a if av is None else _storage(av)
    bv = b if bv is None else _storage(bv)
    return so.emu_crossing(a.ctypes.data, av.ctypes.data, a.size, b.ctypes.data,
                           bv.ctypes.data, b.size,
                           passes.descending_mask(a.dtype.itemsize, descending))


def static_phases(tab, key_dtype, value_dtype=None, packed=False):
    """``(ran, all)``: bit masks of the kernel's compile-time phases (``Static`` in
    ``windows.cuh``) that ran since the last call under ``tab``, and of all of them
    (``packed``: of the packed sort's kernels)."""
    so = _instance(tab, key_dtype, value_dtype, packed)
    return so.emu_static_hits(), so.emu_static_all()


def io_kinds(tab, key_dtype, value_dtype=None, packed=False):
    """Bit mask of the ways of addressing global memory (``IO_*`` in ``tile_map.cuh``: bit 0
    IO_ANY, 1 IO_ROWS, 2 IO_STRIDED, 3 IO_SHORT) that blocks used since the last call
    (``packed``: those of the packed sort's kernels)."""
    so = _instance(tab, key_dtype, value_dtype, packed)
    return so.emu_io_hits()


SELECT_EMU = Path(__file__).resolve().parent / "emulator" / "select_emu.cpp"


@functools.cache
def select_library():
    """The compiled emulator of ``kernels/select.cu`` (cached on disk by source hash)."""
    sources = (KERNELS / "select.cu").read_bytes() + SELECT_EMU.read_bytes()
    tag = hashlib.sha1(sources).hexdigest()[:16]
    lib = Path(tempfile.gettempdir()) / "distsort-emu" / f"select-{tag}.so"
    if not lib.exists():
        lib.parent.mkdir(exist_ok=True)
        tmp = lib.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run([CXX, "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-w",
                        f"-I{KERNELS}", str(SELECT_EMU), "-o", str(tmp)], check=True)
        os.replace(tmp, lib)
    so = ctypes.CDLL(str(lib))
    ll, ull, p, i = ctypes.c_longlong, ctypes.c_ulonglong, ctypes.c_void_p, ctypes.c_int
    so.emu_slot_pass.argtypes = [i, i, p, ll, p, i, ull, p, p, p, i, ll, p, ll, ll]
    return so


class SelectLaunch:
    """``distsort.backends.gpu.select.CupyLaunch`` on NumPy arrays: the kernel's source
    run on the CPU, ``sms`` streaming multiprocessors' worth of blocks."""

    xp = np
    #: One launch at a time: the emulator's barrier, lanes and shared memory are global.
    lock = threading.Lock()

    def __init__(self, sms=1):
        self.sms = sms
        self.launches = 0

    def __call__(self, maxb, blocks, codes, bounds, nb, mask, counts, out, out_pos, positions,  # noqa: PLR0913, PLR0917
                 offset, count, room):
        with self.lock:
            self.launches += 1
            rc = self._run(maxb, blocks, codes, bounds, nb, mask, counts, out, out_pos,
                           positions, offset, count, room)
        assert rc == 0, f"no slot_pass for {codes.dtype} and {maxb} bounds"

    @staticmethod
    def _run(maxb, blocks, codes, bounds, nb, mask, counts, out, out_pos, positions, offset,  # noqa: PLR0913, PLR0917
             count, room):
        return select_library().emu_slot_pass(
            codes.dtype.itemsize, maxb, codes.ctypes.data, codes.size, bounds.ctypes.data, nb,
            mask, counts.ctypes.data, out.ctypes.data, out_pos.ctypes.data, int(bool(positions)),
            offset, count.ctypes.data, room, blocks)
