"""The ``distsort`` command: sort .npy and zarr files, run a demo, run the benchmarks.

Examples (shell)::

    distsort sort data.npy sorted.npy --verify
    distsort sort data.npy order.npy --argsort
    distsort sort keys.zarr keys_sorted.zarr --values vals.npy --values-output vals_sorted.npy
    distsort sort big.npy big_sorted.npy --scheduler-file ~/scheduler.json --report rep.html
    distsort demo --size 1GiB --dtype uint32
    distsort bench

Files are read lazily (``.npy`` memory-mapped, zarr chunk by chunk) and written
to a temporary name in the output's directory that is renamed only when the
whole output is written (and verified, with ``--verify``): an interrupted or
failed run leaves no output that looks complete, and never touches the input.

Exit status (see :data:`EXIT_CODES`): 0 ok, 1 verification failed, 2 bad usage
or input, 3 runtime failure, 130 interrupted (SIGINT or SIGTERM).
"""
from __future__ import annotations

import argparse
import contextlib
import errno
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .verify import key_hashes, pair_hashes

OK, VERIFY_FAILED, BAD_INPUT, RUNTIME_FAILURE, INTERRUPTED = 0, 1, 2, 3, 130
EXIT_CODES = {OK: "success", VERIFY_FAILED: "verification failed (no output is left)",
              BAD_INPUT: "bad usage or input (missing/unreadable file, unsupported dtype, "
                         "existing output without --overwrite)",
              RUNTIME_FAILURE: "runtime failure (worker error, disk full, lost cluster)",
              INTERRUPTED: "interrupted (SIGINT or SIGTERM); temporary output removed"}


class CLIError(Exception):
    """An error reported as one line on stderr, with an exit code."""

    def __init__(self, message, code=BAD_INPUT):
        super().__init__(message)
        self.code = code


class Interrupted(BaseException):
    """SIGTERM, handled like Ctrl-C (a BaseException, so that nothing swallows it)."""


# --------------------------------------------------------------------------- sizes

def parse_chunk_size(text):
    """``("bytes", n)`` for ``"256MiB"``, ``("elements", n)`` for ``"1000000"``.

    >>> parse_chunk_size("256MiB"), parse_chunk_size("1_000_000")
    (('bytes', 268435456), ('elements', 1000000))
    """
    from dask.utils import parse_bytes

    text = text.strip().replace("_", "")
    try:
        kind, n = ("elements", int(text)) if text.isdigit() else ("bytes", parse_bytes(text))
    except (ValueError, TypeError):
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 256MiB or 1000000)")
    if n < 1:
        raise argparse.ArgumentTypeError(f"chunk size must be positive, got {text!r}")
    return kind, int(n)


def parse_bytes_arg(text):
    from dask.utils import parse_bytes
    try:
        return int(parse_bytes(text))
    except (ValueError, TypeError):
        raise argparse.ArgumentTypeError(f"not a size in bytes: {text!r} (use e.g. 2GiB)")


def fmt_bytes(n):
    from dask.utils import format_bytes
    return format_bytes(int(n))


# --------------------------------------------------------------------------- files

def file_kind(path):
    """``"npy"`` or ``"zarr"``, from the name (a zarr array is a directory ``*.zarr``)."""
    name = str(path).rstrip("/")
    if name.endswith(".npy"):
        return "npy"
    if name.endswith(".zarr"):
        return "zarr"
    raise CLIError(f"{path}: unsupported file type (use a .npy file or a .zarr directory)")


@dataclass(frozen=True)
class NpyFile:
    """A 1-D array in a .npy file, read and written by slices.

    It pickles as its path and layout (never its data), so tasks on any worker
    that sees the file can use it; ``dask.array.from_array`` reads through it.
    """

    path: str
    offset: int
    dtype: np.dtype
    shape: tuple

    @property
    def ndim(self):
        return 1

    @property
    def size(self):
        return self.shape[0]

    def _map(self):
        return np.memmap(self.path, dtype=self.dtype, mode="r", offset=self.offset,
                         shape=self.shape)

    def __getitem__(self, key):
        # A copy in native byte order: the chunk must not pin the mapping, and
        # distsort compares bit patterns in native order.
        return np.array(self._map()[key], dtype=self.dtype.newbyteorder("="))

    def take(self, index):
        return np.array(self._map()[index], dtype=self.dtype.newbyteorder("="))

    def __setitem__(self, key, value):
        """Write ``value`` at ``key`` (a slice) with pwrite: a full disk raises
        OSError(ENOSPC) instead of the SIGBUS a memory-mapped write would get."""
        (key,) = key if isinstance(key, tuple) else (key,)
        start, stop, step = key.indices(self.shape[0])
        if step != 1:
            raise ValueError("NpyFile writes contiguous slices only")
        data = memoryview(np.ascontiguousarray(value, dtype=self.dtype)).cast("B")
        if len(data) != (stop - start) * self.dtype.itemsize:
            raise ValueError(f"writing {len(data)} bytes into {stop - start} elements")
        fd = os.open(self.path, os.O_WRONLY)
        try:
            pos = self.offset + start * self.dtype.itemsize
            while data:
                n = os.pwrite(fd, data, pos)
                data, pos = data[n:], pos + n
        finally:
            os.close(fd)


