"""verify=True: honest runs pass (every dtype, NaN payloads), corrupted runs raise.

Corruption is injected by monkeypatching one NumPy backend function (a merge, the
finish step) so that one element is lost, duplicated, changed or misplaced; the
run without verify shows that the result really is wrong, the run with verify
must raise ``distsort.VerificationError``.
"""

import dask
import dask.array as da
import numpy as np
import pytest

import distsort
from distsort.graph import verify as dv
from distsort.backends import Order
from distsort.backends.cpu import numpy_backend as npb
from distsort.core.order import encode
from arrays import DTYPES, assert_sorted_like_numpy, bits, random_keys, stable_argsort

from backends import BACKENDS, cupy
#: Faults injected (one per run), runs without verify shown to return a wrong result,
#: VerificationErrors raised by runs with verify, honest verified results checked.
COUNTS = {"faults": 0, "wrong_without_verify": 0, "raised": 0, "honest": 0}


def as_dask(x, chunks, backend="numpy"):
    if backend == "cupy":
        return da.from_array(cupy.asarray(x), chunks=(chunks,), asarray=False)
    return da.from_array(x, chunks=(chunks,))


def host(x):
    return x.get() if type(x).__module__.startswith("cupy") else np.asarray(x)


# ------------------------------------------------------------------ honest runs
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_honest_runs_pass_with_every_dtype(dtype, backend):
    rng = np.random.default_rng(DTYPES.index(dtype))
    x = random_keys(rng, 3001, dtype, special_fraction=0.2, duplicates=True)
    v = random_keys(rng, 3001, "float32", special_fraction=0.2)  # NaN payloads as values
    chunks = (400, 0, 1001, 600, 1000)
    dx, dv_ = as_dask(x, chunks, backend), as_dask(v, chunks[::-1], backend)
    out = dask.compute(distsort.sort(dx, verify=True),
                       distsort.sort(dx, descending=True, verify=True),
                       distsort.argsort(dx, verify=True),
                       distsort.argsort(dx, descending=True, verify=True),
                       *distsort.sort_by_key(dx, dv_, verify=True), scheduler="sync")
    out = [host(o) for o in out]
    assert_sorted_like_numpy(out[0], x)
    assert_sorted_like_numpy(out[1], x, descending=True)
    np.testing.assert_array_equal(out[2], stable_argsort(x))
    np.testing.assert_array_equal(out[3], stable_argsort(x, descending=True))
    ref = dask.compute(*distsort.sort_by_key(x, v))
    assert_same_keyed_sort(out[4], out[5], *ref, x, v)
    COUNTS["honest"] += 6


def assert_same_keyed_sort(keys, values, ref_keys, ref_values, x, v):
    """The same order by (canonical key, canonical value) as the reference, and the
    same (key, value) pairs bit for bit: keys NumPy calls equal (-0.0 and 0.0, NaN
    payloads) with values it calls equal may come in either order."""
    for out, ref in ((keys, ref_keys), (values, ref_values)):
        np.testing.assert_array_equal(encode(out, canonical=True), encode(ref, canonical=True))

    def pairs(k, w):
        kb, wb = bits(k).astype(np.uint64), bits(w).astype(np.uint64)
        p = np.lexsort((wb, kb))
        return kb[p], wb[p]
    for got, want in zip(pairs(keys, values), pairs(x, v), strict=False):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_honest_nd_runs_pass(backend):
    rng = np.random.default_rng(3)
    x = random_keys(rng, 37 * 21, "float64", special_fraction=0.3).reshape(37, 21)
    xd = da.from_array(cupy.asarray(x) if backend == "cupy" else x, chunks=(10, 21),
                       asarray=backend != "cupy")
    s, a = dask.compute(distsort.sort(xd, verify=True), distsort.argsort(xd, verify=True))
    assert np.array_equal(host(s), np.sort(x), equal_nan=True)
    np.testing.assert_array_equal(host(a), np.argsort(x, kind="stable"))
    COUNTS["honest"] += 2


def test_verified_graph_gates_every_output_chunk_and_touches_no_data():
    calls = []

    def spy(block):
        calls.append(1)
        return block

    x = da.from_array(np.arange(50.0)[::-1], chunks=7).map_blocks(spy)
    calls.clear()
    s = distsort.sort(x, verify=True)
    assert not calls
    assert s.name != distsort.sort(x).name and s.name == distsort.sort(x, verify=True).name
    check = [n for n in s.dask.layers if n.startswith("distsort-verify-check-")]
    assert len(check) == 1
    graph = dict(s.__dask_graph__())
    for key in s.__dask_keys__():
        assert (check[0], 0) in _dependencies(graph[key]), key
    np.testing.assert_array_equal(s.compute(scheduler="sync"), np.arange(50.0))


