"""distsort.sort / argsort / sort_by_key against NumPy, on random data and chunkings."""
import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import distsort
from arrays import (DTYPES, assert_same_multiset, assert_sorted_like_numpy, bits, descending_of,
                    missing, random_chunks, random_keys, stable_argsort)

SIZES = [0, 1, 2, 3, 5, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 251, 257,
         509, 1021, 1024, 1025]
CHUNK_COUNTS = [1, 2, 3, 5, 7, 8, 9, 16, 31, 33]
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def sort_by_key_reference(keys, values, descending=False):
    """NumPy's order on keys (descending if asked, NaNs last), ties by value ascending."""
    _, rank = np.unique(keys, return_inverse=True)
    rank = rank.reshape(-1).astype(np.int64)
    perm = np.lexsort((values, -rank if descending else rank, missing(keys)))
    return keys[perm], values[perm]


def as_dask(x, chunks):
    return da.from_array(x, chunks=(chunks,))


@st.composite
def cases(draw, dtypes=tuple(DTYPES)):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n = draw(st.one_of(st.sampled_from(SIZES), st.integers(0, 3000)))
    dtype = draw(st.sampled_from(dtypes))
    style = draw(st.sampled_from(["regular", "ragged", "count", "one"]))
    if style == "one" and n > 200:
        style = "ragged"
    if style == "count":
        count = draw(st.sampled_from(CHUNK_COUNTS))
        chunks = tuple(len(c) for c in np.array_split(np.arange(n), count))
    else:
        chunks = random_chunks(rng, n, style)
    x = random_keys(rng, n, dtype, duplicates=draw(st.booleans()))
    return x, chunks


@SETTINGS
@given(case=cases(), descending=st.booleans())
def test_sort(case, descending):
    x, chunks = case
    out = distsort.sort(as_dask(x, chunks), descending=descending).compute(scheduler="sync")
    assert_sorted_like_numpy(out, x, descending)


@SETTINGS
@given(case=cases())
def test_descending_reverses_the_ascending_order_but_nans_stay_last(case):
    x, chunks = case
    up = distsort.sort(as_dask(x, chunks)).compute(scheduler="sync")
    down = distsort.sort(as_dask(x, chunks), descending=True).compute(scheduler="sync")
    np.testing.assert_array_equal(bits(down), bits(descending_of(up)))


@SETTINGS
@given(case=cases(), descending=st.booleans())
def test_argsort_is_numpys_stable_argsort(case, descending):
    x, chunks = case
    out = distsort.argsort(as_dask(x, chunks), descending=descending).compute(scheduler="sync")
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, stable_argsort(x, descending))


@SETTINGS
@given(case=cases(), vdtype=st.sampled_from(DTYPES), descending=st.booleans())
def test_sort_by_key(case, vdtype, descending):
    keys, chunks = case
    values = random_keys(np.random.default_rng(len(keys)), len(keys), vdtype, duplicates=True)
    sk, sv = distsort.sort_by_key(as_dask(keys, chunks), as_dask(values, chunks[::-1]),
                                  descending=descending)
    sk, sv = dask.compute(sk, sv, scheduler="sync")
    rk, rv = sort_by_key_reference(keys, values, descending)
    assert sk.dtype == keys.dtype and sv.dtype == values.dtype
    assert np.array_equal(sk, rk, equal_nan=True) and np.array_equal(sv, rv, equal_nan=True)
    assert_same_multiset(sk, keys)


