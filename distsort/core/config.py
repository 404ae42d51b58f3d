"""distsort's configuration: Dask config values under ``distsort.``.

The defaults live in ``distsort.yaml`` beside this module and are loaded into Dask's
config when it is imported, as dask-cuda and distributed load their own, so that
``dask.config.get("distsort.exchange")`` has a value, and a user's YAML file, a
``DASK_DISTSORT__...`` environment variable or ``dask.config.set`` overrides it.
Every ``distsort.*`` key is read through :func:`get`; ``docs/configuration.md``
lists them.

>>> get("exchange")
'auto'
>>> import dask
>>> with dask.config.set({"distsort.group": 1}):
...     get("group")
1
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import dask.config
import yaml

#: The file of defaults, shipped with the package.
DEFAULTS_FILE = Path(__file__).with_name("distsort.yaml")

with DEFAULTS_FILE.open() as _f:
    #: The defaults, as loaded: ``{"distsort": {key: value}}`` (by libyaml where PyYAML
    #: has it: a tenth of the pure-Python loader's time, on every first call).
    DEFAULTS: dict[str, dict[str, Any]] = yaml.load(
        _f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))

dask.config.update_defaults(DEFAULTS)


def get(key: str) -> Any:
    """The value of ``distsort.<key>`` (its default from ``distsort.yaml`` unless set).

    KeyError for a key that has no default: a misspelt name fails here, at once,
    instead of silently reading a default written at the call site.
    """
    if key not in DEFAULTS["distsort"]:
        raise KeyError(f"no distsort config key {key!r}; known: {sorted(DEFAULTS['distsort'])}")
    # The default again where the key is gone: a ``dask.config.set`` of a distsort key
    # entered before this module was imported removes every distsort key on exit.
    return dask.config.get(f"distsort.{key}", default=DEFAULTS["distsort"][key])


def settings() -> tuple | None:
    """The ``distsort.*`` values in effect as a hashable key (sorted pairs), for caches
    of what is computed from them alone; None where a value is not hashable.

    >>> with dask.config.set({"distsort.group": 1}):
    ...     ("group", 1) in settings()
    True
    """
    values = dask.config.get("distsort", default={})
    try:
        key = tuple(sorted(values.items()))
        hash(key)
    except (TypeError, AttributeError):
        return None
    return key
