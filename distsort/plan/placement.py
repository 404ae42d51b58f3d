"""Where each input chunk enters the network, and how many chunks are sorted as one.

Sorting does not care which input chunk takes which position of the network.  So
the positions follow where the chunks live: the chunks of one worker take
consecutive positions, in aligned blocks of a power of two, and the network's
early rounds (which pair chunks inside such blocks) move no data between workers.
Past that, each block of ``group`` consecutive positions is sorted as one on its
worker (``distsort.graph.layers``), and the network starts at the stage that merges pairs
of blocks (``distsort.plan.network.plan_network(c, run=group)``).

Everything here is pure arithmetic on integers and worker names, tested without
a cluster; ``distsort.cluster.locality`` asks the scheduler for what it needs.

Examples
--------
Eight chunks persisted round robin on two workers: each worker's chunks take one
aligned block of four positions.

>>> placement(["a", "b"] * 4)
(0, 2, 4, 6, 1, 3, 5, 7)
>>> group_size(8, slots=2, chunk_bytes=10, budget_bytes=10**6)
4
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence

__all__ = ["placement", "group_size", "local_group", "floor_pow2", "starts", "group_bounds"]

#: Copies of its group a group sort holds beyond the inputs: their concatenation and
#: the sorted run (``distsort.graph.layers.group_prepare``).
GROUP_COPIES = 2


def floor_pow2(n: int) -> int:
    """The largest power of two ``<= n`` (1 for ``n <= 1``).

    >>> [floor_pow2(n) for n in (0, 1, 2, 3, 4, 7, 8, 9)]
    [1, 1, 2, 2, 4, 4, 8, 8]
    """
    return 1 if n <= 1 else 1 << (int(n).bit_length() - 1)


def placement(owners: Sequence[Hashable | None], group: int = 1,
              short_last: bool = False) -> tuple[int, ...]:
    """A permutation ``perm`` of the chunks: position ``p`` of the network takes input
    chunk ``perm[p]``.

    Parameters
    ----------
    owners : sequence
        The worker holding each input chunk (any hashable name), or None where it is
        not known (lazy input).  Chunks of unknown owners keep their order.
    group : int, optional
        A power of two: every worker's chunks are dealt in whole aligned blocks of
        ``group`` positions first (each block then lies on one worker), in the order
        the workers first appear; the rest follow, worker by worker.  With
        ``group=1`` each worker's chunks simply take consecutive positions.
    short_last : bool, optional
        The last chunk is shorter than the others: it keeps the last position (the
        network's chunks are equal but for the last one).

    Returns
    -------
    tuple of int
        ``perm``, a permutation of ``range(len(owners))``.

    Examples
    --------
    >>> placement(["a", "b", "a", "b", "a", "b"])
    (0, 2, 4, 1, 3, 5)
    >>> placement(["a", "b", "a", "b", "b", "b"], group=2)  # a's 2, b's 4, in blocks
    (0, 2, 1, 3, 4, 5)
    >>> placement(["a", "b", "a", "b", "a"], group=2)  # a's third chunk comes last
    (0, 2, 1, 3, 4)
    >>> placement(["a", "b", "a", "b", "a"], short_last=True)  # chunk 4 stays last
    (0, 2, 1, 3, 4)
    >>> placement([None, None, None])
    (0, 1, 2)
    """
    if group < 1 or group & (group - 1):
        raise ValueError(f"group must be a power of two >= 1, got {group}")
    owners = list(owners)
    c = len(owners)
    if c == 0:
        return ()
    fixed = (c - 1,) if short_last and c > 1 else ()
    chunks_of = defaultdict(list)  # dicts keep the order in which workers first appear
    for i, owner in enumerate(owners[:c - len(fixed)]):
        chunks_of[owner].append(i)
    blocks, rest = [], []
    for mine in chunks_of.values():
        whole = len(mine) - len(mine) % group
        blocks.extend(mine[:whole])
        rest.extend(mine[whole:])
    return tuple(blocks + rest) + fixed


def group_size(chunks: int, slots: int, chunk_bytes: int, budget_bytes: int | None) -> int:
    """How many consecutive chunks are sorted as one: the chunks per slot (a GPU, or a
    CPU worker's thread), rounded down to a power of two, as far as memory allows: a
    slot holds its share of the chunks, and a group sort two more copies of its group
    (their concatenation and the sorted run), within ``budget_bytes`` (None: no bound).

    >>> group_size(32, slots=2, chunk_bytes=2**29, budget_bytes=140 * 10**9)
    16
    >>> group_size(8, slots=2, chunk_bytes=2**33, budget_bytes=140 * 10**9)  # 4 + 2 x 4 chunks
    4
    >>> group_size(32, slots=2, chunk_bytes=5 * 10**9, budget_bytes=127 * 10**9)  # 160 GB
    4
    >>> group_size(32, slots=2, chunk_bytes=5 * 10**9, budget_bytes=110 * 10**9)
    2
    >>> group_size(3, slots=4, chunk_bytes=1, budget_bytes=None)
    1
    """
    if slots < 1 or chunks < 0 or chunk_bytes < 0:
        raise ValueError(f"need slots >= 1, chunks >= 0 and chunk_bytes >= 0, got {slots}, "
                         f"{chunks} and {chunk_bytes}")
    g = floor_pow2(chunks // slots)
    if budget_bytes is not None:
        held = -(-chunks // slots)
        while g > 1 and (held + GROUP_COPIES * g) * chunk_bytes > budget_bytes:
            g //= 2
    return g


def local_group(owners: Sequence[Hashable | None], group: int) -> int:
    """The largest power of two ``<= group`` such that every block of that many
    consecutive positions lies on one worker (``owners``: the worker of the chunk at
    each position, None where not known, which matches any): a group sort then moves
    no chunk between workers.

    >>> local_group(["a", "a", "b", "b"], 2), local_group(["a", "a", "a", "b"], 2)
    (2, 1)
    >>> local_group([None, "b", "a", "a"], 4)
    2
    """
    g = group
    while g > 1:
        blocks = ({o for o in owners[b:b + g] if o is not None} for b in range(0, len(owners), g))
        if all(len(held) <= 1 for held in blocks):
            return g
        g //= 2
    return 1


def starts(perm: Iterable[int], chunk: int) -> tuple[int, ...]:
    """The index of the first element of the input chunk at each position, for a
    regular chunking of ``chunk`` elements (argsort's positions follow the chunk).

    >>> starts((0, 2, 1, 3), 10)
    (0, 20, 10, 30)
    """
    return tuple(int(i) * int(chunk) for i in perm)


def group_bounds(c: int, group: int) -> tuple[tuple[int, int], ...]:
    """The ``(first, stop)`` positions of each group of ``group`` consecutive chunks;
    the last group may be shorter.

    >>> group_bounds(5, 2)
    ((0, 2), (2, 4), (4, 5))
    """
    return tuple((b, min(c, b + group)) for b in range(0, c, group))
