"""Backends: what a task does to the chunks of one array library.

A backend is an instance of :class:`Backend` (and, to share chunks between workers in
place, of :class:`SharingBackend`): ``numpy_backend.BACKEND`` (the CPU),
``cupy_backend.BACKEND`` (a GPU), ``ipc_backend.BACKEND`` (GPUs of one host, chunks
shared through CUDA IPC) and ``hostruns.HostRuns`` (sorted runs in host memory, out of
core).  The graph (``distsort.graph.layers``) calls these methods and nothing else, so
every backend runs the same graph; what a backend can do beyond the contract is an
attribute (:attr:`Backend.shares`, :attr:`Backend.stable`) that the plan reads, never a
name the graph tests.  A *chunk* is the backend's own form of a sorted piece of the
array (NumPy keeps order codes, CuPy the keys themselves), opaque to the graph.  No
method modifies its arguments unless it says so (``sort_owned``): a task may be
re-run, and its inputs may be read by other tasks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

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


class Backend:
    """The methods the graph calls on chunks (``distsort.graph.layers``): the contract
    every backend implements.  The defaults here are those of a backend whose
    ``prepare`` does all its sorting (the CPU's); a GPU backend overrides
    ``sort_owned``, ``sort_chunk``, ``check_fits`` and ``stable_sort``.

    >>> from distsort.backends.cpu.numpy_backend import BACKEND
    >>> isinstance(BACKEND, Backend), isinstance(BACKEND, SharingBackend), BACKEND.stable
    (True, False, True)
    """

    #: The array library of its chunks' arrays: ``"numpy"`` or ``"cupy"``.
    name: ClassVar[str] = ""
    #: Whether a task may read another worker's chunk in place (:class:`SharingBackend`):
    #: the network then shares whole chunks instead of sending crossing parts.
    shares: ClassVar[bool] = False
    #: Whether :meth:`stable_sort` sorts keys and values with equal keys in input order
    #: (``sort_by_key(..., stable=True)`` in the one task of a plan that sorts every
    #: chunk as one).
    stable: ClassVar[bool] = False

    def prepare(self, keys: Array, values: Array | None, order: Order,
                start: int | None = None, local: str = "radix") -> Chunk:
        """Copy one chunk of keys (and values, or positions ``start, start + 1, ...``
        when ``start`` is not None) and sort the copy (``local``: the plan's local sort,
        ``"radix"`` or ``"bitonic"``, for backends that have both)."""
        raise NotImplementedError

    def sort_owned(self, keys: Array, values: Array | None, order: Order,
                   local: str = "radix", increasing_values: bool = False) -> Chunk:
        """Sort arrays the task owns (a group sort's gathered slices), in place where the
        backend can; ``increasing_values``: the values are increasing positions."""
        return self.prepare(keys, values, order, None, local)

    def sort_memory(self, keys: Array, values: Array | None, order: Order,
                    local: str = "radix", lanes: int = 1) -> None:
        """Sort C-contiguous ``keys`` (``lanes`` rows of equal length, each sorted on
        its own), and ``values`` with them, in their own memory: the caller's arrays
        (``distsort.sort(x, out=x)``), overwritten.  Ties of ``values`` by the value."""
        raise NotImplementedError(f"the {self.name} backend sorts no array in its memory")

    def room(self) -> int | None:
        """Bytes a sort may allocate now beside its data on this backend's device
        (None: host memory, not counted)."""
        return None

    def sort_run(self, keys: Array, values: Array | None, order: Order,
                 local: str = "radix") -> Chunk:
        """Sort the concatenation of this backend's chunks (the network's groups sorted
        again as one run), owned by the task."""
        return self.sort_owned(keys, values, order, local)

    def sort_chunk(self, keys: Array, order: Order, local: str, part: int,
                   finish_args: tuple) -> Array:
        """Part ``part`` (0 the keys, 1 an argsort's positions) of one whole chunk sorted
        on its own into one output chunk: ``prepare``, then the finish (``finish_args``:
        what ``finish_keys`` / ``finish_values`` take after the chunk)."""
        run = self.prepare(keys, None, order, 0 if order.keyed else None, local)
        return (self.finish_values if part else self.finish_keys)(run, *finish_args)

    def stable_sort(self, keys: Array, values: Array, order: Order) -> Chunk:
        """``(keys, values)`` sorted by key, equal keys in their order here (where
        :attr:`stable`)."""
        raise NotImplementedError(f"the {self.name} backend has no stable sort")

    def check_fits(self, n: int, element_bytes: int) -> None:
        """Raise MemoryError, with rechunk advice, for an input chunk of ``n`` elements
        of ``element_bytes`` that the device cannot hold (group sorts ask it before
        they gather); nothing where memory is the host's."""

    def probe(self, chunk: Chunk, stride: int, top: bool, order: Order) -> Probe:
        """Every ``stride``-th element counted from the top (``m-1, m-1-stride, ...``) or
        from the bottom (``0, stride, ...``): a small sample for ``crossing_bound``, as
        host NumPy order codes (so every backend can share NumPy's ``crossing_bound``)."""
        raise NotImplementedError

    def crossing_bound(self, top_probe: Probe, bottom_probe: Probe, stride: int, limit: int,
                       order: Order) -> int:
        """An upper bound ``kb <= limit`` on the crossing count of the two chunks the
        probes came from (the lower chunk's top probe, the higher chunk's bottom probe):
        ``k = #{i : A[mA-1-i] > B[i]}``."""
        raise NotImplementedError

    def head(self, chunk: Chunk, k: int) -> Chunk:
        """The first ``k`` elements (a copy or a view): data that travels."""
        from distsort.backends.chunk import head
        return head(chunk, k)

    def tail(self, chunk: Chunk, k: int) -> Chunk:
        """The last ``k`` elements (a copy or a view)."""
        from distsort.backends.chunk import tail
        return tail(chunk, k)

    def length(self, chunk: Chunk) -> int:
        """Number of elements."""
        from distsort.backends.chunk import length
        return length(chunk)

    def merge_low(self, a: Chunk, b_head: Chunk, order: Order) -> Chunk:
        """The ``len(a)`` smallest elements of ``a`` and the higher chunk ``b``, given
        ``b``'s first ``kb`` elements."""
        raise NotImplementedError

    def merge_high(self, b: Chunk, a_tail: Chunk, order: Order) -> Chunk:
        """The ``len(b)`` largest elements, given ``a``'s last ``kb`` elements."""
        raise NotImplementedError

    def finish_keys(self, chunk: Chunk, order: Order, dtype: np.dtype,
                    values_dtype: np.dtype | None = None) -> Array:
        """The keys of a sorted chunk, as the user's dtype (``values_dtype``: the
        values' dtype of a keyed sort, given where there are values)."""
        raise NotImplementedError

    def finish_values(self, chunk: Chunk, order: Order | None = None,
                      keys_dtype: np.dtype | None = None,
                      values_dtype: np.dtype | None = None) -> Array | None:
        """The values of a sorted chunk (the dtypes: the keys' and the user's values',
        None for positions)."""
        raise NotImplementedError

    def sort_blocks(self, keys: Array, values: Array | None, axis: int, order: Order,
                    positions: bool = False) -> tuple[Array, Array | None]:
        """``(keys, values)``: each 1-D lane of an N-D block sorted along ``axis`` (the
        axis is in one chunk); ``positions`` asks for positions along the axis as the
        values."""
        raise NotImplementedError

    def __repr__(self):
        return f"<distsort {self.name or type(self).__name__} backend>"


class SharingBackend(Backend):
    """A backend whose chunks another worker reads in place (``share.ipc_backend``: GPU
    workers of one host): the graph then needs no edges, heads or tails."""

    shares: ClassVar[bool] = True

    def share(self, chunk: Chunk) -> Any:
        """A handle to a whole chunk that another worker can read in place."""
        raise NotImplementedError

    def merge_low_shared(self, a: Chunk, b_share: Any, order: Order) -> Chunk:
        """``merge_low`` reading the partner's crossing elements through its share."""
        raise NotImplementedError

    def merge_high_shared(self, b: Chunk, a_share: Any, order: Order) -> Chunk:
        """``merge_high`` reading the partner's crossing elements through its share."""
        raise NotImplementedError


def array_module_name(meta: Array) -> str:
    """``"cupy"`` for CuPy arrays, ``"numpy"`` for NumPy arrays; TypeError for others
    (:func:`distsort.core.xp.namespace` with ``strict=True``)."""
    return namespace(meta, strict=True).__name__
