"""Both local sorts of the CuPy backend (radix on order codes, bitonic in place) against
NumPy, element for element, and groups of chunks sorted as one (GPU only).

Every test is marked ``gpu`` and skipped where CuPy or a GPU is missing; the file
imports on any machine.
"""
import numpy as np
import pytest

from arrays import DTYPES, random_keys

from backends import GPU, GPU_ONLY, cupy

pytestmark = GPU_ONLY

import dask  # noqa: E402
import dask.array as da  # noqa: E402

import distsort  # noqa: E402
from distsort.api import wrap_plain  # noqa: E402
from distsort.backends import Order  # noqa: E402
from distsort.backends.cpu import numpy_backend as npb  # noqa: E402

if GPU:
    from distsort.backends.gpu import cupy_backend as cpb

LOCALS = ["radix", "bitonic"]
SIZES = [0, 1, 2, 3, 1000, 4099, 65521, 2**18 + 1]


def _bits(a):
    a = cupy.asnumpy(a) if isinstance(a, cupy.ndarray) else a
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind != "b" else a


@pytest.mark.parametrize("local", LOCALS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("descending", [False, True])
def test_prepare_keys(local, dtype, descending):
    rng = np.random.default_rng(hash((local, dtype, descending)) % 2**32)
    order = Order(descending)
    for n in SIZES:
        keys = random_keys(rng, n, dtype, duplicates=True)
        got = cpb.prepare(cupy.asarray(keys), None, order, local=local)
        want = npb.finish_keys(npb.prepare(keys, None, order), order, keys.dtype)
        np.testing.assert_array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("local", LOCALS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_prepare_argsort_and_sort_by_key(local, dtype):
    rng = np.random.default_rng(hash((local, dtype, 1)) % 2**32)
    for descending in (False, True):
        order = Order(descending, keyed=True)
        for n in SIZES:
            keys = random_keys(rng, n, dtype, duplicates=True)
            k, v = cpb.prepare(cupy.asarray(keys), None, order, start=5, local=local)
            wk, wv = npb.prepare(keys, None, order, start=5)
            np.testing.assert_array_equal(_bits(k), _bits(wk))
            np.testing.assert_array_equal(cupy.asnumpy(v), wv)
            values = random_keys(rng, n, "float32", duplicates=True)
            k, v = cpb.prepare(cupy.asarray(keys), cupy.asarray(values), order, local=local)
            wk, wv = npb.keyed_sort(keys, values, order.descending)
            np.testing.assert_array_equal(_bits(k), _bits(wk))
            np.testing.assert_array_equal(_bits(v), _bits(wv))


@pytest.mark.parametrize("local", ["auto", "radix", "bitonic"])
@pytest.mark.parametrize("group", [1, 4])
def test_api_local_paths_and_groups(local, group):
    """Through the API on Dask's local scheduler, groups of chunks sorted as one."""
    rng = np.random.default_rng(11)
    keys = random_keys(rng, 100_003, "float32", duplicates=True)
    x = da.from_array(cupy.asarray(keys), chunks=10_000, asarray=False)
    with dask.config.set({"distsort.group": group}):
        got = distsort.sort(x, local=local).compute()
        idx = distsort.argsort(x, descending=True, local=local).compute()
    # distsort's order, not np.sort's bits: np.sort leaves -0.0/+0.0 and NaN payloads
    # in an unspecified order, distsort puts -0.0 first and orders NaNs by their code.
    want = npb.finish_keys(npb.prepare(keys, None, Order(False)), Order(False), keys.dtype)
    np.testing.assert_array_equal(_bits(got), _bits(want))
    np.testing.assert_array_equal(cupy.asnumpy(got), np.sort(keys))
    ref = npb.prepare(keys, None, Order(True, keyed=True), start=0)[1]
    np.testing.assert_array_equal(cupy.asnumpy(idx), ref)


@pytest.mark.parametrize("dtype", DTYPES)
def test_plain_cupy_arrays_sorted_by_one_task(dtype):
    """A plain CuPy array that fits is sorted by one task per output (keys: CuPy's own
    radix sort where the dtype has one, floats then put in distsort's order; argsort's
    positions with no key gathered), and a stable ``sort_by_key`` by one stable sort:
    NumPy's results, bit for bit, specials of every sign mixed in."""
    rng = np.random.default_rng(hash(dtype) % 2**32)
    with dask.config.set({"distsort.strategy": "auto"}):  # this module runs the network
        _plain_arrays_one_task(rng, dtype)


def _plain_arrays_one_task(rng, dtype):
    from arrays import assert_sorted_like_numpy, stable_argsort

    from distsort.core.order import encode
    for n in (0, 1, 2, 1000, 65521):
        for fraction in (0.1, 0.9):
            keys = random_keys(rng, n, dtype, special_fraction=fraction, duplicates=True)
            values = rng.integers(0, 2**32, size=n, dtype=np.uint32)
            x, v = cupy.asarray(keys), cupy.asarray(values)
            for descending in (False, True):
                s = distsort.sort(x, descending=descending)
                assert type(s) is cupy.ndarray  # plain in, plain out
                lazy = distsort.sort(wrap_plain(x), descending=descending)
                assert [k for k in lazy.dask.layers if k.startswith("distsort-")] == [lazy.name]
                got = cupy.asnumpy(s)
                assert_sorted_like_numpy(got, keys, descending)
                # bit for bit in distsort's order (-0.0 before +0.0, NaNs by their bits)
                np.testing.assert_array_equal(encode(got, descending=descending),
                                              np.sort(encode(keys, descending=descending)))
                perm = stable_argsort(keys, descending)
                a = distsort.argsort(x, descending=descending)
                np.testing.assert_array_equal(cupy.asnumpy(a), perm)
                sk, sv = distsort.sort_by_key(x, v, descending=descending, stable=True)
                np.testing.assert_array_equal(_bits(sk), _bits(keys[perm]))
                np.testing.assert_array_equal(cupy.asnumpy(sv), values[perm])
