"""The distributed merge on GPU workers (dask-cuda), against NumPy.

Runs on a machine with GPUs, CuPy and dask-cuda (``pytest -m gpu``); skipped elsewhere.
Clusters: 1 and 2 GPUs (as many as there are), UCX (NVLink) and TCP.  Two workers
of one host read crossing parts through CUDA IPC (``distsort.exchange`` "auto") on
UCX; the TCP clusters send them as data (``"comm"``), and
``test_crossing_parts_shared_or_sent`` runs both ways on UCX.
"""
import os
import time

import numpy as np
import pytest

from arrays import (DTYPES, assert_only_crossing_parts_travel, assert_sorted_like_numpy,
                    random_keys, stable_argsort)
from test_api import sort_by_key_reference

cupy = pytest.importorskip("cupy")
pytest.importorskip("dask_cuda")
da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

import distsort  # noqa: E402
from distsort.cluster import (bytes_sent_by_kind, diff_sent, local_cuda_cluster,  # noqa: E402
                              ucx_available)
from distsort.core.taskkeys import round_task_kind, task_round  # noqa: E402
from distsort.plan.network import plan_network  # noqa: E402

pytestmark = pytest.mark.gpu


def gpu_count():
    try:
        return cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError:
        return 0


CONFIGS = [(n, p) for n in (1, 2) for p in ("ucx", "tcp")]


@pytest.fixture(scope="module", params=CONFIGS, ids=lambda c: f"{c[0]}gpu-{c[1]}")
def client(request):
    n, protocol = request.param
    if gpu_count() < n:
        pytest.skip(f"needs {n} GPUs")
    if protocol == "ucx" and not ucx_available():
        pytest.skip("distributed-ucxx not installed")
    exchange = "auto" if protocol == "ucx" else "comm"
    with (local_cuda_cluster(n_workers=n, protocol=protocol,
                             rmm_pool_size="8GiB" if protocol == "ucx" else None) as cluster,
          distributed.Client(cluster) as c,
          dask.config.set({"distsort.exchange": exchange})):
        yield c


def to_dask(x, chunks):
    return da.from_array(cupy.asarray(x), chunks=(chunks,), asarray=False)


def count_chunks(n, count):
    return tuple(len(c) for c in np.array_split(np.arange(n), count))


CHUNK_COUNTS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 31]


@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_packed_chunks(client, descending):
    """Chunks of 4-byte integer keys and values whose lengths are multiples of 32 sort
    packed on the GPU (``passes.packs``) and merge unpacked: NumPy's order, ties (many)
    by value."""
    rng = np.random.default_rng()
    n = 6 * 2**16
    x = rng.integers(-500, 500, n).astype(np.int32)
    v = rng.integers(0, 2**32, n).astype(np.uint32)
    dx, dv = to_dask(x, count_chunks(n, 6)), to_dask(v, count_chunks(n, 6))
    sk, sv = client.compute([*distsort.sort_by_key(dx, dv, descending=descending)], sync=True)
    rk, rv = sort_by_key_reference(x, v, descending)
    np.testing.assert_array_equal(cupy.asnumpy(sk), rk)
    np.testing.assert_array_equal(cupy.asnumpy(sv), rv)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype(client, dtype):
    i = DTYPES.index(dtype)
    rng = np.random.default_rng()
    n = int(rng.integers(3000, 9000))
    count = CHUNK_COUNTS[i % len(CHUNK_COUNTS)]
    x = random_keys(rng, n, dtype, special_fraction=0.1, duplicates=i % 2 == 0)
    v = random_keys(rng, n, DTYPES[(i + 5) % len(DTYPES)])
    dx = to_dask(x, count_chunks(n, count))
    dv = to_dask(v, count_chunks(n, max(1, count - 1)))
    outs = client.compute([distsort.sort(dx), distsort.sort(dx, descending=True),
                           distsort.argsort(dx), distsort.argsort(dx, descending=True),
                           *distsort.sort_by_key(dx, dv)], sync=True)
    outs = [cupy.asnumpy(o) for o in outs]
    assert_sorted_like_numpy(outs[0], x)
    assert_sorted_like_numpy(outs[1], x, descending=True)
    np.testing.assert_array_equal(outs[2], stable_argsort(x))
    np.testing.assert_array_equal(outs[3], stable_argsort(x, descending=True))
    rk, rv = sort_by_key_reference(x, v)
    assert np.array_equal(outs[4], rk, equal_nan=True)
    assert np.array_equal(outs[5], rv, equal_nan=True)


@pytest.mark.parametrize("count", CHUNK_COUNTS)
def test_chunk_counts_and_ragged_chunks(client, count):
    rng = np.random.default_rng()
    n = count * 1000 + int(rng.integers(0, 999))
    x = random_keys(rng, n, "float32")
    cuts = np.sort(rng.integers(0, n + 1, size=count - 1))
    ragged = tuple(int(c) for c in np.diff(np.concatenate([[0], cuts, [n]])))
    for chunks in (count_chunks(n, count), ragged):
        s, a = client.compute([distsort.sort(to_dask(x, chunks)),
                               distsort.argsort(to_dask(x, chunks))], sync=True)
        assert_sorted_like_numpy(cupy.asnumpy(s), x)
        np.testing.assert_array_equal(cupy.asnumpy(a), stable_argsort(x))


