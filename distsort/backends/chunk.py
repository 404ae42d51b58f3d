"""A chunk of a backend: an array, or a ``(keys, values)`` pair; and the one
compare-split that every backend fills in with its own crossing count and merge.

The NumPy backend's keys-only chunks hold order codes, the CuPy backend's the keys,
the host runs of an out-of-core sort either; all are one 1-D array or a pair of
them, sliced and measured alike.

>>> import numpy as np
>>> c = make_chunk(np.arange(5), np.arange(5) * 10)
>>> length(c), slice_chunk(c, 1, 3)
(5, (array([1, 2]), array([10, 20])))
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

#: An array (NumPy or CuPy), or a ``(keys, values)`` pair of them.
Chunk: TypeAlias = Any


def parts(chunk: Chunk) -> tuple[Any, Any | None]:
    """``(keys, values or None)`` of a chunk."""
    return chunk if isinstance(chunk, tuple) else (chunk, None)


def make_chunk(keys: Any, values: Any | None) -> Chunk:
    """The chunk of ``keys`` and ``values`` (None: keys only)."""
    return keys if values is None else (keys, values)


def length(chunk: Chunk) -> int:
    """Number of elements."""
    return len(parts(chunk)[0])


def slice_chunk(chunk: Chunk, start: int, stop: int) -> Chunk:
    """Elements ``start`` to ``stop`` of a chunk, as a view (nothing writes to chunks)."""
    keys, values = parts(chunk)
    return make_chunk(keys[start:stop], None if values is None else values[start:stop])


def head(chunk: Chunk, k: int) -> Chunk:
    """The first ``k`` elements, as a view: what travels to the partner of a
    compare-split (pickling and distributed's CUDA serializer send only its bytes; a
    merge on the same worker reads them where they lie)."""
    return slice_chunk(chunk, 0, k)


def tail(chunk: Chunk, k: int) -> Chunk:
    """The last ``k`` elements, as a view."""
    n = length(chunk)
    return slice_chunk(chunk, n - k, n)


Merge: TypeAlias = Callable[[Chunk, Chunk], Chunk]


def split_low(a: Chunk, b_head: Chunk, k: int, merge: Merge) -> Chunk:
    """The lower chunk of a compare-split: the ``len(a)`` smallest of ``a`` and the
    higher chunk whose head is ``b_head``, where ``k`` elements cross.

    Nothing crosses: ``a`` itself.  All of ``a`` crosses: the head, no merge.  Else
    ``merge`` (the backend's, of two sorted chunks, the lower one first) of what stays
    and what comes.

    >>> import numpy as np
    >>> merge = lambda x, y: np.sort(np.concatenate((x, y)))
    >>> a, b = np.array([1, 4, 6]), np.array([2, 3, 9])
    >>> split_low(a, b[:2], 2, merge), split_high(b, a[1:], 2, merge)
    (array([1, 2, 3]), array([4, 6, 9]))
    """
    if k == 0:
        return a
    n = length(a)
    if k == n:  # every element crosses: the head is the new chunk
        return b_head if length(b_head) == k else slice_chunk(b_head, 0, k)
    return merge(slice_chunk(a, 0, n - k), slice_chunk(b_head, 0, k))


def split_high(b: Chunk, a_tail: Chunk, k: int, merge: Merge) -> Chunk:
    """The higher chunk of a compare-split: the ``len(b)`` largest of ``b`` and the
    lower chunk whose tail is ``a_tail``, where ``k`` elements cross (as
    :func:`split_low`)."""
    if k == 0:
        return b
    n, m = length(a_tail), length(b)
    if k == m:  # every element crosses: the tail is the new chunk
        return slice_chunk(a_tail, n - k, n)
    return merge(slice_chunk(a_tail, n - k, n), slice_chunk(b, k, m))
