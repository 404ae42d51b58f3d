#!/bin/bash
# Where the local sort's time goes.  Per-pass times (CUDA events) under
# the default tuning and the block-shape variants in $VARIANTS (one DISTSORT_TUNING JSON
# per line), then Nsight Compute on the second sort's first $NCU_COUNT passes (uint32
# 2^28), whose per-instruction counts (sass.csv) say what each pass executes.
# From the repository root:  bash benchmarks/profile_device.sh OUTDIR
OUT=${1:?outdir}
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # this tree's distsort
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv
P=benchmarks/pass_profile.py
{
  for spec in "--n 268435456" "--n 268435456 --dtype float64" "--n 268435456 --values uint32"; do
    python3 $P $spec --runs 3 | grep -v "^  [A-Z]"
  done
  echo "${VARIANTS:-}" | while read -r tune; do
    [ -z "$tune" ] && continue
    echo "== DISTSORT_TUNING=$tune"
    DISTSORT_TUNING="$tune" python3 $P --n 268435456 --runs 3 | grep -v "^  [A-Z]"
  done
  python3 $P --n 268435456 --runs 3
} 2>&1 | tee $OUT/passes.log
ncu --clock-control none --kernel-name regex:bitonic_pass --launch-skip 30 \
  --launch-count ${NCU_COUNT:-21} --section SpeedOfLight --section WarpStateStats \
  --section InstructionStats --section SourceCounters --section SchedulerStats \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  -f -o $OUT/prof python3 $P --n 268435456 --runs 0 > $OUT/ncu_run.log 2>&1
tail -3 $OUT/ncu_run.log
ncu -i $OUT/prof.ncu-rep --page details > $OUT/details.txt 2>&1
ncu -i $OUT/prof.ncu-rep --page source --csv --print-source sass > $OUT/sass.csv 2>&1
rm -f $OUT/prof.ncu-rep; gzip -f $OUT/sass.csv; ls -la $OUT
