#!/bin/bash
# One device call: the local-sort benchmark (with --variants: block-shape variants of
# uint32 2^28), then the GPU tests in three parallel groups under the default tuning,
# and, where a variant was faster, the same tests again under the fastest one
# (DISTSORT_TUNING).  From the repo root, with the dask wheels installed:
#   bash benchmarks/local_sort_device.sh OUTDIR [local_sort.py args]
set -o pipefail
OUT=${1:?outdir}; shift
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv
timeout ${BENCH_TIMEOUT:-400} python3 benchmarks/local_sort.py --out "$OUT" "$@" 2>&1 | tee "$OUT/bench.log" | tail -25
BEST=$(python3 -c "import json,glob; r=json.load(open(glob.glob('$OUT/*.json')[0])); print(json.dumps(r.get('best_tuning') or {}))" 2>/dev/null)
GROUPS_K=("every_size" "key_value or argsort" "not every_size and not key_value and not argsort")
run_tests() {  # $1: log prefix; DISTSORT_TUNING as exported
  for i in 0 1 2; do
    ( timeout ${PYTEST_TIMEOUT:-300} python3 -m pytest -p no:cacheprovider -q -ra tests/test_cupy_backend.py \
        -k "${GROUPS_K[$i]}" > "$OUT/$1_$i.log" 2>&1; echo "group $i rc=$?" >> "$OUT/$1_$i.log" ) &
  done
}
run_tests pytest
if [ -n "$BEST" ] && [ "$BEST" != "{}" ] && ! echo "$BEST" | grep -q '"threads": 128, "smem": 75776, "row_bytes": 128, "regs": \[32'; then
  echo "second test run under DISTSORT_TUNING=$BEST"
  DISTSORT_TUNING="$BEST" run_tests best
fi
wait
for f in "$OUT"/pytest_?.log "$OUT"/best_?.log; do [ -f "$f" ] || continue
  echo "== $f"; grep -E "^(FAILED|ERROR)" "$f" | head -5; tail -n 2 "$f"; done
for p in pytest best; do  # one file each (the device returns at most 8 files)
  ls "$OUT"/${p}_?.log >/dev/null 2>&1 && cat "$OUT"/${p}_?.log > "$OUT/${p}_all.log" && rm "$OUT"/${p}_?.log
done
