"""One exchange between workers for in-memory sorts, in integers alone.

Each worker sorts the chunks it holds as one run; exact splitters for every output
chunk come from samples and small windows of the runs (``distsort.plan.kway``, step 4:
the design the out-of-core merge between workers uses); then each output chunk's slice
of every run goes once to the worker that owns the chunk, which merges them.  Every
element crosses the network at most once: ``(1 - 1/G)`` of the data between ``G``
workers, in three stages of tasks that depend across workers (the windows, the slices,
the merges), whatever ``G`` is.  Batcher's network between workers sends about half
the data again in each of its ``k (k + 1) / 2`` rounds (``k = log2 G``).

The plan (``distsort.plan.sortplan``) takes the exchange where several workers hold
chunks, where the cost model says that it sends less (:func:`exchange_wins`), and where
every worker has room for what it receives beside its run (:func:`exchange_fits`).  On
GPUs the runs and the merges are sorted on the device (``distsort.backends.gpu.runs``),
whose radix sort's buffers count beside them (``scratch``).

>>> worker_runs((4, 4, 0, 4, 2), ("a", "b", "a", "a", "b"), ("a", "b"))
((0, 3), (1, 4))
>>> [network_rounds(g) for g in (2, 3, 4, 8, 16)]
[1, 3, 3, 6, 10]
>>> [exchange_wins(g) for g in (1, 2, 3, 4, 8)]
[False, False, True, True, True]
>>> [exchange_wins(g, gpu=True) for g in (1, 2, 3)]
[False, True, True]
"""
from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

from distsort.core.memory import usable
from distsort.plan.kway import SAMPLES_PER_RUN

__all__ = ["worker_runs", "network_rounds", "exchange_bytes", "network_bytes", "exchange_wins",
           "exchange_fits", "worker_bytes", "samples_per_run", "exchange_steps",
           "output_owners", "plan_exchange", "EXCHANGE_MARGIN", "GPU_EXCHANGE_MARGIN", "MIN_RUNS",
           "MIN_SAMPLES"]

#: The exchange is chosen where the network would send more than this many times its
#: bytes: beside its one exchange it sends samples and windows (a few percent of the
#: data) and each worker merges what it receives (a pass over its share), which at
#: two workers, where both send half the data once, the network saves.
EXCHANGE_MARGIN = 1.25
#: On GPUs, where at least as many bytes go through the network: a worker's merge is
#: one radix sort of what it received (about 7 ms per GiB of float32 on an H200, where
#: the same bytes take 0.7 s through Dask's TCP and about as long as the sort over
#: NVLink), and at two workers, where the model's bytes are equal, the network's
#: placement sent up to twice them (0.50-1.01 of the data on CPU workers, issue 52).
#: Two GPUs on NVLink, where the network's one round is cheap, are not measured yet.
GPU_EXCHANGE_MARGIN = 1.0
#: The fewest runs (workers holding chunks) an exchange is between.
MIN_RUNS = 2
#: The fewest samples a run gives (short runs give every element).
MIN_SAMPLES = 16


def worker_runs(sizes: Sequence[int], owners: Sequence, workers: Sequence) -> tuple:
    """The runs of an exchange: for each worker of ``workers`` that holds chunks, the
    indices of the non-empty input chunks (of ``sizes``) it holds (``owners``: a
    worker per chunk; None where not known), in input order.  Chunks whose owner is not
    known are dealt to the workers in consecutive blocks (chunk ``i`` of ``c`` to
    worker ``i * W // c``), as distsort's reads of lazy input are.

    >>> worker_runs((3, 3, 3, 3), (None,) * 4, ("a", "b"))
    ((0, 1), (2, 3))
    >>> worker_runs((3, 3, 3), ("b", None, "b"), ("a", "b"))  # worker a holds one chunk
    ((1,), (0, 2))
    >>> worker_runs((0, 0), (None, None), ("a", "b"))
    ()
    """
    held: dict = {w: [] for w in workers}
    for i, (size, owner) in enumerate(zip(sizes, owners, strict=True)):
        if size:
            held[_holder(i, owner, tuple(workers), len(sizes))].append(i)
    return tuple(tuple(held[w]) for w in workers if held[w])


