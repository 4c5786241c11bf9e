/*
 * syncrep intra-node collectives: reduce, broadcast, all-reduce and average
 * over the G participants of one node (its GPUs), so a worker pushes one
 * averaged gradient per variable.  Two backends behind one API: `nccl` (one
 * NCCL communicator over the node's GPUs) and `host` (host memory, one thread
 * per participant: CPU-only nodes and tests).  Plain C types only: a training
 * program never includes CUDA or NCCL headers to use this.  See docs/gpu.md.
 *
 * Conventions for every function below:
 * - Participants are numbered 0..G-1 (G = sr_gpu_ndev()).  An argument named
 *   `bufs`, `send` or `recv` is an array of G pointers; entry i lives on
 *   participant i: device memory of that participant's GPU for nccl (from
 *   sr_gpu_alloc or the program's own cudaMalloc), host memory for host.
 * - Returns SR_OK (0) or a negative sr_err; the text is in sr_errdetail() at
 *   once and in sr_gpu_error(g) until the next call on g.
 * - SR_EGPU (CUDA/NCCL failure) and SR_ETIMEDOUT (a collective did not
 *   complete within timeout_ms; the NCCL communicator is then aborted) are
 *   sticky: every later call on the handle returns the same code until it is
 *   closed and reopened.  SR_EINVAL and SR_ENOMEM leave the handle usable.
 * - Collective and copy calls block until their results are in place, at most
 *   timeout_ms.  Work that produces their inputs must be complete (or ordered
 *   on the legacy default stream) before the call.
 * - A handle is driven by one thread at a time; distinct handles are
 *   independent.  Functions without a handle are thread-safe.
 */
#ifndef SYNCREP_GPU_H
#define SYNCREP_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "syncrep/dtype.h"
#include "syncrep/error.h"
#include "syncrep/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sr_gpu sr_gpu;

/* Which implementation carries the collectives. */
typedef enum {
    SR_GPU_AUTO = 0, /* nccl when built with CUDA and >= max(ndev, 1) GPUs are visible */
    SR_GPU_HOST = 1, /* host memory, one thread per participant */
    SR_GPU_NCCL = 2, /* NCCL over the node's GPUs; SR_ENOTSUP when built without CUDA */
} sr_gpu_backend_kind;

/* Element-wise reductions. */
typedef enum { SR_GPU_SUM = 1, SR_GPU_PROD = 2, SR_GPU_MIN = 3, SR_GPU_MAX = 4 } sr_gpu_op;

/* Collectives, for sr_gpu_group(). */
typedef enum {
    SR_GPU_REDUCE = 1,    /* op over all participants' inputs, result on the root */
    SR_GPU_BROADCAST = 2, /* the root's buffer copied to every participant's */
    SR_GPU_ALLREDUCE = 3, /* op over all inputs, result on every participant */
    SR_GPU_AVERAGE = 4,   /* sum / G on the root (see sr_gpu_average) */
} sr_gpu_coll;

/* Default timeout of one call, and the fusion defaults (docs/gpu.md). */
#define SR_GPU_DEFAULT_TIMEOUT_MS     60000
#define SR_GPU_DEFAULT_FUSE_THRESHOLD ((size_t)64 << 10)
#define SR_GPU_DEFAULT_FUSE_BUFFER    ((size_t)4 << 20)
/* fuse_threshold_bytes value that turns fusion off (no tensor is under 1 byte). */
#define SR_GPU_FUSE_NONE ((size_t)1)
/* Most participants one handle accepts. */
#define SR_GPU_MAX_DEV 64

/* Options for sr_gpu_open.  All-zero means: auto backend, every visible GPU
 * (or 1 host participant), default timeout and fusion. */
typedef struct {
    sr_gpu_backend_kind backend;
    int                 ndev;    /* participants G; 0 = all visible GPUs (nccl), 1 (host) */
    const int          *devices; /* nccl: ndev (> 0) distinct CUDA ordinals; NULL = 0..G-1.
                                    host: ignored.  Read during sr_gpu_open only. */
    int    timeout_ms;           /* per call; 0 = SR_GPU_DEFAULT_TIMEOUT_MS; < 0 invalid */
    size_t fuse_threshold_bytes; /* tensors under this many bytes travel fused in
                                    batches; 0 = default; SR_GPU_FUSE_NONE = never */
    size_t fuse_buffer_bytes;    /* fusion buffer per participant; 0 = max(default,
                                    threshold); must be >= the threshold */
} sr_gpu_options;

