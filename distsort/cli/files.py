"""The two file formats: 1-D arrays in .npy files and in zarr (v3) directories."""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from distsort.core.libc import libc
from distsort.inputs import to_native
from distsort.cli.errors import CLIError

#: The first bytes of every .npy file.
NPY_MAGIC = b"\x93NUMPY"
#: Bytes per read call: large sequential reads, at the disk's speed.
READ_BLOCK = 64 << 20


def file_kind(path):
    """``"npy"`` or ``"zarr"``, from the name: a zarr array is a directory ``*.zarr`` or
    an array inside one (``store.zarr/path/to/array``, as ``xarray.to_zarr`` writes).

    >>> file_kind("x.npy"), file_kind("x.zarr/"), file_kind("s3://b/grp.zarr/t/a")
    ('npy', 'zarr', 'zarr')
    """
    name = str(path).rstrip("/")
    if name.endswith(".npy"):
        return "npy"
    if any(part.endswith(".zarr") for part in name.split("/")):
        return "zarr"
    raise CLIError(f"{path}: unsupported file type (use a .npy file, a .zarr directory or "
                   "an array in one: store.zarr/path/to/array)")


def url_protocol(path):
    """The protocol of a URL (``"s3"`` for ``s3://bucket/x.npy``), None for a local path.

    >>> url_protocol("s3://b/x.npy"), url_protocol("file:///tmp/x.npy"), url_protocol("x.npy")
    ('s3', 'file', None)
    """
    head, sep, _ = str(path).partition("://")
    return head if sep and head.replace("+", "").replace("-", "").isalnum() else None


def local_path(path):
    """A ``file://`` URL as a local path; other paths as they are."""
    path = str(path)
    return path[len("file://"):] if url_protocol(path) == "file" else path


class _OneDimensional:
    """What ``dask.array.from_array`` asks of a 1-D reader besides its dtype and shape."""

    @property
    def ndim(self):
        return 1

    @property
    def size(self):
        return self.shape[0]


@dataclass(frozen=True)
class NpyFile(_OneDimensional):
    """A 1-D array in a .npy file, read and written by slices.

    It pickles as its path and layout (never its data), so tasks on any worker
    that sees the file can use it; ``dask.array.from_array`` reads through it.
    """

    path: str
    offset: int
    dtype: np.dtype
    shape: tuple

    def _map(self):
        return np.memmap(self.path, dtype=self.dtype, mode="r", offset=self.offset,
                         shape=self.shape)

    def __getitem__(self, key):
        # A copy in native byte order: the chunk must not pin the mapping, and
        # distsort compares bit patterns in native order.
        (key,) = key if isinstance(key, tuple) else (key,)
        if isinstance(key, slice) and key.indices(self.shape[0])[2] == 1:
            start, stop, _ = key.indices(self.shape[0])
            return to_native(self._read(start, max(start, stop)))
        return to_native(np.array(self._map()[key]))

    def _read(self, start, stop):
        """Elements ``start:stop`` with large sequential reads into one new array (a
        memory map would fault every page in, 4 KiB at a time)."""
        out = np.empty(stop - start, self.dtype)
        view = memoryview(out.view(np.uint8))  # bytes: datetime64 has no buffer format
        with open(self.path, "rb", buffering=0) as f:
            f.seek(self.offset + start * self.dtype.itemsize)
            done = 0
            while done < len(view):
                n = f.readinto(view[done:done + READ_BLOCK])
                if not n:
                    raise EOFError(f"{self.path}: file ends before element {stop}")
                done += n
        return out

    def take(self, index):
        return to_native(np.array(self._map()[index]))

    def __setitem__(self, key, value):
        """Write ``value`` at ``key`` (a slice) with pwrite: a full disk raises
        OSError(ENOSPC) instead of the SIGBUS a memory-mapped write would get."""
        (key,) = key if isinstance(key, tuple) else (key,)
        start, stop, step = key.indices(self.shape[0])
        if step != 1:
            raise ValueError("NpyFile writes contiguous slices only")
        data = memoryview(np.ascontiguousarray(value, dtype=self.dtype).view(np.uint8))
        if len(data) != (stop - start) * self.dtype.itemsize:
            raise ValueError(f"writing {len(data)} bytes into {stop - start} elements")
        fd = os.open(self.path, os.O_WRONLY)
        try:
            first = pos = self.offset + start * self.dtype.itemsize
            while data:
                n = os.pwrite(fd, data, pos)
                data, pos = data[n:], pos + n
            write_behind(fd, first, pos - first)
        finally:
            os.close(fd)


