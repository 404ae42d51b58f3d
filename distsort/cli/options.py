"""Checks of the cluster options, made before any work: each bad value is a usage
error (exit 2) whose message says what is allowed."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re

from distsort.cli.errors import CLIError

#: Local worker processes per core at most: each takes memory of its own, and more
#: than a few per core only wait for each other.
WORKERS_PER_CORE = 4
MAX_PORT = 65535
_ADDRESS = re.compile(r"(?:(tcp|tls|ucx|ws|wss)://)?(\[[0-9a-fA-F:.]+\]|[\w.-]+):(\d{1,5})")


def workers_arg(text):
    """``--workers N``: 1 up to ``WORKERS_PER_CORE`` per core of this host.

    >>> workers_arg("2")
    2
    """
    most = WORKERS_PER_CORE * (os.cpu_count() or 1)
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= most:
        raise argparse.ArgumentTypeError(
            f"{text!r}: use a whole number from 1 to {most} "
            f"({WORKERS_PER_CORE} per core of this host)")
    return n


def memory_limit_arg(text):
    """``--memory-limit``: a size in bytes (``2GiB``), a share of the host's memory
    (``0.5``), or ``auto``; returned as given, for ``distributed``.

    >>> memory_limit_arg("2GiB"), memory_limit_arg("0.5")
    ('2GiB', '0.5')
    """
    from dask.utils import parse_bytes
    ok = text == "auto"
    with contextlib.suppress(ValueError):
        ok = ok or 0 < float(text) <= 1
    with contextlib.suppress(ValueError, TypeError, OverflowError):
        ok = ok or parse_bytes(text) > 0
    if not ok:
        raise argparse.ArgumentTypeError(
            f"{text!r}: use a size in bytes (e.g. 2GiB), a share of this "
            "host's memory (e.g. 0.5) or auto")
    return text


def scheduler_address_arg(text):
    """``--scheduler-address``: ``[tcp|tls|ucx|ws|wss://]host:port``, or an in-process
    scheduler's ``inproc://...``.

    >>> scheduler_address_arg("tcp://10.0.0.1:8786")
    'tcp://10.0.0.1:8786'
    """
    text = text.strip()
    if text.startswith("inproc://") and " " not in text:
        return text
    m = _ADDRESS.fullmatch(text)
    if not m or not 0 < int(m.group(3)) <= MAX_PORT:
        raise argparse.ArgumentTypeError(
            f"not a scheduler address: {text!r} (use PROTOCOL://HOST:PORT, e.g. "
            "tcp://10.0.0.1:8786)")
    return text


def check_scheduler_file(path):
    """CLIError unless ``path`` is a scheduler file (``dask scheduler
    --scheduler-file``): JSON with the scheduler's address."""
    if not path:
        return
    try:
        with open(path) as f:
            info = json.load(f)
    except FileNotFoundError:
        raise CLIError(f"scheduler file {path}: no such file") from None
    except (OSError, ValueError) as e:
        raise CLIError(f"scheduler file {path}: not a scheduler file (the JSON that "
                       f"'dask scheduler --scheduler-file' writes): {e}") from None
    address = info.get("address") if isinstance(info, dict) else None
    if not isinstance(address, str):
        raise CLIError(f"scheduler file {path}: not a scheduler file (the JSON that "
                       "'dask scheduler --scheduler-file' writes): it names no address")


def check_device(args):
    """``--device gpu`` on a local cluster needs CuPy and a CUDA GPU here."""
    if getattr(args, "device", "auto") != "gpu" or args.scheduler_address or args.scheduler_file:
        return
    from distsort.cluster import gpu_available
    if not gpu_available():
        raise CLIError("--device gpu: no CUDA GPU that CuPy can use on this host; use "
                       "--device cpu (or auto), or connect to GPU workers with "
                       "--scheduler-address")


def check_cluster_options(args):
    """The checks that need more than the option's text (files, this host)."""
    check_scheduler_file(args.scheduler_file)
    check_device(args)
