"""``distsort sort``: check the arguments, sort into temporary outputs, verify, publish.

Reading, sorting, writing and (with ``--verify``) the checks of each chunk run in one
Dask computation, so a chunk is written as soon as it is sorted and nothing is read
twice (see :mod:`distsort.cli.verification`), and the disk starts writing each chunk at
once (:func:`distsort.cli.files.write_behind`).  An input that fits in memory (on GPU
0, where the command sorts on GPUs) is sorted by threads of this process
(:func:`distsort.cli.planned.command_engine`).  The disk is measured before a
sort in this process (whose threads would slow the measurement down), or beside a
sort on worker processes.

With ``--values`` the keys and the values are a pair: both are written under
temporary names and verified (with ``--verify``) before either is renamed; then the
values output is renamed first and OUTPUT (the keys, the file that a script checks
for) last, so that OUTPUT appears only when both are complete.  A failure or an
interrupt at any point removes both temporaries, and a rename already done is undone
(an old output replaced with ``--overwrite`` comes back).
"""
from __future__ import annotations

import contextlib
import errno
import os
import sys
import time
from argparse import ArgumentTypeError, Namespace
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distsort.cli.connection import (Cluster, check_visible, open_cluster,
                                     plan_options, to_device, to_host)
from distsort.cli.disk import disk_floor
from distsort.graph.verify import VerificationError
from distsort.cli.errors import OK, RUNTIME_FAILURE, VERIFY_FAILED, CLIError, outcome
from distsort.cli.files import local_path, url_protocol
from distsort.cli.budgets import check_device_memory_limit
from distsort.cli.limits import check_memory_limit, end_on_worker_deaths
from distsort.cli.metrics import cluster_counters, crossing_tasks, output_step, step_spans
from distsort.cli.claims import Claim, claim
from distsort.cli.outputs import (Output, check_not_input, check_output_path, make_groups,
                                  publish)
from distsort.cli.temporaries import clean_directory, remove, temporary_name
from distsort.cli.progress import compute
from distsort.cli.options import check_cluster_options
from distsort.cli.planned import adjusted_chunks
from distsort.cli.sizes import check_chunk_count, chunk_elements
from distsort.cli.sources import Source, open_source
from distsort.cli.summary import print_summary
from distsort.cli.verification import fused_summaries, judge, reread


if TYPE_CHECKING:
    from distsort.plan.sortplan import SortPlan


@dataclass
class SortJob:
    """What ``distsort sort`` was asked to do, once the arguments are checked."""

    src: Source
    vals: Source | None
    outputs: list[str]  # OUTPUT, then --values-output where there are values
    mode: str  # "sort", "argsort" or "values"
    descending: bool
    stable: bool = False  # with values: equal keys in input order, not by value
    #: The outputs once being written (``Output``): which of them are published.
    written: list[Output] = field(default_factory=list)
    #: The outputs' claims (:mod:`distsort.cli.claims`), held until the command ends.
    claims: list[Claim] = field(default_factory=list)

    @property
    def published(self) -> bool:
        return any(o.committed for o in self.written)

    def release(self):
        for c in self.claims:
            c.release()

    @property
    def keyed(self) -> bool:
        return self.mode != "sort"

    def sort_bytes(self) -> int:
        """Bytes of an element as the sort holds it: the key and the value (argsort's
        int64 positions)."""
        value = 8 if self.mode == "argsort" else (self.vals.dtype.itemsize if self.vals else 0)
        return self.src.dtype.itemsize + value

    def per_element(self) -> int:
        """Bytes a chunk element takes in the NumPy backend (codes + keys + values)."""
        k = self.src.dtype.itemsize
        if not self.keyed:
            return k
        return 2 * k + (self.vals.dtype.itemsize if self.vals else 8)


