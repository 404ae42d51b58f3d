"""Sorts of codes whose low bits already ascend (the positions of a stable sort): the
radix sort of the high bytes alone (``radix.sort_high``), the CPU backend's keyed
chunks of ascending positions and keys-only chunks already in order, the stable
``sort_by_key`` through them on the network and in a network of one group, and CuPy
chunks of increasing packed values; each against NumPy bit for bit."""
import dask
import dask.array as da
import numpy as np
import pytest

import distsort
from distsort.backends import Order
from distsort.backends.cpu import merge, radix
from distsort.backends.cpu import numpy_backend as npb

from arrays import DTYPES, bits, random_keys, stable_argsort

from backends import GPU, cupy

needs_numba = pytest.mark.skipif(merge.numba is None, reason="needs numba (the fast extra)")
BOTH = pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=needs_numba)],
                               ids=["numpy", "numba"])


@pytest.fixture
def compiled_from_16(monkeypatch, compiled):
    """The compiled radix sort (or NumPy's sort, ``compiled`` False) from 16 elements."""
    monkeypatch.setattr(merge, "ENABLED", compiled)
    monkeypatch.setattr(radix, "RADIX_FROM", 16)


@BOTH
@pytest.mark.parametrize("dtype", [np.uint64, np.uint32])
def test_sort_high_sorts_codes_whose_low_bits_ascend(compiled, compiled_from_16, dtype):
    rng = np.random.default_rng([3, compiled, np.dtype(dtype).itemsize])
    width = 8 * np.dtype(dtype).itemsize
    for n, low_bits, few in [(0, 8, 5), (1, 12, 5), (5000, 16, 50), (5000, 13, 3),
                             (5000, 20, 1), (3000, width - 8, 200)]:
        high = rng.integers(0, 2 ** (width - low_bits), n, dtype=np.uint64)
        high = rng.choice(high[:few], n) if n else high  # many equal high parts
        low = np.sort(rng.integers(0, 2**low_bits, n, dtype=np.uint64))  # ascending
        codes = ((high << np.uint64(low_bits)) | low).astype(dtype)
        expected = np.sort(codes)
        np.testing.assert_array_equal(radix.sort_high(codes.copy(), low_bits), expected)


@BOTH
@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_keyed_chunk_of_ascending_positions_sorts_as_all_its_bits(compiled, compiled_from_16,
                                                                  descending):
    """Keys of up to 4 bytes with uint32 positions (argsort's and the stable sort's
    pairs): sorted by the keys' bits, then the runs of signed zeros and NaNs again, the
    result is the sort of the whole codes; so are values that ascend with repeats."""
    rng = np.random.default_rng([5, compiled, descending])
    order = Order(descending=descending, keyed=True)
    for dtype in (d for d in DTYPES if np.dtype(d).itemsize <= 4):
        for n, special, start in [(0, 0.1, 0), (7, 0.5, 3), (3000, 0.2, 2**31), (2000, 1.0, 9)]:
            keys = random_keys(rng, n, dtype, special_fraction=special, duplicates=True)
            for values in (np.arange(start, start + n, dtype=np.uint32),
                           np.sort(rng.integers(0, 50, n)).astype(np.uint32)):
                got = npb.prepare(keys, values, order)
                codes = npb._signed(npb.keyed_codes(keys, values, descending))
                np.testing.assert_array_equal(got, np.sort(codes))


@BOTH
@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_stable_sort_of_4_byte_keys_sorts_the_bytes_above_the_index(compiled, compiled_from_16,
                                                                    descending):
    """The one-device stable sort: canonical codes above each element's index, sorted
    by the bytes above the index alone, is NumPy's stable argsort, bit for bit."""
    rng = np.random.default_rng([9, compiled, descending])
    order = Order(descending=descending, keyed=True)
    for dtype in ("float32", "int32", "uint32"):
        for n, special in [(5000, 0.2), (3000, 1.0)]:
            keys = random_keys(rng, n, dtype, special_fraction=special, duplicates=True)
            values = rng.permutation(n)
            perm = stable_argsort(keys, descending)
            sk, sv = npb.stable_sort(keys, values, order)
            np.testing.assert_array_equal(bits(sk), bits(keys[perm]))
            np.testing.assert_array_equal(sv, values[perm])