def open_npy(path):
    """The layout of a 1-D .npy file, from its header; the data is not read."""
    try:
        m = np.load(path, mmap_mode="r")
    except ValueError as e:  # pickled objects, or not a .npy file
        raise CLIError(f"{path}: not a readable .npy array ({e})")
    if not isinstance(m, np.memmap):
        raise CLIError(f"{path}: not a .npy array file")
    if m.ndim != 1:
        raise CLIError(f"{path}: distsort sort sorts 1-D arrays; this one has shape {m.shape}")
    return NpyFile(str(Path(path).resolve()), int(m.offset), m.dtype, m.shape)


@dataclass(frozen=True)
class ZarrFile:
    """A 1-D zarr (v3) array, opened read-only wherever it is used."""

    path: str

    def open(self):
        import zarr
        return zarr.open_array(self.path, mode="r")

    def take(self, index):
        order = np.argsort(index, kind="stable")
        out = np.empty(len(index), dtype=self.open().dtype)
        out[order] = self.open().get_coordinate_selection(index[order])
        return out


def open_zarr(path):
    try:
        import zarr
    except ImportError:
        raise CLIError("zarr files need the zarr package: pip install 'zarr>=3'")
    try:
        z = zarr.open_array(path, mode="r")
    except Exception as e:  # zarr raises several types for "not an array here"
        raise CLIError(f"{path}: not a readable zarr array ({type(e).__name__}: {e})")
    if z.ndim != 1:
        raise CLIError(f"{path}: distsort sort sorts 1-D arrays; this one has shape {z.shape}")
    return ZarrFile(str(Path(path).resolve())), z.dtype, z.shape


@dataclass
class Source:
    """An input array on disk: a reader for tasks, its dtype and length."""

    path: str
    kind: str
    reader: object
    dtype: np.dtype
    n: int

    @property
    def nbytes(self):
        return self.n * self.dtype.itemsize

    def array(self, chunk):
        import dask.array as da
        if self.kind == "npy":
            x = da.from_array(self.reader, chunks=(chunk,), meta=np.empty(0, self.dtype),
                              name="distsort-read-" + _token(self.path))
        else:
            x = da.from_zarr(self.reader.open(), chunks=(chunk,))
        # A big-endian file's chunks arrive in native order: say so in the dtype.
        return x if x.dtype == self.dtype else x.astype(self.dtype)


def _token(*args):
    from dask.base import tokenize
    return tokenize(*args, os.stat(args[0]).st_mtime_ns if os.path.exists(args[0]) else 0)


def open_source(path, what="INPUT"):
    """Open an input file, with a clear error for each way that fails."""
    kind = file_kind(path)
    if not os.path.exists(path):
        raise CLIError(f"{what} {path}: no such file or directory")
    if kind == "npy" and os.path.isdir(path):
        raise CLIError(f"{what} {path}: is a directory, not a .npy file")
    if not os.access(path, os.R_OK):
        raise CLIError(f"{what} {path}: permission denied")
    try:
        if kind == "npy":
            reader = open_npy(path)
            dtype, shape = reader.dtype.newbyteorder("="), reader.shape
        else:
            reader, dtype, shape = open_zarr(path)
    except PermissionError:
        raise CLIError(f"{what} {path}: permission denied")
    except (OSError, EOFError) as e:
        raise CLIError(f"{what} {path}: cannot read ({e})")
    return Source(str(path), kind, reader, np.dtype(dtype), int(shape[0]))


# --------------------------------------------------------------------------- output

@dataclass
class Output:
    """An output written under a temporary name in its directory, renamed at the end.

    ``target`` takes ``dask.array.store`` writes; ``commit()`` renames it to
    ``path`` (replacing an old one only then); ``discard()`` removes it.
    """

    path: str
    dtype: np.dtype
    n: int
    chunk: int
    kind: str = ""
    tmp: str = ""
    target: object = None
    committed: bool = False

    def create(self):
        self.kind = file_kind(self.path)
        final = Path(self.path).resolve()
        self.tmp = str(final.with_name(f".{final.name}.distsort-tmp-{uuid.uuid4().hex[:12]}"))
        try:
            self.target = self._create_npy() if self.kind == "npy" else self._create_zarr()
        except BaseException:
            self.discard()
            raise
        return self

    def _create_npy(self):
        from numpy.lib.format import open_memmap
        if self.n == 0:
            np.save(self.tmp, np.empty(0, self.dtype))
            os.replace(self.tmp + ".npy", self.tmp)
            return None
        m = open_memmap(self.tmp, mode="w+", dtype=self.dtype, shape=(self.n,))
        offset = int(m.offset)
        del m
        fd = os.open(self.tmp, os.O_RDWR)
        try:  # reserve the space now: a full disk fails here, cleanly
            os.posix_fallocate(fd, offset, self.n * self.dtype.itemsize)
        finally:
            os.close(fd)
        return NpyFile(self.tmp, offset, self.dtype, (self.n,))

    def _create_zarr(self):
        import zarr
        return zarr.open_array(self.tmp, mode="w-", shape=(self.n,), dtype=self.dtype,
                               chunks=(max(1, min(self.chunk, self.n)),))

    def reader(self):
        """A reader of the (still temporary) output, for verification."""
        if self.kind == "npy":
            return open_npy(self.tmp)
        return ZarrFile(self.tmp)

    def commit(self):
        _fsync_tree(self.tmp)
        final = str(Path(self.path).resolve())
        old = None
        if os.path.lexists(final):  # --overwrite: move the old one aside until the new is in
            old = f"{self.tmp}-old"
            os.replace(final, old)
        try:
            os.replace(self.tmp, final)
        except BaseException:
            if old:
                os.replace(old, final)
            raise
        self.committed = True
        if old:
            _remove(old)
        _fsync_tree(os.path.dirname(final))

    def discard(self):
        if self.tmp and not self.committed:
            _remove(self.tmp)


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def _fsync_tree(path):
    """fsync a file, or a directory and the files in it (zarr), so a rename publishes data."""
    paths = [path]
    if os.path.isdir(path):
        paths = [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs] + [path]
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        except OSError:  # some filesystems refuse fsync on directories
            pass
        finally:
            os.close(fd)


