"""Outputs: written under a temporary name in their directory, renamed into place
only when complete, and a group of them (keys and values) renamed all or none."""
from __future__ import annotations

import contextlib
import errno
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from distsort.cli.claims import Claim, conflict, rename_noreplace
from distsort.cli.errors import CLIError
from distsort.cli.identities import check_not_an_input_file, identity
from distsort.cli.files import NpyFile, ZarrFile, file_kind, open_npy
from distsort.cli.signals import interruption, signals_deferred
from distsort.cli.temporaries import fsync, remove, temporary_name, write_journal


@dataclass
class Output:
    """An output written under a temporary name in its directory, renamed at the end.

    ``target`` takes ``dask.array.store`` writes; ``publish([...])`` renames it to
    ``path`` (replacing an old one only then); ``discard()`` removes it.  Its
    temporaries are named by :mod:`distsort.cli.temporaries`.
    """

    path: str
    dtype: np.dtype
    n: int
    chunk: int
    kind: str = ""
    tmp: str = ""
    target: object = None
    committed: bool = False
    final: str = ""
    old: str = ""
    #: The run's claim on ``path`` (:mod:`distsort.cli.claims`): published only over
    #: what was there when the run started.  None: over nothing.
    claim: Claim | None = None

    def create(self):
        self.kind = file_kind(self.path)
        self.final = str(Path(self.path).resolve())
        self.tmp = temporary_name(self.final, "tmp")
        try:
            self.target = self._create_npy() if self.kind == "npy" else self._create_zarr()
        except BaseException:
            self.discard()
            raise
        return self

    def _create_npy(self):
        from numpy.lib.format import open_memmap
        if self.n == 0:
            np.save(self.tmp, np.empty(0, self.dtype))
            os.replace(self.tmp + ".npy", self.tmp)
            return None
        m = open_memmap(self.tmp, mode="w+", dtype=self.dtype, shape=(self.n,))
        offset = int(m.offset)
        del m
        fd = os.open(self.tmp, os.O_RDWR)
        try:  # reserve the space now: a full disk fails here, cleanly
            os.posix_fallocate(fd, offset, self.n * self.dtype.itemsize)
        finally:
            os.close(fd)
        return NpyFile(self.tmp, offset, self.dtype, (self.n,))

    def _create_zarr(self):
        import zarr
        # An array in a zarr group (store.zarr/path/to/array) takes the group's format.
        v2 = os.path.exists(os.path.join(os.path.dirname(self.tmp), ".zgroup"))
        z = zarr.open_array(self.tmp, mode="w-", shape=(self.n,), dtype=self.dtype,
                            chunks=(max(1, min(self.chunk, self.n)),),
                            zarr_format=2 if v2 else 3)
        return GuardedZarr(z, self.tmp)

    def reader(self):
        """A reader of the (still temporary) output, for verification."""
        if self.kind == "npy":
            return open_npy(self.tmp)
        return ZarrFile(self.tmp)

    def journal_entry(self):
        """What a later run needs to finish or undo this output's publication; the
        name the old output will be moved aside to is chosen here.  Raises the
        conflict where ``path`` holds another file than when the run started."""
        self._check_unchanged()
        self.old = temporary_name(self.final, "old") if os.path.lexists(self.final) else ""
        return {"final": self.final, "tmp": self.tmp, "old": self.old}

    def _check_unchanged(self):
        if self.claim is not None:
            self.claim.check_unchanged()
        elif os.path.lexists(self.final):
            raise conflict(self.path, overwrite=False)

    def move_aside(self):
        """Move an old ``path`` (--overwrite) aside, not removing it until ``finish``
        (``uninstall`` may still need it); put back, with the conflict raised, where
        it is not the file found when the run started (replaced just now)."""
        if not self.old:
            return
        os.replace(self.final, self.old)
        if self.claim is not None and identity(self.old, follow=False) != self.claim.found:
            with contextlib.suppress(OSError):  # where that fails, the journal tells
                rename_noreplace(self.old, self.final)
                self.old = ""
            raise conflict(self.path, overwrite=True)

    def install(self):
        """Rename the temporary to ``path``, where nothing is (the old one already
        moved aside): a file or directory that appeared there is never replaced."""
        try:
            rename_noreplace(self.tmp, self.final)
        except FileExistsError:
            raise conflict(self.path, overwrite=bool(self.old)) from None
        self.committed = True

    def uninstall(self):
        """Undo ``install`` and ``move_aside``: the new output back to its temporary
        name (for ``discard``), the old one back in place."""
        if self.committed:
            os.replace(self.final, self.tmp)
            self.committed = False
        if self.old and os.path.lexists(self.old):
            os.replace(self.old, self.final)
        self.old = ""

    def finish(self):
        if self.old:
            remove(self.old)
            self.old = ""
        # the directory alone, so that the rename is on disk; not the files in it
        # (others' files, a disk measurement's scratch file that may go at any moment)
        fsync(os.path.dirname(self.final))

    def discard(self):
        if isinstance(self.target, GuardedZarr):
            self.target.close()  # no chunk write re-creates what is removed below
        if self.tmp and not self.committed:
            remove(self.tmp)


