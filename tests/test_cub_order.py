"""CUB's radix order of floats (what ``cupy.sort`` gives), put in distsort's order by
``local_sort.cub_float_order``: checked on the CPU, CUB's order emulated in NumPy; and
its kernels (``local_sort.fix_float_order``) on the GPU, against it."""
import numpy as np
import pytest

from arrays import random_keys, special_values
from backends import GPU, cupy

from distsort.backends.gpu.local_sort import cub_float_order, fix_float_order, float_bounds
from distsort.core.order import encode


def cub_sorted(keys):
    """``keys`` in the order of CUB's radix sort: bits twiddled (negative keys
    inverted, positive ones with the sign set), ``-0.0`` taken as ``+0.0``, stable."""
    u = keys.view(f"u{keys.dtype.itemsize}")
    sign = u.dtype.type(1 << (8 * u.itemsize - 1))
    twiddled = np.where(u & sign, ~u, u | sign)
    twiddled[u == sign] = sign  # -0.0 == +0.0
    return keys[np.argsort(twiddled, kind="stable")]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [0, 1, 2, 17, 1000, 4099])
def test_cub_order_fixed_up_is_distsorts(dtype, n):
    rng = np.random.default_rng(n)
    for special_fraction in (0.0, 0.1, 0.9):
        keys = random_keys(rng, n, dtype, special_fraction=special_fraction,
                           duplicates=True)
        got = cub_float_order(cub_sorted(keys), float_bounds(cub_sorted(keys)))
        want = np.sort(encode(keys))  # distsort's total order, as codes
        np.testing.assert_array_equal(encode(got), want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cub_order_of_specials_alone(dtype):
    """Only NaNs of both signs, only zeros of both signs, and each mixed with the rest."""
    s = special_values(dtype)
    u = s.view(f"u{s.itemsize}")
    nan, zero = np.isnan(s), (u << np.uint8(1)) == 0
    for keys in (s[nan], s[zero], s[nan | zero], np.tile(s, 3), s[~nan]):
        sorted_ = cub_sorted(keys)
        got = cub_float_order(sorted_.copy(), float_bounds(sorted_))
        np.testing.assert_array_equal(encode(got), np.sort(encode(keys)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [0, 1, 2, 17, 4099, 2**20 + 3])
@pytest.mark.parametrize("special_fraction", [None, 0.1, 0.9])
@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="needs CuPy and a CUDA GPU")
def test_the_kernels_fix_cubs_order_on_the_gpu(dtype, n, special_fraction):
    """``fix_float_order`` (in place on the device, nothing read back) gives the bits
    of the NumPy model, on keys sorted by CuPy itself: many zeros and NaNs of both signs
    (``special_fraction`` 0.9), some, or none (normal keys: the kernels after the
    bounds return at once)."""
    rng = np.random.default_rng(n)
    keys = (rng.standard_normal(n).astype(dtype) if special_fraction is None else
            random_keys(rng, n, dtype, special_fraction=special_fraction, duplicates=True))
    d = cupy.sort(cupy.asarray(keys))
    want = cub_float_order(d.get(), float_bounds(d.get()))
    got = fix_float_order(d)
    assert got is d
    np.testing.assert_array_equal(got.get().view(f"u{keys.itemsize}"),
                                  want.view(f"u{keys.itemsize}"))
    np.testing.assert_array_equal(encode(want), np.sort(encode(keys)))
