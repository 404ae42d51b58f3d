"""One exchange between GPU workers (``distsort.backends.gpu.runs``): two and four plain
workers share GPU 0, each with an RMM pool (``distsort.cluster.shared_gpu``).

``sort``, ``argsort``, ``sort_by_key`` (one value array, and a table of two) and
``lexsort`` with ``distsort.strategy`` forced to ``"exchange"``, element for element
against NumPy on fresh random float32 (NaNs, zeros of both signs and infinities mixed
in) in 8 regular, 5 ragged and 16 chunks; the bytes the workers send each other; and
the plan's own choice.  Runs where CuPy, RMM and a GPU are (``pytest -m gpu``).
"""
import numpy as np
import pytest

from arrays import assert_sorted_like_numpy, bits, random_keys, stable_argsort
from test_api import sort_by_key_reference

cupy = pytest.importorskip("cupy")
pytest.importorskip("rmm")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import distsort  # noqa: E402
import distsort.api  # noqa: E402
from distsort.cluster import bytes_sent_by_kind, diff_sent, gpu_available  # noqa: E402
from distsort.cluster.shared_gpu import shared_gpu_cluster  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not gpu_available(), reason="needs a GPU")]

#: Elements of every test's input (float32: 16 MiB of keys).
N = 2**22


@pytest.fixture(scope="module", params=[2, 4], ids=["2-workers", "4-workers"])
def cluster(request):
    """``(client, workers)``: ``workers`` plain worker processes sharing GPU 0."""
    g = request.param
    with (shared_gpu_cluster(g, pool_fraction=0.4 / g) as c, distributed.Client(c) as client):
        client.wait_for_workers(g)
        yield client, g


def placed(client, g, x, chunks):
    """A persisted Dask array of CuPy chunks of ``x``, chunk ``i`` made on worker
    ``i % g``."""
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])[:g]
    bounds = np.cumsum((0, *chunks))
    futures = [client.submit(cupy.asarray, x[a:b], workers=[workers[i % g]], pure=False)
               for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True))]
    parts = [da.from_delayed(f, (n,), dtype=x.dtype, meta=cupy.empty(0, x.dtype))
             for f, n in zip(futures, chunks, strict=True)]
    out = da.concatenate(parts).persist()
    distributed.wait(out)
    return out


def chunking(rng, name):
    """8 regular chunks, 5 ragged ones (an empty one may be among them), or 16."""
    if name == "ragged-5":
        cuts = np.sort(rng.integers(0, N + 1, size=4))
        return tuple(int(c) for c in np.diff(np.concatenate([[0], cuts, [N]])))
    count = int(name)
    return (N // count,) * count


def exchanged(fn):
    """``fn()`` with ``distsort.strategy`` forced to ``"exchange"``; every plan it made
    must be the exchange's."""
    with distsort.api.planning(strategy="exchange") as plans:
        out = fn()
    assert plans and all(p.strategy == "exchange" and p.backend == "device-runs"
                         for p in plans), plans
    return out


@pytest.mark.parametrize("name", ["8", "ragged-5", "16"])
def test_the_four_functions_equal_numpy(cluster, name):
    client, g = cluster
    rng = np.random.default_rng()
    x = random_keys(rng, N, "float32", special_fraction=0.01)
    v = rng.integers(-2**40, 2**40, N)
    w = rng.standard_normal(N)
    chunks = chunking(rng, name)
    dx, dv, dw = (placed(client, g, a, chunks) for a in (x, v, w))
    outs = [exchanged(lambda: distsort.sort(dx)),
            exchanged(lambda: distsort.sort(dx, descending=True)),
            exchanged(lambda: distsort.argsort(dx)),
            exchanged(lambda: distsort.argsort(dx, descending=True)),
            *exchanged(lambda: distsort.sort_by_key(dx, dv, descending=True)),
            *exchanged(lambda: distsort.sort_by_key(dx, (dv, dw)))[1],
            exchanged(lambda: distsort.lexsort([dv % 7, dx]))]
    assert outs[0].chunks[0] == tuple(da.core.normalize_chunks(outs[0].chunks[0][0], (N,))[0])
    got = [cupy.asnumpy(o) for o in client.compute(outs, sync=True)]
    assert_sorted_like_numpy(got[0], x)
    assert_sorted_like_numpy(got[1], x, descending=True)
    np.testing.assert_array_equal(got[2], stable_argsort(x))
    np.testing.assert_array_equal(got[3], stable_argsort(x, descending=True))
    keys, values = sort_by_key_reference(x, v, descending=True)
    np.testing.assert_array_equal(bits(got[4]), bits(keys))
    np.testing.assert_array_equal(got[5], values)
    perm = stable_argsort(x)  # a table's values: equal keys in input order
    np.testing.assert_array_equal(got[6], v[perm])
    np.testing.assert_array_equal(got[7], w[perm])
    np.testing.assert_array_equal(got[8], np.lexsort([v % 7, x]))


def sent_per_byte(client, fn, nbytes):
    """The result of ``fn()`` on the host, and the bytes the workers sent each other
    to make its output chunks (their gather to the client not counted), per byte."""
    before = bytes_sent_by_kind(client)
    out = client.persist(fn())
    distributed.wait(out)
    sent = diff_sent(before, bytes_sent_by_kind(client))
    return cupy.asnumpy(client.compute(out, sync=True)), sum(sent.values()) / nbytes, sent


def test_each_element_crosses_once(cluster):
    """``sort`` sends at most ``(1 - 1/G) + 0.05`` of the keys' bytes between the
    workers; ``argsort`` as much of the bytes it sorts (float32 keys and their int64
    positions: three times the keys')."""
    client, g = cluster
    rng = np.random.default_rng()
    x = rng.standard_normal(N, dtype=np.float32)
    dx = placed(client, g, x, (N // (4 * g),) * (4 * g))
    bound = (1 - 1 / g) + 0.05
    got, sent, kinds = sent_per_byte(client, lambda: exchanged(lambda: distsort.sort(dx)),
                                     x.nbytes)
    assert np.array_equal(got, np.sort(x)) and sent <= bound, kinds
    got, sent, kinds = sent_per_byte(client, lambda: exchanged(lambda: distsort.argsort(dx)),
                                     x.nbytes)
    np.testing.assert_array_equal(got, np.argsort(x, kind="stable"))
    assert sent <= 3 * bound, kinds


def test_the_plan_takes_the_exchange_by_itself(cluster):
    """Without a forced strategy, CuPy chunks held by two or four workers take the
    exchange (the network would send as much or more: ``distsort.plan.exchange``)."""
    client, g = cluster
    x = np.random.default_rng().standard_normal(N // 4, dtype=np.float32)
    dx = placed(client, g, x, (N // 16,) * 4)
    with distsort.api.planning() as plans:
        s = distsort.sort(dx)
    assert plans[0].strategy == "exchange", plans
    assert np.array_equal(cupy.asnumpy(client.compute(s, sync=True)), np.sort(x))
