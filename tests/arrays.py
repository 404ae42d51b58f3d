"""Test data: random arrays with the values that break sorts mixed in."""
import contextlib

import numpy as np

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64"]


def special_values(dtype):
    """Extremes, signed zeros, infinities and NaNs of several signs and payloads."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.array([True, False], dtype=dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        vals = [info.min, info.max, info.min + 1, info.max - 1, 0, 1]
        if dtype.kind == "u" and dtype.itemsize == 8:
            vals += [2**63, 2**63 - 1, 2**63 + 1]
        return np.array(vals, dtype=dtype)
    info = np.finfo(dtype)
    bits = 8 * dtype.itemsize
    u = np.dtype(f"u{dtype.itemsize}")
    exp = ((1 << (bits - 1 - info.nmant)) - 1) << info.nmant
    sign = 1 << (bits - 1)
    nans = np.array([exp | 1, exp | (1 << (info.nmant - 1)), sign | exp | 5,
                     sign | exp | ((1 << info.nmant) - 1)], dtype=u).view(dtype)
    vals = np.array([np.inf, -np.inf, 0.0, -0.0, info.max, -info.max, info.tiny,
                     -info.tiny, info.smallest_subnormal, 1.0, -1.0], dtype=dtype)
    return np.concatenate([vals, nans])


def random_keys(rng, n, dtype, special_fraction=0.1, duplicates=False):
    """``n`` random keys of ``dtype`` (full bit range), with specials and duplicates mixed in."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=n).astype(bool)
    u = np.dtype(f"u{dtype.itemsize}")
    x = rng.integers(0, np.iinfo(u).max, size=n, dtype=u, endpoint=True).view(dtype)
    if dtype.kind == "f":  # mostly finite values of both signs, not only huge ones
        x = np.where(rng.random(n) < 0.7, rng.normal(scale=100, size=n).astype(dtype), x)
    if duplicates and n:
        x = rng.choice(x[: max(1, n // 8)], size=n)
    if n:
        specials = special_values(dtype)
        where = rng.random(n) < special_fraction
        x = np.where(where, rng.choice(specials, size=n), x)
    return np.ascontiguousarray(x, dtype=dtype)


def random_chunks(rng, n, style):
    """A 1-D chunking of ``n``: regular, ragged (with empty chunks), or one element each."""
    if style == "one":
        return (1,) * n if n else (0,)
    if style == "regular":
        size = int(rng.integers(1, max(2, n) + 1))
        full, rest = divmod(n, size)
        return (size,) * full + ((rest,) if rest else ()) or (0,)
    cuts = np.sort(rng.integers(0, n + 1, size=int(rng.integers(1, 12))))
    return tuple(int(c) for c in np.diff(np.concatenate([[0], cuts, [n]])))


def bits(x):
    """The bit patterns of ``x`` (so that NaN payloads and -0.0 compare exactly)."""
    x = np.asarray(x)
    return x.view(np.uint8) if x.dtype == bool else x.view(f"u{x.dtype.itemsize}")


def assert_same_multiset(out, ref):
    """``out`` is a permutation of ``ref``, bit for bit."""
    np.testing.assert_array_equal(np.sort(bits(out)), np.sort(bits(ref)))


def missing(x):
    """Where ``x`` holds NaN (floats) or NaT (datetime64, timedelta64): what sorts last
    for both orders (NumPy >= 2.5)."""
    x = np.asarray(x)
    if x.dtype.kind == "f":
        return np.isnan(x)
    if x.dtype.kind in "mM":
        return np.isnat(x)
    return np.zeros(x.shape, dtype=bool)


def descending_of(ascending):
    """The descending order from a 1-D array sorted ascending, NaN and NaT last as
    NumPy >= 2.5 has them: the part before the first NaN reversed, then the NaNs
    (reversed too: the bit order of distsort's descending codes)."""
    ascending = np.asarray(ascending)
    k = int(np.argmax(missing(ascending))) if missing(ascending).any() else len(ascending)
    return np.concatenate([ascending[:k][::-1], ascending[k:][::-1]])


def assert_sorted_like_numpy(out, x, descending=False):
    """``out`` equals ``numpy.sort(x)`` (descending: NaNs and NaTs still last) and keeps
    every bit pattern."""
    ref = np.sort(x)
    if descending:
        ref = descending_of(ref)
    assert out.dtype == x.dtype and out.shape == x.shape
    assert np.array_equal(out, ref, equal_nan=x.dtype.kind == "f")
    assert_same_multiset(out, x)


def assert_only_crossing_parts_travel(sent, workers):
    """``sent``: ``distsort.cluster.diff_sent`` over a sort of 4 MiB chunks of random
    keys spread over ``workers``.  Compare-splits exchange heads and tails (about half a
    chunk each way), as data or read through CUDA IPC (``ipc``); any other kind of task
    whose result travelled, past a small allowance for edges and bounds, means a chunk
    moved to another worker."""
    crossing = sent.get("head", 0) + sent.get("tail", 0) + sent.get("ipc", 0)
    if workers > 1:
        assert crossing > 0, sent
    assert sum(sent.values()) - crossing < 2**20, f"whole chunks travel: {sent}"


def stable_argsort(x, descending=False):
    """``numpy.argsort(kind="stable")``, and its descending form as NumPy >= 2.5 has it
    (``numpy.argsort(x, descending=True, stable=True)``): largest first, NaN and NaT
    last, equal keys (``-0.0 == +0.0``, every NaN) in their input order."""
    x = np.asarray(x)
    if not descending:
        return np.argsort(x, kind="stable")
    # Each key's rank among the distinct values (np.unique: -0.0 == +0.0, NaNs one).
    rank = np.unique(x, return_inverse=True)[1].reshape(-1).astype(np.int64)
    return np.lexsort((np.arange(len(x)), -rank, missing(x))).astype(np.int64)


def kernel_order(keys, values, descending):
    """Keyed order of the GPU kernels: canonical key code, value code, and where both
    tie (-0.0/+0.0, NaN payloads) the key's total code, then the value's total code."""
    from distsort.backends.cpu import numpy_backend as npb
    perm = np.lexsort((npb.encode(values), npb.encode(keys, descending=descending),
                       npb.encode(values, canonical=True),
                       npb.encode(keys, canonical=True, descending=descending)))
    return keys[perm], values[perm]


def kernel_reference(keys, values, order, start=None):
    """The NumPy backend's sort of one chunk, as ``(keys, values or None)``; keyed: with
    full ties ordered as the kernels order them (the NumPy backend keeps input order)."""
    from distsort.backends.cpu import numpy_backend as npb
    chunk = npb.prepare(keys, values, order, start)
    vdtype = None if values is None else np.asarray(values).dtype
    out = npb.finish_keys(chunk, order, keys.dtype, vdtype)
    if not order.keyed:
        return out, None
    vals = npb.finish_values(chunk, order, keys.dtype, vdtype)
    k2, v2 = kernel_order(out, vals, order.descending)
    same = lambda a, b: np.array_equal(npb.encode(a, canonical=True), npb.encode(b, canonical=True))  # noqa: E731
    assert same(k2, out) and same(v2, vals)  # refining only reorders full ties
    return k2, v2


def brute_co_ranks(runs, rank):
    """The co-ranks of output rank ``rank`` in sorted ``runs``, from the stable merge itself:
    items by (value, run, position), how many of the first ``rank`` each run gives."""
    merged = sorted((v, j, p) for j, run in enumerate(runs) for p, v in enumerate(run))
    taken = [0] * len(runs)
    for _, j, _ in merged[:rank]:
        taken[j] += 1
    return tuple(taken)


def persisted_on_two_workers(client, x, chunk):
    """``x`` as a Dask array of ``chunk``-element chunks persisted on ``client``'s
    cluster, chunk ``i`` on worker ``i % 2`` (workers by address); and those workers."""
    import dask.array as da
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    parts = [client.persist(da.from_array(x[i:i + chunk], chunks=chunk),
                            workers=[workers[(i // chunk) % 2]])
             for i in range(0, len(x), chunk)]
    return client.persist(da.concatenate(parts)), workers


def forget_transfers(client):
    """Empty every worker's log of the keys it received from others."""
    client.run(lambda dask_worker: dask_worker.transfer_incoming_log.clear())


def received_keys(client):
    """The keys the workers received from one another since :func:`forget_transfers`."""
    logs = client.run(lambda dask_worker: [k for entry in dask_worker.transfer_incoming_log
                                           for k in entry["keys"]])
    return {k for keys in logs.values() for k in keys}


@contextlib.contextmanager
def loopback_client(workers):
    """A client of a ``distributed.LocalCluster`` of ``workers`` processes of one thread
    each, on loopback."""
    import distributed
    with (distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   host="127.0.0.1", dashboard_address=None) as cluster,
          distributed.Client(cluster, set_as_default=False) as client):
        yield client
