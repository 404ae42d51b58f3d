"""The command's path for inputs larger than host memory (``distsort.io.disksort``,
``distsort.cli.ondisk``): the plan and the co-ranks on integers against brute force,
then whole sorts under a tiny forced memory budget, bit for bit against NumPy."""
import itertools
import os
import re
from pathlib import Path

import numpy as np
import pytest

from arrays import (DTYPES, bits, brute_co_ranks, descending_of, kernel_order, random_keys,
                    stable_argsort)
from distsort import cli
from distsort.io import disksort
from distsort.backends.disk import buffers, files, runs as disk_runs
from distsort.backends.outofcore.hostruns import merge_codes
from distsort.cli import ondisk
from distsort.plan import outofcore
from distsort.plan.kway import Samples, segment_bounds

# -------------------------------------------------------------- plans, on integers


@pytest.mark.parametrize("n,per,memory,tasks", [(0, 4, 100, 3), (1, 4, 1, 3), (10, 12, 36, 3),
                                                (1000, 12, 4000, 3), (10**9, 12, 8 << 30, 3),
                                                (7, 8, 10**6, 2)])
def test_plan_covers_the_input_within_memory(n, per, memory, tasks):
    p = outofcore.plan_disk_sort(n, per, memory, tasks)
    assert sum(p.runs) == n and all(r > 0 for r in p.runs)
    piece = max(1, memory // (tasks * per))
    assert max(p.runs, default=0) <= piece  # every task's run fits its share
    assert max(p.runs, default=0) - min(p.runs, default=0) <= 1  # runs of equal sizes
    assert 1 <= p.segment <= max(1, piece)


@pytest.mark.parametrize("n,per,kept_bytes,memory,tasks", [
    (0, 12, 4, 100, 3), (1, 12, 4, 1, 3), (1000, 12, 4, 4000, 3), (1000, 12, 4, 40_000, 3),
    (10**9, 12, 4, 8 << 30, 3), (10**6, 64, 12, 10**7, 3), (7, 8, 8, 10**6, 2),
    (2**28, 12, 4, 64 << 20, 3), (7_885_291_520, 12, 4, 17 << 30, 3)])
def test_plan_keeps_what_the_tasks_leave(n, per, kept_bytes, memory, tasks):
    """Runs kept in memory and the tasks in flight fit the budget together; as many are
    kept as fit, spread over the input; tasks take about WORK_SHARE of the memory."""
    p = outofcore.plan_disk_sort(n, per, memory, tasks, stride=4096, kept_bytes=kept_bytes)
    assert sum(p.runs) == n and all(r > 0 for r in p.runs)
    assert len(p.kept) == len(p.runs)
    work = tasks * per * max(p.runs, default=0)
    held = kept_bytes * p.kept_elements
    if max(p.runs, default=0) > 1:  # one-element runs go ahead whatever the memory
        assert work + held <= memory
        # more than WORK_SHARE only to keep the runs few, or none kept at all
        assert (work <= memory * outofcore.WORK_SHARE or len(p.runs) <= outofcore.MAX_RUNS
                or not any(p.kept))
    if n and not all(p.kept):  # no room for one more run
        assert work + held + kept_bytes * max(p.runs) > memory
    gaps = np.diff(np.flatnonzero(p.kept))
    assert not len(gaps) or gaps.max() - gaps.min() <= 1  # evenly spread
    # a segment's end reads about two strides of every run: an eighth of a segment
    assert outofcore.MIN_STRIDE <= p.stride <= 4096
    assert p.stride in (outofcore.MIN_STRIDE, 4096) or 16 * len(p.runs) * p.stride <= p.segment


def test_disk_choice_and_room():
    assert outofcore.needs_disk(10, 29) and not outofcore.needs_disk(10, 30)
    assert outofcore.disk_room(30, 30, 2, punch=True) == 32
    assert outofcore.disk_room(30, 30, 2, punch=False) == 60
    assert outofcore.element_bytes(8, 0, "sort") == 24
    assert outofcore.element_bytes(4, 4, "by-value") > outofcore.element_bytes(4, 0, "sort")


class _Split:
    """The disk path's co-ranks (``disksort.co_ranks_on_disk``) over runs held as code
    arrays (the samples every ``stride``-th element, as the runs' are); the reads are
    recorded, and what ``freed`` lists below reads as zeros."""

    def __init__(self, runs, stride, freed=None):
        self.arrays = [tuple(np.array(c, np.uint64) for c in zip(*r, strict=True))
                       if len(r) and isinstance(r[0], tuple) else (np.array(r, np.uint64),)
                       for r in runs]
        self.reads, self.freed = [], freed
        self.samples = Samples([len(r) for r in runs], [stride] * len(runs),
                               merge_codes([tuple(c[stride - 1::stride] for c in a)
                                            for a in self.arrays]))

    def read(self, j, lo, hi):
        self.reads.append((j, lo, hi))
        parts = tuple(c[lo:hi].copy() for c in self.arrays[j])
        if self.freed is not None:
            for part in parts:
                part[:max(0, self.freed[j] - lo)] = 0
        return parts

    def __call__(self, rank, start=None):
        (lo,), (hi,) = self.samples.windows([rank])
        if start is not None:  # as the merge does: nothing below the last co-ranks
            lo = np.maximum(lo, start)
            hi = np.maximum(hi, lo)
        return disksort.co_ranks_on_disk(rank, lo, hi, self.read)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("stride", [1, 3, 8])
def test_co_ranks_from_samples_match_brute_force(seed, stride):
    """Every rank, from the start and from the previous rank's co-ranks (nothing below
    those is read), on runs with duplicates and empty runs."""
    rng = np.random.default_rng(seed)
    runs = [sorted(rng.integers(0, 12, int(rng.integers(0, 30))).tolist()) for _ in range(5)]
    n = sum(map(len, runs))
    split = _Split(runs, stride)
    previous = (0,) * len(runs)
    for rank in range(n + 1):
        got = split(rank)
        assert got == brute_co_ranks(runs, rank)
        split.reads.clear()
        assert split(rank, start=previous) == got
        assert all(lo >= previous[j] for j, lo, hi in split.reads)
        previous = got


@pytest.mark.parametrize("stride", [1, 16, 64, 4096])
def test_windows_hold_the_co_ranks_and_stay_narrow(stride):
    """The samples bound each run's co-rank to a window of a few strides, wherever
    the rank falls (the read of the windows stays small)."""
    rng = np.random.default_rng(stride)
    runs = [np.sort(rng.integers(0, 10**6, int(rng.integers(2000, 5000)))) for _ in range(7)]
    samples = _Split(runs, stride).samples
    n = sum(map(len, runs))
    merged = np.sort(np.concatenate(runs), kind="stable")
    for rank in [0, 1, n // 3, n // 2, n - 1, n]:
        want = [int(np.searchsorted(r, merged[rank], "left")) if rank < n else len(r)
                for r in runs]
        (lo,), (hi,) = samples.windows([rank])
        assert all(a <= w <= b for a, w, b in zip(lo, want, hi, strict=True))
        assert sum(hi) - sum(lo) <= 2 * (len(runs) + 1) * stride  # s * (k + 2) + k * (s - 1)


def test_co_ranks_never_read_below_the_window():
    """A streamed merge frees the runs below the last co-ranks: the search started
    there must not read what lies below (it would read zeros)."""
    rng = np.random.default_rng(3)
    runs = [sorted(rng.integers(0, 1000, 200).tolist()) for _ in range(4)]
    lengths = [len(r) for r in runs]
    freed = [0] * 4
    split = _Split(runs, 16, freed)
    c = (0,) * 4
    for rank in segment_bounds((sum(lengths),), 37)[0][1:]:
        c = split(rank, start=c)
        assert c == brute_co_ranks(runs, rank)
        freed[:] = c


def test_co_ranks_of_tuple_codes():
    """Keyed orders compare tuples of codes: ties on the first code go to the second."""
    rng = np.random.default_rng(7)
    runs = [sorted(zip(rng.integers(0, 3, 20).tolist(), rng.integers(0, 3, 20).tolist(),
                       strict=True)) for _ in range(3)]
    split = _Split(runs, 4)
    for rank in range(61):
        assert split(rank) == brute_co_ranks(runs, rank)


def test_segments_cover_the_output_in_order():
    assert segment_bounds((10,), 4) == ((0, 3, 6, 10),)
    for n, s in itertools.product(range(0, 40, 7), range(1, 9)):
        (b,) = segment_bounds((n,), s)
        assert b[0] == 0 and b[-1] == n
        assert all(0 < y - x <= s for x, y in itertools.pairwise(b)) or n == 0


# -------------------------------------------------------------- files


def test_freeing_and_direct_writes(tmp_path):
    """Runs freed behind the merge read as zeros; writes aligned or not land in place."""
    path = tmp_path / "f.bin"
    path.write_bytes(b"\0" * 100)
    r = files.Region(str(path), 100, np.dtype(np.uint32), 5000)
    x = np.arange(5000, dtype=np.uint32)
    out = buffers.scratch("test", 5000, np.uint32, r.at(0))
    out[:] = x
    r.write(0, out)
    r.write(7, x[7:20] + 1)  # unaligned: through the page cache
    want = x.copy()
    want[7:20] += 1
    assert np.array_equal(r.read(0, 5000), want)
    if files.can_free(str(tmp_path)):
        assert r.free(0, 4000)
        got = r.read(0, 5000)
        assert not got[1000:3000].any()  # whole pages inside the range are freed
        assert np.array_equal(got[4000:], want[4000:])


@pytest.mark.parametrize("direct", [True, False])
def test_reads_past_the_page_cache_and_through_it(tmp_path, monkeypatch, direct):
    """Any range of elements, at any offset, read straight (through a staging buffer
    smaller than the range) or through the page cache, is the file's bytes; a file that
    ends early is an error; the same after unaligned writes through the page cache."""
    monkeypatch.setattr(files, "DIRECT_BLOCK", 3 * buffers.PAGE)
    monkeypatch.setattr(files, "DIRECT_FROM", 0)
    path = tmp_path / "f.bin"
    data = np.random.default_rng(5).integers(0, 2**32, 20_000, dtype=np.uint32)
    path.write_bytes(b"\1" * 36 + data.tobytes())
    key = ("read", str(path))
    monkeypatch.setitem(files._DIRECT_OK, key, None if direct else False)
    r = files.Region(str(path), 36, np.dtype(np.uint32), len(data))
    rng = np.random.default_rng(6)
    for a, b in [(0, 0), (0, 1), (0, len(data)), (len(data) - 1, len(data)),
                 *np.sort(rng.integers(0, len(data), (40, 2)), axis=1).tolist()]:
        assert np.array_equal(r.read(a, b), data[a:b]), (a, b)
        # Into a buffer laid out as the file is: its whole pages read in place.
        into = buffers.scratch("in", b - a, np.uint32, r.at(a))
        into[:] = 7
        assert r.read(a, b, into) is into and np.array_equal(into, data[a:b]), (a, b)
    assert files._DIRECT_OK[key] in ((True, False) if direct else (False,))
    with pytest.raises(EOFError):
        r.read(len(data) - 3, len(data) + 1)
    r.write(1001, data[:7])  # partial pages, through the page cache
    assert np.array_equal(r.read(990, 1020), np.concatenate([data[990:1001], data[:7],
                                                             data[1008:1020]]))


# -------------------------------------------------------------- the command


def _run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


TINY = ("--device", "cpu", "--no-progress", "--verify")


def limit(x, payload=0, order="sort"):
    """``--host-memory-limit`` for about ten runs of ``x`` if three tasks took all of it
    (the plan's tasks take ``WORK_SHARE`` of it: some tens of runs)."""
    per = outofcore.element_bytes(x.dtype.itemsize, payload, order)
    return ("--host-memory-limit", str(3 * per * len(x) // 10))


@pytest.fixture(autouse=True)
def half_kept(monkeypatch):
    """Every other run kept in memory, the others written to the disk, whatever the
    budget leaves (the plan's own choice: ``test_plan_keeps_what_the_tasks_leave``,
    ``test_chosen_by_the_memory_available``): every sort reads runs from both."""
    import dataclasses
    real = ondisk.plan_disk_sort

    def plan(*args, **kwargs):
        p = real(*args, **kwargs)
        return dataclasses.replace(p, kept=outofcore.spread(len(p.runs) // 2, len(p.runs)))
    monkeypatch.setattr(ondisk, "plan_disk_sort", plan)


@pytest.fixture
def rng():
    return np.random.default_rng()


@pytest.fixture(autouse=True)
def small_stride(monkeypatch):
    """Blocks of 64 elements, so that a search reads inside runs of a few thousand, and
    runs freed behind the merge every 256 bytes, so that a run is freed in pieces."""
    monkeypatch.setattr(disksort, "STRIDE", 64)
    monkeypatch.setattr(disk_runs, "FREE_FROM", 256)


def _keys(rng, n, dtype):
    if np.dtype(dtype).kind in "mM":
        x = rng.integers(-10**6, 10**6, n).astype(dtype)
        x[rng.random(n) < 0.05] = np.array("NaT", dtype)
        return x
    return random_keys(rng, n, dtype, duplicates=True)


def _sorted_like_numpy(x, descending):
    if x.dtype.kind in "mM":  # NaT last, for both orders
        ref = np.sort(x)
        return descending_of(ref) if descending else ref
    from distsort.core.order import decode, encode
    c = np.sort(encode(x, descending=descending))
    return decode(c, x.dtype, descending=descending)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("descending", [False, True])
def test_radix_sort_of_keys_every_dtype(rng, dtype, descending):
    """The compiled radix sort that forms the runs and merges the segments (every
    pass's digits counted at once), bit for bit against NumPy's order, on keys of the
    full bit range with specials and duplicates, and on keys that share bytes (a pass
    that moves nothing is skipped)."""
    from distsort.backends.cpu.radix import RADIX_FROM, sort_keys
    n = 3 * RADIX_FROM + 17
    u = bits(random_keys(rng, n, dtype)).copy()
    low = u.dtype.type(0xFF)
    shared = ((u & low) | (u[0] & ~low)).view(np.dtype(dtype))  # the low byte differs alone
    for x in (random_keys(rng, n, dtype, duplicates=True), shared):
        got = sort_keys(x, descending)
        np.testing.assert_array_equal(bits(got), bits(_sorted_like_numpy(x, descending)))


@pytest.mark.parametrize("dtype", DTYPES + ["datetime64[ns]", "timedelta64[s]"])
def test_sort_through_the_disk_every_dtype(tmp_path, capsys, rng, dtype):
    x = _keys(rng, 6_007, dtype)
    np.save(tmp_path / "in.npy", x)
    for descending in (False, True):
        d = ["--descending"] if descending else []
        out = tmp_path / f"o{int(descending)}.npy"
        code, stdout, err = _run(capsys, "sort", tmp_path / "in.npy", out, *TINY, *d,
                                 *limit(x))
        assert code == 0, err
        assert "larger than memory" in stdout
        kept, written = map(int, re.search(r"(\d+) kept in memory and (\d+) on the disk",
                                           stdout).groups())
        assert kept > 1 and written > 1
        got = np.load(out)
        assert got.dtype == x.dtype
        assert np.array_equal(bits(got), bits(_sorted_like_numpy(x, descending)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.npy", "o0.npy", "o1.npy"]


@pytest.mark.parametrize("dtype", ["float32", "int64", "uint8", "float16", "bool"])
@pytest.mark.parametrize("descending", [False, True])
def test_argsort_and_values_through_the_disk(tmp_path, capsys, rng, dtype, descending):
    x = _keys(rng, 5_003, dtype)
    v = random_keys(rng, len(x), np.float32)
    np.save(tmp_path / "k.npy", x)
    np.save(tmp_path / "v.npy", v)
    d = ["--descending"] if descending else []
    code, _, err = _run(capsys, "sort", tmp_path / "k.npy", tmp_path / "a.npy", "--argsort",
                        *TINY, *d, *limit(x, 8, "stable"))
    assert code == 0, err
    assert np.array_equal(np.load(tmp_path / "a.npy"), stable_argsort(x, descending))
    for stable in (False, True):
        s = ["--stable"] if stable else []
        code, _, err = _run(capsys, "sort", tmp_path / "k.npy", tmp_path / "ko.npy", "--values",
                            tmp_path / "v.npy", "--values-output", tmp_path / "vo.npy",
                            "--overwrite", *TINY, *d, *s,
                            *limit(x, 4, "stable" if stable else "by-value"))
        assert code == 0, err
        if stable:
            p = stable_argsort(x, descending)
            ref_k, ref_v = x[p], v[p]
        else:
            ref_k, ref_v = kernel_order(x, v, descending)
        assert np.array_equal(bits(np.load(tmp_path / "ko.npy")), bits(ref_k))
        assert np.array_equal(bits(np.load(tmp_path / "vo.npy")), bits(ref_v))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy", "k.npy", "ko.npy", "v.npy",
                                                          "vo.npy"]


@pytest.mark.parametrize("available", [100_000, 40_000])
def test_chosen_by_the_memory_available(tmp_path, capsys, rng, monkeypatch, available):
    """Without --host-memory-limit, the memory psutil reports decides, and the plan
    keeps in memory the runs that the tasks leave room for."""
    import psutil
    monkeypatch.undo()  # the plan's own runs kept, not half_kept's
    x = rng.standard_normal(20_000).astype(np.float32)
    np.save(tmp_path / "in.npy", x)
    real = psutil.virtual_memory()
    monkeypatch.setattr(psutil, "virtual_memory",
                        lambda: real._replace(available=available))
    code, stdout, err = _run(capsys, "sort", tmp_path / "in.npy", tmp_path / "o.npy",
                             "--device", "cpu", "--no-progress")
    assert code == 0, err
    plan = disksort.plan_disk_sort(len(x), 12, int(available * disksort.MEMORY_SHARE),
                                   (os.cpu_count() or 1) + 2, kept_bytes=4)
    kept = sum(plan.kept)
    assert 0 < kept < len(plan.runs)
    assert f"{kept} kept in memory and {len(plan.runs) - kept} on the disk" in stdout
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.sort(x))


def test_not_enough_disk_names_the_bytes(tmp_path, capsys, rng, monkeypatch):
    import shutil
    from collections import namedtuple
    x = rng.standard_normal(10_000).astype(np.float32)
    np.save(tmp_path / "in.npy", x)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda d: usage(10**6, 10**6 - 1000, 1000))
    code, _, err = _run(capsys, "sort", tmp_path / "in.npy", tmp_path / "o.npy", *TINY,
                        *limit(x))
    assert code != 0
    assert "not enough free disk space" in err and "(1,000 bytes) is free" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.npy"]


def test_a_failed_merge_leaves_nothing(tmp_path, capsys, rng, monkeypatch):
    x = rng.standard_normal(10_000).astype(np.float32)
    np.save(tmp_path / "in.npy", x)
    calls = []
    real = disksort.sort_piece

    def failing(keys, *a, **k):
        calls.append(len(keys))
        if len(calls) > 12:  # past the runs (about ten): in the merge
            raise OSError(28, "No space left on device")
        return real(keys, *a, **k)
    monkeypatch.setattr(disksort, "sort_piece", failing)
    code, _, err = _run(capsys, "sort", tmp_path / "in.npy", tmp_path / "o.npy", *TINY,
                        *limit(x))
    assert code != 0 and "no space left" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.npy"]


def test_keeps_its_path_for_zarr_outputs_and_clusters(tmp_path):
    """The disk path writes .npy outputs in this process; other requests keep theirs."""
    from types import SimpleNamespace
    src = SimpleNamespace(n=10**6, dtype=np.dtype(np.float32))
    job = SimpleNamespace(src=src, outputs=[str(tmp_path / "o.npy")], sort_bytes=lambda: 4,
                          mode="sort", vals=None, stable=False)
    args = SimpleNamespace(scheduler_address=None, scheduler_file=None, workers=None,
                           memory_limit=None, spill_dir=None, device="cpu", report=None,
                           host_memory_limit=10**6)
    assert ondisk.host_budget(args, job) == 10**6
    assert ondisk.host_budget(SimpleNamespace(**{**vars(args), "workers": 2}), job) is None
    job.outputs = [str(tmp_path / "o.zarr")]
    assert ondisk.host_budget(args, job) is None
    job.outputs = [str(tmp_path / "o.npy")]
    assert ondisk.host_budget(SimpleNamespace(**{**vars(args),
                                                 "host_memory_limit": 10**8}), job) is None
    # the command reads the same choice from its engine (distsort.plan.engine)
    from distsort.cli.planned import command_engine
    from distsort.plan.engine import Engine
    job.per_element = lambda: 4
    assert command_engine(args, job) == Engine("disk", True, 10**6)
    assert command_engine(SimpleNamespace(**{**vars(args), "workers": 2}), job) == Engine(
        "cpu", False)
    assert Path(os.devnull).exists()
