"""``distsort sort`` on .npy files against the disk and a one-process NumPy sort.

For each size (float32 .npy, fresh random data) it measures, in one run (``--steps``
picks some):

* ``copy``: ``dd bs=64M conv=fdatasync`` of the input (read all, write all: the disk floor);
* ``numpy``: one process, ``np.load`` + ``ndarray.sort`` + ``np.save`` (+ fsync);
* ``distsort``: ``distsort sort IN OUT`` (the whole command: cluster start included);
* ``distsort --verify``: the same with ``--verify``;
* ``help`` (only where ``--steps`` names it): ``distsort --help``, the command's start-up.

Every output is compared element for element with NumPy's sort of the input.  The
machine's load average is recorded before each step (a busy machine slows every
column).  Before each step the disk's dirty pages are written (``sync``), so that no
step pays for the write-back of the one before; the page cache is not dropped (that
needs root): each step reads a file that the step before it may have cached, as
commands run in a row would.  With ``--repeat N`` every step runs N times, in an order
rotated each time, and the medians and the minima are reported (on a machine
that others load, the minimum is the cost of the step itself), with the CPU seconds of
each run (user + system, the process and its children).  The table is
printed last and the JSON is written to
``benchmarks/results/cli_io_<device>_<date>.json`` (or ``--out``).

Examples
--------
On a CPU machine (the CI-sized scenario)::

    python benchmarks/cli_io.py --sizes 512MiB 2GiB

On a GPU host (16 GiB of float32; local disk under --dir)::

    python benchmarks/cli_io.py --sizes 16GiB --dir /local/scratch

Out of core on one GPU, the input in memory (a tmpfs) where the disk holds the output
but not both::

    CUDA_VISIBLE_DEVICES=0 python benchmarks/cli_io.py --sizes 64GiB --no-numpy \
        --steps copy distsort --dir /local/scratch --input-dir /dev/shm \
        -- --device-memory-limit 8GB
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from driver import timed_command

HERE = Path(__file__).resolve().parent


def parse_size(text):
    from dask.utils import parse_bytes
    return int(parse_bytes(text))


def make_input(path, nbytes, seed, threads=None):
    """A float32 .npy of fresh random data, written in pieces (bounded memory) by
    threads, each piece from its own generator spawned from ``seed``."""
    from concurrent.futures import ThreadPoolExecutor
    n = nbytes // 4
    m = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n,))
    step = 1 << 26
    starts = range(0, n, step)
    seeds = np.random.SeedSequence(seed).spawn(len(starts))

    def fill(i):
        lo = starts[i]
        hi = min(n, lo + step)
        m[lo:hi] = np.random.default_rng(seeds[i]).standard_normal(hi - lo, dtype=np.float32)

    with ThreadPoolExecutor(threads or min(8, os.cpu_count() or 1)) as pool:
        list(pool.map(fill, range(len(starts))))
    m.flush()
    return n


def numpy_baseline(src, dst):
    code = ("import numpy as np, os, sys\n"
            "a = np.load(sys.argv[1]); a.sort(); np.save(sys.argv[2], a)\n"
            "fd = os.open(sys.argv[2], os.O_RDONLY); os.fsync(fd); os.close(fd)\n")
    return timed_command([sys.executable, "-c", code, str(src), str(dst)])[0]


def check_sorted(src, out, reference=None):
    """Element for element against NumPy's sort of ``src`` (by value: NumPy leaves -0.0 and
    0.0 in any order, distsort puts -0.0 first)."""
    ref = reference if reference is not None else np.sort(np.load(src))
    got = np.load(out, mmap_mode="r")
    if got.shape != ref.shape or not np.array_equal(got, ref, equal_nan=True):
        raise SystemExit(f"{out}: not numpy.sort of {src}")
    return ref


def check_streaming(src, out, step=1 << 26):
    """Without the NumPy reference (inputs too large to sort in one process in time):
    ``out`` sorted (block by block, by threads, and across the cuts) and holding the
    same bit patterns as ``src`` (count and an order-independent 64-bit checksum,
    distsort.graph.verify's hash)."""
    from concurrent.futures import ThreadPoolExecutor

    from distsort.graph.verify import summarize
    a, b = np.load(src, mmap_mode="r"), np.load(out, mmap_mode="r")
    if a.shape != b.shape:
        raise SystemExit(f"{out}: {b.shape} elements, input {a.shape}")

    def block(lo):
        part = np.asarray(b[lo:lo + step + 1])
        ordered = bool(np.all(part[1:] >= part[:-1]))
        return (ordered, summarize(np.asarray(a[lo:lo + step])).keys,
                summarize(part[:step]).keys)

    with ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:
        found = list(pool.map(block, range(0, len(a), step)))
    for i, (ordered, _, _) in enumerate(found):
        if not ordered:
            raise SystemExit(f"{out}: not sorted near element {i * step}")
    if sum(f[1] for f in found) % 2**64 != sum(f[2] for f in found) % 2**64:
        raise SystemExit(f"{out}: not a permutation of {src} (checksums differ)")


STEPS = ("copy", "numpy", "distsort", "distsort_verify", "help")
#: The steps timed where ``--steps`` is not given.
DEFAULT_STEPS = STEPS[:4]


def load():
    return round(os.getloadavg()[0], 2)


def distsort_cmd(extra):
    return [sys.executable, "-m", "distsort.cli", "sort", *extra]


def summary_lines(stdout):
    """The command's summary (the lines after 'done'), kept in the JSON."""
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("distsort sort: done"):
            return [s.strip() for s in lines[i + 1:] if s.strip()]
    return []


def step_order(steps, r):
    """The timed steps of repeat ``r``: the copy first, then the others, rotated by one
    each repeat, so that no step always follows the same one (the disk's write-back of
    the step before, and the page cache it leaves, favour or slow the next).

    >>> [step_order(("copy", "numpy", "distsort", "distsort_verify"), r)[1:] for r in (0, 1)]
    [['numpy', 'distsort', 'distsort_verify'], ['distsort', 'distsort_verify', 'numpy']]
    >>> step_order(("distsort",), 1)
    ['distsort']
    """
    rest = list(steps[1:])
    k = r % max(1, len(rest))
    return [steps[0], *rest[k:], *rest[:k]]


def run_step(step, src, out, args, row, ref):
    """Time one step (the output removed and the disk's dirty pages written first) and
    check its output against ``ref`` (NumPy's sort, None until one is made); returns its
    seconds and the reference."""
    if out.exists():
        out.unlink()
    os.sync()
    row.setdefault(f"load_{step}", []).append(load())
    if step == "copy":
        return timed_command(["dd", f"if={src}", f"of={out}", "bs=64M", "conv=fdatasync",
                      "status=none"])[0], ref
    if step == "help":
        return timed_command([sys.executable, "-m", "distsort.cli", "--help"])[0], ref
    if step == "numpy":
        return numpy_baseline(src, out), check_sorted(src, out, ref)
    extra = [str(src), str(out), "--no-progress", *args.distsort_args]
    if step == "distsort_verify":
        extra.append("--verify")
    seconds, stdout = timed_command(distsort_cmd(extra))
    row[f"{step}_summary"] = summary_lines(stdout)
    row.setdefault(f"{step}_summaries", []).append(row[f"{step}_summary"])
    if args.no_numpy:
        check_streaming(src, out)
    else:
        ref = check_sorted(src, out, ref)
    return seconds, ref


def measure(size, workdir, args, indir=None):
    src, out = (indir or workdir) / "in.npy", workdir / "out.npy"
    n = make_input(src, size, args.seed)
    row = {"bytes": n * 4, "elements": n, "dtype": "float32", "repeats": args.repeat}
    steps = tuple(s for s in STEPS if s in args.steps and not (args.no_numpy and s == "numpy"))
    row["check"] = "sorted + checksum" if args.no_numpy else "element for element with NumPy"
    ref = None
    for r in range(args.repeat):
        for step in step_order(steps, r):
            before = children_cpu()
            seconds, ref = run_step(step, src, out, args, row, ref)
            row.setdefault(f"{step}_runs", []).append(seconds)
            row.setdefault(f"{step}_cpu_runs", []).append(round(children_cpu() - before, 3))
            print(f"{n * 4 / 2**20:.0f} MiB {step}: {seconds:.2f} s", file=sys.stderr,
                  flush=True)
    for p in (src, out):
        p.unlink(missing_ok=True)
    for step in steps:  # medians and minima; the runs and loads stay in the row
        row[f"{step}_s"] = float(np.median(row[f"{step}_runs"]))
        row[f"{step}_min_s"] = float(min(row[f"{step}_runs"]))
        row[f"{step}_cpu_min_s"] = float(min(row[f"{step}_cpu_runs"]))
        row[f"load_{step}"] = max(row[f"load_{step}"])
    for stat in ("", "_min"):
        row.update(ratios(row, stat))
    row.update(floor_ratios(row.get("distsort_summary", []), row.get("distsort_s")))
    return row


def children_cpu():
    """CPU seconds (user + system) of this process's children that ended so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def ratios(row, stat=""):
    """The row's ratios of the medians (``stat=""``) or of the minima (``"_min"``).

    >>> ratios({"numpy_min_s": 2.0, "distsort_min_s": 2.5, "distsort_verify_min_s": 2.6},
    ...        "_min")
    {'distsort_over_numpy_min': 1.25, 'verify_overhead_min': 0.04}
    """
    found = {}
    for name, (a, b, minus) in {"distsort_over_numpy": ("distsort", "numpy", 0),
                                "distsort_over_copy": ("distsort", "copy", 0),
                                "verify_overhead": ("distsort_verify", "distsort", 1)}.items():
        top, bottom = row.get(f"{a}{stat}_s"), row.get(f"{b}{stat}_s")
        if top is not None and bottom:
            found[f"{name}{stat}"] = round(top / bottom - minus, 3)
    return found


def floor_ratios(summary, seconds):
    """The command's own wall time and disk floor (from its summary's last run) and
    their ratios: ``command_wall_over_disk_floor``, and ``distsort_over_disk_floor``
    for ``seconds`` (the process as this benchmark timed it).

    >>> r = floor_ratios(["wall time  15.68 s in all; start 2.45 s",
    ...                   "disk floor 16.89 s to read and write it once"], 16.36)
    >>> r["command_wall_over_disk_floor"], r["distsort_over_disk_floor"]
    (0.928, 0.969)
    """
    found = {}
    for line, key in (("wall time", "command_wall_s"), ("disk floor", "command_disk_floor_s")):
        for s in summary:
            if s.startswith(line):
                found[key] = float(s[len(line):].split()[0])
    if len(found) < 2:
        return {}
    floor = found["command_disk_floor_s"]
    found["command_wall_over_disk_floor"] = round(found["command_wall_s"] / floor, 3)
    if seconds:
        found["distsort_over_disk_floor"] = round(seconds / floor, 3)
    return found


def table(rows):
    head = (f"{'size':>9} {'copy s':>8} {'numpy s':>8} {'distsort s':>11} {'--verify s':>11}"
            f" {'ds/numpy':>9} {'ds/copy':>8} {'verify +':>9} {'load':>6}")
    lines = [head]
    nan = float("nan")
    for r in rows:
        lines.append(f"{r['bytes'] / 2**20:>6.0f}MiB {r.get('copy_s', nan):>8.2f} "
                     f"{r.get('numpy_s', nan):>8.2f} "
                     f"{r.get('distsort_s', nan):>11.2f} {r.get('distsort_verify_s', nan):>11.2f} "
                     f"{r.get('distsort_over_numpy', nan):>9.2f} "
                     f"{r.get('distsort_over_copy', nan):>8.2f} "
                     f"{100 * r.get('verify_overhead', nan):>8.1f}% "
                     f"{r.get('load_distsort', nan):>6.2f}")
    return "\n".join(lines)


def device_name(args):
    if args.device_name:
        return args.device_name
    try:
        import cupy
        n = cupy.cuda.runtime.getDeviceCount()
        name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
        return f"{n}x{name.replace('NVIDIA ', '').replace(' ', '-')}"
    except Exception:  # no CuPy or no GPU: a CPU machine
        return f"cpu-{os.cpu_count()}cores"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", nargs="+", default=["512MiB", "2GiB"])
    p.add_argument("--dir", help="where the files go (default: a temporary directory)")
    p.add_argument("--seed", type=int, default=None, help="default: fresh, recorded")
    p.add_argument("--repeat", type=int, default=1,
                   help="timed runs of each step, in rotated order (medians reported)")
    p.add_argument("--device-name", help="name in the results (default: detected)")
    p.add_argument("--no-numpy", action="store_true",
                   help="skip the one-process NumPy baseline (inputs too large for it) and "
                        "check the outputs by order and checksum instead")
    p.add_argument("--steps", nargs="+", choices=STEPS, default=list(DEFAULT_STEPS),
                   help="the steps to time (default: all but help)")
    p.add_argument("--input-dir",
                   help="where the input goes (default: with the outputs under --dir), e.g. "
                        "a tmpfs where the disk holds the outputs but not the input too")
    p.add_argument("--tag", default="", help="suffix of the result's name (e.g. before)")
    p.add_argument("--out",
                   help="JSON path (default: benchmarks/results/cli_io_<device>_<date>.json)")
    p.add_argument("distsort_args", nargs=argparse.REMAINDER,
                   help="after --: more options for distsort sort")
    args = p.parse_args(argv)
    args.distsort_args = [a for a in args.distsort_args if a != "--"]
    if args.seed is None:
        args.seed = int.from_bytes(os.urandom(4), "little")
    base = Path(args.dir) if args.dir else Path(tempfile.gettempdir())
    workdir = Path(tempfile.mkdtemp(prefix="distsort-cli-io-", dir=base))
    indir = (Path(tempfile.mkdtemp(prefix="distsort-cli-io-in-", dir=args.input_dir))
             if args.input_dir else None)
    rows = []
    try:
        for s in args.sizes:
            rows.append(measure(parse_size(s), workdir, args, indir))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    finally:
        for d in (workdir, indir):
            if d is not None:
                shutil.rmtree(d, ignore_errors=True)
    name = device_name(args)
    date = datetime.date.today().isoformat()
    results = Path(os.environ.get("DISTSORT_RESULTS") or HERE / "results")
    out = Path(args.out) if args.out else (
        results / f"cli_io_{name}_{date}{'_' + args.tag if args.tag else ''}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "scenario": "cli_io", "device": name, "date": date,
        "host": platform.node(), "cpus": os.cpu_count(), "seed": args.seed,
        "distsort_args": args.distsort_args, "input_dir": args.input_dir,
        "rows": rows}, indent=1) + "\n")
    print(f"wrote {out}")
    print(table(rows))


if __name__ == "__main__":
    main()
