#!/usr/bin/env bash
# Run the benchmark suite from a build directory and gather the results in
# bench/results.json.  Each benchmark pairs syncrep with a baseline measured
# by the same program in the same run and reports the ratio; see
# docs/performance.md.  Usage: bench/run_all.sh BUILD_DIR
# PERF_ARGS: extra arguments for bench/perf (e.g. PERF_ARGS=--quick);
# PYTHON_BENCH_ARGS: for bench/python/bench_torch.py (e.g. --quick).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=bench/results.json
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

run() {
    local name=$1; shift
    echo "# ---- $name ----"
    "$@" --json "$TMP/$name.json"
}

if rev=$(git rev-parse --short HEAD 2>/dev/null); then
    git diff --quiet HEAD 2>/dev/null || rev="$rev+changes"
    echo "# git $rev"
fi
run store_commit "$BUILD/bench/store/store_commit"
run store_small "$BUILD/bench/store/store_small" --runs 2 --step-log
run local_reduce "$BUILD/bench/gpu/local_reduce"
run optim_apply "$BUILD/bench/optim/optim_apply"
# shellcheck disable=SC2086  # PERF_ARGS is a list of words
run perf "$BUILD/bench/perf/perf" --syncrep "$BUILD/cli/syncrep" ${PERF_ARGS:-}
# The PyTorch row (issue 24): syncrep.torch against the C client, same run;
# it prints SKIPPED (and still writes its JSON) without numpy or torch.
# shellcheck disable=SC2086  # PYTHON_BENCH_ARGS is a list of words (e.g. --quick)
run python /usr/bin/python3 bench/python/bench_torch.py --build "$BUILD" ${PYTHON_BENCH_ARGS:-}

{
    echo "{"
    first=1
    for f in "$TMP"/*.json; do
        [ $first -eq 1 ] || echo ","
        first=0
        printf '  "%s": ' "$(basename "$f" .json)"
        cat "$f"
    done
    echo "}"
} > "$OUT"
echo "# results: $OUT"
