"""The CUDA kernels, run on the CPU by ``kernel_emulator``, against the NumPy backend.

What the GPU tests check on the device, checked here on every commit: the kernel
source itself (``distsort/backends/gpu/kernels``) and the launches
(``backends/gpu/launch_plan.py``),
under small block shapes that reach every path -- the SORT pass, GROUP passes with
and without the mirror, MERGE passes, both ways of addressing shared memory,
virtual padding, lanes, bitonic merges and the crossing count.  Skipped where no C++
compiler is installed.
"""
import numpy as np
import pytest

import kernel_emulator as emu
from arrays import DTYPES, bits, kernel_order, kernel_reference, random_keys
from distsort.backends import Order
from distsort.backends.cpu import numpy_backend as npb

pytestmark = pytest.mark.skipif(not emu.available(), reason="no C++ compiler")

#: Block shapes: (threads, E for <=4/<=8/larger elements, row bytes, shared memory).
#: "small": 8 threads, E=8, tiles of 2^6-2^8; "wide": E=32 (E=16 for 8 bytes), so that
#: phases start at q = 0..5, both sides of the padding shift.
TUNINGS = {
    "small": {"smem": 1024, "threads": 8, "items_per_thread": [8, 8, 4], "row_bytes": 16,
              "min_blocks": 1},
    "wide": {"smem": 8192, "threads": 16, "items_per_thread": [32, 16, 8], "row_bytes": 32,
             "min_blocks": 1},
}
SIZES = [0, 1, 2, 3, 5, 31, 32, 33, 127, 128, 129, 255, 256, 257, 1000, 1023, 1024, 1025,
         2049, 4096, 5003, 9001]
ORDERS = [Order(False), Order(True)]


def _keys(rng, n, dtype):
    return random_keys(rng, n, dtype, special_fraction=0.1, duplicates=bool(rng.random() < 0.5))


