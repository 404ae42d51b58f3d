"""Doctest collection: GPU modules are only imported where CuPy is installed."""
import importlib.util

collect_ignore_glob = []
if importlib.util.find_spec("cupy") is None:
    collect_ignore_glob += ["distsort/backends/cupy.py", "distsort/kernels/*.py",
                            "distsort/backends/tuning.py"]
