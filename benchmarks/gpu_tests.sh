#!/usr/bin/env bash
# The GPU tests (-m gpu) of this tree on one GPU, in about five minutes: the modules that
# start no cluster under pytest-xdist, the cluster modules one after another beside them,
# and a summary line per group.  From the repository root:
#
#     bash benchmarks/gpu_tests.sh OUTDIR [extra pytest arguments]
#
# Writes OUTDIR/gpu_tests.log (the summary) and one log per group (four files).  Exit status: 0 when no
# group failed.  Modules without a GPU test exit 5 ("deselected") and count as passed.
set -uo pipefail
OUT=${1:?usage: gpu_tests.sh OUTDIR [pytest arguments]}; shift
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
NO_CLUSTER=(tests/test_cub_order.py tests/test_cupy_backend.py tests/test_hostbacked.py
            tests/test_kway.py tests/test_memory.py tests/test_passes.py tests/test_sort_high.py)
BESIDE=(tests/test_out_of_core.py tests/test_cupy_local.py tests/test_api.py tests/test_fuzz.py
        tests/test_tables.py)
CLUSTER=(test_distributed_gpu test_shared_gpu test_held test_cli test_placement test_deploy
         test_device_bytes test_cluster test_faults test_sortplan test_one_device)
# Any other module with GPU tests (a new one) runs in the cluster group.
for f in $(grep -l "mark.gpu\|GPU_ONLY\|BACKENDS" tests/test_*.py); do
    m=$(basename "$f" .py)
    case " ${NO_CLUSTER[*]} ${BESIDE[*]} ${CLUSTER[*]} " in
        *"$m"*) ;;
        *) CLUSTER+=("$m") ;;
    esac
done
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu_tests.log"
status=0
( $PY -m pytest -q -p no:cacheprovider -m gpu -n 8 --dist load "${NO_CLUSTER[@]}" "$@" \
    > "$OUT/no_cluster.log" 2>&1; echo "rc=$?" >> "$OUT/no_cluster.log" ) &
( $PY -m pytest -q -p no:cacheprovider -m gpu -n 4 "${BESIDE[@]}" "$@" \
    > "$OUT/beside.log" 2>&1; echo "rc=$?" >> "$OUT/beside.log" ) &
for m in "${CLUSTER[@]}"; do
    $PY -m pytest -q -p no:cacheprovider -m gpu "tests/$m.py" "$@" > "$OUT/one.log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 5 ] && status=1
    { echo "## $m rc=$rc"; cat "$OUT/one.log"; } >> "$OUT/cluster.log"
    echo "$m rc=$rc $(tail -n 1 "$OUT/one.log")" | tee -a "$OUT/gpu_tests.log"
done
wait
for g in no_cluster beside; do
    rc=$(grep -o "^rc=[0-9]*" "$OUT/$g.log" | tail -n 1)
    [ "$rc" != "rc=0" ] && status=1
    echo "$g $rc $(grep -E "passed|failed" "$OUT/$g.log" | tail -n 1)" | tee -a "$OUT/gpu_tests.log"
done
rm -f "$OUT/one.log"
grep -hE "^(FAILED|ERROR)" "$OUT"/*.log | head -40 | tee -a "$OUT/gpu_tests.log"
exit $status