class GuardedZarr:
    """A zarr array written through ``dask.array.store`` that refuses writes once the
    output is discarded, and waits for those already running: zarr creates the
    directories of a chunk it writes, so a write still running when an interrupted
    sort removes the temporary would re-create part of it.

    On worker processes (a copy of this object) the array's metadata file stands for
    the flag: it is removed first.
    """

    def __init__(self, array, path):
        self.array, self.path = array, path
        # zarr v3 keeps an array's metadata in zarr.json, v2 in .zarray
        fmt = getattr(getattr(array, "metadata", None), "zarr_format", 3)
        self.metadata = os.path.join(path, {2: ".zarray"}.get(fmt, "zarr.json"))
        self._closed, self._active = False, 0
        self._lock = threading.Condition()

    def __getstate__(self):
        return {"array": self.array, "path": self.path}

    def __setstate__(self, state):
        self.__init__(state["array"], state["path"])

    @property
    def shape(self):
        return self.array.shape

    @property
    def dtype(self):
        return self.array.dtype

    @property
    def ndim(self):
        return self.array.ndim

    def __setitem__(self, key, value):
        with self._lock:
            if self._closed or not os.path.exists(self.metadata):
                raise OSError(errno.ENOENT, "the output was discarded", self.path)
            self._active += 1
        try:
            self.array[key] = value
        finally:
            with self._lock:
                self._active -= 1
                self._lock.notify_all()

    def close(self, timeout=30.0):
        """Refuse new writes, remove the metadata, and wait for running writes."""
        with self._lock:
            self._closed = True
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.metadata)
            self._lock.wait_for(lambda: self._active == 0, timeout)


def publish(outputs):
    """Rename the temporaries of ``outputs`` into place in that order, all or none.

    All are synced first, so that the renames follow each other closely.  A journal
    names every file first; then the old outputs (--overwrite) are moved aside, the
    last output's (OUTPUT's) first, so that it is absent until the group is whole;
    then the temporaries are renamed in order, the last one committing the group;
    the old files are removed last.  A process killed at any point leaves the old
    group or the new one, and its journal: the next run over one of these outputs
    finishes or undoes the publication (:func:`distsort.cli.temporaries.recover`).

    SIGINT and SIGTERM wait during all of it.  Before the commit, a failed rename or
    a signal that came puts back what was already done and then raises (the caller's
    ``discard`` removes the temporaries); a signal after it is delivered once the
    outputs are published.
    """
    for o in outputs:
        _fsync_tree(o.tmp)
    with signals_deferred() as caught:
        _stop_if_interrupted(caught)
        journal = temporary_name(outputs[-1].final, "journal")
        write_journal(journal, [o.journal_entry() for o in outputs])
        try:
            for o in reversed(outputs):
                _stop_if_interrupted(caught)
                o.move_aside()
            for o in outputs:
                _stop_if_interrupted(caught)
                o.install()
        except BaseException:
            # Last renamed, first undone: where one cannot be undone, the outputs
            # renamed before it stay too, and the journal tells the next run.
            for o in reversed(outputs):
                o.uninstall()
            remove(journal)
            raise
        for o in outputs:
            o.finish()
        remove(journal)


