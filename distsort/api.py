"""The public functions: validation, backend choice, and the output arrays."""
from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import uuid
from collections.abc import Iterator
from typing import Any

import dask.array as da
import numpy as np
from dask.base import is_dask_collection, tokenize

try:  # NumPy >= 2
    from numpy.lib.array_utils import normalize_axis_index
except ImportError:  # pragma: no cover
    from numpy.core.multiarray import normalize_axis_index

from distsort.core import config
from distsort.backends.gpu.local_sort import LOCAL_SORTS
from distsort.backends import Order, array_module_name, capabilities, get_backend
from distsort.graph.layers import (Inline, SortGraph, chunk_output_layer, finish_layer, graph_over,
                                   group_prepare, one_chunk, plan_layers, run_output_layer,
                                   sort_chunk)
from distsort.eager import like_input, plain_runs_here
from distsort.inputs import (as_dask, check_flag, chunks_in_memory, chunks_persisted,
                             like_byte_order, native_order, numpy_keywords)
from distsort.core.order import (TIME_KINDS, check_key_dtype, code_dtype, decode, encode,
                                 time_codes, time_from_codes)
from distsort.plan.clusterview import ClusterView
from distsort.plan.sortplan import SortOptions, SortPlan, plan_sort
from distsort.core.taskkeys import HeldChunks
from distsort.core.xp import namespace

__all__ = ["sort", "argsort", "sort_by_key", "planning"]  # tables: distsort.tables

#: What the public functions take: a Dask array, or a NumPy or CuPy array (wrapped).
ArrayLike = Any


#: Libraries whose objects carry labels (an index, coordinates) or are lazy: refused,
#: never converted, so that nothing is computed and no label is silently dropped.
_LABELLED = ("pandas", "xarray", "dask", "dask_expr", "dask_cudf", "cudf", "polars",
             "pyarrow", "modin")


_TABLE_NDIM = 2


def _conversion(x, what):  # noqa: PLR0911 - one return per kind of collection
    """``(conversion, labels lost)``: how to make ``x``, a labelled or lazy collection,
    an array distsort sorts, and what that array does not carry."""
    library = type(x).__module__.split(".")[0]
    lazy = library in ("dask", "dask_expr", "dask_cudf") or is_dask_collection(x)
    if lazy and type(x).__module__.startswith("dask.bag"):
        return (f"dask.array.from_delayed on each of "
                f"{what}.map_partitions(numpy.asarray).to_delayed() (its length given), "
                f"or numpy.asarray({what}.compute())"), None
    if lazy and library == "dask" and not hasattr(type(x), "to_dask_array"):
        # a Delayed, a Bag, ...: a Delayed answers every attribute asked of it
        return f"dask.array.from_delayed(...), or {what}.compute()", None
    table = type(x).__name__ == "DataFrame" or getattr(x, "ndim", 1) == _TABLE_NDIM
    if hasattr(x, "data_vars"):  # xarray.Dataset
        return f'{what}["var"].data', "variable names, dimension names and coordinates"
    if library == "xarray":  # DataArray, Variable
        return f"{what}.data", "dimension names and coordinates"
    if lazy and hasattr(x, "to_dask_array"):  # dask DataFrame, Series or Index
        if table:
            return f'{what}["col"].to_dask_array(lengths=True)', "index labels"
        return f"{what}.to_dask_array(lengths=True)", "index labels"
    if lazy:  # a dask Bag, Delayed, ...: no array form without computing it
        return f"dask.array.from_delayed(...), or {what}.compute()", None
    if table:
        return f'{what}["col"].to_numpy()', "index labels"
    if hasattr(x, "to_cupy"):
        return f"{what}.to_cupy()", "index labels"
    return f"{what}.to_numpy()", "index labels"


def _refuse_collection(x, what):
    """TypeError for a DataFrame, Series, xarray object or other lazy collection.

    Such objects are never passed to ``np.asarray``: for a lazy one that computes
    it on the client, and for any of them the labels would be silently lost.
    """
    kind = type(x)
    lazy = is_dask_collection(x)
    if kind.__module__.split(".")[0] not in _LABELLED and not lazy:
        return
    conversion, lost = _conversion(x, what)
    raise TypeError(
        f"distsort sorts arrays, not {kind.__module__}.{kind.__name__}: convert {what} "
        f"with {conversion}" + (f" (its {lost} are not carried)" if lost else "")
        + ("; nothing was computed" if lazy else ""))


def as_dask_array(x, what="x"):
    """``x`` as a Dask array; NumPy and CuPy arrays are wrapped as one chunk
    (:func:`wrap_plain`), which the plan may cut (``distsort.plan.sortplan``).

    DataFrames, Series, xarray objects and other lazy collections are refused with
    the conversion to use; lists and tuples of numbers are converted.
    """
    if isinstance(x, da.Array):
        array_module_name(x._meta)
        return native_order(x)
    if type(x).__module__.split(".")[0] == "cupy":
        array_module_name(x)
        return wrap_plain(x)
    _refuse_collection(x, what)
    if isinstance(x, np.ndarray) and not isinstance(x, np.memmap):
        array_module_name(x)  # refuses subclasses (masked arrays, matrices) at once
    elif not isinstance(x, np.ndarray):
        x = np.asarray(x)
    check_key_dtype(x.dtype, what)
    # A memory map is cut as it is read (distsort.inputs.as_dask); an array in
    # memory is wrapped whole, unhashed.
    return native_order(as_dask(x) if isinstance(x, np.memmap) else wrap_plain(x))


def wrap_plain(x):
    """A NumPy or CuPy array as a Dask array of one chunk, without hashing or copying
    its data (``dask.array.from_array`` does both: seconds per GiB, see
    ``docs/performance.md``).

    The name is unique to the call (a random UUID), so two wraps never share keys;
    the array is read, never written, when the result is computed.

    >>> w = wrap_plain(np.arange(5))
    >>> w.chunks, w.name.startswith("array-"), w.name == wrap_plain(np.arange(5)).name
    (((5,),), True, False)
    """
    name = "array-" + uuid.uuid4().hex
    return da.Array({(name,) + (0,) * x.ndim: x}, name, tuple((s,) for s in x.shape),
                    meta=x[(slice(0, 0),) * x.ndim], dtype=x.dtype)


