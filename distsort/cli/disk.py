"""The disk floor: how long reading the input and writing the output take at least,
from a short measurement of the disk the command reads and writes."""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from distsort.cli.temporaries import temporary_name

#: Bytes read and written to measure the disk: enough for a sequential rate, small
#: enough (a fraction of a second on a disk of 1 GB/s) to measure on every run.
PROBE = 64 << 20
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
    block = np.random.default_rng().integers(0, 256, min(BLOCK, nbytes), dtype=np.uint8)
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


def disk_floor(src, out_dir, nbytes, probe=PROBE):
    """Read and write rates (bytes/s) measured on up to ``probe`` bytes of the input
    (it may be in the page cache) and of a scratch file in the output's directory
    (synced), and the floor: ``nbytes`` read plus ``nbytes`` written at those rates.

    None where the input is not a file (zarr) or the measurement fails.

    >>> import tempfile, numpy as np
    >>> d = tempfile.mkdtemp(); np.save(d + "/x.npy", np.arange(1000))
    >>> f = disk_floor(d + "/x.npy", d, 8000)
    >>> sorted(f), f["floor"] > 0
    (['floor', 'read', 'write'], True)
    """
    if not os.path.isfile(src):
        return None
    size = max(1, min(probe, nbytes, os.path.getsize(src)))
    try:
        read, write = _read_rate(src, size), _write_rate(out_dir, size)
    except OSError:  # a measurement, never a reason to fail the sort
        return None
    return {"read": read, "write": write, "floor": nbytes / read + nbytes / write}
