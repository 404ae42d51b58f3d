"""The NumPy engine of out-of-core sorts (``distsort.backends.hostruns``): the reference
of the GPU engine, run segment by segment, so that CI tests the executor's logic."""
from __future__ import annotations

import numpy as np

from ..order import encode
from .hostruns import make_run, parts, positions
from .numpy import _keyed_perm


def to_host(chunk):
    return np.asarray(chunk).ravel()


def _sorted(keys, values, order):
    if values is None:
        return keys[np.argsort(encode(keys, descending=order.descending), kind="stable")], None
    perm = _keyed_perm(keys, values, order.descending)
    return keys[perm], values[perm]


def sort_run(keys, values, order, starts, budget):
    k = np.concatenate([np.asarray(p).ravel() for p in keys])
    if starts is not None:
        v = positions(starts, keys)
    else:
        v = None if values is None else np.concatenate([np.asarray(p).ravel() for p in values])
    return make_run(*_sorted(k, v, order))


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
        ok[o0:o1], v = _sorted(k, v, order)
        if ov is not None:
            ov[o0:o1] = v
    return make_run(ok, ov)


def output(piece, like_gpu, budget):
    return piece
