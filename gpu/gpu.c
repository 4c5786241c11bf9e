/*
 * gpu/ common layer: handle lifetime, argument checks, the G = 1 shortcut,
 * fusion planning, sticky errors and counters.  Every call becomes a plan
 * (gpu_int.h) that a backend executes; backends never see a bad argument.
 * Invariant: once g->sticky is set, no plan runs on g again.  docs/gpu.md.
 */
#include "gpu/gpu_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/log.h"
#include "gpu/gpu_raw.h"

/* Start of each dtype's segment in a fusion buffer: keeps NCCL on its fast
 * aligned path and the host loops on whole cache lines. */
#define FUSE_ALIGN 256

/* Where a call came from, for messages and for the planner. */
typedef struct {
    const char *fn;    /* public function name */
    int         batch; /* 1 for sr_gpu_group: messages name the tensor */
    sr_gpu_coll coll;
    sr_gpu_op   op;
    int         root;
} call_ctx;

/* One run of same-dtype small tensors packed in a fusion buffer. */
typedef struct {
    size_t   stage;
    sr_dtype dtype;
    size_t   start; /* byte offset in every participant's fusion buffer */
    size_t   bytes;
} segment;

const char *
sr_gpu_backend_name(sr_gpu_backend_kind b)
{
    switch (b) {
    case SR_GPU_AUTO:
        return "auto";
    case SR_GPU_HOST:
        return "host";
    case SR_GPU_NCCL:
        return "nccl";
    default:
        return "?";
    }
}

const char *
sr__gpu_part_name(const sr_gpu *g, int part, char *buf, size_t len)
{
    if (g->devs[part] >= 0) {
        snprintf(buf, len, "participant %d (cuda:%d)", part, g->devs[part]);
    } else {
        snprintf(buf, len, "participant %d (host)", part);
    }
    return buf;
}

void
sr__gpu_test_stall(sr_gpu *g, int part)
{
    g->test_stall = part + 1;
}

sr_err
sr_gpu_device_count(int *out)
{
    if (out == NULL) {
        return sr_fail(SR_EINVAL, "sr_gpu_device_count: out is NULL");
    }
#ifdef SR_HAVE_CUDA
    *out = sr__gpu_nccl_device_count(NULL, 0);
#else
    *out = 0;
#endif
    return SR_OK;
}

#ifndef SR_HAVE_CUDA
sr_err
sr__gpu_raw_allreduce(sr_gpu *g, void *const send[], void *const recv[], size_t count,
                      sr_dtype dtype, int iters, double *us_per_iter)
{
    (void)g;
    (void)send;
    (void)recv;
    (void)count;
    (void)dtype;
    (void)iters;
    (void)us_per_iter;
    return sr_fail(SR_ENOTSUP, "sr__gpu_raw_allreduce: built without CUDA");
}
#endif

/* Keep the failure's text on the handle; SR_EGPU and SR_ETIMEDOUT leave the
 * device state in doubt, so they become sticky. */
static sr_err
record(sr_gpu *g, sr_err rc)
{
    snprintf(g->err, sizeof(g->err), "%s", sr_errdetail());
    if (rc == SR_EGPU || rc == SR_ETIMEDOUT) {
        g->sticky = rc;
    }
    return rc;
}

/* As record(), for failures that leave the handle usable (allocation). */
static sr_err
record_soft(sr_gpu *g, sr_err rc)
{
    snprintf(g->err, sizeof(g->err), "%s", sr_errdetail());
    return rc;
}

static sr_err
enter(sr_gpu *g, const char *fn)
{
    if (g == NULL) {
        return sr_fail(SR_EINVAL, "%s: handle is NULL", fn);
    }
    if (g->sticky != SR_OK) {
        /* g->err keeps the original failure; this refusal does not replace it. */
        return sr_fail(g->sticky,
                       "%s: handle unusable after an earlier failure (close and "
                       "reopen it): %s",
                       fn, g->err);
    }
    return SR_OK;
}

