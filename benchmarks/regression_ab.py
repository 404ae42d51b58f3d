"""Compare this tree with another tree of distsort on one GPU, scenario by scenario.

    python benchmarks/regression_ab.py OLD_TREE --scenarios array dask out_of_core \
        --rounds 2 --out ab.json

Each tree runs its own scenario script (``one_gpu.py``, ``out_of_core.py``) in a fresh
process with that tree first on ``PYTHONPATH``, in rounds that alternate the order of
the trees (old, new, then new, old: drift in the machine's state falls on both alike).
Every script checks its own outputs.  The report gives, per case, the median of each
tree's medians and the ratio new/old; the local sort has its own A/B
(``local_sort_ab.sh``).

Scenarios:

* ``array``: ``distsort.sort`` of a CuPy float32 array, 2^24 and 2^28 elements;
* ``dask``: a persisted 16 GiB float32 Dask array in 8 chunks on one dask-cuda worker;
* ``out_of_core``: 16 GiB float32 in 16 chunks, one worker with a 4 GB device budget.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NEW = Path(__file__).resolve().parents[1]

SCENARIOS = {
    "array": ("one_gpu", ["--parts", "array", "--array-cases", "sort:float32:24",
                          "sort:float32:28", "--runs", "7", "--warmup", "2"]),
    "dask": ("one_gpu", ["--parts", "dask", "--dask-cases", "16GiB:8", "--runs", "5",
                         "--compare-up-to", "0"]),
    "out_of_core": ("out_of_core", ["--size", "16GiB", "--chunks", "16", "--budget", "4GB",
                                    "--runs", "3"]),
}


def run_scenario(tree: Path, scenario: str, out: Path, timeout: float) -> list[dict]:
    """The rows of one scenario script of ``tree``, run in a process of its own."""
    script, args = SCENARIOS[scenario]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tree), *filter(None, [os.environ.get("PYTHONPATH")])]), "PYTHONUNBUFFERED": "1"}
    if (tree / "benchmarks" / "__init__.py").exists():
        command = [sys.executable, "-m", f"benchmarks.{script}"]
    else:
        command = [sys.executable, str(tree / "benchmarks" / f"{script}.py")]
    done = subprocess.run([*command, *args, "--out", str(out)], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:  # rows saved before a failure (a cluster slow to close) count
        print(f"{scenario} in {tree}: exit {done.returncode}", done.stderr[-1500:],
              sep="\n", file=sys.stderr)
    if not out.exists():
        return []
    rows = json.loads(out.read_text())["rows"]
    return [{**r, "case": r.get("case") or f"{r['dtype']} {r['bytes'] / 2**30:g} GiB {r['input']}",
             "correct": r.get("correct", r.get("checked"))}
            for r in rows if "seconds" in r and not r.get("warmup")]


def report(times: dict, trees: dict) -> list[dict]:
    """Per case: each tree's medians, the median of them, and the ratio new/old."""
    rows = []
    for case in sorted({c for side in times.values() for c in side}):
        old, new = times["old"].get(case, []), times["new"].get(case, [])
        if not old or not new:
            continue
        rows.append({"case": case, "old_s": statistics.median(old),
                     "new_s": statistics.median(new), "old_runs": old, "new_runs": new,
                     "ratio": statistics.median(new) / statistics.median(old),
                     "trees": trees})
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("old", help="the other tree (a checkout of distsort)")
    p.add_argument("--scenarios", nargs="+", choices=list(SCENARIOS), default=list(SCENARIOS))
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--timeout", type=float, default=300, help="seconds per script run")
    p.add_argument("--out", required=True, help="JSON file for the report")
    args = p.parse_args(argv)
    trees = {"old": Path(args.old).resolve(), "new": NEW}
    times: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    correct = True
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            order = ("old", "new") if round_ % 2 == 0 else ("new", "old")
            for scenario in args.scenarios:
                for side in order:
                    t = time.perf_counter()
                    rows = run_scenario(trees[side], scenario,
                                        Path(tmp) / f"{side}{round_}{scenario}.json",
                                        args.timeout)
                    for r in rows:
                        times[side].setdefault(f"{scenario}: {r['case']}", []).append(
                            r["seconds"])
                        correct &= bool(r.get("correct", True))
                    print(f"round {round_} {scenario} {side}: "
                          + ", ".join(f"{r['case']} {r['seconds']:.4f} s" for r in rows)
                          + f" ({time.perf_counter() - t:.0f} s with start-up)", flush=True)
    rows = report(times, {k: str(v) for k, v in trees.items()})
    Path(args.out).write_text(json.dumps({"scenario": "regression_ab", "rows": rows,
                                          "all_correct": correct}, indent=1))
    print(f"{'case':<48} {'old s':>9} {'new s':>9} {'new/old':>8}")
    for r in rows:
        print(f"{r['case']:<48} {r['old_s']:9.4f} {r['new_s']:9.4f} {r['ratio']:8.3f}")
    print("every output checked by its script:", "yes" if correct else "NO")


if __name__ == "__main__":
    main()
