"""The command line: the ``distsort`` parser and its three subcommands.

Light to import: ``distsort --help`` and a usage error import neither NumPy nor Dask;
each subcommand's module is imported when the subcommand runs (:func:`_subcommand`).
"""
import argparse
import sys

from distsort.cluster import DEVICE_MEMORY_FRACTION
from distsort.cli.errors import EXIT_CODES
from distsort.cli.options import memory_limit_arg, scheduler_address_arg, workers_arg
from distsort.cli.sizes import parse_bytes_arg, parse_chunk_size
from distsort.cli.streams import is_terminal

VERIFY_HELP = ("check the output before publishing it: sorted, and a permutation of the "
               "input by count and 64-bit checksums, computed on each chunk as it is read "
               "and before it is written (a few %% of the time); --verify=reread also reads "
               "the written output back (one more pass)")
VALUES_HELP = ("values to move with the keys (sort_by_key); needs --values-output. Both "
               "outputs are written under temporary names and renamed only when both are "
               "complete (and verified, with --verify): the values first, OUTPUT last, so "
               "that OUTPUT appears only when both are in place. A failure or interrupt "
               "removes both temporaries and undoes a rename already done")


def _subcommand(module, name):
    """The subcommand ``name`` of ``distsort.cli.<module>``, imported when it runs."""
    def run(args):
        import importlib
        return getattr(importlib.import_module(f"distsort.cli.{module}"), name)(args)
    run.__name__ = name
    return run


cmd_sort = _subcommand("sort", "cmd_sort")
cmd_demo = _subcommand("demo", "cmd_demo")
cmd_bench = _subcommand("bench", "cmd_bench")


def _cluster_options(p, local_workers=True):
    g = p.add_argument_group("cluster (default: a local cluster; GPUs when present)")
    x = g.add_mutually_exclusive_group()
    x.add_argument("--scheduler-address", metavar="ADDR", type=scheduler_address_arg,
                   help="connect to a running scheduler, e.g. tcp://10.0.0.1:8786")
    x.add_argument("--scheduler-file", metavar="FILE",
                   help="connect to the scheduler that wrote FILE "
                        "(dask scheduler --scheduler-file)")
    g.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto",
                   help="GPU workers with CuPy chunks, or CPU workers (default: GPUs when "
                        "CuPy sees one; for a running cluster, when every worker does)")
    g.add_argument("--device-memory-limit", type=parse_bytes_arg, metavar="BYTES",
                   help="GPU memory a worker's sort may hold, e.g. 8GB: a larger input is "
                        "sorted out of core, in runs through host memory (default: the "
                        "workers' dask-cuda limit; in a local cluster "
                        f"{100 * DEVICE_MEMORY_FRACTION:.0f}%% of each GPU)")
    if local_workers:
        g.add_argument("--workers", type=workers_arg, metavar="N",
                       help="local cluster: worker processes (default: one per GPU or core; "
                            "an input that fits this host is sorted by threads of this "
                            "process, on GPU 0 where there is one, which start at once)")
        g.add_argument("--memory-limit", metavar="BYTES", type=memory_limit_arg,
                       help="local CPU cluster: memory per worker, e.g. 2GiB; chunks spill to "
                            "disk beyond 70%% of it (default: this host's memory, shared)")
        g.add_argument("--spill-dir", metavar="DIR",
                       help="local cluster: directory for spilled chunks (default: $TMPDIR)")
    g.add_argument("--progress", action=argparse.BooleanOptionalAction,
                   default=is_terminal(sys.stdout),
                   help="show progress bars (default: when stdout is a terminal)")
    g.add_argument("--chunk-size", type=parse_chunk_size, metavar="SIZE",
                   help="chunk size: bytes of keys (256MiB) or elements (1000000); default "
                        "1 GiB on GPUs, 1/16 of a worker's memory (4 MiB..256 MiB) on CPUs")