def _as_codes(x, descending=False):
    """datetime64/timedelta64 ``x`` as its uint64 order codes, lazily and elementwise
    (NaT last for both orders: ``distsort.core.order.time_codes``, whose ``descending``
    codes sort ascending into the descending order); other arrays as they are."""
    if x.dtype.kind not in TIME_KINDS:
        return x
    return x.map_blocks(time_codes, descending, dtype=np.uint64,
                        name="distsort-timecodes-" + tokenize(x, descending),
                        meta=_module(x._meta).empty((0,) * x.ndim, dtype=np.uint64))


def _from_codes(codes, dtype, descending=False):
    """The inverse of :func:`_as_codes` for an array of ``dtype``."""
    if np.dtype(dtype).kind not in TIME_KINDS:
        return codes
    return codes.map_blocks(time_from_codes, dtype, descending, dtype=dtype,
                            name="distsort-fromtimecodes-" + tokenize(codes, dtype, descending),
                            meta=_module(codes._meta).empty((0,) * codes.ndim, dtype=dtype))


def _code_order(dtype, order):
    """The order in which the codes of keys of ``dtype`` (:func:`_as_codes`) sort: the
    descending order of times is in their codes (NaT last), so they sort ascending."""
    if np.dtype(dtype).kind in TIME_KINDS and order.descending:
        return Order(descending=False, keyed=order.keyed)
    return order


def _check_known_chunks(x, what):
    if any(math.isnan(s) for s in x.shape):  # a sum of the chunks: NaN where one is
        raise ValueError(
            f"{what} has unknown chunk sizes; call {what}.compute_chunk_sizes() "
            "(or persist it) before sorting")


def _module(meta):
    """NumPy or CuPy, for an array or chunk ``meta`` (refusing any other type)."""
    return namespace(meta, strict=True)


#: The fields of :class:`~distsort.plan.sortplan.SortOptions` that the configuration sets,
#: and a :func:`planning` block may set instead.
PLAN_OPTIONS = ("strategy", "exchange", "placement", "group", "engine", "device_memory_limit",
                "merge")
#: The :func:`planning` block the current thread is in: ``(options, plans)``, or None.
_PLANNING: contextvars.ContextVar = contextvars.ContextVar("distsort_planning", default=None)


@contextlib.contextmanager
def planning(**options: Any) -> Iterator[list[SortPlan]]:
    """Within the block, plan the 1-D sorts with ``options`` and collect their plans.

    ``options`` are fields of :class:`~distsort.plan.sortplan.SortOptions` (``strategy``,
    ``exchange``, ``placement``, ``group``, ``engine``, ``device_memory_limit``): they
    take the place of the Dask config values ``distsort.*`` for the sorts built in the
    block.  The list yielded receives the :class:`~distsort.plan.sortplan.SortPlan` of each
    sort, in order, as the graph is built: what the sort will do, read from the
    plan it runs (the ``distsort`` command's summary reads it there).

    >>> import dask.array as da, numpy as np
    >>> x = da.from_array(np.arange(100.0)[::-1], chunks=10)
    >>> with planning(device_memory_limit=400, engine="cpu") as plans:
    ...     s = sort(x)
    >>> plans[0].strategy, plans[0].out_of_core.budget
    ('out-of-core', 400)
    >>> bool((s.compute() == np.arange(100.0)).all())
    True
    """
    unknown = sorted(set(options) - set(PLAN_OPTIONS))
    if unknown:
        raise TypeError(f"planning() takes the plan options {PLAN_OPTIONS}, got {unknown}")
    plans: list[SortPlan] = []
    token = _PLANNING.set((options, plans))
    try:
        yield plans
    finally:
        _PLANNING.reset(token)


def _options(gpu, value_bytes, positions, local, in_place=False):
    """The :class:`~distsort.plan.sortplan.SortOptions` of a sort: the arguments, and the
    Dask config values ``distsort.*`` read once here (or a :func:`planning` block's)."""
    from dask.utils import parse_bytes

    from distsort.cluster.locality import EXCHANGES, PLACEMENTS
    limit = config.get("device-memory-limit")
    limit = None if limit in (None, 0, "0") else (
        parse_bytes(limit) if isinstance(limit, str) else int(limit))
    options = SortOptions(
        gpu=gpu, value_bytes=value_bytes, positions=positions, local=local,
        strategy=config.get("strategy"), exchange=config.get("exchange"),
        placement=config.get("placement"), group=config.get("group"),
        engine=config.get("out-of-core-engine"), device_memory_limit=limit,
        in_place=in_place, merge=config.get("out-of-core-merge"))
    if _PLANNING.get() is not None:  # a planning() block's options, in place of the config's
        options = options._replace(**_PLANNING.get()[0])
    for key, value, allowed in (("exchange", options.exchange, EXCHANGES),
                                ("placement", options.placement, PLACEMENTS)):
        if value not in allowed:
            raise ValueError(f"distsort.{key} must be one of {allowed}, got {value!r}")
    return options


def _plan_1d(keys, values, positions, local, value_bytes=None, descending=False):
    """``(view, plan)`` of a 1-D sort: the cluster read once (``distsort.cluster.view``) and the
    plan (``distsort.plan.sortplan``); ``value_bytes`` where the values take more room than
    their own (``sort_by_key(..., stable=True)``'s positions)."""
    # imports distributed where a client is
    from distsort.cluster.locality import keep_chunks_in_place
    from distsort.cluster.view import read_view
    gpu = array_module_name(keys._meta) == "cupy"
    placed = keep_chunks_in_place()  # on the current distributed client's scheduler, if any
    view = read_view(keys.__dask_keys__(), None if values is None else values.__dask_keys__(),
                     gpu, placed)
    if value_bytes is None:
        value_bytes = 8 if positions else (values.dtype.itemsize if values is not None else 0)
    return view, _plan_chunks(keys.chunks[0], keys.dtype, view, gpu, value_bytes, positions,
                              local, descending)


def _plan_chunks(chunks, dtype, view, gpu, value_bytes, positions, local,  # noqa: PLR0913, PLR0917
                 descending):
    """The plan of a 1-D sort of keys of ``dtype`` in ``chunks`` on ``view`` (the other
    arguments: the fields of its options, as :func:`_plan_1d` and the sorts at once
    have them)."""
    from distsort.backends.gpu.local_sort import sorts_in_place
    in_place = gpu and not value_bytes and sorts_in_place(dtype, descending)
    return plan_sort(chunks, dtype.itemsize, view,
                     _options(gpu, value_bytes, positions, local, in_place))


