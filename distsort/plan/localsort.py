"""The local sort of each task, decided by the plan: CUB's radix sort or in place.

A GPU task sorts its chunks (or a group of them) either with CUB's radix sort
(``cupy.sort`` on distsort's order codes: several times faster) or with the in-place
bitonic kernels (no memory beyond the chunk).  The radix sort needs chunk-sized buffers
beside the data (``distsort.core.memory.radix_extra_bytes``); the plan takes it where
the budget the ``ClusterView`` reports has room for them beside what the task and its
device hold (:func:`plan_local`), and the task follows.  The one check left at run
time: a radix sort whose allocation fails sorts in place instead, with a warning on
the ``"distsort"`` logger (``distsort.backends.gpu.local_sort``).

NumPy chunks have no in-place path of their own: their local sort is ``"radix"``
unless ``local="bitonic"`` was asked for (which keeps them off the one-chunk task).

An array sorted in its own memory (``distsort.sort(x, out=x)``) takes the same
choice on the bytes its device has free now (:func:`plan_own_memory`): no copy of
the input is counted, since none is made.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from distsort.core.memory import radix_extra_bytes

__all__ = ["LOCAL_SORTS", "RADIX", "IN_PLACE", "sorts_in_place", "choose_local", "plan_local",
           "plan_own_memory"]

#: Values of ``local=``.
LOCAL_SORTS = ("auto", "bitonic", "radix")
#: The local sorts a plan names: CUB's radix sort, the in-place bitonic kernels.
RADIX, IN_PLACE = "radix", "bitonic"


def sorts_in_place(dtype: npt.DTypeLike, descending: bool = False) -> bool:
    """Whether the radix sort of keys alone of ``dtype`` runs in the keys' own storage,
    CUB's double buffer its only key-sized allocation
    (``distsort.backends.gpu.local_sort.sort_keys``): float32/64 (sorted as they are and
    put in distsort's order in place, or turned into their codes in place where
    descending), and ascending (u)int keys.

    >>> sorts_in_place(np.dtype("f4")), sorts_in_place(np.dtype("i8"), descending=True)
    (True, False)
    """
    dtype = np.dtype(dtype)
    return dtype in (np.float32, np.float64) or (dtype.kind in "iu" and not descending)


def choose_local(extra_bytes: int, budget_bytes: int | None, local: str = "auto") -> str:
    """``"radix"`` or ``"bitonic"``: the local sort for a task whose radix sort needs
    ``extra_bytes`` beyond its data, where ``budget_bytes`` more may be allocated
    (None: not known; then radix, the fallback in place catching a failed allocation).

    >>> choose_local(3 * 2**30, 10 * 2**30)
    'radix'
    >>> choose_local(3 * 2**30, 2 * 2**30)
    'bitonic'
    >>> choose_local(3 * 2**30, None), choose_local(1, 10**9, "bitonic")
    ('radix', 'bitonic')
    >>> choose_local(3 * 2**30, 0, "radix")
    'radix'
    """
    if local not in LOCAL_SORTS:
        raise ValueError(f"local must be one of {LOCAL_SORTS}, got {local!r}")
    if local != "auto":
        return local
    return RADIX if budget_bytes is None or extra_bytes <= budget_bytes else IN_PLACE


def plan_local(local: str, gpu: bool, elements: int, itemsize: int, value_bytes: int,  # noqa: PLR0913, PLR0917
               increasing: bool, in_place: bool, room: int | None) -> str:
    """The local sort of a plan's tasks: ``local`` where it names one; on the GPU the
    radix sort where its buffers for the largest task (``elements`` keys of ``itemsize``
    bytes, values of ``value_bytes``; ``increasing``: argsort's positions; ``in_place``:
    keys sorted in their own storage) fit ``room``, the bytes a task may still allocate
    beside its data (None: not known), else in place.  NumPy chunks: radix.

    >>> plan_local("auto", True, 10**6, 4, 0, False, True, 10**7)
    'radix'
    >>> plan_local("auto", True, 10**6, 4, 8, True, False, 10**7)  # argsort: 4.8e7 needed
    'bitonic'
    >>> plan_local("auto", False, 10**6, 4, 8, True, False, 0)  # NumPy chunks
    'radix'
    >>> plan_local("bitonic", False, 1, 4, 0, False, False, None)
    'bitonic'
    """
    if not gpu and local == "auto":
        return RADIX
    extra = radix_extra_bytes(elements, itemsize, value_bytes, increasing_values=increasing,
                              in_place=in_place)
    return choose_local(extra, None if room is None else max(0, room), local)


def plan_own_memory(local: str, gpu: bool, elements: int, itemsize: int, value_bytes: int,  # noqa: PLR0913, PLR0917
                    keys_in_place: bool, room: int | None, lanes: int = 1) -> str:
    """The local sort of an array sorted in its own memory (``out=``): ``elements``
    keys of ``itemsize`` bytes in ``lanes`` rows, values of ``value_bytes``
    (``keys_in_place``: :func:`sorts_in_place` of the keys alone), where ``room``
    bytes may be allocated beside them.  On the GPU: the radix sort where its buffers
    fit ``room`` (the device's free memory now; None: not known, so in place) and
    the keys are one row, else the in-place kernels; NumPy arrays: ``ndarray.sort``
    (``"radix"``) whatever is asked.

    >>> gib = 2**30
    >>> plan_own_memory("auto", True, 2**28, 4, 0, True, 2 * gib)  # 1 GiB of CUB buffer
    'radix'
    >>> plan_own_memory("auto", True, 30 * 10**9, 4, 0, True, 20 * gib)  # 120 GB
    'bitonic'
    >>> plan_own_memory("auto", True, 2**28, 4, 4, False, 2 * gib)  # keys and values
    'bitonic'
    >>> plan_own_memory("auto", True, 2**20, 4, 0, True, None)
    'bitonic'
    >>> plan_own_memory("radix", True, 2**20, 4, 0, True, 2 * gib, lanes=8)  # rows
    'bitonic'
    >>> plan_own_memory("bitonic", False, 2**20, 4, 0, True, None)  # NumPy
    'radix'
    """
    if local not in LOCAL_SORTS:
        raise ValueError(f"local must be one of {LOCAL_SORTS}, got {local!r}")
    if not gpu:
        return RADIX
    if lanes != 1 or room is None and local == "auto":
        return IN_PLACE
    extra = radix_extra_bytes(elements, itemsize, value_bytes, in_place=keys_in_place)
    return choose_local(extra, max(0, room or 0), local)
