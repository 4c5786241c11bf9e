#!/usr/bin/env bash
# Issue 22: docs/operations.md's CURVE recipe, the trainer's part: a
# coordinator with CURVE on, and the Fashion-MNIST trainer given the keys by
# option (task 0) and by the environment (task 1) trains; one without keys is
# refused (it times out, exit 1).  Usage: curve_trainer_test.sh BUILD_DIR.
# Starts one coordinator of its own and stops it by its PID.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SYNCREP=$BUILD/cli/syncrep
TRAIN=$BUILD/examples/fashion_mnist/fashion_mnist_train
DATA=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
[ -x "$SYNCREP" ] || { echo "SKIPPED: no $SYNCREP"; exit 77; }
[ -x "$TRAIN" ] || { echo "SKIPPED: the trainer is not built (zlib, OpenBLAS)"; exit 77; }
ls "$DATA"/train-images-idx3-ubyte* >/dev/null 2>&1 ||
    { echo "SKIPPED: no Fashion-MNIST in $DATA (dataset-fashion-mnist)"; exit 77; }

T=$(mktemp -d "${TMPDIR:-/tmp}/curve-test.XXXXXX")
COORD=
cleanup() {
    [ -n "$COORD" ] && kill -TERM "$COORD" 2>/dev/null && wait "$COORD" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$T/coord.log" ] && tail -5 "$T/coord.log" >&2; exit 1; }
cd "$T"

# The recipe: keys, then the coordinator.
"$SYNCREP" keygen coord >/dev/null
"$SYNCREP" keygen workers >/dev/null
cp workers.public authorized
EP=ipc://$T/c.sock
"$SYNCREP" coordinator --store model.db --bind "$EP" \
    --curve-secret-key-file coord.secret --authorized-keys authorized \
    --replicas-to-aggregate 2 --optimizer momentum --learning-rate 0.05 --max-steps 5 \
    >coord.log 2>&1 &
COORD=$!
for _ in $(seq 100); do
    grep -q COORD-START coord.log && break
    sleep 0.1
done
grep -q COORD-START coord.log || fail "the coordinator did not start"
grep -q "curve=on" coord.log || fail "CURVE is not on"

# Without keys: refused (the handshake never completes), exit 1.
rc=0
"$TRAIN" --connect "$EP" --task-index 1 --workers 2 --data-dir "$DATA" --timeout-ms 1500 \
    >nokey.log 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "a trainer without keys: exit $rc: $(cat nokey.log)"
# A bad key file: a usage error that names it.
rc=0
"$TRAIN" --connect "$EP" --task-index 1 --workers 2 --server-public-key-file authorized-x \
    --public-key-file workers.public --secret-key-file workers.secret >bad.log 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "authorized-x" bad.log || fail "a missing key file: exit $rc: $(cat bad.log)"

# Task 0 with the key files, task 1 with the environment.
export OPENBLAS_NUM_THREADS=1
"$TRAIN" --connect "$EP" --task-index 0 --workers 2 --data-dir "$DATA" --batch 32 \
    --server-public-key-file coord.public --public-key-file workers.public \
    --secret-key-file workers.secret --eval-every 1000 >w0.log 2>&1 &
W0=$!
SYNCREP_SERVER_PUBLIC_KEY=$(cat coord.public) SYNCREP_PUBLIC_KEY=$(cat workers.public) \
    SYNCREP_SECRET_KEY=$(cat workers.secret) \
    "$TRAIN" --connect "$EP" --task-index 1 --workers 2 --data-dir "$DATA" --batch 32 \
    >w1.log 2>&1 || fail "task 1 (keys from the environment) failed: $(cat w1.log)"
wait "$W0" || fail "task 0 (key files) failed: $(cat w0.log)"
wait "$COORD" || fail "the coordinator did not exit 0 after --max-steps"
COORD=
grep -q "global_step=5" coord.log || fail "the job did not reach step 5: $(tail -3 coord.log)"
echo "curve_trainer_test: OK"
