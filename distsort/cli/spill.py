"""The spill directory of a local cluster: checked before any work, and watched while
the sort runs.

distributed's workers spill chunks to ``--spill-dir`` past a share of their memory
limit.  A directory they cannot write to failed the cluster's start ("cannot reach the
scheduler: [Errno 30]"), and a full one hung the command: a worker whose spill fails
(``OSError: [Errno 28]``, from zict) logs it, keeps the data in memory and pauses,
and the sort waits for ever.  So :func:`check_spill_dir` refuses a directory the
command cannot write to (exit 2), and :class:`SpillWatch` reports the first spill
that failed for want of space, for the command to end the sort (exit 3)
(:mod:`distsort.cli.spillwatch`).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from distsort.cli.errors import BAD_INPUT, CLIError


def check_spill_dir(path):
    """CLIError (exit 2) unless the workers can write spilled chunks under ``path``:
    a directory this process can create a file in, or one it can create (as
    distributed does) under a writable directory.

    >>> check_spill_dir(tempfile.gettempdir())
    >>> check_spill_dir(os.devnull)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    distsort.cli.errors.CLIError: --spill-dir /dev/null: not a directory...
    """
    if not path:
        return
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise CLIError(f"--spill-dir {path}: not a directory: the workers spill chunks "
                       "into it; name a writable directory")
    there = p
    while not there.exists():  # distributed creates the missing directories
        there = there.parent
    try:
        fd, name = tempfile.mkstemp(prefix=".distsort-spill-check-", dir=there)
        os.close(fd)
        os.unlink(name)
    except OSError as e:
        raise CLIError(f"--spill-dir {path}: the workers cannot write there "
                       f"({e.strerror or e}: {there}); name a writable directory",
                       BAD_INPUT) from None