def check_sort_args(args: Namespace) -> SortJob:
    if bool(args.values) != bool(args.values_output):
        raise CLIError("--values and --values-output go together")
    if args.values and args.argsort:
        raise CLIError("--argsort and --values exclude each other")
    src = open_source(args.input)
    vals = open_source(args.values, "VALUES") if args.values else None
    if vals is not None and vals.n != src.n:
        raise CLIError(f"VALUES has {vals.n} elements, INPUT {src.n}")
    outputs = [_local_output(p) for p in [args.output] + ([args.values_output] if vals else [])]
    if vals and Path(outputs[0]).resolve() == Path(outputs[1]).resolve():
        raise CLIError("OUTPUT and --values-output must be different files")
    inputs = [src.path] + ([vals.path] if vals else [])
    for d in {Path(p).resolve().parent for p in outputs}:
        clean_directory(d)  # what killed runs left: before OUTPUT is looked at
    for p in outputs:
        check_output_path(p, args.overwrite, inputs)
    check_other_writes(args, inputs, outputs)
    try:
        check_chunk_count(args.chunk_size, src.n, src.dtype.itemsize)
    except ArgumentTypeError as e:
        raise CLIError(str(e)) from None
    mode = "argsort" if args.argsort else "values" if vals else "sort"
    job = SortJob(src, vals, outputs, mode, args.descending,
                  stable=bool(getattr(args, "stable", False)))
    for p in outputs:  # the groups of an array in a new zarr group, as zarr makes them
        make_groups(p)
    try:  # last, once nothing else can refuse the run: from here on it is released
        for p in outputs:
            job.claims.append(claim(p, args.overwrite))
    except BaseException:
        job.release()
        raise
    return job


def _local_output(path):
    """OUTPUT as a local path (``file://`` URLs too): written under a temporary name and
    renamed, which other filesystems do not do atomically."""
    if url_protocol(path) not in (None, "file"):
        raise CLIError(f"{path}: outputs are written to local (or shared) filesystems; "
                       "URLs are read only (write here, then copy)")
    return local_path(path)


def check_other_writes(args, inputs, outputs):
    """The report and the spill directory: never an input, inside one, or an output;
    the report a file in a directory this process can write."""
    if args.report:
        check_not_input(args.report, inputs, "--report")
        check_report_path(args.report, outputs)
    if getattr(args, "spill_dir", None):
        check_not_input(args.spill_dir, inputs, "--spill-dir")


def check_report_path(path, outputs):
    """``--report``: a new or existing file (not a directory, not an output) in an
    existing directory where this process may create files: refused before any work,
    not after the sort."""
    report = Path(path).resolve()
    if report in {Path(p).resolve() for p in outputs}:
        raise CLIError(f"--report {path}: is an output too; name another file")
    if os.path.isdir(report):
        raise CLIError(f"--report {path}: is a directory; name a file, e.g. {path}/report.html")
    if not report.parent.is_dir():
        raise CLIError(f"--report {path}: directory does not exist")
    probe = temporary_name(str(report), "probe")
    try:  # a file made and removed: what the report's writing needs, whoever runs it
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        os.remove(probe)
    except OSError as e:
        raise CLIError(f"--report {path}: cannot write in directory {report.parent} "
                       f"({e.strerror}: read-only, or not yours)") from None


def sort_graph(job: SortJob, chunk: int, cluster: Cluster, options: dict[str, Any],
               verify: bool | str = False) -> tuple[tuple, list, SortPlan]:
    """The inputs and the sorted outputs as Dask arrays (on the device: CuPy chunks on
    GPU workers), ready to summarize and, through ``to_host``, to store, and the
    ``SortPlan`` they follow (``distsort.api.planning``, with the plan ``options``).

    Out of core, the chunks go to the sort as NumPy arrays, also on GPU workers: the
    out-of-core path's host input, which its GPU merges read in segments, instead of
    each whole chunk to a GPU and back to the host first.  So where the plan of the
    sort of CuPy chunks is out of core, the sort is built again of NumPy chunks.
    """
    from distsort.api import planning
    with planning(**options) as plans:
        inputs, out = _sort_arrays(job, chunk, cluster.gpu, verify)
        if cluster.gpu and plans[-1].strategy == "out-of-core":
            inputs, out = _sort_arrays(job, chunk, False, verify)
    return inputs, out, plans[-1]


