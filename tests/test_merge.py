"""The numba merges (``distsort.backends.cpu.merge``) against the NumPy code they replace.

Both paths run on the same sorted runs (every dtype, keys alone and with values,
ascending and descending, empty runs, ties, signed zeros and NaNs) and must give
the same bits; neither may write to its inputs.
"""
import numpy as np
import pytest

from distsort.backends import Order
from distsort.backends.cpu import merge
from distsort.backends.cpu import numpy_backend as npb

from arrays import DTYPES, bits, random_keys, stable_argsort

needs_numba = pytest.mark.skipif(merge.numba is None, reason="needs numba (the fast extra)")

#: Run lengths: empty, tiny, and long enough to leave the two-ended loop mid-run.
LENGTHS = [(0, 0), (0, 5), (7, 0), (1, 1), (3, 10), (64, 64), (300, 45), (1000, 1500)]


def _chunks(rng, dtype, order, nx, ny, value_dtype):
    """Two sorted chunks of ``nx`` and ``ny`` elements, in the backend's own form."""
    def one(n, start):
        keys = random_keys(rng, n, dtype, special_fraction=0.2, duplicates=rng.random() < 0.5)
        if not order.keyed:
            return npb.prepare(keys, None, order)
        if value_dtype is None:  # positions, as argsort has them
            return npb.prepare(keys, None, order, start=start)
        values = random_keys(rng, n, value_dtype, duplicates=True)
        return npb.prepare(keys, values, order)
    return one(nx, 0), one(ny, nx)


def _readonly(chunk):
    for x in chunk if isinstance(chunk, tuple) else (chunk,):
        x.flags.writeable = False
    return chunk


def _copy(chunk):
    return tuple(x.copy() for x in chunk) if isinstance(chunk, tuple) else chunk.copy()


def _assert_same(a, b):
    a, b = (x if isinstance(x, tuple) else (x,) for x in (a, b))
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(bits(x), bits(y))


def _both(monkeypatch, fn, *args):
    """``fn(*args)`` with the numba merges, then with the NumPy code; inputs checked unchanged."""
    before = [_copy(a) if isinstance(a, (tuple, np.ndarray)) else a for a in args]
    monkeypatch.setattr(merge, "ENABLED", True)
    fast = fn(*args)
    monkeypatch.setattr(merge, "ENABLED", False)
    slow = fn(*args)
    for a, b in zip(args, before, strict=False):
        if isinstance(b, (tuple, np.ndarray)):
            _assert_same(a, b)
    return fast, slow