def _holder(i: int, owner: Hashable | None, workers: tuple[Hashable, ...], count: int) -> Hashable:
    """The worker whose run takes chunk ``i`` of ``count`` (held by ``owner``)."""
    return owner if owner in workers else workers[i * len(workers) // count]


def network_rounds(workers: int) -> int:
    """Rounds of Batcher's network between ``workers`` (padded to a power of two):
    ``k (k + 1) / 2`` for ``k = ceil(log2 workers)``."""
    k = max(0, math.ceil(math.log2(max(1, workers))))
    return k * (k + 1) // 2


def exchange_bytes(nbytes: int, workers: int) -> int:
    """Bytes one exchange sends between ``workers`` for ``nbytes`` of data spread
    evenly: every element not already where its output chunk is, once.

    >>> exchange_bytes(800, 4)
    600
    """
    return nbytes * (workers - 1) // max(1, workers)


def network_bytes(nbytes: int, workers: int) -> int:
    """Bytes Batcher's network sends between ``workers`` in the model: half the data
    in each round between workers (random keys: half of every chunk crosses).

    >>> network_bytes(800, 4)
    1200
    """
    return nbytes * network_rounds(workers) // 2


def exchange_wins(workers: int, gpu: bool = False) -> bool:
    """Whether the cost model takes the exchange between ``workers``: the network sends
    more than :data:`EXCHANGE_MARGIN` times the exchange's bytes (on GPUs, at least
    :data:`GPU_EXCHANGE_MARGIN` times)."""
    if workers < MIN_RUNS:
        return False
    network, exchange = network_bytes(2**30, workers), exchange_bytes(2**30, workers)
    if gpu:
        return network >= GPU_EXCHANGE_MARGIN * exchange
    return network > EXCHANGE_MARGIN * exchange


def worker_bytes(run_elements: int, outputs: int, element: int, resident: int = 0,  # noqa: PLR0913, PLR0917
                 scratch: int = 0, chunk: int = 0) -> int:
    """Bytes a worker holds at the exchange's peak: the input chunks it keeps
    (``resident`` bytes, the caller's) and, the larger of its two steps, its run of
    ``run_elements`` being sorted, or the sorted run beside the slices it receives for
    its ``outputs`` elements of output and the merged chunks they make; ``scratch``:
    bytes per element that a sort allocates beside what it sorts (the radix sort's
    buffers on a GPU), for the run and for an output ``chunk``'s merge.

    >>> worker_bytes(100, 100, 8, resident=800)
    3200
    >>> worker_bytes(100, 100, 8, scratch=40, chunk=50)  # the run's sort: 100 * 48
    4800
    """
    sort = run_elements * (element + scratch)
    merge = (run_elements + 2 * outputs) * element + chunk * scratch
    return resident + max(sort, merge)


def exchange_fits(run_lengths: Sequence[int], chunks: Sequence[int], element: int,  # noqa: PLR0913, PLR0917
                  budgets: Sequence[int | None], resident: Sequence[int] | None = None,
                  scratch: int = 0) -> bool:
    """Whether each worker of ``budgets`` (bytes, None: not known) holds its run (of
    ``run_lengths``) and what it receives for its output chunks (:func:`output_owners`
    of ``chunks``), elements of ``element`` bytes, beside the ``resident`` input bytes it
    keeps and the ``scratch`` bytes per element its sorts allocate (:func:`worker_bytes`).
    An unknown budget: no.

    >>> exchange_fits((100, 100), (50,) * 4, 8, (4000, 4000))
    True
    >>> exchange_fits((100, 100), (50,) * 4, 8, (4000, 2000))
    False
    >>> exchange_fits((100, 100), (50,) * 4, 8, (4000, 4000), scratch=24)  # 300 * 8 + 50 * 24
    True
    >>> exchange_fits((100, 100), (50,) * 4, 8, (4000, 4000), scratch=40)
    False
    """
    runs = len(run_lengths)
    if len(budgets) < runs or not all(budgets[:runs]):
        return False
    out = [0] * runs
    for c, owner in enumerate(output_owners(len(chunks), runs)):
        out[owner] += chunks[c]
    resident = resident or (0,) * runs
    largest = max(chunks, default=0)
    return all(worker_bytes(n, o, element, h, scratch, largest) <= usable(int(b or 0))
               for n, o, h, b in zip(run_lengths, out, resident, budgets, strict=False))


def output_owners(chunks: int, runs: int) -> tuple[int, ...]:
    """The run whose worker merges each of ``chunks`` output chunks: consecutive blocks,
    as even as the counts allow.

    >>> output_owners(8, 3)
    (0, 0, 0, 1, 1, 1, 2, 2)
    """
    return tuple(c * runs // max(1, chunks) for c in range(chunks))


def samples_per_run(length: int, chunks: int) -> int:
    """Samples a run of ``length`` elements gives the splitters of ``chunks`` output
    chunks: about ``sqrt(2 chunks length)``, where the samples (all runs' gathered in
    one task) and the windows (about two steps of every run per chunk's end) cost about
    the same, and few next to the data; at least :data:`MIN_SAMPLES`, at most
    ``kway.SAMPLES_PER_RUN``.

    >>> samples_per_run(2**19, 32), samples_per_run(10, 4)
    (5793, 10)
    """
    want = math.isqrt(2 * max(1, chunks) * max(0, length) - 1) + 1 if length else 0
    return max(min(MIN_SAMPLES, length), min(want, SAMPLES_PER_RUN, length))


def exchange_steps(run_lengths: Sequence[int], chunks: int) -> tuple[int, ...]:
    """Each run's step between samples (``kway.sample_step``'s meaning), from
    :func:`samples_per_run`.

    >>> exchange_steps((2**19, 10), 32)
    (91, 1)
    """
    return tuple(max(1, -(-n // max(1, samples_per_run(n, chunks)))) for n in run_lengths)


def plan_exchange(chunks: Sequence[int], element: int, workers: Sequence, owners: Sequence,  # noqa: PLR0913, PLR0917
                  budgets: Sequence[int | None], forced: bool = False,
                  resident: int = 0, gpu: bool = False, scratch: int = 0) -> tuple | None:
    """``(runs, out_chunks)`` of an exchange of ``chunks`` (elements of ``element``
    bytes) between ``workers`` (``owners``: the worker of each chunk, None where not
    known; ``budgets``: each worker's bytes), or None where the network serves better:
    fewer than two runs, the cost model (:func:`exchange_wins`; ``gpu``: GPU workers) or
    too little memory (:func:`exchange_fits`; ``resident``: bytes per element of the
    input chunks that stay beside the sort; ``scratch``: bytes per element its sorts
    allocate).  ``forced`` (``distsort.strategy: exchange``): the exchange wherever two
    workers hold chunks.  The output chunking is regular (``network.normalize_chunks``).

    >>> plan_exchange((4,) * 8, 8, "abcd", "abcd" * 2, (10**6,) * 4)
    (((0, 4), (1, 5), (2, 6), (3, 7)), (4, 4, 4, 4, 4, 4, 4, 4))
    >>> plan_exchange((4,) * 8, 8, "ab", "ab" * 4, (10**6,) * 2) is None  # two workers
    True
    >>> plan_exchange((4,) * 8, 8, "abcd", "abcd" * 2, (100,) * 4) is None  # no room
    True
    >>> plan_exchange((4,) * 8, 8, "ab", "ab" * 4, (10**6,) * 2, gpu=True)[0]  # GPUs: two
    ((0, 2, 4, 6), (1, 3, 5, 7))
    >>> plan_exchange((4,) * 8, 8, "ab", "ab" * 4, (400,) * 2, gpu=True, scratch=40) is None
    True
    """
    from distsort.plan.network import normalize_chunks
    chunks = tuple(map(int, chunks))
    runs = worker_runs(chunks, owners, workers) if workers else ()
    if len(runs) < MIN_RUNS:
        return None
    out = normalize_chunks(chunks)
    if forced:
        return runs, out
    lengths = tuple(sum(chunks[i] for i in idx) for idx in runs)
    kept = tuple(n * resident for n in lengths)
    of = dict(zip(workers, budgets, strict=True))
    budgets = [of[_holder(run[0], owners[run[0]], tuple(workers), len(chunks))]
               for run in runs]
    if not exchange_wins(len(runs), gpu) or not exchange_fits(lengths, out, element, budgets,
                                                              kept, scratch):
        return None
    return runs, out
