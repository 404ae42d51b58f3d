"""Out of core: the plan on integers, the host-run backend's searches against brute
force, and whole sorts under a tiny device budget, on NumPy and (marked gpu) CuPy."""
import itertools

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import distsort
from distsort.backends import Order
from distsort.backends import chunk
from distsort.backends.outofcore import hostruns
from distsort.core.order import encode
from distsort.plan.outofcore import (bytes_moved, needs_out_of_core, plan_out_of_core, run_lengths)

from arrays import (assert_sorted_like_numpy, bits, descending_of, forget_transfers,
                    persisted_on_two_workers, random_keys, received_keys)
from backends import BACKENDS, cupy

ORDERS = [Order(), Order(descending=True), Order(keyed=True),
          Order(descending=True, keyed=True)]


def _codes(run, order):
    return [hostruns.code(run, i, order) for i in range(hostruns.length(run))]


def _sorted_run(rng, n, dtype, order, keyed):
    keys = random_keys(rng, n, dtype, duplicates=True)
    values = rng.integers(0, 4, n).astype(np.int32) if keyed else None
    run = chunk.make_chunk(keys, values)
    perm = sorted(range(n), key=lambda i: hostruns.code(run, i, order))
    return chunk.slice_chunk(chunk.make_chunk(keys[perm], None if values is None
                                                else values[perm]), 0, n)


# ---------------------------------------------------------------- the plan
def test_plan_on_integers():
    p = plan_out_of_core((2**28,) * 16, 4, budget=4 * 10**9)
    assert (p.run_chunks, p.runs) == (3, 6)
    assert run_lengths((2**28,) * 16, 3) == (3 * 2**28,) * 5 + (2**28,)
    assert 4 * 4 * p.segment <= 0.8 * 4 * 10**9  # two segments in flight: inputs + output
    assert all(hi < p.runs for r in p.rounds for _, hi in r.pairs)
    # every run once, then both runs of each compare-split
    lengths = run_lengths((2**28,) * 16, 3)
    pairs = sum(lengths[lo] + lengths[hi] for r in p.rounds for lo, hi in r.pairs)
    assert bytes_moved(p, lengths, 4) == 4 * (sum(lengths) + pairs)


def test_one_run_when_everything_fits_and_memory_error_when_a_chunk_cannot():
    assert plan_out_of_core((10,) * 4, 4, budget=10**6).runs == 1
    assert plan_out_of_core((10,) * 4, 4, budget=10**6).rounds == ()
    with pytest.raises(MemoryError, match="rechunk to at most 85 elements"):
        plan_out_of_core((100,) * 4, 4, budget=400)


def test_needs_out_of_core():
    assert needs_out_of_core(3 * 10**9, [2 * 10**9, 2 * 10**9])
    assert not needs_out_of_core(2 * 10**9, [2 * 10**9, 2 * 10**9])
    assert not needs_out_of_core(10**12, [2 * 10**9, None])  # a worker with no limit
    assert not needs_out_of_core(10**12, [])


# ---------------------------------------------------------------- searches
@settings(max_examples=60, deadline=None)
@given(st.integers(0, 40), st.integers(0, 40), st.sampled_from(ORDERS),
       st.sampled_from(["int8", "float32", "uint64"]), st.integers(0, 2**32 - 1))
def test_co_rank_and_crossing_count_against_brute_force(nx, ny, order, dtype, seed):
    rng = np.random.default_rng(seed)
    x = _sorted_run(rng, nx, dtype, order, order.keyed)
    y = _sorted_run(rng, ny, dtype, order, order.keyed)
    cx, cy = _codes(x, order), _codes(y, order)
    merged = sorted(cx + cy)
    for o in range(nx + ny + 1):
        i = hostruns.co_rank(x, y, o, order)
        assert sorted(cx[:i] + cy[:o - i]) == merged[:o]
    k = hostruns.crossing_count(x, y, order)
    assert k == sum(1 for i in range(min(nx, ny)) if cx[nx - 1 - i] > cy[i])


@pytest.mark.parametrize("segment", [1, 3, 7, 64])
def test_segments_cover_the_merge(segment):
    rng = np.random.default_rng(segment)
    order = Order()
    x, y = (_sorted_run(rng, n, "int16", order, False) for n in (23, 17))
    cuts = hostruns.segments(x, y, segment, order)
    assert cuts[0][0] == cuts[0][2] == 0 and cuts[-1][1] == 23 and cuts[-1][3] == 17
    out = np.concatenate([np.sort(np.concatenate((x[i0:i1], y[j0:j1])))
                          for i0, i1, j0, j1, _ in cuts])
    assert np.array_equal(out, np.sort(np.concatenate((x, y))))
    assert all(b[0] == a[1] and b[2] == a[3] for a, b in itertools.pairwise(cuts))


