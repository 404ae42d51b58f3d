"""The benchmark suite's scenarios (benchmarks/suite.py): planned, not run."""
import doctest
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


@pytest.fixture(scope="module")
def suite():
    spec = importlib.util.spec_from_file_location("bench_suite", BENCH / "suite.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def test_doctests(suite):
    assert doctest.testmod(suite).failed == 0


def test_names_unique_and_listed(suite, capsys):
    names = [s.name for s in suite.SCENARIOS]
    assert len(names) == len(set(names))
    assert suite.main(["--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == names


def flags_of(script):
    """The options a benchmark script accepts: its own and, if it uses the driver's
    parser, the driver's."""
    text = script.read_text()
    if "from driver import" in text:
        text += (BENCH / "driver.py").read_text()
    return set(re.findall(r"add_argument\(\s*\"(--[a-z0-9-]+)\"", text))


@pytest.mark.parametrize("quick", [False, True])
def test_commands_name_existing_scripts_and_options(suite, quick, tmp_path):
    for s in suite.SCENARIOS:
        device = suite.device_label(["NVIDIA H200"] * 2, s.gpus)
        lines = suite.command_lines(s, tmp_path, device, "2026-11-22", quick=quick,
                                    python="py")
        assert lines, s.name
        for line in lines:
            assert line[0] == "py" and not any("{" in part for part in line), line
            if line[1] == "-m":
                assert line[2] == "pytest"
                continue
            script = ROOT / line[1]
            assert script.is_file(), line
            options = {part for part in line[2:] if part.startswith("--")}
            assert options <= flags_of(script), (s.name, options - flags_of(script))


def test_json_named_by_scenario_device_date(suite, tmp_path):
    for s in suite.SCENARIOS:
        lines = suite.command_lines(s, tmp_path, "2xH200", "2026-11-22", python="py")
        for path in (p for line in lines for p in line if p.endswith(".json")):
            name = Path(path).name
            assert name.startswith(s.name) and name.endswith("_2xH200_2026-11-22.json"), path


def test_param_overrides_default(suite):
    s = suite.BY_NAME["local_sort_largest"]
    (line,) = suite.command_lines(s, "o", "H200", "d", [("huge_gb", "7")], python="py")
    assert line[line.index("--huge-gb") + 1] == "7"
    (line,) = suite.command_lines(s, "o", "H200", "d", python="py")
    assert line[line.index("--huge-gb") + 1] == "120"


def test_bad_param_is_a_usage_error(suite):
    with pytest.raises(SystemExit):
        suite.parse_args(["--scenario", "cpu_sort", "--param", "huge_gb"])
    with pytest.raises(SystemExit):
        suite.parse_args(["--scenario", "no_such_scenario"])


def test_dry_run_runs_nothing(suite, tmp_path, capsys):
    assert suite.main(["--scenario", "cpu_sort", "local_sort", "--dry-run",
                       "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "benchmarks/cpu_sort.py" in out and "benchmarks/local_sort.py" in out
    assert not any((tmp_path / "o").iterdir())


def test_skips_what_the_machine_lacks(suite, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(suite, "gpu_names", lambda: [])
    assert suite.main(["--scenario", "distributed_sort", "--out", str(tmp_path)]) == 0
    assert "skipped: needs 2 GPU(s), 0 found" in capsys.readouterr().out
