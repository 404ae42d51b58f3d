"""The launch plan of the GPU sort: block shape and the passes over global memory.

Pure functions of sizes and a tuning table (``tuning.py``), so that they are tested
without a GPU; ``backends/cupy.py`` launches what they say, and the CPU emulation
of the kernels in the tests runs the same plan.
"""
from __future__ import annotations

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


def schedule(n, tile, loge, kmax, merge=False):
    """The passes over global memory that sort (or, with ``merge``, bitonic-merge) ``n``
    elements: a list of ``(mode, tb, top, k, mirror, blocks)`` (see ``sort.cu``).

    Sort: one SORT pass of the tiles, then for every stage 2^s above the tile the
    group passes (``kmax`` global steps each, the mirror first) and one MERGE pass.
    Merge: the group passes of bits p-1 .. tile, then one MERGE pass.

    >>> [p[:5] for p in schedule(1000, tile=8, loge=3, kmax=5)]
    [(0, 8, 0, 0, 0), (2, 8, 8, 1, 1), (1, 8, 7, 0, 0), (2, 8, 9, 2, 1), (1, 8, 7, 0, 0)]
    """
    if n <= 1:
        return []
    p = max((n - 1).bit_length(), loge)
    tb = max(2 * loge, min(tile, p))  # phases need a tile of at least E * E elements
    tiles = -(-n // (1 << tb))
    passes = [] if merge else [(0, tb, 0, 0, 0, tiles)]
    for s in ([p] if merge else range(tb + 1, p + 1)):
        hi, mirror = s - 1, int(not merge)
        while hi >= tb:
            k = min(kmax, hi - tb + 1)
            passes.append((2, tb, hi, k, mirror, 1 << (p - tb)))
            hi, mirror = hi - k, 0
        passes.append((1, tb, hi, 0, 0, tiles))
    return passes


def plan(cfg: Config, n, merge=False):
    """``schedule`` of ``n`` elements under the block shape ``cfg`` (what the GPU
    launcher, the CPU emulation and the pass profiler all run)."""
    return schedule(n, cfg.tile, cfg.regs.bit_length() - 1, cfg.kmax, merge)
