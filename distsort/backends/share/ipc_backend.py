"""The CuPy backend for GPU workers of one host: chunks shared through CUDA IPC.

The functions of :mod:`distsort.backends.gpu.cupy_backend`, and for the compare-splits
``share`` and ``merge_low_shared`` / ``merge_high_shared``: each merge gets the
partner's whole chunk as a :class:`~distsort.backends.share.cuda_ipc.Shared` (handles,
no data), finds the crossing count across the two GPUs and copies only the
crossing elements (see :mod:`distsort.backends.share.cuda_ipc`).  The graph uses them
instead of ``edges``/``head``/``tail`` when the backend has ``share``;
``distsort.sort`` picks this backend where its plan says so (``distsort.plan.sortplan``).
"""
from __future__ import annotations

from distsort.backends.share.cuda_ipc import copy_in, opened, share  # noqa: F401  (the Backend's share)
from distsort.backends.gpu.cupy_backend import (crossing_bound, crossing_count,  # noqa: F401  (the Backend)
                                finish_keys, finish_values, head, length, make_chunk, merge_high,
                                merge_low, parts, prepare, probe, slice_chunk, sort_blocks,
                                sort_owned, tail)

#: ``distsort.backends.CAPABILITIES``: those of ``distsort.backends.gpu.cupy_backend``,
# and ``share``.
CAPABILITIES = frozenset({"local", "sort_owned", "share"})


def _fetched(part, borrowed):
    """``part``, copied into this GPU where it is another worker's memory."""
    if not borrowed:
        return part
    keys, values = parts(part)
    return make_chunk(copy_in(keys), None if values is None else copy_in(values))


def merge_low_shared(a, b, order):
    """``merge_low`` of ``a`` and the higher chunk ``b``, shared whole: only ``b``'s
    crossing elements are read (copied, when ``b`` is on another GPU)."""
    with opened(b) as (b_open, borrowed):
        k = crossing_count(a, b_open, order.descending)
        head_part = _fetched(slice_chunk(b_open, 0, k), borrowed)
    return merge_low(a, head_part, order, k)


def merge_high_shared(b, a, order):
    """``merge_high`` of ``b`` and the lower chunk ``a``, shared whole."""
    with opened(a) as (a_open, borrowed):
        k = crossing_count(a_open, b, order.descending)
        n = length(a_open)
        tail_part = _fetched(slice_chunk(a_open, n - k, n), borrowed)
    return merge_high(b, tail_part, order, k)
