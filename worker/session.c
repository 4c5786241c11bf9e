/*
 * The session: HELLO, the declarations, ready, and resynchronisation when a
 * reply carries a new incarnation (docs/protocol.md, "Coordinator restart as
 * seen by a client").
 *
 *   open --HELLO--> CONNECTED --declare, ready--> TRAINING (pull/push/step)
 *                        ^                              |
 *                        +--- resync (new incarnation) -+
 *
 *  transition                 function
 *  open -> CONNECTED          sr_client_open -> sr__session_hello
 *  CONNECTED -> TRAINING      sr_client_ready (ready_done := 1)
 *  any -> resync -> same      sr__session_resync: HELLO, the chief re-declares
 *                             (check only once the model is ready) and re-marks
 *                             ready, local step := the restored global step
 *
 * Functions: sr__session_hello, sr__session_resync, sr__decl_find,
 * declare_parts, declare_one, sr_client_declare_ex, sr_client_declare,
 * ready_rpc, sr_client_ready, sr_client_finish.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/name.h"
#include "core/text.h"
#include "worker/client_int.h"

/* An initial value above this goes in parts of at most this size (when the
 * coordinator announced its message limit; docs/protocol.md, DECLARE). */
#define DECLARE_PART_MAX (8u << 20)
#define HEADROOM         (64u << 10) /* a part's header and descriptors, generously */

static sr_err declare_one(sr_client *c, const decl *d, int check_only, int *restarted);
static sr_err ready_rpc(sr_client *c, int mark, int *restarted);

/* HELLO, taking whatever incarnation answers and what it announces. */
sr_err
sr__session_hello(sr_client *c)
{
    sr_wire_hello_rep rep;
    int64_t           deadline = c->io.now_ms(c->io.arg) + c->timeout_ms;
    sr__call          w = {.kind = SR__WAIT_REPLY, .type = SR_MSG_HELLO};

    for (;;) {
        int    restarted; /* never: incarnation 0 takes any */
        sr_err rc;

        c->incarnation = 0;
        if ((rc = sr__conn_call(c, &w, &restarted)) != SR_OK) {
            return rc;
        }
        if (c->rh.status != SR_OK) {
            return sr__reply_error(c, "hello");
        }
        if (c->nrep != 1 || sr_wire_hello_rep_decode(zmq_msg_data(&c->rep[0]),
                                                     zmq_msg_size(&c->rep[0]), &rep) != SR_OK) {
            if (c->io.now_ms(c->io.arg) > deadline) {
                return sr__fail(c, SR_EPROTO, "hello: malformed reply");
            }
            continue;
        }
        c->incarnation = c->rh.incarnation;
        c->global_step = rep.global_step;
        c->model_ready = rep.model_ready;
        c->part_bytes = rep.partition_bytes;
        c->max_msg = rep.max_message_bytes;
        c->chain_ok = (c->rh.flags & SR_WIRE_F_CHAIN) != 0;
        c->many_ok = (c->rh.flags & SR_WIRE_F_MANY) != 0;
        c->cur_fetch = 1; /* issue 24: cursor: resume from the coordinator's */
        c->round_set = 0;
        return SR_OK;
    }
}

/* The coordinator restarted: handshake with the new incarnation, re-declare
 * (the chief), re-mark ready, and take the restored global step. */
sr_err
sr__session_resync(sr_client *c)
{
    sr__conn_lose_all(c); /* before HELLO, which would re-send them to the new incarnation */
    for (;;) {
        int    restarted = 0;
        sr_err rc = sr__session_hello(c);
        if (rc != SR_OK) {
            return rc;
        }
        c->stats.resyncs++;
        /* A non-chief's declarations are checked once the model is ready
         * (sr_client_ready): before that the chief's may not exist yet. */
        for (size_t i = 0;
             rc == SR_OK && !restarted && i < c->ndecls && (c->task == 0 || c->ready_done); i++) {
            rc = declare_one(c, &c->decls[i], c->ready_done || c->task != 0, &restarted);
        }
        if (rc == SR_OK && !restarted && c->ready_done && c->task == 0) {
            rc = ready_rpc(c, 1, &restarted);
        }
        if (rc == SR_OK && restarted) {
            continue; /* restarted again meanwhile */
        }
        if (rc != SR_OK && rc != SR_ENOTREADY) {
            return rc;
        }
        c->local_step = c->global_step;
        c->tainted = 1;
        sr__pull_drop_cache(c);
        return SR_OK;
    }
}

