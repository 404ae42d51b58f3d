"""CUDA sources of the GPU backend (``sort.cu``, its kernels; the ``*.cuh`` headers it
includes, by role) and their loader (``loader.get_module``)."""
