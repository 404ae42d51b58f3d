"""Limits that fail fast: a local cluster's ``--memory-limit`` checked before any worker
starts, and a command that ends when its workers keep dying.

A worker below what it needs never finishes: it passes its limit, its nanny kills and
restarts it, and the sort starts again (``--memory-limit 50MB`` on an 8 MB input: 43
restarts, no end).  So :func:`check_memory_limit` refuses such a limit at once (exit
2), naming the smallest limit that works and the chunk size that fits the one given,
and :func:`end_on_worker_deaths` ends a command whose workers die repeatedly anyway
(exit 3).
"""
from __future__ import annotations

import contextlib
import threading
import time

from distsort.cluster import worker_pids
from distsort.cli.errors import BAD_INPUT, RUNTIME_FAILURE, CLIError
from distsort.cli.sizes import (MAX_CHUNKS, MIN_CHUNK_ELEMENTS, bracket, chunk_elements, fmt_bytes,
                                size_text, smallest_passing)

#: What a worker process takes before it holds any data: 62 MiB (RSS) when it starts,
#: 127 MiB once it has run a sort (NumPy, dask.array, distsort and numba imported),
#: measured on the 2-core CPU machine (Python 3.11, distributed 2026.8, 2026-11-25);
#: 185-187 MiB at the peak of a sort of 400,000 float64 (3.2 MB, chunks of 1.5 MiB) on
#: 2 workers of 1 GB (2026-11-29), whose workers of 187 MiB were killed again and
#: again.  numba's merges take most of the difference (LLVM): the same sort with
#: ``DISTSORT_NUMBA=0`` peaked at 72-75 MiB (:func:`worker_footprint`).
WORKER_FOOTPRINT = 184 << 20
#: The part of :data:`WORKER_FOOTPRINT` that numba's compiled merges take.
NUMBA_FOOTPRINT = 108 << 20


def worker_footprint():
    """:data:`WORKER_FOOTPRINT`, less :data:`NUMBA_FOOTPRINT` where the workers merge
    without numba (not installed, or ``DISTSORT_NUMBA=0``; asked without importing it)."""
    import importlib.util
    import os
    numba = (os.environ.get("DISTSORT_NUMBA", "1") != "0"
             and importlib.util.find_spec("numba") is not None)
    return WORKER_FOOTPRINT if numba else WORKER_FOOTPRINT - NUMBA_FOOTPRINT


