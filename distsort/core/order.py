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

datetime64 and timedelta64 keys and values never reach the backends: the public
functions map them elementwise to uint64 codes with :func:`time_codes` (NaT, which
is int64's minimum, becomes the largest code, so it sorts last as in NumPy) and
back with :func:`time_from_codes`.
"""
from __future__ import annotations

import numpy as np

from distsort.core.xp import namespace

#: dtypes the backends sort, by kind and item size.
SUPPORTED_KINDS = "biuf"
#: datetime64 ("M") and timedelta64 ("m"): sorted as the uint64 codes of ``time_codes``.
TIME_KINDS = "mM"


# Codes are at most 64 bits.
_MAX_BYTES = 8


def _refuse(dtype, what, supported, unsupported):
    """The TypeError for a dtype distsort does not sort, naming what it does."""
    return TypeError(f"distsort cannot sort {what} of dtype {dtype!r}: supported are "
                     f"{supported} ({unsupported} are not)")


def _sortable(dtype):
    return (dtype.kind in SUPPORTED_KINDS and dtype.fields is None
            and dtype.itemsize <= _MAX_BYTES)


def check_dtype(dtype, what="keys"):
    """Raise TypeError unless ``dtype`` is one distsort can sort."""
    dtype = np.dtype(dtype)
    if not _sortable(dtype):
        raise _refuse(dtype, what, "bool, (u)int8..64 and float16/32/64",
                      "complex, object, string, datetime and structured dtypes")
    return dtype


def check_key_dtype(dtype, what="keys"):
    """Raise TypeError unless ``dtype`` is one the public functions sort
    (those of :func:`check_dtype`, datetime64 and timedelta64 of any unit)."""
    dtype = np.dtype(dtype)
    if dtype.kind not in TIME_KINDS and not _sortable(dtype):
        raise _refuse(dtype, what, "bool, (u)int8..64, float16/32/64, datetime64 and "
                      "timedelta64", "complex, object, string and structured dtypes")
    return dtype


_TIME_SIGN = np.uint64(1 << 63)


def time_codes(x):
    """uint64 order codes of datetime64/timedelta64 ``x`` (a new array): NaT last.

    The int64 view with its sign bit flipped keeps the order, then minus one
    (modulo 2**64) sends NaT (int64's minimum, code 0) to the top and every other
    value one down: a bijection, so :func:`time_from_codes` gives back the bits.

    >>> t = np.array(["2026-01-02", "NaT", "1969-12-31"], dtype="datetime64[D]")
    >>> codes = time_codes(t)
    >>> t[np.argsort(codes)]
    array(['1969-12-31', '2026-01-02',        'NaT'], dtype='datetime64[D]')
    >>> bool((time_from_codes(codes, t.dtype) == t)[[0, 2]].all())
    True
    """
    code = x.view(np.uint64) ^ _TIME_SIGN
    code -= np.uint64(1)  # wraps modulo 2**64, as intended: NaT goes to the top
    return code


def time_from_codes(codes, dtype):
    """The datetime64/timedelta64 values of ``dtype`` whose :func:`time_codes` are ``codes``."""
    u = codes + np.uint64(1)
    u ^= _TIME_SIGN
    return u.view(dtype)


def as_sortable(x):
    """datetime64/timedelta64 ``x`` as its :func:`time_codes`; other arrays (and None)
    as they are: what the sorts and the summaries order.

    >>> as_sortable(np.array(["NaT"], dtype="datetime64[s]")).dtype, as_sortable(None)
    (dtype('uint64'), None)
    """
    return x if x is None or x.dtype.kind not in TIME_KINDS else time_codes(x)


def from_sortable(x, dtype):
    """The inverse of :func:`as_sortable` for an array of ``dtype``."""
    return time_from_codes(x, dtype) if np.dtype(dtype).kind in TIME_KINDS else x


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


def encode(keys, *, canonical=False, descending=False):
    """Codes of ``keys`` (a new array of unsigned integers of the same width).

    Works on NumPy and CuPy arrays alike.
    """
    xp = namespace(keys)
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
    xp = namespace(codes)
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
