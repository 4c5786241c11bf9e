#!/usr/bin/env bash
# Issue 22: scripts/demo.sh never removes a store it should not.
#   1. a coordinator runs on DIR/store.db: the demo (even with --fresh) refuses
#      with a clear message, the store and the coordinator are untouched;
#   2. a bad option is refused before anything is touched;
#   3. an existing store without --fresh or --resume is refused and kept;
#   4. without --dir each run gets a directory of its own.
# Usage: demo_test.sh SOURCE_DIR BUILD_DIR.  Starts one coordinator of its own
# and stops it by its PID.
set -euo pipefail
SRC=$1
BUILD=$2
SYNCREP=$BUILD/cli/syncrep
DEMO=$SRC/scripts/demo.sh
[ -x "$SYNCREP" ] || { echo "SKIPPED: no $SYNCREP"; exit 77; }
command -v flock >/dev/null || { echo "SKIPPED: no flock(1) (util-linux)"; exit 77; }

T=$(mktemp -d "${TMPDIR:-/tmp}/demo-test.XXXXXX")
COORD=
cleanup() {
    [ -n "$COORD" ] && kill -TERM "$COORD" 2>/dev/null && wait "$COORD" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The demo's inputs, faked: it must refuse before it uses them.
mkdir -p "$T/data"
: >"$T/data/train-images-idx3-ubyte.gz"
export DATA_DIR=$T/data TRAIN_BIN=/bin/true SYNCREP_BIN=$SYNCREP XDG_STATE_HOME=$T/state

mkdir -p "$T/d"
"$SYNCREP" coordinator --store "$T/d/store.db" --bind "ipc://$T/c.sock" \
    --replicas-to-aggregate 1 --learning-rate 0.1 >"$T/coord.log" 2>&1 &
COORD=$!
for _ in $(seq 100); do
    grep -q COORD-START "$T/coord.log" && break
    sleep 0.1
done
grep -q COORD-START "$T/coord.log" || fail "the coordinator did not start: $(cat "$T/coord.log")"

# 1. in use: refused, store kept, coordinator alive.
for extra in --fresh "" --resume; do
    rc=0
    "$DEMO" "$BUILD" --dir "$T/d" $extra >"$T/out" 2>&1 || rc=$?
    [ "$rc" = 1 ] || fail "demo $extra on a store in use: exit $rc: $(cat "$T/out")"
    grep -q "is in use by a running coordinator (pid $COORD" "$T/out" ||
        fail "demo $extra: no clear message: $(cat "$T/out")"
    [ -e "$T/d/store.db" ] || fail "demo $extra removed the store a coordinator uses"
    kill -0 "$COORD" || fail "the coordinator died"
done
kill -TERM "$COORD"
wait "$COORD" || true
COORD=

# 2. a bad option: exit 2, store kept.
rc=0
"$DEMO" "$BUILD" --dir "$T/d" --fresh --workers 0 >"$T/out" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "--workers 0: exit $rc"
rc=0
"$DEMO" "$BUILD" --dir "$T/d" --fresh --target-accuracy lots >"$T/out" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "--target-accuracy lots: exit $rc"
[ -e "$T/d/store.db" ] || fail "a refused option removed the store"

# 3. a store this run did not create: kept without --fresh.
rc=0
"$DEMO" "$BUILD" --dir "$T/d" >"$T/out" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "existing store without --fresh: exit $rc: $(cat "$T/out")"
grep -q "exists and this run did not create it" "$T/out" || fail "no message: $(cat "$T/out")"
[ -e "$T/d/store.db" ] || fail "the store was removed without --fresh"

# 4. no --dir: a directory per run (the fake trainer makes the run fail
# after that, which is fine here), and demo/latest names the last one.
"$DEMO" "$BUILD" >/dev/null 2>&1 || true
"$DEMO" "$BUILD" >/dev/null 2>&1 || true
n=$(find "$T/state/syncrep/demo" -maxdepth 1 -name 'run-*' -type d | wc -l)
[ "$n" = 2 ] || fail "expected 2 run directories, found $n"
[ -L "$T/state/syncrep/demo/latest" ] || fail "no demo/latest link"
echo "demo_test: OK"
