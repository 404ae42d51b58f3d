"""The orders distsort sorts by, as maps from keys to unsigned integers.

Every backend compares keys through one of two maps onto unsigned integers of the
key's width, so that NumPy and CUDA code agree bit for bit:

``total``
    A bijection, used when keys are sorted alone.  Integers keep their order,
    floats follow NumPy's (``-inf < ... < -0.0 < +0.0 < ... < +inf < NaN``), every
    NaN, whatever its sign and payload, sorts after ``+inf``, and since the map is
    invertible the sorted keys come back bit for bit (NaN payloads, ``-0.0``).
``canonical``
    ``total`` after mapping ``-0.0`` to ``+0.0`` and every NaN to one NaN: keys that
    NumPy calls equal get one code.  Used with values (argsort, sort_by_key),
    where ties are broken by the value, as ``numpy.argsort(kind="stable")`` does
    with positions.

``descending`` complements the code, so a descending sort is an ascending sort of
the complemented codes: for keys alone exactly the reverse of the ascending order.

The CUDA kernels implement the same maps in ``kernels/order.cuh``.
"""
from __future__ import annotations

import numpy as np

#: dtypes distsort sorts, by kind and item size.
SUPPORTED_KINDS = "biuf"


def check_dtype(dtype, what="keys"):
    """Raise TypeError unless ``dtype`` is one distsort can sort."""
    dtype = np.dtype(dtype)
    if dtype.kind not in SUPPORTED_KINDS or dtype.fields is not None or dtype.itemsize > 8:
        raise TypeError(
            f"distsort cannot sort {what} of dtype {dtype!r}: supported are bool, "
            "(u)int8..64 and float16/32/64 (complex, object, string, datetime and "
            "structured dtypes are not)"
        )
    return dtype


def code_dtype(dtype):
    """The unsigned integer dtype of the codes of ``dtype``."""
    return np.dtype(f"u{np.dtype(dtype).itemsize}")


def _float_constants(dtype):
    info = np.finfo(dtype)
    bits = 8 * dtype.itemsize
    sign = 1 << (bits - 1)
    exp_mask = ((1 << (bits - 1 - info.nmant)) - 1) << info.nmant
    # Negative NaNs are the lowest codes after the sign fold; rotating by their
    # count moves them above the positive NaNs, so every NaN sorts last.
    n_negative_nans = (1 << info.nmant) - 1
    return sign, exp_mask, n_negative_nans, info.nmant


#: Elements per block of the in-place passes of ``decode``.
_BLOCK = 1 << 16


def _namespace(x):
    """NumPy or CuPy, whichever ``x`` belongs to (the maps work on both)."""
    if type(x).__module__.split(".")[0] == "cupy":
        import cupy
        return cupy
    return np


def encode(keys, *, canonical=False, descending=False):
    """Codes of ``keys`` (a new array of unsigned integers of the same width).

    Works on NumPy and CuPy arrays alike.
    """
    xp = _namespace(keys)
    keys = xp.asarray(keys)
    dtype = keys.dtype
    udt = code_dtype(dtype)
    bits = 8 * dtype.itemsize
    u = keys.view(udt)
    if dtype.kind == "f":
        sign, exp_mask, n_neg_nans, nmant = _float_constants(dtype)
        if canonical:
            u = u.copy()
            u[u == udt.type(sign)] = 0
            u[xp.isnan(keys)] = udt.type(exp_mask | (1 << (nmant - 1)))
        # Negative floats flip every bit, positive ones only the sign: one mask per key.
        code = u >> udt.type(bits - 1)
        xp.negative(code, out=code)
        code |= udt.type(sign)
        code ^= u
        code -= udt.type(n_neg_nans)  # wraps modulo 2**bits, as intended
    elif dtype.kind == "i":
        code = u ^ udt.type(1 << (bits - 1))
    else:
        code = u.copy()
    if descending:
        xp.invert(code, out=code)
    return code


def decode(codes, dtype, *, descending=False, copy=True):
    """Keys of ``dtype`` from their ``total`` codes (the inverse of ``encode``).

    With ``copy=False`` the codes are overwritten and returned as keys.
    """
    xp = _namespace(codes)
    dtype = np.dtype(dtype)
    udt = code_dtype(dtype)
    if descending:
        u = xp.invert(codes) if copy else xp.invert(codes, out=codes)
    else:
        u = codes.copy() if copy else codes
    bits = 8 * dtype.itemsize
    if dtype.kind == "i":
        u ^= udt.type(1 << (bits - 1))
    elif dtype.kind == "f":
        sign, _, n_neg_nans, _ = _float_constants(dtype)
        u += udt.type(n_neg_nans)
        # On the CPU in blocks, so the mask is a small reused buffer, not a second array.
        flat = u.reshape(-1)
        block = _BLOCK if xp is np else max(1, flat.size)
        for start in range(0, flat.size, block):
            part = flat[start:start + block]
            mask = part >> udt.type(bits - 1)
            mask -= udt.type(1)  # codes with the sign bit came from positive keys
            mask |= udt.type(sign)
            part ^= mask
    return u.view(dtype)
