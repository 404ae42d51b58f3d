"""The GPU launcher: runs the launches of ``launch_plan.py`` on CuPy arrays, with the kernels
of ``distsort/backends/gpu/kernels`` (``sort.cu`` says what one pass does).

Keys are the user's dtype (the kernels turn them into order codes on load and back on
store); values move with them.  Not supported: more than 2**31 lanes; lanes longer
than 2**62.  A sort allocates nothing; ``merge_sorted`` allocates its output, and the
crossing count a one-element device scalar.
"""
from __future__ import annotations

import functools

import cupy
import numpy as np

from distsort.backends.gpu.kernels.loader import get_module
from distsort.backends.gpu import launch_plan as launch, passes, tuning

GRID_Y = 65535  # the largest grid y dimension: lanes beyond it take further launches


def device_table():
    """The tuning table of the current device (``tuning.table``)."""
    major = cupy.cuda.Device().compute_capability
    return tuning.table(int(major[:-1]))


def _module(key_dtype, value_dtype, shape, packed=False):
    return get_module(key_dtype, value_dtype, shape.items_per_thread, shape.threads,
                      shape.min_blocks, shape.tile_bits, packed)


def _dmask(dtype, descending):
    return np.uint64(passes.descending_mask(np.dtype(dtype).itemsize, descending))


def _storage(a):
    return a.view(np.uint8) if a.dtype == np.bool_ else a


def _storages(keys, values):
    """The kernels' views of ``keys`` and ``values``; the keys again where there are no
    values (the kernels take a values pointer and ignore it)."""
    kst = _storage(keys)
    return kst, kst if values is None else _storage(values)


def _aligned(keys, values):
    return values is not None and keys.data.ptr % 8 == 0 and values.data.ptr % 8 == 0


def pass_count(n, key_dtype, value_dtype=None, merge=False):
    """Passes over global memory of a sort of ``n`` keys (each reads and writes them once)."""
    return len(launch.sort_launches(device_table(), key_dtype, value_dtype, n, merge=merge))


def kernel_shape(keys, values=None, lanes=1, merge=False):
    """``(block shape, packed)`` of ``sort_inplace`` of these arrays (``launch_plan.kernel_shape``
    on this device, packed only where both arrays are 8-byte aligned)."""
    n = keys.size // lanes if lanes else 0
    vdtype = None if values is None else values.dtype
    return launch.kernel_shape(device_table(), keys.dtype, vdtype, n, _aligned(keys, values),
                               merge)


def _kernel(x, build):
    """The compiled kernel of launch ``x``; ``build(shape, packed)`` gives a module."""
    mod = build(x.shape, x.kernel == "packed_pass")
    mod.allow_smem(x.shape.smem)
    return mod.packed_pass[x.ends] if x.kernel == "packed_pass" else getattr(mod, x.kernel)


def _run(kernel, x, head, tail):
    """Launch ``x``: ``kernel(*head(first lane), *x.ints, *tail)``, GRID_Y lanes at a time."""
    ints = tuple(np.int32(a) for a in x.ints)
    blocks, lanes = x.grid
    for first in range(0, lanes, GRID_Y):
        count = min(GRID_Y, lanes - first)
        kernel((blocks, count), (x.shape.threads,), (*head(first), *ints, *tail),
               shared_mem=x.shape.smem)


def launches(keys, values=None, descending=False, lanes=1, merge=False, build=None):
    """``(launch, run)`` of each launch of ``sort_inplace`` of these (non-empty) arrays
    (``launch_plan.sort_launches``), one at a time (``benchmarks/pass_profile.py`` times them).
    ``build(shape, packed)``: the kernels of a block shape from another build (such as
    ``loader.Module(..., defines=...)``), default the library's."""
    n = keys.size // lanes
    vdtype = None if values is None else values.dtype
    plan = launch.sort_launches(device_table(), keys.dtype, vdtype, n, lanes, merge,
                                _aligned(keys, values))
    build = build or functools.partial(_module, keys.dtype, vdtype)
    kst, vst = (a.ravel() for a in _storages(keys, values))

    def head(first):
        off = first * n
        return kst[off:], vst[off:], np.int64(n), np.int64(n)

    tail = (_dmask(keys.dtype, descending),)
    for x in plan:
        yield x, functools.partial(_run, _kernel(x, build), x, head, tail)


def sort_inplace(keys, values=None, descending=False, lanes=1, merge=False):
    """Sort ``keys`` (C-contiguous, ``lanes`` lanes of equal length) in place, the values
    moving with them; with ``merge`` the lanes must be bitonic (descending, then
    ascending).  Keyed: ties by the value's canonical code (NumPy backend's order).
    4-byte integer keys and values sort packed (``passes.packs``), in the same order."""
    if keys.size == 0 or lanes == 0:
        return keys, values
    for _, run in launches(keys, values, descending, lanes, merge):
        run()
    return keys, values


def merge_sorted(a, av, b, bv, descending=False):
    """``(keys, values)``: the sorted union of sorted ``(a, av)`` and ``(b, bv)`` (values
    None for keys only) in new arrays: the bitonic merge of ``a`` reversed, then ``b``,
    whose first pass (``merge_pass``) reads them where they lie and writes the output."""
    ma, m = a.size, a.size + b.size
    keys = cupy.empty(m, dtype=a.dtype)
    values = None if av is None else cupy.empty(m, dtype=av.dtype)
    if ma in (0, m):  # one run: nothing to merge
        keys[:ma], keys[ma:] = a, b
        if values is not None:
            values[:ma], values[ma:] = av, bv
        return keys, values
    vdtype = None if av is None else av.dtype
    build = functools.partial(_module, a.dtype, vdtype)
    (kst, vst), (ast, avs), (bst, bvs) = (_storages(keys, values), _storages(a, av),
                                          _storages(b, bv))
    runs = (kst, vst, np.int64(m), ast, avs, np.int64(ma), bst, bvs)
    flat = (kst, vst, np.int64(m), np.int64(m))
    tail = (_dmask(a.dtype, descending),)
    for x in launch.merge_launches(device_table(), a.dtype, vdtype, m):
        head = runs if x.kernel == "merge_pass" else flat
        _run(_kernel(x, build), x, lambda _, head=head: head, tail)
    return keys, values


def count_crossing(ka, va, kb, vb, descending):
    """``#{i : A[-1-i] > B[i]}`` of sorted ``(ka, va)`` (the top of the lower chunk) and
    ``(kb, vb)`` (the bottom of the higher one), by a binary search on the device."""
    ma, mb = ka.size, kb.size
    if ma == 0 or mb == 0:
        return 0
    kdt, vdt = ka.dtype, None if va is None else va.dtype
    cfg, _ = launch.kernel_shape(device_table(), kdt, vdt, 0, merge=True)
    mod = _module(kdt, vdt, cfg)
    out = cupy.empty(1, dtype=np.int64)
    (ka, va), (kb, vb) = _storages(ka, va), _storages(kb, vb)
    mod.crossing_count((1,), (1,),
                       (ka, va, np.int64(ma), kb, vb, np.int64(mb), _dmask(kdt, descending), out))
    return int(out.get()[0])
