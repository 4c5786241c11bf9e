/*
 * PUSH and PUSH_SPARSE: a gradient is checked completely (frames, variable,
 * partition, values) before any accumulator changes, then added to the
 * accumulators of its partitions straight from the received frame
 * (aligned_frame copies only tiny, misaligned ones).  finish_push answers
 * it (held, sr__coord_push_reply) and hands the partitions it took to
 * sr__coord_step_took, where a completed step is applied (server_step.c).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/server_int.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/name.h"
#include "core/text.h"

/* A frame's data, 8-byte aligned.  ZeroMQ keeps very small messages inside
 * zmq_msg_t itself, at addresses with no alignment promise; reading doubles
 * or int64s there is undefined behaviour, so those few bytes are copied.
 * Large frames are malloc'd and used in place. NULL when out of memory. */
static const void *
aligned_frame(coord *c, zmq_msg_t *m, int which)
{
    void  *p = zmq_msg_data(m);
    size_t n = zmq_msg_size(m);

    if (((uintptr_t)p & 7u) == 0) {
        return p;
    }
    if (c->scratch_cap[which] < n) {
        void *q = realloc(c->scratch[which], n);
        if (q == NULL) {
            return NULL;
        }
        c->scratch[which] = q;
        c->scratch_cap[which] = n;
    }
    memcpy(c->scratch[which], p, n);
    return c->scratch[which];
}

/* Checks shared by dense and sparse pushes; NULL after an error reply. */
static cvar *
push_target(coord *c, req_ctx *r, const sr_wire_pushdesc *p)
{
    cvar *v;

    if (sr_name_check(p->name, strlen(p->name)) != SR_OK) {
        REPLY_ERR(r, SR_EINVAL, "push \"%s\": %s", SR_ESC(p->name), sr_errdetail());
        return NULL;
    }
    if (!sr__coord_model_ready(c)) {
        REPLY_ERR(r, SR_ENOTREADY, "push %s: model not ready", SR_ESC(p->name));
        return NULL;
    }
    if ((v = sr__coord_find_var(c, p->name)) == NULL) {
        REPLY_ERR(r, SR_ENOENT, "push: no variable '%s'", SR_ESC(p->name));
        return NULL;
    }
    if (!v->has_acc) {
        REPLY_ERR(r, SR_EINVAL, "push %s: variable is %s and not trainable", SR_ESC(p->name),
                  sr_dtype_name(v->meta.dtype));
        return NULL;
    }
    if (p->dtype != v->meta.dtype) {
        REPLY_ERR(r, SR_EINVAL, "push %s: gradient is %s, variable is %s", SR_ESC(p->name),
                  sr_dtype_name(p->dtype), sr_dtype_name(v->meta.dtype));
        return NULL;
    }
    return v;
}

/* A push went through (accepted by `accepts` partitions, `took` of them
 * taken by it): answer it and apply the step if it completed one.  One
 * that counted nowhere because its task had given its share of the open
 * step (`over`) is answered stale, and its client waits for a later step's
 * token: it may not take another of this step and fill a missing task's
 * place (DESIGN.md, "R replicas are R tasks"). */
static void
finish_push(coord *c, req_ctx *r, int accepts, int took, int over)
{
    r->cl->last_seq = r->h.seq;
    if (accepts == 0 && over) {
        r->cl->over_share++;
        r->cl->min_token = c->global_step + 1;
    }
    sr__coord_push_reply(c, r, accepts > 0 ? SR_PUSH_ACCEPTED : SR_PUSH_STALE);
    int64_t g0 = c->global_step; /* issue 26: the straggler */
    sr__coord_step_took(c, took);
    sr__coord_metrics_after_push(c, r->cl->task, g0);
}

/* A push whose gradient holds NaN or Inf (and --nonfinite reject): refused
 * with SR_ENONFINITE, and its task's place in partitions [p0, p1) of the
 * open step is taken by an absent gradient (sr__accum_push_absent), so the
 * step goes on with the other replicas' average instead of waiting for a
 * gradient that will not come (with R = N it waited forever).  Logged once
 * a step; counted in STATUS (nonfinite, the worker's rejected). */