def _stop_if_interrupted(caught):
    if caught:
        raise interruption(caught.pop(0))


def _fsync_tree(path):
    """fsync a file, or a directory and the files in it (zarr), so a rename publishes data."""
    paths = [path]
    if os.path.isdir(path):
        paths = [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs] + [path]
    for p in paths:
        fsync(p)


def check_output_path(path, overwrite, inputs):
    """Refuse an existing OUTPUT (unless ``overwrite``), an INPUT, or a missing directory
    (but zarr groups that :func:`make_groups` makes: ``new.zarr/grp/arr``)."""
    kind = file_kind(path)
    final = Path(path).resolve()
    check_not_input(path, inputs, replaced=True)
    if os.path.lexists(final) and not overwrite:
        raise CLIError(f"{path}: already exists (use --overwrite to replace it)")
    if os.path.lexists(final) and (kind == "npy") == os.path.isdir(final):
        raise CLIError(f"{path}: exists and is a {'directory' if kind == 'npy' else 'file'}; "
                       "remove it first")
    parent = final.parent
    if not parent.is_dir():  # an array in zarr groups still to make: their store's
        store = new_groups(path)[0]
        parent = store if store.is_dir() else store.parent
    if not os.access(parent, os.W_OK):
        raise CLIError(f"{path}: directory {parent} is not writable")


def new_groups(path):
    """``(store, groups)``: the zarr store (an existing directory, or one to make in an
    existing directory) and the path inside it of the groups that an array
    ``store.zarr/a/b/arr`` needs and that do not exist yet (``"a/b"``), as zarr and
    xarray make them on writing; CLIError where the output is no array of a zarr
    store, or a directory above the store is missing.

    >>> import tempfile; d = tempfile.mkdtemp()
    >>> store, groups = new_groups(f"{d}/new.zarr/a/b/arr")
    >>> store == Path(d) / "new.zarr", groups
    (True, 'a/b')
    """
    final = Path(path).resolve()
    parts = final.parts
    roots = [i for i, part in enumerate(parts[:-1]) if part.endswith(".zarr")]
    if file_kind(path) != "zarr" or not roots:
        raise CLIError(f"{path}: directory {final.parent} does not exist")
    store = Path(*parts[:roots[0] + 1])
    if not (store.is_dir() or store.parent.is_dir()):
        raise CLIError(f"{path}: directory {store.parent} does not exist")
    return store, "/".join(parts[roots[0] + 1:-1])


def make_groups(path):
    """Create the zarr groups above the array ``path`` that do not exist yet (its
    store too), in the store's format (zarr 3 for a new store): as ``zarr`` and
    ``xarray`` do, ``distsort sort x.npy new.zarr/grp/arr`` writes into a new group.
    Nothing where the array's directory exists, or for a .npy output."""
    final = Path(path).resolve()
    if final.parent.is_dir() or file_kind(path) != "zarr":
        return
    import zarr
    store, inside = new_groups(path)
    try:
        root = zarr.open_group(str(store), mode="a")
        if inside:
            root.require_group(inside)
    except (ValueError, TypeError, KeyError, zarr.errors.BaseZarrError) as e:
        raise CLIError(f"{path}: cannot create the zarr group {final.parent}: {e}") from None


def check_not_input(path, inputs, what="", replaced=False):
    """Refuse a path the command writes that is an input or lies inside one (a zarr
    store's directory), or, for a path it replaces (``replaced``: an output), that
    holds an input.  Links are followed.

    >>> check_not_input("in.zarr/s.npy", ["in.zarr"], "OUTPUT")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    distsort.cli.errors.CLIError: OUTPUT in.zarr/s.npy: lies inside the input in.zarr; ...
    """
    written = Path(path).resolve()
    name = f"{what} {path}" if what else str(path)
    for src in inputs:
        source = Path(src).resolve()
        if written == source:
            raise CLIError(f"{name}: is an input; refusing to write over it")
        if source in written.parents:
            raise CLIError(f"{name}: lies inside the input {src}; write it elsewhere")
        if replaced and written in source.parents:
            raise CLIError(f"{name}: holds the input {src}; refusing to replace it")
    check_not_an_input_file(path, inputs, what)
