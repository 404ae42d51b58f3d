"""What a sort is asked to do: the :class:`SortOptions` of a plan, read once.

The ``distsort.*`` Dask config values and a :func:`planning` block's options are read
here and nowhere else, and every option is checked here (:func:`check_options`), so a
wrong value fails with one message wherever it is given.

>>> opts = sort_options(gpu=False, value_bytes=0, positions=False, local="auto",
...                     dtype=np.dtype("f8"))
>>> opts.strategy, opts.exchange, opts.local
('auto', 'auto', 'auto')
>>> with planning(strategy="network") as plans:
...     sort_options(False, 0, False, "auto", np.dtype("f8")).strategy
'network'
"""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from distsort.core import config
from distsort.plan.localsort import LOCAL_SORTS, sorts_in_place

__all__ = ["SortOptions", "STRATEGIES", "MERGES", "EXCHANGES", "PLACEMENTS", "LOCAL_SORTS",
           "PLAN_OPTIONS", "planning", "planning_block", "sort_options", "check_options",
           "check_local", "exchange", "writes_behind"]

#: Values of ``SortPlan.strategy`` (and of the Dask config ``distsort.strategy``,
#: with ``"auto"``).
STRATEGIES = ("one-device", "network", "out-of-core", "kway", "exchange")
#: Values of ``distsort.out-of-core-merge``.
MERGES = ("auto", "kway", "network")
#: Values of ``distsort.exchange``: how crossing parts travel between GPUs.
EXCHANGES = ("auto", "ipc", "comm")
#: Values of ``distsort.placement``: network positions by where chunks live, or in order.
PLACEMENTS = ("auto", "identity")


class SortOptions(NamedTuple):
    """What the caller asks for, configuration included (:func:`sort_options`).

    ``value_bytes``: bytes of a value riding with each key (8 for argsort's
    positions, 0 for keys alone).  ``local``: the local sort asked for (``local=``).
    ``in_place``: keys alone whose radix sort takes one buffer beside them
    (``distsort.plan.localsort.sorts_in_place``).  The rest are the Dask config values
    ``distsort.strategy``, ``distsort.exchange``, ``distsort.placement``,
    ``distsort.group``, ``distsort.out-of-core-engine``, ``distsort.out-of-core-merge``
    (``merge``) and ``distsort.device-memory-limit`` (bytes, None: unset).
    ``stable``: values whose equal keys keep their input order (``sort_by_key(...,
    stable=True)``); ``here``: the input is a plain array sorted in this process.
    """

    gpu: bool = False
    value_bytes: int = 0
    positions: bool = False
    local: str = "auto"
    strategy: str = "auto"
    exchange: str = "auto"
    placement: str = "auto"
    group: str | int = "auto"
    engine: str = "auto"
    device_memory_limit: int | None = None
    in_place: bool = False
    merge: str = "auto"
    stable: bool = False
    here: bool = False


#: The fields of :class:`SortOptions` that the configuration sets, and a
#: :func:`planning` block may set instead.
PLAN_OPTIONS = ("strategy", "exchange", "placement", "group", "engine", "device_memory_limit",
                "merge")
#: The :func:`planning` block the current thread is in: ``(options, plans)``, or None.
_PLANNING: contextvars.ContextVar = contextvars.ContextVar("distsort_planning", default=None)


