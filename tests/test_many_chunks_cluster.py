"""Many small chunks on a two-process cluster: the group sorts of a persisted input read
its chunks where the workers hold them (``distsort.core.taskkeys.HeldChunks``), with no task
depending on each chunk, and every result is NumPy's, bit for bit, whether the input is
lazy or persisted, held by the user or dropped before the compute.
"""
import dask
import dask.array as da
import numpy as np
import pytest

import distsort
import distsort.cluster.locality
from distsort.core.taskkeys import HeldChunks

distributed = pytest.importorskip("distributed")

#: 64 chunks: more than the 8 per slot (two here) that are kept as they are, so they are
#: coalesced into groups that each read many (256 chunks took 4 times as long on 2 cores).
N, CHUNK = 2**12, 2**6
DEADLINE = 60


def _keys(rng):
    """Float keys with ties, NaNs and both zeros."""
    x = rng.integers(-50, 50, N).astype(np.float64)
    x[rng.random(N) < 0.01] = np.nan
    x[rng.random(N) < 0.01] = -0.0
    x[x == 0] = rng.choice([0.0, -0.0], int((x == 0).sum()))
    return x


def _input(client, a, persisted):
    d = da.from_array(a, chunks=CHUNK)
    if persisted:
        d = client.persist(d)
        distributed.wait(d, timeout=DEADLINE)
    return d


def _group_args(result):
    """The arguments of the group-sort tasks of a result's graph."""
    return [arg for key, task in dict(result.__dask_graph__()).items()
            if str(key[0] if isinstance(key, tuple) else key).startswith("distsort-group-")
            for arg in (task[1:] if isinstance(task, tuple) else getattr(task, "args", ()))]


def _bits(a):
    return a.view(f"u{a.dtype.itemsize}")


def _sorted(x):
    """``numpy.sort(x)`` with -0.0 before +0.0 (NumPy takes them as equal and leaves
    them in any order; distsort's sort orders their bits)."""
    return x[np.lexsort((~np.signbit(x), x))]


@pytest.mark.parametrize("persisted", [False, True], ids=["lazy", "persisted"])
def test_many_chunks_sort_argsort_sort_by_key(cluster_client, persisted):
    rng = np.random.default_rng()
    x, v = _keys(rng), rng.permutation(N).astype(np.int64)
    with cluster_client.as_current():
        dx, dv = _input(cluster_client, x, persisted), _input(cluster_client, v, persisted)
        s, p = distsort.sort(dx), distsort.argsort(dx)
        k, w = distsort.sort_by_key(dx, dv)
        ks, ws = distsort.sort_by_key(dx, dv, stable=True)
        held = [a for a in _group_args(s) if isinstance(a, HeldChunks)]
        # Read in place exactly where the input is persisted: one argument per group.
        assert bool(held) == persisted
        assert all(len(h.keys) < dx.numblocks[0] for h in held)
        got = dask.compute(s, p, k, w, ks, ws)
    order, stable = np.lexsort((v, x)), np.argsort(x, kind="stable")
    np.testing.assert_array_equal(_bits(got[0]), _bits(_sorted(x)))
    np.testing.assert_array_equal(got[1], stable)
    np.testing.assert_array_equal(_bits(got[2]), _bits(x[order]))
    np.testing.assert_array_equal(got[3], v[order])
    np.testing.assert_array_equal(_bits(got[4]), _bits(x[stable]))
    np.testing.assert_array_equal(got[5], v[stable])


def test_many_chunks_input_dropped_before_compute(cluster_client):
    """The sort keeps the persisted chunks it reads in place alive: the user's array
    may go before the sort is computed."""
    rng = np.random.default_rng()
    x = _keys(rng)
    with cluster_client.as_current():
        s = distsort.sort(_input(cluster_client, x, True))
        assert any(isinstance(a, HeldChunks) for a in _group_args(s))
        np.testing.assert_array_equal(_bits(s.compute()), _bits(_sorted(x)))


def test_many_chunks_second_sort_while_first_held(cluster_client):
    rng = np.random.default_rng()
    x, v = _keys(rng), rng.permutation(N).astype(np.int64)
    order = np.lexsort((v, x))
    with cluster_client.as_current():
        dx, dv = _input(cluster_client, x, True), _input(cluster_client, v, True)
        k, w = distsort.sort_by_key(dx, dv)
        k, w = k.persist(), w.persist()
        distributed.wait([k, w], timeout=DEADLINE)
        again = distsort.sort(dx, descending=True).compute()
        p = distsort.argsort(dx).compute()
        from arrays import descending_of
        np.testing.assert_array_equal(_bits(again), _bits(descending_of(_sorted(x))))
        np.testing.assert_array_equal(p, np.argsort(x, kind="stable"))
        np.testing.assert_array_equal(_bits(k.compute()), _bits(x[order]))
        np.testing.assert_array_equal(w.compute(), v[order])


def test_many_chunks_one_group_reads_both_workers(cluster_client):
    """One group sort of every chunk (the one-device plan) reads the chunks its worker
    holds in place and brings the other worker's."""
    rng = np.random.default_rng()
    x, v = _keys(rng), rng.permutation(N).astype(np.int64)
    with cluster_client.as_current(), dask.config.set({"distsort.strategy": "one-device"}):
        dx, dv = _input(cluster_client, x, True), _input(cluster_client, v, True)
        assert len(set(distsort.cluster.locality.chunk_owners(dx.__dask_keys__()))) == 2
        k, w = distsort.sort_by_key(dx, dv, stable=True)
        assert [len(a.keys) for a in _group_args(k) if isinstance(a, HeldChunks)] == [
            dx.numblocks[0]] * 2
        got = dask.compute(k, w, distsort.argsort(dx))
    stable = np.argsort(x, kind="stable")
    np.testing.assert_array_equal(_bits(got[0]), _bits(x[stable]))
    np.testing.assert_array_equal(got[1], v[stable])
    np.testing.assert_array_equal(got[2], stable)


def test_lazy_array_whose_chunks_another_holds_is_computed(cluster_client):
    """A lazy array whose chunks are in memory only through another persisted array is
    read through its keys: nothing keeps those chunks for it."""
    x = _keys(np.random.default_rng())
    with cluster_client.as_current():
        made = da.from_array(x, chunks=CHUNK)
        other = cluster_client.persist(made)
        distributed.wait(other, timeout=DEADLINE)
        s = distsort.sort(made)
        assert not any(isinstance(a, HeldChunks) for a in _group_args(s))
        del other
        np.testing.assert_array_equal(_bits(s.compute()), _bits(_sorted(x)))