# ---------------------------------------------------------------- whole sorts
def _budget(chunk, itemsize, runs_of=3):
    """A budget in which runs hold ``runs_of`` chunks and merges stream in segments."""
    return int(runs_of * chunk * itemsize / 0.85) + 1


def _out_of_core(array, chunk, itemsize, runs_of, fn):
    """``fn()`` under the budget of ``_budget``; checks that the graph ran out of core
    wherever the data outgrow half the budget."""
    budget = _budget(chunk, itemsize, runs_of)
    with dask.config.set({"distsort.device-memory-limit": budget,
                          "distsort.out-of-core-engine": "cpu"}):
        out = fn()
    first = out[0] if isinstance(out, tuple) else out
    ooc = any(name.startswith("distsort-run-") for name in first.dask.layers)
    assert ooc == (array.size * itemsize > budget / 2)
    return out


def _ops(xd, vd):
    ops = [lambda: distsort.sort(xd), lambda: distsort.sort(xd, descending=True),
           lambda: distsort.argsort(xd)]
    return ops + ([lambda: distsort.sort_by_key(xd, vd)] if vd is not None else [])


def _check_all(x, chunk, xp, values=None, runs_of=3):
    """Every operation out of core equals NumPy, and the in-memory path bit for bit."""
    xd = da.from_array(xp.asarray(x), chunks=chunk, asarray=False)
    vd = None if values is None else da.from_array(xp.asarray(values), chunks=chunk,
                                                     asarray=False)
    k = x.dtype.itemsize
    sizes = [k, k, k + 8] + ([k + values.dtype.itemsize] if values is not None else [])
    outs, refs = [], []
    for op, itemsize in zip(_ops(xd, vd), sizes, strict=True):
        out, ref = _out_of_core(x, chunk, itemsize, runs_of, op), op()
        outs += list(out) if isinstance(out, tuple) else [out]
        refs += list(ref) if isinstance(ref, tuple) else [ref]
    host = (lambda a: a.get()) if xp is not np else np.asarray
    got = [host(o) for o in dask.compute(*outs, scheduler="sync")]
    want = [host(o) for o in dask.compute(*refs, scheduler="sync")]
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and np.array_equal(bits(g), bits(w))
    assert_sorted_like_numpy(got[0], x)
    assert_sorted_like_numpy(got[1], x, descending=True)
    assert np.array_equal(got[2], np.argsort(x, kind="stable"))


@pytest.mark.parametrize("dtype", ["bool", "int8", "float16", "float32", "uint64"])
@pytest.mark.parametrize("n,chunk", [(1000, 64), (777, 50), (10, 3), (1, 1)])
def test_sorts_under_a_tiny_budget_equal_numpy(dtype, n, chunk):
    rng = np.random.default_rng(n + chunk)
    x = random_keys(rng, n, dtype, duplicates=True)
    values = rng.integers(-50, 50, n).astype(np.int16)
    _check_all(x, chunk, np, values)


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 600), st.integers(1, 90), st.integers(1, 5),
       st.sampled_from(["int16", "float32", "float64"]), st.integers(0, 2**32 - 1))
def test_property_out_of_core_equals_numpy(n, chunk, runs_of, dtype, seed):
    rng = np.random.default_rng(seed)
    x = random_keys(rng, n, dtype, duplicates=True)
    _check_all(x, chunk, np, runs_of=runs_of)


def test_on_a_cluster_with_verification(cluster_client):
    rng = np.random.default_rng(5)
    x = random_keys(rng, 20_000, "float64", duplicates=True)
    xd = da.from_array(x, chunks=1000)
    with dask.config.set({"distsort.device-memory-limit": _budget(1000, 16)}):
        s = distsort.sort(xd, verify=True)
        a = distsort.argsort(xd, verify=True)
        got_s, got_a = cluster_client.compute([s, a], sync=True)
    assert np.array_equal(got_s, np.sort(x), equal_nan=True)
    assert np.array_equal(got_a, np.argsort(x, kind="stable"))


