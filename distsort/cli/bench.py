"""``distsort bench``: run the scenario scripts of ``benchmarks/``."""
import os
import subprocess
import sys
from pathlib import Path

from .errors import OK, RUNTIME_FAILURE, CLIError, print_error

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


def cmd_bench(args):
    from ..cluster import gpu_available
    bench = benchmarks_dir()
    if bench is None:
        raise CLIError("no benchmarks/ directory here or in the distsort checkout")
    found = scenarios(bench)
    if args.list:
        print("\n".join(found) or "(no scenarios)")
        return OK
    # Without a GPU only the CPU scenarios can run; with one, all of them.
    names = args.scenarios or [s for s in found if s.startswith("cpu") or gpu_available()]
    missing = [s for s in names if s not in found]
    if missing or not names:
        raise CLIError(f"no benchmark scenario {', '.join(missing) or 'cpu_*'} in {bench} "
                       f"(have: {', '.join(found) or 'none'})")
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
        rc = subprocess.run([sys.executable, str(found[name]), *args.extra],
                            check=False, cwd=out, env=env).returncode
        if rc:
            print_error(f"benchmark {name} failed with exit status {rc}")
            code = RUNTIME_FAILURE
    return code
