"""CuPy backend: chunks sorted in place on the GPU by the bitonic kernels of
``distsort/kernels`` (see ``sort.cu`` for what one pass does).

A chunk is the CuPy keys array in the user's dtype (the kernels turn keys into order
codes on load and back on store, so keys-only output is bit-identical to the NumPy
backend's), or a plain ``(keys, values)`` tuple for keyed sorts: plain arrays and
tuples are what distributed's CUDA serializers send over UCX/NVLink and what
dask-cuda knows how to spill.

Not supported: more than 2**31 lanes in ``sort_blocks``; lanes longer than 2**62.
Memory: a sort allocates nothing beyond the copy of its input (``prepare``) or the
output buffer (``merge_low``/``merge_high``); a one-element device scalar holds the
crossing count.
"""
from __future__ import annotations

import functools

import cupy
import numpy as np

from .. import memory
from ..kernels.loader import get_module
from . import passes, tuning
from .cupy_local import sort_owned  # noqa: F401  (also the graph's group sorts)
from .passes import schedule  # noqa: F401  (part of this backend's interface)
from .numpy import crossing_bound, probe_codes  # noqa: F401  (probes are NumPy's codes)


def _parts(chunk):
    """``(keys, values or None)`` of a chunk."""
    return chunk if isinstance(chunk, tuple) else (chunk, None)


def _chunk(keys, values):
    return keys if values is None else (keys, values)


# ---------------------------------------------------------------- the launch plan
def _table():
    major = cupy.cuda.Device().compute_capability
    return tuning.table(int(major[:-1]))


def _config(key_dtype, value_dtype):
    """The block shape (``passes.Config``) on this device for these dtypes."""
    vs = np.dtype(value_dtype).itemsize if value_dtype is not None else 0
    return passes.config(_table(), np.dtype(key_dtype).itemsize, vs)


def _module(key_dtype, value_dtype, cfg, packed=False):
    return get_module(key_dtype, value_dtype, cfg.regs, cfg.threads, cfg.min_blocks, cfg.tile,
                      packed)


def _kernels(key_dtype, value_dtype):
    """``(block shape, compiled module)`` for these dtypes on this device."""
    cfg = _config(key_dtype, value_dtype)
    return cfg, _module(key_dtype, value_dtype, cfg)


def _dmask(dtype, descending):
    return np.uint64(passes.descending_mask(np.dtype(dtype).itemsize, descending))


def _packed_config(key_dtype, value_dtype, n):
    """The block shape of a packed sort of ``n`` elements (``passes.packs``: 8-byte keys'),
    or None where these dtypes and ``n`` do not pack."""
    cfg = passes.config(_table(), 8)
    return cfg if passes.packs(key_dtype, value_dtype, n, cfg.threads) else None


def pass_count(n, key_dtype, value_dtype=None, merge=False):
    """Passes over global memory of a sort of ``n`` keys (each reads and writes them once)."""
    cfg = None if merge else _packed_config(key_dtype, value_dtype, n)
    return len(passes.plan(cfg or _config(key_dtype, value_dtype), n, merge))


def _storage(a):
    return a.view(np.uint8) if a.dtype == np.bool_ else a


def _storages(keys, values):
    """The kernels' views of ``keys`` and ``values``; the keys again where there are no
    values (the kernels take a values pointer and ignore it)."""
    kst = _storage(keys)
    return kst, kst if values is None else _storage(values)


def _launch(kernel, cfg, p, lanes, head, tail):
    """One pass ``p`` over ``lanes`` lanes: ``kernel(*head, *p.args(), *tail)``."""
    ints = tuple(np.int32(a) for a in p.args())
    for first in range(0, lanes, 65535):  # the grid's y dimension
        count = min(65535, lanes - first)
        kernel((p.blocks, count), (cfg.threads,), (*head(first), *ints, *tail),
               shared_mem=cfg.smem)


def kernel_shape(keys, values=None, lanes=1, merge=False):
    """``(block shape, packed)`` of ``sort_inplace`` of these arrays: packed
    (``passes.packs``) where the dtypes and the lanes' length allow and both arrays are
    8-byte aligned."""
    vdtype = None if values is None else values.dtype
    aligned = values is not None and keys.data.ptr % 8 == 0 and values.data.ptr % 8 == 0
    n = keys.size // lanes if lanes else 0
    cfg = _packed_config(keys.dtype, vdtype, n) if aligned and not merge else None
    return (cfg, True) if cfg is not None else (_config(keys.dtype, vdtype), False)


