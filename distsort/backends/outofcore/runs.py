"""Sorted runs as out-of-core sorts hold them in host memory: the keys in the user's
dtype, or a ``(keys, values)`` tuple; what the merge engines and
``distsort.backends.outofcore.hostruns`` share.

>>> run = make_run(np.array([1, 2, 3]), np.array([7, 8, 9]))
>>> length(run), parts(slice_run(run, 1, 3))[1].tolist()
(3, [8, 9])
"""
from __future__ import annotations

import numpy as np

__all__ = ["parts", "make_run", "length", "slice_run", "positions"]


def parts(run):
    """``(keys, values or None)`` of a run."""
    return run if isinstance(run, tuple) else (run, None)


def make_run(keys, values):
    return keys if values is None else (keys, values)


def length(run):
    return len(parts(run)[0])


def slice_run(run, start, stop):
    keys, values = parts(run)
    return make_run(keys[start:stop], None if values is None else values[start:stop])


def positions(starts, pieces):
    """The positions of the elements of ``pieces`` whose first ones are at ``starts``.

    >>> positions([10, 0], [np.zeros(2), np.zeros(3)])
    array([10, 11,  0,  1,  2])
    """
    return np.concatenate([np.arange(s, s + p.size, dtype=np.int64)
                           for s, p in zip(starts, pieces, strict=True)])
