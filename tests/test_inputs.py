"""Inputs that are not arrays: refused with the conversion to use, and never computed.

A Dask DataFrame or Series, an xarray object or any other lazy collection passed
to ``np.asarray`` would be computed on the client, and its labels dropped; distsort
refuses them with a TypeError that shows the conversion.  Each test counts the
tasks that Dask's local schedulers run during the call: none may run.
"""
import dask
import dask.array as da
import numpy as np
import pytest
from dask.callbacks import Callback

import distsort

pd = pytest.importorskip("pandas")
dd = pytest.importorskip("dask.dataframe")
xr = pytest.importorskip("xarray")

FUNCS = ["sort", "argsort", "sort_by_key_keys", "sort_by_key_values"]


class TaskCounter(Callback):
    """Counts the tasks Dask's local schedulers start."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def _pretask(self, key, dask, state):
        self.count += 1


def _call(func, x, n):
    good = np.arange(n)
    if func == "sort":
        return distsort.sort(x)
    if func == "argsort":
        return distsort.argsort(x)
    if func == "sort_by_key_keys":
        return distsort.sort_by_key(x, good)
    return distsort.sort_by_key(good, x)


def _name(func):
    return {"sort_by_key_keys": "keys", "sort_by_key_values": "values"}.get(func, "x")


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(26)
    return pd.DataFrame({"x": rng.normal(size=1000), "y": rng.integers(0, 9, size=1000)})


def _inputs(frame):
    """(label, object, conversion in the message, what the conversion gives)."""
    ddf = dd.from_pandas(frame, npartitions=8)
    grid = np.random.default_rng(7).normal(size=(4, 500))
    arr = xr.DataArray(grid, dims=("t", "s")).chunk({"t": 2, "s": 250})
    ds = xr.Dataset({"v": ("i", frame["x"].to_numpy())}).chunk({"i": 250})
    return {
        "dask Series": (ddf["x"], ".to_dask_array(lengths=True)", frame["x"].to_numpy()),
        "dask DataFrame": (ddf, '["col"].to_dask_array(lengths=True)', None),
        "xarray DataArray": (arr, ".data", grid),
        "xarray Dataset": (ds, '["var"].data', None),
        "pandas Series": (frame["x"], ".to_numpy()", frame["x"].to_numpy()),
        "pandas DataFrame": (frame, '["col"].to_numpy()', None),
        "numpy-backed xarray": (xr.DataArray(grid[0]), ".data", grid[0]),
    }


KINDS = ["dask Series", "dask DataFrame", "xarray DataArray", "xarray Dataset",
         "pandas Series", "pandas DataFrame", "numpy-backed xarray"]


@pytest.mark.parametrize("func", FUNCS)
@pytest.mark.parametrize("kind", KINDS)
def test_refused_with_the_conversion_and_nothing_computed(frame, kind, func):
    x, conversion, _ = _inputs(frame)[kind]
    with TaskCounter() as counter, pytest.raises(TypeError) as err:
        _call(func, x, len(frame))
    assert counter.count == 0
    message = str(err.value)
    assert _name(func) + conversion in message
    assert "are not carried" in message  # labels and coordinates are not silently dropped
    assert ("nothing was computed" in message) == kind.startswith(("dask", "xarray"))


def test_the_counter_sees_tasks():
    """The check above could not pass by a counter that misses computations."""
    ddf = dd.from_pandas(pd.DataFrame({"x": np.arange(10.0)}), npartitions=2)
    with TaskCounter() as counter:
        np.asarray(ddf["x"])
    assert counter.count > 0


def test_dask_series_conversion_is_sorted_lazily(frame):
    ddf = dd.from_pandas(frame, npartitions=8)
    x = ddf["x"].to_dask_array(lengths=True)  # computes the partition lengths: the user's call
    y = ddf["y"].to_dask_array(lengths=True)
    with TaskCounter() as counter:
        out = distsort.sort(x)
        _, values = distsort.sort_by_key(x, y, stable=True)
    assert counter.count == 0
    np.testing.assert_array_equal(out.compute(), np.sort(frame["x"].to_numpy()))
    perm = np.argsort(frame["x"].to_numpy(), kind="stable")
    np.testing.assert_array_equal(values.compute(), frame["y"].to_numpy()[perm])


def test_chunked_dataarray_conversion_keeps_its_chunks(frame):
    x, _, grid = _inputs(frame)["xarray DataArray"]
    data = x.data
    assert isinstance(data, da.Array) and data.chunks == ((2, 2), (250, 250))
    with pytest.raises(ValueError, match="split"):  # the split-axis check is not skipped
        distsort.sort(data)
    with TaskCounter() as counter:
        out = distsort.sort(data, axis=None)
        rows = distsort.sort(data.rechunk({1: -1}))
    assert counter.count == 0
    np.testing.assert_array_equal(out.compute(), np.sort(grid, axis=None))
    np.testing.assert_array_equal(rows.compute(), np.sort(grid, axis=-1))


@pytest.mark.parametrize("kind", ["bag", "delayed"])
def test_other_lazy_collections_are_refused(kind):
    import dask.bag as db
    x = db.from_sequence(range(10), npartitions=2) if kind == "bag" else dask.delayed(
        np.arange)(10)
    with TaskCounter() as counter, pytest.raises(TypeError, match="nothing was computed"):
        distsort.sort(x)
    assert counter.count == 0


def test_lists_and_tuples_are_still_converted():
    s = distsort.sort((3, 1, 2))
    assert type(s) is np.ndarray  # as numpy.sort of a list: computed at once
    np.testing.assert_array_equal(s, [1, 2, 3])
    np.testing.assert_array_equal(distsort.argsort([2.5, -1.0]), [1, 0])
