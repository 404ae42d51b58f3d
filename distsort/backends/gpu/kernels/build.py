"""Build the shipped kernels: ``python -m distsort.backends.gpu.kernels.build``.

Compiles, with ``nvcc``, the instantiations of ``sort.cu`` and ``float_bounds.cu``
that most sorts need (:func:`instances`) into one compressed fatbin per source and
architecture in ``shipped/``, and writes ``shipped/manifest.json`` (``shipped.py``
says what it holds and how the loader uses it).  Needs ``nvcc``, ``fatbinary``
(both from the CUDA toolkit), ``readelf`` and ``c++filt`` (binutils); no GPU.  Run it
again after any change of the CUDA sources or of the tuning tables: until then the
loader finds the digest changed and compiles with NVRTC.

What is shipped, by architecture (:data:`PAIRS`): keys alone and keys with int64
values (``argsort``'s positions, ``sort_by_key`` of int64 values) of every key dtype
on sm_80, sm_90 and sm_100; on sm_90 (H100, H200) also 4-byte integer keys with
uint32 values, packed and not.  Other pairs compile on first use.  The whole is
about 4 MB.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from distsort.backends.gpu import passes, tuning
from distsort.backends.gpu.kernels import shipped
from distsort.backends.gpu.kernels.loader import OPTIONS, float_order_names, module_names

__all__ = ["ARCHES", "PAIRS", "KEY_DTYPES", "instances", "translation_unit", "build"]

#: Architectures with shipped binaries (``sm_XX``).
ARCHES = (80, 90, 100)
KEY_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64", "float16", "float32", "float64")
#: ``(key dtype, value dtype or None)`` pairs shipped, by architecture.
_EVERY_KEY = [(k, v) for v in (None, "int64") for k in KEY_DTYPES]
PAIRS = {80: _EVERY_KEY, 90: _EVERY_KEY + [(k, "uint32") for k in ("int32", "uint32")],
         100: _EVERY_KEY}


def _shapes(tab, key, value):
    """``(block shape, packed)`` of each module a sort of ``key`` keys (and ``value``
    values) may run under ``tab`` (``launch_plan.kernel_shape``): unpacked, and packed
    where the pair packs (its lengths that are a multiple of the packed layout's run)."""
    cfg = passes.config(tab, np.dtype(key).itemsize,
                        0 if value is None else np.dtype(value).itemsize)
    shapes = [(c, False) for c in (cfg, cfg.group) if c is not None]
    packed = passes.config(tab, 8)
    if value is not None and passes.packs(key, value, 1 << 30, packed.threads):
        shapes += [(c, True) for c in (packed, packed.group) if c is not None]
    return shapes


def instances(arch: int) -> dict[str, list[str]]:
    """The name expressions compiled for ``arch``, by source file.

    >>> names = instances(90)
    >>> "bitonic_pass<Scalar<u32_t,0>,NoValue,32,128,3,14>" in names["sort.cu"]
    True
    >>> names["float_bounds.cu"][:2]
    ['float_bounds<u32_t>', 'float_bounds<u64_t>']
    """
    tab = tuning.table(arch // 10)
    sort = []
    for key, value in PAIRS[arch]:
        for cfg, packed in _shapes(tab, key, value):
            for name in module_names(key, value, cfg.items_per_thread, cfg.threads,
                                     cfg.min_blocks, cfg.tile_bits, packed):
                if name not in sort:
                    sort.append(name)
    bounds = sorted({n for d in ("uint32", "uint64") for n in float_order_names(d)},
                    key=lambda n: (n.split("<")[0] != "float_bounds", n))
    return {"sort.cu": sort, "float_bounds.cu": bounds}


def translation_unit(source: str, names: list[str]) -> str:
    """C++ that includes ``source`` and instantiates each kernel of ``names`` (taking
    its address makes the compiler emit its device code).

    >>> print(translation_unit("float_bounds.cu", ["float_bounds<u32_t>"]))
    #include "float_bounds.cu"
    void* distsort_shipped[] = {
      (void*)&float_bounds<u32_t>,
    };
    <BLANKLINE>
    """
    lines = [f'#include "{source}"', "void* distsort_shipped[] = {"]
    lines += [f"  (void*)&{name}," for name in names]
    return "\n".join([*lines, "};", ""])


def _symbols(cubin: Path) -> dict[str, str]:
    """``{name expression: mangled name}`` of the kernels in ``cubin``."""
    table = subprocess.run(["readelf", "-sW", str(cubin)], capture_output=True, text=True,
                           check=True).stdout
    # The name is the last field: a kernel's visibility column reads "[<other>: 10]".
    mangled = sorted({f[-1] for f in (line.split() for line in table.splitlines())
                      if f[3:5] == ["FUNC", "GLOBAL"] and f[-1].startswith("_Z")})
    demangled = subprocess.run(["c++filt", "-p"], input="\n".join(mangled), capture_output=True,
                               text=True, check=True).stdout.splitlines()
    return {shipped.demangled_key(d): m for d, m in zip(demangled, mangled, strict=True)}


def _compile(source: str, arch: int, names: list[str], out: Path, work: Path) -> dict:
    """One fatbin of ``names`` from ``source`` for ``sm_{arch}``; its manifest entry."""
    stem = f"{Path(source).stem}_sm{arch}"
    unit, cubin = work / f"{stem}.cu", work / f"{stem}.cubin"
    unit.write_text(translation_unit(source, names))
    subprocess.run(["nvcc", *OPTIONS, f"-I{shipped.HERE}", "-cubin", f"-arch=sm_{arch}",
                    "-o", str(cubin), str(unit)], check=True)
    found = _symbols(cubin)
    missing = [n for n in names if n not in found]
    if missing:
        raise RuntimeError(f"{cubin.name} lacks {missing[:3]} (found {sorted(found)[:3]})")
    fatbin = out / f"{stem}.fatbin"
    subprocess.run(["fatbinary", f"--create={fatbin}", "--compress-all",
                    f"--image3=kind=elf,sm={arch},file={cubin}"], check=True)
    images = shipped.fatbin_images(fatbin.read_bytes())
    if images != [("elf", arch)]:
        raise RuntimeError(f"{fatbin.name} holds {images}, not one sm_{arch} image")
    return {"file": fatbin.name, "source": source, "arch": arch,
            "bytes": fatbin.stat().st_size, "kernels": {n: found[n] for n in names}}


def build(out: Path = shipped.SHIPPED, arches=ARCHES, jobs: int | None = None) -> dict:
    """Compile every binary of :func:`instances` for ``arches`` into ``out``, and write
    its manifest; returns the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.fatbin"):
        old.unlink()
    work = [(source, arch, names) for arch in arches
            for source, names in instances(arch).items()]
    with tempfile.TemporaryDirectory() as tmp, \
            ThreadPoolExecutor(jobs or os.cpu_count() or 1) as pool:
        binaries = list(pool.map(lambda w: _compile(*w, out, Path(tmp)), work))
    version = subprocess.run(["nvcc", "--version"], capture_output=True, text=True,
                             check=True).stdout.strip().splitlines()[-1]
    manifest = {"digest": shipped.sources_digest(shipped.HERE, OPTIONS), "options": OPTIONS,
                "nvcc": version, "binaries": binaries}
    (out / shipped.MANIFEST.name).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, action="append", choices=ARCHES,
                        help="architectures to build (default: all)")
    parser.add_argument("--jobs", type=int, default=None, help="nvcc processes at once")
    args = parser.parse_args(argv)
    manifest = build(arches=tuple(args.arch or ARCHES), jobs=args.jobs)
    total = 0
    for b in manifest["binaries"]:
        total += b["bytes"]
        print(f"{b['file']}: sm_{b['arch']}, {len(b['kernels'])} kernels, {b['bytes']} bytes")
    print(f"{total} bytes in all; sources {manifest['digest'][:12]}; {manifest['nvcc']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
