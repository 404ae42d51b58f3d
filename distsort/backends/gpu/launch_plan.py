"""The launches of the GPU sort: which kernel of ``kernels/sort.cu``, compiled for which
block shape, runs which pass with which integer arguments.

Pure functions of dtypes, sizes and a tuning table (``tuning.py``), tested without a
GPU.  The GPU launcher (``backends/gpu/launcher.py``) and the CPU emulation of the kernels
in the tests (``tests/kernel_emulator.py``) both walk the list that ``sort_launches``
or ``merge_launches`` gives, so the emulator runs what the GPU runs.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from distsort.backends.gpu import passes


class Launch(NamedTuple):
    """One kernel launch: ``kernel`` (``bitonic_pass``, ``merge_pass`` or ``packed_pass``),
    ``ends`` (``packed_pass``'s template argument: bit 0 its first pass, bit 1 its last;
    else 0), the block ``shape`` it is compiled for (``passes.Config``), the ``step``
    (``passes.Pass``) it runs, its integer arguments ``ints`` (after the pointers and
    lengths, before the descending mask) and its ``grid``: (blocks, lanes)."""

    kernel: str
    ends: int
    shape: passes.Config
    step: passes.Pass
    ints: tuple[int, ...]
    grid: tuple[int, int]


def kernel_shape(tab: dict, key_dtype, value_dtype, n: int, aligned: bool = True,
                 merge: bool = False) -> tuple[passes.Config, bool]:
    """``(block shape, packed)`` of a sort of lanes of ``n`` elements under the tuning
    table ``tab``: packed (``passes.packs``, 8-byte keys' shape) where the dtypes and
    ``n`` allow, the arrays are 8-byte ``aligned`` and it is a sort, not a ``merge``.

    >>> from distsort.backends.gpu import tuning
    >>> cfg, packed = kernel_shape(tuning.TABLES[9], "uint32", "uint32", 1 << 20)
    >>> packed, cfg.items_per_thread, kernel_shape(tuning.TABLES[9], "uint32", None, 9)[1]
    (True, 32, False)
    """
    if value_dtype is not None and aligned and not merge:
        cfg = passes.config(tab, 8)
        if passes.packs(key_dtype, value_dtype, n, cfg.threads):
            return cfg, True
    value_size = 0 if value_dtype is None else np.dtype(value_dtype).itemsize
    return passes.config(tab, np.dtype(key_dtype).itemsize, value_size), False


def launch_plan(cfg: passes.Config, n: int, lanes: int = 1, packed: bool = False,
                merge: bool = False, runs: bool = False) -> list[Launch]:
    """The launches that sort ``lanes`` lanes of ``n`` elements under the block shape
    ``cfg`` (``packed``: as 64-bit codes, ``cfg`` the 8-byte keys' shape); with ``merge``
    the lanes are bitonic and only merged; with ``runs`` (one lane) the first pass reads
    two sorted runs where they lie (``merge_pass``) and the rest merge.

    >>> from distsort.backends.gpu import tuning
    >>> cfg = passes.config(tuning.TABLES[9], 4)
    >>> [(x.kernel, x.step.mode, x.grid) for x in launch_plan(cfg, 1 << 15, lanes=3)]
    [('bitonic_pass', 0, (2, 3)), ('bitonic_pass', 2, (2, 3)), ('bitonic_pass', 1, (2, 3))]
    >>> [x.kernel for x in launch_plan(cfg, 1 << 16, runs=True)]
    ['merge_pass', 'bitonic_pass']
    """
    if packed:
        zb = passes.split_bit(cfg.threads)
        return [Launch("packed_pass", ends, passes.pass_shape(cfg, p), p, (*p.args(), zb),
                       (p.blocks, lanes)) for p, ends in passes.packed_plan(cfg, n)]
    steps = passes.plan(cfg, n, merge or runs)
    return [Launch("merge_pass" if runs and i == 0 else "bitonic_pass", 0,
                   passes.pass_shape(cfg, p), p, p.args(), (p.blocks, lanes))
            for i, p in enumerate(steps)]


def sort_launches(tab: dict, key_dtype, value_dtype, n: int, lanes: int = 1,
                  merge: bool = False, aligned: bool = True) -> list[Launch]:
    """The launches of ``sort_inplace`` of ``lanes`` lanes of ``n`` keys (and values of
    ``value_dtype``, None for keys only) under the tuning table ``tab`` (``aligned``: both
    arrays 8-byte aligned, so that 4-byte integer pairs may pack)."""
    cfg, packed = kernel_shape(tab, key_dtype, value_dtype, n, aligned, merge)
    return launch_plan(cfg, n, lanes, packed, merge)


def merge_launches(tab: dict, key_dtype, value_dtype, m: int) -> list[Launch]:
    """The launches of ``merge_runs`` of two non-empty sorted runs of ``m`` elements in
    all: ``merge_pass`` reading the runs, then ``bitonic_pass``."""
    cfg, _ = kernel_shape(tab, key_dtype, value_dtype, m, merge=True)
    return launch_plan(cfg, m, runs=True)
