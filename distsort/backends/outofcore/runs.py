"""Sorted runs as out-of-core sorts hold them in host memory: the keys in the user's
dtype, or a ``(keys, values)`` tuple, made, cut and read by ``distsort.backends.chunk``
(``make_chunk``, ``slice_chunk``, ``parts``, ``length``); what the merge engines and
``distsort.backends.outofcore.hostruns`` share beyond those: the positions of pieces,
and claims on runs.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from distsort.backends.chunk import parts

__all__ = ["positions", "claim"]


def positions(starts, pieces):
    """The positions of the elements of ``pieces`` whose first ones are at ``starts``.

    >>> positions([10, 0], [np.zeros(2), np.zeros(3)])
    array([10, 11,  0,  1,  2])
    """
    return np.concatenate([np.arange(s, s + p.size, dtype=np.int64)
                           for s, p in zip(starts, pieces, strict=True)])


#: The first positions of the ranges of each run (by the ``id`` of its keys, while they
#: live) that a merge has written over (``claim``).
_CLAIMED: dict = {}
_CLAIM_LOCK = threading.Lock()


def claim(runs, first, last):
    """Mark ``run[first[i]:last[i]]`` of each of ``runs`` as written over by the merge
    that consumed it (the GPU engine keeps a merged chunk's host copy there).  Raises
    RuntimeError where a range was claimed before: a merge task that ran again (a
    retry) would read the output it wrote there instead of the run.

    >>> a, b = np.arange(4), np.arange(3)
    >>> claim([a, b], (0, 0), (2, 1)); claim([a, b], (2, 1), (4, 1))  # b's empty range
    >>> claim([a, b], (2, 1), (4, 3))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    RuntimeError: a k-way merge task ran again over run ranges it had written over...
    """
    with _CLAIM_LOCK:
        pairs = [(parts(r)[0], int(a)) for r, a, b in zip(runs, first, last, strict=True)
                 if b > a]
        if any(a in _CLAIMED.get(id(keys), ()) for keys, a in pairs):
            raise RuntimeError("a k-way merge task ran again over run ranges it had "
                               "written over (a retried task, or a run shared by two "
                               "sorts): compute the sort again from its input")
        for keys, a in pairs:
            if id(keys) not in _CLAIMED:
                _CLAIMED[id(keys)] = set()
                weakref.finalize(keys, _CLAIMED.pop, id(keys), None)
            _CLAIMED[id(keys)].add(a)
