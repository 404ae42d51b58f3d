#!/usr/bin/env bash
# One-host Dask cluster for distsort: a scheduler and its workers, started in the
# background, found again through a scheduler file, stopped by their PIDs.
#
#   deploy/local/cluster.sh start  [options]   start; wait until the workers are up
#   deploy/local/cluster.sh stop   [options]   stop what `start` started
#   deploy/local/cluster.sh status [options]   print the scheduler and its workers
#
# Options (environment variable in brackets):
#   --scheduler-file FILE  JSON file the scheduler writes        [DISTSORT_SCHEDULER_FILE]
#                          (default: $PWD/distsort-scheduler.json)
#   --mode gpu|cpu|auto    `dask cuda worker` (one worker per GPU) or `dask worker`
#                          (auto: gpu when nvidia-smi lists a GPU)      [DISTSORT_MODE]
#   --protocol ucx|tcp     GPU default: ucx when distributed_ucxx imports; CPU: tcp
#   --host ADDR            address to listen on (default 127.0.0.1; a cluster
#                          spanning hosts needs a routable one)
#   --port N               scheduler port (default 0: any free port)
#   --workers N            CPU workers (default: one per core); GPU: all visible GPUs
#   --memory-limit SIZE    per worker, e.g. 2GB: CPU workers spill to disk past 70%
#   --device-memory-limit F  GPU spill threshold (default 0.65 of device memory)
#   --rmm-pool-size F      GPU RMM pool (default 0.8 of device memory)
#   --local-directory DIR  where workers spill (default: <scheduler file>.d/spill)
#   --timeout S            seconds to wait for the scheduler and workers (default 120)
#
# Logs and PIDs live next to the scheduler file, in <scheduler file>.d/.
set -euo pipefail

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }

cmd=${1:-}; [ $# -gt 0 ] && shift
sched_file=${DISTSORT_SCHEDULER_FILE:-$PWD/distsort-scheduler.json}
mode=${DISTSORT_MODE:-auto}
protocol="" host=127.0.0.1 port=0 workers="" memory_limit="auto"
device_memory_limit=0.65 rmm_pool_size=0.8 local_dir="" timeout=120
while [ $# -gt 0 ]; do
  case $1 in
    --scheduler-file) sched_file=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --protocol) protocol=$2; shift 2 ;;
    --host) host=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --memory-limit) memory_limit=$2; shift 2 ;;
    --device-memory-limit) device_memory_limit=$2; shift 2 ;;
    --rmm-pool-size) rmm_pool_size=$2; shift 2 ;;
    --local-directory) local_dir=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "cluster.sh: unknown option $1" >&2; usage 2 ;;
  esac
done

sched_file=$(python -c 'import os,sys; print(os.path.abspath(sys.argv[1]))' "$sched_file")
run_dir="$sched_file.d"
local_dir=${local_dir:-$run_dir/spill}
PY=${PYTHON:-python}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

wait_for_workers() {  # n: wait until the scheduler has n workers (0: at least one)
  "$PY" - "$sched_file" "$1" "$timeout" <<'EOF'
import sys
from distributed import Client
sched, n, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
with Client(scheduler_file=sched, timeout=timeout) as c:
    c.wait_for_workers(max(n, 1), timeout=timeout)
    print(f"cluster up: {c.scheduler.address}, "
          f"{len(c.scheduler_info(n_workers=-1)['workers'])} worker(s)")
EOF
}

start() {
  if alive "$run_dir/scheduler.pid"; then
    echo "cluster.sh: already running (scheduler PID $(cat "$run_dir/scheduler.pid"))" >&2
    exit 1
  fi
  if [ "$mode" = auto ]; then
    if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU; then
      mode=gpu; else mode=cpu; fi
  fi
  if [ -z "$protocol" ]; then
    protocol=tcp
    if [ "$mode" = gpu ]; then
      if "$PY" -c 'import distributed_ucxx, rmm' 2>/dev/null; then protocol=ucx
      else echo "cluster.sh: distributed-ucxx or rmm missing: GPU workers use TCP" >&2; fi
    fi
  fi
  mkdir -p "$run_dir" "$local_dir"
  rm -f "$sched_file"
  # setsid: the cluster outlives this shell, and gets no Ctrl-C meant for it.
  setsid dask scheduler --scheduler-file "$sched_file" --protocol "$protocol" \
      --host "$host" --port "$port" --dashboard-address "$host:0" \
      >"$run_dir/scheduler.log" 2>&1 < /dev/null &
  echo $! > "$run_dir/scheduler.pid"
  for _ in $(seq $((timeout * 10))); do
    [ -s "$sched_file" ] && break
    alive "$run_dir/scheduler.pid" || { cat "$run_dir/scheduler.log" >&2; exit 3; }
    sleep 0.1
  done
  [ -s "$sched_file" ] || { echo "cluster.sh: scheduler did not start" >&2; stop; exit 3; }

  local n=0
  if [ "$mode" = gpu ]; then
    local extra=()
    # CuPy must allocate from the RMM pool (the option's name changed over releases).
    if dask cuda worker --help 2>/dev/null | grep -q -- --set-rmm-allocator-for-libs; then
      extra+=(--set-rmm-allocator-for-libs cupy); fi
    [ -n "$workers" ] && echo "cluster.sh: --workers is ignored in gpu mode (one per GPU)" >&2
    setsid dask cuda worker --scheduler-file "$sched_file" --protocol "$protocol" \
        --host "$host" --rmm-pool-size "$rmm_pool_size" \
        --device-memory-limit "$device_memory_limit" --memory-limit "$memory_limit" \
        --local-directory "$local_dir" --dashboard-address "$host:0" ${extra[@]+"${extra[@]}"} \
        >"$run_dir/workers.log" 2>&1 < /dev/null &
    n=$(nvidia-smi -L | grep -c GPU)
    [ -n "${CUDA_VISIBLE_DEVICES:-}" ] && n=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
  else
    n=${workers:-$(nproc)}
    setsid dask worker --scheduler-file "$sched_file" --nworkers "$n" --nthreads 1 \
        --memory-limit "$memory_limit" --local-directory "$local_dir" \
        --host "$host" --dashboard-address "$host:0" \
        >"$run_dir/workers.log" 2>&1 < /dev/null &
  fi
  echo $! > "$run_dir/workers.pid"
  echo "$mode $protocol $n" > "$run_dir/info"
  if ! wait_for_workers "$n"; then
    echo "cluster.sh: workers did not come up; see $run_dir/workers.log" >&2
    stop; exit 3
  fi
  echo "scheduler file: $sched_file  (mode $mode, protocol $protocol)"
  echo "submit:  distsort sort IN.npy OUT.npy --scheduler-file $sched_file"
  echo "stop:    $0 stop --scheduler-file $sched_file"
}

stop_pid() {  # TERM the process group started with setsid, then KILL what is left
  local f=$1 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

stop() {
  stop_pid "$run_dir/workers.pid"
  stop_pid "$run_dir/scheduler.pid"
  rm -f "$sched_file"
  echo "cluster stopped"
}

status() {
  alive "$run_dir/scheduler.pid" || { echo "not running"; exit 1; }
  echo "scheduler PID $(cat "$run_dir/scheduler.pid"), workers PID $(cat "$run_dir/workers.pid" 2>/dev/null || echo -)"
  wait_for_workers 0
}

case $cmd in
  start) start ;;
  stop) stop ;;
  status) status ;;
  -h|--help|help) usage 0 ;;
  *) usage 2 ;;
esac
