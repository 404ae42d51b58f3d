"""Sizes: SIZE arguments, bytes for people to read, and how many elements a chunk holds."""
import argparse
import re


#: The smallest and largest chunk sizes taken: a chunk of a few bytes makes a graph of
#: millions of tasks (and gigabytes of the scheduler's memory) from a small input.
MIN_CHUNK_BYTES, MIN_CHUNK_ELEMENTS = 1 << 10, 1000
MAX_CHUNK_BYTES = 1 << 50
_CHUNK_ALLOWED = ("a size in bytes with a unit, 1KiB..1PiB (e.g. 256MiB), or a whole "
                  "number of elements, 1000..2**47 (e.g. 1000000)")


def parse_chunk_size(text):
    """``("bytes", n)`` for ``"256MiB"``, ``("elements", n)`` for ``"1000000"``.

    >>> parse_chunk_size("256MiB"), parse_chunk_size("1_000_000")
    (('bytes', 268435456), ('elements', 1000000))
    >>> parse_chunk_size("7B")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: chunk size '7B' is 7 bytes: use a size in bytes with a unit, ...
    """
    from dask.utils import parse_bytes

    text = text.strip().replace("_", "")
    try:
        if not (text.isdigit() or re.fullmatch(r"\d+(\.\d*)?\s*[a-zA-Z]+", text)):
            raise ValueError(text)  # "", "1.5": neither elements nor bytes with a unit
        kind, n = ("elements", int(text)) if text.isdigit() else ("bytes", parse_bytes(text))
        n = int(n)
    except (ValueError, TypeError, OverflowError):
        raise argparse.ArgumentTypeError(
            f"not a size: {text!r}: use {_CHUNK_ALLOWED}") from None
    low, high = ((MIN_CHUNK_ELEMENTS, MAX_CHUNK_BYTES >> 3) if kind == "elements"
                 else (MIN_CHUNK_BYTES, MAX_CHUNK_BYTES))
    if not low <= n <= high:
        raise argparse.ArgumentTypeError(
            f"chunk size {text!r} is {n} {kind}: use {_CHUNK_ALLOWED}")
    return kind, n


def parse_bytes_arg(text):
    """A positive size in bytes, e.g. ``"2GiB"``.

    >>> parse_bytes_arg("2GiB")
    2147483648
    """
    from dask.utils import parse_bytes
    try:
        n = int(parse_bytes(text))
    except (ValueError, TypeError, OverflowError):
        n = 0
    if not 0 < n <= MAX_CHUNK_BYTES << 10:
        raise argparse.ArgumentTypeError(f"not a size in bytes: {text!r} (use e.g. 2GiB)")
    return n


def fmt_bytes(n):
    from dask.utils import format_bytes
    return format_bytes(int(n))


def default_chunk(cluster, itemsize, per_element):
    """Elements per chunk: 1 GiB of keys on GPUs; on CPUs 1/16 of a worker's memory
    (a compare-split holds about three chunks, plus what waits to be spilled),
    between 4 MiB and 256 MiB of keys."""
    if cluster.gpu:
        return (1 << 30) // itemsize
    budget = cluster.worker_memory // 16 if cluster.worker_memory else 128 << 20
    return max(4 << 20, min(256 << 20, budget)) // per_element


#: Chunks an input may be cut into at most: each is several tasks of the sort's graph.
MAX_CHUNKS = 100_000


