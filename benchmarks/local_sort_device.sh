#!/bin/bash
# One device call: the local-sort benchmark, then the GPU tests in three parallel
# groups (the GPU is shared only after the timings are taken).  From the repo root,
# with the dask wheels installed where the end-to-end test should run:
#   bash benchmarks/local_sort_device.sh OUTDIR [local_sort.py args]
set -o pipefail
OUT=${1:?outdir}; shift
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv
timeout ${BENCH_TIMEOUT:-400} python3 benchmarks/local_sort.py --out "$OUT" "$@" 2>&1 | tee "$OUT/bench.log" | tail -45
GROUPS_K=("every_size" "key_value or argsort" "not every_size and not key_value and not argsort")
for i in 0 1 2; do
  ( timeout ${PYTEST_TIMEOUT:-300} python3 -m pytest -p no:cacheprovider -q -ra tests/test_cupy_backend.py \
      -k "${GROUPS_K[$i]}" > "$OUT/pytest_$i.log" 2>&1; echo "group $i rc=$?" >> "$OUT/pytest_$i.log" ) &
done
wait
for i in 0 1 2; do grep -E "^(FAILED|ERROR)" "$OUT/pytest_$i.log" | head -8; tail -n 2 "$OUT/pytest_$i.log"; done
