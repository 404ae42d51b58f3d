#!/usr/bin/env bash
# The GPU runs of the distributed issues, in stages; one call of at most 10 minutes
# takes mixed (about 6 minutes), another tests2 + big (about 4); tests1 and outofcore
# need one GPU only (the kind nvidia-h200 does):
#   bash benchmarks/device_x2.sh variants|split|mixed|final|verify|big|big2|backend_ooc|merge|passes|kernels|full|transfer|tests1|tests2|local|bench2|bench1|latency|largest|shared|outofcore|deploy
# RUNS=1 times one run per case after the warm-up (default 2); SIZES1, SIZES2 and DTYPES
# narrow bench1 and bench2; BACKEND_TIMEOUT (default 400 s) bounds the backend tests (170
# tests took 289 s on an H200; the 280 s they had stopped them at 84 %, device_x27).
# Needs the wheels of ../shared/device/wheels.sh in .whl/ (dask, dask-cuda, UCX, RMM).
# Logs and JSON go to $OUT (the device tool brings them back).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
[ -f /tmp/site/.installed ] || { python3 -m pip install -q --no-index --no-deps --no-compile \
  --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1 \
  && touch /tmp/site/.installed; } || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHON=python3
export DASK_DISTRIBUTED__LOGGING__DISTRIBUTED=warning
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv | tee "$OUT/gpus.txt"
nvidia-smi topo -m >> "$OUT/gpus.txt" 2>&1
outofcore_test() {  # TIMEOUT: the 32 GiB out-of-core test, its log in $OUT/outofcore.log
  DISTSORT_BIG=1 timeout "$1" python3 -m pytest -q -s -p no:cacheprovider \
    tests/test_distributed_gpu.py::test_out_of_core_one_gpu_spills 2>&1 \
    | grep -vE "^(INFO|distributed\.)" > "$OUT/outofcore.log"
  echo "outofcore rc=${PIPESTATUS[0]}" >> "$OUT/outofcore.log"
}
backend_tests() {  # GPU TIMEOUT [PYTEST ARGS]: tests/test_cupy_backend.py, log and rc in
                   # $OUT/cupy_backend_tests.log
  local gpu=$1 limit=$2; shift 2
  CUDA_VISIBLE_DEVICES=$gpu timeout "$limit" python3 -m pytest -q -p no:cacheprovider "$@" \
    tests/test_cupy_backend.py > "$OUT/cupy_backend_tests.log" 2>&1
  echo "cupy backend tests rc=$?" >> "$OUT/cupy_backend_tests.log"
}
one_gpu_tests() {  # GPU TIMEOUT [PYTEST ARGS]: every GPU test that needs one GPU but the
                   # backend and out-of-core ones, log and rc in $OUT/gpu_tests_1gpu.log
  local gpu=$1 limit=$2; shift 2
  CUDA_VISIBLE_DEVICES=$gpu timeout "$limit" python3 -m pytest -q -m gpu -p no:cacheprovider "$@" \
    tests/ --ignore=tests/test_cupy_backend.py \
    -k "not 2gpu and not 1gpu-tcp and not gpu_workers_with_ucx and not out_of_core" 2>&1 \
    | grep -vE "^(INFO|distributed\.|WARNING)" > "$OUT/gpu_tests_1gpu.log"
  echo "one-GPU tests rc=${PIPESTATUS[0]}" >> "$OUT/gpu_tests_1gpu.log"
}
summarize() {  # LOG...: per $OUT/LOG.log, its failures, the out-of-core lines and its end
  local f
  for f in "$@"; do echo "== $f"
    grep -E "^(FAILED|ERROR)|memory tiers|sorted and verified" "$OUT/$f.log" | tail -8
    tail -2 "$OUT/$f.log"; done
}
time_kernels() {  # GPU 0: every pass of the target sorts (stage passes), then local_sort.py --quick
  bash "$0" passes
  CUDA_VISIBLE_DEVICES=0 timeout 150 python3 benchmarks/local_sort.py --quick --out "$OUT" \
    > "$OUT/local.log" 2>&1
}
make_deploy_input() {  # 16 GiB of float32 in a .npy, written in 1 GiB pieces
  mkdir -p /tmp/deploy
  python3 - /tmp/deploy/in.npy <<'PY'
import sys, numpy as np
out = np.lib.format.open_memmap(sys.argv[1], mode="w+", dtype=np.float32, shape=(4 * 2**30,))
rng = np.random.default_rng()
for i in range(0, out.size, 2**28):
    out[i:i + 2**28] = rng.standard_normal(2**28, dtype=np.float32)
out.flush()
PY
  touch /tmp/deploy/in.done
}

