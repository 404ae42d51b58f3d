"""The ``distsort`` executable's first code: SIGINT and SIGTERM are handled before
the command's modules are imported (about a second), so that a signal that comes
then ends the command at once, with exit status 130 and one line, no traceback.

Nothing is written before :func:`distsort.cli.command.main` runs; from there on the
command handles signals itself (its outputs, their temporaries), and once it has
started, :func:`_stop` no longer ends the process: it raises, for the command to
judge (an interrupt after the command's status is decided keeps that status).
``_signal`` (the built-in module under ``signal``) is installed without building
``signal``'s enums, which under load took long enough for a Ctrl-C to land there.

A signal that comes before the interpreter runs this module (the first tens of
milliseconds of the process) ends it as Python's defaults do; nothing is written
by then.
"""
import _signal
import os

#: The command's status for an interrupt (``distsort.cli.errors.INTERRUPTED``).
INTERRUPTED = 130
#: Set (through :func:`_taken_over`) once the command handles signals itself.
_started = []


def _taken_over():
    _started.append(True)


def _stop(signum, frame):
    if _started:  # the command's handlers were put back: it decides
        raise KeyboardInterrupt
    os.write(2, b"distsort: interrupted; no output written\n")
    os._exit(INTERRUPTED)


def _standard_descriptors_open():
    """/dev/null on descriptors 0, 1 and 2 where they are closed (``>&-``): otherwise
    the first files the command opens would take those numbers, and a write meant for
    stdout or stderr (a library's, a worker process's) would land in an output."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)


def run():
    """Handle SIGINT and SIGTERM, import the command and run it (which takes them
    over once its arguments are parsed)."""
    _signal.signal(_signal.SIGINT, _stop)
    _signal.signal(_signal.SIGTERM, _stop)
    _standard_descriptors_open()
    from distsort.cli.command import run as command
    return command(taken_over=_taken_over)
