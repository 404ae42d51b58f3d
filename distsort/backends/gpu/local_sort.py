"""Local sorts of the CuPy backend: CUB's radix sort, or the in-place kernels.

The plan decides which for each task (``distsort.plan.localsort.plan_local``) and the
tasks pass it here as ``local``:

``"radix"``
    ``cupy.sort`` / ``cupy.argsort`` (CUB's radix sort, several times faster than the
    bitonic kernels: ``docs/performance.md``) on ascending integer and float32/64
    keys as they are (:func:`sort_keys`, :func:`stable_perm`: floats then put in
    distsort's order), on distsort's order codes otherwise, so the result is the one
    of every other path bit for bit: NaNs last, ``-0.0`` before ``+0.0``, argsort
    stable, ties of ``sort_by_key`` broken by the value (or by position).
    It needs several chunk-sized buffers beyond the chunk
    (``distsort.core.memory.radix_extra_bytes``).  The one check made at run time:
    where one of them cannot be allocated, the chunk is sorted in place instead and
    the ``"distsort"`` logger warns (:func:`radix_or_in_place`).
``"bitonic"``
    The in-place kernels (``distsort.backends.gpu.launcher.sort_inplace``): no extra memory.

``"auto"`` (a caller that did not plan) is taken as ``"radix"``.  CuPy is imported
inside the functions, so this module imports without a GPU.

:func:`sort_memory` sorts the caller's own arrays (``distsort.sort(x, out=x)``): the
radix sort where its buffers fit the device's free memory
(``distsort.plan.localsort.plan_own_memory``), else, or where they fail to allocate,
the in-place kernels.  The copy a sort of a plain array makes (:func:`sort_chunk`)
is the one allocation with no fallback: where it fails, a ``MemoryError`` says to
sort in place.
"""
from __future__ import annotations

import functools
import logging

import numpy as np

from distsort.core import dask_cuda_store
from distsort.core.xp import address, namespace

__all__ = ["device_limit", "device_room", "radix_or_in_place", "sorted_copy", "sort_owned",
           "sort_memory", "radix_sort", "sort_keys", "stable_perm",
           "float_bounds", "cub_float_order", "fix_float_order", "encode_codes", "decode_codes"]

#: Where a radix sort's allocation failed and the chunk was sorted in place instead.
log = logging.getLogger(__name__)


def _dask_cuda_limits():
    """``(device_memory_limit, device bytes held)`` of the dask-cuda worker we run in,
    each None where not known."""
    data = dask_cuda_store.current()
    return (None, None) if data is None else dask_cuda_store.limits(data)


def device_limit():
    """Bytes of device memory a worker's chunks may take: dask-cuda's
    ``device_memory_limit`` where set, else the device's capacity."""
    from distsort.core import memory
    limit, _ = _dask_cuda_limits()
    return limit if limit is not None else memory.device_capacity()


def device_room():
    """Bytes that may be allocated now on the current device: its free memory and the
    blocks CuPy's pool holds free, less ``memory.RESERVE`` of its capacity (CUB's
    temporary storage, the CUDA libraries' workspaces)."""
    import cupy

    from distsort.core import memory
    free = int(cupy.cuda.runtime.memGetInfo()[0])
    if cupy.cuda.get_allocator() == cupy.get_default_memory_pool().malloc:
        free += int(cupy.get_default_memory_pool().free_bytes())
    capacity = memory.device_capacity()
    return max(0, free - (capacity - memory.usable(capacity)))