static sr_err
check_options(const sr_gpu_options *o, size_t *threshold, size_t *buffer)
{
    if (o->ndev < 0 || o->ndev > SR_GPU_MAX_DEV) {
        return sr_fail(SR_EINVAL, "sr_gpu_open: ndev %d outside [0, %d]", o->ndev, SR_GPU_MAX_DEV);
    }
    if (o->timeout_ms < 0) {
        return sr_fail(SR_EINVAL, "sr_gpu_open: timeout_ms %d is negative", o->timeout_ms);
    }
    *threshold = o->fuse_threshold_bytes ? o->fuse_threshold_bytes : SR_GPU_DEFAULT_FUSE_THRESHOLD;
    if (o->fuse_buffer_bytes != 0) {
        *buffer = o->fuse_buffer_bytes;
    } else {
        *buffer = *threshold > SR_GPU_DEFAULT_FUSE_BUFFER ? *threshold : SR_GPU_DEFAULT_FUSE_BUFFER;
    }
    if (*buffer < *threshold) {
        return sr_fail(SR_EINVAL, "sr_gpu_open: fuse_buffer_bytes %zu < fuse_threshold_bytes %zu",
                       *buffer, *threshold);
    }
    return SR_OK;
}

static sr_err
choose_backend(const sr_gpu_options *o, const sr__gpu_backend **out)
{
    switch (o->backend) {
    case SR_GPU_HOST:
        *out = &sr__gpu_host_backend;
        return SR_OK;
    case SR_GPU_NCCL:
#ifdef SR_HAVE_CUDA
        *out = &sr__gpu_nccl_backend;
        return SR_OK;
#else
        return sr_fail(SR_ENOTSUP, "sr_gpu_open: the nccl backend is not in this build (built "
                                   "without CUDA: SYNCREP_CUDA=OFF or no CUDA toolkit/NCCL found)");
#endif
    case SR_GPU_AUTO: {
#ifdef SR_HAVE_CUDA
        char why[256] = "";
        int  have = sr__gpu_nccl_device_count(why, sizeof(why));
        int  want = o->ndev > 0 ? o->ndev : 1;
        if (have >= want) {
            *out = &sr__gpu_nccl_backend;
            return SR_OK;
        }
        SR_LOG(SR_LOG_INFO, "GPU-AUTO",
               "backend=host reason=\"%d CUDA devices visible, %d wanted%s%s\"", have, want,
               why[0] ? ": " : "", why);
#endif
        *out = &sr__gpu_host_backend;
        return SR_OK;
    }
    default:
        return sr_fail(SR_EINVAL, "sr_gpu_open: unknown backend %d (auto|host|nccl)",
                       (int)o->backend);
    }
}

sr_err
sr_gpu_open(sr_gpu **out, const sr_gpu_options *o)
{
    static const sr_gpu_options defaults;
    const sr__gpu_backend      *be = NULL;
    sr_gpu                     *g = NULL;
    size_t                      threshold = 0, buffer = 0;
    char                        devlist[SR_GPU_MAX_DEV * 4 + 8] = "";
    sr_err                      rc;

    if (out == NULL) {
        return sr_fail(SR_EINVAL, "sr_gpu_open: out is NULL");
    }
    if (o == NULL) {
        o = &defaults;
    }
    if ((rc = check_options(o, &threshold, &buffer)) != SR_OK) {
        return rc;
    }
    if ((rc = choose_backend(o, &be)) != SR_OK) {
        return rc;
    }
    if ((g = calloc(1, sizeof(*g))) == NULL) {
        return sr_fail(SR_ENOMEM, "sr_gpu_open: %zu bytes", sizeof(*g));
    }
    g->be = be;
    g->ndev = o->ndev;
    g->timeout_ms = o->timeout_ms ? o->timeout_ms : SR_GPU_DEFAULT_TIMEOUT_MS;
    g->fuse_threshold = threshold;
    g->fuse_bytes = buffer;
    for (int i = 0; i < SR_GPU_MAX_DEV; i++) {
        g->devs[i] = -1;
    }
    if ((rc = be->open(g, o)) != SR_OK) {
        goto fail;
    }
    for (int i = 0; i < g->ndev && g->devs[i] >= 0; i++) {
        size_t at = strlen(devlist);
        snprintf(devlist + at, sizeof(devlist) - at, "%s%d", i ? "," : "", g->devs[i]);
    }
    SR_LOG(SR_LOG_INFO, "GPU-OPEN",
           "backend=%s ndev=%d devices=%s timeout_ms=%d fuse_threshold=%zu fuse_buffer=%zu",
           sr_gpu_backend_name(be->kind), g->ndev, devlist[0] ? devlist : "-", g->timeout_ms,
           g->fuse_threshold, g->fuse_bytes);
    *out = g;
    return SR_OK;
fail:
    sr_gpu_close(g);
    return rc;
}

