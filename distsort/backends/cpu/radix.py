"""An LSD radix sort of keys alone on one core, the codes made from the keys' bits on
the way in and the keys made back on the way out (numba).

The larger-than-memory path (:mod:`distsort.disksort`) sorts every element twice on
the CPU, once to form its run and once in the k-way merge, and the CPU is its limit
on a machine of two cores: NumPy's sort of 32 M float32 ran at 14-24 M elements/s
on the shared 2-core machine (2026-11-25).  This sort reads the keys once to count
every digit, then moves them once per digit of 11 bits (three moves for 4-byte
keys), the first move writing the ``total`` codes of :mod:`distsort.order` and the
last one the keys again, so that no pass of its own encodes or decodes.

The codes are those of :mod:`distsort.backends.cpu.codes` (its constants, its bit
maps): a bijection of the keys' bits, so the result is NumPy's order bit for bit
(NaNs last, ``-0.0`` before ``+0.0``), and descending is the complement.  Where
numba is not importable, :func:`sort_keys` sorts the codes with NumPy.

>>> x = np.array([1.5, -0.0, np.nan, 0.0, -2.0], np.float32)
>>> sort_keys(x).tolist()
[-2.0, -0.0, 0.0, 1.5, nan]
>>> sort_keys(np.array([3, -1, 2], np.int16), descending=True).tolist()
[3, 2, -1]
"""
from __future__ import annotations

import numpy as np

from ...order import decode, encode
from . import merge as _merge
from .codes import _constants

#: Bits of a digit: 2048 counters per digit fit the core's first caches.
DIGIT_BITS = 11
#: Keys below this many are sorted by NumPy (the compiled code's call costs more).
RADIX_FROM = 1 << 12


def _sort_py(u, out, tmp, consts, is_float, passes):  # pragma: no cover - compiled
    """``out`` = the keys of bits ``u`` sorted by their codes (``tmp``: scratch of
    ``u``'s size and dtype; ``u`` is left as it was).

    ``consts`` are ``codes._constants``: ``S, shift, flip, B - 1, F, 1, 2**B - 1``
    (``S``: the sign bit of signed keys, 0 for others); the codes there are signed
    (``flip`` holds the top bit), so each digit is read from the code with its top
    bit flipped (the unsigned order).
    """
    sign, shift, flip, top, floats = consts[0], consts[1], consts[2], consts[3], consts[4]
    one, ones = consts[5], consts[6]
    zero = shift - shift
    high = one << top  # the top bit: signed codes to unsigned order and back
    n = u.shape[0]
    radix = 1 << DIGIT_BITS
    mask = radix - 1
    counts = np.zeros((passes, radix), np.int64)
    for i in range(n):
        x = u[i]
        c = (((x ^ (sign | ((zero - (x >> top)) & floats))) - shift) ^ flip) & ones
        c ^= high
        for p in range(passes):
            counts[p, (c >> (p * DIGIT_BITS)) & mask] += 1
    # A digit that every key shares moves nothing: such passes are skipped.
    live = np.zeros(passes, np.bool_)
    for p in range(passes):
        live[p] = counts[p].max() < n
        total = 0
        for d in range(radix):
            k = counts[p, d]
            counts[p, d] = total
            total += k
    last, left = -1, 0
    for p in range(passes):
        if live[p]:
            last = p
            left += 1
    src = u
    first = True
    for p in range(passes):
        if not live[p]:
            continue
        left -= 1  # live passes after this one: the last writes ``out``
        dst = out if left % 2 == 0 else tmp
        at = counts[p]
        for i in range(n):
            x = src[i]
            if first:  # keys in, codes out (unsigned order)
                x = ((((x ^ (sign | ((zero - (x >> top)) & floats))) - shift) ^ flip)
                     & ones) ^ high
            d = (x >> (p * DIGIT_BITS)) & mask
            if p == last:  # codes in, keys out
                v = (((x ^ high) ^ flip) + shift) & ones
                if is_float:
                    v ^= sign | ((v >> top) - one)
                elif sign:
                    v ^= sign
                x = v
            dst[at[d]] = x
            at[d] += 1
        src = dst
        first = False
    if last < 0:  # every key equal: nothing moved
        out[:] = u


_KERNEL = {}


def _kernel():
    if "sort" not in _KERNEL:
        _KERNEL["sort"] = _merge.numba.njit(cache=True, nogil=True)(_sort_py)
    return _KERNEL["sort"]


def sort_keys(keys, descending=False, out=None, tmp=None):
    """Keys of a 1-D NumPy array sorted in NumPy's order (``descending``: the
    reverse, NaNs first), into ``out`` (a new array where None); ``tmp``: scratch of
    the keys' size and dtype (allocated where None).  ``keys`` is left as it was.

    >>> sort_keys(np.array([True, False, True])).tolist()
    [False, True, True]
    """
    keys = np.ascontiguousarray(keys)
    out = np.empty_like(keys) if out is None else out
    if not _merge.ENABLED or keys.shape[0] < RADIX_FROM:
        codes = encode(keys, descending=descending)
        codes.sort()
        out[...] = decode(codes, keys.dtype, descending=descending, copy=False)
        return out
    width = keys.dtype.itemsize
    udt = np.dtype(f"u{width}")
    tmp = np.empty(keys.shape[0], udt) if tmp is None else tmp.view(udt)
    consts, is_float = _constants(keys.dtype, descending)
    passes = -(-8 * width // DIGIT_BITS)
    _kernel()(keys.view(udt), out.view(udt), tmp, consts, is_float, passes)
    return out
