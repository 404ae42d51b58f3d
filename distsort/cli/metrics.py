"""What a run measured: the data that crossed between chunks (head/tail tasks), the
bytes the workers sent to each other and spilled to disk, and the task time spent
reading, sorting, writing and verifying."""
import time

from distsort.core.taskkeys import round_task_kind

#: Task-key prefixes of the steps the summary names; every other task sorts.
STEPS = (("read", ("distsort-read-", "from-zarr-", "original-from-zarr-")),
         ("write", ("store-",)), ("verify", ("distsort-verify-",)))


def task_step(key):
    """``"read"``, ``"write"``, ``"verify"`` or ``"sort"``: the step a task belongs to.

    >>> task_step(("distsort-read-1f2e", 0)), task_step(("store-map-9a", 3))
    ('read', 'write')
    """
    name = str(key[0] if isinstance(key, tuple) else key)
    for step, prefixes in STEPS:
        if name.startswith(prefixes):
            return step
    return "sort"


def _crossing(key):
    return round_task_kind(key) in ("head", "tail")


class LocalMeter:
    """Sizes of the head/tail tasks (the data that crosses between chunks), local scheduler."""

    def __init__(self):
        self.crossing = self.tasks = 0
        self.steps = {}
        self._started = {}

    def __enter__(self):
        from dask.callbacks import Callback
        from dask.sizeof import sizeof

        def pretask(key, dsk, state):
            self._started[key] = time.perf_counter()

        def posttask(key, result, dsk, state, worker_id):
            step = task_step(key)
            took = time.perf_counter() - self._started.pop(key, time.perf_counter())
            self.steps[step] = self.steps.get(step, 0.0) + took
            if _crossing(key):
                self.crossing += sizeof(result)
                self.tasks += 1

        self._cb = Callback(pretask=pretask, posttask=posttask)
        self._cb.__enter__()
        return self

    def __exit__(self, *exc):
        self._cb.__exit__(*exc)


def crossing_of(records):
    """(bytes, tasks) of the head/tail tasks in a distributed task stream's records."""
    sizes = [r.get("nbytes", 0) or 0 for r in records
             if _crossing(r.get("key", ""))]
    return sum(sizes), len(sizes)


def step_seconds(records):
    """Task seconds per step (:func:`task_step`) in a distributed task stream's records."""
    steps = {}
    for r in records:
        took = sum(s["stop"] - s["start"] for s in r.get("startstops", ())
                   if s.get("action") == "compute")
        step = task_step(r.get("key", ""))
        steps[step] = steps.get(step, 0.0) + took
    return steps


def crossing_tasks(plan):
    """How many head/tail tasks the sort of ``plan`` (a ``distsort.plan.sortplan.SortPlan``)
    runs: those of its network's rounds, between chunks or runs; none on one device,
    in a k-way merge, or where GPU workers share their chunks (CUDA IPC).

    >>> from distsort.plan.sortplan import SortPlan
    >>> crossing_tasks(SortPlan("network", (10,) * 4, None, (0, 1, 2, 3), 1))
    12
    """
    from distsort.plan.network import group_steps, plan_network
    ooc = plan.out_of_core
    if plan.share or plan.strategy in ("one-device", "exchange") or (ooc and ooc.one_pass):
        return 0
    count, group = (ooc.plan.runs, 1) if ooc else (len(plan.chunks), plan.group)
    steps = group_steps(plan_network(count, run=group), group)
    return 2 * sum(len(r.pairs) for r in steps if r is not None)


def _worker_counters(dask_worker):
    """Bytes this worker sent to others, and spilled to disk (None where the worker's
    store does not count it, as dask-cuda's does not), since it started."""
    metrics = getattr(dask_worker.data, "cumulative_metrics", None)
    return {"sent": dask_worker.transfer_outgoing_bytes_total,
            "spilled": None if metrics is None else metrics.get(("disk-write", "bytes"), 0)}


def cluster_counters(client):
    if client is None:
        return None
    try:
        per_worker = client.run(_worker_counters)
    except Exception:  # counters are a nicety; never fail a sort for them
        return None
    values = {k: [c[k] for c in per_worker.values()] for k in ("sent", "spilled")}
    return {k: (None if None in v else sum(v)) for k, v in values.items()}
