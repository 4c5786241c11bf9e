#!/usr/bin/env bash
# The syncrep demo: synchronous data-parallel training of an MLP on
# Fashion-MNIST, with the coordinator killed (SIGKILL) midway and restarted
# on the same store.  `./run demo` builds and then runs this; by hand:
#
#   scripts/demo.sh BUILD_DIR [options]
#
#   --resume               continue the model in the store (default: a new one)
#   --dir DIR              where the store and logs live (default: a new directory
#                          per run, ${XDG_STATE_HOME:-~/.local/state}/syncrep/demo/
#                          run-TIME-PID, and demo/latest points to it; --resume
#                          without --dir continues demo/latest)
#   --fresh                replace the store in --dir if there is one (without it a
#                          store this run did not create is never removed)
#   --target-accuracy A    stop when the chief measures test accuracy >= A (0.85)
#   --max-steps M          step budget of this run (3000)
#   --kill-at-step S       SIGKILL the coordinator once S steps are done (150; 0 = never)
#   --workers N            worker processes, task 0 the chief (4)
#   --local-replicas G     local replicas per worker, reduced through gpu/ (1)
#   --seed S               initial weights, shards and batch order (1)
#
# Environment: SYNCREP_BIN (default BUILD_DIR/cli/syncrep), TRAIN_BIN (default
# BUILD_DIR/examples/fashion_mnist/fashion_mnist_train), DATA_DIR (default
# /usr/share/datasets/fashion-mnist).  The script starts only its own
# processes, remembers their PIDs and, on any exit, stops only those.  It
# validates every option before it touches anything, and takes the store's
# writer lock (STORE-lock, the coordinator's) before it removes a store:
# a store a running coordinator uses is refused, never deleted.
# How it works: docs/example.md.
set -euo pipefail

usage() { sed -n '6,30p' "$0" | sed 's/^# \{0,1\}//'; }

if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
    usage >&2
    exit 2
fi
BUILD=$1
shift

RESUME=0
FRESH=0
DEMO_ROOT=${XDG_STATE_HOME:-$HOME/.local/state}/syncrep/demo
DEMO_DIR=
DIR_ARG=
TARGET=0.85
BUDGET=3000
KILL_AT=150
WORKERS=4
REPLICAS=1
SEED=1
# Tuned on a 2-core machine: 85% in about 300-400 steps (docs/example.md).
BATCH=128
OPTIMIZER=adam
LR=0.001
EVAL_EVERY=100
LOG_EVERY=100

while [ $# -gt 0 ]; do
    case $1 in
    --resume) RESUME=1; shift; continue ;;
    --fresh) FRESH=1; shift; continue ;;
    -h | --help) usage; exit 0 ;;
    esac
    [ $# -ge 2 ] || { echo "demo: $1 needs a value" >&2; exit 2; }
    case $1 in
    --dir) DEMO_DIR=$2; DIR_ARG=" --dir $2" ;;
    --target-accuracy) TARGET=$2 ;;
    --max-steps) BUDGET=$2 ;;
    --kill-at-step) KILL_AT=$2 ;;
    --workers) WORKERS=$2 ;;
    --local-replicas) REPLICAS=$2 ;;
    --seed) SEED=$2 ;;
    *) echo "demo: unknown option '$1' (see $0 --help)" >&2; exit 2 ;;
    esac
    shift 2
done
for v in BUDGET KILL_AT WORKERS REPLICAS SEED; do
    [[ ${!v} =~ ^[0-9]+$ ]] || { echo "demo: bad number '${!v}'" >&2; exit 2; }
done
[[ $TARGET =~ ^(0(\.[0-9]+)?|1(\.0+)?|\.[0-9]+)$ ]] ||
    { echo "demo: --target-accuracy '$TARGET' is not a number in 0..1" >&2; exit 2; }
[ "$WORKERS" -ge 1 ] || { echo "demo: --workers must be at least 1" >&2; exit 2; }
[ "$REPLICAS" -ge 1 ] || { echo "demo: --local-replicas must be at least 1" >&2; exit 2; }
[ "$BUDGET" -ge 1 ] || { echo "demo: --max-steps must be at least 1" >&2; exit 2; }
[ "$RESUME" = 0 ] || [ "$FRESH" = 0 ] || { echo "demo: --resume and --fresh exclude each other" >&2; exit 2; }

