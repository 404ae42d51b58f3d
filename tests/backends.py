"""Which backends the tests can run: NumPy always, CuPy where it sees a GPU."""
import pytest

try:
    import cupy
    GPU = cupy.cuda.runtime.getDeviceCount() > 0
except Exception:  # no CuPy, no driver
    cupy, GPU = None, False

#: The marks of a module of GPU tests (``pytestmark = GPU_ONLY``): marked ``gpu`` and
#: skipped where CuPy or a GPU is missing, so that the module imports on any machine.
GPU_ONLY = [pytest.mark.gpu, pytest.mark.skipif(not GPU, reason="needs CuPy and a CUDA GPU")]

#: Parameters for tests written once for both backends; CuPy cases are marked ``gpu``.
BACKENDS = ["numpy", pytest.param("cupy", marks=[
    pytest.mark.gpu, pytest.mark.skipif(not GPU, reason="needs CuPy and a CUDA GPU")])]
