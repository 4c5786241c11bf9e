/*
 * The nccl backend: one communicator over the node's G GPUs
 * (ncclCommInitAll), one stream and one completion event per GPU.  A plan's
 * copies go on the participants' streams and each stage's collectives into
 * one ncclGroupStart/End, so many tensors share one launch.  Completion is
 * polled (events plus ncclCommGetAsyncError) against timeout_ms; on a
 * timeout or any failure every communicator is aborted (ncclCommAbort) and
 * never used again.  G = 1 has no communicator: plans then only copy.
 * This is the only file of syncrep that includes CUDA or NCCL headers (the
 * benchmark's raw baseline, gpu_raw.h, lives here too), and every
 * cudaError_t / ncclResult_t becomes an sr_err below.  See docs/gpu.md.
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/dtype.h"
#include "core/log.h"
#include "gpu/gpu_int.h"
#include "gpu/gpu_raw.h"

/* Poll completion without sleeping for this long: small collectives finish
 * in tens of microseconds and a sleep would dominate them. */
#define SPIN_NS 1000000
#define NAP_NS  20000

typedef struct {
    ncclComm_t   *comms;   /* [G] for G > 1; entries NULL once aborted */
    cudaStream_t *streams; /* [G] */
    cudaEvent_t  *events;  /* [G] completion markers */
    ncclComm_t    raw1;    /* bench baseline's one-rank communicator (G = 1) */
} nccl_state;

/* ---- error conversion: the one place CUDA and NCCL codes become sr_err ---- */

