"""``distsort bench``: run the named scenarios of ``benchmarks/suite.py`` (those
docs/benchmarks.md lists), or a script of ``benchmarks/`` by its name."""
import os
import subprocess
import sys
from pathlib import Path

from distsort.cli.errors import OK, RUNTIME_FAILURE, CLIError, print_error

#: Where the scenarios write their results (a directory).
RESULTS_ENV = "DISTSORT_RESULTS"


def benchmarks_dir():
    """``benchmarks/`` of the working directory, else of the source checkout."""
    for root in (Path.cwd(), Path(__file__).resolve().parents[2]):
        if (root / "benchmarks").is_dir():
            return root / "benchmarks"
    return None


def scenarios(bench):
    """Scripts of ``benchmarks/`` that run on their own (helpers like driver.py do not)."""
    return {p.stem: p for p in sorted(bench.glob("*.py"))
            if not p.stem.startswith("_") and "__main__" in p.read_text(errors="replace")}


def suite_scenarios(bench):
    """``{name: (gpus, about)}`` of the named scenarios of ``benchmarks/suite.py`` (the
    names docs/benchmarks.md uses), or None without a suite.  The suite's module is
    read for its table only; its scenarios run in a process of their own."""
    import importlib.util
    path = bench / "suite.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location("distsort_benchmark_suite", path)
    suite = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = suite  # its dataclasses look their module up there
    spec.loader.exec_module(suite)
    return {s.name: (s.gpus, s.about) for s in suite.SCENARIOS}


def _list(named, scripts):
    if named:
        for name, (gpus, about) in named.items():
            print(f"{name:24} {gpus} GPU{'s' if gpus != 1 else ' '}  {about}")
        print("\nscripts that also run alone: " + " ".join(scripts))
    else:
        print("\n".join(scripts) or "(no scenarios)")


def _default(named, scripts, gpu):
    """Without a GPU only the CPU scenarios can run; with one, all of them."""
    if named:
        return [n for n, (gpus, _) in named.items() if gpus == 0 or gpu]
    return [s for s in scripts if s.startswith("cpu") or gpu]


def cmd_bench(args):
    from distsort.cluster import gpu_available
    bench = benchmarks_dir()
    if bench is None:
        raise CLIError("no benchmarks/ directory here or in the distsort checkout")
    found = scenarios(bench)
    named = suite_scenarios(bench) or {}
    scripts = [s for s in found if s != "suite"]
    if args.list:
        _list(named, scripts)
        return OK
    names = args.scenarios or _default(named, scripts, gpu_available())
    missing = [s for s in names if s not in named and s not in scripts]
    if missing or not names:
        have = ", ".join(named or scripts) or "none"
        raise CLIError(f"no benchmark scenario {', '.join(missing) or 'cpu_*'} in {bench} "
                       f"(have: {have}; distsort bench --list)")
    out = Path(args.out or Path.cwd()).resolve()
    if not out.is_dir():
        raise CLIError(f"--out {args.out}: not a directory")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(bench.parent),
                                                      env.get("PYTHONPATH")]))
    # The scenarios write their JSON there (benchmarks/driver.py reads it), never
    # into the source checkout.
    env[RESULTS_ENV] = str(out)
    code = OK
    for name in names:
        print(f"== {name} ==", flush=True)
        if name in named:  # a scenario of the suite: its commands, logs and JSON in out
            argv = [str(bench / "suite.py"), "--scenario", name, "--out", str(out)]
        else:
            argv = [str(found[name])]
        rc = subprocess.run([sys.executable, *argv, *args.extra],
                            check=False, cwd=out, env=env).returncode
        if rc:
            print_error(f"benchmark {name} failed with exit status {rc}")
            code = RUNTIME_FAILURE
    return code
