"""Memory pressure: a chunk too large for a GPU gives a clear error saying what fits."""
import re

import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from backends import GPU, cupy
from distsort.core.memory import (RESERVE, check_chunk_fits, device_capacity, format_bytes,
                                  largest_fitting_chunk)

H200 = 150_000_000_000  # bytes the driver reports for one H200 (about 139.7 GiB)


def _advice(message):
    """The (elements, bytes text, rechunk argument) that the error message advises."""
    m = re.search(r"largest chunk that fits has (\d+) elements \(([^)]+)\); "
                  r"rechunk with x\.rechunk\((\d+)\)", message)
    assert m, message
    return int(m.group(1)), m.group(2), int(m.group(3))


def test_boundary_is_exact():
    check_chunk_fits(100, 4, 1200, copies=3, reserve=0)
    with pytest.raises(MemoryError, match=r"has 100 elements \(400 B\); rechunk with "
                                          r"x\.rechunk\(100\)"):
        check_chunk_fits(101, 4, 1200, copies=3, reserve=0)


def test_a_64_gb_chunk_of_uint32_on_an_h200():
    """The design notes' anchor: cupy.sort managed 64 GB, not 80 GB, on one H200."""
    n = 16 * 10**9  # 64 GB of uint32
    with pytest.raises(MemoryError) as err:
        check_chunk_fits(n, 4, H200, copies=3)
    message = str(err.value)
    assert "16000000000 elements of 4 bytes (64.0 GB)" in message
    assert "needs 192.0 GB" in message and "the GPU has 150.0 GB" in message
    fits, size, arg = _advice(message)
    assert fits == arg == int(H200 * (1 - RESERVE)) // 12
    assert size == format_bytes(fits * 4)
    check_chunk_fits(fits, 4, H200, copies=3)  # the advice is sound
    x = da.empty(n, dtype=np.uint32, chunks=n)
    assert max(x.rechunk(arg).chunks[0]) <= fits  # and the call it names works


@settings(max_examples=200, deadline=None)
@given(length=st.integers(0, 10**12), itemsize=st.sampled_from([1, 2, 4, 8, 9, 12, 16]),
       capacity=st.integers(0, 2 * 10**12), copies=st.integers(1, 5),
       reserve=st.sampled_from([0.0, 0.05, 0.2]))
def test_advice_is_the_largest_chunk_that_fits(length, itemsize, capacity, copies, reserve):
    fits = largest_fitting_chunk(itemsize, capacity, copies, reserve)
    usable = capacity - int(np.ceil(capacity * reserve))
    assert fits * itemsize * copies <= usable < (fits + 1) * itemsize * copies
    if length <= fits:
        check_chunk_fits(length, itemsize, capacity, copies=copies, reserve=reserve)
        return
    with pytest.raises(MemoryError) as err:
        check_chunk_fits(length, itemsize, capacity, copies=copies, reserve=reserve)
    message = str(err.value)
    assert f"a chunk of {length} elements of {itemsize} bytes" in message
    if fits:
        assert _advice(message)[0::2] == (fits, fits)
        check_chunk_fits(fits, itemsize, capacity, copies=copies, reserve=reserve)
    else:
        assert "not even one element fits" in message


@pytest.mark.parametrize("itemsize, copies, reserve", [(0, 3, 0.05), (4, 0, 0.05),
                                                        (4, 3, 1.0), (4, 3, -0.1)])
def test_bad_arguments_are_value_errors(itemsize, copies, reserve):
    with pytest.raises(ValueError, match="itemsize"):
        check_chunk_fits(10, itemsize, 10**6, copies=copies, reserve=reserve)


@pytest.mark.parametrize("n, text", [(0, "0 B"), (999, "999 B"), (1000, "1.0 kB"),
                                     (1536, "1.5 kB"), (64 * 10**9, "64.0 GB"),
                                     (3 * 10**15, "3000.0 TB")])
def test_format_bytes(n, text):
    assert format_bytes(n) == text


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="no CUDA GPU")
def test_device_capacity_is_the_devices_memory():
    capacity = device_capacity()
    assert capacity == cupy.cuda.Device().mem_info[1] > 10**9
    with pytest.raises(MemoryError, match="rechunk"):
        check_chunk_fits(capacity, 8, capacity)


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="no CUDA GPU")
def test_a_chunk_too_large_for_the_gpu_fails_at_once_with_advice(monkeypatch):
    """With the device made to look small (1 MB), the CuPy backend refuses an 800 kB
    chunk before it allocates anything, with rechunk advice: ``prepare``, the one-chunk
    sort and the group sorts all ask ``check_fits`` first.  Through the API the plan
    sees the same small device: the caller's 800 kB input leaves no room for the sort's
    copy beside it, whatever the chunking, so the call is refused at once, pointing to
    out of core (Dask's local schedulers report no device budget, which out of core
    needs), never planned as a network of one-element chunks."""
    import distsort
    from distsort.core import memory
    from distsort.backends.gpu import cupy_backend as cpb
    from distsort.backends import Order

    monkeypatch.setattr(memory, "device_capacity", lambda: 1_000_000)
    x = cupy.random.default_rng(0).random(100_000)  # float64: 800 kB a chunk
    order = Order(descending=False, keyed=False)
    fits = largest_fitting_chunk(8, 1_000_000, copies=3)
    advice = rf"rechunk with x\.rechunk\({fits}\)"
    with pytest.raises(MemoryError, match=advice):
        cpb.prepare(x, None, order)
    with pytest.raises(MemoryError, match=advice):
        cpb.sort_chunk(x, order, "auto", 0)
    small = cpb.prepare(x[:fits], None, order)  # the advice works
    assert bool((small[1:] >= small[:-1]).all()) and small.size == fits
    with pytest.raises(MemoryError, match="out of core"):
        distsort.sort(da.from_array(x, chunks=100_000, asarray=False))