def check_output_path(path, overwrite, inputs):
    """Refuse an existing OUTPUT (unless ``overwrite``), an INPUT, or a missing directory."""
    kind = file_kind(path)
    final = Path(path).resolve()
    for src in inputs:
        if final == Path(src).resolve():
            raise CLIError(f"{path}: refusing to write over an input file")
    if os.path.lexists(final) and not overwrite:
        raise CLIError(f"{path}: already exists (use --overwrite to replace it)")
    if os.path.lexists(final) and (kind == "npy") == os.path.isdir(final):
        raise CLIError(f"{path}: exists and is a {'directory' if kind == 'npy' else 'file'}; "
                       "remove it first")
    if not final.parent.is_dir():
        raise CLIError(f"{path}: directory {final.parent} does not exist")
    if not os.access(final.parent, os.W_OK):
        raise CLIError(f"{path}: directory {final.parent} is not writable")


# --------------------------------------------------------------------------- verification
# Order-independent checksums (distsort.verify's hashes): the wrapping sum of a 64-bit
# mix of each element's bit pattern (or of each (key, value) pair).  A permutation
# keeps the sum; a lost, duplicated or changed element changes it with probability
# ~1 - 2**-64.

def element_hashes(keys, values=None):
    h = key_hashes(np.ascontiguousarray(keys))
    return h if values is None else pair_hashes(h, np.ascontiguousarray(values))


def checksum(hashes):
    return int(np.sum(hashes, dtype=np.uint64))


def input_stats(keys=None, values=None, start=None, count=None):
    """(count, checksum) of an input chunk; with ``start``, of positions ``start..``."""
    if start is not None:
        return count, checksum(key_hashes(np.arange(start, start + count, dtype=np.int64)))
    return len(keys), checksum(element_hashes(keys, values))


def output_stats(keys, values, descending, keyed, hash_keys=True):
    """Count, checksum, in-chunk order and end codes of an output chunk."""
    from .order import encode
    stats = {"count": len(keys), "ok": True, "first": None, "last": None}
    stats["checksum"] = checksum(element_hashes(keys, values) if hash_keys
                                 else key_hashes(np.ascontiguousarray(values)))
    if not len(keys):
        return stats
    if not keyed:
        c = encode(keys, descending=descending)
        stats["ok"] &= bool(np.all(c[1:] >= c[:-1]))
        stats["first"], stats["last"] = (int(c[0]),), (int(c[-1]),)
        return stats
    c = encode(keys, canonical=True, descending=descending)
    v = encode(values, canonical=True)
    ok = (c[1:] > c[:-1]) | ((c[1:] == c[:-1]) & (v[1:] >= v[:-1]))
    stats["ok"] &= bool(np.all(ok))
    stats["first"], stats["last"] = (int(c[0]), int(v[0])), (int(c[-1]), int(v[-1]))
    return stats


def argsort_output_stats(index, source_reader, descending, n):
    """Stats of an argsort chunk: keys gathered from the input at ``index``."""
    index = np.asarray(index)
    if len(index) and (index.min() < 0 or index.max() >= n):
        return {"count": len(index), "ok": False, "checksum": 0, "first": None, "last": None}
    keys = source_reader.take(index)
    return output_stats(keys, index, descending, True, hash_keys=False)


def judge(in_stats, out_stats, n):
    """The list of what is wrong (empty when the output checks out)."""
    problems = []
    count_in, sum_in = sum(s[0] for s in in_stats), sum(s[1] for s in in_stats) % 2**64
    count_out = sum(s["count"] for s in out_stats)
    sum_out = sum(s["checksum"] for s in out_stats) % 2**64
    if not count_in == count_out == n:
        problems.append(f"element count {count_out} != input's {count_in}")
    if sum_in != sum_out:
        problems.append(f"checksum {sum_out:#018x} != input's {sum_in:#018x}: the output "
                        "is not a permutation of the input")
    bad = [i for i, s in enumerate(out_stats) if not s["ok"]]
    if bad:
        problems.append(f"{len(bad)} chunk(s) out of order inside (first: chunk {bad[0]})")
    ends = [s for s in out_stats if s["first"] is not None]
    cross = [i for i in range(len(ends) - 1) if ends[i]["last"] > ends[i + 1]["first"]]
    if cross:
        problems.append(f"{len(cross)} chunk boundary(ies) out of order")
    return problems


# --------------------------------------------------------------------------- running

CROSSING = re.compile(r"^distsort-r\d+-(head|tail)-")


def _key_name(key):
    return key[0] if isinstance(key, tuple) else str(key)


