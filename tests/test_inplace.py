"""Sorts into the caller's memory (``distsort.sort(x, out=x)``, ``sort_by_key(...,
out=(k, v))``): element for element against NumPy and the copying form, on NumPy
arrays here and on CuPy arrays where a GPU is; the checks of ``out``; the plan's
choice for given free bytes; the fallbacks where an allocation fails."""
import sys
import types
import weakref

import dask.array as da
import numpy as np
import pytest

from arrays import DTYPES, random_keys
from backends import BACKENDS, GPU, cupy

import distsort
from distsort.backends import Order
from distsort.backends.gpu import local_sort as cupy_local
from distsort.cluster.view import ClusterView
from distsort.plan.localsort import plan_own_memory
from distsort.plan.options import SortOptions
from distsort.plan.sortplan import plan_sort

SIZES = [0, 1, 2, 17, 1000, 4099, 65537]


def _xp(backend):
    return cupy if backend == "cupy" else np


def _host(a):
    return cupy.asnumpy(a) if GPU and isinstance(a, cupy.ndarray) else np.asarray(a)


def _bits(a):
    a = _host(a)
    return a if a.dtype.kind == "b" else a.view(f"u{a.dtype.itemsize}")


def numpy_order(x, descending):
    """NumPy's sort of ``x``, largest first where ``descending``, NaNs last in both."""
    s = np.sort(x)
    if not descending:
        return s
    nan = np.isnan(s) if s.dtype.kind == "f" else np.zeros(s.shape, bool)
    return np.concatenate([s[~nan][::-1], s[nan]])


# ---------------------------------------------------------------- sort(x, out=x)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_in_place_matches_numpy(backend, dtype, descending):
    rng = np.random.default_rng()  # fresh data each run
    xp = _xp(backend)
    for n in SIZES:
        keys = random_keys(rng, n, dtype, duplicates=n % 2 == 1)
        x = xp.asarray(keys)
        address = x.data.ptr if backend == "cupy" else x.ctypes.data
        got = distsort.sort(x, descending=descending, out=x)
        assert got is x and (x.data.ptr if backend == "cupy" else x.ctypes.data) == address
        np.testing.assert_array_equal(_host(x), numpy_order(keys, descending))
        # bit for bit the copying form's order (-0.0 before +0.0, NaNs by their bits)
        copied = distsort.sort(xp.asarray(keys), descending=descending)
        np.testing.assert_array_equal(_bits(x), _bits(copied))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("local", ["auto", "bitonic", "radix"])
def test_sort_into_another_array_leaves_the_input(backend, local):
    rng = np.random.default_rng()
    xp = _xp(backend)
    keys = random_keys(rng, 5001, "float32")
    x = xp.asarray(keys)
    out = xp.empty_like(x)
    assert distsort.sort(x, out=out, local=local) is out
    np.testing.assert_array_equal(_host(x), keys)
    np.testing.assert_array_equal(_host(out), numpy_order(keys, False))


@pytest.mark.parametrize("backend", BACKENDS)
def test_sort_in_place_rows_and_the_flat_array(backend):
    rng = np.random.default_rng()
    xp = _xp(backend)
    keys = random_keys(rng, 6 * 333, "int32").reshape(6, 333)
    x = xp.asarray(keys)
    distsort.sort(x, out=x)
    np.testing.assert_array_equal(_host(x), np.sort(keys, axis=-1))
    x = xp.asarray(keys)
    distsort.sort(x, axis=None, descending=True, out=x)
    assert x.shape == keys.shape
    np.testing.assert_array_equal(_host(x).ravel(), np.sort(keys, axis=None)[::-1])


