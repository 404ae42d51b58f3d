"""Tables: sort_by_key with several value arrays or several keys, and lexsort, against NumPy."""
import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import distsort
from arrays import bits, random_chunks, random_keys, stable_argsort
from distsort import tables
from distsort.graph.gather import gather

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
STYLES = ("regular", "ragged", "one")


def chunked(x, rng, style):
    # One element per chunk only for short arrays: a gather has a task per pair of
    # input and output chunks (C x D; coalescing many chunks is another change's).
    if style == "one" and len(x) > 60:
        style = "ragged"
    return da.from_array(x, chunks=(random_chunks(rng, len(x), style),))


def same(out, ref):
    """Bit for bit (NaN payloads, -0.0), dtype included."""
    assert out.dtype == ref.dtype
    np.testing.assert_array_equal(bits(out), bits(ref))


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 1500),
       styles=st.tuples(*[st.sampled_from(STYLES)] * 3), descending=st.booleans(),
       as_dict=st.booleans())
def test_three_column_table_is_numpys_stable_argsort(seed, n, styles, descending, as_dict):
    rng = np.random.default_rng(seed)
    key = random_keys(rng, n, "float64", duplicates=True)  # NaNs, -0.0, +-inf mixed in
    a, b = random_keys(rng, n, "int64"), random_keys(rng, n, "float32")
    cols = [chunked(c, rng, s) for c, s in zip((key, a, b), styles, strict=True)]
    values = {"a": cols[1], "b": cols[2]} if as_dict else (cols[1], cols[2])
    sk, sv = distsort.sort_by_key(cols[0], values, descending=descending)
    sa, sb = (sv["a"], sv["b"]) if as_dict else sv
    assert isinstance(sv, dict) == as_dict
    sk, sa, sb = dask.compute(sk, sa, sb, scheduler="sync")
    perm = stable_argsort(key, descending)
    same(sk, key[perm])
    same(sa, a[perm])
    same(sb, b[perm])


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 1500),
       dtypes=st.sampled_from([("float32", "int16"), ("float64", "int64"),
                               ("int8", "float64"), ("float16", "uint32")]),
       styles=st.tuples(*[st.sampled_from(STYLES)] * 3))
def test_two_key_sort_is_numpys_lexsort(seed, n, dtypes, styles):
    rng = np.random.default_rng(seed)
    secondary, primary = (random_keys(rng, n, d, duplicates=True) for d in dtypes)
    v = rng.standard_normal(n)
    k2, k1, dv = (chunked(c, rng, s) for c, s in zip((secondary, primary, v), styles,
                                                     strict=True))
    (s2, s1), sv = distsort.sort_by_key((k2, k1), dv)  # the last key is the primary
    s2, s1, sv, perm = dask.compute(s2, s1, sv, distsort.lexsort((k2, k1)),
                                    scheduler="sync")
    ref = np.lexsort((secondary, primary))
    np.testing.assert_array_equal(perm, ref)
    assert perm.dtype == np.int64
    same(s1, primary[ref])
    same(s2, secondary[ref])
    same(sv, v[ref])


@pytest.mark.parametrize("dtypes", [
    ("int8", "int8", "int16", "int32"),            # one 64-bit code
    ("float64", "float32", "float32"),             # two passes
    ("datetime64[s]", "bool", "timedelta64[ms]"),  # NaT last; three passes
    ("float64", "int64", "uint64", "float64"),     # four passes
])
def test_lexsort_matches_numpy(dtypes):
    rng = np.random.default_rng(len(dtypes))
    n = 2000
    keys = []
    for name in dtypes:
        d = np.dtype(name)
        if d.kind in "mM":
            k = rng.integers(-50, 50, n).astype(d)
            k[rng.random(n) < 0.1] = np.array("NaT", dtype=d)
        else:
            k = random_keys(rng, n, d, duplicates=True)
        keys.append(k)
    got = distsort.lexsort(tuple(chunked(k, rng, "ragged") for k in keys)).compute(
        scheduler="sync")
    np.testing.assert_array_equal(got, np.lexsort(keys))


def test_several_keys_descending_reverses_the_key_order_and_keeps_ties():
    k2 = np.array([1, 0, 1, 0, 1])
    k1 = np.array([5, 5, 3, 5, 3])
    (s2, s1), v = distsort.sort_by_key((k2, k1), (np.arange(5),), descending=True)
    np.testing.assert_array_equal(s1, [5, 5, 5, 3, 3])
    np.testing.assert_array_equal(s2, [1, 0, 0, 1, 1])
    np.testing.assert_array_equal(v[0], [0, 1, 3, 2, 4])  # ties: input order


