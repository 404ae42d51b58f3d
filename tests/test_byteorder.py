"""Arrays in the other byte order, memory maps and the public functions' flags.

Every function must sort an array of non-native byte order (``">f8"`` on a
little-endian machine) exactly as NumPy does, and ``verify=True`` must catch a
result in the wrong order whatever byte order its input came in.  A hypothesis
fuzz test draws byte orders, dtypes and chunkings and compares every function,
with ``verify=True``, with NumPy.
"""
import os

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import distsort
from distsort.graph import verify as dv
from distsort.backends import Order
from distsort.inputs import to_native
from arrays import (DTYPES, assert_same_multiset, bits, descending_of, random_chunks, random_keys,
                    stable_argsort)

SETTINGS = settings(max_examples=int(os.environ.get("DISTSORT_FUZZ_EXAMPLES", "40")),
                    deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: The byte order that is not this machine's.
OTHER = ">" if np.little_endian else "<"
TIMES = ["datetime64[D]", "datetime64[ns]", "timedelta64[s]"]


def swapped(x):
    """``x`` with the same values in the other byte order (bit for bit: ``astype``
    quiets float16's signalling NaNs)."""
    return x.byteswap().view(x.dtype.newbyteorder(OTHER))


def times(rng, n, dtype):
    """Random datetime64/timedelta64 values, duplicates and NaTs among them."""
    x = rng.integers(-10**12, 10**12, size=n).view(dtype)
    x[rng.random(n) < 0.2] = x[0] if n else x[:0]
    x[rng.random(n) < 0.1] = np.array("NaT", dtype=dtype)
    return x


def keys_of(rng, n, dtype):
    return times(rng, n, dtype) if "64[" in dtype else random_keys(rng, n, dtype, 0.2, True)


def wrap(x, how):
    """NumPy, a Dask array of one chunk, or of many uneven chunks."""
    if how == "numpy":
        return x
    if how == "one":
        return da.from_array(x, chunks=-1)
    return da.from_array(x, chunks=(random_chunks(np.random.default_rng(1), len(x), "ragged"),))


def same(out, ref):
    """Equal values, bit for bit where the value is the same (NaN payloads, -0.0)."""
    out, ref = to_native(np.asarray(out)), to_native(np.asarray(ref))
    assert out.shape == ref.shape and out.dtype == ref.dtype
    np.testing.assert_array_equal(bits(out), bits(ref))


def like_numpy(out, ref, x):
    """Equal as values to NumPy's sort ``ref`` of ``x`` and the same bit patterns as
    ``x`` (NumPy's sort leaves the order of NaN payloads open, and of float16 changes
    them)."""
    out = np.asarray(out)
    np.testing.assert_array_equal(out, ref)
    assert_same_multiset(to_native(out).reshape(-1), to_native(np.asarray(x)).reshape(-1))


def test_the_reported_big_endian_case():
    x = np.array([3., -1, 2, 0.5], dtype=">f8")
    np.testing.assert_array_equal(distsort.sort(x), [-1, 0.5, 2, 3])
    np.testing.assert_array_equal(distsort.sort(x, verify=True), [-1, 0.5, 2, 3])


@pytest.mark.parametrize("how", ["numpy", "one", "many"])
@pytest.mark.parametrize("dtype", DTYPES[1:] + TIMES)
def test_every_function_sorts_the_other_byte_order(dtype, how):
    rng = np.random.default_rng(abs(hash((dtype, how))) % 2**32)
    x = keys_of(rng, 500, dtype)
    v = random_keys(rng, 500, "float32", 0.2)
    sx, sv = wrap(swapped(x), how), wrap(swapped(v), how)
    for verify in (False, True):
        out = dask.compute(distsort.sort(sx, verify=verify),
                           distsort.sort(sx, descending=True, verify=verify),
                           distsort.argsort(sx, verify=verify),
                           distsort.argsort(sx, descending=True, verify=verify),
                           *distsort.sort_by_key(sx, sv, verify=verify),
                           *distsort.sort_by_key(sx, sv, stable=True, verify=verify))
        ref = dask.compute(distsort.sort(x), *distsort.sort_by_key(x, v))
        same(out[0], ref[0])
        like_numpy(out[0], np.sort(x), x)
        same(out[1], descending_of(ref[0]))
        np.testing.assert_array_equal(out[2], stable_argsort(x))
        np.testing.assert_array_equal(out[3], stable_argsort(x, descending=True))
        same(out[4], ref[1])
        same(out[5], ref[2])
        perm = np.argsort(x, kind="stable")
        same(out[6], x[perm])
        same(out[7], v[perm])


@pytest.mark.parametrize("dtype", ["float64", "int32", "uint16", "datetime64[s]"])
def test_nd_axis_sorts_of_the_other_byte_order(dtype):
    rng = np.random.default_rng(7)
    x = keys_of(rng, 600, dtype).reshape(20, 30)
    dx = da.from_array(swapped(x), chunks=(7, 30))
    for verify in (False, True):
        like_numpy(distsort.sort(dx, axis=1, verify=verify).compute(), np.sort(x, axis=1), x)
        like_numpy(distsort.sort(dx, axis=1, descending=True, verify=verify).compute(),
                   np.apply_along_axis(descending_of, 1, np.sort(x, axis=1)), x)
        np.testing.assert_array_equal(distsort.argsort(dx, axis=1, verify=verify).compute(),
                                      np.argsort(x, axis=1, kind="stable"))
        like_numpy(distsort.sort(swapped(x), axis=None, verify=verify),
                   np.sort(x, None), x)


# ------------------------------------------------------------------ verify=True
def wrong_order_of_swapped_bytes(x):
    """What a sort that compares the bytes of ``x`` as if native produces: every key
    kept, in the order of the swapped bit patterns (the defect of issue 39)."""
    from distsort.core.order import encode
    return x[np.argsort(encode(x.view(x.dtype.newbyteorder("="))), kind="stable")]


@pytest.mark.parametrize("dtype", [">f8", ">i4", ">u2", "<f4"])
def test_verify_rejects_an_order_made_from_the_same_bytes(dtype):
    """The order check compares values in native order: a result ordered by the
    wrong reading of the bytes fails, though its codes and the sort's agree."""
    dtype = np.dtype(dtype).newbyteorder(OTHER)
    x = swapped(np.random.default_rng(3).normal(scale=1000, size=257)).astype(dtype)
    wrong = wrong_order_of_swapped_bytes(x)
    assert not np.array_equal(wrong, np.sort(x))
    with pytest.raises(dv.VerificationError, match="not sorted"):
        dv.check([dv.summarize(x)], [dv.summarize(wrong, order=Order())], (257,))
    # ... and across chunk boundaries, where each chunk is sorted on its own.
    halves = [np.sort(x)[128:], np.sort(x)[:128]]
    with pytest.raises(dv.VerificationError, match="out of order"):
        dv.check([dv.summarize(x)], [dv.summarize(h, order=Order()) for h in halves],
                 (129, 128))
    with pytest.raises(dv.VerificationError, match="not sorted"):
        dv.check_lanes(x.reshape(1, -1), wrong.reshape(1, -1), None, 1, Order())


@pytest.mark.parametrize("chunks", [300, 70])
def test_verify_rejects_the_sort_of_unconverted_bytes(monkeypatch, chunks):
    """With the conversion to native order taken out, the sort orders the swapped bytes
    (issue 39's wrong results); verify=True must reject what it gives."""
    import distsort.api
    monkeypatch.setattr(distsort.api, "native_order", lambda x: x)
    x = swapped(np.random.default_rng(4).normal(size=300))
    dx = da.from_array(x, chunks=chunks)
    assert not np.array_equal(distsort.sort(dx).compute(), np.sort(x))
    with pytest.raises(dv.VerificationError, match="not sorted|out of order"):
        distsort.sort(dx, verify=True).compute()
    with pytest.raises(dv.VerificationError, match="not sorted|out of order"):
        distsort.argsort(dx, verify=True).compute()
    with pytest.raises(dv.VerificationError, match="not sorted|out of order"):
        dask.compute(*distsort.sort_by_key(dx, dx, verify=True))


def test_summaries_of_either_byte_order_agree():
    x = np.random.default_rng(5).normal(size=100)
    a, b = dv.summarize(x, start=0), dv.summarize(swapped(x), start=0)
    assert (a.keys, a.pairs) == (b.keys, b.pairs)
    s = np.sort(x)
    assert dv.summarize(s, order=Order()) == dv.summarize(swapped(s), order=Order())


# ------------------------------------------------------------------ memory maps
def test_a_memory_map_is_sorted_without_reading_it_up_front(tmp_path, monkeypatch):
    x = np.random.default_rng(6).normal(size=5000).astype(">f4")
    np.save(tmp_path / "x.npy", x)
    m = np.load(tmp_path / "x.npy", mmap_mode="r")
    import dask.base
    hashed = []
    real = dask.base.normalize_token.dispatch(np.memmap)
    monkeypatch.setitem(dask.base.normalize_token._lookup, np.memmap,
                        lambda a: hashed.append(a) or real(a))
    out = distsort.sort(m, verify=True)
    assert not hashed  # named from the file, not hashed byte by byte
    like_numpy(out.compute(), np.sort(x), x)
    same(distsort.argsort(m).compute(), stable_argsort(x))
    np.testing.assert_array_equal(distsort.sort_by_key(m, m)[1].compute(), np.sort(x))
    w = np.load(tmp_path / "x.npy", mmap_mode="r+")  # writable: named by its data
    first = distsort.sort(w).name
    w[0] = 1e6
    assert distsort.sort(w).name != first
    like_numpy(distsort.sort(w).compute(), np.sort(np.asarray(w)), w)


# ------------------------------------------------------------------ flags
@pytest.mark.parametrize("function", ["sort", "argsort"])
@pytest.mark.parametrize("flag", [{"descending": "yes"}, {"verify": "reread"},
                                  {"descending": 1}, {"verify": None}])
def test_flags_must_be_bools(function, flag):
    with pytest.raises(TypeError, match=f"{next(iter(flag))} must be True or False"):
        getattr(distsort, function)(np.arange(5), **flag)


def test_sort_by_key_flags_must_be_bools():
    for flag in ({"descending": "yes"}, {"verify": "reread"}):
        with pytest.raises(TypeError, match="must be True or False"):
            distsort.sort_by_key(np.arange(5), np.arange(5), **flag)


@pytest.mark.parametrize("function", ["sort", "argsort", "sort_by_key"])
def test_numpys_kind_points_to_stable(function):
    args = (np.arange(5),) * (2 if function == "sort_by_key" else 1)
    with pytest.raises(TypeError, match="no kind=: use stable=True or stable=False"):
        getattr(distsort, function)(*args, kind="stable")


def test_a_delayed_gets_no_xarray_hint():
    with pytest.raises(TypeError, match="from_delayed") as e:
        distsort.sort(dask.delayed(np.arange)(5))
    assert "var" not in str(e.value) and "xarray" not in str(e.value)


def test_sort_by_key_orders_equal_values_as_documented():
    """Equal keys: values in lexsort's order; where lexsort calls values equal and
    keeps their input order (-0.0 and +0.0, NaNs), distsort's order is fixed by the
    bits, whatever the input order: -0.0 first, NaNs positive before negative."""
    k = np.array([1, 1, 1, 1])
    neg_nan = -np.abs(np.float64(np.nan))
    for v in (np.array([neg_nan, np.nan, 0.0, -0.0]), np.array([0.0, -0.0, np.nan, neg_nan])):
        for chunks in (4, 1):
            out = distsort.sort_by_key(da.from_array(k, chunks=chunks),
                                       da.from_array(v, chunks=chunks))[1].compute()
            same(out, np.array([-0.0, 0.0, np.nan, neg_nan]))
            np.testing.assert_array_equal(out, v[np.lexsort((v, k))])  # equal as values


# ------------------------------------------------------------------ fuzz
@SETTINGS
@given(dtype=st.sampled_from(DTYPES + TIMES), order=st.sampled_from("<>"),
       vorder=st.sampled_from("<>"), n=st.sampled_from([0, 1, 2, 9, 64, 257]),
       style=st.sampled_from(["numpy", "regular", "ragged", "one"]), seed=st.integers(0, 2**32 - 1),
       descending=st.booleans())
def test_fuzz_byte_orders_against_numpy(dtype, order, vorder, n, style, seed, descending):
    rng = np.random.default_rng(seed)
    x = keys_of(rng, n, dtype)
    v = random_keys(rng, n, "float64", 0.2)
    sx = swapped(x) if order == OTHER else x
    sv = swapped(v) if vorder == OTHER else v
    if style != "numpy":  # one element a chunk only where that stays quick
        chunks = (random_chunks(rng, n, "ragged" if style == "one" and n > 16 else style),)
        sx, sv = da.from_array(sx, chunks=chunks), da.from_array(sv, chunks=chunks)
    out = dask.compute(distsort.sort(sx, descending=descending, verify=True),
                       distsort.argsort(sx, descending=descending, verify=True),
                       *distsort.sort_by_key(sx, sv, descending=descending, stable=True,
                                             verify=True),
                       distsort.sort_by_key(sx, sv, verify=True)[0], scheduler="sync")
    ref = np.sort(x)
    like_numpy(out[0], descending_of(ref) if descending else ref, x)
    perm = stable_argsort(x, descending)
    np.testing.assert_array_equal(out[1], perm)
    same(out[2], x[perm])
    same(out[3], v[perm])
    like_numpy(out[4], ref, x)
