"""The summary that ``distsort sort`` prints when it is done."""
from distsort.cli.sizes import fmt_bytes


def describe_chunks(chunks):
    """The chunking as it is, not as it was asked for.

    >>> describe_chunks((6000,) * 8 + (2021,))
    '9 (8 x 6,000 + 1 x 2,021 elements)'
    >>> describe_chunks((5,))
    '1 (1 x 5 elements)'
    """
    if not chunks:
        return "0"
    full = sum(1 for c in chunks if c == chunks[0])
    text = f"{full} x {chunks[0]:,}"
    if full < len(chunks):
        text += f" + {len(chunks) - full} x {chunks[-1]:,}"
    return f"{len(chunks)} ({text} elements)"


def print_summary(job, cluster, facts, report=None):
    src, n = job.src, job.src.n
    secs = facts["seconds"]
    rate = f"{fmt_bytes(src.nbytes / secs)}/s, {n / secs / 1e6:,.1f} M elements/s" if secs else "-"
    chunks = facts["chunks"]
    lines = [
        ("input", f"{src.path} ({src.kind}, {src.dtype}, {n:,} elements, {fmt_bytes(src.nbytes)})"),
        ("job", {"sort": "sort", "argsort": "argsort (int64 indices)",
                 "values": f"sort_by_key (values {job.vals.path if job.vals else ''})"}[job.mode]
         + (", descending" if job.descending else "")),
        ("chunks", f"{describe_chunks(chunks)}, "
                   f"{fmt_bytes((chunks[0] if chunks else 0) * src.dtype.itemsize)} of keys "
                   "each; " + ("output segments of the k-way merge" if "disk_path" in facts
                               else _network(facts))),
        *([("adjusted", facts["adjusted"])] if facts.get("adjusted") else []),
        ("cluster", cluster.description),
        *_out_of_core(job, facts),
        ("wall time", f"{facts['wall']:.2f} s in all; " + _where(facts)),
        ("throughput", rate + " (read, sort and write)"),
    ]
    lines += _measured(facts)
    lines.append(("output", ", ".join(job.outputs)))
    if report:
        lines.append(("report", report))
    print("\n".join(f"  {k:<11}{v}" for k, v in lines), flush=True)


def _network(facts):
    """How the chunks were merged, as the sort's plan says.

    >>> _network({"strategy": "network", "rounds": 6})
    '6 network rounds'
    >>> _network({"strategy": "one-device", "rounds": 0})
    'sorted as one on one device (no network)'
    """
    if facts.get("strategy") == "one-device":
        return "sorted as one on one device (no network)"
    if facts.get("strategy") == "exchange":
        return "one exchange between the workers (no network)"
    if facts.get("merge") == "kway":
        return "runs merged in one k-way pass"
    return f"{facts['rounds']} network rounds"


def _out_of_core(job, facts):
    """The memory line of a sort larger than the device budgets or the host's memory
    (none otherwise)."""
    disk = facts.get("disk_path")
    if disk:
        freed = ", freed behind the merge" if disk["freed"] else ""
        kept = disk.get("kept_runs", 0)
        where = (f"{kept} kept in memory and {disk['runs'] - kept} on the disk" if kept
                 else "on the disk")
        return [("memory", f"larger than memory: {fmt_bytes(job.src.n * job.sort_bytes())} "
                           f"sorted within {fmt_bytes(disk['memory'])} of host memory, as "
                           f"{disk['runs']} sorted runs, {where} in {disk['directory']} "
                           f"({disk['run_seconds']:.2f} s{freed}), merged in one k-way pass "
                           f"of {disk['segments']} segments ({disk['merge_seconds']:.2f} s)")]
    if "out_of_core" not in facts:
        return []
    budget, runs = facts["out_of_core"]
    return [("memory", f"out of core: {fmt_bytes(job.src.n * job.sort_bytes())} sorted "
                       f"within {fmt_bytes(budget)} of device memory per worker, as {runs} "
                       "runs merged through host memory")]


def _where(facts):
    """Where the time went: the steps in a row, then task seconds inside the pipeline
    (reading, sorting and writing overlap, so these add up to more than its wall time)."""
    parts = [f"start {facts['start']:.2f} s", f"plan {facts.get('plan', 0):.2f} s",
             f"read+sort+write {facts['seconds']:.2f} s"]
    if "reread" in facts:
        parts.append(f"reread {facts['reread']:.2f} s")
    parts.append(f"publish {facts.get('publish', 0):.2f} s")
    steps = facts.get("steps")
    if steps:
        inner = ", ".join(f"{k} {steps[k]:.2f} s" for k in ("read", "sort", "write", "verify")
                          if k in steps)
        parts.append(f"task time: {inner} (summed over tasks that run at once)")
    return "; ".join(parts)


def _measured(facts):
    """The summary's lines for what was measured (only where it was)."""
    lines = []
    disk = facts.get("disk")
    if disk:
        lines.append(("disk floor", f"{disk['floor']:.2f} s to read and write it once (read "
                                    f"{fmt_bytes(disk['read'])}/s, write "
                                    f"{fmt_bytes(disk['write'])}/s, measured at the start)"))
    if facts.get("crossing") is not None:
        lines.append(("crossing", f"{fmt_bytes(facts['crossing'])} in head/tail tasks "
                                  "(data exchanged between chunks)"))
    if "sent" in facts:
        spilled = (f"; {fmt_bytes(facts['spilled'])} spilled to disk" if "spilled" in facts
                   else "")
        lines.append(("transfers", f"{fmt_bytes(facts['sent'])} between workers (all tasks)"
                                   + spilled))
    if facts.get("verified"):
        how = ("and the output read back matches" if facts["verified"] == "reread"
               else "checked on each chunk as it was sorted")
        lines.append(("verified", f"yes: sorted, count and checksum match ({how})"))
    return lines
