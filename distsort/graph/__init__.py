"""The graph floor: plan + backend -> Dask layers (names and tasks, no data), the gather of
small arrays, and the checks of ``verify=``."""