static sr_err
cuda_fail(const sr_gpu *g, int part, const char *what, cudaError_t e)
{
    sr_err rc = e == cudaErrorMemoryAllocation ? SR_ENOMEM : SR_EGPU;
    char   who[64];

    (void)cudaGetLastError(); /* clear the runtime's last-error slot */
    if (part >= 0) {
        return sr_fail(rc, "%s on %s: %s (%s)", what, sr__gpu_part_name(g, part, who, sizeof(who)),
                       cudaGetErrorString(e), cudaGetErrorName(e));
    }
    return sr_fail(rc, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

static sr_err
nccl_fail(const sr_gpu *g, int part, const char *what, ncclResult_t r, ncclComm_t comm)
{
    const char *last = ncclGetLastError(comm);
    char        who[64] = "all participants";

    if (part >= 0) {
        sr__gpu_part_name(g, part, who, sizeof(who));
    }
    return sr_fail(SR_EGPU, "%s on %s: %s%s%s", what, who, ncclGetErrorString(r),
                   last != NULL && last[0] ? ": " : "", last != NULL ? last : "");
}

static ncclDataType_t
nccl_type(sr_dtype dt)
{
    switch (dt) {
    case SR_FLOAT32:
        return ncclFloat32;
    case SR_FLOAT64:
        return ncclFloat64;
    case SR_INT32:
        return ncclInt32;
    default:
        return ncclInt64;
    }
}

static ncclRedOp_t
nccl_op(const sr__gpu_coll *c)
{
    if (c->kind == SR_GPU_AVERAGE) {
        return ncclAvg; /* floats: premultiply by 1/G then sum; ints: sum then divide */
    }
    switch (c->op) {
    case SR_GPU_PROD:
        return ncclProd;
    case SR_GPU_MIN:
        return ncclMin;
    case SR_GPU_MAX:
        return ncclMax;
    default:
        return ncclSum;
    }
}

/* The caller's current device is restored on the way out of every entry
 * point: a training program should not see it change under it. */
static int
dev_enter(void)
{
    int d = -1;
    if (cudaGetDevice(&d) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return d;
}

static void
dev_leave(int saved)
{
    if (saved >= 0) {
        (void)cudaSetDevice(saved);
    }
}

int
sr__gpu_nccl_device_count(char *why, size_t why_len)
{
    int         n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);

    /* Without a driver this is cudaErrorInsufficientDriver and n is left
     * unwritten: that is zero devices, not a failure. */
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (why != NULL) {
            snprintf(why, why_len, "cudaGetDeviceCount: %s (%s)", cudaGetErrorString(e),
                     cudaGetErrorName(e));
        }
        return 0;
    }
    if (n == 0 && why != NULL) {
        snprintf(why, why_len, "cudaGetDeviceCount: 0 devices");
    }
    return n;
}

/* ---- lifetime -------------------------------------------------------------- */

static void
abort_comms(sr_gpu *g, const char *why)
{
    nccl_state *ns = g->be_state;
    int         aborted = 0;

    for (int i = 0; ns->comms != NULL && i < g->ndev; i++) {
        if (ns->comms[i] != NULL) {
            (void)ncclCommAbort(ns->comms[i]);
            ns->comms[i] = NULL;
            aborted++;
        }
    }
    if (ns->raw1 != NULL) {
        (void)ncclCommAbort(ns->raw1);
        ns->raw1 = NULL;
    }
    SR_LOG(SR_LOG_WARN, "GPU-ABORT", "backend=nccl ndev=%d comms_aborted=%d reason=\"%s\"", g->ndev,
           aborted, why);
}

static void
nccl_close(sr_gpu *g)
{
    nccl_state *ns = g->be_state;
    int         saved;

    if (ns == NULL) {
        return;
    }
    saved = dev_enter();
    for (int i = 0; ns->comms != NULL && i < g->ndev; i++) {
        if (ns->comms[i] != NULL) {
            (void)ncclCommDestroy(ns->comms[i]);
        }
    }
    if (ns->raw1 != NULL) {
        (void)ncclCommDestroy(ns->raw1);
    }
    for (int i = 0; i < g->ndev; i++) {
        if (ns->streams != NULL && ns->streams[i] != NULL) {
            (void)cudaSetDevice(g->devs[i]);
            (void)cudaStreamDestroy(ns->streams[i]);
        }
        if (ns->events != NULL && ns->events[i] != NULL) {
            (void)cudaEventDestroy(ns->events[i]);
        }
    }
    (void)cudaGetLastError();
    dev_leave(saved);
    free(ns->comms);
    free(ns->streams);
    free(ns->events);
    free(ns);
    g->be_state = NULL;
}

static sr_err
pick_devices(sr_gpu *g, const sr_gpu_options *o, int have)
{
    int G = g->ndev ? g->ndev : (have < SR_GPU_MAX_DEV ? have : SR_GPU_MAX_DEV);

    if (o->devices != NULL && g->ndev == 0) {
        return sr_fail(SR_EINVAL, "sr_gpu_open(nccl): devices given without ndev (their count)");
    }
    if (o->devices == NULL && G > have) {
        return sr_fail(SR_EINVAL, "sr_gpu_open(nccl): ndev %d but only %d CUDA devices visible", G,
                       have);
    }
    for (int i = 0; i < G; i++) {
        int d = o->devices != NULL ? o->devices[i] : i;
        if (d < 0 || d >= have) {
            return sr_fail(SR_EINVAL, "sr_gpu_open(nccl): devices[%d] = %d outside [0, %d)", i, d,
                           have);
        }
        for (int j = 0; j < i; j++) {
            if (g->devs[j] == d) {
                return sr_fail(SR_EINVAL,
                               "sr_gpu_open(nccl): device %d listed twice (devices[%d] "
                               "and [%d]); NCCL needs one rank per GPU",
                               d, j, i);
            }
        }
        g->devs[i] = d;
    }
    g->ndev = G;
    return SR_OK;
}

static sr_err
nccl_open(sr_gpu *g, const sr_gpu_options *o)
{
    char         why[256] = "";
    int          have = sr__gpu_nccl_device_count(why, sizeof(why));
    nccl_state  *ns;
    int          saved, G;
    cudaError_t  e;
    ncclResult_t r;
    sr_err       rc = SR_OK;

    if (have == 0) {
        return sr_fail(SR_EGPU, "sr_gpu_open(nccl): no CUDA device visible (%s)", why);
    }
    if ((rc = pick_devices(g, o, have)) != SR_OK) {
        return rc;
    }
    G = g->ndev;
    if ((ns = calloc(1, sizeof(*ns))) == NULL) {
        return sr_fail(SR_ENOMEM, "sr_gpu_open(nccl): %zu bytes", sizeof(*ns));
    }
    g->be_state = ns; /* from here on nccl_close() cleans up whatever exists */
    ns->streams = calloc((size_t)G, sizeof(*ns->streams));
    ns->events = calloc((size_t)G, sizeof(*ns->events));
    ns->comms = G > 1 ? calloc((size_t)G, sizeof(*ns->comms)) : NULL;
    if (ns->streams == NULL || ns->events == NULL || (G > 1 && ns->comms == NULL)) {
        return sr_fail(SR_ENOMEM, "sr_gpu_open(nccl): tables for %d devices", G);
    }
    saved = dev_enter();
    for (int i = 0; i < G && rc == SR_OK; i++) {
        /* A blocking stream: work the program queued on the legacy default
         * stream is ordered before our copies and collectives. */
        if ((e = cudaSetDevice(g->devs[i])) != cudaSuccess ||
            (e = cudaStreamCreate(&ns->streams[i])) != cudaSuccess ||
            (e = cudaEventCreateWithFlags(&ns->events[i], cudaEventDisableTiming)) != cudaSuccess) {
            rc = cuda_fail(g, i, "sr_gpu_open(nccl): stream/event", e);
        }
    }
    if (rc == SR_OK && G > 1 && (r = ncclCommInitAll(ns->comms, G, g->devs)) != ncclSuccess) {
        rc = nccl_fail(g, -1, "sr_gpu_open(nccl): ncclCommInitAll", r, NULL);
        memset(ns->comms, 0, (size_t)G * sizeof(*ns->comms));
    }
    dev_leave(saved);
    return rc;
}

/* ---- memory ------------------------------------------------------------------ */

static int
nccl_check_buf(sr_gpu *g, int part, const void *p, char *why, size_t why_len)
{
    struct cudaPointerAttributes a;
    cudaError_t                  e;

    memset(&a, 0, sizeof(a));
    if ((e = cudaPointerGetAttributes(&a, p)) != cudaSuccess) {
        (void)cudaGetLastError(); /* older runtimes fail on plain host pointers */
        a.type = cudaMemoryTypeUnregistered;
    }
    switch (a.type) {
    case cudaMemoryTypeDevice:
        if (a.device != g->devs[part]) {
            snprintf(why, why_len, "is device memory of cuda:%d, not of the participant's cuda:%d",
                     a.device, g->devs[part]);
            return -1;
        }
        return 0;
    case cudaMemoryTypeManaged:
        return 0;
    case cudaMemoryTypeHost:
        snprintf(why, why_len,
                 "is not device memory (pinned host memory); the nccl backend "
                 "needs memory of cuda:%d (sr_gpu_alloc)",
                 g->devs[part]);
        return -1;
    default:
        snprintf(why, why_len,
                 "is not device memory (unregistered host memory); the nccl "
                 "backend needs memory of cuda:%d (sr_gpu_alloc)",
                 g->devs[part]);
        return -1;
    }
}

static sr_err
nccl_alloc(sr_gpu *g, int part, size_t bytes, void **out)
{
    void       *p = NULL;
    int         saved = dev_enter();
    cudaError_t e = cudaSetDevice(g->devs[part]);

    if (e == cudaSuccess) {
        e = cudaMalloc(&p, bytes ? bytes : 1);
    }
    dev_leave(saved);
    if (e != cudaSuccess) {
        char what[64];
        snprintf(what, sizeof(what), "cudaMalloc(%zu bytes)", bytes);
        return cuda_fail(g, part, what, e);
    }
    *out = p;
    return SR_OK;
}

static void
nccl_free(sr_gpu *g, int part, void *p)
{
    int saved = dev_enter();
    if (cudaSetDevice(g->devs[part]) == cudaSuccess) {
        (void)cudaFree(p);
    }
    (void)cudaGetLastError();
    dev_leave(saved);
}

static sr_err
nccl_host_alloc(sr_gpu *g, size_t bytes, void **out)
{
    void       *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable);

    if (e != cudaSuccess) {
        char what[64];
        snprintf(what, sizeof(what), "cudaHostAlloc(%zu bytes)", bytes);
        return cuda_fail(g, -1, what, e);
    }
    *out = p;
    return SR_OK;
}

