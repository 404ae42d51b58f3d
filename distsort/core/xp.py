"""NumPy or CuPy: the one answer to "which array library holds this?".

distsort runs the same code on NumPy and CuPy arrays, picking the library from the
array at hand (the ``xp`` of the array API standard).  Every module asks here.

>>> import numpy as np
>>> namespace(np.zeros(3)) is np
True
>>> namespace(np.ma.zeros(3), strict=True)
Traceback (most recent call last):
    ...
TypeError: distsort sorts NumPy or CuPy chunks, not numpy.ma.MaskedArray
"""
from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np


def namespace(x: Any, *, strict: bool = False) -> ModuleType:
    """The module of ``x``: ``cupy`` for CuPy arrays, else ``numpy``.

    ``strict``: anything but a NumPy or CuPy ``ndarray`` raises TypeError.  Subclasses
    (masked arrays, matrices) are refused too: their extra state would be lost.  The
    module's ``__name__`` names it (``"numpy"`` or ``"cupy"``).
    """
    kind = type(x)
    top = kind.__module__.split(".")[0]
    if strict and (kind.__name__ != "ndarray" or top not in ("numpy", "cupy")):
        raise TypeError(f"distsort sorts NumPy or CuPy chunks, not {kind.__module__}."
                        f"{kind.__name__}")
    if top == "cupy":
        import cupy
        return cupy
    return np


def host_copy(x: Any, index: Any = None) -> np.ndarray:
    """A NumPy copy of ``x`` (or of ``x[index]``, ``index`` a slice or a NumPy array of
    positions): from a GPU for CuPy arrays, where the gather runs on the device and only
    its result travels.

    >>> a = np.arange(5)
    >>> b = host_copy(a, slice(1, 3)); b[0] = 9; a.tolist(), b.tolist()
    ([0, 1, 2, 3, 4], [9, 2])
    >>> host_copy(a, np.array([4, 0])).tolist()
    [4, 0]
    """
    xp = namespace(x)
    if index is not None:
        x = x[index if isinstance(index, slice) else xp.asarray(index)]
    return x.copy() if xp is np else x.get()


def address(x: Any) -> int:
    """The address of the first element of a NumPy or CuPy array (host or device).

    >>> a = np.arange(4, dtype=np.int64)
    >>> address(a[1:]) - address(a)
    8
    """
    data = x.data
    return int(data.ptr) if hasattr(data, "ptr") else int(x.__array_interface__["data"][0])
