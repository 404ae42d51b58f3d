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


@pytest.fixture(scope="session")
def cluster_client():
    """A ``distributed.LocalCluster`` of two worker processes on loopback."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        with distributed.Client(cluster, set_as_default=False) as client:
            yield client
