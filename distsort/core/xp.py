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


def address(x: Any) -> int:
    """The address of the first element of a NumPy or CuPy array (host or device).

    >>> a = np.arange(4, dtype=np.int64)
    >>> address(a[1:]) - address(a)
    8
    """
    data = x.data
    return int(data.ptr) if hasattr(data, "ptr") else int(x.__array_interface__["data"][0])