static void
refuse_nonfinite(coord *c, req_ctx *r, cvar *v, uint32_t p0, uint32_t p1, const char *name)
{
    sr_accum_outcome out;
    int              took = 0;

    r->cl->errors++;
    r->cl->last_seq = r->h.seq;
    c->nonfinite++;
    for (uint32_t k = p0; k < p1; k++) {
        if (sr__accum_push_absent(&v->acc[k], r->h.local_step, r->cl->task, &out) == SR_OK) {
            took += v->acc[k].taken && out == SR_ACC_ACCEPTED;
        }
    }
    if (c->nonfinite_logged_step != c->global_step + 1) {
        c->nonfinite_logged_step = c->global_step + 1;
        SR_LOG(SR_LOG_WARN, "COORD-NONFINITE",
               "step=%" PRId64 " task=%d variable=\"%s\": gradient with NaN or Inf refused; "
               "the step averages the other replicas' gradients (logged once a step)",
               c->global_step, r->cl->task, SR_ESC(name));
    }
    REPLY_ERR(r, SR_ENONFINITE, "push %s: gradient contains NaN or Inf", SR_ESC(name));
    int64_t g0 = c->global_step; /* issue 26: the straggler */
    sr__coord_step_took(c, took);
    sr__coord_metrics_after_push(c, r->cl->task, g0);
}

/* Whether request r's push of `mode` may go to partitions [p0, p1) of v: 0
 * and *accepts = how many would take it (*over: some would not only
 * because r's task has given its share), or -1 (refused: some partition
 * receives the other kind of gradient this step). */
static int
check_parts(const cvar *v, uint32_t p0, uint32_t p1, const req_ctx *r, int mode, int *accepts,
            int *over)
{
    *accepts = 0;
    *over = 0;
    for (uint32_t p = p0; p < p1; p++) {
        int w = sr__accum_would_accept(&v->acc[p], r->h.local_step, r->cl->task, mode, over);
        if (w < 0) {
            return -1;
        }
        *accepts += w;
    }
    return 0;
}

static int
check_dup(coord *c, req_ctx *r)
{
    if (r->h.seq != 0 && r->h.seq <= r->cl->last_seq) {
        sr__coord_push_reply(c, r, SR_PUSH_DUPLICATE);
        return 1;
    }
    return 0;
}

void
sr__coord_handle_push(coord *c, req_ctx *r)
{
    sr_wire_pushdesc p;
    sr_accum_outcome out;
    cvar            *v;
    sr_err           rc;

    if (r->nbody != 2 || sr_wire_pushdesc_decode(zmq_msg_data(&r->body[0]),
                                                 zmq_msg_size(&r->body[0]), &p) != SR_OK) {
        REPLY_ERR(r, SR_EPROTO, "PUSH: bad frames");
        return;
    }
    if (check_dup(c, r) || (v = push_target(c, r, &p)) == NULL) {
        return;
    }
    /* The whole variable, or exactly one of its partitions. */
    size_t   es = sr_dtype_size(v->meta.dtype);
    uint64_t part_bytes = v->part_rows * v->row_elems * es;
    uint32_t p0 = 0, p1 = v->nparts;
    if (p.count != zmq_msg_size(&r->body[1])) {
        REPLY_ERR(r, SR_EINVAL, "push %s: descriptor says %" PRIu64 " bytes, frame has %zu",
                  SR_ESC(p.name), p.count, zmq_msg_size(&r->body[1]));
        return;
    }
    if (!(p.offset == 0 && p.count == v->meta.nbytes)) {
        uint64_t r0, nr;
        uint64_t k =
            part_bytes > 0 && p.offset % part_bytes == 0 ? p.offset / part_bytes : v->nparts;
        p0 = k < v->nparts ? (uint32_t)k : v->nparts;
        if (v->nparts > 1 && p0 < v->nparts) {
            sr__coord_part_range(v, p0, &r0, &nr);
        }
        if (v->nparts <= 1 || p0 >= v->nparts || nr * v->row_elems * es != p.count) {
            REPLY_ERR(r, SR_EINVAL,
                      "push %s: gradient is %" PRIu64 " bytes at offset %" PRIu64
                      "; the variable is %" PRIu64 " bytes in %u partition(s) of %" PRIu64 " bytes",
                      SR_ESC(p.name), p.count, p.offset, v->meta.nbytes, v->nparts, part_bytes);
            return;
        }
        p1 = p0 + 1;
    }
    const uint8_t *grad = aligned_frame(c, &r->body[1], 0);
    if (grad == NULL) {
        REPLY_ERR(r, SR_ENOMEM, "push %s: no memory to align %zu bytes", SR_ESC(p.name),
                  zmq_msg_size(&r->body[1]));
        return;
    }
    if (!c->o->nonfinite_allow && sr__nonfinite(v->meta.dtype, grad, p.count / es)) {
        refuse_nonfinite(c, r, v, p0, p1, p.name);
        return;
    }
    int accepts = 0, took = 0, over = 0;
    if (check_parts(v, p0, p1, r, SR_ACC_DENSE, &accepts, &over) != 0) {
        REPLY_ERR(r, SR_EINVAL,
                  "push %s: variable receives sparse gradients this step; dense "
                  "refused",
                  SR_ESC(p.name));
        return;
    }
    if (accepts > 0 && (rc = sr__coord_acc_memory(c, v)) != SR_OK) {
        REPLY_ERR(r, rc, "push %s: %s", SR_ESC(p.name), sr_errdetail());
        return;
    }
    for (uint32_t k = p0; k < p1; k++) {
        uint64_t r0, nr;
        sr__coord_part_range(v, k, &r0, &nr);
        rc = sr__accum_push_dense(&v->acc[k],
                                  grad + (r0 - (uint64_t)p0 * v->part_rows) * v->row_elems * es,
                                  r->h.local_step, r->cl->task, &out);
        if (rc != SR_OK && k == p0) {
            REPLY_ERR(r, rc, "push %s: %s", SR_ESC(p.name), sr_errdetail());
            return;
        }
        if (rc != SR_OK) { /* out of memory for a sum: the partitions before it count */
            SR_LOG(SR_LOG_ERR, "COORD-PUSH", "push %s partition %u: %s", SR_ESC(p.name), k,
                   sr_errdetail());
            break;
        }
        took += v->acc[k].taken && out == SR_ACC_ACCEPTED;
    }
    finish_push(c, r, accepts, took, over);
}