def _add_sort(sub, exits):
    s = sub.add_parser(
        "sort", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="sort a .npy file or a zarr array into a new one",
        description="Sort the 1-D array in INPUT (.npy or .zarr) into OUTPUT (.npy or .zarr). "
                    "Nothing is loaded whole: .npy files are memory-mapped, zarr read by "
                    "chunk, and workers spill to disk. OUTPUT is written under a temporary "
                    "name in its directory and renamed when complete; INPUT is never modified.",
        epilog="examples:\n  distsort sort data.npy sorted.npy --verify\n"
               "  distsort sort data.npy big.zarr --workers 2 --memory-limit 2GiB\n"
               "  distsort sort keys.npy k.npy --values v.npy --values-output v_sorted.npy\n"
               "  distsort sort keys.npy k.npy --values v.npy --values-output v2.npy --stable\n"
               "  distsort sort data.npy order.npy --argsort --scheduler-file sched.json\n"
               f"\nexit status:\n{exits}")
    s.add_argument("input", metavar="INPUT", help="1-D array: a .npy file or a .zarr directory")
    s.add_argument("output", metavar="OUTPUT", help="where to write the result (.npy or .zarr)")
    s.add_argument("--descending", action="store_true",
                   help="largest first (NaNs and NaTs still last)")
    s.add_argument("--argsort", action="store_true",
                   help="write the int64 indices that sort INPUT (stable) instead of the keys")
    s.add_argument("--values", metavar="FILE", help=VALUES_HELP)
    s.add_argument("--values-output", metavar="FILE", help="where to write the moved values")
    s.add_argument("--stable", action="store_true",
                   help="with --values: equal keys keep their input order (default: ordered "
                        "by value); keys alone and --argsort are stable already")
    s.add_argument("--verify", nargs="?", const="fused", choices=("fused", "reread"),
                   help=VERIFY_HELP)
    s.add_argument("--report", metavar="FILE.html",
                   help="write a Dask performance report (a sort in this process: Dask's "
                        "task and resource profiles)")
    s.add_argument("--overwrite", action="store_true",
                   help="replace an existing OUTPUT: only what is there when the run starts "
                        "(a file that replaces it meanwhile is kept, exit 2)")
    s.add_argument("--host-memory-limit", type=parse_bytes_arg, metavar="BYTES",
                   help="host memory a sort in this process may hold, e.g. 8GB: an input "
                        "larger than a third of it is sorted through the disk (sorted runs "
                        "written into OUTPUT's temporary, then one k-way merge; .npy "
                        "outputs, on the CPU). Default: the memory available, of which "
                        "that sort takes half")
    _cluster_options(s)
    s.set_defaults(func=cmd_sort)


def _add_demo(sub):
    d = sub.add_parser("demo", help="sort fresh random data and check it against numpy.sort",
                       description="Sort random data on the default cluster (the local "
                                   "scheduler, or local GPUs when present) and verify it.")
    d.add_argument("--size", type=parse_bytes_arg, default="256MiB", metavar="BYTES",
                   help="bytes of keys (default 256MiB)")
    d.add_argument("--dtype", default="float32", help="key dtype (default float32)")
    d.add_argument("--seed", type=int, help="random seed (default: fresh, printed)")
    _cluster_options(d, local_workers=False)
    d.set_defaults(func=cmd_demo)


def _add_bench(sub):
    b = sub.add_parser("bench", help="run the benchmark scenarios in benchmarks/",
                       description="Run the named scenarios of benchmarks/suite.py (or a "
                                   "script of benchmarks/ by its name). Default: the CPU "
                                   "scenarios without a GPU, every scenario with one. "
                                   "Arguments after -- go to the suite (or the script), e.g. "
                                   "distsort bench cpu_sort -- --quick")
    b.add_argument("scenarios", nargs="*", metavar="SCENARIO")
    b.add_argument("--list", action="store_true",
                   help="list the scenarios (name, GPUs, what it measures)")
    b.add_argument("--out", metavar="DIR",
                   help="directory for the scenarios' JSON results (default: the working "
                        "directory)")
    b.set_defaults(func=cmd_bench, extra=[])


def build_parser():
    from distsort import __version__
    exits = "\n".join(f"  {k:<4}{v}" for k, v in EXIT_CODES.items())
    parser = argparse.ArgumentParser(
        prog="distsort", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Sort arrays too large for one GPU (or for memory) with Dask.",
        epilog=f"exit status:\n{exits}")
    parser.add_argument("--version", action="version", version=f"distsort {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_sort(sub, exits)
    _add_demo(sub)
    _add_bench(sub)
    return parser
