"""libc's functions that NumPy and the standard library do not offer (Linux), for the
file paths: ``fallocate`` to punch holes, ``sync_file_range`` to write behind.

>>> libc("no_such_function") is None
True
"""
from __future__ import annotations

import ctypes
import functools
from typing import Any


@functools.cache
def libc(name: str, *argtypes: Any) -> Any | None:
    """libc's function ``name`` taking ``argtypes`` and returning an int, or None where
    the system has none."""
    try:
        f = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    f.argtypes = list(argtypes)
    f.restype = ctypes.c_int
    return f
