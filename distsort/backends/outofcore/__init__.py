"""Out-of-core sorts: sorted runs in host memory, merged by a CPU or a GPU engine."""