def plan_bytes(plan, n, per_element):
    """Bytes of the sort ``plan`` of ``n`` elements of ``per_element`` bytes that a
    worker's tasks hold at once and cannot spill: the outputs of the pairs in flight
    and their inputs (``sortplan.work_chunks`` of the largest chunk, as
    ``sortplan.fits_in_place`` counts them), or, sorted as one on one worker, the data
    and their sorted copy.  The rest of a worker's share of the data spills to disk
    (``--spill-dir``) past its limit's spill fraction.

    >>> from distsort.plan.sortplan import SortPlan
    >>> p = SortPlan("network", (1000,) * 4, None, (0, 1, 2, 3), 1, 4, False, "auto")
    >>> plan_bytes(p, 4000, 8)  # 5 chunks of 8 kB
    40000
    """
    from distsort.plan.sortplan import work_chunks
    if plan.strategy == "one-device":
        return 2 * n * per_element
    if plan.strategy == "exchange":  # a worker's run, what it receives and merges
        from distsort.plan.sortplan import exchange_worker_bytes
        share = -(-n // max(1, plan.group))
        return exchange_worker_bytes(share, share, per_element)
    return work_chunks(len(plan.chunks)) * max(plan.chunks, default=0) * per_element


def worker_bytes(plan, n, per_element, footprint=WORKER_FOOTPRINT):
    """Bytes a worker holds at its peak: its ``footprint`` and what its tasks hold
    (:func:`plan_bytes`).  Measured against it (2-core machine, 2 workers, 2026-11-29):
    160 MB of float64 in chunks of 8 MiB sort with workers of 300 MB (224 MiB counted,
    below the 229 MiB where they pause); 40 MB in 4 chunks of 9.5 MiB lost 4 workers of
    300 MB (232 MiB counted)."""
    return footprint + plan_bytes(plan, n, per_element)


def _pause_fraction():
    """Where a worker stops running tasks, as a fraction of its limit (distributed's
    ``worker.memory.pause``; its ``terminate`` fraction, or 1, where pausing is off)."""
    import dask
    import distributed  # noqa: F401  (sets distributed's defaults in Dask's config)
    for name in ("pause", "terminate"):
        fraction = dask.config.get(f"distributed.worker.memory.{name}", False)
        if fraction:
            return float(fraction)
    return 1.0


def _limit_bytes(args, workers):
    """``--memory-limit`` in bytes per worker, as distributed reads it (sizes, shares
    of the host's memory, ``auto``); None where it reads none."""
    import logging

    from distributed.worker_memory import parse_memory_limit
    try:
        return int(parse_memory_limit(args.memory_limit, 1, total_cores=workers,
                                      logger=logging.getLogger(__name__))) or None
    except (ValueError, TypeError):
        return None


class _Check:
    """The check of a ``--memory-limit`` on the plan of a job (:mod:`.planned`)."""

    def __init__(self, args, job):
        from distsort.cli.planned import local_workers
        self.args, self.job = args, job
        self.workers, self.pause = local_workers(args), _pause_fraction()
        self.options, self.footprint = None, worker_footprint()

    def need(self, limit, args=None):
        """Bytes a worker of ``limit`` bytes holds at its peak (``args``: other
        options, e.g. another ``--chunk-size``)."""
        from distsort.cli.planned import cpu_view, job_plan, planned_cpu_cluster, sort_options
        job, workers = self.job, self.workers
        cluster = planned_cpu_cluster(workers, limit)
        if self.options is None:  # the same for every limit: read once
            self.options = sort_options(job, self.args, cluster)
        _, plan = job_plan(job, args or self.args, cluster, cpu_view(workers, limit),
                           self.options)
        return worker_bytes(plan, job.src.n, job.per_element(), self.footprint)

    def passes(self, limit, args=None):
        return self.need(limit, args) <= self.pause * limit

    def smallest_limit(self):
        """The smallest limit (whole MiB, within 1% of it) that passes; None past
        1 TiB."""
        low = int(self.footprint / self.pause) >> 20  # the footprint alone
        mib = smallest_passing(lambda m: self.passes(m << 20), low, 1 << 20, 1 / 128)
        return None if mib is None else mib << 20

    def fitting_chunk(self, limit):
        """The most elements per chunk (``--chunk-size``, within an eighth of it) that
        pass under ``limit``; 0 where none does.  Halved from the chunk the command
        picks by default (a larger one, which the plan would cut, is no advice) until
        one passes: the plan coalesces chunks small beside its budget, so that a
        smaller chunk does not always pass where a larger one fails."""
        from distsort.cli.planned import planned_cpu_cluster, with_chunk_size
        n, job = self.job.src.n, self.job
        low = max(MIN_CHUNK_ELEMENTS, -(-n // MAX_CHUNKS))
        high = chunk_elements(with_chunk_size(self.args, None),
                              planned_cpu_cluster(self.workers, limit),
                              job.src.dtype.itemsize, job.per_element(), n)

        def passes(c):
            return self.passes(limit, with_chunk_size(self.args, ("elements", c)))
        failing, c = high + 1, high
        while c >= low and not passes(c):
            failing, c = c, c // 2
        if c < low:
            return 0
        return c if failing > high else bracket(lambda x: not passes(x), c, failing,
                                                1 / 8)[0]


def check_memory_limit(args, job):
    """Refuse (exit 2), before starting a local CPU cluster, a ``--memory-limit`` under
    which a worker cannot hold what the plan of the sort gives it (:func:`worker_bytes`,
    on the plan the command would run: :mod:`distsort.cli.planned`), naming the
    smallest limit that works and the ``--chunk-size`` that fits the one given.  (GPU
    workers and running clusters do not take the option.)"""
    from distsort.cli.connection import wants_gpu
    if (not getattr(args, "memory_limit", None) or args.scheduler_address
            or args.scheduler_file or wants_gpu(args) or not job.src.n):
        return
    check = _Check(args, job)
    limit = _limit_bytes(args, check.workers)
    if limit is None or check.passes(limit):
        return
    need, smallest = check.need(limit), check.smallest_limit()
    fits = check.fitting_chunk(limit)
    advice = (f"; with --memory-limit {args.memory_limit}, --chunk-size {fits} (elements, "
              f"{fmt_bytes(fits * job.src.dtype.itemsize)} of keys) fits" if fits else
              f"; no --chunk-size fits --memory-limit {args.memory_limit}")
    least = (f"--memory-limit {size_text(smallest)}" if smallest else "more than 1 TiB")
    raise CLIError(
        f"--memory-limit {args.memory_limit} is too small: with {check.workers} worker(s) "
        f"a worker holds {fmt_bytes(need)} at its peak (its own "
        f"{fmt_bytes(check.footprint)}, and the chunks its merges hold: their inputs "
        f"and outputs), above the {check.pause:.0%} of the limit where it pauses; "
        f"it needs at least {least}{advice}", BAD_INPUT)


def _unexpected_removals(events, since):
    """Workers the scheduler lost (not retired or closed) since ``since``, from its
    ``"all"`` events."""
    return [e.get("worker") for t, e in events
            if t >= since and isinstance(e, dict) and e.get("action") == "remove-worker"
            and not e.get("expected")]


def deaths_allowed():
    """Worker deaths a command lives through: as many as a task may see
    (``distributed.scheduler.allowed-failures``) before the scheduler gives it up."""
    import dask
    return int(dask.config.get("distributed.scheduler.allowed-failures", 3))


class _Deaths:
    """Worker deaths since it was made: the scheduler's unexpected removals and, for a
    local cluster started by the command, new worker processes (a worker that dies
    before it joins is never removed)."""

    def __init__(self, client):
        self.client, self.since = client, time.time()
        self.local = getattr(client, "_distsort_cluster", None)
        self.pids = worker_pids(self.local)
        self.first = len(self.pids)
        self.removed = []

    def count(self):
        # No reply this time: the processes still count.
        with contextlib.suppress(Exception):
            self.removed = _unexpected_removals(self.client.get_events("all"), self.since)
        self.pids |= worker_pids(self.local)
        return max(len(self.removed), len(self.pids) - self.first)


#: Seconds the sort has, once its futures are cancelled, to end before the watch
#: closes the client (the last resort: a step that waits on the client but on none of
#: its futures).
END_SECONDS = 30


@contextlib.contextmanager
def end_on_worker_deaths(client, allowed=None, poll=0.5):
    """Within this context, the sort on ``client`` ends with a clear error (exit 3)
    once workers died more than ``allowed`` times (default :func:`deaths_allowed`),
    instead of the nannies restarting workers that die again for ever.  A task given up
    after as many deaths (``KilledWorker``) ends it with the same message.  On a local
    cluster the command started, a worker that could not spill for want of disk space
    (``OSError: [Errno 28]``: distributed keeps the data in memory, pauses the worker
    and waits for ever) ends it too (:mod:`distsort.cli.spillwatch`).

    The watch cancels the client's futures, which ends the wait on them in the
    thread that runs the sort; the caller closes the cluster after.  Closing the
    client from the watch instead raced distributed's progress bar, whose feed the
    closing scheduler could drop without a word (a command waiting for ever in the
    bar; the command's bar no longer waits: :func:`distsort.cli.progress.text_bar`).
    """
    if client is None:  # threads of this process: no worker to lose
        yield
        return
    from distributed import KilledWorker

    from distsort.cli.spillwatch import SpillWatch
    allowed = deaths_allowed() if allowed is None else allowed
    deaths, stop, ended = _Deaths(client), threading.Event(), []
    spill = SpillWatch(client) if deaths.local is not None else None

    def why():
        # None while the sort may go on; else the message it ends with.
        count = deaths.count()
        if count > allowed:
            return _deaths_message([count, (deaths.removed or [None])[-1]], allowed, None)
        return spill.failure() if spill is not None else None

    def watch():
        # Until the sort ends or the client closes: a watch that ended on one failed
        # poll would leave workers that die between tasks (no task of theirs counts as
        # failed) to be restarted for ever.
        while not stop.wait(poll):
            if getattr(client, "status", None) in ("closing", "closed"):
                return
            try:
                message = why()
            except Exception:  # noqa: BLE001  (polled again)
                continue
            if message:
                ended.append(message)
                _cancel_until(client, stop, poll)
                return

    thread = threading.Thread(target=watch, name="distsort-worker-deaths", daemon=True)
    thread.start()
    try:
        yield
    except BaseException as e:
        # The cancelled futures raise CancelledError, not an Exception.
        if ended or isinstance(e, KilledWorker):
            raise CLIError(ended[0] if ended else _deaths_message([], allowed, e),
                           RUNTIME_FAILURE) from e
        raise
    finally:
        stop.set()
        thread.join()
        if spill is not None:
            spill.close()
    if ended:  # the sort ended as the watch cancelled it
        raise CLIError(ended[0], RUNTIME_FAILURE)


def _cancel_until(client, stop, poll):
    """Cancel ``client``'s futures, again each ``poll`` (a step that starts a new
    computation), until ``stop`` is set; past :data:`END_SECONDS`, close the client."""
    from distributed import Future
    deadline = time.monotonic() + END_SECONDS
    while True:
        with contextlib.suppress(Exception):  # the futures changed as they were read
            keys = list(client.futures)
            if keys:
                client.cancel([Future(k, client) for k in keys], reason="worker deaths")
        if stop.wait(poll):
            return
        if time.monotonic() > deadline:
            client.close()
            return


def _deaths_message(lost, allowed, error):
    deaths = f"{lost[0]} worker deaths" if lost else f"more than {allowed} worker deaths"
    last = f" (the last: {lost[1]})" if lost and lost[1] else ""
    return (f"the sort was stopped after {deaths}{last}: a worker that passes its "
            "memory limit is killed and restarted, and loses its work each time; give "
            "the workers more memory (--memory-limit) or smaller chunks (--chunk-size)"
            + (f" [{type(error).__name__}]" if error is not None else ""))
