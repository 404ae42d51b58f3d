"""Order codes: NumPy's order, bijective for keys alone."""
import numpy as np
import pytest

from distsort.core.order import check_dtype, decode, encode
from arrays import DTYPES, bits, descending_of, random_keys, special_values


@pytest.mark.parametrize("dtype", DTYPES)
def test_total_codes_are_numpys_order_and_invertible(dtype):
    rng = np.random.default_rng(0)
    x = np.concatenate([random_keys(rng, 3000, dtype), special_values(dtype)])
    for descending in (False, True):
        codes = encode(x, descending=descending)
        assert codes.dtype == np.dtype(f"u{np.dtype(dtype).itemsize}")
        np.testing.assert_array_equal(bits(decode(codes, dtype, descending=descending)), bits(x))
        out = decode(np.sort(codes), dtype, descending=descending)
        ref = descending_of(np.sort(x)) if descending else np.sort(x)
        assert np.array_equal(out, ref, equal_nan=x.dtype.kind == "f")


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_canonical_codes_equal_for_numpy_equal_keys(dtype):
    x = special_values(dtype)
    codes = encode(x, canonical=True)
    nan = np.isnan(x)
    assert len(set(codes[nan].tolist())) == 1
    zero = x == 0
    assert len(set(codes[zero].tolist())) == 1
    order = np.argsort(codes, kind="stable")
    np.testing.assert_array_equal(order, np.argsort(x, kind="stable"))


@pytest.mark.parametrize("dtype", ["complex64", "object", "U3", "S2", "datetime64[s]",
                                   [("a", "i4"), ("b", "f4")], "V8"])
def test_unsupported_dtypes(dtype):
    with pytest.raises(TypeError, match="cannot sort"):
        check_dtype(np.dtype(dtype))