void
sr_gpu_close(sr_gpu *g)
{
    if (g == NULL) {
        return;
    }
    for (int i = 0; i < g->ndev; i++) {
        if (g->fuse[i] != NULL) {
            g->be->free(g, i, g->fuse[i]);
        }
    }
    g->be->close(g);
    free(g->plan.copies);
    free(g->plan.colls);
    free(g->plan.stages);
    free(g->plan.ptrs);
    free(g->scratch);
    free(g);
}

const char *
sr_gpu_error(const sr_gpu *g)
{
    return g != NULL ? g->err : "sr_gpu handle is NULL";
}

sr_gpu_backend_kind
sr_gpu_backend(const sr_gpu *g)
{
    return g != NULL ? g->be->kind : SR_GPU_AUTO;
}

int
sr_gpu_ndev(const sr_gpu *g)
{
    return g != NULL ? g->ndev : 0;
}

int
sr_gpu_device(const sr_gpu *g, int i)
{
    if (g == NULL || i < 0 || i >= g->ndev) {
        return -1;
    }
    return g->devs[i];
}

sr_err
sr_gpu_stats_get(const sr_gpu *g, sr_gpu_stats *out)
{
    if (g == NULL || out == NULL) {
        return sr_fail(SR_EINVAL, "sr_gpu_stats_get: NULL argument");
    }
    *out = g->stats;
    return SR_OK;
}

/* ---- plans ------------------------------------------------------------ */

static sr_err
grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    size_t n = *cap ? *cap : 16;
    void  *p;

    if (need <= *cap) {
        return SR_OK;
    }
    while (n < need) {
        n *= 2;
    }
    if ((p = realloc(*arr, n * elem)) == NULL) {
        return sr_fail(SR_ENOMEM, "gpu plan: %zu x %zu bytes", n, elem);
    }
    *arr = p;
    *cap = n;
    return SR_OK;
}

static void
plan_reset(sr__gpu_plan *p)
{
    p->ncopies = p->ncolls = p->nstages = p->nptrs = 0;
}

static sr_err
plan_copy(sr__gpu_plan *p, int part, void *dst, const void *src, size_t bytes)
{
    sr_err rc = grow((void **)&p->copies, &p->copies_cap, p->ncopies + 1, sizeof(*p->copies));
    if (rc != SR_OK) {
        return rc;
    }
    p->copies[p->ncopies++] = (sr__gpu_copy){.part = part, .dst = dst, .src = src, .bytes = bytes};
    return SR_OK;
}

/* Reserve the G send and G recv pointers of a collective. */
static sr_err
plan_coll(sr__gpu_plan *p, int ndev, const sr__gpu_coll *c, void ***send, void ***recv)
{
    sr_err rc;

    if ((rc = grow((void **)&p->colls, &p->colls_cap, p->ncolls + 1, sizeof(*p->colls))) != SR_OK ||
        (rc = grow((void **)&p->ptrs, &p->ptrs_cap, p->nptrs + 2 * (size_t)ndev,
                   sizeof(*p->ptrs))) != SR_OK) {
        return rc;
    }
    sr__gpu_coll *nc = &p->colls[p->ncolls++];
    *nc = *c;
    nc->send_at = p->nptrs;
    nc->recv_at = p->nptrs + (size_t)ndev;
    *send = p->ptrs + nc->send_at;
    *recv = p->ptrs + nc->recv_at;
    memset(*send, 0, 2 * (size_t)ndev * sizeof(void *));
    p->nptrs += 2 * (size_t)ndev;
    return SR_OK;
}

static sr_err
plan_stage(sr__gpu_plan *p, sr__gpu_stage **out)
{
    sr_err rc = grow((void **)&p->stages, &p->stages_cap, p->nstages + 1, sizeof(*p->stages));
    if (rc != SR_OK) {
        return rc;
    }
    *out = &p->stages[p->nstages++];
    memset(*out, 0, sizeof(**out));
    return SR_OK;
}

/* A collective directly on the caller's buffers. */
static sr_err
add_direct(sr_gpu *g, const call_ctx *cx, const sr_gpu_tensor *t)
{
    sr__gpu_coll c = {
        .kind = cx->coll, .dtype = t->dtype, .op = cx->op, .root = cx->root, .count = t->count};
    void **send, **recv;
    sr_err rc;

    if ((rc = plan_coll(&g->plan, g->ndev, &c, &send, &recv)) != SR_OK) {
        return rc;
    }
    for (int i = 0; i < g->ndev; i++) {
        send[i] = t->bufs[i];
        switch (cx->coll) {
        case SR_GPU_ALLREDUCE:
            recv[i] = t->out != NULL ? t->out[i] : t->bufs[i];
            break;
        case SR_GPU_BROADCAST:
            recv[i] = t->bufs[i];
            break;
        default:
            recv[i] = i == cx->root ? t->root_out : NULL;
            break;
        }
    }
    return SR_OK;
}