/* Counters of what a handle did (monotonic since open). */
typedef struct {
    uint64_t calls;         /* collective calls that completed (single or group) */
    uint64_t tensors;       /* tensors those calls carried, zero-length included */
    uint64_t fused_tensors; /* tensors that travelled packed in a fusion buffer */
    uint64_t launches;      /* collectives handed to NCCL / the host threads; stays 0 at G = 1 */
    uint64_t groups;        /* grouped launches: one ncclGroupStart/End (or host stage) each */
    uint64_t bytes;         /* payload bytes per participant of those calls */
} sr_gpu_stats;

/* Open a handle over G participants.  nccl: checks the devices, creates one
 * stream and one event per device and, for G > 1, one communicator over all
 * of them (ncclCommInitAll).  host: starts G threads (none for G = 1).
 * o may be NULL (all defaults).  Success: *out owns the handle; release it
 * with sr_gpu_close().  Failure: *out untouched.
 * Errors: SR_EINVAL (options: ndev < 0 or > SR_GPU_MAX_DEV, more devices than
 * visible, duplicate or out-of-range ordinal, timeout_ms < 0, buffer smaller
 * than threshold), SR_ENOTSUP (nccl in a build without CUDA), SR_EGPU (no GPU
 * visible, CUDA or NCCL failure), SR_ENOMEM.  Blocks while NCCL initialises
 * (typically well under a second per device).  Thread-safe. */
SR_API sr_err sr_gpu_open(sr_gpu **out, const sr_gpu_options *o);

/* Destroy the communicator (if not already aborted), streams, threads and
 * fusion buffers.  Buffers from sr_gpu_alloc/sr_gpu_host_alloc must be freed
 * before.  NULL is fine.  Blocks until the handle's own work has drained. */
SR_API void sr_gpu_close(sr_gpu *g);

/* Text of the handle's last failure, "" if none.  Borrowed: valid until the
 * next call on g or its close. */
SR_API const char *sr_gpu_error(const sr_gpu *g);

/* The backend the handle runs on (never SR_GPU_AUTO).  No I/O. */
SR_API sr_gpu_backend_kind sr_gpu_backend(const sr_gpu *g);

/* "auto", "host", "nccl"; "?" otherwise.  Static text.  Thread-safe. */
SR_API const char *sr_gpu_backend_name(sr_gpu_backend_kind b);

/* Number of participants G.  No I/O. */
SR_API int sr_gpu_ndev(const sr_gpu *g);

/* CUDA ordinal of participant i (nccl), -1 for host or an i out of range. */
SR_API int sr_gpu_device(const sr_gpu *g, int i);

/* Number of CUDA devices the nccl backend could use: 0 in a build without
 * CUDA, without a driver or without devices.  Errors: SR_EINVAL (out NULL).
 * Thread-safe. */
SR_API sr_err sr_gpu_device_count(int *out);

/* Copy the handle's counters into *out.  Errors: SR_EINVAL (NULL). */
SR_API sr_err sr_gpu_stats_get(const sr_gpu *g, sr_gpu_stats *out);

/* Reduce: recv_on_root[k] = op over i of send[i][k], for k < count, written
 * on participant `root` (recv_on_root may be send[root]: in place).  send is
 * not modified.  count 0 does nothing (NULL buffers allowed then); G = 1 only
 * copies send[0] to recv_on_root (no collective is launched).
 * Integer sum/prod wrap (two's complement); NaN handling of min/max follows
 * the backend.  Errors: SR_EINVAL (unknown dtype or op, root outside [0, G),
 * a NULL buffer or, for nccl, a buffer that is not device memory of its
 * participant: the detail names the participant), SR_ENOMEM, and the sticky
 * SR_EGPU / SR_ETIMEDOUT.  Blocks until done or timeout_ms. */
SR_API sr_err sr_gpu_reduce(sr_gpu *g, void *const send[], void *recv_on_root, size_t count,
                            sr_dtype dtype, sr_gpu_op op, int root);

/* Broadcast, in place: bufs[root] is copied into every other bufs[i].  The
 * adjoint of sr_gpu_reduce with SR_GPU_SUM.  G = 1 does nothing.  Errors and
 * blocking as sr_gpu_reduce. */
SR_API sr_err sr_gpu_broadcast(sr_gpu *g, void *const bufs[], size_t count, sr_dtype dtype,
                               int root);

