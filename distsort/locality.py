"""Keep each chunk on the worker that holds it: a scheduler plugin.

A compare-split task (``merge_low`` / ``merge_high``) needs the chunk it keeps and
the crossing part of its partner; it should run where the chunk is, so that only
the crossing part travels.  The Dask scheduler picks a worker by the estimated
time to start -- queued work plus the bytes to fetch over the *measured*
bandwidth -- so with fast links (NVLink) or a busy worker it often runs the task
on the partner's worker and moves the whole chunk.  Dask 2026.7 drops layer
annotations of arrays, so the graph cannot ask for a worker itself.

:class:`KeepChunksInPlace` restricts every distsort task that reads a chunk (its
compare-split, and also its edges, head or tail, and the finishing step: on two
CPU workers restricting the compare-splits alone still moved whole chunks), as
soon as the chunk is computed, to the worker(s) holding it; the restriction is loose, so
that a task whose worker died still runs elsewhere.  ``distsort.sort`` (and
``argsort``, ``sort_by_key``) registers it on the current ``distributed`` client's
scheduler once, through :func:`keep_chunks_in_place`.  It also places the tasks that
read persisted chunks without a dependency (``distsort.held``) where those chunks
are, and keeps the chunks for them until they end.

:func:`pairs_in_flight` sizes the window of compare-splits that may run at once
(``distsort.graph``), which bounds what a worker holds beyond its own chunks, and
:func:`share_crossing_parts` says whether GPU workers read crossing parts through
CUDA IPC (all on one host) or send them as data.
"""
from __future__ import annotations

import os
import sys
import warnings

import dask

PLUGIN_NAME = "distsort-keep-chunks-in-place"
#: Pairs in flight per worker: one merging while the next one's crossing part travels.
PAIRS_PER_WORKER = 2
#: Values of the config ``distsort.exchange``: how crossing parts travel between GPUs.
EXCHANGES = ("auto", "ipc", "comm")
_registered: dict = {}  # scheduler address -> whether the plugin is there


# A chunk's key: (collection name, chunk index).
_KEY_LEN = 2


#: Tasks that read chunks whose index is not theirs (placement gives position ``p`` input
#: chunk ``perm[p]``; a ``part`` slices its group's sorted run, keyed by the group's
#: first position): they run where their input lives, whatever its index.  A part run
#: elsewhere fetched the whole run (two parts of a 512 MiB sort on two CPU workers).
READS_INPUT = ("distsort-prepare-", "distsort-group-", "distsort-stagek-", "distsort-stagev-",
               "distsort-part-")
#: Tasks that may read persisted chunks without a dependency (``distsort.held``).
READS_HELD = ("distsort-stagek-", "distsort-stagev-")
#: Tasks kept strictly where their chunks are: the scheduler's work stealing moves a
#: loosely restricted task (and the chunk it reads) to an idle worker.  A verify summary
#: waiting behind its worker's sort was stolen with its input chunk (``--verify`` on two
#: CPU workers: a whole 256 MiB chunk sent in 3 of 3 runs).  The restriction is set
#: again each time the chunk is computed, so a lost worker's summaries follow the chunk.
STAYS = ("distsort-verify-summary-", "distsort-verify-input-", "distsort-verify-output-")
#: Lazy input read by distsort's own tasks (the command's files): chunk ``i`` of ``c``
#: is read on worker ``i * W // c``, so that the network's neighbours start together.
LAID_OUT = ("distsort-read-",)


def keeps(dependent_key, key) -> bool:
    """Whether the task ``dependent_key`` reads the chunk computed as ``key`` in place:
    a distsort task (prepare, edges, head, tail, compare-split, finish) of the same
    chunk position, or one that reads chunks of other positions (``READS_INPUT``).

    >>> keeps(("distsort-low-r01-t", 3), ("distsort-high-r00-t", 3))
    True
    >>> keeps(("distsort-prepare-t", 1), ("array-t", 2)), keeps(("distsort-low-r01-t", 1), ("x", 2))
    (True, False)
    >>> keeps(("distsort-part-r01-t", 3), ("distsort-regroup-r01-t", 0))
    True
    """
    if not (isinstance(dependent_key, tuple) and isinstance(key, tuple)):
        return False
    if len(dependent_key) != _KEY_LEN or len(key) != _KEY_LEN:
        return False
    name = str(dependent_key[0])
    return name.startswith(READS_INPUT) or (dependent_key[1] == key[1]
                                            and name.startswith("distsort-"))


def __getattr__(name):
    # The plugin subclasses distributed's SchedulerPlugin: defined where distributed
    # is imported anyway (a client exists), so that a sort on Dask's local schedulers
    # does not import distributed (a few tenths of a second).
    if name == "KeepChunksInPlace":
        from .scheduler_plugin import KeepChunksInPlace
        return KeepChunksInPlace
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    from .sortplan import _shares  # the plan's rule, which every sort follows
    return _shares(mode, hosts, gpu=True)


def keep_chunks_in_place(client=None) -> bool:
    """Register :class:`KeepChunksInPlace` on the scheduler of ``client`` (default: the
    current client, if there is one), once per scheduler.  Returns whether it is
    registered; where it cannot be (the scheduler cannot import distsort, an
    asynchronous client), warns once and the sort runs without it.

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
    from .scheduler_plugin import KeepChunksInPlace
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