def test_a_chunk_larger_than_the_budget_is_refused_with_advice():
    x = da.from_array(np.arange(1000.0), chunks=500)
    with dask.config.set({"distsort.device-memory-limit": 1000}), \
            pytest.raises(MemoryError, match="rechunk to at most"):
        distsort.sort(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_engines_give_the_same_merges_bit_for_bit(backend):
    """The GPU engine's streamed merge equals the NumPy engine's (and NumPy's sort)."""
    from distsort.backends.outofcore import stream_cpu
    rng = np.random.default_rng(7)
    order = Order()
    x, y = (random_keys(rng, n, "float32") for n in (5000, 3001))
    x, y = (a[np.argsort(encode(a), kind="stable")] for a in (x, y))  # the total order
    cuts = hostruns.segments(x, y, 700, order)
    ref = stream_cpu.merge(x, y, cuts, order, None)
    if backend == "cupy":
        from distsort.backends.outofcore import stream_gpu
        got = stream_gpu.merge(x, y, cuts, order, 10**8)
        assert np.array_equal(got.view(np.uint32), ref.view(np.uint32))
    assert np.array_equal(ref, np.sort(np.concatenate((x, y))), equal_nan=True)


@pytest.mark.gpu
@pytest.mark.skipif(cupy is None, reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("dtype", ["float32", "uint64", "int16", "float64"])
def test_gpu_engine_sorts_cupy_chunks_out_of_core(dtype):
    rng = np.random.default_rng(11)
    x = random_keys(rng, 300_001, dtype, duplicates=True)
    values = rng.integers(0, 2**31, 300_001).astype(np.uint32)
    chunk = 20_000
    xd = da.from_array(cupy.asarray(x), chunks=chunk, asarray=False)
    vd = da.from_array(cupy.asarray(values), chunks=chunk, asarray=False)
    # Runs of four chunks of the key-value pairs: a budget that narrow keys alone also
    # outgrow (they would otherwise fit in place beside their working chunks).
    with dask.config.set({"distsort.device-memory-limit": _budget(chunk, x.itemsize + 4, 4)}):
        s, a = distsort.sort(xd), distsort.argsort(xd, descending=True)
        k, v = distsort.sort_by_key(xd, vd)
        assert any(name.startswith("distsort-run-") for name in s.dask.layers)
        got = [o.get() for o in dask.compute(s, a, k, v, scheduler="sync")]
    ref = np.sort(x)
    assert np.array_equal(got[0], ref, equal_nan=True)
    assert np.array_equal(got[2], ref, equal_nan=True)
    # the in-memory GPU path is the reference of argsort's ties and the values' order
    with dask.config.set({"distsort.device-memory-limit": None}):
        a2, v2 = dask.compute(distsort.argsort(xd, descending=True),
                              distsort.sort_by_key(xd, vd)[1], scheduler="sync")
    assert np.array_equal(got[1], a2.get())
    assert np.array_equal(x[got[1]], descending_of(ref), equal_nan=True)
    assert np.array_equal(got[3], v2.get())


def _mapped_file(address):
    """The file mapped at ``address`` in this process (``/proc/self/maps``), or ''."""
    with open("/proc/self/maps") as maps:
        lines = maps.readlines()
    for line in lines:
        fields = line.split(maxsplit=5)
        lo, hi = (int(a, 16) for a in fields[0].split("-"))
        if lo <= address < hi:
            return fields[5].strip() if len(fields) > 5 else ""
    return ""


@pytest.mark.gpu
@pytest.mark.skipif(cupy is None, reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("dtype", ["float32", "int64", "uint32", "float64"])
def test_gpu_engine_merges_numpy_chunks_into_the_pages_of_their_runs(monkeypatch, dtype):
    """NumPy chunks sorted out of core on the GPU (as on dask-cuda workers): each output
    chunk is the pages of the runs it consumed, mapped again (``pages``), not a pinned
    block of its own, and the sorts equal the in-memory path bit for bit."""
    import dataclasses

    from distsort.cluster import view
    from distsort.api import planning
    rng = np.random.default_rng(5)
    x = random_keys(rng, 300_001, dtype, duplicates=True)
    values = rng.integers(0, 2**31, x.size).astype(np.uint32)
    chunk = 20_000
    xd, vd = da.from_array(x, chunks=chunk), da.from_array(values, chunks=chunk)
    sorts = lambda: (distsort.sort(xd), distsort.argsort(xd, descending=True),  # noqa: E731
                     *distsort.sort_by_key(xd, vd, descending=True))
    ref = dask.compute(*sorts(), scheduler="sync")  # in memory
    budget = _budget(chunk, x.itemsize + 8, 4)
    read = view.read_view
    monkeypatch.setattr(view, "read_view", lambda *a, **k: dataclasses.replace(
        read(*a, **k), device_budgets=(budget,)))
    with planning(merge="kway") as plans:  # small chunks: the cost model takes the network
        outs = sorts()
    assert {p.out_of_core.merge for p in plans} == {"kway"}
    assert _engine_of(outs[0]) == {"gpu"}
    # Persisted together: a merge task runs once (it writes over the runs it read).
    done = dask.persist(*outs, scheduler="sync")
    chunks = [[dict(o.__dask_graph__())[key] for key in o.__dask_keys__()] for o in done]
    for got, want in zip(chunks, ref, strict=True):
        assert np.array_equal(bits(np.concatenate(got)), bits(want))
        assert all(_mapped_file(c.ctypes.data).startswith("/memfd:distsort-run")
                   for c in got)


@pytest.mark.gpu
@pytest.mark.skipif(cupy is None, reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("keys,values,order", [
    ("float32", None, Order()), ("float64", "uint32", Order(descending=True, keyed=True)),
    ("int16", "int64", Order(keyed=True))])
def test_the_merge_kernels_warm_up_once_in_a_thread_of_their_own(keys, values, order):
    from distsort.backends.outofcore import stream_gpu
    warming = stream_gpu.warm_merge(keys, values, order)
    assert warming.result(timeout=300) is None  # raises what the warm-up raised
    assert stream_gpu.warm_merge(keys, values, order) is warming
    assert stream_gpu.phase_seconds()["warm_merge"] > 0


@pytest.mark.gpu
@pytest.mark.skipif(cupy is None, reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("nbytes", [0, 1, 4096 * 3 + 5, (2 << 20) * 7 + 12345])
def test_staging_ring_copies_pageable_memory_both_ways(nbytes):
    """Pieces dealt to three threads through buffers of one huge page each: every byte
    arrives, in both directions, whatever the size."""
    from distsort.backends.outofcore.pinned import PAGE
    from distsort.backends.outofcore.staging import StagingRing
    ring = StagingRing(threads=3, buffer_bytes=PAGE)
    try:
        host = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
        d = cupy.zeros(nbytes, np.uint8)
        ring.to_device(d, host[::1])
        assert np.array_equal(d.get(), host)
        back = np.zeros(nbytes, np.uint8)
        ring.to_host(back, d)
        assert np.array_equal(back, host)
        wide = cupy.asarray(host[: nbytes // 8 * 8].view(np.float64))
        out = np.empty(wide.size, np.float64)  # other dtypes go as their bytes
        ring.to_host(out, wide)
        assert np.array_equal(out.view(np.uint8), host[: nbytes // 8 * 8])
    finally:
        ring.close()


def test_staging_pieces_cover_the_array_once():
    from distsort.backends.outofcore.staging import pieces
    for nbytes, size, workers in [(0, 4, 3), (10, 4, 2), (100, 7, 5), (7, 100, 3)]:
        got = sorted(p for w in pieces(nbytes, size, workers) for p in w)
        assert [o for o, _ in got] == list(range(0, nbytes, size))
        assert sum(n for _, n in got) == nbytes and all(n <= size for _, n in got)


def _engine_of(array):
    engines = {getattr(task[0], "__self__", None) for layer in array.dask.layers.values()
               for task in layer.values() if isinstance(task, tuple) and task}
    return {e.engine for e in engines if isinstance(e, hostruns.HostRuns)}


@pytest.mark.parametrize("reported,config,want", [
    ([10**7], {}, {"gpu"}),  # dask-cuda workers: host chunks sorted on their GPUs
    ([None], {"distsort.device-memory-limit": 10**7}, {"cpu"}),
    ([10**7], {"distsort.out-of-core-engine": "cpu"}, set()),  # GPU budgets: not NumPy's
    ([10**12], {}, set()),  # fits the budget: in memory
])
def test_engine_and_budget_choice(monkeypatch, reported, config, want):
    """Which engine runs, from what the workers report (mocked) and the config."""
    import dataclasses

    from distsort.cluster import view
    read = view.read_view
    monkeypatch.setattr(view, "read_view", lambda *a, **k: dataclasses.replace(
        read(*a, **k), device_budgets=tuple(reported)))
    x = da.from_array(np.arange(10**7, dtype=np.float32), chunks=10**6)
    with dask.config.set(config):
        assert _engine_of(distsort.sort(x)) == want


def test_pinned_pool_reuses_blocks_by_size_and_unlocks_on_trim():
    from distsort.backends.outofcore.pinned import PAGE, PinnedPool
    locked, unlocked = [], []
    pool = PinnedPool(register=lambda a, n: locked.append((a, n)),
                      unregister=unlocked.append, spares=False)
    a = pool.empty(3 * PAGE // 8, "float64")  # three pages
    a[:] = np.arange(len(a))
    view = a[5:9]
    del a
    assert pool.stats()["in_use_bytes"] == 3 * PAGE  # the view keeps the block
    assert view[0] == 5
    del view
    assert pool.stats()["in_use_bytes"] == 0
    b = pool.empty(3 * PAGE // 8, "float64")
    assert len(locked) == 1 and b.ctypes.data == locked[0][0]  # taken again, not locked
    c = pool.empty(10, "int8")  # another size: a block of its own
    assert len(locked) == 2 and pool.stats()["peak_in_use_bytes"] == 4 * PAGE
    del b, c
    pool.trim()
    assert sorted(unlocked) == sorted(a for a, _ in locked)
    assert pool.stats()["locked_bytes"] == 0


def test_pinned_pool_unlocks_free_blocks_before_passing_its_cap():
    from distsort.backends.outofcore.pinned import PAGE, PinnedPool
    unlocked = []
    pool = PinnedPool(register=lambda a, n: None, unregister=unlocked.append, cap=3 * PAGE,
                      spares=False)
    a = pool.empty(PAGE, "uint8")
    b = pool.empty(2 * PAGE, "uint8")
    del a  # a free block of one page
    c = pool.empty(PAGE + 1, "uint8")  # two pages more would pass the cap: trim first
    assert len(unlocked) == 1 and pool.stats()["locked_bytes"] == 4 * PAGE
    del b, c


def test_pinned_pool_makes_one_spare_of_a_size_in_the_background():
    """A request that finds no free block of its size leaves one spare of that size
    made behind it; the next request takes the spare, and a free block makes none."""
    from distsort.backends.outofcore.pinned import PAGE, PinnedPool
    locked = []
    pool = PinnedPool(register=lambda a, n: locked.append((a, n)), unregister=lambda a: None)
    a = pool.empty(PAGE, "uint8")
    pool.settle()
    assert len(locked) == 2 and pool.stats()["locked_bytes"] == 2 * PAGE  # a's, a spare
    b = pool.empty(PAGE, "uint8")  # the spare, and another spare behind it
    pool.settle()
    assert b.ctypes.data == locked[1][0] and len(locked) == 3
    del a, b  # three free blocks: requests take them and make no spare
    c, d = pool.empty(PAGE, "uint8"), pool.empty(PAGE, "uint8")
    pool.settle()
    assert len(locked) == 3 and pool.stats()["in_use_bytes"] == 2 * PAGE
    del c, d


def test_pinned_pool_makes_no_more_spares_than_a_sort_expects():
    from distsort.backends.outofcore.pinned import PAGE, PinnedPool, block_size
    pool = PinnedPool(register=lambda a, n: None, unregister=lambda a: None)
    pool.expect([block_size(3 * PAGE // 4, "float32")] * 2 + [PAGE])
    held = []
    for n in (3 * PAGE // 4, 3 * PAGE // 4, PAGE // 4):
        held.append(pool.empty(n, "float32"))
        pool.settle()
    # two blocks of three pages, one of one: the spare of each size that a third
    # request would have taken is not made
    assert pool.stats()["locked_bytes"] == 7 * PAGE
    del held
    assert pool.empty(3 * PAGE // 4, "float32").size == 3 * PAGE // 4  # reused
    pool.settle()
    assert pool.stats()["locked_bytes"] == 7 * PAGE


def test_runs_form_where_persisted_chunks_live(cluster_client):
    """Chunks persisted on two workers: each run takes chunks of one worker (argsort's
    positions still the original ones) and forms where its chunks are (runs of four
    chunks, eight on each worker: no input chunk goes to the other worker), and the
    result equals NumPy's."""
    from distributed import wait

    from distsort.cluster.locality import chunk_owners
    from distsort.plan.outofcore import group_by_owner
    rng = np.random.default_rng(3)
    x = rng.standard_normal(16_000)
    xd, workers = persisted_on_two_workers(cluster_client, x, 1000)
    with cluster_client.as_current():
        wait(xd)
        owners = chunk_owners(xd.__dask_keys__(), cluster_client)
        assert owners == [workers[i % 2] for i in range(16)]
        perm = group_by_owner(owners)
        assert [owners[i] for i in perm[:8]] == [workers[0]] * 8
        forget_transfers(cluster_client)
        with dask.config.set({"distsort.device-memory-limit": _budget(1000, 8, runs_of=4)}):
            s, a = distsort.sort(xd), distsort.argsort(xd)
            got_s, got_a = cluster_client.compute([s, a], sync=True)
        received = received_keys(cluster_client)
    assert not set(xd.__dask_keys__()) & received
    assert np.array_equal(got_s, np.sort(x))
    assert np.array_equal(got_a, np.argsort(x, kind="stable"))
