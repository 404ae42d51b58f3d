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
import math
import threading
import time

from distsort.cluster import worker_pids
from distsort.cli.errors import BAD_INPUT, RUNTIME_FAILURE, CLIError
from distsort.cli.sizes import chunk_elements, fmt_bytes

#: What a worker process takes before it holds any data: 62 MiB (RSS) when it starts,
#: 127 MiB once it has run a sort (NumPy, dask.array, distsort and numba imported),
#: measured on the 2-core CPU machine (Python 3.11, distributed 2026.8, 2026-11-25).
WORKER_FOOTPRINT = 128 << 20
#: Chunks a worker holds at once beyond what it can spill: a merge's chunk, the
#: partner's crossing part and the merged output, and the part of the next pair in
#: flight (``distsort.cluster.locality.PAIRS_PER_WORKER``).
MERGE_CHUNKS = 4


def needed_limit(chunk_bytes, pause):
    """The smallest ``--memory-limit`` under which a worker's footprint and its merges'
    chunks of ``chunk_bytes`` stay below the fraction ``pause`` where it stops running
    tasks, rounded up to a MiB.

    >>> needed_limit(4 << 20, 0.8) >> 20
    180
    """
    mib = 1 << 20
    return math.ceil((WORKER_FOOTPRINT + MERGE_CHUNKS * chunk_bytes) / pause / mib) * mib


def fitting_chunk(limit, pause, per_element):
    """Elements of the largest chunk whose merges fit a worker of ``limit`` bytes (0: none
    does, the worker's own footprint is too much).

    >>> fitting_chunk(200 << 20, 0.8, 8), fitting_chunk(100 << 20, 0.8, 8)
    (1048576, 0)
    """
    room = limit * pause - WORKER_FOOTPRINT
    return max(0, int(room // (MERGE_CHUNKS * per_element)))


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


def _limit_bytes(args):
    """``--memory-limit`` in bytes per worker; None where it is not a size in bytes
    (distributed's ``"auto"`` or fractions of the host's memory; a bad value is
    refused where the options are checked)."""
    from dask.utils import parse_bytes
    try:
        return int(parse_bytes(args.memory_limit)) or None
    except (ValueError, TypeError):
        return None


def check_memory_limit(args, job):
    """Refuse (exit 2), before starting a local CPU cluster, a ``--memory-limit`` under
    which a worker cannot merge the chunks that the command would give it.  (GPU
    workers and running clusters do not take the option.)"""
    from distsort.cli.connection import Cluster, wants_gpu
    if (not getattr(args, "memory_limit", None) or args.scheduler_address
            or args.scheduler_file or wants_gpu(args)):
        return
    limit = _limit_bytes(args)
    if limit is None:
        return
    per_element, pause = job.per_element(), _pause_fraction()

    def chunk_bytes(worker_memory):
        planned = Cluster(None, "", gpu=False, worker_memory=worker_memory)
        elements = chunk_elements(args, planned, job.src.dtype.itemsize, per_element)
        return min(elements, max(1, job.src.n)) * per_element

    if needed_limit(chunk_bytes(limit), pause) <= limit:
        return
    smallest = _smallest_limit(chunk_bytes, pause)
    fits = min(fitting_chunk(limit, pause, per_element), max(1, job.src.n))
    itemsize = job.src.dtype.itemsize
    advice = (f"; with --memory-limit {args.memory_limit}, --chunk-size {fits} (elements, "
              f"{fmt_bytes(fits * itemsize)} of keys) would fit" if fits else
              f"; no chunk size fits --memory-limit {args.memory_limit}: a worker takes "
              f"{fmt_bytes(WORKER_FOOTPRINT)} before it holds any data")
    raise CLIError(
        f"--memory-limit {args.memory_limit} is too small: a worker needs at least "
        f"--memory-limit {fmt_bytes(smallest)} (its own {fmt_bytes(WORKER_FOOTPRINT)}, and "
        f"{MERGE_CHUNKS} chunks of {fmt_bytes(chunk_bytes(smallest))} in its merges, below "
        f"the {pause:.0%} of the limit where it pauses){advice}", BAD_INPUT)


def _smallest_limit(chunk_bytes, pause):
    """The smallest limit that holds its own chunks (``chunk_bytes(limit)``, which grow
    with the limit where ``--chunk-size`` is not given): the fixed point of
    ``needed_limit``, reached from below (each step a quarter of the last or less)."""
    limit = needed_limit(chunk_bytes(0), pause)
    for _ in range(64):
        more = needed_limit(chunk_bytes(limit), pause)
        if more <= limit:
            return limit
        limit = more
    return limit


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
    after as many deaths (``KilledWorker``) ends it with the same message.

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
    allowed = deaths_allowed() if allowed is None else allowed
    deaths, stop, lost = _Deaths(client), threading.Event(), []

    def watch():
        # Until the sort ends or the client closes: a watch that ended on one failed
        # poll would leave workers that die between tasks (no task of theirs counts as
        # failed) to be restarted for ever.
        while not stop.wait(poll):
            if getattr(client, "status", None) in ("closing", "closed"):
                return
            try:
                count = deaths.count()
            except Exception:  # noqa: BLE001  (polled again)
                continue
            if count > allowed:
                lost[:] = [count, (deaths.removed or [None])[-1]]
                _cancel_until(client, stop, poll)
                return

    thread = threading.Thread(target=watch, name="distsort-worker-deaths", daemon=True)
    thread.start()
    try:
        yield
    except BaseException as e:
        # The cancelled futures raise CancelledError, not an Exception.
        if lost or isinstance(e, KilledWorker):
            raise CLIError(_deaths_message(lost, allowed, None if lost else e),
                           RUNTIME_FAILURE) from e
        raise
    finally:
        stop.set()
        thread.join()
    if lost:  # the sort ended as the watch cancelled it
        raise CLIError(_deaths_message(lost, allowed, None), RUNTIME_FAILURE)


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