# ---------------------------------------------------------------- sort_by_key
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key_dtype", ["int32", "uint64", "float32", "float64", "float16"])
@pytest.mark.parametrize("value_dtype", ["int64", "float32", "uint8"])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_by_key_in_place(backend, key_dtype, value_dtype, descending):
    rng = np.random.default_rng()
    xp = _xp(backend)
    for n in (0, 1, 3, 1000, 40_001):
        keys = random_keys(rng, n, key_dtype, duplicates=True)
        values = random_keys(rng, n, value_dtype)
        k, v = xp.asarray(keys), xp.asarray(values)
        got = distsort.sort_by_key(k, v, descending=descending, out=(k, v))
        assert got[0] is k and got[1] is v
        np.testing.assert_array_equal(_host(k), numpy_order(keys, descending))
        want_k, want_v = distsort.sort_by_key(xp.asarray(keys), xp.asarray(values),
                                              descending=descending)
        np.testing.assert_array_equal(_bits(k), _bits(want_k))
        np.testing.assert_array_equal(_bits(v), _bits(want_v))


# ---------------------------------------------------------------- what out= refuses
def test_out_refusals_say_what_to_do():
    x = np.random.default_rng().random(10)
    with pytest.raises(TypeError, match="dtype float64, got float32"):
        distsort.sort(x, out=np.empty(10, np.float32))
    with pytest.raises(ValueError, match="shape"):
        distsort.sort(x, out=np.empty(11))
    with pytest.raises(ValueError, match="C-contiguous"):
        distsort.sort(x, out=np.empty(20)[::2])
    readonly = x.copy()
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        distsort.sort(readonly, out=readonly)
    with pytest.raises(TypeError, match="Dask array"):
        distsort.sort(da.from_array(x, chunks=5), out=x)
    with pytest.raises(TypeError, match="kind"):
        distsort.sort(x, out=list(x))
    with pytest.raises(ValueError, match="verify"):
        distsort.sort(x, out=x, verify=True)
    with pytest.raises(ValueError, match="stable=True"):
        distsort.sort(x, out=x, stable=True)
    ints = np.arange(10)[::-1].copy()
    distsort.sort(ints, out=ints, stable=True)  # equal integers are indistinguishable
    assert (ints == np.arange(10)).all()
    t = np.arange(4).astype("datetime64[D]")
    with pytest.raises(TypeError, match="without out="):
        distsort.sort(t, out=t)
    big_endian = x.astype(">f8")
    with pytest.raises(TypeError, match="native"):
        distsort.sort(big_endian, out=big_endian)
    m = np.random.default_rng().random((3, 4))
    with pytest.raises(ValueError, match="last axis"):
        distsort.sort(m, axis=0, out=m)
    k, v = np.arange(5), np.arange(5.0)
    with pytest.raises(TypeError, match="tuple"):
        distsort.sort_by_key(k, v, out=k)
    with pytest.raises(ValueError, match="stable=True"):
        distsort.sort_by_key(k, v, out=(k, v), stable=True)
    with pytest.raises(TypeError, match="table"):
        distsort.sort_by_key(k, {"v": v}, out=(k, v))
    assert (k == np.arange(5)).all() and (v == np.arange(5.0)).all()  # nothing written


# ---------------------------------------------------------------- the plan (integers)
GB = 10**9
H200 = 150 * GB  # about the capacity an H200 reports


def test_plan_own_memory_by_free_bytes():
    """On the GPU the radix sort where its buffers fit the free bytes, else in place."""
    n = 15 * GB // 4  # 15 GB of uint32
    assert plan_own_memory("auto", True, n, 4, 0, True, 16 * GB) == "radix"
    assert plan_own_memory("auto", True, n, 4, 0, True, 14 * GB) == "bitonic"
    assert plan_own_memory("auto", True, n, 4, 0, False, 16 * GB) == "bitonic"  # 3 buffers
    assert plan_own_memory("auto", True, n, 4, 0, False, 46 * GB) == "radix"
    assert plan_own_memory("auto", True, n, 4, 8, False, 16 * GB) == "bitonic"  # values
    assert plan_own_memory("bitonic", True, n, 4, 0, True, 10**15) == "bitonic"
    assert plan_own_memory("radix", True, n, 4, 0, True, 0) == "radix"  # asked for
    assert plan_own_memory("auto", False, n, 4, 0, True, None) == "radix"  # NumPy
    with pytest.raises(ValueError, match="local must be"):
        plan_own_memory("fast", True, n, 4, 0, True, 0)


