"""``--verify``: the written (still temporary) outputs checked against the input.

Order-independent checksums (distsort.verify's hashes): the wrapping sum of a 64-bit
mix of each element's bit pattern (or of each (key, value) pair).  A permutation
keeps the sum; a lost, duplicated or changed element changes it with probability
~1 - 2**-64.  Order is checked inside each chunk on the workers, and across chunks
here from each chunk's first and last element.
"""
import time

import numpy as np

from ..verify import key_hashes, pair_hashes
from .errors import VERIFY_FAILED, CLIError
from .progress import compute
from .sources import Source


def element_hashes(keys, values=None):
    h = key_hashes(np.ascontiguousarray(keys))
    return h if values is None else pair_hashes(h, np.ascontiguousarray(values))


def checksum(hashes):
    return int(np.sum(hashes, dtype=np.uint64))


def input_stats(keys=None, values=None, start=None, count=None):
    """(count, checksum) of an input chunk; with ``start``, of positions ``start..``."""
    if start is not None:
        return count, checksum(key_hashes(np.arange(start, start + count, dtype=np.int64)))
    return len(keys), checksum(element_hashes(keys, values))


def output_stats(keys, values, descending, keyed, hash_keys=True):
    """Count, checksum, in-chunk order and end codes of an output chunk."""
    from ..order import encode
    stats = {"count": len(keys), "ok": True, "first": None, "last": None}
    stats["checksum"] = checksum(element_hashes(keys, values) if hash_keys
                                 else key_hashes(np.ascontiguousarray(values)))
    if not len(keys):
        return stats
    if not keyed:
        c = encode(keys, descending=descending)
        stats["ok"] &= bool(np.all(c[1:] >= c[:-1]))
        stats["first"], stats["last"] = (int(c[0]),), (int(c[-1]),)
        return stats
    c = encode(keys, canonical=True, descending=descending)
    v = encode(values, canonical=True)
    ok = (c[1:] > c[:-1]) | ((c[1:] == c[:-1]) & (v[1:] >= v[:-1]))
    stats["ok"] &= bool(np.all(ok))
    stats["first"], stats["last"] = (int(c[0]), int(v[0])), (int(c[-1]), int(v[-1]))
    return stats


def argsort_output_stats(index, source_reader, descending, n):
    """Stats of an argsort chunk: keys gathered from the input at ``index``."""
    index = np.asarray(index)
    if len(index) and (index.min() < 0 or index.max() >= n):
        return {"count": len(index), "ok": False, "checksum": 0, "first": None, "last": None}
    keys = source_reader.take(index)
    return output_stats(keys, index, descending, True, hash_keys=False)


def judge(in_stats, out_stats, n):
    """The list of what is wrong (empty when the output checks out)."""
    problems = []
    count_in, sum_in = sum(s[0] for s in in_stats), sum(s[1] for s in in_stats) % 2**64
    count_out = sum(s["count"] for s in out_stats)
    sum_out = sum(s["checksum"] for s in out_stats) % 2**64
    if not count_in == count_out == n:
        problems.append(f"element count {count_out} != input's {count_in}")
    if sum_in != sum_out:
        problems.append(f"checksum {sum_out:#018x} != input's {sum_in:#018x}: the output "
                        "is not a permutation of the input")
    bad = [i for i, s in enumerate(out_stats) if not s["ok"]]
    if bad:
        problems.append(f"{len(bad)} chunk(s) out of order inside (first: chunk {bad[0]})")
    ends = [s for s in out_stats if s["first"] is not None]
    cross = [i for i in range(len(ends) - 1) if ends[i]["last"] > ends[i + 1]["first"]]
    if cross:
        problems.append(f"{len(cross)} chunk boundary(ies) out of order")
    return problems


def verify_graph(job, outputs, chunk):
    """Delayed stats of the input and of the written (temporary) outputs."""
    from dask import delayed
    n = job.src.n
    offsets = range(0, n, chunk)
    readers = [Source(o.tmp, o.kind, o.reader(), o.dtype, o.n) for o in outputs]
    out_blocks = [r.array(chunk).to_delayed().ravel() for r in readers]
    if job.mode == "argsort":
        ins = [delayed(input_stats)(start=s, count=min(chunk, n - s)) for s in offsets]
        outs = [delayed(argsort_output_stats)(b, job.src.reader, job.descending, n)
                for b in out_blocks[0]]
        return ins, outs
    in_keys = job.src.array(chunk).to_delayed().ravel()
    in_vals = (job.vals.array(chunk).to_delayed().ravel() if job.vals
               else [None] * len(in_keys))
    out_vals = out_blocks[1] if job.vals else [None] * len(out_blocks[0])
    ins = [delayed(input_stats)(k, v) for k, v in zip(in_keys, in_vals)]
    outs = [delayed(output_stats)(k, v, job.descending, job.keyed)
            for k, v in zip(out_blocks[0], out_vals)]
    return ins, outs


def verify(job, outputs, chunk, cluster, progress):
    """Check the outputs, raising CLIError(VERIFY_FAILED); returns the seconds it took."""
    t0 = time.perf_counter()
    ins, outs = verify_graph(job, outputs, chunk)
    results, _ = compute(cluster.client, ins + outs, progress, "verifying ...")
    problems = judge(results[:len(ins)], results[len(ins):], job.src.n)
    if problems:
        raise CLIError("verification failed: " + "; ".join(problems), VERIFY_FAILED)
    return time.perf_counter() - t0
