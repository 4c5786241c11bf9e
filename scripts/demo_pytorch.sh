#!/usr/bin/env bash
# The PyTorch demo (./run demo pytorch): examples/pytorch/train.py, a chief
# and three workers as separate processes on Fashion-MNIST, with the
# coordinator killed (SIGKILL) at step KILL_COORD_AT and restarted, and
# worker 2 killed at step KILL_WORKER_AT and restarted; the chief ends the
# job at 90 % test accuracy.  Usage: scripts/demo_pytorch.sh [BUILD_DIR]
# Environment: KILL_COORD_AT (150), KILL_WORKER_AT (300), DATA_DIR, RUN_DIR
# (default BUILD_DIR/demo-pytorch).  Ends only the processes it started.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-build}" && pwd)
SYNCREP=$BUILD/cli/syncrep
PY=/usr/bin/python3
KILL_COORD_AT=${KILL_COORD_AT:-150}
KILL_WORKER_AT=${KILL_WORKER_AT:-300}
RUN=${RUN_DIR:-$BUILD/demo-pytorch}
DATA_DIR=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'demo pytorch: %s\n' "$*" >&2; exit 1; }
[ -f "$DATA_DIR/train-images-idx3-ubyte.gz" ] ||
    die "no Fashion-MNIST in $DATA_DIR: apt-get install dataset-fashion-mnist (or set DATA_DIR)"
"$PY" -c 'import torch, numpy' 2>/dev/null || die "$PY lacks torch or numpy (apt-get install python3-torch python3-numpy)"
rm -rf "$RUN" && mkdir -p "$RUN"
export SYNCREP_LIBRARY=$BUILD/worker/libsyncrep.so PYTHONPATH=$ROOT/python DATA_DIR
export SYNCREP_COORDINATOR=ipc://$RUN/coord.sock
TASKS=4
COORD_PID=
declare -A WPID
start_coord() {
    "$SYNCREP" coordinator --store "$RUN/store.db" --bind "$SYNCREP_COORDINATOR" \
        --replicas-to-aggregate $TASKS --optimizer adam --learning-rate 0.002 \
        >>"$RUN/coordinator.log" 2>&1 &
    COORD_PID=$!
}
start_worker() {
    SYNCREP_TASK_INDEX=$1 "$PY" "$ROOT/examples/pytorch/train.py" --tasks $TASKS \
        >>"$RUN/worker$1.log" 2>&1 &
    WPID[$1]=$!
}
cleanup() {
    for p in "${WPID[@]}" $COORD_PID; do kill -TERM "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
step_now() { { grep -o '^step [0-9]*' "$RUN/worker0.log" 2>/dev/null || true; } | tail -1 | cut -d' ' -f2; }
t0=$(date +%s)
log "coordinator and $TASKS workers (logs in $RUN)"
start_coord
for t in $(seq 0 $((TASKS - 1))); do start_worker "$t"; done
killed_coord=0 killed_worker=0
while kill -0 "${WPID[0]}" 2>/dev/null; do
    s=$(step_now); s=${s:-0}
    if [ $killed_coord = 0 ] && [ "$KILL_COORD_AT" -gt 0 ] && [ "$s" -ge "$KILL_COORD_AT" ]; then
        kill -KILL "$COORD_PID"; wait "$COORD_PID" 2>/dev/null || true
        log "killed the coordinator (SIGKILL) at step $s; restarting it"
        start_coord; killed_coord=1
    fi
    if [ $killed_worker = 0 ] && [ "$KILL_WORKER_AT" -gt 0 ] && [ "$s" -ge "$KILL_WORKER_AT" ]; then
        kill -KILL "${WPID[2]}"; wait "${WPID[2]}" 2>/dev/null || true
        log "killed worker 2 (SIGKILL) at step $s; restarting it"
        start_worker 2; killed_worker=1
    fi
    sleep 0.2
done
rc=0; wait "${WPID[0]}" || rc=$?
for t in $(seq 1 $((TASKS - 1))); do wait "${WPID[$t]}" || log "worker $t exited $?"; done
for _ in $(seq 100); do kill -0 "$COORD_PID" 2>/dev/null || break; sleep 0.1; done
grep -h "test accuracy\|RESULT" "$RUN/worker0.log" >&2 || true
log "done in $(( $(date +%s) - t0 )) s (chief exit $rc)"
exit $rc
