"""Quantiles, top k, unique values and searches (distsort.select) against NumPy."""
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import distsort
from arrays import DTYPES, random_chunks, random_keys
from backends import BACKENDS, cupy
from distsort.backends.cpu import select as tasks
from distsort.graph.select import rank_bounds
from distsort.plan.select import sample_steps, top_rank

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
STYLES = ("regular", "ragged", "one")
ALL_DTYPES = [*DTYPES, "datetime64[s]", "timedelta64[ms]"]
METHODS = ["linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf",
           "averaged_inverted_cdf", "closest_observation", "interpolated_inverted_cdf",
           "hazen", "weibull", "median_unbiased", "normal_unbiased"]


def keys(rng, n, dtype, duplicates, backend="numpy"):
    """Random elements of ``dtype`` with NaN, -0.0, extremes (NaT for times) mixed in."""
    dtype = np.dtype(dtype)
    if backend == "cupy" and dtype.kind in "mM":
        dtype = np.dtype(np.int64)  # CuPy holds no datetimes: their int64 view instead
    if dtype.kind in "mM":
        x = rng.integers(-10**12, 10**12, size=n).astype(np.int64)
        if duplicates and n:
            x = rng.choice(x[:max(1, n // 8)], size=n)
        x[rng.random(n) < 0.05] = np.iinfo(np.int64).min  # NaT
        return x.view(dtype)
    return random_keys(rng, n, dtype, special_fraction=0.2, duplicates=duplicates)


def chunked(x, rng, style, backend="numpy"):
    if style == "one" and len(x) > 80:
        style = "ragged"
    out = da.from_array(x, chunks=(random_chunks(rng, len(x), style),))
    if backend == "cupy":
        out = out.map_blocks(cupy.asarray, dtype=x.dtype, meta=cupy.empty(0, x.dtype))
    return out


def host(a):
    return a.get() if cupy is not None and isinstance(a, cupy.ndarray) else np.asarray(a)


def same_values(out, ref):
    """Equal as NumPy compares (NaN equal to NaN, -0.0 to +0.0), dtype and shape too."""
    out, ref = host(out), np.asarray(ref)
    assert out.dtype == ref.dtype and out.shape == ref.shape, (out, ref)
    if ref.dtype.kind in "mM":
        np.testing.assert_array_equal(out.view(np.int64), ref.view(np.int64))
    else:
        np.testing.assert_array_equal(out, ref)  # NaNs in the same places count equal


def numpy_or_error(fn, *args, **kwargs):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs), None
    except (TypeError, ValueError, IndexError) as e:
        return None, type(e)


# -- quantiles

QUANTILE_KINDS = {"quantile": (distsort.quantile, np.quantile),
                  "nanquantile": (distsort.nanquantile, np.nanquantile),
                  "percentile": (distsort.percentile, np.percentile)}


@pytest.mark.parametrize("backend", BACKENDS)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 600),
       dtype=st.sampled_from(ALL_DTYPES), style=st.sampled_from(STYLES),
       method=st.sampled_from(METHODS), kind=st.sampled_from(sorted(QUANTILE_KINDS)),
       duplicates=st.booleans(), scalar=st.booleans())
def test_quantiles_equal_numpys(backend, seed, n, dtype, style, method, kind, duplicates,  # noqa: PLR0913, PLR0917
                                scalar):
    rng = np.random.default_rng(seed)
    x = keys(rng, n, dtype, duplicates, backend)
    ours, theirs = QUANTILE_KINDS[kind]
    q = rng.random(4)
    q[:2] = (0.0, 1.0)
    if kind == "percentile":
        q *= 100
    q = float(q[2]) if scalar else q
    ref, error = numpy_or_error(theirs, x, q, method=method)
    if error is not None:
        with pytest.raises(error), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours(chunked(x, rng, style, backend), q, method=method).compute()
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = ours(chunked(x, rng, style, backend), q, method=method)
        assert out.shape == np.shape(ref)
        same_values(out.compute(scheduler="sync"), ref)


@pytest.mark.parametrize("backend", BACKENDS)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 400),
       dtype=st.sampled_from(DTYPES), style=st.sampled_from(STYLES), nan=st.booleans(),
       duplicates=st.booleans())