def _plain_here(*arrays):
    """Whether ``arrays`` are plain 1-D NumPy (or all CuPy) arrays of native byte order
    and no datetime dtype, sorted in this process (``eager.plain_runs_here``): what
    :func:`_sorted_at_once` and :func:`_stable_at_once` sort with no graph."""
    kinds = {type(a) for a in arrays}
    if len(kinds) != 1:
        return False
    (kind,) = kinds
    if not (kind is np.ndarray or kind.__module__ == "cupy" and kind.__name__ == "ndarray"):
        return False
    return (all(a.ndim == 1 and a.dtype.isnative and a.dtype.kind not in TIME_KINDS
                for a in arrays) and plain_runs_here())


def _plan_here(chunks, dtype, gpu, value_bytes, positions, local, descending):  # noqa: PLR0913, PLR0917
    """The plan of a sort at once in this process (arguments as :func:`_plan_chunks`'s):
    memoized by its arguments, this process's facts (``distsort.cluster.view.local_facts``) and
    the ``distsort.*`` config, since a plan is arithmetic on them alone and a call at
    once must cost little more than ``cupy.sort`` of 2^24 elements (0.56 ms on an H200).
    A :func:`planning` block's plans are made afresh, and recorded."""
    from distsort.cluster.view import local_facts
    args = (chunks, dtype, gpu, value_bytes, positions, local, descending, local_facts(gpu))
    planning = _PLANNING.get()
    settings = config.settings() if planning is None else None
    if settings is not None:
        return _plan_local(*args, settings)
    plan = _plan_local.__wrapped__(*args, None)  # or a config value that cannot be a key
    if planning is not None:
        planning[1].append(plan)
    return plan


@functools.lru_cache(maxsize=256)
def _plan_local(chunks, dtype, gpu, value_bytes, positions, local, descending, facts,  # noqa: PLR0913, PLR0917
                settings):
    """:func:`_plan_here`'s plan (``settings``: the config it is read under)."""
    return _plan_chunks(chunks, dtype, ClusterView.local(*facts, 1), gpu, value_bytes,
                        positions, local, descending)


def _sorted_at_once(x, axis, order, local):
    """What :func:`sort` (``order.keyed`` False: the keys) or :func:`argsort` (True: the
    positions) of ``x`` gives, where ``x`` is a plain 1-D NumPy or CuPy array whose plan
    sorts it as one chunk in this process (``distsort.eager.plain_runs_here``):
    the one-chunk task's function (``distsort.graph.layers.sort_chunk``) called here, with no
    graph built.  None elsewhere: the graph runs the sort (``distsort.eager``).

    The graph, its names and Dask arrays cost about 0.4 ms a call on an H200's host,
    two thirds of ``cupy.sort`` of 2^24 float32."""
    if axis not in (None, 0, -1) or not _plain_here(x):
        return None
    check_key_dtype(x.dtype, "x")
    gpu = type(x) is not np.ndarray
    chunks = (x.shape[0],)
    plan = _plan_here(chunks, x.dtype, gpu, 8 if order.keyed else 0, order.keyed, local,
                      order.descending)
    if not one_chunk(plan, chunks, plan.local):
        return None
    return sort_chunk(get_backend(x, plan.share), plan.local, order, int(order.keyed), x,
                      (order, x.dtype))


def _sort_1d(keys, values, order, positions, verify=False, what="sort", local="auto"):
    """Globally sort a 1-D array; returns the output (keys, values) Dask arrays.

    Validate (the callers), plan (:func:`_plan_1d`), build the graph
    (:func:`_sort_planned`)."""
    planned = _plan_1d(keys, values, positions, local, descending=order.descending)
    return _sort_planned(keys, values, order, positions, planned, verify, what)


def _inputs_read(keys, values, plan, view):
    """``(reads, carried)``: what the sort's tasks take for each input array (by name):
    its name, or, where the plan reads the chunks as they are (``pieces``), the chunks
    themselves (``distsort.graph.layers.Inline``: on Dask's local schedulers, chunks in memory)
    or their keys (``distsort.core.taskkeys.HeldChunks``: on a ``distributed`` cluster whose
    scheduler plugin holds them, every chunk a future in the array's own graph, where
    ``view`` located it); and the inputs whose graphs the outputs carry."""
    sources = [keys] + ([values] if values is not None else [])
    if plan.pieces is None:
        return {a.name: a.name for a in sources}, sources
    if view.distributed:
        owners = view.owners + (view.value_owners or ())
        # One chunk is read by its key: its one task (``one_chunk``) depends on it alone.
        if not (view.placed and None not in owners and keys.numblocks[0] > 1
                and all(map(chunks_persisted, sources))):
            return {a.name: a.name for a in sources}, sources
        from distsort.cluster.held import read_held_chunks
        return {a.name: HeldChunks(a.__dask_keys__(), read_held_chunks, keep=a)
                for a in sources}, []
    held = {a.name: chunks_in_memory(a) for a in sources}
    reads = {name: name if c is None else Inline(c) for name, c in held.items()}
    return reads, [a for a in sources if held[a.name] is None]


def _backend_of(plan, meta):
    """The backend of a plan's tasks: out of core, the host runs'; else the chunks'
    (``meta``'s), sharing them where the plan says so."""
    ooc = plan.out_of_core
    if ooc is None:
        return get_backend(meta, plan.share)
    from distsort.backends.outofcore.hostruns import HostRuns
    from distsort.cluster.held import read_held
    return HostRuns(ooc.engine, ooc.plan.segment, ooc.budget, read_held)


