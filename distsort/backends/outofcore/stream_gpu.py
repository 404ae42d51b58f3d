"""The GPU engine of out-of-core sorts (``distsort.backends.outofcore.hostruns``).

Runs live in page-locked host memory (``distsort.backends.outofcore.pinned``: huge pages,
registered with CUDA, kept for the next run of the same size, since making fresh memory
resident is slow and is paid once per worker).  A run is formed by copying its chunks
in (pageable ones through the staging ring, ``distsort.backends.outofcore.staging``),
sorting them in place (``distsort.backends.gpu.cupy_backend.sort_inplace``) and copying
them out; a merge copies
each segment's two inputs in, merges them (``merge_runs``) and copies the result out,
with two segments in flight on two streams, so that the copies of one overlap the
other's kernels and the two directions of the link run at once.

The k-way merge's kernels (the radix sort of its segments, the fingerprint of the
chunks it keeps on the device) are loaded, or compiled where CuPy's cache lacks them,
the first time a process calls them: the first run of a sort starts them in a thread
of their own on a few elements (``warm_merge``), so that this happens while the runs
form, not inside the merge.

Before it allocates, a task makes room within the budget: a dask-cuda worker may hold
chunks on the device (the input, or output chunks made earlier), and those are spilled
first (``make_room``), so that the device never holds more than the budget.  Tasks
that run in threads of one process (several threads per worker, or the threaded
scheduler) take the device one at a time (``one_at_a_time``): each task alone fits
the budget, two at once might not; reading and writing chunks go on beside them.
"""
from __future__ import annotations

import functools
import itertools
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import cupy
import numpy as np

from distsort.core import dask_cuda_store
from distsort.backends.gpu import cupy_backend as gpu
# hostbacked: dask-cuda spills through it
from distsort.backends.outofcore import hostbacked, pages, pinned, staging
from distsort.backends.chunk import make_chunk as make_run, parts
from distsort.backends.outofcore.runs import claim


#: Seconds this process spent in each phase of its out-of-core tasks (``phase_seconds``).
_SECONDS: dict = defaultdict(float)


@contextmanager
def _phase(name):
    start = time.perf_counter()
    try:
        yield
    finally:
        _SECONDS[name] += time.perf_counter() - start


class _Clock:
    """``clock(name)`` counts the seconds since the clock's last call (or its making)
    in phase ``prefix + name``."""

    def __init__(self, prefix):
        self.prefix, self.last = prefix, time.perf_counter()

    def __call__(self, name):
        now = time.perf_counter()
        _SECONDS[self.prefix + name] += now - self.last
        self.last = now


def _gpu_seconds(events, names):
    """Count the GPU's seconds between consecutive recorded ``events`` (one list per
    segment) in ``names``: which part of a merge the stream waited for."""
    for marks in events:
        for name, a, b in zip(names, marks, marks[1:], strict=False):
            _SECONDS[name] += cupy.cuda.get_elapsed_time(a, b) / 1e3


def record(name, seconds):
    """Count ``seconds`` more in phase ``name`` (``phase_seconds``)."""
    _SECONDS[name] += seconds


def phase_seconds(reset=False):
    """Seconds spent so far in each phase (pinning, making room, copies and kernels) by
    this process's out-of-core tasks, and its spills (``hostbacked.SPILLS``); ``reset``
    starts the count again."""
    out = dict(_SECONDS)
    spills = hostbacked.SPILLS
    out.update(spills)
    if reset:
        _SECONDS.clear()
        spills.clear()
    return out


_DEVICE_LOCKS: dict = {}


@contextmanager
def one_at_a_time():
    """Hold the current device for this thread's out-of-core step (see the module's
    notes); the time spent waiting for it is counted as ``device_wait``."""
    lock = _DEVICE_LOCKS.setdefault(cupy.cuda.Device().id, threading.Lock())  # atomic
    with _phase("device_wait"):
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