def _pass_kernels(cfg, p, build):
    """``(shape, module)`` that run pass ``p`` of a plan under ``cfg`` (``pass_shape``);
    ``build(shape)`` gives the module of a shape."""
    shape = passes.pass_shape(cfg, p)
    mod = build(shape)
    mod.allow_smem(shape.smem)
    return shape, mod


def launches(keys, values=None, descending=False, lanes=1, merge=False, build=None):
    """``(pass, launch)`` of each pass of ``sort_inplace`` of these (non-empty) arrays:
    what it runs, one launch at a time (``benchmarks/pass_profile.py`` times them).
    ``build(shape, packed)``: the kernels of a block shape from another build (such as
    ``loader.Module(..., defines=...)``), default the library's."""
    n = keys.size // lanes
    cfg, packed = kernel_shape(keys, values, lanes, merge)
    vdtype = None if values is None else values.dtype
    build = build or functools.partial(_module, keys.dtype, vdtype)
    kst, vst = (a.ravel() for a in _storages(keys, values))

    def head(first):
        off = first * n
        return kst[off:], vst[off:], np.int64(n), np.int64(n)

    dm = _dmask(keys.dtype, descending)
    if packed:
        tail = (np.int32(passes.split_bit(cfg.threads)), dm)
        for p, ends in passes.packed_plan(cfg, n):
            shape, mod = _pass_kernels(cfg, p, lambda s: build(s, True))
            yield p, functools.partial(_launch, mod.packed_pass[ends], shape, p, lanes, head, tail)
    else:
        for p in passes.plan(cfg, n, merge):
            shape, mod = _pass_kernels(cfg, p, lambda s: build(s, False))
            yield p, functools.partial(_launch, mod.bitonic_pass, shape, p, lanes, head, (dm,))


def sort_inplace(keys, values=None, descending=False, lanes=1, merge=False):
    """Sort ``keys`` (C-contiguous, ``lanes`` lanes of equal length) in place, the values
    moving with them; with ``merge`` the lanes must be bitonic (descending, then
    ascending).  Keyed: ties by the value's canonical code (NumPy backend's order).
    4-byte integer keys and values sort packed (``passes.packs``), in the same order."""
    if keys.size == 0 or lanes == 0:
        return keys, values
    for _, go in launches(keys, values, descending, lanes, merge):
        go()
    return keys, values


def merge_runs(a, b, descending=False):
    """The sorted union of two sorted chunks ``a`` and ``b`` (plain or ``(keys, values)``)
    in a new chunk: the bitonic merge of ``a`` reversed, then ``b``, whose first pass
    reads them where they lie (``merge_pass``) and writes the output."""
    (ak, av), (bk, bv) = _parts(a), _parts(b)
    ma, m = ak.size, ak.size + bk.size
    keys = cupy.empty(m, dtype=ak.dtype)
    values = None if av is None else cupy.empty(m, dtype=av.dtype)
    if ma == 0 or ma == m:  # one run: nothing to merge
        keys[:ma], keys[ma:] = ak, bk
        if values is not None:
            values[:ma], values[ma:] = av, bv
        return _chunk(keys, values)
    vdtype = None if av is None else av.dtype
    cfg = _config(ak.dtype, vdtype)
    build = functools.partial(_module, ak.dtype, vdtype)
    plan = passes.plan(cfg, m, merge=True)  # m >= 2: at least one pass
    (kst, vst), (ast, avs), (bst, bvs) = (_storages(keys, values), _storages(ak, av),
                                          _storages(bk, bv))
    dm = (_dmask(ak.dtype, descending),)
    shape, mod = _pass_kernels(cfg, plan[0], build)
    _launch(mod.merge_pass, shape, plan[0], 1,
            lambda _: (kst, vst, np.int64(m), ast, avs, np.int64(ma), bst, bvs), dm)
    for p in plan[1:]:
        shape, mod = _pass_kernels(cfg, p, build)
        _launch(mod.bitonic_pass, shape, p, 1, lambda _: (kst, vst, np.int64(m), np.int64(m)), dm)
    return _chunk(keys, values)


# ---------------------------------------------------------------- the interface
def prepare(keys, values, order, start=None, local="bitonic"):
    """Copy one chunk (the input is never modified) and sort the copy: in place, or by
    CUB's radix sort (``local``: ``cupy_local.sort_owned``; the graph passes the
    ``local=`` of ``distsort.sort``, whose default is ``"auto"``)."""
    vbytes = 8 if start is not None else (values.dtype.itemsize if order.keyed else 0)
    # A merge later holds this chunk, the other chunk's head and the output: refuse a
    # chunk that cannot fit three times even on an empty device, with rechunk advice.
    memory.check_chunk_fits(keys.size, keys.dtype.itemsize + vbytes,
                            memory.device_capacity(), copies=3)
    keys = cupy.array(keys, copy=True).ravel()
    if order.keyed:
        if start is not None:
            values = cupy.arange(start, start + keys.size, dtype=np.int64)
        else:
            values = cupy.array(values, copy=True).ravel()
    else:
        values = None
    return sort_owned(keys, values, order, local, increasing_values=start is not None)


