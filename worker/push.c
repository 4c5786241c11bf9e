/*
 * Pushes: a gradient per variable, exactly once (every push carries
 * (client_id, seq); a resend reuses both and the coordinator answers
 * DUPLICATE for a seq it has already counted).
 *
 * A dense push of a variable this client declared with that size, small
 * enough to copy, is pipelined (push_pipelined): sent without waiting for its
 * answer, which the next blocking call (the step, normally) takes on the way,
 * so that push and token request share one round trip.  Its copy lives in a
 * sr__pend, an sr__req context in the connection's id map (pend_ops).  In
 * sr_client_push_many (to a coordinator taking chains) it is held back,
 * unsent, and leaves in one message with the next ones and the next request
 * (PUSH_HOLD_MANY); in sr_client_push_step it is sent from the caller's
 * buffer with the token request of the same call (PUSH_HOLD_STEP).  A
 * partitioned variable goes one partition at a time (push_partitioned);
 * anything else waits for its answer (push_blocking).  docs/protocol.md:
 * "Resends and deduplication", "Chains", "Partitions".
 *
 * Functions: sr__push_count, pend_index, pend_remove, pend_send, pend_reply,
 * pend_lost, sr__push_take_deferred, wait_room, wait_ext, sr__push_flush,
 * pend_add, push_pipelined, sr__push_drop_ext, push_partitioned, push_desc,
 * push_blocking, push_mode, sr_client_push, sr_client_push_many,
 * sr_client_push_sparse, push_then_step, sr_client_push_step,
 * sr__push_filled, sr__push_free.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/name.h"
#include "core/text.h"
#include "worker/client_int.h"

/* How a dense push leaves: alone, or held back for a chain. */
typedef enum {
    PUSH_ALONE,     /* pipelined pushes are sent at once */
    PUSH_HOLD_MANY, /* sr_client_push_many: held, up to SR__CHAIN_HELD_MAX a message */
    PUSH_HOLD_STEP, /* sr_client_push_step: held for the TOKEN request, from the caller's buffer */
} push_hold;

void
sr__push_count(sr_client *c, int outcome)
{
    c->stats.pushes++;
    if (outcome == SR_PUSH_ACCEPTED) {
        c->stats.accepted++;
    } else if (outcome == SR_PUSH_STALE) {
        c->stats.stale++;
    } else {
        c->stats.duplicate++;
    }
}

static int
pend_index(const sr_client *c, const sr__pend *p)
{
    for (int i = 0; i < c->npend; i++) {
        if (c->pend[i] == p) {
            return i;
        }
    }
    return -1;
}

/* p leaves the unanswered pushes (the id map has forgotten it already). */
static void
pend_remove(sr_client *c, sr__pend *gone)
{
    int i = pend_index(c, gone);

    if (SR_NEVER(i < 0)) {
        return;
    }
    memmove(&c->pend[i], &c->pend[i + 1], (size_t)(c->npend - i - 1) * sizeof(gone));
    c->npend--;
    c->npend_ext -= gone->ext != NULL;
    gone->ext = NULL;
    c->pend[c->npend] = gone; /* keeps its buffer for the next push */
    c->pend_bytes -= gone->desc_len + gone->data_len;
}

/* A push's frames: its descriptor, and its gradient (copied, or the
 * caller's). */
static int
pend_send(sr_client *c, sr__req *r, uint16_t flags, int more, int dontwait)
{
    const sr__pend *p = (const sr__pend *)r;
    sr__frame f[2] = {{p->buf, p->desc_len}, {p->ext ? p->ext : p->buf + p->desc_len, p->data_len}};

    return sr__conn_send_frames(c, SR_MSG_PUSH, r->id, flags, p->local_step, p->seq, f, 2, more,
                                dontwait);
}

/* The answer to a pipelined push: counted; a refusal is kept for the next
 * sr_client_step to report. */
static void
pend_reply(sr_client *c, sr__req *r)
{
    sr__pend        *p = (sr__pend *)r;
    sr_wire_push_rep rep;

    if (c->rh.status == SR_OK && c->nrep == 1 &&
        sr_wire_push_rep_decode(zmq_msg_data(&c->rep[0]), zmq_msg_size(&c->rep[0]), &rep) ==
            SR_OK) {
        sr__push_count(c, rep.outcome);
    } else if (c->deferred_rc == SR_OK) {
        char what[SR_TEXT_ESC_CAP + 8];
        snprintf(what, sizeof(what), "push %s", SR_ESC(p->name));
        c->deferred_rc = c->rh.status != SR_OK
                             ? sr__reply_error(c, what)
                             : sr__fail(c, SR_EPROTO, "%s: malformed reply", what);
        snprintf(c->deferred_err, sizeof(c->deferred_err), "%s", c->err);
    }
    pend_remove(c, p);
}

