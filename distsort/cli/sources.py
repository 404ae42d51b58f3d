"""Input arrays on disk, opened with a clear error for each way that fails."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from distsort.cli.errors import CLIError
from distsort.cli.files import (file_kind, local_path, open_npy, open_remote_npy, open_zarr,
                                 url_protocol)


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
                          name="distsort-read-" + _token(self.path, self.n, self.dtype))
        # A big-endian file's chunks arrive in native order: say so in the dtype.
        return x if x.dtype == self.dtype else x.astype(self.dtype)


def _token(*args):
    from dask.base import tokenize
    return tokenize(*args, os.stat(args[0]).st_mtime_ns if os.path.exists(args[0]) else 0)


def _filesystem(url, what):
    """The fsspec filesystem of ``url`` and the path in it, with a clear error where
    fsspec or the filesystem's package (s3fs, gcsfs, ...) is not installed."""
    try:
        import fsspec
    except ImportError:
        raise CLIError(f"{what} {url}: reading URLs needs fsspec (pip install fsspec) and "
                       "the package of its filesystem (s3fs, gcsfs, ...)") from None
    try:
        return fsspec.core.url_to_fs(url)
    except ImportError as e:  # fsspec's message names the package to install
        raise CLIError(f"{what} {url}: {e}") from None
    except ValueError as e:  # an unknown protocol
        raise CLIError(f"{what} {url}: {e}") from None


def open_url(url, what="INPUT"):
    """Open an input at a URL through fsspec (other than ``file://``, read as a local path).

    Every worker must reach the URL: a ``memory://`` file is seen only by the process
    that wrote it (the sort in this process, not worker processes).
    """
    fs, path = _filesystem(url, what)
    return _opened(url, file_kind(url), open_remote_npy, what,
                   missing=lambda: not fs.exists(path))


def _opened(path, kind, open_npy_reader, what, missing=lambda: False):
    """The :class:`Source` of ``path``, a ``.npy`` file read by ``open_npy_reader`` or a
    zarr array, with a clear error where it is ``missing()`` or cannot be read."""
    try:
        if missing():
            raise CLIError(f"{what} {path}: no such file or directory")
        if kind == "npy":
            reader = open_npy_reader(path)
            dtype, shape = reader.dtype.newbyteorder("="), reader.shape
        else:
            reader, dtype, shape = open_zarr(path)
    except PermissionError:
        raise CLIError(f"{what} {path}: permission denied") from None
    except (OSError, EOFError) as e:
        raise CLIError(f"{what} {path}: cannot read ({e})") from e
    return Source(str(path), kind, reader, np.dtype(dtype), int(shape[0]))


def open_source(path, what="INPUT"):
    """Open an input file (a local path, or a URL that fsspec reads), with a clear error
    for each way that fails."""
    if url_protocol(path) not in (None, "file"):
        return open_url(path, what)
    path = local_path(path)
    kind = file_kind(path)
    if not os.path.exists(path):
        raise CLIError(f"{what} {path}: no such file or directory")
    if kind == "npy" and os.path.isdir(path):
        raise CLIError(f"{what} {path}: is a directory, not a .npy file")
    if not os.access(path, os.R_OK):
        raise CLIError(f"{what} {path}: permission denied")
    return _opened(path, kind, open_npy, what)