static void
nccl_host_free(sr_gpu *g, void *p)
{
    (void)g;
    (void)cudaFreeHost(p);
    (void)cudaGetLastError();
}

/* ---- running plans ----------------------------------------------------------- */

static sr_err
enqueue_copies(sr_gpu *g, const sr__gpu_plan *plan, size_t lo, size_t hi)
{
    nccl_state *ns = g->be_state;
    cudaError_t e;

    for (size_t k = lo; k < hi; k++) {
        const sr__gpu_copy *c = &plan->copies[k];
        if ((e = cudaSetDevice(g->devs[c->part])) != cudaSuccess ||
            (e = cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDefault,
                                 ns->streams[c->part])) != cudaSuccess) {
            return cuda_fail(g, c->part, "cudaMemcpyAsync", e);
        }
    }
    return SR_OK;
}

static ncclResult_t
enqueue_one(sr_gpu *g, const sr__gpu_plan *plan, const sr__gpu_coll *c, int i)
{
    nccl_state *ns = g->be_state;
    const void *send = sr__gpu_ptrs(plan, c->send_at)[i];
    void       *recv = sr__gpu_ptrs(plan, c->recv_at)[i];

    switch (c->kind) {
    case SR_GPU_BROADCAST:
        return ncclBroadcast(send, recv, c->count, nccl_type(c->dtype), c->root, ns->comms[i],
                             ns->streams[i]);
    case SR_GPU_ALLREDUCE:
        return ncclAllReduce(send, recv, c->count, nccl_type(c->dtype), nccl_op(c), ns->comms[i],
                             ns->streams[i]);
    default: /* reduce, average; recv is NULL off the root, as NCCL allows */
        return ncclReduce(send, recv, c->count, nccl_type(c->dtype), nccl_op(c), c->root,
                          ns->comms[i], ns->streams[i]);
    }
}

