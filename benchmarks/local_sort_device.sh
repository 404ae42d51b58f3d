#!/bin/bash
# One device call: the local-sort benchmark, then the GPU tests.  Usage (from the repo root, on the GPU
# machine, with the dask wheels installed when the end-to-end test should run):
#   bash benchmarks/local_sort_device.sh OUTDIR [pytest args] -- [local_sort.py args]
set -o pipefail
OUT=${1:?outdir}; shift
PYT=(); while [ $# -gt 0 ] && [ "$1" != "--" ]; do PYT+=("$1"); shift; done; shift
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv

timeout ${BENCH_TIMEOUT:-400} python3 benchmarks/local_sort.py --out "$OUT" "$@" 2>&1 | tee "$OUT/bench.log" | tail -60
if [ ${#PYT[@]} -gt 0 ]; then
  timeout ${PYTEST_TIMEOUT:-300} python3 -m pytest -p no:cacheprovider -q -ra --durations=8 "${PYT[@]}" 2>&1 | tee "$OUT/pytest.log" | tail -40
fi