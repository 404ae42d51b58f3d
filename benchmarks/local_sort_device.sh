#!/bin/bash
# One device call: compile the kernels (in parallel, into CuPy's disk cache), run the
# GPU tests, then the local-sort benchmark.  Usage (from the repo root, on the GPU
# machine, with the dask wheels installed when the end-to-end test should run):
#   bash benchmarks/local_sort_device.sh OUTDIR [pytest args] -- [local_sort.py args]
set -o pipefail
OUT=${1:?outdir}; shift
PYT=(); while [ $# -gt 0 ] && [ "$1" != "--" ]; do PYT+=("$1"); shift; done; shift
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv
python3 - <<'PY'
import multiprocessing as mp, time
PAIRS = [(k, None) for k in ["bool","int8","int16","int32","int64","uint8","uint16","uint32",
         "uint64","float16","float32","float64"]]
PAIRS += [(k, "int64") for k, _ in PAIRS]
PAIRS += [(k, v) for k in ("float32","int16","float64") for v in
          ("bool","int8","float16","uint32","float32","float64")]
PAIRS += [("uint32","uint32"), ("int64","float32"), ("uint8","float32")]
def build(pair):
    from distsort.backends import cupy as cpb
    from distsort.kernels.loader import get_module
    k, v = pair
    tile, regs, threads, _, _ = cpb._config(k, v)
    t = time.time(); get_module(k, v, regs, threads); return time.time() - t
if __name__ == "__main__":
    t = time.time()
    with mp.get_context("spawn").Pool(14) as pool:
        times = pool.map(build, sorted(set(PAIRS), key=str))
    print(f"compiled {len(times)} modules in {time.time()-t:.1f} s (each {min(times):.1f}..{max(times):.1f} s)")
PY
if [ ${#PYT[@]} -gt 0 ]; then
  timeout ${PYTEST_TIMEOUT:-300} python3 -m pytest -p no:cacheprovider -q -ra --durations=8 "${PYT[@]}" 2>&1 | tee "$OUT/pytest.log" | tail -40
fi
timeout ${BENCH_TIMEOUT:-400} python3 benchmarks/local_sort.py --out "$OUT" "$@" 2>&1 | tee "$OUT/bench.log" | tail -60
