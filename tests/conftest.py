"""Shared fixtures."""
import json
import os

import pytest


@pytest.fixture(scope="module", autouse=True)
def report_counts(request):
    """With ``DISTSORT_COUNTS=<file>``, append a test module's ``COUNTS`` (faults injected,
    inputs tried, results checked, ...) to that file, for the reliability report."""
    yield
    counts = getattr(request.module, "COUNTS", None)
    if counts is not None and os.environ.get("DISTSORT_COUNTS"):
        with open(os.environ["DISTSORT_COUNTS"], "a") as f:
            f.write(json.dumps({"module": request.module.__name__, **counts}) + "\n")


@pytest.fixture(autouse=True)
def network_strategy(request):
    """Most tests check the network of compare-splits on Dask's local schedulers, where
    a sort that fits this process would otherwise run as one task (the "one-device"
    strategy, ``distsort.plan.sortplan``): they run with ``distsort.strategy="network"``.
    A test module with ``STRATEGY = "auto"`` (``test_one_device.py``,
    ``test_config.py``) runs the default plan."""
    import dask

    import distsort.core.config  # noqa: F401  (its defaults first: leaving the set below
    # would otherwise drop every "distsort" key the import loaded meanwhile)
    if getattr(request.module, "STRATEGY", "network") == "auto":
        yield
        return
    with dask.config.set({"distsort.strategy": "network"}):
        yield


@pytest.fixture(scope="session")
def cluster_client():
    """A ``distributed.LocalCluster`` of two worker processes on loopback."""
    distributed = pytest.importorskip("distributed")
    with (distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                   host="127.0.0.1", dashboard_address=None) as cluster,
          distributed.Client(cluster, set_as_default=False) as client):
        yield client


#: Tests that take more than a few seconds on a 2-core machine (``--durations``), by
#: module and test function (``None``: every test of the module), marked ``slow`` here
#: so that ``pytest -m "not slow"`` is a quick subset.  Tests may also carry the mark
#: themselves.
SLOW = {
    "test_kernels_emulated.py": None,  # each test runs the kernels' C++ emulation
    "test_fuzz.py": None,              # property tests with many examples
    "test_kill.py": None,              # the command started and interrupted, many times
    "test_cli.py": {"test_out_of_core_small", "test_signal_subprocess",
                    "test_local_cluster_default_chunks"},
    "test_faults.py": {"test_worker_killed_mid_sort_gives_the_right_result_or_a_clear_error"},
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = SLOW.get(item.path.name, ())
        if names is None or getattr(item, "originalname", item.name) in names:
            item.add_marker(pytest.mark.slow)
