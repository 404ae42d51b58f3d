"""The ``distsort`` executable's first code: SIGINT and SIGTERM are handled before
the command's modules are imported (about a second), so that a signal that comes
then ends the command at once, with exit status 130 and one line, no traceback.

Nothing is written before :func:`distsort.cli.command.main` runs; from there on the
command handles signals itself (its outputs, their temporaries).  ``_signal`` (the
built-in module under ``signal``) is installed without building ``signal``'s enums,
which under load took long enough for a Ctrl-C to land there.
"""
import _signal
import os

#: The command's status for an interrupt (``distsort.cli.errors.INTERRUPTED``).
INTERRUPTED = 130


def _stop(signum, frame):
    os.write(2, b"distsort: interrupted; no output written\n")
    os._exit(INTERRUPTED)


def run():
    """Handle SIGINT and SIGTERM, import the command and run it (which takes them
    over once its arguments are parsed)."""
    _signal.signal(_signal.SIGINT, _stop)
    _signal.signal(_signal.SIGTERM, _stop)
    from distsort.cli.command import run as command
    return command()