@functools.cache
def _merge_streams(device):
    """The two streams of the merges on ``device``, made once: CuPy's memory pool reuses
    a freed block only on the stream it was allocated on, so fresh streams for every
    merge made each merge's device memory new (a 64 GiB sort with an 8 GB budget showed
    up to 126 GiB in use).  One merge at a time uses them
    (``one_at_a_time``)."""
    with cupy.cuda.Device(device):
        return [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]


def pinned_empty(n, dtype):
    """A NumPy array of ``n`` elements in page-locked host memory (``pinned.pool``)."""
    with _phase("pin"):
        return pinned.pool().empty(n, dtype)


def make_room(nbytes, budget, phase="make_room"):
    """Spill what the dask-cuda worker holds on the device until ``nbytes`` more fit
    the ``budget`` (nothing to do outside a dask-cuda worker); the time is counted as
    ``phase``."""
    if budget is None:
        return
    fast = dask_cuda_store.device_tier(dask_cuda_store.current())
    with _phase(phase):
        while fast is not None and len(fast) and fast.total_weight + nbytes > budget:
            fast.evict()


def to_host(chunk):
    """A pinned host copy of a CuPy chunk (NumPy chunks are used where they are)."""
    if isinstance(chunk, np.ndarray):
        return chunk.ravel()
    out = pinned_empty(chunk.size, chunk.dtype)
    with _phase("stage_d2h"):
        cupy.ascontiguousarray(chunk).ravel().get(out=out)
    return out


def _fill(dst, pieces):
    """Copy ``pieces`` one after the other into ``dst``: pinned host pieces directly,
    pageable ones through the staging ring (``staging``: a single copy from pageable
    memory runs at a fraction of the link's speed)."""
    off = 0
    cupy.cuda.get_current_stream().synchronize()  # ``dst``'s memory is free for the ring
    for piece in pieces:
        n, p = piece.size, piece.ravel()
        if not isinstance(p, np.ndarray):
            dst[off:off + n] = p
        elif hostbacked.is_pinned(p) and p.flags.c_contiguous:
            dst[off:off + n].set(p)
        else:
            with _phase("run_h2d_staged"):
                staging.ring().to_device(dst[off:off + n], p)
        off += n


def _itemsize(keys, values):
    return keys.dtype.itemsize + (0 if values is None else values.dtype.itemsize)


def sort_run(keys, values, order, starts, budget, runs=()):
    """Copy the pieces ``keys`` (and ``values``, or each piece's positions from its
    entry of ``starts``) to the device, sort them there in place as one, and copy the run
    back to pinned memory.  ``runs``: elements of every run of the sort, where known
    (``pinned.PinnedPool.expect``)."""
    with one_at_a_time():
        return _sort_run(keys, values, order, starts, budget, runs)


def _sort_run(keys, values, order, starts, budget, runs):
    n = sum(p.size for p in keys)
    vdtype = np.int64 if starts is not None else (None if values is None else values[0].dtype)
    warm_merge(keys[0].dtype, vdtype, order)
    pinned.pool().expect([pinned.block_size(r, dt) for dt in (keys[0].dtype, vdtype)
                          if dt is not None for r in runs] if runs else None)
    make_room(n * (keys[0].dtype.itemsize + (np.dtype(vdtype).itemsize if vdtype else 0)),
              budget)
    with _phase("run_h2d"):
        dk = cupy.empty(n, keys[0].dtype)
        _fill(dk, keys)
        dv = None
        if starts is not None:
            dv = cupy.empty(n, np.int64)
            _fill(dv, [cupy.arange(s, s + p.size, dtype=np.int64)
                       for s, p in zip(starts, keys, strict=True)])
        elif values is not None:
            dv = cupy.empty(n, vdtype)
            _fill(dv, values)
    with _phase("run_sort"):
        gpu.sort_inplace(dk, dv, order.descending)
        cupy.cuda.get_current_stream().synchronize()
    hk = pinned_empty(n, dk.dtype)
    hv = None if dv is None else pinned_empty(n, dv.dtype)
    with _phase("run_d2h"):
        dk.get(out=hk)
        if dv is not None:
            dv.get(out=hv)
    return make_run(hk, hv)


