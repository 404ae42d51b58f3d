"""Every code block of README.md runs.

* ```python blocks run in order in one namespace, as a reader would run them in one
  session; blocks that need a GPU (they use CuPy or a CUDA cluster) are skipped without one.
* Shell commands (```bash blocks and indented blocks) are run or skipped one by one, each
  skip with its reason.  ``distsort sort`` commands run in-process on the tests' loopback
  cluster: a ``--scheduler-file`` becomes its ``--scheduler-address``, the options of a
  new local cluster (``--workers``, ``--memory-limit``, ``--spill-dir``) are dropped, the
  input files are made of fresh random numbers in a temporary directory, and the outputs
  are compared with NumPy's element for element.  A command no rule knows fails the test,
  so a new README command must be classified here.
"""
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from backends import GPU
from distsort import cli

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()

FENCED = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
#: Local-cluster options that a run on the tests' cluster drops, with their argument.
LOCAL_ONLY = ("--workers", "--memory-limit", "--spill-dir")
#: Above this many bytes a README demo is not run (too slow for the suite on 2 cores).
DEMO_LIMIT = 64 << 20
N = 100_000  # elements of the files the commands read


def fenced_blocks(text):
    return [(m.group(1), m.group(2)) for m in FENCED.finditer(text)]


def indented_blocks(text):
    """Markdown's indented code blocks (4 spaces after a blank line), outside fences."""
    text = FENCED.sub("", text)
    blocks, current, blank_before = [], [], True
    for line in text.splitlines():
        if line.startswith("    ") and (current or blank_before):
            current.append(line[4:])
        else:
            if current:
                blocks.append("\n".join(current))
                current = []
            blank_before = not line.strip()
    if current:
        blocks.append("\n".join(current))
    return blocks


def shell_commands(text):
    blocks = [code for lang, code in fenced_blocks(text) if lang in ("bash", "sh", "shell")]
    blocks += indented_blocks(text)
    commands = []
    for block in blocks:
        for raw in block.splitlines():
            line = re.sub(r"\s+#.*$", "", raw).strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def python_blocks(text):
    return [code for lang, code in fenced_blocks(text) if lang == "python"]


def needs_gpu(code):
    return bool(re.search(r"\bcupy\b|local_cuda_cluster|dask_cuda", code))


def classify(command):  # noqa: PLR0911 - one return per kind of command
    """``None`` to run the command, or the reason it is not run here."""
    words = shlex.split(command)
    if "sphinx" in command:
        return "installs the docs extra and builds the docs: .ci/run does this after the tests"
    if words[:3] == ["python", "-m", "pytest"]:
        return "runs the test suite, which this test is part of"
    if "pip install" in command or "venv" in words:
        return ("creates a virtual environment and installs distsort: .ci/run does exactly "
                "this on a fresh clone (test_ci_runs_the_readme_test_command)")
    if words[0] == "git":
        return "clones the repository (needs the network): these tests run in the clone"
    if words[0] == "sbatch":
        return "needs a Slurm cluster"
    if words[0].startswith("kubectl"):
        return "needs a Kubernetes cluster"
    if words[0].endswith("cluster.sh"):
        return "starts a scheduler and workers in the background: tests/test_deploy.py runs it"
    if words[:2] == ["distsort", "sort"]:
        return None
    if words[:2] == ["distsort", "demo"]:
        from distsort.cli.sizes import parse_bytes_arg
        size = words[words.index("--size") + 1] if "--size" in words else "256MiB"
        if parse_bytes_arg(size) > DEMO_LIMIT:
            return (f"a demo of {size} of keys is too large for the test suite on a 2-core "
                    "CPU; tests/test_cli.py runs the demo on small sizes")
        return None
    if words[:2] in (["python", "benchmarks/suite.py"], ["bash", "benchmarks/remote.sh"]):
        return ("runs benchmark scenarios (GPU ones, or over ssh); "
                "tests/test_benchmark_suite.py checks every scenario's commands and options")
    if words[:2] == ["distsort", "bench"]:
        return ("runs every benchmark scenario (minutes); tests/test_cli.py runs the command "
                "on one small scenario")
    raise AssertionError(f"README command not classified in tests/test_readme.py: {command}")


def test_readme_has_blocks():
    assert python_blocks(README)
    assert any(c.startswith("distsort sort") for c in shell_commands(README))


def test_ci_runs_the_readme_test_command():
    """The command README gives for the tests is the one CI runs, word for word."""
    ci = (ROOT / ".ci" / "run").read_text()
    tests = [c for c in shell_commands(README) if c.endswith("python -m pytest -q")]
    assert tests, "README must give the test command"
    assert all(c in ci for c in tests)