@pytest.mark.parametrize("tuning", TUNINGS)
@pytest.mark.parametrize("order", ORDERS, ids=["asc", "desc"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_keys(dtype, order, tuning):
    """Keys alone, bit-identical to the NumPy backend (NaN payloads, -0.0, extremes)."""
    rng = np.random.default_rng(DTYPES.index(dtype) + 100 * order.descending)
    for n in SIZES:
        keys = _keys(rng, n, dtype)
        got = keys.copy()
        emu.sort_inplace(TUNINGS[tuning], got, descending=order.descending)
        ref, _ = kernel_reference(keys, None, order)
        np.testing.assert_array_equal(bits(got), bits(ref), err_msg=f"n={n}")


@pytest.mark.parametrize("dtype,vdtype,ways", [
    ("uint32", None, 0b1111), ("float32", "uint32", 0b1111),
    ("int16", None, 0b1011)])  # 2-byte rows of 32 bytes are never shorter than 16 threads
def test_long_arrays(dtype, vdtype, ways):
    """Sizes whose GROUP passes have rows shorter than a block's threads (whole tiles
    read in strided batches), longer than a batch of each thread's elements (batches
    along a row) and in between (batches of several rows), with and without the
    mirror, and a ragged end (per-element bounds checks): the ways of addressing
    global memory (``IO_*`` in tile_map.cuh, bit i for IO kind i) in ``ways`` run."""
    rng = np.random.default_rng(7)
    order = Order(False, vdtype is not None)
    emu.io_kinds(TUNINGS["wide"], dtype, vdtype)  # forget earlier tests' blocks
    for n in [2**17, 2**16 + 5]:
        keys = _keys(rng, n, dtype)
        values = None if vdtype is None else rng.integers(0, 2**32, n).astype(vdtype)
        gk = keys.copy()
        gv = None if values is None else values.copy()
        emu.sort_inplace(TUNINGS["wide"], gk, gv)
        rk, rv = kernel_reference(keys, values, order)
        np.testing.assert_array_equal(bits(gk), bits(rk), err_msg=f"n={n}")
        if values is not None:
            np.testing.assert_array_equal(bits(gv), bits(rv), err_msg=f"n={n}")
    ran = emu.io_kinds(TUNINGS["wide"], dtype, vdtype)
    assert ran == ways, f"ways of addressing that ran: {ran:#06b}, expected {ways:#06b}"


#: Hopper's tuning (tuning.py) with 32 threads instead of 128: the same tiles and E, hence
#: the same compile-time phases as the GPU's kernels (uint32: 2^14 tiles, E=32;
#: uint32+uint32: 2^13, E=16), at a thread count the emulator runs quickly.
HOPPER_SHAPE = {"smem": 74 * 1024, "threads": 32, "items_per_thread": [32, 16, 8], "row_bytes": 128,
                "min_blocks": 3}


@pytest.mark.parametrize("tuning,dtype,vdtype,extra", [
    ("small", "uint32", None, 3), ("small", "float64", "int64", 0),
    ("wide", "uint32", None, 5), ("wide", "int16", "float16", 0),
    ("wide", "float32", "uint32", 5),
    ("hopper", "uint32", None, 0), ("hopper", "uint32", "uint32", 0)])
def test_static_phases(tuning, dtype, vdtype, extra):
    """Every phase compiled with a compile-time window (``Static`` in windows.cuh: the MERGE
    phases of the tuned tile and the whole-window mirror) runs, and the sort is right.
    2^(tile+1) keys: a SORT pass of full tiles (its last stage is the mirror phase), a
    GROUP pass and a MERGE pass on the tuned tile; ``extra`` more bits of size add GROUP
    passes of up to log2 E steps (the mirror phase with all of its steps, then the
    MERGE windows), and a ragged end where the size is odd."""
    tab = HOPPER_SHAPE if tuning == "hopper" else TUNINGS[tuning]
    vs = 0 if vdtype is None else np.dtype(vdtype).itemsize
    cfg = emu.passes.config(tab, np.dtype(dtype).itemsize, vs)
    rng = np.random.default_rng(11)
    order = Order(False, vdtype is not None)
    emu.static_phases(tab, dtype, vdtype)  # forget earlier tests' phases
    for n in [2 ** (cfg.tile_bits + 1 + extra), 2 ** (cfg.tile_bits + 1 + extra) - 7]:
        keys = _keys(rng, n, dtype)
        values = None if vdtype is None else random_keys(rng, n, vdtype, special_fraction=0.1,
                                                          duplicates=True)
        gk = keys.copy()
        gv = None if values is None else values.copy()
        emu.sort_inplace(tab, gk, gv, packed=False)  # the packed kernels: test_packed_paths
        rk, rv = kernel_reference(keys, values, order)
        np.testing.assert_array_equal(bits(gk), bits(rk), err_msg=f"n={n}")
        if values is not None:
            np.testing.assert_array_equal(bits(gv), bits(rv), err_msg=f"n={n}")
    ran, every = emu.static_phases(tab, dtype, vdtype)
    assert ran == every, f"compile-time phases that never ran: {every & ~ran:#x}"


KV_PAIRS = [("float32", "int64"), ("int16", "float16"), ("float64", "bool"),
            ("uint8", "float64"), ("float16", "uint32"), ("uint32", "uint32")]


@pytest.mark.parametrize("tuning", TUNINGS)
@pytest.mark.parametrize("order", ORDERS, ids=["asc", "desc"])
@pytest.mark.parametrize("dtype,vdtype", KV_PAIRS)
def test_key_value(dtype, vdtype, order, tuning):
    """Values move with their keys; ties in the kernels' refined keyed order."""
    rng = np.random.default_rng(KV_PAIRS.index((dtype, vdtype)))
    order = Order(order.descending, True)
    for n in [0, 1, 2, 7, 100, 257, 1000, 3001]:
        keys = _keys(rng, n, dtype)
        values = random_keys(rng, n, vdtype, special_fraction=0.1, duplicates=True)
        gk, gv = keys.copy(), values.copy()
        emu.sort_inplace(TUNINGS[tuning], gk, gv, descending=order.descending)
        rk, rv = kernel_reference(keys, values, order)
        np.testing.assert_array_equal(bits(gk), bits(rk), err_msg=f"n={n}")
        np.testing.assert_array_equal(bits(gv), bits(rv), err_msg=f"n={n}")


PACKED_PAIRS = [("uint32", "uint32"), ("int32", "int32"), ("int32", "uint32"), ("uint32", "int32")]


@pytest.mark.parametrize("tuning", ["small", "wide", "hopper"])
@pytest.mark.parametrize("order", ORDERS, ids=["asc", "desc"])
@pytest.mark.parametrize("dtype,vdtype", PACKED_PAIRS)
def test_packed(dtype, vdtype, order, tuning):
    """Packed key-value sorts (``packed_pass``: one 64-bit code per element, kept in the
    keys' and values' own bytes): one pass, several, ragged ends and lanes, against the
    NumPy backend and bit for bit against the unpacked kernels."""
    tab = HOPPER_SHAPE if tuning == "hopper" else TUNINGS[tuning]
    cfg = emu.passes.config(tab, 8)
    unit, t = 2 << emu.passes.split_bit(cfg.threads), 1 << cfg.tile_bits
    rng = np.random.default_rng(PACKED_PAIRS.index((dtype, vdtype)) + 10 * order.descending)
    order = Order(order.descending, True)
    sizes = [unit, 3 * unit, t, 2 * t - unit, 4 * t, 5 * t + 3 * unit]
    if tuning != "hopper":
        sizes += [64 * t, 37 * t + unit]
    for n in sizes:
        lanes = 2 if n == 3 * unit else 1
        keys = _keys(rng, n * lanes, dtype)
        values = random_keys(rng, n * lanes, vdtype, special_fraction=0.1, duplicates=True)
        gk, gv = keys.copy(), values.copy()
        emu.sort_inplace(tab, gk, gv, order.descending, lanes=lanes, packed=True)
        uk, uv = keys.copy(), values.copy()
        emu.sort_inplace(tab, uk, uv, order.descending, lanes=lanes, packed=False)
        for i in range(lanes):
            part = slice(i * n, (i + 1) * n)
            rk, rv = kernel_reference(keys[part], values[part], order)
            np.testing.assert_array_equal(bits(gk[part]), bits(rk), err_msg=f"n={n}")
            np.testing.assert_array_equal(bits(gv[part]), bits(rv), err_msg=f"n={n}")
        np.testing.assert_array_equal(gk, uk)
        np.testing.assert_array_equal(gv, uv)


def test_packed_paths():
    """A packed sort reaches every way of addressing global memory through its layout
    (``Split``), the first MERGE phase from global memory and every compile-time phase;
    and only 4-byte integer pairs of whole units, 8-byte aligned, pack."""
    tab = TUNINGS["wide"]
    emu.io_kinds(tab, "uint32", "uint32", packed=True)  # forget earlier tests' blocks
    emu.static_phases(tab, "uint32", "uint32", packed=True)
    rng = np.random.default_rng(9)
    for n in [2**17, 2**16 + 48]:
        keys, values = _keys(rng, n, "uint32"), rng.integers(0, 2**32, n).astype(np.uint32)
        gk, gv = keys.copy(), values.copy()
        emu.sort_inplace(tab, gk, gv, packed=True)
        rk, rv = kernel_reference(keys, values, Order(False, True))
        np.testing.assert_array_equal(gk, rk)
        np.testing.assert_array_equal(gv, rv)
    assert emu.io_kinds(tab, "uint32", "uint32", packed=True) == 0b1111
    ran, every = emu.static_phases(tab, "uint32", "uint32", packed=True)
    assert ran == every and ran & (1 << 30), f"phases that never ran: {every & ~ran:#x}"
    k32, v32 = np.zeros(64, np.uint32), np.zeros(64, np.int32)
    assert emu.packs(tab, k32, v32, 64)
    assert not emu.packs(tab, k32, v32.astype(np.float32), 64)
    assert not emu.packs(tab, k32[:40], v32[:40], 40)  # not whole units of 2^(zb+1)
    assert not emu.packs(tab, k32[1:33], v32[1:33], 32)  # not 8-byte aligned
    assert not emu.packs(tab, k32, None, 64)


#: "wide" with another block shape for the GROUP passes (``passes.pass_shape``): the same
#: tiles (2^10 of 4-byte keys, 2^9 of 8 bytes) with half the threads and E.
MIXED = {**TUNINGS["wide"], "group": {"threads": 8, "items_per_thread": [16, 8, 4]}}


@pytest.mark.parametrize("dtype,vdtype", [("uint32", None), ("float64", None),
                                          ("uint32", "uint32"), ("float32", "int16")])
def test_group_shape(dtype, vdtype):
    """GROUP passes in another block shape than the rest of the sort (``group`` in the
    tuning table): sorts, a packed one and a merge of two runs, against NumPy."""
    vs = 0 if vdtype is None else np.dtype(vdtype).itemsize
    cfg = emu.passes.config(MIXED, np.dtype(dtype).itemsize, vs)
    assert cfg.group is not None and cfg.group.threads == 8
    rng = np.random.default_rng(13)
    order = Order(False, vdtype is not None)
    for n in [2**15, 2**14 + 96]:
        keys = _keys(rng, n, dtype)
        values = None if vdtype is None else random_keys(rng, n, vdtype, duplicates=True)
        gk, gv = keys.copy(), None if values is None else values.copy()
        emu.sort_inplace(MIXED, gk, gv)
        rk, rv = kernel_reference(keys, values, order)
        np.testing.assert_array_equal(bits(gk), bits(rk), err_msg=f"n={n}")
        if values is not None:
            np.testing.assert_array_equal(bits(gv), bits(rv), err_msg=f"n={n}")
    ak, av = kernel_reference(_keys(rng, 3000, dtype), None if vdtype is None else
                              random_keys(rng, 3000, vdtype), order)
    bk, bv = kernel_reference(_keys(rng, 9000, dtype), None if vdtype is None else
                              random_keys(rng, 9000, vdtype), order)
    gk, gv = emu.merge_runs(MIXED, ak, av, bk, bv)
    rk, rv = kernel_reference(np.concatenate([ak, bk]), None if vdtype is None else
                              np.concatenate([av, bv]), order)
    np.testing.assert_array_equal(bits(gk), bits(rk))
    if vdtype is not None:
        np.testing.assert_array_equal(bits(gv), bits(rv))


@pytest.mark.parametrize("order", ORDERS, ids=["asc", "desc"])
@pytest.mark.parametrize("dtype", ["uint32", "float64", "int8"])
def test_bitonic_merge(dtype, order):
    """``merge=True``: one sorted run reversed, then another, sorted by the merge passes
    (what ``merge_low``/``merge_high`` do with the crossing elements)."""
    rng = np.random.default_rng(3)
    for ma, mb in [(1, 1), (0, 5), (100, 37), (500, 1500), (2048, 2048), (3000, 1)]:
        a, _ = kernel_reference(_keys(rng, ma, dtype), None, order)
        b, _ = kernel_reference(_keys(rng, mb, dtype), None, order)
        v = np.concatenate([a[::-1], b])
        emu.sort_inplace(TUNINGS["small"], v, descending=order.descending, merge=True)
        ref, _ = kernel_reference(np.concatenate([a, b]), None, order)
        np.testing.assert_array_equal(bits(v), bits(ref), err_msg=f"{ma}+{mb}")


def test_keyed_bitonic_merge():
    rng = np.random.default_rng(4)
    order = Order(False, True)
    for ma, mb in [(100, 37), (700, 1300)]:
        parts = []
        for m in (ma, mb):
            k, v = _keys(rng, m, "float32"), rng.integers(0, 50, m).astype(np.int64)
            parts.append(kernel_reference(k, v, order))
        k = np.concatenate([parts[0][0][::-1], parts[1][0]])
        v = np.concatenate([parts[0][1][::-1], parts[1][1]])
        emu.sort_inplace(TUNINGS["small"], k, v, merge=True)
        rk, rv = kernel_order(np.concatenate([parts[0][0], parts[1][0]]),
                              np.concatenate([parts[0][1], parts[1][1]]), False)
        np.testing.assert_array_equal(bits(k), bits(rk))
        np.testing.assert_array_equal(v, rv)


@pytest.mark.parametrize("tuning", ["small", "hopper"])
@pytest.mark.parametrize("order", ORDERS, ids=["asc", "desc"])
@pytest.mark.parametrize("dtype,vdtype", [("uint32", None), ("float64", None), ("int8", None),
                                          ("float32", "int64"), ("uint32", "uint32")])
def test_merge_runs(dtype, vdtype, order, tuning):
    """``merge_pass`` (the first pass of a compare-split's merge) reads the lower run
    reversed and the upper run where they lie: runs of every size against the tile,
    so that its first pass is a MERGE pass from shared memory (ragged end), a MERGE
    pass whose first phase loads from global memory (a whole tuned tile) or a GROUP
    pass, a tile's rows straddling the two runs."""
    tab = HOPPER_SHAPE if tuning == "hopper" else TUNINGS[tuning]
    vs = 0 if vdtype is None else np.dtype(vdtype).itemsize
    tile = emu.passes.config(tab, np.dtype(dtype).itemsize, vs).tile_bits
    t = 1 << tile
    rng = np.random.default_rng(21)
    order = Order(order.descending, vdtype is not None)
    emu.static_phases(tab, dtype, vdtype)  # forget earlier tests' phases
    for ma, mb in [(1, 1), (1, 36), (100, 37), (t // 2, t // 2), (t // 2 - 3, t // 2 + 3),
                   (t - 5, 3 * t + 5), (2 * t, 2 * t), (3 * t, 1)]:
        runs = []
        for m in (ma, mb):
            k = _keys(rng, m, dtype)
            v = None if vdtype is None else random_keys(rng, m, vdtype, duplicates=True)
            runs.append(kernel_reference(k, v, order))
        (ak, av), (bk, bv) = runs
        gk, gv = emu.merge_runs(tab, ak, av, bk, bv, order.descending)
        rk, rv = kernel_reference(np.concatenate([ak, bk]), None if vdtype is None else
                                  np.concatenate([av, bv]), order)
        np.testing.assert_array_equal(bits(gk), bits(rk), err_msg=f"{ma}+{mb}")
        if vdtype is not None:
            np.testing.assert_array_equal(bits(gv), bits(rv), err_msg=f"{ma}+{mb}")
    ran, _ = emu.static_phases(tab, dtype, vdtype)
    assert ran & (1 << 30), "the MERGE phase from global memory never ran"


@pytest.mark.parametrize("keyed", [False, True], ids=["keys", "positions"])
def test_lanes(keyed):
    """A batched launch: every lane of a 2-D block sorted on its own."""
    rng = np.random.default_rng(5)
    for lanes, n in [(3, 300), (5, 1025), (2, 1)]:
        keys = _keys(rng, lanes * n, "float32").reshape(lanes, n)
        got = keys.copy()
        pos = np.broadcast_to(np.arange(n, dtype=np.int64), (lanes, n)).copy() if keyed else None
        emu.sort_inplace(TUNINGS["small"], got, pos, lanes=lanes)
        for i in range(lanes):
            rk, rv = kernel_reference(keys[i], None, Order(False, keyed),
                                      start=0 if keyed else None)
            np.testing.assert_array_equal(bits(got[i]), bits(rk))
            if keyed:
                np.testing.assert_array_equal(pos[i], rv)


@pytest.mark.parametrize("keyed", [False, True], ids=["keys", "keyed"])
@pytest.mark.parametrize("order", ORDERS, ids=["asc", "desc"])
def test_crossing_count(order, keyed):
    """The one-thread binary search against the NumPy backend's crossing count."""
    rng = np.random.default_rng(6)
    order = Order(order.descending, keyed)
    for ma, mb in [(1, 1), (5, 5), (100, 37), (37, 100), (1000, 1000)]:
        ka, kb = _keys(rng, ma, "float64"), _keys(rng, mb, "float64")
        va = rng.integers(0, 9, ma).astype(np.int32) if keyed else None
        vb = rng.integers(0, 9, mb).astype(np.int32) if keyed else None
        a, b = npb.prepare(ka, va, order), npb.prepare(kb, vb, order)
        if keyed:
            (sa, sva), (sb, svb) = a, b
        else:
            sa, sva = npb.finish_keys(a, order, ka.dtype), None
            sb, svb = npb.finish_keys(b, order, kb.dtype), None
        got = emu.crossing_count(TUNINGS["small"], sa, sva, sb, svb, order.descending)
        assert got == npb.crossing_count(a, b, order), (ma, mb)


@pytest.mark.parametrize("dtype,vdtype,n,lanes,merge,first", [
    ("uint32", None, 5003, 1, False, "bitonic_pass"),
    ("float64", "int64", 2**12 + 1, 3, False, "bitonic_pass"),
    ("uint32", "uint32", 2**13, 2, False, "packed_pass"),
    ("float32", None, 2**12 + 3, 2, True, "bitonic_pass"),
])
def test_emulator_runs_the_gpu_launches(dtype, vdtype, n, lanes, merge, first):
    """The launches the emulator ran (kernel, block shape, pass, integer arguments, grid)
    are the GPU launcher's: the list that ``launcher.sort_inplace`` and
    ``launcher.merge_sorted`` walk (``gpu.launch_plan.sort_launches``,
    ``gpu.launch_plan.merge_launches``), computed here from dtypes and sizes alone."""
    tab = TUNINGS["wide"]
    rng = np.random.default_rng(n + lanes)
    order = Order(False, vdtype is not None)
    keys = _keys(rng, n * lanes, dtype)
    values = None if vdtype is None else random_keys(rng, n * lanes, vdtype)
    if merge:  # each lane bitonic (keys only): descending, then ascending
        keys = np.concatenate([np.concatenate([kernel_reference(x[: n // 2], None, order)[0][::-1],
                                               kernel_reference(x[n // 2:], None, order)[0]])
                               for x in np.split(keys, lanes)])
    gk, gv = keys.copy(), None if values is None else values.copy()
    emu.sort_inplace(tab, gk, gv, lanes=lanes, merge=merge)
    gpu = emu.launch.sort_launches(tab, dtype, vdtype, n, lanes, merge)
    assert emu.ran == gpu and gpu[0].kernel == first
    assert {x.grid[1] for x in gpu} == {lanes}
    for i in range(lanes):
        part = slice(i * n, (i + 1) * n)
        rk, rv = kernel_reference(keys[part], None if values is None else values[part], order)
        np.testing.assert_array_equal(bits(gk[part]), bits(rk))
        if values is not None:
            np.testing.assert_array_equal(bits(gv[part]), bits(rv))
    a, b = (kernel_reference(_keys(rng, m, dtype), None, Order(False))[0] for m in (700, 2000))
    out, _ = emu.merge_runs(tab, a, None, b, None)
    gpu = emu.launch.merge_launches(tab, dtype, None, a.size + b.size)
    assert emu.ran == gpu and [x.kernel for x in gpu][:2] == ["merge_pass", "bitonic_pass"]
    ref, _ = kernel_reference(np.concatenate([a, b]), None, Order(False))
    np.testing.assert_array_equal(bits(out), bits(ref))
