"""The CuPy backend for GPU workers of one host: chunks shared through CUDA IPC.

The functions of :mod:`distsort.backends.cupy`, and for the compare-splits
``share`` and ``merge_low_shared`` / ``merge_high_shared``: each merge gets the
partner's whole chunk as a :class:`~distsort.backends.cuda_ipc.Shared` (handles,
no data), finds the crossing count across the two GPUs and copies only the
crossing elements (see :mod:`distsort.backends.cuda_ipc`).  The graph uses them
instead of ``edges``/``head``/``tail`` when the backend has ``share``;
``distsort.sort`` picks this backend through ``distsort.locality.share_crossing_parts``.
"""
from __future__ import annotations

from . import cupy as _plain
from .cuda_ipc import copy_in, opened, share  # noqa: F401
from .cupy import (crossing_bound, finish_keys, finish_values, head, length,  # noqa: F401
                   merge_high, merge_low, prepare, probe, sort_blocks,
                   sort_owned, tail)


def _fetched(part, borrowed):
    """``part``, copied into this GPU where it is another worker's memory."""
    if not borrowed:
        return part
    keys, values = _plain._parts(part)
    return _plain._chunk(copy_in(keys), None if values is None else copy_in(values))


def merge_low_shared(a, b, order):
    """``merge_low`` of ``a`` and the higher chunk ``b``, shared whole: only ``b``'s
    crossing elements are read (copied, when ``b`` is on another GPU)."""
    with opened(b) as (b, borrowed):
        k = _plain.crossing_count(a, b, order.descending)
        head_part = _fetched(_plain._slice(b, 0, k), borrowed)
    return merge_low(a, head_part, order, k)


def merge_high_shared(b, a, order):
    """``merge_high`` of ``b`` and the lower chunk ``a``, shared whole."""
    with opened(a) as (a, borrowed):
        k = _plain.crossing_count(a, b, order.descending)
        n = length(a)
        tail_part = _fetched(_plain._slice(a, n - k, n), borrowed)
    return merge_high(b, tail_part, order, k)
