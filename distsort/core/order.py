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

``descending`` maps the code so that an ascending sort of the new codes is NumPy's
descending order: every value that is not NaN in the reverse order, and the NaNs
still last (NumPy >= 2.5: "NaNs are sorted to the end for both orders").  For floats
the descending code is ``~(code + n_nan)`` modulo ``2**bits`` (``n_nan``: the number of
NaN bit patterns, the top codes of ``total``): the codes that are not NaN's are
complemented, the NaNs' wrap round to the bottom and are complemented back to the top.
For other dtypes it is the complement.  Either way a bijection, so the keys come back
bit for bit.

The CUDA kernels implement the same maps in ``kernels/order.cuh``.

datetime64 and timedelta64 keys and values never reach the backends: the public
functions map them elementwise to uint64 codes with :func:`time_codes` (NaT, which
is int64's minimum, becomes the largest code, so it sorts last as in NumPy) and
back with :func:`time_from_codes`.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from distsort.core.xp import namespace

#: A NumPy or CuPy array (CuPy is optional, so its arrays are typed loosely).
Array = Any

#: dtypes the backends sort, by kind and item size.
SUPPORTED_KINDS = "biuf"
#: datetime64 ("M") and timedelta64 ("m"): sorted as the uint64 codes of ``time_codes``.
TIME_KINDS = "mM"


# Codes are at most 64 bits.
_MAX_BYTES = 8


def _refuse(dtype: np.dtype, what: str, supported: str, unsupported: str) -> TypeError:
    """The TypeError for a dtype distsort does not sort, naming what it does."""
    return TypeError(f"distsort cannot sort {what} of dtype {dtype!r}: supported are "
                     f"{supported} ({unsupported} are not)")


def _sortable(dtype: np.dtype) -> bool:
    return (dtype.kind in SUPPORTED_KINDS and dtype.fields is None
            and dtype.itemsize <= _MAX_BYTES)


def check_dtype(dtype: DTypeLike, what: str = "keys") -> np.dtype:
    """Raise TypeError unless ``dtype`` is one distsort can sort."""
    dtype = np.dtype(dtype)
    if not _sortable(dtype):
        raise _refuse(dtype, what, "bool, (u)int8..64 and float16/32/64",
                      "complex, object, string, datetime and structured dtypes")
    return dtype


def check_key_dtype(dtype: DTypeLike, what: str = "keys") -> np.dtype:
    """Raise TypeError unless ``dtype`` is one the public functions sort
    (those of :func:`check_dtype`, datetime64 and timedelta64 of any unit)."""
    dtype = np.dtype(dtype)
    if dtype.kind not in TIME_KINDS and not _sortable(dtype):
        raise _refuse(dtype, what, "bool, (u)int8..64, float16/32/64, datetime64 and "
                      "timedelta64", "complex, object, string and structured dtypes")
    return dtype


_TIME_SIGN = np.uint64(1 << 63)


def time_codes(x: Array, descending: bool = False) -> Array:
    """uint64 order codes of datetime64/timedelta64 ``x`` (a new array): NaT last.

    The int64 view with its sign bit flipped keeps the order, then minus one
    (modulo 2**64) sends NaT (int64's minimum, code 0) to the top and every other
    value one down: a bijection, so :func:`time_from_codes` gives back the bits.
    ``descending``: codes whose ascending order is the times' descending one, NaT
    still last: the complement of the flipped view (``~(v ^ sign)``, NaT at the top).

    >>> t = np.array(["2026-01-02", "NaT", "1969-12-31"], dtype="datetime64[D]")
    >>> codes = time_codes(t)
    >>> t[np.argsort(codes)]
    array(['1969-12-31', '2026-01-02',        'NaT'], dtype='datetime64[D]')
    >>> bool((time_from_codes(codes, t.dtype) == t)[[0, 2]].all())
    True
    >>> t[np.argsort(time_codes(t, descending=True))]
    array(['2026-01-02', '1969-12-31',        'NaT'], dtype='datetime64[D]')
    """
    if descending:
        return x.view(np.uint64) ^ ~_TIME_SIGN
    code = x.view(np.uint64) ^ _TIME_SIGN
    code -= np.uint64(1)  # wraps modulo 2**64, as intended: NaT goes to the top
    return code


def time_from_codes(codes: Array, dtype: DTypeLike, descending: bool = False) -> Array:
    """The datetime64/timedelta64 values of ``dtype`` whose :func:`time_codes` (with
    ``descending``) are ``codes``."""
    if descending:
        return (codes ^ ~_TIME_SIGN).view(dtype)
    u = codes + np.uint64(1)
    u ^= _TIME_SIGN
    return u.view(dtype)


def as_sortable(x: Array | None, descending: bool = False) -> Array | None:
    """datetime64/timedelta64 ``x`` as its :func:`time_codes` (``descending``: sorted
    ascending, they give the descending order, NaT last); other arrays (and None)
    as they are: what the sorts and the summaries order.

    >>> as_sortable(np.array(["NaT"], dtype="datetime64[s]")).dtype, as_sortable(None)
    (dtype('uint64'), None)
    """
    if x is None or x.dtype.kind not in TIME_KINDS:
        return x
    return time_codes(x, descending)


def from_sortable(x: Array, dtype: DTypeLike, descending: bool = False) -> Array:
    """The inverse of :func:`as_sortable` for an array of ``dtype``."""
    if np.dtype(dtype).kind in TIME_KINDS:
        return time_from_codes(x, dtype, descending)
    return x


def code_dtype(dtype: DTypeLike) -> np.dtype:
    """The unsigned integer dtype of the codes of ``dtype``."""
    return np.dtype(f"u{np.dtype(dtype).itemsize}")


def _float_constants(dtype: np.dtype) -> tuple[int, int, int, int]:
    info = np.finfo(dtype)
    bits = 8 * dtype.itemsize
    sign = 1 << (bits - 1)
    exp_mask = ((1 << (bits - 1 - info.nmant)) - 1) << info.nmant
    # Negative NaNs are the lowest codes after the sign fold; rotating by their
    # count moves them above the positive NaNs, so every NaN sorts last.
    n_negative_nans = (1 << info.nmant) - 1
    return sign, exp_mask, n_negative_nans, info.nmant


def code_shift(dtype: DTypeLike, descending: bool = False) -> int:
    """What the codes of ``dtype`` subtract from the sign-folded bits, modulo
    ``2**bits``: for floats the count of negative NaNs (so that every NaN sorts last),
    and its negation where ``descending`` (``(folded + n) ^ ones`` is the descending
    code of the module docstring, ``n`` the negative NaNs' count, half of all NaNs);
    0 for other dtypes.

    >>> f2 = np.dtype("f2")
    >>> code_shift(f2), code_shift(f2, True), code_shift(np.dtype("i4"), True)
    (1023, 64513, 0)
    """
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        return 0
    n = _float_constants(dtype)[2]
    return (-n) % (1 << (8 * dtype.itemsize)) if descending else n


#: Elements per block of the in-place passes of ``decode``.
_BLOCK = 1 << 16


def encode(keys: Array, *, canonical: bool = False, descending: bool = False) -> Array:
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
        sign, exp_mask, _, nmant = _float_constants(dtype)
        if canonical:
            u = u.copy()
            u[u == udt.type(sign)] = 0
            u[xp.isnan(keys)] = udt.type(exp_mask | (1 << (nmant - 1)))
        # Negative floats flip every bit, positive ones only the sign: one mask per key.
        code = u >> udt.type(bits - 1)
        xp.negative(code, out=code)
        code |= udt.type(sign)
        code ^= u
        # wraps modulo 2**bits, as intended; descending: the module docstring's map
        code -= udt.type(code_shift(dtype, descending))
    elif dtype.kind == "i":
        code = u ^ udt.type(1 << (bits - 1))
    else:
        code = u.copy()
    if descending:
        xp.invert(code, out=code)
    return code


def decode(codes: Array, dtype: DTypeLike, *, descending: bool = False,
           copy: bool = True) -> Array:
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
        sign = _float_constants(dtype)[0]
        u += udt.type(code_shift(dtype, descending))
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
