"""The scheduler plugin of :mod:`distsort.cluster.locality`, apart from it: it subclasses
distributed's ``SchedulerPlugin``, and :mod:`distsort.cluster.locality` serves sorts on Dask's
local schedulers too, which need not import distributed."""
from __future__ import annotations

from collections import Counter, defaultdict

from distributed.diagnostics.plugin import SchedulerPlugin

from distsort.core.taskkeys import (HOLDER, KEY_LEN, LAID_OUT, OWNED, PLUGIN_NAME, READS_HELD,
                                    STAYS, held_keys, keeps)


class KeepChunksInPlace(SchedulerPlugin):
    """Restrict the tasks that read a chunk to the worker holding the chunk; hold the
    persisted chunks that tasks read without a dependency (``distsort.cluster.held``) until
    those tasks end."""

    name = PLUGIN_NAME

    def __init__(self):
        self.scheduler = None
        self.holds = {}  # task key -> the keys it reads through Held arguments
        self.readers = Counter()  # held key -> tasks still to read it

    async def start(self, scheduler):
        self.scheduler = scheduler

    def update_graph(self, scheduler, *, tasks, **kwargs):
        laid_out = defaultdict(list)
        for key in tasks:
            if not (isinstance(key, tuple) and len(key) == KEY_LEN):
                continue
            name = str(key[0])
            if key not in self.holds and name.startswith(READS_HELD):
                self._hold(scheduler, scheduler.tasks.get(key))
            elif name.startswith(LAID_OUT):
                laid_out[name].append(key)
        for keys in laid_out.values():
            self._lay_out(scheduler, keys)

    @staticmethod
    def _lay_out(scheduler, keys):
        """Read chunk ``i`` of ``c`` on worker ``i * W // c`` (workers by address), where
        no read of it ran yet: consecutive chunks, which the network pairs in most of
        its rounds, start on one worker.  Left to itself the scheduler deals reads out
        in turn, and every round of distance one sends a chunk's crossing part to the
        other worker (a 512 MiB sort on two CPU workers sent 1 GiB between them)."""
        workers = sorted(scheduler.workers)
        count = 1 + max(int(k[1]) for k in keys)
        if len(workers) <= 1:  # nothing to choose
            return
        for key in keys:
            ts = scheduler.tasks.get(key)
            if ts is None or ts.state not in ("released", "waiting") or ts.worker_restrictions:
                continue
            ts.worker_restrictions = {workers[int(key[1]) * len(workers) // count]}
            ts.loose_restrictions = True  # a lost worker's chunks still get read

    def _hold(self, scheduler, ts):
        """Place ``ts`` where its held chunks are and keep them until it ends (a chunk
        already gone stays so: the task reports it)."""
        if ts is None:
            return
        held = [h for h in map(scheduler.tasks.get, held_keys(ts.run_spec)) if h is not None]
        if not held:
            return
        scheduler.client_desires_keys([h.key for h in held], HOLDER)
        self.holds[ts.key] = [h.key for h in held]
        self.readers.update(self.holds[ts.key])
        # The workers holding the most of its chunks (a group sort reads a few of its
        # chunks from another worker): for one chunk, any of its holders.
        count = Counter(ws.address for h in held for ws in (h.who_has or ()))
        if count:
            most = max(count.values())
            ts.worker_restrictions = {w for w, c in count.items() if c == most}
            ts.loose_restrictions = not str(ts.key[0]).startswith(STAYS)

    def transition(self, key, start, finish, *args, **kwargs):
        if key in self.holds and finish in ("memory", "erred", "forgotten"):
            self._release_later(self.holds.pop(key))
        if finish != "memory" or self.scheduler is None or not isinstance(key, tuple):
            return
        ts = self.scheduler.tasks.get(key)
        if ts is None or not ts.who_has:
            return
        where = {ws.address for ws in ts.who_has}
        for dts in ts.dependents:
            if dts.state in ("waiting", "released") and keeps(dts.key, key):
                dts.worker_restrictions = set(where)
                # strictly: tasks that stay (``STAYS``) and an exchange's outputs, which an
                # idle worker would steal with the merged chunk they read
                dts.loose_restrictions = not (str(dts.key[0]).startswith(STAYS)
                                              or str(key[0]).startswith(OWNED))

    def remove_worker(self, scheduler, worker, **kwargs):
        """Tasks kept strictly on ``worker`` (``STAYS``) that now have nowhere to run (their
        chunk is still held elsewhere) may run anywhere: never a task waiting for a worker
        that left.  Those whose chunk went with the worker are restricted again where it
        is computed next (``transition``)."""
        stuck = {}
        for ts in list(scheduler.unrunnable):
            if (not ts.loose_restrictions and worker in (ts.worker_restrictions or ())
                    and str(ts.key[0] if isinstance(ts.key, tuple) else ts.key).startswith(STAYS)):
                ts.loose_restrictions = True
                stuck[ts.key] = "processing"
        if stuck:
            scheduler.transitions(stuck, stimulus_id=f"distsort-loosen-{worker}")

    def _release_later(self, keys):
        """Let go of ``keys`` once no task still reads them, after the scheduler's
        current transitions (releasing starts transitions of its own)."""
        self.readers.subtract(keys)
        done = [k for k in set(keys) if self.readers[k] <= 0]
        for k in done:
            del self.readers[k]
        if done and self.scheduler is not None:
            self.scheduler.loop.add_callback(self.scheduler.client_releases_keys,
                                             keys=done, client=HOLDER)