def _dependencies(task):
    """The keys a task reads (legacy tuples or ``dask._task_spec`` tasks)."""
    deps = getattr(task, "dependencies", None)
    if deps is not None:
        return set(deps)
    return {a for a in task[1:] if isinstance(a, tuple)}


# ------------------------------------------------------------------ summaries
def test_summary_sums_are_order_independent_and_see_one_bit():
    rng = np.random.default_rng(0)
    x = random_keys(rng, 5000, "float64", special_fraction=0.3)
    v = rng.integers(-9, 9, size=5000)
    a, b = dv.summarize(x, v), dv.summarize(x[::-1].copy(), v[::-1].copy())
    assert (a.count, a.keys, a.pairs) == (b.count, b.keys, b.pairs)
    y = x.copy()
    y.view(np.uint64)[17] ^= 1  # one bit: a NaN payload, a zero's sign or a mantissa bit
    assert dv.summarize(y, v).keys != a.keys
    w = v.copy()
    w[[3, 4]] = w[[4, 3]] if w[3] != w[4] else (w[3] + 1, w[4])
    assert dv.summarize(x, w).pairs != a.pairs and dv.summarize(x, w).keys == a.keys
    # argsort's pairs: positions from ``start`` are the same as explicit values
    p = dv.summarize(x, start=100)
    assert p.pairs == dv.summarize(x, np.arange(100, 5100)).pairs


def test_summary_in_blocks_equals_one_pass_and_sees_disorder_at_block_edges(monkeypatch):
    rng = np.random.default_rng(1)
    codes = np.sort(rng.integers(0, 1000, size=100))
    whole = dv.summarize(codes, order=Order())
    monkeypatch.setattr(dv, "BLOCK", 7)
    blocked = dv.summarize(codes, order=Order())
    assert blocked == whole and whole.disorder == 0
    bad = codes.copy()
    bad[13], bad[14] = bad[14] + 1, bad[13]  # 14 = 2 * 7: the pair straddles a block edge
    s = dv.summarize(bad, order=Order())
    assert s.disorder >= 1 and s.where == 13


# ------------------------------------------------------------------ corruption
def _corrupt(func, change, at=0):
    """``func`` whose ``at``-th result with two different keys is passed through ``change``
    (``at=-1``: none; ``state["eligible"]`` counts such results)."""
    state = {"eligible": 0}

    def wrapper(*args):
        out = func(*args)
        arrays = out if isinstance(out, tuple) else (out,)
        if len(np.unique(arrays[0])) >= 2:
            state["eligible"] += 1
            if state["eligible"] - 1 == at:
                COUNTS["faults"] += 1
                return change(out)
        return out
    wrapper.state, wrapper.original = state, func
    return wrapper


def _corrupt_last(monkeypatch, name, change, run):
    """Patch ``npb.<name>`` to corrupt its last eligible call in ``run()`` (the sync
    scheduler runs tasks in the same order every time): a later merge cannot repair it."""
    original = getattr(npb, name)
    original = getattr(original, "original", original)  # not a wrapper of a wrapper
    dry = _corrupt(original, change, at=-1)
    monkeypatch.setattr(npb, name, dry)
    run()
    monkeypatch.setattr(npb, name, _corrupt(original, change, at=dry.state["eligible"] - 1))
    return original


def _each(out, f):
    """Apply ``f`` to every array of a chunk (codes, or (keys, values))."""
    return tuple(f(a) for a in out) if isinstance(out, tuple) else f(out)


def _mid(a):
    codes = encode(a[0], canonical=True) if isinstance(a, tuple) else a
    return int(np.flatnonzero(np.diff(codes))[0])


def drop_one(out):
    j = _mid(out)
    return _each(out, lambda a: np.delete(a, j))


def duplicate_one(out):
    j = _mid(out)  # a[j] != a[j + 1]: a[j] now twice, a[j + 1] lost; still sorted
    return _each(out, lambda a: np.concatenate([a[:j + 1], a[j:j + 1], a[j + 2:]]))


