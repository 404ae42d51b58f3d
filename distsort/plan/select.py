"""Selection by rank across sorted runs, in integers alone: samples, ranks of the top k.

The runs of a selection are the chunks of an array, each sorted where it lies.  The
element of a rank is found as the k-way merge finds its splitters between workers
(``distsort.plan.kway``, step 4): every run sends a sample, one task brackets each rank
between two samples, every run sends the few elements between those two, and one task
picks the element.  :func:`sample_steps` spaces the samples so that the bracketing task
stays small whatever the number of runs: its table has one row per sample and one
column per run.

>>> sample_steps((10, 0, 2**30))
(1, 1, 262144)
>>> top_rank(10, 3), top_rank(10, 12)
(7, 0)
"""
from __future__ import annotations

from collections.abc import Sequence

__all__ = ["sample_steps", "top_rank", "SAMPLES", "TABLE_CELLS"]

#: Samples a run gives at most: the bracketing task's time grows with all samples
#: times the runs, the windows' with the runs times the step.  2^12 samples of each of
#: 8 runs: 31 ms to bracket 12 ranks on a loaded 2-core CPU (2^14: 171 ms), and
#: windows of about 2^20 elements a rank for 8 runs of 2^29.
SAMPLES = 1 << 12
#: Cells of the bracketing table (samples of all runs times runs): 2^18 int64 cells
#: (2 MiB) at most, so that many runs take fewer samples each.
TABLE_CELLS = 1 << 18


def sample_steps(lengths: Sequence[int]) -> tuple[int, ...]:
    """Elements between two samples of each run of ``lengths``: ``SAMPLES`` samples a
    run where the runs are few, fewer where they are many (the windows between two
    samples then hold about ``len(lengths) * step`` elements).

    >>> sample_steps((2**20,) * 64)[0]
    16384
    """
    k = max(1, len(lengths))
    per_run = max(16, min(SAMPLES, TABLE_CELLS // (k * k)))
    return tuple(max(1, -(-int(n) // per_run)) for n in lengths)


def top_rank(total: int, k: int) -> int:
    """The rank (from 0, ascending) of the smallest of the ``k`` largest of ``total``
    elements: everything at or above it is among them.

    >>> top_rank(5, 5), top_rank(5, 0)
    (0, 5)
    """
    return max(0, int(total) - int(k))
