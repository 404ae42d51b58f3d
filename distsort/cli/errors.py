"""Exit codes, and the exceptions that carry them to ``main``."""
import sys

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


def print_error(msg):
    print(f"distsort: {msg}", file=sys.stderr, flush=True)
