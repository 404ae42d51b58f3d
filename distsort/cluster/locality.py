"""Keep each chunk on the worker that holds it: a scheduler plugin.

A compare-split task (``merge_low`` / ``merge_high``) needs the chunk it keeps and
the crossing part of its partner; it should run where the chunk is, so that only
the crossing part travels.  The Dask scheduler picks a worker by the estimated
time to start -- queued work plus the bytes to fetch over the *measured*
bandwidth -- so with fast links (NVLink) or a busy worker it often runs the task
on the partner's worker and moves the whole chunk.  Dask 2026.7 drops layer
annotations of arrays, so the graph cannot ask for a worker itself.

:class:`distsort.cluster.plugin.KeepChunksInPlace` restricts every distsort
task that reads a chunk (its compare-split, and also its edges, head or tail, and the
finishing step: on two CPU workers restricting the compare-splits alone still moved
whole chunks), as soon as the chunk is computed, to the worker(s) holding it; the
restriction is loose, so that a task whose worker died still runs elsewhere.
``distsort.sort`` (and ``argsort``, ``sort_by_key``) registers it on the current
``distributed`` client's scheduler once, through :func:`keep_chunks_in_place`; the task
names it reads are those of ``distsort.core.taskkeys``.  It also places the tasks that read
persisted chunks without a dependency (``distsort.cluster.held``) where those chunks are, and
keeps the chunks for them until they end.

:func:`pairs_in_flight` sizes the window of compare-splits that may run at once
(``distsort.graph.layers``), which bounds what a worker holds beyond its own chunks, and
:func:`share_crossing_parts` says whether GPU workers read crossing parts through
CUDA IPC (all on one host) or send them as data.
"""
from __future__ import annotations

import os
import sys
import warnings

import dask

from distsort.core.taskkeys import PLUGIN_NAME

#: Pairs in flight per worker: one merging while the next one's crossing part travels.
PAIRS_PER_WORKER = 2
#: Values of the config ``distsort.exchange``: how crossing parts travel between GPUs.
EXCHANGES = ("auto", "ipc", "comm")
_registered: dict = {}  # scheduler address -> whether the plugin is there


def _current_client(client=None):
    """``client``, else the current distributed client, else None (Dask's local
    schedulers).  Without distributed imported there is no client: it is not
    imported to find that out."""
    if client is not None:
        return client
    if "distributed" not in sys.modules:
        return None
    try:
        from distributed import default_client
        return default_client()
    except ValueError:  # no client: Dask's local schedulers
        return None


def worker_hosts(client=None):
    """The host of each worker of ``client`` (default: the current client), in one
    round trip to the scheduler; None without a client, ``[None]`` without an answer."""
    client = _current_client(client)
    if client is None:
        return None
    if client.asynchronous:
        return [None]
    try:
        workers = client.scheduler_info(n_workers=-1)["workers"]
    except Exception:  # noqa: BLE001  (no answer: size it as for one worker)
        return [None]
    return [w.get("host") for w in workers.values()]


def pairs_in_flight(client=None, per_worker=PAIRS_PER_WORKER, hosts=...) -> int:
    """How many compare-split pairs may run at once: ``per_worker`` per worker of
    ``client`` (default: the current client), or per CPU core without a client.
    ``hosts``: ``worker_hosts()``, where the caller has it already.

    >>> pairs_in_flight(per_worker=2) >= 2
    True
    """
    if hosts is ...:
        hosts = worker_hosts(client)
    workers = os.cpu_count() if hosts is None else len(hosts)
    return per_worker * (workers or 1)  # cpu_count() may be None


def share_crossing_parts(client=None, hosts=...) -> bool:
    """Whether GPU compare-splits read their partner's crossing elements through CUDA
    IPC (chunks shared where they lie: ``distsort.backends.share.cuda_ipc``) instead of
    receiving them as data.

    The Dask config value ``distsort.exchange`` decides: ``"ipc"``, ``"comm"``
    (distributed's comms: UCX or TCP), or ``"auto"`` (the default): IPC when there
    are several workers and all report the same host.  Set ``"comm"`` for workers
    of one host that cannot map each other's GPU memory (separate containers).

    >>> import dask

from distsort.core.taskkeys import PLUGIN_NAME
    >>> with dask.config.set({"distsort.exchange": "comm"}):
    ...     share_crossing_parts()
    False
    """
    mode = dask.config.get("distsort.exchange", "auto")
    if mode not in EXCHANGES:
        raise ValueError(f"distsort.exchange must be one of {EXCHANGES}, got {mode!r}")
    if mode != "auto":
        return mode == "ipc"
    if hosts is ...:
        hosts = worker_hosts(client)
    from distsort.plan.sortplan import _shares  # the plan's rule, which every sort follows
    return _shares(mode, hosts, gpu=True)


def keep_chunks_in_place(client=None) -> bool:
    """Register ``distsort.cluster.plugin.KeepChunksInPlace`` on the scheduler of
    ``client`` (default: the current client, if there is one), once per scheduler.
    Returns whether it is registered; where it cannot be (the scheduler cannot import
    distsort, an asynchronous client), warns once and the sort runs without it.

    >>> from distributed import Client                     # doctest: +SKIP
    >>> keep_chunks_in_place(Client("tcp://scheduler:8786"))  # doctest: +SKIP
    True
    """
    client = _current_client(client)
    if client is None:  # the local schedulers need no plugin
        return False
    address = getattr(client.scheduler, "address", None)
    if address not in _registered:
        _registered[address] = not client.asynchronous and _register(client)
    return _registered[address]


def _register(client):
    from distsort.cluster.plugin import KeepChunksInPlace
    try:
        client.register_plugin(KeepChunksInPlace(), name=PLUGIN_NAME)
    except Exception as e:  # noqa: BLE001  (any failure only costs locality)
        warnings.warn(f"distsort: could not register its scheduler plugin ({e}); chunks "
                      "may move between workers during the merge", RuntimeWarning,
                      stacklevel=4)
        return False
    return True


# ---------------------------------------------------------------- placement helpers
def chunk_owners(keys, client=None):
    """The worker holding each of ``keys`` (a persisted array's chunks), or None for
    a chunk not in memory (lazy input) and for every chunk without a client: the
    scheduler's ``who_has``, in one round trip.  Where a chunk has copies on several
    workers, the first by address."""
    client = _current_client(client)
    if client is None or client.asynchronous:
        return [None] * len(keys)
    try:
        return client.run_on_scheduler(_first_holders, list(keys))
    except Exception:  # noqa: BLE001  (no answer only costs locality)
        return [None] * len(keys)


def _first_holders(keys, dask_scheduler=None):
    """On the scheduler: the first worker (by address) holding each key, or None."""
    out = []
    for k in keys:
        ts = dask_scheduler.tasks.get(k)
        held = sorted(ws.address for ws in ts.who_has) if ts is not None and ts.who_has else ()
        out.append(held[0] if held else None)
    return out


#: Values of the config ``distsort.placement``: positions from where chunks live, or not.
PLACEMENTS = ("auto", "identity")
