"""The base floor: key orders as unsigned codes, NumPy or CuPy, memory sizes, configuration,
the dask-cuda store, the system calls of file writes and the task-key protocol."""
