"""CuPy backend: chunks sorted in place on the GPU by the bitonic kernels of
``distsort/backends/gpu/kernels``, launched by ``launcher.py``.

A chunk is the CuPy keys array in the user's dtype (the kernels turn keys into order
codes on load and back on store, so keys-only output is bit-identical to the NumPy
backend's), or a plain ``(keys, values)`` tuple for keyed sorts: plain arrays and
tuples are what distributed's CUDA serializers send over UCX/NVLink and what
dask-cuda knows how to spill.

Memory: a sort allocates nothing beyond the copy of its input (``prepare``) or the
output buffer (``merge_low``/``merge_high``); a one-element device scalar holds the
crossing count.
"""
from __future__ import annotations

import cupy
import numpy as np

from distsort.core import memory
from distsort.backends.chunk import (head, length, make_chunk, parts, slice_chunk,  # noqa: F401  (the Backend)
                      split_high, split_low, tail)
from distsort.backends.gpu import launcher, local_sort
from distsort.backends.gpu.launcher import pass_count, sort_inplace  # noqa: F401  (imported from here)
from distsort.backends.gpu.local_sort import sort_owned  # noqa: F401  (also the graph's group sorts)
from distsort.backends.cpu.numpy_backend import crossing_bound, probe_codes  # noqa: F401  (probes are NumPy's codes)
from distsort.backends.gpu.passes import schedule  # noqa: F401  (part of this backend's interface)

#: ``distsort.backends.CAPABILITIES``: ``prepare`` takes ``local=``; ``sort_owned``;
#: ``sort_chunk``; ``stable``; ``fits``.
CAPABILITIES = frozenset({"local", "sort_owned", "sort_chunk", "stable", "fits"})


def merge_runs(a, b, descending=False):
    """The sorted union of two sorted chunks ``a`` and ``b`` (plain or ``(keys, values)``)
    in a new chunk (``launcher.merge_sorted``: its first pass reads them where they lie)."""
    return make_chunk(*launcher.merge_sorted(*parts(a), *parts(b), descending))


def crossing_count(a_top, b_bottom, descending):
    """``#{i : A[-1-i] > B[i]}`` by a binary search on the device (one scalar read)."""
    return launcher.count_crossing(*parts(a_top), *parts(b_bottom), descending)


# ---------------------------------------------------------------- the interface
def check_fits(n, element_bytes):
    """Refuse, with rechunk advice, an input chunk of ``n`` elements that cannot fit three
    times even on an empty device: a merge later holds it, the other chunk's head and
    the output."""
    memory.check_chunk_fits(n, element_bytes, memory.device_capacity(), copies=3)


def prepare(keys, values, order, start=None, local="bitonic"):
    """Copy one chunk (the input is never modified) and sort the copy: in place, or by
    CUB's radix sort (``local``: ``local_sort.sort_owned``; the graph passes the
    ``local=`` of ``distsort.sort``, whose default is ``"auto"``)."""
    vbytes = 8 if start is not None else (values.dtype.itemsize if order.keyed else 0)
    check_fits(keys.size, keys.dtype.itemsize + vbytes)
    keys = cupy.array(keys, copy=True).ravel()
    if order.keyed:
        if start is not None:
            values = cupy.arange(start, start + keys.size, dtype=np.int64)
        else:
            values = cupy.array(values, copy=True).ravel()
    else:
        values = None
    return sort_owned(keys, values, order, local, increasing_values=start is not None)


def probe(chunk, stride, top, order):
    """Host codes of every ``stride``-th element from the top or bottom (NumPy's form)."""
    keys, values = parts(chunk)
    n = keys.size
    index = cupy.arange(n - 1, -1, -stride) if top else cupy.arange(0, n, stride)
    return probe_codes(keys[index].get(), None if values is None else values[index].get(),
                       order)


def merge_low(a, b_head, order, k=None):
    """The ``len(a)`` smallest of ``a`` and the higher chunk whose head is ``b_head``
    (``k``: their crossing count, where the caller has it)."""
    k = crossing_count(a, b_head, order.descending) if k is None else k
    return split_low(a, b_head, k, lambda x, y: merge_runs(x, y, order.descending))


def merge_high(b, a_tail, order, k=None):
    """The ``len(b)`` largest of ``b`` and the lower chunk whose tail is ``a_tail``
    (``k``: their crossing count, where the caller has it)."""
    k = crossing_count(a_tail, b, order.descending) if k is None else k
    return split_high(b, a_tail, k, lambda x, y: merge_runs(x, y, order.descending))


def finish_keys(chunk, order, dtype, values_dtype=None):
    return parts(chunk)[0]


def finish_values(chunk, order=None, keys_dtype=None, values_dtype=None):
    return parts(chunk)[1]


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


def sort_chunk(keys, order, local="auto", part=0):
    """One whole chunk sorted on its own into one output chunk (``local_sort.sort_chunk``:
    ``part`` 0 the keys, 1 an argsort's positions alone)."""
    check_fits(keys.size, keys.dtype.itemsize + 8 * part)
    return local_sort.sort_chunk(cupy.asarray(keys), order, local, part)


def stable_sort(keys, values, order):
    """``(keys, values)`` (new arrays) sorted by key alone, equal keys in their order
    here: one stable radix sort of the keys, both taken by it
    (``local_sort.radix_sort(..., by_position=True)``; the arrays are only read)."""
    return local_sort.radix_sort(cupy.asarray(keys), cupy.asarray(values), order,
                                 by_position=True)
