"""The benchmark suite: named scenarios that run on any machine with the GPUs they need.

    python benchmarks/suite.py --list
    python benchmarks/suite.py --scenario local_sort gpu_merge --out bench-out
    python benchmarks/suite.py --scenario local_sort_largest --param huge_gb=60
    python benchmarks/suite.py --all --quick --dry-run        # the commands, not run

A scenario is one or more commands (the scripts of ``benchmarks/`` or pytest) and
the GPUs it needs.  Each command's output goes to the terminal and to
``OUT/SCENARIO.log``; its JSON lands in ``OUT`` under the scenario's name, the
device and the date.  A scenario needing more GPUs than the machine has is skipped
with a message.  Nothing here limits the time a scenario takes: wrap the suite in
``timeout`` where needed.  The exit status is 1 when a command failed, else 0.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Scenario:
    """What one scenario runs and what it needs.

    ``commands`` are argument lists whose ``{python}``, ``{out}``, ``{device}``,
    ``{date}``, ``{json}`` (OUT/SCENARIO_DEVICE_DATE.json) and ``{PARAM}`` (an entry of
    ``params``)
    are filled in by ``command_lines``; ``quick`` is appended to each script command
    under ``--quick``; ``env`` is added to the environment.
    """

    name: str
    gpus: int
    about: str
    commands: tuple[tuple[str, ...], ...]
    quick: tuple[str, ...] = ()
    params: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)


def _py(script, *args):
    return ("{python}", f"benchmarks/{script}", *args)


def _pytest(*args):
    return ("{python}", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=10", *args)


def _dist(*args):
    return _py("distributed_sort.py", "--warmup", "1", *args)


SCENARIOS = (
    Scenario("cpu_sort", 0, "distsort on 2 CPU threads against numpy.sort, time per stage",
             (_py("cpu_sort.py", "--out", "{json}"),), quick=("--quick",)),
    Scenario("one_host", 0, "one host's CPU cores (the kway strategy) against numpy.sort, "
             "pandas, dask.dataframe and NumPy's load, sort and save",
             (_py("one_host.py", "--out", "{json}"),), quick=("--quick",)),
    Scenario("cpu_merge", 0, "one CPU merge of two sorted runs, numba against NumPy",
             (_py("merge.py", "--runs", "7"),)),
    Scenario("select", 0, "exact median and quantiles, top k (10^6) of 2^26 float64 against "
             "the local sorts, a full sort, NumPy and dask.array",
             (_py("selection.py", "--out", "{json}"),), quick=("--quick",)),
    Scenario("select_gpu", 1, "exact median and quantiles, top k (10^6) of 16 GiB float32 in 8 "
             "persisted CuPy chunks against the local sorts, a full sort and dask.array",
             (_py("selection.py", "--gpu", "--gib", "16", "--dtype", "float32", "--chunks",
                  "8", "--out", "{json}"),), quick=("--gib", "1")),
    Scenario("larger_than_ram", 0, "distsort sort on a float32 .npy of 1.25x this machine's "
             "memory (through the disk: runs, one k-way merge) against a dd copy of it",
             (_py("larger_than_ram.py", "--out", "{json}"),), quick=("--quick",)),
    Scenario("local_sort", 1, "GPU local sort, 2^16..2^30, against cupy.sort, cupy.lexsort "
             "and a one-launch-per-step bitonic sort",
             (_py("local_sort.py", "--out", "{out}"),), quick=("--quick",)),
    Scenario("local_sort_largest", 1, "the largest in-place sort: HUGE_GB of uint32 on one GPU "
             "(--param huge_gb=N to fit the GPU's memory)",
             (_py("local_sort.py", "--quick", "--huge-gb", "{huge_gb}", "--out", "{out}"),),
             params={"huge_gb": "120"}),
    Scenario("local_sort_variants", 1, "the target sorts (2^28) under other block shapes",
             (_py("local_sort.py", "--quick", "--variants", "--out", "{out}"),)),
    Scenario("local_sort_passes", 1, "the time of every pass of the three target sorts (2^28)",
             tuple(_py("pass_profile.py", "--dtype", *spec.split(), "--json",
                       f"{{out}}/local_sort_passes_{name}_{{device}}_{{date}}.json")
                   for name, spec in (("uint32", "uint32"), ("float64", "float64"),
                                      ("uint32+uint32", "uint32 --values uint32"))),
             quick=("--n", str(2**24))),
    Scenario("local_sort_overlap", 1, "each pass's global traffic and shared-memory phases "
             "timed apart (how much they overlap)",
             (_py("overlap_probe.py", "--json", "{json}"),), quick=("--n", str(2**24))),
    Scenario("gpu_merge", 1, "one GPU merge of two sorted runs: read in place against copy, "
             "then merge", (_py("gpu_merge.py", "--out", "{out}"),)),
    Scenario("distributed_sort_1gpu", 1, "the distributed sort on one dask-cuda worker (the "
             "weak-scaling reference), and rechunk + cupy.sort",
             (_dist("--gpus", "1", "--sizes", "2GiB", "8GiB", "--one-chunk", "--local", "auto",
                    "bitonic", "--out", "{json}"),),
             quick=("--sizes", "1GiB")),
    Scenario("distributed_sort", 2, "the distributed sort on two GPUs: time per round, bytes "
             "moved, against its floor", (_dist("--gpus", "2", "--sizes", "4GiB", "16GiB",
                                                "--out", "{json}"),), quick=("--sizes", "2GiB")),
    Scenario("distributed_sort_large", 2, "32 GiB on one GPU and 64 GiB on two, 4 chunks per "
             "GPU, dask-cuda's spilling off (about 100 GB per GPU)",
             tuple(_dist("--gpus", g, "--sizes", size, "--chunks-per-gpu", "4",
                         "--max-bytes-per-gpu", "32GiB", "--device-memory-limit", "0",
                         "--out", f"{{out}}/distributed_sort_large_{g}gpu_{{device}}_{{date}}.json")
                   for g, size in (("1", "32GiB"), ("2", "64GiB")))),
    Scenario("largest_sort", 2, "the largest array sorted on two GPUs (--param largest=160GB)",
             (_dist("--gpus", "2", "--largest", "{largest}", "--dtypes", "uint32",
                    "--chunks-per-gpu", "16", "--device-memory-limit", "0.9", "--out", "{json}"),),
             params={"largest": "160GB"}),
    Scenario("exchange", 2, "4 GiB on two GPUs with the crossing parts through CUDA IPC or "
             "sent as data", (_dist("--gpus", "2", "--sizes", "4GiB", "--runs", "5",
                                    "--exchange", "ipc", "comm", "--out", "{json}"),)),
    Scenario("transfer", 2, "Dask worker-to-worker transfers of CuPy arrays, against "
             "cudaMemcpyPeer", (_py("transfer.py", "--out", "{out}"),)),
    Scenario("one_gpu", 1, "one GPU as users meet it: sort/argsort/sort_by_key of CuPy arrays "
             "against CuPy, persisted Dask arrays (16 GiB in 8/32/128 chunks, 32 GiB in 16) "
             "against rechunk + cupy.sort, two workers sharing the GPU, and 100 GB in 50 chunks",
             (_py("one_gpu.py", "--parts", "dask", "shared", "array", "--out", "{json}"),
              _py("one_gpu.py", "--parts", "big", "--runs", "1", "--out", "{json}")),
             quick=("--quick",)),
    Scenario("gpu_tests", 1, "every GPU test (tests needing more GPUs than present skip)",
             (_pytest("-m", "gpu", "tests/"),)),
    Scenario("out_of_core", 1, "16 GiB with a 4 GB device budget from host memory (float32, "
             "uint64, uint32+uint32) against the PCIe floor, and from CuPy chunks dask-cuda "
             "spilled", (_py("out_of_core.py", "--host-input", "--dtypes", "float32", "uint64",
                             "uint32+uint32"),
                         _py("out_of_core.py", "--dtypes", "float32"))),
    Scenario("out_of_core_2gpu", 2, "32 GiB on two GPUs with a 4 GB budget each, from host "
             "memory", (_py("out_of_core.py", "--gpus", "2", "--size", "32GiB", "--chunks",
                            "32", "--host-input"),)),
    Scenario("out_of_core_test", 1, "the 32 GiB out-of-core test on one GPU (spills to host)",
             (_pytest("-s", "tests/test_distributed_gpu.py::test_out_of_core_one_gpu_spills"),),
             env={"DISTSORT_BIG": "1"}),
)
BY_NAME = {s.name: s for s in SCENARIOS}


def device_label(names, gpus):
    """Short device name for file names: ``gpus`` GPUs of ``names`` (nvidia-smi's), or
    the CPU when ``gpus`` is 0.

    >>> device_label(["NVIDIA H200", "NVIDIA H200"], 2), device_label(["NVIDIA H100 80GB HBM3"], 1)
    ('2xH200', 'H100-80GB-HBM3')
    >>> device_label([], 0) == f"cpu-{os.cpu_count()}cores"
    True
    """
    if gpus == 0:
        return f"cpu-{os.cpu_count()}cores"
    short = names[0].removeprefix("NVIDIA ").replace(" ", "-")
    return short if gpus == 1 else f"{gpus}x{short}"


def command_lines(scenario, out, device, date, params=(), quick=False, python=sys.executable):
    """The argument lists ``scenario`` runs, placeholders filled in (pure: runs nothing).

    >>> cmds = command_lines(BY_NAME["largest_sort"], "o", "2xH200", "2026-11-22",
    ...                      {"largest": "60GB"}, python="py")
    >>> " ".join(cmds[0][:2]), cmds[0][cmds[0].index("--largest") + 1], cmds[0][-1]
    ('py benchmarks/distributed_sort.py', '60GB', 'o/largest_sort_2xH200_2026-11-22.json')
    """
    values = {**scenario.params, **dict(params), "python": python, "out": str(out),
              "device": device, "date": date, "json": f"{out}/{scenario.name}_{device}_{date}.json"}
    lines = []
    for command in scenario.commands:
        line = [part.format(**values) for part in command]
        if quick and command[1].startswith("benchmarks/"):
            line += scenario.quick
        lines.append(line)
    return lines


def gpu_names():
    """The names of the GPUs ``nvidia-smi`` lists (empty without one)."""
    if not shutil.which("nvidia-smi"):
        return []
    done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                          capture_output=True, text=True, check=False)
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def run_scenario(scenario, out, names, args):
    """Run every command of ``scenario``, output to the terminal and OUT/NAME.log;
    True when all succeeded."""
    device = device_label(names, min(scenario.gpus, len(names)) if scenario.gpus else 0)
    date = _dt.date.today().isoformat()
    env = {**os.environ, **scenario.env,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    ok = True
    with open(out / f"{scenario.name}.log", "a") as log:
        for line in command_lines(scenario, out, device, date, args.param, args.quick):
            print("$ " + " ".join(line), flush=True)
            log.write("$ " + " ".join(line) + "\n")
            log.flush()
            ok &= _tee(line, env, log) == 0
    return ok


def _tee(line, env, log):
    with subprocess.Popen(line, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as proc:
        for text in proc.stdout:
            sys.stdout.write(text)
            log.write(text)
    return proc.returncode


def parse_param(text):
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument("--scenario", nargs="+", default=[], choices=sorted(BY_NAME), metavar="NAME")
    p.add_argument("--all", action="store_true", help="every scenario the machine's GPUs allow")
    p.add_argument("--out", type=Path, default=Path("bench-out"), help="folder for logs and JSON")
    p.add_argument("--param", type=parse_param, action="append", default=[], metavar="KEY=VALUE",
                   help="fill {KEY} in the scenarios' commands (e.g. huge_gb=60)")
    p.add_argument("--quick", action="store_true", help="the smallest sizes (smoke test)")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    return p.parse_args(argv)


def list_scenarios():
    for s in SCENARIOS:
        print(f"{s.name:24} {s.gpus} GPU{'s' if s.gpus != 1 else ' '}  {s.about}")


def main(argv=None):
    args = parse_args(argv)
    if args.list or not (args.scenario or args.all):
        list_scenarios()
        return 0
    names = gpu_names()
    chosen = [BY_NAME[n] for n in args.scenario] or [
        s for s in SCENARIOS if args.dry_run or s.gpus <= len(names)]
    args.out.mkdir(parents=True, exist_ok=True)
    failed = []
    for s in chosen:
        print(f"=== {s.name} ({s.about})", flush=True)
        if args.dry_run:
            device = device_label(names or ["GPU"], s.gpus) if s.gpus else device_label([], 0)
            for line in command_lines(s, args.out, device, _dt.date.today().isoformat(),
                                      args.param, args.quick):
                print("$ " + " ".join(line))
        elif s.gpus > len(names):
            print(f"skipped: needs {s.gpus} GPU(s), {len(names)} found", flush=True)
        elif not run_scenario(s, args.out, names, args):
            failed.append(s.name)
    print(f"=== failed: {' '.join(failed)}" if failed else "=== done", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