/* A push the old incarnation will never answer: dropped like any stale
 * gradient (it was computed for it). */
static void
pend_lost(sr_client *c, sr__req *r)
{
    sr__push_count(c, SR_PUSH_STALE);
    pend_remove(c, (sr__pend *)r);
}

static const sr__req_ops pend_ops = {pend_reply, pend_send, pend_lost};

/* The refusal of a pipelined push, once. */
sr_err
sr__push_take_deferred(sr_client *c)
{
    sr_err rc = c->deferred_rc;
    if (rc == SR_OK) {
        return SR_OK;
    }
    c->deferred_rc = SR_OK;
    return sr__fail(c, rc, "%s", c->deferred_err);
}

/* Wait until `need` more bytes fit in `budget` among the unanswered pushes
 * (need > budget: until all are answered).  A restart noticed meanwhile is
 * handled (resync: the client is then tainted) and reported in *restarted. */
static sr_err
wait_room(sr_client *c, size_t need, size_t budget, int *restarted)
{
    sr__call w = {.kind = SR__WAIT_ROOM, .need = need, .budget = budget};
    sr_err   rc = sr__conn_call(c, &w, restarted);
    return rc == SR_OK && *restarted ? sr__session_resync(c) : rc;
}

/* Wait until no push sent from a caller's buffer is unanswered. */
static sr_err
wait_ext(sr_client *c)
{
    sr__call w = {.kind = SR__WAIT_EXT};
    int      restarted;
    sr_err   rc = sr__conn_call(c, &w, &restarted);
    return rc == SR_OK && restarted ? sr__session_resync(c) : rc;
}

/* Wait for every pipelined push's answer. */
sr_err
sr__push_flush(sr_client *c, int *restarted)
{
    return wait_room(c, 1, 0, restarted);
}

/* Queue one PUSH (descriptor desc, data of len bytes: copied, or used in
 * place when ext) and send it, or (hold) hold it back for the next request
 * or wait; its answer is taken by a later wait. */
static sr_err
pend_add(sr_client *c, const char *name, const sr__frame *desc, const void *data, size_t len,
         int ext, int hold)
{
    size_t    need = desc->len + (ext ? 0 : len);
    sr__pend *p;

    if (hold && c->held >= SR__CHAIN_HELD_MAX && sr__conn_send_held(c, 1, 0) != 0) {
        return sr__fail(c, SR_EMSG, "send PUSH: %s", zmq_strerror(errno));
    }
    if (sr__conn_reserve(c, 1) != SR_OK) {
        return SR_ENOMEM;
    }
    if (c->npend == c->cap_pend) {
        int        nc = c->cap_pend ? c->cap_pend * 2 : 16;
        sr__pend **q = realloc(c->pend, (size_t)nc * sizeof(*q));
        if (q == NULL) {
            return sr__fail(c, SR_ENOMEM, "push %s", SR_ESC(name));
        }
        memset(q + c->cap_pend, 0, (size_t)(nc - c->cap_pend) * sizeof(*q));
        c->pend = q;
        c->cap_pend = nc;
    }
    if (c->pend[c->npend] == NULL && (c->pend[c->npend] = calloc(1, sizeof(*p))) == NULL) {
        return sr__fail(c, SR_ENOMEM, "push %s", SR_ESC(name));
    }
    p = c->pend[c->npend];
    if (p->cap < need) {
        uint8_t *b = realloc(p->buf, need);
        if (b == NULL) {
            return sr__fail(c, SR_ENOMEM, "push %s: copy of %zu bytes", SR_ESC(name), need);
        }
        p->buf = b;
        p->cap = need;
    }
    memcpy(p->buf, desc->data, desc->len);
    if (!ext && len > 0) {
        memcpy(p->buf + desc->len, data, len);
    }
    p->ext = ext ? data : NULL;
    p->desc_len = desc->len;
    p->data_len = len;
    p->req = (sr__req){.id = ++c->next_req, .type = SR_MSG_PUSH, .ops = &pend_ops};
    p->seq = ++c->seq;
    p->local_step = c->local_step;
    snprintf(p->name, sizeof(p->name), "%s", name);
    if (!hold) {
        sr__frame pf[2] = {{p->buf, p->desc_len}, {ext ? data : p->buf + p->desc_len, len}};
        if (sr__conn_send_request(c, SR_MSG_PUSH, p->req.id, 0, p->local_step, p->seq, pf, 2) !=
            0) {
            p->ext = NULL;
            return sr__fail(c, SR_EMSG, "send PUSH: %s", zmq_strerror(errno));
        }
    }
    sr__conn_track(c, &p->req);
    c->held += hold != 0;
    c->npend++;
    c->npend_ext += ext != 0;
    c->pend_bytes += desc->len + len;
    return SR_OK;
}

