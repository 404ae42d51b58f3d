#!/usr/bin/env bash
# The GPU runs of the distributed issues, in stages that each fit one device call:
#   bash benchmarks/device_x2.sh tests|bench|largest|shared|outofcore|deploy
# Needs the wheels of ../shared/device/wheels.sh in .whl/ (dask, dask-cuda, UCX, RMM).
# Logs and JSON go to $OUT (the device tool brings them back).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl >/dev/null 2>&1 || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD
export DASK_DISTRIBUTED__LOGGING__DISTRIBUTED=warning
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv | tee "$OUT/gpus.txt"
nvidia-smi topo -m >> "$OUT/gpus.txt" 2>&1
for stage in "$@"; do
  echo "=== $stage $(date +%T)"
  case $stage in
    tests)
      python3 -m pytest -q -m gpu -x -p no:cacheprovider tests/ --timeout=500 2>&1 \
        | tee "$OUT/gpu_tests.log" | grep -vE "^(INFO|distributed\.)" | tail -30 ;;
    outofcore)
      DISTSORT_BIG=1 python3 -m pytest -q -s -p no:cacheprovider \
        tests/test_distributed_gpu.py::test_out_of_core_one_gpu_spills 2>&1 \
        | tee "$OUT/outofcore.log" | grep -vE "^(INFO|distributed\.)" | tail -15 ;;
    bench)
      python3 benchmarks/distributed_sort.py --gpus 1 2 --sizes 4GiB 8GiB 16GiB 32GiB 64GiB \
        --dtypes float32 uint64 --runs 3 --one-chunk --max-bytes-per-gpu 32GiB \
        --out "$OUT/distributed_sort.json" 2>&1 | tee "$OUT/bench.log" \
        | grep -vE "^(INFO|distributed\.)" | tail -30 ;;
    largest)
      python3 benchmarks/distributed_sort.py --gpus 2 --largest 160GB --dtypes uint32 \
        --chunks-per-gpu 8 --out "$OUT/largest_sort.json" 2>&1 | tee "$OUT/largest.log" \
        | grep -vE "^(INFO|distributed\.)" | tail -10 ;;
    shared)
      for w in 2 4; do
        python3 benchmarks/distributed_sort.py --gpus 2 --workers-per-gpu $w \
          --sizes 4GiB 16GiB --dtypes float32 uint64 --runs 2 \
          --out "$OUT/shared_gpus_w$w.json" 2>&1 | tee "$OUT/shared_w$w.log" \
          | grep -vE "^(INFO|distributed\.)" | tail -8
      done ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
echo "=== done $(date +%T)"
