"""Tuning constants of the GPU kernels, one table per GPU generation.

The kernel (``kernels/sort.cu``) says what one block does; the launch plan
(``backends/gpu/launch_plan.py``) picks from here how many elements a block holds, how many
threads it has and how many elements each thread holds in registers.

``smem``      bytes of shared memory one block may take (the tile is the largest
              power of two of elements that fits, with one spare slot per E elements).
``threads``   threads per block (each holds E elements and their addresses in registers).
``items_per_thread``  E, elements per thread in a phase, by key+value bytes (<= 4,
              <= 8, more): each phase runs log2(E) network steps in registers.
``row_bytes`` contiguous bytes of each row of a global (strided) pass: the rows are
              read and written whole, so 128 bytes keep the accesses coalesced.
``min_blocks`` blocks per SM the register budget must allow (``__launch_bounds__``).

``keys8``     entries that replace the others for 8-byte keys without values (and for
              packed key-value sorts, whose elements are 8-byte codes).
``group``     entries that replace the others for the GROUP passes that end no stage
              (``passes.pass_shape``), where they give the same tile and steps per pass.

``DISTSORT_TUNING`` (a JSON object in the environment) overrides entries of every
table, and then holds for every element size (``keys8`` is dropped), for tuning
experiments.
"""
from __future__ import annotations

import json
import os

TABLES = {
    # Hopper (H100, H200): 227 KB of shared memory per block, 64 K registers per SM.
    # Three blocks of 128 threads per SM (2^14-element tiles of 4-byte keys, 2^13 of
    # 8-byte elements, 168 registers): while one block waits for its tile, two run
    # their phases.  Tiles load by cp.async (tile_io.cuh), which holds no registers.
    # 8-byte keys, and packed key-value sorts (4-byte integer keys and values,
    # passes.packs), hold 32 of them per thread (fewer, longer phases); their GROUP
    # passes, though, run faster in two blocks of 256 threads holding 16 each.
    # benchmarks/local_sort.py measures them; docs/local_sort.md has the figures.
    9: {"smem": 74 * 1024, "threads": 128, "items_per_thread": (32, 16, 8),
        "row_bytes": 128, "min_blocks": 3,
        "keys8": {"items_per_thread": (32, 32, 8),
                  "group": {"smem": 113 * 1024, "threads": 256, "min_blocks": 2,
                            "items_per_thread": (32, 16, 8)}}},
    # Ampere / Ada: 163 KB (A100) or 99 KB (consumer); the smaller one is safe.
    8: {"smem": 99 * 1024, "threads": 512, "items_per_thread": (32, 16, 8), "row_bytes": 128,
        "min_blocks": 1},
}
DEFAULT = {"smem": 48 * 1024, "threads": 512, "items_per_thread": (32, 16, 8),
           "row_bytes": 128, "min_blocks": 1}


_HOPPER = 9  # compute capability major
# Element sizes (bytes) of the small and medium columns of items_per_thread.
_SMALL_BYTES, _MEDIUM_BYTES = 4, 8


def table(major: int) -> dict:
    """The tuning table of compute capability ``major`` (newer ones use Hopper's)."""
    tab = TABLES[major] if major in TABLES else TABLES[_HOPPER] if major > _HOPPER else DEFAULT
    override = os.environ.get("DISTSORT_TUNING")
    if override:
        tab = {**tab, **json.loads(override)}
        tab.pop("keys8", None)
    return tab


def shape(tab: dict, key_size: int, value_size: int) -> dict:
    """The entries of ``tab`` for keys of ``key_size`` bytes and values of ``value_size``
    (0: none).

    >>> shape(TABLES[9], 8, 0)["items_per_thread"], shape(TABLES[9], 4, 4)["items_per_thread"]
    ((32, 32, 8), (32, 16, 8))
    """
    flat = dict(tab)
    keys8 = flat.pop("keys8", {})
    if key_size == _MEDIUM_BYTES and not value_size:
        flat.update(keys8)
    return flat


def items_per_thread(tab: dict, elem_bytes: int) -> int:
    """E for elements of ``elem_bytes`` (keys and values) under ``tab``."""
    small, medium, large = tab["items_per_thread"]
    return small if elem_bytes <= _SMALL_BYTES else medium if elem_bytes <= _MEDIUM_BYTES else large


def padded_bytes(count: int, itemsize: int, items_per_thread: int) -> int:
    """Shared-memory bytes of ``count`` items with one spare slot after every
    ``items_per_thread`` (E) items, 16-aligned: the kernels' padding (``pad`` in
    ``phases.cuh``)."""
    return ((count + count // items_per_thread) * itemsize + 15) // 16 * 16


def tile_bits(tab: dict, key_size: int, value_size: int, items_per_thread: int) -> int:
    """log2 of the largest tile of (key, value) elements that fits in shared memory."""
    bits = 4
    while True:
        count = 1 << (bits + 1)
        need = padded_bytes(count, key_size, items_per_thread)
        if value_size:
            need += padded_bytes(count, value_size, items_per_thread)
        if need > tab["smem"]:
            return bits
        bits += 1