/* This client's declaration of `name`, or NULL.  A training loop pushes in
 * the same order every round: the search starts at the last one found. */
decl *
sr__decl_find(sr_client *c, const char *name)
{
    /* From the last one found: a loop that pushes or pulls the same one
     * (or the next) every round finds it at once among many. */
    for (size_t k = 0; k < c->ndecls; k++) {
        size_t i = (c->decl_next + c->ndecls - 1 + k) % c->ndecls;
        if (strcmp(c->decls[i].name, name) == 0) {
            c->decl_next = i + 1;
            return &c->decls[i];
        }
    }
    return NULL;
}

/* An initial value too big for one message, in parts of `part` bytes: each
 * a DECLARE flagged SR_WIRE_DECLARE_PART (vardesc, pushdesc, the bytes), in
 * order from byte 0; the coordinator creates the variable with the last. */
static sr_err
declare_parts(sr_client *c, const decl *d, sr__frame *vdf, size_t part, int *restarted)
{
    uint8_t   buf[SR_WIRE_BODY_MAX];
    sr__frame f[3] = {*vdf};
    sr__call  w = {.kind = SR__WAIT_REPLY, .type = SR_MSG_DECLARE, .f = f, .nf = 3};

    for (size_t off = 0; off < d->nbytes; off += part) {
        sr_wire_pushdesc p;
        size_t           len = d->nbytes - off < part ? d->nbytes - off : part;

        memset(&p, 0, sizeof(p));
        memcpy(p.name, d->name, sizeof(p.name));
        p.dtype = (uint8_t)d->dtype;
        p.count = len;
        p.offset = off;
        f[1] = (sr__frame){buf, sr_wire_pushdesc_encode(&p, buf, sizeof(buf))};
        f[2] = (sr__frame){(const uint8_t *)d->init + off, len};
        if (f[1].len == 0) {
            return sr__fail(c, SR_EINVAL, "declare %s: cannot encode", SR_ESC(d->name));
        }
        sr_err rc = sr__conn_call(c, &w, restarted);
        if (rc != SR_OK || *restarted) {
            return rc; /* a restart: resync declares it again, from byte 0 */
        }
        if (c->rh.status != SR_OK) {
            return sr__reply_error(c, "declare");
        }
    }
    return SR_OK;
}

static sr_err
declare_one(sr_client *c, const decl *d, int check_only, int *restarted)
{
    sr_wire_vardesc vd;
    uint8_t         buf[SR_WIRE_BODY_MAX];
    sr__frame       f[2];
    int             nf = 1;
    sr_err          rc;
    /* Parts only to a coordinator that announced its limit (older ones did
     * not, and do not know parts). */
    size_t part = c->max_msg > HEADROOM ? (size_t)(c->max_msg - HEADROOM) : 0;

    *restarted = 0;
    part = part < DECLARE_PART_MAX ? part : DECLARE_PART_MAX;
    memset(&vd, 0, sizeof(vd));
    memcpy(vd.name, d->name, sizeof(vd.name));
    vd.dtype = (uint8_t)d->dtype;
    vd.flags = (uint8_t)(d->flags | (check_only ? SR_WIRE_DECLARE_CHECK_ONLY : 0));
    vd.ndim = (uint8_t)d->ndim;
    memcpy(vd.shape, d->shape, sizeof(vd.shape));
    f[0].data = buf;
    f[0].len = sr_wire_vardesc_encode(&vd, buf, sizeof(buf));
    if (f[0].len == 0) {
        return sr__fail(c, SR_EINVAL, "declare %s: cannot encode", SR_ESC(d->name));
    }
    if (!check_only && d->init != NULL) {
        if (part > 0 && d->nbytes > part) {
            vd.flags |= SR_WIRE_DECLARE_PART;
            f[0].len = sr_wire_vardesc_encode(&vd, buf, sizeof(buf));
            return declare_parts(c, d, &f[0], part, restarted);
        }
        if ((rc = sr__check_size(c, "declare", d->name, f[0].len + d->nbytes)) != SR_OK) {
            return rc;
        }
        f[1].data = d->init;
        f[1].len = d->nbytes;
        nf = 2;
    }
    sr__call w = {.kind = SR__WAIT_REPLY, .type = SR_MSG_DECLARE, .f = f, .nf = nf};
    if ((rc = sr__conn_call(c, &w, restarted)) != SR_OK || *restarted) {
        return rc;
    }
    if (c->rh.status != SR_OK) {
        return sr__reply_error(c, "declare");
    }
    return SR_OK;
}

