"""Shared fixtures."""
import pytest


@pytest.fixture(scope="session")
def cluster_client():
    """A ``distributed.LocalCluster`` of two worker processes on loopback."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        with distributed.Client(cluster, set_as_default=False) as client:
            yield client
