"""The kernels shipped compiled: the manifest is current for the sources beside it, the
binaries hold what the build promises, and the loader picks a binary by the device's
compute capability and the sources' digest, else compiles with NVRTC and says why (on
the CPU, with a stand-in for CuPy); on a GPU, the shipped kernels give NVRTC's results."""
import json
import logging
import shutil
import sys
import types

import numpy as np
import pytest

from backends import GPU, cupy

from distsort.backends.gpu.kernels import build, loader, shipped

MANIFEST = shipped.read_manifest()
needs_manifest = pytest.mark.skipif(MANIFEST is None, reason="kernels not built")


# ---------------------------------------------------------------- pure logic
def test_compatible_arch_same_major_minor_no_higher():
    arches = [80, 90, 100]
    assert shipped.compatible_arch((9, 0), arches) == 90
    assert shipped.compatible_arch((8, 0), arches) == 80
    assert shipped.compatible_arch((8, 9), arches) == 80  # Ada runs sm_80 code
    assert shipped.compatible_arch((10, 3), arches) == 100
    assert shipped.compatible_arch((7, 5), arches) is None
    assert shipped.compatible_arch((12, 0), arches) is None  # another major: NVRTC
    assert shipped.compatible_arch((8, 6), [86, 80, 89]) == 86


def test_demangled_names_read_as_name_expressions():
    key = shipped.demangled_key
    assert key("merge_pass<Scalar<unsigned char, 2>, Scalar<unsigned long long, 1>, "
               "16, 256, 2, 13>") == "merge_pass<Scalar<u8_t,2>,Scalar<u64_t,1>,16,256,2,13>"
    assert key("crossing_count<Scalar<unsigned short, 0>, NoValue>") == \
        "crossing_count<Scalar<u16_t,0>,NoValue>"
    assert key("packed_pass<Scalar<unsigned int, (int)1>, 3>") == "packed_pass<Scalar<u32_t,1>,3>"


def test_digest_follows_every_source_and_the_options(tmp_path):
    folder = tmp_path / "kernels"
    shutil.copytree(shipped.HERE, folder, ignore=shutil.ignore_patterns("shipped", "*.py*"))
    before = shipped.sources_digest(folder)
    assert before == shipped.sources_digest(shipped.HERE)
    assert shipped.sources_digest(folder, ("-O2",)) != before
    header = folder / "windows.cuh"
    header.write_text(header.read_text() + "\n// changed\n")
    assert shipped.sources_digest(folder) != before


def _manifest(tmp_path, digest=None, kernels=None, arch=90):
    path = tmp_path / "manifest.json"
    names = {"bitonic_pass<X>": "_Z1a", "merge_pass<X>": "_Z1b"} if kernels is None else kernels
    path.write_text(json.dumps({
        "digest": digest or shipped.sources_digest(shipped.HERE, loader.OPTIONS),
        "options": list(loader.OPTIONS),
        "binaries": [{"file": f"sort_sm{arch}.fatbin", "source": "sort.cu", "arch": arch,
                      "kernels": names}]}))
    return path


def test_find_takes_the_binary_only_where_everything_matches(tmp_path):
    names = ["bitonic_pass<X>", "merge_pass<X>"]
    path = _manifest(tmp_path)
    binary, mangled = shipped.find("sort.cu", (9, 0), names, path)
    assert binary == tmp_path / "sort_sm90.fatbin"
    assert mangled == {"bitonic_pass<X>": "_Z1a", "merge_pass<X>": "_Z1b"}
    assert "compute capability 8.0" in shipped.find("sort.cu", (8, 0), names, path)
    assert "float_bounds.cu" in shipped.find("float_bounds.cu", (9, 0), names, path)
    assert "crossing<X> is not in" in shipped.find("sort.cu", (9, 0), ["crossing<X>"], path)
    stale = tmp_path / "stale"
    stale.mkdir()
    reason = shipped.find("sort.cu", (9, 0), names, _manifest(stale, digest="0" * 64))
    assert "other CUDA sources" in reason
    assert "no manifest" in shipped.find("sort.cu", (9, 0), names, tmp_path / "none.json")