int
sr_client_declare_ex(sr_client *c, const char *name, sr_dtype dtype, int ndim, const int64_t *shape,
                     const void *initial_value, unsigned flags)
{
    uint64_t nbytes;
    decl    *d;
    sr_err   rc;
    int      restarted;

    if (c == NULL || name == NULL) {
        return sr_fail(SR_EINVAL, "sr_client_declare: NULL argument");
    }
    if (sr_name_check(name, strlen(name)) != SR_OK) {
        return sr__fail(c, SR_EINVAL, "declare \"%s\": %s", SR_ESC(name), sr_errdetail());
    }
    if (sr_shape_bytes(dtype, ndim, shape, &nbytes) != SR_OK) {
        return sr__fail(c, SR_EINVAL, "declare %s: %s", SR_ESC(name), sr_errdetail());
    }
    if (sr__decl_find(c, name) != NULL) {
        return sr__fail(c, SR_EEXIST, "declare %s: already declared by this client", SR_ESC(name));
    }
    decl *grown = sr_grow_array(c->decls, &c->cap_decls, c->ndecls + 1, sizeof(*grown));
    if (grown == NULL) {
        return sr__fail(c, SR_ENOMEM, "declare %s", SR_ESC(name));
    }
    c->decls = grown;
    d = &c->decls[c->ndecls];
    memset(d, 0, sizeof(*d));
    snprintf(d->name, sizeof(d->name), "%s", name);
    d->dtype = dtype;
    d->ndim = ndim;
    if (ndim > 0) {
        memcpy(d->shape, shape, (size_t)ndim * sizeof(*shape));
    }
    d->flags = flags & SR_DECLARE_NOT_TRAINABLE;
    d->nbytes = (size_t)nbytes;
    if (c->task == 0 && initial_value != NULL && !c->ready_done) {
        /* Kept until the model is ready, so a restarted coordinator that lost
         * an undurable declaration can be told again. */
        if ((d->init = malloc(nbytes ? (size_t)nbytes : 1)) == NULL) {
            return sr__fail(c, SR_ENOMEM, "declare %s: copy of %" PRIu64 " bytes", SR_ESC(name),
                            nbytes);
        }
        memcpy(d->init, initial_value, (size_t)nbytes);
    }
    c->ndecls++;
    if (c->task != 0 && !c->ready_done) {
        return SR_OK; /* checked by sr_client_ready, once the chief's exist */
    }
    rc = declare_one(c, d, c->task != 0, &restarted);
    if (rc == SR_OK && restarted) {
        /* resync re-declares everything, this one included */
        if ((rc = sr__session_resync(c)) == SR_OK) {
            return SR_OK;
        }
    }
    if (rc != SR_OK) {
        free(d->init);
        c->ndecls--;
        return rc;
    }
    if (c->ready_done) {
        free(d->init);
        d->init = NULL;
    }
    return SR_OK;
}

int
sr_client_declare(sr_client *c, const char *name, sr_dtype dtype, int ndim, const int64_t *shape,
                  const void *initial_value)
{
    return sr_client_declare_ex(c, name, dtype, ndim, shape, initial_value, 0);
}

