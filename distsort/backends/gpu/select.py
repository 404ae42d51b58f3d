"""The counting pass of selection by rank on the GPU: ``kernels/select.cu``.

:func:`slot_pass` is ``distsort.backends.cpu.bands.slot_pass`` for CuPy codes: one
kernel reads every code once, counts the slots of up to 16 bounds in registers and
keeps the codes of the slots asked for (the bands' insides).  More bounds take several
passes, each over 16 of them, consecutive passes sharing one bound so that every slot
lies whole in one of them.
"""
from __future__ import annotations

import numpy as np

from distsort.backends.gpu.kernels.loader import SELECT_MAX_BOUNDS, select_kernels

__all__ = ["slot_pass", "groups"]

#: Threads per block and codes per thread per tile: ``SELECT_THREADS`` and
#: ``SELECT_ITEMS`` of ``select.cu``.
THREADS, ITEMS = 256, 8
#: Blocks per SM: enough resident warps to keep the reads in flight.
BLOCKS_PER_SM = 8
#: Kept codes that a first try makes room for at least.
MIN_ROOM = 1 << 16


def groups(nb, width=SELECT_MAX_BOUNDS[-1]):
    """First bounds of the passes over ``nb`` bounds, ``width`` at most each, each
    sharing its first bound with the pass before.

    >>> groups(0), groups(16), groups(17), groups(31), groups(32)
    ([0], [0], [0, 15], [0, 15], [0, 15, 30])
    """
    step = width - 1
    return [0] + list(range(step, max(nb - 1, 1), step)) if nb > width else [0]


def _owner(slot, firsts, width):
    """The pass (an index of ``firsts``) that holds global ``slot`` whole, and the
    slot's number in that pass."""
    step, last = width - 1, len(firsts) - 1
    j = slot // 2
    g = min((j - 1 if slot % 2 == 0 and j > 0 else j) // step, last)
    return g, slot - 2 * firsts[g]


class CupyLaunch:
    """Launches ``slot_pass`` of ``kernels/select.cu`` on the current device: what
    :func:`slot_pass` runs (the tests run the kernel's source on the CPU instead, through
    an object with the same three members)."""

    def __init__(self):
        import cupy
        self.xp = cupy
        self.sms = cupy.cuda.Device().attributes["MultiProcessorCount"]

    def __call__(self, maxb, blocks, codes, bounds, nb, mask, counts, out, out_pos, positions,  # noqa: PLR0913, PLR0917
                 offset, count, room):
        kernel = select_kernels(codes.dtype)[maxb]
        kernel((blocks,), (THREADS,),
               (codes, np.int64(codes.size), bounds, np.int32(nb), np.uint64(mask), counts,
                out, out_pos, np.int32(bool(positions)), np.int64(offset), count,
                np.int64(room)))


def slot_pass(codes, bounds, take, *, positions=False, offset=0, expect=None, launch=None):  # noqa: PLR0913
    """``(hist, kept, where)`` as the NumPy ``slot_pass`` gives them, for CuPy
    ``codes``: ``expect`` (a fraction of the codes, or None) sizes the first room
    for the kept codes; a pass that keeps more runs again with room for all.
    ``launch``: what runs the kernel (by default :class:`CupyLaunch`)."""
    launch = CupyLaunch() if launch is None else launch
    xp = launch.xp
    codes = xp.ascontiguousarray(codes)
    n, nb, width = codes.size, len(bounds), SELECT_MAX_BOUNDS[-1]
    take = np.asarray(take, bool)
    firsts = groups(nb, width)
    masks = [0] * len(firsts)
    for s in np.flatnonzero(take).tolist():
        g, local = _owner(s, firsts, width)
        masks[g] |= 1 << local
    below, equal = np.zeros(nb, np.int64), np.zeros(nb, np.int64)
    kept, where = [], []
    for g, first in enumerate(firsts):
        part = np.asarray(bounds[first:first + width], codes.dtype)
        lt, eq, k, w = _one_pass(launch, codes, part, masks[g], positions, offset, expect)
        take_from = 0 if g == 0 else 1  # the shared bound: counted by the pass before
        below[first + take_from:first + part.size] = lt[take_from:]
        equal[first + take_from:first + part.size] = eq[take_from:]
        kept.append(k)
        where.append(w)
    hist = _hist(n, below, equal)
    kept = kept[0] if len(kept) == 1 else xp.concatenate(kept)
    where = (where[0] if len(where) == 1 else xp.concatenate(where)) if positions else None
    return hist, kept, where


def _hist(n, below, equal):
    """Slot counts from the counts below and equal to every bound."""
    hist = np.empty(2 * below.size + 1, np.int64)
    hist[1::2] = equal
    ends = np.concatenate([below, [n]])
    starts = np.concatenate([[0], below + equal])
    hist[0::2] = ends - starts
    return hist


def _host(a):
    return a.get() if hasattr(a, "get") else a


def _one_pass(launch, codes, bounds, mask, positions, offset, expect):  # noqa: PLR0913, PLR0917
    """One kernel launch over ``codes`` with at most 16 ``bounds``, keeping the slots
    of the bits of ``mask``; again with more room where the first had too little."""
    xp, n, nb = launch.xp, codes.size, bounds.size
    maxb = next(m for m in SELECT_MAX_BOUNDS if m >= nb)
    d_bounds = xp.asarray(bounds if nb else np.zeros(1, codes.dtype))
    guess = n // 16 if expect is None else int(2 * expect * n)
    room = min(n, guess + MIN_ROOM) if mask else 0
    blocks = max(1, min(-(-n // (THREADS * ITEMS)), launch.sms * BLOCKS_PER_SM))
    while True:
        counts = xp.zeros(2 * maxb, np.uint64)
        count = xp.zeros(1, np.uint64)
        out = xp.empty(max(room, 1), codes.dtype)
        out_pos = xp.empty(max(room, 1) if positions else 1, np.int64)
        if n:
            launch(maxb, blocks, codes, d_bounds, nb, mask, counts, out, out_pos, positions,
                   offset, count, room)
        kept = int(_host(count)[0])
        if kept <= room:
            break
        room = kept
    host = _host(counts).astype(np.int64)
    return (host[:nb], host[maxb:maxb + nb], out[:kept],
            out_pos[:kept] if positions else None)