/* Group a sparse push's rows by partition, keeping their order within each
 * (the accumulator's summation order, which replays reproduce): partition
 * k's rows are sp_idx / sp_rows [sp_start[k], sp_start[k + 1]), with
 * indices relative to the partition's first row.  Indices are checked. */
static sr_err
split_sparse(coord *c, cvar *v, const int64_t *idx, const void *rows, uint64_t n)
{
    size_t    row_bytes = (size_t)(v->row_elems * sr_dtype_size(v->meta.dtype));
    int64_t  *si = sr_grow_array(c->sp_idx, &c->sp_idx_cap, (size_t)n, sizeof(*si));
    uint64_t *st;
    uint8_t  *sr;

    if (si == NULL) {
        return sr_fail(SR_ENOMEM, "%" PRIu64 " sparse rows", n);
    }
    c->sp_idx = si;
    if ((sr = sr_grow_array(c->sp_rows, &c->sp_rows_cap, (size_t)n * row_bytes, 1)) == NULL) {
        return sr_fail(SR_ENOMEM, "%" PRIu64 " sparse rows", n);
    }
    c->sp_rows = sr;
    if ((st = sr_grow_array(c->sp_start, &c->sp_start_cap, (size_t)v->nparts + 1, sizeof(*st))) ==
        NULL) {
        return sr_fail(SR_ENOMEM, "%u partitions", v->nparts);
    }
    c->sp_start = st;
    memset(st, 0, ((size_t)v->nparts + 1) * sizeof(*st));
    for (uint64_t i = 0; i < n; i++) {
        st[(uint64_t)idx[i] / v->part_rows + 1]++;
    }
    for (uint32_t k = 0; k < v->nparts; k++) {
        st[k + 1] += st[k];
    }
    /* st[k] is now partition k's next free slot; afterwards, its end. */
    for (uint64_t i = 0; i < n; i++) {
        uint64_t k = (uint64_t)idx[i] / v->part_rows;
        uint64_t at = st[k]++;
        si[at] = idx[i] - (int64_t)(k * v->part_rows);
        memcpy(sr + at * row_bytes, (const uint8_t *)rows + i * row_bytes, row_bytes);
    }
    /* Back to starts: partition k began where k - 1 ends. */
    memmove(st + 1, st, (size_t)v->nparts * sizeof(*st));
    st[0] = 0;
    return SR_OK;
}

