"""The CPU backend: NumPy sorts, the reference of every other backend, and their compiled parts."""
