"""The ``distsort.*`` configuration: one file of defaults, every key read has one, and
docs/configuration.md lists them all."""
import re
from pathlib import Path

import dask
import pytest

from distsort.core import config

#: The configuration as shipped (``tests/conftest.py`` sets ``distsort.strategy`` elsewhere).
STRATEGY = "auto"
ROOT = Path(__file__).resolve().parents[1]
#: A key read or set anywhere in the package: ``"distsort.<key>"`` or ``config.get("<key>")``.
READ = re.compile(r"""["']distsort\.([a-z][a-z-]*)["']|config\.get\(["']([a-z][a-z-]*)["']\)""")


def keys_in_package():
    found = set()
    for path in (ROOT / "distsort").rglob("*.py"):
        for dotted, plain in READ.findall(path.read_text()):
            found.add(dotted or plain)
    return found - {"config", "yaml"}  # the module distsort.core.config, the file distsort.yaml


def test_defaults_are_loaded_into_dask():
    assert config.DEFAULTS["distsort"]
    for key, value in config.DEFAULTS["distsort"].items():
        assert dask.config.get(f"distsort.{key}") == value
    with dask.config.set({"distsort.group": 4}):
        assert config.get("group") == 4
    dask.config.refresh()  # Dask's own reset keeps distsort's defaults
    assert config.get("exchange") == config.DEFAULTS["distsort"]["exchange"]


def test_every_key_read_has_a_default():
    keys = keys_in_package()
    assert {"exchange", "placement", "group", "device-memory-limit"} <= keys
    assert keys <= set(config.DEFAULTS["distsort"]), keys - set(config.DEFAULTS["distsort"])


def test_a_misspelt_key_fails():
    with pytest.raises(KeyError, match="exchnage"):
        config.get("exchnage")


def test_the_page_lists_every_key_and_variable():
    page = (ROOT / "docs" / "configuration.md").read_text()
    for key, value in config.DEFAULTS["distsort"].items():
        default = {None: "null", True: "true", False: "false"}.get(value, value)
        assert re.search(rf"^\| `distsort\.{key}` \| `{default}` \|", page, re.M), key
    for variable in ("DISTSORT_NUMBA", "DISTSORT_TUNING", "DISTSORT_DEBUG", "DISTSORT_RESULTS"):
        assert f"`{variable}`" in page


def test_defaults_survive_a_set_entered_before_the_import():
    """``dask.config.set`` of a distsort key entered before ``distsort.core.config`` loads its
    defaults removes the whole ``distsort`` section on exit: the defaults still hold."""
    import subprocess
    import sys
    code = ("import dask\n"
            "with dask.config.set({'distsort.group': 1}):\n"
            "    import distsort.core.config\n"
            "c = distsort.core.config\n"
            "print(c.get('device-memory-limit'), c.get('exchange'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split()[1] == "auto", out
