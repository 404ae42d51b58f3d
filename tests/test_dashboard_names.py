"""What a ``distributed`` scheduler shows of a sort: one task prefix per kind of task
(what the dashboard's progress bars, its task stream and ``progress(multi=True)`` group
by) and one task group per kind and round, as the paragraph of docs/dashboard.md says."""
import re
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest

import distsort
from distsort import api
from distsort.core.taskkeys import TASK_KINDS, round_task_kind, task_name, task_round
from distsort.plan.network import plan_network
from test_graph_shared import _shared_numpy

distributed = pytest.importorskip("distributed")

PAGE = Path(__file__).resolve().parents[1] / "docs" / "dashboard.md"
CHUNKS = 8


def page_paragraph():
    text = PAGE.read_text()
    start = text.index("Every round of the network is a Dask layer")
    return " ".join(text[start:text.index("\n\n", start)].split())


def page_prefixes():
    """The task prefixes the page names: ``distsort-...`` in backquotes, without a token."""
    return set(re.findall(r"`(distsort-[a-z-]*[a-z])`", page_paragraph()))


@pytest.fixture(autouse=True)
def full_network():
    """Every chunk sorted alone: groups of a worker's chunks sorted as one
    (``distsort.group``) replace rounds, and the page names their tasks apart."""
    with dask.config.set({"distsort.group": 1}):
        yield


@pytest.fixture(scope="module")
def client():
    with (distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                   dashboard_address=None) as cluster,
          distributed.Client(cluster) as client):
        yield client


def _scheduler_names(dask_scheduler):
    return sorted(dask_scheduler.task_prefixes), sorted(dask_scheduler.task_groups)


def _sort_and_read_names(client, x, **kw):
    """Sort ``x`` (8 chunks) on the cluster, check it, and return the scheduler's task
    prefixes and groups while the result is held (groups go when their tasks do)."""
    dx = da.from_array(x, chunks=-(-len(x) // CHUNKS))
    s = distsort.sort(dx, **kw).persist()
    distributed.wait(s)
    prefixes, groups = client.run_on_scheduler(_scheduler_names)
    assert np.array_equal(s.compute(), np.sort(x))
    del s
    return set(prefixes), groups


def test_prefixes_and_groups_are_the_pages(client, monkeypatch):
    rng = np.random.default_rng()
    x = rng.standard_normal(CHUNKS * 1000 - 37)
    _, groups = _sort_and_read_names(client, x)
    _sort_and_read_names(client, x, verify=True)
    k, v = distsort.sort_by_key(da.from_array(x, chunks=1000), da.from_array(-x, chunks=1000))
    assert np.array_equal(v.compute(), -np.sort(x))
    monkeypatch.setattr(api, "get_backend", lambda meta, share=False: _shared_numpy())
    shared, _ = _sort_and_read_names(client, x)
    prefixes, _ = client.run_on_scheduler(_scheduler_names)
    ours = {p for p in prefixes if p.startswith("distsort-")}

    # One prefix per kind of task (not one "distsort" for all), exactly the page's names.
    assert {f"distsort-{kind}" for kind in TASK_KINDS} <= ours
    assert {"distsort-share", "distsort-done"} <= shared
    assert ours == page_prefixes()

    # One group per kind and round: tasks of a round are ("distsort-low-r03-<token>", i).
    rounds = len(plan_network(CHUNKS))
    seen = {}
    for g in groups:
        if task_round(g) is not None:
            seen.setdefault(round_task_kind(g), set()).add(task_round(g))
    for kind in ("tail", "head"):
        assert seen[kind] == set(range(rounds)), kind
    # The outputs wait for a task of their own: Dask never fuses them with the merges.
    assert not any(re.match(r"distsort-(low|high)-distsort-sort-", g) for g in groups)
    for kind in ("low", "high"):
        assert seen[kind] == set(range(rounds)), kind
    assert task_name("low", "<token>", 3) in page_paragraph()


def test_every_prefix_of_the_api_and_the_command_is_in_readme(client, tmp_path, capsys):
    """Groups (several chunks per worker), the command with --verify, tables and
    lexsort: every distsort task prefix the scheduler saw is one docs/dashboard.md names."""
    from distsort import cli
    rng = np.random.default_rng()
    x = rng.standard_normal(CHUNKS * 1000 - 37)
    with dask.config.set({"distsort.group": "auto"}):
        _sort_and_read_names(client, x)
    np.save(tmp_path / "in.npy", x)
    code = cli.main(["sort", str(tmp_path / "in.npy"), str(tmp_path / "o.npy"), "--verify",
                     "--chunk-size", "1000", "--no-progress",
                     "--scheduler-address", client.scheduler.address])
    assert code == 0, capsys.readouterr().err
    dx = da.from_array(x, chunks=1000)
    sk, (sv,) = distsort.sort_by_key((dx, dx), (dx,))
    np.testing.assert_array_equal(sv.compute(), np.sort(x))
    prefixes, _ = client.run_on_scheduler(_scheduler_names)
    ours = {p for p in prefixes if p.startswith("distsort-")}
    assert {"distsort-group", "distsort-part", "distsort-read", "distsort-verify-summary",
            "distsort-keycodes", "distsort-gather"} <= ours
    named = set(re.findall(r"`(distsort-[a-z-]*[a-z])`", PAGE.read_text()))
    assert ours <= named, ours - named
