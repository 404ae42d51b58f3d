"""Fuzzing: the backend functions and the API against concatenate-and-sort.

Hypothesis draws dtypes, lengths (0, 1, 2**k +- 1, ...), chunkings, NaN payloads,
signed zeros, extremes and runs of duplicates.  Every test body runs on every
available backend: NumPy here, CuPy where there is a GPU (those cases are marked
``gpu``), so the lead runs the same bodies on the device.
"""
import os

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import distsort
from distsort.backends import Order
from distsort.graph.layers import probe_stride
from distsort.core.order import decode, encode
from arrays import DTYPES, assert_same_multiset, bits, random_chunks, random_keys

from backends import BACKENDS, cupy
SETTINGS = settings(max_examples=int(os.environ.get("DISTSORT_FUZZ_EXAMPLES", "40")),
                    deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                          HealthCheck.function_scoped_fixture])
SIZES = [0, 1, 2, 3, 7, 8, 9, 31, 32, 33, 127, 128, 129, 251, 256, 257]
#: Inputs tried and results checked (each compared element for element).
COUNTS = {"inputs": 0, "results_checked": 0, "elements_lost": 0}


def backend_module(name):
    if name == "cupy":
        from distsort.backends.gpu import cupy_backend as backend
    else:
        from distsort.backends.cpu import numpy_backend as backend
    return backend


def device(x, name):
    return None if x is None else (cupy.asarray(x) if name == "cupy" else x)


def host(x):
    return x.get() if type(x).__module__.startswith("cupy") else np.asarray(x)