def _sort_planned(keys, values, order, positions, planned, verify=False, what="sort"):
    """The output (keys, values) Dask arrays of a 1-D sort planned as ``planned`` (the
    ``(view, plan)`` of :func:`_plan_1d`): the graph (``distsort.graph.layers``).
    ``positions`` with ``values``: equal keys keep their input order (a "one-device"
    plan only, ``sort_by_key(..., stable=True)``)."""
    gpu = array_module_name(keys._meta) == "cupy"
    view, plan = planned
    if _PLANNING.get() is not None:  # the plan this sort runs
        _PLANNING.get()[1].append(plan)
    stable = positions and values is not None
    if stable and not _sorted_as_one(plan):
        raise ValueError("a stable sort with values runs on a plan that sorts every "
                         "chunk as one")
    if plan.rechunk and keys.chunks[0] != plan.chunks:
        keys = keys.rechunk((plan.chunks,))
    if values is not None and values.chunks[0] != keys.chunks[0]:  # read side by side
        values = values.rechunk(keys.chunks)
    ooc = plan.out_of_core
    backend = _backend_of(plan, keys._meta)
    vname = values.name if values is not None else None
    # The plan by its repr, one string: Dask's token walks every piece of it one by one.
    graph = SortGraph(tokenize(keys.name, vname, order, positions, repr(plan)))
    reads, sources = _inputs_read(keys, values, plan, view)
    # One whole chunk into one, keys or argsort's positions: one task per output.
    single = values is None and one_chunk(plan, keys.chunks[0], plan.local)
    kway = ooc is not None and ooc.one_pass
    if kway:  # keys alone: the merged chunks are the output's
        from distsort.graph.outofcore import kway_sort_layers
        sorted_keys = kway_sort_layers(
            graph, keys.name, vname, plan.chunks, backend, order, positions,
            ooc.plan.run_chunks, ooc.stage, ooc.held, like_gpu=gpu,
            name=None if order.keyed else "distsort-sort-" + graph.token,
            perm=ooc.perm if ooc.merge == "exchange" else None)
    elif single:
        sorted_keys = None
    else:
        sorted_keys = plan_layers(graph, plan, reads[keys.name], reads.get(vname),
                                  keys.chunks[0], backend, order, positions)
    chunks = plan.chunks

    def output(name, part, func, args, meta):
        # Each output's graph holds the sort and its own layer, never the other
        # output's: see ``SortGraph.output``.
        out = graph.output()
        if single:
            chunk_output_layer(out, name, reads[keys.name], backend, order, plan.local, part,
                               args)
        elif ooc is None:
            finish_layer(out, name, sorted_keys, func, *args)
        elif kway:
            if name not in out.layers:  # keys alone: the merge's own layer
                from distsort.backends.outofcore.hostruns import pick
                from distsort.graph.outofcore import pick_layer
                pick_layer(out, name, sorted_keys, pick, part)
        else:
            run_output_layer(out, name, sorted_keys, chunks, ooc.plan.run_chunks,
                             backend.output, part, gpu)
        return da.Array(graph_over(sources, out.layers, out.dependencies), name,
                        (chunks,), meta=meta)

    # Keyed chunks may hold packed (key, value) codes: finishing them needs both dtypes.
    value_dtype = values.dtype if values is not None else None
    key_args = (order, keys.dtype) + ((value_dtype,) if value_dtype is not None else ())
    out_keys = output("distsort-sort-" + graph.token, 0,
                      None if ooc else backend.finish_keys, key_args, keys._meta)
    out_values = None
    if order.keyed:
        value_meta = (values._meta if values is not None
                      else _module(keys._meta).empty((0,), dtype=np.int64))
        out_values = output("distsort-sort-values-" + graph.token, 1,
                            None if ooc else backend.finish_values,
                            (order, keys.dtype, value_dtype), value_meta)
    if verify:  # the outputs can only be read once a check of them against the input passed
        from distsort.graph.verify import verified
        return verified(keys, values, out_keys, out_values, order, positions and not stable,
                        what)
    return out_keys, out_values


def _sorted_as_one(plan):
    """Whether ``plan`` sorts every chunk in one task, in input order, with no merge
    after: the one-device plan, or a network whose one group holds every chunk (a
    network of one worker).  A stable sort there needs no position beside the keys
    (``sort_by_key(..., stable=True)``: the backend's ``stable_sort`` in that task).

    >>> from distsort.plan.sortplan import SortPlan
    >>> _sorted_as_one(SortPlan("network", (4, 4), None, (0, 1), 2, 2, False, "auto"))
    True
    >>> _sorted_as_one(SortPlan("network", (4, 4), None, (1, 0), 2, 2, False, "auto"))
    False
    """
    if plan.strategy == "one-device":
        return True
    n = len(plan.chunks)
    return (plan.strategy == "network" and plan.pieces is None and plan.out_of_core is None
            and plan.group > 1 and plan.rounds == 0  # one group task (a chunk alone: none)
            and tuple(plan.perm or range(n)) == tuple(range(n)))


def _check_local(local):
    """ValueError unless ``local`` names a local sort."""
    if local not in LOCAL_SORTS:
        raise ValueError(f"local must be one of {LOCAL_SORTS}, got {local!r}")


def _validate(x, axis, what="x"):
    """Validate ``x`` and ``axis``; returns ``(x, axis)`` with ``x`` flattened for ``axis=None``."""
    x = as_dask_array(x, what)
    check_key_dtype(x.dtype, what)
    _check_known_chunks(x, what)
    if x.size == 0 and x.ndim != 1:  # Dask does not reshape or rechunk these: one chunk
        x = wrap_plain(_module(x._meta).empty(x.shape if axis is not None else (0,),
                                              dtype=x.dtype))
    if axis is None:
        return x.reshape(-1) if x.ndim != 1 else x, 0
    axis = normalize_axis_index(axis, x.ndim)
    if x.ndim > 1 and x.numblocks[axis] > 1:
        raise ValueError(
            f"axis {axis} is split over {x.numblocks[axis]} chunks; distsort sorts an N-D "
            f"array along an axis held in one chunk: rechunk it with "
            f"x.rechunk({{{axis}: -1}}), or sort the flattened array with axis=None")
    return x, axis


def _sort_along(x, axis, order, want, verify=False):
    """Sort the lanes of an N-D array along ``axis`` (held in one chunk), block by block."""
    backend = get_backend(x._meta)
    index = 0 if want == "keys" else 1
    dtype = x.dtype if want == "keys" else np.int64

    def block(b):
        out = backend.sort_blocks(b, None, axis, order, positions=order.keyed)
        if verify:  # in the same task: the block is only returned once checked
            from distsort.graph.verify import check_lanes
            check_lanes(b, out[0], out[1], axis, order, "argsort" if index else "sort")
        return out[index]

    name = f"distsort-{want}-axis{axis}-" + tokenize(x.name, order, axis, want, verify)
    return x.map_blocks(block, dtype=dtype, name=name,
                        meta=_module(x._meta).empty((0,) * x.ndim, dtype=dtype))


def _check_stable(stable, default):
    """``stable`` as a bool; None (NumPy's "not given") means ``default``."""
    if stable is None:
        return default
    if not isinstance(stable, (bool, np.bool_)):  # a typo'd kind string must not pass
        raise TypeError(f"stable must be True, False or None, got {stable!r}")
    return bool(stable)