def test_median_equals_numpys(backend, seed, n, dtype, style, nan, duplicates):  # noqa: PLR0913, PLR0917
    rng = np.random.default_rng(seed)
    x = keys(rng, n, dtype, duplicates, backend)
    ours, theirs = (distsort.nanmedian, np.nanmedian) if nan else (distsort.median, np.median)
    ref, error = numpy_or_error(theirs, x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if error is not None:
            with pytest.raises(error):
                ours(chunked(x, rng, style, backend)).compute()
            return
        same_values(ours(chunked(x, rng, style, backend)).compute(scheduler="sync"), ref)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 400),
       dtype=st.sampled_from(["int16", "uint64", "float16", "float64", "datetime64[s]"]),
       style=st.sampled_from(STYLES), method=st.sampled_from(["linear", "nearest", "hazen"]),
       by_distsort=st.booleans(), nan=st.booleans())
def test_quantiles_of_sorted_chunks_read_their_ranks(seed, n, dtype, style, method,  # noqa: PLR0913, PLR0917
                                                     by_distsort, nan):
    rng = np.random.default_rng(seed)
    x = keys(rng, n, dtype, duplicates=True)
    a = distsort.sort(chunked(x, rng, style)) if by_distsort else chunked(np.sort(x), rng, style)
    ours, theirs = (distsort.nanquantile, np.nanquantile) if nan else (distsort.quantile,
                                                                       np.quantile)
    q = rng.random(3)
    ref, error = numpy_or_error(theirs, x, q, method=method)
    if error is None:
        out = ours(a, q, method=method, assume_sorted=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            same_values(out.compute(scheduler="sync"), ref)
    if not nan and np.dtype(dtype).kind != "M":
        same_values(distsort.median(a, assume_sorted=True).compute(), np.median(x))


def test_presorted_runs_are_the_chunks_codes_unsorted_again():
    chunk = np.array([3.0, 1.0, 2.0])  # not sorted: shows that no sort runs
    assert tasks.sorted_run(chunk, presorted=True).tolist() == \
        tasks.codes_of(chunk).tolist()


def test_quantile_of_arrays_gives_what_numpy_gives():
    x = np.random.default_rng(1).lognormal(size=1001).astype(np.float32)
    out = distsort.quantile(x, 0.3)
    assert type(out) is type(np.quantile(x, 0.3)) and out == np.quantile(x, 0.3)
    same_values(distsort.percentile(x, [1, 99.9]), np.percentile(x, [1, 99.9]))
    same_values(distsort.quantile(x, [[0.1], [0.2]], keepdims=True),
                np.quantile(x, [[0.1], [0.2]], keepdims=True))
    assert distsort.median(x.reshape(7, 143)) == np.median(x)


def test_quantile_refuses_what_numpy_refuses():
    x = da.arange(10, chunks=3)
    with pytest.raises(ValueError, match="range"):
        distsort.quantile(x, 1.5)
    with pytest.raises(ValueError, match="range"):
        distsort.percentile(x, -1)
    with pytest.raises(ValueError, match="not a valid method"):
        distsort.quantile(x, 0.5, method="nope")
    with pytest.raises(IndexError):
        distsort.quantile(da.zeros(0, chunks=1), 0.5)
    with pytest.raises(NotImplementedError):
        distsort.quantile(da.ones((4, 4), chunks=2), 0.5, axis=0)
    with pytest.raises(TypeError):
        distsort.quantile(da.from_array(np.ones(3, complex)), 0.5)


def test_quantile_sorts_no_chunk_and_keeps_a_small_band_of_each():
    """The bands task sees samples, every pass keeps only the elements inside the
    bands: each far smaller than a chunk, so no chunk is sorted, merged or sent whole."""
    x = da.random.default_rng(2).random(2**18, chunks=2**16)
    q = distsort.quantile(x, [0.5])
    graph = dict(q.__dask_graph__())
    assert not [k for k in graph if "distsort-select-run" in k[0]]
    passes = dask.get(graph, [k for k in graph if "distsort-select-pass" in k[0]])
    assert len(passes) == 4 and all(0 < p[1].size < 2**16 // 8 for p in passes)
    np.testing.assert_array_equal(q.compute(), np.quantile(x.compute(), [0.5]))


def test_many_quantiles_sort_the_chunks_instead_of_wide_bands():
    """Bands around 400 ranks of 20000 elements would hold most of them: every chunk is
    sorted and the ranks read from the sorted chunks, equal to NumPy's all the same."""
    x = np.random.default_rng(6).lognormal(size=20000)
    q = np.linspace(0, 1, 200)
    d = da.from_array(x, chunks=3000)
    out = distsort.quantile(d, q)
    assert [k for k in dict(out.__dask_graph__()) if "distsort-select-run" in k[0]]
    same_values(out.compute(), np.quantile(x, q))
    few = distsort.quantile(d, q[:3])
    assert not [k for k in dict(few.__dask_graph__()) if "distsort-select-run" in k[0]]
    same_values(few.compute(), np.quantile(x, q[:3]))


# -- selection by rank, on tuples of runs

@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 7), steps=st.integers(1, 9),
       distinct=st.integers(1, 50))
