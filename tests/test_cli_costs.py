"""What the command costs besides the sort, and what it says of its time: ``--help``
without NumPy or Dask, the disk's rates measured once per filesystem, the summary's
timeline against the disk floor, ``--verify`` checking each output chunk as it is made
(compiled), and arrays written into zarr groups that do not exist yet."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from distsort import cli
from distsort.cli import disk

ROOT = Path(__file__).resolve().parents[1]


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def rng():
    return np.random.default_rng()


@pytest.fixture(autouse=True)
def rates_cache(tmp_path, monkeypatch):
    """The disk rates kept under this test's own cache directory, never the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("DISTSORT_DISK_RATES", raising=False)
    return tmp_path / "cache" / "distsort" / "disk-rates.json"


def counting_probes(monkeypatch):
    """Count the disk's measurements (each reads and writes a file)."""
    calls = []
    read, write = disk._read_rate, disk._write_rate

    def counted_read(*args):
        calls.append("read")
        return read(*args)

    def counted_write(*args):
        calls.append("write")
        return write(*args)
    monkeypatch.setattr(disk, "_read_rate", counted_read)
    monkeypatch.setattr(disk, "_write_rate", counted_write)
    return calls


# ------------------------------------------------------------------ start-up

def test_help_imports_neither_numpy_nor_dask():
    """``distsort --help`` and a usage error import no numerical module (a tenth of
    the time they took with Dask's import)."""
    code = ("import sys\nfrom distsort.cli import command\n"
            "for argv in (['--help'], ['sort', '--help'], ['sort']):\n"
            "    try:\n        command.main(argv)\n    except SystemExit:\n        pass\n"
            "heavy = {m.split('.')[0] for m in sys.modules} & "
            "{'numpy', 'dask', 'distributed', 'numba', 'cupy', 'zarr'}\n"
            "print('HEAVY', sorted(heavy))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120,
                          check=False)
    assert "HEAVY []" in done.stdout, done.stdout + done.stderr
    assert "usage: distsort sort" in done.stdout + done.stderr


# ------------------------------------------------------------------ the disk's rates

def test_disk_rates_measured_once_per_filesystem(tmp_path, monkeypatch, rates_cache):
    src = tmp_path / "x.npy"
    np.save(src, np.arange(100_000, dtype=np.float32))
    calls = counting_probes(monkeypatch)
    first = disk.disk_floor(src, tmp_path, 400_000)
    assert calls == ["read", "write"] and first["age"] == 0.0
    assert rates_cache.is_file()
    second = disk.disk_floor(src, tmp_path, 800_000)
    assert calls == ["read", "write"], "measured again within RATES_KEPT"
    assert (second["read"], second["write"]) == (first["read"], first["write"])
    assert second["floor"] == pytest.approx(2 * first["floor"])
    monkeypatch.setattr(disk, "RATES_KEPT", -1)  # every entry stale: measured again
    disk.disk_floor(src, tmp_path, 400_000)
    assert calls == ["read", "write"] * 2


def test_disk_rates_keyed_by_device_and_refreshed_on_demand(tmp_path, monkeypatch,
                                                             rates_cache):
    src = tmp_path / "x.npy"
    np.save(src, np.arange(1000, dtype=np.float32))
    calls = counting_probes(monkeypatch)
    disk.disk_floor(src, tmp_path, 4000)
    key = disk.filesystem_key(tmp_path)
    assert key.startswith(f"{os.stat(tmp_path).st_dev}:")
    import json
    kept = json.loads(rates_cache.read_text())
    assert list(kept["read"]) == [disk.filesystem_key(src)] and list(kept["write"]) == [key]
    # Another filesystem (its key changed): measured.
    monkeypatch.setattr(disk, "filesystem_key", lambda path: "other:/mnt:xfs")
    disk.disk_floor(src, tmp_path, 4000)
    assert calls == ["read", "write"] * 2
    monkeypatch.setenv("DISTSORT_DISK_RATES", "measure")
    disk.disk_floor(src, tmp_path, 4000)
    assert calls == ["read", "write"] * 3
    # A torn or foreign cache file is no reason to fail: measured, and rewritten.
    monkeypatch.delenv("DISTSORT_DISK_RATES")
    rates_cache.write_text("{not json")
    assert disk.disk_floor(src, tmp_path, 4000)["floor"] > 0
    assert json.loads(rates_cache.read_text())["read"]


