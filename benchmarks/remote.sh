#!/usr/bin/env bash
# Run the benchmark suite on a remote GPU machine and bring its results back.
#
#   bash benchmarks/remote.sh HOST [suite.py arguments]
#   bash benchmarks/remote.sh gpu1 --scenario local_sort gpu_merge
#
# Copies this checkout's tracked files to HOST:$REMOTE_DIR (default distsort-bench, in
# the remote home), runs `benchmarks/suite.py ARGS --out bench-out` there with
# $REMOTE_PYTHON (default python3, whose environment must have distsort's dependencies,
# e.g. `pip install -e ".[cuda12,test]"` once), and copies bench-out/ back to
# bench-out/HOST/ here.  Needs ssh and rsync on both sides.
set -euo pipefail
host=${1:?usage: remote.sh HOST [suite.py arguments]}; shift
dir=${REMOTE_DIR:-distsort-bench}
python=${REMOTE_PYTHON:-python3}
cd "$(dirname "$0")/.."
git ls-files -z | rsync -a --from0 --files-from=- ./ "$host:$dir/"
status=0
ssh "$host" "cd $dir && $python benchmarks/suite.py $(printf '%q ' "$@") --out bench-out" \
  || status=$?
mkdir -p "bench-out/$host"
rsync -a "$host:$dir/bench-out/" "bench-out/$host/"
echo "results in bench-out/$host/ (suite exit status $status)"
exit "$status"
