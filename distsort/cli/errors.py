"""Exit codes, the exceptions that carry them to ``main``, and the one table that
turns any error into a code and a line (:func:`outcome`)."""
import errno
import sys

OK, VERIFY_FAILED, BAD_INPUT, RUNTIME_FAILURE, INTERRUPTED = 0, 1, 2, 3, 130
EXIT_CODES = {OK: "success",
              VERIFY_FAILED: "verification failed (no output is left)",
              BAD_INPUT: "bad usage or input (missing/unreadable/corrupt file, unsupported "
                         "dtype, existing output without --overwrite, an output another "
                         "run is writing or that appeared during the sort)",
              RUNTIME_FAILURE: "runtime failure (worker error, disk full, lost cluster)",
              INTERRUPTED: "interrupted (SIGINT or SIGTERM); temporary output removed"}


class CLIError(Exception):
    """An error reported as one line on stderr, with an exit code."""

    def __init__(self, message, code=BAD_INPUT):
        super().__init__(message)
        self.code = code


class Interrupted(BaseException):
    """SIGTERM, handled like Ctrl-C (a BaseException, so that nothing swallows it)."""


def interrupted(error: BaseException) -> bool:
    """Whether ``error`` comes of an interrupt: Python wraps one that lands inside a
    class body being made (an import's ``__set_name__``) in a RuntimeError.

    >>> try:
    ...     raise RuntimeError("Error calling __set_name__") from KeyboardInterrupt()
    ... except RuntimeError as e:
    ...     interrupted(e), interrupted(ValueError())
    (True, False)
    """
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, (KeyboardInterrupt, Interrupted)):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


def outcome(error: BaseException, published: str = "") -> tuple[int, str]:
    """The exit status and the line that say how ``error`` ended the command.

    ``published``: the outputs already in place (their names), where the command
    failed after publishing them; the line then says so instead of "no output
    written".

    >>> outcome(CLIError("x.npy: no such file"))
    (2, 'x.npy: no such file')
    >>> outcome(OSError(errno.ENOSPC, "No space left on device", "r.html"))
    (3, 'no space left on device (r.html); no output written')
    >>> outcome(KeyboardInterrupt(), published="o.npy")
    (130, 'interrupted after the output was published: o.npy complete')
    """
    if isinstance(error, CLIError):
        code, line = error.code, str(error)
    elif interrupted(error):
        code, line = INTERRUPTED, "interrupted"
    elif isinstance(error, OSError) and error.errno == errno.ENOSPC:
        code, line = RUNTIME_FAILURE, f"no space left on device ({error.filename or 'output'})"
    elif isinstance(error, OSError):
        code, line = RUNTIME_FAILURE, f"I/O error: {error}"
    else:  # a worker's error, a lost cluster, ...: one line, not a traceback
        code, line = RUNTIME_FAILURE, f"failed: {type(error).__name__}: {error}"
    if isinstance(error, CLIError):
        return code, line
    if published:
        if code == INTERRUPTED:
            return code, f"interrupted after the output was published: {published} complete"
        return code, f"{line}; after the output was published: {published} complete"
    return code, f"{line}; no output written"


def print_error(msg):
    """``distsort: msg`` on stderr; nothing where stderr cannot be written (closed,
    full, a pipe whose reader left): the exit status says what happened."""
    try:
        sys.stderr.write(f"distsort: {msg}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # AttributeError: no sys.stderr (2>&-)
        pass
