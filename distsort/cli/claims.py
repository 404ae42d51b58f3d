"""Outputs claimed before the sort starts, so that no file is replaced that the run
was not asked to replace.

A run holds a lock beside each of its outputs (``.<name>.distsort-lock``, an
``flock`` that the kernel lets go when the process ends, however it ends) from its
start to its end: a second run on the same output is refused at once (exit 2).  The
claim also records what was at the output's path when the run started: nothing, or
(``--overwrite``) a file or directory by its identity.  At publication
(:mod:`distsort.cli.outputs`) the output is renamed into place only over that: a
file or directory that appeared since, or replaced the one found, is left as it is
and the run ends with exit 2, its sorted output discarded.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import os
from dataclasses import dataclass
from pathlib import Path

from distsort.core.libc import libc
from distsort.cli.errors import CLIError
from distsort.cli.identities import Identity, identity
from distsort.cli.temporaries import hold, lock_name

#: ``renameat2``'s flag: fail with EEXIST where the new name exists.
RENAME_NOREPLACE = 1
#: ``renameat2``'s "the current directory" for its directory descriptors.
AT_FDCWD = -100


@dataclass
class Claim:
    """An output's lock, held from the run's start to its end, and what was at the
    output's path then (its identity, None for nothing)."""

    path: str  # as given, for messages
    final: str  # resolved
    lock: str
    fd: int
    found: Identity | None

    def check_unchanged(self):
        """Raise the conflict where the output's path no longer holds what it held
        when the run started (a file or directory appeared, or replaced it)."""
        if identity(self.final, follow=False) != self.found:
            raise conflict(self.path, self.found is not None)

    def release(self):
        """Remove the lock and let it go (removed first: a run that opened it
        meanwhile finds its name gone and makes a new one)."""
        if self.fd < 0:
            return
        with contextlib.suppress(FileNotFoundError):
            if os.path.samestat(os.fstat(self.fd), os.stat(self.lock)):
                os.remove(self.lock)
        os.close(self.fd)
        self.fd = -1


def conflict(path, overwrite):
    """The error of an output whose path changed during the run."""
    what = ("was replaced while the sort ran" if overwrite
            else "appeared while the sort ran")
    return CLIError(f"{path}: {what}; it is left as it is and the sorted output is "
                    "discarded (run again with --overwrite to replace it)")


def claim(path, overwrite):
    """Lock output ``path`` for this run and record what is there: an existing
    output is refused unless ``overwrite``; an output another run holds, always."""
    final = str(Path(path).resolve())
    lock = lock_name(final)
    fd = hold(lock)
    if fd is None:
        raise CLIError(f"{path}: another distsort run is writing it (it holds the lock "
                       f"{lock}); wait for it to end, or name another output")
    held = Claim(str(path), final, lock, fd, identity(final, follow=False))
    if held.found is not None and not overwrite:
        held.release()
        raise CLIError(f"{path}: already exists (use --overwrite to replace it)")
    return held


def rename_noreplace(src, dst):
    """Rename ``src`` to ``dst`` where ``dst`` does not exist; FileExistsError where it
    does (a file or a directory, even an empty one).

    Linux's ``renameat2(RENAME_NOREPLACE)`` checks and renames in one step.  Where the
    system or the filesystem lacks it, a file is linked and then unlinked (``link``
    fails on an existing name) and a directory is renamed after a check (a directory
    made in between, empty, would be replaced).
    """
    f = libc("renameat2", ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
             ctypes.c_uint)
    if f is not None:
        if f(AT_FDCWD, os.fsencode(src), AT_FDCWD, os.fsencode(dst), RENAME_NOREPLACE) == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(err, os.strerror(err), dst)
    if os.path.isdir(src) and not os.path.islink(src):
        if os.path.lexists(dst):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), dst)
        os.rename(src, dst)
        return
    os.link(src, dst, follow_symlinks=False)
    os.remove(src)
