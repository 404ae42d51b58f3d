"""Backends: what a task does to the chunks of one array library.

A backend is a module that satisfies :class:`Backend` (and, to share chunks between
workers in place, :class:`SharingBackend`).  The graph (``distsort.graph.layers``) calls
these functions and nothing else, so the NumPy and CuPy backends run the same graph.
A *chunk* is the backend's own form of a sorted piece of the array (NumPy keeps
order codes, CuPy the keys themselves), opaque to the graph.  No function
modifies its arguments: a task may be re-run, and its inputs may be read by
other tasks.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol, TypeAlias, runtime_checkable

import numpy as np

from distsort.core.xp import namespace


@dataclass(frozen=True)
class Order:
    """How to order keys: ``descending``, and whether values ride along.

    With values (``keyed``) ties are broken by the value, so that argsort is
    stable and every backend gives the same result.  (A dataclass, not a tuple,
    so that Dask passes it to tasks as it is.)
    """

    descending: bool = False
    keyed: bool = False


#: A backend's sorted piece of the array, opaque to the graph.
Chunk: TypeAlias = Any
#: A NumPy or CuPy ``ndarray`` (CuPy is optional, so not named in the annotations).
Array: TypeAlias = Any
#: Host NumPy order codes of sampled elements: one array, or a tuple for keyed chunks.
Probe: TypeAlias = "np.ndarray | tuple[np.ndarray, ...]"


@runtime_checkable
class Backend(Protocol):
    """The functions the graph calls on chunks (``distsort.graph.layers``).

    >>> from distsort.backends.cpu import numpy_backend as npb
    >>> isinstance(npb, Backend), isinstance(npb, SharingBackend)
    (True, False)
    """

    def prepare(self, keys: Array, values: Array | None, order: Order,
                start: int | None = None) -> Chunk:
        """Copy one chunk of keys (and values, or positions ``start, start + 1, ...``
        when ``start`` is not None) and sort the copy."""

    def probe(self, chunk: Chunk, stride: int, top: bool, order: Order) -> Probe:
        """Every ``stride``-th element counted from the top (``m-1, m-1-stride, ...``) or
        from the bottom (``0, stride, ...``): a small sample for ``crossing_bound``, as
        host NumPy order codes (so every backend can share NumPy's ``crossing_bound``)."""

    def crossing_bound(self, top_probe: Probe, bottom_probe: Probe, stride: int, limit: int,
                       order: Order) -> int:
        """An upper bound ``kb <= limit`` on the crossing count of the two chunks the
        probes came from (the lower chunk's top probe, the higher chunk's bottom probe):
        ``k = #{i : A[mA-1-i] > B[i]}``."""

    def head(self, chunk: Chunk, k: int) -> Chunk:
        """The first ``k`` elements (a copy or a view): data that travels."""

    def tail(self, chunk: Chunk, k: int) -> Chunk:
        """The last ``k`` elements (a copy or a view)."""

    def merge_low(self, a: Chunk, b_head: Chunk, order: Order) -> Chunk:
        """The ``len(a)`` smallest elements of ``a`` and the higher chunk ``b``, given
        ``b``'s first ``kb`` elements."""

    def merge_high(self, b: Chunk, a_tail: Chunk, order: Order) -> Chunk:
        """The ``len(b)`` largest elements, given ``a``'s last ``kb`` elements."""

    def finish_keys(self, chunk: Chunk, order: Order, dtype: np.dtype,
                    values_dtype: np.dtype | None = None) -> Array:
        """The keys of a sorted chunk, as the user's dtype (``values_dtype``: the
        values' dtype of a keyed sort, given where there are values)."""

    def finish_values(self, chunk: Chunk, order: Order | None = None,
                      keys_dtype: np.dtype | None = None,
                      values_dtype: np.dtype | None = None) -> Array | None:
        """The values of a sorted chunk (the dtypes: the keys' and the user's values',
        None for positions)."""

    def sort_blocks(self, keys: Array, values: Array | None, axis: int, order: Order,
                    positions: bool = False) -> tuple[Array, Array | None]:
        """``(keys, values)``: each 1-D lane of an N-D block sorted along ``axis`` (the
        axis is in one chunk); ``positions`` asks for positions along the axis as the
        values."""

    def length(self, chunk: Chunk) -> int:
        """Number of elements."""


@runtime_checkable
class SharingBackend(Backend, Protocol):
    """A backend whose chunks another worker reads in place (``share.ipc_backend``: GPU workers
    of one host): the graph then needs no edges, heads or tails."""

    def share(self, chunk: Chunk) -> Any:
        """A handle to a whole chunk that another worker can read in place."""

    def merge_low_shared(self, a: Chunk, b_share: Any, order: Order) -> Chunk:
        """``merge_low`` reading the partner's crossing elements through its share."""

    def merge_high_shared(self, b: Chunk, a_share: Any, order: Order) -> Chunk:
        """``merge_high`` reading the partner's crossing elements through its share."""


#: What a backend may declare in its ``CAPABILITIES`` beyond :class:`Backend`:
#: ``"local"`` (its ``prepare`` takes the local sort, ``local=``), ``"sort_owned"``
#: (``sort_owned(keys, values, order, local, increasing_values)`` sorts arrays the task
#: owns, in place where it can: group sorts use it instead of ``prepare``),
#: ``"sort_chunk"`` (``sort_chunk(keys, order, local, part)``: one whole chunk sorted
#: into one output chunk, the keys or an argsort's positions alone, by one task),
#: ``"share"`` (a :class:`SharingBackend`: the network shares whole chunks instead of
#: sending crossing parts), ``"stable"`` (``stable_sort(keys, values, order)``: a
#: key-value sort of one run with equal keys in their order in it, which a group sort
#: of the whole input in input order uses for ``sort_by_key(..., stable=True)``),
#: ``"fits"`` (``check_fits(n, element_bytes)`` raises MemoryError, with rechunk advice,
#: for an input chunk of ``n`` elements the device cannot hold: group sorts ask it
#: before they gather, as ``prepare`` does).
CAPABILITIES = ("local", "sort_owned", "sort_chunk", "share", "stable", "fits")


def capabilities(backend: Any) -> frozenset[str]:
    """What ``backend`` declares it can do (its ``CAPABILITIES``; none where it declares
    nothing).  The graph asks this, never the backend's attributes.

    >>> from distsort.backends.cpu import numpy_backend as npb
    >>> capabilities(npb)
    frozenset({'stable'})
    """
    return frozenset(getattr(backend, "CAPABILITIES", ()))


def array_module_name(meta: Array) -> str:
    """``"cupy"`` for CuPy arrays, ``"numpy"`` for NumPy arrays; TypeError for others
    (:func:`distsort.core.xp.namespace` with ``strict=True``)."""
    return namespace(meta, strict=True).__name__


def get_backend(meta: Array, share: bool = False) -> ModuleType:
    """The backend module for arrays like ``meta``; ``share``: CuPy chunks are shared
    between workers through CUDA IPC (``share.ipc_backend``; workers of one host only)."""
    if array_module_name(meta) == "cupy":
        if share:
            from distsort.backends.share import ipc_backend as backend
        else:
            from distsort.backends.gpu import cupy_backend as backend
    else:
        from distsort.backends.cpu import numpy_backend as backend
    return backend
