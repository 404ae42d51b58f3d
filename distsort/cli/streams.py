"""Writing to stdout and stderr, which may be closed, a pipe whose reader has left, or
a full device: the command's outcome never depends on them.

Progress lines and notes go through :func:`quiet`: a stream that drops what it cannot
write, and writes nothing more once one write failed.  The summary, which follows
the publication of the outputs, is written plainly and its errors are judged by the
caller (:func:`distsort.cli.sort.cmd_sort`).
"""
import sys

#: Errors of writing to a standard stream: a closed pipe, a full device, an I/O error
#: (OSError); a stream closed in Python (ValueError); no stream at all (AttributeError,
#: ``sys.stdout`` is None when the process started with descriptor 1 closed).
STREAM_ERRORS = (OSError, ValueError, AttributeError)


class QuietStream:
    """``stream`` (by default ``sys.stdout`` as it is at each write) that drops what it
    cannot write and, after the first failure, everything.

    >>> import io
    >>> s = QuietStream(io.StringIO()); s.write("a"); s.stream.close(); s.write("b")
    >>> s.failed
    True
    """

    def __init__(self, stream=None, name="stdout"):
        self._stream, self._name, self.failed = stream, name, False

    @property
    def stream(self):
        return self._stream if self._stream is not None else getattr(sys, self._name)

    def write(self, text):
        if self.failed:
            return
        try:
            self.stream.write(text)
        except STREAM_ERRORS:
            self.failed = True

    def flush(self):
        if self.failed:
            return
        try:
            self.stream.flush()
        except STREAM_ERRORS:
            self.failed = True

    def isatty(self):
        return is_terminal(self.stream)


def quiet(name="stdout"):
    """A :class:`QuietStream` of ``sys.<name>``."""
    return QuietStream(name=name)


def say(text, name="stdout"):
    """Print a line of progress to ``sys.<name>``, dropped where it cannot be written."""
    stream = quiet(name)
    stream.write(text + "\n")
    stream.flush()


def is_terminal(stream):
    """Whether ``stream`` is a terminal: False for a closed or missing one.

    >>> is_terminal(None)
    False
    """
    try:
        return bool(stream.isatty())
    except STREAM_ERRORS:
        return False