/* A collective over one segment of the fusion buffers, in place. */
static sr_err
add_segment(sr_gpu *g, const call_ctx *cx, const segment *s)
{
    sr__gpu_coll c = {.kind = cx->coll,
                      .dtype = s->dtype,
                      .op = cx->op,
                      .root = cx->root,
                      .count = s->bytes / sr_dtype_size(s->dtype)};
    void       **send, **recv;
    sr_err       rc;

    if ((rc = plan_coll(&g->plan, g->ndev, &c, &send, &recv)) != SR_OK) {
        return rc;
    }
    for (int i = 0; i < g->ndev; i++) {
        send[i] = (char *)g->fuse[i] + s->start;
        if (cx->coll == SR_GPU_REDUCE || cx->coll == SR_GPU_AVERAGE) {
            recv[i] = i == cx->root ? send[i] : NULL;
        } else {
            recv[i] = send[i];
        }
    }
    return SR_OK;
}

/* Pack (pre) or unpack (post) one fused tensor at byte offset `off`. */
static sr_err
add_fused_copies(sr_gpu *g, const call_ctx *cx, const sr_gpu_tensor *t, size_t off, int post)
{
    size_t bytes = t->count * sr_dtype_size(t->dtype);
    sr_err rc = SR_OK;

    for (int i = 0; i < g->ndev && rc == SR_OK; i++) {
        char *slot = (char *)g->fuse[i] + off;
        switch (cx->coll) {
        case SR_GPU_BROADCAST:
            if (!post && i == cx->root) {
                rc = plan_copy(&g->plan, i, slot, t->bufs[i], bytes);
            } else if (post && i != cx->root) {
                rc = plan_copy(&g->plan, i, t->bufs[i], slot, bytes);
            }
            break;
        case SR_GPU_ALLREDUCE:
            if (!post) {
                rc = plan_copy(&g->plan, i, slot, t->bufs[i], bytes);
            } else {
                rc = plan_copy(&g->plan, i, t->out != NULL ? t->out[i] : t->bufs[i], slot, bytes);
            }
            break;
        default: /* reduce, average */
            if (!post) {
                rc = plan_copy(&g->plan, i, slot, t->bufs[i], bytes);
            } else if (i == cx->root) {
                rc = plan_copy(&g->plan, i, t->root_out, slot, bytes);
            }
            break;
        }
    }
    return rc;
}

/* G = 1: nothing to communicate; results are the inputs, copied if the
 * caller asked for them elsewhere. */
static sr_err
plan_single(sr_gpu *g, const call_ctx *cx, const sr_gpu_tensor *ts, size_t n)
{
    sr__gpu_stage *st;
    sr_err         rc;

    if ((rc = plan_stage(&g->plan, &st)) != SR_OK) {
        return rc;
    }
    for (size_t k = 0; k < n; k++) {
        const sr_gpu_tensor *t = &ts[k];
        void                *dst = NULL;
        if (t->count == 0) {
            continue;
        }
        if (cx->coll == SR_GPU_REDUCE || cx->coll == SR_GPU_AVERAGE) {
            dst = t->root_out;
        } else if (cx->coll == SR_GPU_ALLREDUCE && t->out != NULL) {
            dst = t->out[0];
        }
        if (dst != NULL && dst != t->bufs[0]) {
            rc = plan_copy(&g->plan, 0, dst, t->bufs[0], t->count * sr_dtype_size(t->dtype));
            if (rc != SR_OK) {
                return rc;
            }
        }
    }
    st = &g->plan.stages[0];
    st->pre_hi = g->plan.ncopies;
    st->coll_lo = st->coll_hi = 0;
    st->post_lo = st->post_hi = g->plan.ncopies;
    return SR_OK;
}

static sr_err
ensure_fuse(sr_gpu *g)
{
    sr_err rc;

    if (g->fuse[0] != NULL) {
        return SR_OK;
    }
    for (int i = 0; i < g->ndev; i++) {
        if ((rc = g->be->alloc(g, i, g->fuse_bytes, &g->fuse[i])) != SR_OK) {
            for (int j = 0; j < i; j++) {
                g->be->free(g, j, g->fuse[j]);
                g->fuse[j] = NULL;
            }
            return rc;
        }
    }
    return SR_OK;
}

