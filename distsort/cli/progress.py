"""Computing on the cluster (or the local scheduler) with a progress bar, and
measuring the data that crossed between chunks on the way."""
import asyncio
import contextlib

import time

from distsort.cli.metrics import LocalMeter, crossing_of, step_intervals
from distsort.cli.streams import quiet, say

#: Seconds a finished computation waits for its progress bar's last message (the
#: scheduler sends one each 100 ms).
BAR_SECONDS = 2


def local_scheduler():
    """Dask's threaded scheduler, for a command that runs without a cluster.

    Given as the function, not by name or left to Dask: for either, Dask imports
    distributed (a few tenths of a second) to look for a client, and would pick a
    client that a script calling ``main`` holds.
    """
    from dask.threaded import get
    return get


def compute(client, collections, progress, label):
    """Compute ``collections`` on ``client`` (or the local scheduler) with a progress bar.

    Returns (results, stats): ``stats["crossing"]`` and ``stats["tasks"]`` are the sizes
    and number of the head/tail tasks that ran, ``stats["intervals"]`` the ``(start,
    stop)`` of each step's tasks (read, sort, merge, write, verify, output:
    :func:`distsort.cli.metrics.task_step`), in ``time.perf_counter`` seconds, as the
    scheduler's task stream (or this process's scheduler) recorded them.
    """
    import dask
    if progress:
        say(label)
    # Unoptimized: Dask fuses array layers and delayed ones apart, so the merges fused
    # into the store's tasks would run a second time for the summaries of --verify,
    # which read the same sorted chunks.  The tasks are few and large; fusing saves
    # nothing here.
    if client is None:
        from dask.diagnostics import ProgressBar
        bar = ProgressBar(out=quiet()) if progress else contextlib.nullcontext()
        with bar, LocalMeter() as meter:
            results = dask.compute(*collections, scheduler=local_scheduler(),
                                   optimize_graph=False)
        return results, {"crossing": meter.crossing, "tasks": meter.tasks,
                         "intervals": meter.intervals}
    from distributed import get_task_stream
    with get_task_stream(client) as stream:
        futures = client.compute(list(collections), optimize_graph=False)
        try:
            with text_bar(client, futures, progress):
                results = client.gather(futures)
        except BaseException:
            client.cancel(futures)
            raise
    crossing, tasks = crossing_of(stream.data)
    # The workers' clocks (time.time, on this host or synchronised) to this process's.
    offset = time.perf_counter() - time.time()
    return results, {"crossing": crossing, "tasks": tasks,
                     "intervals": step_intervals(stream.data, offset)}


def persist(cluster, x, progress, label):
    """``x`` computed and held in memory (on the workers); returns it and the crossing bytes."""
    if progress:
        say(label)
    if cluster.client is None:
        from dask.diagnostics import ProgressBar
        bar = ProgressBar(out=quiet()) if progress else contextlib.nullcontext()
        with bar, LocalMeter() as m:
            return x.persist(scheduler=local_scheduler()), (m.crossing, m.tasks)
    from distributed import futures_of, get_task_stream, wait
    with get_task_stream(cluster.client) as stream:
        x = cluster.client.persist(x)
        futures = futures_of(x)
        try:
            with text_bar(cluster.client, futures, progress):
                wait(futures)
                cluster.client.gather(futures[:1])  # raises the task's error, if any
        except BaseException:
            cluster.client.cancel(futures)
            raise
    return x, crossing_of(stream.data)


@contextlib.contextmanager
def text_bar(client, futures, progress=True):
    """Distributed's text progress bar of ``futures``, drawn from ``client``'s event
    loop while this thread waits on the futures themselves.

    ``distributed.progress`` would wait in the bar, which ends only on a message from
    the scheduler: futures cancelled before the bar's feed has seen them never send
    one, nor does a scheduler that drops the feed as it closes (a command waiting for
    ever).  A cancelled future ends a wait on it at once.
    """
    if not progress:
        yield
        return
    bar = _quiet_text_bar()(futures, start=False)
    listening = asyncio.run_coroutine_threadsafe(_listen(bar), client.loop.asyncio_loop)
    try:
        yield
        # Done: the bar's last message (100%) comes within one of its intervals.
        with contextlib.suppress(Exception):
            listening.result(timeout=BAR_SECONDS)
    finally:
        listening.cancel()


def _quiet_text_bar():
    """Distributed's text progress bar, drawn through :func:`distsort.cli.streams.quiet`:
    a pipe whose reader left (``| head``) stops the bar, not the command (the bar
    writes from the client's event loop, where an error would be a traceback)."""
    from distributed.diagnostics.progressbar import TextProgressBar

    class QuietTextProgressBar(TextProgressBar):
        out = quiet()

        def _draw_bar(self, remaining, all, **kwargs):
            frac = (1 - remaining / all) if all else 1.0
            bar = "#" * int(self.width * frac)
            self.out.write(f"\r[{bar:<{self.width}}] | {int(100 * frac)}% Completed | "
                           f"{self.elapsed:.1f} s")
            self.out.flush()

        def _draw_stop(self, **kwargs):
            self.out.write("\33[2K\r")
            self.out.flush()
    return QuietTextProgressBar


async def _listen(bar):
    try:
        await bar.listen()
    finally:  # cancelled: the comm is closed in its own loop, not by the collector
        comm = getattr(bar, "comm", None)
        if comm is not None and not comm.closed():
            comm.abort()
