"""Sizes: SIZE arguments, bytes for people to read, and how many elements a chunk holds."""
import argparse


def parse_chunk_size(text):
    """``("bytes", n)`` for ``"256MiB"``, ``("elements", n)`` for ``"1000000"``.

    >>> parse_chunk_size("256MiB"), parse_chunk_size("1_000_000")
    (('bytes', 268435456), ('elements', 1000000))
    """
    from dask.utils import parse_bytes

    text = text.strip().replace("_", "")
    try:
        kind, n = ("elements", int(text)) if text.isdigit() else ("bytes", parse_bytes(text))
    except (ValueError, TypeError):
        raise argparse.ArgumentTypeError(
            f"not a size: {text!r} (use e.g. 256MiB or 1000000)") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"chunk size must be positive, got {text!r}")
    return kind, int(n)


def parse_bytes_arg(text):
    from dask.utils import parse_bytes
    try:
        return int(parse_bytes(text))
    except (ValueError, TypeError):
        raise argparse.ArgumentTypeError(f"not a size in bytes: {text!r} (use e.g. 2GiB)") from None


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
    from ..locality import _workers, worker_slots
    workers = _workers(cluster.client)
    return worker_slots(cluster.gpu, workers) if workers else 1


def chunk_elements(args, cluster, itemsize, per_element, n=None):
    """Elements per chunk: ``--chunk-size``, else the default (:func:`default_chunk`),
    balanced over the chunks the cluster sorts at once where ``n`` is given."""
    if args.chunk_size is None:
        largest = max(1, default_chunk(cluster, itemsize, per_element))
        if n is None:
            return largest
        return balanced_chunk(n, largest, sort_slots(cluster),
                              smallest=MIN_SPLIT_BYTES // itemsize)
    kind, size = args.chunk_size
    return max(1, size // itemsize if kind == "bytes" else size)