static sr_err
enqueue_group(sr_gpu *g, const sr__gpu_plan *plan, const sr__gpu_stage *st)
{
    ncclResult_t r, first = ncclSuccess;
    int          bad = -1;

    if ((r = ncclGroupStart()) != ncclSuccess) {
        return nccl_fail(g, -1, "ncclGroupStart", r, NULL);
    }
    for (size_t k = st->coll_lo; k < st->coll_hi && first == ncclSuccess; k++) {
        for (int i = 0; i < g->ndev && first == ncclSuccess; i++) {
            if ((r = enqueue_one(g, plan, &plan->colls[k], i)) != ncclSuccess) {
                first = r;
                bad = i;
            }
        }
    }
    /* The group is always closed, even after a failed call inside it. */
    r = ncclGroupEnd();
    if (first != ncclSuccess) {
        return nccl_fail(g, bad, "enqueueing a collective", first,
                         ((nccl_state *)g->be_state)->comms[bad]);
    }
    if (r != ncclSuccess) {
        return nccl_fail(g, -1, "ncclGroupEnd", r, NULL);
    }
    return SR_OK;
}

static void
pending_list(const unsigned char *done, int G, char *buf, size_t len)
{
    size_t at = 0;

    buf[0] = '\0';
    for (int i = 0; i < G && at < len; i++) {
        if (!done[i]) {
            int n = snprintf(buf + at, len - at, "%s%d", at ? "," : "", i);
            at += n > 0 ? (size_t)n : 0;
        }
    }
}

/* Wait for everything enqueued, at most timeout_ms, watching NCCL's
 * asynchronous errors meanwhile: a peer that fails makes the others hang,
 * and only the error flag tells. */
static sr_err
wait_all(sr_gpu *g)
{
    nccl_state   *ns = g->be_state;
    int           G = g->ndev, pending = G;
    unsigned char done[SR_GPU_MAX_DEV] = {0};
    int64_t       start = sr_clock_now_ns(), now;
    cudaError_t   e;

    for (int i = 0; i < G; i++) {
        if ((e = cudaSetDevice(g->devs[i])) != cudaSuccess ||
            (e = cudaEventRecord(ns->events[i], ns->streams[i])) != cudaSuccess) {
            return cuda_fail(g, i, "cudaEventRecord", e);
        }
    }
    for (;;) {
        for (int i = 0; i < G; i++) {
            if (done[i] || g->test_stall == i + 1) {
                continue;
            }
            e = cudaEventQuery(ns->events[i]);
            if (e == cudaSuccess) {
                done[i] = 1;
                pending--;
            } else if (e != cudaErrorNotReady) {
                return cuda_fail(g, i, "collective or copy failed", e);
            }
        }
        if (pending == 0) {
            return SR_OK;
        }
        for (int i = 0; ns->comms != NULL && i < G; i++) {
            ncclResult_t ar = ncclSuccess, r = ncclCommGetAsyncError(ns->comms[i], &ar);
            if (r != ncclSuccess) {
                return nccl_fail(g, i, "ncclCommGetAsyncError", r, ns->comms[i]);
            }
            if (ar != ncclSuccess && ar != ncclInProgress) {
                return nccl_fail(g, i, "asynchronous NCCL error", ar, ns->comms[i]);
            }
        }
        now = sr_clock_now_ns();
        if (now - start > (int64_t)g->timeout_ms * 1000000) {
            char list[256];
            pending_list(done, G, list, sizeof(list));
            return sr_fail(SR_ETIMEDOUT,
                           "collective did not complete within %d ms: participant(s) "
                           "%s still running; communicator aborted",
                           g->timeout_ms, list);
        }
        if (now - start < SPIN_NS) {
            sched_yield();
        } else {
            struct timespec nap = {0, NAP_NS};
            nanosleep(&nap, NULL);
        }
    }
}

