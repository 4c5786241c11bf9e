/*
 * gpu/ internals shared by the common layer (gpu.c) and the backends
 * (gpu_host.c, gpu_nccl.c).  The common layer validates, applies the G = 1
 * shortcut and fusion, and turns every call into a plan; a backend only
 * executes plans.  No CUDA or NCCL type appears here.  See docs/gpu.md.
 *
 * A plan is a list of stages.  Each stage is: copies before (pack small
 * tensors into the fusion buffers), collectives (one NCCL group), copies
 * after (unpack).  Copies run in order on their participant's stream (nccl)
 * or thread (host); a stage's collectives start only after every
 * participant's earlier work, and its later copies only after the
 * collectives, so the fusion buffers can be reused by the next stage.
 */
#ifndef SR_GPU_INT_H
#define SR_GPU_INT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "syncrep/gpu.h"

/* One copy on participant `part`: host<->device, device<->device or host. */
typedef struct {
    int         part;
    void       *dst;
    const void *src;
    size_t      bytes;
} sr__gpu_copy;

/* One collective over all participants.  send/recv index plan->ptrs (G
 * entries each); reduce/average use only recv[root] (others NULL);
 * broadcast has send == recv. */
typedef struct {
    sr_gpu_coll kind;
    sr_dtype    dtype;
    sr_gpu_op   op; /* reduce/all-reduce; unused for broadcast/average */
    int         root;
    size_t      count;
    size_t      send_at; /* offset of the G send pointers in plan->ptrs */
    size_t      recv_at; /* offset of the G recv pointers in plan->ptrs */
} sr__gpu_coll;

typedef struct {
    size_t pre_lo, pre_hi;   /* copies before, [lo, hi) of plan->copies */
    size_t coll_lo, coll_hi; /* collectives, [lo, hi) of plan->colls */
    size_t post_lo, post_hi; /* copies after */
} sr__gpu_stage;

typedef struct {
    sr__gpu_copy  *copies;
    size_t         ncopies, copies_cap;
    sr__gpu_coll  *colls;
    size_t         ncolls, colls_cap;
    sr__gpu_stage *stages;
    size_t         nstages, stages_cap;
    void         **ptrs;
    size_t         nptrs, ptrs_cap;
} sr__gpu_plan;

/* What a backend implements.  Every function is called with a valid handle
 * and validated arguments; failures record their detail with sr_fail(). */
typedef struct {
    sr_gpu_backend_kind kind;
    /* Set up g->ndev participants (g->devs filled for nccl by open itself). */
    sr_err (*open)(sr_gpu *g, const sr_gpu_options *o);
    void (*close)(sr_gpu *g);
    /* 0 if `p` may serve as a buffer of participant part; otherwise write
     * why into `why` and return -1. */
    int (*check_buf)(sr_gpu *g, int part, const void *p, char *why, size_t why_len);
    sr_err (*alloc)(sr_gpu *g, int part, size_t bytes, void **out);
    void (*free)(sr_gpu *g, int part, void *p);
    sr_err (*host_alloc)(sr_gpu *g, size_t bytes, void **out);
    void (*host_free)(sr_gpu *g, void *p);
    /* Execute the plan and wait for it, at most g->timeout_ms.  On a timeout
     * or a CUDA/NCCL failure the backend aborts what it must (the NCCL
     * communicator) and returns SR_ETIMEDOUT / SR_EGPU; the common layer
     * then makes the handle sticky. */
    sr_err (*run)(sr_gpu *g, const sr__gpu_plan *plan);
} sr__gpu_backend;

struct sr_gpu {
    const sr__gpu_backend *be;
    void                  *be_state;             /* the backend's own state */
    int                    ndev;                 /* participants G */
    int                    devs[SR_GPU_MAX_DEV]; /* CUDA ordinals (nccl), -1 (host) */
    int                    timeout_ms;           /* per call */
    size_t                 fuse_threshold;       /* bytes: tensors below are fused */
    size_t                 fuse_bytes;           /* bytes of each fusion buffer */
    void                  *fuse[SR_GPU_MAX_DEV]; /* fusion buffers, allocated on first use */
    sr__gpu_plan           plan;                 /* reused between calls */
    void                  *scratch;              /* per-call planner arrays */
    size_t                 scratch_cap;
    sr_err                 sticky; /* SR_OK, or the code every call returns */
    sr_gpu_stats           stats;
    int                    test_stall; /* participant + 1 the next run must stall; 0 none */
    char                   err[1024];  /* last failure text (sr_gpu_error) */
};

/* Where the plan's pointer arrays live (valid during run()). */
static inline void *const *
sr__gpu_ptrs(const sr__gpu_plan *p, size_t at)
{
    return p->ptrs + at;
}

extern const sr__gpu_backend sr__gpu_host_backend;
#ifdef SR_HAVE_CUDA
extern const sr__gpu_backend sr__gpu_nccl_backend;
/* Visible CUDA devices (0 without a driver); `why` gets the CUDA error text
 * when there are none. */
int sr__gpu_nccl_device_count(char *why, size_t why_len);
#endif

/* "participant 2 (cuda:5)" or "participant 2 (host)" into buf. */
const char *sr__gpu_part_name(const sr_gpu *g, int part, char *buf, size_t len);

/* Test seam: the next run() treats participant `part` as never completing
 * (host: its thread waits until the run is aborted; nccl: its completion
 * event is reported pending), so the timeout and abort path can be tested
 * without a broken device.  One shot. */
void sr__gpu_test_stall(sr_gpu *g, int part);

#endif
