"""Outputs: written under a temporary name in their directory, renamed into place
only when complete, and a group of them (keys and values) renamed all or none."""
from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import CLIError
from .files import NpyFile, ZarrFile, file_kind, open_npy
from .signals import interruption, signals_deferred


@dataclass
class Output:
    """An output written under a temporary name in its directory, renamed at the end.

    ``target`` takes ``dask.array.store`` writes; ``publish([...])`` renames it to
    ``path`` (replacing an old one only then); ``discard()`` removes it.
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

    def create(self):
        self.kind = file_kind(self.path)
        final = Path(self.path).resolve()
        self.tmp = str(final.with_name(f".{final.name}.distsort-tmp-{uuid.uuid4().hex[:12]}"))
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
        return zarr.open_array(self.tmp, mode="w-", shape=(self.n,), dtype=self.dtype,
                               chunks=(max(1, min(self.chunk, self.n)),),
                               zarr_format=2 if v2 else 3)

    def reader(self):
        """A reader of the (still temporary) output, for verification."""
        if self.kind == "npy":
            return open_npy(self.tmp)
        return ZarrFile(self.tmp)

    def install(self):
        """Rename the temporary to ``path``; an old ``path`` (--overwrite) is moved
        aside, not removed, until ``finish`` (``uninstall`` may still need it)."""
        self.final = str(Path(self.path).resolve())
        if os.path.lexists(self.final):
            self.old = f"{self.tmp}-old"
            os.replace(self.final, self.old)
        try:
            os.replace(self.tmp, self.final)
        except BaseException:
            self.uninstall()
            raise
        self.committed = True

    def uninstall(self):
        """Undo ``install``: the new output back to its temporary name (for ``discard``),
        the old one back in place."""
        if self.committed:
            os.replace(self.final, self.tmp)
            self.committed = False
        if self.old:
            os.replace(self.old, self.final)
            self.old = ""

    def finish(self):
        if self.old:
            _remove(self.old)
            self.old = ""
        # the directory alone, so that the rename is on disk; not the files in it
        # (others' files, a disk measurement's scratch file that may go at any moment)
        _fsync(os.path.dirname(self.final))

    def discard(self):
        if self.tmp and not self.committed:
            _remove(self.tmp)


def publish(outputs):
    """Rename the temporaries of ``outputs`` into place in that order, all or none.

    All are synced first, so that the renames follow each other closely.  SIGINT and
    SIGTERM wait during the renames; a failed rename, or a signal that came, puts back
    what was already renamed (old outputs included) and then raises; the caller's
    ``discard`` removes the temporaries.  The last output appears only when the
    others are in place: make it the one that a script checks for.
    """
    for o in outputs:
        _fsync_tree(o.tmp)
    with signals_deferred() as caught:
        done = []
        try:
            for o in outputs:
                _stop_if_interrupted(caught)
                o.install()
                done.append(o)
            _stop_if_interrupted(caught)
        except BaseException:
            # Last renamed, first undone: where one cannot be undone, the outputs
            # renamed before it stay too, and the group stays whole.
            for o in reversed(done):
                o.uninstall()
            raise
    for o in outputs:
        o.finish()


def _stop_if_interrupted(caught):
    if caught:
        raise interruption(caught.pop(0))


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def _fsync(path):
    """fsync one file or directory (where the filesystem allows it for directories)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse fsync on directories
        pass
    finally:
        os.close(fd)


def _fsync_tree(path):
    """fsync a file, or a directory and the files in it (zarr), so a rename publishes data."""
    paths = [path]
    if os.path.isdir(path):
        paths = [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs] + [path]
    for p in paths:
        _fsync(p)


def check_output_path(path, overwrite, inputs):
    """Refuse an existing OUTPUT (unless ``overwrite``), an INPUT, or a missing directory."""
    kind = file_kind(path)
    final = Path(path).resolve()
    for src in inputs:
        if final == Path(src).resolve():
            raise CLIError(f"{path}: refusing to write over an input file")
    if os.path.lexists(final) and not overwrite:
        raise CLIError(f"{path}: already exists (use --overwrite to replace it)")
    if os.path.lexists(final) and (kind == "npy") == os.path.isdir(final):
        raise CLIError(f"{path}: exists and is a {'directory' if kind == 'npy' else 'file'}; "
                       "remove it first")
    if not final.parent.is_dir():
        raise CLIError(f"{path}: directory {final.parent} does not exist")
    if not os.access(final.parent, os.W_OK):
        raise CLIError(f"{path}: directory {final.parent} is not writable")
