"""The pieces of an out-of-core sort's host side, timed one by one on one GPU.

What decides how an out-of-core sort holds host memory and reads pageable input
(``distsort.backends.outofcore``): how fast host memory is faulted in and locked, by
one thread and by several, how fast pageable memory reaches the GPU (one copy, several
threads on their own streams, registered in place, staged through a small pinned
ring), and how fast a pinned ring moves pageable memory back.  Every copy is checked
(the bytes that arrive are the bytes sent).  Shared blocks (``memfd`` files, as the
pinned pool makes them) are faulted in from one file and from a file per thread.

    python benchmarks/out_of_core_stages.py --gib 4 --threads 1 4 16
"""
from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from driver import median_time

MADV_HUGEPAGE = 14
MADV_POPULATE_WRITE = 23
_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def _block(nbytes):
    block = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    block.madvise(MADV_HUGEPAGE)
    return block, np.frombuffer(block, np.uint8)


def _split(nbytes, parts, align=2 << 20):
    step = -(-nbytes // parts // align) * align
    return [(o, min(step, nbytes - o)) for o in range(0, nbytes, step)]


class _Clock:
    """``with clock("name"): ...`` adds the block's seconds under ``name``."""

    def __init__(self):
        self.seconds = {}

    def __call__(self, name):
        clock = self

        class _Span:
            def __enter__(self):
                self.t = time.perf_counter()

            def __exit__(self, *exc):
                clock.seconds[name] = time.perf_counter() - self.t
        return _Span()


def pinning(nbytes, threads):
    """Seconds to fault a block in (touching each page, or MADV_POPULATE_WRITE), to
    register it with CUDA (whole, or in pieces from several threads), and of
    cudaHostAlloc."""
    import cupy
    clock = _Clock()
    block, view = _block(nbytes)
    with clock("fault_touch_1"):
        view[::4096] = 0
    addr = view.ctypes.data
    with clock("register_1"):
        cupy.cuda.runtime.hostRegister(addr, nbytes, 0)
    cupy.cuda.runtime.hostUnregister(addr)
    del view
    block.close()
    for t in threads:
        block, view = _block(nbytes)
        addr = view.ctypes.data
        parts = _split(nbytes, t)
        with ThreadPoolExecutor(t) as pool:
            with clock(f"fault_populate_{t}"):
                list(pool.map(lambda p, a=addr: _libc.madvise(a + p[0], p[1],
                                                              MADV_POPULATE_WRITE), parts))
            with clock(f"register_{t}"):
                list(pool.map(lambda p, a=addr: cupy.cuda.runtime.hostRegister(
                    a + p[0], p[1], 0), parts))
        try:  # copies from the pieces registered apart (one copy may not span two)
            d = cupy.empty(nbytes, np.uint8)
            view[:: 1 << 20] = 5
            with clock(f"h2d_after_register_{t}"):
                for o, n in parts:
                    d[o:o + n].set(view[o:o + n])
                cupy.cuda.Device().synchronize()
            assert int(d[:: 1 << 20].min()) == 5
            del d
        finally:
            for o, _ in parts:
                cupy.cuda.runtime.hostUnregister(addr + o)
        del view
        block.close()
    with clock("cuda_host_alloc"):
        mem = cupy.cuda.runtime.hostAlloc(nbytes, 0)
    cupy.cuda.runtime.freeHost(mem)
    return {k: {"seconds": round(v, 4), "GB/s": round(nbytes / v / 1e9, 2)}
            for k, v in clock.seconds.items()}


def shared_pinning(nbytes, threads):
    """Seconds to fault in a shared block (``pages.SharedBlock``, the pinned pool's) of
    one ``memfd`` file from ``t`` threads and of a file per thread, and to register
    the latter whole (its files are mappings side by side) and copy it to the GPU."""
    import cupy

    from distsort.backends.outofcore import pages
    clock = _Clock()
    for t in threads:
        for files in (1, t):
            block = pages.SharedBlock(nbytes, file_bytes=-(-nbytes // files))
            parts = _split(nbytes, t, 4096)
            with ThreadPoolExecutor(t) as pool, clock(f"fault_{files}_files_{t}_threads"):
                list(pool.map(lambda p, a=block.base: _libc.madvise(
                    a + p[0], p[1], MADV_POPULATE_WRITE), parts))
            if files > 1:
                view = np.frombuffer(block.buffer, np.uint8)
                with clock(f"register_{files}_files"):
                    cupy.cuda.runtime.hostRegister(block.base, nbytes, 0)
                view[:: 1 << 20] = 7
                d = cupy.empty(nbytes, np.uint8)
                with clock(f"h2d_{files}_files"):
                    d.set(view)
                    cupy.cuda.Device().synchronize()
                assert int(d[:: 1 << 20].min()) == 7
                cupy.cuda.runtime.hostUnregister(block.base)
                del view, d
            block.close()
    return {k: {"seconds": round(v, 4), "GB/s": round(nbytes / v / 1e9, 2)}
            for k, v in clock.seconds.items()}


def pageable_h2d(nbytes, threads, ring_mib):
    """GB/s of pageable host -> device: one copy; ``t`` threads each on its stream; the
    array registered in place (the registration counted); staged through a pinned
    ring of ``2 t`` buffers filled by ``t`` threads, and back."""
    import cupy

    from distsort.backends.outofcore import staging
    src = np.random.default_rng(1).integers(0, 255, nbytes, dtype=np.uint8)
    d = cupy.empty(nbytes, np.uint8)
    clock = _Clock()

    def check():
        assert bool((d[:: 4099].get() == src[:: 4099]).all())
        d.fill(0)

    with clock("one_copy"):
        d.set(src)
        cupy.cuda.Device().synchronize()
    check()
    for t in threads:
        parts = _split(nbytes, t)
        streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(t)]

        def piece(i, parts=parts, streams=streams):
            o, n = parts[i]
            d[o:o + n].set(src[o:o + n], stream=streams[i])
            streams[i].synchronize()
        with ThreadPoolExecutor(t) as pool, clock(f"threads_{t}"):
            list(pool.map(piece, range(len(parts))))
        check()
    with clock("register_copy_unregister"):
        a = src.ctypes.data
        cupy.cuda.runtime.hostRegister(a, nbytes, 0)
        d.set(src)
        cupy.cuda.Device().synchronize()
        cupy.cuda.runtime.hostUnregister(a)
    check()
    back = np.empty_like(src)
    back[::4096] = 0
    for t in threads:
        ring = staging.StagingRing(t, ring_mib << 20)
        ring.to_device(d, src)  # the first copy: the ring's threads start
        check()
        with clock(f"ring_{t}"):
            ring.to_device(d, src)
        check()
        d.set(src)
        with clock(f"ring_back_{t}"):
            ring.to_host(back, d)
        assert bool((back == src).all())
        back[::4096] = 0
        ring.close()
    return {k: round(nbytes / v / 1e9, 2) for k, v in clock.seconds.items()}


def memcpy(nbytes, threads):
    """GB/s of host memcpy (NumPy copies in threads) between faulted arrays."""
    a = np.ones(nbytes, np.uint8)
    b = np.zeros(nbytes, np.uint8)
    out = {}
    for t in threads:
        parts = _split(nbytes, t)
        with ThreadPoolExecutor(t) as pool:
            seconds = median_time(lambda pool=pool, parts=parts: list(pool.map(
                lambda p: np.copyto(b[p[0]:p[0] + p[1]], a[p[0]:p[0] + p[1]]), parts)), 3, 0)[0]
        out[f"threads_{t}"] = round(nbytes / seconds / 1e9, 2)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gib", type=float, default=4)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 4, 16])
    p.add_argument("--ring-mib", type=int, default=32, help="bytes of each ring buffer")
    p.add_argument("--out", help="JSON file for the figures")
    args = p.parse_args()
    import cupy
    nbytes = int(args.gib * 2**30)
    cupy.cuda.Device().synchronize()
    doc = {"device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
           "bytes": nbytes, "threads": args.threads, "ring_mib": args.ring_mib}
    for name, fn in (("memcpy", lambda: memcpy(nbytes, args.threads)),
                     ("pinning", lambda: pinning(nbytes, args.threads)),
                     ("shared_pinning", lambda: shared_pinning(nbytes, args.threads)),
                     ("pageable_h2d", lambda: pageable_h2d(nbytes, args.threads, args.ring_mib))):
        try:
            doc[name] = fn()
        except Exception as e:  # noqa: BLE001  (the other figures still count)
            doc[name] = {"error": repr(e)}
            traceback.print_exc()
        print(name, json.dumps(doc[name]), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
