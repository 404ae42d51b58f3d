"""The disk path's threads: tasks of three steps (read, sort, write), the disk reading
and writing while the cores sort, a bounded number of tasks in flight (memory), each
with buffers of its own (:func:`distsort.backends.disk.buffers.task_buffers`)."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from distsort.backends.disk.buffers import task_buffers

__all__ = ["Pipeline", "READERS"]

#: Threads that read (:class:`Pipeline`): a merge segment reads a slice of every run,
#: many small reads that one thread waits for one by one.
READERS = 2


class Pipeline:
    """Tasks of three steps: ``read`` on one of ``READERS`` threads, ``sort`` on one of
    ``cpus`` threads, ``write`` on the writing thread, ``tasks`` of them in flight (each
    with buffers of its own, ``task_buffers``, passed to every step as ``slot``).

    The disk reads and writes while the cores sort, as a copy of the file would: tasks
    that read, sort and write in turn left a core idle whenever two of them waited for
    the disk, and the disk idle whenever all of them sorted.

    ``intervals``: ``{step: [(start, stop)]}`` (``time.perf_counter``) of every step
    that ran, its middle step named as the call says (``"sort"`` or ``"merge"``): when
    the disk and the cores worked, for the command's summary.

    >>> with Pipeline(tasks=2, cpus=1) as p:
    ...     p(range(4), lambda i, s: i, lambda i, s: i * i, lambda i, s: i + 1)
    [1, 2, 5, 10]
    >>> sorted(p.intervals), len(p.intervals["read"])
    (['read', 'sort', 'write'], 4)
    """

    def __init__(self, tasks, cpus):
        self.tasks = int(tasks)
        self.intervals = {}
        self._pools = [ThreadPoolExecutor(READERS, thread_name_prefix="distsort-read"),
                       ThreadPoolExecutor(int(cpus), thread_name_prefix="distsort-sort"),
                       ThreadPoolExecutor(1, thread_name_prefix="distsort-write"),
                       ThreadPoolExecutor(self.tasks, thread_name_prefix="distsort-task")]

    def __call__(self, items, read, sort, write, progress=None, label="", total=None,  # noqa: PLR0913, PLR0917
                 middle="sort"):
        """``write(sort(read(item)))`` of every item, results in order;
        ``progress(label, done, total)`` after each; ``middle``: the name of the
        ``sort`` step in :attr:`intervals`."""
        reader, sorter, writer, tasks = self._pools
        read, sort, write = (self._timed(step, fn) for step, fn in
                             (("read", read), (middle, sort), ("write", write)))

        def one(item):
            slot = task_buffers()
            state = reader.submit(read, item, slot).result()
            state = sorter.submit(sort, state, slot).result()
            return writer.submit(write, state, slot).result()
        return _bounded(tasks, one, items, self.tasks, progress, label, total)

    def _timed(self, step, fn):
        spans = self.intervals.setdefault(step, [])

        def timed(*args):
            start = time.perf_counter()
            try:
                return fn(*args)
            finally:
                spans.append((start, time.perf_counter()))  # list.append: thread-safe
        return timed

    def __enter__(self):
        return self

    def __exit__(self, kind, error, trace):
        for pool in self._pools[::-1]:  # the tasks first: they wait for the others
            pool.shutdown(wait=True, cancel_futures=error is not None)


def _bounded(pool, fn, items, tasks, progress, label, total=None):  # noqa: PLR0913, PLR0917
    """``fn`` of every item on ``pool``, at most ``tasks`` at once (memory): the next
    item goes as soon as any task ends, not the oldest (a task whose write waits for
    the disk would hold the next read back).  Results in order;
    ``progress(label, done, total)`` as they come."""
    items = list(items) if total is None else items
    total = len(items) if total is None else total
    free = threading.Semaphore(tasks)
    futures, reported = [], 0

    def report():
        nonlocal reported
        done = sum(f.done() for f in futures)
        for f in futures:
            if f.done() and f.exception() is not None:
                raise f.exception()
        if progress and done > reported:
            reported = done
            progress(label, done, total)

    for item in items:
        while not free.acquire(timeout=0.5):
            report()
        report()
        futures.append(pool.submit(fn, item))
        futures[-1].add_done_callback(lambda _: free.release())
    results = []
    for f in futures:
        results.append(f.result())
    report()
    return results