/* Per-call planner state, in g->scratch. */
typedef struct {
    unsigned char *mode;     /* [n] MODE_* */
    size_t        *off;      /* [n] byte offset in the fusion buffers (MODE_FUSED) */
    size_t        *stage_of; /* [n] stage of a fused tensor */
    size_t        *order;    /* fused tensors, stage by stage */
    segment       *segs;
    size_t         nfused, nsegs, nstages;
} fusion;

enum { MODE_SKIP, MODE_DIRECT, MODE_SMALL, MODE_FUSED };

/* Decide which tensors are fused and where: small tensors of a dtype that
 * has at least two of them go into one segment per dtype, filled greedily;
 * one that does not fit starts a new stage, since the buffers are reused
 * stage by stage. */
static void
assign_fusion(const sr_gpu *g, const sr_gpu_tensor *ts, size_t n, fusion *f)
{
    static const sr_dtype dtypes[] = {SR_FLOAT32, SR_FLOAT64, SR_INT32, SR_INT64};
    size_t                stage = 0, pos = 0;

    f->nfused = f->nsegs = 0;
    for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
        segment *cur = NULL;
        size_t   nsmall = 0;
        for (size_t k = 0; k < n; k++) {
            nsmall += f->mode[k] == MODE_SMALL && ts[k].dtype == dtypes[d];
        }
        for (size_t k = 0; k < n; k++) {
            if (f->mode[k] != MODE_SMALL || ts[k].dtype != dtypes[d]) {
                continue;
            }
            if (nsmall < 2) {
                f->mode[k] = MODE_DIRECT; /* alone: packing would only add copies */
                continue;
            }
            size_t bytes = ts[k].count * sr_dtype_size(ts[k].dtype);
            if (cur == NULL) {
                size_t start = (pos + FUSE_ALIGN - 1) / FUSE_ALIGN * FUSE_ALIGN;
                if (start + bytes > g->fuse_bytes) {
                    stage++;
                    start = 0;
                }
                cur = &f->segs[f->nsegs++];
                *cur = (segment){.stage = stage, .dtype = dtypes[d], .start = start};
            } else if (cur->start + cur->bytes + bytes > g->fuse_bytes) {
                stage++;
                cur = &f->segs[f->nsegs++];
                *cur = (segment){.stage = stage, .dtype = dtypes[d], .start = 0};
            }
            f->mode[k] = MODE_FUSED;
            f->off[k] = cur->start + cur->bytes;
            f->stage_of[k] = stage;
            f->order[f->nfused++] = k;
            cur->bytes += bytes;
            pos = cur->start + cur->bytes;
        }
    }
    f->nstages = f->nfused > 0 ? stage + 1 : 0;
}

static sr_err
fusion_init(sr_gpu *g, const sr_gpu_tensor *ts, size_t n, fusion *f)
{
    size_t need = n * (sizeof(unsigned char) + 3 * sizeof(size_t) + sizeof(segment)) + 64;
    char  *p;
    sr_err rc;

    if ((rc = grow(&g->scratch, &g->scratch_cap, need, 1)) != SR_OK) {
        return rc;
    }
    /* Largest alignment first so every array stays aligned. */
    p = g->scratch;
    f->segs = (segment *)p;
    p += n * sizeof(segment);
    f->off = (size_t *)p;
    f->stage_of = f->off + n;
    f->order = f->stage_of + n;
    f->mode = (unsigned char *)(f->order + n);
    for (size_t k = 0; k < n; k++) {
        size_t bytes = ts[k].count * sr_dtype_size(ts[k].dtype);
        f->mode[k] = bytes == 0 ? MODE_SKIP : bytes < g->fuse_threshold ? MODE_SMALL : MODE_DIRECT;
    }
    assign_fusion(g, ts, n, f);
    return SR_OK;
}

/* G > 1: stage 0 carries every direct tensor and the first fusion fill;
 * later stages only carry fusion fills. */