def test_the_command_reuses_the_disk_rates(tmp_path, capsys, rng, monkeypatch):
    x = rng.standard_normal(20_000).astype(np.float32)
    np.save(tmp_path / "in.npy", x)
    calls = counting_probes(monkeypatch)
    for i in range(2):
        code, out, err = run(capsys, "sort", tmp_path / "in.npy", tmp_path / f"o{i}.npy",
                             "--device", "cpu", "--no-progress")
        assert code == 0, err
        assert np.array_equal(np.load(tmp_path / f"o{i}.npy"), np.sort(x))
        when = r"measured at the start" if i == 0 else r"measured \d+ s ago"
        assert re.search(rf"disk floor\s+[\d.]+ s to read and write it once \(.*{when}\)",
                         out), out
    assert calls == ["read", "write"]


# ------------------------------------------------------------------ the summary

def _timeline(out):
    line = re.search(r"timeline\s+(.*); seconds since the start", out)
    assert line, out
    steps = re.findall(r"(\w+) ([\d.]+)-([\d.]+) s \(busy ([\d.]+) s\)", line.group(1))
    return {k: tuple(map(float, v)) for k, *v in steps}


def _wall(out):
    return float(re.search(r"wall time\s+([\d.]+) s in all", out).group(1))


def _check_timeline(out, steps):
    spans, wall = _timeline(out), _wall(out)
    assert set(steps) <= set(spans), out
    for first, last, busy in spans.values():
        assert 0 <= first <= last <= wall + 0.01
        assert busy <= last - first + 0.011  # each printed to 0.01 s
    assert spans["read"][0] <= spans["write"][1]
    m = re.search(r"disk floor\s+([\d.]+) s .*; the command took ([\d.]+)x it", out)
    assert m, out
    floor, ratio = map(float, m.groups())
    assert abs(ratio * floor - wall) <= 0.005 * ratio + 0.01  # each printed to 0.01
    assert "task time" not in out  # intervals, not task seconds summed
    return spans


def test_summary_gives_each_step_as_a_wall_clock_interval(tmp_path, capsys, rng):
    """Threads of this process: four chunks read, sorted as runs, merged (the one-host
    k-way sort's output tasks) and written; each step an interval since the start."""
    x = rng.standard_normal(40_000).astype(np.float32)
    np.save(tmp_path / "in.npy", x)
    code, out, err = run(capsys, "sort", tmp_path / "in.npy", tmp_path / "o.npy",
                         "--device", "cpu", "--chunk-size", "10000", "--no-progress",
                         "--verify")
    assert code == 0, err
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.sort(x))
    spans = _check_timeline(out, ("read", "sort", "write", "verify"))
    start = float(re.search(r"start ([\d.]+) s;", out).group(1))
    assert spans["read"][0] >= start - 0.01  # the first read once the command started


