#!/usr/bin/env bash
# The local-sort benchmark with block-shape variants, then the GPU backend tests under
# the device's tuning table (distsort/backends/gpu/tuning.py) and, where a variant beat that
# table, again under the fastest variant (DISTSORT_TUNING).  From the repository root:
#   bash benchmarks/local_sort_device.sh OUTDIR [local_sort.py arguments, e.g. --quick]
set -uo pipefail
OUT=${1:?usage: local_sort_device.sh OUTDIR [local_sort.py arguments]}; shift
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # this tree's distsort
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv
"$PYTHON" benchmarks/local_sort.py --variants --out "$OUT" "$@" 2>&1 | tee "$OUT/bench.log" | tail -25
# The fastest variant, or nothing when the tuning table's entries are already its own.
BEST=$("$PYTHON" - "$OUT" <<'PY'
import glob, json, sys
import cupy
from distsort.backends.gpu import tuning
best = json.load(open(sorted(glob.glob(sys.argv[1] + "/local_sort_*.json"))[-1])).get("best_tuning")
table = tuning.table(int(cupy.cuda.Device().compute_capability[:-1]))  # "90" -> 9
same = best is None or all(json.dumps(table.get(k)) == json.dumps(v) for k, v in best.items())
print("" if same else json.dumps(best))
PY
)
GROUPS_K=("every_size" "key_value or argsort" "not every_size and not key_value and not argsort")
run_tests() {  # LOG_PREFIX: the backend tests in three parallel groups, under the environment's tuning
  for i in 0 1 2; do
    ( "$PYTHON" -m pytest -p no:cacheprovider -q -ra tests/test_cupy_backend.py \
        -k "${GROUPS_K[$i]}" > "$OUT/$1_$i.log" 2>&1; echo "group $i rc=$?" >> "$OUT/$1_$i.log" ) &
  done
}
run_tests tests_table
if [ -n "$BEST" ]; then
  echo "second test run under DISTSORT_TUNING=$BEST"
  DISTSORT_TUNING="$BEST" run_tests tests_best
fi
wait
for p in tests_table tests_best; do
  ls "$OUT"/${p}_?.log >/dev/null 2>&1 || continue
  cat "$OUT"/${p}_?.log > "$OUT/$p.log" && rm "$OUT"/${p}_?.log
  echo "== $p"; grep -E "^(FAILED|ERROR)" "$OUT/$p.log" | head -5; grep -E "passed|failed|rc=" "$OUT/$p.log"
done
