"""The files a command leaves beside its outputs while it runs, named so that a later
run can tell whose they are and remove them once their owner is gone.

Every such file is named ``.<name>.distsort-<kind>-<pid>-<host>-<random>``: ``kind``
is ``tmp`` (an output being written), ``old`` (an output replaced with --overwrite,
moved aside until the new one is in place), ``journal`` (a publication in progress)
or ``probe`` (the disk measurement); ``pid`` and ``host`` (a short hash of the host
name) name the process that made it.  ``<name>`` is the output's name, shortened so
that the whole stays within the 255 bytes a file name may have.

A process killed outright (SIGKILL, a power cut) cannot remove them: the next run
over an output in the same directory (:func:`clean_directory`) finishes or undoes a
publication whose journal it finds, then removes the temporaries of owners that are
no longer running on this host.  Those of other hosts (a shared filesystem) are
named in a note, not touched.  An output's lock (``.<name>.distsort-lock``, see
:mod:`distsort.cli.claims`) that no process holds is removed too.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import socket
import uuid

from distsort.cli.streams import quiet

#: Longest file name (bytes) that Linux filesystems take.
NAME_MAX = 255
KINDS = ("tmp", "old", "journal", "probe")
_PATTERN = re.compile(r"\.distsort-(tmp|old|journal|probe)-(\d+)-([0-9a-f]{6})-[0-9a-f]{8}$")


def host_tag():
    """Six hex digits that name this host in temporary names.

    >>> len(host_tag())
    6
    """
    return hashlib.sha1(socket.gethostname().encode()).hexdigest()[:6]


#: The end of an output's lock file's name (:mod:`distsort.cli.claims`).
LOCK_SUFFIX = ".distsort-lock"


def lock_name(path):
    """The lock file of output ``path``: one name per output, in its directory.

    >>> os.path.basename(lock_name("/d/o.npy"))
    '.o.npy.distsort-lock'
    """
    directory, name = os.path.split(os.fspath(path))
    room = NAME_MAX - 1 - len(LOCK_SUFFIX)
    return os.path.join(directory, f".{os.fsdecode(os.fsencode(name)[:room])}{LOCK_SUFFIX}")


def temporary_name(path, kind):
    """A new name, in ``path``'s directory, for a ``kind`` temporary of ``path``.

    >>> n = os.path.basename(temporary_name("/d/" + "x" * 250 + ".npy", "tmp"))
    >>> len(n.encode()) <= NAME_MAX, n.startswith(".xxx"), owner(n) == (os.getpid(), host_tag())
    (True, True, True)
    """
    directory, name = os.path.split(os.fspath(path))
    suffix = f".distsort-{kind}-{os.getpid()}-{host_tag()}-{uuid.uuid4().hex[:8]}"
    room = NAME_MAX - 1 - len(suffix)
    short = os.fsdecode(os.fsencode(name)[:room])
    return os.path.join(directory, f".{short}{suffix}")


def owner(name):
    """``(pid, host tag)`` of a temporary's name, or None for any other name."""
    m = _PATTERN.search(os.path.basename(name))
    return (int(m.group(2)), m.group(3)) if m else None


def running(pid):
    """Whether process ``pid`` runs on this host (a process of another user counts)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove(path):
    """Remove a file or a directory tree; nothing if it is gone."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def fsync(path):
    """fsync one file or directory (where the filesystem allows it for directories)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse fsync on directories
        pass
    finally:
        os.close(fd)


def hold(lock):
    """A descriptor of the file ``lock`` with an exclusive ``flock`` on it, made where
    there is none; None where another process holds it."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        try:  # its last holder may have removed it between our open and our lock
            if os.path.samestat(os.fstat(fd), os.stat(lock)):
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def release_unheld(lock):
    """Remove lock file ``lock`` where no process holds it (its run was killed);
    returns whether it did."""
    try:
        fd = hold(lock)
    except OSError:
        return False
    if fd is None:
        return False
    with contextlib.suppress(FileNotFoundError):
        os.remove(lock)
    os.close(fd)
    return True


# ------------------------------------------------------------------ journals
def write_journal(path, entries):
    """Record a publication before its first rename: ``entries`` are ``{"final",
    "tmp", "old"}`` per output, in rename order (the last, OUTPUT, commits it)."""
    data = json.dumps({"pid": os.getpid(), "entries": entries}).encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync(os.path.dirname(path))


def recover(journal):
    """Finish or undo the publication ``journal`` records (its owner is gone).

    Committed (the last output renamed into place): the new outputs stay and the
    old ones moved aside are removed.  Not committed: every output renamed is put
    back to its old file (or removed where there was none), so that the old group
    is whole again.  Returns what was done, in words.
    """
    with open(journal) as f:
        entries = json.load(f)["entries"]
    last = entries[-1]
    committed = os.path.lexists(last["final"]) and not os.path.lexists(last["tmp"])
    for e in entries:
        if committed:
            remove(e["old"])
        elif os.path.lexists(e["old"]):
            os.replace(e["old"], e["final"])
        elif not os.path.lexists(e["tmp"]) and os.path.lexists(e["final"]):
            remove(e["final"])  # renamed into place, with no old one before it
        remove(e["tmp"])
    os.remove(journal)
    finals = ", ".join(e["final"] for e in entries)
    return (f"kept the new {finals}" if committed else f"put back the previous {finals}")


def clean_directory(directory, stream=None):
    """Recover the publications and remove the temporaries that runs no longer
    running on this host left in ``directory``; note those of other hosts.

    Returns the paths removed or recovered.
    """
    stream = stream or quiet("stderr")  # a note, never a reason to fail
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    done = [os.path.join(directory, n) for n in names
            if n.endswith(LOCK_SUFFIX) and release_unheld(os.path.join(directory, n))]
    found = [(n, owner(n)) for n in names]
    found = [(os.path.join(directory, n), o) for n, o in found if o is not None]
    here = host_tag()
    for path, (pid, host) in sorted(found, key=lambda f: ".distsort-journal-" not in f[0]):
        if host != here:
            print(f"distsort: {path} was left by a run on another host (process {pid}); "
                  "remove it once no distsort runs there", file=stream)
        elif not running(pid) and os.path.lexists(path):
            if ".distsort-journal-" in path:
                print(f"distsort: a publication that process {pid} left half done was "
                      f"resolved: {recover(path)}", file=stream)
            else:
                remove(path)
            done.append(path)
    return done
