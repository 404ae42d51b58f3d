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
    np.testing.assert_array_equal(distsort.sort(x, axis=None), np.sort(x, axis=None))


def test_masked_chunks_are_refused():
    x = da.ma.masked_greater(da.from_array(np.arange(6.0), chunks=2), 3)
    with pytest.raises(TypeError, match="MaskedArray"):
        distsort.sort(x)
    with pytest.raises(TypeError, match="MaskedArray"):
        distsort.sort(np.ma.masked_equal(np.arange(5), 2))


# ---------------------------------------------------------------- every bad input, every function
# Each case: a clear error of the documented type, and the input unchanged (NumPy
# inputs bit for bit; Dask inputs keep their name, chunks and values).
MORE_UNSUPPORTED = {
    "longdouble": np.array([1.5, -2.0], dtype=np.longdouble),
    "void": np.zeros(3, dtype="V4"),
    "mixed-list": [1, "a", 2.0],
}
FUNCS = ["sort", "argsort", "sort_by_key_keys", "sort_by_key_values"]


def _call(func, x, verify, good=None):
    good = np.arange(len(x) if np.ndim(x) else 1) if good is None else good
    if func == "sort":
        return distsort.sort(x, verify=verify)
    if func == "argsort":
        return distsort.argsort(x, verify=verify)
    if func == "sort_by_key_keys":
        return distsort.sort_by_key(x, good, verify=verify)
    return distsort.sort_by_key(good, x, verify=verify)


def _snapshot(x):
    if isinstance(x, da.Array):
        return x.name, x.chunks, x.compute()
    return np.array(x, copy=True)


def _assert_unchanged(x, before):
    if isinstance(x, da.Array):
        assert (x.name, x.chunks) == before[:2]
        np.testing.assert_array_equal(x.compute(), before[2])
    elif isinstance(x, np.ndarray) and x.dtype.kind not in "OUSV":
        np.testing.assert_array_equal(x.view(np.uint8), before.view(np.uint8))
    else:
        assert np.array_equal(np.asarray(x), before)


@pytest.mark.parametrize("verify", [False, True])
@pytest.mark.parametrize("func", FUNCS)
@pytest.mark.parametrize("kind", sorted({**UNSUPPORTED, **MORE_UNSUPPORTED}))
@pytest.mark.parametrize("wrap", ["numpy", "dask"])
def test_every_unsupported_dtype_everywhere(kind, func, verify, wrap):
    x = {**UNSUPPORTED, **MORE_UNSUPPORTED}[kind]
    if wrap == "dask":
        if isinstance(x, list) or x.dtype.kind == "O":
            pytest.skip("Dask arrays of Python objects are not what this case is about")
        x = da.from_array(x, chunks=2)
    before = _snapshot(x)
    with pytest.raises(TypeError, match=r"cannot sort .*dtype"):
        _call(func, x, verify)
    _assert_unchanged(x, before)


@pytest.mark.parametrize("verify", [False, True])
@pytest.mark.parametrize("func", FUNCS)
def test_unknown_chunks_everywhere(func, verify):
    x = da.from_array(np.random.default_rng(0).normal(size=40), chunks=7)
    y = x[x > 0]
    name, chunks = y.name, y.chunks
    good = da.from_array(np.arange(int((x > 0).sum().compute())), chunks=5)
    with pytest.raises(ValueError, match=r"unknown chunk sizes; call \w+\.compute_chunk_sizes"):
        _call(func, y, verify, good=good)
    assert (y.name, y.chunks) == (name, chunks)


@pytest.mark.parametrize("verify", [False, True])
def test_zero_dimensional_input_with_an_axis_is_an_axis_error(verify):
    x = np.array(-0.0)
    before = x.copy()
    for func in (distsort.sort, distsort.argsort):
        with pytest.raises(np.exceptions.AxisError):
            func(x, axis=-1, verify=verify)
        with pytest.raises(np.exceptions.AxisError):
            func(da.from_array(x), axis=0, verify=verify)
    np.testing.assert_array_equal(distsort.argsort(x, axis=None, verify=verify),
                                  np.argsort(x, axis=None))
    assert x.view(np.uint64) == before.view(np.uint64)


