"""SIGINT and SIGTERM while a command runs: both interrupt it, except where a
half-done step would be worse than finishing it (renaming a pair of outputs)."""
import contextlib
import os
import signal
import sys
import threading

from distsort.cli.errors import Interrupted

#: Seconds after an interrupt lost in a callback that it is delivered again: the
#: callbacks it lands in (an import lock's, a weak reference's) are done by then.
REDELIVER_SECONDS = 0.05


@contextlib.contextmanager
def sigterm_interrupts():
    """SIGTERM raises ``Interrupted`` while a command runs; the caller's handler after."""
    def handler(signum, frame):
        raise Interrupted()
    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def interrupts_not_lost():
    """An interrupt raised where Python ignores exceptions (a weak reference's
    callback, such as an import lock's, or a ``__del__``) is delivered again just
    after, instead of printed as "Exception ignored" and lost: the command would go
    on as if it had not been interrupted."""
    previous = sys.unraisablehook

    def hook(unraisable):
        error = unraisable.exc_value
        if not isinstance(error, (KeyboardInterrupt, Interrupted)):
            previous(unraisable)
            return
        signum = signal.SIGINT if isinstance(error, KeyboardInterrupt) else signal.SIGTERM
        # From another thread, once the callback is done: a signal sent here would
        # be handled in this hook, whose exceptions are ignored too.
        again = threading.Timer(REDELIVER_SECONDS, os.kill, (os.getpid(), signum))
        again.daemon = True
        again.start()

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


def interruption(signum):
    """The exception that the command's handlers raise for ``signum``."""
    return KeyboardInterrupt() if signum == signal.SIGINT else Interrupted()


@contextlib.contextmanager
def signals_deferred():
    """SIGINT and SIGTERM are recorded in the yielded list instead of raising.

    The block checks the list where stopping is safe and raises
    ``interruption(signum)``, taking the signal off the list.  A signal still on it
    when the block ends without an exception is delivered again, to the handler in
    force before, so that none is lost.  An ignored signal stays ignored; off the
    main thread nothing changes.
    """
    caught = []

    def record(signum, frame):
        caught.append(signum)
    previous = {}
    try:
        for s in (signal.SIGINT, signal.SIGTERM):
            # None: a handler set outside Python, which could not be put back
            if signal.getsignal(s) not in (signal.SIG_IGN, None):
                previous[s] = signal.signal(s, record)
    except ValueError:  # not the main thread
        pass
    try:
        yield caught
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if caught:
        signal.raise_signal(caught[0])
