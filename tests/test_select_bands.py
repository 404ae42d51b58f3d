"""Selection by bands (distsort.backends.cpu.bands): the counting pass, and ranks found
where the random sample brackets them and where it misleads (the second pass)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import kernel_emulator
from distsort.backends.cpu import bands
from distsort.backends.gpu.select import _owner, groups
from distsort.graph.select import finish_top
from distsort.plan.select import rank_margin, sample_sizes, top_rank

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def brute_slots(codes, bounds):
    """Every code's slot by definition: twice the bounds below it, plus one if equal."""
    return np.array([2 * int(np.sum(bounds < c)) + int(np.any(bounds == c)) for c in codes],
                    np.int64)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 300), nb=st.integers(0, 20),
       distinct=st.integers(1, 40), positions=st.booleans())
def test_slot_pass_counts_every_slot_and_keeps_those_asked(seed, n, nb, distinct, positions):  # noqa: PLR0913, PLR0917
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, distinct, n).astype(np.uint16)
    bounds = np.unique(rng.integers(0, distinct + 2, nb).astype(np.uint16))
    take = rng.random(2 * bounds.size + 1) < 0.5
    hist, kept, where = bands.slot_pass(codes, bounds, take, positions=positions, offset=7)
    slots = brute_slots(codes, bounds)
    np.testing.assert_array_equal(hist, np.bincount(slots, minlength=2 * bounds.size + 1))
    expected = np.flatnonzero(take[slots])
    np.testing.assert_array_equal(np.sort(kept), np.sort(codes[expected]))
    if positions:
        np.testing.assert_array_equal(np.sort(where), expected + 7)
        np.testing.assert_array_equal(codes[where - 7], kept)
    else:
        assert where is None


def chunks_of(rng, total, distinct):
    cuts = np.sort(rng.integers(0, total + 1, int(rng.integers(1, 6))))
    x = rng.integers(0, distinct, total).astype(np.uint16)
    return np.split(x, cuts), x


def samples_of(rng, chunks, misleading):
    """Honest random samples (whole chunks, or a tenth of each), or samples of another
    distribution (all high, all low or one value): the ranks then fall outside their
    bands, as bad luck would have it."""
    lengths = [c.size for c in chunks]
    sizes = sample_sizes(lengths)  # small arrays: every chunk whole, the estimate exact
    if misleading == "part":  # a tenth of every chunk, drawn at random
        sizes = [-(-n // 10) for n in lengths]
    honest = [bands.sample_codes(c, s, i) for i, (c, s)
              in enumerate(zip(chunks, sizes, strict=True))]
    if misleading in ("honest", "part"):
        return honest
    value = {"high": 60000, "low": 0, "one": 7}[misleading]
    spread = 1 if misleading == "one" else 5000
    return [(np.sort(rng.integers(value, value + spread, s[0].size)).astype(np.uint16)
             if misleading != "low" else rng.integers(0, 2, s[0].size).astype(np.uint16), 0)
            for s in honest]


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), total=st.integers(1, 3000),
       distinct=st.sampled_from([3, 50, 60000]),
       misleading=st.sampled_from(["honest", "part", "high", "low", "one"]))
def test_bands_find_every_rank_where_the_sample_misleads_too(seed, total, distinct, misleading):
    rng = np.random.default_rng(seed)
    chunks, x = chunks_of(rng, total, distinct)
    lengths = [c.size for c in chunks]
    ranks = sorted({0, total - 1, *rng.integers(0, total, 5).tolist()})
    samples = samples_of(rng, chunks, misleading)
    planned = bands.plan_bands([s[0] for s in samples], lengths, ranks, rank_margin)
    first = [bands.run_pass(c, planned) for c in chunks]
    found = bands.find_ranks(planned, first)
    again = [bands.run_again(c, planned, found) for c in chunks]
    codes = bands.ranks_found(planned, found, again)
    np.testing.assert_array_equal(np.asarray(codes, np.uint16), np.sort(x)[ranks])
    if misleading == "honest" and distinct == 60000 and total > 1000:
        assert found[-1] is None  # an exact sample (whole chunks) needs no second pass
        assert sum(p[1].size for p in first) < total // 2


def reference_top(x, k, positions):
    order = np.argsort(x, kind="stable")
    take = order[::-1][:k] if k > 0 else order[:-k]
    return take.astype(np.int64) if positions else x[take]


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), total=st.integers(1, 2000),
       distinct=st.sampled_from([2, 40, 60000]), fraction=st.floats(-1.0, 1.0),
       positions=st.booleans(),
       misleading=st.sampled_from(["honest", "part", "high", "low", "one"]))
def test_top_k_found_where_the_sample_misleads_too(seed, total, distinct, fraction, positions,  # noqa: PLR0913, PLR0917
                                                   misleading):
    rng = np.random.default_rng(seed)
    chunks, x = chunks_of(rng, total, distinct)
    k = int(fraction * total) or 1
    kk, descending = abs(k), k < 0
    codes = [~c if descending else c for c in chunks]  # the codes sample_codes gives
    lengths = [c.size for c in chunks]
    samples = samples_of(rng, codes, misleading)
    planned = bands.plan_bands([s[0] for s in samples], lengths, [top_rank(total, kk)],
                               rank_margin, above=True)
    offsets = np.cumsum([0, *lengths])[:-1]
    options = {"descending": descending, "positions": positions}
    first = [bands.run_pass(c, planned, offset=o, **options)
             for c, o in zip(chunks, offsets, strict=True)]
    found = bands.top_slots(planned, first, positions)
    again = [bands.run_again(c, planned, found, offset=o, **options)
             for c, o in zip(chunks, offsets, strict=True)]
    out = finish_top(planned, found, first, again, kk, x.dtype, descending, positions, k > 0,
                     "numpy")
    np.testing.assert_array_equal(out, reference_top(x, k, positions))


