"""The repository holds no history: every benchmark result is cited by the documentation,
and nothing cites a result or a page that is not there.

* Each file of ``benchmarks/results/`` (but its ``README.md``) is cited, as
  ``benchmarks/results/NAME``, by README.md or a page of ``docs/``.
* Every ``results/NAME`` written anywhere in the repository names a file of
  ``benchmarks/results/``, and so does every dated result name (``..._2026-11-22.json``)
  in README.md and ``docs/``.
* Every ``NAME.md`` that README.md and ``docs/`` name (linked or in backticks) exists.
"""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOCS = ROOT / "docs"
#: Suffixes of the files read for citations.
TEXT = {".md", ".rst", ".py", ".sh", ".toml", ".yaml", ".yml", ".txt", ".cfg", ".json",
        ".ipynb", ".sbatch", ""}
#: Directories never read: build outputs, environments, caches.
SKIP = re.compile(r"^(\..*|_build|build|dist|__pycache__|node_modules|.*\.egg-info)$")
EXT = r"\.(?:json|log|png|csv|txt|html)"
#: A path into the results directory, as any file writes it.
RESULT_PATH = re.compile(rf"(?<![\w/])(?:benchmarks/)?results/([\w.+-]+?{EXT})(?![\w.])")
#: A result's name by itself (scenario, device, date): how README and docs cite them.
DATED_NAME = re.compile(rf"(?<![\w.+-])[A-Za-z][\w.+-]*_20\d\d-\d\d-\d\d[\w+-]*{EXT}(?![\w.])")
MD_NAME = re.compile(r"(?<![\w/.-])([\w./-]+\.md)\b")


def text_files(root=ROOT):
    for path in sorted(root.iterdir()):
        if SKIP.match(path.name):
            continue
        if path.is_dir():
            yield from text_files(path)
        elif path.suffix in TEXT and path.stat().st_size < 2**22:
            yield path


def user_pages():
    """README.md and the pages of docs/ (what users read)."""
    return [ROOT / "README.md"] + sorted(p for p in DOCS.rglob("*") if p.suffix in (".md", ".rst")
                                         and not SKIP.match(p.parent.name))


def results():
    return sorted(p.name for p in RESULTS.iterdir() if p.name != "README.md")


def test_results_are_there():
    assert results()


@pytest.mark.parametrize("name", results())
def test_every_result_is_cited(name):
    cited = any(f"benchmarks/results/{name}" in p.read_text() for p in user_pages())
    assert cited, (f"benchmarks/results/{name} is cited by neither README.md nor docs/: "
                   "cite it (as benchmarks/results/NAME) or git rm it")


def test_no_file_cites_a_missing_result():
    there = set(results())
    missing = []
    for path in text_files():
        text = path.read_text(errors="replace")
        names = set(RESULT_PATH.findall(text))
        if path in user_pages():
            names |= set(DATED_NAME.findall(text))
        missing += [f"{path.relative_to(ROOT)}: {n}" for n in sorted(names - there)]
    assert not missing, f"cited but not in benchmarks/results/: {missing}"


def test_pages_name_only_pages_that_exist():
    missing = []
    for page in user_pages():
        for name in set(MD_NAME.findall(page.read_text())):
            places = (ROOT / name, page.parent / name, DOCS / name)
            if not any(p.exists() for p in places):
                missing.append(f"{page.relative_to(ROOT)}: {name}")
    assert not missing, f"pages named but not in the repository: {sorted(missing)}"


def test_the_checks_see_citations():
    """The patterns find what they must (a test of the test)."""
    missing = "results" + "/x_2026-1.log"  # written in two pieces: this file cites nothing
    line = f"see `benchmarks/results/local_sort_H200_2026-11-22.json` and {missing}"
    assert RESULT_PATH.findall(line) == ["local_sort_H200_2026-11-22.json", "x_2026-1.log"]
    assert DATED_NAME.findall("| `cli_io_2xH200_2026-11-23_in-process.json` |") == [
        "cli_io_2xH200_2026-11-23_in-process.json"]
    assert MD_NAME.findall("[notes](DESIGN.md), `docs/local_sort.md`") == [
        "DESIGN.md", "docs/local_sort.md"]