log() { printf '==> %s\n' "$*"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

SYNCREP=${SYNCREP_BIN:-$BUILD/cli/syncrep}
TRAIN=${TRAIN_BIN:-$BUILD/examples/fashion_mnist/fashion_mnist_train}
DATA_DIR=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
[ -x "$SYNCREP" ] || die "no syncrep command at $SYNCREP (build first: ./run demo)"
[ -x "$TRAIN" ] || die "no training program at $TRAIN (it needs zlib and OpenBLAS at build time:" \
    "apt-get install zlib1g-dev libopenblas-dev, then rebuild)"
ls "$DATA_DIR"/train-images-idx3-ubyte* >/dev/null 2>&1 ||
    die "no Fashion-MNIST in $DATA_DIR: apt-get install dataset-fashion-mnist (or set DATA_DIR)"

# Where: --dir, else the latest run's directory (--resume), else a new one.
if [ -z "$DEMO_DIR" ]; then
    if [ "$RESUME" = 1 ]; then
        [ -d "$DEMO_ROOT/latest" ] || die "--resume: no earlier demo run in $DEMO_ROOT (give --dir)"
        DEMO_DIR=$(cd "$DEMO_ROOT/latest" && pwd -P)
    else
        mkdir -p "$DEMO_ROOT"
        DEMO_DIR=$(mktemp -d "$DEMO_ROOT/run-$(date +%Y%m%d-%H%M%S)-$$.XXXX")
        ln -sfn "$(basename "$DEMO_DIR")" "$DEMO_ROOT/latest"
    fi
    DIR_ARG=" --dir $DEMO_DIR"
fi
mkdir -p "$DEMO_DIR"
DEMO_DIR=$(cd "$DEMO_DIR" && pwd)
STORE=$DEMO_DIR/store.db
# The store's writer lock, as a coordinator takes it: held while this script
# looks at the store and removes it, released before its own coordinator
# starts.  Held by someone else: a coordinator is running on this store.
lock_store() {
    exec 9<>"$STORE-lock" || die "cannot open $STORE-lock"
    if ! flock -n 9; then
        local holder
        holder=$(head -c 32 "$STORE-lock" 2>/dev/null | head -1)
        exec 9>&-
        die "$STORE is in use by a running coordinator (pid ${holder:-unknown} holds" \
            "$STORE-lock): stop it first, or use another --dir; nothing was removed"
    fi
}
unlock_store() { exec 9>&-; }
LOG_DIR=$DEMO_DIR/logs
mkdir -p "$LOG_DIR"
# Sockets and the chief's result live in a private temporary directory (short
# paths: ipc:// socket names are limited to about 100 bytes).
RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/syncrep-demo.XXXXXX")
ENDPOINT=ipc://$RUN_DIR/coordinator.sock
RESULT=$RUN_DIR/result
COORD_LOG=$LOG_DIR/coordinator.log

# ---- our processes ---------------------------------------------------------
COORD_PID=
WORKER_PIDS=()

# Running children of this shell only (bash's job table): a PID that has
# exited is never signalled, even if the system has reused it.
alive() { [ -n "$1" ] && jobs -rp | grep -qx "$1"; }

# Stop one of our processes: SIGTERM, up to `grace` seconds, then SIGKILL.
stop_pid() {
    local pid=$1 grace=${2:-5} i
    alive "$pid" || { wait "$pid" 2>/dev/null || true; return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do
        alive "$pid" || break
        sleep 0.1
    done
    alive "$pid" && kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    local rc=$? pid
    trap - EXIT INT TERM
    for pid in "${WORKER_PIDS[@]}"; do
        stop_pid "$pid" 3
    done
    [ -n "$COORD_PID" ] && stop_pid "$COORD_PID" 5
    rm -rf "$RUN_DIR"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- the coordinator -------------------------------------------------------
status_field() { # status_field KEY: a number from `syncrep status --json`
    "$SYNCREP" status --connect "$ENDPOINT" --json --timeout-ms 1000 2>/dev/null |
        grep -o "\"$1\":[0-9]*" | head -1 | cut -d: -f2
}

start_coordinator() {
    local i
    "$SYNCREP" coordinator --store "$STORE" --bind "$ENDPOINT" \
        --replicas-to-aggregate "$WORKERS" --optimizer "$OPTIMIZER" --learning-rate "$LR" \
        >>"$COORD_LOG" 2>&1 &
    COORD_PID=$!
    for ((i = 0; i < 100; i++)); do
        [ -n "$(status_field global_step)" ] && break
        alive "$COORD_PID" || break
        sleep 0.1
    done
    if ! alive "$COORD_PID" || [ -z "$(status_field global_step)" ]; then
        tail -n 5 "$COORD_LOG" >&2
        die "the coordinator did not start (log: $COORD_LOG)"
    fi
    # What it restored from the store, from its start-up line.
    RESTORED=$(grep -o 'COORD-START .*restored_step=[0-9]*' "$COORD_LOG" | tail -1 |
        sed 's/.*restored_step=//')
    INCARNATION=$(status_field incarnation)
}

T0=$(date +%s.%N)
lock_store
if { [ -e "$STORE" ] || [ -e "$STORE-mark" ]; } && [ "$RESUME" = 0 ]; then
    [ "$FRESH" = 1 ] || die "$STORE exists and this run did not create it: --resume" \
        "continues it, --fresh replaces it (nothing was removed)"
    # The mark goes with the store: left alone it would say a store was lost.
    log "starting fresh (--fresh): removing the previous demo store $STORE"
    rm -f "$STORE" "$STORE-wal" "$STORE-shm" "$STORE-journal" "$STORE-mark"
fi
unlock_store
: >"$COORD_LOG"
log "store: $STORE"
log "logs:  $LOG_DIR  (coordinator.log)"
start_coordinator
log "coordinator pid $COORD_PID on $ENDPOINT: $OPTIMIZER lr $LR, R = N = $WORKERS," \
    "every step committed to the store"
START_STEP=${RESTORED:-0}
if [ "$START_STEP" -gt 0 ]; then
    log "resuming the stored model at global step $START_STEP"
fi
MAX_STEPS=$((START_STEP + BUDGET))
KILL_STEP=$((KILL_AT > 0 ? START_STEP + KILL_AT : 0))

# ---- the workers -----------------------------------------------------------
export OPENBLAS_NUM_THREADS=1
log "starting the chief (task 0) and $((WORKERS - 1)) workers: batch $BATCH each," \
    "target $TARGET, step budget $MAX_STEPS"
for ((i = 0; i < WORKERS; i++)); do
    args=(--connect "$ENDPOINT" --task-index "$i" --workers "$WORKERS" --data-dir "$DATA_DIR"
        --batch "$BATCH" --seed "$SEED" --local-replicas "$REPLICAS" --max-steps "$MAX_STEPS"
        --log-every "$LOG_EVERY")
    if [ "$i" = 0 ]; then
        args+=(--eval-every "$EVAL_EVERY" --target-accuracy "$TARGET" --result-file "$RESULT")
    fi
    "$TRAIN" "${args[@]}" &
    WORKER_PIDS+=($!)
done
CHIEF_PID=${WORKER_PIDS[0]}

# ---- wait for the chief; kill -9 the coordinator midway ----------------------
RESTARTS=0
KILLED_AT=
DONE_PIDS=()
while alive "$CHIEF_PID"; do
    # A worker that stops before the chief must have finished its step budget.
    for pid in "${WORKER_PIDS[@]:1}"; do
        if ! alive "$pid" && ! [[ " ${DONE_PIDS[*]} " == *" $pid "* ]]; then
            rc=0
            wait "$pid" || rc=$?
            [ "$rc" = 0 ] || die "worker pid $pid failed (exit $rc); see the messages above"
            DONE_PIDS+=("$pid")
        fi
    done
    if [ "$KILL_STEP" -gt 0 ] && [ "$RESTARTS" = 0 ]; then
        step=$(status_field global_step)
        if [ -n "$step" ] && [ "$step" -ge "$KILL_STEP" ]; then
            kill -KILL "$COORD_PID"
            wait "$COORD_PID" 2>/dev/null || true
            COORD_PID=
            KILLED_AT=$step
            log "killed the coordinator with SIGKILL after global step $step" \
                "(workers keep retrying)"
            sleep 1
            start_coordinator
            RESTARTS=$((RESTARTS + 1))
            log "restarted the coordinator (pid $COORD_PID, incarnation $INCARNATION) on the same" \
                "store: training resumes from the stored step $RESTORED"
        fi
    fi
    sleep 0.2
done
CHIEF_RC=0
wait "$CHIEF_PID" || CHIEF_RC=$?
if [ "$CHIEF_RC" != 0 ] || [ ! -f "$RESULT" ]; then
    die "the chief failed (exit $CHIEF_RC); see the messages above"
fi

# The chief has decided and ended the job (sr_client_finish): the workers'
# next step returns SR_EDONE and they exit by themselves, then the
# coordinator commits and exits once they have left.  Whatever still runs
# after 15 s is stopped (SIGTERM: a coordinator finishes or abandons the
# current step and commits before exiting).
wait_exit() {
    local pid=$1 i
    for ((i = 0; i < 150; i++)); do
        alive "$pid" || break
        sleep 0.1
    done
    stop_pid "$pid" "$2"
}
for pid in "${WORKER_PIDS[@]:1}"; do
    [[ " ${DONE_PIDS[*]} " == *" $pid "* ]] || wait_exit "$pid" 3
done
WORKER_PIDS=()
wait_exit "$COORD_PID" 10
COORD_PID=
T1=$(date +%s.%N)

# ---- summary -----------------------------------------------------------------
result() { grep "^$1=" "$RESULT" | cut -d= -f2; }
pct() { awk -v a="$1" 'BEGIN { printf "%.2f%%", 100 * a }'; }
FINAL_STEP=$(grep -o 'COORD-SHUTDOWN .*global_step=[0-9]*' "$COORD_LOG" | tail -1 |
    sed 's/.*global_step=//')
echo
log "summary"
if [ "$(result reason)" = target ]; then
    printf '  result:             target %s reached\n' "$(pct "$TARGET")"
else
    printf '  result:             step budget reached (target %s not reached)\n' "$(pct "$TARGET")"
fi
printf '  test accuracy:      %s at step %s (10,000 test images)\n' \
    "$(pct "$(result accuracy)")" "$(result step)"
printf '  steps:              %s in this run (global step %s in the store)\n' \
    "$((${FINAL_STEP:-$(result step)} - START_STEP))" "${FINAL_STEP:-?}"
if [ "$RESTARTS" -gt 0 ]; then
    printf '  restarts survived:  %s (coordinator SIGKILLed after step %s,' "$RESTARTS" "$KILLED_AT"
    printf ' resumed from stored step %s;\n' "$RESTORED"
    if [ -n "$(result restart_accuracy)" ]; then
        printf '                      accuracy right after the restart: %s at step %s)\n' \
            "$(pct "$(result restart_accuracy)")" "$(result restart_step)"
    else
        printf '                      the chief finished before evaluating again)\n'
    fi
else
    printf '  restarts survived:  0\n'
fi
printf '  wall time:          %.1f s (start of the coordinator to the end of training)\n' \
    "$(awk -v a="$T0" -v b="$T1" 'BEGIN { print b - a }')"
printf '  store:              %s\n' "$STORE"
printf '  inspect it:         %s store inspect %s\n' "$SYNCREP" "$STORE"
printf '  verify it:          %s store verify %s\n' "$SYNCREP" "$STORE"
printf '  resume training:    ./run demo --resume%s --target-accuracy 0.87\n' "$DIR_ARG"
printf '                      (or %s %s --resume%s ...)\n' "$0" "$BUILD" "$DIR_ARG"
printf '  logs:               %s\n' "$LOG_DIR"
