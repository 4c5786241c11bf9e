#!/usr/bin/env bash
# Device check for gpu/ on a machine with NVIDIA GPUs (docs/gpu.md):
# configures a fresh build with -DSYNCREP_CUDA=ON, builds only what the
# checks need, runs exactly the tests labelled `gpu` (skipping is a failure
# here: SR_TEST_REQUIRE_GPU=1) and the benchmark on the nccl backend, and
# prints nvidia-smi.  Exits non-zero on any failure.  About a minute on one
# GPU (five at most).  Needs what ./run installs, plus the CUDA toolkit and
# NCCL (found under /usr/local/cuda, or CUDAToolkit_ROOT / NCCL_ROOT).
#
# Environment: BUILD_DIR (default build-device-check), JOBS (default nproc),
#              RESULTS_DIR (default the build dir: local_reduce.json, logs),
#              BENCH_ARGS (extra local_reduce arguments, e.g. --enforce-target).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-device-check}
RESULTS=${RESULTS_DIR:-$BUILD}
JOBS=${JOBS:-$(nproc)}
log() { printf '==> %s\n' "$*" >&2; }
fail() { printf 'device-check: FAILED: %s\n' "$*" >&2; exit 1; }

log "GPUs"
command -v nvidia-smi >/dev/null || fail "nvidia-smi not found: no NVIDIA driver on this machine"
nvidia-smi || fail "nvidia-smi failed"

log "configuring $BUILD (SYNCREP_CUDA=ON)"
rm -rf "$BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSYNCREP_CUDA=ON -DSYNCREP_WERROR=ON \
    >"$BUILD.configure.log" 2>&1 || { cat "$BUILD.configure.log"; fail "configure"; }
mkdir -p "$RESULTS"
mv "$BUILD.configure.log" "$RESULTS/configure.log"

# Build exactly the gpu-labelled tests (test name = target name) and the
# benchmark, not the whole tree.
mapfile -t TESTS < <(ctest --test-dir "$BUILD" -L gpu -N | sed -n 's/^ *Test *#[0-9]*: *//p')
[ "${#TESTS[@]}" -gt 0 ] || fail "no tests labelled gpu (was CUDA/NCCL found?)"
log "building ${TESTS[*]} local_reduce"
cmake --build "$BUILD" -j "$JOBS" --target "${TESTS[@]}" local_reduce

log "running ctest -L gpu"
export SR_TEST_REQUIRE_GPU=1
ctest --test-dir "$BUILD" -L gpu --output-on-failure --timeout 240 -V 2>&1 |
    tee "$RESULTS/ctest-gpu.log" | grep -E '^[0-9]+: (\[|  skipped|gpu_nccl)|tests passed|Test *#' || true
grep -q '100% tests passed' "$RESULTS/ctest-gpu.log" || fail "gpu tests (see $RESULTS/ctest-gpu.log)"
if grep -q -E 'Skipped|Not Run' "$RESULTS/ctest-gpu.log"; then
    fail "a gpu test was skipped on a GPU machine"
fi

log "benchmark: local_reduce --backend nccl"
status=0
# shellcheck disable=SC2086
"$BUILD/bench/gpu/local_reduce" --backend nccl --json "$RESULTS/local_reduce.json" ${BENCH_ARGS:-} |
    tee "$RESULTS/local_reduce.txt" || status=$?
[ "$status" -eq 0 ] || fail "local_reduce exited $status (see $RESULTS/local_reduce.txt)"

log "GPUs after the run"
nvidia-smi
log "device-check: OK"
