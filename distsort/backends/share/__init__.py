"""CuPy chunks shared in place by the GPU workers of one host (CUDA IPC), and their backend."""
