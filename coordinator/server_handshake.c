/*
 * Requests that set a worker up: HELLO (the coordinator's incarnation, step
 * and limits), DECLARE (the chief's variables, whole or in parts; others'
 * declarations are checked against the model) and READY (the chief marks
 * the model ready: WAIT_MODEL -> SERVING).  docs/protocol.md.
 */
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "coordinator/server_int.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/name.h"
#include "core/text.h"

void
sr__coord_handle_hello(coord *c, req_ctx *r)
{
    sr_wire_hello_rep rep = {
        c->global_step, (uint8_t)sr__coord_model_ready(c),         c->o->R,
        c->o->N,        c->max_msg > 0 ? (uint64_t)c->max_msg : 0, c->o->partition_bytes};
    uint8_t buf[SR_WIRE_BODY_MAX];
    size_t  n = sr_wire_hello_rep_encode(&rep, buf, sizeof(buf));
    frame   f = {buf, n};

    sr__coord_touch_worker(c, r->h.task_index, sr__coord_model_ready(c) ? c->global_step : -1);
    /* Flagged: this coordinator accepts chains and pulls of many variables
     * (docs/protocol.md). */
    if (sr__coord_send_head(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step,
                            SR_WIRE_F_CHAIN | SR_WIRE_F_MANY, 1) == 0) {
        sr__coord_send(c, f.data, f.len, 0);
    }
}

static int
shape_equal(const sr_store_var *m, const sr_wire_vardesc *d)
{
    if (m->dtype != d->dtype || m->ndim != d->ndim) {
        return 0;
    }
    for (int i = 0; i < m->ndim; i++) {
        if (m->shape[i] != d->shape[i]) {
            return 0;
        }
    }
    return 1;
}

static void
describe(int dtype, int ndim, const int64_t *shape, char *buf, size_t len)
{
    char s[160];
    sr_shape_format(ndim, shape, s, sizeof(s));
    snprintf(buf, len, "%s%s", sr_dtype_name(dtype), s);
}

/* A new variable of nbytes takes its value and, if trainable, its
 * accumulator's sums and the optimizer's state (the pulls' extra values
 * come and go).  One that needs more than the machine's physical memory is
 * refused: it could only end in the kernel's OOM killer (the allocation
 * succeeds, the pages fail later), and the chief's declaration, sent again
 * after the restart, would end there again. */
static sr_err
fits_memory(const coord *c, const char *name, uint64_t nbytes, int trainable)
{
    const char *slots[3];
    uint64_t    copies = trainable ? 2 + (uint64_t)sr__optim_slots(&c->o->optim, slots) : 1;
    long        pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);

    if (pages <= 0 || psz <= 0) {
        return SR_OK; /* unknown: the allocation decides */
    }
    uint64_t phys = (uint64_t)pages * (uint64_t)psz;
    uint64_t need = nbytes > UINT64_MAX / copies ? UINT64_MAX : nbytes * copies;
    if (need <= phys) {
        return SR_OK;
    }
    return sr_fail(SR_ENOMEM,
                   "variable %s: %" PRIu64 " bytes, %" PRIu64
                   " with its accumulator and optimizer state: more than this machine's memory "
                   "(%" PRIu64 " bytes)",
                   SR_ESC(name), nbytes, need, phys);
}

/* Is b the same declaration as a (name, dtype, shape, trainability)? */
static int
same_decl(const sr_wire_vardesc *a, const sr_wire_vardesc *b)
{
    return strcmp(a->name, b->name) == 0 && a->dtype == b->dtype && a->ndim == b->ndim &&
           memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(a->shape[0])) == 0 &&
           ((a->flags ^ b->flags) & SR_DECLARE_NOT_TRAINABLE) == 0;
}

void
sr__coord_pdecl_drop(coord *c)
{
    sr__coord_vbuf_release(c->pdecl_vb);
    c->pdecl_vb = NULL;
    c->pdecl_got = 0;
}

