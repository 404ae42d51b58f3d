"""The one-host k-way sort, in integers alone: when it runs, its runs, its output chunks.

Where one process holds the data (Dask's local schedulers, a plain array sorted here)
and memory has room for the output beside the runs, a sort needs no network of
compare-splits: the input is cut into one run per core, the runs are sorted by all
cores at once, exact splitters of every output chunk come from the co-ranks across
the runs (``distsort.plan.kway.co_ranks``), and one task per output chunk merges its
slice of every run.  Every element is read and written about twice, with no log²
rounds (``distsort.graph.kway``).

>>> kway_runs(10**8, 16), kway_runs(5, 16)
(16, 5)
>>> run_bounds(10, 3)
((0, 3), (3, 6), (6, 10))
>>> kway_chunks((4, 4, 2), 2), kway_chunks((10,), 4)
((4, 4, 2), (3, 3, 3, 1))
"""
from __future__ import annotations

from collections.abc import Sequence

__all__ = ["KWAY_MIN", "KWAY_COPIES", "kway_runs", "run_bounds", "kway_chunks", "kway_fits"]

#: The fewest elements the plan sorts by threads on its own: below, one ``numpy.sort``
#: takes less than starting the threads (a few milliseconds).
KWAY_MIN = 1 << 18
#: Arrays of the input's size held at the peak: the input (the caller's), the sorted
#: runs, the merged output.
KWAY_COPIES = 3


def kway_runs(n: int, cores: int) -> int:
    """Runs of ``n`` elements on ``cores`` cores: one per core (each run one
    ``numpy.sort`` on one core, all at once), never an empty one."""
    return max(1, min(int(cores), int(n)))


def run_bounds(n: int, runs: int) -> tuple[tuple[int, int], ...]:
    """``(start, stop)`` of each of ``runs`` runs of nearly equal size over ``n``
    elements."""
    ends = [n * r // runs for r in range(runs + 1)]
    return tuple(zip(ends[:-1], ends[1:], strict=True))


def kway_chunks(regular: Sequence[int], cores: int) -> tuple[int, ...]:
    """The output chunks: the input's regular chunking, or, with fewer chunks than
    cores, ``cores`` chunks (each merged by one task: every core merges at once)."""
    regular = tuple(int(c) for c in regular)
    n = sum(regular)
    if len(regular) >= cores or n < cores:
        return regular
    size = -(-n // cores)
    full, rest = divmod(n, size)
    return (size,) * full + ((rest,) if rest else ())


def kway_fits(n: int, element: int, room: int | None) -> bool:
    """Whether the input, its runs and the merged output (:data:`KWAY_COPIES` arrays of
    ``n`` elements of ``element`` bytes) fit ``room`` bytes (None: not known, so no).

    >>> kway_fits(10**8, 4, 2 * 10**9), kway_fits(10**8, 4, 10**9), kway_fits(1, 4, None)
    (True, False, False)
    """
    return room is not None and KWAY_COPIES * n * element <= room