def check_chunk_count(chunk_size, n, itemsize):
    """``--chunk-size`` must not cut ``n`` elements into more than ``MAX_CHUNKS``
    chunks (a graph too large to schedule, built before a single chunk is sorted).

    >>> check_chunk_count(("elements", 1000), 10**9, 8)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: --chunk-size makes 1,000,000 chunks of the input; at most ...
    """
    if chunk_size is None:
        return
    kind, size = chunk_size
    elements = max(1, size // itemsize if kind == "bytes" else size)
    count = -(-n // elements)
    if count > MAX_CHUNKS:
        raise argparse.ArgumentTypeError(
            f"--chunk-size makes {count:,} chunks of the input; at most {MAX_CHUNKS:,}: "
            "use a larger size")


#: The default chunking splits an input into chunks no smaller than this (bytes of keys)
#: to give every worker one: below it a chunk's tasks cost more than its sort.
MIN_SPLIT_BYTES = 1 << 20


def balanced_chunk(n, largest, slots, smallest=1):
    """Elements per chunk for ``n`` elements: at most ``largest``, in a number of chunks
    that is a multiple of ``slots`` (the chunks sorted at once: one per GPU worker, one
    per thread of CPU workers), nearly equal, so that no worker waits for another's
    larger chunk; fewer chunks where they would be smaller than ``smallest``.

    >>> balanced_chunk(100_000_000, 67_108_864, 2)  # not 67,108,864 + 32,891,136
    50000000
    >>> balanced_chunk(100_000_000, 67_108_864, 4), balanced_chunk(10**6, 10**6, 3, 10**5)
    (25000000, 333334)
    >>> balanced_chunk(1000, 2**20, 8, smallest=400), balanced_chunk(0, 5, 2)
    (500, 5)
    """
    if n <= 0:
        return max(1, largest)
    fewest = -(-n // largest)
    count = -(-fewest // slots) * slots
    if -(-n // count) < smallest:  # a small input: fewer, larger chunks
        count = max(fewest, n // smallest, 1)
    return max(1, -(-n // count))


def sort_slots(cluster):
    """Chunks the cluster sorts at once: one per GPU worker, one per thread of CPU
    workers (NumPy sorts a chunk on one thread); in this process, one per thread (GPU
    0: one)."""
    if cluster.client is None:
        return 1 if cluster.gpu else max(1, cluster.threads)
    from distsort.plan.clusterview import ClusterView
    workers = cluster.client.scheduler_info(n_workers=-1)["workers"]
    threads = tuple(w.get("nthreads", 1) for w in workers.values())
    return ClusterView(workers=tuple(workers), threads=threads).slots(cluster.gpu)


def chunk_elements(args, cluster, itemsize, per_element, n=None):
    """Elements per chunk: ``--chunk-size``, else the default (:func:`default_chunk`; at
    most two to a run of ``--device-memory-limit``'s out-of-core sort, as the plan cuts
    one large chunk), balanced over the chunks the cluster sorts at once where ``n`` is
    given."""
    if args.chunk_size is None:
        largest = max(1, default_chunk(cluster, itemsize, per_element))
        limit = getattr(args, "device_memory_limit", None)
        if limit:  # two chunks to an out-of-core run (``distsort.plan.sortplan``)
            from distsort.plan.outofcore import RUN_FRACTION
            largest = min(largest, max(1, int(limit * RUN_FRACTION) // (2 * per_element)))
        if n is None:
            return largest
        return balanced_chunk(n, largest, sort_slots(cluster),
                              smallest=MIN_SPLIT_BYTES // itemsize)
    kind, size = args.chunk_size
    return max(1, size // itemsize if kind == "bytes" else size)


#: A size is written in a unit of which it takes at least this many.
_UNITS_AT_LEAST = 10


def size_text(n):
    """A size option's text for at least ``n`` bytes, rounded up to a whole KiB, MiB or
    GiB (that unit's count at least 10 where larger), which parses back exactly: the
    value an error suggests is the value that passes.

    >>> size_text(1000), size_text(5 * 2**20 + 1), size_text(452 * 2**20)
    ('1000B', '5121KiB', '452MiB')
    """
    n = int(n)
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        count = -(-n >> shift)
        if count >= _UNITS_AT_LEAST:
            return f"{count}{unit}"
    return f"{n}B"


def smallest_passing(passes, low, high, tolerance=0.0):
    """The smallest integer in ``[low, high]`` for which ``passes`` (false below, true
    from some value on) holds, within ``tolerance`` of it (a share: a value that passes,
    at most that much larger); None where even ``high`` fails.

    >>> smallest_passing(lambda x: x * x >= 50, 1, 100), smallest_passing(bool, 0, 0)
    (8, None)
    >>> 1000 <= smallest_passing(lambda x: x >= 1000, 1, 10**9, 0.01) <= 1010
    True
    """
    return bracket(passes, low, high, tolerance)[1]


def bracket(passes, low, high, tolerance=0.0):
    """``(below, x)``: the largest value tried that fails (``low - 1`` where none
    does) and the smallest that passes (None where even ``high`` fails), at most
    ``max(1, tolerance * x)`` apart.  Doubles from ``low`` first, so that a value near
    ``low`` takes few calls of ``passes``.

    >>> bracket(lambda x: x >= 37, 5, 100)
    (36, 37)
    """
    below, x = low - 1, low
    while not passes(x):
        if x >= high:
            return x, None
        below, x = x, min(high, max(x + 1, 2 * x))
    while x - below > max(1, tolerance * x):
        mid = (below + x) // 2
        if passes(mid):
            x = mid
        else:
            below = mid
    return below, x
