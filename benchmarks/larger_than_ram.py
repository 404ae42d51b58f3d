"""``distsort sort`` on a float32 .npy larger than this machine's memory, against a copy
of the file with ``dd``.

In this order (the disk is the limit, and a second copy of the data would not fit it):

1. a float32 .npy of fresh random data, ``--ram-factor`` times this machine's memory
   (1.25: 30 GB on 24 GB), written in pieces;

then ``--repeat`` times (the disk's speed drifts from minute to minute, and each sort is
set against the copy just before it):

2. the disk's own rates: 2 GiB of the input read and 2 GiB written with ``O_DIRECT``;
3. ``dd if=INPUT of=COPY bs=64M conv=fdatasync``: the floor of any sort that reads
   the file and writes its result; the copy is deleted at once;
4. ``distsort sort INPUT OUTPUT --device cpu``: the plan sees the data outgrow the
   memory available and sorts through the disk (runs, as many kept in memory as fit,
   one k-way merge); its summary is kept;
5. the output checked by streaming it (sorted within and across blocks, the count, an
   order-free 64-bit checksum against the input's: ``cli_io.check_streaming``).

The design moves the data through the disk once each way (read the input, write the
output), and the runs not kept in memory once more each way (written, read back):
``2 - m`` times a copy's bytes, with a share ``m`` of the runs kept.  The row reports
the command's time over ``dd``'s, the floor of the design at the rates of step 2, and the
sort's CPU seconds over the cores (its floor where the disk keeps up).
Both files are removed at the end (``--keep`` keeps them).

Examples
--------
On the 2-core CPU machine (30 GB; about 70 GB free under the directory)::

    python benchmarks/larger_than_ram.py --dir /scratch

A smoke test (1 GiB sorted within 64 MB)::

    python benchmarks/larger_than_ram.py --quick
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from cli_io import check_streaming, make_input
from driver import parser, print_table, save_rows, timed_command

PROBE = 2 << 30


def direct_rates(src, directory, nbytes=PROBE):
    """Read and write rates (bytes/s) of the disk, past the page cache (``O_DIRECT``)."""
    nbytes = min(nbytes, os.path.getsize(src) // (1 << 20) * (1 << 20))
    count = nbytes >> 20
    read, _ = timed_command(["dd", f"if={src}", "of=/dev/null", "bs=1M", f"count={count}",
                     "iflag=direct"])
    scratch = Path(directory) / ".larger_than_ram-probe"
    try:
        write, _ = timed_command(["dd", "if=/dev/zero", f"of={scratch}", "bs=1M", f"count={count}",
                          "oflag=direct", "conv=fdatasync"])
    finally:
        scratch.unlink(missing_ok=True)
    return nbytes / read, nbytes / write


def sort_command(src, out, extra):
    return [sys.executable, "-m", "distsort.cli", "sort", str(src), str(out), "--device", "cpu",
            "--no-progress", *extra]


def loadavg():
    return round(os.getloadavg()[0], 2)


def measure(size, workdir, args):
    """The input made once, then ``args.repeat`` times in turn: the disk's rates, a
    ``dd`` copy and the sort, its output checked (the disk's speed drifts from minute
    to minute: each sort is set against the copy just before it)."""
    src, copy, out = (Path(workdir) / n for n in ("larger_than_ram_in.npy",
                                                  "larger_than_ram_copy.npy",
                                                  "larger_than_ram_out.npy"))
    base = {"bytes": size, "ram": _ram(), "disk_free_before": shutil.disk_usage(workdir).free}
    rows = []
    try:
        t0 = time.perf_counter()
        base["elements"] = make_input(src, size, args.seed, threads=2)
        subprocess.run(["sync"], check=True)
        base["make_input_s"] = round(time.perf_counter() - t0, 1)
        for turn in range(args.repeat):
            out.unlink(missing_ok=True)
            rows.append(_turn(src, copy, out, dict(base, turn=turn), args))
    finally:
        for p in (copy,) + (() if args.keep else (src, out)):
            p.unlink(missing_ok=True)
    return rows


def _turn(src, copy, out, row, args):
    """One copy and one sort of ``src`` (``measure``), the sort's output checked."""
    size = row["bytes"]
    read, write = direct_rates(src, Path(src).parent)
    row.update(read_Bps=read, write_Bps=write)
    row["load_dd"] = loadavg()
    row["dd_s"], _ = timed_command(["dd", f"if={src}", f"of={copy}", "bs=64M",
                                    "conv=fdatasync"])
    copy.unlink()
    subprocess.run(["sync"], check=True)
    row["load_sort"] = loadavg()
    before, stalled = _child_cpu(), _cpu_stall()
    row["sort_s"], stdout, row["sort_peak_rss"] = timed_command(
        sort_command(src, out, args.distsort_args), peak=True)
    # CPU seconds (user, system) the sort took: over its wall time, the cores it got
    after = _child_cpu()
    row["sort_user_s"] = round(after[0] - before[0], 1)
    row["sort_sys_s"] = round(after[1] - before[1], 1)
    row["sort_cpu_s"] = round(sum(after) - sum(before), 1)
    row["sort_cores"] = round(row["sort_cpu_s"] / row["sort_s"], 2)
    # Share of the sort's wall time in which some runnable task of the machine
    # (this sort's or another process's) waited for a core (Linux PSI)
    if stalled is not None:
        row["cpu_some_wait"] = round((_cpu_stall() - stalled) / 1e6 / row["sort_s"], 2)
    row["summary"] = [line.strip() for line in stdout.splitlines() if line.startswith("  ")]
    row["disk_path"] = any("larger than memory" in s for s in row["summary"])
    t1 = time.perf_counter()
    check_streaming(src, out)
    row["check_s"] = round(time.perf_counter() - t1, 1)
    row["checked"] = "sorted within and across blocks, count, order-free checksum"
    row["ratio_to_dd"] = row["sort_s"] / row["dd_s"]
    # the design: input read, the runs not kept in memory written and read, output written
    found = re.search(r"(\d+) sorted runs(?:, (\d+) kept in memory)?", " ".join(row["summary"]))
    row["runs"] = int(found.group(1)) if found else None
    row["kept_share"] = int(found.group(2)) / row["runs"] if found and found.group(2) else 0.0
    passes = 2 - row["kept_share"]
    row["floor_s"] = passes * size / row["read_Bps"] + passes * size / row["write_Bps"]
    row["ratio_to_floor"] = row["sort_s"] / row["floor_s"]
    row["copy_floor_s"] = size / row["read_Bps"] + size / row["write_Bps"]
    # CPU seconds over the cores: the floor where the disk keeps up
    row["cpu_floor_s"] = row["sort_cpu_s"] / (os.cpu_count() or 1)
    return row


