"""Output chunks that a dask-cuda worker spills without a copy
(``distsort.backends.outofcore.hostbacked``), checked against the bytes they were made from."""
import numpy as np
import pytest

from backends import cupy

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(cupy is None, reason="needs CuPy and a CUDA GPU")]


def _made(dtype=np.float32, n=100_003, seed=0):
    from distsort.backends.outofcore.hostbacked import host_backed
    host = np.random.default_rng(seed).standard_normal(n).astype(dtype)
    return host, host_backed(host)


def _dask_roundtrip(x):
    from distributed.protocol import deserialize, serialize
    header, frames = serialize(x, serializers=("dask",), on_error="raise")
    return header, frames, deserialize(header, frames)


def test_spilled_as_its_host_copy_and_back_as_a_plain_cupy_array():
    host, x = _made()
    assert type(x) is cupy.ndarray and np.array_equal(x.get(), host)
    header, frames, back = _dask_roundtrip(x)
    assert len(frames) == 1 and np.shares_memory(np.asarray(frames[0]), host)
    assert type(back) is cupy.ndarray and np.array_equal(back.get(), host)


def test_a_chunk_backed_by_pieces_spills_one_frame_each_and_reads_back_joined():
    """A k-way merge's chunk: its host copy is the run ranges it consumed."""
    from distsort.backends.outofcore.hostbacked import host_backed
    from distsort.cluster.held import host_view
    host = np.random.default_rng(3).standard_normal(10_007).astype(np.float32)
    runs = [np.zeros(6000, np.float32), np.zeros(9000, np.float32)]
    pieces = [runs[0][100:3100], runs[1][0:0], runs[1][5:7012]]  # an empty one too
    pieces[0][:], pieces[2][:] = host[:3000], host[3000:]
    x = host_backed(pieces, cupy.asarray(host))
    header, frames, back = _dask_roundtrip(x)
    assert len(frames) == 2 and all(
        np.shares_memory(np.asarray(f), p) for f, p in zip(frames, pieces[::2], strict=True))
    assert type(back) is cupy.ndarray and np.array_equal(back.get(), host)

    class Spilled:  # as dask-cuda keeps it: no single view of its host copy
        pass
    spilled = Spilled()
    spilled.header, spilled.frames = header, frames
    assert host_view(spilled) is None
    with pytest.raises(ValueError, match="bytes"):
        host_backed(pieces[:1], cupy.asarray(host))


def test_a_chunk_written_in_place_or_a_view_of_one_is_copied_as_it_is_now():
    host, x = _made(np.int64)
    x[7] += 1  # a task that wrote into its input
    _, frames, back = _dask_roundtrip(x)
    assert not np.shares_memory(np.asarray(frames[0]), host)
    assert back.get()[7] == host[7] + 1
    host, x = _made(np.int64, seed=1)
    _, frames, back = _dask_roundtrip(x[10:20])
    assert not np.shares_memory(np.asarray(frames[0]), host)
    assert np.array_equal(back.get(), host[10:20])
    other = cupy.asarray(host)  # not made by host_backed: CuPy's own serializer
    assert not np.shares_memory(np.asarray(_dask_roundtrip(other)[1][0]), host)


def test_the_fingerprint_sees_a_permutation_and_odd_sizes():
    from distsort.backends.outofcore.hostbacked import fingerprint
    a = cupy.arange(1001, dtype=cupy.uint8)
    b = a.copy()
    b[[3, 4]] = b[[4, 3]]
    assert fingerprint(a) != fingerprint(b) and fingerprint(a) == fingerprint(a.copy())
    assert fingerprint(cupy.empty(0, cupy.float64)) == 0


def test_dask_cuda_spills_and_reads_it_like_any_cupy_array():
    dask_cuda = pytest.importorskip("dask_cuda")
    from dask_cuda.device_host_file import device_to_host, host_to_device

    from distsort.cluster.held import host_view
    assert dask_cuda
    host, x = _made(np.uint16)
    spilled = device_to_host(x)
    view = host_view(spilled)
    assert np.shares_memory(view, host) and np.array_equal(view, host)
    back = host_to_device(spilled)
    assert type(back) is cupy.ndarray and np.array_equal(back.get(), host)


def test_a_plain_contiguous_array_spills_through_the_staging_ring(monkeypatch):
    """Plain CuPy arrays of some size (input chunks spilled to make room) are copied
    through the ring: the same bytes, the same header, read back as any spilled array."""
    from distsort.backends.outofcore import hostbacked
    from distsort.cluster.held import host_view
    monkeypatch.setattr(hostbacked, "STAGED_BYTES", 1 << 10)
    host = np.random.default_rng(5).standard_normal(3 * (1 << 20) + 7)  # odd pieces
    x = cupy.asarray(host)
    before = hostbacked.SPILLS["spill_staged_bytes"]
    header, frames, back = _dask_roundtrip(x)
    assert hostbacked.SPILLS["spill_staged_bytes"] == before + x.nbytes
    assert np.array_equal(np.frombuffer(frames[0], np.float64), host)
    assert np.array_equal(back.get(), host)

    class Spilled:  # as dask-cuda keeps it
        pass
    spilled = Spilled()
    spilled.header, spilled.frames = header, frames
    assert np.array_equal(host_view(spilled), host)


def test_read_back_from_pinned_frames_it_spills_for_free_again():
    """A keyed k-way chunk (keys, values) that dask-cuda spilled and a pick read back:
    each part is backed by the same pinned pieces, so it spills again without a copy;
    from pageable frames (disk, another worker) it comes back a plain array."""
    import cupyx

    from distsort.backends.outofcore.hostbacked import host_copy, host_backed
    rng = np.random.default_rng(7)
    parts = []
    for dtype in (np.float32, np.int64):
        run = cupyx.empty_pinned(5000, dtype)
        run[:] = rng.integers(0, 1000, run.size)
        pieces = [run[:1200], run[3000:4100]]
        parts.append((pieces, host_backed(pieces, cupy.asarray(np.concatenate(pieces)))))
    header, frames, back = _dask_roundtrip(tuple(x for _, x in parts))
    for (pieces, x), y in zip(parts, back, strict=True):
        assert np.array_equal(y.get(), x.get())
        again = host_copy(y)
        assert again is not None and len(again) == 2
        assert all(np.shares_memory(a, p) for a, p in zip(again, pieces, strict=True))
    host, plain = _made()  # pageable host copy: read back as CuPy's serializer would
    _, _, back = _dask_roundtrip(plain)
    assert host_copy(back) is None and np.array_equal(back.get(), host)
