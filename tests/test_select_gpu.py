"""Selection by bands on the GPU: the counting kernel (kernels/select.cu) against the
NumPy pass, and quantiles and top k of CuPy chunks against NumPy, on fresh lognormal
data with ties, NaN and both zeros."""
import dask.array as da
import numpy as np
import pytest

import distsort
from backends import GPU_ONLY, cupy
from distsort.backends.cpu import bands
from distsort.backends.cpu.select import codes_of

pytestmark = GPU_ONLY

METHODS = ["linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf",
           "averaged_inverted_cdf", "closest_observation", "interpolated_inverted_cdf",
           "hazen", "weibull", "median_unbiased", "normal_unbiased"]


def lognormal(rng, n, dtype, *, ties=False, nans=False):
    """Lognormal keys of ``dtype``; ``ties``: drawn from 50 values, with -0.0 and +0.0;
    ``nans``: 1% NaN."""
    x = rng.lognormal(0.0, 1.5, n).astype(dtype)
    if ties:
        x = rng.choice(np.concatenate([x[:48], np.array([-0.0, 0.0], dtype)]), n)
    if nans:
        x[rng.random(n) < 0.01] = np.nan
    return x


def on_gpu(x, chunks):
    return da.from_array(x, chunks=chunks).map_blocks(cupy.asarray, dtype=x.dtype,
                                                      meta=cupy.empty(0, x.dtype))


@pytest.mark.parametrize("nb", [0, 1, 2, 7, 16, 17, 40])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int16", "uint8"])
@pytest.mark.parametrize("positions", [False, True])
def test_kernel_counts_and_keeps_as_numpy_does(nb, dtype, positions):
    rng = np.random.default_rng(nb * 7 + len(dtype))
    x = (lognormal(rng, 3_000_001, dtype, ties=nb % 2 == 1, nans=True) if dtype[0] == "f"
         else rng.integers(0, 100, 3_000_001).astype(dtype))
    codes = codes_of(x)
    bounds = np.unique(rng.choice(codes, nb)) if nb else codes[:0]
    take = rng.random(2 * bounds.size + 1) < 0.5
    ref = bands.slot_pass(codes, bounds, take, positions=positions, offset=11)
    # expect=0: a first room far too small, so that the kernel runs again with more
    out = bands.slot_pass(cupy.asarray(codes), bounds, take, positions=positions, offset=11)
    from distsort.backends.gpu.select import slot_pass
    small = slot_pass(cupy.asarray(codes), bounds, take, positions=positions, offset=11,
                      expect=0.0)
    for got in (out, small):
        np.testing.assert_array_equal(got[0], ref[0])
        np.testing.assert_array_equal(np.sort(got[1].get()), np.sort(ref[1]))
        if positions:
            order = np.argsort(got[2].get())
            np.testing.assert_array_equal(got[2].get()[order], ref[2])
            np.testing.assert_array_equal(got[1].get()[order], ref[1])
        else:
            assert got[2] is None


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("nans", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_quantiles_of_cupy_chunks_equal_numpys(ties, nans, dtype):
    rng = np.random.default_rng(int(ties) * 2 + int(nans))
    x = lognormal(rng, 2**22 + 3, dtype, ties=ties, nans=nans)
    d = on_gpu(x, 2**19)
    few = np.concatenate([[0.0, 0.001, 0.5, 0.999, 1.0], rng.random(1)])  # by bands
    many = np.concatenate([few, rng.random(40)])  # by sorted chunks (bands_pay)
    for q in (few, many):
        for method in METHODS:
            for ours, theirs in ((distsort.quantile, np.quantile),
                                 (distsort.nanquantile, np.nanquantile)):
                out = ours(d, q, method=method)
                sorts = any("distsort-select-run" in k[0] for k in dict(out.__dask_graph__()))
                assert sorts == (q is many)
                out = out.compute()
                assert isinstance(out, cupy.ndarray)
                np.testing.assert_array_equal(out.get(), theirs(x, q, method=method))
    np.testing.assert_array_equal(distsort.median(d).compute().get(), np.median(x))
    np.testing.assert_array_equal(distsort.nanmedian(d).compute().get(), np.nanmedian(x))


def reference_top(x, k, positions):
    order = np.argsort(x, kind="stable")
    take = order[::-1][:k] if k > 0 else order[:-k]
    return take.astype(np.int64) if positions else x[take]


@pytest.mark.parametrize("k", [1, 1000, -1000, 10**5, -(2**21), 2**22 + 3])
@pytest.mark.parametrize("ties", [False, True])
def test_topk_of_cupy_chunks_equals_numpys(k, ties):
    rng = np.random.default_rng(abs(k) % 97 + int(ties))
    x = lognormal(rng, 2**22 + 3, "float32", ties=ties, nans=True)
    d = on_gpu(x, 2**19)
    for positions, fn in ((False, distsort.topk), (True, distsort.argtopk)):
        out = fn(d, k).compute()
        assert isinstance(out, cupy.ndarray)
        ref = reference_top(x, k, positions)
        assert out.dtype == ref.dtype
        np.testing.assert_array_equal(out.get(), ref)  # NaN equal to NaN, -0.0 to +0.0
