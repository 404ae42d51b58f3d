"""The NumPy engine of out-of-core sorts (``distsort.backends.outofcore.hostruns``): the reference
of the GPU engine, run segment by segment, so that CI tests the executor's logic."""
from __future__ import annotations

import itertools

import numpy as np

from distsort.core.order import decode, encode
from distsort.backends.chunk import make_chunk as make_run, parts
from distsort.backends.outofcore.runs import positions
from distsort.backends.cpu.numpy_backend import keyed_sort


def record(name, seconds):
    """Phases are timed on the GPU engine only (``stream_gpu.phase_seconds``)."""


def to_host(chunk):
    return np.asarray(chunk).ravel()


def sort_pair(keys, values, order):
    """``(keys, values or None)`` (new arrays) sorted in distsort's order (keyed: the
    keyed order of ``numpy_backend.order_codes``)."""
    if values is None:  # equal codes are equal bits: the codes sorted are the keys sorted
        codes = encode(keys, descending=order.descending)
        codes.sort(kind="stable")  # a merge of the runs in a concatenation
        return decode(codes, keys.dtype, descending=order.descending, copy=False), None
    # the keyed order, packed into one code per pair where it fits (the same result as
    # a ``keyed_perm`` permutation, several times faster: argsort of 2^21 float64 keys
    # on two CPU workers took 29 s through it)
    return keyed_sort(keys, values, order.descending)


def sort_run(keys, values, order, starts, budget, runs=()):
    k = np.concatenate([np.asarray(p).ravel() for p in keys])
    if starts is not None:
        v = positions(starts, keys)
    else:
        v = None if values is None else np.concatenate([np.asarray(p).ravel() for p in values])
    return make_run(*sort_pair(k, v, order))


def merge(x, y, cuts, order, budget):
    """The merge of sorted runs ``x`` and ``y``, one segment of ``cuts`` at a time."""
    (xk, xv), (yk, yv) = parts(x), parts(y)
    total = len(xk) + len(yk)
    ok = np.empty(total, xk.dtype)
    ov = None if xv is None else np.empty(total, xv.dtype)
    for i0, i1, j0, j1, o0 in cuts:
        o1 = o0 + (i1 - i0) + (j1 - j0)
        k = np.concatenate((xk[i0:i1], yk[j0:j1]))
        v = None if xv is None else np.concatenate((xv[i0:i1], yv[j0:j1]))
        ok[o0:o1], v = sort_pair(k, v, order)
        if ov is not None:
            ov[o0:o1] = v
    return make_run(ok, ov)


def output(piece, like_gpu, budget):
    return piece


def kway_segment(keys_dtype, values_dtype, chunk, like_gpu, budget, fraction):
    """Elements per segment of a k-way merge: the whole output chunk (NumPy merges in
    host memory; segments only bound the device's share)."""
    return max(1, chunk)


def merge_segments(runs, cuts, order, like_gpu, budget):
    """One output chunk of the k-way merge of ``runs``: between consecutive co-ranks of
    ``cuts`` (``distsort.plan.kway.co_ranks``), each run's slice; each segment's slices
    concatenated and sorted stably (the runs' order on ties)."""
    keys, values = parts(runs[0])
    n = sum(cuts[-1]) - sum(cuts[0])
    ok = np.empty(n, keys.dtype)
    ov = None if values is None else np.empty(n, values.dtype)
    o, pieces = 0, [parts(r) for r in runs]
    for c0, c1 in itertools.pairwise(cuts):
        k = np.concatenate([p[0][a:b] for p, a, b in zip(pieces, c0, c1, strict=True)])
        v = None if ov is None else np.concatenate(
            [p[1][a:b] for p, a, b in zip(pieces, c0, c1, strict=True)])
        ok[o:o + len(k)], v = sort_pair(k, v, order)
        if ov is not None:
            ov[o:o + len(k)] = v
        o += len(k)
    return make_run(ok, ov)