@pytest.mark.parametrize("verify", [False, True])
@pytest.mark.parametrize("keys_len, values_len", [(5, 6), (6, 5), (0, 1), (1, 0)])
def test_mismatched_keys_and_values_everywhere(keys_len, values_len, verify):
    rng = np.random.default_rng(keys_len)
    k, v = rng.normal(size=keys_len), rng.normal(size=values_len)
    kb, vb = k.copy(), v.copy()
    for keys, values in ((k, v), (da.from_array(k, chunks=2), da.from_array(v, chunks=3))):
        with pytest.raises(ValueError, match="same shape"):
            distsort.sort_by_key(keys, values, verify=verify)
    np.testing.assert_array_equal(k, kb)
    np.testing.assert_array_equal(v, vb)


def test_keys_and_values_of_different_nd_shapes_are_refused():
    with pytest.raises(ValueError, match="same shape"):
        distsort.sort_by_key(np.arange(6).reshape(2, 3), np.arange(6).reshape(3, 2))


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@pytest.mark.parametrize("verify", [False, True])
@pytest.mark.parametrize("func", FUNCS)
def test_masked_and_matrix_inputs_are_refused_everywhere(func, verify):
    masked = np.ma.masked_equal(np.arange(5.0), 2.0)
    cases = [masked, da.ma.masked_greater(da.from_array(np.arange(6.0), chunks=2), 3),
             np.matrix([[3.0, 1.0, 2.0, 0.0, 4.0]])]
    for x in cases:
        before = _snapshot(x) if not isinstance(x, da.Array) else (x.name, x.chunks)
        with pytest.raises(TypeError, match="MaskedArray|matrix"):
            _call(func, x, verify, good=np.arange(x.size))
        if isinstance(x, da.Array):
            assert (x.name, x.chunks) == before
        else:
            assert np.array_equal(np.asarray(x), np.asarray(before))
    assert masked.mask.tolist() == [False, False, True, False, False]


@pytest.mark.parametrize("func", ["sort", "argsort", "sort_by_key"])
@pytest.mark.parametrize("stable", ["stable", 1, "mergesort"])
def test_stable_must_be_a_bool_or_none(func, stable):
    x = np.array([2, 1, 2])
    with pytest.raises(TypeError, match="stable must be True, False or None"):
        if func == "sort_by_key":
            distsort.sort_by_key(x, x, stable=stable)
        else:
            getattr(distsort, func)(x, stable=stable)


def test_unsupported_dtype_message_lists_times_as_supported():
    with pytest.raises(TypeError, match="datetime64 and timedelta64"):
        distsort.sort(np.array([1 + 2j]))


@pytest.mark.parametrize("dtype", ["datetime64[D]", "timedelta64[s]"])
def test_times_are_not_modified(dtype):
    x = np.array([5, -3, np.iinfo(np.int64).min, 2], dtype=np.int64).view(dtype)
    before = x.copy()
    dx = da.from_array(x, chunks=3)
    out = distsort.sort_by_key(dx, dx, stable=True)
    np.testing.assert_array_equal(out[0].compute().view(np.int64),
                                  np.sort(x).view(np.int64))
    np.testing.assert_array_equal(x.view(np.int64), before.view(np.int64))


def test_an_interrupt_wrapped_by_an_import_exits_130(monkeypatch, capsys):
    """A SIGINT that lands while an import makes a class is raised as Python's
    RuntimeError ("Error calling __set_name__") caused by the KeyboardInterrupt: the
    command still says it was interrupted and exits 130, not 3."""
    from distsort.cli import command, errors

    def interrupted_import(args):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as e:
            raise RuntimeError("Error calling __set_name__ on 'cached_property'") from e

    def failing(args):
        raise RuntimeError("a worker failed")

    from distsort.cli import args as cli_args
    monkeypatch.setattr(cli_args, "cmd_demo", interrupted_import)
    assert command.main(["demo"]) == errors.INTERRUPTED
    assert "interrupted" in capsys.readouterr().err
    monkeypatch.setattr(cli_args, "cmd_demo", failing)
    assert command.main(["demo"]) == errors.RUNTIME_FAILURE
    assert "failed: RuntimeError: a worker failed" in capsys.readouterr().err