/* All-reduce: recv[i][k] = op over j of send[j][k], on every participant.
 * recv NULL, or recv[i] == send[i], is in place; otherwise recv[i] must not
 * overlap any send buffer.  G = 1 copies.  Errors and blocking as
 * sr_gpu_reduce (no root). */
SR_API sr_err sr_gpu_allreduce(sr_gpu *g, void *const send[], void *const recv[], size_t count,
                               sr_dtype dtype, sr_gpu_op op);

/* Average to the root, computed on the devices: recv_on_root = sum / G.
 * Floats: each input is multiplied by (dtype)(1/G) and the products summed
 * (NCCL's ncclAvg; exact when G is a power of two or the inputs are
 * multiples of G, otherwise within one rounding per input); integers: the
 * sum divided by G, truncated toward zero.  G = 1 copies.  Errors and
 * blocking as sr_gpu_reduce. */
SR_API sr_err sr_gpu_average(sr_gpu *g, void *const send[], void *recv_on_root, size_t count,
                             sr_dtype dtype, int root);

/* One tensor of a batch for sr_gpu_group.  Which fields are read depends on
 * the collective: */
typedef struct {
    void *const *bufs;     /* [G]: inputs (reduce, average, all-reduce) or the in-out
                              buffers (broadcast) */
    void *const *out;      /* all-reduce: [G] outputs, or NULL for in place; else unused */
    void        *root_out; /* reduce and average: the result on the root; else unused */
    size_t       count;    /* elements; 0 = nothing to do */
    sr_dtype     dtype;    /* per tensor: a batch may mix dtypes */
} sr_gpu_tensor;

/* Run one collective over n tensors as one grouped launch: tensors under
 * fuse_threshold_bytes are packed (per dtype) into the fusion buffer and
 * reduced together, larger ones go directly, all inside one NCCL group (more
 * groups only when the small ones overflow the fusion buffer).  Semantics of
 * each tensor as the single-tensor functions above; op is ignored for
 * broadcast and average, root for all-reduce.  Tensors must not overlap each
 * other.  The arrays are borrowed for the call.  Errors as sr_gpu_reduce
 * (details name the tensor index and the participant); on SR_EINVAL nothing
 * was launched.  Blocks until every tensor is done or timeout_ms. */
SR_API sr_err sr_gpu_group(sr_gpu *g, sr_gpu_coll coll, const sr_gpu_tensor *tensors, size_t n,
                           sr_gpu_op op, int root);

/* Allocate `bytes` (0 allowed) on participant i: device memory of its GPU
 * (nccl) or 64-byte-aligned host memory (host).  *out is written only on
 * success and owned by the caller: release with sr_gpu_free(g, i, p) before
 * sr_gpu_close.  Errors: SR_EINVAL (i out of range, out NULL), SR_ENOMEM,
 * SR_EGPU (not sticky).  Does not block on pending work. */
SR_API sr_err sr_gpu_alloc(sr_gpu *g, int i, size_t bytes, void **out);

/* Free what sr_gpu_alloc(g, i, ...) returned; NULL is fine.  Works on a
 * handle in the sticky-error state too. */
SR_API void sr_gpu_free(sr_gpu *g, int i, void *p);

/* Allocate host memory that copies to and from the devices can use at full
 * speed: pinned (cudaHostAlloc, portable to all devices) for nccl, plain for
 * host.  Release with sr_gpu_host_free.  Errors: SR_EINVAL, SR_ENOMEM. */
SR_API sr_err sr_gpu_host_alloc(sr_gpu *g, size_t bytes, void **out);

/* Free what sr_gpu_host_alloc returned; NULL is fine. */
SR_API void sr_gpu_host_free(sr_gpu *g, void *p);

/* Copy `bytes` from participant i's buffer `src` to host memory `dst`
 * (any host memory; pinned is faster), or from host `src` to participant
 * i's `dst`.  Errors: SR_EINVAL (i out of range, NULL with bytes > 0, for nccl
 * a device pointer that is not memory of participant i's GPU) and the sticky
 * SR_EGPU / SR_ETIMEDOUT.  Blocks until the copy is done or timeout_ms. */
SR_API sr_err sr_gpu_copy_to_host(sr_gpu *g, int i, void *dst, const void *src, size_t bytes);
SR_API sr_err sr_gpu_copy_from_host(sr_gpu *g, int i, void *dst, const void *src, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