def _check_flags(descending, verify):
    """TypeError unless ``descending`` and ``verify`` are bools (not ``"yes"``)."""
    check_flag("descending", descending)
    check_flag("verify", verify)


@numpy_keywords
@like_input("x")
def sort(x: ArrayLike, /, axis: int | None = -1, *, descending: bool = False,
         stable: bool | None = None, verify: bool = False, local: str = "auto") -> da.Array:
    """Sort an array; a Dask array of NumPy or CuPy chunks is sorted across chunks.

    Parameters
    ----------
    x : dask.array.Array, numpy.ndarray or cupy.ndarray
        Keys: bool, (u)int8..64, float16/32/64, datetime64 or timedelta64.  NumPy
        and CuPy arrays are wrapped as one chunk, neither hashed nor copied, and
        sorted at once; lists and tuples are converted with ``numpy.asarray``.  DataFrames, Series
        and xarray objects are refused with the conversion to use (TypeError).
    axis : int or None, optional
        Axis to sort along (default: the last).  A 1-D array is sorted globally,
        whatever its chunking.  ``None`` sorts the flattened array.  For an N-D
        array the axis must be held in one chunk.
    descending : bool, optional
        Sort from largest to smallest, NaNs and NaTs still last, as
        ``numpy.sort(x, descending=True)`` (NumPy >= 2.5).
    stable : bool, optional
        ``True``: keys that NumPy calls equal keep their input order, so the
        result is ``x[argsort(x)]`` bit for bit, as ``numpy.sort(x, stable=True)``
        (``-0.0`` and ``+0.0``, NaNs of any sign and payload; float keys then sort
        with their positions, as :func:`argsort` does).  ``None`` or ``False``
        (the default, NumPy's): the faster bit order, the same values, with
        ``-0.0`` before ``+0.0`` and NaNs by their bits (``docs/semantics.md``).
        Other dtypes give the same bits either way.
    verify : bool, optional
        Check on the workers (on the GPU for CuPy chunks), before the result can be
        read, that it is sorted and a permutation of the input (counts and
        order-independent 64-bit checksums: a few elementwise passes over the
        input and the output, no sort).  Raises
        :class:`distsort.VerificationError` when computed if not.
    local : {"auto", "bitonic", "radix"}, optional
        How each GPU sorts its chunks (NumPy chunks ignore it).  ``"auto"``
        (default): CUB's radix sort (``cupy.sort``/``cupy.argsort`` on distsort's
        order codes, so the result is the same) where the worker's device budget
        (dask-cuda's ``device_memory_limit`` less what the worker holds, else the
        free device memory) has room for the extra chunk-sized buffers it needs,
        else the in-place bitonic kernels; ``"bitonic"`` always sorts in place;
        ``"radix"`` always uses the radix sort.

    Returns
    -------
    dask.array.Array, numpy.ndarray or cupy.ndarray
        For a Dask array: lazy, with the same dtype (in native byte order) and
        length and chunks of the same backend; a 1-D result has a regular chunking
        (equal chunks, the last possibly shorter), whatever the input's was.  For a
        NumPy or CuPy array (or a list): an array of its kind, computed at once, as
        ``numpy.sort`` gives (``distsort.eager``; a ``numpy.memmap`` gives a Dask
        array, read in chunks).

    Notes
    -----
    How a 1-D sort runs is planned once (``distsort.plan.sortplan``, ``docs/plan.md``).
    Where all the chunks, a sorted copy and the radix sort's buffers fit the one
    device that sorts them (this process on Dask's local schedulers, or a
    cluster's only worker), they are sorted as one in one task, with no network.
    Otherwise each chunk, or each group of chunks of one worker, is sorted and the
    network of compare-splits merges them; an input of many small chunks is
    coalesced into one chunk per GPU or CPU thread first.  Past the workers'
    device budgets the sort runs out of core.

    NumPy's order: NaNs (any sign and payload) sort last and keep their bits;
    NaT sorts last; both for either order.  The dtype is kept, byte order included.  datetime64 and
    timedelta64 (any unit) are sorted through their int64 view, mapped
    elementwise so that NaT comes last, and come back with their dtype.  Not
    supported: complex, object, string and structured dtypes (TypeError), and
    N-D arrays whose sort axis is split over several chunks (ValueError).  The
    input's chunks are never modified.  ``numpy.sort(dask_array)`` does not
    come here: NumPy computes the whole array and sorts it in memory.

    Examples
    --------
    >>> import dask.array as da, numpy as np, distsort
    >>> x = da.from_array(np.array([3.0, np.nan, -1.0, 2.0, 0.5]), chunks=2)
    >>> distsort.sort(x).compute()
    array([-1. ,  0.5,  2. ,  3. ,  nan])
    >>> distsort.sort(x, descending=True).compute()
    array([ 3. ,  2. ,  0.5, -1. ,  nan])
    >>> distsort.sort(x, verify=True).compute()  # checked on the workers before it is read
    array([-1. ,  0.5,  2. ,  3. ,  nan])
    >>> t = np.array(["2026-03-01", "NaT", "2025-12-24"], dtype="datetime64[D]")
    >>> distsort.sort(da.from_array(t, chunks=2)).compute()
    array(['2025-12-24', '2026-03-01',        'NaT'], dtype='datetime64[D]')
    """
    stable = _check_stable(stable, False)
    _check_flags(descending, verify)
    _check_local(local)
    given = getattr(x, "dtype", None)
    # Floats are the one kind whose keys NumPy calls equal can differ in bits: a stable
    # sort takes them by their positions, as argsort does.
    by_position = stable and given is not None and np.dtype(given).kind == "f"
    order = Order(descending=bool(descending), keyed=by_position)
    if not verify and (out := _sorted_at_once(x, axis, order, local)) is not None:
        return _module(x).take(x.reshape(-1), out) if by_position else out
    x, axis = _validate(x, axis)
    dtype = x.dtype
    order = _code_order(dtype, order)
    x = _as_codes(x, descending)
    if x.ndim == 1 and by_position:
        out = argsort_by_positions(x, order.descending, verify, local, "sort")[0]
    elif x.ndim == 1:
        out = _sort_1d(x, None, order, positions=False, verify=verify, local=local)[0]
    else:
        out = _sort_along(x, axis, order, "keys", verify)
    return _like_given(_from_codes(out, dtype, descending), given)