def _plain_gpu(gigabytes, device=H200, itemsize=4):
    """The plan of ``distsort.sort`` of a plain CuPy array of ``gigabytes`` GB here."""
    view = ClusterView.local(cores=16, memory=128 * GB, device=device, chunks=1)
    options = SortOptions(gpu=True, here=True, in_place=True)
    return plan_sort((gigabytes * GB // itemsize,), itemsize, view, options)


def test_plain_gpu_array_copied_and_sorted_in_place_where_radix_does_not_fit():
    """The input, its copy and CUB's buffer: 3x the data.  Where only the input and
    the copy fit (the issue's 60 GB of uint32 on an H200), the copy is sorted in
    place by one task, at once, not cut into a network of chunks."""
    small = _plain_gpu(40)
    assert (small.strategy, small.local, small.eager) == ("one-device", "radix", True)
    large = _plain_gpu(60)
    assert (large.strategy, large.local, large.eager) == ("one-device", "bitonic", True)
    assert large.chunks == (15 * GB,)
    with pytest.raises(MemoryError, match=r"out=x"):
        _plain_gpu(90)  # no room for a copy: the message names the in-place form
    # a Dask array's sort keeps its plan (the network on one GPU)
    view = ClusterView.local(cores=16, memory=128 * GB, device=H200, chunks=1)
    lazy = plan_sort((15 * GB,), 4, view, SortOptions(gpu=True, in_place=True))
    assert lazy.strategy == "network"
    # radix asked for: never the in-place copy
    asked = plan_sort((15 * GB,), 4, view,
                      SortOptions(gpu=True, here=True, in_place=True, local="radix"))
    assert asked.strategy == "network"


# ---------------------------------------------------------------- fallbacks (no GPU)
class _Buffer:
    """Stands for a device buffer: alive while a reference holds it."""


def test_fallback_runs_after_the_failed_attempt_is_freed(caplog):
    """The in-place sort starts only once the radix attempt's buffers are released (its
    traceback held them, so a 60 GB copy stayed while the in-place copy was made)."""
    held = []

    def radix():
        buffer = _Buffer()
        held.append(weakref.ref(buffer))
        raise MemoryError("std::bad_alloc")

    def in_place():
        return held[0]() is None

    with caplog.at_level("WARNING", logger="distsort"):
        assert cupy_local.radix_or_in_place(radix, in_place, "a chunk") is True
    (record,) = [r for r in caplog.records if "sorted in place instead" in r.getMessage()]
    assert record.name == "distsort.backends.gpu.local_sort"
    assert "std::bad_alloc" in record.getMessage()


def test_no_room_for_the_copy_says_to_sort_in_place():
    class Full:
        size, nbytes = 15 * GB // 4, 15 * GB

        def copy(self):
            raise MemoryError("std::bad_alloc")

    with pytest.raises(MemoryError, match=r"out=x\), or free device memory") as err:
        cupy_local.sorted_copy(Full())
    assert "15.0 GB" in str(err.value) and err.value.__context__ is None


def test_sort_memory_falls_back_in_place_where_radix_fails(monkeypatch, caplog):
    """``sort_memory`` (``out=`` on the GPU) with the radix sort's allocation made to
    fail: the keys are sorted by the in-place kernels instead, with a log line (the
    kernels are replaced by NumPy's sort, so no GPU is needed)."""
    ran = []

    def kernels(keys, values, descending, lanes=1):
        ran.append("bitonic")
        keys.sort()

    monkeypatch.setitem(sys.modules, "distsort.backends.gpu.launcher",
                        types.SimpleNamespace(sort_inplace=kernels))

    def short(keys, descending=False, owned=True):
        raise MemoryError("out of memory allocating 60,000,000,000 bytes")

    monkeypatch.setattr(cupy_local, "sort_keys", short)
    x = np.random.default_rng().integers(0, 2**32, 1000, dtype=np.uint32)
    with caplog.at_level("WARNING", logger="distsort"):
        cupy_local.sort_memory(x, None, Order(), "radix")
    assert ran == ["bitonic"] and (np.diff(x.astype(np.int64)) >= 0).all()
    assert "sorted in place instead" in caplog.text


# ---------------------------------------------------------------- on the GPU
def _failing_allocations(function):
    """``function`` run with CuPy's allocator raising ``OutOfMemoryError`` for every
    allocation (Thrust and CUB, which allocate through it, raise
    ``MemoryError('std::bad_alloc')`` then)."""
    from cupy.cuda.memory import OutOfMemoryError

    def refuse(size):
        raise OutOfMemoryError(size, 0, 0)

    def call(*args, **kwargs):
        allocator = cupy.cuda.get_allocator()
        cupy.cuda.set_allocator(refuse)
        try:
            return function(*args, **kwargs)
        finally:
            cupy.cuda.set_allocator(allocator)
    return call


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("dtype", ["uint32", "float32", "int64", "float16"])
@pytest.mark.parametrize("descending", [False, True])
def test_gpu_radix_out_of_memory_falls_back_in_place(monkeypatch, caplog, dtype, descending):
    """Every allocation of the radix sort made to fail (its copy, CUB's buffers): the
    copying form and ``out=`` both sort in place instead, log it, and give NumPy's
    result; no allocator error reaches the caller."""
    monkeypatch.setattr(cupy_local, "sort_keys", _failing_allocations(cupy_local.sort_keys))
    keys = random_keys(np.random.default_rng(), 300_001, dtype)
    with caplog.at_level("WARNING", logger="distsort"):
        copied = distsort.sort(cupy.asarray(keys), descending=descending, local="radix")
        x = cupy.asarray(keys)
        distsort.sort(x, descending=descending, out=x, local="radix")
    want = numpy_order(keys, descending)
    np.testing.assert_array_equal(_host(copied), want)
    np.testing.assert_array_equal(_host(x), want)
    assert caplog.text.count("sorted in place instead") == 2


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="needs CuPy and a CUDA GPU")
def test_gpu_sort_by_key_radix_out_of_memory_falls_back_in_place(monkeypatch, caplog):
    monkeypatch.setattr(cupy_local, "radix_sort", _failing_allocations(cupy_local.radix_sort))
    rng = np.random.default_rng()
    keys, values = random_keys(rng, 100_003, "float32"), random_keys(rng, 100_003, "int64")
    want_k, want_v = distsort.sort_by_key(keys, values)  # NumPy's, by the CPU backend
    k, v = cupy.asarray(keys), cupy.asarray(values)
    with caplog.at_level("WARNING", logger="distsort"):
        distsort.sort_by_key(k, v, out=(k, v), local="radix")
    np.testing.assert_array_equal(_bits(k), _bits(want_k))
    np.testing.assert_array_equal(_bits(v), _bits(want_v))
    assert "sorted in place instead" in caplog.text


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="needs CuPy and a CUDA GPU")
def test_gpu_out_takes_the_kernels_where_free_memory_is_short(monkeypatch):
    """With the device's room reported as none, ``out=`` sorts by the in-place kernels
    (the radix sort fails the test where it is called)."""
    from distsort.backends.gpu.cupy_backend import BACKEND

    monkeypatch.setattr(type(BACKEND), "room", lambda self: 0)
    monkeypatch.setattr(cupy_local, "sort_keys", lambda *a, **k: pytest.fail("radix called"))
    keys = random_keys(np.random.default_rng(), 2**20 + 3, "float32")
    x = cupy.asarray(keys)
    distsort.sort(x, descending=True, out=x)
    np.testing.assert_array_equal(_host(x), numpy_order(keys, True))