/* One part of the chief's initial value of d (nbytes in all): frame 1 its
 * pushdesc p, frame 2 its bytes.  The parts go in order from byte 0 (a
 * part at 0 of another declaration starts that one; one already taken may
 * come again).  Returns the value's buffer once its last byte is in;
 * otherwise NULL, having answered the part. */
static vbuf *
declare_part(coord *c, req_ctx *r, const sr_wire_vardesc *d, const sr_wire_pushdesc *p,
             uint64_t nbytes)
{
    size_t len = zmq_msg_size(&r->body[2]);
    int    same = c->pdecl_vb != NULL && same_decl(&c->pdecl, d);

    if (len == 0 || p->offset > nbytes || len > nbytes - p->offset) {
        REPLY_ERR(r, SR_EINVAL,
                  "declare %s: a part of %zu bytes at byte %" PRIu64 " is outside its %" PRIu64
                  " bytes",
                  SR_ESC(d->name), len, p->offset, nbytes);
        return NULL;
    }
    if (p->offset == 0 && !same) {
        sr__coord_pdecl_drop(c);
        if ((c->pdecl_vb = sr__coord_vbuf_new((size_t)nbytes)) == NULL) {
            REPLY_ERR(r, SR_ENOMEM, "variable %s: cannot allocate %" PRIu64 " bytes",
                      SR_ESC(d->name), nbytes);
            return NULL;
        }
        c->pdecl = *d;
    } else if (!same || p->offset > c->pdecl_got) {
        REPLY_ERR(r, SR_EINVAL,
                  "declare %s: a part at byte %" PRIu64 ", but %" PRIu64
                  " bytes of its initial value have arrived (the parts go in order from byte 0)",
                  SR_ESC(d->name), p->offset, same ? c->pdecl_got : 0);
        return NULL;
    }
    memcpy(c->pdecl_vb->data + p->offset, zmq_msg_data(&r->body[2]), len);
    if (p->offset + len > c->pdecl_got) {
        c->pdecl_got = p->offset + len;
    }
    if (c->pdecl_got < nbytes) {
        sr__coord_send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, NULL, 0);
        return NULL;
    }
    vbuf *vb = c->pdecl_vb;
    c->pdecl_vb = NULL;
    c->pdecl_got = 0;
    return vb;
}

/* DECLARE's frames: vardesc, then the whole initial value (optional), or
 * (flag SR_WIRE_DECLARE_PART) a pushdesc and one part of it. */
static sr_err
declare_frames(const req_ctx *r, sr_wire_vardesc *d, sr_wire_pushdesc *p)
{
    if (r->nbody < 1) {
        return sr_fail(SR_EPROTO, "no descriptor");
    }
    sr_err rc = sr_wire_vardesc_decode(zmq_msg_data(&r->body[0]), zmq_msg_size(&r->body[0]), d);
    if (rc != SR_OK) {
        return rc;
    }
    if (!(d->flags & SR_WIRE_DECLARE_PART)) {
        return r->nbody <= 2 ? SR_OK : sr_fail(SR_EPROTO, "%d frames, at most 2", r->nbody);
    }
    if (r->nbody != 3) {
        return sr_fail(SR_EPROTO, "a part: %d frames, not 3", r->nbody);
    }
    if ((rc = sr_wire_pushdesc_decode(zmq_msg_data(&r->body[1]), zmq_msg_size(&r->body[1]), p)) !=
        SR_OK) {
        return rc;
    }
    if (strcmp(p->name, d->name) != 0 || p->dtype != d->dtype ||
        p->count != zmq_msg_size(&r->body[2])) {
        return sr_fail(SR_EPROTO, "a part's descriptor does not match its variable or its bytes");
    }
    return SR_OK;
}