def _like_given(out, given):
    """The sorted ``out`` in the byte order of the input's dtype ``given``, as NumPy
    returns it (the sorts run in native order: ``distsort.inputs.native_order``)."""
    return out if given is None else like_byte_order(out, given)


@numpy_keywords
@like_input("x")
def argsort(x: ArrayLike, /, axis: int | None = -1, *, descending: bool = False,
            stable: bool | None = True, verify: bool = False, local: str = "auto") -> da.Array:
    """Indices that sort an array, as int64; 1-D arrays are sorted across chunks.

    Equal keys keep their input order, as in ``numpy.argsort(x, kind="stable")``.

    Parameters
    ----------
    x : dask.array.Array, numpy.ndarray or cupy.ndarray
        Keys, as for :func:`sort`.
    axis : int or None, optional
        As for :func:`sort`; with ``None`` the indices are into the flattened array.
    descending : bool, optional
        Largest keys first, NaNs and NaTs still last; equal keys keep their
        original order (as ``numpy.argsort(x, descending=True, stable=True)``,
        NumPy >= 2.5).
    stable : bool, optional
        Accepted for NumPy compatibility: the result is always stable, equal to
        ``numpy.argsort(x, kind="stable")`` element for element.
    verify : bool, optional
        Check on the workers (on the GPU for CuPy chunks), before the result can be
        read, that the keys it points to are sorted and that the (key, index)
        pairs are those of the input (counts and order-independent 64-bit
        checksums).  Raises :class:`distsort.VerificationError` when computed
        if not.
    local : {"auto", "bitonic", "radix"}, optional
        How each GPU sorts its chunks, as for :func:`sort`.

    Returns
    -------
    dask.array.Array, numpy.ndarray or cupy.ndarray
        int64 indices, chunked like :func:`sort`'s result (computed at once for a
        NumPy or CuPy array, as for :func:`sort`).

    Examples
    --------
    >>> import dask.array as da, numpy as np, distsort
    >>> x = da.from_array(np.array([2, 1, 2, 0]), chunks=3)
    >>> distsort.argsort(x).compute()
    array([3, 1, 0, 2])
    >>> distsort.argsort(x, descending=True).compute()
    array([0, 2, 1, 3])
    """
    _check_stable(stable, True)
    _check_flags(descending, verify)
    order = Order(descending=bool(descending), keyed=True)
    _check_local(local)
    if not verify and (out := _sorted_at_once(x, axis, order, local)) is not None:
        return out
    x, axis = _validate(x, axis)
    order = _code_order(x.dtype, order)
    x = _as_codes(x, descending)
    if x.ndim == 1:
        return _sort_1d(x, None, order, positions=True, verify=verify, what="argsort",
                        local=local)[1]
    return _sort_along(x, axis, order, "values", verify)


#: Positions travel as uint32 (packed with keys of up to this many bytes in one
#: 64-bit code on the CPU) where the array has fewer than 2**32 elements.
_NARROW_KEY_BYTES = 4


def argsort_by_positions(keys, descending, verify, local, what):
    """``(sorted keys, permutation)`` of 1-D ``keys`` (order codes or keys distsort
    sorts), equal keys in input order.

    NumPy keys of up to 4 bytes (fewer than 2**32 of them) carry uint32 positions:
    key and position then pack into one 64-bit code that the CPU backend sorts and
    merges as one integer (``distsort.backends.cpu.numpy_backend.keyed_codes``), where int64
    positions make a 12-byte pair that it sorts by permutation
    (``benchmarks/keyed_cpu.py --stable``; the figures: ``docs/performance.md``).
    """
    order = Order(descending=bool(descending), keyed=True)
    n = keys.shape[0]
    if (array_module_name(keys._meta) == "numpy" and n < 2**32
            and keys.dtype.itemsize <= _NARROW_KEY_BYTES):
        positions = da.arange(n, chunks=keys.chunks, dtype=np.uint32)
        return _sort_1d(keys, positions, order, positions=False, verify=verify, what=what,
                        local=local)
    return _sort_1d(keys, None, order, positions=True, verify=verify, what=what, local=local)


#: Bytes of a position beside each value in a stable one-device sort (the planned room).
_POSITION_BYTES = 8

#: On GPUs, positions are packed above values of at most this many bytes
#: (:func:`_pack`): one network, no shuffle.
_PACKED_VALUE_BYTES = 4


def _pack(values, block_info=None):
    """uint64 ``position << 32 | value bits``: ordered by position, the value recoverable.
    The positions are made in the block's own array module (CuPy chunks stay on the GPU)."""
    start = block_info[0]["array-location"][0][0]
    positions = _module(values).arange(start, start + values.size, dtype=np.uint64)
    bits = values.view(f"u{values.dtype.itemsize}").astype(np.uint64)
    return (positions << np.uint64(32)) | bits


#: On the CPU, integer keys and values of at most this many bytes together are packed
#: around their positions into one uint64 (:func:`_pack_stable`): a sort of one integer.
_PACKED_PAIR_BYTES = 4


def _pack_stable(keys, values, descending, block_info=None):
    """uint64 ``key code | position | value bits`` (the code at the top, the value's bits
    at the bottom), sorted: ordered as the keys (``descending`` or not), equal keys by
    position.  The positions ascend in the block, so a stable sort of the keys' bits
    alone sorts the codes (``distsort.backends.cpu.numpy_backend.sort_high``: one move
    per byte of the key), and the network's first sort finds them in order.

    >>> k, v = np.array([2, -1, 2], np.int16), np.array([7, 8, 9], np.uint16)
    >>> p = _pack_stable(k, v, False, [{"array-location": [(0, 3)]}])
    >>> [_unpack_stable(p, part, k.dtype, v.dtype, False).tolist() for part in (0, 1)]
    [[-1, 2, 2], [8, 7, 9]]
    """
    from distsort.backends.cpu.numpy_backend import sort_high
    start = block_info[0]["array-location"][0][0]
    value_bits = 8 * values.dtype.itemsize
    codes = encode(keys, descending=descending).astype(np.uint64)
    codes <<= np.uint64(64 - 8 * keys.dtype.itemsize)
    codes |= np.arange(start, start + keys.size, dtype=np.uint64) << np.uint64(value_bits)
    codes |= values.view(f"u{values.dtype.itemsize}").astype(np.uint64)
    return sort_high(codes, 64 - 8 * keys.dtype.itemsize)


