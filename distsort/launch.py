"""The ``distsort`` executable's first code: SIGINT and SIGTERM are handled before
the command's modules are imported (about a second), so that a signal that comes
then ends the command at once, with exit status 130 and one line, no traceback.

Nothing is written before :func:`distsort.cli.command.main` runs; from there on the
command handles signals itself (its outputs, their temporaries).
"""
import os
import signal

#: The command's status for an interrupt (``distsort.cli.errors.INTERRUPTED``).
INTERRUPTED = 130


def _stop(signum, frame):
    os.write(2, b"distsort: interrupted; no output written\n")
    os._exit(INTERRUPTED)


def run():
    """Handle SIGINT and SIGTERM, import the command and run it (which takes them
    over once its arguments are parsed)."""
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, _stop)
    from .cli.command import run as command
    return command()
