"""``--verify``: the output checked in the pass that sorts and writes it.

The summaries of :mod:`distsort.graph.verify` (count, order-independent 64-bit checksums of
the keys and of the (key, value) pairs, order inside each chunk and its end elements)
are computed for every input chunk where it was read and for every output chunk where
it was made, before it is written, in the same ``compute`` as the sort: nothing is
read again.  :func:`distsort.graph.verify.check` then compares them, and OUTPUT stays under
its temporary name until it passes.  For ``--argsort`` the indices are checked by
``distsort.argsort(verify=True)`` itself, against the (key, position) pairs.

``--verify=reread`` also reads the written temporaries back (one more read pass) and
checks that every chunk on disk is the chunk that was sorted.
"""
from __future__ import annotations

import dataclasses
import time

from distsort.graph.verify import VerificationError, check, chunk_summaries
from distsort.cli.errors import VERIFY_FAILED, CLIError
from distsort.cli.connection import to_device
from distsort.cli.progress import compute
from distsort.cli.sources import Source

WHAT = {"sort": "sort", "argsort": "argsort", "values": "sort_by_key"}


def output_order(job):
    """The order the output must be in (keyed: ties by value, as sort_by_key does), as
    the keywords of ``distsort.graph.verify.chunk_summaries``."""
    return {"descending": job.descending, "keyed": job.mode == "values" and not job.stable}


def _with_order(hashed, ordered):
    """``hashed``'s counts and checksums with ``ordered``'s order facts."""
    return dataclasses.replace(hashed, first=ordered.first, last=ordered.last,
                               disorder=ordered.disorder, where=ordered.where,
                               order=ordered.order)


def output_summaries(job, keys, values=None):
    """Delayed summaries of the output chunks.  ``--stable`` (with --values): the keys
    in NumPy's order of keys alone (``-0.0`` equal to ``+0.0``: the keyed order's key
    codes, without the values) and the (key, value) checksums, in one summary each."""
    if job.mode != "values" or not job.stable:
        return chunk_summaries(keys, values, **output_order(job))
    import dask
    by_keys = chunk_summaries(keys, descending=job.descending, keyed=True)
    return [dask.delayed(_with_order, pure=True)(h, o)
            for h, o in zip(chunk_summaries(keys, values), by_keys, strict=True)]


def fused_summaries(job, inputs, outputs, gpu=False):
    """Delayed summaries (of the input chunks, of the output chunks) to compute with the
    sort.  The input's are empty for argsort, whose check runs inside the sort.

    With ``gpu`` (GPU workers) NumPy chunks, an out-of-core sort's, are summarized on
    the GPU: the one thread of a dask-cuda worker hashes them far slower than a copy to
    the GPU runs, at PCIe speed (``docs/performance.md``).
    """
    inputs = [None if a is None else to_device(a, gpu) for a in inputs]
    outputs = [to_device(a, gpu) for a in outputs]
    if job.mode == "argsort":
        return [], chunk_summaries(outputs[0])
    ins = chunk_summaries(*inputs)
    outs = output_summaries(job, *outputs)
    return ins, outs


def judge(job, ins, outs, chunks):
    """Raise CLIError(VERIFY_FAILED) unless the output checks out against the input."""
    if job.mode == "argsort":  # checked inside distsort.argsort(verify=True)
        return
    try:
        check(ins, outs, chunks, WHAT[job.mode])
    except VerificationError as e:
        raise CLIError(str(e), VERIFY_FAILED) from e


def reread(job, outputs, chunks, cluster, progress, expected):
    """Read the written temporaries back and compare each chunk's summary with the
    summary of the chunk as it was sorted (``expected``); returns the seconds it took."""
    t0 = time.perf_counter()
    arrays = [Source(o.tmp, o.kind, o.reader(), o.dtype, o.n).array(chunks)
              for o in outputs]
    summaries = (chunk_summaries(*arrays) if job.mode == "argsort"
                 else output_summaries(job, *arrays))
    found, _ = compute(cluster.client, summaries, progress,
                       "reading the output back ...")
    bad = [i for i, (a, b) in enumerate(zip(found, expected, strict=True)) if a != b]
    if bad:
        raise CLIError(f"verification failed: {len(bad)} chunk(s) of the written output "
                       f"differ from the sorted data (first: chunk {bad[0]})", VERIFY_FAILED)
    return time.perf_counter() - t0
