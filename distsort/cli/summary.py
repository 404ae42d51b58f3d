"""The summary that ``distsort sort`` prints when it is done."""
from distsort.cli.metrics import STEP_ORDER
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
        *([("timeline", timeline(facts["spans"]))] if facts.get("spans") else []),
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
    >>> _network({"strategy": "kway", "rounds": 0})
    'sorted in runs on this host, merged in one k-way pass (no network)'
    """
    if facts.get("strategy") == "one-device":
        return "sorted as one on one device (no network)"
    if facts.get("strategy") == "exchange":
        return "one exchange between the workers (no network)"
    if facts.get("merge") == "kway":
        return "runs merged in one k-way pass"
    if facts.get("strategy") == "kway":
        return "sorted in runs on this host, merged in one k-way pass (no network)"
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
    """Where the time went: the steps in a row (the pipeline's inside: :func:`timeline`)."""
    parts = [f"start {facts['start']:.2f} s", f"plan {facts.get('plan', 0):.2f} s",
             f"read+sort+write {facts['seconds']:.2f} s"]
    if "reread" in facts:
        parts.append(f"reread {facts['reread']:.2f} s")
    parts.append(f"publish {facts.get('publish', 0):.2f} s")
    return "; ".join(parts)


def timeline(spans):
    """Inside the pipeline: each step's wall-clock interval, from its first task's start
    to its last task's end, in seconds since the command started, and the seconds in
    which some task of it ran (reading, sorting, merging and writing overlap: these are
    not task times summed).

    >>> timeline({"write": (1.5, 2.25, 0.5), "read": (0.5, 1.0, 0.5)})
    'read 0.50-1.00 s (busy 0.50 s), write 1.50-2.25 s (busy 0.50 s); seconds since the start'
    """
    steps = [f"{k} {spans[k][0]:.2f}-{spans[k][1]:.2f} s (busy {spans[k][2]:.2f} s)"
             for k in STEP_ORDER if k in spans]
    return ", ".join(steps) + "; seconds since the start"


def floor_line(disk, wall):
    """The disk floor, where its rates come from, and the command's wall time over it.

    >>> print(floor_line({"floor": 2.0, "read": 2**30, "write": 2**29, "age": 7200}, 2.5))
    2.00 s to read and write it once (read 1.00 GiB/s, write 512.00 MiB/s, measured 2.0 h \
ago); the command took 1.25x it
    """
    age = disk.get("age", 0)
    when = ("measured at the start" if not age else f"measured {age:.0f} s ago"
            if age < 600 else f"measured {age / 3600:.1f} h ago")  # noqa: PLR2004  (10 min)
    ratio = f"; the command took {wall / disk['floor']:.2f}x it" if disk["floor"] > 0 else ""
    return (f"{disk['floor']:.2f} s to read and write it once (read {fmt_bytes(disk['read'])}"
            f"/s, write {fmt_bytes(disk['write'])}/s, {when}){ratio}")


def _measured(facts):
    """The summary's lines for what was measured (only where it was)."""
    lines = []
    disk = facts.get("disk")
    if disk:
        lines.append(("disk floor", floor_line(disk, facts["wall"])))
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