def _child_cpu():
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime, r.ru_stime


def _cpu_stall():
    """Microseconds in which some task waited for a CPU (``/proc/pressure/cpu``'s
    ``some total``), or None where the kernel does not say."""
    try:
        with open("/proc/pressure/cpu") as f:
            return int(f.readline().rsplit("total=", 1)[1])
    except (OSError, IndexError, ValueError):
        return None


def _ram():
    import psutil
    return psutil.virtual_memory().total


def main(argv=None):
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--ram-factor", type=float, default=1.25,
                   help="the input's size over this machine's memory (default 1.25)")
    p.add_argument("--dir", help="where the files go (default: a temporary directory)")
    p.add_argument("--seed", type=int, default=None, help="default: fresh")
    p.add_argument("--keep", action="store_true", help="keep the input and the output")
    p.add_argument("--repeat", type=int, default=1,
                   help="copies and sorts of the input, in turns (default 1)")
    p.add_argument("distsort_args", nargs="*", help="more arguments of distsort sort")
    args = p.parse_args(argv)
    size = int(_ram() * args.ram_factor) // (64 << 20) * (64 << 20)
    if args.quick:
        size, args.distsort_args = 1 << 30, args.distsort_args + ["--host-memory-limit", "64MB"]
    if args.seed is None:
        args.seed = int(np.random.SeedSequence().entropy % 2**32)
    workdir = args.dir or tempfile.mkdtemp(prefix="larger_than_ram-")
    free = shutil.disk_usage(workdir).free
    if free < 2.05 * size:
        raise SystemExit(f"{workdir}: {free / 1e9:.1f} GB free; the input, then a copy or the "
                         f"output beside it, need {2.05 * size / 1e9:.1f} GB")
    rows = measure(size, workdir, args)
    for row in rows:
        row["seed"] = args.seed
    print_table(rows, [("bytes", "{:,}"), ("dd_s", "{:.1f}"), ("sort_s", "{:.1f}"),
                       ("ratio_to_dd", "{:.2f}"), ("floor_s", "{:.1f}"),
                       ("cpu_floor_s", "{:.1f}"), ("sort_cores", "{}"),
                       ("load_sort", "{}"), ("cpu_some_wait", "{}")])
    for line in rows[-1]["summary"]:
        print(line)
    path = save_rows(rows, "larger_than_ram", "cpu-2cores", args.out,
                     note="the input larger than the machine's memory; dd conv=fdatasync "
                          "copy as the floor; page cache not dropped")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