def _sort_arrays(job, chunk, gpu, verify):
    """``(inputs, outputs)`` of the job's sort; ``gpu``: of CuPy chunks."""
    import distsort
    keys = to_device(job.src.array(chunk), gpu)
    values = to_device(job.vals.array(chunk), gpu) if job.vals else None
    try:
        if job.mode == "argsort":
            out = [distsort.argsort(keys, descending=job.descending, verify=bool(verify))]
        elif job.mode == "values":
            out = list(distsort.sort_by_key(keys, values, descending=job.descending,
                                            stable=job.stable))
        else:
            out = [distsort.sort(keys, descending=job.descending)]
    except TypeError as e:  # unsupported dtype: distsort says which and why
        files = job.src.path + (f" / {job.vals.path}" if job.vals else "")
        raise CLIError(f"{files}: {e}") from e
    except MemoryError as e:  # out of core: a chunk alone does not fit the budget
        raise CLIError(f"{e} (here: --chunk-size, --device-memory-limit)") from e
    return (keys, values), out


def _has_bokeh():
    import importlib.util
    return importlib.util.find_spec("bokeh") is not None


def check_report(cluster):
    """The scheduler renders the report with bokeh: check before sorting, not after."""
    if not cluster.client.run_on_scheduler(_has_bokeh):
        raise CLIError("--report needs bokeh on the scheduler: pip install 'bokeh>=3.1'")


@contextlib.contextmanager
def in_process_report(path):
    """The report of a sort by this process's threads: Dask's profilers (the tasks and
    this process's CPU and memory use) as one HTML page, Bokeh's scripts inline."""
    from dask.diagnostics import Profiler, ResourceProfiler, visualize
    with Profiler() as tasks, ResourceProfiler(dt=0.25) as resources:
        yield
    visualize([tasks, resources], filename=path, show=False, save=True, mode="inline",
              title="distsort sort: tasks, CPU and memory of this process")


def report_context(args, cluster):
    """``--report``: Dask's performance report of a cluster's scheduler, or the profile
    of the sort in this process (which ``--report`` does not move to worker processes):
    the :class:`ReportFile` (None without ``--report``) and the context that writes it."""
    if not args.report:
        return None, contextlib.nullcontext()
    report = ReportFile(args.report)
    if cluster.client is None:
        if not _has_bokeh():
            raise CLIError("--report needs bokeh: pip install 'bokeh>=3.1'")
        return report, report.around(in_process_report(report.tmp))
    check_report(cluster)
    from distributed import performance_report
    # Bokeh's scripts inline: the report opens on a node with no internet access.
    return report, report.around(performance_report(filename=report.tmp, mode="inline"))


class ReportFile:
    """The report, written under a temporary name beside it and renamed into place
    when whole: never written through a link into another file, never left
    truncated.  Its failure (a full disk) is kept in ``error``, not raised: the
    outputs are published all the same and :func:`run_sort` says so after."""

    def __init__(self, path):
        self.path, self.final = path, str(Path(path).resolve())
        self.tmp = temporary_name(self.final, "tmp")
        self.error = None

    @contextlib.contextmanager
    def around(self, writer):
        sorted_ = False  # the block (the sort) ended: what fails now is the report
        try:
            with writer:
                yield self
                sorted_ = True
        except OSError as e:
            remove(self.tmp)
            if not sorted_:
                raise
            self.error = e
            return
        except BaseException:
            remove(self.tmp)
            raise
        os.replace(self.tmp, self.final)

    def error_after(self, outputs):
        """The error that ends a run whose outputs are published but whose report
        could not be written."""
        e = self.error
        why = ("no space left on device" if e.errno == errno.ENOSPC
               else e.strerror or str(e))
        return CLIError(f"{why} (report {self.path}); no report written. The outputs are "
                        f"published: {', '.join(outputs)} complete", RUNTIME_FAILURE)