for stage in "$@"; do
  echo "=== $stage $(date +%T)"
  case $stage in
    tests1)  # one GPU: the backend tests, and every other GPU test that needs one GPU
      backend_tests 0 ${BACKEND_TIMEOUT:-400} --durations=15 &
      one_gpu_tests 0 290 --durations=15
      wait
      tail -25 "$OUT/gpu_tests_1gpu.log"; tail -4 "$OUT/cupy_backend_tests.log" ;;
    tests2)  # two GPUs: the cluster tests on 2 GPUs, and dask cuda workers from deploy/
      timeout 290 python3 -m pytest -q -m gpu -p no:cacheprovider --durations=15 \
        tests/test_distributed_gpu.py tests/test_deploy.py -k "2gpu or gpu_workers_with_ucx" 2>&1 \
        | grep -vE "^(INFO|distributed\.|WARNING)" > "$OUT/gpu_tests_2gpu.log"
      echo "two-GPU tests rc=${PIPESTATUS[0]}" >> "$OUT/gpu_tests_2gpu.log"
      tail -25 "$OUT/gpu_tests_2gpu.log" ;;
    split)  # the one-GPU tests on GPU 0 while the out-of-core test has GPU 1 to itself
      T=${TESTS_TIMEOUT:-540}
      CUDA_VISIBLE_DEVICES=1 outofcore_test $T &
      one_gpu_tests 0 $T --durations=10
      wait
      for f in outofcore gpu_tests_1gpu; do echo "== $f"; grep -E "^(FAILED|ERROR)|memory tiers|sorted and verified" "$OUT/$f.log" | head -8; tail -3 "$OUT/$f.log"; done ;;
    mixed)  # GPU 1: the out-of-core test; GPU 0 meanwhile: backend tests, local sort, merge tests
      CUDA_VISIBLE_DEVICES=1 outofcore_test ${OOC_TIMEOUT:-450} &
      backend_tests 0 ${BACKEND_TIMEOUT:-400}
      export CUDA_VISIBLE_DEVICES=0
      timeout 100 python3 benchmarks/local_sort.py --quick --out "$OUT" > "$OUT/local.log" 2>&1
      timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_distributed_gpu.py \
        -k "1gpu-ucx and not out_of_core" 2>&1 | grep -vE "^(INFO|distributed\.|WARNING)" \
        > "$OUT/gpu_tests_1gpu.log"
      echo "one-GPU tests rc=${PIPESTATUS[0]}" >> "$OUT/gpu_tests_1gpu.log"
      unset CUDA_VISIBLE_DEVICES
      wait
      for f in cupy_backend_tests gpu_tests_1gpu outofcore; do echo "== $f"
        grep -E "^(FAILED|ERROR)|memory tiers|sorted and verified| merged at" "$OUT/$f.log" | tail -20
        tail -2 "$OUT/$f.log"; done
      tail -12 "$OUT/local.log" ;;
    local)  # issue 3: the local sort at 2^20..2^28 and block-shape variants, on GPU 0
      CUDA_VISIBLE_DEVICES=0 timeout 100 python3 benchmarks/local_sort.py --quick --variants \
        --out "$OUT" 2>&1 | tee "$OUT/local.log" | tail -22 ;;
    full)  # issue 3's deliverable on GPU 0: local_sort.py over every size, then HUGE_GB
           # (default 120) of uint32 in place; GPU 1 meanwhile: the one-GPU tests
      one_gpu_tests 1 ${TESTS_TIMEOUT:-380} --durations=10 &
      CUDA_VISIBLE_DEVICES=0 timeout ${FULL_TIMEOUT:-420} python3 benchmarks/local_sort.py \
        --huge-gb ${HUGE_GB:-120} --out "$OUT" > "$OUT/local_full.log" 2>&1
      wait
      tail -3 "$OUT/gpu_tests_1gpu.log"; grep -E "^(FAILED|ERROR)" "$OUT/gpu_tests_1gpu.log" | head
      tail -14 "$OUT/local_full.log" | cut -c1-300 ;;
    transfer)  # issue 4: Dask worker-to-worker transfers of CuPy arrays over UCX, under
               # the UCX settings of TRANSFER_VARIANTS (benchmarks/transfer.py)
      ucx_info=$(find /tmp/site -name ucx_info -type f | head -1)
      [ -n "$ucx_info" ] && "$ucx_info" -f 2>/dev/null | grep -iE "CUDA_IPC|RNDV_SCHEME|RNDV_FRAG|RNDV_PIPELINE" \
        > "$OUT/ucx_info.txt"
      for v in ${TRANSFER_VARIANTS:-default UCX_RNDV_SCHEME=put_zcopy UCX_PROTO_ENABLE=n}; do
        label=${v//[=]/-}
        extra=(); [ "$v" = default ] || extra=("$v")
        env ${extra[@]+"${extra[@]}"} TRANSFER_LABEL="$label" timeout ${TRANSFER_TIMEOUT:-150} python3 benchmarks/transfer.py \
          --out "$OUT" > "$OUT/transfer_$label.log" 2>&1
        grep -vE "^(INFO|distributed|WARNING|\[)" "$OUT/transfer_$label.log" | tail -7; done ;;
    backend_ooc)  # GPU 1: the out-of-core test; GPU 0 meanwhile: the backend tests
      CUDA_VISIBLE_DEVICES=1 outofcore_test ${OOC_TIMEOUT:-450} &
      backend_tests 0 ${BACKEND_TIMEOUT:-400} --durations=10
      wait
      summarize cupy_backend_tests outofcore ;;
    merge)  # issue 4's merges: the backend tests on GPU 1 while GPU 0 times one merge of two
            # runs (benchmarks/gpu_merge.py: reading them in place against copy, then merge)
      backend_tests 1 ${BACKEND_TIMEOUT:-400} &
      CUDA_VISIBLE_DEVICES=0 timeout 200 python3 benchmarks/gpu_merge.py --out "$OUT" \
        > "$OUT/gpu_merge.log" 2>&1
      wait
      summarize cupy_backend_tests
      tail -8 "$OUT/gpu_merge.log" ;;
    passes)  # issue 3: the time of every pass of the three target sorts (2^28) on GPU 0,
             # and uint32 under other row widths of the GROUP passes (ROWS="64 256")
      export CUDA_VISIBLE_DEVICES=0
      for spec in uint32 float64 "uint32 --values uint32"; do
        timeout 60 python3 benchmarks/pass_profile.py --dtype $spec \
          --json "$OUT/passes_${spec// /_}.json" 2>&1 | grep -E "passes|sum"; done
      for rb in ${ROWS:-}; do echo "row_bytes $rb"
        DISTSORT_TUNING="{\"row_bytes\": $rb}" timeout 60 python3 benchmarks/pass_profile.py \
          --dtype uint32 2>&1 | grep -E "passes|sum"; done
      unset CUDA_VISIBLE_DEVICES ;;
    final)  # one call for a kernel change and the one-GPU tests: GPU 1 runs the out-of-core
            # test and the backend tests; GPU 0 times every pass, runs local_sort.py
            # --quick, then every other one-GPU GPU test
      CUDA_VISIBLE_DEVICES=1 outofcore_test ${OOC_TIMEOUT:-500} &
      backend_tests 1 ${BACKEND_TIMEOUT:-400} &
      time_kernels
      one_gpu_tests 0 ${TESTS_TIMEOUT:-380} --durations=10
      wait
      summarize cupy_backend_tests gpu_tests_1gpu outofcore
      tail -8 "$OUT/local.log" ;;
    variants)  # issue 3: the three target sorts (2^28) on GPU 0 under each kernel variant of
               # VARIANTS (default "base"; a variant: -D options of sort.cu without the
               # DISTSORT_ prefix, joined by commas, e.g. ASYNC=0), then the
               # key-value sort probed (overlap_probe.py) under PROBE_VARIANT
      export CUDA_VISIBLE_DEVICES=0
      for v in ${VARIANTS:-base}; do
        defs=(); [ "$v" = base ] || for d in ${v//,/ }; do defs+=(--define "DISTSORT_$d"); done
        timeout 150 python3 benchmarks/overlap_probe.py --full-only "${defs[@]}" \
          --json "$OUT/variant_${v//[=,]/_}.json" 2>&1 | grep -E "passes|Error|error"
      done
      if [ -n "${PROBE_VARIANT:-}" ]; then
        defs=(); for d in ${PROBE_VARIANT//,/ }; do defs+=(--define "DISTSORT_$d"); done
        timeout 120 python3 benchmarks/overlap_probe.py --pairs uint32+uint32 "${defs[@]}" \
          2>&1 | tee "$OUT/variant_probe.log"
      fi
      unset CUDA_VISIBLE_DEVICES ;;
    verify)  # every one-GPU test on the final code: GPU 1 runs the out-of-core test and the
             # backend tests, GPU 0 every other one-GPU GPU test
      CUDA_VISIBLE_DEVICES=1 outofcore_test ${OOC_TIMEOUT:-500} &
      backend_tests 1 ${BACKEND_TIMEOUT:-400} --durations=10 &
      one_gpu_tests 0 ${TESTS_TIMEOUT:-450} --durations=10
      wait
      summarize cupy_backend_tests gpu_tests_1gpu outofcore ;;
    kernels)  # issue 3 on a kernel change: the backend tests on GPU 1 while GPU 0 times
              # every pass (stage passes) and runs local_sort.py --quick
      backend_tests 1 ${BACKEND_TIMEOUT:-400} &
      time_kernels
      wait
      summarize cupy_backend_tests
      tail -8 "$OUT/local.log" ;;
    big2)  # the 64 GiB two-GPU row alone (BIG_DTYPES), with the protocols UCX picked
      UCX_PROTO_INFO=y timeout ${BIG2_TIMEOUT:-150} python3 benchmarks/distributed_sort.py --gpus 2 \
        --sizes 64GiB --dtypes ${BIG_DTYPES:-uint64} --runs ${RUNS:-2} --warmup 1 \
        --max-bytes-per-gpu 32GiB --chunks-per-gpu 4 --device-memory-limit ${BIG_LIMIT:-0} \
        --out "$OUT/distributed_sort_2gpu_64.json" > "$OUT/big2.log" 2>&1
      grep -E "GPU .*GiB:|^ +2 " "$OUT/big2.log" | cut -c1-1500
      grep -E "cuda_ipc|cuda_copy|rndv" "$OUT/big2.log" | sort | uniq -c | sort -rn | head -12 ;;
    outofcore)
      outofcore_test ${OOC_TIMEOUT:-450}; tail -20 "$OUT/outofcore.log" ;;
    bench2)  # two GPUs, one chunk per GPU (64 GiB: the stage big)
      timeout ${BENCH2_TIMEOUT:-150} python3 benchmarks/distributed_sort.py --gpus 2 --sizes ${SIZES2:-4GiB 16GiB} \
        --dtypes ${DTYPES:-float32 uint64} --runs ${RUNS:-2} --warmup 1 --max-bytes-per-gpu 32GiB \
        --out "$OUT/distributed_sort_2gpu.json" 2>&1 | tee "$OUT/bench2.log" \
        | grep -vE "^(INFO|distributed\.|WARNING)" | tail -10 ;;
    big)  # the largest cases alone: 32 GiB on one GPU, 64 GiB on two (8 GiB chunks), 160 GB;
          # dask-cuda's spilling off (BIG_LIMIT=0, the default here): the persisted input,
          # the sort's own copy (2 x 34 GB) and the pairs in flight fit the GPU, yet with the
          # threshold at 0.9 or 0.95 one timed run in three at 64 GiB spilled 24-32 GiB (the
          # rows' spill counters say when; results/..._run5.json); at 0.65 every run spilled
      timeout ${BIG1_TIMEOUT:-60} python3 benchmarks/distributed_sort.py --gpus 1 --sizes 32GiB \
        --dtypes ${BIG_DTYPES:-float32} --runs ${RUNS:-1} --warmup 1 --max-bytes-per-gpu 32GiB --chunks-per-gpu 4 \
        --device-memory-limit ${BIG_LIMIT:-0} --out "$OUT/distributed_sort_1gpu_32.json" 2>&1 | tee "$OUT/big1.log" \
        | grep -vE "^(INFO|distributed\.|WARNING)" | tail -5
      timeout ${BIG2_TIMEOUT:-90} python3 benchmarks/distributed_sort.py --gpus 2 --sizes 64GiB \
        --dtypes ${BIG_DTYPES:-float32} --runs ${RUNS:-1} --warmup 1 --max-bytes-per-gpu 32GiB --chunks-per-gpu 4 \
        --device-memory-limit ${BIG_LIMIT:-0} --out "$OUT/distributed_sort_2gpu_64.json" 2>&1 | tee "$OUT/big2.log" \
        | grep -vE "^(INFO|distributed\.|WARNING)" | tail -5
      [ -n "${SKIP_LARGEST:-}" ] || bash "$0" largest ;;
    bench1)  # one GPU: the reference for weak scaling, and rechunk + cupy.sort (32 GiB: big)
      timeout ${BENCH1_TIMEOUT:-130} python3 benchmarks/distributed_sort.py --gpus 1 --sizes ${SIZES1:-2GiB 8GiB} \
        --dtypes ${DTYPES:-float32 uint64} --runs ${RUNS:-2} --warmup 1 --one-chunk --max-bytes-per-gpu 32GiB \
        --out "$OUT/distributed_sort_1gpu.json" 2>&1 | tee "$OUT/bench1.log" \
        | grep -vE "^(INFO|distributed\.|WARNING)" | tail -10 ;;
    latency)  # issue 4 at 4 GiB: crossing parts through CUDA IPC or as data (EXCHANGES),
              # under distributed's batching intervals or shorter ones (INTERVALS, ms)
      timeout ${LAT1_TIMEOUT:-100} python3 benchmarks/distributed_sort.py --gpus 1 --sizes 2GiB \
        --dtypes ${DTYPES:-float32 uint64} --runs ${RUNS:-5} --warmup 1 --batch-interval ${INTERVALS:-default 0.2} \
        --out "$OUT/latency_1gpu.json" > "$OUT/latency1.log" 2>&1
      timeout ${LAT2_TIMEOUT:-200} python3 benchmarks/distributed_sort.py --gpus 2 --sizes 4GiB \
        --dtypes ${DTYPES:-float32 uint64} --runs ${RUNS:-5} --warmup 1 --batch-interval ${INTERVALS:-default 0.2} \
        --exchange ${EXCHANGES:-ipc comm} --out "$OUT/latency_2gpu.json" > "$OUT/latency2.log" 2>&1
      grep -hE "GPU .*GiB" "$OUT/latency1.log" "$OUT/latency2.log" | cut -c1-260 ;;
    largest)  # 160 GB of uint32 made on the two GPUs, 16 chunks of 5 GB per GPU
      timeout ${LARGEST_TIMEOUT:-150} python3 benchmarks/distributed_sort.py --gpus 2 --largest ${LARGEST:-160GB} \
        --dtypes uint32 --chunks-per-gpu 16 --device-memory-limit 0.9 \
        --out "$OUT/largest_sort.json" 2>&1 | tee "$OUT/largest.log" \
        | grep -vE "^(INFO|distributed\.)" | tail -5 ;;
    shared)
      for w in 2 4; do
        python3 benchmarks/distributed_sort.py --gpus 2 --workers-per-gpu $w \
          --sizes 4GiB 16GiB --dtypes float32 uint64 --runs 2 \
          --out "$OUT/shared_gpus_w$w.json" 2>&1 | tee "$OUT/shared_w$w.log" \
          | grep -vE "^(INFO|distributed\.)" | tail -8
      done ;;
    deploy)  # issue 5: the one-host recipe with dask cuda workers over UCX, a 16 GiB .npy
      d=/tmp/deploy
      [ -f $d/in.done ] || make_deploy_input
      bash deploy/local/cluster.sh start --scheduler-file $d/sched.json --mode gpu --protocol ucx \
        2>&1 | tail -5
      timeout 200 python3 -c 'import sys; from distsort.cli import main; sys.exit(main())' \
        sort $d/in.npy $d/out.npy --scheduler-file $d/sched.json --verify --no-progress \
        --overwrite 2>&1 | tee "$OUT/deploy.log"  # (--report needs bokeh, not on the device)
      echo "distsort sort exit code: ${PIPESTATUS[0]}" | tee -a "$OUT/deploy.log"
      bash deploy/local/cluster.sh stop --scheduler-file $d/sched.json 2>&1 | tail -2 ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
echo "=== done $(date +%T)"
