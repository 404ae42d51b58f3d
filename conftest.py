"""Doctest collection: GPU modules are only imported where CuPy sees a GPU."""
import importlib.util


def _gpu_visible():
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no driver, no device: CuPy imports but cannot run
        return False


collect_ignore_glob = []
if not _gpu_visible():
    collect_ignore_glob += ["distsort/backends/cupy.py", "distsort/backends/cupy_ipc.py",
                            "distsort/backends/launcher.py",
                            "distsort/backends/cuda_ipc.py", "distsort/kernels/*.py",
                            "distsort/backends/tuning.py", "distsort/backends/stream_gpu.py",
                            "distsort/backends/hostbacked.py"]
