/*
 * The table-driven gpu/ suite every backend must pass (gpu_suite.c): each
 * operation x reduction x dtype x G in {1, 2, 3, 8} x sizes, checked exactly
 * against a reference computed in int64 from exactly representable inputs.
 * gpu_host_test.c runs it on the host backend, gpu_nccl_test.c on NCCL,
 * where cases needing more GPUs than visible are skipped with a printed
 * reason (all of them without a GPU: cmocka skip()).
 */
#ifndef SR_GPU_SUITE_H
#define SR_GPU_SUITE_H

#include "syncrep/gpu.h"

/* Run the shared suite on `backend` as cmocka group `name`; returns the
 * number of failed tests. */
int gpu_suite_run(sr_gpu_backend_kind backend, const char *name);

/* Visible CUDA devices (0 without CUDA, a driver or a device). */
int gpu_suite_device_count(void);

/* For device tests: if fewer than `need` GPUs are visible, print why and
 * skip() the calling test, or fail it when SR_TEST_REQUIRE_GPU=1 is set
 * (tests/gpu/device-check.sh sets it: a GPU machine must not skip).  The
 * local stand-in for sr_test_require_gpu() (STYLE.md section 7). */
void gpu_suite_require_gpus(int need);

#endif
