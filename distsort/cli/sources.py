"""Input arrays on disk, opened with a clear error for each way that fails."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .errors import CLIError
from .files import file_kind, open_npy, open_zarr


@dataclass
class Source:
    """An input array on disk: a reader for tasks, its dtype and length."""

    path: str
    kind: str
    reader: object
    dtype: np.dtype
    n: int

    @property
    def nbytes(self):
        return self.n * self.dtype.itemsize

    def array(self, chunk):
        import dask.array as da
        # zarr too: its reader names a chunk it cannot read
        x = da.from_array(self.reader, chunks=(chunk,),
                          meta=np.empty(0, self.dtype.newbyteorder("=")),
                          name="distsort-read-" + _token(self.path))
        # A big-endian file's chunks arrive in native order: say so in the dtype.
        return x if x.dtype == self.dtype else x.astype(self.dtype)


def _token(*args):
    from dask.base import tokenize
    return tokenize(*args, os.stat(args[0]).st_mtime_ns if os.path.exists(args[0]) else 0)


def open_source(path, what="INPUT"):
    """Open an input file, with a clear error for each way that fails."""
    kind = file_kind(path)
    if not os.path.exists(path):
        raise CLIError(f"{what} {path}: no such file or directory")
    if kind == "npy" and os.path.isdir(path):
        raise CLIError(f"{what} {path}: is a directory, not a .npy file")
    if not os.access(path, os.R_OK):
        raise CLIError(f"{what} {path}: permission denied")
    try:
        if kind == "npy":
            reader = open_npy(path)
            dtype, shape = reader.dtype.newbyteorder("="), reader.shape
        else:
            reader, dtype, shape = open_zarr(path)
    except PermissionError:
        raise CLIError(f"{what} {path}: permission denied") from None
    except (OSError, EOFError) as e:
        raise CLIError(f"{what} {path}: cannot read ({e})") from e
    return Source(str(path), kind, reader, np.dtype(dtype), int(shape[0]))
