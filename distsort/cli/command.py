"""``main``: parse the command line, run the command, turn its errors into exit codes."""
import atexit
import contextlib
import os
import signal
import sys
import time

from distsort.cli.args import build_parser
from distsort.cli.errors import INTERRUPTED, CLIError, Interrupted, outcome, print_error
from distsort.cli.signals import interrupts_not_lost, sigterm_interrupts


def _split_bench_extra(argv):
    """``bench ... -- ARGS``: ARGS go to the scenarios, not to argparse."""
    if argv[:1] == ["bench"] and "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1:]
    return argv, []


def _since_process_start():
    """Seconds since this process started: to 10 ms from Linux's /proc (the process's
    start in clock ticks since boot), else psutil's (to the second: it counts from the
    boot time, which Linux gives in whole seconds)."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # the name may hold spaces
        ticks = int(fields[19])  # field 22, starttime; fields[0] is field 3
        since = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        import psutil
        since = time.time() - psutil.Process().create_time()
    return max(0.0, since)


#: Modules the command line keeps out while dask.array loads: dask.array imports
#: xarray (and with it pandas) where it is installed, only to recognise xarray
#: objects, which the command never gets (a good part of a small sort's time:
#: ``docs/performance.md``).
_NOT_FOR_THE_COMMAND = ("xarray",)


def run(taken_over=None):
    """The ``distsort`` executable: :func:`main`, then an exit that skips the
    interpreter's teardown.

    Freeing every module and object at exit takes a noticeable part of a small sort
    (``docs/performance.md``).  Nothing of the command needs it: ``main`` closes and syncs the
    outputs, removes its temporaries and closes its cluster before it returns; the
    ``atexit`` handlers still run and the standard streams are flushed.

    An interrupt that comes once ``main`` has decided the status (its handlers are
    gone) keeps that status; one that comes before, anywhere, exits 130.
    """
    status = None
    try:
        status = main(command_line=True, taken_over=taken_over)
    except (KeyboardInterrupt, Interrupted):  # outside main's own handling
        status = DECIDED.get("status")
        if status is None:
            print_error("interrupted")
    except Exception as e:  # noqa: BLE001  (building the parser): one line, no traceback
        status = _failed(e)
    try:
        for s in (signal.SIGINT, signal.SIGTERM):  # the status is decided: exit with it
            signal.signal(s, signal.SIG_IGN)
        _abandon_local_pools()
        atexit._run_exitfuncs()  # noqa: SLF001  (what a normal exit runs first)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed pipe: nothing to flush to
                stream.flush()
    except (KeyboardInterrupt, Interrupted):  # before the signals were ignored
        pass
    os._exit(INTERRUPTED if status is None else status)


def _abandon_local_pools():
    """Stop Dask's local thread pools without waiting for the tasks they run.

    Their exit handlers wait for every running task: after an interrupt, the sort of
    each chunk in hand, which may take seconds.  The process ends at once after
    ``main``, so nothing they compute is needed.
    """
    threaded = sys.modules.get("dask.threaded")
    if threaded is None:
        return
    pools = [threaded.default_pool] + [p for by_size in threaded.pools.values()
                                       for p in by_size.values()]
    for pool in pools:
        if pool is not None:
            atexit.unregister(pool.shutdown)
            pool.shutdown(wait=False, cancel_futures=True)


def import_dask_array_lean():
    """Import dask.array with ``_NOT_FOR_THE_COMMAND`` unimportable while it loads.

    For the command line only (a process of its own): dask.array then does not
    recognise xarray objects in ``from_array``, which a script might rely on.  They
    stay importable afterwards.
    """
    if "dask.array" in sys.modules:
        return
    hidden = [m for m in _NOT_FOR_THE_COMMAND if m not in sys.modules]
    for m in hidden:
        sys.modules[m] = None  # makes ``import m`` raise ImportError
    try:
        import dask.array  # noqa: F401
    finally:
        for m in hidden:
            if m in sys.modules and sys.modules[m] is None:
                del sys.modules[m]


#: The status of the command line's run, once :func:`main` has decided it: an
#: interrupt that comes after (in :func:`run`) keeps it.
DECIDED: dict[str, int] = {}


def main(argv: list[str] | None = None, *, command_line: bool = False,
         taken_over=None) -> int:
    """Run the ``distsort`` command; returns the exit status.

    ``command_line``: this process is the command (:func:`run`), not a script that
    calls ``main``; ``taken_over``: called once the command handles signals itself
    (the executable's first handler, :mod:`distsort.cli.launch`, then leaves them to it).

    >>> main(["sort", "missing.npy", "out.npy"])
    2
    """
    # The command's wall time counts from the start of the process (imports included)
    # when it is the command line; from here when a script calls main().
    t0 = time.perf_counter() - (_since_process_start() if argv is None else 0.0)
    argv, extra = _split_bench_extra(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse: 0 for --help, 2 for usage errors
        return int(e.code or 0)
    if extra:
        args.extra = extra
    args.t0 = t0
    status = None
    try:
        with sigterm_interrupts(), interrupts_not_lost():
            if command_line:  # SIGINT stopped the process at once while it started
                signal.signal(signal.SIGINT, signal.default_int_handler)
                if taken_over is not None:
                    taken_over()
                import_dask_array_lean()
            status = DECIDED["status"] = args.func(args)
        return status
    except (KeyboardInterrupt, Interrupted, Exception) as e:
        # An interrupt after the command's end (its handlers being put back) does
        # not change the status decided.
        if status is None:
            status = DECIDED["status"] = _failed(e)
        return status


def _failed(error: BaseException) -> int:
    """The exit status of the command ended by ``error``, said in one line (no
    traceback unless ``DISTSORT_DEBUG`` is set, for errors of no known kind); the
    table is :func:`distsort.cli.errors.outcome`."""
    code, line = outcome(error)
    print_error(line)
    if os.environ.get("DISTSORT_DEBUG") and not isinstance(error, (CLIError, OSError)) \
            and code != INTERRUPTED:
        raise error
    return code