# ------------------------------------------------------------------ data
def shaped_keys(rng, n, dtype, shape):
    """Keys with a structure that breaks sorts: runs, one value, sorted, NaNs only."""
    x = random_keys(rng, n, dtype, special_fraction=float(rng.choice([0.0, 0.1, 0.5])),
                    duplicates=shape == "duplicates")
    if shape == "runs" and n:  # long runs of equal keys
        x = np.repeat(x[: max(1, n // 16)], 16)[:n]
        x = np.concatenate([x, x[: n - len(x)]]) if len(x) < n else x
    elif shape == "constant" and n:
        x = np.full(n, x[0])
    elif shape == "sorted":
        x = np.sort(x)
    elif shape == "reversed":
        x = np.sort(x)[::-1].copy()
    elif shape == "nans" and np.dtype(dtype).kind == "f" and n:
        from arrays import special_values
        specials = special_values(dtype)
        nans = specials[np.isnan(specials)]
        x = rng.choice(np.concatenate([nans, specials[:4]]), size=n)
    return np.ascontiguousarray(x, dtype=dtype)


SHAPES = ["random", "duplicates", "runs", "constant", "sorted", "reversed", "nans"]


@st.composite
def keys_strategy(draw, max_size=400):
    seed = draw(st.integers(0, 2**32 - 1))
    n = draw(st.one_of(st.sampled_from(SIZES), st.integers(0, max_size)))
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.sampled_from(SHAPES))
    return shaped_keys(np.random.default_rng(seed), n, dtype, shape), seed


# ------------------------------------------------------------------ reference
def keyed_codes(keys, values, order):
    """The documented keyed order, most significant first: canonical key code, canonical
    value code, then (full ties: -0.0/+0.0, NaN payloads) total key code, total value code."""
    return (encode(keys, canonical=True, descending=order.descending),
            encode(values, canonical=True), encode(keys, descending=order.descending),
            encode(values))


def reference(keys, values, order):
    """Concatenate-and-sort: keys-only by total codes (exact bits), keyed by ``keyed_codes``."""
    if not order.keyed:
        codes = np.sort(encode(keys, descending=order.descending))
        return decode(codes, keys.dtype, descending=order.descending), None
    perm = np.lexsort(keyed_codes(keys, values, order)[::-1])
    return keys[perm], values[perm]


def assert_chunk_equals(keys, values, ref_keys, ref_values, order):
    """Keys-only: the same bits.  Keyed: the same (key, value) order by canonical codes
    (NumPy-equal elements may come in either order) and the same pairs, bit for bit."""
    if not order.keyed:
        np.testing.assert_array_equal(bits(keys), bits(ref_keys))
        return
    for out, ref in ((keys, ref_keys), (values, ref_values)):
        assert out.dtype == ref.dtype and out.shape == ref.shape
    np.testing.assert_array_equal(
        encode(keys, canonical=True, descending=order.descending),
        encode(ref_keys, canonical=True, descending=order.descending))
    np.testing.assert_array_equal(encode(values, canonical=True),
                                  encode(ref_values, canonical=True))
    pairs = np.lexsort((bits(values), bits(keys)))
    ref_pairs = np.lexsort((bits(ref_values), bits(ref_keys)))
    np.testing.assert_array_equal(bits(keys)[pairs], bits(ref_keys)[ref_pairs])
    np.testing.assert_array_equal(bits(values)[pairs], bits(ref_values)[ref_pairs])


def finished(backend, chunk, order, dtype, values_dtype=None):
    """Keys and values (None for a keys-only sort) of a chunk, on the host."""
    keys = host(backend.finish_keys(chunk, order, dtype, values_dtype))
    return keys, (host(backend.finish_values(chunk, order, dtype, values_dtype))
                  if order.keyed else None)


def true_crossing(a_keys, a_values, b_keys, b_values, order):
    """``#{i : A[mA-1-i] > B[i]}`` on the reference order."""
    def codes(k, v):
        if v is None:
            return list(encode(k, descending=order.descending).astype(object))
        return list(zip(*(c.astype(object) for c in keyed_codes(k, v, order)), strict=False))
    a, b = codes(a_keys, a_values), codes(b_keys, b_values)
    k = 0
    while k < min(len(a), len(b)) and a[len(a) - 1 - k] > b[k]:
        k += 1
    return k


# ------------------------------------------------------------------ backend functions
@st.composite
def pair_cases(draw):
    """Two chunks ``lo`` and ``hi`` (``len(hi) <= len(lo)``, as in the network)."""
    (keys, seed) = draw(keys_strategy(max_size=600))
    rng = np.random.default_rng(seed + 1)
    split = draw(st.integers(len(keys) // 2, len(keys))) if len(keys) else 0
    if draw(st.booleans()):  # lo holds the largest keys: every element of hi crosses
        split = draw(st.sampled_from([split, (len(keys) + 1) // 2]))  # equal: all of lo
        ordered = np.sort(keys, kind="stable")
        keys = np.concatenate([ordered[len(keys) - split:], ordered[:len(keys) - split]])
    kind = draw(st.sampled_from(["keys", "positions", "values"]))
    order = Order(descending=draw(st.booleans()), keyed=kind != "keys")
    values = None
    if kind == "values":
        values = shaped_keys(rng, len(keys), draw(st.sampled_from(DTYPES)),
                             draw(st.sampled_from(SHAPES)))
    elif kind == "positions":
        values = np.arange(len(keys), dtype=np.int64)
    stride = draw(st.sampled_from(["graph", 1, 2, 3, 17]))
    return keys, values, split, kind, order, stride


@pytest.mark.parametrize("backend_name", BACKENDS)
@SETTINGS
@given(case=pair_cases())
def test_backend_compare_split_against_concatenate_and_sort(backend_name, case):
    keys, values, split, kind, order, stride = case
    b = backend_module(backend_name)
    vdtype = values.dtype if kind == "values" else None
    parts = [(keys[:split], None if values is None else values[:split], 0),
             (keys[split:], None if values is None else values[split:], split)]
    saved = [(k.copy(), None if v is None else v.copy()) for k, v, _ in parts]
    chunks, refs = [], []
    for k, v, start in parts:  # prepare: a sorted copy of each chunk
        chunk = b.prepare(device(k, backend_name),
                          device(v, backend_name) if kind == "values" else None,
                          order, start if kind == "positions" else None)
        refs.append(reference(k, v, order))
        assert b.length(chunk) == len(k)
        assert_chunk_equals(*finished(b, chunk, order, keys.dtype, vdtype), *refs[-1], order)
        chunks.append(chunk)
    (a, hi), (ra, rb) = chunks, refs
    ma, mb = len(ra[0]), len(rb[0])
    step = probe_stride(ma) if stride == "graph" else stride
    limit = min(ma, mb)
    bound = b.crossing_bound(b.probe(a, step, True, order), b.probe(hi, step, False, order),
                             step, limit, order)
    k = true_crossing(*ra, *rb, order)
    assert k <= bound <= limit, (k, bound, limit)
    low = b.merge_low(a, b.head(hi, bound), order)
    high = b.merge_high(hi, b.tail(a, bound), order)
    whole = reference(keys, values, order)
    def cut(r, s):
        return None if r is None else r[s]

    assert_chunk_equals(*finished(b, low, order, keys.dtype, vdtype),
                        cut(whole[0], slice(0, ma)), cut(whole[1], slice(0, ma)), order)
    assert_chunk_equals(*finished(b, high, order, keys.dtype, vdtype),
                        cut(whole[0], slice(ma, None)), cut(whole[1], slice(ma, None)), order)
    # Nothing was modified: the inputs, and the chunks the merges read.
    for (k_in, v_in, _), (k0, v0) in zip(parts, saved, strict=False):
        np.testing.assert_array_equal(bits(k_in), bits(k0))
        if v0 is not None:
            np.testing.assert_array_equal(bits(v_in), bits(v0))
    for chunk, ref in zip(chunks, refs, strict=False):
        assert_chunk_equals(*finished(b, chunk, order, keys.dtype, vdtype), *ref, order)
    COUNTS["inputs"] += 1
    COUNTS["results_checked"] += 4


# ------------------------------------------------------------------ through the API
@st.composite
def api_cases(draw):
    (keys, seed) = draw(keys_strategy(max_size=2500))
    rng = np.random.default_rng(seed + 2)
    style = draw(st.sampled_from(["regular", "ragged", "one", "count"]))
    if style == "one" and len(keys) > 150:
        style = "ragged"
    if style == "count":
        count = draw(st.sampled_from([2, 3, 5, 8, 9, 16]))
        chunks = tuple(len(c) for c in np.array_split(keys, count))
    else:
        chunks = random_chunks(rng, len(keys), style)
    values = shaped_keys(rng, len(keys), draw(st.sampled_from(DTYPES)),
                         draw(st.sampled_from(SHAPES)))
    return keys, values, chunks, draw(st.booleans()), draw(st.booleans())


def as_dask(x, chunks, backend_name):
    if backend_name == "cupy":
        return da.from_array(cupy.asarray(x), chunks=(chunks,), asarray=False)
    return da.from_array(x, chunks=(chunks,))


@pytest.mark.parametrize("backend_name", BACKENDS)
@SETTINGS
@given(case=api_cases())
def test_api_against_concatenate_and_sort(backend_name, case):
    keys, values, chunks, descending, verify = case
    dk = as_dask(keys, chunks, backend_name)
    dv = as_dask(values, chunks[::-1], backend_name)
    out = dask.compute(distsort.sort(dk, descending=descending, verify=verify),
                       distsort.argsort(dk, descending=descending, verify=verify),
                       *distsort.sort_by_key(dk, dv, descending=descending, verify=verify),
                       scheduler="sync")
    s, a, sk, sv = (host(o) for o in out)
    ref = reference(keys, None, Order(descending=descending))[0]
    np.testing.assert_array_equal(bits(s), bits(ref))
    ref_a = reference(keys, np.arange(len(keys), dtype=np.int64),
                      Order(descending=descending, keyed=True))[1]
    np.testing.assert_array_equal(a, ref_a)
    keyed = Order(descending=descending, keyed=True)
    assert_chunk_equals(sk, sv, *reference(keys, values, keyed), keyed)
    assert_same_multiset(s, keys)
    COUNTS["elements_lost"] += abs(len(s) - len(keys)) + abs(len(sk) - len(keys))
    COUNTS["inputs"] += 1
    COUNTS["results_checked"] += 4


def test_sort_by_key_bits_do_not_depend_on_the_chunking():
    rng = np.random.default_rng(0)
    keys = rng.choice(np.array([0.0, -0.0, np.nan, -np.nan, 1.0]), size=300)
    values = rng.integers(0, 2, size=300).astype(np.int8)
    outputs = set()
    for chunks in (300, 7, 33, 1):
        sk, sv = dask.compute(*distsort.sort_by_key(da.from_array(keys, chunks=chunks),
                                                    da.from_array(values, chunks=chunks)),
                              scheduler="sync")
        outputs.add((bits(sk).tobytes(), bits(sv).tobytes()))
    assert len(outputs) == 1
