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


def chunk_elements(args, cluster, itemsize, per_element):
    if args.chunk_size is None:
        return max(1, default_chunk(cluster, itemsize, per_element))
    kind, n = args.chunk_size
    return max(1, n // itemsize if kind == "bytes" else n)
