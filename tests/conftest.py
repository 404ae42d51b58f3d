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
    pytest.importorskip("distributed")
    from arrays import loopback_client
    with loopback_client(2) as client:
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

#: The quick tier (``pytest -m quick``, README): tests of a few seconds at most on a
#: 2-core machine that together touch every floor of docs/architecture.md (the command,
#: the public API, clusters, graphs, plans, backends, the core; the floor of each module
#: is named beside it), by module and test function as in ``SLOW``.  A test marked
#: ``slow`` is never quick.  ``tests/test_readme.py`` checks that every floor is touched.
QUICK = {
    "test_cli.py": {"test_in_process_summary", "test_demo_local_scheduler",   # cli
                    "test_help_documents_exit_codes", "test_missing_input",
                    "test_out_of_core_routing"},
    "test_api.py": {"test_sort", "test_numpy_and_list_inputs_give_numpy_arrays_at_once",  # api
                    "test_graph_names_are_deterministic_and_build_touches_no_data"},
    "test_tables.py": {"test_lexsort_matches_numpy"},                          # api
    "test_cluster.py": {"test_keeps_reads_the_chunk_position",                 # scheduling
                        "test_plugin_registration_without_a_client_or_when_it_fails",
                        "test_connect_errors", "test_cuda_cluster_with_ucx"},
    "test_held.py": {"test_held_keys_and_held_arguments_are_no_dependencies",  # scheduling
                     "test_host_view_refuses_what_is_not_one_copy_of_the_bytes"},
    "test_verify.py": {"test_verified_graph_gates_every_output_chunk_and_touches_no_data",
                       "test_summary_sums_are_order_independent_and_see_one_bit"},  # graph
    "test_graph_shared.py": {"test_exchange_setting", "test_shared_graph_sorts"},  # graph
    "test_plan.py": None,                                                      # plan
    "test_sortplan.py": None,                                                  # plan
    "test_onehost.py": {"test_auto_chooses_kway_where_one_process_has_cores_and_room",
                        "test_the_public_api_takes_the_strategy_and_verifies"},  # plan, api
    "test_merge.py": {"test_merge_fallback_without_numba",                     # backends
                      "test_keyed_sort_matches_lexsort"},
    "test_passes.py": None,                                                    # backends
    "test_order.py": None,                                                     # base
    "test_config.py": None,                                                    # base
    "test_memory.py": None,                                                    # base
    "test_layers.py": None,  # the floors themselves
    "test_readme.py": {"test_readme_has_blocks", "test_ci_runs_the_readme_test_command",
                       "test_marks_name_real_tests", "test_quick_tier_touches_every_floor"},
}


def _named(table, item):
    names = table.get(item.path.name, ())
    return names is None or getattr(item, "originalname", item.name) in names


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _named(SLOW, item):
            item.add_marker(pytest.mark.slow)
        if _named(QUICK, item) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.quick)