#: ``sync_file_range``'s flag that starts the writeback of a range and waits for none.
SYNC_FILE_RANGE_WRITE = 2


def write_behind(fd, offset, nbytes):
    """Start writing ``nbytes`` at ``offset`` of ``fd`` to the disk now (Linux), waiting
    for none of it.

    Left to itself, the kernel starts writing dirty pages back only once they pass a
    share of the host's memory (``vm.dirty_background_ratio``, 10%: 12 GB on a host of
    128 GB), so an output of a few GB would sit in memory until the fsync before
    publishing and the disk would be idle while the chunks are sorted.  Started at
    once, the disk writes each chunk while the next ones are sorted.  The Dask config
    value ``distsort.write-behind`` (default True; ``DASK_DISTSORT__WRITE_BEHIND=0``)
    turns it off.
    """
    import dask
    f = libc("sync_file_range", ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    if f is None or nbytes <= 0 or not dask.config.get("distsort.write-behind", True):
        return
    f(fd, offset, nbytes, SYNC_FILE_RANGE_WRITE)  # a failure only leaves it to the kernel


def open_npy(path):
    """The layout of a 1-D .npy file, from its header; the data is not read."""
    with open(path, "rb") as f:
        magic = f.read(len(NPY_MAGIC))
    if magic != NPY_MAGIC:
        raise CLIError(f"{path}: not a .npy file (it does not begin with the .npy format's "
                       "magic bytes, \\x93NUMPY)")
    with open(path, "rb") as f:
        shape, dtype = read_npy_header(f, path)
        offset, size = f.tell(), os.fstat(f.fileno()).st_size
    check_npy_size(path, shape, dtype, size - offset)
    try:
        m = np.load(path, mmap_mode="r")
    except (ValueError, OverflowError) as e:  # pickled objects
        raise CLIError(f"{path}: not a readable .npy array ({e})") from e
    if not isinstance(m, np.memmap):
        raise CLIError(f"{path}: not a .npy array file")
    if m.ndim != 1:
        raise CLIError(f"{path}: distsort sort sorts 1-D arrays; this one has shape {m.shape}")
    return NpyFile(str(Path(path).resolve()), int(m.offset), m.dtype, m.shape)


@dataclass(frozen=True)
class RemoteNpy(_OneDimensional):
    """A 1-D array in a .npy file at a URL, read by slices through fsspec.

    It pickles as its URL and layout; each read opens the file (tasks on any worker
    that reaches the URL can use it).
    """

    url: str
    offset: int
    dtype: np.dtype
    shape: tuple

    def __getitem__(self, key):
        import fsspec
        (key,) = key if isinstance(key, tuple) else (key,)
        start, stop, step = key.indices(self.shape[0]) if isinstance(key, slice) else (0, 0, 0)
        if step != 1:
            return self[0:self.shape[0]][key]
        stop = max(start, stop)
        with fsspec.open(self.url, "rb") as f:
            f.seek(self.offset + start * self.dtype.itemsize)
            data = f.read((stop - start) * self.dtype.itemsize)
        if len(data) != (stop - start) * self.dtype.itemsize:
            raise EOFError(f"{self.url}: file ends before element {stop}")
        return np.frombuffer(data, self.dtype).astype(self.dtype.newbyteorder("="))

    def take(self, index):
        return self[0:self.shape[0]][index]


def open_remote_npy(url):
    """The layout of a 1-D .npy file at a URL, from its header."""
    import fsspec
    with fsspec.open(url, "rb") as f:
        shape, dtype = read_npy_header(f, url)
        offset = f.tell()
        size = getattr(f, "size", None)
    if dtype.hasobject:
        raise CLIError(f"{url}: not a readable .npy array (it holds Python objects)")
    if len(shape) != 1:
        raise CLIError(f"{url}: distsort sort sorts 1-D arrays; this one has shape {shape}")
    if size is not None:
        check_npy_size(url, shape, dtype, size - offset)
    return RemoteNpy(url, offset, dtype, shape)


def read_npy_header(f, path):
    """``(shape, dtype)`` from the .npy header at the start of file ``f``; a header that
    cannot be parsed, or that gives a shape of other than whole numbers >= 0, is a
    CLIError that says so."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        read = (fmt.read_array_header_1_0 if version == (1, 0)
                else fmt.read_array_header_2_0)  # 2.0; 3.0 differs only in its encoding
        shape, _, dtype = read(f)  # a 1-D array reads the same in either order
    except (ValueError, OverflowError, TypeError, SyntaxError, MemoryError) as e:
        raise CLIError(f"{path}: corrupt .npy header, not a readable .npy array "
                       f"({type(e).__name__}: {e})") from None
    if not all(isinstance(d, int) and d >= 0 for d in shape):
        raise CLIError(f"{path}: corrupt .npy header: shape {shape} (the sizes of its "
                       "dimensions must be whole numbers >= 0)")
    return shape, dtype


def check_npy_size(path, shape, dtype, data_bytes):
    """Refuse a .npy file that holds fewer bytes after its header than its shape says
    (a corrupt header, or a truncated file).

    >>> check_npy_size("x.npy", (10**20,), np.dtype("f8"), 8000)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    distsort.cli.errors.CLIError: x.npy: corrupt or truncated .npy file: its header says ...
    """
    needed = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if needed > data_bytes:
        count = int(np.prod(shape, dtype=object))
        raise CLIError(f"{path}: corrupt or truncated .npy file: its header says {count:,} "
                       f"elements of {dtype} ({needed:,} bytes), the file holds "
                       f"{data_bytes:,} bytes after the header")


@dataclass(frozen=True)
class ZarrFile:
    """A 1-D zarr (v3) array, opened read-only wherever it is used."""

    path: str

    def open(self):
        import zarr
        return zarr.open_array(self.path, mode="r")

    @property
    def shape(self):
        return self.open().shape

    @property
    def dtype(self):
        return self.open().dtype

    @property
    def ndim(self):
        return 1

    def __getitem__(self, key):
        """Elements ``key`` (a slice), in native byte order; a chunk that cannot be
        read (corrupt, truncated, missing) is named in the error."""
        z = self.open()
        try:
            return to_native(np.asarray(z[key]))
        except Exception as e:
            (key,) = key if isinstance(key, tuple) else (key,)
            raise self._unreadable(z, *key.indices(z.shape[0])[:2], e) from e

    def _unreadable(self, z, start, stop, error):
        """The CLIError naming the first zarr chunk of ``start:stop`` that cannot be
        read (each is tried alone), with the error it gives."""
        size = z.chunks[0]
        for c in range(start // size, -(-stop // size)):
            try:
                z[c * size:(c + 1) * size]
            except Exception as e:  # noqa: BLE001  (whatever zarr and its codecs raise)
                error = e
                break
        else:
            c = start // size
        return CLIError(f"{self.path}: cannot read zarr chunk {c} (elements {c * size}.."
                        f"{min(z.shape[0], (c + 1) * size) - 1}): {type(error).__name__}: "
                        f"{error}")

    def take(self, index):
        order = np.argsort(index, kind="stable")
        out = np.empty(len(index), dtype=self.open().dtype)
        out[order] = self.open().get_coordinate_selection(index[order])
        return out


def open_zarr(path):
    try:
        import zarr
    except ImportError:
        raise CLIError("zarr files need the zarr package: pip install 'zarr>=3'") from None
    try:
        z = zarr.open_array(path, mode="r")
    except Exception as e:  # zarr raises several types for "not an array here"
        raise CLIError(f"{path}: not a readable zarr array ({type(e).__name__}: {e})"
                       + _arrays_in_group(path)) from e
    if z.ndim != 1:
        raise CLIError(f"{path}: distsort sort sorts 1-D arrays; this one has shape {z.shape}")
    return ZarrFile(path if url_protocol(path) else str(Path(path).resolve())), z.dtype, z.shape


def _arrays_in_group(path):
    """``"; it is a group holding the arrays ..."`` where ``path`` is a zarr group."""
    import zarr
    try:
        group = zarr.open_group(path, mode="r")
        names = sorted(name for name, node in group.members(max_depth=None)
                       if isinstance(node, zarr.Array))
    except Exception:  # noqa: BLE001  (only a hint for the message)
        return ""
    if not names:
        return "; it is a zarr group with no arrays"
    shown = ", ".join(f"{str(path).rstrip('/')}/{n}" for n in names[:5])
    return f"; it is a zarr group: name an array in it, e.g. {shown}"