def test_bounds_windows_and_pick_find_every_rank(seed, k, steps, distinct):
    """Runs with many equal codes, samples spaced ``steps`` apart: the code of every
    rank is the rank's element of the merge."""
    rng = np.random.default_rng(seed)
    runs = [np.sort(rng.integers(0, distinct, size=int(rng.integers(0, 60))).astype(np.uint16))
            for _ in range(k)]
    if not sum(map(len, runs)):
        return
    step = tuple(steps for _ in runs)
    lengths = tuple(map(len, runs))
    ranks = list(range(sum(lengths)))
    bounds = rank_bounds(lengths, step, [tasks.run_sample(r, steps) for r in runs], ranks)
    windows = [tasks.window_counts(r, bounds) for r in runs]
    np.testing.assert_array_equal(tasks.pick_codes(ranks, bounds, windows),
                                  np.sort(np.concatenate(runs)))


def test_sample_steps_keep_the_bracketing_table_small():
    assert sample_steps((100, 0)) == (1, 1)
    assert sample_steps((2**30,)) == (2**18,)
    steps = sample_steps((2**24,) * 128)
    assert 128 * sum(-(-2**24 // s) for s in steps) <= 2**18
    assert sample_steps((2**24,) * 1000)[0] == 2**20  # 16 samples a run at least
    assert top_rank(10, 4) == 6 and top_rank(3, 4) == 0


# -- top k

def reference_top(x, k, positions):
    order = np.argsort(x, kind="stable")
    take = order[::-1][:k] if k > 0 else order[:-k]
    return take.astype(np.int64) if positions else x[take]


@pytest.mark.parametrize("backend", BACKENDS)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 600),
       dtype=st.sampled_from(ALL_DTYPES), style=st.sampled_from(STYLES),
       fraction=st.floats(-1.2, 1.2), positions=st.booleans(), duplicates=st.booleans())
def test_topk_and_argtopk_equal_numpys(backend, seed, n, dtype, style, fraction, positions,  # noqa: PLR0913, PLR0917
                                       duplicates):
    rng = np.random.default_rng(seed)
    x = keys(rng, n, dtype, duplicates, backend)
    k = int(fraction * n) or (1 if fraction >= 0 else -1)
    fn = distsort.argtopk if positions else distsort.topk
    out = fn(chunked(x, rng, style, backend), k)
    assert out.shape == (min(abs(k), n),)
    same_values(out.compute(scheduler="sync"), reference_top(x, k, positions))


@pytest.mark.parametrize("k", [2, -2, 5, -4, 9])
def test_argtopk_ties_across_chunks_follow_numpys_stable_order(k):
    x = np.array([1, 5, 5, 5, 5, 2, 5, 0, 0, 0])
    same_values(distsort.argtopk(da.from_array(x, chunks=3), k).compute(),
                reference_top(x, k, positions=True))
    nans = np.array([np.nan, -0.0, 0.0, -np.nan, 1.0, np.nan, 0.0, -0.0])
    same_values(distsort.argtopk(da.from_array(nans, chunks=3), k).compute(),
                reference_top(nans, k, positions=True))