void
sr__coord_handle_push_sparse(coord *c, req_ctx *r)
{
    sr_wire_pushdesc p;
    sr_accum_outcome out;
    cvar            *v;
    sr_err           rc;

    if (r->nbody != 3 || sr_wire_pushdesc_decode(zmq_msg_data(&r->body[0]),
                                                 zmq_msg_size(&r->body[0]), &p) != SR_OK) {
        REPLY_ERR(r, SR_EPROTO, "PUSH_SPARSE: bad frames");
        return;
    }
    if (check_dup(c, r) || (v = push_target(c, r, &p)) == NULL) {
        return;
    }
    if (v->meta.ndim < 1) {
        REPLY_ERR(r, SR_EINVAL, "push_sparse %s: a scalar has no rows", SR_ESC(p.name));
        return;
    }
    uint64_t row_bytes = v->row_elems * sr_dtype_size(v->meta.dtype);
    if (p.offset != 0) {
        REPLY_ERR(r, SR_EINVAL,
                  "push_sparse %s: offset %" PRIu64 " (sparse pushes carry row "
                  "indices; offset must be 0)",
                  SR_ESC(p.name), p.offset);
        return;
    }
    if (p.count > UINT64_MAX / 8 || zmq_msg_size(&r->body[1]) != p.count * 8 ||
        (row_bytes && p.count > UINT64_MAX / row_bytes) ||
        zmq_msg_size(&r->body[2]) != p.count * row_bytes) {
        REPLY_ERR(r, SR_EINVAL,
                  "push_sparse %s: %" PRIu64 " rows need %" PRIu64 " index bytes and %" PRIu64
                  " row bytes, got %zu and %zu",
                  SR_ESC(p.name), p.count, p.count * 8, p.count * row_bytes,
                  zmq_msg_size(&r->body[1]), zmq_msg_size(&r->body[2]));
        return;
    }
    /* Indices travel little-endian, as this host stores them (a big-endian
     * build stops at the static assertion in wire/wire.c). */
    const int64_t *idx = aligned_frame(c, &r->body[1], 0);
    const void    *rows = aligned_frame(c, &r->body[2], 1);
    if (idx == NULL || rows == NULL) {
        REPLY_ERR(r, SR_ENOMEM, "push_sparse %s: no memory to align the frames", SR_ESC(p.name));
        return;
    }
    if (!c->o->nonfinite_allow && sr__nonfinite(v->meta.dtype, rows, p.count * v->row_elems)) {
        refuse_nonfinite(c, r, v, 0, v->nparts, p.name);
        return;
    }
    for (uint64_t i = 0; i < p.count; i++) {
        if (idx[i] < 0 || (uint64_t)idx[i] >= v->rows) {
            REPLY_ERR(r, SR_EINVAL,
                      "push_sparse %s: sparse row index %" PRId64 " out of range [0, %" PRIu64
                      ") at %" PRIu64,
                      SR_ESC(p.name), idx[i], v->rows, i);
            return;
        }
    }
    int accepts = 0, took = 0, over = 0;
    if (check_parts(v, 0, v->nparts, r, SR_ACC_SPARSE, &accepts, &over) != 0) {
        REPLY_ERR(r, SR_EINVAL,
                  "push_sparse %s: variable receives dense gradients this step; "
                  "sparse refused",
                  SR_ESC(p.name));
        return;
    }
    /* Every partition counts the push, with the rows that fall in it (maybe
     * none), as a partitioned variable's separate accumulators would. */
    if (accepts > 0 && (rc = sr__coord_acc_memory(c, v)) != SR_OK) {
        REPLY_ERR(r, rc, "push_sparse %s: %s", SR_ESC(p.name), sr_errdetail());
        return;
    }
    const int64_t  *pidx = idx;
    const uint8_t  *prows = rows;
    const uint64_t  whole[2] = {0, p.count};
    const uint64_t *start = whole;
    if (v->nparts > 1 && accepts > 0) {
        if ((rc = split_sparse(c, v, idx, rows, p.count)) != SR_OK) {
            REPLY_ERR(r, rc, "push_sparse %s: %s", SR_ESC(p.name), sr_errdetail());
            return;
        }
        pidx = c->sp_idx;
        prows = c->sp_rows;
        start = c->sp_start;
    }
    for (uint32_t k = 0; accepts > 0 && k < v->nparts; k++) {
        rc = sr__accum_push_sparse(&v->acc[k], pidx + start[k], prows + start[k] * row_bytes,
                                   start[k + 1] - start[k], r->h.local_step, r->cl->task, &out);
        if (rc != SR_OK && k == 0) {
            REPLY_ERR(r, rc, "push_sparse %s: %s", SR_ESC(p.name), sr_errdetail());
            return;
        }
        if (rc != SR_OK) { /* out of memory for a sum: the partitions before it count */
            SR_LOG(SR_LOG_ERR, "COORD-PUSH", "push_sparse %s partition %u: %s", SR_ESC(p.name), k,
                   sr_errdetail());
            break;
        }
        took += v->acc[k].taken && out == SR_ACC_ACCEPTED;
    }
    finish_push(c, r, accepts, took, over);
}