def write_sorted(job, inputs, sorted_arrays, outputs, cluster, args, plan):
    """Sort into the outputs' temporaries, with the fused summaries of ``--verify``;
    returns the facts measured and the output summaries (for ``--verify=reread``)."""
    import dask.array as da
    ins, outs = (fused_summaries(job, inputs, sorted_arrays, cluster.gpu) if args.verify
                 else ([], []))
    facts = {}
    t0 = time.perf_counter()
    if outputs[0].n:
        host = [to_host(a, cluster.gpu) for a in sorted_arrays]
        store = da.store(host, [o.target for o in outputs], lock=False, compute=False)
        try:
            results, stats = compute(cluster.client, [store, *ins, *outs], args.progress,
                                     "sorting ...")
        except VerificationError as e:  # argsort's check, inside the sort
            raise CLIError(str(e), VERIFY_FAILED) from e
        ins, outs = results[1:1 + len(ins)], results[1 + len(ins):]
        facts["spans"] = step_spans(output_step(stats["intervals"], plan))
        # Only a complete count is reported (the task stream keeps a bounded
        # number of records).
        if stats["tasks"] and stats["tasks"] == crossing_tasks(plan):
            facts["crossing"] = stats["crossing"]
    else:  # nothing to sort, nothing to check
        ins = outs = []
    facts["seconds"] = time.perf_counter() - t0
    if args.verify and outputs[0].n:
        judge(job, ins, outs, sorted_arrays[0].chunks[0])
        facts["verified"] = args.verify
    return facts, outs


def counters_since(before, client):
    """Bytes sent between workers and spilled since ``before``, where both counted them."""
    after = cluster_counters(client)
    if not (before and after):
        return {}
    return {k: after[k] - before[k] for k in before
            if before[k] is not None and after[k] is not None}


def run_sort(job: SortJob, args: Namespace, cluster: Cluster, facts: dict[str, Any]
             ) -> dict[str, Any]:
    """Sort, store, verify and publish, adding what was measured to ``facts``.

    Nothing is renamed into place before every output is written (and verified);
    see the module's docstring for the order of the renames and the clean-up.
    """
    t0 = time.perf_counter()
    inputs = [s.path for s in (job.src, job.vals) if s is not None and not url_protocol(s.path)]
    check_visible(cluster, inputs + [str(Path(p).resolve().parent) for p in job.outputs])
    chunk = chunk_elements(args, cluster, job.src.dtype.itemsize, job.per_element(),
                           job.src.n)
    inputs, sorted_arrays, plan = sort_graph(job, chunk, cluster, plan_options(args, cluster),
                                             args.verify)
    chunks = sorted_arrays[0].chunks[0]
    facts.update(chunks=chunks, rounds=plan.rounds, strategy=plan.strategy,
                 adjusted=adjusted_chunks(args, chunk, plan, job.src.n))
    if plan.out_of_core is not None:  # the runs are merged, not the chunks
        ooc = plan.out_of_core
        facts.update(out_of_core=(ooc.budget, ooc.plan.runs), merge=ooc.merge)
    outputs = [Output(p, a.dtype, job.src.n, chunk, claim=c)
               for p, a, c in zip(job.outputs, sorted_arrays, job.claims, strict=False)]
    job.written = outputs
    report, writer = report_context(args, cluster)
    try:
        for o in outputs:
            o.create()
        facts["plan"] = time.perf_counter() - t0
        before = cluster_counters(cluster.client)
        with _local_threads(cluster), writer:
            measured, summaries = write_sorted(job, inputs, sorted_arrays, outputs, cluster,
                                               args, plan)
            facts.update(measured)
            facts.update(counters_since(before, cluster.client))
            if args.verify == "reread" and job.src.n:
                facts["reread"] = reread(job, outputs, chunks, cluster, args.progress,
                                         summaries)
        t0 = time.perf_counter()
        # Keys (OUTPUT) last: the file a script checks for appears only when the
        # values are in place too.
        publish(outputs[::-1])
        facts["publish"] = time.perf_counter() - t0
    finally:
        for o in outputs:
            o.discard()
    if report is not None and report.error is not None:
        raise report.error_after(job.outputs)
    return facts


def _local_threads(cluster):
    """Dask's threaded scheduler runs ``cluster.threads`` threads, where it is set."""
    import dask
    if cluster.client is not None or not cluster.threads:
        return contextlib.nullcontext()
    return dask.config.set(num_workers=cluster.threads)


def cmd_sort(args: Namespace) -> int:
    check_cluster_options(args)
    job = check_sort_args(args)
    try:
        return _sort_and_summarize(job, args)
    except BaseException as e:
        if not job.published:
            raise
        # The renames are done: the outputs are complete, whatever came after; the
        # line says so (never "no output written"), the status is the table's.
        code, line = outcome(e, published=", ".join(job.outputs))
        raise CLIError(line, code) from None
    finally:
        job.release()