/* A pipelined push (see the file's opening); with PUSH_HOLD_STEP, sent from
 * the caller's buffer whatever its size, with the token request of the same
 * call, which waits for its answer. */
static sr_err
push_pipelined(sr_client *c, const char *name, const sr__frame *f, push_hold hold)
{
    int    ext = hold == PUSH_HOLD_STEP, restarted;
    size_t need = f[0].len + f[1].len;
    sr_err rc = wait_room(c, need, ext && need > SR__PIPE_MAX_BYTES ? need : SR__PIPE_MAX_BYTES,
                          &restarted);

    if (rc != SR_OK) {
        return rc;
    }
    if (c->tainted) { /* the wait noticed a restart */
        sr__push_count(c, SR_PUSH_STALE);
        return SR_OK;
    }
    return pend_add(c, name, &f[0], f[1].data, f[1].len, ext, hold != PUSH_ALONE);
}

/* Pushes sent from a caller's buffer that a failed call leaves unanswered:
 * never re-sent (the buffer is the caller's again). */
void
sr__push_drop_ext(sr_client *c)
{
    for (int i = c->npend - 1; i >= 0; i--) {
        sr__pend *p = c->pend[i];
        if (p->ext != NULL) {
            sr__conn_forget(c, &p->req);
            pend_remove(c, p);
        }
    }
}

/* A dense push of a partitioned variable (docs/protocol.md, Partitions):
 * one PUSH per partition, at most two partitions unanswered at a time (so
 * the coordinator holds at most that much of this worker's gradient besides
 * its accumulators), sent from the caller's buffer, except the last one,
 * which is copied: the call returns once the others are answered, and the
 * last stays in flight like a pipelined push, so the next push (or the
 * token request) keeps the pipe full.  A refused partition is reported here,
 * or for the last one by the next blocking call. */
static sr_err
push_partitioned(sr_client *c, const char *name, const sr_wire_pushdesc *pd, const uint8_t *grad,
                 size_t bytes, size_t part, const sr__push_fill *fill)
{
    uint8_t buf[SR_WIRE_BODY_MAX];
    sr_err  rc = SR_OK;

    for (size_t off = 0; off < bytes && rc == SR_OK; off += part) {
        sr_wire_pushdesc p = *pd;
        size_t           len = bytes - off < part ? bytes - off : part;
        sr__frame        desc = {buf, 0};
        int              restarted;

        /* Room for this partition beside at most one more (descriptors
         * included: they count in pend_bytes too). */
        if ((rc = wait_room(c, len + SR_WIRE_BODY_MAX, 2 * (part + SR_WIRE_BODY_MAX),
                            &restarted)) != SR_OK) {
            break;
        }
        if (c->tainted) { /* a restart: the rest is stale too */
            sr__push_count(c, SR_PUSH_STALE);
            continue;
        }
        p.count = len;
        p.offset = off;
        if ((desc.len = sr_wire_pushdesc_encode(&p, buf, sizeof(buf))) == 0) {
            rc = sr__fail(c, SR_EINVAL, "push %s: cannot encode", SR_ESC(name));
            break;
        }
        if (fill != NULL) { /* while the partition before travels */
            fill->fn(fill->arg, off, len);
        }
        rc = pend_add(c, name, &desc, grad + off, len, off + len < bytes, 0);
    }
    if (rc == SR_OK) {
        rc = wait_ext(c);
    }
    sr__push_drop_ext(c);
    return rc != SR_OK ? rc : sr__push_take_deferred(c);
}

