"""The compare-split of backends that share whole chunks (``share``; on GPUs of one host
``distsort.backends.share.ipc_backend``), run on the CPU: the NumPy backend, its chunks "shared"
as they are, must sort exactly as the edges/head/tail graph does."""
import types

import dask
import dask.array as da
import numpy as np
import pytest

import distsort
from arrays import assert_sorted_like_numpy, random_keys, stable_argsort
from distsort import api
from distsort.backends.cpu import numpy_backend as npb
from distsort.core.taskkeys import round_task_kind
from test_api import sort_by_key_reference


def _shared_numpy():
    """The NumPy backend with ``share``: a merge gets the partner's whole chunk."""
    b = types.SimpleNamespace(**{k: getattr(npb, k) for k in dir(npb) if not k.startswith("_")})
    b.CAPABILITIES = frozenset({"share"})
    b.share = lambda chunk: ("shared", chunk)
    b.merge_low_shared = lambda a, s, order: npb.merge_low(a, s[1], order)
    b.merge_high_shared = lambda b_, s, order: npb.merge_high(b_, s[1], order)
    return b


@pytest.fixture
def shared_backend(monkeypatch):
    backend = _shared_numpy()
    monkeypatch.setattr(api, "get_backend", lambda meta, share=False: backend)
    return backend


def kinds(array):
    return {round_task_kind(k) for k in dict(array.dask)} - {None}


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8, 9, 31])
def test_shared_graph_sorts(shared_backend, count):
    rng = np.random.default_rng(count)
    n = count * 97 + int(rng.integers(0, 50))
    x = random_keys(rng, n, "float64", special_fraction=0.05, duplicates=True)
    v = random_keys(rng, n, "int16")
    dx, dv = da.from_array(x, chunks=-(-n // count)), da.from_array(v, chunks=-(-n // count))
    s, a = distsort.sort(dx), distsort.argsort(dx, descending=True)
    sk, sv = distsort.sort_by_key(dx, dv)
    if count > 1:
        assert kinds(s) <= {"share", "low", "high", "done"} and "share" in kinds(s)
    with dask.config.set(scheduler="threads"):
        s, a, sk, sv = dask.compute(s, a, sk, sv)
    assert_sorted_like_numpy(s, x)
    np.testing.assert_array_equal(a, stable_argsort(x, descending=True))
    rk, rv = sort_by_key_reference(x, v)
    assert np.array_equal(sk, rk, equal_nan=True) and np.array_equal(sv, rv)


def test_shared_graph_gates_pairs_on_small_keys(shared_backend):
    """With a window of 2 pairs, a later pair's shares wait for ``done`` keys (None, on
    each chunk's worker), never for the chunks themselves (a gate fetches its keys)."""
    from distsort.graph.layers import SortGraph, sort_layers
    g = SortGraph("t")
    sort_layers(g, "x", None, (10,) * 8, shared_backend, api.Order(), False, window=2)
    tasks = {k: t for layer in g.layers.values() for k, t in layer.items()}
    shares = [t for k, t in tasks.items() if "-share-" in k[0]]
    gated = [t for t in shares if t[1]]
    assert gated and all("-done-" in key[0] for t in gated for key in t[1])
    assert len(gated) == len(shares) - 4  # the first two pairs start at once


@pytest.mark.parametrize("mode, hosts, expected", [
    ("auto", ["10.0.0.1", "10.0.0.1"], True),   # GPU workers of one host
    ("auto", ["10.0.0.1", "10.0.0.2"], False),  # of two hosts: IPC cannot map
    ("auto", ["10.0.0.1"], False),              # one worker: nothing to share
    ("auto", None, False),                      # no distributed client
    ("auto", [None, None], False),              # the scheduler did not answer
    ("comm", ["10.0.0.1", "10.0.0.1"], False),
    ("ipc", ["10.0.0.1", "10.0.0.2"], True),
])
def test_exchange_setting(mode, hosts, expected):
    from distsort.cluster.locality import share_crossing_parts
    with dask.config.set({"distsort.exchange": mode}):
        assert share_crossing_parts(hosts=hosts) is expected


def test_exchange_setting_is_checked():
    x = da.from_array(np.arange(10.0), chunks=5)
    with (dask.config.set({"distsort.exchange": "nvlink"}),
          pytest.raises(ValueError, match="distsort.exchange")):
        distsort.sort(x)
