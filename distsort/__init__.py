"""distsort: sort Dask arrays too large for one GPU.

Each chunk is sorted in place (bitonic kernels on the GPU, NumPy on the CPU),
then the chunks are merged by a bitonic network of compare-splits that a Dask
graph runs across workers.

>>> import dask.array as da, distsort
>>> x = da.random.default_rng(0).random(1_000_000, chunks=250_000)
>>> s = distsort.sort(x)
>>> bool((s[1:] >= s[:-1]).all().compute())
True
"""
__version__ = "0.1.0"
__all__ = ["sort", "argsort", "sort_by_key", "lexsort", "quantile", "percentile", "median",
           "nanquantile", "nanpercentile", "nanmedian", "topk", "argtopk", "unique",
           "searchsorted", "VerificationError", "__version__"]

# What type checkers see (they take any name TYPE_CHECKING for typing's, which
# ``import distsort`` does not import): the public functions' own signatures.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from distsort.api import argsort, sort
    from distsort.graph.verify import VerificationError
    from distsort.tables import lexsort, sort_by_key

#: Public functions imported from ``distsort.api`` on first use: ``api`` imports
#: ``dask.array``, which imports xarray and pandas where they are installed (about a
#: second on a 2-core machine), and the ``distsort`` command starts its disk
#: measurement and reading before it needs them.
_LAZY_FUNCTIONS = {"sort": "api", "argsort": "api", "sort_by_key": "tables", "lexsort": "tables",
                   **dict.fromkeys(("quantile", "percentile", "median", "nanquantile",
                                    "nanpercentile", "nanmedian", "topk", "argtopk",
                                    "unique", "searchsorted"), "select")}
#: Submodules reachable as attributes of ``distsort`` without importing them first;
#: imported on first use, so ``import distsort`` stays light (``cluster`` imports
#: distributed and, on GPU machines, dask-cuda).
_LAZY_SUBMODULES = ("cluster",)


#: ... and classes, from their modules: ``import distsort`` imports nothing (NumPy
#: takes a quarter of a second), so that the command handles signals at once.
_LAZY_CLASSES = {"VerificationError": "graph.verify"}


def __getattr__(name: str) -> object:
    import importlib
    if name in _LAZY_CLASSES:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY_CLASSES[name]}"), name)
    if name in _LAZY_FUNCTIONS:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY_FUNCTIONS[name]}"), name)
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_FUNCTIONS) | set(_LAZY_SUBMODULES)
                  | set(_LAZY_CLASSES))
