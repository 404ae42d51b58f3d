"""The scheduler plugin of :mod:`distsort.locality`, apart from it: it subclasses
distributed's ``SchedulerPlugin``, and :mod:`distsort.locality` serves sorts on Dask's
local schedulers too, which need not import distributed."""
from __future__ import annotations

from distributed.diagnostics.plugin import SchedulerPlugin

from .locality import PLUGIN_NAME, keeps


class KeepChunksInPlace(SchedulerPlugin):
    """Restrict the tasks that read a chunk to the worker holding the chunk."""

    name = PLUGIN_NAME

    def __init__(self):
        self.scheduler = None

    async def start(self, scheduler):
        self.scheduler = scheduler

    def transition(self, key, start, finish, *args, **kwargs):
        if finish != "memory" or self.scheduler is None or not isinstance(key, tuple):
            return
        ts = self.scheduler.tasks.get(key)
        if ts is None or not ts.who_has:
            return
        where = {ws.address for ws in ts.who_has}
        for dts in ts.dependents:
            if dts.state in ("waiting", "released") and keeps(dts.key, key):
                dts.worker_restrictions = set(where)
                dts.loose_restrictions = True
