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
    collect_ignore_glob += ["distsort/backends/gpu/cupy_backend.py",
                            "distsort/backends/share/ipc_backend.py",
                            "distsort/backends/gpu/launcher.py",
                            "distsort/backends/share/cuda_ipc.py",
                            "distsort/backends/gpu/kernels/*.py",
                            "distsort/backends/gpu/tuning.py",
                            "distsort/backends/outofcore/stream_gpu.py",
                            "distsort/backends/outofcore/hostbacked.py"]
