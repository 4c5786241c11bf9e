#!/usr/bin/env bash
# `syncrep chaos --targets process,network` for 30 s (issue 27): the job runs
# in a namespace network (chaos/chaos_net.c) and its links are cut, one way
# partitioned, made lossy and powered off, mixed with process kills.  Asserts
# every invariant (replay bit for bit, strictness, exactly R, distinct
# tasks, no lost commits, liveness), that network faults of at least two
# kinds were applied and each was followed by an applied step, that
# report.json and timeline.svg show them, and that the run left no
# namespace behind.  And that without root it refuses, saying why.
#
#   chaos_net_test.sh SYNCREP [SANITIZE]
# Exit 0 pass, 1 fail, 77 skipped (not root, no namespaces or nft, a
# sanitizer build), saying why.  docs/network.md, docs/chaos.md.
set -uo pipefail

SYNCREP=${1:?usage: chaos_net_test.sh SYNCREP [SANITIZE]}
SAN=${2:-}
D=""
CH=""

say() { printf 'chaos_net_test: %s\n' "$*"; }
skip() { say "SKIPPED: $*"; exit 77; }
die() {
    say "FAILED: $*"
    [ -n "$D" ] && [ -f "$D/chaos.log" ] && tail -n 30 "$D/chaos.log"
    exit 1
}
teardown() {
    local rc=$?
    [ -n "$CH" ] && kill -9 "$CH" 2>/dev/null && wait "$CH" 2>/dev/null
    # A harness killed here leaves its namespaces (srnet-PID-*): remove them.
    [ -n "$CH" ] && "$SYNCREP" netns down "srnet-$CH-"
    [ -n "$D" ] && [ "$rc" -eq 0 ] && rm -rf "$D"
    [ -n "$D" ] && [ "$rc" -ne 0 ] && [ -d "$D" ] && say "output kept in $D"
    exit "$rc"
}
trap teardown EXIT
trap 'exit 1' INT TERM

[ -z "$SAN" ] || skip "not run under sanitizers (SYNCREP_SANITIZE=$SAN): 30 s of real time; the plain build runs it"
why=$("$SYNCREP" netns check) || skip "$why"
D=$(mktemp -d /tmp/srchaosnet.XXXXXX) || die "mktemp"

# Without root: a clear refusal, nothing made.
if command -v setpriv >/dev/null; then
    out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$SYNCREP" chaos --workers 2 \
        --replicas-to-aggregate 2 --duration 5 --seed 1 --targets network --out "$D/nonroot" 2>&1)
    rc=$?
    [ "$rc" -eq 2 ] && [[ $out == *"--targets network: needs root"* ]] ||
        die "not root: exit $rc, '$out'"
    [ ! -e "$D/nonroot/store.db" ] || die "a refused run made a store"
    say "without root: $out"
fi

"$SYNCREP" chaos --workers 3 --replicas-to-aggregate 3 --duration 30 --seed 5 --kill-every 1.5 \
    --targets process,network --out "$D/out" >"$D/chaos.log" 2>&1 &
CH=$!
wait "$CH"
rc=$?
pid=$CH
CH=""
grep '^\[chaos\] network:' "$D/chaos.log" | while read -r l; do say "$l"; done
[ "$rc" -eq 0 ] || die "chaos exited $rc"
grep -q '\[chaos\] PASSED' "$D/chaos.log" || die "no PASSED line"
! ip netns list | grep -q "^srnet-$pid-" || die "namespaces srnet-$pid-* left behind"
python3 - "$D/out/report.json" <<'PY' || die "report.json"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["passed"], "not passed"
bad = [c["name"] for c in r["invariants"] if not c["passed"]]
assert not bad, "invariants failed: %s" % bad
n = r["network"]
faults = r["network_faults"]
kinds = {f["kind"] for f in faults}
assert len(faults) >= 3 and len(kinds) >= 2, "too few network faults: %s" % n
for f in faults:
    assert f["end"] > f["start"], f
    assert f["next_step_s"] is not None, "no step after %s" % f
    assert f["next_step_s"] <= 10.0, "recovery above 10 s: %s" % f
assert sum(n["faults"].values()) == len(faults), n
assert sum(r["kills"].values()) >= 5, r["kills"]
print("chaos_net_test: %d network faults %s, next step after each: max %.3f s" %
      (len(faults), n["faults"], n["next_step_seconds"]["max"]))
PY
grep -q 'class="net-' "$D/out/timeline.svg" || die "timeline.svg draws no network fault"
say "PASS"
