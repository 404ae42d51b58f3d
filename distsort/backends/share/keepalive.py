"""Objects kept alive until another process of this host says it is done with them.

A chunk shared through CUDA IPC (``cuda_ipc``) is read by its partner's merge in
another worker process.  Dask's reference to the share cannot guard that read:
once the partner holds a replica of the share, distributed's active memory manager
may drop the owner's (the partner has a task running on it, the owner none), and
the owner would free memory that the partner is still copying.  So the owner also
*pins* the chunk here, and the reader, when its copy is done, sets a byte that the
owner polls: a file of flags in shared memory (``/dev/shm``), one byte per pin.

A pin whose reader never comes (a cancelled sort) is held until the process ends.

>>> import time
>>> p = Pins()
>>> ticket = p.pin(["some", "object"])
>>> mark_read(*ticket)  # what the reader does, in its own process
>>> for _ in range(500):  # the owner's poller releases it within a few ms
...     if not len(p):
...         break
...     time.sleep(0.01)
>>> len(p)
0
"""
from __future__ import annotations

import atexit
import mmap
import os
import tempfile
import threading
import time
import uuid
import contextlib

#: Seconds between two looks at the flags while pins are held.
POLL_S = 0.002


def _shm_dir():
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


class Pins:
    """Objects held until their flag is set; ``pin`` returns the ticket ``(path, slot)``
    that the reader passes to :func:`mark_read`."""

    SLOTS = 1 << 16

    def __init__(self):
        self.path = os.path.join(_shm_dir(), f"distsort-pins-{os.getpid()}-{uuid.uuid4().hex}")
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, self.SLOTS)
            self._flags = mmap.mmap(fd, self.SLOTS)
        finally:
            os.close(fd)
        atexit.register(self.close)
        self._free = list(range(self.SLOTS - 1, -1, -1))
        self._held = {}  # slot -> object
        self._lock = threading.Lock()
        self._poller = None

    def __len__(self):
        with self._lock:
            return len(self._held)

    def pin(self, obj):
        with self._lock:
            if not self._free:
                raise RuntimeError(f"more than {self.SLOTS} pinned objects")
            slot = self._free.pop()
            self._flags[slot] = 0
            self._held[slot] = obj
            if self._poller is None:
                self._poller = threading.Thread(target=self._poll, name="distsort-pins",
                                                daemon=True)
                self._poller.start()
        return self.path, slot

    def release_read(self):
        """Release every object whose reader is done."""
        with self._lock:
            for slot in [s for s in self._held if self._flags[s]]:
                del self._held[slot]
                self._free.append(slot)

    def _poll(self):
        while True:
            time.sleep(POLL_S)
            self.release_read()
            with self._lock:
                if not self._held:
                    self._poller = None
                    return

    def close(self):
        with contextlib.suppress(OSError):
            os.unlink(self.path)


_maps = {}  # path -> mmap, in the reader
_maps_lock = threading.Lock()


def mark_read(path, slot):
    """Tell the owner of ``(path, slot)`` that this process is done with the object."""
    with _maps_lock:
        flags = _maps.get(path)
        if flags is None:
            fd = os.open(path, os.O_RDWR)
            try:
                flags = _maps[path] = mmap.mmap(fd, Pins.SLOTS)
            finally:
                os.close(fd)
    flags[slot] = 1


_pins = {}  # pid -> Pins (a forked child makes its own)
_pins_lock = threading.Lock()


def process_pins():
    """This process's :class:`Pins` (made on first use)."""
    with _pins_lock:
        p = _pins.get(os.getpid())
        if p is None:
            p = _pins[os.getpid()] = Pins()
        return p
