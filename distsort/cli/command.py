"""``main``: parse the command line, run the command, turn its errors into exit codes."""
import errno
import os
import sys
import time

from .args import build_parser
from .errors import INTERRUPTED, RUNTIME_FAILURE, CLIError, Interrupted, print_error
from .signals import sigterm_interrupts


def _split_bench_extra(argv):
    """``bench ... -- ARGS``: ARGS go to the scenarios, not to argparse."""
    if argv[:1] == ["bench"] and "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1:]
    return argv, []


def _since_process_start():
    import psutil
    return max(0.0, time.time() - psutil.Process().create_time())


def main(argv=None):
    """Run the ``distsort`` command; returns the exit status.

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
    try:
        with sigterm_interrupts():
            return args.func(args)
    except CLIError as e:
        print_error(str(e))
        return e.code
    except (KeyboardInterrupt, Interrupted):
        print_error("interrupted; no output written")
        return INTERRUPTED
    except OSError as e:
        if e.errno == errno.ENOSPC:
            print_error(f"no space left on device ({e.filename or 'output'}); no output written")
        else:
            print_error(f"I/O error: {e}")
        return RUNTIME_FAILURE
    except Exception as e:  # a worker's error, a lost cluster, ...: one line, not a traceback
        print_error(f"failed: {type(e).__name__}: {e}")
        if os.environ.get("DISTSORT_DEBUG"):
            raise
        return RUNTIME_FAILURE