def _unpack_stable(packed, part, key_dtype, value_dtype, descending):
    """The keys (``part`` 0) or the values (1) of :func:`_pack_stable`'s codes."""
    key_dtype, value_dtype = np.dtype(key_dtype), np.dtype(value_dtype)
    if part == 1:
        return packed.astype(f"u{value_dtype.itemsize}").view(value_dtype)
    codes = (packed >> np.uint64(64 - 8 * key_dtype.itemsize)).astype(code_dtype(key_dtype))
    return decode(codes, key_dtype, descending=descending, copy=False)


def _stable_packed(keys, values, descending, verify, local):
    """``stable=True`` of NumPy integer keys and values of :data:`_PACKED_PAIR_BYTES`
    together: one keys-only sort of their packed codes, no positions moved beside them
    and no gather (``benchmarks/keyed_cpu.py --stable``)."""
    if values.chunks != keys.chunks:
        values = values.rechunk(keys.chunks)
    token = tokenize(keys, values, descending)
    packed = da.map_blocks(_pack_stable, keys, values, descending, dtype=np.uint64,
                           name="distsort-pack-" + token)
    out, _ = _sort_1d(packed, None, Order(descending=False), positions=False,
                      verify=verify, what="sort_by_key", local=local)
    return tuple(out.map_blocks(_unpack_stable, part, keys.dtype, values.dtype, descending,
                                dtype=dtype, name=f"distsort-unpack{part}-" + token)
                 for part, dtype in enumerate((keys.dtype, values.dtype)))


def _unpack(packed, dtype):
    dtype = np.dtype(dtype)
    return (packed & np.uint64(0xFFFFFFFF)).astype(f"u{dtype.itemsize}").view(dtype)


def _stable_at_once(keys, values, order, local):
    """``sort_by_key(keys, values, stable=True)`` of plain 1-D arrays of one length, where
    their plan sorts them as one chunk in this process: the one-device tasks' functions
    (``distsort.graph.layers.group_prepare`` of the one chunk, then the outputs' finish)
    called here, with no graph built.  None elsewhere (:func:`_stable_by_key`)."""
    if (local == "bitonic" or not _plain_here(keys, values)
            or keys.shape != values.shape):
        return None
    check_key_dtype(keys.dtype, "keys")
    check_key_dtype(values.dtype, "values")
    gpu = type(keys) is not np.ndarray
    chunks = (keys.shape[0],)
    try:
        plan = _plan_here(chunks, keys.dtype, gpu, values.dtype.itemsize + _POSITION_BYTES,
                          False, local, order.descending)
    except MemoryError:  # the argsort's own plan decides (_stable_by_key)
        return None
    if plan.strategy != "one-device" or len(plan.chunks) != 1:
        return None
    backend = get_backend(keys)
    (run,) = group_prepare(backend, plan.local, order, np.zeros(1, np.int64),
                           np.array([(0, chunks[0])]), chunks, [keys], [values],
                           separate=False)
    dtypes = (order, keys.dtype, values.dtype)
    return backend.finish_keys(run, *dtypes), backend.finish_values(run, *dtypes)


def _stable_by_key(keys, values, order, verify, local="auto"):
    """Position-stable key-value sort of 1-D Dask arrays (``keys`` keys or order
    codes): equal keys keep their input order.  Returns the sorted keys and values.

    Chunks that the plan sorts as one (:func:`_sorted_as_one`: "one-device", or a
    network of one group), without ``verify``: the one task sorts the keys' canonical
    codes with their positions (on a GPU: one stable radix sort of the keys, ``local``
    not ``"bitonic"``) and takes keys and values by them (the backend's
    ``stable_sort``): no argsort output, no gather, no packing.
    Other NumPy integer keys and values of at most 4 bytes together (fewer than 2**32):
    one sort of uint64 codes that hold the key's code, the position and the value's
    bits (:func:`_stable_packed`), nothing to gather.  Other NumPy chunks: the keys are
    sorted with their positions
    (:func:`argsort_by_positions`: uint32 positions packed with keys of up to 4 bytes)
    and the values gathered by them (:func:`distsort.graph.gather.gather`); with
    ``verify`` the argsort is checked (the summaries of a keyed output check equal
    keys ordered by value).  CuPy chunks with values of at most 4 bytes
    (and fewer than 2**32 elements): the values travel through the network packed
    under their positions (8 bytes), so the keyed sort's tie-break by value is one by
    position: one network, no shuffle; wider values: an argsort and a gather.  On the
    CPU, values packed under positions would make a 12-byte pair, which the CPU
    backend merges by codes computed per comparison: slower than the sort by
    positions and gather (``benchmarks/keyed_cpu.py --stable``; the figures:
    ``docs/performance.md``).
    """
    n = keys.shape[0]
    gpu = array_module_name(keys._meta) == "cupy"
    if (not verify and (not gpu or local != "bitonic")
            and "stable" in capabilities(get_backend(keys._meta))):
        # Room for the values and the positions (or their packed codes) beside the keys;
        # where there is none at all (a budget for out-of-core runs of narrower pairs),
        # the argsort's own plan decides.
        planned = None
        with contextlib.suppress(MemoryError):
            planned = _plan_1d(keys, values, False, local,
                               value_bytes=values.dtype.itemsize + _POSITION_BYTES)
        if planned is not None and _sorted_as_one(planned[1]):  # no shuffle, no merge
            return _sort_planned(keys, values, order, True, planned, what="sort_by_key")
    if gpu and values.dtype.itemsize <= _PACKED_VALUE_BYTES and n < 2**32:
        packed = values.map_blocks(_pack, dtype=np.uint64,
                                   meta=_module(values._meta).empty((0,), dtype=np.uint64),
                                   name="distsort-pack-" + tokenize(values))
        out_keys, out_packed = _sort_1d(keys, packed, order, positions=False, verify=verify,
                                        what="sort_by_key", local=local)
        return out_keys, out_packed.map_blocks(
            _unpack, values.dtype, dtype=values.dtype,
            name="distsort-unpack-" + tokenize(out_packed, values.dtype))
    if (not gpu and n < 2**32 and keys.dtype.kind in "iu"
            and keys.dtype.itemsize + values.dtype.itemsize <= _PACKED_PAIR_BYTES):
        return _stable_packed(keys, values, order.descending, verify, local)
    out_keys, perm = argsort_by_positions(keys, order.descending, verify, local, "sort_by_key")
    from distsort.eager import one_place
    from distsort.graph.gather import gather
    return out_keys, gather((values,), perm, together=one_place([values, perm]))[0]


