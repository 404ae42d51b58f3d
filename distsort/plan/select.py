"""Selection by rank, in numbers alone: samples of sorted runs, random samples of
unsorted chunks, the margins of the bands they give, the rank of the top k.

Two ways find the element of a rank (``distsort.graph.select``):

* **sorted runs** (chunks sorted already, ``assume_sorted``): as the k-way merge finds
  its splitters between workers (``distsort.plan.kway``, step 4): every run sends a
  sample, one task brackets each rank between two samples, every run sends the few
  elements between those two, and one task picks the element.  :func:`sample_steps`
  spaces the samples so that the bracketing task stays small whatever the number of
  runs: its table has one row per sample and one column per run.
* **unsorted chunks** (quantiles, top k): no chunk is sorted.  A random sample of every
  chunk (:func:`sample_sizes` elements) brackets each rank between two sample codes,
  :func:`rank_margin` elements either side; one pass over every chunk counts the
  elements below and equal to each bracket and keeps those strictly inside; only those
  few are sorted (``distsort.backends.cpu.bands``).

>>> sample_steps((10, 0, 2**30))
(1, 1, 262144)
>>> top_rank(10, 3), top_rank(10, 12)
(7, 0)
>>> sample_sizes((100, 0, 50))
(100, 0, 50)
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

__all__ = ["sample_steps", "top_rank", "sample_sizes", "rank_margin", "bands_pay", "SAMPLES",
           "TABLE_CELLS", "RANDOM_SAMPLES", "MARGIN_SIGMAS", "BANDS_AT_MOST"]

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


#: The random samples of all chunks together at most (4 Mi codes: sorted on an H200 in
#: about a millisecond): where the array is larger, the bands around the ranks are
#: wider, about ``2 * MARGIN_SIGMAS * n / sqrt(RANDOM_SAMPLES)`` elements at the median.
RANDOM_SAMPLES = 1 << 22
#: Standard deviations of the sample's estimate of a rank that a band spans either side:
#: a rank falls outside its band with a probability below 1e-8, and then a second pass
#: over the chunks finds it exactly (at a cost, not an error).
MARGIN_SIGMAS = 6


def sample_sizes(lengths: Sequence[int]) -> tuple[int, ...]:
    """Random sample sizes of chunks of ``lengths``: together about twice
    ``n ** (2/3)`` (between 2^12 and :data:`RANDOM_SAMPLES`), each chunk's in
    proportion to its length (at least one code of a chunk that is not empty).  The
    sample's cost grows with its size, the bands' with ``n / sqrt(size)``: ``n ** (2/3)``
    balances them.

    >>> sample_sizes((2**29,) * 8)
    (524288, 524288, 524288, 524288, 524288, 524288, 524288, 524288)
    >>> sample_sizes((10**6, 3))
    (20000, 1)
    """
    n = sum(int(x) for x in lengths)
    if n == 0:
        return tuple(0 for _ in lengths)
    total = min(RANDOM_SAMPLES, max(1 << 12, int(2 * n ** (2 / 3))))
    return tuple(min(int(x), -(-int(x) * total // n)) for x in lengths)


def rank_margin(p: float, sampled: int, weight: float) -> float:
    """Elements either side of the rank at fraction ``p`` of all that a band spans,
    where ``sampled`` elements lie in chunks sampled in part, each sample code standing
    for at most ``weight`` of them: :data:`MARGIN_SIGMAS` standard deviations of the
    sample's count below the rank (at most ``weight * sampled * p(1-p)``, as the
    chunks are sampled in proportion), plus ``MARGIN_SIGMAS ** 2`` samples for the
    ranks near the ends, where few samples fall.  Chunks taken whole count exactly.

    >>> rank_margin(0.5, 10**6, 1.0) == 6 * 500 + 36
    True
    >>> rank_margin(0.5, 0, 0.0)
    0.0
    """
    p = min(max(p, 0.0), 1.0)
    return (MARGIN_SIGMAS * math.sqrt(weight * sampled * p * (1 - p))
            + MARGIN_SIGMAS ** 2 * weight)


#: The fraction of the elements that the bands may hold, as the samples will likely
#: make them, for selection by bands: beyond it (many quantiles of one array), sorting
#: every chunk and searching the sorted chunks holds less beside the chunks.
BANDS_AT_MOST = 0.25


def bands_pay(lengths: Sequence[int], ranks: Iterable[int]) -> bool:
    """Whether selection by bands suits ``ranks`` of chunks of ``lengths``: the bands
    that :func:`sample_sizes` samples and :func:`rank_margin` margins will likely make
    hold at most :data:`BANDS_AT_MOST` of the elements (counted without merging the
    bands that overlap, so at most that).

    >>> bands_pay((2**29,) * 8, [2**31, 2**32 - 1]), bands_pay((10**4,), range(0, 10**4, 20))
    (True, False)
    """
    n = sum(int(x) for x in lengths)
    if n == 0:
        return True
    sizes = sample_sizes(lengths)
    partial = [(int(x), int(x) / s) for x, s in zip(lengths, sizes, strict=True) if s < x]
    sampled = sum(x for x, _ in partial)
    weight = max((w for _, w in partial), default=0.0)
    whole_weight = max((int(x) / s for x, s in zip(lengths, sizes, strict=True) if s), default=1)
    held = sum(2 * rank_margin(r / n, sampled, weight) + whole_weight for r in ranks)
    return held <= BANDS_AT_MOST * n
