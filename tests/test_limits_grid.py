"""The grid of limits: ``--host-memory-limit``, ``--device-memory-limit``,
``--memory-limit``, ``--workers`` and ``--chunk-size`` over a few input sizes.  Every
value the checks accept sorts the input as ``numpy.sort`` does; every value refused is
refused within seconds, naming a smallest value that passes the same check, and a
sample of those is run.

Small but covering: the checks are pure arithmetic on the plan (most of the grid runs
no sort), the sorts in this process run in this process, and only a few runs start
worker processes (a local cluster costs seconds).
"""
import re
import time
from types import SimpleNamespace

import numpy as np
import pytest
from dask.utils import parse_bytes

from distsort import cli
from distsort.cli import budgets, limits, ondisk
from distsort.cli.errors import BAD_INPUT, CLIError

#: Seconds a refusal may take, once the command runs.
REFUSED_WITHIN = 5
SIZES = (3_000, 60_000, 400_000)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """``{n: (path, array)}``: fresh random float64 of each size."""
    d = tmp_path_factory.mktemp("grid")
    rng = np.random.default_rng()
    out = {}
    for n in SIZES:
        x = rng.standard_normal(n)
        np.save(d / f"x{n}.npy", x)
        out[n] = (d / f"x{n}.npy", x)
    return out


def sort(capsys, tmp_path, path, *options):
    """``(code, stdout, stderr, seconds, output)`` of ``distsort sort`` in this process."""
    out = tmp_path / f"o{time.perf_counter_ns()}.npy"
    t0 = time.perf_counter()
    code = cli.main(["sort", str(path), str(out), "--no-progress", *map(str, options)])
    seconds = time.perf_counter() - t0
    stdout, stderr = capsys.readouterr()
    return code, stdout, stderr, seconds, out


def named(err, option):
    m = re.search(rf"{option} (\d+(?:[KMG]iB|B))\b", err)
    assert m, err
    return m.group(1)


def accepted_or_refused(capsys, tmp_path, inputs, n, option, value, *more):
    """Run the sort; accepted: the right result; refused: fast, exit 2, naming a
    smallest value; returns the value named (None where accepted)."""
    path, x = inputs[n]
    code, _, err, seconds, out = sort(capsys, tmp_path, path, option, value, *more)
    if code == 0:
        np.testing.assert_array_equal(np.load(out), np.sort(x))
        return None
    assert code == BAD_INPUT, (n, value, err)
    assert seconds < REFUSED_WITHIN, (n, value, seconds)
    assert not out.exists()
    return named(err, option)


# ------------------------------------------------------------- host memory, in process
def test_host_memory_limits(capsys, tmp_path, inputs):
    sampled = set()
    for n in SIZES:
        for value in ("1", "4KiB", "64KiB", "1MiB", "64MiB"):
            smallest = accepted_or_refused(capsys, tmp_path, inputs, n,
                                           "--host-memory-limit", value, "--device", "cpu")
            if smallest is None:
                continue
            least = parse_bytes(smallest)
            assert least > parse_bytes(value)
            job = SimpleNamespace(src=SimpleNamespace(n=n, dtype=np.dtype(np.float64)),
                                  vals=None, mode="sort", stable=False,
                                  sort_bytes=lambda: 8)
            # The value named passes the check (through the disk, or in memory).
            assert (ondisk.disk_plan_works(job, least)
                    or least >= n * 8 * ondisk.IN_MEMORY_COPIES), (n, smallest)
            if n not in sampled:  # one run of a value named per size
                sampled.add(n)
                assert accepted_or_refused(capsys, tmp_path, inputs, n, "--host-memory-limit",
                                           smallest, "--device", "cpu") is None


# ----------------------------------------------------------------------- chunk sizes
@pytest.mark.parametrize("chunk", ["1000", "4096", "65536", "1MiB", "3KiB"])
def test_chunk_sizes_in_process(capsys, tmp_path, inputs, chunk):
    for n in SIZES[1:]:
        assert accepted_or_refused(capsys, tmp_path, inputs, n, "--chunk-size", chunk,
                                   "--device", "cpu") is None


# -------------------------------------------------------------------- device memory
def test_device_memory_limits(capsys, tmp_path, inputs):
    """Below the minimum, or cutting too many runs: refused at once; the value named
    for the small input, and a limit accepted for each, sort (on a local cluster's CPU
    workers here, out of core)."""
    small, large = SIZES[0], SIZES[2]
    for n in (small, large):
        smallest = accepted_or_refused(capsys, tmp_path, inputs, n,
                                       "--device-memory-limit", "1KB", "--device", "cpu")
        assert parse_bytes(smallest) >= budgets.MIN_DEVICE_LIMIT
    smallest = accepted_or_refused(capsys, tmp_path, inputs, large, "--device-memory-limit",
                                   "16KiB", "--device", "cpu")  # too many runs
    assert parse_bytes(smallest) > 16 << 10
    for n, value in ((small, "16KiB"), (large, "1MiB")):
        assert accepted_or_refused(capsys, tmp_path, inputs, n, "--device-memory-limit",
                                   value, "--device", "cpu", "--workers", 2) is None


# -------------------------------------------------------------------- worker memory
def _job(n):
    return SimpleNamespace(src=SimpleNamespace(n=n, dtype=np.dtype(np.float64),
                                               nbytes=8 * n),
                           vals=None, mode="sort", descending=False, per_element=lambda: 8)


def _args(**kw):
    base = dict(memory_limit=None, workers=None, chunk_size=None, scheduler_address=None,
                scheduler_file=None, device="cpu", device_memory_limit=None, spill_dir=None)
    return SimpleNamespace(**{**base, **kw})


def test_memory_limit_checks_agree_with_their_advice():
    """Over limits x sizes x workers x chunk sizes: each refusal names a limit that the
    check passes, and a --chunk-size (where one fits) that passes with the limit given."""
    refused = 0
    for n in (400_000, 5_000_000, 30_000_000):
        for workers in (1, 2):
            for chunk in (None, ("elements", 1000), ("elements", 500_000)):
                for limit in ("10KB", "200MB", "300MB", "1GB"):
                    args = _args(memory_limit=limit, workers=workers, chunk_size=chunk)
                    t0 = time.perf_counter()
                    try:
                        limits.check_memory_limit(args, _job(n))
                        continue
                    except CLIError as e:
                        err = str(e)
                    assert time.perf_counter() - t0 < REFUSED_WITHIN
                    refused += 1
                    limits.check_memory_limit(
                        _args(memory_limit=named(err, "--memory-limit"), workers=workers,
                              chunk_size=chunk), _job(n))
                    m = re.search(r"--chunk-size (\d+) \(elements", err)
                    if m:
                        limits.check_memory_limit(
                            _args(memory_limit=limit, workers=workers,
                                  chunk_size=("elements", int(m.group(1)))), _job(n))
    assert refused


@pytest.mark.parametrize("workers", [1, 2])
def test_the_smallest_memory_limit_works(capsys, tmp_path, inputs, workers):
    """The limit named for a limit refused sorts the input on that many workers; so
    does the smallest chunk size, which the plan coalesces."""
    n = SIZES[2]
    smallest = accepted_or_refused(capsys, tmp_path, inputs, n, "--memory-limit", "100MB",
                                   "--workers", workers, "--device", "cpu")
    assert smallest is not None
    options = ["--workers", workers, "--device", "cpu"]
    if workers == 2:
        options += ["--chunk-size", "1000"]
    assert accepted_or_refused(capsys, tmp_path, inputs, n, "--memory-limit", smallest,
                               *options) is None
