"""Sphinx configuration of distsort's documentation.

Built offline with warnings as errors (``sphinx-build -W -b html docs docs/_build``):
no intersphinx, no theme or notebook renderer fetched at build time.  The example
notebooks are executed by ``tests/test_docs.py``, not here.
"""
import argparse
import os
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
    "myst_parser",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "examples/.ipynb_checkpoints"]
# The index lists the local-sort design page by a glob, so the build passes with or
# without it; an empty glob is not an error.
suppress_warnings = ["toc.empty_glob"]

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


def setup(app):
    app.add_directive("distsort-help", DistsortHelp)
