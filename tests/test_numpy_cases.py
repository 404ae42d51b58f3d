"""NumPy's own sort, argsort and lexsort cases, run on distsort.

The cases are those of NumPy's test suite that apply to the dtypes distsort sorts
(``numpy/_core/tests/test_multiarray.py``: ``TestMethods.test_sort*`` and
``test_argsort*`` with the ``descending`` parameters of NumPy 2.5, the 1-D and axis
sorts of real, integer, bool and time dtypes, and ``TestLexsort``), written here from
what they check.  Each runs on a plain array and on Dask arrays in one, three and
ragged chunks (an empty one among them), on every plan a test can force: the default,
``one-device``, ``network``, ``exchange`` (runs between this process's cores), and out
of core with the k-way merge and with the network between runs
(``distsort.api.planning``); the exchange merge of runs on two workers and the
command's disk path take a few of them each.

NumPy 2.4, which the tests run with, has no ``descending=``: the expected orders come
from :func:`reference_perm` (a stable sort by value in Python, NaN and NaT last for both
orders, ties in input order, as NumPy 2.5 documents) and from the literal expectations
of NumPy's tests.
"""
import re

import dask
import dask.array as da
import numpy as np
import pytest

import distsort
from distsort.api import planning
from arrays import bits, missing

SIGNED = ["int8", "int16", "int32", "int64"]
UNSIGNED = ["uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "float32", "float64"]
TIMES = ["datetime64[D]", "timedelta64[D]"]


def reference_perm(x, descending=False):
    """The stable permutation that sorts ``x`` as NumPy 2.5 does: by value (``-0.0 ==
    +0.0``), largest first where ``descending``, NaN and NaT last for both orders,
    equal keys in input order.  Python's ``sorted``, apart from NumPy's and distsort's
    sorts."""
    x = np.asarray(x)
    gone = missing(x).tolist()
    values = (x.view(np.int64) if x.dtype.kind in "mM" else x).tolist()
    sign = -1 if descending else 1
    return np.array(sorted(range(len(x)), key=lambda i: (
        gone[i], 0 if gone[i] else sign * values[i], i)), dtype=np.int64)


def test_reference_perm_follows_numpy_where_numpy_has_the_order():
    """The reference is NumPy's stable argsort ascending, and its literal descending
    expectations (``test_argsort_stable_bool_int_duplicates``)."""
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 3, 200).astype(np.float64)
    x[rng.random(200) < 0.1] = np.nan
    x[rng.random(200) < 0.1] = -0.0
    np.testing.assert_array_equal(reference_perm(x), np.argsort(x, kind="stable"))
    a = np.array([-128, 1, 127] * 2, dtype=np.int8)
    np.testing.assert_array_equal(reference_perm(a, True), [2, 5, 1, 4, 0, 3])
    t = np.array([1, "NaT", 3, "NaT", 2], dtype="datetime64[D]")
    np.testing.assert_array_equal(reference_perm(t, True), [2, 4, 0, 1, 3])


def _with_missing(a):
    """NumPy's ``_test_sort_descending_nan``: every tenth element NaN (NaT)."""
    a = a.copy()
    a[::10] = np.array("NaT", a.dtype) if a.dtype.kind in "mM" else np.nan
    return a


