"""The launch plan of the GPU sort: block shape and the passes over global memory.

Pure functions of sizes and a tuning table (``tuning.py``), so that they are tested
without a GPU; ``backends/cupy.py`` launches what they say, and the CPU emulation
of the kernels in the tests runs the same plan.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

from . import tuning


class Config(NamedTuple):
    tile: int        # log2 of the elements one block holds in shared memory
    regs: int        # E: elements per thread in a phase
    threads: int     # threads per block
    kmax: int        # global steps per GROUP pass
    smem: int        # shared-memory bytes per block
    min_blocks: int  # blocks per SM the register budget must allow


def config(tab: dict, key_size: int, value_size: int = 0) -> Config:
    """The block shape for keys of ``key_size`` bytes and values of ``value_size``
    (0: keys only) under the tuning table ``tab``."""
    regs = tuning.regs_per_thread(tab, key_size + value_size)
    tile = tuning.tile_bits(tab, key_size, value_size, regs)
    # A phase's register window sits at tile bit 0 or at bit log2 E or above, so a
    # tile holds at least E * E elements: fewer registers where shared memory is small.
    while tile < 2 * (regs.bit_length() - 1) and regs > 4:
        regs //= 2
        tile = tuning.tile_bits(tab, key_size, value_size, regs)
    if tile < 2 * (regs.bit_length() - 1):
        raise ValueError(f"shared memory of {tab['smem']} bytes holds too few elements")
    low = max(0, (tab["row_bytes"] // key_size).bit_length() - 1)
    kmax = max(1, tile - low)
    smem = tuning.padded_bytes(1 << tile, key_size, regs)
    if value_size:
        smem += tuning.padded_bytes(1 << tile, value_size, regs)
    return Config(tile, regs, tab["threads"], kmax, smem, tab.get("min_blocks", 1))


SORT, MERGE, GROUP = 0, 1, 2  # the kernel's modes


class Pass(NamedTuple):
    """One pass over global memory: the arguments of ``bitonic_pass`` (``sort.cu``)."""

    mode: int
    tb: int      # log2 of the tile
    top: int     # highest bit of the pass's steps (GROUP: the row bits top .. top-k+1)
    k: int       # GROUP: steps on the row bits
    mirror: int  # GROUP: the first of them is a stage's mirror step
    pre: int     # GROUP: half-cleaners on bits pre-1 .. 0 first (the end of a stage)
    blocks: int

    def args(self):
        """The pass's integer kernel arguments, in the kernel's order."""
        return self.tb, self.mode, self.top, self.k, self.mirror, self.pre


def _window(rem, stop, tb, loge):
    """``window`` of ``sort.cu``: ``((q, jtop, nsteps), low)`` of the phase at bit ``rem``."""
    q = 0
    if rem >= loge:
        q = min(max(max(rem - loge + 1, stop), loge), tb - loge)
    low = max(q, stop)
    return (q, rem - q, rem - low + 1), low


def _phases(rem, stop, tb, loge):
    """The windows of the half-cleaners on bits ``rem .. stop`` (``half_cleaners``)."""
    out = []
    while rem >= stop:
        w, low = _window(rem, stop, tb, loge)
        out.append(w)
        rem = low - 1
    return out


def compiled(q: Pass, loge):
    """Whether every phase of a GROUP or MERGE pass on the tuned tile ``q.tb`` is one the
    kernel compiles with a fixed window (``Static`` in ``sort.cu``: the MERGE windows of
    the tile and the mirror of a whole window), the fast kind."""
    tb = q.tb
    fixed = set(_phases(tb - 1, 0, tb, loge))
    if q.mode == MERGE:
        return set(_phases(q.top, 0, tb, loge)) <= fixed
    steps = min(q.k, loge) if q.mirror else 0
    if q.mirror and steps < loge:
        return False
    return set(_phases(q.pre - 1, 0, tb, loge) + _phases(tb - 1 - steps, tb - q.k, tb, loge)) \
        <= fixed


@functools.lru_cache(maxsize=None)
def _stages(p, tb, loge, kmax, low, merge):
    """The passes after the SORT pass, as ``(mode, top, k, mirror, pre)``: the fewest, and
    of those the most ``compiled`` ones (a search over the states ``(s, h)``: stage 2^s
    has its bits h .. 0 left)."""
    @functools.lru_cache(maxsize=None)
    def best(s, h):
        if s > p:
            return (0, 0), ()
        options = []

        def take(q, s2, h2):
            cost, rest = best(s2, h2)
            slow = 0 if compiled(Pass(q[0], tb, *q[1:], 0), loge) else 1
            options.append(((cost[0] + 1, cost[1] + slow), (q,) + rest))
        if h >= tb:  # a GROUP pass; the last stage keeps a whole tile for its MERGE pass
            for k in range(1, min(kmax, h - tb + 1 if s == p else h) + 1):
                take((GROUP, h, k, int(h == s - 1 and not merge), 0), s, h - k)
        else:
            take((MERGE, h, 0, 0, 0), s + 1, s)
            if s < p:  # end the stage on rows of c bits and run the next one's first steps
                for c in range(max(h + 1, low), tb):
                    take((GROUP, s, tb - c, 1, h + 1), s + 1, s - tb + c)
        return min(options)
    return best(p, p - 1)[1] if merge else best(tb + 1, tb)[1]


def schedule(n, tile, loge, kmax, merge=False):
    """The passes over global memory that sort (or, with ``merge``, bitonic-merge) ``n``
    elements: a list of ``Pass``.

    Sort: one SORT pass of the tiles, then the stages 2^s above the tile.  A GROUP pass
    runs up to ``kmax`` global steps of a stage (the mirror first) on rows of at least
    ``tile - kmax`` bits (coalesced).  The stage's last bits ``r - 1 .. 0`` and the next
    stage's first steps then share one GROUP pass on rows of ``c >= r`` bits (``pre =
    r``, ``k = tile - c``): a tile's worth of steps per pass instead of a MERGE pass per
    stage.  Of the schedules with the fewest passes, the one with the most passes whose
    phases the kernel compiles with fixed windows (``compiled``).  The last stage ends
    with a MERGE pass of the whole tile.  Merge: the GROUP passes of bits p-1 .. tile,
    then one MERGE pass.

    >>> [p.args() for p in schedule(1000, tile=6, loge=2, kmax=3)][:4]
    [(6, 0, 0, 0, 0, 0), (6, 2, 6, 3, 1, 0), (6, 2, 7, 2, 1, 4), (6, 1, 5, 0, 0, 0)]
    """
    if n <= 1:
        return []
    p = max((n - 1).bit_length(), loge)
    tb = max(2 * loge, min(tile, p))  # phases need a tile of at least E * E elements
    tiles, rows = -(-n // (1 << tb)), 1 << max(0, p - tb)
    first = [] if merge else [Pass(SORT, tb, 0, 0, 0, 0, tiles)]
    return first + [Pass(mode, tb, top, k, mirror, pre, tiles if mode == MERGE else rows)
                    for mode, top, k, mirror, pre in
                    _stages(p, tb, loge, kmax, max(1, tile - kmax), merge)]


def plan(cfg: Config, n, merge=False):
    """``schedule`` of ``n`` elements under the block shape ``cfg`` (what the GPU
    launcher, the CPU emulation and the pass profiler all run)."""
    return schedule(n, cfg.tile, cfg.regs.bit_length() - 1, cfg.kmax, merge)