def radix_or_in_place(radix, in_place, what):
    """``radix()``, the radix sort the plan chose; where it fails to allocate its
    buffers (``MemoryError``: CuPy's ``OutOfMemoryError``, and the
    ``MemoryError('std::bad_alloc')`` of its Thrust and CUB calls), ``in_place()``,
    with a warning on this module's logger: the one decision made at run time (the
    plan's budget counted on memory the device no longer had).  ``in_place()`` runs
    after the handler, once the failed attempt's buffers (which its traceback's
    frames hold) are freed.

    >>> radix_or_in_place(lambda: "radix", lambda: "in place", "a chunk")
    'radix'
    >>> def short():
    ...     raise MemoryError("out of memory allocating 8 bytes")
    >>> radix_or_in_place(short, lambda: "in place", "a chunk")
    'in place'
    """
    try:
        return radix()
    except MemoryError as err:
        reason = f"{type(err).__name__}: {err}"
    log.warning("distsort: the radix sort of %s could not allocate its buffers (%s); "
                "sorted in place instead", what, reason)
    return in_place()


def sorted_copy(keys, make=None, what="the sorted copy"):
    """A copy of ``keys`` to sort in place (or ``make()``, ``what`` it makes for them);
    where the device has no room for it, a ``MemoryError`` that says how to sort
    without one (no allocator's error reaches the caller)."""
    try:
        return keys.copy() if make is None else make()
    except MemoryError as err:
        reason = f"{type(err).__name__}: {err}"
    from distsort.core.memory import format_bytes
    raise MemoryError(
        f"distsort: the device has no room for {what} of {keys.size} keys "
        f"({format_bytes(keys.nbytes)}; {reason}); sort the array in its own memory, "
        "distsort.sort(x, out=x), or free device memory")


def sort_memory(keys, values, order, local="radix", lanes=1):
    """Sort ``keys`` (C-contiguous; ``lanes`` rows, each sorted on its own) and
    ``values`` with them in their own memory (``Backend.sort_memory``): CUB's radix
    sort where ``local`` says ``"radix"`` (one lane; the result written back where it
    was made elsewhere), falling back to the in-place kernels where its buffers
    cannot be allocated; the in-place kernels where ``local`` says ``"bitonic"``."""
    def in_place():
        from distsort.backends.gpu.launcher import sort_inplace
        sort_inplace(keys, values, order.descending, lanes=lanes)

    def radix():
        if values is None:
            done = sort_keys(keys, order.descending, owned=True)
            if address(done) != address(keys):  # sorted as codes made elsewhere
                keys[...] = done
            return
        done_keys, done_values = radix_sort(keys, values, order)
        keys[...], values[...] = done_keys, done_values

    if local == "bitonic" or lanes != 1:
        return in_place()
    return radix_or_in_place(radix, in_place, f"an array of {keys.size} keys")


def increasing(values):
    """Whether uint64 ``values`` strictly increase (one reduction, one scalar read): the
    values of a stable ``sort_by_key``, packed under their positions
    (``distsort.backends.packing.pack_positions``).  Ties of their keys are then in
    the keyed order already, as a stable sort by the key alone keeps them.  Other
    values are not read (the scalar read waits for the device): argsort's positions
    are known to increase.

    >>> increasing(np.array([1, 5, 9], np.uint64)), increasing(np.array([1, 5, 5], np.uint64))
    (True, False)
    """
    return values.dtype == np.uint64 and bool((values[1:] > values[:-1]).all())


def sort_owned(keys, values, order, local="auto", increasing_values=False):
    """Sort ``keys`` (and ``values``: arrays this task owns, that may be overwritten)
    by ``order``; returns the chunk (keys, or ``(keys, values)``).
    ``increasing_values``: the values are increasing (argsort's positions), so a
    stable sort by the key alone orders them; uint64 values are checked for it
    (:func:`increasing`: those of a stable ``sort_by_key``, packed with positions)."""
    def in_place():
        from distsort.backends.gpu.launcher import sort_inplace
        sort_inplace(keys, values, order.descending)
        return keys if values is None else (keys, values)

    if local == "bitonic":
        return in_place()
    if values is not None and not increasing_values:
        increasing_values = increasing(values)
    return radix_or_in_place(lambda: radix_sort(keys, values, order, increasing_values),
                             in_place, f"a chunk of {keys.size} keys")


