"""The signed ``total`` codes of a keys-only chunk in one compiled pass, and back.

The NumPy backend sorts a keys-only chunk as the ``total`` codes of
:mod:`distsort.core.order` with the sign bit flipped, viewed as signed integers
(``distsort.backends.cpu.numpy_backend._signed``).  In NumPy that is five to seven passes over the
chunk, each with a temporary array, about as long as sorting the codes; here it is one
pass that reads each key once and writes its code once, and the same for the way back
(``decode``); the figures: ``docs/performance.md``.

Every map is a fixed bit operation on the key's unsigned bit pattern ``u`` of width
``B`` (sign bit ``S``), so the compiled codes are the NumPy ones bit for bit::

    code   = ((u ^ mask(u)) - shift) ^ flip
    mask   = S | -(u >> (B - 1))      floats (all ones for negative keys)
           = S                        signed integers
           = 0                        unsigned integers and bools
    shift  = 2**nmant - 1             floats ascending (NaNs last), else 0
           = -(2**nmant - 1)          floats descending (NaNs still last)
    flip   = S ^ (all ones if descending else 0)

``flip`` folds ``descending`` (the complement) and ``_signed`` (the sign bit) into
one xor.  The inverse takes ``c = code ^ flip``, ``v = c + shift`` and for floats
``u = v ^ (S | ((v >> (B - 1)) - 1))`` (``v`` modulo ``2**B``).

Like :mod:`distsort.backends.cpu.merge` this needs numba (``ENABLED`` there switches
both); :func:`signed_codes` and :func:`keys_from_signed` return None without it and
the backend keeps its NumPy code.

>>> import numpy as np
>>> x = np.array([1.5, -0.0, np.nan, -2.0], dtype=np.float32).repeat(COMPILED_FROM)
>>> c = signed_codes(x, descending=False)  # None without numba
>>> back = x if c is None else keys_from_signed(np.sort(c), x.dtype, False)
>>> c is None or back[:3 * COMPILED_FROM:COMPILED_FROM].tolist() == [-2.0, -0.0, 1.5]
True
"""
from __future__ import annotations

import numpy as np

from distsort.core.order import code_shift
from distsort.backends.cpu import merge as _merge
# chunks shorter than this keep NumPy's code
from distsort.backends.cpu.numpy_backend import COMPILED_FROM


def _encode_py(u, out, consts):
    """``out[i] = ((u[i] ^ mask) - shift) ^ flip`` (module docstring).

    ``consts`` holds ``S, shift, flip, B - 1, F, 1`` in ``u``'s dtype (``F``: all
    ones for floats, else 0), so that no operation mixes signedness (numba makes
    float64 of uint64 and int64); a result wider than ``B`` bits is cut to ``B``
    where it is stored.  No branch in the loop, so that it vectorizes.
    """
    sign, shift, flip, top, floats = consts[0], consts[1], consts[2], consts[3], consts[4]
    zero = consts[1] - consts[1]
    for i in range(u.shape[0]):
        x = u[i]
        mask = sign | ((zero - (x >> top)) & floats)
        out[i] = ((x ^ mask) - shift) ^ flip


def _decode_py(codes, out, consts, is_float):
    """The inverse of :func:`_encode_py` (``consts`` as there, and ``2**B - 1``): key
    bits from the codes (``out`` may be ``codes``)."""
    sign, shift, flip, top, one = consts[0], consts[1], consts[2], consts[3], consts[5]
    ones = consts[6]
    for i in range(codes.shape[0]):
        # numba widens narrow unsigned operands to int64: the sum is cut back to the
        # key's width before its top bit is read.
        v = ((codes[i] ^ flip) + shift) & ones
        if is_float:
            v ^= sign | ((v >> top) - one)
        elif sign:  # signed integers: the sign bit back
            v ^= sign
        out[i] = v


_KERNELS = {}


def _kernel(name):
    """The compiled kernel (``nogil``: the threads of a Dask round run theirs at once)."""
    if name not in _KERNELS:
        fn = {"encode": _encode_py, "decode": _decode_py}[name]
        _KERNELS[name] = _merge.numba.njit(cache=True, nogil=True)(fn)
    return _KERNELS[name]


def _constants(dtype, descending):
    """``(consts, is_float)`` of the module docstring's maps for keys of ``dtype``."""
    dtype = np.dtype(dtype)
    bits = 8 * dtype.itemsize
    udt = np.dtype(f"u{dtype.itemsize}")
    sign = 1 << (bits - 1)
    ones = (1 << bits) - 1
    is_float = dtype.kind == "f"
    shift = code_shift(dtype, descending)
    mask_sign = sign if dtype.kind in "fi" else 0
    flip = sign ^ (ones if descending else 0)
    floats = ones if is_float else 0
    return (np.array([mask_sign, shift, flip, bits - 1, floats, 1, ones], dtype=udt),
            is_float)


def _usable(n):
    return _merge.ENABLED and n >= COMPILED_FROM


def signed_codes(keys, descending):
    """The signed ``total`` codes of 1-D NumPy ``keys`` (a new array), or None where the
    compiled code does not serve (no numba, a short chunk)."""
    keys = np.ascontiguousarray(keys)
    if keys.ndim != 1 or not _usable(keys.shape[0]):
        return None
    width = keys.dtype.itemsize
    consts, is_float = _constants(keys.dtype, descending)
    out = np.empty(keys.shape[0], dtype=f"u{width}")
    _kernel("encode")(keys.view(f"u{width}"), out, consts)
    return out.view(f"i{width}")


def keys_from_signed(codes, dtype, descending):
    """Keys of ``dtype`` from sorted signed codes (a new array: ``codes`` may be a view
    that other tasks read), or None where the compiled code does not serve."""
    if codes.ndim != 1 or not _usable(codes.shape[0]):
        return None
    width = codes.dtype.itemsize
    consts, is_float = _constants(dtype, descending)
    out = np.empty(codes.shape[0], dtype=f"u{width}")
    _kernel("decode")(np.ascontiguousarray(codes).view(f"u{width}"), out, consts, is_float)
    return out.view(dtype)