def test_gpu_passes_hold_every_slot_whole():
    """The kernel compares with 16 bounds at most: more take several passes, and each
    slot (a bound, or the gap between two) is counted and kept by one that holds it."""
    width = 16
    for nb in range(70):
        firsts = groups(nb, width)
        ends = [min(nb, f + width) for f in firsts]
        assert firsts[0] == 0 and ends[-1] == nb
        for s in range(2 * nb + 1):
            g, local = _owner(s, firsts, width)
            first, count = firsts[g], ends[g] - firsts[g]
            assert 0 <= local <= 2 * count and local == s - 2 * first
            j = s // 2
            if s % 2:  # the bound j is in the pass
                assert first <= j < ends[g]
            else:  # the gap between bounds j-1 and j: both in it, or the array's end
                assert (j == 0 or first <= j - 1) and (j == nb or j < ends[g])
                assert j != 0 or first == 0
                assert j != nb or ends[g] == nb


@pytest.mark.skipif(not kernel_emulator.available(), reason="needs a C++ compiler")
@pytest.mark.parametrize(("dtype", "n", "nb", "positions"), [
    ("uint8", 5000, 3, False), ("uint16", 9001, 0, True), ("uint32", 20000, 16, True),
    ("uint32", 7000, 17, False), ("uint64", 6000, 33, True), ("uint64", 1, 1, True)])
def test_gpu_kernel_run_on_the_cpu_counts_and_keeps_as_numpy(monkeypatch, dtype, n, nb,  # noqa: PLR0913, PLR0917
                                                             positions):
    """``kernels/select.cu`` compiled for the CPU (warp shuffles and atomics emulated):
    the slot counts, the codes kept and their positions equal the NumPy pass's, with a
    first room too small (the pass runs again) and passes of 16 bounds at most."""
    from distsort.backends.gpu import select as gpu
    monkeypatch.setattr(gpu, "MIN_ROOM", 16)
    rng = np.random.default_rng(n + nb)
    codes = rng.integers(0, np.iinfo(dtype).max, n, dtype=dtype, endpoint=True)
    codes[: n // 3] = rng.choice(codes[: max(1, n // 50)], n // 3)  # ties
    bounds = np.unique(rng.choice(codes, nb)) if nb else codes[:0]
    take = rng.random(2 * bounds.size + 1) < 0.6
    launch = kernel_emulator.SelectLaunch(sms=1)
    hist, kept, where = gpu.slot_pass(codes, bounds, take, positions=positions, offset=5,
                                      expect=0.0, launch=launch)
    ref = bands.slot_pass(codes, bounds, take, positions=positions, offset=5)
    np.testing.assert_array_equal(hist, ref[0])
    np.testing.assert_array_equal(np.sort(kept), np.sort(ref[1]))
    if positions:
        order = np.argsort(where)
        np.testing.assert_array_equal(where[order], ref[2])
        np.testing.assert_array_equal(kept[order], ref[1])
    assert launch.launches >= len(groups(bounds.size))


@pytest.mark.skipif(not kernel_emulator.available(), reason="needs a C++ compiler")
def test_quantiles_and_top_k_through_the_emulated_kernel(monkeypatch):
    """The whole selection with every pass run by the GPU's wrapper and kernel (on the
    CPU): quantiles and the top k of chunks sampled in part equal NumPy's."""
    import dask.array as da

    import distsort
    from distsort.backends.gpu import select as gpu
    launch = kernel_emulator.SelectLaunch(sms=1)

    def emulated(codes, bounds, take, *, positions=False, offset=0, expect=None):
        # the selection's own ``expect``, made small: the kernel's reruns with more room
        assert expect is not None
        return gpu.slot_pass(codes, bounds, take, positions=positions, offset=offset,
                             expect=min(expect, 0.001), launch=launch)
    monkeypatch.setattr(bands, "slot_pass", emulated)
    rng = np.random.default_rng(8)
    x = rng.lognormal(size=30000).astype(np.float32)
    x[rng.random(x.size) < 0.01] = np.nan
    x[:3000] = x[3000:6000][::-1]  # ties
    d = da.from_array(x, chunks=7000)
    q = [0.0, 0.3, 0.5, 0.99]
    sync = {"scheduler": "sync"}
    np.testing.assert_array_equal(distsort.nanquantile(d, q).compute(**sync),
                                  np.nanquantile(x, q))
    np.testing.assert_array_equal(distsort.quantile(d, q).compute(**sync), np.quantile(x, q))
    for k in (50, -2000):
        np.testing.assert_array_equal(distsort.topk(d, k).compute(**sync),
                                      reference_top(x, k, positions=False))
        np.testing.assert_array_equal(distsort.argtopk(d, k).compute(**sync),
                                      reference_top(x, k, positions=True))
    assert launch.launches >= 4 * 5
