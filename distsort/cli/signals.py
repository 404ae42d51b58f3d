"""SIGINT and SIGTERM while a command runs: both interrupt it, except where a
half-done step would be worse than finishing it (renaming a pair of outputs)."""
import contextlib
import signal

from .errors import Interrupted


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