@pytest.mark.slow
def test_python_blocks_run():
    namespace = {"__name__": "__readme__"}
    skipped = 0
    for i, code in enumerate(python_blocks(README)):
        if needs_gpu(code) and not GPU:
            skipped += 1
            continue
        exec(compile(code, f"README.md[python block {i}]", "exec"), namespace)
    if skipped:
        pytest.skip(f"{skipped} README block(s) need a GPU")


def make_input(path, rng, dtype):
    x = rng.standard_normal(N).astype(dtype)
    if path.suffix == ".zarr":
        import zarr
        z = zarr.create_array(str(path), shape=x.shape, chunks=(N // 4,), dtype=x.dtype)
        z[:] = x
    else:
        np.save(path, x)
    return x


def load(path):
    if Path(path).suffix == ".zarr":
        import zarr
        return zarr.open_array(str(path), mode="r")[:]
    return np.load(path)


def on_test_cluster(words, address, tmp_path):
    """The command's arguments for a run on the tests' cluster (see the module docstring)."""
    argv, skip = [], False
    for w in words[1:]:
        if skip:
            skip = False
            continue
        if w in LOCAL_ONLY or w == "--scheduler-file":
            skip = True
            continue
        argv.append(str(tmp_path / w.lstrip("/")) if w.startswith("/") else w)
    return argv + ["--scheduler-address", address, "--no-progress"]


@pytest.mark.parametrize("command", shell_commands(README))
def test_shell_command(command, tmp_path, monkeypatch, capsys, request):
    reason = classify(command)
    if reason:
        pytest.skip(reason)
    cluster_client = request.getfixturevalue("cluster_client")  # only for commands that run
    monkeypatch.chdir(tmp_path)
    words = shlex.split(command)
    argv = on_test_cluster(words, cluster_client.scheduler.address, tmp_path)
    rng = np.random.default_rng()
    if words[1] == "demo":
        assert cli.main(argv) == 0, capsys.readouterr()
        return
    source, target = Path(argv[1]), Path(argv[2])
    keys = make_input(source, rng, np.float32)
    values = None
    if "--values" in argv:
        values_path = Path(argv[argv.index("--values") + 1])
        values = rng.integers(-1000, 1000, N).astype(np.int32)
        np.save(values_path, values)
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    order = (np.lexsort((values, keys)) if values is not None
             else np.argsort(keys, kind="stable"))
    if "--descending" in argv:  # exactly the reverse of the ascending result
        order = order[::-1]
    expected = order if "--argsort" in argv else keys[order]
    assert (load(target) == expected).all()
    if values is not None:
        values_out = argv[argv.index("--values-output") + 1]
        assert (load(values_out) == values[order]).all()
    if "--report" in argv:
        report = Path(argv[argv.index("--report") + 1])
        assert report.stat().st_size > 0


def conftest_table(name):
    """``SLOW`` or ``QUICK`` of tests/conftest.py, read without importing it."""
    import ast
    tree = ast.parse((ROOT / "tests" / "conftest.py").read_text())
    return next(ast.literal_eval(n.value) for n in tree.body
                if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == name)


def test_marks_name_real_tests():
    """README's quick tier (-m quick) and the tests -m "not slow" leaves out are named in
    conftest's QUICK and SLOW: every name there must still be a test, or a renamed test
    would silently leave the tier (or run again among the quick ones)."""
    for table in ("SLOW", "QUICK"):
        for module, names in conftest_table(table).items():
            source = (ROOT / "tests" / module).read_text()
            for name in names or ():
                assert re.search(rf"^def {name}\(", source, re.M), f"{table} {module}: no {name}"


def floors_touched(quick):
    """The floors of docs/architecture.md whose modules the test modules of ``quick``
    import (``tests/test_layers.py`` reads the floors)."""
    import ast

    from test_layers import floor_of, floors, modules
    table, known = floors(), modules()
    touched = set()
    for test_module in quick:
        for node in ast.walk(ast.parse((ROOT / "tests" / test_module).read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                targets = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            else:
                continue
            for target in targets:
                module = target
                while module and module not in known:  # ``from m import name``: m
                    module = module.rpartition(".")[0]
                if module:
                    touched.add(table[floor_of(module, table)][0])
    return touched


def test_quick_tier_touches_every_floor():
    from test_layers import floors
    assert floors_touched({"test_order.py": None}) == {"base"}  # the check sees imports
    # the checks of the repository itself (this module, the floors') run no floor's code
    quick = set(conftest_table("QUICK")) - {"test_readme.py", "test_layers.py"}
    missing = {f for f, _ in floors()} - floors_touched(quick)
    assert not missing, f"the quick tier (tests/conftest.py QUICK) tests no module of {missing}"