void
sr__coord_handle_declare(coord *c, req_ctx *r)
{
    sr_wire_vardesc  d;
    sr_wire_pushdesc p;
    sr_store_var     meta;
    uint64_t         nbytes;
    cvar            *v;
    int              trainable;
    vbuf            *vb;
    char             have[200], want[200];

    if (declare_frames(r, &d, &p) != SR_OK) {
        REPLY_ERR(r, SR_EPROTO, "DECLARE: %s", sr_errdetail());
        return;
    }
    if (sr_name_check(d.name, strlen(d.name)) != SR_OK) {
        REPLY_ERR(r, SR_EINVAL, "declare \"%s\": %s", SR_ESC(d.name), sr_errdetail());
        return;
    }
    if (sr_shape_bytes(d.dtype, d.ndim, d.shape, &nbytes) != SR_OK) {
        REPLY_ERR(r, SR_EINVAL, "DECLARE %s: %s", SR_ESC(d.name), sr_errdetail());
        return;
    }
    trainable = sr_dtype_is_float(d.dtype) && !(d.flags & SR_DECLARE_NOT_TRAINABLE);
    describe(d.dtype, d.ndim, d.shape, want, sizeof(want));
    if ((v = sr__coord_find_var(c, d.name)) != NULL) {
        describe(v->meta.dtype, v->meta.ndim, v->meta.shape, have, sizeof(have));
        if (!shape_equal(&v->meta, &d)) {
            REPLY_ERR(r, SR_EEXIST, "variable %s exists as %s, declared as %s", SR_ESC(d.name),
                      have, want);
            return;
        }
        if (v->meta.trainable != trainable) {
            REPLY_ERR(r, SR_EEXIST, "variable %s exists %s, declared %s", SR_ESC(d.name),
                      v->meta.trainable ? "trainable" : "not trainable",
                      trainable ? "trainable" : "not trainable");
            return;
        }
        sr__coord_send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, NULL, 0);
        return;
    }
    if (sr_store_is_pack_name(d.name) &&
        sr__coord_check_pack_decl(c, d.name, d.dtype, d.ndim, d.shape, trainable, have,
                                  sizeof(have)) != 0) {
        REPLY_ERR(r, SR_EINVAL, "declare %s: %s", SR_ESC(d.name), have);
        return;
    }
    if (sr__coord_find_member(c, d.name) != NULL) {
        REPLY_ERR(r, SR_EEXIST,
                  "declare %s: a tensor of a model declared as a whole "
                  "(sr_client_declare_model) has this name",
                  SR_ESC(d.name));
        return;
    }
    if (c->nvars >= SR_COORD_MAX_VARIABLES) {
        REPLY_ERR(r, SR_EINVAL, "declare %s: the model already has %d variables, the limit",
                  SR_ESC(d.name), SR_COORD_MAX_VARIABLES);
        return;
    }
    if (r->h.task_index != 0 || (d.flags & SR_WIRE_DECLARE_CHECK_ONLY)) {
        REPLY_ERR(r,
                  sr__coord_model_ready(c) || (d.flags & SR_WIRE_DECLARE_CHECK_ONLY) ? SR_ENOENT
                                                                                     : SR_ENOTREADY,
                  "variable %s: not declared by the chief%s", SR_ESC(d.name),
                  sr__coord_model_ready(c) ? "" : " (model not ready yet)");
        return;
    }
    if (sr__coord_model_ready(c) && !c->o->allow_new_variables) {
        /* A program declaring another model (a wrong shape, a renamed
         * variable) must not change this one for good. */
        REPLY_ERR(r, SR_EINVAL,
                  "declare %s: the model is ready and has no such variable; adding one to a "
                  "ready model needs the coordinator option --allow-new-variables",
                  SR_ESC(d.name));
        return;
    }
    if (fits_memory(c, d.name, nbytes, trainable) != SR_OK) {
        REPLY_ERR(r, SR_ENOMEM, "%s", sr_errdetail());
        return;
    }
    if (d.flags & SR_WIRE_DECLARE_PART) {
        if ((vb = declare_part(c, r, &d, &p, nbytes)) == NULL) {
            return; /* answered: more parts to come, or refused */
        }
    } else {
        if (r->nbody == 2 && zmq_msg_size(&r->body[1]) != nbytes) {
            REPLY_ERR(r, SR_EINVAL, "variable %s %s: initial value is %zu bytes, expected %" PRIu64,
                      SR_ESC(d.name), want, zmq_msg_size(&r->body[1]), nbytes);
            return;
        }
        if ((vb = sr__coord_vbuf_new((size_t)nbytes)) == NULL) {
            REPLY_ERR(r, SR_ENOMEM, "variable %s: cannot allocate %" PRIu64 " bytes",
                      SR_ESC(d.name), nbytes);
            return;
        }
        if (r->nbody == 2) {
            memcpy(vb->data, zmq_msg_data(&r->body[1]), (size_t)nbytes);
        } else {
            memset(vb->data, 0, (size_t)nbytes);
        }
    }
    sr_err rc = sr_store_declare(c->st, d.name, d.dtype, d.ndim, d.shape, trainable, vb->data,
                                 (size_t)nbytes, &meta.id, NULL);
    if (rc == SR_OK) {
        rc = sr_store_find_var(c->st, d.name, &meta);
    }
    if (rc == SR_OK) {
        rc = sr__coord_add_var(c, &meta, vb, 0);
    }
    if (rc != SR_OK) {
        sr__coord_vbuf_release(vb);
        REPLY_ERR(r, rc, "declare %s: %s", SR_ESC(d.name), sr_errdetail());
        return;
    }
    if (c->pdecl_vb != NULL && strcmp(c->pdecl.name, d.name) == 0) {
        sr__coord_pdecl_drop(c); /* an unfinished attempt at the same variable */
    }
    SR_LOG(SR_LOG_NOTICE, "COORD-DECLARE",
           "variable=\"%s\" type=%s bytes=%" PRIu64 " trainable=%d global_step=%" PRId64 "%s%s",
           SR_ESC(d.name), want, nbytes, trainable, c->global_step,
           (d.flags & SR_WIRE_DECLARE_PART) ? " (in parts)" : "",
           sr__coord_model_ready(c) ? " (added to a ready model)" : "");
    sr__coord_send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, NULL, 0);
}

