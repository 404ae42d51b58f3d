"""The "one-device" strategy (``distsort.plan.sortplan``) on Dask's local schedulers: all the
chunks gathered, sorted once and split, bit for bit what the network gives and what
NumPy gives; plain arrays wrapped without hashing or copying."""
from unittest import mock

import dask
import dask.array as da
import numpy as np
import pytest

import distsort
from arrays import assert_sorted_like_numpy, bits, random_chunks, random_keys, stable_argsort
from distsort.api import planning, wrap_plain
from test_api import sort_by_key_reference

#: Run the default plan (``tests/conftest.py``: other modules force the network).
STRATEGY = "auto"

DTYPES = ["float64", "float32", "float16", "int8", "uint64", "int32", "bool"]


def layers(x):
    return list(x.dask.layers)


def one_device(x):
    """Sorted as one: one group sort, or one whole chunk sorted by the output's own
    task (no group, no prepared chunks), and no rounds."""
    names = layers(x)
    groups = sum(n.startswith("distsort-group-") for n in names)
    prepared = any(n.startswith("distsort-prepare-") for n in names)
    return (not any(n.startswith("distsort-round") for n in names)
            and (groups == 1 or not (groups or prepared)))


def network(f, *args, **kwargs):
    with dask.config.set({"distsort.strategy": "network"}):
        return f(*args, **kwargs)


@pytest.mark.parametrize("seed", range(len(DTYPES)))
def test_results_equal_numpy_and_the_network(seed):
    rng = np.random.default_rng(300 + seed)
    dtype = DTYPES[seed]
    n = int(rng.integers(0, 3000))
    keys = random_keys(rng, n, dtype, duplicates=True)
    values = random_keys(rng, n, ["int32", "float64", "uint8"][seed % 3], duplicates=True)
    chunks = random_chunks(rng, n, ["regular", "ragged", "empty"][seed % 3])
    x, v = da.from_array(keys, chunks=(chunks,)), da.from_array(values, chunks=(chunks,))
    for descending in (False, True):
        s = distsort.sort(x, descending=descending, verify=seed % 2 == 0)
        assert one_device(s)
        got = s.compute()
        assert_sorted_like_numpy(got, keys, descending)
        np.testing.assert_array_equal(bits(got), bits(network(distsort.sort, x,
                                                             descending=descending).compute()))
        a = distsort.argsort(x, descending=descending)
        assert one_device(a)
        np.testing.assert_array_equal(a.compute(), stable_argsort(keys, descending))
        for stable in (False, True):
            sk, sv = distsort.sort_by_key(x, v, descending=descending, stable=stable)
            nk, nv = network(distsort.sort_by_key, x, v, descending=descending, stable=stable)
            sk, sv, nk, nv = dask.compute(sk, sv, nk, nv)
            np.testing.assert_array_equal(bits(sk), bits(nk))
            np.testing.assert_array_equal(bits(sv), bits(nv))
            if stable:
                perm = stable_argsort(keys, descending)
                rk, rv = keys[perm], values[perm]
            else:
                rk, rv = sort_by_key_reference(keys, values, descending)
            assert np.array_equal(sk, rk, equal_nan=True)
            assert np.array_equal(sv, rv, equal_nan=True)


def test_datetimes_and_plain_arrays():
    rng = np.random.default_rng(5)
    t = rng.integers(-10**6, 10**6, size=1001).astype("datetime64[s]")
    t[::97] = np.datetime64("NaT")
    with planning() as plans:
        out = distsort.sort(t)
    assert plans[0].strategy == "one-device" and plans[0].chunks == (1001,)
    assert type(out) is np.ndarray and out.dtype == t.dtype
    np.testing.assert_array_equal(out, np.sort(t))
    np.testing.assert_array_equal(distsort.argsort(t, descending=True),
                                  stable_argsort(t, descending=True))
    lazy = distsort.sort(da.from_array(t, chunks=-1))
    assert lazy.chunks == ((1001,),) and one_device(lazy)


def test_plain_arrays_are_wrapped_without_hashing_or_copying():
    x = np.random.default_rng(6).random(1000)
    w = wrap_plain(x)
    (chunk,) = w.dask.values()
    assert chunk is x and w.chunks == ((1000,),)
    assert wrap_plain(x).name != w.name  # unique per wrap, never a hash of the data
    with mock.patch("dask.base.tokenize", side_effect=AssertionError("hashed")):
        a = distsort.sort(x)  # computed at once, the data never hashed
    assert type(a) is np.ndarray and a is not x
    np.testing.assert_array_equal(a, np.sort(x))


def test_many_tiny_chunks_are_one_task_and_coalesced_outputs():
    rng = np.random.default_rng(7)
    keys = rng.random(20_000)
    x = da.from_array(keys, chunks=2)  # 10,000 chunks
    s = distsort.argsort(x)
    ours = {k: t for k, t in dict(s.dask).items() if str(k[0]).startswith("distsort-")}
    assert len(ours) < 10  # one group, its parts and the outputs: not 10,000 of each
    assert len(s.chunks[0]) <= 16
    np.testing.assert_array_equal(s.compute(), stable_argsort(keys))


def test_persisted_chunks_are_read_as_they_are():
    """An array persisted on the local schedulers: the group sorts take its chunks
    themselves, so the sort's graph holds no key per input chunk (2,000 here), on
    both strategies; with keys or values made by tasks, and verify=True, as well."""
    rng = np.random.default_rng(11)
    keys, values = rng.random(4000), rng.integers(-5, 5, 4000)
    x, v = (da.from_array(a, chunks=2).persist() for a in (keys, values))
    lazy_x, lazy_v = (a.map_blocks(np.copy) for a in (x, v))  # read through their keys
    perm = np.lexsort((values, keys))
    for strategy in ("auto", "network"):
        with dask.config.set({"distsort.strategy": strategy}):
            s = distsort.sort(x)
            assert len(s.__dask_graph__()) < 100
            np.testing.assert_array_equal(s.compute(), np.sort(keys))
            sk, sv = dask.compute(*distsort.sort_by_key(*((x, lazy_v) if strategy == "auto"
                                                          else (lazy_x, v))))
            np.testing.assert_array_equal(sk, keys[perm])
            np.testing.assert_array_equal(sv, values[perm])
            few = x[:2000].rechunk(20).persist()  # verify: a summary task per input chunk
            np.testing.assert_array_equal(distsort.argsort(few, verify=True).compute(),
                                          stable_argsort(keys[:2000]))


def test_the_network_past_the_budget():
    """A device budget too small for one sort of it all: the network runs, with NumPy's
    result."""
    keys = np.random.default_rng(8).random(4000)
    x = da.from_array(keys, chunks=500)
    with dask.config.set({"distsort.device-memory-limit": 10**5}):
        s = distsort.sort(x)
    assert any(n.startswith("distsort-round") for n in layers(s))
    np.testing.assert_array_equal(s.compute(), np.sort(keys))


def test_one_worker_of_a_cluster_sorts_as_one():
    """A cluster's only worker: one group task, NumPy's result; two workers: the network."""
    distributed = pytest.importorskip("distributed")
    keys = np.random.default_rng(9).random(5000)
    x = da.from_array(keys, chunks=700)
    with (distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                   dashboard_address=None) as cluster,
          distributed.Client(cluster) as client):
        s = distsort.argsort(x)
        assert one_device(s)
        np.testing.assert_array_equal(client.compute(s).result(), stable_argsort(keys))
        held = client.persist(x)  # futures: read through their keys, never inline
        assert any(k[0] == held.name for k in dict(distsort.sort(held).dask))
