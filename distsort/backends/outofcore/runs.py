"""Sorted runs as out-of-core sorts hold them in host memory: the keys in the user's
dtype, or a ``(keys, values)`` tuple; what the merge engines and
``distsort.backends.outofcore.hostruns`` share.

>>> run = make_run(np.array([1, 2, 3]), np.array([7, 8, 9]))
>>> length(run), parts(slice_run(run, 1, 3))[1].tolist()
(3, [8, 9])
"""
from __future__ import annotations

import numpy as np

from ...chunk import length, parts  # noqa: F401  (re-exported for the engines)
from ...chunk import make_chunk as make_run, slice_chunk as slice_run  # noqa: F401

__all__ = ["parts", "make_run", "length", "slice_run", "positions"]


def positions(starts, pieces):
    """The positions of the elements of ``pieces`` whose first ones are at ``starts``.

    >>> positions([10, 0], [np.zeros(2), np.zeros(3)])
    array([10, 11,  0,  1,  2])
    """
    return np.concatenate([np.arange(s, s + p.size, dtype=np.int64)
                           for s, p in zip(starts, pieces, strict=True)])
