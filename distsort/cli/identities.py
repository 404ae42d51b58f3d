"""Files by identity (device and inode), not by name: a hard link, a bind mount or a
symbolic link names the same file under another path, and a path the command writes
must never be one of its inputs' files under any name."""
from __future__ import annotations

import os
import stat

from distsort.cli.errors import CLIError

Identity = tuple[int, int]


def identity(path, follow=True) -> Identity | None:
    """``(st_dev, st_ino)`` of the file at ``path`` (of a symbolic link itself where
    not ``follow``), None where there is none.

    >>> identity("/") == identity("/.."), identity("/no/such/file")
    (True, None)
    """
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def input_files(inputs, directories_only=False) -> dict[Identity, str]:
    """The identities of the inputs' files: a ``.npy`` file, or a zarr store's
    directories and every file in them (``directories_only``: its directories), each
    with the path it has in the input."""
    found = {}
    for src in inputs:
        top = identity(src)
        if top is None:
            continue
        found[top] = src
        if os.path.isdir(src):
            for d, dirs, files in os.walk(src):
                for name in dirs if directories_only else dirs + files:
                    path = os.path.join(d, name)
                    ident = identity(path)
                    if ident is not None:
                        found.setdefault(ident, path)
    return found


def check_not_an_input_file(path, inputs, what=""):
    """Refuse ``path`` where it is (a link to) an input's file, compared by identity:
    a hard link of an input, or of a file inside a zarr input, has a name of its
    own and the input's data.

    >>> import tempfile
    >>> d = tempfile.mkdtemp(); src = os.path.join(d, "in.npy"); open(src, "w").close()
    >>> os.link(src, os.path.join(d, "hl.npy"))
    >>> check_not_an_input_file(os.path.join(d, "hl.npy"), [src], "--report")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    distsort.cli.errors.CLIError: --report ...hl.npy: is the input ...in.npy under another name...
    """
    written = identity(path)
    if written is None:
        return
    st = os.stat(path)
    # A file that is an input's has more than one name (or is the input by its own
    # name, which the path checks refuse first); a directory cannot be hard-linked.
    if stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and not _named_input(written, inputs):
        return
    match = input_files(inputs, stat.S_ISDIR(st.st_mode)).get(written)
    if match is not None:
        name = f"{what} {path}" if what else str(path)
        raise CLIError(f"{name}: is the input {match} under another name (a hard link, or "
                       "a link to it); refusing to write over it")


def _named_input(written, inputs):
    return any(identity(src) == written for src in inputs)