static sr_err
plan_multi(sr_gpu *g, const call_ctx *cx, const sr_gpu_tensor *ts, size_t n, size_t *fused_out)
{
    fusion f;
    size_t ndirect = 0, nstages, m = 0, sg = 0;
    sr_err rc;

    if ((rc = fusion_init(g, ts, n, &f)) != SR_OK) {
        return rc;
    }
    for (size_t k = 0; k < n; k++) {
        ndirect += f.mode[k] == MODE_DIRECT;
    }
    nstages = f.nstages == 0 && ndirect > 0 ? 1 : f.nstages;
    if (f.nfused > 0 && (rc = ensure_fuse(g)) != SR_OK) {
        return rc;
    }
    for (size_t s = 0; s < nstages; s++) {
        sr__gpu_stage *st;
        size_t         first = m, pre_lo, coll_lo, post_lo;
        if ((rc = plan_stage(&g->plan, &st)) != SR_OK) {
            return rc;
        }
        pre_lo = g->plan.ncopies;
        for (; m < f.nfused && f.stage_of[f.order[m]] == s; m++) {
            rc = add_fused_copies(g, cx, &ts[f.order[m]], f.off[f.order[m]], 0);
            if (rc != SR_OK) {
                return rc;
            }
        }
        coll_lo = g->plan.ncolls;
        for (size_t k = 0; s == 0 && k < n; k++) {
            if (f.mode[k] == MODE_DIRECT && (rc = add_direct(g, cx, &ts[k])) != SR_OK) {
                return rc;
            }
        }
        for (; sg < f.nsegs && f.segs[sg].stage == s; sg++) {
            if ((rc = add_segment(g, cx, &f.segs[sg])) != SR_OK) {
                return rc;
            }
        }
        post_lo = g->plan.ncopies;
        for (size_t j = first; j < m; j++) {
            rc = add_fused_copies(g, cx, &ts[f.order[j]], f.off[f.order[j]], 1);
            if (rc != SR_OK) {
                return rc;
            }
        }
        /* Collectives add no copies, so the packing copies end where the
         * unpacking ones begin. */
        st = &g->plan.stages[s];
        *st = (sr__gpu_stage){.pre_lo = pre_lo,
                              .pre_hi = post_lo,
                              .coll_lo = coll_lo,
                              .coll_hi = g->plan.ncolls,
                              .post_lo = post_lo,
                              .post_hi = g->plan.ncopies};
    }
    *fused_out = f.nfused;
    return SR_OK;
}

/* ---- argument checks --------------------------------------------------- */

static sr_err
check_ptr(sr_gpu *g, const char *where, int part, const void *p, const char *role)
{
    char who[64], why[256];

    if (p == NULL) {
        return sr_fail(SR_EINVAL, "%s: %s: %s is NULL", where,
                       sr__gpu_part_name(g, part, who, sizeof(who)), role);
    }
    if (g->be->check_buf(g, part, p, why, sizeof(why)) != 0) {
        return sr_fail(SR_EINVAL, "%s: %s: %s %p %s", where,
                       sr__gpu_part_name(g, part, who, sizeof(who)), role, p, why);
    }
    return SR_OK;
}

static sr_err
check_tensor(sr_gpu *g, const call_ctx *cx, size_t k, const sr_gpu_tensor *t)
{
    char   where[96];
    size_t es = sr_dtype_size(t->dtype);
    sr_err rc;

    if (cx->batch) {
        snprintf(where, sizeof(where), "%s: tensor %zu", cx->fn, k);
    } else {
        snprintf(where, sizeof(where), "%s", cx->fn);
    }
    if (es == 0) {
        return sr_fail(SR_EINVAL, "%s: unknown dtype %d (float32|float64|int32|int64)", where,
                       (int)t->dtype);
    }
    if (t->count > SIZE_MAX / es) {
        return sr_fail(SR_EINVAL, "%s: count %zu overflows size_t bytes", where, t->count);
    }
    if (t->count == 0) {
        return SR_OK;
    }
    if (t->bufs == NULL) {
        return sr_fail(SR_EINVAL, "%s: the per-participant buffer array is NULL", where);
    }
    for (int i = 0; i < g->ndev; i++) {
        rc = check_ptr(g, where, i, t->bufs[i],
                       cx->coll == SR_GPU_BROADCAST ? "buffer" : "send buffer");
        if (rc != SR_OK) {
            return rc;
        }
    }
    if (cx->coll == SR_GPU_REDUCE || cx->coll == SR_GPU_AVERAGE) {
        return check_ptr(g, where, cx->root, t->root_out, "result buffer");
    }
    if (cx->coll == SR_GPU_ALLREDUCE && t->out != NULL) {
        for (int i = 0; i < g->ndev; i++) {
            if ((rc = check_ptr(g, where, i, t->out[i], "recv buffer")) != SR_OK) {
                return rc;
            }
        }
    }
    return SR_OK;
}

