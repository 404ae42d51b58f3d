"""The ``distsort`` command: sort .npy and zarr files, run a demo, run the benchmarks.

Examples (shell)::

    distsort sort data.npy sorted.npy --verify
    distsort sort data.npy order.npy --argsort
    distsort sort keys.zarr keys_sorted.zarr --values vals.npy --values-output vals_sorted.npy
    distsort sort big.npy big_sorted.npy --scheduler-file ~/scheduler.json --report rep.html
    distsort demo --size 1GiB --dtype uint32
    distsort bench

Files are read lazily (``.npy`` memory-mapped, zarr chunk by chunk) and written
to a temporary name in the output's directory that is renamed only when the
whole output is written (and verified, with ``--verify``): an interrupted or
failed run leaves no output that looks complete, and never touches the input.
With ``--values`` both outputs are complete before either is renamed, and OUTPUT
is renamed last (see :mod:`distsort.cli.sort`).

Exit status (see :data:`EXIT_CODES`): 0 ok, 1 verification failed, 2 bad usage
or input, 3 runtime failure, 130 interrupted (SIGINT or SIGTERM).

The modules: ``command`` (``main``; ``run``, the executable), ``args`` (the parser),
``sort``, ``demo`` and ``bench`` (the subcommands), ``files``, ``sources`` and
``outputs`` (the arrays on disk), ``verification`` (``--verify``), ``connection`` (the
cluster, or threads of this process for an input that fits in memory), ``disk`` (the
disk floor), ``progress`` and ``metrics`` (running and measuring), ``summary``,
``sizes``, ``errors`` (exit codes) and ``signals``. The names below are re-exported for
scripts and tests; a test that monkeypatches a function patches it in the module that
calls it.
"""
from distsort.cli.args import build_parser
from distsort.cli.command import main
from distsort.cli.errors import (BAD_INPUT, EXIT_CODES, INTERRUPTED, OK, RUNTIME_FAILURE,
                                 VERIFY_FAILED, CLIError, Interrupted)
from distsort.cli.files import NpyFile, ZarrFile, file_kind
from distsort.cli.outputs import Output
from distsort.cli.sources import Source, open_source

__all__ = ["main", "build_parser", "EXIT_CODES", "OK", "VERIFY_FAILED", "BAD_INPUT",
           "RUNTIME_FAILURE", "INTERRUPTED", "CLIError", "Interrupted", "NpyFile", "ZarrFile",
           "file_kind", "Output", "Source", "open_source"]