def length(chunk):
    return int(_parts(chunk)[0].size)


def probe(chunk, stride, top, order):
    """Host codes of every ``stride``-th element from the top or bottom (NumPy's form)."""
    keys, values = _parts(chunk)
    n = keys.size
    index = cupy.arange(n - 1, -1, -stride) if top else cupy.arange(0, n, stride)
    return probe_codes(keys[index].get(), None if values is None else values[index].get(),
                       order)


def head(chunk, k):
    """The first ``k`` elements (what travels to the other worker), as a view: nothing
    writes to chunks, distributed's CUDA serializer sends only the view's bytes, and a
    merge on the same worker reads them where they lie (no copy)."""
    return _slice(chunk, 0, k)


def tail(chunk, k):
    """The last ``k`` elements, as a view."""
    n = length(chunk)
    return _slice(chunk, n - k, n)


def crossing_count(a_top, b_bottom, descending):
    """``#{i : A[-1-i] > B[i]}`` by a binary search on the device (one scalar read)."""
    (ka, va), (kb, vb) = _parts(a_top), _parts(b_bottom)
    ma, mb = ka.size, kb.size
    if ma == 0 or mb == 0:
        return 0
    kdt, vdt = ka.dtype, None if va is None else va.dtype
    _, mod = _kernels(kdt, vdt)
    out = cupy.empty(1, dtype=np.int64)
    (ka, va), (kb, vb) = _storages(ka, va), _storages(kb, vb)
    mod.crossing_count((1,), (1,),
                       (ka, va, np.int64(ma), kb, vb, np.int64(mb), _dmask(kdt, descending), out))
    return int(out.get()[0])


def _slice(chunk, start, stop):
    keys, values = _parts(chunk)
    return _chunk(keys[start:stop], None if values is None else values[start:stop])


def merge_low(a, b_head, order, k=None):
    """The ``len(a)`` smallest of ``a`` and the higher chunk whose head is ``b_head``
    (``k``: their crossing count, where the caller has it)."""
    k = crossing_count(a, b_head, order.descending) if k is None else k
    if k == 0:
        return a
    n = length(a)
    if k == n:  # every element crosses: the head is the new chunk, no merge
        return _slice(b_head, 0, k)
    return merge_runs(_slice(a, 0, n - k), _slice(b_head, 0, k), order.descending)


def merge_high(b, a_tail, order, k=None):
    """The ``len(b)`` largest of ``b`` and the lower chunk whose tail is ``a_tail``
    (``k``: their crossing count, where the caller has it)."""
    k = crossing_count(a_tail, b, order.descending) if k is None else k
    if k == 0:
        return b
    n = length(a_tail)
    if k == length(b):
        return _slice(a_tail, n - k, n)
    return merge_runs(_slice(a_tail, n - k, n), _slice(b, k, length(b)), order.descending)


def finish_keys(chunk, order, dtype):
    return _parts(chunk)[0]


def finish_values(chunk):
    return _parts(chunk)[1]


def sort_blocks(keys, values, axis, order, positions=False):
    """Sort every lane of an N-D block along ``axis`` (a batched launch: one grid row per
    lane); returns ``(keys, values)``, values None for keys-only."""
    keys = cupy.asarray(keys)
    vbytes = 8 if positions else (values.dtype.itemsize if order.keyed else 0)
    memory.check_chunk_fits(keys.size, keys.dtype.itemsize + vbytes,
                            memory.device_capacity(), copies=2)
    axis = axis % keys.ndim if keys.ndim else 0
    k = cupy.moveaxis(keys, axis, -1).copy(order="C")
    n = k.shape[-1] if k.ndim else 1
    lanes = k.size // n if n else 0
    v = None
    if order.keyed:
        if positions:
            v = cupy.broadcast_to(cupy.arange(n, dtype=np.int64), k.shape).copy()
        else:
            v = cupy.moveaxis(cupy.asarray(values), axis, -1).copy(order="C")
    sort_inplace(k, v, order.descending, lanes=lanes)
    k = cupy.moveaxis(k, -1, axis)
    return k, (None if v is None else cupy.moveaxis(v, -1, axis))