@contextlib.contextmanager
def planning(**options: Any) -> Iterator[list]:
    """Within the block, plan the 1-D sorts with ``options`` and collect their plans.

    ``options`` are fields of :class:`SortOptions` (``strategy``, ``exchange``,
    ``placement``, ``group``, ``engine``, ``device_memory_limit``, ``merge``): they
    take the place of the Dask config values ``distsort.*`` for the sorts built in the
    block.  The list yielded receives the :class:`~distsort.plan.sortplan.SortPlan` of
    each sort, in order, as the graph is built: what the sort will do, read from the
    plan it runs (the ``distsort`` command's summary reads it there).

    >>> import dask.array as da, numpy as np, distsort
    >>> x = da.from_array(np.arange(100.0)[::-1], chunks=10)
    >>> with planning(device_memory_limit=400, engine="cpu") as plans:
    ...     s = distsort.sort(x)
    >>> plans[0].strategy, plans[0].out_of_core.budget
    ('out-of-core', 400)
    >>> bool((s.compute() == np.arange(100.0)).all())
    True
    """
    unknown = sorted(set(options) - set(PLAN_OPTIONS))
    if unknown:
        raise TypeError(f"planning() takes the plan options {PLAN_OPTIONS}, got {unknown}")
    plans: list = []
    token = _PLANNING.set((options, plans))
    try:
        yield plans
    finally:
        _PLANNING.reset(token)


def planning_block() -> tuple[dict, list] | None:
    """``(options, plans)`` of the :func:`planning` block this thread is in, or None."""
    return _PLANNING.get()


def _device_memory_limit() -> int | None:
    from dask.utils import parse_bytes
    limit = config.get("device-memory-limit")
    if limit in (None, 0, "0"):
        return None
    return parse_bytes(limit) if isinstance(limit, str) else int(limit)


def sort_options(gpu: bool, value_bytes: int, positions: bool, local: str, dtype: np.dtype,  # noqa: PLR0913, PLR0917
                 descending: bool = False, stable: bool = False,
                 here: bool = False) -> SortOptions:
    """The :class:`SortOptions` of a sort of keys of ``dtype``: the arguments, and the
    Dask config values ``distsort.*`` read once here (or a :func:`planning` block's),
    checked (:func:`check_options`)."""
    options = SortOptions(
        gpu=gpu, value_bytes=value_bytes, positions=positions, local=local, stable=stable,
        here=here,
        strategy=config.get("strategy"), exchange=config.get("exchange"),
        placement=config.get("placement"), group=config.get("group"),
        engine=config.get("out-of-core-engine"), device_memory_limit=_device_memory_limit(),
        in_place=bool(gpu and not value_bytes and sorts_in_place(dtype, descending)),
        merge=config.get("out-of-core-merge"))
    block = _PLANNING.get()
    if block is not None:  # a planning() block's options, in place of the config's
        options = options._replace(**block[0])
    check_options(options)
    return options


def check_local(local: str) -> None:
    """ValueError unless ``local`` names a local sort (``local=`` of the public calls)."""
    if local not in LOCAL_SORTS:
        raise ValueError(f"local must be one of {LOCAL_SORTS}, got {local!r}")


def check_options(options: SortOptions) -> None:
    """ValueError for an option that names nothing: the one check of every option.

    >>> check_options(SortOptions(merge="bitonic"))
    Traceback (most recent call last):
    ...
    ValueError: distsort.out-of-core-merge must be one of ('auto', 'kway', 'network'), got 'bitonic'
    """
    check_local(options.local)
    for key, value, allowed in (("out-of-core-merge", options.merge, MERGES),
                                ("strategy", options.strategy, ("auto",) + STRATEGIES),
                                ("exchange", options.exchange, EXCHANGES),
                                ("placement", options.placement, PLACEMENTS)):
        _check(key, value, allowed)


def _check(key: str, value: Any, allowed: tuple[Any, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"distsort.{key} must be one of {allowed}, got {value!r}")


def exchange() -> str:
    """The Dask config value ``distsort.exchange``, checked: how GPU workers exchange
    crossing parts (``distsort.cluster.locality.share_crossing_parts``)."""
    mode = config.get("exchange")
    block = _PLANNING.get()
    if block is not None:
        mode = block[0].get("exchange", mode)
    _check("exchange", mode, EXCHANGES)
    return mode


def writes_behind() -> bool:
    """The Dask config value ``distsort.write-behind``: whether the command starts
    writing each output chunk to the disk at once (``distsort.cli.files``)."""
    return bool(config.get("write-behind"))