static sr_err
check_call(sr_gpu *g, const call_ctx *cx, const sr_gpu_tensor *ts, size_t n)
{
    sr_err rc;

    if (cx->coll < SR_GPU_REDUCE || cx->coll > SR_GPU_AVERAGE) {
        return sr_fail(SR_EINVAL, "%s: unknown collective %d", cx->fn, (int)cx->coll);
    }
    if ((cx->coll == SR_GPU_REDUCE || cx->coll == SR_GPU_ALLREDUCE) &&
        (cx->op < SR_GPU_SUM || cx->op > SR_GPU_MAX)) {
        return sr_fail(SR_EINVAL, "%s: unknown reduction op %d (sum|prod|min|max)", cx->fn,
                       (int)cx->op);
    }
    if (cx->coll != SR_GPU_ALLREDUCE && (cx->root < 0 || cx->root >= g->ndev)) {
        return sr_fail(SR_EINVAL, "%s: root %d outside [0, %d)", cx->fn, cx->root, g->ndev);
    }
    if (n > 0 && ts == NULL) {
        return sr_fail(SR_EINVAL, "%s: tensors is NULL with n = %zu", cx->fn, n);
    }
    for (size_t k = 0; k < n; k++) {
        if ((rc = check_tensor(g, cx, k, &ts[k])) != SR_OK) {
            return rc;
        }
    }
    return SR_OK;
}

/* ---- collectives -------------------------------------------------------- */

static sr_err
collective(sr_gpu *g, const call_ctx *cx, const sr_gpu_tensor *ts, size_t n)
{
    size_t fused = 0, bytes = 0;
    sr_err rc;

    if ((rc = enter(g, cx->fn)) != SR_OK) {
        return rc;
    }
    if ((rc = check_call(g, cx, ts, n)) != SR_OK) {
        return record(g, rc);
    }
    plan_reset(&g->plan);
    rc = g->ndev == 1 ? plan_single(g, cx, ts, n) : plan_multi(g, cx, ts, n, &fused);
    if (rc != SR_OK) {
        return record(g, rc);
    }
    rc = g->be->run(g, &g->plan);
    g->test_stall = 0;
    if (rc != SR_OK) {
        return record(g, rc);
    }
    for (size_t k = 0; k < n; k++) {
        bytes += ts[k].count * sr_dtype_size(ts[k].dtype);
    }
    g->stats.calls++;
    g->stats.tensors += n;
    g->stats.fused_tensors += fused;
    g->stats.launches += g->plan.ncolls;
    for (size_t s = 0; s < g->plan.nstages; s++) {
        g->stats.groups += g->plan.stages[s].coll_hi > g->plan.stages[s].coll_lo;
    }
    g->stats.bytes += bytes;
    return SR_OK;
}

sr_err
sr_gpu_group(sr_gpu *g, sr_gpu_coll coll, const sr_gpu_tensor *tensors, size_t n, sr_gpu_op op,
             int root)
{
    call_ctx cx = {.fn = "sr_gpu_group", .batch = 1, .coll = coll, .op = op, .root = root};
    if (coll == SR_GPU_BROADCAST || coll == SR_GPU_AVERAGE) {
        cx.op = SR_GPU_SUM;
    }
    if (coll == SR_GPU_ALLREDUCE) {
        cx.root = 0;
    }
    return collective(g, &cx, tensors, n);
}

sr_err
sr_gpu_reduce(sr_gpu *g, void *const send[], void *recv_on_root, size_t count, sr_dtype dtype,
              sr_gpu_op op, int root)
{
    call_ctx      cx = {.fn = "sr_gpu_reduce", .coll = SR_GPU_REDUCE, .op = op, .root = root};
    sr_gpu_tensor t = {.bufs = send, .root_out = recv_on_root, .count = count, .dtype = dtype};
    return collective(g, &cx, &t, 1);
}

sr_err
sr_gpu_broadcast(sr_gpu *g, void *const bufs[], size_t count, sr_dtype dtype, int root)
{
    call_ctx cx = {
        .fn = "sr_gpu_broadcast", .coll = SR_GPU_BROADCAST, .op = SR_GPU_SUM, .root = root};
    sr_gpu_tensor t = {.bufs = bufs, .count = count, .dtype = dtype};
    return collective(g, &cx, &t, 1);
}

