"""The kernels shipped compiled: which binary serves a device, and whether it is current.

``python -m distsort.backends.gpu.kernels.build`` compiles the kernels most sorts
need with ``nvcc`` into one compressed fatbin per GPU architecture and source file
(``shipped/sort_sm90.fatbin``, ...), and writes ``shipped/manifest.json``: a digest of
the CUDA sources they were built from, and for each binary its architecture and the
mangled name of each kernel, by the name expression the loader asks NVRTC for
(``bitonic_pass<Scalar<u32_t,0>,NoValue,32,128,3,14>``).  The loader
(``loader.py``) takes a kernel from the binary where the manifest's digest is that
of the sources beside it, the device can run the binary's architecture and the binary
holds every kernel a module needs; elsewhere it compiles them with NVRTC, as before,
and says why on this module's logger.  All of it is pure but reading files: no GPU.
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
import struct
from pathlib import Path

__all__ = ["SOURCES", "MANIFEST", "sources_digest", "compatible_arch", "demangled_key",
           "Shipped", "read_manifest", "find", "fatbin_images"]

HERE = Path(__file__).resolve().parent
#: Where the binaries and their manifest lie, in the package.
SHIPPED = HERE / "shipped"
MANIFEST = SHIPPED / "manifest.json"
#: The CUDA sources the binaries are built from (the headers: every ``*.cuh`` here).
SOURCES = ("sort.cu", "float_bounds.cu")

log = logging.getLogger(__name__)


def sources_digest(folder: Path = HERE, options: tuple[str, ...] = ()) -> str:
    """sha256 of the CUDA sources in ``folder`` (names and bytes, in a fixed order)
    and of the compiler ``options``: a binary built from other sources is not used.

    >>> len(sources_digest()), sources_digest() == sources_digest(options=("-O3",))
    (64, False)
    """
    h = hashlib.sha256()
    for path in [folder / s for s in SOURCES] + sorted(folder.glob("*.cuh")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(" ".join(options).encode())
    return h.hexdigest()


def compatible_arch(capability: tuple[int, int], arches) -> int | None:
    """The architecture (``90`` for ``sm_90``) among ``arches`` whose binary code runs
    on a device of compute ``capability`` (major, minor): the same major version and
    a minor one no higher, the highest such; None where none does (then NVRTC).

    >>> compatible_arch((9, 0), [80, 90, 100]), compatible_arch((8, 6), [80, 90])
    (90, 80)
    >>> compatible_arch((12, 0), [80, 90, 100]) is None
    True
    """
    major, minor = capability
    fits = [a for a in arches if a // 10 == major and a % 10 <= minor]
    return max(fits) if fits else None


#: C++ names of the kernels' storage types, as a demangler writes them.
_TYPES = {"unsigned char": "u8_t", "unsigned short": "u16_t", "unsigned int": "u32_t",
          "unsigned long long": "u64_t"}


def demangled_key(demangled: str) -> str:
    """A demangled kernel name (``c++filt -p``) written as the loader's name
    expression: the storage types by their typedefs, no spaces.

    >>> demangled_key("bitonic_pass<Scalar<unsigned int, 0>, NoValue, 32, 128, 3, 14>")
    'bitonic_pass<Scalar<u32_t,0>,NoValue,32,128,3,14>'
    >>> demangled_key("void float_bounds<unsigned long long>")
    'float_bounds<u64_t>'
    """
    name = demangled.strip()
    name = name.removeprefix("void ")
    name = re.sub(r"\((?:int|long|bool)\)(-?\d+)", r"\1", name)  # (int)3 -> 3
    for full, short in _TYPES.items():
        name = re.sub(rf"\b{full}\b", short, name)
    return name.replace(" ", "")


class Shipped(dict):
    """The manifest, read: ``digest``, ``options`` and ``binaries`` (a list of
    ``{"file", "source", "arch", "kernels": {name expression: mangled name}}``)."""


def read_manifest(path: Path = MANIFEST) -> Shipped | None:
    """The manifest at ``path``, or None where there is none (a source checkout
    before its build) or it cannot be read."""
    try:
        return Shipped(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


@functools.cache
def _current(path: Path) -> tuple[Shipped | None, str]:
    """``(manifest, reason)``: the manifest at ``path`` where it matches the sources
    beside it, else None and why not."""
    manifest = read_manifest(path)
    if manifest is None:
        return None, f"no manifest of shipped kernels at {path}"
    if manifest.get("digest") != sources_digest(HERE, tuple(manifest.get("options", ()))):
        return None, "the shipped kernels were built from other CUDA sources"
    return manifest, ""


def find(source: str, capability: tuple[int, int], names,
         path: Path = MANIFEST) -> tuple[Path, dict[str, str]] | str:
    """``(binary, {name: mangled name})`` of the shipped binary of ``source``
    (``"sort.cu"``) that runs on ``capability`` and holds every kernel of ``names``
    (name expressions), or a string saying why there is none."""
    manifest, reason = _current(path)
    if manifest is None:
        return reason
    built = [b for b in manifest["binaries"] if b["source"] == source]
    arch = compatible_arch(capability, [b["arch"] for b in built])
    if arch is None:
        return (f"no shipped binary of {source} runs on compute capability "
                f"{capability[0]}.{capability[1]}")
    (binary,) = [b for b in built if b["arch"] == arch]
    missing = [n for n in names if n not in binary["kernels"]]
    if missing:
        return f"{missing[0]} is not in the shipped {binary['file']}"
    return path.parent / binary["file"], {n: binary["kernels"][n] for n in names}


_FATBIN_MAGIC = 0xBA55ED50
_ELF = 2


def fatbin_images(data: bytes) -> list[tuple[str, int]]:
    """``(kind, sm)`` of each image of a fatbin (``"elf"`` or ``"ptx"``): what
    ``cuobjdump --list-elf`` lists, read from the fatbin's headers.

    >>> head = struct.pack("<IHHQ", _FATBIN_MAGIC, 1, 16, 64)
    >>> entry = struct.pack("<HHIQ", 2, 257, 64, 0) + struct.pack("<12I", *[0, 0, 0, 90] + [0] * 8)
    >>> fatbin_images(head + entry + bytes(64 - len(entry)))
    [('elf', 90)]
    """
    magic, _, header, size = struct.unpack_from("<IHHQ", data, 0)
    if magic != _FATBIN_MAGIC:
        raise ValueError("not a fatbin")
    images, at = [], header
    while at < header + size:
        kind, _, entry, payload = struct.unpack_from("<HHIQ", data, at)
        sm = struct.unpack_from("<I", data, at + 28)[0]
        images.append(("elf" if kind == _ELF else "ptx", sm))
        at += entry + payload
    return images