def swap_neighbours(out):
    j = _mid(out)
    return _each(out, lambda a: np.concatenate([a[:j], a[j + 1:j + 2], a[j:j + 1], a[j + 2:]]))


def flip_low_bit(out):
    if isinstance(out, tuple):  # a value (argsort's position): what argsort returns
        values = out[1].copy()
        values.view(f"u{values.dtype.itemsize}")[0] ^= 1
        return out[0], values
    c = out.copy()
    c[0] ^= 1
    return c


def swap_two_values(out):
    keys, values = out
    j = _mid(out)  # keys differ at j, j + 1: each key gets the other's value
    v = values.copy()
    v[[j, j + 1]] = v[[j + 1, j]]
    return keys, v


CORRUPTIONS = {
    "drop": (drop_one, "lost"),
    "duplicate": (duplicate_one, "not a permutation"),
    "swap": (swap_neighbours, "not sorted"),
    "flip-bit": (flip_low_bit, "not a permutation|not sorted|out of order|pairs"),
}


def _run(func, x, v, chunks, verify):
    dx = as_dask(x, chunks)
    if func == "sort":
        return distsort.sort(dx, verify=verify).compute(scheduler="sync")
    if func == "argsort":
        return distsort.argsort(dx, verify=verify).compute(scheduler="sync")
    return dask.compute(*distsort.sort_by_key(dx, as_dask(v, chunks), verify=verify),
                        scheduler="sync")


def _reference(func, x, v, chunks):
    return _run(func, x, v, chunks, verify=False)


def _same(a, b):
    a, b = (a if isinstance(a, tuple) else (a,)), (b if isinstance(b, tuple) else (b,))
    return all(p.shape == q.shape and np.array_equal(bits(p), bits(q))
               for p, q in zip(a, b, strict=False))


@pytest.mark.parametrize("target", ["merge_low", "merge_high"])
@pytest.mark.parametrize("func", ["sort", "argsort", "sort_by_key"])
@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
@pytest.mark.parametrize("dtype", ["float64", "int16"])
def test_verify_catches_one_corrupted_element(monkeypatch, kind, func, target, dtype):
    change, message = CORRUPTIONS[kind]
    rng = np.random.default_rng(len(kind) + len(func))
    x = random_keys(rng, 1500, dtype, special_fraction=0.2, duplicates=True)
    v = rng.integers(-1000, 1000, size=1500).astype(np.int32)
    chunks = (300,) * 5
    good = _reference(func, x, v, chunks)
    _corrupt_last(monkeypatch, target, change,
                  lambda: _run(func, x, v, chunks, verify=False))
    bad = _run(func, x, v, chunks, verify=False)
    assert not _same(bad, good), "the injected fault must change the result"
    COUNTS["wrong_without_verify"] += 1
    _corrupt_last(monkeypatch, target, change, lambda: _run(func, x, v, chunks, verify=True))
    with pytest.raises(distsort.VerificationError, match=message):
        _run(func, x, v, chunks, verify=True)
    COUNTS["raised"] += 1


@pytest.mark.parametrize("func", ["argsort", "sort_by_key"])
def test_verify_catches_a_value_moved_to_another_key(monkeypatch, func):
    rng = np.random.default_rng(9)
    x = rng.normal(size=2000)
    v = rng.permutation(2000).astype(np.int64)
    chunks = (500,) * 4
    good = _reference(func, x, v, chunks)
    _corrupt_last(monkeypatch, "merge_high", swap_two_values,
                  lambda: _run(func, x, v, chunks, verify=False))
    assert not _same(_run(func, x, v, chunks, verify=False), good)
    COUNTS["wrong_without_verify"] += 1
    _corrupt_last(monkeypatch, "merge_high", swap_two_values,
                  lambda: _run(func, x, v, chunks, verify=True))
    with pytest.raises(distsort.VerificationError, match=r"\(key, (value|index)\) pairs"):
        _run(func, x, v, chunks, verify=True)
    COUNTS["raised"] += 1


def _sort_unverified_and_verified(dx, match):
    """``distsort.sort`` of ``dx`` under an injected fault, twice: returns the unverified
    result (for the caller to show it wrong); the verified run must raise ``match``."""
    COUNTS["faults"] += 2  # one run without verify, one with
    wrong = distsort.sort(dx).compute(scheduler="sync")
    with pytest.raises(distsort.VerificationError, match=match):
        distsort.sort(dx, verify=True).compute(scheduler="sync")
    COUNTS["raised"] += 1
    return wrong