def _cases():
    """``{name: 1-D array}``: NumPy's arrays, in the order its tests give them."""
    cases = {}
    for dtype in SIGNED:  # test_sort_descending_signed, test_sort_signed
        cases[dtype] = np.arange(-51, 50, dtype=dtype)
    for dtype in UNSIGNED:  # test_sort_descending_unsigned, test_sort_unsigned
        cases[dtype] = np.arange(0, 101, dtype=dtype)
    for dtype in FLOATS:  # test_sort_descending_floats (nonan and nan)
        a = np.linspace(-50, 50, 101, dtype=dtype)
        cases[dtype], cases[dtype + "-nan"] = a, _with_missing(a)
    for dtype in TIMES:  # test_sort_descending_dates, test_sort_time
        a = np.arange(0, 101, dtype=dtype)
        cases[dtype], cases[dtype + "-nat"] = a, _with_missing(a)
    for dtype in ["bool"] + SIGNED + UNSIGNED:  # test_argsort_stable_bool_int_duplicates
        info = np.iinfo(dtype) if dtype != "bool" else None
        values = [False, True] if info is None else [info.min, 1, info.max]
        cases[dtype + "-duplicates"] = np.array(values * 2, dtype=dtype)
    cases["nan-1-0"] = np.array([np.nan, 1, 0])  # test_sort: NaN last
    # stable: equal keys, -0.0 and +0.0 and NaN payloads, keep their input order
    cases["zeros-and-nans"] = np.array([0.0, -0.0, np.nan, 0.0, -np.nan, -0.0, 1.0, np.nan])
    cases["empty"] = np.array([], dtype="float64")
    return cases


CASES = _cases()


def _inputs(x):
    """NumPy's inputs of one case: as given and shuffled (``default_rng(0)``)."""
    shuffled = x.copy()
    np.random.default_rng(0).shuffle(shuffled)
    return x, shuffled


