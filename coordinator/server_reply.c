/*
 * Replies: the frames of every reply go out here, through the I/O seam
 * (sr__coord_send, server_int.h): a header (sr__coord_send_hdr,
 * sr__coord_send_head, sr__coord_send_reply, sr__coord_send_error), a value
 * zero-copy from its buffer (sr__coord_send_value_frame), the TOKEN reply
 * with the model piggybacked (sr__coord_send_token_reply), a PULL's
 * (sr__coord_send_reply_value).  A reply that meets a gone peer or a full
 * queue is dropped: the client resends (docs/protocol.md).  A request
 * answered with no reply at all, or refused, is counted and logged at a
 * bounded rate (sr__coord_count_bad).
 */
#include <inttypes.h>
#include <string.h>

#include "coordinator/server_int.h"
#include "core/log.h"
#include "core/text.h"

/* The header frame of a reply to `req` (more: frames follow), after the
 * routing id.  0, or -1 when the peer is gone or its queue is full (the
 * caller decides what that loses). */
int
sr__coord_send_hdr(coord *c, const sr_wire_header *req, int status, int64_t local_step,
                   uint16_t flags, int more)
{
    sr_wire_header h = *req;
    uint8_t        hb[SR_WIRE_HEADER_BYTES];

    h.type = (uint8_t)(req->type | SR_WIRE_REPLY);
    h.flags = flags;
    h.incarnation = c->incarnation;
    h.status = status;
    h.local_step = local_step;
    sr_wire_header_encode(&h, hb);
    return sr__coord_send(c, hb, sizeof(hb), (more ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0 ? -1 : 0;
}

/* The routing id and the reply header. */
int
sr__coord_send_head(coord *c, const uint8_t *rid, size_t rid_len, const sr_wire_header *req,
                    int status, int64_t local_step, uint16_t flags, int more)
{
    if (sr__coord_send(c, rid, rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        return -1;
    }
    return sr__coord_send_hdr(c, req, status, local_step, flags, more);
}

int
sr__coord_send_reply(coord *c, const uint8_t *rid, size_t rid_len, const sr_wire_header *req,
                     int status, int64_t local_step, const frame *frames, int nframes)
{
    if (sr__coord_send_head(c, rid, rid_len, req, status, local_step, 0, nframes > 0) != 0) {
        return -1;
    }
    for (int i = 0; i < nframes; i++) {
        if (sr__coord_send(c, frames[i].data, frames[i].len,
                           (i + 1 < nframes ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0) {
            return -1;
        }
    }
    return 0;
}

void
sr__coord_send_error(coord *c, const uint8_t *rid, size_t rid_len, const sr_wire_header *req,
                     sr_err e, const char *detail)
{
    frame f = {detail, strlen(detail)};
    sr__coord_send_reply(c, rid, rid_len, req, e, c->global_step, &f, 1);
}

/* zmq_msg_init_data's free function for a pull reply: sent. */
static void
pull_slot_free(void *data, void *hint)
{
    pull_slot *s = hint;
    (void)data;
    sr__coord_vbuf_release(s->vb);
    atomic_store(&s->busy, 0);
}

/* Append a zero-copy frame of v's value (ZMQ_SNDMORE unless last); with a
 * slot, the frame is a pull reply that frees the slot once sent. */
int
sr__coord_send_value_frame(coord *c, cvar *v, int last, pull_slot *slot)
{
    return sr__coord_send_slice_frame(c, v, 0, v->meta.nbytes, last, slot);
}

int
sr__coord_send_slice_frame(coord *c, cvar *v, uint64_t off, uint64_t len, int last, pull_slot *slot)
{
    zmq_msg_t m;

    SR_ASSERT(off <= v->meta.nbytes && len <= v->meta.nbytes - off);
    if (len == 0) {
        zmq_msg_init(&m);
    } else {
        atomic_fetch_add(&v->vb->refs, 1);
        if (slot != NULL) {
            slot->vb = v->vb;
            slot->bytes = len;
            atomic_store(&slot->busy, 1);
        }
        if (zmq_msg_init_data(&m, (uint8_t *)v->value + off, (size_t)len,
                              slot != NULL ? pull_slot_free : sr__coord_vbuf_msg_free,
                              slot != NULL ? (void *)slot : (void *)v->vb) != 0) {
            if (slot != NULL) {
                atomic_store(&slot->busy, 0);
            }
            sr__coord_vbuf_release(v->vb);
            return -1;
        }
    }
    if (sr__coord_send_msg(c, &m, (last ? 0 : ZMQ_SNDMORE) | ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m); /* not sent: drops the reference */
        return -1;
    }
    return 0;
}

/* Whether a TOKEN reply may carry the whole model (one round trip per
 * step for small models). */
static int
piggyback_ok(const coord *c)
{
    return c->nvars > 0 && c->total_var_bytes <= c->o->piggyback_max_bytes;
}

/* A vardesc frame (into buf) of a name, dtype, trainability and shape. */
static void
encode_desc(const char *name, int dtype, int trainable, int ndim, const int64_t *shape,
            uint8_t *buf, size_t cap, frame *f)
{
    sr_wire_vardesc d;

    memset(&d, 0, sizeof(d));
    snprintf(d.name, sizeof(d.name), "%s", name);
    d.dtype = (uint8_t)dtype;
    d.flags = trainable ? 0 : SR_DECLARE_NOT_TRAINABLE;
    d.ndim = (uint8_t)ndim;
    memcpy(d.shape, shape, sizeof(d.shape));
    f->data = buf;
    f->len = sr_wire_vardesc_encode(&d, buf, cap);
}

void
sr__coord_encode_vardesc(const cvar *v, uint8_t *buf, size_t cap, frame *f)
{
    encode_desc(v->meta.name, v->meta.dtype, v->meta.trainable, v->meta.ndim, v->meta.shape, buf,
                cap, f);
}

/* The variables a TOKEN reply to cl carries after the vars header: every
 * one, or (a delta: cl holds the values of global step `have`) those
 * changed since.  The count. */
static uint32_t
token_vars(const coord *c, int64_t have)
{
    uint32_t n = 0;
    for (size_t i = 0; i < c->nvars; i++) {
        n += have < 0 || c->vars[i].fresh_from > have;
    }
    return n;
}

/* The TOKEN reply: the token's value in the header; with `want` and a
 * small model, the current variables after it (only those changed since the
 * step whose values the parked request holds: SR_WIRE_F_HAVE_VARS).  0, or
 * -1 if the peer is gone. */
int
sr__coord_send_token_reply(coord *c, client *cl, uint64_t req_id, int64_t token, int want)
{
    sr_wire_header   h;
    int              vars = want && piggyback_ok(c);
    int64_t          have = vars && cl->parked_have <= c->global_step ? cl->parked_have : -1;
    sr_wire_vars_hdr vh = {c->global_step, vars ? token_vars(c, have) : 0};
    uint16_t         flags = have >= 0 ? SR_WIRE_F_HAVE_VARS : 0;
    uint8_t          vb[16], db[SR_WIRE_BODY_MAX];
    frame            f;

    memset(&h, 0, sizeof(h));
    h.type = SR_MSG_TOKEN;
    h.request_id = req_id;
    h.client_id = cl->client_id;
    h.task_index = cl->task;
    /* The pushes' answers first, as they came: in the token's message when
     * the client reads chains. */
    if (cl->chained > 0 && cl->nheld > 0) {
        if (sr__coord_send(c, cl->rid, cl->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
            return -1;
        }
        sr__coord_send_held(c, cl, HELD_BEFORE_REPLY);
        if (sr__coord_send_hdr(c, &h, SR_OK, token, flags, vars) != 0) {
            return -1;
        }
    } else {
        sr__coord_flush_held(c, cl);
        if (sr__coord_send_head(c, cl->rid, cl->rid_len, &h, SR_OK, token, flags, vars) != 0) {
            return -1;
        }
    }
    if (!vars) {
        return 0;
    }
    /* The rest goes into the same pipe as the first frames: ZeroMQ delivers
     * a multipart message whole or not at all. */
    sr__coord_send(c, vb, sr_wire_vars_hdr_encode(&vh, vb, sizeof(vb)),
                   vh.nvars > 0 ? ZMQ_SNDMORE : 0);
    for (size_t i = 0, sent = 0; i < c->nvars; i++) {
        if (have >= 0 && c->vars[i].fresh_from <= have) {
            continue;
        }
        sr__coord_encode_vardesc(&c->vars[i], db, sizeof(db), &f);
        sr__coord_send(c, f.data, f.len, ZMQ_SNDMORE);
        sr__coord_send_value_frame(c, &c->vars[i], ++sent == vh.nvars, NULL);
        c->piggy_bytes += c->vars[i].meta.nbytes;
    }
    c->piggy_vars += vh.nvars;
    c->piggy_whole += have < 0;
    c->piggy_delta += have >= 0;
    return 0;
}

void
sr__coord_send_reply_value(coord *c, const req_ctx *r, const frame *desc, cvar *v, uint64_t off,
                           uint64_t len)
{
    pull_slot *slot = NULL;

    if (sr__coord_take_pull_slots(c, r, &v, 1, &slot) != 0) {
        return;
    }
    if (sr__coord_send_head(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, 0, 1) == 0 &&
        sr__coord_send(c, desc->data, desc->len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0) {
        sr__coord_send_slice_frame(c, v, off, len, 1, slot);
    }
}

void
sr__coord_encode_member_desc(const coord *c, const cmember *m, uint8_t *buf, size_t cap, frame *f)
{
    int64_t shape[SR_MAX_NDIM] = {0};

    memcpy(shape, sr__coord_member_shape(c, m), m->ndim * sizeof(shape[0]));
    encode_desc(sr__coord_member_name(c, m), m->dtype, m->trainable, m->ndim, shape, buf, cap, f);
}

void
sr__coord_count_bad(coord *c, uint64_t *count, int64_t *last_log_ms, const char *id,
                    const char *why)
{
    int64_t now = sr__coord_now_ms(c);
    (*count)++;
    if (now - *last_log_ms >= 5000) {
        *last_log_ms = now;
        SR_LOG(SR_LOG_WARN, id, "count=%" PRIu64 " last=\"%s\"", *count, why);
    }
}