def test_verify_catches_chunks_sorted_alone_but_not_merged(monkeypatch):
    """No compare-split at all: every chunk sorted, same elements, wrong global order."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=1000)
    monkeypatch.setattr(npb, "merge_low", lambda a, b_head, order=None: a)
    monkeypatch.setattr(npb, "merge_high", lambda b, a_tail, order=None: b)
    wrong = _sort_unverified_and_verified(as_dask(x, (250,) * 4),
                                          "chunks 0 and 1 are out of order")
    assert not np.array_equal(wrong, np.sort(x))
    COUNTS["wrong_without_verify"] += 1


def test_verify_catches_lost_nan_payloads(monkeypatch):
    """A finish step that makes every NaN the default NaN: equal under equal_nan, not bitwise."""
    rng = np.random.default_rng(5)
    x = random_keys(rng, 2000, "float32", special_fraction=0.3)
    finish = npb.finish_keys

    def canonical_nans(chunk, order, dtype):
        out = finish(chunk, order, dtype)
        return np.where(np.isnan(out), np.float32(np.nan), out)

    monkeypatch.setattr(npb, "finish_keys", canonical_nans)
    wrong = _sort_unverified_and_verified(as_dask(x, (500,) * 4), "keys are not a permutation")
    assert np.array_equal(wrong, np.sort(x), equal_nan=True)  # looks right...
    assert not np.array_equal(bits(wrong), bits(np.sort(x)))  # ...but lost the payloads
    COUNTS["wrong_without_verify"] += 1


def test_no_chunk_of_a_corrupted_result_can_be_read(monkeypatch):
    rng = np.random.default_rng(6)
    x = rng.normal(size=1200)
    original = npb.merge_high
    for i in range(4):  # even chunks the fault did not touch
        monkeypatch.setattr(npb, "merge_high", _corrupt(original, duplicate_one))
        s = distsort.sort(as_dask(x, (300,) * 4), verify=True)  # the graph holds the patch
        with pytest.raises(distsort.VerificationError):
            s.blocks[i].compute(scheduler="sync")
        COUNTS["raised"] += 1


def test_nd_verify_catches_a_corrupted_block(monkeypatch):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(20, 9))
    blocks = npb.sort_blocks

    def corrupt(keys, values, axis, order, positions=False):
        k, v = blocks(keys, values, axis, order, positions)
        k = k.copy()
        k[0, 0] = k[0, 1]  # one key duplicated, one lost
        return k, v

    monkeypatch.setattr(npb, "sort_blocks", corrupt)
    COUNTS["faults"] += 1
    with pytest.raises(distsort.VerificationError, match="permutation"):
        distsort.sort(da.from_array(x, chunks=(5, 9)), verify=True).compute(scheduler="sync")
    COUNTS["raised"] += 1



@pytest.mark.parametrize("dtype", ["float32", "int8", "uint64", "bool", "float16"])
def test_compiled_hash_sums_equal_numpy(monkeypatch, dtype):
    """The numba kernel (long NumPy chunks) and the array-by-array hashes give the same
    sums: an input summarized by one and an output by the other must agree."""
    pytest.importorskip("numba")
    rng = np.random.default_rng()
    n = 3000
    x = (rng.standard_normal(n) * 100).astype(dtype)
    vals = rng.integers(-5, 5, n).astype(np.int32)
    order = Order(keyed=True)

    def all_summaries():
        return [dv.summarize(x), dv.summarize(x, vals), dv.summarize(x, start=123),
                dv.summarize(np.sort(x), order=Order()),
                dv.summarize(np.sort(x), np.zeros(n, np.int32), order=order)]
    monkeypatch.setattr(dv, "COMPILED_FROM", 1)
    compiled = all_summaries()
    monkeypatch.setattr(dv, "COMPILED_FROM", 1 << 62)
    assert compiled == all_summaries()
    assert compiled[0].keys != 0 and compiled[1].pairs != compiled[2].pairs


@pytest.mark.parametrize("dtype", ["float32", "float64", "int16", "uint32", "bool"])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("keyed", [False, True])
def test_compiled_order_check_equals_numpy(monkeypatch, dtype, descending, keyed):
    """The compiled order check (one vectorized pass) counts and places the neighbours
    out of order as the NumPy masks do: NaNs of either sign last, -0.0 before +0.0 for
    keys alone (after it descending), equal for keyed orders; sorted chunks and chunks
    with a few elements moved."""
    pytest.importorskip("numba")
    rng = np.random.default_rng()
    n = 5001
    if dtype.startswith("float"):
        pool = np.array([-0.0, 0.0, np.nan, -np.nan, 1.5, -1.5, np.inf, -np.inf, 1e-45,
                         -1e-45], dtype=dtype)
        x = rng.choice(pool, n)
    else:
        x = random_keys(rng, n, dtype)
    order = Order(descending=descending, keyed=keyed)
    ordered = np.sort(x, kind="stable")
    if dtype.startswith("float"):  # numpy.sort keeps -0.0 and 0.0 as they come
        zeros = ordered == 0
        negative = int(np.signbit(ordered[zeros]).sum())
        ordered[zeros] = np.r_[np.full(negative, -0.0), np.zeros(zeros.sum() - negative)]
    if descending:
        nan = np.isnan(ordered) if dtype.startswith("float") else np.zeros(n, bool)
        ordered = np.concatenate([ordered[~nan][::-1], ordered[nan]])
    for moved in (0, 1, 7):
        y = ordered.copy()
        at = rng.integers(0, n, moved)
        y[at] = y[rng.integers(0, n, moved)]
        monkeypatch.setattr(dv, "COMPILED_FROM", 1)
        compiled = dv.summarize(y, order=order)
        monkeypatch.setattr(dv, "COMPILED_FROM", 1 << 62)
        blocks = dv.summarize(y, order=order)
        assert (compiled.disorder, compiled.where) == (blocks.disorder, blocks.where)
        if moved == 0:
            assert compiled.disorder == 0 and compiled.where == -1


def test_input_read_as_chunked_argsort_and_stable_sort_by_key_pass():
    """The "one-device" strategy reads a ragged input as it is chunked and writes regular
    chunks: argsort's input positions start where the input's own chunks start (the
    check once took the output's, and failed honest argsorts and stable sort_by_key of
    8-byte values)."""
    rng = np.random.default_rng(34)
    n = 15_000
    x = random_keys(rng, n, "float32", duplicates=True)
    v = random_keys(rng, n, "uint64")
    chunks = (1_000, 6_000, 3_000, 5_000)
    dx, dvals = da.from_array(x, chunks=(chunks,)), da.from_array(v, chunks=(chunks,))
    with dask.config.set({"distsort.strategy": "one-device"}):
        a = distsort.argsort(dx, verify=True)
        k, s = distsort.sort_by_key(dx, dvals, stable=True, verify=True)
        assert a.chunks[0] != chunks
        a, k, s = dask.compute(a, k, s)
    perm = stable_argsort(x)
    np.testing.assert_array_equal(a, perm)
    np.testing.assert_array_equal(bits(k), bits(x[perm]))
    np.testing.assert_array_equal(s, v[perm])


class _Flushing(np.ndarray):
    """Floats whose comparisons flush subnormals to zero, as a GPU compares them."""

    def _flushed(self):
        x = self.view(np.ndarray)
        return np.where(np.abs(x) < np.finfo(x.dtype).tiny, 0, x)

    def __eq__(self, other):
        return self._flushed() == np.asarray(other._flushed() if isinstance(other, _Flushing)
                                             else other)

    def __lt__(self, other):
        return self._flushed() < np.asarray(other._flushed() if isinstance(other, _Flushing)
                                            else other)

    __hash__ = None


def test_order_check_holds_where_comparisons_flush_subnormals():
    """Subnormals and zeros sorted by argsort (1e-45 after 0.0, positions not ascending
    across them) pass the check where comparisons flush subnormals (as CuPy's do on a
    GPU), and a subnormal put before a zero is still caught."""
    from distsort.backends import Order
    from distsort.graph.verify import _out_of_order
    keys = np.array([0.0, 0.0, 1e-45, 1e-45], dtype=np.float32).view(_Flushing)
    positions = np.array([2857, 2902, 38, 44])
    assert not _out_of_order(np, keys, positions, Order(keyed=True)).any()
    wrong = np.array([1e-45, 0.0], dtype=np.float32).view(_Flushing)
    assert _out_of_order(np, wrong, None, Order()).tolist() == [True]
    assert _out_of_order(np, wrong, np.array([1, 0]), Order(keyed=True)).tolist() == [True]
