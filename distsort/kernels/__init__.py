"""CUDA sources of the GPU backend (``sort.cu``, ``bitonic.cuh``, ``order.cuh``) and
their loader (``loader.get_module``)."""