def test_table_with_verify_and_numpy_inputs():
    rng = np.random.default_rng(3)
    k = random_keys(rng, 3001, "float32", duplicates=True)
    a, b = rng.integers(0, 9, 3001), rng.standard_normal(3001)
    sk, (sa, sb) = distsort.sort_by_key(k, (a, b), verify=True)
    perm = np.argsort(k, kind="stable")
    assert all(type(o) is np.ndarray for o in (sk, sa, sb))  # plain in, plain out
    same(sk, k[perm])
    same(sa, a[perm])
    same(sb, b[perm])
    perm = distsort.lexsort((a, k), verify=True)
    np.testing.assert_array_equal(perm, np.lexsort((a, k)))


def test_tables_refuse_mismatched_inputs():
    k = np.arange(5.0)
    with pytest.raises(ValueError, match="same shape"):
        distsort.sort_by_key(k, (np.arange(5), np.arange(4)))
    with pytest.raises(ValueError, match="same shape"):
        distsort.lexsort((k, np.arange(6)))
    with pytest.raises(TypeError, match="tuple of key arrays"):
        distsort.lexsort(k)
    with pytest.raises(TypeError, match="cannot sort"):
        distsort.sort_by_key((k, np.array(["a"] * 5)), np.arange(5))


def test_one_value_array_in_a_tuple_comes_back_in_a_tuple():
    sk, sv = distsort.sort_by_key(np.array([2, 1]), (np.array([20, 10]),))
    assert isinstance(sv, tuple) and len(sv) == 1
    np.testing.assert_array_equal(sv[0], [10, 20])


def test_code_groups_fill_64_bits_from_the_primary_key():
    assert tables.code_groups((64,)) == [(0,)]
    assert tables.code_groups((32, 32, 64, 16, 8, 8)) == [(0, 1), (2,), (3, 4, 5)]
    assert tables.code_groups((8, 64, 8)) == [(0,), (1,), (2,)]
    assert tables.code_groups((16, 16, 16, 16, 16)) == [(0, 1, 2, 3), (4,)]


def test_composite_codes_take_the_narrowest_width():
    def dtype_of(*dtypes):
        return tables.composite_codes([da.zeros(3, dtype=d, chunks=2) for d in dtypes]).dtype
    assert dtype_of("int8") == np.uint8
    assert dtype_of("int8", "bool") == np.uint16
    assert dtype_of("int16", "int8") == np.uint32
    assert dtype_of("float32", "int16") == np.uint64
    with pytest.raises(ValueError, match="more than 64"):
        dtype_of("float32", "int64")


@pytest.mark.parametrize("together", [False, True])
@pytest.mark.parametrize("chunks", [((3, 3, 3, 1), (4, 6)), ((1, 9), (10,)),
                                    ((5, 0, 5), (2, 0, 8))])
def test_gather_moves_every_column_by_one_permutation(chunks, together):
    """In pieces (chunks that may be apart) and in one task per output chunk (chunks
    together in one process), the same result."""
    rng = np.random.default_rng(1)
    perm = rng.permutation(10)
    a, b = rng.integers(0, 100, 10), rng.standard_normal(10).astype(np.float32)
    cols = (da.from_array(a, chunks=(chunks[0],)), da.from_array(b, chunks=(chunks[0],)))
    out = gather(cols, da.from_array(perm, chunks=(chunks[1],)), together=together)
    np.testing.assert_array_equal(out[0].compute(), a[perm])
    same(out[1].compute(), b[perm])
    pieces = [k for k in out[0].dask if "gather-take" in str(k)]
    assert (not pieces) == together, pieces


def test_stable_sort_by_key_on_the_cpu_packs_uint32_positions_with_4_byte_keys():
    """The stable order of float32 keys on NumPy chunks: one keyed sort of the keys with
    uint32 positions (an 8-byte code the CPU backend merges as one integer) and one
    gather, not values packed under positions (a 12-byte pair, 1.5x slower)."""
    k = da.from_array(np.array([2.0, 1.0, 2.0, 1.0], dtype=np.float32), chunks=2)
    v = da.from_array(np.array([1, 2, 3, 4], dtype=np.int32), chunks=2)
    _, sv = distsort.sort_by_key(k, v, stable=True)
    layers = list(sv.dask.layers)
    assert any(name.startswith("arange") for name in layers), layers
    assert any(name.startswith("distsort-gather") for name in layers), layers
    assert not any("distsort-pack" in name for name in layers), layers
    np.testing.assert_array_equal(sv.compute(), [2, 4, 1, 3])