class LocalMeter:
    """Sizes of the head/tail tasks (the data that crosses between chunks), local scheduler."""

    def __init__(self):
        self.crossing = self.tasks = 0

    def __enter__(self):
        from dask.callbacks import Callback
        from dask.sizeof import sizeof

        def posttask(key, result, dsk, state, worker_id):
            if CROSSING.match(_key_name(key)):
                self.crossing += sizeof(result)
                self.tasks += 1

        self._cb = Callback(posttask=posttask)
        self._cb.__enter__()
        return self

    def __exit__(self, *exc):
        self._cb.__exit__(*exc)


def _worker_counters(dask_worker):
    """Bytes this worker sent to others, and spilled to disk (None where the worker's
    store does not count it, as dask-cuda's does not), since it started."""
    metrics = getattr(dask_worker.data, "cumulative_metrics", None)
    return {"sent": dask_worker.transfer_outgoing_bytes_total,
            "spilled": None if metrics is None else metrics.get(("disk-write", "bytes"), 0)}


def cluster_counters(client):
    if client is None:
        return None
    try:
        per_worker = client.run(_worker_counters)
    except Exception:  # counters are a nicety; never fail a sort for them
        return None
    values = {k: [c[k] for c in per_worker.values()] for k in ("sent", "spilled")}
    return {k: (None if None in v else sum(v)) for k, v in values.items()}


def compute(client, collections, progress, label):
    """Compute ``collections`` on ``client`` (or the local scheduler) with a progress bar.

    Returns (results, (crossing_bytes, crossing_tasks)): the sizes and number of the
    head/tail tasks that ran, as the scheduler's task stream recorded them.
    """
    import dask
    if progress:
        print(label, flush=True)
    if client is None:
        from dask.diagnostics import ProgressBar
        bar = ProgressBar() if progress else contextlib.nullcontext()
        with bar, LocalMeter() as meter:
            return dask.compute(*collections), (meter.crossing, meter.tasks)
    from distributed import get_task_stream, progress as dist_progress
    with get_task_stream(client) as stream:
        futures = client.compute(list(collections))
        try:
            if progress:
                dist_progress(futures)
            results = client.gather(futures)
        except BaseException:
            client.cancel(futures)
            raise
    return results, crossing_of(stream.data)


def crossing_of(records):
    sizes = [r.get("nbytes", 0) or 0 for r in records
             if CROSSING.match(_key_name(r.get("key", "")))]
    return sum(sizes), len(sizes)


def crossing_tasks(nchunks):
    """How many head/tail tasks the network on ``nchunks`` chunks has."""
    from .plan import plan_network
    return 2 * sum(len(r.pairs) for r in plan_network(nchunks))


@dataclass
class Cluster:
    """The client (None: the local threaded scheduler) and what the summary says of it."""

    client: object
    description: str
    gpu: bool
    worker_memory: int = 0
    close: object = field(default=None, repr=False)


def _worker_has_gpu():
    from distsort.cluster import gpu_available
    return gpu_available()


def open_cluster(args, local_scheduler_ok=False):
    """Connect as asked, or start a local cluster (GPUs when present)."""
    from . import cluster as cl
    address, file = args.scheduler_address, args.scheduler_file
    if not (address or file) and local_scheduler_ok:
        return Cluster(None, "local threaded scheduler", gpu=False)
    if file and not os.path.exists(file):
        raise CLIError(f"scheduler file {file}: no such file")
    device = getattr(args, "device", "auto")
    kw = {}
    if not (address or file):
        gpu = device == "gpu" or (device == "auto" and cl.gpu_available())
        if getattr(args, "workers", None):
            kw["n_workers"] = args.workers
        if not gpu and getattr(args, "memory_limit", None):
            kw["memory_limit"] = args.memory_limit
        if getattr(args, "spill_dir", None):
            kw["local_directory"] = args.spill_dir
    try:
        client = cl.connect(address, file, gpu=gpu if not (address or file) else None, **kw)
    except (OSError, TimeoutError) as e:
        raise CLIError(f"cannot reach the scheduler: {e}", RUNTIME_FAILURE)
    try:
        workers = client.scheduler_info(n_workers=-1)["workers"]
        if not workers:
            client.wait_for_workers(1, timeout=60)
            workers = client.scheduler_info(n_workers=-1)["workers"]
        if address or file:
            gpu = device == "gpu" or (device == "auto" and all(
                client.run(_worker_has_gpu).values()))
        mem = min((w.get("memory_limit") or 0) for w in workers.values())
    except BaseException:
        client.close()
        raise
    kind = "GPU" if gpu else "CPU"
    desc = (f"{len(workers)} {kind} worker(s) at {client.scheduler.address}"
            + (f", {fmt_bytes(mem)} memory limit each" if mem else ""))
    return Cluster(client, desc, gpu, mem, client.close)


def check_visible(cluster, paths):
    """Every worker must see the files (a shared filesystem across hosts)."""
    if cluster.client is None:
        return
    for p in map(os.path.abspath, paths):
        seen = cluster.client.run(os.path.exists, p)
        missing = [w for w, ok in seen.items() if not ok]
        if missing:
            raise CLIError(f"{p} is not visible to worker {missing[0]}: the workers need "
                           "the files on a filesystem they share")


def default_chunk(cluster, itemsize, per_element):
    """Elements per chunk: 1 GiB of keys on GPUs; on CPUs 1/16 of a worker's memory
    (a compare-split holds about three chunks, plus what waits to be spilled),
    between 4 MiB and 256 MiB of keys."""
    if cluster.gpu:
        return (1 << 30) // itemsize
    budget = cluster.worker_memory // 16 if cluster.worker_memory else 128 << 20
    return max(4 << 20, min(256 << 20, budget)) // per_element


