"""Plot and combine the rows of ``distributed_sort.py`` runs (JSON files).

    python benchmarks/plot_distributed.py a.json b.json --out x.png

Left: wall time of every (dtype, bytes) case on 2 GPUs, beside its floor, the same
sort of half the bytes on 1 GPU (weak scaling), and rechunk + ``cupy.sort`` where it
was timed.  Right: the span of each layer (first start to last end; layers overlap) of each
2-GPU case.  Rows of later files replace rows of earlier ones for the same (gpus, dtype,
bytes, chunks, and exchange where a row names "ipc" or "comm").
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def load_rows(paths, drop=()):
    rows = {}
    for path in paths:
        data = json.loads(Path(path).read_text())
        for row in data["rows"] if isinstance(data, dict) else data:
            key = (row.get("gpus"), row.get("dtype"), row.get("bytes"), row.get("chunks"),
                   row.get("exchange") if row.get("exchange") in ("ipc", "comm") else None)
            if "seconds" in row and f"{key[0]}:{key[1]}:{key[2]}:{key[3]}" not in drop:
                rows[key] = row  # (the largest-array case has no timed runs)
    return list(rows.values())


def weak_scaling(rows):
    """Add ``weak_scaling_time_ratio`` to each 2-GPU row with a 1-GPU row of half the bytes
    (the same chunk count per GPU)."""
    one = {(r["dtype"], r["bytes"], r["chunks"]): r for r in rows if r["gpus"] == 1}
    for r in rows:
        ref = one.get((r["dtype"], r["bytes"] // 2, r["chunks"] // 2))
        if r["gpus"] == 2 and ref is not None:
            r["weak_scaling_time_ratio"] = r["seconds"] / ref["seconds"]
            r["one_gpu_half_bytes_s"] = ref["seconds"]
            if "one_chunk_sort_s" in ref:
                r["one_gpu_half_bytes_cupy_sort_s"] = ref["one_chunk_sort_s"]
    return rows


def _label(row):
    how = {"ipc": "\nIPC", "comm": "\nas data"}.get(row.get("exchange"), "")
    return f"{row['dtype']}\n{row['bytes'] / 2**30:g} GiB\n{row['chunks']} chunks{how}"


def plot(rows, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    two = sorted((r for r in rows if r["gpus"] == 2), key=lambda r: (r["dtype"], r["bytes"]))
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    series = [("seconds", "2 GPUs"), ("floor_s", "floor: local sort + moved / NVLink"),
              ("one_gpu_half_bytes_s", "1 GPU, half the bytes")]
    width = 0.8 / len(series)
    for j, (field, name) in enumerate(series):
        xs = [i + (j - 1) * width for i, r in enumerate(two) if field in r]
        left.bar(xs, [r[field] for r in two if field in r], width, label=name)
    left.set_xticks(range(len(two)), [_label(r) for r in two], fontsize=8)
    left.set_yscale("log")
    left.set_ylabel("seconds (persisted input to persisted output)")
    left.legend(fontsize=8)
    left.set_title("wall time")
    names = sorted({k for r in two for k in r.get("rounds", {})})
    width = 0.8 / max(1, len(names))
    for j, name in enumerate(names):  # side by side: the layers' spans overlap in time
        right.bar([i + (j - len(names) / 2) * width for i in range(len(two))],
                  [r.get("rounds", {}).get(name, 0.0) for r in two], width, label=name)
    right.set_xticks(range(len(two)), [_label(r) for r in two], fontsize=8)
    # GPU work is asynchronous: a layer's kernels are counted in the task that next
    # waits for them (a probe reads its samples back), often of the next layer.
    right.set_ylabel("seconds per layer (task stream: first start to last end)")
    right.legend(fontsize=7, ncol=2)
    right.set_title("span of each layer (2 GPUs)")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--out", required=True, help="PNG path; the combined rows go beside it as .json")
    p.add_argument("--title", default="distsort on 2 GPUs")
    p.add_argument("--meta", default="{}", help="JSON object of fields for the combined file")
    p.add_argument("--drop", action="append", default=[], metavar="GPUS:DTYPE:BYTES:CHUNKS",
                   help="leave this row out (e.g. a superseded measurement)")
    args = p.parse_args(argv)
    rows = weak_scaling(load_rows(args.files, set(args.drop)))
    plot(rows, args.out, args.title)
    combined = {**json.loads(args.meta), "sources": args.files, "rows": rows}
    Path(args.out).with_suffix(".json").write_text(json.dumps(combined, indent=1))
    print(f"wrote {args.out} and {Path(args.out).with_suffix('.json')}")


if __name__ == "__main__":
    main()
