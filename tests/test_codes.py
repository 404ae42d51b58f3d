"""The compiled code maps (``distsort.backends.cpu.codes``) against the NumPy code they
replace: every dtype, ascending and descending, special values mixed in, the same
bits both ways; and the backend gives the same chunks with and without them."""
import numpy as np
import pytest

from distsort.backends import Order
from distsort.backends.cpu import codes, merge
from distsort.backends.cpu import numpy_backend as npb
from distsort.core.order import decode, encode

from arrays import DTYPES, bits, random_keys

needs_numba = pytest.mark.skipif(merge.numba is None, reason="needs numba (the fast extra)")


@pytest.fixture
def rng():
    return np.random.default_rng(23)


@pytest.fixture
def compiled(monkeypatch):
    """The compiled maps for chunks of any length (tests use short ones)."""
    monkeypatch.setattr(merge, "ENABLED", True)
    monkeypatch.setattr(codes, "COMPILED_FROM", 1)


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("descending", [False, True])
def test_same_bits_as_numpy(rng, compiled, dtype, descending):
    keys = random_keys(rng, 5000, dtype, special_fraction=0.2, duplicates=True)
    want = npb._signed(encode(keys, descending=descending))
    got = codes.signed_codes(keys, descending)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    ordered = np.sort(want)
    back = codes.keys_from_signed(ordered, keys.dtype, descending)
    expected = decode(npb._unsigned(ordered), keys.dtype, descending=descending)
    assert back.dtype == keys.dtype
    np.testing.assert_array_equal(bits(back), bits(expected))


@needs_numba
def test_inputs_untouched(rng, compiled):
    keys = random_keys(rng, 1000, "float32")
    before = keys.copy()
    signed = codes.signed_codes(keys, False)
    kept = signed.copy()
    codes.keys_from_signed(signed, keys.dtype, False)
    np.testing.assert_array_equal(bits(keys), bits(before))
    np.testing.assert_array_equal(signed, kept)


def test_numpy_code_where_compiled_does_not_serve(rng, monkeypatch):
    """Without numba (or for short chunks) the maps say so and the backend's NumPy code
    runs, with the same result."""
    keys = random_keys(rng, 300, "float64", special_fraction=0.3)
    monkeypatch.setattr(merge, "ENABLED", False)
    assert codes.signed_codes(keys, False) is None
    slow = npb.finish_keys(npb.prepare(keys, None, Order()), Order(), keys.dtype)
    assert np.array_equal(slow, np.sort(keys), equal_nan=True)  # by value: -0.0 == 0.0
    if merge.numba is None:
        return
    monkeypatch.setattr(merge, "ENABLED", True)
    monkeypatch.setattr(codes, "COMPILED_FROM", 1)
    fast = npb.finish_keys(npb.prepare(keys, None, Order()), Order(), keys.dtype)
    np.testing.assert_array_equal(bits(fast), bits(slow))