void
sr__coord_handle_ready(coord *c, req_ctx *r)
{
    sr_wire_ready_req q;
    uint8_t           buf[SR_WIRE_BODY_MAX];

    if (r->nbody != 1 || sr_wire_ready_req_decode(zmq_msg_data(&r->body[0]),
                                                  zmq_msg_size(&r->body[0]), &q) != SR_OK) {
        REPLY_ERR(r, SR_EPROTO, "READY: bad body");
        return;
    }
    if (q.mark && r->h.task_index != 0) {
        REPLY_ERR(r, SR_EINVAL, "READY: only the chief (task 0) marks the model ready");
        return;
    }
    if (q.mark && c->state == COORD_WAIT_MODEL) {
        char why[400];
        if (sr__coord_packs_missing(c, why, sizeof(why))) {
            REPLY_ERR(r, SR_EINVAL, "mark ready: %s", why);
            return;
        }
        sr_err rc = sr_store_set_ready(c->st);
        if (rc != SR_OK) {
            REPLY_ERR(r, rc, "mark ready: %s", sr_errdetail());
            return;
        }
        sr__coord_serve(c); /* WAIT_MODEL -> SERVING */
    }
    if (sr__coord_model_ready(c)) {
        sr__coord_touch_worker(c, r->h.task_index, c->global_step);
    }
    sr_wire_ping_rep rep = {(uint8_t)sr__coord_model_ready(c), c->global_step};
    frame            f = {buf, sr_wire_ping_rep_encode(&rep, buf, sizeof(buf))};
    sr__coord_send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, &f, 1);
}
