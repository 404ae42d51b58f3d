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

from distsort.backends import Backend
from distsort.backends.chunk import make_chunk, parts, split_high, split_low
from distsort.backends.cpu.numpy_backend import crossing_bound, probe_codes
from distsort.backends.gpu import launcher, local_sort
from distsort.backends.gpu.launcher import sort_inplace
from distsort.backends.gpu.local_sort import sort_owned
from distsort.core import memory


def merge_runs(a, b, descending=False):
    """The sorted union of two sorted chunks ``a`` and ``b`` (plain or ``(keys, values)``)
    in a new chunk (``launcher.merge_sorted``: its first pass reads them where they lie)."""
    return make_chunk(*launcher.merge_sorted(*parts(a), *parts(b), descending))


def crossing_count(a_top, b_bottom, descending):
    """``#{i : A[-1-i] > B[i]}`` by a binary search on the device (one scalar read)."""
    return launcher.count_crossing(*parts(a_top), *parts(b_bottom), descending)


# ---------------------------------------------------------------- the interface
def check_fits(n, element_bytes, copies=3):
    """Refuse, with rechunk advice, an input chunk of ``n`` elements that cannot fit
    ``copies`` times even on an empty device: a merge later holds it, the other chunk's
    head and the output (a chunk sorted on its own in place: itself and its copy)."""
    memory.check_chunk_fits(n, element_bytes, memory.device_capacity(), copies=copies)


def prepare(keys, values, order, start=None, local="bitonic"):
    """Copy one chunk (the input is never modified) and sort the copy: in place, or by
    CUB's radix sort (``local``: ``local_sort.sort_owned``; the graph passes the local
    sort its plan decided)."""
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
    check_fits(keys.size, keys.dtype.itemsize + 8 * part, 2 if local == "bitonic" else 3)
    return local_sort.sort_chunk(cupy.asarray(keys), order, local, part)


def stable_sort(keys, values, order):
    """``(keys, values)`` (new arrays) sorted by key alone, equal keys in their order
    here: one stable radix sort of the keys, both taken by it
    (``local_sort.radix_sort(..., by_position=True)``; the arrays are only read)."""
    return local_sort.radix_sort(cupy.asarray(keys), cupy.asarray(values), order,
                                 by_position=True)


class CuPyBackend(Backend):
    """The GPU backend (this module's functions): chunks of CuPy keys, or
    ``(keys, values)`` pairs, sorted by the plan's local sort."""

    name = "cupy"
    stable = True

    def prepare(self, keys, values, order, start=None, local="radix"):
        return prepare(keys, values, order, start, local)

    def sort_owned(self, keys, values, order, local="radix", increasing_values=False):
        return sort_owned(keys, values, order, local, increasing_values=increasing_values)

    def sort_chunk(self, keys, order, local, part, finish_args=()):
        return sort_chunk(keys, order, local, part)

    def sort_memory(self, keys, values, order, local="radix", lanes=1):
        return local_sort.sort_memory(keys, values, order, local, lanes)

    def room(self):
        return local_sort.device_room()

    # Each method calls this module's function by its name when it runs.
    def check_fits(self, n, element_bytes):
        return check_fits(n, element_bytes)

    def probe(self, chunk, stride, top, order):
        return probe(chunk, stride, top, order)

    def crossing_bound(self, top_probe, bottom_probe, stride, limit, *order):
        return crossing_bound(top_probe, bottom_probe, stride, limit, *order)

    def merge_low(self, a, b_head, order, *k):
        return merge_low(a, b_head, order, *k)

    def merge_high(self, b, a_tail, order, *k):
        return merge_high(b, a_tail, order, *k)

    def finish_keys(self, chunk, order, dtype, *values_dtype):
        return finish_keys(chunk, order, dtype, *values_dtype)

    def finish_values(self, chunk, *dtypes):
        return finish_values(chunk, *dtypes)

    def sort_blocks(self, keys, values, axis, order, positions=False):
        return sort_blocks(keys, values, axis, order, positions=positions)

    def stable_sort(self, keys, values, order):
        return stable_sort(keys, values, order)


#: The GPU backend.
BACKEND = CuPyBackend()
