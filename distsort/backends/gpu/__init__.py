"""The GPU backend: CuPy sorts (bitonic kernels or CUB's radix sort) and their launch plan."""
