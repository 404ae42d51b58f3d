"""Sphinx configuration of distsort's documentation.

Built offline with warnings as errors (``sphinx-build -W -b html docs docs/_build``):
no intersphinx, no theme fetched at build time.  The example notebooks are rendered by
myst-nb (which also parses the Markdown pages) as they are stored, without outputs: they
are executed by ``tests/test_docs.py``, not here, so the build starts no cluster and
touches no GPU.
"""
import argparse
import os
import re
import sys
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's distsort, installed or not

import distsort  # noqa: E402

project = "distsort"
author = "distsort contributors"
copyright = "2026, distsort contributors"
release = version = distsort.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_nb",  # MyST Markdown pages and the example notebooks
]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
nb_execution_mode = "off"  # rendered as stored; tests/test_docs.py runs them
root_doc = "index"
exclude_patterns = ["_build", "examples/.ipynb_checkpoints"]

html_theme = "alabaster"  # ships with Sphinx: nothing to fetch
html_static_path = []
html_title = f"distsort {release}"

autodoc_member_order = "bysource"
autodoc_mock_imports = ["cupy", "dask_cuda", "rmm", "distributed_ucxx"]
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
myst_heading_anchors = 3


class DistsortHelp(Directive):
    """``.. distsort-help:: [SUBCOMMAND]``: the ``--help`` text of the command line,
    taken from its parser when the docs are built, so it cannot go stale."""

    optional_arguments = 1

    def run(self):
        from distsort.cli.args import build_parser

        os.environ["COLUMNS"] = "88"  # argparse wraps to the terminal width
        parser = build_parser()
        if self.arguments:
            sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
            parser = sub.choices[self.arguments[0]]
        text = parser.format_help()
        return [nodes.literal_block(text, text, language="text")]


#: The index's toctree of design pages; pages not (yet) in the tree are left out of it,
#: so that the build does not fail on a missing page.
INTERNALS = re.compile(r"```\{toctree\}\n:maxdepth: 1\n:caption: Internals\n\n(.*?)```", re.S)


def _present_internals(app, docname, source):
    if docname != "index":
        return

    def keep(m):
        pages = [p for p in m.group(1).split() if (Path(app.srcdir) / f"{p}.md").exists()]
        if not pages:
            return ""
        return m.group(0).replace(m.group(1), "".join(f"{p}\n" for p in pages))

    source[0] = INTERNALS.sub(keep, source[0])


def setup(app):
    app.add_directive("distsort-help", DistsortHelp)
    app.connect("source-read", _present_internals)
    # whether a page exists can change without the index changing: read it every time
    app.connect("env-get-outdated", lambda app, env, added, changed, removed: ["index"])