def merge(x, y, cuts, order, budget):
    """The merge of sorted host runs ``x`` and ``y`` into a new pinned run, segment by
    segment (``cuts``: ``hostruns.segments``), two segments in flight."""
    with one_at_a_time():
        return _merge(x, y, cuts, order, budget)


def _merge(x, y, cuts, order, budget):
    (xk, xv), (yk, yv) = parts(x), parts(y)
    total = len(xk) + len(yk)
    ok = pinned_empty(total, xk.dtype)
    ov = None if xv is None else pinned_empty(total, xv.dtype)
    seg = max((i1 - i0) + (j1 - j0) for i0, i1, j0, j1, _ in cuts)
    make_room(4 * seg * _itemsize(xk, xv), budget)
    streams = _merge_streams(cupy.cuda.Device().id)
    bufs = [(cupy.empty(seg, xk.dtype), None if xv is None else cupy.empty(seg, xv.dtype))
            for _ in range(2)]
    issue = time.perf_counter()
    for s, (i0, i1, j0, j1, o0) in enumerate(cuts):
        st, (bk, bv) = streams[s % 2], bufs[s % 2]
        nx, ny = i1 - i0, j1 - j0
        with st:
            bk[:nx].set(xk[i0:i1], stream=st)
            bk[nx:nx + ny].set(yk[j0:j1], stream=st)
            if bv is not None:
                bv[:nx].set(xv[i0:i1], stream=st)
                bv[nx:nx + ny].set(yv[j0:j1], stream=st)
            a = make_run(bk[:nx], None if bv is None else bv[:nx])
            b = make_run(bk[nx:nx + ny], None if bv is None else bv[nx:nx + ny])
            mk, mv = parts(gpu.merge_runs(a, b, order.descending))
            mk.get(out=ok[o0:o0 + nx + ny], stream=st, blocking=False)
            if mv is not None:
                mv.get(out=ov[o0:o0 + nx + ny], stream=st, blocking=False)
    _SECONDS["merge_issue"] += time.perf_counter() - issue
    with _phase("merge_wait"):
        for st in streams:
            st.synchronize()
    return make_run(ok, ov)


_WARMING: dict = {}
_WARM_LOCK = threading.Lock()
_WARM_THREAD = ThreadPoolExecutor(1, thread_name_prefix="distsort-warm-merge")


def warm_merge(keys_dtype, values_dtype, order):
    """Start, once per device, dtypes and order, the k-way merge's kernels on a few
    elements in a thread of its own (module doc); returns its Future.  Nothing waits
    for it: a failure there is left in the Future, for the merge itself to raise."""
    key = (cupy.cuda.Device().id, np.dtype(keys_dtype).str,
           None if values_dtype is None else np.dtype(values_dtype).str, order)
    with _WARM_LOCK:
        if key not in _WARMING:
            _WARMING[key] = _WARM_THREAD.submit(_warm, *key)
        return _WARMING[key]


def _warm(device, keys_dtype, values_dtype, order):
    from distsort.backends.gpu.local_sort import radix_sort
    began = time.perf_counter()
    kdt = np.dtype(keys_dtype)
    if kdt.kind == "f":  # NaNs of both signs and zeros of both: every fix-up runs
        host = np.array([np.nan, -np.nan, -0.0, 0.0, 0.0, 1.0, -1.0, 2.0], kdt)
    else:
        host = (np.arange(8) % 2).astype(kdt)
    with cupy.cuda.Device(device):
        stream = cupy.cuda.Stream(non_blocking=True)
    with cupy.cuda.Device(device), stream:
        keys = cupy.asarray(host)
        values = None if values_dtype is None else cupy.arange(8).astype(values_dtype)
        merged = parts(radix_sort(keys, values, order))
        out = cupy.empty_like(merged[0])
        out[:] = merged[0]  # the copy into a merged chunk kept on the device
        hostbacked.host_backed(out.get(), out)
        stream.synchronize()
    record("warm_merge", time.perf_counter() - began)