@pytest.mark.parametrize("scheduler", ["threads", "sync"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_with_local_schedulers(dtype, scheduler):
    rng = np.random.default_rng(7)
    x = random_keys(rng, 4099, dtype, special_fraction=0.2)
    for count in (3, 9):
        chunks = tuple(len(c) for c in np.array_split(x, count))
        dx = as_dask(x, chunks)
        s, a = dask.compute(distsort.sort(dx), distsort.argsort(dx), scheduler=scheduler)
        assert_sorted_like_numpy(s, x)
        np.testing.assert_array_equal(a, stable_argsort(x))


@pytest.mark.parametrize("dtype", ["float64", "int64", "uint64", "float16", "bool"])
def test_distributed_local_cluster(cluster_client, dtype):
    rng = np.random.default_rng(11)
    x = random_keys(rng, 20_011, dtype, special_fraction=0.05)
    v = rng.integers(-100, 100, size=len(x)).astype(np.int16)
    dx = da.from_array(x, chunks=(1_000, 2_000, 500, 6_511, 10_000))
    out = cluster_client.compute(
        [distsort.sort(dx), distsort.sort(dx, descending=True), distsort.argsort(dx),
         *distsort.sort_by_key(dx, da.from_array(v, chunks=3_000))], sync=True)
    assert_sorted_like_numpy(out[0], x)
    assert_sorted_like_numpy(out[1], x, descending=True)
    np.testing.assert_array_equal(out[2], stable_argsort(x))
    rk, rv = sort_by_key_reference(x, v)
    assert np.array_equal(out[3], rk, equal_nan=True)
    np.testing.assert_array_equal(out[4], rv)


@pytest.mark.parametrize("count", [3, 5, 7, 9, 31, 33])
def test_chunk_counts(count):
    rng = np.random.default_rng(count)
    x = rng.normal(size=count * 37 + 5)
    chunks = tuple(len(c) for c in np.array_split(x, count))
    dx = as_dask(x, chunks)
    assert_sorted_like_numpy(distsort.sort(dx).compute(scheduler="sync"), x)
    np.testing.assert_array_equal(distsort.argsort(dx).compute(scheduler="sync"),
                                  stable_argsort(x))


def test_output_chunking_is_regular_and_lazy():
    x = da.from_array(np.arange(100.0)[::-1].copy(), chunks=((10, 0, 60, 30),))
    s = distsort.sort(x)
    assert isinstance(s, da.Array)
    assert s.chunks == ((34, 34, 32),)
    np.testing.assert_array_equal(s.compute(), np.arange(100.0))


def test_numpy_and_list_inputs_give_numpy_arrays_at_once():
    rng = np.random.default_rng(3)
    x = rng.integers(-50, 50, size=1000).astype(np.int32)
    s = distsort.sort(x)
    assert type(s) is np.ndarray  # as numpy.sort: computed, not lazy
    assert_sorted_like_numpy(s, x)
    assert type(distsort.argsort(x)) is np.ndarray
    np.testing.assert_array_equal(distsort.sort([3, 1, 2]), [1, 2, 3])
    assert isinstance(distsort.sort(da.from_array(x, chunks=300)), da.Array)
    k, v = distsort.sort_by_key(x, da.from_array(x, chunks=1000))  # any Dask input: lazy
    assert isinstance(k, da.Array) and isinstance(v, da.Array)


def test_input_is_not_modified():
    rng = np.random.default_rng(5)
    x = rng.normal(size=5000)
    before = x.copy()
    dx = da.from_array(x, chunks=700)
    dask.compute(distsort.sort(dx), distsort.argsort(dx), *distsort.sort_by_key(dx, dx),
                 scheduler="threads")
    np.testing.assert_array_equal(bits(x), bits(before))


def test_graph_names_are_deterministic_and_build_touches_no_data():
    calls = []

    def spy(block):
        calls.append(1)
        return block

    x = da.from_array(np.arange(50.0), chunks=7).map_blocks(spy)
    calls.clear()  # map_blocks itself called spy on an empty array to learn the meta
    a, b = distsort.sort(x), distsort.sort(x)
    assert a.name == b.name
    assert distsort.sort(x, descending=True).name != a.name
    assert not calls, "building the graph must not compute anything"
    layers = list(a.dask.layers)
    assert sum(name.startswith("distsort-round") for name in layers) == 6
    assert any(name.startswith("distsort-prepare-") for name in layers)


class TestNDArrays:
    def test_axis_none_sorts_flattened(self):
        rng = np.random.default_rng(1)
        x = rng.normal(size=(30, 17))
        dx = da.from_array(x, chunks=(7, 5))
        assert_sorted_like_numpy(distsort.sort(dx, axis=None).compute(), x.ravel())
        np.testing.assert_array_equal(distsort.argsort(dx, axis=None).compute(),
                                      stable_argsort(x.ravel()))

    @pytest.mark.parametrize("axis", [0, 1, -1, -2])
    def test_axis_in_one_chunk_sorts_block_by_block(self, axis):
        rng = np.random.default_rng(2)
        x = random_keys(rng, 40 * 23, "float32").reshape(40, 23)
        chunks = (40, 5) if axis in (0, -2) else (6, 23)
        dx = da.from_array(x, chunks=chunks)
        out = distsort.sort(dx, axis=axis).compute()
        assert np.array_equal(out, np.sort(x, axis=axis), equal_nan=True)
        np.testing.assert_array_equal(distsort.argsort(dx, axis=axis).compute(),
                                      np.argsort(x, axis=axis, kind="stable"))
        down = distsort.sort(dx, axis=axis, descending=True).compute()
        ref = np.apply_along_axis(descending_of, axis, np.sort(x, axis=axis))
        assert np.array_equal(down, ref, equal_nan=True)

    def test_split_axis_raises_with_advice(self):
        dx = da.ones((10, 10), chunks=5)
        with pytest.raises(ValueError, match=r"rechunk\({1: -1}\)"):
            distsort.sort(dx, axis=1)


# ---------------------------------------------------------------- datetime64 / timedelta64
FEWER = settings(SETTINGS, max_examples=25)
TIME_DTYPES = ["datetime64[ns]", "datetime64[D]", "datetime64[s]", "datetime64[Y]",
               "timedelta64[ns]", "timedelta64[ms]", "timedelta64[h]"]


def random_times(rng, n, dtype, duplicates=False):
    """Random datetime64/timedelta64 over the whole int64 range, with NaT and extremes."""
    x = rng.integers(-2**63 + 1, 2**63 - 1, size=n, dtype=np.int64, endpoint=True)
    x = np.where(rng.random(n) < 0.5, rng.integers(-10**6, 10**6, size=n), x)
    if duplicates and n:
        x = rng.choice(x[: max(1, n // 8)], size=n)
    specials = np.array([-2**63, -2**63, -2**63 + 1, 2**63 - 1, 0, -1, 1], dtype=np.int64)
    x = np.where(rng.random(n) < 0.15, rng.choice(specials, size=n), x)  # -2**63 is NaT
    return x.astype(np.int64).view(dtype)


def time_rank(t, descending=False):
    """Order keys of times as NumPy sorts them (NaT last for both orders), computed apart
    from distsort."""
    nat, i8 = np.isnat(t).astype(np.int8), t.view(np.int64)
    return (nat, ~i8) if descending else (nat, i8)


@st.composite
def time_cases(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.one_of(st.sampled_from(SIZES), st.integers(0, 2000)))
    dtype = draw(st.sampled_from(TIME_DTYPES))
    chunks = random_chunks(rng, n, draw(st.sampled_from(["regular", "ragged"])))
    return random_times(rng, n, dtype, duplicates=draw(st.booleans())), chunks


@FEWER
@given(case=time_cases(), descending=st.booleans())
def test_times_sort_like_numpy_with_nat_last(case, descending):
    t, chunks = case
    dt = as_dask(t, chunks)
    s, a = dask.compute(distsort.sort(dt, descending=descending),
                        distsort.argsort(dt, descending=descending), scheduler="sync")
    ref = np.sort(t)
    assert np.isnat(ref[len(ref) - np.isnat(t).sum():]).all()  # NumPy's NaT-last order
    assert s.dtype == t.dtype
    np.testing.assert_array_equal(s.view(np.int64), (descending_of(ref) if descending else ref)
                                  .view(np.int64))
    np.testing.assert_array_equal(a, stable_argsort(t, descending))
    if not descending:
        np.testing.assert_array_equal(a, np.argsort(t, kind="stable"))


@FEWER
@given(case=time_cases(), vdtype=st.sampled_from(["timedelta64[s]", "int16", "float64"]),
       descending=st.booleans(), stable=st.booleans())
def test_times_as_keys_and_values(case, vdtype, descending, stable):
    keys, chunks = case
    rng = np.random.default_rng(len(keys))
    values = (random_times(rng, len(keys), vdtype, duplicates=True) if vdtype[0] == "t"
              else random_keys(rng, len(keys), vdtype, duplicates=True))
    sk, sv = dask.compute(*distsort.sort_by_key(as_dask(keys, chunks), as_dask(values, chunks),
                                                descending=descending, stable=stable),
                          scheduler="sync")
    if stable:
        perm = stable_argsort(keys, descending)
    else:
        vkey = time_rank(values) if vdtype[0] == "t" else (np.unique(values, return_inverse=True)
                                                           [1].reshape(-1),)
        perm = np.lexsort(vkey[::-1] + time_rank(keys, descending)[::-1])
    assert sk.dtype == keys.dtype and sv.dtype == values.dtype
    np.testing.assert_array_equal(bits(sk), bits(keys[perm]))
    if stable or vdtype[0] != "f":
        np.testing.assert_array_equal(bits(sv), bits(values[perm]))
    else:  # NaNs of several payloads under one key: distsort orders them by their bits
        assert np.array_equal(sv, values[perm], equal_nan=True)
        assert_same_multiset(sv, values)


def test_times_nd_and_verified():
    rng = np.random.default_rng(4)
    t = random_times(rng, 30 * 41, "datetime64[ms]").reshape(30, 41)
    dt = da.from_array(t, chunks=(7, 41))
    np.testing.assert_array_equal(distsort.sort(dt, verify=True).compute().view(np.int64),
                                  np.sort(t, axis=-1).view(np.int64))
    np.testing.assert_array_equal(distsort.sort(dt, axis=None, verify=True).compute()
                                  .view(np.int64), np.sort(t, axis=None).view(np.int64))
    np.testing.assert_array_equal(distsort.argsort(dt, axis=-1).compute(),
                                  np.argsort(t, axis=-1, kind="stable"))


# ---------------------------------------------------------------- stable=
@pytest.mark.parametrize("stable", [True, False, None])
def test_sort_stable_is_x_of_argsort_and_the_default_the_bit_order(stable):
    rng = np.random.default_rng(8)
    x = random_keys(rng, 3001, "float32", duplicates=True)
    dx = da.from_array(x, chunks=400)
    out = distsort.sort(dx, stable=stable).compute()
    if stable:  # numpy.sort(x, stable=True): equal keys (-0.0, +0.0, NaNs) in input order
        np.testing.assert_array_equal(bits(out), bits(x[stable_argsort(x)]))
        assert not np.array_equal(bits(out), bits(distsort.sort(dx).compute()))
    else:
        np.testing.assert_array_equal(bits(out), bits(distsort.sort(dx).compute()))
        assert_sorted_like_numpy(out, x)
    np.testing.assert_array_equal(distsort.argsort(dx, stable=stable).compute(),
                                  stable_argsort(x))


@FEWER
@given(case=cases(), vdtype=st.sampled_from(DTYPES), descending=st.booleans())
def test_sort_by_key_stable_keeps_input_order_of_equal_keys(case, vdtype, descending):
    keys, chunks = case
    values = random_keys(np.random.default_rng(len(keys) + 1), len(keys), vdtype,
                         duplicates=True)
    sk, sv = dask.compute(*distsort.sort_by_key(as_dask(keys, chunks),
                                                as_dask(values, chunks[::-1]),
                                                descending=descending, stable=True),
                          scheduler="sync")
    perm = stable_argsort(keys, descending)
    assert sk.dtype == keys.dtype and sv.dtype == values.dtype
    np.testing.assert_array_equal(bits(sk), bits(keys[perm]))
    np.testing.assert_array_equal(bits(sv), bits(values[perm]))


@pytest.mark.parametrize("strategy", ["auto", "network"])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("kdtype,vdtype", [("int16", "uint16"), ("uint16", "float16"),
                                           ("int8", "int16"), ("uint8", "int8")])
def test_sort_by_key_stable_packs_narrow_integer_keys(kdtype, vdtype, descending, strategy):
    """Integer keys and values of 4 bytes together on the network: one sort of packed
    codes (key code, position, value bits), bit for bit NumPy's stable order; on the
    one-device plan as before."""
    rng = np.random.default_rng()
    keys = random_keys(rng, 5000, kdtype, duplicates=True)
    values = rng.integers(0, 2**16, 5000, dtype=np.uint16).astype(
        f"u{np.dtype(vdtype).itemsize}", casting="unsafe").view(vdtype)
    with dask.config.set({"distsort.strategy": strategy}):
        sk, sv = distsort.sort_by_key(da.from_array(keys, chunks=700),
                                      da.from_array(values, chunks=700),
                                      descending=descending, stable=True)
    packed = any(str(k).startswith("distsort-pack-") for k in sk.__dask_graph__().layers)
    assert packed == (strategy == "network")  # one-device: one task sorts them as they are
    sk, sv = dask.compute(sk, sv, scheduler="threads")
    perm = stable_argsort(keys, descending)
    assert sk.dtype == keys.dtype and sv.dtype == values.dtype
    np.testing.assert_array_equal(bits(sk), bits(keys[perm]))
    np.testing.assert_array_equal(bits(sv), bits(values[perm]))


def test_sort_by_key_orders_differ_only_among_equal_keys():
    keys = np.array([2, 1, 2, 1, 2, 0])
    values = np.array([5, 9, 3, 7, 4, 1], dtype=np.int32)
    for vdtype in ("int32", "int64"):  # packed with positions / gathered after an argsort
        v = values.astype(vdtype)
        by_value = distsort.sort_by_key(keys, v)[1]
        by_position = distsort.sort_by_key(keys, v, stable=True)[1]
        np.testing.assert_array_equal(by_value, [1, 7, 9, 3, 4, 5])
        np.testing.assert_array_equal(by_position, [1, 9, 7, 5, 3, 4])
        np.testing.assert_array_equal(by_position, v[np.argsort(keys, kind="stable")])


@pytest.mark.slow
def test_times_and_stable_on_a_distributed_cluster(cluster_client):
    rng = np.random.default_rng(12)
    t = random_times(rng, 10_007, "datetime64[us]", duplicates=True)
    dt = da.from_array(t, chunks=(1_000, 3_007, 6_000))
    v32 = rng.integers(-99, 99, size=len(t)).astype(np.int32)
    out = cluster_client.compute(
        [distsort.sort(dt), distsort.argsort(dt, descending=True),
         distsort.sort_by_key(dt, v32, stable=True)[1],
         distsort.sort_by_key(dt, v32.astype(np.float64), stable=True)[1]], sync=True)
    np.testing.assert_array_equal(out[0].view(np.int64), np.sort(t).view(np.int64))
    np.testing.assert_array_equal(out[1], stable_argsort(t, descending=True))
    perm = np.argsort(t, kind="stable")
    np.testing.assert_array_equal(out[2], v32[perm])
    np.testing.assert_array_equal(out[3], v32[perm].astype(np.float64))


def test_cluster_module_is_an_attribute_without_importing_it():
    import subprocess
    import sys
    code = ("import sys, distsort; assert 'distsort.cluster' not in sys.modules; "
            "assert 'distributed' not in sys.modules; "
            "print(distsort.cluster.bytes_sent_by_kind.__name__, 'cluster' in dir(distsort))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["bytes_sent_by_kind", "True"]
    with pytest.raises(AttributeError, match="no attribute 'clusters'"):
        _ = distsort.clusters


def _cupy_or_skip():
    cupy = pytest.importorskip("cupy")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError:  # no driver
        count = 0
    if count == 0:
        pytest.skip("no CUDA GPU")
    return cupy


@pytest.mark.gpu
@pytest.mark.parametrize("vdtype", ["int32", "float64"])  # packed / argsort and gather
@pytest.mark.parametrize("descending", [False, True])
def test_sort_by_key_stable_on_cupy_chunks(vdtype, descending):
    cupy = _cupy_or_skip()
    rng = np.random.default_rng(21)
    keys = random_keys(rng, 50_003, "float32", duplicates=True)
    values = random_keys(rng, len(keys), vdtype)
    dk = da.from_array(cupy.asarray(keys), chunks=7_000, asarray=False)
    dv = da.from_array(cupy.asarray(values), chunks=9_000, asarray=False)
    sk, sv = dask.compute(*distsort.sort_by_key(dk, dv, descending=descending, stable=True),
                          scheduler="threads")
    assert type(sk).__module__.startswith("cupy") and type(sv).__module__.startswith("cupy")
    perm = stable_argsort(keys, descending)
    np.testing.assert_array_equal(bits(sk.get()), bits(keys[perm]))
    np.testing.assert_array_equal(bits(sv.get()), bits(values[perm]))