static sr_err
nccl_run(sr_gpu *g, const sr__gpu_plan *plan)
{
    int    saved = dev_enter();
    sr_err rc = SR_OK;

    for (size_t s = 0; s < plan->nstages && rc == SR_OK; s++) {
        const sr__gpu_stage *st = &plan->stages[s];
        rc = enqueue_copies(g, plan, st->pre_lo, st->pre_hi);
        if (rc == SR_OK && st->coll_hi > st->coll_lo) {
            rc = enqueue_group(g, plan, st);
        }
        if (rc == SR_OK) {
            rc = enqueue_copies(g, plan, st->post_lo, st->post_hi);
        }
    }
    if (rc == SR_OK) {
        rc = wait_all(g);
    }
    if (rc != SR_OK) {
        /* Whatever was enqueued may still run or hang: the communicator is
         * in doubt, so it is aborted and the handle turns sticky. */
        abort_comms(g, sr_errdetail());
    }
    dev_leave(saved);
    return rc;
}

/* ---- the benchmark's baseline (gpu_raw.h) -------------------------------------- */

sr_err
sr__gpu_raw_allreduce(sr_gpu *g, void *const send[], void *const recv[], size_t count,
                      sr_dtype dtype, int iters, double *us_per_iter)
{
    nccl_state  *ns;
    ncclComm_t  *comms;
    ncclResult_t r = ncclSuccess;
    cudaError_t  e = cudaSuccess;
    int64_t      t0, t1;
    int          saved;

    if (g == NULL || send == NULL || recv == NULL || us_per_iter == NULL || iters <= 0 ||
        sr_dtype_size(dtype) == 0) {
        return sr_fail(SR_EINVAL, "sr__gpu_raw_allreduce: bad argument");
    }
    if (g->be->kind != SR_GPU_NCCL) {
        return sr_fail(SR_EINVAL, "sr__gpu_raw_allreduce: handle is not on the nccl backend");
    }
    if (g->sticky != SR_OK) {
        return sr_fail(g->sticky, "sr__gpu_raw_allreduce: handle unusable: %s", g->err);
    }
    ns = g->be_state;
    saved = dev_enter();
    if (g->ndev == 1 && ns->raw1 == NULL &&
        (r = ncclCommInitAll(&ns->raw1, 1, g->devs)) != ncclSuccess) {
        ns->raw1 = NULL;
        dev_leave(saved);
        return nccl_fail(g, 0, "ncclCommInitAll(1 rank)", r, NULL);
    }
    comms = g->ndev == 1 ? &ns->raw1 : ns->comms;
    t0 = sr_clock_now_ns();
    for (int it = 0; it < iters && r == ncclSuccess; it++) {
        r = ncclGroupStart();
        for (int i = 0; i < g->ndev && r == ncclSuccess; i++) {
            r = ncclAllReduce(send[i], recv[i], count, nccl_type(dtype), ncclSum, comms[i],
                              ns->streams[i]);
        }
        ncclResult_t r2 = ncclGroupEnd();
        r = r != ncclSuccess ? r : r2;
    }
    for (int i = 0; i < g->ndev && r == ncclSuccess && e == cudaSuccess; i++) {
        if ((e = cudaSetDevice(g->devs[i])) == cudaSuccess) {
            e = cudaStreamSynchronize(ns->streams[i]);
        }
    }
    t1 = sr_clock_now_ns();
    if (r != ncclSuccess || e != cudaSuccess) {
        sr_err rc = r != ncclSuccess ? nccl_fail(g, -1, "raw ncclAllReduce", r, NULL)
                                     : cuda_fail(g, -1, "raw ncclAllReduce sync", e);
        abort_comms(g, sr_errdetail());
        snprintf(g->err, sizeof(g->err), "%s", sr_errdetail());
        g->sticky = SR_EGPU;
        dev_leave(saved);
        return rc;
    }
    dev_leave(saved);
    *us_per_iter = (double)(t1 - t0) / 1e3 / iters;
    return SR_OK;
}

const sr__gpu_backend sr__gpu_nccl_backend = {
    .kind = SR_GPU_NCCL,
    .open = nccl_open,
    .close = nccl_close,
    .check_buf = nccl_check_buf,
    .alloc = nccl_alloc,
    .free = nccl_free,
    .host_alloc = nccl_host_alloc,
    .host_free = nccl_host_free,
    .run = nccl_run,
};