def _sort_and_summarize(job, args):
    t0 = getattr(args, "t0", None) or time.perf_counter()
    from distsort.cli.ondisk import checked_memory  # not on the workers that import distsort.cli
    from distsort.cli.planned import command_engine
    from distsort.cli.spill import check_spill_dir
    check_spill_dir(getattr(args, "spill_dir", None))
    engine = command_engine(args, job)
    if engine.name == "disk":
        return _sort_on_disk(job, args, checked_memory(args, job, engine.memory), t0)
    in_process = engine.in_process
    check_device_memory_limit(args, job, in_process)
    probe = (disk_floor, job.src.path, Path(job.outputs[0]).resolve().parent, job.src.nbytes)
    with ThreadPoolExecutor(1) as pool:
        # A sort in this process measures the disk first, alone: beside the sort's
        # threads, or CuPy's import, the probe reads the page cache far slower (the
        # GIL, held between its reads: docs/performance.md).  Worker processes sort
        # elsewhere: the disk is measured beside them, once they are up, and only the
        # summary waits for it (``await_floor``).
        if in_process:
            wait((floor := pool.submit(*probe),))
        else:
            check_memory_limit(args, job)
        cluster = open_cluster(args, in_process_ok=in_process)
        facts = {"start": time.perf_counter() - t0}
        try:
            if not in_process:
                floor = pool.submit(*probe)
            with end_on_worker_deaths(cluster.client):
                run_sort(job, args, cluster, facts)
        finally:
            if cluster.close:
                cluster.close()
        facts["disk"] = await_floor(floor)
    facts["wall"] = time.perf_counter() - t0
    facts["spans"] = spans_since(facts.get("spans"), t0)
    return print_done(job, cluster, facts, args.report)


def spans_since(spans, t0):
    """Each step's ``(first start, last stop, busy)`` with its times counted from ``t0``
    (the command's start).

    >>> spans_since({"read": (10.5, 12.0, 1.25)}, 10.0)
    {'read': (0.5, 2.0, 1.25)}
    """
    return {step: (a - t0, b - t0, busy) for step, (a, b, busy) in (spans or {}).items()}


def print_done(job, cluster, facts, report=None):
    """The summary, once the outputs are published.  A pipe whose reader left (``|
    head``) ends nothing: exit 0.  Another failure of stdout (a full device) is a
    runtime failure, said as such (the outputs stay published)."""
    try:
        print("distsort sort: done", flush=True)
        print_summary(job, cluster, facts, report)
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:  # ``| head``: the reader left; the outputs are published
        _stdout_to_devnull()
    except (OSError, ValueError) as e:
        _stdout_to_devnull()
        raise OSError(getattr(e, "errno", None) or errno.EIO,
                      getattr(e, "strerror", None) or str(e), "stdout") from None
    return OK


def _stdout_to_devnull():
    """Descriptor 1 on /dev/null, so that the exit's flush of what stdout still holds
    fails no more."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _sort_on_disk(job, args, memory, t0):
    """An input larger than host memory: runs on the disk, one k-way merge
    (:mod:`distsort.cli.ondisk`); the disk measured first, alone."""
    from distsort.io.disksort import READERS
    from distsort.cli.ondisk import sort_on_disk
    floor = disk_floor(job.src.path, Path(job.outputs[0]).resolve().parent, job.src.nbytes)
    facts = {"start": time.perf_counter() - t0, "disk": floor}
    sort_on_disk(job, args, memory, facts)
    facts["wall"] = time.perf_counter() - t0
    facts["spans"] = spans_since(facts.get("spans"), t0)
    cores = os.cpu_count() or 1
    cluster = Cluster(None, f"{cores} sorting threads of this process on {cores} cores, "
                            f"{READERS} reading and one writing (larger than memory: "
                            "sorted through the disk)", gpu=False)
    return print_done(job, cluster, facts)


def await_floor(floor):
    """The disk floor measured in the background, once the outputs are published.

    The measurement overlaps the command's start instead of delaying the sort by a
    fraction of a second; a failed one only drops the summary's line.
    """
    try:
        return floor.result()
    except Exception:  # noqa: BLE001  (a measurement, never a reason to fail the sort)
        return None
