"""The names of distsort's tasks, and what the scheduler plugin reads from them.

One protocol, shared by the graph that writes the keys (``distsort.graph.layers``), the
scheduler plugin that places tasks by them (``distsort.cluster.plugin``), the reads
of persisted chunks (``distsort.cluster.held``) and the command that times its steps by them
(``distsort.cli``).  Pure names: nothing here imports Dask's scheduler.

Task keys name the kind of task before anything with a digit,
``("distsort-low-r03-<token>", i)``, because Dask's ``key_split`` cuts a name at its
first word with a digit: the scheduler's task prefix is ``distsort-low`` (one progress
bar and task-stream colour per kind) and its task group is the whole name (one per
kind and round).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from dask.utils import key_split

#: What the tasks of a sort do; the scheduler's task prefix of each is
#: ``distsort-<kind>``.  ``prepare`` copies and sorts a chunk; ``edges`` samples a
#: chunk's ends; ``tail`` and ``head`` are the crossing parts; ``low`` and ``high``
#: the merges; ``share`` and ``done`` those of backends that share chunks (GPUs of
#: one host).  The output arrays' tasks are ``distsort-sort`` (and
#: ``distsort-sort-values``), as named in ``distsort.api``; they wait for one
#: ``distsort-outputs`` task (None: see ``distsort.graph.layers._output_layer``).
TASK_KINDS = ("prepare", "edges", "tail", "head", "low", "high", "share", "done")

#: Keys of the tasks of a round: ``("distsort-head-r03-<token>", 5)``.
_ROUND_TASK = re.compile(r"^distsort-([a-z]+)-r(\d+)-")

#: The name under which the scheduler plugin is registered.
PLUGIN_NAME = "distsort-keep-chunks-in-place"
#: A chunk's key: (collection name, chunk index).
KEY_LEN = 2
#: Tasks that read chunks whose index is not theirs (placement gives position ``p`` input
#: chunk ``perm[p]``; a ``part`` slices its group's sorted run, keyed by the group's
#: first position): they run where their input lives, whatever its index.  A part run
#: elsewhere fetched the whole run (two parts of a 512 MiB sort on two CPU workers).
READS_INPUT = ("distsort-prepare-", "distsort-group-", "distsort-stagek-", "distsort-stagev-",
               "distsort-part-")
#: Tasks that may read persisted chunks without a dependency (:class:`Held`,
#: :class:`HeldChunks`).
READS_HELD = ("distsort-stagek-", "distsort-stagev-", "distsort-group-",
              "distsort-exch-run-")
#: Tasks kept strictly where their chunks are: the scheduler's work stealing moves a
#: loosely restricted task (and the chunk it reads) to an idle worker.  A verify summary
#: waiting behind its worker's sort was stolen with its input chunk (``--verify`` on two
#: CPU workers: a whole 256 MiB chunk sent in 3 of 3 runs).  The restriction is set
#: again each time the chunk is computed, so a lost worker's summaries follow the chunk.
STAYS = ("distsort-verify-summary-", "distsort-verify-input-", "distsort-verify-output-",
         # an exchange's tasks of one run: stolen by an idle worker (one that holds no
         # chunk), its run and slices followed (2 of 4 workers holding the data: 0.76 of
         # it sent, against 0.5 for one exchange)
         "distsort-exch-run-", "distsort-exch-sample-", "distsort-exch-windows-",
         "distsort-exch-slice-", "distsort-exch-merge-")
#: Tasks of several chunk positions, which follow no dependency of their own index: a
#: run (the scheduler places it where most of its staged chunks are).  A run that
#: followed the stage of its own index had another worker's staged chunks sent to it.
RUNS = ("distsort-run-", "distsort-exch-run-")
#: Slices of runs, keyed ``(name, output chunk, run)`` (an exchange's: ``(name, owner,
#: run)``, the run's slices of all the owner's chunks): each is taken where its run is.
SLICES = ("distsort-kway-slice-", "distsort-exch-slice-")
#: Merges of an exchange between workers, keyed ``(name, output chunk, owner)``: each is
#: taken where the owner's run holds its own slices (``(name, owner, owner)``), which
#: then stay there (``distsort.plan.exchange.output_owners``).
OWNED = ("distsort-exch-merge-",)
#: Single tasks that gather small results from every run: their index 0 is no position,
#: and no dependent follows them (a run's windows that followed the pivots would have had
#: the whole run sent to the pivots' worker).
GATHERED = ("distsort-kway-pivots-", "distsort-kway-splitters-", "distsort-kway-cuts-",
            "distsort-exch-pivots-", "distsort-exch-splitters-")
#: Lazy input read by distsort's own tasks (the command's files): chunk ``i`` of ``c``
#: is read on worker ``i * W // c``, so that the network's neighbours start together.
LAID_OUT = ("distsort-read-",)
#: The scheduler-side client that holds chunks for the tasks reading them.
HOLDER = "distsort-held-reads"


def task_name(kind: str, token: str, round_id: int | None = None) -> str:
    """The name of a distsort task (the first part of its key): ``distsort-<kind>``,
    which Dask's ``key_split`` keeps whole, then the round, if any, and the token.

    >>> from dask.utils import key_split
    >>> task_name("low", "5f0e", 3)
    'distsort-low-r03-5f0e'
    >>> key_split((task_name("low", "5f0e", 3), 7)), key_split(task_name("prepare", "5f0e"))
    ('distsort-low', 'distsort-prepare')
    """
    if round_id is None:
        return f"distsort-{kind}-{token}"
    return f"distsort-{kind}-r{round_id:02d}-{token}"


def _round_match(key: Hashable) -> re.Match[str] | None:
    return _ROUND_TASK.match(str(key[0] if isinstance(key, tuple) else key))


def round_task_kind(key: Hashable) -> str | None:
    """What a task of a round does (``"head"``, ``"tail"``, ``"low"``, ``"edges"``, ...),
    from its key; None for keys of other tasks.

    >>> round_task_kind(("distsort-head-r03-5f0e", 5))
    'head'
    >>> round_task_kind(("distsort-prepare-5f0e", 5)) is None
    True
    """
    m = _round_match(key)
    return m.group(1) if m else None


def task_kind(key: Hashable) -> str:
    """The kind of any task: for distsort's, its task prefix less ``distsort-``
    (``"head"``, ``"prepare"``, ``"sort"``, ``"verify-input"``, ...); for others, the
    first word of the name.

    >>> task_kind(("distsort-tail-r01-5f0e", 2)), task_kind(("array-5f0e", 2))
    ('tail', 'array')
    """
    name = str(key[0] if isinstance(key, tuple) else key)
    if name.startswith("distsort-"):
        return key_split(name)[len("distsort-"):]
    return name.split("-", maxsplit=1)[0]


def task_round(key: Hashable) -> int | None:
    """The round of the network a task belongs to, from its key; None for keys of
    tasks outside the rounds.

    >>> task_round(("distsort-low-r03-5f0e", 2)), task_round(("distsort-edges-5f0e", 2))
    (3, None)
    """
    m = _round_match(key)
    return int(m.group(2)) if m else None


def keeps(dependent_key: Hashable, key: Hashable) -> bool:
    """Whether the task ``dependent_key`` reads the chunk computed as ``key`` in place:
    a distsort task (prepare, edges, head, tail, compare-split, finish) of the same
    chunk position, or one that reads chunks of other positions (``READS_INPUT``).

    >>> keeps(("distsort-low-r01-t", 3), ("distsort-high-r00-t", 3))
    True
    >>> keeps(("distsort-prepare-t", 1), ("array-t", 2)), keeps(("distsort-low-r01-t", 1), ("x", 2))
    (True, False)
    >>> keeps(("distsort-part-r01-t", 3), ("distsort-regroup-r01-t", 0))
    True
    >>> keeps(("distsort-run-t", 1), ("distsort-stagek-t", 1))  # ``RUNS``
    False
    >>> keeps(("distsort-kway-windows-t", 0), ("distsort-kway-pivots-t", 0))
    False
    >>> keeps(("distsort-kway-windows-t", 0), ("distsort-run-t", 0))
    True
    >>> keeps(("distsort-kway-slice-t", 4, 1), ("distsort-run-t", 1))  # ``SLICES``
    True
    >>> keeps(("distsort-exch-merge-t", 4, 1), ("distsort-exch-slice-t", 1, 1))
    True
    >>> keeps(("distsort-exch-merge-t", 4, 1), ("distsort-exch-slice-t", 1, 0))
    False
    >>> keeps(("distsort-sort-t", 4), ("distsort-exch-merge-t", 4, 1))
    True
    """
    if not (isinstance(dependent_key, tuple) and isinstance(key, tuple)):
        return False
    decided = _keeps_across_shapes(dependent_key, key)
    if decided is not None:
        return decided
    name = str(dependent_key[0])
    if len(dependent_key) != KEY_LEN or len(key) != KEY_LEN:
        return False
    if name.startswith(RUNS) or str(key[0]).startswith(GATHERED):
        return False
    return name.startswith(READS_INPUT) or (dependent_key[1] == key[1]
                                            and name.startswith("distsort-"))


def _keeps_across_shapes(dependent_key: tuple, key: tuple) -> bool | None:
    """``keeps`` for the keys of three parts (``(name, output chunk, run)``): slices
    (``SLICES``) where their run is, an exchange's merge (``OWNED``) where its owner's
    own slices are, and the output chunk's tasks where it was merged; None for other
    keys."""
    name = str(dependent_key[0])
    if name.startswith(SLICES):
        return (len(dependent_key) == KEY_LEN + 1 and len(key) == KEY_LEN
                and str(key[0]).startswith(RUNS) and key[1] == dependent_key[2])
    if name.startswith(OWNED):  # the owner's own slices: ``(name, owner, run)``, run = owner
        return (len(dependent_key) == len(key) == KEY_LEN + 1
                and str(key[0]).startswith(SLICES) and key[1] == key[2] == dependent_key[2])
    if str(key[0]).startswith(OWNED):
        return (len(dependent_key) == KEY_LEN and dependent_key[1] == key[1]
                and name.startswith("distsort-"))
    return None


@dataclass(frozen=True)
class Held:
    """The key of a persisted chunk that a task reads itself: an argument that Dask
    does not take for a dependency (``distsort.cluster.held.read_held`` reads it)."""

    key: tuple


class HeldChunks:
    """The keys of persisted chunks that one task reads itself, in order, as one
    argument: Dask neither walks it for keys nor makes a dependency of each (a task
    depending on 10,000 chunks cost the scheduler a second).  ``read`` (a function of
    the keys, run on the worker) gives the chunks (:attr:`chunks`); ``keep``, never
    sent, keeps the persisted array (its futures) alive in the client until the graph
    is computed (the scheduler plugin holds the chunks from then on).

    >>> h = HeldChunks((("x", 0), ("x", 1)), read=list).take([1])
    >>> h.keys, h.chunks
    ((('x', 1),), [('x', 1)])
    """

    __slots__ = ("keys", "read", "keep")

    def __init__(self, keys: Iterable[tuple], read: Callable[[tuple[tuple, ...]], Any],
                 keep: Any = None) -> None:
        self.keys, self.read, self.keep = tuple(keys), read, keep

    def take(self, indices: Iterable[int]) -> HeldChunks:
        return HeldChunks(map(self.keys.__getitem__, indices), self.read, self.keep)

    @property
    def chunks(self) -> Any:
        return self.read(self.keys)

    def __reduce__(self) -> tuple[type[HeldChunks], tuple[tuple[tuple, ...], Callable]]:
        # ``keep`` stays in the client
        return HeldChunks, (self.keys, self.read)


def held_keys(run_spec: Any) -> list[tuple]:
    """The keys a task (its ``run_spec``, as the scheduler holds it) reads through
    :class:`Held` and :class:`HeldChunks` arguments.

    >>> from dask._task_spec import Task
    >>> held_keys(Task(("s", 0), print, Held(("x", 0)), 1))
    [('x', 0)]
    >>> held_keys(Task(("s", 0), print, HeldChunks([("x", 0), ("x", 1)], list)))
    [('x', 0), ('x', 1)]
    """
    out = []
    for a in getattr(run_spec, "args", ()):
        if isinstance(a, Held):
            out.append(a.key)
        elif isinstance(a, HeldChunks):
            out.extend(a.keys)
    return out