def ragged(n):
    """A ragged chunking of ``n`` with an empty chunk: (n/5, 0, 2n/5, 1, the rest)."""
    cuts = [0, n // 5, n // 5, 3 * n // 5, min(n, 3 * n // 5 + 1), n]
    return tuple(int(c) for c in np.diff(cuts))


WRAPS = {
    "numpy": lambda x: x,
    "one": lambda x: da.from_array(x, chunks=(max(1, len(x)),) if len(x) else ((0,),)),
    "three": lambda x: da.from_array(x, chunks=max(1, -(-len(x) // 3))),
    "ragged": lambda x: da.from_array(x, chunks=(ragged(len(x)),)),
}


def _budget(x, keyed, wrap):
    """A device budget that sends ``x``'s sort out of core in runs of one chunk of the
    chunking ``wrap`` (its largest), or of 16 elements where the plan cuts one chunk:
    room for that chunk's keys and, ``keyed``, their int64 positions."""
    run = {"three": -(-len(x) // 3), "ragged": max(ragged(len(x)))}.get(wrap, 16)
    return int(max(8, run) * (x.dtype.itemsize + 8 * bool(keyed)) / 0.85) + 1


PATHS = {
    "auto": {},
    "one-device": {"strategy": "one-device"},
    "network": {"strategy": "network"},
    "exchange": {"strategy": "exchange"},
    "out-of-core-kway": {"strategy": "out-of-core", "engine": "cpu", "merge": "kway"},
    "out-of-core-network": {"strategy": "out-of-core", "engine": "cpu", "merge": "network"},
}


def path_options(path, x, keyed, wrap):
    """The :func:`distsort.api.planning` options of ``path`` for a sort of ``x``."""
    options = dict(PATHS[path])
    if path.startswith("out-of-core"):
        options["device_memory_limit"] = _budget(x, keyed, wrap)
    return options


def _planned(path, x, wrap, keyed, build):
    """``build()`` within the plan options of ``path``; the plans made."""
    with planning(**path_options(path, x, keyed, wrap)) as plans:
        out = build()
    return out, plans


def _check_plans(path, plans, x):
    """The plans are those ``path`` asked for (where a sort has anything to plan)."""
    if path == "auto" or len(x) < 2:
        return
    for p in plans:
        if not path.startswith("out-of-core"):
            assert p.strategy == path, p
        elif len(x) > 16:  # several runs, merged as asked
            assert p.strategy == "out-of-core" and p.out_of_core.plan.runs > 1, p
            assert p.out_of_core.merge == path.split("-")[-1], p


def _sorts(x, wrapped, path, wrap):
    """Every function of one input, lazily where it is a Dask array: ``(name, descending,
    stable, result)`` and the plans."""
    results, plans = [], []
    for descending in (False, True):
        # argsort is always stable (stable=False is NumPy's "any order": it is stable too)
        by_position = x.dtype.kind == "f"  # sort(stable=True) of floats: with positions
        for keyed, name, fn, stable in ((False, "sort", distsort.sort, None),
                                        (by_position, "sort", distsort.sort, True),
                                        (True, "argsort", distsort.argsort, False)):
            out, made = _planned(path, x, wrap, keyed, lambda fn=fn, d=descending,
                                 s=stable: fn(wrapped, descending=d, stable=s))
            results.append((name, descending, stable, out))
            plans += made
        if x.dtype.kind in "fmM" or len(x) < 8:  # sort_by_key: the positions as values
            out, made = _planned(path, x, wrap, True, lambda d=descending: distsort.sort_by_key(
                wrapped, np.arange(len(x)) if wrap == "numpy" else da.arange(
                    len(x), chunks=wrapped.chunks), descending=d, stable=True))
            results.append(("sort_by_key", descending, True, out))
            plans += made
    return results, plans


def _check(x, name, descending, stable, out):
    perm = reference_perm(x, descending)
    if name == "argsort":
        np.testing.assert_array_equal(out, perm)
        return
    if name == "sort_by_key":
        keys, values = out
        np.testing.assert_array_equal(bits(keys), bits(x[perm]))
        np.testing.assert_array_equal(values, perm)
        return
    assert out.dtype == x.dtype and out.shape == x.shape
    if stable:  # x[argsort(x)], bit for bit
        np.testing.assert_array_equal(bits(out), bits(x[perm]))
    else:  # the same values; -0.0/+0.0 and NaN payloads in the bit order
        assert np.array_equal(out, x[perm], equal_nan=x.dtype.kind in "fmM")
        np.testing.assert_array_equal(np.sort(bits(out)), np.sort(bits(x)))
        gone = missing(out)
        assert not gone[:len(out) - gone.sum()].any()  # NaN and NaT last


def _run_cases(path, wrap, names):
    for case in names:
        for x in _inputs(CASES[case]):
            wrapped = WRAPS[wrap](x)
            results, plans = _sorts(x, wrapped, path, wrap)
            _check_plans(path, plans, x)
            computed = dask.compute(*[r[-1] for r in results], scheduler="sync")
            for (name, descending, stable, _), out in zip(results, computed, strict=True):
                try:
                    _check(x, name, descending, stable, out)
                except AssertionError as e:
                    raise AssertionError(f"{case} {name} descending={descending} "
                                         f"stable={stable}: {e}") from None


@pytest.mark.parametrize("path, wrap", [("auto", "numpy"), ("network", "numpy"),
                                        ("one-device", "one"), ("network", "one")])
def test_numpy_cases_in_memory(path, wrap):
    _run_cases(path, wrap, CASES)


@pytest.mark.parametrize("wrap", ["three", "ragged"])
@pytest.mark.parametrize("path", [p for p in PATHS if p != "auto"])  # auto: one-device here
def test_numpy_cases_in_chunks(path, wrap):
    _run_cases(path, wrap, CASES)


@pytest.mark.parametrize("path", ["out-of-core-kway", "out-of-core-network"])
def test_numpy_cases_out_of_core_in_one_chunk(path):
    """One chunk larger than the budget: the plan cuts it into runs."""
    _run_cases(path, "one", [c for c in CASES if len(CASES[c]) > 8])


# ------------------------------------------------------------------ descending, literally
@pytest.mark.parametrize("wrap", list(WRAPS))
def test_sort_descending_literal_expectations(wrap):
    """NumPy 2.5's expectations written out (``_test_sort_descending_nan``: the values
    that are not NaN reversed, then the NaNs; the same with NaT)."""
    x = np.array([3.0, np.nan, -1.0, 0.5, np.nan, 2.0])
    t = np.array(["2026-03-01", "NaT", "2025-12-24", "2026-01-01"], dtype="datetime64[D]")
    d = np.array([5, "NaT", -7, 5], dtype="timedelta64[h]")
    out = dask.compute(distsort.sort(WRAPS[wrap](x), descending=True),
                       distsort.argsort(WRAPS[wrap](x), descending=True),
                       distsort.sort(WRAPS[wrap](t), descending=True),
                       distsort.argsort(WRAPS[wrap](t), descending=True),
                       distsort.argsort(WRAPS[wrap](d), descending=True), scheduler="sync")
    np.testing.assert_array_equal(out[0], [3.0, 2.0, 0.5, -1.0, np.nan, np.nan])
    np.testing.assert_array_equal(out[1], [0, 5, 3, 2, 1, 4])
    np.testing.assert_array_equal(out[2], np.array(["2026-03-01", "2026-01-01", "2025-12-24",
                                                    "NaT"], dtype="datetime64[D]"))
    np.testing.assert_array_equal(out[3], [0, 3, 2, 1])
    np.testing.assert_array_equal(out[4], [0, 3, 2, 1])  # ties (5, 5) in input order


# ------------------------------------------------------------------ axis sorts
def test_sort_axis():
    """``test_sort_axis``: axis 0, 1 and the default, on a Dask array with the sort axis
    in one chunk and the other split; descending too."""
    a = np.array([[3, 2], [1, 0]])
    cases = {0: ([[1, 0], [3, 2]], [[3, 2], [1, 0]]), 1: ([[2, 3], [0, 1]], [[3, 2], [1, 0]]),
             -1: ([[2, 3], [0, 1]], [[3, 2], [1, 0]])}
    for axis, (up, down) in cases.items():
        chunks = (2, 1) if axis == 0 else (1, 2)
        for x in (a, da.from_array(a, chunks=chunks)):
            np.testing.assert_array_equal(np.asarray(distsort.sort(x, axis=axis)), up)
            np.testing.assert_array_equal(
                np.asarray(distsort.sort(x, axis=axis, descending=True)), down)
    np.testing.assert_array_equal(distsort.sort(a), [[2, 3], [0, 1]])


@pytest.mark.parametrize("dtype", ["float32", "datetime64[s]"])
def test_axis_sorts_descending_with_nan_last(dtype):
    """Every lane of an axis sort in NumPy 2.5's descending order, NaN/NaT last, ties of
    argsort in input order; ``stable=True`` sorts are ``take_along_axis`` of it."""
    rng = np.random.default_rng(4)
    x = rng.integers(-4, 4, (6, 40)).astype(dtype)
    x[rng.random(x.shape) < 0.2] = np.array("NaT", dtype) if dtype[0] == "d" else np.nan
    if dtype[0] == "f":
        x[rng.random(x.shape) < 0.2] = -0.0
    dx = da.from_array(x, chunks=(4, 40))
    for descending in (False, True):
        ref = np.stack([reference_perm(lane, descending) for lane in x])
        got = dask.compute(distsort.argsort(dx, axis=1, descending=descending),
                           distsort.sort(dx, axis=1, descending=descending, stable=True),
                           distsort.sort(dx.T, axis=0, descending=descending, stable=True))
        np.testing.assert_array_equal(got[0], ref)
        np.testing.assert_array_equal(bits(got[1]), bits(np.take_along_axis(x, ref, 1)))
        np.testing.assert_array_equal(bits(got[2]), bits(np.take_along_axis(x, ref, 1).T))


# ------------------------------------------------------------------ empty arrays
@pytest.mark.parametrize("shape, chunks", [
    ((2, 0), ((1, 1), (0,))), ((0, 2), ((0,), (1, 1))), ((3, 2, 1, 0), (1, 1, 1, 0))])
def test_sort_size_0(shape, chunks):
    """``test_sort_size_0``: empty N-D arrays, every axis and ``axis=None``, with a split
    axis among them, as NumPy returns them."""
    a = np.zeros(shape)
    x = da.from_array(a, chunks=chunks)
    for axis in [None, *range(-a.ndim, a.ndim)]:
        for fn in (distsort.sort, distsort.argsort):
            ref = np.sort(a, axis=axis) if fn is distsort.sort else np.argsort(a, axis=axis)
            for given in (a, x):
                out = np.asarray(dask.compute(fn(given, axis=axis))[0])
                assert out.shape == ref.shape and out.dtype == ref.dtype, (axis, fn)


# ------------------------------------------------------------------ large inputs
def _median_of_3_killer(n):
    """``test_sort_degraded``: the median-of-3 killer sequence of ``arange(n)``."""
    d = np.arange(n)
    x = d
    while x.size > 3:
        mid = x.size // 2
        x[mid], x[-2] = x[-2], x[mid]
        x = x[:-2]
    return d


@pytest.mark.parametrize("path", ["network", "out-of-core-kway"])
def test_sort_degraded(path):
    d = _median_of_3_killer(20_000)
    x = da.from_array(d, chunks=3_001)
    with planning(**path_options(path, d[:9_003], True, "three")):
        s, a = distsort.sort(x), distsort.argsort(x)
    s, a = dask.compute(s, a, scheduler="sync")
    np.testing.assert_array_equal(s, np.arange(20_000))
    np.testing.assert_array_equal(d[a], np.arange(20_000))


@pytest.mark.parametrize("dtype", ["int32", "uint32", "float32"])
def test_argsort_of_sorted_and_reversed(dtype):
    """``test_argsort``: ``arange(101)`` and its reverse, on every chunking."""
    a = np.arange(101, dtype=dtype)
    b = a[::-1].copy()
    for wrap in WRAPS.values():
        np.testing.assert_array_equal(np.asarray(dask.compute(distsort.argsort(wrap(a)))[0]), a)
        np.testing.assert_array_equal(np.asarray(dask.compute(distsort.argsort(wrap(b)))[0]), b)
        np.testing.assert_array_equal(
            np.asarray(dask.compute(distsort.argsort(wrap(a), descending=True))[0]), b)


def test_byte_swapped_input_keeps_its_dtype():
    """NumPy keeps a non-native byte order: ``>f8`` in, ``>f8`` out, sorted by value."""
    other = ">" if np.little_endian else "<"
    x = np.array([3.0, np.nan, -1.0, 0.5, -0.0, 0.0])
    swapped = x.byteswap().view(x.dtype.newbyteorder(other))
    for wrap in WRAPS.values():
        for descending in (False, True):
            out = np.asarray(dask.compute(distsort.sort(wrap(swapped),
                                                        descending=descending))[0])
            assert out.dtype == swapped.dtype == np.sort(swapped).dtype
            assert np.array_equal(out, x[reference_perm(x, descending)], equal_nan=True)
        keys, values = dask.compute(*distsort.sort_by_key(wrap(swapped), wrap(swapped)))
        assert np.asarray(keys).dtype == np.asarray(values).dtype == swapped.dtype


# ------------------------------------------------------------------ lexsort
LEX_DTYPES = UNSIGNED + SIGNED + FLOATS


@pytest.mark.parametrize("dtype", LEX_DTYPES)
def test_lexsort_basic(dtype):
    """``TestLexsort.test_basic``: by ``a``, then by ``b``; keys as a tuple, a list and
    a 2-D array, plain and in chunks."""
    a = np.array([1, 2, 1, 3, 1, 5], dtype=dtype)
    b = np.array([0, 4, 5, 6, 2, 3], dtype=dtype)
    expected = [0, 4, 2, 1, 3, 5]
    for keys in ((b, a), [b, a], np.stack([b, a]), (da.from_array(b, chunks=4),
                                                   da.from_array(a, chunks=4)),
                 da.from_array(np.stack([b, a]), chunks=(1, 4))):
        idx = np.asarray(dask.compute(distsort.lexsort(keys))[0])
        np.testing.assert_array_equal(idx, expected)
        np.testing.assert_array_equal(a[idx], np.sort(a))


def test_lexsort_mixed_and_datetime():
    """``TestLexsort.test_mixed`` and ``test_datetime``."""
    a = np.array([1, 2, 1, 3, 1, 5])
    b = np.array([0, 4, 5, 6, 2, 3], dtype="datetime64[D]")
    np.testing.assert_array_equal(distsort.lexsort((b, a)), [0, 4, 2, 1, 3, 5])
    for dtype in TIMES:
        a = np.array([0, 0, 0], dtype=dtype)
        b = np.array([2, 1, 0], dtype=dtype)
        np.testing.assert_array_equal(distsort.lexsort((b, a)), [2, 1, 0])
        np.testing.assert_array_equal(distsort.lexsort(np.stack([b, a])), [2, 1, 0])


@pytest.mark.parametrize("wrap", ["numpy", "three", "ragged"])
def test_lexsort_and_tables_with_nan_last_for_both_orders(wrap):
    """Several keys (``sort_by_key`` of a tuple of keys, ``lexsort``'s order) put NaN and
    NaT last in every key, descending too; ties in input order."""
    rng = np.random.default_rng(9)
    n = 101
    k1 = rng.integers(0, 3, n).astype(np.float64)
    k1[rng.random(n) < 0.2] = np.nan
    k2 = rng.integers(0, 4, n).astype("datetime64[D]")
    k2[rng.random(n) < 0.2] = np.array("NaT", "datetime64[D]")
    pos = np.arange(n)
    w = WRAPS[wrap]
    for descending in (False, True):
        def rank(k, descending=descending):
            r = np.unique(k, return_inverse=True)[1].reshape(-1)
            return -r if descending else r
        ref = np.lexsort((pos, rank(k2), missing(k2), rank(k1), missing(k1)))
        (s2, s1), v = dask.compute(*distsort.sort_by_key((w(k2), w(k1)), w(pos),
                                                         descending=descending))
        np.testing.assert_array_equal(np.asarray(v), ref)
        np.testing.assert_array_equal(bits(np.asarray(s1)), bits(k1[ref]))
    np.testing.assert_array_equal(np.asarray(dask.compute(distsort.lexsort((w(k2), w(k1))))[0]),
                                  np.lexsort((pos, rank(k2, False), missing(k2),
                                              rank(k1, False), missing(k1))))


def test_a_dask_bag_gets_a_bag_hint():
    db = pytest.importorskip("dask.bag")
    with pytest.raises(TypeError, match=r"map_partitions\(numpy.asarray\).to_delayed\(\)"):
        distsort.sort(db.from_sequence([3, 1, 2]))


# ------------------------------------------------------------------ other paths
@pytest.mark.parametrize("case", ["float64-nan", "datetime64[D]-nat", "int16", "zeros-and-nans"])
def test_numpy_cases_exchange_between_two_workers(cluster_client, case):
    """The exchange merge: runs on two workers, each output chunk's slices sent once."""
    from arrays import persisted_on_two_workers
    from distributed import wait
    x = np.tile(CASES[case], -(-240 // len(CASES[case])))  # a few runs on each worker
    np.random.default_rng(1).shuffle(x)
    chunk = 40
    xd, _ = persisted_on_two_workers(cluster_client, x, chunk)
    with cluster_client.as_current():
        wait(xd)
        for descending in (False, True):
            results = []
            for stable, fn, keyed in ((None, distsort.sort, False), (True, distsort.sort, True),
                                      (True, distsort.argsort, True)):
                budget = int(chunk * (x.dtype.itemsize + 8 * keyed) / 0.85) + 8
                with planning(device_memory_limit=budget, engine="cpu",
                              merge="kway") as plans:
                    results.append(fn(xd, descending=descending, stable=stable))
                assert [p.out_of_core.merge for p in plans] == ["exchange"], plans
            got = cluster_client.compute(results, sync=True)
            _check(x, "sort", descending, None, got[0])
            _check(x, "sort", descending, True, got[1])
            _check(x, "argsort", descending, True, got[2])


@pytest.mark.parametrize("dtype", ["float32", "datetime64[s]", "int16"])
def test_numpy_cases_through_the_disk(tmp_path, capsys, dtype):
    """The command's disk path (runs on the disk, one streamed k-way merge): NumPy's
    cases scaled up, sort and argsort, ascending and descending."""
    from test_disksort import TINY, _run, limit
    a = np.arange(-3000, 3001).astype(dtype)
    a = _with_missing(a) if dtype[0] in "fd" else a
    np.random.default_rng(0).shuffle(a)
    np.save(tmp_path / "in.npy", a)
    for descending in (False, True):
        d = ["--descending"] if descending else []
        perm = reference_perm(a, descending)
        code, stdout, err = _run(capsys, "sort", tmp_path / "in.npy", tmp_path / "s.npy",
                                 "--overwrite", *TINY, *d, *limit(a))
        assert code == 0, err
        assert re.search("larger than memory", stdout)
        got = np.load(tmp_path / "s.npy")
        assert got.dtype == a.dtype
        assert np.array_equal(got, a[perm], equal_nan=True)
        code, _, err = _run(capsys, "sort", tmp_path / "in.npy", tmp_path / "a.npy",
                            "--argsort", "--overwrite", *TINY, *d, *limit(a, 8, "stable"))
        assert code == 0, err
        np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), perm)


# ------------------------------------------------------------------ GPU
@pytest.mark.gpu
@pytest.mark.parametrize("local", ["radix", "bitonic"])
@pytest.mark.parametrize("path", ["one-device", "network", "exchange", "out-of-core-kway",
                                  "out-of-core-network"])
def test_numpy_cases_on_cupy_chunks(path, local):
    """The same cases on CuPy chunks (the kernels' and CUB's codes), against the same
    reference (times: CuPy has no datetime64; they reach the GPU as the uint64 codes that
    the CPU tests check)."""
    cupy = pytest.importorskip("cupy")
    on_gpu = {c: x for c, x in CASES.items() if x.dtype.kind not in "mM"}  # no CuPy times
    for case, given in on_gpu.items():
        for x in _inputs(given):
            for wrap in ("one", "three", "ragged"):
                dx = WRAPS[wrap](x).map_blocks(cupy.asarray)
                options = path_options(path, x, True, wrap)
                if "engine" in options:
                    options["engine"] = "gpu"
                results = []
                with planning(**options):
                    for descending in (False, True):
                        for stable in (None, True):
                            results.append(("sort", descending, stable, distsort.sort(
                                dx, descending=descending, stable=stable, local=local)))
                        results.append(("argsort", descending, True, distsort.argsort(
                            dx, descending=descending, local=local)))
                computed = dask.compute(*[r[-1] for r in results], scheduler="sync")
                for (name, descending, stable, _), out in zip(results, computed, strict=True):
                    try:
                        _check(x, name, descending, stable, cupy.asnumpy(out))
                    except AssertionError as e:
                        raise AssertionError(f"{case} {wrap} {name} descending={descending}"
                                             f" stable={stable}: {e}") from None
    # plain CuPy arrays, sorted at once
    for case, x in on_gpu.items():
        for descending in (False, True):
            perm = reference_perm(x, descending)
            got = distsort.argsort(cupy.asarray(x), descending=descending, local=local)
            np.testing.assert_array_equal(cupy.asnumpy(got), perm, err_msg=case)
            got = distsort.sort(cupy.asarray(x), descending=descending, stable=True,
                                local=local)
            np.testing.assert_array_equal(bits(cupy.asnumpy(got)), bits(x[perm]),
                                          err_msg=case)
