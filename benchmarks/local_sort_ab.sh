#!/usr/bin/env bash
# Compare the local sort of this tree with another tree's on one GPU: the GPU backend
# tests of this tree, then uint32, float64 and uint32+uint32 sorts of 2^28 elements
# (fresh random data each run, each checked against cupy.sort / cupy.lexsort), timed
# in two rounds per tree, alternating, and the ratio new/old of the medians.
#
#     benchmarks/local_sort_ab.sh OLD_TREE [OUT_DIR]
#
# OLD_TREE: a checkout of distsort (its distsort/ is imported; it must have
# distsort.backends.gpu.cupy_backend.sort_inplace).  Writes OUT_DIR/local_sort_ab_<device>_<date>.json
# (default benchmarks/results).  Takes about 3 minutes on an H200; TESTS=0 skips the
# tests (run elsewhere in parallel: alone, one process, they take over 4 minutes).
set -euo pipefail
NEW=$(cd "$(dirname "$0")/.." && pwd)
OLD=$(cd "${1:?usage: local_sort_ab.sh OLD_TREE [OUT_DIR]}" && pwd)
OUT=${2:-$NEW/benchmarks/results}
PY=${PYTHON:-python}
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

cd "$NEW"
if [ "${TESTS:-1}" != 0 ]; then
    PYTHONPATH=$NEW${PYTHONPATH:+:$PYTHONPATH} $PY -m pytest -q -p no:cacheprovider tests/test_cupy_backend.py
fi
for round in 1 2; do
    for side in new old; do
        tree=$NEW; [ $side = old ] && tree=$OLD
        echo "== $side tree ($tree), round $round"
        PYTHONPATH=$tree${PYTHONPATH:+:$PYTHONPATH} $PY benchmarks/local_sort.py \
            --ab "$TMP/$side$round.json" --reps 5
    done
done
PYTHONPATH=$NEW${PYTHONPATH:+:$PYTHONPATH} $PY benchmarks/local_sort.py --ab-report "$TMP"/new*.json --old "$TMP"/old*.json \
    --report-dir "$OUT"