def sort_chunk(keys, order, local="auto", part=0):
    """One whole chunk of ``keys`` (read, not written) sorted on its own, as one
    output chunk: ``part`` 0, the sorted keys (of a keys-only sort, or an argsort's);
    1, an argsort's int64 positions alone, no key gathered.

    The radix path reads the chunk where it lies: the keys are copied once (into
    their codes where codes are sorted), an argsort sorts new codes or a copy.
    """
    keys = keys.ravel()

    def in_place():
        import cupy

        from distsort.backends.gpu.launcher import sort_inplace
        copy = sorted_copy(keys)
        positions = sorted_copy(keys, lambda: cupy.arange(keys.size, dtype=np.int64),
                                "the positions") if order.keyed else None
        sort_inplace(copy, positions, order.descending)
        return positions if part else copy

    def radix():
        if not order.keyed:
            return sort_keys(keys, order.descending, owned=False)
        perm = stable_perm(keys, order.descending)
        return perm if part else keys[perm]

    if local == "bitonic":
        return in_place()
    return radix_or_in_place(radix, in_place, f"a chunk of {keys.size} keys")


def radix_sort(keys, values, order, increasing_values=False, by_position=False):
    """The chunk of ``keys`` (and ``values``) sorted by CUB's radix sort on the order
    codes of ``distsort.core.order``: the same order as the bitonic kernels'.  ``keys`` is
    owned: keys alone are turned into their codes, sorted and turned back in place
    (ascending integer and float32/64 keys are sorted as they are:
    :func:`sort_keys`).  ``increasing_values``: the values are increasing positions
    (argsort's); ``by_position``: ties of the key are broken by position, not by
    the value (a stable ``sort_by_key``: one stable sort by the key alone, then the
    values gathered; ``keys`` and ``values`` are then only read)."""
    import cupy

    from distsort.backends.cpu.numpy_backend import order_codes
    if values is None:
        return sort_keys(keys, order.descending)
    if increasing_values or by_position:  # a stable sort by the key's canonical code
        perm = stable_perm(keys, order.descending)
        if increasing_values:
            return keys[perm], take_increasing(values, perm)
        return keys[perm], values[perm]
    # least significant code first: stable sorts compose to the lexicographic order
    codes = order_codes(keys, values, order.descending)
    perm = cupy.argsort(codes[-1])
    for code in codes[-2::-1]:
        perm = perm[cupy.argsort(code[perm])]
    return keys[perm], values[perm]


def _native(keys, descending):
    """Whether CuPy's own sort of ``keys`` (CUB's radix sort on their bits) is distsort's
    order, up to :func:`cub_float_order`'s fix-ups: ascending (u)int and float32/64
    CuPy keys (float16 and bool have no radix sort of their own there)."""
    return (not descending and namespace(keys) is not np
            and (keys.dtype.kind in "iu" or keys.dtype in (np.float32, np.float64)))


def sort_keys(keys, descending=False, owned=True):
    """``keys`` sorted in distsort's order: in their own storage where ``owned``, else
    in a copy (the pass to codes, where they are sorted as codes).

    Ascending (u)int and float32/64 keys are sorted as they are by CuPy (CUB's radix
    sort: no passes to codes and back, 2.6 ms of 9.3 at 2^28 float32 on an H200),
    floats then put in distsort's order on the GPU (:func:`fix_float_order`, which
    reads nothing back: the task that sorts returns while the GPU works, and the
    scheduler meanwhile runs the tasks after it); other keys through their order codes.
    """
    if _native(keys, descending):
        keys = keys if owned else keys.copy()
        keys.sort()
        return fix_float_order(keys) if keys.dtype.kind == "f" else keys
    codes = encode_codes(keys, descending=descending, in_place=owned)
    try:
        codes.sort()  # thrust/CUB radix sort in place
    except MemoryError:  # the keys' storage may hold their codes: keys again, for the
        decode_codes(codes, keys.dtype, descending=descending)  # in-place fallback
        raise
    return decode_codes(codes, keys.dtype, descending=descending)