@numpy_keywords
def sort_by_key(keys: ArrayLike, values: ArrayLike, *, descending: bool = False,
                stable: bool | None = False, verify: bool = False,
                local: str = "auto") -> tuple[da.Array, da.Array]:
    """Sort 1-D ``keys`` and move ``values`` with them; tables: several value arrays,
    several keys.

    Parameters
    ----------
    keys : dask.array.Array, numpy.ndarray or cupy.ndarray, or a tuple of them
        1-D keys, as for :func:`sort` (N-D keys are flattened).  A tuple holds
        several keys, sorted lexicographically as ``numpy.lexsort`` sorts them:
        the LAST key is the primary one (see :func:`distsort.lexsort`).
    values : array of the same shape and backend, or a tuple or dict of them
        Values of 1, 2, 4 or 8 bytes (bool, integers, floats, datetime64,
        timedelta64).  A tuple or dict holds several value arrays (the columns
        of a table); they all move by one permutation, in one shuffle, and come
        back in the same structure.  With several value arrays or several keys,
        equal keys keep their input order (as with ``stable=True``).
    descending : bool, optional
        Largest keys first.
    stable : bool, optional
        How equal keys are ordered.  ``False`` (the default): by value, ascending
        in NumPy's order (``numpy.lexsort((values, keys))``); where that order calls
        pairs equal and keeps their input order (``-0.0`` and ``+0.0``, NaNs of
        any sign and payload, as keys or values), distsort orders them by their
        bits, whatever the input order: key, then value, each ``-0.0`` before
        ``+0.0`` and NaNs with the sign bit clear before those with it set (k =
        ``[1, 1, 1, 1]``, v = ``[-nan, nan, 0.0, -0.0]`` gives v = ``[-0.0, 0.0,
        nan, -nan]``, where lexsort gives ``[0.0, -0.0, -nan, nan]``).  ``True``: by
        position, as in the input (``values[numpy.argsort(keys, kind="stable")]``):
        where the plan sorts every chunk in one task (the one-device plan, a network
        of one group) the keys are sorted with their positions and keys and values
        taken by them in that task; elsewhere
        integer keys and values of up to 4 bytes together are sorted as one integer
        with their positions between them, and other keys are sorted with their
        positions and the values gathered (measured within 1.3x of the default
        order's time, often below it: ``docs/performance.md``); on CuPy chunks
        values of up to 4 bytes travel packed with their positions as 8 bytes, wider
        ones are gathered after an argsort (``distsort.api._stable_by_key``).  Both
        orders are deterministic, whatever the chunking and backend.  NumPy and the array
        API have no key-value sort to follow; the default stays ``False``, the
        order distsort always gave, and the faster one.
    verify : bool, optional
        Check on the workers (on the GPU for CuPy chunks), before the result can be
        read, that the keys are sorted and that the keys and the (key, value)
        pairs are permutations of the input's (counts and order-independent
        64-bit checksums).  Raises :class:`distsort.VerificationError` when
        computed if not.  (With ``stable=True`` and values of 8 bytes, the
        argsort is checked and the gather is Dask's.)
    local : {"auto", "bitonic", "radix"}, optional
        How each GPU sorts its chunks, as for :func:`sort`.

    Returns
    -------
    (dask.array.Array, dask.array.Array)
        The sorted keys and the values moved with them (tuples and dicts as given);
        lazy where any input is a Dask array, else arrays of the inputs' kind, computed
        at once (as for :func:`sort`).

    Examples
    --------
    >>> import dask.array as da, numpy as np, distsort
    >>> k = da.from_array(np.array([3, 1, 2, 1]), chunks=2)
    >>> v = da.from_array(np.array([30.0, 11.0, 20.0, 10.0]), chunks=2)
    >>> sk, sv = distsort.sort_by_key(k, v)
    >>> sk.compute(), sv.compute()
    (array([1, 1, 2, 3]), array([10., 11., 20., 30.]))
    >>> distsort.sort_by_key(k, v, stable=True)[1].compute()  # equal keys: input order
    array([11., 10., 20., 30.])
    >>> sk, cols = distsort.sort_by_key(k, {"v": v, "i": np.arange(4)})  # a table
    >>> cols["v"].compute(), cols["i"].compute()
    (array([11., 10., 20., 30.]), array([1, 3, 2, 0]))
    >>> (second, first), _ = distsort.sort_by_key((v, k), v)  # by k, then by v
    >>> first.compute(), second.compute()
    (array([1, 1, 2, 3]), array([10., 11., 20., 30.]))
    """
    stable = _check_stable(stable, False)
    _check_flags(descending, verify)
    order = Order(descending=bool(descending), keyed=True)
    _check_local(local)
    if stable and not verify and (out := _stable_at_once(keys, values, order, local)):
        return out
    given_keys, given_values = getattr(keys, "dtype", None), getattr(values, "dtype", None)
    keys, values = as_dask_array(keys, "keys"), as_dask_array(values, "values")
    known = not any(math.isnan(d) for d in keys.shape + values.shape)
    if known and keys.shape != values.shape:  # before flattening: (2, 3) is not (3, 2)
        raise ValueError(f"keys and values must have the same shape, got {keys.shape} "
                         f"and {values.shape}")
    keys, _ = _validate(keys, None, "keys")
    values, _ = _validate(values, None, "values")
    if array_module_name(keys._meta) != array_module_name(values._meta):
        raise TypeError("keys and values must both have NumPy chunks or both CuPy chunks")
    key_dtype, keys = keys.dtype, _as_codes(keys, descending)
    order = _code_order(key_dtype, order)
    if stable:
        out_keys, out_values = _stable_by_key(keys, values, order, verify, local)
        return (_like_given(_from_codes(out_keys, key_dtype, descending), given_keys),
                _like_given(out_values, given_values))
    value_dtype, values = values.dtype, _as_codes(values)
    out_keys, out_values = _sort_1d(keys, values, order, positions=False, verify=verify,
                                    what="sort_by_key", local=local)
    return (_like_given(_from_codes(out_keys, key_dtype, descending), given_keys),
            _like_given(_from_codes(out_values, value_dtype), given_values))