/* READY: mark (the chief) or ask; the reply's model_ready and global step. */
static sr_err
ready_rpc(sr_client *c, int mark, int *restarted)
{
    sr_wire_ready_req q = {(uint8_t)mark};
    sr_wire_ping_rep  rep;
    uint8_t           buf[8];
    sr__frame         f = {buf, sr_wire_ready_req_encode(&q, buf, sizeof(buf))};
    sr__call          w = {.kind = SR__WAIT_REPLY, .type = SR_MSG_READY, .f = &f, .nf = 1};
    sr_err            rc = sr__conn_call(c, &w, restarted);

    if (rc != SR_OK || *restarted) {
        return rc;
    }
    if (c->rh.status != SR_OK) {
        return sr__reply_error(c, "ready");
    }
    if (c->nrep != 1 || sr_wire_ping_rep_decode(zmq_msg_data(&c->rep[0]), zmq_msg_size(&c->rep[0]),
                                                &rep) != SR_OK) {
        return sr__fail(c, SR_EPROTO, "ready: malformed reply");
    }
    c->model_ready = rep.model_ready;
    c->global_step = rep.global_step;
    return SR_OK;
}

int
sr_client_ready(sr_client *c)
{
    int restarted;

    if (c == NULL) {
        return sr_fail(SR_EINVAL, "sr_client_ready: NULL client");
    }
    int64_t started = c->io.now_ms(c->io.arg); /* issue 22: one line after 5 s */
    int     said = 0;
    for (;;) {
        sr_err rc = ready_rpc(c, c->task == 0, &restarted);
        if (rc == SR_OK && restarted) {
            if ((rc = sr__session_resync(c)) != SR_OK) {
                return rc;
            }
            continue;
        }
        if (rc != SR_OK) {
            return rc;
        }
        if (c->model_ready) {
            break;
        }
        /* Others wait for the chief, as long as the coordinator answers. */
        int64_t waited = c->io.now_ms(c->io.arg) - started;
        if (!said && waited >= 5000) {
            said = 1;
            if (!sr__conn_quiet()) {
                SR_LOG(SR_LOG_WARN, "WORKER-WAIT",
                       "task=%d endpoint=%s waited_s=%" PRId64 " waiting for the chief (task 0) "
                       "to declare the model and mark it ready: the coordinator answers, the "
                       "model is not ready (SYNCREP_QUIET=1 silences this)",
                       c->task, c->endpoint, waited / 1000);
            }
        }
        c->io.sleep_ms(c->io.arg, 20);
    }
    /* Declarations of non-chief workers are checked now that the chief's
     * exist. */
    for (size_t i = 0; c->task != 0 && i < c->ndecls; i++) {
        sr_err rc = declare_one(c, &c->decls[i], 1, &restarted);
        if (rc == SR_OK && restarted) {
            return sr_client_ready(c);
        }
        if (rc != SR_OK) {
            return rc;
        }
    }
    c->ready_done = 1;
    c->tainted = 0;
    c->local_step = c->global_step;
    for (size_t i = 0; i < c->ndecls; i++) {
        free(c->decls[i].init);
        c->decls[i].init = NULL;
    }
    return SR_OK;
}

int
sr_client_finish(sr_client *c)
{
    sr__call w = {.kind = SR__WAIT_REPLY, .type = SR_MSG_FINISH};
    int      restarted;

    if (c == NULL) {
        return sr_fail(SR_EINVAL, "sr_client_finish: NULL client");
    }
    for (;;) {
        sr_err rc = sr__conn_call(c, &w, &restarted);
        if (rc == SR_OK && restarted) {
            if ((rc = sr__session_resync(c)) != SR_OK) {
                return rc;
            }
            continue; /* finish against the new incarnation */
        }
        if (rc != SR_OK) {
            return rc;
        }
        return c->rh.status != SR_OK ? sr__reply_error(c, "finish") : SR_OK;
    }
}
