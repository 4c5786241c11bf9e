/*
 * Baselines for bench/gpu/local_reduce: NCCL called directly, without
 * syncrep's checks, fusion or timed waits, so the benchmark can report how
 * close sr_gpu_allreduce comes to it in the same process.  Not for training
 * code.  Built without CUDA these return SR_ENOTSUP.
 */
#ifndef SR_GPU_RAW_H
#define SR_GPU_RAW_H

#include <stddef.h>

#include "syncrep/gpu.h"

/* Run `iters` back-to-back ncclAllReduce(sum) groups over g's devices (a
 * private one-rank communicator when G = 1) on g's streams, then synchronise
 * once; *us_per_iter = elapsed microseconds / iters.  g must use the nccl
 * backend.  Errors: SR_EINVAL, SR_ENOTSUP, SR_EGPU (the handle turns sticky).
 * Blocks with no timeout. */
sr_err sr__gpu_raw_allreduce(sr_gpu *g, void *const send[], void *const recv[], size_t count,
                             sr_dtype dtype, int iters, double *us_per_iter);

#endif