def chunk_elements(args, cluster, itemsize, per_element):
    if args.chunk_size is None:
        return max(1, default_chunk(cluster, itemsize, per_element))
    kind, n = args.chunk_size
    return max(1, n // itemsize if kind == "bytes" else n)


def to_device(x, gpu):
    """NumPy chunks to CuPy chunks on GPU workers (and back with ``to_host``)."""
    if not gpu:
        return x
    import cupy
    return x.map_blocks(cupy.asarray, dtype=x.dtype, meta=cupy.empty((0,), x.dtype))


def to_host(x, gpu):
    if not gpu:
        return x
    import cupy
    return x.map_blocks(cupy.asnumpy, dtype=x.dtype, meta=np.empty((0,), x.dtype))


@contextlib.contextmanager
def _sigterm_interrupts():
    """SIGTERM raises ``Interrupted`` while a command runs; the caller's handler after."""
    def handler(signum, frame):
        raise Interrupted()
    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _stderr(msg):
    print(f"distsort: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- sort

@dataclass
class SortJob:
    """What ``distsort sort`` was asked to do, once the arguments are checked."""

    src: Source
    vals: Source | None
    outputs: list
    mode: str  # "sort", "argsort" or "values"
    descending: bool

    @property
    def keyed(self):
        return self.mode != "sort"

    def per_element(self):
        """Bytes a chunk element takes in the NumPy backend (codes + keys + values)."""
        k = self.src.dtype.itemsize
        if not self.keyed:
            return k
        return 2 * k + (self.vals.dtype.itemsize if self.vals else 8)


def check_sort_args(args):
    if bool(args.values) != bool(args.values_output):
        raise CLIError("--values and --values-output go together")
    if args.values and args.argsort:
        raise CLIError("--argsort and --values exclude each other")
    src = open_source(args.input)
    vals = open_source(args.values, "VALUES") if args.values else None
    if vals is not None and vals.n != src.n:
        raise CLIError(f"VALUES has {vals.n} elements, INPUT {src.n}")
    outputs = [args.output] + ([args.values_output] if vals else [])
    if vals and Path(outputs[0]).resolve() == Path(outputs[1]).resolve():
        raise CLIError("OUTPUT and --values-output must be different files")
    inputs = [src.path] + ([vals.path] if vals else [])
    for p in outputs:
        check_output_path(p, args.overwrite, inputs)
    if args.report and not Path(args.report).resolve().parent.is_dir():
        raise CLIError(f"--report {args.report}: directory does not exist")
    mode = "argsort" if args.argsort else "values" if vals else "sort"
    return SortJob(src, vals, outputs, mode, args.descending)


def sort_graph(job, chunk, gpu):
    """The sorted Dask arrays (NumPy chunks), ready to store."""
    import distsort
    keys = to_device(job.src.array(chunk), gpu)
    try:
        if job.mode == "argsort":
            out = [distsort.argsort(keys, descending=job.descending)]
        elif job.mode == "values":
            values = to_device(job.vals.array(chunk), gpu)
            out = list(distsort.sort_by_key(keys, values, descending=job.descending))
        else:
            out = [distsort.sort(keys, descending=job.descending)]
    except TypeError as e:  # unsupported dtype: distsort says which and why
        raise CLIError(str(e))
    return [to_host(o, gpu) for o in out]


def verify_graph(job, outputs, chunk):
    """Delayed stats of the input and of the written (temporary) outputs."""
    from dask import delayed
    n = job.src.n
    offsets = range(0, n, chunk)
    readers = [Source(o.tmp, o.kind, o.reader(), o.dtype, o.n) for o in outputs]
    out_blocks = [r.array(chunk).to_delayed().ravel() for r in readers]
    if job.mode == "argsort":
        ins = [delayed(input_stats)(start=s, count=min(chunk, n - s)) for s in offsets]
        outs = [delayed(argsort_output_stats)(b, job.src.reader, job.descending, n)
                for b in out_blocks[0]]
        return ins, outs
    in_keys = job.src.array(chunk).to_delayed().ravel()
    in_vals = (job.vals.array(chunk).to_delayed().ravel() if job.vals
               else [None] * len(in_keys))
    out_vals = out_blocks[1] if job.vals else [None] * len(out_blocks[0])
    ins = [delayed(input_stats)(k, v) for k, v in zip(in_keys, in_vals)]
    outs = [delayed(output_stats)(k, v, job.descending, job.keyed)
            for k, v in zip(out_blocks[0], out_vals)]
    return ins, outs


def run_sort(job, args, cluster):
    """Sort, store, verify and commit; returns the summary's facts."""
    import dask.array as da
    from .plan import plan_network
    check_visible(cluster, [job.src.path] + ([job.vals.path] if job.vals else [])
                  + [str(Path(p).resolve().parent) for p in job.outputs])
    chunk = chunk_elements(args, cluster, job.src.dtype.itemsize, job.per_element())
    sorted_arrays = sort_graph(job, chunk, cluster.gpu)
    nchunks = len(sorted_arrays[0].chunks[0])
    facts = {"chunk": chunk, "chunks": nchunks, "rounds": len(plan_network(nchunks))}
    outputs = [Output(p, a.dtype, job.src.n, chunk) for p, a in zip(job.outputs, sorted_arrays)]
    report = contextlib.nullcontext()
    if args.report:
        check_report(cluster)
        from distributed import performance_report
        report = performance_report(filename=str(Path(args.report).resolve()))
    try:
        for o in outputs:
            o.create()
        before = cluster_counters(cluster.client)
        with report:
            t0 = time.perf_counter()
            if job.src.n:
                store = da.store(sorted_arrays, [o.target for o in outputs], lock=False,
                                 compute=False)
                _, (crossing, count) = compute(cluster.client, [store], args.progress,
                                               "sorting ...")
                # Only a complete count is reported (the task stream keeps a bounded
                # number of records).
                if count == crossing_tasks(nchunks):
                    facts["crossing"] = crossing
            facts["seconds"] = time.perf_counter() - t0
            after = cluster_counters(cluster.client)
            if before and after:
                facts.update({k: after[k] - before[k] for k in before
                              if before[k] is not None and after[k] is not None})
            if args.verify:
                facts["verified"] = verify(job, outputs, chunk, cluster, args.progress)
        for o in outputs:
            o.commit()
    finally:
        for o in outputs:
            o.discard()
    return facts


def _has_bokeh():
    import importlib.util
    return importlib.util.find_spec("bokeh") is not None


def check_report(cluster):
    """The scheduler renders the report with bokeh: check before sorting, not after."""
    if not cluster.client.run_on_scheduler(_has_bokeh):
        raise CLIError("--report needs bokeh on the scheduler: pip install 'bokeh>=3.1'")


def verify(job, outputs, chunk, cluster, progress):
    t0 = time.perf_counter()
    ins, outs = verify_graph(job, outputs, chunk)
    results, _ = compute(cluster.client, ins + outs, progress, "verifying ...")
    problems = judge(results[:len(ins)], results[len(ins):], job.src.n)
    if problems:
        raise CLIError("verification failed: " + "; ".join(problems), VERIFY_FAILED)
    return time.perf_counter() - t0


def print_summary(job, cluster, facts):
    src, n = job.src, job.src.n
    secs = facts["seconds"]
    rate = f"{fmt_bytes(src.nbytes / secs)}/s, {n / secs / 1e6:,.1f} M elements/s" if secs else "-"
    lines = [
        ("input", f"{src.path} ({src.kind}, {src.dtype}, {n:,} elements, {fmt_bytes(src.nbytes)})"),
        ("job", {"sort": "sort", "argsort": "argsort (int64 indices)",
                 "values": f"sort_by_key (values {job.vals.path if job.vals else ''})"}[job.mode]
         + (", descending" if job.descending else "")),
        ("chunks", f"{facts['chunks']} x {facts['chunk']:,} elements "
                   f"({fmt_bytes(facts['chunk'] * src.dtype.itemsize)} of keys); "
                   f"{facts['rounds']} network rounds"),
        ("cluster", cluster.description),
        ("wall time", f"{secs:.2f} s (sort and write)"),
        ("throughput", rate),
    ]
    if facts.get("crossing") is not None:
        lines.append(("crossing", f"{fmt_bytes(facts['crossing'])} in head/tail tasks "
                                  "(data exchanged between chunks)"))
    if "sent" in facts:
        spilled = (f"; {fmt_bytes(facts['spilled'])} spilled to disk" if "spilled" in facts
                   else "")
        lines.append(("transfers", f"{fmt_bytes(facts['sent'])} between workers (all tasks)"
                                   + spilled))
    if "verified" in facts:
        lines.append(("verified", f"yes: sorted, count and checksum match "
                                  f"({facts['verified']:.2f} s)"))
    lines.append(("output", ", ".join(job.outputs)))
    print("\n".join(f"  {k:<11}{v}" for k, v in lines), flush=True)


def cmd_sort(args):
    job = check_sort_args(args)
    cluster = open_cluster(args)
    try:
        facts = run_sort(job, args, cluster)
    finally:
        if cluster.close:
            cluster.close()
    print("distsort sort: done", flush=True)
    print_summary(job, cluster, facts)
    return OK


# --------------------------------------------------------------------------- demo

def _random_block(size, dtype, seed, index, gpu):
    """Fresh random keys (normal floats of both signs; integers over the full range)."""
    rng = np.random.default_rng([seed, index])
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        x = rng.standard_normal(size, dtype=np.float32 if dtype.itemsize < 8 else np.float64)
        x = x.astype(dtype)
    elif dtype.kind == "b":
        x = rng.integers(0, 2, size=size).astype(bool)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, size=size, dtype=dtype, endpoint=True)
    if gpu:
        import cupy
        return cupy.asarray(x)
    return x


def demo_data(n, dtype, chunk, seed, gpu):
    import dask.array as da
    from dask import delayed
    from .plan import regular_chunks
    meta = np.empty((0,), dtype)
    if gpu:
        import cupy
        meta = cupy.empty((0,), dtype)
    blocks = [da.from_delayed(delayed(_random_block, pure=True)(size, dtype, seed, i, gpu),
                              (size,), dtype=dtype, meta=meta)
              for i, size in enumerate(regular_chunks(n, chunk))]
    return da.concatenate(blocks) if len(blocks) > 1 else blocks[0]


def persist(cluster, x, progress, label):
    """``x`` computed and held in memory (on the workers); returns it and the crossing bytes."""
    if progress:
        print(label, flush=True)
    if cluster.client is None:
        from dask.diagnostics import ProgressBar
        with (ProgressBar() if progress else contextlib.nullcontext()), LocalMeter() as m:
            return x.persist(), (m.crossing, m.tasks)
    from distributed import futures_of, get_task_stream, progress as dist_progress, wait
    with get_task_stream(cluster.client) as stream:
        x = cluster.client.persist(x)
        futures = futures_of(x)
        try:
            if progress:
                dist_progress(futures)
            wait(futures)
            cluster.client.gather(futures[:1])  # raises the task's error, if any
        except BaseException:
            cluster.client.cancel(futures)
            raise
    return x, crossing_of(stream.data)


def cmd_demo(args):
    import distsort
    from .cluster import gpu_available
    from .order import check_dtype
    from .plan import plan_network
    try:
        dtype = check_dtype(np.dtype(args.dtype), "demo data")
    except TypeError as e:
        raise CLIError(str(e))
    n = max(1, args.size // dtype.itemsize)
    gpu_local = args.device == "gpu" or (args.device == "auto" and gpu_available())
    cluster = open_cluster(args, local_scheduler_ok=not gpu_local)
    try:
        if args.chunk_size is None:
            chunk = max(1, -(-n // 16))
        else:
            chunk = chunk_elements(args, cluster, dtype.itemsize, dtype.itemsize)
        seed = args.seed if args.seed is not None else int(np.random.SeedSequence().entropy % 2**63)
        print(f"distsort demo: {n:,} random {dtype} keys ({fmt_bytes(n * dtype.itemsize)}), "
              f"seed {seed}, on {cluster.description}", flush=True)
        x, _ = persist(cluster, demo_data(n, dtype, chunk, seed, cluster.gpu), args.progress,
                       "generating ...")
        t0 = time.perf_counter()
        s, (crossing, count) = persist(cluster, distsort.sort(x), args.progress,
                                       "sorting ...")
        secs = time.perf_counter() - t0
        got, ref = (np.asarray(a) for a in _gather(cluster, [to_host(s, cluster.gpu),
                                                             to_host(x, cluster.gpu)]))
        ok = np.array_equal(got, np.sort(ref), equal_nan=True)
    finally:
        if cluster.close:
            cluster.close()
    nchunks = -(-n // chunk)
    lines = [f"  chunks     {nchunks} x {chunk:,} elements, {len(plan_network(nchunks))} rounds",
             f"  sort       {secs:.3f} s, {fmt_bytes(n * dtype.itemsize / secs)}/s, "
             f"{n / secs / 1e6:,.1f} M keys/s"]
    if count == crossing_tasks(nchunks):
        lines.append(f"  crossing   {fmt_bytes(crossing)} in head/tail tasks")
    lines.append(f"  verified   {'yes: equal to numpy.sort' if ok else 'NO: differs from numpy.sort'}")
    print("\n".join(lines), flush=True)
    return OK if ok else VERIFY_FAILED


def _gather(cluster, arrays):
    import dask
    if cluster.client is None:
        return dask.compute(*arrays)
    return cluster.client.compute(arrays, sync=True)


# --------------------------------------------------------------------------- bench

def benchmarks_dir():
    """``benchmarks/`` of the working directory, else of the source checkout."""
    for root in (Path.cwd(), Path(__file__).resolve().parents[1]):
        if (root / "benchmarks").is_dir():
            return root / "benchmarks"
    return None


def scenarios(bench):
    """Scripts of ``benchmarks/`` that run on their own (helpers like driver.py do not)."""
    return {p.stem: p for p in sorted(bench.glob("*.py"))
            if not p.stem.startswith("_") and "__main__" in p.read_text(errors="replace")}


def cmd_bench(args):
    from .cluster import gpu_available
    bench = benchmarks_dir()
    if bench is None:
        raise CLIError("no benchmarks/ directory here or in the distsort checkout")
    found = scenarios(bench)
    if args.list:
        print("\n".join(found) or "(no scenarios)")
        return OK
    # Without a GPU only the CPU scenarios can run; with one, all of them.
    names = args.scenarios or [s for s in found if s.startswith("cpu") or gpu_available()]
    missing = [s for s in names if s not in found]
    if missing or not names:
        raise CLIError(f"no benchmark scenario {', '.join(missing) or 'cpu_*'} in {bench} "
                       f"(have: {', '.join(found) or 'none'})")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(bench.parent),
                                                      env.get("PYTHONPATH")]))
    code = OK
    for name in names:
        print(f"== {name} ==", flush=True)
        rc = subprocess.run([sys.executable, str(found[name]), *args.extra],
                            cwd=bench.parent, env=env).returncode
        if rc:
            _stderr(f"benchmark {name} failed with exit status {rc}")
            code = RUNTIME_FAILURE
    return code


# --------------------------------------------------------------------------- main

def _cluster_options(p, local_workers=True):
    g = p.add_argument_group("cluster (default: a local cluster; GPUs when present)")
    x = g.add_mutually_exclusive_group()
    x.add_argument("--scheduler-address", metavar="ADDR",
                   help="connect to a running scheduler, e.g. tcp://10.0.0.1:8786")
    x.add_argument("--scheduler-file", metavar="FILE",
                   help="connect to the scheduler that wrote FILE (dask scheduler --scheduler-file)")
    g.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto",
                   help="GPU workers with CuPy chunks, or CPU workers (default: GPUs when "
                        "CuPy sees one; for a running cluster, when every worker does)")
    if local_workers:
        g.add_argument("--workers", type=int, metavar="N",
                       help="local cluster: worker processes (default: one per GPU or core)")
        g.add_argument("--memory-limit", metavar="BYTES",
                       help="local CPU cluster: memory per worker, e.g. 2GiB; chunks spill to "
                            "disk beyond 70%% of it (default: this host's memory, shared)")
        g.add_argument("--spill-dir", metavar="DIR",
                       help="local cluster: directory for spilled chunks (default: $TMPDIR)")
    g.add_argument("--progress", action=argparse.BooleanOptionalAction,
                   default=sys.stdout.isatty(),
                   help="show progress bars (default: when stdout is a terminal)")
    g.add_argument("--chunk-size", type=parse_chunk_size, metavar="SIZE",
                   help="chunk size: bytes of keys (256MiB) or elements (1000000); default "
                        "1 GiB on GPUs, 1/16 of a worker's memory (4 MiB..256 MiB) on CPUs")


def build_parser():
    exits = "\n".join(f"  {k:<4}{v}" for k, v in EXIT_CODES.items())
    parser = argparse.ArgumentParser(
        prog="distsort", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Sort arrays too large for one GPU (or for memory) with Dask.",
        epilog=f"exit status:\n{exits}")
    from . import __version__
    parser.add_argument("--version", action="version", version=f"distsort {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser(
        "sort", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="sort a .npy file or a zarr array into a new one",
        description="Sort the 1-D array in INPUT (.npy or .zarr) into OUTPUT (.npy or .zarr). "
                    "Nothing is loaded whole: .npy files are memory-mapped, zarr read by "
                    "chunk, and workers spill to disk. OUTPUT is written under a temporary "
                    "name in its directory and renamed when complete; INPUT is never modified.",
        epilog="examples:\n  distsort sort data.npy sorted.npy --verify\n"
               "  distsort sort data.npy big.zarr --workers 2 --memory-limit 2GiB\n"
               "  distsort sort keys.npy k.npy --values v.npy --values-output v_sorted.npy\n"
               "  distsort sort data.npy order.npy --argsort --scheduler-file sched.json\n"
               f"\nexit status:\n{exits}")
    s.add_argument("input", metavar="INPUT", help="1-D array: a .npy file or a .zarr directory")
    s.add_argument("output", metavar="OUTPUT", help="where to write the result (.npy or .zarr)")
    s.add_argument("--descending", action="store_true", help="largest first (NaNs first)")
    s.add_argument("--argsort", action="store_true",
                   help="write the int64 indices that sort INPUT (stable) instead of the keys")
    s.add_argument("--values", metavar="FILE",
                   help="values to move with the keys (sort_by_key); needs --values-output")
    s.add_argument("--values-output", metavar="FILE", help="where to write the moved values")
    s.add_argument("--verify", action="store_true",
                   help="check the output (sorted across chunks; a permutation of the input, "
                        "by count and a 64-bit checksum) before publishing it")
    s.add_argument("--report", metavar="FILE.html", help="write a Dask performance report")
    s.add_argument("--overwrite", action="store_true", help="replace an existing OUTPUT")
    _cluster_options(s)
    s.set_defaults(func=cmd_sort)

    d = sub.add_parser("demo", help="sort fresh random data and check it against numpy.sort",
                       description="Sort random data on the default cluster (the local "
                                   "scheduler, or local GPUs when present) and verify it.")
    d.add_argument("--size", type=parse_bytes_arg, default="256MiB", metavar="BYTES",
                   help="bytes of keys (default 256MiB)")
    d.add_argument("--dtype", default="float32", help="key dtype (default float32)")
    d.add_argument("--seed", type=int, help="random seed (default: fresh, printed)")
    _cluster_options(d, local_workers=False)
    d.set_defaults(func=cmd_demo)

    b = sub.add_parser("bench", help="run the benchmark scenarios in benchmarks/",
                       description="Run benchmarks/<scenario>.py and print its table. Default: "
                                   "the cpu_* scenarios without a GPU, every scenario with one. "
                                   "Arguments after -- go to each scenario, e.g. "
                                   "distsort bench cpu_sort -- --quick")
    b.add_argument("scenarios", nargs="*", metavar="SCENARIO")
    b.add_argument("--list", action="store_true", help="list the scenarios")
    b.set_defaults(func=cmd_bench, extra=[])
    return parser


def main(argv=None):
    """Run the ``distsort`` command; returns the exit status.

    >>> main(["sort", "missing.npy", "out.npy"])
    2
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if argv[:1] == ["bench"] and "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse: 0 for --help, 2 for usage errors
        return int(e.code or 0)
    if extra:
        args.extra = extra
    try:
        with _sigterm_interrupts():
            return args.func(args)
    except CLIError as e:
        _stderr(str(e))
        return e.code
    except (KeyboardInterrupt, Interrupted):
        _stderr("interrupted; no output written")
        return INTERRUPTED
    except OSError as e:
        if e.errno == errno.ENOSPC:
            _stderr(f"no space left on device ({e.filename or 'output'}); no output written")
        else:
            _stderr(f"I/O error: {e}")
        return RUNTIME_FAILURE
    except Exception as e:  # a worker's error, a lost cluster, ...: one line, not a traceback
        _stderr(f"failed: {type(e).__name__}: {e}")
        if os.environ.get("DISTSORT_DEBUG"):
            raise
        return RUNTIME_FAILURE


if __name__ == "__main__":
    sys.exit(main())
