"""Backends: what a task does to the chunks of one array library.

A backend is a module with the functions below.  The graph (``distsort.graph``)
calls them and nothing else, so the NumPy and CuPy backends run the same graph.
A *chunk* is the backend's own form of a sorted piece of the array (NumPy keeps
order codes, CuPy the keys themselves), opaque to the graph.  No function
modifies its arguments: a task may be re-run, and its inputs may be read by
other tasks.

``prepare(keys, values, order, start) -> chunk``
    Copy one chunk of keys (and values, or positions ``start, start + 1, ...``
    when ``start`` is not None) and sort the copy.
``probe(chunk, stride, top, order) -> probe``
    Every ``stride``-th element counted from the top (``m-1, m-1-stride, ...``)
    or from the bottom (``0, stride, ...``): a small sample for ``crossing_bound``,
    as host NumPy order codes (so every backend can share NumPy's ``crossing_bound``).
``crossing_bound(top_probe, bottom_probe, stride, limit, order) -> int``
    An upper bound ``kb <= limit`` on the crossing count of the two chunks the
    probes came from (the lower chunk's top probe, the higher chunk's bottom
    probe): ``k = #{i : A[mA-1-i] > B[i]}``.
``head(chunk, k)`` / ``tail(chunk, k)``
    The first / last ``k`` elements (copies or views): the only data
    that travels.
``merge_low(a, b_head, order) -> chunk``
    The ``len(a)`` smallest elements of ``a`` and the higher chunk ``b``, given
    ``b``'s first ``kb`` elements.
``merge_high(b, a_tail, order) -> chunk``
    The ``len(b)`` largest elements, given ``a``'s last ``kb`` elements.
``share(chunk)``, ``merge_low_shared(a, b_share, order)``, ``merge_high_shared(b, a_share, order)``
    Optional (``cupy_ipc``: GPU workers of one host): a handle to a whole chunk that
    another worker can read in place, and the merges that read the partner's crossing
    elements through it.  With them the graph needs no edges, heads or tails.
``finish_keys(chunk, order, dtype)`` / ``finish_values(chunk)``
    The keys (as the user's dtype) and values of a sorted chunk.
``sort_blocks(keys, values, axis, order, positions=False) -> (keys, values)``
    Sort each 1-D lane of an N-D block along ``axis`` (the axis is in one chunk);
    ``positions`` asks for positions along the axis as the values.
``length(chunk) -> int``
    Number of elements.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Order:
    """How to order keys: ``descending``, and whether values ride along.

    With values (``keyed``) ties are broken by the value, so that argsort is
    stable and every backend gives the same result.  (A dataclass, not a tuple,
    so that Dask passes it to tasks as it is.)
    """

    descending: bool = False
    keyed: bool = False


def array_module_name(meta) -> str:
    """``"cupy"`` for CuPy arrays, ``"numpy"`` for NumPy arrays; TypeError for others.

    Subclasses (masked arrays, matrices) are refused: their extra state would be lost.
    """
    kind = type(meta)
    module = kind.__module__.split(".")[0]
    if kind.__name__ != "ndarray" or module not in ("numpy", "cupy"):
        raise TypeError(f"distsort sorts NumPy or CuPy chunks, not {kind.__module__}."
                        f"{kind.__name__}")
    return module


def get_backend(meta, share=False):
    """The backend module for arrays like ``meta``; ``share``: CuPy chunks are shared
    between workers through CUDA IPC (``cupy_ipc``; workers of one host only)."""
    if array_module_name(meta) == "cupy":
        if share:
            from . import cupy_ipc as backend
        else:
            from . import cupy as backend
    else:
        from . import numpy as backend
    return backend
