"""The CuPy backend against the NumPy backend, element for element (GPU only).

Every test is marked ``gpu`` and skipped where CuPy or a GPU is missing; the file
imports on any machine.
"""
import numpy as np
import pytest

from arrays import DTYPES, bits, kernel_order, kernel_reference, random_keys

from backends import GPU, GPU_ONLY, cupy

pytestmark = GPU_ONLY

from distsort.backends import Order  # noqa: E402
from distsort.backends.cpu import numpy_backend as npb  # noqa: E402

from distsort.backends.gpu import launch_plan as launch  # noqa: E402

if GPU:
    from distsort.backends.gpu import cupy_backend as cpb
    from distsort.backends.gpu import launcher

ORDERS = [Order(False), Order(True)]
VALUE_DTYPES = ["bool", "int8", "float16", "uint32", "float32", "float64"]
#: Key-value pairs tested: every key dtype with int64 values (argsort's), and every
#: value width (1, 2, 4, 8 bytes; bool, ints, floats) under three key dtypes.
KV_PAIRS = [(k, "int64") for k in DTYPES] + [
    (k, v) for k in ("float32", "int16", "float64") for v in VALUE_DTYPES]
EDGE_SIZES = sorted({2**k + d for k in range(1, 21) for d in (-1, 0, 1)}
                    | {4099, 8191, 65521, 131071, 262139, 524287, 999983, 1048573})


def _keys(rng, n, dtype):
    return random_keys(rng, n, dtype, special_fraction=0.1, duplicates=bool(rng.random() < 0.5))


def _values(rng, n, dtype):
    return random_keys(rng, n, dtype, special_fraction=0.1, duplicates=True)


def _check(chunk, keys, values, order, start=None):
    ref_k, ref_v = kernel_reference(keys, values, order, start)
    got_k = cpb.finish_keys(chunk, order, keys.dtype).get()
    assert got_k.dtype == keys.dtype
    np.testing.assert_array_equal(bits(got_k), bits(ref_k))
    if order.keyed:
        np.testing.assert_array_equal(bits(cpb.finish_values(chunk).get()), bits(ref_v))