@BOTH
def test_keys_in_order_give_the_codes_of_keys_in_any_order(compiled, compiled_from_16):
    rng = np.random.default_rng(2)
    for dtype in DTYPES:
        keys = random_keys(rng, 3000, dtype, duplicates=True)
        for order in (Order(), Order(descending=True)):
            codes = npb.prepare(keys, None, order)
            in_order = npb.finish_keys(codes, order, keys.dtype)  # distsort's order
            np.testing.assert_array_equal(npb.prepare(in_order, None, order), codes)
            reverse = Order(descending=not order.descending)  # in order, but the other one
            np.testing.assert_array_equal(npb.prepare(in_order, None, reverse),
                                          npb.prepare(keys, None, reverse))


@BOTH
@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize("kdtype,vdtype", [("uint16", "int16"), ("int8", "uint8"),
                                           ("float32", "int32"), ("int32", "float32"),
                                           ("float16", "float64"), ("bool", "int32")])
def test_stable_sort_by_key_on_the_network_is_numpys_stable_argsort(
        compiled, compiled_from_16, descending, kdtype, vdtype):
    """Fresh random pairs with many equal keys (signed zeros, NaNs of every payload), in
    chunks sorted by the radix sort of their keys' bits and merged by the network."""
    rng = np.random.default_rng()
    n = 6007
    keys = random_keys(rng, n, kdtype, special_fraction=0.2, duplicates=True)
    values = random_keys(rng, n, vdtype, duplicates=True)
    with dask.config.set({"distsort.strategy": "network"}):
        sk, sv = distsort.sort_by_key(da.from_array(keys, chunks=900),
                                      da.from_array(values, chunks=700),
                                      descending=descending, stable=True)
        sk, sv = dask.compute(sk, sv, scheduler="threads")
    perm = stable_argsort(keys, descending)
    np.testing.assert_array_equal(bits(sk), bits(keys[perm]))
    np.testing.assert_array_equal(bits(sv), bits(values[perm]))


@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize("kdtype,vdtype", [("float32", "int32"), ("uint16", "int16"),
                                           ("float64", "int64")])
def test_network_of_one_group_sorts_stably_in_that_group(descending, kdtype, vdtype):
    """A network plan whose one group holds every chunk (no merge after it) sorts a
    stable ``sort_by_key`` there, with no positions packed, gathered or merged; a
    smaller group merges them.  Both are NumPy's stable argsort, bit for bit."""
    rng = np.random.default_rng()
    keys = random_keys(rng, 10007, kdtype, special_fraction=0.2, duplicates=True)
    values = random_keys(rng, 10007, vdtype, duplicates=True)
    perm = stable_argsort(keys, descending)
    for group, merged in ((8, False), (2, True)):
        with dask.config.set({"distsort.strategy": "network", "distsort.group": group}):
            sk, sv = distsort.sort_by_key(da.from_array(keys, chunks=1300),
                                          da.from_array(values, chunks=1300),
                                          descending=descending, stable=True)
        names = " ".join(map(str, sv.__dask_graph__().layers))
        assert ("round" in names) == merged, names
        assert any(w in names for w in ("pack", "gather", "arange")) == merged, names
        sk, sv = dask.compute(sk, sv, scheduler="threads")
        np.testing.assert_array_equal(bits(sk), bits(keys[perm]))
        np.testing.assert_array_equal(bits(sv), bits(values[perm]))


@pytest.mark.parametrize("local", ["radix", "bitonic"])
@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize("kdtype", ["float32", "float16", "int16", "float64", "uint32"])
@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="needs CuPy and a CUDA GPU")
def test_gpu_chunk_of_increasing_values_sorts_by_the_key_alone(local, descending, kdtype):
    """CuPy chunks whose uint64 values strictly increase (a stable ``sort_by_key``'s
    values packed under their positions) are sorted by one stable sort of the key, and
    other values by the keyed order's codes: the NumPy backend's order, bit for bit."""
    from distsort.backends.gpu import cupy_backend as cpb
    rng = np.random.default_rng([11, descending])
    order = Order(descending=descending, keyed=True)
    for n in (0, 1, 1000, 65521):
        keys = random_keys(rng, n, kdtype, special_fraction=0.2, duplicates=True)
        for values in ((np.arange(n, dtype=np.uint64) << np.uint64(32))
                       | rng.integers(0, 2**32, n, dtype=np.uint64),
                       np.sort(rng.integers(-50, 50, n))):
            k, v = cpb.prepare(cupy.asarray(keys), cupy.asarray(values), order, local=local)
            wk, wv = npb.keyed_sort(keys, values, descending)
            np.testing.assert_array_equal(bits(cupy.asnumpy(k)), bits(wk))
            np.testing.assert_array_equal(cupy.asnumpy(v), wv)
