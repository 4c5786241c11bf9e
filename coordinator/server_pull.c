/*
 * Requests that read: PULL of one variable or many (a zero-copy reply from
 * the value's buffer), TOKEN (parked until one exists, server_peers.c),
 * PING and STATUS (the JSON of server_status.c).
 */
#include <string.h>

#include "coordinator/server_int.h"
#include "core/log.h"
#include "core/name.h"
#include "core/strbuf.h"
#include "core/text.h"

/* The variables a PULL's name frames name, into vars (a model's tensor:
 * its pack, and the tensor in mem; else mem NULL): 0, or -1 after an error
 * reply (a frame that is no name, the model not ready, an unknown name). */
static int
pull_targets(coord *c, req_ctx *r, cvar **vars, const cmember **mem)
{
    sr_wire_name nm;

    for (int i = 0; i < r->nbody; i++) {
        if (sr_wire_name_decode(zmq_msg_data(&r->body[i]), zmq_msg_size(&r->body[i]), &nm) !=
            SR_OK) {
            if (r->h.flags & SR_WIRE_F_MANY) {
                REPLY_ERR(r, SR_EPROTO, "PULL: bad name frame %d", i + 1);
            } else {
                REPLY_ERR(r, SR_EPROTO, "PULL: bad name frame");
            }
            return -1;
        }
        if (sr_name_check(nm.name, strlen(nm.name)) != SR_OK) {
            REPLY_ERR(r, SR_EINVAL, "pull \"%s\": %s", SR_ESC(nm.name), sr_errdetail());
            return -1;
        }
        if (!sr__coord_model_ready(c)) {
            REPLY_ERR(r, SR_ENOTREADY, "pull %s: model not ready", SR_ESC(nm.name));
            return -1;
        }
        mem[i] = NULL;
        if ((vars[i] = sr__coord_find_var(c, nm.name)) == NULL &&
            ((mem[i] = sr__coord_find_member(c, nm.name)) == NULL ||
             (vars[i] = sr__coord_find_var(c, sr__coord_member_pack(c, mem[i]))) == NULL)) {
            REPLY_ERR(r, SR_ENOENT, "pull: no variable '%s'", SR_ESC(nm.name));
            return -1;
        }
    }
    return 0;
}

/* A PULL of many variables (SR_WIRE_F_MANY): every name is checked before
 * anything is sent; the reply is laid out as a TOKEN reply's variables. */
static void
handle_pull_many(coord *c, req_ctx *r)
{
    cvar            *vars[SR_WIRE_PULL_MANY_MAX];
    const cmember   *mem[SR_WIRE_PULL_MANY_MAX];
    pull_slot       *slots[SR_WIRE_PULL_MANY_MAX];
    sr_wire_vars_hdr vh = {c->global_step, (uint32_t)r->nbody};
    uint8_t          vb[16], db[SR_WIRE_BODY_MAX];
    frame            f;

    if (r->nbody < 1 || r->nbody > SR_WIRE_PULL_MANY_MAX) {
        REPLY_ERR(r, SR_EPROTO, "PULL: %d names (1..%d)", r->nbody, SR_WIRE_PULL_MANY_MAX);
        return;
    }
    if (pull_targets(c, r, vars, mem) != 0 ||
        sr__coord_take_pull_slots(c, r, vars, r->nbody, slots) != 0 ||
        sr__coord_send_head(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, SR_WIRE_F_MANY,
                            1) != 0) {
        return;
    }
    /* The rest of a message ZeroMQ took. */
    sr__coord_send(c, vb, sr_wire_vars_hdr_encode(&vh, vb, sizeof(vb)), ZMQ_SNDMORE);
    for (int i = 0; i < r->nbody; i++) {
        int last = i + 1 == r->nbody;
        if (mem[i] != NULL) {
            sr__coord_encode_member_desc(c, mem[i], db, sizeof(db), &f);
            sr__coord_send(c, f.data, f.len, ZMQ_SNDMORE);
            sr__coord_send_slice_frame(c, vars[i], mem[i]->offset, mem[i]->nbytes, last, slots[i]);
        } else {
            sr__coord_encode_vardesc(vars[i], db, sizeof(db), &f);
            sr__coord_send(c, f.data, f.len, ZMQ_SNDMORE);
            sr__coord_send_value_frame(c, vars[i], last, slots[i]);
        }
    }
}

void
sr__coord_handle_pull(coord *c, req_ctx *r)
{
    cvar          *v;
    const cmember *mem;
    uint8_t        buf[SR_WIRE_BODY_MAX];
    frame          f;

    if (r->h.flags & SR_WIRE_F_MANY) {
        handle_pull_many(c, r);
        return;
    }
    if (r->nbody != 1) {
        REPLY_ERR(r, SR_EPROTO, "PULL: bad name frame");
        return;
    }
    if (pull_targets(c, r, &v, &mem) != 0) {
        return;
    }
    if (mem != NULL) {
        sr__coord_encode_member_desc(c, mem, buf, sizeof(buf), &f);
        sr__coord_send_reply_value(c, r, &f, v, mem->offset, mem->nbytes);
    } else {
        sr__coord_encode_vardesc(v, buf, sizeof(buf), &f);
        sr__coord_send_reply_value(c, r, &f, v, 0, v->meta.nbytes);
    }
}

void
sr__coord_handle_token(coord *c, req_ctx *r)
{
    client *cl = r->cl;

    if (!sr__coord_model_ready(c)) {
        REPLY_ERR(r, SR_ENOTREADY, "token: model not ready");
        return;
    }
    if (cl->token_req == r->h.request_id) {
        /* A resend of a request already answered: answer the same token. */
        sr__coord_flush_held(c, cl);
        sr__coord_send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, cl->token_val, NULL, 0);
        return;
    }
    if (cl->parked && cl->parked_req == r->h.request_id) {
        return; /* still waiting; last_seen was refreshed */
    }
    sr_wire_have have = {-1};
    if ((r->h.flags & SR_WIRE_F_HAVE_VARS) &&
        (r->nbody != 1 || sr_wire_have_decode(zmq_msg_data(&r->body[0]), zmq_msg_size(&r->body[0]),
                                              &have) != SR_OK)) {
        REPLY_ERR(r, SR_EPROTO, "token: SR_WIRE_F_HAVE_VARS needs one 8-byte frame: %s",
                  r->nbody != 1 ? "no such frame" : sr_errdetail());
        return;
    }
    cl->parked = 1;
    cl->parked_req = r->h.request_id;
    cl->parked_want = (r->h.flags & SR_WIRE_F_WANT_VARS) != 0;
    cl->parked_have = have.global_step;
    cl->parked_order = ++c->park_counter;
    sr__coord_serve_parked(c);
}

void
sr__coord_handle_ping(coord *c, req_ctx *r)
{
    sr_wire_ping_rep rep = {(uint8_t)sr__coord_model_ready(c), c->global_step};
    uint8_t          buf[32];
    frame            f = {buf, sr_wire_ping_rep_encode(&rep, buf, sizeof(buf))};
    sr__coord_send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, &f, 1);
}

void
sr__coord_handle_status(coord *c, req_ctx *r)
{
    sr_strbuf   b;
    const char *text;

    sr_strbuf_init(&b);
    sr__coord_status_json(c, &b);
    if (sr_strbuf_result(&b, &text) != SR_OK) {
        REPLY_ERR(r, SR_ENOMEM, "status: out of memory");
    } else {
        frame f = {text, strlen(text)};
        sr__coord_send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, &f, 1);
    }
    sr_strbuf_free(&b);
}
