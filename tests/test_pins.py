"""``distsort.backends.share.keepalive``: what a shared GPU chunk's owner holds until its
reader is done."""
import gc
import multiprocessing
import time
import weakref

from distsort.backends.share.keepalive import Pins, mark_read


class Chunk:
    pass


def _read(ticket):
    mark_read(*ticket)


def wait_until(cond, seconds=5):
    end = time.monotonic() + seconds
    while not cond() and time.monotonic() < end:
        time.sleep(0.005)
    return cond()


def test_held_until_the_reader_marks_it_from_another_process():
    pins = Pins()
    try:
        chunk = Chunk()
        alive = weakref.ref(chunk)
        ticket = pins.pin(chunk)
        del chunk
        gc.collect()
        time.sleep(0.05)
        assert alive() is not None and len(pins) == 1  # the owner dropped it; the pin did not
        p = multiprocessing.get_context("spawn").Process(target=_read, args=(ticket,))
        p.start()
        p.join(60)
        assert p.exitcode == 0
        assert wait_until(lambda: len(pins) == 0)
        gc.collect()
        assert alive() is None
    finally:
        pins.close()


def test_slots_are_reused_and_flags_reset():
    pins = Pins()
    try:
        first = pins.pin(Chunk())
        mark_read(*first)
        assert wait_until(lambda: len(pins) == 0)
        second = pins.pin(Chunk())
        assert second == first  # the slot came back, its flag cleared
        time.sleep(0.05)
        assert len(pins) == 1
        mark_read(*second)
        assert wait_until(lambda: len(pins) == 0)
    finally:
        pins.close()