@pytest.mark.parametrize("order", ORDERS, ids=["asc", "desc"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_keys_every_size(dtype, order):
    """Keys alone, every size 0..4096, bit-identical to the NumPy backend."""
    rng = np.random.default_rng(hash((dtype, order.descending)) % 2**32)
    for n in range(0, 4097):
        keys = _keys(rng, n, dtype)
        d = cupy.asarray(keys)
        chunk = cpb.prepare(d, None, order)
        _check(chunk, keys, None, order)
        np.testing.assert_array_equal(bits(d.get()), bits(keys))  # input untouched


@pytest.mark.parametrize("order", ORDERS, ids=["asc", "desc"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_keys_edge_sizes(dtype, order):
    """2^k-1, 2^k, 2^k+1 up to 2^20+1 and primes."""
    rng = np.random.default_rng(7 + DTYPES.index(dtype) + 100 * order.descending)
    for n in EDGE_SIZES:
        keys = _keys(rng, n, dtype)
        _check(cpb.prepare(cupy.asarray(keys), None, order), keys, None, order)


@pytest.mark.parametrize("order", ORDERS, ids=["asc", "desc"])
@pytest.mark.parametrize("dtype,vdtype", KV_PAIRS)
def test_key_value(dtype, vdtype, order):
    """Values of 1/2/4/8 bytes move with their keys; ties by the value's code."""
    rng = np.random.default_rng(11 + DTYPES.index(dtype) + 50 * KV_PAIRS.index((dtype, vdtype)))
    sizes = list(range(0, 300, 7)) + [1023, 1024, 1025, 4097, 16385, 65537]
    for n in sizes:
        keys, values = _keys(rng, n, dtype), _values(rng, n, vdtype)
        chunk = cpb.prepare(cupy.asarray(keys), cupy.asarray(values), Order(order.descending, True))
        _check(chunk, keys, values, Order(order.descending, True))


@pytest.mark.parametrize("order", ORDERS, ids=["asc", "desc"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_argsort_positions(dtype, order):
    """``start`` makes int64 positions on the GPU: ties by position, i.e. stable."""
    rng = np.random.default_rng(23 + DTYPES.index(dtype))
    order = Order(order.descending, True)
    for n in [0, 1, 2, 3, 100, 4095, 4096, 4097, 70001, 2**18 + 1]:
        keys = _keys(rng, n, dtype)
        chunk = cpb.prepare(cupy.asarray(keys), None, order, start=12345)
        _check(chunk, keys, None, order, start=12345)
        if n and not order.descending:  # stable: numpy.argsort(kind="stable")
            np.testing.assert_array_equal(chunk[1].get() - 12345,
                                          np.argsort(keys, kind="stable"))


@pytest.mark.slow
@pytest.mark.parametrize("dtype,order", [("uint32", Order(False)), ("float32", Order(True))])
def test_large(dtype, order):
    """3 * 2^26 keys, against cupy.sort of the order codes (radix sort) on the device."""
    rng = np.random.default_rng(5)
    n = 3 * 2**26
    keys = _keys(rng, n, dtype)
    chunk = cpb.prepare(cupy.asarray(keys), None, order)
    ref = npb.encode(keys, descending=order.descending)
    ref = cupy.sort(cupy.asarray(ref))
    got = cupy.asarray(npb.encode(chunk.get(), descending=order.descending))
    assert bool((got == ref).all())


def _pair(rng, dtype, ma, mb, order, shift, vdtype=None):
    """Two sorted chunks on both backends; ``shift`` places b above (>0) or below a."""
    ka = _keys(rng, ma, dtype)
    kb = _keys(rng, mb, dtype)
    if shift:  # every a below every b (or above): crossing count 0 (or all)
        small = lambda m: rng.integers(0, 10, m).astype(dtype)  # noqa: E731
        large = lambda m: rng.integers(20, 30, m).astype(dtype)  # noqa: E731
        ka, kb = (small(ma), large(mb)) if shift > 0 else (large(ma), small(mb))
    va = _values(rng, ma, vdtype) if vdtype else None
    vb = _values(rng, mb, vdtype) if vdtype else None
    out = []
    for be, conv in ((npb, np.asarray), (cpb, cupy.asarray)):
        a = be.prepare(conv(ka), None if va is None else conv(va), order)
        b = be.prepare(conv(kb), None if vb is None else conv(vb), order)
        out.append((a, b))
    return out


def _same(chunk_np, chunk_cp, order, dtype):
    """Keys-only: bit for bit.  Keyed: the same (key, value) codes as the NumPy backend
    (which of two fully tied elements a merge keeps may differ), in the kernels' order."""
    k = npb.finish_keys(chunk_np, order, np.dtype(dtype))
    got = cpb.finish_keys(chunk_cp, order, dtype).get()
    if not order.keyed:
        np.testing.assert_array_equal(bits(got), bits(k))
        return
    v, got_v = npb.finish_values(chunk_np), cpb.finish_values(chunk_cp).get()
    codes = lambda x: npb.encode(x, canonical=True, descending=order.descending)  # noqa: E731
    np.testing.assert_array_equal(codes(got), codes(k))
    np.testing.assert_array_equal(npb.encode(got_v, canonical=True),
                                  npb.encode(v, canonical=True))
    rk, rv = kernel_order(got, got_v, order.descending)
    np.testing.assert_array_equal(bits(got), bits(rk))
    np.testing.assert_array_equal(bits(got_v), bits(rv))


@pytest.mark.parametrize("keyed", [False, True], ids=["keys", "keyed"])
@pytest.mark.parametrize("order", ORDERS, ids=["asc", "desc"])
@pytest.mark.parametrize("dtype", ["int32", "float64", "uint8", "float16"])
def test_compare_split(dtype, order, keyed):
    """merge_low / merge_high, probes and crossing counts against the NumPy backend."""
    order = Order(order.descending, keyed)
    rng = np.random.default_rng(31 + keyed)
    lengths = [(1, 1), (5, 5), (64, 64), (100, 37), (37, 100), (4096, 4096), (5000, 3001),
               (70000, 70000), (2**17 + 3, 2**16 - 1)]
    for ma, mb in lengths:
        for shift in (0, 1, -1):
            (na, nb), (ca, cb) = _pair(rng, dtype, ma, mb, order, shift,
                                       "int64" if keyed else None)
            stride = max(1, ma // 16)
            for top in (True, False):
                p_np, p_cp = npb.probe(na, stride, top, order), cpb.probe(ca, stride, top, order)
                if not keyed:  # NumPy's keys-only chunks hold the codes as signed integers
                    p_np = npb._unsigned(p_np)
                for x, y in zip(p_np if keyed else (p_np,), p_cp if keyed else (p_cp,),
                                strict=False):
                    np.testing.assert_array_equal(x, y)
            limit = min(ma, mb)
            kb = cpb.crossing_bound(cpb.probe(ca, stride, True, order),
                                    cpb.probe(cb, stride, False, order),
                                    stride, limit, order)
            assert cpb.crossing_count(ca, cb, order.descending) == npb.crossing_count(na, nb, order)
            for k in sorted({kb, limit}):
                _same(npb.merge_low(na, npb.BACKEND.head(nb, k), order),
                      cpb.merge_low(ca, cpb.BACKEND.head(cb, k), order), order, dtype)
                _same(npb.merge_high(nb, npb.BACKEND.tail(na, k), order),
                      cpb.merge_high(cb, cpb.BACKEND.tail(ca, k), order), order, dtype)


@pytest.mark.parametrize("order", ORDERS, ids=["asc", "desc"])
@pytest.mark.parametrize("dtype,vdtype", [("uint32", None), ("float64", None), ("int8", None),
                                          ("float32", "int64"), ("uint32", "uint32")])
def test_merge_runs(dtype, vdtype, order):
    """The merge of a compare-split, whose first pass reads the two runs where they lie,
    against the NumPy backend's sort of their concatenation: runs within one tile, a
    whole tuned tile (its first phase loading from global memory), and GROUP passes
    first (two of them for uint32+uint32)."""
    order = Order(order.descending, vdtype is not None)
    rng = np.random.default_rng(41)
    cfg, _ = launch.kernel_shape(launcher.device_table(), dtype, vdtype, 0, merge=True)
    t = 1 << cfg.tile_bits
    for ma, mb in [(1, 1), (100, 37), (t // 2, t // 2), (t - 5, 3 * t + 5),
                   (2**20 + 3, 2**19 - 1), (2**21 + 1, 2**21 - 1)]:
        runs = []
        for m in (ma, mb):
            k = _keys(rng, m, dtype)
            v = None if vdtype is None else _values(rng, m, vdtype)
            runs.append((k, v, cpb.prepare(cupy.asarray(k), None if v is None else
                                           cupy.asarray(v), order)))
        (ka, va, ca), (kb, vb, cb) = runs
        out = cpb.merge_runs(ca, cb, order.descending)
        _check(out, np.concatenate([ka, kb]),
               None if vdtype is None else np.concatenate([va, vb]), order)


@pytest.mark.parametrize("keyed", [False, True], ids=["keys", "positions"])
@pytest.mark.parametrize("order", ORDERS, ids=["asc", "desc"])
def test_sort_blocks(order, keyed):
    """N-D lanes along each axis (a batched launch)."""
    order = Order(order.descending, keyed)
    rng = np.random.default_rng(3)
    for shape in [(3, 5, 7), (1000, 3), (2, 4100), (0, 4), (70000, 2)]:
        x = _keys(rng, int(np.prod(shape)), "float32").reshape(shape)
        for axis in range(len(shape)):
            rk, rv = npb.sort_blocks(x, None, axis, order, positions=keyed)
            gk, gv = cpb.sort_blocks(cupy.asarray(x), None, axis, order, positions=keyed)
            np.testing.assert_array_equal(bits(gk.get()), bits(rk))
            if keyed:
                np.testing.assert_array_equal(gv.get(), rv)


PACKED_PAIRS = [("uint32", "uint32"), ("int32", "int32"), ("int32", "uint32"), ("uint32", "int32")]


@pytest.mark.parametrize("order", ORDERS, ids=["asc", "desc"])
@pytest.mark.parametrize("dtype,vdtype", PACKED_PAIRS)
def test_packed(dtype, vdtype, order):
    """4-byte integer keys and values sort packed (``passes.packs``): every multiple of
    32 up to 4096, tiles and ragged ends past them, and lanes, against the NumPy
    backend; arrays that do not pack (a length or a view off 8-byte alignment) sort
    unpacked, in the same order."""
    order = Order(order.descending, True)
    rng = np.random.default_rng(31 + PACKED_PAIRS.index((dtype, vdtype)) + 7 * order.descending)
    cfg, packed = launch.kernel_shape(launcher.device_table(), dtype, vdtype, 1 << 20)
    assert packed
    t = 1 << cfg.tile_bits
    sizes = list(range(32, 4097, 32)) + [t, 3 * t - 32, 2**20, 2**20 + 96, 3 * 2**20 + 32]
    for n in sizes:
        keys, values = _keys(rng, n, dtype), _values(rng, n, vdtype)
        k, v = cupy.asarray(keys), cupy.asarray(values)
        assert launcher.kernel_shape(k, v)[1], n
        cpb.sort_inplace(k, v, order.descending)
        _check((k, v), keys, values, order)
    for n, off in [(4096 + 16, 0), (4096, 1)]:  # these sort unpacked
        keys, values = _keys(rng, n + off, dtype), _values(rng, n + off, vdtype)
        k, v = cupy.asarray(keys)[off:], cupy.asarray(values)[off:]
        assert not launcher.kernel_shape(k, v)[1]
        cpb.sort_inplace(k, v, order.descending)
        _check((k, v), keys[off:], values[off:], order)
    lanes, n = 3, 2 * t + 64
    keys, values = _keys(rng, lanes * n, dtype), _values(rng, lanes * n, vdtype)
    k, v = cupy.asarray(keys), cupy.asarray(values)
    cpb.sort_inplace(k, v, order.descending, lanes=lanes)
    for i in range(lanes):
        part = slice(i * n, (i + 1) * n)
        _check((k[part], v[part]), keys[part], values[part], order)


@pytest.mark.parametrize("n", [2**22 + 3, 2**22])
def test_no_allocation(n):
    """Sorting in place allocates nothing from the memory pool: keys alone, and keys
    with values (packed where the length allows)."""
    rng = np.random.default_rng(0)
    x = cupy.asarray(_keys(rng, n, "uint32"))
    v = cupy.asarray(_keys(rng, n, "uint32"))
    cpb.sort_inplace(x)  # compile and warm up
    cpb.sort_inplace(x, v)
    x = cupy.asarray(_keys(rng, n, "uint32"))
    v = cupy.asarray(_keys(rng, n, "uint32"))
    pool = cupy.get_default_memory_pool()
    cupy.cuda.runtime.deviceSynchronize()
    before = pool.used_bytes(), pool.total_bytes()
    cpb.sort_inplace(x)
    cpb.sort_inplace(x, v)
    cupy.cuda.runtime.deviceSynchronize()
    assert (pool.used_bytes(), pool.total_bytes()) == before
    assert bool((x[1:] >= x[:-1]).all())


@pytest.mark.parametrize("nchunks", [1, 2, 3, 5, 8])
def test_end_to_end(nchunks):
    """distsort.sort / argsort / sort_by_key of dask arrays of CuPy chunks."""
    da = pytest.importorskip("dask.array")
    dask = pytest.importorskip("dask")
    import distsort

    rng = np.random.default_rng(nchunks)
    n = int(rng.integers(1000, 20000))
    cuts = np.sort(rng.integers(0, n + 1, size=nchunks - 1))
    chunks = tuple(int(c) for c in np.diff(np.concatenate([[0], cuts, [n]])))
    with dask.config.set(scheduler="synchronous"):
        for dtype in ["float32", "int64", "uint8", "float64"]:
            keys = _keys(rng, n, dtype)
            values = _values(rng, n, "float32")
            x = da.from_array(cupy.asarray(keys), chunks=(chunks,), asarray=False)
            v = da.from_array(cupy.asarray(values), chunks=(chunks,), asarray=False)
            for desc in (False, True):
                out = distsort.sort(x, descending=desc).compute()
                ref, _ = kernel_reference(keys, None, Order(desc))
                np.testing.assert_array_equal(bits(out.get()), bits(ref))
                idx = distsort.argsort(x, descending=desc).compute()
                _, ref_i = kernel_reference(keys, None, Order(desc, True), start=0)
                np.testing.assert_array_equal(idx.get(), ref_i)
                # sort_by_key: the crossing bounds come from canonical probes, so fully
                # tied elements (-0.0/+0.0, NaN payloads) may sit in either order across
                # chunk boundaries: compare codes, and the (key, value) bits as a multiset.
                sk, sv = distsort.sort_by_key(x, v, descending=desc)
                gk, gv = sk.compute().get(), sv.compute().get()
                ref_k, ref_v = kernel_reference(keys, values, Order(desc, True))
                code = lambda a, desc=desc: npb.encode(a, canonical=True, descending=desc)  # noqa: E731
                np.testing.assert_array_equal(code(gk), code(ref_k))
                np.testing.assert_array_equal(npb.encode(gv, canonical=True),
                                              npb.encode(ref_v, canonical=True))
                def pairs(a, b):
                    return sorted(zip(bits(a).tolist(), bits(b).tolist(), strict=False))
                assert pairs(gk, gv) == pairs(keys, values)


def test_backend_protocols():
    """The CuPy backends are what the graph calls (``backends.Backend``); the one that
    shares chunks through CUDA IPC is a ``SharingBackend``, the plain one is not."""
    from distsort.backends import Backend, SharingBackend
    from distsort.backends.share import ipc_backend as cupy_ipc

    assert isinstance(cpb.BACKEND, Backend) and not isinstance(cpb.BACKEND, SharingBackend)
    assert isinstance(cupy_ipc.BACKEND, SharingBackend) and cupy_ipc.BACKEND.shares
    assert cpb.BACKEND.stable and not cupy_ipc.BACKEND.stable
