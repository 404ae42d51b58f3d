"""Bad input: a clear error, and the input unchanged."""
import dask.array as da
import numpy as np
import pytest

import distsort

UNSUPPORTED = {
    "complex": np.array([1 + 2j, 3 - 1j, 0j]),
    "object": np.array([1, "a", None], dtype=object),
    "string": np.array(["b", "a", "c"]),
    "bytes": np.array([b"b", b"a"]),
    "structured": np.array([(1, 2.0), (0, 1.0)], dtype=[("a", "i4"), ("b", "f8")]),
    "datetime": np.array(["2026-01-02", "2026-01-01"], dtype="datetime64[D]"),
}


@pytest.mark.parametrize("kind", sorted(UNSUPPORTED))
@pytest.mark.parametrize("func", ["sort", "argsort", "sort_by_key_keys", "sort_by_key_values"])
def test_unsupported_dtypes_raise_type_error_naming_the_dtype(kind, func):
    x = UNSUPPORTED[kind]
    before = x.copy()
    good = np.arange(len(x))
    with pytest.raises(TypeError, match=r"cannot sort .*dtype"):
        if func == "sort":
            distsort.sort(da.from_array(x, chunks=2))
        elif func == "argsort":
            distsort.argsort(x)
        elif func == "sort_by_key_keys":
            distsort.sort_by_key(x, good)
        else:
            distsort.sort_by_key(good, x)
    assert np.array_equal(x, before)


def test_unknown_chunk_sizes_name_compute_chunk_sizes():
    x = da.from_array(np.arange(20.0), chunks=5)
    y = x[x > 3]
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        distsort.sort(y)
    s = distsort.sort(y.compute_chunk_sizes())
    np.testing.assert_array_equal(s.compute(), np.arange(4.0, 20.0))


def test_mismatched_keys_and_values():
    with pytest.raises(ValueError, match="same shape"):
        distsort.sort_by_key(np.arange(5), np.arange(6))


@pytest.mark.parametrize("axis", [1, -2, 5])
def test_axis_out_of_range_is_numpys_axis_error(axis):
    x = da.from_array(np.arange(10.0), chunks=3)
    with pytest.raises(np.exceptions.AxisError):
        distsort.sort(x, axis=axis)
    with pytest.raises(np.exceptions.AxisError):
        distsort.argsort(x, axis=axis)


def test_zero_dimensional_arrays_follow_numpy():
    x = np.array(3.5)
    with pytest.raises(np.exceptions.AxisError):
        np.sort(x)
    with pytest.raises(np.exceptions.AxisError):
        distsort.sort(x)
    np.testing.assert_array_equal(distsort.sort(x, axis=None).compute(), np.sort(x, axis=None))


def test_masked_chunks_are_refused():
    x = da.ma.masked_greater(da.from_array(np.arange(6.0), chunks=2), 3)
    with pytest.raises(TypeError, match="MaskedArray"):
        distsort.sort(x)
    with pytest.raises(TypeError, match="MaskedArray"):
        distsort.sort(np.ma.masked_equal(np.arange(5), 2))