static sr_err
push_desc(sr_client *c, const char *name, uint64_t count, uint8_t *buf, size_t cap, sr__frame *f,
          const decl **out)
{
    sr_wire_pushdesc p;
    const decl      *d = NULL;

    memset(&p, 0, sizeof(p));
    if (sr_name_check(name, strlen(name)) != SR_OK) {
        return sr__fail(c, SR_EINVAL, "push \"%s\": %s", SR_ESC(name), sr_errdetail());
    }
    snprintf(p.name, sizeof(p.name), "%s", name);
    d = sr__decl_find(c, name);
    /* The dtype of an undeclared variable is checked by the coordinator. */
    p.dtype = (uint8_t)(d ? d->dtype : SR_FLOAT32);
    p.count = count;
    *out = d;
    f->data = buf;
    f->len = sr_wire_pushdesc_encode(&p, buf, cap);
    if (d != NULL && (d->flags & SR_DECLARE_NOT_TRAINABLE)) {
        return sr__fail(c, SR_EINVAL, "push %s: declared not trainable", SR_ESC(name));
    }
    return f->len ? SR_OK : sr__fail(c, SR_EINVAL, "push %s: cannot encode", SR_ESC(name));
}

/* Send a push (dense or sparse), wait for its answer and account for it. */
static sr_err
push_blocking(sr_client *c, int type, const char *name, const sr__frame *f, int nf)
{
    sr_wire_push_rep rep;
    sr_err           rc;
    int              restarted;

    if (c->tainted) {
        /* Computed from values pulled before a coordinator restart was noticed:
         * a gradient of no single step.  Dropped like any stale gradient. */
        sr__push_count(c, SR_PUSH_STALE);
        return SR_OK;
    }
    sr__call w = {.kind = SR__WAIT_REPLY,
                  .type = type,
                  .local_step = c->local_step,
                  .seq = ++c->seq,
                  .f = f,
                  .nf = nf};
    if ((rc = sr__conn_call(c, &w, &restarted)) != SR_OK) {
        return rc;
    }
    if (restarted) {
        /* Computed for the old incarnation: dropped, like any stale gradient. */
        sr__push_count(c, SR_PUSH_STALE);
        return sr__session_resync(c);
    }
    if (c->rh.status != SR_OK) {
        char what[SR_TEXT_ESC_CAP + 8];
        snprintf(what, sizeof(what), "push %s", SR_ESC(name));
        return sr__reply_error(c, what);
    }
    if (c->nrep != 1 || sr_wire_push_rep_decode(zmq_msg_data(&c->rep[0]), zmq_msg_size(&c->rep[0]),
                                                &rep) != SR_OK) {
        return sr__fail(c, SR_EPROTO, "push %s: malformed reply", SR_ESC(name));
    }
    sr__push_count(c, rep.outcome);
    return SR_OK;
}

/* sr_client_push, with the way a pipelined push leaves; fill (when not
 * NULL) writes the gradient's bytes just before they are sent. */
static sr_err
push_mode(sr_client *c, const char *name, const void *grad, size_t bytes, push_hold hold,
          const sr__push_fill *fill)
{
    uint8_t     buf[SR_WIRE_BODY_MAX];
    sr__frame   f[2];
    const decl *d;
    sr_err      rc;

    if (c == NULL || name == NULL || (grad == NULL && bytes > 0)) {
        return sr_fail(SR_EINVAL, "sr_client_push: NULL argument");
    }
    if (!c->ready_done) {
        return sr__fail(c, SR_ENOTREADY, "push %s: call sr_client_ready first", SR_ESC(name));
    }
    if ((rc = push_desc(c, name, bytes, buf, sizeof(buf), &f[0], &d)) != SR_OK) {
        return rc;
    }
    f[1].data = grad;
    f[1].len = bytes;
    int    whole = !c->tainted && d != NULL && d->nbytes == bytes; /* a declared variable's */
    size_t part = 0; /* > 0: the push goes in partitions of this size */
    if (whole) {
        sr_wire_layout l = sr_wire_partition_layout(bytes, d->ndim, d->shape[0], c->part_bytes);
        part = l.nparts > 1 ? (size_t)(l.part_rows * (bytes / l.rows)) : 0;
    }
    if ((rc = sr__check_size(c, "push", name, f[0].len + (part ? part : bytes))) != SR_OK) {
        return rc;
    }
    if (part > 0) {
        sr_wire_pushdesc p;
        memset(&p, 0, sizeof(p));
        snprintf(p.name, sizeof(p.name), "%s", name);
        p.dtype = (uint8_t)d->dtype;
        return push_partitioned(c, name, &p, grad, bytes, part, fill);
    }
    if (fill != NULL) {
        fill->fn(fill->arg, 0, bytes);
    }
    if (whole && (bytes <= SR__PIPE_PUSH_MAX || hold == PUSH_HOLD_STEP)) {
        return push_pipelined(c, name, f, hold);
    }
    rc = push_blocking(c, SR_MSG_PUSH, name, f, 2);
    if (rc == SR_EINVAL && d == NULL) {
        size_t used = strlen(c->err);
        if (snprintf(c->err + used, sizeof(c->err) - used,
                     " (%s was not declared by this client, so its gradient went as float32: "
                     "declare it first)",
                     name) < 0) {
            c->err[used] = '\0';
        }
    }
    return rc;
}

