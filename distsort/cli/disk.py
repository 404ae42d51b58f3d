"""The disk floor: how long reading the input and writing the output take at least,
from a short measurement of the disk the command reads and writes.

The rates are measured once per filesystem and kept for :data:`RATES_KEPT` seconds in
the user's cache directory (``$XDG_CACHE_HOME/distsort/disk-rates.json``, else
``~/.cache/...``), keyed by the device number (``st_dev``), the mount point and the
filesystem type of the input and of the output's directory: a run finds its floor there
instead of reading and writing 64 MiB (with a sync) before every sort.
``DISTSORT_DISK_RATES=measure`` measures every run (and refreshes the cache).
"""
from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from distsort.cli.temporaries import temporary_name

#: Bytes read and written to measure the disk: enough for a sequential rate, small
#: enough (a fraction of a second on a disk of 1 GB/s) not to weigh on the run that
#: measures it.
PROBE = 64 << 20
#: Seconds a filesystem's measured rates are used by later runs before they are measured
#: again: a day (a disk's rates change with its fill and its neighbours, not run to run).
RATES_KEPT = 24 * 3600
#: Bytes per read or write call of the probe (and of the readers of distsort.cli.files).
BLOCK = 16 << 20


def _read_rate(path, nbytes):
    buf = bytearray(min(BLOCK, nbytes))
    t0 = time.perf_counter()
    done = 0
    with open(path, "rb", buffering=0) as f:
        while done < nbytes:
            n = f.readinto(buf)
            if not n:
                break
            done += n
    return done / max(time.perf_counter() - t0, 1e-9)


def _write_rate(directory, nbytes):
    # Named with its owner: one a killed run leaves is removed by the next run there.
    path = Path(temporary_name(os.path.join(directory, "disk"), "probe"))
    block = memoryview(os.urandom(min(BLOCK, nbytes)))  # not compressible, as data is
    t0 = time.perf_counter()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            done = 0
            while done < nbytes:
                done += os.write(fd, block[:nbytes - done])
            os.fdatasync(fd)
        finally:
            os.close(fd)
        return done / max(time.perf_counter() - t0, 1e-9)
    finally:
        path.unlink(missing_ok=True)


def rates_file():
    """Where the measured rates are kept: the user's cache directory."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "distsort" / "disk-rates.json"


def _mounts():
    """``[(mount point, filesystem type)]`` of this process's mounts (Linux), else []."""
    try:
        with open("/proc/self/mounts") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    # Device, mount point, type, ...; spaces and other bytes escaped as octal (``\040``).
    fields = [line.split()[1:3] for line in lines]
    return [(f[0].encode().decode("unicode_escape"), f[-1]) for f in fields if f[1:]]


def filesystem_key(path):
    """The key of ``path``'s filesystem in the cache: its device number, mount point and
    type (a device number alone is reused by another filesystem mounted later).

    >>> filesystem_key("/").startswith(f"{os.stat('/').st_dev}:/:")
    True
    """
    real = os.path.realpath(path)
    mount, kind = "", ""
    for point, fstype in _mounts():  # the longest mount point above the path
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(mount):
            mount, kind = point, fstype
    return f"{os.stat(real).st_dev}:{mount}:{kind}"


def _load_rates(path):
    with contextlib.suppress(OSError, ValueError):
        rates = json.loads(path.read_text())
        if isinstance(rates, dict):
            return rates
    return {}


def _cached(rates, kind, key, now):
    """The rate of ``kind`` ("read", "write") kept for ``key``, where still fresh."""
    entry = rates.get(kind, {}).get(key)
    with contextlib.suppress(TypeError, ValueError):
        rate, when = float(entry[0]), float(entry[1])
        if rate > 0 and 0 <= now - when <= RATES_KEPT:
            return rate, when
    return None


def _store_rates(path, rates):
    """Write the cache whole under a temporary name, then rename it (runs at once leave
    one of their files, never a torn one); a cache that cannot be written is skipped."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(temporary_name(str(path), "tmp"))
        try:
            tmp.write_text(json.dumps(rates, indent=1) + "\n")
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)


def disk_rates(src, out_dir, size, cache=None):
    """``(read, write, measured_at)``: bytes/s reading ``src``'s filesystem and writing
    ``out_dir``'s, from the cache where both are fresh, else measured on ``size`` bytes
    (the older measurement's time where they came from the cache at different times)."""
    cache = rates_file() if cache is None else cache
    keys = filesystem_key(src), filesystem_key(out_dir)
    rates, now = _load_rates(cache), time.time()
    remeasure = os.environ.get("DISTSORT_DISK_RATES") == "measure"
    found = [None if remeasure else _cached(rates, kind, key, now)
             for kind, key in zip(("read", "write"), keys, strict=True)]
    if None not in found:
        return found[0][0], found[1][0], min(found[0][1], found[1][1])
    read, write = _read_rate(src, size), _write_rate(out_dir, size)
    for kind, key, rate in zip(("read", "write"), keys, (read, write), strict=True):
        rates.setdefault(kind, {})[key] = [rate, now]
    _store_rates(cache, rates)
    return read, write, now


def disk_floor(src, out_dir, nbytes, probe=PROBE, cache=None):
    """Read and write rates (bytes/s) of the input's filesystem and of the output
    directory's, and the floor: ``nbytes`` read plus ``nbytes`` written at those rates.

    The rates come from the cache (:func:`rates_file`, or ``cache``) where both were
    measured within :data:`RATES_KEPT` seconds; otherwise they are measured on up to
    ``probe`` bytes of the input (it may be in the page cache) and of a scratch file in
    the output's directory (synced), and kept.  ``age``: seconds since they were
    measured (0 for this run).  None where the input is not a file (zarr) or the
    measurement fails.

    >>> import tempfile, numpy as np
    >>> d = tempfile.mkdtemp(); np.save(d + "/x.npy", np.arange(1000))
    >>> f = disk_floor(d + "/x.npy", d, 8000, cache=Path(d) / "rates.json")
    >>> sorted(f), f["floor"] > 0, f["age"]
    (['age', 'floor', 'read', 'write'], True, 0.0)
    >>> disk_floor(d + "/x.npy", d, 8000, cache=Path(d) / "rates.json")["age"] >= 0
    True
    """
    if not os.path.isfile(src):
        return None
    size = max(1, min(probe, nbytes, os.path.getsize(src)))
    t0 = time.time()
    try:
        read, write, measured = disk_rates(src, out_dir, size, cache)
    except OSError:  # a measurement, never a reason to fail the sort
        return None
    return {"read": read, "write": write, "floor": nbytes / read + nbytes / write,
            "age": max(0.0, round(t0 - measured, 3)) if measured < t0 else 0.0}
