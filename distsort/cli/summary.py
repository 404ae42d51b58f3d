"""The summary that ``distsort sort`` prints when it is done."""
from .sizes import fmt_bytes


def print_summary(job, cluster, facts):
    src, n = job.src, job.src.n
    secs = facts["seconds"]
    rate = f"{fmt_bytes(src.nbytes / secs)}/s, {n / secs / 1e6:,.1f} M elements/s" if secs else "-"
    lines = [
        ("input", f"{src.path} ({src.kind}, {src.dtype}, {n:,} elements, {fmt_bytes(src.nbytes)})"),
        ("job", {"sort": "sort", "argsort": "argsort (int64 indices)",
                 "values": f"sort_by_key (values {job.vals.path if job.vals else ''})"}[job.mode]
         + (", descending" if job.descending else "")),
        ("chunks", f"{facts['chunks']} x {facts['chunk']:,} elements "
                   f"({fmt_bytes(facts['chunk'] * src.dtype.itemsize)} of keys); "
                   f"{facts['rounds']} network rounds"),
        ("cluster", cluster.description),
        ("wall time", f"{secs:.2f} s (sort and write)"),
        ("throughput", rate),
    ]
    lines += _measured(facts)
    lines.append(("output", ", ".join(job.outputs)))
    print("\n".join(f"  {k:<11}{v}" for k, v in lines), flush=True)


def _measured(facts):
    """The summary's lines for what was measured (only where it was)."""
    lines = []
    if facts.get("crossing") is not None:
        lines.append(("crossing", f"{fmt_bytes(facts['crossing'])} in head/tail tasks "
                                  "(data exchanged between chunks)"))
    if "sent" in facts:
        spilled = (f"; {fmt_bytes(facts['spilled'])} spilled to disk" if "spilled" in facts
                   else "")
        lines.append(("transfers", f"{fmt_bytes(facts['sent'])} between workers (all tasks)"
                                   + spilled))
    if "verified" in facts:
        lines.append(("verified", f"yes: sorted, count and checksum match "
                                  f"({facts['verified']:.2f} s)"))
    return lines
