#!/usr/bin/env bash
# Compare the distributed sort of this tree with another tree's on one GPU: the network
# strategy forced (distsort.strategy=network) on one dask-cuda worker, float32 of 4 and
# 16 GiB in 8 persisted chunks.  Each tree runs its own benchmarks/distributed_sort.py,
# on a cluster of its own, in rounds that alternate old, new, new, old (drift in the
# machine's state falls on both alike); then the median of every timed run of each tree
# per size, and the ratio new/old.
#
#     benchmarks/distributed_ab.sh OLD_TREE OUT_JSON
#
# OLD_TREE: a checkout of distsort.  ROUNDS (default 2) runs per tree; NEW_NAME and
# OLD_NAME name the trees in the report.  About a minute per round on an H200.
set -uo pipefail
NEW=$(cd "$(dirname "$0")/.." && pwd)
OLD=$(cd "${1:?usage: distributed_ab.sh OLD_TREE OUT_JSON}" && pwd)
OUT=${2:?usage: distributed_ab.sh OLD_TREE OUT_JSON}
PY=${PYTHON:-python}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

run() {  # run SIDE ROUND
    local tree=$NEW
    [ "$1" = old ] && tree=$OLD
    echo "== $1 tree ($tree), round $2"
    DASK_DISTSORT__STRATEGY=network PYTHONPATH=$tree${PYTHONPATH:+:$PYTHONPATH} \
        timeout "${SIDE_TIMEOUT:-150}" $PY "$tree/benchmarks/distributed_sort.py" --gpus 1 \
        --sizes 4GiB 16GiB --dtypes float32 --chunks-per-gpu 8 --out "$TMP/$1$2.json" \
        2>&1 | grep -E "^1 GPU|Error|error" || echo "   (no row printed)"
}
for round in $(seq "${ROUNDS:-2}"); do
    if [ $((round % 2)) = 1 ]; then run old "$round"; run new "$round"
    else run new "$round"; run old "$round"; fi
done
PYTHONPATH=$NEW${PYTHONPATH:+:$PYTHONPATH} $PY "$NEW/benchmarks/distributed_sort.py" \
    --ab-report "$TMP"/new*.json --old "$TMP"/old*.json --out "$OUT" \
    --trees "${NEW_NAME:-$(git -C "$NEW" rev-parse --short HEAD 2>/dev/null || echo "$NEW")}" \
    "${OLD_NAME:-$OLD}" --what "the network strategy forced (DASK_DISTSORT__STRATEGY=network) \
on one dask-cuda worker, float32 in 8 persisted chunks; each tree's own benchmarks/distributed_sort.py \
--gpus 1 --sizes 4GiB 16GiB --dtypes float32 --chunks-per-gpu 8 (median of 3 after a warm-up) in \
${ROUNDS:-2} rounds per tree, alternating old, new, new, old; runs: every timed run of each tree"