def test_topk_takes_k_larger_than_a_chunk_and_plain_arrays():
    x = np.random.default_rng(3).permutation(5000).astype(np.float64)
    d = da.from_array(x, chunks=300)
    same_values(distsort.topk(d, 2000).compute(), np.sort(x)[::-1][:2000])
    same_values(distsort.argtopk(x, -700), np.argsort(x)[:700])
    assert isinstance(distsort.topk(x, 3), np.ndarray)
    with pytest.raises(NotImplementedError):
        distsort.topk(da.ones((4, 4), chunks=2), 2)


# -- unique

@pytest.mark.parametrize("backend", BACKENDS)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 400),
       dtype=st.sampled_from(ALL_DTYPES), style=st.sampled_from(STYLES),
       flags=st.tuples(st.booleans(), st.booleans(), st.booleans()))
def test_unique_equals_numpys(backend, seed, n, dtype, style, flags):
    rng = np.random.default_rng(seed)
    x = keys(rng, n, dtype, duplicates=True, backend=backend)
    out = distsort.unique(chunked(x, rng, style, backend), *flags)
    ref = np.unique(x, *flags)
    if not any(flags):
        out, ref = (out,), (ref,)
    for o, r in zip(dask.compute(*out, scheduler="sync"), ref, strict=True):
        same_values(o, r)


def test_unique_calls_every_nan_one_value_and_both_zeros_one():
    nan = np.array([0x7FF8000000000001, 0xFFF8000000000005], np.uint64).view(np.float64)
    x = np.array([nan[0], -0.0, 1.0, 0.0, nan[1], np.nan, -0.0, 0.0, np.nan, 1.0])
    for chunks in (1, 2, 3):
        out = distsort.unique(da.from_array(x, chunks=chunks), return_counts=True,
                              return_index=True, return_inverse=True)
        for o, r in zip(dask.compute(*out), np.unique(x, True, True, True), strict=True):
            same_values(o, r)


def test_unique_keeps_the_sorts_chunks_and_takes_plain_arrays():
    x = np.random.default_rng(4).integers(0, 50, 1000)
    u = distsort.unique(da.from_array(x, chunks=100))
    assert u.numblocks[0] == distsort.sort(da.from_array(x, chunks=100)).numblocks[0] > 1
    assert np.isnan(u.shape[0])
    same_values(u.compute(), np.unique(x))
    values, inverse = distsort.unique(x.reshape(10, 100), return_inverse=True)
    same_values(inverse, np.unique(x.reshape(10, 100), return_inverse=True)[1])


# -- searchsorted

@pytest.mark.parametrize("backend", BACKENDS)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 500), m=st.integers(0, 50),
       dtype=st.sampled_from(ALL_DTYPES), styles=st.tuples(*[st.sampled_from(STYLES)] * 2),
       side=st.sampled_from(["left", "right"]), by_distsort=st.booleans())
def test_searchsorted_equals_numpys(backend, seed, n, m, dtype, styles, side, by_distsort):  # noqa: PLR0913, PLR0917
    rng = np.random.default_rng(seed)
    x = keys(rng, n, dtype, duplicates=True, backend=backend)
    v = keys(rng, m, dtype, duplicates=False, backend=backend)
    if n and m:  # values that occur in x, their ties included
        v[: m // 2] = rng.choice(x, size=m // 2)
    s = np.sort(x)
    a = distsort.sort(chunked(x, rng, styles[0], backend)) if by_distsort else \
        chunked(s, rng, styles[0], backend)
    out = distsort.searchsorted(a, chunked(v, rng, styles[1], backend), side=side)
    same_values(out.compute(scheduler="sync"), np.searchsorted(s, v, side=side).astype(np.int64))


def test_searchsorted_of_scalars_mixed_dtypes_and_plain_arrays():
    s = np.sort(np.random.default_rng(5).integers(-100, 100, 300))
    a = da.from_array(s, chunks=37)
    assert distsort.searchsorted(a, 3.5).compute() == np.searchsorted(s, 3.5)
    same_values(distsort.searchsorted(s, np.array([-1000.0, 0.5, 99.0]), side="right"),
                np.searchsorted(s, np.array([-1000.0, 0.5, 99.0]), side="right"))
    with pytest.raises(ValueError, match="side"):
        distsort.searchsorted(a, 1, side="middle")