int
sr_client_push(sr_client *c, const char *name, const void *grad, size_t bytes)
{
    return push_mode(c, name, grad, bytes, PUSH_ALONE, NULL);
}

int
sr_client_push_many(sr_client *c, size_t n, const char *const *names, const void *const *grads,
                    const size_t *bytes)
{
    sr_err rc = SR_OK;

    if (c == NULL || (n > 0 && (names == NULL || grads == NULL || bytes == NULL))) {
        return sr_fail(SR_EINVAL, "sr_client_push_many: NULL argument");
    }
    for (size_t i = 0; i < n && rc == SR_OK; i++) {
        rc = push_mode(c, names[i], grads[i], bytes[i], c->chain_ok ? PUSH_HOLD_MANY : PUSH_ALONE,
                       NULL);
    }
    /* Nothing stays held after the call: a refused send leaves them to the
     * resends, like any push whose message was lost. */
    if (c->held > 0 && sr__conn_send_held(c, 1, 0) != 0 && rc == SR_OK) {
        rc = sr__fail(c, SR_EMSG, "send PUSH: %s", zmq_strerror(errno));
    }
    return rc;
}

int
sr_client_push_sparse(sr_client *c, const char *name, size_t nrows, const int64_t *row_indices,
                      const void *rows, size_t rows_bytes)
{
    uint8_t     buf[SR_WIRE_BODY_MAX];
    sr__frame   f[3];
    const decl *d;
    sr_err      rc;

    if (c == NULL || name == NULL || (nrows > 0 && (row_indices == NULL || rows == NULL))) {
        return sr_fail(SR_EINVAL, "sr_client_push_sparse: NULL argument");
    }
    if (!c->ready_done) {
        return sr__fail(c, SR_ENOTREADY, "push %s: call sr_client_ready first", SR_ESC(name));
    }
    if ((rc = push_desc(c, name, nrows, buf, sizeof(buf), &f[0], &d)) != SR_OK) {
        return rc;
    }
    f[1].data = row_indices;
    f[1].len = nrows * sizeof(int64_t);
    f[2].data = rows;
    f[2].len = rows_bytes;
    if ((rc = sr__check_size(c, "push", name, f[0].len + f[1].len + rows_bytes)) != SR_OK) {
        return rc;
    }
    return push_blocking(c, SR_MSG_PUSH_SPARSE, name, f, 3);
}

/* sr_client_push_step, or with step 0 sr_client_push, with fill. */
static sr_err
push_then_step(sr_client *c, const char *name, const void *grad, size_t bytes,
               const sr__push_fill *fill, int step)
{
    sr_err rc;

    if (!step) {
        return push_mode(c, name, grad, bytes, PUSH_ALONE, fill);
    }
    if (c == NULL) {
        return sr_fail(SR_EINVAL, "sr_client_push_step: NULL client");
    }
    if (!c->ready_done) { /* before the push: nothing may stay held */
        return sr__fail(c, SR_ENOTREADY, "push %s: call sr_client_ready first", SR_ESC(name));
    }
    rc = push_mode(c, name, grad, bytes, c->chain_ok ? PUSH_HOLD_STEP : PUSH_ALONE, fill);
    if (rc == SR_OK) {
        rc = sr_client_step(c); /* takes the push's answer, or fails */
    }
    sr__push_drop_ext(c);
    return rc;
}

int
sr_client_push_step(sr_client *c, const char *name, const void *grad, size_t bytes)
{
    return push_then_step(c, name, grad, bytes, NULL, 1);
}

sr_err
sr__push_filled(sr_client *c, const char *name, const void *grad, size_t bytes,
                const sr__push_fill *fill, int step)
{
    return push_then_step(c, name, grad, bytes, fill, step);
}

void
sr__push_free(sr_client *c)
{
    for (int i = 0; i < c->cap_pend; i++) {
        if (c->pend[i] != NULL) {
            free(c->pend[i]->buf);
            free(c->pend[i]);
        }
    }
    free(c->pend);
}
