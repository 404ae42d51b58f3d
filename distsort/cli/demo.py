"""``distsort demo``: sort fresh random data on the cluster and check it against numpy.sort."""
import time

import numpy as np

from distsort.cli.connection import gather, open_cluster, to_host
from distsort.cli.errors import OK, VERIFY_FAILED, CLIError
from distsort.cli.metrics import crossing_tasks
from distsort.cli.progress import persist
from distsort.cli.sizes import chunk_elements, fmt_bytes


_FLOAT64_BYTES = 8


def _random_block(size, dtype, seed, index, gpu):
    """Fresh random keys (normal floats of both signs; integers over the full range)."""
    rng = np.random.default_rng([seed, index])
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        wide = dtype.itemsize >= _FLOAT64_BYTES
        x = rng.standard_normal(size, dtype=np.float64 if wide else np.float32)
        x = x.astype(dtype)
    elif dtype.kind == "b":
        x = rng.integers(0, 2, size=size).astype(bool)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, size=size, dtype=dtype, endpoint=True)
    if gpu:
        import cupy
        return cupy.asarray(x)
    return x


#: What the demo makes random keys of: bool, integers and floats of up to 8 bytes.
DEMO_KINDS, DEMO_MAX_BYTES = "biuf", 8


def demo_dtype(name):
    """The dtype of the demo's keys, or CLIError.

    >>> demo_dtype("int16"), demo_dtype("f8")
    (dtype('int16'), dtype('float64'))
    >>> demo_dtype("complex64")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    distsort.cli.errors.CLIError: demo data: random keys of dtype complex64 cannot be made ...
    """
    try:
        dtype = np.dtype(name)
    except TypeError as e:
        raise CLIError(f"demo data: {e}") from e
    if dtype.kind not in DEMO_KINDS or dtype.itemsize > DEMO_MAX_BYTES:
        raise CLIError(f"demo data: random keys of dtype {dtype} cannot be made (bool, "
                       "(u)int8..64 and float16/32/64 can)")
    return dtype


def demo_data(n, dtype, chunk, seed, gpu):
    import dask.array as da
    from dask import delayed
    from distsort.plan.network import regular_chunks
    meta = np.empty((0,), dtype)
    if gpu:
        import cupy
        meta = cupy.empty((0,), dtype)
    blocks = [da.from_delayed(delayed(_random_block, pure=True)(size, dtype, seed, i, gpu),
                              (size,), dtype=dtype, meta=meta)
              for i, size in enumerate(regular_chunks(n, chunk))]
    return da.concatenate(blocks) if len(blocks) > 1 else blocks[0]


def _sort_and_check(args, cluster, n, dtype):
    """Generate, sort (timed) and compare with numpy.sort; returns what the summary says."""
    import distsort
    from distsort.api import planning
    if args.chunk_size is None:
        chunk = max(1, -(-n // 16))
    else:
        chunk = chunk_elements(args, cluster, dtype.itemsize, dtype.itemsize)
    seed = args.seed if args.seed is not None else int(np.random.SeedSequence().entropy % 2**63)
    print(f"distsort demo: {n:,} random {dtype} keys ({fmt_bytes(n * dtype.itemsize)}), "
          f"seed {seed}, on {cluster.description}", flush=True)
    x, _ = persist(cluster, demo_data(n, dtype, chunk, seed, cluster.gpu), args.progress,
                   "generating ...")
    t0 = time.perf_counter()
    with planning() as plans:
        s = distsort.sort(x)
    s, (crossing, count) = persist(cluster, s, args.progress, "sorting ...")
    secs = time.perf_counter() - t0
    got, ref = (np.asarray(a) for a in gather(cluster, [to_host(s, cluster.gpu),
                                                        to_host(x, cluster.gpu)]))
    ok = np.array_equal(got, np.sort(ref), equal_nan=True)
    return {"plan": plans[-1], "seconds": secs, "crossing": crossing, "count": count, "ok": ok}


def _print_demo_summary(n, dtype, facts):
    plan, secs = facts["plan"], facts["seconds"]
    lines = [f"  chunks     {len(plan.chunks)} x {plan.chunks[0]:,} elements, "
             f"{plan.rounds} rounds ({plan.strategy})",
             f"  sort       {secs:.3f} s, {fmt_bytes(n * dtype.itemsize / secs)}/s, "
             f"{n / secs / 1e6:,.1f} M keys/s"]
    if facts["count"] and facts["count"] == crossing_tasks(plan):
        lines.append(f"  crossing   {fmt_bytes(facts['crossing'])} in head/tail tasks")
    verdict = "yes: equal to numpy.sort" if facts["ok"] else "NO: differs from numpy.sort"
    lines.append(f"  verified   {verdict}")
    print("\n".join(lines), flush=True)


def cmd_demo(args):
    from distsort.cluster import gpu_available
    from distsort.cli.options import check_cluster_options
    check_cluster_options(args)
    dtype = demo_dtype(args.dtype)
    n = max(1, args.size // dtype.itemsize)
    gpu_local = args.device == "gpu" or (args.device == "auto" and gpu_available())
    cluster = open_cluster(args, local_scheduler_ok=not gpu_local)
    try:
        facts = _sort_and_check(args, cluster, n, dtype)
    finally:
        if cluster.close:
            cluster.close()
    _print_demo_summary(n, dtype, facts)
    return OK if facts["ok"] else VERIFY_FAILED
