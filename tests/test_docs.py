"""The documentation's code runs: every example notebook (docs/examples/*.ipynb) is
executed on the CPU, and every ```python block of the guides (docs/*.md) is run, with
the text a block says it prints compared with what it printed."""
import contextlib
import io
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
NOTEBOOKS = sorted((DOCS / "examples").glob("*.ipynb"))
#: A ```python block, optionally followed by "prints" and a ```text block of its output.
BLOCK = re.compile(r"```python\n(.*?)```\n(?:\s*prints\s*\n\s*```text\n(.*?)```)?", re.S)
GUIDES = sorted(p for p in DOCS.glob("*.md") if BLOCK.search(p.read_text()))


def python_blocks(path):
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(path.read_text())]


def test_guides_and_examples_are_there():
    assert {"index.md", "chunks_and_crossing.md"} <= {p.name for p in GUIDES}
    names = {p.stem for p in NOTEBOOKS}
    assert {"dataframe_column", "xarray", "zarr_in_out", "cupy_dask_cuda",
            "dashboard_and_report"} <= names


def test_notebooks_are_rendered_in_the_docs():
    """Every notebook is a page of the built docs (myst-nb, in the examples page's
    toctree), rendered as stored: the build executes none (no cluster, no GPU)."""
    toctree = re.search(r"```\{toctree\}\n(.*?)```", (DOCS / "examples.md").read_text(),
                        re.S).group(1)
    assert {f"examples/{p.stem}" for p in NOTEBOOKS} <= set(toctree.split())
    conf = (DOCS / "conf.py").read_text()
    assert '"myst_nb"' in conf and re.search(r'^nb_execution_mode = "off"', conf, re.M)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_are_stored_without_outputs(path):
    """Outputs hold temporary paths and timings: kept out of the repository."""
    import json
    cells = json.loads(path.read_text())["cells"]
    assert not any(c.get("outputs") or c.get("execution_count") for c in cells)


@pytest.mark.parametrize("path", GUIDES, ids=lambda p: p.name)
def test_guide_blocks_run(path):
    for i, (code, expected) in enumerate(python_blocks(path)):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"{path.name}[block {i}]", "exec"), {"__name__": "__docs__"})
        if expected is not None:
            assert out.getvalue() == expected, f"{path.name} block {i} prints otherwise"


#: What a notebook needs beyond distsort's test extra (all of it is in the docs extra).
NEEDS = {"dataframe_column": ["pandas", "dask.dataframe"], "xarray": ["xarray"],
         "zarr_in_out": ["zarr"]}


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, tmp_path):
    for module in ["nbformat", "nbclient", "ipykernel"] + NEEDS.get(path.stem, []):
        pytest.importorskip(module, reason=f"needs {module}: pip install -e '.[docs]' "
                                           "(CI runs the notebooks after installing it)")
    import nbclient
    import nbformat
    book = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(book, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError, with the cell and traceback, on failure
    assert all(c.get("outputs") is not None for c in book.cells if c.cell_type == "code")
