"""The launch plan of the GPU sort: block shape and the passes over global memory.

Pure functions of sizes and a tuning table (``tuning.py``), so that they are tested
without a GPU; ``launch_plan.py`` turns them into the launches that the GPU launcher and the
CPU emulation of the kernels in the tests both run.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from distsort.backends.gpu import tuning


_MIN_ITEMS = 4  # the fewest items per thread the shrinking below goes down to
_WORD_BYTES = 4  # 32-bit keys and values


class Config(NamedTuple):
    tile_bits: int         # log2 of the elements one block holds in shared memory
    items_per_thread: int  # E: elements per thread in a phase
    threads: int     # threads per block
    kmax: int        # global steps per GROUP pass
    smem: int        # shared-memory bytes per block
    min_blocks: int  # blocks per SM the register budget must allow
    group: Config | None = None  # the shape of the GROUP passes, if another (pass_shape)


def config(tab: dict, key_size: int, value_size: int = 0) -> Config:
    """The block shape for keys of ``key_size`` bytes and values of ``value_size``
    (0: keys only) under the tuning table ``tab``; with the shape of the table's
    ``group`` entries as ``group`` where they give the same tile and steps per pass
    (so the same schedule)."""
    tab = tuning.shape(tab, key_size, value_size)
    group = tab.pop("group", None)
    cfg = _block(tab, key_size, value_size)
    if group:
        other = _block({**tab, **group}, key_size, value_size)
        if (other.tile_bits, other.kmax) == (cfg.tile_bits, cfg.kmax):
            cfg = cfg._replace(group=other)
    return cfg


def _block(tab: dict, key_size: int, value_size: int) -> Config:
    items = tuning.items_per_thread(tab, key_size + value_size)
    bits = tuning.tile_bits(tab, key_size, value_size, items)
    # A phase's register window sits at tile bit 0 or at bit log2 E or above, so a
    # tile holds at least E * E elements: fewer registers where shared memory is small.
    while bits < 2 * (items.bit_length() - 1) and items > _MIN_ITEMS:
        items //= 2
        bits = tuning.tile_bits(tab, key_size, value_size, items)
    if bits < 2 * (items.bit_length() - 1):
        raise ValueError(f"shared memory of {tab['smem']} bytes holds too few elements")
    low = max(0, (tab["row_bytes"] // key_size).bit_length() - 1)
    kmax = max(1, bits - low)
    smem = tuning.padded_bytes(1 << bits, key_size, items)
    if value_size:
        smem += tuning.padded_bytes(1 << bits, value_size, items)
    return Config(bits, items, tab["threads"], kmax, smem, tab.get("min_blocks", 1))


SORT, MERGE, GROUP = 0, 1, 2  # the kernel's modes


def descending_mask(key_size: int, descending: bool) -> int:
    """The kernels' ``dmask``: key codes XOR all ones reverse the order.

    >>> hex(descending_mask(4, True)), descending_mask(8, False)
    ('0xffffffff', 0)
    """
    return (1 << (8 * key_size)) - 1 if descending else 0


class Pass(NamedTuple):
    """One pass over global memory: the arguments of ``bitonic_pass`` (``sort.cu``)."""

    mode: int
    tile_bits: int  # log2 of the tile
    top: int     # highest bit of the pass's steps (GROUP: the row bits top .. top-k+1)
    k: int       # GROUP: steps on the row bits
    mirror: int  # GROUP: the first of them is a stage's mirror step
    pre: int     # GROUP: half-cleaners on bits pre-1 .. 0 first (the end of a stage)
    blocks: int

    def args(self):
        """The pass's integer kernel arguments, in the kernel's order."""
        return self.tile_bits, self.mode, self.top, self.k, self.mirror, self.pre


def schedule(n, tile_bits, log_items, kmax, merge=False):
    """The passes over global memory that sort (or, with ``merge``, bitonic-merge) ``n``
    elements: a list of ``Pass``.

    Sort: one SORT pass of the tiles, then the stages 2^s above the tile.  A GROUP pass
    runs up to ``kmax`` global steps of a stage (the mirror first), leaving the stage's
    last bits ``r - 1 .. 0``, as few as a coalesced row holds (``tile_bits - kmax`` bits);
    one GROUP pass then ends the stage on rows of ``c = max(r, tile - kmax)`` bits and
    runs the next stage's first ``tile_bits - c`` steps (``pre = r``): about a tile's worth
    of steps per pass instead of a MERGE pass per stage.  The last stage ends with a
    MERGE pass of the whole tile.  Merge: the GROUP passes of bits p-1 .. tile, then
    one MERGE pass.

    >>> [p.args() for p in schedule(1000, tile_bits=6, log_items=2, kmax=3)][:4]
    [(6, 0, 0, 0, 0, 0), (6, 2, 6, 3, 1, 0), (6, 2, 7, 2, 1, 4), (6, 1, 5, 0, 0, 0)]
    """
    if n <= 1:
        return []
    p = max((n - 1).bit_length(), log_items)
    tb = max(2 * log_items, min(tile_bits, p))  # phases need a tile of at least E * E elements
    low = max(1, tile_bits - kmax)
    tiles, rows = -(-n // (1 << tb)), 1 << max(0, p - tb)
    passes = [] if merge else [Pass(SORT, tb, 0, 0, 0, 0, tiles)]
    s, h = (p, p - 1) if merge else (tb + 1, tb)  # stage 2^s, its bits h .. 0 left
    while s <= p:
        if h >= tb:  # a GROUP pass; the last stage keeps a whole tile for its MERGE pass
            k = min(kmax, h - (tb if s == p else low) + 1)
            passes.append(Pass(GROUP, tb, h, k, int(h == s - 1 and not merge), 0, rows))
            h -= k
        elif s == p or h + 1 >= tb:  # the stage ends in a MERGE pass
            passes.append(Pass(MERGE, tb, h, 0, 0, 0, tiles))
            s, h = s + 1, s
        else:  # end the stage on rows of max(h + 1, low) bits, start the next one
            k = tb - max(h + 1, low)
            passes.append(Pass(GROUP, tb, s, k, 1, h + 1, rows))
            s, h = s + 1, s - k
    return passes


def pass_shape(cfg: Config, p: Pass) -> Config:
    """The block shape that runs pass ``p``: ``cfg.group`` for the GROUP passes that end
    no stage (``pre`` 0), where there is one, else ``cfg``.

    >>> cfg = Config(6, 4, 8, 3, 0, 1, group=Config(6, 2, 16, 3, 0, 1))
    >>> [pass_shape(cfg, p).threads for p in schedule(1000, tile_bits=6, log_items=2, kmax=3)][:4]
    [8, 16, 8, 8]
    """
    return cfg.group if cfg.group is not None and p.mode == GROUP and not p.pre else cfg


def plan(cfg: Config, n, merge=False):
    """``schedule`` of ``n`` elements under the block shape ``cfg`` (what the GPU
    launcher, the CPU emulation and the pass profiler all run)."""
    return schedule(n, cfg.tile_bits, cfg.items_per_thread.bit_length() - 1, cfg.kmax, merge)


# ---------------------------------------------------------------- packed key-value sorts
def split_bit(threads: int) -> int:
    """``zb`` of a packed sort's layout (``Split`` in ``layouts.cuh``): runs of 2^zb elements
    (128 bytes of 8-byte elements) lie together in the keys' or the values' memory, and
    a block of ``threads`` steps through its tile by multiples of 2^(zb+1).

    >>> split_bit(256), split_bit(8)
    (4, 2)
    """
    return min(4, threads.bit_length() - 2)


def packs(key_dtype, value_dtype, n: int, threads: int) -> bool:
    """Whether a key-value sort of ``n`` elements runs packed (``packed_pass``: one 64-bit
    code per element, moved as a keys-only sort of 8-byte keys moves its keys): 4-byte
    integer keys and values, ``n`` a multiple of 2^(zb+1) (``split_bit``), and a sort,
    not a merge.  The launcher also needs both arrays 8-byte aligned.

    >>> packs("int32", "uint32", 1 << 20, 256), packs("float32", "uint32", 1 << 20, 256)
    (True, False)
    >>> packs("uint32", "uint32", (1 << 20) + 16, 256)
    False
    """
    if value_dtype is None:
        return False
    kd, vd = np.dtype(key_dtype), np.dtype(value_dtype)
    whole = n % (2 << split_bit(threads)) == 0
    return (kd.kind in "iu" and vd.kind in "iu" and kd.itemsize == vd.itemsize == _WORD_BYTES
            and whole)


def packed_plan(cfg: Config, n):
    """``(pass, ends)`` of a packed sort of ``n`` elements under ``cfg`` (the block shape
    of 8-byte keys): ``plan``'s passes, ``ends`` bit 0 on the first (it packs the keys
    and values) and bit 1 on the last (it unpacks them).

    >>> [e for _, e in packed_plan(Config(6, 4, 8, 3, 0, 1), 1 << 9)]
    [1, 0, 0, 0, 0, 2]
    """
    steps = plan(cfg, n)
    return [(p, int(i == 0) | int(i == len(steps) - 1) << 1) for i, p in enumerate(steps)]