def stable_perm(keys, descending=False):
    """The int64 permutation that sorts ``keys`` stably by their canonical order
    (``-0.0 == +0.0``, every NaN equal and last): ``numpy.argsort(kind="stable")``'s.
    Ascending (u)int and float32/64 keys are sorted as they are (:func:`sort_keys`),
    the NaNs' positions then put last in input order."""
    import cupy
    if not _native(keys, descending):
        return cupy.argsort(encode_codes(keys, canonical=True, descending=descending))
    perm = cupy.argsort(keys)  # CUB: -0.0 == +0.0, NaNs first (negative) and last (by payload)
    if keys.dtype.kind != "f" or not perm.size:
        return perm
    ends = keys.take(perm[::max(1, perm.size - 1)]).get()  # the first and the last
    if not np.isnan(ends).any():
        return perm
    nan = cupy.isnan(keys)
    first = int(cupy.count_nonzero(nan & cupy.signbit(keys)))  # negative NaNs lead
    last = perm.size - (int(cupy.count_nonzero(nan)) - first)
    return cupy.concatenate([perm[first:last],
                             cupy.sort(cupy.concatenate([perm[:first], perm[last:]]))])


def float_bounds(keys):
    """``(k, lo, hi)`` of float ``keys`` sorted in CUB's order: ``k`` negative NaNs
    lead, ``keys[lo:hi]`` are the zeros (``kernels/float_bounds.cu``, on the GPU: one
    small kernel and one read; NumPy keys by the same predicates, for tests)."""
    u = keys.view(f"u{keys.dtype.itemsize}")
    if namespace(keys) is np:
        sign = u.dtype.type(1 << (8 * u.itemsize - 1))
        mag = u & ~sign
        negative = (u & sign) != 0
        held = (negative & (mag > _exponent_mask(keys.dtype)), negative & (mag != 0),
                negative | (u == 0))
        return tuple(int(np.argmin(h)) if h.size and not h.all() else h.size for h in held)
    return tuple(int(b) for b in _device_bounds(u)[:3].get())


def _device_bounds(u):
    """The bounds of :func:`float_bounds` of CuPy keys' bits ``u``, and a zero, in a
    device array of four (``float_bounds.cu``), not read back."""
    import cupy

    from distsort.backends.gpu.kernels.loader import float_order_kernels
    out = cupy.empty(4, dtype=np.int64)
    float_order_kernels(u.dtype)["float_bounds"]((1,), (32,), (u, np.int64(u.size), out))
    return out


def _exponent_mask(dtype):
    bits = 8 * dtype.itemsize
    nmant = np.finfo(dtype).nmant
    return ((1 << (bits - 1 - nmant)) - 1) << nmant


def cub_float_order(keys, bounds):
    """Float ``keys`` sorted in CUB's order (``cupy.sort``), owned, put in distsort's
    order in place: the zeros ``keys[lo:hi]`` (both signs in input order) rewritten as
    the ``-0.0`` then the ``+0.0``, the ``k`` leading negative NaNs moved after the
    positive ones, their order kept, by three reversals.  ``bounds``: ``(k, lo, hi)``
    (:func:`float_bounds`).  The steps of :func:`fix_float_order`'s kernels, on NumPy
    keys (the model the GPU's results are checked against).

    >>> x = np.array([np.nan, -1.0, 0.0, -0.0, 2.0], dtype=np.float32)
    >>> x[0] = -x[0]  # a negative NaN, first in CUB's order
    >>> cub_float_order(x, float_bounds(x)).view("u4").tolist() == np.array(
    ...     [-1.0, -0.0, 0.0, 2.0, -np.nan], dtype=np.float32).view("u4").tolist()
    True
    """
    k, lo, hi = bounds
    u = keys.view(f"u{keys.dtype.itemsize}")
    if hi - lo > 1:
        negative = int(np.count_nonzero(u[lo:hi]))  # here only -0.0 has a bit set
        u[lo:lo + negative] = 1 << (8 * keys.dtype.itemsize - 1)
        u[lo + negative:hi] = 0
    if 0 < k < u.size:
        u[:k], u[k:] = u[:k][::-1].copy(), u[k:][::-1].copy()
        u[:] = u[::-1].copy()
    return keys