@needs_numba
@pytest.mark.parametrize("keyed", [False, True], ids=["keys", "keyed"])
@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_merge_matches_numpy(monkeypatch, dtype, descending, keyed):
    rng = np.random.default_rng([DTYPES.index(dtype), descending, keyed])
    order = Order(descending=descending, keyed=keyed)
    for nx, ny in LENGTHS:
        # Values: positions, or random ones of some dtype (NaNs and -0.0 included).
        value_dtype = rng.choice([None, rng.choice(DTYPES)]) if keyed else None
        a, b = (_readonly(c) for c in _chunks(rng, dtype, order, nx, ny, value_dtype))
        # The whole merge of two runs, as the lower (x) and the higher (y) chunk's.
        fast, slow = _both(monkeypatch, npb._concat_sorted, a, b, order)
        _assert_same(fast, slow)
        assert npb.length(fast) == nx + ny
        if nx != ny:
            continue
        # merge_low / merge_high of equal chunks, with heads and tails of several lengths.
        for k in sorted({0, 1, nx // 3, nx}):
            if k > nx:
                continue
            fast, slow = _both(monkeypatch, npb.merge_low, a, npb.BACKEND.head(b, k), order)
            _assert_same(fast, slow)
            fast, slow = _both(monkeypatch, npb.merge_high, b, npb.BACKEND.tail(a, k), order)
            _assert_same(fast, slow)


@needs_numba
@pytest.mark.parametrize("dtype", ["int64", "float64"])
def test_merge_ties_keep_lower_run_first(monkeypatch, dtype):
    """Equal keys: the result is sorted by value, and on full ties the lower run's element
    comes first (so the keyed merge is what a stable sort of the concatenation gives)."""
    order = Order(keyed=True)
    keys = np.array([1, 1, 2, 2, 2], dtype=dtype)
    x = (keys.copy(), np.array([0, 5, 1, 1, 7]))
    y = (keys.copy(), np.array([0, 3, 1, 2, 7]))
    fast, slow = _both(monkeypatch, npb._concat_sorted, x, y, order)
    _assert_same(fast, slow)
    np.testing.assert_array_equal(fast[1], [0, 0, 3, 5, 1, 1, 1, 2, 7, 7])
    # NaNs of several payloads and both zeros sort as NumPy's stable order does.
    if dtype == "float64":
        nans = np.array([0x7FF8000000000001, 0xFFF8000000000000], dtype=np.uint64).view(dtype)
        x = npb.prepare(np.array([-0.0, 0.0, nans[0], nans[1]]), np.zeros(4, np.int64), order)
        y = npb.prepare(np.array([0.0, -0.0, nans[1], nans[0]]), np.zeros(4, np.int64), order)
        fast, slow = _both(monkeypatch, npb._concat_sorted, x, y, order)
        _assert_same(fast, slow)


@needs_numba
@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize("dtype", ["uint8", "int64", "float32", "float64"])
def test_merge_of_plain_keys_matches_numpy(monkeypatch, dtype, descending):
    """Runs whose keys hold no -0.0, +0.0 or NaN merge by the (key, value) codes made in
    the merge (``merge.merge_pairs``); values with signed zeros and NaN payloads and
    duplicate keys included, the result is the NumPy code's, bit for bit."""
    rng = np.random.default_rng([DTYPES.index(dtype), descending])
    order = Order(descending=descending, keyed=True)
    for value_dtype in ("int64", "float64"):
        def run(n, value_dtype=value_dtype):
            keys = random_keys(rng, n, dtype, duplicates=True)
            keys = keys[~((keys == 0) | np.isnan(keys))] if keys.dtype.kind == "f" else keys
            values = random_keys(rng, len(keys), value_dtype, special_fraction=0.3,
                                 duplicates=True)
            return _readonly(npb.prepare(keys, values, order))
        x, y = run(700), run(500)
        assert npb._plain_keys(x[0], descending) and npb._plain_keys(y[0], descending)
        fast, slow = _both(monkeypatch, npb._concat_sorted, x, y, order)
        _assert_same(fast, slow)


def test_merge_fallback_without_numba(monkeypatch):
    """With ``ENABLED`` off the NumPy code runs (and never the compiled functions)."""
    def fail(*args):
        raise AssertionError("numba path used")
    monkeypatch.setattr(merge, "ENABLED", False)
    monkeypatch.setattr(merge, "merge_codes", fail)
    monkeypatch.setattr(merge, "merge_keyed", fail)
    order = Order()
    a = npb.prepare(np.array([3, 1, 2]), None, order)
    b = npb.prepare(np.array([0, 5]), None, order)
    out = npb._concat_sorted(a, b, order)
    np.testing.assert_array_equal(npb.finish_keys(out, order, np.dtype("int64")),
                                  [0, 1, 2, 3, 5])


@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_keyed_sort_matches_lexsort(dtype, descending):
    """The keyed sort of a chunk (packed codes where a pair fits 64 bits, else the keys'
    codes and then runs of equal keys) gives ``np.lexsort``'s order over the order
    codes, bit for bit, for every value dtype: signed zeros and NaN payloads, duplicate
    keys and pairs, all-special and empty chunks included."""
    rng = np.random.default_rng([DTYPES.index(dtype), descending])
    for value_dtype in DTYPES:
        for n, special, dups in [(0, 0.1, False), (1, 0.1, False), (700, 0.2, True),
                                 (700, 0.0, False), (300, 1.0, True)]:
            keys = random_keys(rng, n, dtype, special_fraction=special, duplicates=dups)
            values = random_keys(rng, n, value_dtype, special_fraction=special,
                                 duplicates=dups)
            perm = npb.keyed_perm(keys, values, descending)
            got = npb.keyed_sort(keys, values, descending)
            _assert_same(got, (keys[perm], values[perm]))


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=needs_numba)],
                         ids=["numpy", "numba"])
@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_stable_sort_matches_stable_argsort(monkeypatch, descending, compiled):
    """``stable_sort`` (radix, packed and wide keys; the values taken by NumPy or by the
    compiled gather) gives NumPy's stable argsort order, equal keys (signed zeros, NaNs
    of any payload) in input order, keys and values bit for bit."""
    monkeypatch.setattr(npb, "COMPILED_FROM", 16 if compiled else npb.COMPILED_FROM)
    rng = np.random.default_rng([7, descending, compiled])
    order = Order(descending=descending, keyed=True)
    for dtype in DTYPES:
        for n, special, dups in [(0, 0.1, False), (1, 0.1, False), (900, 0.3, True),
                                 (500, 1.0, True)]:
            keys = random_keys(rng, n, dtype, special_fraction=special, duplicates=dups)
            values = rng.permutation(n).astype(np.int32)
            perm = stable_argsort(keys, descending)
            _assert_same(npb.stable_sort(keys, values, order), (keys[perm], values[perm]))
