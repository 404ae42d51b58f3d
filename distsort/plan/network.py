"""The chunk-level bitonic network, as pure integer arithmetic.

Nothing here touches data.  ``plan_network(c)`` returns the rounds of the
all-ascending ("mirror, then half-cleaners") bitonic sorter on ``c`` chunks,
padded to the next power of two with virtual chunks that hold ``+inf``.  Every
comparator that touches a virtual chunk is a no-op, so the plan simply leaves it
out: no pair ever names a chunk ``>= c``.

Replace each comparator by a compare-split of two sorted chunks (the lower chunk
keeps the smaller half) and the chunks, read in order, are sorted: the 0-1
principle for merge-split networks.  Chunks must have equal length, except that
the last one may be shorter (its missing tail is virtual ``+inf``).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple


class Round(NamedTuple):
    """One round of disjoint compare-splits.

    ``stage`` is the size of the blocks being merged (2, 4, ... chunks); ``stride``
    is the distance of the pairs, or 0 for the mirror step, which pairs chunk
    ``i`` with ``b + stage - 1 - i`` inside its block.
    """

    stage: int
    stride: int
    pairs: tuple[tuple[int, int], ...]


def padded_count(c: int) -> int:
    """The next power of two ``>= c`` (1 for ``c <= 1``)."""
    if c < 0:
        raise ValueError(f"chunk count must be >= 0, got {c}")
    return 1 if c <= 1 else 1 << (c - 1).bit_length()


def mirror_pairs(c: int, stage: int) -> tuple[tuple[int, int], ...]:
    """Pairs ``(i, b + stage - 1 - i)`` for every block ``b``, real chunks only."""
    half = stage // 2
    return tuple(
        (b + i, b + stage - 1 - i)
        for b in range(0, padded_count(c), stage)
        for i in range(half)
        if b + stage - 1 - i < c
    )


def cleaner_pairs(c: int, stride: int) -> tuple[tuple[int, int], ...]:
    """Half-cleaner pairs ``(i, i + stride)`` with ``i & stride == 0``, real chunks only."""
    return tuple((i, i + stride) for i in range(c - stride) if not i & stride)


def plan_network(c: int, run: int = 1) -> tuple[Round, ...]:
    """Rounds of the bitonic network on ``c`` chunks (empty rounds omitted).

    ``run`` (a power of two) says that every ``run`` consecutive chunks already hold
    one sorted run (chunk ``i`` of a group holds its ``i``-th slice): the network then
    starts at the stage that merges pairs of runs, since each earlier stage only sorts
    blocks that are sorted already.  A group that is sorted as one on a single GPU
    (out of core, or many chunks of one worker) skips ``L (L + 1) / 2`` rounds,
    ``L = log2(run)``.

    >>> [r.pairs for r in plan_network(3)]
    [((0, 1),), ((1, 2),), ((0, 1),)]
    >>> len(plan_network(8)), len(plan_network(9))
    (6, 10)
    >>> [r.pairs for r in plan_network(4, run=2)]
    [((0, 3), (1, 2)), ((0, 1), (2, 3))]
    """
    if run < 1 or run & (run - 1):
        raise ValueError(f"run must be a power of two >= 1, got {run}")
    rounds: list[Round] = []
    stage = 2 * run
    while stage <= padded_count(c):
        steps = [(0, mirror_pairs(c, stage))]
        stride = stage // 4
        while stride >= 1:
            steps.append((stride, cleaner_pairs(c, stride)))
            stride //= 2
        rounds.extend(Round(stage, s, p) for s, p in steps if p)
        stage *= 2
    return tuple(rounds)


def group_steps(rounds: Iterable[Round], run: int) -> list[Round | None]:
    """``rounds`` with the rounds whose pairs lie inside groups of ``run`` consecutive
    chunks (half-cleaners of stride ``< run``, the tail of a stage) replaced by one
    ``None`` per stage: a sort of each group as one gives what they give (each
    group then holds its elements in order, the group's part of the bitonic merge).

    >>> [(r.stage, r.stride) if r else None for r in group_steps(plan_network(8, 2), 2)]
    [(4, 0), None, (8, 0), (8, 2), None]
    """
    out: list[Round | None] = []
    for rnd in rounds:
        if run > 1 and 0 < rnd.stride < run:
            if out and out[-1] is None:
                continue
            out.append(None)
        else:
            out.append(rnd)
    return out


def spread_order(pairs: Iterable[tuple[int, int]], c: int) -> tuple[tuple[int, int], ...]:
    """The pairs of a round in the order the merge lets them start: by the bit-reversed
    index of the lower chunk, so that consecutive pairs belong to different workers
    whether the chunks were dealt out round robin or in contiguous blocks (the graph
    lets only a window of consecutive pairs run at once).

    >>> spread_order(((0, 4), (1, 5), (2, 6), (3, 7)), 8)
    ((0, 4), (2, 6), (1, 5), (3, 7))
    """
    bits = max(1, padded_count(c).bit_length() - 1)
    return tuple(sorted(pairs, key=lambda p: int(f"{p[0]:0{bits}b}"[::-1], 2)))


def round_count(c: int, run: int = 1) -> int:
    """Rounds a full network on ``padded_count(c)`` chunks has: ``L (L + 1) / 2``, less
    those of the stages inside sorted runs of ``run`` chunks (``plan_network``).

    >>> round_count(16), round_count(16, run=4)
    (10, 7)
    """
    levels = padded_count(c).bit_length() - 1
    inner = max(0, min(levels, run.bit_length() - 1))
    return (levels * (levels + 1) - inner * (inner + 1)) // 2


def regular_chunks(n: int, chunk: int) -> tuple[int, ...]:
    """Chunk sizes of a regular chunking of ``n`` elements: all ``chunk`` but a shorter last.

    >>> regular_chunks(10, 4)
    (4, 4, 2)
    >>> regular_chunks(0, 4)
    (0,)
    """
    if chunk < 1:
        raise ValueError(f"chunk size must be >= 1, got {chunk}")
    if n == 0:
        return (0,)
    full, rest = divmod(n, chunk)
    return (chunk,) * full + ((rest,) if rest else ())


def is_regular(chunks: tuple[int, ...]) -> bool:
    """Whether a 1-D chunking is regular: equal sizes, the last one possibly shorter, none empty."""
    if len(chunks) <= 1:
        return True
    first = chunks[0]
    return first > 0 and chunks[:-1].count(first) == len(chunks) - 1 and 0 < chunks[-1] <= first


def normalize_chunks(chunks: tuple[int, ...]) -> tuple[int, ...]:
    """The regular chunking the network runs on, for an input chunking ``chunks``.

    A regular input is kept.  Otherwise the number of non-empty chunks is kept and
    their size evened out, so that ragged inputs cost no more rounds than needed.

    >>> normalize_chunks((5, 5, 3))
    (5, 5, 3)
    >>> normalize_chunks((1, 0, 7, 2))
    (4, 4, 2)
    """
    chunks = tuple(map(int, chunks))
    if is_regular(chunks):
        return chunks
    n = sum(chunks)
    count = max(1, sum(1 for c in chunks if c))
    return regular_chunks(n, max(1, -(-n // count)))