def kway_segment(keys_dtype, values_dtype, chunk, like_gpu, budget, fraction):
    """Elements per segment of a k-way merge: two segments in flight, each its slices
    and the radix sort's buffers (``distsort.core.memory.radix_extra_bytes``), beside the output
    chunk itself when it stays on the device (``like_gpu``), in ``fraction`` of the
    budget."""
    from distsort.core.memory import radix_extra_bytes
    ks = np.dtype(keys_dtype).itemsize
    vs = 0 if values_dtype is None else np.dtype(values_dtype).itemsize
    room = (budget or cupy.cuda.Device().mem_info[0]) * fraction
    room -= chunk * (ks + vs) if like_gpu else 0
    per = ks + vs + radix_extra_bytes(1, ks, vs)
    return max(1, min(chunk, int(room // (2 * per))))


def merge_segments(runs, cuts, order, like_gpu, budget):
    """One output chunk of the k-way merge of pinned host ``runs``: for each segment
    between consecutive co-ranks of ``cuts``, every run's slice copied into one device
    buffer, sorted there by CUB's radix sort on the order codes (the runs are sorted:
    the concatenation is k sorted pieces) and copied back to host memory; two segments
    in flight on two streams.  The host memory is the runs' own (``_sink``): for CuPy
    output (``like_gpu``) the run slices the chunk was merged from (``in_place``), the
    chunk staying on the device too as a ``hostbacked`` array (which spills for free);
    for NumPy output the run pages it read whole (``pages``).  The runs are only read
    between ``cuts[0]`` and ``cuts[-1]``, and written there (``runs.claim``)."""
    with one_at_a_time():
        return _merge_segments(runs, cuts, order, like_gpu, budget)


def _merge_segments(runs, cuts, order, like_gpu, budget):
    from distsort.backends.gpu.local_sort import radix_sort
    from distsort.core.memory import radix_extra_bytes
    keys, values = parts(runs[0])
    kdt, vdt = keys.dtype, None if values is None else values.dtype
    n = sum(cuts[-1]) - sum(cuts[0])
    seg = max((sum(c1) - sum(c0) for c0, c1 in itertools.pairwise(cuts)), default=0)
    per = _itemsize(keys, values)
    make_room((n * per if like_gpu else 0)
              + 2 * (seg * per + radix_extra_bytes(seg, kdt.itemsize, per - kdt.itemsize)),
              budget, "kway_make_room")
    sink = _sink(runs, cuts, n, (kdt, vdt), like_gpu)
    streams = _merge_streams(cupy.cuda.Device().id)
    bufs = [(cupy.empty(seg, kdt), None if vdt is None else cupy.empty(seg, vdt))
            for _ in range(2)]
    issue, o = time.perf_counter(), 0
    clock = _Clock("kway_issue_")  # the parts of the issue loop, for the first sort's sake
    events = []  # per segment, on its stream: begun, in, sorted, out (``_gpu_seconds``)
    for s, (c0, c1) in enumerate(itertools.pairwise(cuts)):
        st, (bk, bv) = streams[s % 2], bufs[s % 2]
        marks = [cupy.cuda.Event() for _ in range(4)]
        events.append(marks)
        with st:
            marks[0].record(st)
            m = 0
            for run, a, b in zip(runs, c0, c1, strict=True):
                rk, rv = parts(run)
                bk[m:m + b - a].set(rk[a:b], stream=st)
                if bv is not None:
                    bv[m:m + b - a].set(rv[a:b], stream=st)
                m += b - a
            marks[1].record(st)
            clock("h2d")
            merged = parts(radix_sort(bk[:m], None if bv is None else bv[:m], order))
            marks[2].record(st)
            clock("sort")
            if s:  # the pages that the other stream's last segment read
                sink.after(events[s - 1][1], st)
            for j, part in enumerate(merged[:1 if bv is None else 2]):
                sink.write(j, part, s, o, (c0, c1), st)
            marks[3].record(st)
        o += m
    _SECONDS["kway_issue"] += time.perf_counter() - issue
    with _phase("kway_wait"):
        for st in streams:
            st.synchronize()
    _gpu_seconds(events, ("kway_gpu_h2d", "kway_gpu_sort", "kway_gpu_d2h"))
    with _phase("kway_output"):
        return sink.result()


def _sink(runs, cuts, n, dtypes, like_gpu):
    """Where a k-way merge task writes its chunk: for CuPy output the device and the
    run ranges just consumed (``_Backed``), which no other task reads
    (``outofcore_graph.kway_cuts``); for NumPy output the pages of those ranges
    (``_Paged``) where the runs are blocks of the pinned pool, else a new pinned chunk
    (``_Pinned``, slices received from another worker).  Each has ``after`` (the
    stream waits for the previous segment's copies in), ``write`` and ``result``."""
    count = 1 if dtypes[1] is None else 2
    if like_gpu:
        sink = _Backed(runs, [cupy.empty(n, dt) for dt in dtypes[:count]])
    else:
        with _phase("kway_pages"):
            chunks = [pages.paged_chunk([parts(r)[j] for r in runs], cuts, pinned.pool())
                      for j in range(count)]
        if any(c is None for c in chunks):
            return _Pinned([pinned_empty(n, dt) for dt in dtypes[:count]])
        sink = _Paged(chunks, dtypes)
    claim(runs, cuts[0], cuts[-1])
    return sink


def _run(pieces):
    """The run of the keys and, where there are two pieces, the values."""
    return make_run(pieces[0], pieces[1] if len(pieces) > 1 else None)


class _Pinned:
    """Into pinned NumPy arrays of the chunk's own."""

    def __init__(self, host):
        self.host = host

    def after(self, event, stream):
        pass

    def write(self, j, part, s, o, cut, stream):
        part.get(out=self.host[j][o:o + part.size], stream=stream, blocking=False)

    def result(self):
        return _run(self.host)


class _Paged:
    """Into the run pages that ``pages.paged_chunk`` plans, mapped again as the chunk."""

    def __init__(self, chunks, dtypes):
        self.chunks, self.dtypes = chunks, dtypes

    def after(self, event, stream):
        stream.wait_event(event)

    def write(self, j, part, s, o, cut, stream):
        """Segment ``s`` (its bytes from the chunk's ``o``-th element on) into the
        pages ``pages.PagedChunk`` gives it."""
        raw, first = part.view(cupy.uint8), o * part.dtype.itemsize
        for at, target in self.chunks[j].targets(s):
            raw[at - first:at - first + target.size].get(out=target, stream=stream,
                                                         blocking=False)

    def result(self):
        return _run([c.array(dt) for c, dt in zip(self.chunks, self.dtypes, strict=False)])


class _Backed:
    """Into a CuPy chunk and the run ranges it was merged from (its host copy)."""

    def __init__(self, runs, device):
        self.runs, self.device, self.host = runs, device, ([], [])

    def after(self, event, stream):
        pass

    def write(self, j, part, s, o, cut, stream):
        """After this stream's copies in, into the ranges they read."""
        in_place(part, [parts(r)[j][a:b] for r, a, b in zip(self.runs, *cut, strict=True)],
                 stream, self.host[j])
        self.device[j][o:o + part.size] = part

    def result(self):
        return _run([hostbacked.host_backed(h, d)
                     for h, d in zip(self.host, self.device, strict=False)])


def in_place(merged, ranges, stream, pieces):
    """Copy the merged segment ``merged`` (CuPy) on ``stream`` into the host ``ranges``
    whose elements it was merged from, one after the other, and append them to
    ``pieces`` (the host copy of the chunk, in order)."""
    o = 0
    for r in ranges:
        if r.size:
            merged[o:o + r.size].get(out=r, stream=stream, blocking=False)
            pieces.append(r)
            o += r.size


def output(piece, like_gpu, budget):
    """An output chunk: on the device for CuPy inputs (made by ``hostbacked.host_backed``:
    a dask-cuda worker spills it to ``piece`` itself), else the host slice."""
    if not like_gpu:
        return piece
    with one_at_a_time():
        make_room(piece.nbytes, budget)
        with _phase("output_h2d"):
            return hostbacked.host_backed(piece)
