"""What a run measured: the data that crossed between chunks (head/tail tasks), the
bytes the workers sent to each other and spilled to disk, and when the tasks of each
step (read, sort, merge, write, verify) ran: the wall-clock interval from the step's
first task to its last, and the seconds in which some task of it ran
(:func:`step_spans`)."""
import time

from distsort.core.taskkeys import round_task_kind

#: Task-key prefixes of the steps the summary names; every other task sorts.  The
#: merges: a k-way merge's (its samples, splitters and slices too), an exchange's, and
#: the network's compare-splits; ``output``: the output array's own tasks, whose step
#: the plan tells (:func:`output_step`); ``other``: Dask's own finalizing tasks, which
#: the summary leaves out (a step of no data: it ended the sort's interval).
STEPS = (("read", ("distsort-read-", "from-zarr-", "original-from-zarr-")),
         ("write", ("store-",)), ("verify", ("distsort-verify-",)),
         ("merge", ("distsort-kway-", "distsort-exch-merge-", "distsort-low-",
                    "distsort-high-")),
         ("output", ("distsort-sort-",)), ("other", ("finalize-",)))
#: The steps in the order the summary gives them.
STEP_ORDER = ("read", "sort", "merge", "write", "verify")


def output_step(intervals, plan):
    """``intervals`` (``{step: [(start, stop)]}``) with those of the output's own tasks
    (``"output"``) under the step they do in ``plan``'s sort: in the one-host k-way sort
    they merge the runs, elsewhere they sort (as one) or hand over sorted chunks.

    >>> from distsort.plan.sortplan import SortPlan
    >>> output_step({"output": [(1, 2)], "sort": [(0, 1)]}, SortPlan("kway", (9,), None, None, 1))
    {'sort': [(0, 1)], 'merge': [(1, 2)]}
    """
    steps = {k: list(v) for k, v in intervals.items() if k != "output"}
    step = "merge" if plan is not None and plan.strategy == "kway" else "sort"
    steps.setdefault(step, []).extend(intervals.get("output", ()))
    return steps


def task_step(key):
    """``"read"``, ``"merge"``, ``"write"``, ``"verify"``, ``"output"``, ``"other"`` or
    ``"sort"``: the step a task belongs to (:data:`STEPS`).

    >>> task_step(("distsort-read-1f2e", 0)), task_step(("store-map-9a", 3))
    ('read', 'write')
    >>> task_step(("distsort-kway-9a", 0)), task_step(("distsort-run-9a", 0))
    ('merge', 'sort')
    >>> task_step(("finalize-hlgfinalizecompute-9a", 0))
    'other'
    """
    name = str(key[0] if isinstance(key, tuple) else key)
    for step, prefixes in STEPS:
        if name.startswith(prefixes):
            return step
    return "sort"


def _crossing(key):
    return round_task_kind(key) in ("head", "tail")


def busy_seconds(intervals):
    """Seconds in which at least one of ``intervals`` (``(start, stop)`` pairs) ran.

    >>> busy_seconds([(0, 2), (1, 3), (5, 6)])
    4
    """
    busy, reach = 0, None
    for start, stop in sorted(intervals):
        if reach is None or start > reach:
            busy += stop - start
            reach = stop
        elif stop > reach:
            busy += stop - reach
            reach = stop
    return busy


def step_spans(intervals):
    """``{step: (first start, last stop, busy seconds)}`` of ``{step: [(start, stop)]}``:
    wall-clock intervals, not task time summed (tasks that run at once count once).

    >>> step_spans({"read": [(0.0, 1.0), (0.5, 2.0)], "sort": []})
    {'read': (0.0, 2.0, 2.0)}
    """
    return {step: (min(a for a, _ in spans), max(b for _, b in spans), busy_seconds(spans))
            for step, spans in intervals.items() if spans}


class LocalMeter:
    """Sizes of the head/tail tasks (the data that crosses between chunks), and each
    step's task intervals (``time.perf_counter``), local scheduler."""

    def __init__(self):
        self.crossing = self.tasks = 0
        self.intervals = {}
        self._started = {}

    def __enter__(self):
        from dask.callbacks import Callback
        from dask.sizeof import sizeof

        def pretask(key, dsk, state):
            self._started[key] = time.perf_counter()

        def posttask(key, result, dsk, state, worker_id):
            step = task_step(key)
            now = time.perf_counter()
            start = self._started.pop(key, now)
            self.intervals.setdefault(step, []).append((start, now))
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


def step_intervals(records, offset=0.0):
    """``{step: [(start, stop)]}`` of the computes in a distributed task stream's
    records (``time.time`` on the workers), plus ``offset`` (to another clock).

    >>> step_intervals([{"key": ("store-1", 0), "startstops": [
    ...     {"action": "compute", "start": 5.0, "stop": 7.0}]}], offset=-5.0)
    {'write': [(0.0, 2.0)]}
    """
    intervals = {}
    for r in records:
        spans = intervals.setdefault(task_step(r.get("key", "")), [])
        spans.extend((s["start"] + offset, s["stop"] + offset)
                     for s in r.get("startstops", ()) if s.get("action") == "compute")
    return intervals


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