@pytest.mark.parametrize("arch", build.ARCHES)
def test_instances_cover_what_the_launcher_asks_for(arch):
    """Every module that a sort of a shipped pair (keys alone or with int64 values, of
    any key dtype; packed and not) asks for under the architecture's table is among
    its instances."""
    from distsort.backends.gpu import launch_plan, tuning
    tab = tuning.table(arch // 10)
    names = set(build.instances(arch)["sort.cu"])
    assert (("float16", None) in build.PAIRS[arch]) and (("int8", "int64") in build.PAIRS[arch])
    for key, value in build.PAIRS[arch]:
        for n in (1000, 1 << 20, (3 << 22) + 1):
            for x in launch_plan.sort_launches(tab, key, value, n):
                s = x.shape
                assert set(loader.module_names(key, value, s.items_per_thread, s.threads,
                                               s.min_blocks, s.tile_bits,
                                               x.kernel == "packed_pass")) <= names


# ---------------------------------------------------------------- the shipped files
@needs_manifest
def test_shipped_binaries_are_current_and_hold_what_the_build_promises():
    """Fails where the CUDA sources changed without ``python -m
    distsort.backends.gpu.kernels.build``: the loader would then compile everything."""
    assert MANIFEST["digest"] == shipped.sources_digest(shipped.HERE, tuple(MANIFEST["options"]))
    assert sorted({b["arch"] for b in MANIFEST["binaries"]}) == list(build.ARCHES)
    total = 0
    for b in MANIFEST["binaries"]:
        data = (shipped.SHIPPED / b["file"]).read_bytes()
        total += len(data)
        assert shipped.fatbin_images(data) == [("elf", b["arch"])]
        assert set(build.instances(b["arch"])[b["source"]]) == set(b["kernels"])
        assert all(m.startswith("_Z") for m in b["kernels"].values())
    assert total < 5 * 10**6


# ---------------------------------------------------------------- the loader's choice
@pytest.fixture
def fake_cupy(monkeypatch):
    """A stand-in for CuPy: a device of a settable compute capability, and modules that
    record how they were made (a path, or NVRTC's code) and give back function names."""
    made = []

    class RawModule:
        def __init__(self, path=None, code=None, **kwargs):
            made.append("path" if path else "code")
            self.path = path

        def get_function(self, name):
            return name

    device = types.SimpleNamespace(compute_capability="90", id=0)
    fake = types.SimpleNamespace(RawModule=RawModule,
                                 cuda=types.SimpleNamespace(Device=lambda: device))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    loader._binary.cache_clear()
    yield device, made
    loader._binary.cache_clear()


@needs_manifest
def test_loader_takes_the_shipped_binary_or_compiles_and_says_why(fake_cupy, caplog):
    import cupy as stand_in
    device, made = fake_cupy
    names = loader.module_names("float32", None, 32, 128, 3, 14)
    (sm90,) = [b for b in MANIFEST["binaries"] if b["arch"] == 90 and b["source"] == "sort.cu"]

    def nvrtc():
        return stand_in.RawModule(code="...")

    with caplog.at_level(logging.INFO, logger="distsort.backends.gpu.kernels.loader"):
        module, kernels = loader.load_kernels("sort.cu", names, nvrtc)
        assert made == ["path"] and module.path.endswith("sort_sm90.fatbin")
        assert kernels == [sm90["kernels"][n] for n in names]
        assert "NVRTC" not in caplog.text
        device.compute_capability = "120"  # no shipped binary runs there
        _, kernels = loader.load_kernels("sort.cu", names, nvrtc)
        assert made[-1] == "code" and kernels == names
        assert "compiling bitonic_pass" in caplog.text and "capability 12.0" in caplog.text
        device.compute_capability = "90"  # a dtype pair not shipped (float16 values)
        loader.load_kernels("sort.cu", loader.module_names("float32", "float16", 16, 128, 3,
                                                           13), nvrtc)
        assert made[-1] == "code" and "is not in the shipped sort_sm90.fatbin" in caplog.text


# ---------------------------------------------------------------- on a GPU
@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("dtype", ["uint32", "float32", "int64", "float64", "int8"])
def test_shipped_kernels_give_nvrtcs_results(monkeypatch, caplog, dtype):
    """The same sort by the shipped binary and by NVRTC's build of the same sources:
    bit for bit the same, and NumPy's order; on a device the binaries serve, no module
    was compiled for the shipped one."""
    from arrays import random_keys
    import distsort

    cc = cupy.cuda.Device().compute_capability
    served = shipped.compatible_arch((int(cc[:-1]), int(cc[-1])), build.ARCHES) is not None
    keys = random_keys(np.random.default_rng(), 2**20 + 7, dtype)
    loader._module.cache_clear()
    with caplog.at_level(logging.INFO, logger="distsort.backends.gpu.kernels.loader"):
        a = cupy.asarray(keys)
        distsort.sort(a, out=a, local="bitonic")
    if served and MANIFEST is not None:
        assert "NVRTC" not in caplog.text
    monkeypatch.setattr(shipped, "find", lambda *args, **kwargs: "compiled for the test")
    loader._module.cache_clear()
    b = cupy.asarray(keys)
    distsort.sort(b, out=b, local="bitonic")
    loader._module.cache_clear()
    assert cupy.array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"))
    want = np.sort(keys)
    np.testing.assert_array_equal(cupy.asnumpy(a), want)