sr_err
sr_gpu_allreduce(sr_gpu *g, void *const send[], void *const recv[], size_t count, sr_dtype dtype,
                 sr_gpu_op op)
{
    call_ctx      cx = {.fn = "sr_gpu_allreduce", .coll = SR_GPU_ALLREDUCE, .op = op};
    sr_gpu_tensor t = {.bufs = send, .out = recv, .count = count, .dtype = dtype};
    return collective(g, &cx, &t, 1);
}

sr_err
sr_gpu_average(sr_gpu *g, void *const send[], void *recv_on_root, size_t count, sr_dtype dtype,
               int root)
{
    call_ctx cx = {.fn = "sr_gpu_average", .coll = SR_GPU_AVERAGE, .op = SR_GPU_SUM, .root = root};
    sr_gpu_tensor t = {.bufs = send, .root_out = recv_on_root, .count = count, .dtype = dtype};
    return collective(g, &cx, &t, 1);
}

/* ---- memory and copies --------------------------------------------------- */

static sr_err
check_part(sr_gpu *g, const char *fn, int i)
{
    if (i < 0 || i >= g->ndev) {
        return sr_fail(SR_EINVAL, "%s: participant %d outside [0, %d)", fn, i, g->ndev);
    }
    return SR_OK;
}

sr_err
sr_gpu_alloc(sr_gpu *g, int i, size_t bytes, void **out)
{
    sr_err rc;

    if (g == NULL || out == NULL) {
        return sr_fail(SR_EINVAL, "sr_gpu_alloc: NULL argument");
    }
    if ((rc = check_part(g, "sr_gpu_alloc", i)) != SR_OK) {
        return record_soft(g, rc);
    }
    if ((rc = g->be->alloc(g, i, bytes, out)) != SR_OK) {
        return record_soft(g, rc);
    }
    return SR_OK;
}

void
sr_gpu_free(sr_gpu *g, int i, void *p)
{
    if (g == NULL || p == NULL || i < 0 || i >= g->ndev) {
        return;
    }
    g->be->free(g, i, p);
}

sr_err
sr_gpu_host_alloc(sr_gpu *g, size_t bytes, void **out)
{
    sr_err rc;

    if (g == NULL || out == NULL) {
        return sr_fail(SR_EINVAL, "sr_gpu_host_alloc: NULL argument");
    }
    if ((rc = g->be->host_alloc(g, bytes, out)) != SR_OK) {
        return record_soft(g, rc);
    }
    return SR_OK;
}

void
sr_gpu_host_free(sr_gpu *g, void *p)
{
    if (g != NULL && p != NULL) {
        g->be->host_free(g, p);
    }
}

static sr_err
copy_call(sr_gpu *g, const char *fn, int i, void *dst, const void *src, size_t bytes,
          const void *dev_side)
{
    sr__gpu_stage *st;
    sr_err         rc;

    if ((rc = enter(g, fn)) != SR_OK) {
        return rc;
    }
    if ((rc = check_part(g, fn, i)) != SR_OK) {
        return record(g, rc);
    }
    if (bytes == 0) {
        return SR_OK;
    }
    if (dst == NULL || src == NULL) {
        return record(g, sr_fail(SR_EINVAL, "%s: %s is NULL with %zu bytes", fn,
                                 dst == NULL ? "dst" : "src", bytes));
    }
    if ((rc = check_ptr(g, fn, i, dev_side, "device buffer")) != SR_OK) {
        return record(g, rc);
    }
    plan_reset(&g->plan);
    if ((rc = plan_stage(&g->plan, &st)) != SR_OK ||
        (rc = plan_copy(&g->plan, i, dst, src, bytes)) != SR_OK) {
        return record(g, rc);
    }
    st = &g->plan.stages[0];
    st->pre_hi = st->post_lo = st->post_hi = 1;
    rc = g->be->run(g, &g->plan);
    g->test_stall = 0;
    return rc == SR_OK ? SR_OK : record(g, rc);
}

sr_err
sr_gpu_copy_to_host(sr_gpu *g, int i, void *dst, const void *src, size_t bytes)
{
    return copy_call(g, "sr_gpu_copy_to_host", i, dst, src, bytes, src);
}

sr_err
sr_gpu_copy_from_host(sr_gpu *g, int i, void *dst, const void *src, size_t bytes)
{
    return copy_call(g, "sr_gpu_copy_from_host", i, dst, src, bytes, dst);
}
