"""Buffers kept for the next task that takes them, laid out in memory as ranges of a
file are, so that their whole pages go straight to and from the disk (``O_DIRECT``).

>>> scratch("x", 3, np.int8).base is scratch("x", 2, np.int8).base
True
"""
from __future__ import annotations

import threading

import numpy as np

__all__ = ["Buffers", "scratch", "task_buffers", "PAGE"]

#: Bytes of a page: the unit of ``O_DIRECT`` transfers and of hole punching.
PAGE = 4096


class Buffers:
    """Named buffers kept for the next task that takes them: fresh memory costs the
    kernel a page fault and a page of zeros every 4 KiB, up to 1.5 s of system time
    per GiB on the 2-core machine (``docs/out_of_core.md``)."""

    def __init__(self):
        self._raw = {}

    def array(self, name, n, dtype, pos=None):
        """An array of ``n`` elements of ``dtype`` in the buffer ``name``.  With
        ``pos``, its address is ``pos`` modulo a page: laid out in memory as a range
        starting at byte ``pos`` of a file, so that its whole pages can be read and
        written with ``O_DIRECT``.  The task that takes it must be done with it before
        the buffer's next task takes it.

        >>> b = Buffers()
        >>> a = b.array("x", 10, np.float32, pos=4100)
        >>> (a.ctypes.data - 4100) % PAGE, b.array("x", 5, np.int8).base is a.base
        (0, True)
        """
        dtype = np.dtype(dtype)
        need = n * dtype.itemsize + PAGE
        raw = self._raw.get(name)
        if raw is None or raw.size < need:
            raw = self._raw[name] = np.empty(need, np.uint8)
        shift = 0 if pos is None else (pos - raw.ctypes.data) % PAGE
        return raw[shift:shift + n * dtype.itemsize].view(dtype)


_local = threading.local()


def scratch(name, n, dtype, pos=None):
    """:meth:`Buffers.array` of this thread's buffers (the radix sort's scratch, the
    staging buffer of ``O_DIRECT`` reads).

    >>> scratch("x", 3, np.int8).base is scratch("x", 2, np.int8).base
    True
    """
    if not hasattr(_local, "buffers"):
        _local.buffers = Buffers()
    return _local.buffers.array(name, n, dtype, pos)


def task_buffers():
    """The buffers of the task thread calling (one per task in flight: a task's
    buffers are its own until it ends)."""
    if not hasattr(_local, "task"):
        _local.task = Buffers()
    return _local.task
