/*
 * The worker's GPU path: a variable between a node's devices (syncrep/gpu.h)
 * and the coordinator (syncrep/syncrep.h), implemented in libsyncrep
 * (worker/worker_gpu.c).  See docs/gpu.md.
 */
#ifndef SYNCREP_WORKER_GPU_H
#define SYNCREP_WORKER_GPU_H

#include <stddef.h>

#include "syncrep/error.h"
#include "syncrep/export.h"
#include "syncrep/gpu.h"
#include "syncrep/syncrep.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The worker path (implemented in libsyncrep's worker/worker_gpu.c): move one
 * variable between the node's devices and the coordinator.  Participant 0 is
 * the root device.  `pinned`/`pinned_bytes` is a host staging buffer, ideally
 * from sr_gpu_host_alloc, at least count x dtype size bytes.  Client failures
 * return the code sr_client_push/sr_client_pull gave (text in
 * sr_client_error(c)); gpu failures as above.  Blocking: the collective plus
 * one client round trip per variable.  Same thread rule for g and c.
 */

/* One variable of a batch for the *_vars helpers. */
typedef struct {
    const char  *name;     /* as declared with sr_client_declare */
    void *const *dev_bufs; /* [G] the variable's buffer (gradient or value) per device */
    size_t       count;    /* elements */
    sr_dtype     dtype;
} sr_gpu_var;

/* Average the variable's per-device gradients onto the root device
 * (dev_bufs[0] is overwritten with the average; the others are unchanged),
 * copy it to `pinned` and push it with sr_client_push(c, name, ...).
 * Errors: SR_EINVAL (pinned too small, bad buffers), gpu and client codes. */
SR_API sr_err sr_gpu_push_average(sr_gpu *g, sr_client *c, const char *name, void *const dev_bufs[],
                                  size_t count, sr_dtype dtype, void *pinned, size_t pinned_bytes);

/* As sr_gpu_push_average for n variables: one grouped (fused) average, then
 * one copy and one push per variable, in order; stops at the first failure
 * (earlier variables are pushed).  pinned must hold the largest variable. */
SR_API sr_err sr_gpu_push_average_vars(sr_gpu *g, sr_client *c, const sr_gpu_var *vars, size_t n,
                                       void *pinned, size_t pinned_bytes);

/* Pull the variable with sr_client_pull into `pinned`, copy it to the root
 * device (dev_bufs[0]) and broadcast it to every device's dev_bufs[i]. */
SR_API sr_err sr_gpu_pull_broadcast(sr_gpu *g, sr_client *c, const char *name,
                                    void *const dev_bufs[], size_t count, sr_dtype dtype,
                                    void *pinned, size_t pinned_bytes);

/* As sr_gpu_pull_broadcast for n variables: each is pulled and copied to the
 * root device in turn, then one grouped (fused) broadcast sends them all.
 * On failure the devices other than the root may hold older values. */
SR_API sr_err sr_gpu_pull_broadcast_vars(sr_gpu *g, sr_client *c, const sr_gpu_var *vars, size_t n,
                                         void *pinned, size_t pinned_bytes);

#ifdef __cplusplus
}
#endif
#endif