def fix_float_order(keys):
    """CuPy float ``keys`` sorted in CUB's order, owned, put in distsort's order in
    place on the GPU (:func:`cub_float_order`'s steps, ``kernels/float_bounds.cu``):
    nothing is read back, so the task returns while the GPU sorts, and where there are
    no zeros and no negative NaNs (most data) every kernel after the bounds returns at
    once.  Returns ``keys``."""
    from distsort.backends.gpu.kernels.loader import float_order_kernels
    u = keys.view(f"u{keys.dtype.itemsize}")
    n, out = np.int64(u.size), _device_bounds(u)
    kernels = float_order_kernels(u.dtype)
    grid, block = (_fix_up_blocks(),), (256,)
    kernels["float_zeros_count"](grid, block, (u, out))
    kernels["float_zeros_write"](grid, block, (u, out))
    kernels["float_nans_reverse_parts"](grid, block, (u, n, out))
    kernels["float_nans_reverse_whole"](grid, block, (u, n, out))
    return keys


@functools.cache
def _fix_up_blocks():
    """Blocks of :func:`fix_float_order`'s kernels: four per SM of this device."""
    import cupy
    return 4 * cupy.cuda.Device().attributes["MultiProcessorCount"]


def take_increasing(values, perm):
    """``values[perm]`` for strictly increasing integer ``values`` (argsort's positions):
    where they are ``first, first + 1, ...`` (known from the two ends), ``perm + first``
    without a gather (``perm`` is overwritten).  At 2^28 the gather of int64 positions
    was a quarter of a one-device argsort on an H200 (``array_profile_H200_2026-11-25``).

    >>> import numpy as np
    >>> take_increasing(np.arange(5, 9), np.array([3, 0, 2, 1]))
    array([8, 5, 7, 6])
    >>> take_increasing(np.array([0, 1, 5]), np.array([2, 0, 1]))  # not contiguous: gathered
    array([5, 0, 1])
    """
    n = values.shape[0]
    if n and values.dtype == perm.dtype and int(values[-1]) - int(values[0]) == n - 1:
        perm += values[0]
        return perm
    return values[perm]


def encode_codes(keys, *, canonical=False, descending=False, in_place=False):
    """``order.encode`` of CuPy ``keys``.  Float keys take one elementwise pass
    (``kernels.loader.order_kernel``) where CuPy's operators take five, and with
    ``in_place`` overwrite their own storage (a contiguous copy's, for a view); other
    dtypes, and NumPy keys (the CPU tests of this path), go through ``order.encode``."""
    from distsort.core.order import code_dtype, encode
    if keys.dtype.kind != "f" or namespace(keys) is np:
        return encode(keys, canonical=canonical, descending=descending)
    from distsort.backends.gpu.kernels.loader import order_kernel
    u = namespace(keys).ascontiguousarray(keys).view(code_dtype(keys.dtype))
    kernel = order_kernel("encode")
    return kernel(u, canonical, descending, u) if in_place else kernel(u, canonical, descending)


def decode_codes(codes, dtype, *, descending=False):
    """``order.decode(codes, dtype, copy=False)`` of CuPy ``codes``, in place; float
    keys in one elementwise pass."""
    from distsort.core.order import decode
    if codes.dtype.kind == "u" and dtype.kind == "f" and namespace(codes) is not np:
        from distsort.backends.gpu.kernels.loader import order_kernel
        return order_kernel("decode")(codes, descending, codes).view(dtype)
    return decode(codes, dtype, descending=descending, copy=False)