def test_chunks_stay_on_their_workers(client):
    """Each merge of the network (``distsort.strategy`` "network": two GPU workers take
    the exchange by default) runs where the chunk it keeps lives: a worker only receives
    heads/tails (before the scheduler plugin of ``distsort.cluster.locality``, 2 H200s
    over UCX sometimes ran a merge on the other worker and moved the whole chunk)."""
    rng = np.random.default_rng()
    n, count = 1 << 22, 4
    x = random_keys(rng, n, "uint32")
    dx = to_dask(x, count_chunks(n, count)).persist()
    distributed.wait(dx)
    before = bytes_sent_by_kind(client)
    with dask.config.set({"distsort.strategy": "network"}):
        s = distsort.sort(dx).persist()
    distributed.wait(s)
    sent = diff_sent(before, bytes_sent_by_kind(client))
    assert_only_crossing_parts_travel(sent, len(client.scheduler_info()["workers"]))
    assert_sorted_like_numpy(cupy.asnumpy(s.compute()), x)


@pytest.mark.parametrize("exchange", ["ipc", "comm"])
def test_crossing_parts_shared_or_sent(client, exchange):
    """Two GPU workers, the network: crossing parts copied through CUDA IPC (only the
    chunks' share handles travel as data) or sent as data by the cluster's protocol; the
    same result."""
    workers = len(client.scheduler_info()["workers"])
    if workers < 2 or not client.scheduler.address.startswith("ucx"):
        pytest.skip("two workers on UCX")
    rng = np.random.default_rng()
    n = 1 << 21
    x = random_keys(rng, n, "float64", special_fraction=0.01)
    v = random_keys(rng, n, "int16")
    dx, dv = to_dask(x, count_chunks(n, 4)).persist(), to_dask(v, count_chunks(n, 4)).persist()
    distributed.wait([dx, dv])
    before = bytes_sent_by_kind(client)
    with dask.config.set({"distsort.exchange": exchange, "distsort.strategy": "network"}):
        s, a, (sk, sv) = distsort.sort(dx), distsort.argsort(dx), distsort.sort_by_key(dx, dv)
    sa = client.persist([s, a])  # keys only: the values' chunks may lie on the other worker
    distributed.wait(sa)
    sent = diff_sent(before, bytes_sent_by_kind(client))  # before the client reads them
    outs = [cupy.asnumpy(o) for o in client.compute([*sa, sk, sv], sync=True)]
    # "ipc" counts bytes copied through CUDA IPC (a counter); the other kinds come from
    # transfer logs that may have rolled over, and whether whole chunks stay put is
    # test_chunks_stay_on_their_workers's business.
    kinds = {round_task_kind(k) for k in dict(s.dask)}
    if exchange == "ipc":
        assert sent.get("ipc", 0) > n and "share" in kinds and "head" not in kinds, sent
    else:
        assert sent.get("ipc", 0) == 0 and "head" in kinds and "share" not in kinds, sent
    assert_sorted_like_numpy(outs[0], x)
    np.testing.assert_array_equal(outs[1], stable_argsort(x))
    rk, rv = sort_by_key_reference(x, v)
    assert np.array_equal(outs[2], rk, equal_nan=True) and np.array_equal(outs[3], rv)


def memory_tiers(dask_worker):
    """Bytes a dask-cuda worker holds on the device and on the host (spilled)."""
    data = dask_worker.data
    tiers = {}
    for name in ("device_buffer", "host_buffer"):
        buf = getattr(data, name, None)
        if buf is not None:
            tiers[name] = int(buf.fast.total_weight)
    return tiers


class RoundLog(distributed.SchedulerPlugin):
    """Prints when each round's merges are all done (the scheduler runs in this process)."""

    def __init__(self, chunks):
        self.left = {f"r{r:02d}": 2 * len(rnd.pairs)
                     for r, rnd in enumerate(plan_network(chunks))}
        self.t0 = time.perf_counter()

    def transition(self, key, start, finish, *args, **kwargs):
        if finish == "memory" and round_task_kind(key) in ("low", "high"):
            r = f"r{task_round(key):02d}"
            self.left[r] -= 1
            if not self.left[r]:
                print(f"  {r} merged at {time.perf_counter() - self.t0:.1f} s", flush=True)


@pytest.mark.skipif(not os.environ.get("DISTSORT_BIG"), reason="set DISTSORT_BIG=1 (32 GB)")
def test_out_of_core_one_gpu_spills():
    """32 GiB of float32 on one GPU worker with an 8 GB budget: the out-of-core plan
    (``distsort.plan.outofcore``), and dask-cuda spills the CuPy input and output.

    ``verify=True`` checks on the worker that the result is sorted and a permutation
    of the input before any chunk of it can be read.
    """
    if gpu_count() < 1:
        pytest.skip("needs a GPU")
    n, chunk = 8 * 2**30, 2**28  # 32 GiB in 32 chunks of 1 GiB: 15 rounds
    with (local_cuda_cluster(n_workers=1, device_memory_limit="8GB", protocol="tcp",
                             rmm_pool_size=None, memory_limit="100GB") as cluster,
          distributed.Client(cluster) as c):
        c.register_plugin(RoundLog(n // chunk))
        # made on the GPU (a NumPy input would spend minutes in the random
        # generator and the host-to-device copies, twice: the checks remake it)
        rs = da.random.RandomState(7, RandomState=cupy.random.RandomState)
        x = rs.random_sample(n, chunks=chunk, dtype=np.float32)
        start = time.perf_counter()
        s = distsort.sort(x, verify=True).persist()
        distributed.wait(s)
        print(f"sorted and verified in {time.perf_counter() - start:.1f} s", flush=True)
        tiers = c.run(memory_tiers)
        print("memory tiers after the sort:", tiers, flush=True)
        host = sum(t.get("host_buffer", 0) for t in tiers.values())
        assert host >= 16 * 2**30, "the sorted chunks should have spilled to host memory"
        first, last, lo, hi = c.compute([s[0], s[-1], x.min(), x.max()], sync=True)
        assert float(first) == float(lo) and float(last) == float(hi)
