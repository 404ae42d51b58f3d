"""Both results of a sort taken every way users take them, on a two-process cluster.

``sort_by_key`` and ``argsort`` + a gather give two arrays that share the sort's tasks.
Whatever way each is taken -- ``.persist()``, ``.compute()``, ``dask.persist``,
``dask.compute``, one after the other or together, from a lazy or a persisted input --
the results must equal NumPy's, element for element, and come back in time: a
``.persist()`` of the keys followed by one of the values used to crash the scheduler
(``decide_worker``'s assertion) and never finish.  Each way runs under a deadline so
that such a regression fails here rather than hanging the suite.
"""
import contextvars
import threading

import dask
import dask.array as da
import numpy as np
import pytest

import distsort

distributed = pytest.importorskip("distributed")

#: Seconds a way of taking the results may run (about 1 s here); past it the test fails.
DEADLINE = 60
N, CHUNK = 2**14, 2**11  # 8 chunks: several rounds and a placement over two workers


def _within(seconds, func):
    """``func()``, failing the test if it has not returned after ``seconds``."""
    out, errors = [], []

    def run():
        try:
            out.append(func())
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(e)

    # In this thread's context: the client made current with ``as_current`` is there.
    thread = threading.Thread(target=contextvars.copy_context().run, args=(run,), daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"the results did not come back within {seconds} s")
    if errors:
        raise errors[0]
    return out[0]


def _read(a):
    """A result as a NumPy array, whether computed already or a (persisted) collection."""
    if isinstance(a, np.ndarray):
        return a
    distributed.wait(a, timeout=DEADLINE)
    return a.compute()


def _persist(a):
    a = a.persist()
    distributed.wait(a, timeout=DEADLINE)  # the crash stalled here
    return a


@pytest.fixture(autouse=True)
def one_task_per_key(caplog):
    """Fail a test in which the scheduler was sent one key with two different tasks
    (distributed warns that this "can cause failures and deadlocks")."""
    yield
    collisions = [r.getMessage()[:300] for r in caplog.get_records("call")
                  if "Detected different `run_spec`" in r.getMessage()]
    assert not collisions, collisions


#: Ways of taking two results ``a`` and ``b`` made from one sort: each returns both.
WAYS = {
    "persist a, persist b": lambda a, b: (a.persist(), b.persist()),
    "persist b, persist a": lambda a, b: tuple(reversed((b.persist(), a.persist()))),
    "persist a and wait, persist b": lambda a, b: (_persist(a), b.persist()),
    "persist a, compute b": lambda a, b: (a.persist(), b.compute()),
    "compute a, persist b": lambda a, b: (a.compute(), b.persist()),
    "compute a, compute b": lambda a, b: (a.compute(), b.compute()),
    "dask.persist": dask.persist,
    "dask.compute": dask.compute,
    # The lazy results again while a persist of one of them runs or is held.
    "persist a, dask.compute both": lambda a, b: (a.persist(), dask.compute(a, b))[1],
    "persist a and wait, dask.persist both": lambda a, b: (_persist(a), dask.persist(a, b))[1],
}


def _inputs(kind, rng, persisted):
    """Fresh random keys with many ties (the orders among equal keys are checked) and
    NaNs, distinct values, and both as Dask arrays (persisted or lazy)."""
    x = rng.integers(0, 300, N).astype(np.float32)
    x[rng.random(N) < 0.01] = np.nan
    v = rng.permutation(N).astype(np.int32 if kind == "sort_by_key stable" else np.int64)
    dx, dv = da.from_array(x, chunks=CHUNK), da.from_array(v, chunks=CHUNK)
    if persisted:
        dx, dv = dx.persist(), dv.persist()
        distributed.wait([dx, dv], timeout=DEADLINE)
    return x, v, dx, dv


def _results(kind, x, v, dx, dv):
    """Two results of one sort of ``dx`` (and ``dv``), and what NumPy gives for them."""
    if kind == "sort_by_key":
        order = np.lexsort((v, x))
        return distsort.sort_by_key(dx, dv), (x[order], v[order])
    order = np.argsort(x, kind="stable")
    if kind == "sort_by_key stable":
        return distsort.sort_by_key(dx, dv, stable=True), (x[order], v[order])
    p = distsort.argsort(dx)
    if kind == "argsort, x[p]":
        return (p, dx[p]), (order, x[order])
    return (p, dv[p]), (order, v[order])  # "argsort, values[p]"


def _make(kind, rng, persisted):
    return _results(kind, *_inputs(kind, rng, persisted))


KINDS = ["sort_by_key", "sort_by_key stable", "argsort, x[p]", "argsort, values[p]"]


def _check(got, expected):
    for result, e in zip(got, expected, strict=True):
        g = _read(result)
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)  # NaNs in the same places, every bit else


@pytest.mark.parametrize("persisted", [False, True], ids=["lazy", "persisted"])
@pytest.mark.parametrize("way", list(WAYS))
def test_sort_by_key_results_taken_every_way(cluster_client, way, persisted):
    """The crash's own call, ``sort_by_key``, under every way of taking its results."""
    rng = np.random.default_rng()
    with cluster_client.as_current():
        results, expected = _make("sort_by_key", rng, persisted)
        _check(_within(DEADLINE, lambda: WAYS[way](*results)), expected)


@pytest.mark.parametrize("persisted", [False, True], ids=["lazy", "persisted"])
@pytest.mark.parametrize("way", ["persist a, persist b", "persist b, persist a",
                                 "persist a, compute b", "compute a, persist b",
                                 "dask.persist", "dask.compute",
                                 "persist a, dask.compute both"])
@pytest.mark.parametrize("kind", KINDS[1:])
def test_other_results_taken(cluster_client, kind, way, persisted):
    """The stable order and argsort + gathers, the ways that mix calls."""
    rng = np.random.default_rng()
    with cluster_client.as_current():
        results, expected = _make(kind, rng, persisted)
        _check(_within(DEADLINE, lambda: WAYS[way](*results)), expected)


@pytest.mark.parametrize("persisted", [False, True], ids=["lazy", "persisted"])
def test_second_sort_while_the_first_is_held(cluster_client, persisted):
    """The same input sorted again, by the same call (the same keys) and by others,
    while the first results are persisted and held."""
    rng = np.random.default_rng()
    with cluster_client.as_current():
        x, v, dx, dv = _inputs("sort_by_key", rng, persisted)
        (k, w), expected = _results("sort_by_key", x, v, dx, dv)
        held = _within(DEADLINE, lambda: (_persist(k), _persist(w)))
        (k2, w2), _ = _results("sort_by_key", x, v, dx, dv)
        (p, y), (order, _) = _results("argsort, x[p]", x, v, dx, dv)
        taken = _within(DEADLINE, lambda: (
            k2.persist(), w2.compute(), distsort.sort(dx, descending=True).compute(),
            *dask.compute(p, y)))
        _check(taken[:2], expected)
        from arrays import descending_of
        np.testing.assert_array_equal(taken[2], descending_of(np.sort(x)))  # NaNs last
        _check(taken[3:], (order, x[order]))
        _check(held, expected)
