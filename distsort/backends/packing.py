"""Keys and values packed into one uint64 per element, for the stable key-value sorts
(``distsort.sort1d``): the chunk functions, run by ``map_blocks`` in the tasks.

On GPUs, values of up to 4 bytes travel under their positions (:func:`pack_positions`),
so that the keyed sort's tie-break by value is one by position.  On the CPU, integer
keys and values of up to 4 bytes together are packed around their positions
(:func:`pack_stable`): one keys-only sort of integers.
"""
from __future__ import annotations

import numpy as np

from distsort.core.order import code_dtype, decode, encode
from distsort.core.xp import namespace

__all__ = ["PACKED_VALUE_BYTES", "PACKED_PAIR_BYTES", "pack_positions", "unpack_positions",
           "pack_stable", "unpack_stable"]


#: On GPUs, positions are packed above values of at most this many bytes
#: (:func:`pack_positions`): one network, no shuffle.
PACKED_VALUE_BYTES = 4


def pack_positions(values, block_info=None):
    """uint64 ``position << 32 | value bits``: ordered by position, the value recoverable.
    The positions are made in the block's own array module (CuPy chunks stay on the GPU)."""
    start = block_info[0]["array-location"][0][0]
    positions = namespace(values, strict=True).arange(start, start + values.size, dtype=np.uint64)
    bits = values.view(f"u{values.dtype.itemsize}").astype(np.uint64)
    return (positions << np.uint64(32)) | bits


def unpack_positions(packed, dtype):
    """The values of :func:`pack_positions`'s codes, as ``dtype``."""
    dtype = np.dtype(dtype)
    return (packed & np.uint64(0xFFFFFFFF)).astype(f"u{dtype.itemsize}").view(dtype)


#: On the CPU, integer keys and values of at most this many bytes together are packed
#: around their positions into one uint64 (:func:`pack_stable`): a sort of one integer.
PACKED_PAIR_BYTES = 4


def pack_stable(keys, values, descending, block_info=None):
    """uint64 ``key code | position | value bits`` (the code at the top, the value's bits
    at the bottom), sorted: ordered as the keys (``descending`` or not), equal keys by
    position.  The positions ascend in the block, so a stable sort of the keys' bits
    alone sorts the codes (``distsort.backends.cpu.numpy_backend.sort_high``: one move
    per byte of the key), and the network's first sort finds them in order.

    >>> k, v = np.array([2, -1, 2], np.int16), np.array([7, 8, 9], np.uint16)
    >>> p = pack_stable(k, v, False, [{"array-location": [(0, 3)]}])
    >>> [unpack_stable(p, part, k.dtype, v.dtype, False).tolist() for part in (0, 1)]
    [[-1, 2, 2], [8, 7, 9]]
    """
    from distsort.backends.cpu.numpy_backend import sort_high
    start = block_info[0]["array-location"][0][0]
    value_bits = 8 * values.dtype.itemsize
    codes = encode(keys, descending=descending).astype(np.uint64)
    codes <<= np.uint64(64 - 8 * keys.dtype.itemsize)
    codes |= np.arange(start, start + keys.size, dtype=np.uint64) << np.uint64(value_bits)
    codes |= values.view(f"u{values.dtype.itemsize}").astype(np.uint64)
    return sort_high(codes, 64 - 8 * keys.dtype.itemsize)


def unpack_stable(packed, part, key_dtype, value_dtype, descending):
    """The keys (``part`` 0) or the values (1) of :func:`pack_stable`'s codes."""
    key_dtype, value_dtype = np.dtype(key_dtype), np.dtype(value_dtype)
    if part == 1:
        return packed.astype(f"u{value_dtype.itemsize}").view(value_dtype)
    codes = (packed >> np.uint64(64 - 8 * key_dtype.itemsize)).astype(code_dtype(key_dtype))
    return decode(codes, key_dtype, descending=descending, copy=False)