def test_summary_timeline_of_the_disk_path(tmp_path, capsys, rng):
    """Through the disk: the runs read, sorted and written, then merged and written."""
    x = rng.standard_normal(200_000).astype(np.float32)
    np.save(tmp_path / "in.npy", x)
    code, out, err = run(capsys, "sort", tmp_path / "in.npy", tmp_path / "o.npy",
                         "--device", "cpu", "--no-progress", "--host-memory-limit",
                         str(3 * 4 * len(x) // 10))
    assert code == 0, err
    assert "larger than memory" in out
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.sort(x))
    spans = _check_timeline(out, ("read", "sort", "merge", "write"))
    assert spans["sort"][0] <= spans["merge"][0]  # the runs before their merge


# ------------------------------------------------------------------ --verify

@pytest.mark.parametrize("how", ["unsorted", "not a permutation"])
def test_verify_catches_a_corrupted_output_chunk(tmp_path, capsys, rng, monkeypatch, how):
    """Chunks long enough for the compiled checks (order and checksums in one pass over
    each chunk as it is made, before it is written): a wrong output is refused, exit 1,
    nothing published."""
    import dask.array as da

    import distsort
    from distsort.backends.cpu.numpy_backend import COMPILED_FROM
    n = 2 * COMPILED_FROM
    x = rng.permutation(n).astype(np.float32)  # distinct: any swap is visible
    np.save(tmp_path / "in.npy", x)
    real = distsort.sort

    def wrong_sort(keys, **kw):
        s = real(keys, **kw)
        at = len(s) - 3  # in the last chunk, far from its start
        if how == "unsorted":
            return da.concatenate([s[:at], s[at + 1:at + 2], s[at:at + 1],
                                   s[at + 2:]]).rechunk(s.chunks)
        return da.where(da.arange(len(s), chunks=s.chunks) == at, s[at - 1], s)
    monkeypatch.setattr(distsort, "sort", wrong_sort)
    code, _, err = run(capsys, "sort", tmp_path / "in.npy", tmp_path / "o.npy", "--device",
                       "cpu", "--chunk-size", str(COMPILED_FROM), "--no-progress", "--verify")
    assert code == 1, err
    assert ("out of order" in err) if how == "unsorted" else ("checksum" in err)
    assert not (tmp_path / "o.npy").exists()
    assert not [p for p in tmp_path.iterdir() if "distsort-tmp" in p.name]


# ------------------------------------------------------------------ zarr groups

@pytest.mark.parametrize("zarr_format", [2, 3])
def test_an_array_in_new_groups_creates_them(tmp_path, capsys, rng, zarr_format):
    """``new.zarr/arr`` and ``new.zarr/a/b/arr`` make the store and the groups (zarr 3,
    as zarr makes a new store); inside an existing store its format."""
    zarr = pytest.importorskip("zarr")
    x = rng.standard_normal(10_007)
    np.save(tmp_path / "in.npy", x)
    old = tmp_path / "old.zarr"
    zarr.open_group(str(old), mode="w", zarr_format=zarr_format)
    for store, inside, fmt in ((tmp_path / "new.zarr", "arr", 3),
                               (tmp_path / "deep.zarr", "a/b/arr", 3),
                               (old, "c/d/arr", zarr_format)):
        code, out, err = run(capsys, "sort", tmp_path / "in.npy", f"{store}/{inside}",
                             "--device", "cpu", "--no-progress", "--verify")
        assert code == 0, err
        group = zarr.open_group(str(store), mode="r")
        assert group.metadata.zarr_format == fmt
        assert np.array_equal(group[inside][:], np.sort(x))
        assert group[inside].metadata.zarr_format == fmt
    code, _, err = run(capsys, "sort", tmp_path / "in.npy", tmp_path / "none/n.zarr/arr")
    assert code == 2 and "none does not exist" in err
    code, _, err = run(capsys, "sort", tmp_path / "in.npy", tmp_path / "n.zarr/g/x.npy")
    assert code == 2 and "does not exist" in err
    assert not (tmp_path / "n.zarr").exists()


def test_a_group_path_through_an_array_is_refused(tmp_path, capsys, rng):
    """``store.zarr/arr/inner``, where ``arr`` is an array: no group can go there."""
    zarr = pytest.importorskip("zarr")
    x = rng.standard_normal(1000)
    np.save(tmp_path / "in.npy", x)
    zarr.open_array(str(tmp_path / "s.zarr/arr"), mode="w", shape=(3,), dtype="f8")
    code, _, err = run(capsys, "sort", tmp_path / "in.npy", tmp_path / "s.zarr/arr/inner/y")
    assert code == 2 and "cannot create the zarr group" in err, err
