"""The spills that failed for want of disk space on a local cluster's workers.

distributed's worker logs a spill that failed (``OSError: [Errno 28]``, from zict),
keeps the data in memory and pauses past its memory limit: the sort then waits for
ever.  :class:`SpillWatch` collects those failures on every worker (a worker plugin
and a logging handler) for the command's watch
(:func:`distsort.cli.limits.end_on_worker_deaths`) to end the sort (exit 3).
"""
from __future__ import annotations

import contextlib
import errno
import logging

from distributed import WorkerPlugin

#: The logger of distributed's spilling (``distributed.spill``), which logs a failed
#: spill with its ``OSError``.
SPILL_LOGGER = "distributed.spill"
_PLUGIN = "distsort-spill-failures"


class _Failures(logging.Handler):
    """Collects the spills that failed for want of space in this worker process."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.failures = []

    def emit(self, record):
        e = record.exc_info[1] if record.exc_info else None
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            self.failures.append(f"{type(e).__name__}: {e}")


def _handler():
    return next((h for h in logging.getLogger(SPILL_LOGGER).handlers
                 if isinstance(h, _Failures)), None)


def _install(dask_worker=None):
    """On a worker: start collecting its failed spills (once per process)."""
    if _handler() is None:
        logging.getLogger(SPILL_LOGGER).addHandler(_Failures())


def _failures(dask_worker=None):
    """On a worker: the spills that failed for want of space, and where it spills."""
    handler = _handler()
    directory = getattr(dask_worker, "local_directory", None)
    return (list(handler.failures) if handler is not None else []), directory


def _remove(dask_worker=None):
    handler = _handler()
    if handler is not None:
        logging.getLogger(SPILL_LOGGER).removeHandler(handler)


class SpillFailures(WorkerPlugin):
    """Installs the handler on every worker, restarted ones too."""

    name = _PLUGIN
    idempotent = True

    def setup(self, worker):
        _install(worker)

    def teardown(self, worker):
        _remove(worker)


class SpillWatch:
    """The spills of ``client``'s workers that failed for want of disk space: the
    workers log them (:data:`SPILL_LOGGER`); :meth:`failure` asks them."""

    def __init__(self, client):
        self.client = client
        with contextlib.suppress(Exception):  # no watch, as before: never a failure
            client.register_plugin(SpillFailures(), name=_PLUGIN)

    def failure(self):
        """The message the sort ends with, where a worker's spill found its disk full;
        else None."""
        answers = self.client.run(_failures, on_error="ignore")
        for worker, (failures, directory) in answers.items():
            if failures:
                return (f"the spill directory is full: worker {worker} could not spill "
                        f"chunks to {directory or 'its directory'} ({failures[0]}); "
                        "free space there, name another directory with --spill-dir, or "
                        "give the workers more memory (--memory-limit)")
        return None

    def close(self):
        with contextlib.suppress(Exception):
            self.client.unregister_worker_plugin(_PLUGIN)
