/*
 * libsyncrep's client: one DEALER socket to the coordinator, synchronous
 * request/reply with resends, and transparent resynchronisation when the
 * coordinator restarts (a reply carries a new incarnation).
 *
 * Client lifecycle:
 *
 *   open --HELLO--> CONNECTED --declare, ready--> TRAINING (pull/push/step)
 *                        ^                              |
 *                        +--- resync (new incarnation) -+
 *
 *  transition                 function
 *  open -> CONNECTED          sr_client_open -> hello
 *  CONNECTED -> TRAINING      sr_client_ready
 *  any -> resync -> same      resync(): HELLO, the chief re-declares (check only
 *                             once the model is ready) and re-marks ready,
 *                             local step := the restored global step
 *
 * Exactly once: every push carries (client_id, seq); a resend reuses both,
 * and the coordinator answers DUPLICATE for a seq it has already counted.
 * A TOKEN request is re-sent with the same request id while waiting (the
 * coordinator answers a re-sent, already answered id with the same token),
 * and PINGs prove the coordinator is alive while the step waits.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "core/clock.h"
#include "core/dtype.h"
#include "core/mem.h"
#include "core/name.h"
#include "core/text.h"
#include "syncrep/syncrep.h"
#include "wire/wire.h"

#define DEFAULT_TIMEOUT_MS 60000
#define MAX_REPLY_FRAMES   (2 + 2 * 65536) /* a TOKEN reply carrying every variable */
#define RESTARTED          1               /* internal: the coordinator's incarnation changed */
#define DECLARE_CHECK_ONLY SR_WIRE_DECLARE_CHECK_ONLY
/* Pipelined pushes (see push_pipelined): each at most PIPE_PUSH_MAX bytes,
 * at most PIPE_MAX_BYTES / PIPE_MAX_COUNT of them unacknowledged (the
 * copies kept for resends; a model of many mid-size variables fits whole, so
 * a worker does not stop for answers in the middle of its pushes: 4 MiB
 * cost 200 x 50 KiB a quarter of its steps, docs/performance-history.md).
 * The partitions of a partitioned push: at most two partitions' bytes. */
#define PIPE_PUSH_MAX  (1u << 20)
#define PIPE_MAX_BYTES (16u << 20)
#define PIPE_MAX_COUNT 256 /* well under the DEALER's send HWM (1000): never blocks */
/* An initial value above this goes in parts of at most this size (when the
 * coordinator announced its message limit; docs/protocol.md, DECLARE). */
#define DECLARE_PART_MAX (8u << 20)
#define HEADROOM         (64u << 10) /* a part's header and descriptors, generously */
/* Pipelined pushes held back to leave in one message (a chain) with the next
 * request (sr_client_push_many, sr_client_push_step): with it (at most four
 * frames), at most the coordinator's 32 frames a message (docs/protocol.md,
 * Chains). */
#define CHAIN_HELD_MAX 9
/* sr_client_pull_many: at most this many pulls (this many bytes of values)
 * unanswered; a bigger variable goes alone. */
#define PULL_WINDOW       192
#define PULL_WINDOW_BYTES (8u << 20)
/* While a call waits for an answer (not a token: those PING every second
 * anyway), a PING this often. */
#define PING_EVERY_MS 2000

/* One pull of a sr_client_pull_many. */
typedef struct {
    uint64_t req;   /* its request id, while in flight */
    uint8_t  state; /* PULL_TO_SEND, PULL_IN_FLIGHT, PULL_DONE */
} pull_item;

/* The pulls of one sr_client_pull_many, while rpc takes their answers. */
typedef struct pull_batch {
    size_t             n;
    const char *const *names;
    void *const       *dsts;
    const size_t      *sizes;
    pull_item         *item;
    size_t             next;                           /* items before it are sent or done */
    size_t             first;                          /* items before it are done */
    size_t             inflight, inflight_bytes, left; /* bytes: of the values in flight */
    int                rc;                             /* the first refusal: sends no more */
} pull_batch;

enum { PULL_TO_SEND, PULL_IN_FLIGHT, PULL_DONE };

typedef struct decl {
    char     name[SR_WIRE_MAX_NAME + 1];
    int      dtype;
    int      ndim;
    int64_t  shape[SR_MAX_NDIM];
    unsigned flags;
    void    *init; /* chief, until the model is ready */
    size_t   nbytes;
} decl;

struct sr_client {
    void    *ctx, *sock;
    void    *mon; /* PAIR reading the DEALER's connect events */
    char    *endpoint;
    int      task;
    int      timeout_ms;
    uint64_t client_id;
    uint64_t next_req;
    uint64_t seq;
    uint64_t incarnation;
    int64_t  local_step;
    int64_t  global_step;
    int      model_ready;
    int      ready_done; /* sr_client_ready succeeded */
    int      tainted;    /* resynced mid-round: this round's pulls may mix
                            incarnations, so its pushes are dropped (stale)
                            until the next sr_client_step */
    decl          *decls;
    size_t         ndecls, cap_decls;
    size_t         decl_next; /* where find_decl looks first */
    sr_wire_header rh;        /* the last reply */
    zmq_msg_t     *rep;       /* the last reply's body frames */
    int            nrep, cap_rep;
    uint16_t       req_flags; /* extra header flags for the next rpc */
    /* Variables that came with the last token (SR_WIRE_F_WANT_VARS): pulls
     * until the next step are served from here. */
    struct cached {
        char      name[SR_WIRE_MAX_NAME + 1];
        zmq_msg_t value;
    } * cache;
    int     ncache, cap_cache;
    int64_t cache_step; /* the global step of the cached values */
    int     cache_next; /* where the next pull's name is looked for first */
    int     pulled;     /* pulls since the last step: ask for the variables */
    /* Pushes sent and not yet acknowledged, in send order: each owns a copy
     * of its descriptor and gradient (for resends); entries past npend keep
     * their buffers for reuse. */
    struct pend {
        uint64_t       req, seq;
        int64_t        local_step;
        char           name[SR_WIRE_MAX_NAME + 1];
        uint8_t       *buf; /* descriptor, then (unless ext) the gradient */
        size_t         desc_len, data_len, cap;
        const uint8_t *ext; /* the caller's gradient, valid during its call */
    } * *pend;              /* pointers: an answer's removal moves pointers, not entries */
    int             npend, cap_pend;
    size_t          pend_bytes;
    size_t          room_need, room_budget; /* rpc type 0 waits until this fits */
    int             npend_ext;              /* unanswered pushes sent from a caller's buffer */
    int             wait_ext;               /* rpc type 0: ... or until npend_ext is 0 */
    uint64_t        part_bytes;             /* the coordinator's partition size (HELLO) */
    uint64_t        max_msg;     /* the largest request it accepts (HELLO; 0: not announced) */
    int             connects;    /* CONNECTED events seen */
    int             deferred_rc; /* a pipelined push's refusal, reported by the next step */
    char            deferred_err[1024];
    sr_client_stats stats;
    char            err[1024];
    /* Chains (docs/protocol.md): the coordinator takes them (HELLO);
     * sr_client_push_step holds its push back, unsent, for the TOKEN
     * request, which it then precedes in one message; replies after a
     * chained answer are still to be read from the current message. */
    int chain_ok;
    int many_ok;   /* the coordinator takes pulls of many variables (HELLO) */
    int hold_next; /* inside sr_client_push_step, to a coordinator taking chains */
    int hold_many; /* inside sr_client_push_many, to a coordinator taking chains */
    int held;      /* the last `held` pushes of pend are not sent yet: the next request
                      takes them along (send_request), or they go alone (send_held) */
    int         chain_more;
    pull_batch *batch;       /* inside sr_client_pull_many */
    pull_item  *batch_items; /* kept for the next call */
    size_t      cap_batch;
};

typedef struct {
    const void *data;
    size_t      len;
} frame;

/* ---- errors ------------------------------------------------------------- */

static int fail(sr_client *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int
fail(sr_client *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof(c->err), fmt, ap);
    va_end(ap);
    sr_fail(code, "%s", c->err);
    return code;
}

/* The error reply's text (frame 1), or the code's text. */
static int
reply_error(sr_client *c, const char *what)
{
    int code = c->rh.status;
    if (c->nrep >= 1 && zmq_msg_size(&c->rep[0]) > 0) {
        const char *text = zmq_msg_data(&c->rep[0]);
        size_t      n = zmq_msg_size(&c->rep[0]), wl = strlen(what);
        /* The coordinator's text often names the operation already. */
        int named = n > wl && memcmp(text, what, wl) == 0 && text[wl] == ':';
        return fail(c, code, "%s%s%.*s", named ? "" : what, named ? "" : ": ", (int)n, text);
    }
    return fail(c, code, "%s: %s", what, sr_strerror(code));
}

/* ---- transport ---------------------------------------------------------- */

static void
drop_reply(sr_client *c)
{
    for (int i = 0; i < c->nrep; i++) {
        zmq_msg_close(&c->rep[i]);
    }
    c->nrep = 0;
}

static void
drop_cache(sr_client *c)
{
    for (int i = 0; i < c->ncache; i++) {
        zmq_msg_close(&c->cache[i].value);
    }
    c->ncache = 0;
}

/* Keep the variables a TOKEN reply carried (vars header, then pairs of
 * descriptor and value); anything malformed is ignored (pulls then ask). */
static void
take_cache(sr_client *c)
{
    sr_wire_vars_hdr vh;

    drop_cache(c);
    if (c->nrep < 1 ||
        sr_wire_vars_hdr_decode(zmq_msg_data(&c->rep[0]), zmq_msg_size(&c->rep[0]), &vh) != SR_OK ||
        (int64_t)c->nrep != 1 + 2 * (int64_t)vh.nvars) {
        return;
    }
    if (c->cap_cache < (int)vh.nvars) {
        struct cached *p = realloc(c->cache, vh.nvars * sizeof(*p));
        if (p == NULL) {
            return;
        }
        c->cache = p;
        c->cap_cache = (int)vh.nvars;
    }
    for (uint32_t i = 0; i < vh.nvars; i++) {
        sr_wire_vardesc d;
        if (sr_wire_vardesc_decode(zmq_msg_data(&c->rep[1 + 2 * i]),
                                   zmq_msg_size(&c->rep[1 + 2 * i]), &d) != SR_OK) {
            drop_cache(c);
            return;
        }
        memcpy(c->cache[c->ncache].name, d.name, sizeof(d.name));
        zmq_msg_init(&c->cache[c->ncache].value);
        zmq_msg_move(&c->cache[c->ncache].value, &c->rep[2 + 2 * i]);
        c->ncache++;
    }
    c->cache_step = vh.global_step;
}

/* One request's frames; more: another request follows in this message. */
static int
send_frames(sr_client *c, int type, uint64_t req_id, uint16_t flags, uint64_t incarnation,
            int64_t local_step, uint64_t seq, const frame *f, int nf, int more, int dw)
{
    sr_wire_header h;
    uint8_t        hb[SR_WIRE_HEADER_BYTES];

    memset(&h, 0, sizeof(h));
    h.type = (uint8_t)type;
    h.flags = flags;
    h.request_id = req_id;
    h.incarnation = incarnation;
    h.client_id = c->client_id;
    h.task_index = c->task;
    h.local_step = local_step;
    h.seq = seq;
    sr_wire_header_encode(&h, hb);
    if (zmq_send(c->sock, hb, sizeof(hb), (nf || more ? ZMQ_SNDMORE : 0) | dw) < 0) {
        return -1;
    }
    for (int i = 0; i < nf; i++) {
        if (zmq_send(c->sock, f[i].data, f[i].len, i + 1 < nf || more ? ZMQ_SNDMORE : 0) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Resends, PINGs and BYE are extras: when the queue to the coordinator is
 * full (it is busy or gone) they are skipped rather than waited for
 * (ZeroMQ takes the rest of a message whose first frame it took). */
static int
extra_flags(int type, uint16_t flags)
{
    return (flags & SR_WIRE_F_RESEND) || type == SR_MSG_PING || type == SR_MSG_BYE ? ZMQ_DONTWAIT
                                                                                   : 0;
}

static int
send_msg(sr_client *c, int type, uint64_t req_id, uint16_t flags, uint64_t incarnation,
         int64_t local_step, uint64_t seq, const frame *f, int nf)
{
    return send_frames(c, type, req_id, flags, incarnation, local_step, seq, f, nf, 0,
                       extra_flags(type, flags));
}

/* A push's frames: its descriptor, and its gradient (copied, or the
 * caller's). */
static void
pend_frames(const struct pend *p, frame f[2])
{
    f[0] = (frame){p->buf, p->desc_len};
    f[1] = (frame){p->ext ? p->ext : p->buf + p->desc_len, p->data_len};
}

/* Send the held-back pushes in one message, each flagged SR_WIRE_F_CHAIN
 * but (alone) the last; not alone, a request follows (send_request).  dw:
 * the first frame's ZMQ_DONTWAIT (ZeroMQ takes the rest of a message whose
 * first frame it took).  Unsent on failure, they are re-sent later. */
static int
send_held(sr_client *c, int alone, int dw)
{
    int first = c->npend - c->held;

    c->held = 0;
    for (int i = first; i < c->npend; i++) {
        const struct pend *p = c->pend[i];
        int                end = alone && i == c->npend - 1;
        frame              pf[2];
        pend_frames(p, pf);
        if (send_frames(c, SR_MSG_PUSH, p->req, end ? 0 : SR_WIRE_F_CHAIN, c->incarnation,
                        p->local_step, p->seq, pf, 2, !end, i == first ? dw : 0) != 0) {
            return -1;
        }
    }
    return 0;
}

/* A new request, behind the held-back pushes if there are some: all in one
 * message, the pushes flagged SR_WIRE_F_CHAIN. */
static int
send_request(sr_client *c, int type, uint64_t req_id, uint16_t flags, int64_t local_step,
             uint64_t seq, const frame *f, int nf)
{
    if (c->held > 0 && send_held(c, 0, extra_flags(type, flags)) != 0) {
        return -1;
    }
    return send_msg(c, type, req_id, flags, c->incarnation, local_step, seq, f, nf);
}

/* Receive one message into c->rep / c->rh.  Returns 0, or -1 if it was not a
 * well-formed reply (discarded). */
static int
recv_msg(sr_client *c)
{
    zmq_msg_t hm;
    int       more, ok, chained;

    drop_reply(c);
    zmq_msg_init(&hm);
    if (zmq_msg_recv(&hm, c->sock, 0) < 0) {
        zmq_msg_close(&hm);
        return -1;
    }
    ok = sr_wire_header_decode(zmq_msg_data(&hm), zmq_msg_size(&hm), &c->rh) == SR_OK &&
         (c->rh.type & SR_WIRE_REPLY);
    /* A chained push answer has one body frame; the next reply follows it.
     * (On a HELLO reply the flag means the coordinator takes chains.) */
    chained =
        ok && c->rh.type == (SR_MSG_PUSH | SR_WIRE_REPLY) && (c->rh.flags & SR_WIRE_F_CHAIN) != 0;
    more = zmq_msg_more(&hm);
    zmq_msg_close(&hm);
    c->chain_more = 0;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, c->sock, 0) < 0) {
            zmq_msg_close(&m);
            return -1;
        }
        more = zmq_msg_more(&m);
        if (c->nrep == c->cap_rep && c->cap_rep < MAX_REPLY_FRAMES) {
            int        nc = c->cap_rep ? c->cap_rep * 2 : 8;
            zmq_msg_t *p = realloc(c->rep, (size_t)nc * sizeof(*p));
            if (p != NULL) {
                c->rep = p;
                c->cap_rep = nc;
            }
        }
        if (c->nrep < c->cap_rep) {
            c->rep[c->nrep++] = m;
        } else {
            zmq_msg_close(&m);
            ok = 0;
        }
        if (chained) {
            c->chain_more = more;
            break;
        }
    }
    return ok ? 0 : -1;
}

/* Drain the monitor; 1 if the DEALER reconnected.  The first connection
 * is not one: what was sent before it waited in ZeroMQ's queue and goes out
 * on it. */
static int
reconnected(sr_client *c)
{
    int connected = 0;
    for (;;) {
        zmq_msg_t ev, addr;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, c->mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return connected;
        }
        if (zmq_msg_size(&ev) >= 2) {
            const uint8_t *e = zmq_msg_data(&ev);
            if ((uint16_t)(e[0] | e[1] << 8) == ZMQ_EVENT_CONNECTED) {
                connected |= c->connects++ > 0;
            }
        }
        int more = zmq_msg_more(&ev);
        zmq_msg_close(&ev);
        if (more) {
            zmq_msg_init(&addr);
            zmq_msg_recv(&addr, c->mon, 0);
            zmq_msg_close(&addr);
        }
    }
}

/* ---- pipelined pushes --------------------------------------------------- */

static void
count_outcome(sr_client *c, int outcome)
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

static void
pend_remove(sr_client *c, int i)
{
    struct pend *gone = c->pend[i];

    if (i >= c->npend - c->held) {
        c->held--;
    }
    memmove(&c->pend[i], &c->pend[i + 1], (size_t)(c->npend - i - 1) * sizeof(gone));
    c->npend--;
    c->npend_ext -= gone->ext != NULL;
    gone->ext = NULL;
    c->pend[c->npend] = gone; /* keeps its buffer for the next push */
    c->pend_bytes -= gone->desc_len + gone->data_len;
}

static int
pend_send(sr_client *c, const struct pend *p, uint16_t flags)
{
    frame f[2];
    pend_frames(p, f);
    return send_msg(c, SR_MSG_PUSH, p->req, flags, c->incarnation, p->local_step, p->seq, f, 2);
}

/* If the reply in c->rh answers a pipelined push, account for it and return
 * 1.  A refusal is kept for the next sr_client_step to report. */
static int
pend_reply(sr_client *c)
{
    sr_wire_push_rep rep;

    if ((c->rh.type & ~SR_WIRE_REPLY) != SR_MSG_PUSH) {
        return 0;
    }
    for (int i = 0; i < c->npend; i++) {
        if (c->pend[i]->req != c->rh.request_id) {
            continue;
        }
        if (c->rh.status == SR_OK && c->nrep == 1 &&
            sr_wire_push_rep_decode(zmq_msg_data(&c->rep[0]), zmq_msg_size(&c->rep[0]), &rep) ==
                SR_OK) {
            count_outcome(c, rep.outcome);
        } else if (c->deferred_rc == 0) {
            char what[SR_TEXT_ESC_CAP + 8];
            snprintf(what, sizeof(what), "push %s", SR_ESC(c->pend[i]->name));
            c->deferred_rc = c->rh.status != SR_OK
                                 ? reply_error(c, what)
                                 : fail(c, SR_EPROTO, "%s: malformed reply", what);
            snprintf(c->deferred_err, sizeof(c->deferred_err), "%s", c->err);
        }
        pend_remove(c, i);
        return 1;
    }
    return 0;
}

/* Pushes the old incarnation will never answer: dropped like any stale
 * gradient (they were computed for it). */
static void
pend_drop(sr_client *c)
{
    while (c->npend > 0) {
        count_outcome(c, SR_PUSH_STALE);
        pend_remove(c, c->npend - 1);
    }
}

/* Whether room_need more bytes fit among the unanswered pushes. */
static int
room_ok(const sr_client *c)
{
    if (c->wait_ext) {
        return c->npend_ext == 0;
    }
    return c->npend == 0 || (c->npend < PIPE_MAX_COUNT && c->room_need <= c->room_budget &&
                             c->pend_bytes <= c->room_budget - c->room_need);
}

/* ---- pulls in flight (sr_client_pull_many) ------------------------------ */

/* The first resend of a request whose request and expected answer hold
 * `bytes`: after a second for small ones; a big one may be on its way for a
 * while, and a resent PULL is answered again, value and all: after 5 s, or
 * the time it takes at 100 MB/s. */
static int64_t
resend_after_ms(size_t bytes)
{
    if (bytes <= (1u << 20)) {
        return 1000;
    }
    return bytes / 100000 > 5000 ? (int64_t)(bytes / 100000) : 5000;
}

/* Whether item i may join the pulls in flight (always when none are). */
static int
batch_room(const pull_batch *b, size_t i)
{
    return b->inflight == 0 ||
           (b->inflight < PULL_WINDOW && b->inflight_bytes <= PULL_WINDOW_BYTES &&
            b->sizes[i] <= PULL_WINDOW_BYTES - b->inflight_bytes);
}

/* Send one PULL for the items in flight under request id `req` (a resend),
 * or for the next items to send (req 0): several names in one request when
 * the coordinator takes them (SR_WIRE_F_MANY), as many as fit the window. */
static int
batch_send(sr_client *c, pull_batch *b, uint64_t req)
{
    uint8_t  buf[SR_WIRE_PULL_MANY_MAX][SR_WIRE_BODY_MAX];
    frame    f[SR_WIRE_PULL_MANY_MAX];
    size_t   idx[SR_WIRE_PULL_MANY_MAX];
    int      nf = 0, most = c->many_ok ? SR_WIRE_PULL_MANY_MAX : 1;
    uint16_t flags = req != 0 ? SR_WIRE_F_RESEND : 0;

    for (size_t i = req != 0 ? b->first : b->next; i < b->n && nf < most; i++) {
        if (req != 0 ? b->item[i].state != PULL_IN_FLIGHT || b->item[i].req != req
                     : b->item[i].state != PULL_TO_SEND) {
            if (req != 0 && i >= b->next) {
                break;
            }
            continue;
        }
        if (req == 0 && !batch_room(b, i)) {
            break;
        }
        f[nf] = (frame){buf[nf], sr_wire_name_encode(b->names[i], buf[nf], sizeof(buf[nf]))};
        idx[nf++] = i;
        if (req == 0) {
            b->item[i].state = PULL_IN_FLIGHT;
            b->inflight++;
            b->inflight_bytes += b->sizes[i];
            b->next = i + 1;
        }
    }
    if (nf == 0) {
        return 0;
    }
    if (nf > 1) {
        flags |= SR_WIRE_F_MANY;
    }
    if (req != 0) {
        return send_msg(c, SR_MSG_PULL, req, flags, c->incarnation, 0, 0, f, nf);
    }
    req = ++c->next_req;
    for (int k = 0; k < nf; k++) {
        b->item[idx[k]].req = req;
    }
    /* Pushes held back go first, alone: with many names there is no room for them. */
    if (nf > 1 && c->held > 0 && send_held(c, 1, 0) != 0) {
        return -1;
    }
    return send_request(c, SR_MSG_PULL, req, flags, 0, 0, f, nf);
}

/* Send pulls while the window has room. */
static void
batch_fill(sr_client *c, pull_batch *b)
{
    while (b->rc == SR_OK && b->next < b->n) {
        if (b->item[b->next].state != PULL_TO_SEND) {
            b->next++;
            continue;
        }
        if (!batch_room(b, b->next)) {
            return;
        }
        if (batch_send(c, b, 0) != 0) {
            b->rc = fail(c, SR_EMSG, "send PULL: %s", zmq_strerror(errno));
            return;
        }
    }
}

/* The answers a restart lost: those pulls go again. */
static void
batch_rewind(pull_batch *b)
{
    for (size_t i = b->first; i < b->next; i++) {
        if (b->item[i].state == PULL_IN_FLIGHT) {
            b->item[i].state = PULL_TO_SEND;
        }
    }
    b->next = b->first;
    b->inflight = 0;
    b->inflight_bytes = 0;
}

static int pull_value(sr_client *c, const char *name, void *dst, size_t dst_bytes,
                      const zmq_msg_t *desc, const zmq_msg_t *value, int named);

/* The reply in c->rh answers the pulls of request id `req` (n items, from
 * item i on): copy the values out, or return the refusal. */
static int
batch_answer(sr_client *c, pull_batch *b, size_t i, size_t n)
{
    sr_wire_vars_hdr vh;
    int              rc = SR_OK;

    if (c->rh.status != SR_OK) {
        return reply_error(c, "pull");
    }
    if (n == 1) {
        return c->nrep != 2
                   ? fail(c, SR_EPROTO, "pull %s: malformed reply", SR_ESC(b->names[i]))
                   : pull_value(c, b->names[i], b->dsts[i], b->sizes[i], &c->rep[0], &c->rep[1], 0);
    }
    if (c->nrep < 1 ||
        sr_wire_vars_hdr_decode(zmq_msg_data(&c->rep[0]), zmq_msg_size(&c->rep[0]), &vh) != SR_OK ||
        vh.nvars != n || (size_t)c->nrep != 1 + 2 * n) {
        return fail(c, SR_EPROTO, "pull %s...: malformed reply", SR_ESC(b->names[i]));
    }
    for (size_t k = 0; rc == SR_OK && k < n; i++) {
        if (b->item[i].req == c->rh.request_id) {
            rc = pull_value(c, b->names[i], b->dsts[i], b->sizes[i], &c->rep[1 + 2 * k],
                            &c->rep[2 + 2 * k], 1);
            k++;
        }
    }
    return rc;
}

/* If the reply in c->rh answers pulls in flight, copy the values out (or
 * keep the refusal), send the next ones, and return 1. */
static int
batch_reply(sr_client *c)
{
    pull_batch *b = c->batch;
    size_t      i, n = 0;

    if (b == NULL || c->rh.type != (SR_MSG_PULL | SR_WIRE_REPLY)) {
        return 0;
    }
    for (i = b->first; i < b->next; i++) {
        if (b->item[i].state == PULL_IN_FLIGHT && b->item[i].req == c->rh.request_id) {
            break;
        }
    }
    if (i == b->next) {
        return 0; /* a late answer to a resend */
    }
    for (size_t k = i; k < b->next; k++) {
        n += b->item[k].state == PULL_IN_FLIGHT && b->item[k].req == c->rh.request_id;
    }
    int rc = batch_answer(c, b, i, n);
    if (rc != SR_OK && b->rc == SR_OK) {
        b->rc = rc;
    }
    for (size_t k = i; k < b->next; k++) {
        if (b->item[k].state == PULL_IN_FLIGHT && b->item[k].req == c->rh.request_id) {
            b->item[k].state = PULL_DONE;
            b->inflight--;
            b->inflight_bytes -= b->sizes[k];
            b->left--;
        }
    }
    while (b->first < b->next && b->item[b->first].state == PULL_DONE) {
        b->first++;
    }
    batch_fill(c, b);
    return 1;
}

/* Each request in flight again, with its request id. */
static void
batch_resend(sr_client *c, pull_batch *b)
{
    uint64_t last = 0;
    for (size_t i = b->first; i < b->next; i++) {
        if (b->item[i].state == PULL_IN_FLIGHT && b->item[i].req > last) {
            last = b->item[i].req; /* request ids grow with the items */
            if (batch_send(c, b, last) == 0) {
                c->stats.resends++;
            }
        }
    }
}

/* What an rpc without a request (type 0) waits for: room among the pipelined
 * pushes, or the end of the pulls in flight. */
static int
wait_over(const sr_client *c)
{
    if (c->batch != NULL) {
        return c->batch->left == 0 || c->batch->rc != SR_OK;
    }
    return room_ok(c);
}

/* Request/reply.  mode_token: the request is a TOKEN: re-send it every
 * second with the same id and PING alongside, waiting as long as the
 * coordinator answers pings.  type 0: no request, wait until enough
 * pipelined pushes are answered (room_ok), or the pulls in flight are
 * (c->batch).  Replies to pipelined pushes and pulls in flight are taken on
 * the way; pipelined pushes are re-sent (before the request) whenever it is.
 * Returns SR_OK (reply in c->rh / c->rep; its status may be an error),
 * RESTARTED, or SR_ETIMEDOUT / SR_EMSG. */
static int
rpc(sr_client *c, int type, int64_t local_step, uint64_t seq, const frame *f, int nf,
    int mode_token)
{
    uint64_t req = type != 0 ? ++c->next_req : 0;
    uint64_t ping_id = 0;
    size_t   bytes = c->pend_bytes + (c->batch != NULL ? c->batch->inflight_bytes : 0);
    int64_t  now = sr_clock_now_ms();
    int64_t  last_contact = now;
    int64_t  interval, next_resend, next_ping = now + PING_EVERY_MS;

    for (int i = 0; i < nf; i++) {
        bytes += f[i].len;
    }
    interval = mode_token ? 1000 : resend_after_ms(bytes);
    next_resend = now + interval;
    if (type == 0 && wait_over(c)) {
        return SR_OK;
    }
    /* Held pushes are waited for: they go now, alone. */
    if (type == 0 && c->held > 0 && send_held(c, 1, 0) != 0) {
        return fail(c, SR_EMSG, "send PUSH: %s", zmq_strerror(errno));
    }
    if (type != 0 && send_request(c, type, req, c->req_flags, local_step, seq, f, nf) != 0) {
        return fail(c, SR_EMSG, "send %s: %s", sr_wire_type_name(type), zmq_strerror(errno));
    }
    for (;;) {
        zmq_pollitem_t it[2] = {{c->sock, 0, ZMQ_POLLIN, 0}, {c->mon, 0, ZMQ_POLLIN, 0}};
        now = sr_clock_now_ms();
        int64_t wait = (mode_token || next_resend < next_ping ? next_resend : next_ping) - now;
        int     rc = 1;

        if (c->chain_more) {
            it[0].revents = ZMQ_POLLIN; /* the rest of the message just read */
        } else {
            rc = zmq_poll(it, c->mon ? 2 : 1, wait > 0 ? (long)wait : 0);
        }

        if (rc < 0 && errno != EINTR) {
            return fail(c, SR_EMSG, "poll: %s", zmq_strerror(errno));
        }
        if (rc > 0 && c->mon != NULL && (it[1].revents & ZMQ_POLLIN) && reconnected(c)) {
            /* A new connection (a restarted coordinator, most likely): what
             * was in flight on the old one is lost, so send it again now
             * rather than at the resend timer (pushes are deduplicated). */
            next_resend = sr_clock_now_ms();
            continue;
        }
        if (rc > 0 && (it[0].revents & ZMQ_POLLIN)) {
            if (recv_msg(c) != 0) {
                continue;
            }
            last_contact = sr_clock_now_ms();
            if (c->incarnation != 0 && c->rh.incarnation != c->incarnation) {
                return RESTARTED;
            }
            if (type != 0 && c->rh.request_id == req) {
                return SR_OK;
            }
            if (pend_reply(c) || batch_reply(c)) {
                if (type == 0 && wait_over(c)) {
                    return SR_OK;
                }
                continue;
            }
            if (ping_id != 0 && c->rh.request_id == ping_id &&
                (c->rh.type & ~SR_WIRE_REPLY) == SR_MSG_PING) {
                c->global_step = c->rh.local_step;
            }
            continue; /* a late reply to an earlier request */
        }
        now = sr_clock_now_ms();
        if (!mode_token && c->incarnation != 0 && now >= next_ping) {
            /* A long wait (a big value on its way, a busy coordinator): the
             * coordinator hears from this client all the same (it reports a
             * client it has not heard from for 10 s as gone).  Not before
             * HELLO is answered. */
            ping_id = ++c->next_req;
            send_msg(c, SR_MSG_PING, ping_id, 0, c->incarnation, 0, 0, NULL, 0);
            next_ping = now + PING_EVERY_MS;
        }
        if (now - last_contact >= c->timeout_ms) {
            return fail(c, SR_ETIMEDOUT, "%s: no answer from %s for %d ms",
                        type != 0  ? sr_wire_type_name(type)
                        : c->batch ? "PULL"
                                   : "push",
                        c->endpoint, c->timeout_ms);
        }
        if (now >= next_resend) {
            c->held = 0; /* all of them go now */
            for (int i = 0; i < c->npend; i++) {
                if (pend_send(c, c->pend[i], SR_WIRE_F_RESEND) == 0) {
                    c->stats.resends++;
                }
            }
            if (c->batch != NULL) {
                batch_resend(c, c->batch);
            }
            if (type != 0 && send_msg(c, type, req, (uint16_t)(SR_WIRE_F_RESEND | c->req_flags),
                                      c->incarnation, local_step, seq, f, nf) == 0) {
                if (!mode_token) {
                    c->stats.resends++;
                }
            }
            if (mode_token) {
                ping_id = ++c->next_req;
                send_msg(c, SR_MSG_PING, ping_id, 0, c->incarnation, 0, 0, NULL, 0);
            } else if (interval < 16000) {
                interval *= 2;
            }
            next_resend = now + interval;
        }
    }
}

/* ---- handshake and resync ----------------------------------------------- */

static int
hello(sr_client *c)
{
    sr_wire_hello_rep rep;
    int64_t           deadline = sr_clock_now_ms() + c->timeout_ms;

    for (;;) {
        c->incarnation = 0; /* accept whatever incarnation answers */
        int rc = rpc(c, SR_MSG_HELLO, 0, 0, NULL, 0, 0);
        if (rc < 0) {
            return rc;
        }
        if (c->rh.status != SR_OK) {
            return reply_error(c, "hello");
        }
        if (c->nrep != 1 || sr_wire_hello_rep_decode(zmq_msg_data(&c->rep[0]),
                                                     zmq_msg_size(&c->rep[0]), &rep) != SR_OK) {
            if (sr_clock_now_ms() > deadline) {
                return fail(c, SR_EPROTO, "hello: malformed reply");
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
        return SR_OK;
    }
}

static int declare_one(sr_client *c, const decl *d, int check_only);
static int ready_rpc(sr_client *c, int mark);

/* The coordinator restarted: handshake with the new incarnation, re-declare
 * (the chief), re-mark ready, and take the restored global step. */
static int
resync(sr_client *c)
{
    pend_drop(c); /* before HELLO, which would re-send them to the new incarnation */
    for (int attempt = 0;; attempt++) {
        int rc = hello(c);
        if (rc < 0) {
            return rc;
        }
        c->stats.resyncs++;
        rc = SR_OK;
        /* A non-chief's declarations are checked once the model is ready
         * (sr_client_ready): before that the chief's may not exist yet. */
        for (size_t i = 0; rc == SR_OK && i < c->ndecls && (c->task == 0 || c->ready_done); i++) {
            rc = declare_one(c, &c->decls[i], c->ready_done || c->task != 0);
        }
        if (rc == SR_OK && c->ready_done && c->task == 0) {
            rc = ready_rpc(c, 1);
        }
        if (rc == RESTARTED) {
            continue; /* restarted again meanwhile */
        }
        if (rc < 0 && rc != SR_ENOTREADY) {
            return rc;
        }
        c->local_step = c->global_step;
        c->tainted = 1;
        drop_cache(c);
        return SR_OK;
    }
}

/* ---- API ---------------------------------------------------------------- */

/* This client's declaration of `name`, or NULL.  A training loop pushes in
 * the same order every round: the search starts after the last one found. */
static decl *
find_decl(sr_client *c, const char *name)
{
    for (size_t k = 0; k < c->ndecls; k++) {
        size_t i = (c->decl_next + k) % c->ndecls;
        if (strcmp(c->decls[i].name, name) == 0) {
            c->decl_next = i + 1;
            return &c->decls[i];
        }
    }
    return NULL;
}

static uint64_t
random_id(void)
{
    uint64_t v = 0;
    int      fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &v, sizeof(v)) != (ssize_t)sizeof(v)) {
            v = 0;
        }
        close(fd);
    }
    if (v == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40);
    }
    return v ? v : 1;
}

int
sr_client_open(sr_client **out, const sr_client_options *opts)
{
    sr_client *c;
    int        zero = 0, ivl = 100, ivl_max = 0, sndtimeo = 5000;
    int        rc;

    if (out == NULL || opts == NULL || opts->endpoint == NULL || opts->task_index < 0) {
        return sr_fail(SR_EINVAL, "sr_client_open: NULL options, endpoint or negative task");
    }
    int ncurve =
        (opts->server_public_key != NULL) + (opts->public_key != NULL) + (opts->secret_key != NULL);
    if (ncurve != 0 && ncurve != 3) {
        return sr_fail(SR_EINVAL, "sr_client_open: CURVE needs server_public_key, public_key "
                                  "and secret_key together");
    }
    if (ncurve == 3) {
        const char *const keys[3] = {opts->server_public_key, opts->public_key, opts->secret_key};
        const char *const names[3] = {"server_public_key", "public_key", "secret_key"};
        for (int i = 0; i < 3; i++) {
            uint8_t bin[32];
            if (strlen(keys[i]) != 40 || zmq_z85_decode(bin, keys[i]) == NULL) {
                return sr_fail(SR_EINVAL, "sr_client_open: %s is not a 40-character Z85 key",
                               SR_ESC(names[i]));
            }
        }
        if (!zmq_has("curve")) {
            return sr_fail(SR_ENOTSUP, "sr_client_open: this libzmq has no CURVE support");
        }
    }
    /* Every pulled value and every pushed gradient is a buffer ZeroMQ
     * allocates in one thread and frees in another: keep freed ones for
     * reuse instead of page-faulting fresh ones (core/mem.h). */
    sr_tune_malloc();
    if ((c = calloc(1, sizeof(*c))) == NULL) {
        return sr_fail(SR_ENOMEM, "sr_client_open");
    }
    c->task = opts->task_index;
    c->timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : DEFAULT_TIMEOUT_MS;
    c->client_id = random_id();
    c->local_step = -1;
    if ((c->endpoint = strdup(opts->endpoint)) == NULL) {
        rc = sr_fail(SR_ENOMEM, "sr_client_open");
        goto fail;
    }
    if ((c->ctx = zmq_ctx_new()) == NULL || (c->sock = zmq_socket(c->ctx, ZMQ_DEALER)) == NULL) {
        rc = sr_fail(SR_EMSG, "zmq socket: %s", zmq_strerror(errno));
        goto fail;
    }
    zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_setsockopt(c->sock, ZMQ_RECONNECT_IVL, &ivl, sizeof(ivl));
    zmq_setsockopt(c->sock, ZMQ_RECONNECT_IVL_MAX, &ivl_max, sizeof(ivl_max));
    zmq_setsockopt(c->sock, ZMQ_SNDTIMEO, &sndtimeo, sizeof(sndtimeo));
    if (opts->server_public_key != NULL &&
        (zmq_setsockopt(c->sock, ZMQ_CURVE_SERVERKEY, opts->server_public_key, 40) != 0 ||
         zmq_setsockopt(c->sock, ZMQ_CURVE_PUBLICKEY, opts->public_key, 40) != 0 ||
         zmq_setsockopt(c->sock, ZMQ_CURVE_SECRETKEY, opts->secret_key, 40) != 0)) {
        rc = sr_fail(SR_EINVAL, "CURVE keys: %s", zmq_strerror(errno));
        goto fail;
    }
    char mon[64];
    snprintf(mon, sizeof(mon), "inproc://syncrep-client-%016llx", (unsigned long long)c->client_id);
    if (zmq_socket_monitor(c->sock, mon, ZMQ_EVENT_CONNECTED) == 0 &&
        (c->mon = zmq_socket(c->ctx, ZMQ_PAIR)) != NULL && zmq_connect(c->mon, mon) != 0) {
        zmq_close(c->mon); /* without it, resends wait for their timer */
        c->mon = NULL;
    }
    if (zmq_connect(c->sock, c->endpoint) != 0) {
        rc = sr_fail(SR_EINVAL, "connect %s: %s", c->endpoint, zmq_strerror(errno));
        goto fail;
    }
    if ((rc = hello(c)) != SR_OK) {
        goto fail;
    }
    *out = c;
    return SR_OK;
fail:
    if (c->err[0] != '\0') {
        sr_fail(rc, "%s", c->err); /* the thread's detail, for a caller without a handle */
    }
    sr_client_close(c);
    return rc;
}

void
sr_client_close(sr_client *c)
{
    if (c == NULL) {
        return;
    }
    if (c->sock != NULL && c->incarnation != 0) {
        /* Best effort: lets the coordinator forget us at once. */
        send_request(c, SR_MSG_BYE, ++c->next_req, 0, 0, 0, NULL, 0);
    }
    drop_reply(c);
    drop_cache(c);
    free(c->cache);
    for (int i = 0; i < c->cap_pend; i++) {
        if (c->pend[i] != NULL) {
            free(c->pend[i]->buf);
            free(c->pend[i]);
        }
    }
    free(c->pend);
    free(c->batch_items);
    free(c->rep);
    for (size_t i = 0; i < c->ndecls; i++) {
        free(c->decls[i].init);
    }
    free(c->decls);
    if (c->mon != NULL) {
        zmq_close(c->mon);
    }
    if (c->sock != NULL) {
        zmq_socket_monitor(c->sock, NULL, 0);
        zmq_close(c->sock);
    }
    if (c->ctx != NULL) {
        /* A signal interrupts it (EINTR) before the I/O thread is done with
         * what refers to this client: wait on. */
        while (zmq_ctx_term(c->ctx) != 0 && errno == EINTR) {
        }
    }
    free(c->endpoint);
    free(c);
}

const char *
sr_client_error(const sr_client *c)
{
    return c != NULL ? c->err : "NULL client";
}

/* A request whose frames hold `bytes`: refused here when the coordinator
 * announced it takes no message that big (ZeroMQ would drop the connection
 * and the call would only time out).  The limit applies to each frame as it
 * travels, CURVE's few bytes of encryption included: 1 KiB of margin. */
static int
check_size(sr_client *c, const char *what, const char *name, uint64_t bytes)
{
    if (c->max_msg == 0 || bytes + 1024 <= c->max_msg) {
        return SR_OK;
    }
    return fail(c, SR_EINVAL,
                "%s %s: a message of %" PRIu64 " bytes, more than the coordinator at %s accepts "
                "(%" PRIu64 " bytes; its --max-message-mib)",
                what, SR_ESC(name), bytes, c->endpoint, c->max_msg);
}

/* An initial value too big for one message, in parts of `part` bytes: each
 * a DECLARE flagged SR_WIRE_DECLARE_PART (vardesc, pushdesc, the bytes), in
 * order from byte 0; the coordinator creates the variable with the last. */
static int
declare_parts(sr_client *c, const decl *d, frame *vdf, size_t part)
{
    uint8_t buf[SR_WIRE_BODY_MAX];
    frame   f[3] = {*vdf};

    for (size_t off = 0; off < d->nbytes; off += part) {
        sr_wire_pushdesc p;
        size_t           len = d->nbytes - off < part ? d->nbytes - off : part;

        memset(&p, 0, sizeof(p));
        memcpy(p.name, d->name, sizeof(p.name));
        p.dtype = (uint8_t)d->dtype;
        p.count = len;
        p.offset = off;
        f[1] = (frame){buf, sr_wire_pushdesc_encode(&p, buf, sizeof(buf))};
        f[2] = (frame){(const uint8_t *)d->init + off, len};
        if (f[1].len == 0) {
            return fail(c, SR_EINVAL, "declare %s: cannot encode", SR_ESC(d->name));
        }
        int rc = rpc(c, SR_MSG_DECLARE, 0, 0, f, 3, 0);
        if (rc != SR_OK) {
            return rc; /* RESTARTED included: resync declares it again, from byte 0 */
        }
        if (c->rh.status != SR_OK) {
            return reply_error(c, "declare");
        }
    }
    return SR_OK;
}

static int
declare_one(sr_client *c, const decl *d, int check_only)
{
    sr_wire_vardesc vd;
    uint8_t         buf[SR_WIRE_BODY_MAX];
    frame           f[2];
    int             nf = 1, rc;
    /* Parts only to a coordinator that announced its limit (older ones did
     * not, and do not know parts). */
    size_t part = c->max_msg > HEADROOM ? (size_t)(c->max_msg - HEADROOM) : 0;

    part = part < DECLARE_PART_MAX ? part : DECLARE_PART_MAX;

    memset(&vd, 0, sizeof(vd));
    memcpy(vd.name, d->name, sizeof(vd.name));
    vd.dtype = (uint8_t)d->dtype;
    vd.flags = (uint8_t)(d->flags | (check_only ? DECLARE_CHECK_ONLY : 0));
    vd.ndim = (uint8_t)d->ndim;
    memcpy(vd.shape, d->shape, sizeof(vd.shape));
    f[0].data = buf;
    f[0].len = sr_wire_vardesc_encode(&vd, buf, sizeof(buf));
    if (f[0].len == 0) {
        return fail(c, SR_EINVAL, "declare %s: cannot encode", SR_ESC(d->name));
    }
    if (!check_only && d->init != NULL) {
        if (part > 0 && d->nbytes > part) {
            vd.flags |= SR_WIRE_DECLARE_PART;
            f[0].len = sr_wire_vardesc_encode(&vd, buf, sizeof(buf));
            return declare_parts(c, d, &f[0], part);
        }
        if ((rc = check_size(c, "declare", d->name, f[0].len + d->nbytes)) != SR_OK) {
            return rc;
        }
        f[1].data = d->init;
        f[1].len = d->nbytes;
        nf = 2;
    }
    rc = rpc(c, SR_MSG_DECLARE, 0, 0, f, nf, 0);
    if (rc != SR_OK) {
        return rc;
    }
    if (c->rh.status != SR_OK) {
        return reply_error(c, "declare");
    }
    return SR_OK;
}

int
sr_client_declare_ex(sr_client *c, const char *name, sr_dtype dtype, int ndim, const int64_t *shape,
                     const void *initial_value, unsigned flags)
{
    uint64_t nbytes;
    decl    *d;
    int      rc;

    if (c == NULL || name == NULL) {
        return sr_fail(SR_EINVAL, "sr_client_declare: NULL argument");
    }
    if (sr_name_check(name, strlen(name)) != SR_OK) {
        return fail(c, SR_EINVAL, "declare \"%s\": %s", SR_ESC(name), sr_errdetail());
    }
    if (sr_shape_bytes(dtype, ndim, shape, &nbytes) != SR_OK) {
        return fail(c, SR_EINVAL, "declare %s: %s", SR_ESC(name), sr_errdetail());
    }
    if (find_decl(c, name) != NULL) {
        return fail(c, SR_EEXIST, "declare %s: already declared by this client", SR_ESC(name));
    }
    decl *grown = sr_grow_array(c->decls, &c->cap_decls, c->ndecls + 1, sizeof(*grown));
    if (grown == NULL) {
        return fail(c, SR_ENOMEM, "declare %s", SR_ESC(name));
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
            return fail(c, SR_ENOMEM, "declare %s: copy of %" PRIu64 " bytes", SR_ESC(name),
                        nbytes);
        }
        memcpy(d->init, initial_value, (size_t)nbytes);
    }
    c->ndecls++;
    if (c->task != 0 && !c->ready_done) {
        return SR_OK; /* checked by sr_client_ready, once the chief's exist */
    }
    for (;;) {
        rc = declare_one(c, d, c->task != 0);
        if (rc == RESTARTED) {
            /* resync re-declares everything, this one included */
            if ((rc = resync(c)) == SR_OK) {
                return SR_OK;
            }
        }
        break;
    }
    if (rc < 0) {
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

static int
ready_rpc(sr_client *c, int mark)
{
    sr_wire_ready_req q = {(uint8_t)mark};
    sr_wire_ping_rep  rep;
    uint8_t           buf[8];
    frame             f = {buf, sr_wire_ready_req_encode(&q, buf, sizeof(buf))};
    int               rc = rpc(c, SR_MSG_READY, 0, 0, &f, 1, 0);

    if (rc != SR_OK) {
        return rc;
    }
    if (c->rh.status != SR_OK) {
        return reply_error(c, "ready");
    }
    if (c->nrep != 1 || sr_wire_ping_rep_decode(zmq_msg_data(&c->rep[0]), zmq_msg_size(&c->rep[0]),
                                                &rep) != SR_OK) {
        return fail(c, SR_EPROTO, "ready: malformed reply");
    }
    c->model_ready = rep.model_ready;
    c->global_step = rep.global_step;
    return SR_OK;
}

int
sr_client_ready(sr_client *c)
{
    if (c == NULL) {
        return sr_fail(SR_EINVAL, "sr_client_ready: NULL client");
    }
    for (;;) {
        int rc = ready_rpc(c, c->task == 0);
        if (rc == RESTARTED) {
            if ((rc = resync(c)) != SR_OK) {
                return rc;
            }
            continue;
        }
        if (rc < 0) {
            return rc;
        }
        if (c->model_ready) {
            break;
        }
        /* Others wait for the chief, as long as the coordinator answers. */
        sr_clock_sleep_ms(20);
    }
    /* Declarations of non-chief workers are checked now that the chief's
     * exist. */
    for (size_t i = 0; c->task != 0 && i < c->ndecls; i++) {
        int rc = declare_one(c, &c->decls[i], 1);
        if (rc == RESTARTED) {
            return sr_client_ready(c);
        }
        if (rc < 0) {
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

/* One variable of a PULL reply (its descriptor and value frames) into dst;
 * named: the descriptor must name it (a reply of many). */
static int
pull_value(sr_client *c, const char *name, void *dst, size_t dst_bytes, const zmq_msg_t *desc,
           const zmq_msg_t *value, int named)
{
    sr_wire_vardesc vd;
    size_t          n = zmq_msg_size((zmq_msg_t *)value);

    if (sr_wire_vardesc_decode(zmq_msg_data((zmq_msg_t *)desc), zmq_msg_size((zmq_msg_t *)desc),
                               &vd) != SR_OK ||
        (named && strcmp(vd.name, name) != 0)) {
        return fail(c, SR_EPROTO, "pull %s: malformed reply", SR_ESC(name));
    }
    if (n != dst_bytes) {
        char s[160];
        sr_shape_format(vd.ndim, vd.shape, s, sizeof(s));
        return fail(c, SR_EINVAL, "pull %s: variable is %s%s = %zu bytes, buffer is %zu",
                    SR_ESC(name), sr_dtype_name(vd.dtype), s, n, dst_bytes);
    }
    if (dst_bytes > 0) {
        memcpy(dst, zmq_msg_data((zmq_msg_t *)value), dst_bytes);
    }
    c->global_step = c->rh.local_step;
    return SR_OK;
}

/* Serve a pull from the variables that came with this round's token (the
 * values as of that moment).  Pulls mostly come in the coordinator's order:
 * the search starts after the last one found. */
static int
pull_cached(sr_client *c, const char *name, void *dst, size_t dst_bytes)
{
    for (int k = 0; k < c->ncache; k++) {
        int i = (c->cache_next + k) % c->ncache;
        if (strcmp(c->cache[i].name, name) == 0 && zmq_msg_size(&c->cache[i].value) == dst_bytes) {
            if (dst_bytes > 0) {
                memcpy(dst, zmq_msg_data(&c->cache[i].value), dst_bytes);
            }
            c->cache_next = i + 1;
            c->global_step = c->cache_step;
            c->stats.pulls_cached++;
            return 1;
        }
    }
    return 0;
}

int
sr_client_pull_many(sr_client *c, size_t n, const char *const *names, void *const *dsts,
                    const size_t *dst_bytes)
{
    pull_batch b;
    int        rc = SR_OK;

    if (c == NULL || (n > 0 && (names == NULL || dsts == NULL || dst_bytes == NULL))) {
        return sr_fail(SR_EINVAL, "sr_client_pull_many: NULL argument");
    }
    for (size_t i = 0; i < n; i++) {
        if (names[i] == NULL || (dsts[i] == NULL && dst_bytes[i] > 0)) {
            return sr_fail(SR_EINVAL, "sr_client_pull_many: NULL argument (item %zu)", i);
        }
        if (sr_name_check(names[i], strlen(names[i])) != SR_OK) {
            return fail(c, SR_EINVAL, "pull \"%s\": %s", SR_ESC(names[i]), sr_errdetail());
        }
    }
    if (n == 0) {
        return SR_OK;
    }
    pull_item *items = sr_grow_array(c->batch_items, &c->cap_batch, n, sizeof(*items));
    if (items == NULL) {
        return fail(c, SR_ENOMEM, "pull: %zu variables", n);
    }
    c->batch_items = items;
    memset(&b, 0, sizeof(b));
    b.n = n;
    b.names = names;
    b.dsts = dsts;
    b.sizes = dst_bytes;
    b.item = items;
    c->pulled = 1;
    for (size_t i = 0; i < n; i++) {
        b.item[i].state =
            pull_cached(c, names[i], dsts[i], dst_bytes[i]) ? PULL_DONE : PULL_TO_SEND;
        b.left += b.item[i].state == PULL_TO_SEND;
    }
    while (b.first < n && b.item[b.first].state == PULL_DONE) {
        b.first++;
    }
    b.next = b.first;
    while (b.left > 0) {
        c->batch = &b;
        batch_fill(c, &b);
        rc = b.rc != SR_OK ? b.rc : rpc(c, 0, 0, 0, NULL, 0, 0);
        c->batch = NULL;
        if (rc == RESTARTED) {
            /* The answers in flight are lost: those pulls go to the new
             * incarnation (this round is tainted: resync). */
            batch_rewind(&b);
            if ((rc = resync(c)) != SR_OK) {
                return rc;
            }
            continue;
        }
        if (rc != SR_OK) {
            return rc;
        }
        if (b.rc != SR_OK) {
            return b.rc;
        }
    }
    return SR_OK;
}

int
sr_client_pull(sr_client *c, const char *name, void *dst, size_t dst_bytes)
{
    if (c == NULL || name == NULL || (dst == NULL && dst_bytes > 0)) {
        return sr_fail(SR_EINVAL, "sr_client_pull: NULL argument");
    }
    return sr_client_pull_many(c, 1, &name, &dst, &dst_bytes);
}

/* Send a push (dense or sparse) and account for the outcome. */
static int
push_common(sr_client *c, int type, const char *name, const frame *f, int nf)
{
    uint64_t         seq;
    sr_wire_push_rep rep;
    int              rc;

    if (c->tainted) {
        /* Computed from values pulled before a coordinator restart was noticed:
         * a gradient of no single step.  Dropped like any stale gradient. */
        count_outcome(c, SR_PUSH_STALE);
        return SR_OK;
    }
    seq = ++c->seq;
    rc = rpc(c, type, c->local_step, seq, f, nf, 0);

    if (rc == RESTARTED) {
        /* Computed for the old incarnation: dropped, like any stale gradient. */
        count_outcome(c, SR_PUSH_STALE);
        return resync(c);
    }
    if (rc < 0) {
        return rc;
    }
    if (c->rh.status != SR_OK) {
        char what[SR_TEXT_ESC_CAP + 8];
        snprintf(what, sizeof(what), "push %s", SR_ESC(name));
        return reply_error(c, what);
    }
    if (c->nrep != 1 || sr_wire_push_rep_decode(zmq_msg_data(&c->rep[0]), zmq_msg_size(&c->rep[0]),
                                                &rep) != SR_OK) {
        return fail(c, SR_EPROTO, "push %s: malformed reply", SR_ESC(name));
    }
    count_outcome(c, rep.outcome);
    return SR_OK;
}

/* Wait until `need` more bytes fit in `budget` among the unanswered pushes
 * (need > budget: until all are answered).  A restart noticed meanwhile is
 * handled (resync: the client is then tainted). */
static int
wait_room(sr_client *c, size_t need, size_t budget)
{
    c->room_need = need;
    c->room_budget = budget;
    int rc = rpc(c, 0, 0, 0, NULL, 0, 0);
    return rc == RESTARTED ? resync(c) : rc;
}

/* Wait until no push sent from a caller's buffer is unanswered. */
static int
wait_ext(sr_client *c)
{
    c->wait_ext = 1;
    int rc = rpc(c, 0, 0, 0, NULL, 0, 0);
    c->wait_ext = 0;
    return rc == RESTARTED ? resync(c) : rc;
}

/* Wait for every pipelined push's answer. */
static int
flush_pushes(sr_client *c)
{
    return wait_room(c, 1, 0);
}

/* The refusal of a pipelined push, once. */
static int
take_deferred(sr_client *c)
{
    int rc = c->deferred_rc;
    if (rc == SR_OK) {
        return SR_OK;
    }
    c->deferred_rc = SR_OK;
    return fail(c, rc, "%s", c->deferred_err);
}

/* Queue one PUSH (descriptor desc, data of len bytes: copied, or used in
 * place when ext) and send it, or (hold) hold it back for the next request
 * or wait; its answer is taken by a later wait. */
static int
pend_add(sr_client *c, const char *name, const frame *desc, const void *data, size_t len, int ext,
         int hold)
{
    size_t       need = desc->len + (ext ? 0 : len);
    struct pend *p;

    if (hold && c->held >= CHAIN_HELD_MAX && send_held(c, 1, 0) != 0) {
        return fail(c, SR_EMSG, "send PUSH: %s", zmq_strerror(errno));
    }
    if (c->npend == c->cap_pend) {
        int           nc = c->cap_pend ? c->cap_pend * 2 : 16;
        struct pend **q = realloc(c->pend, (size_t)nc * sizeof(*q));
        if (q == NULL) {
            return fail(c, SR_ENOMEM, "push %s", SR_ESC(name));
        }
        memset(q + c->cap_pend, 0, (size_t)(nc - c->cap_pend) * sizeof(*q));
        c->pend = q;
        c->cap_pend = nc;
    }
    if (c->pend[c->npend] == NULL && (c->pend[c->npend] = calloc(1, sizeof(*p))) == NULL) {
        return fail(c, SR_ENOMEM, "push %s", SR_ESC(name));
    }
    p = c->pend[c->npend];
    if (p->cap < need) {
        uint8_t *b = realloc(p->buf, need);
        if (b == NULL) {
            return fail(c, SR_ENOMEM, "push %s: copy of %zu bytes", SR_ESC(name), need);
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
    p->req = ++c->next_req;
    p->seq = ++c->seq;
    p->local_step = c->local_step;
    snprintf(p->name, sizeof(p->name), "%s", name);
    if (!hold) {
        frame pf[2];
        pend_frames(p, pf);
        if (send_request(c, SR_MSG_PUSH, p->req, 0, p->local_step, p->seq, pf, 2) != 0) {
            p->ext = NULL;
            return fail(c, SR_EMSG, "send PUSH: %s", zmq_strerror(errno));
        }
    }
    c->held += hold != 0;
    c->npend++;
    c->npend_ext += ext != 0;
    c->pend_bytes += desc->len + len;
    return SR_OK;
}

/* A dense push of a variable this client declared with that size, small
 * enough to copy: sent without waiting for its answer, which the next
 * blocking call (the step, normally) takes on the way, so that push and
 * token request share one round trip.  In sr_client_push_many (to a
 * coordinator taking chains) it is held back, unsent, and leaves in one
 * message with the next ones (up to CHAIN_HELD_MAX) and the next request,
 * or at the end of that call: a model of many small variables costs a
 * message per ten pushes, not one each.  Exactly-once and resends work as
 * for any push (the copy is what is re-sent).  In
 * sr_client_push_step the push is sent from the caller's buffer, whatever
 * its size (ext), with the token request of the same call: the call waits
 * for its answer. */
static int
push_pipelined(sr_client *c, const char *name, const frame *f)
{
    int    ext = c->hold_next;
    size_t need = f[0].len + f[1].len;
    int    rc = wait_room(c, need, ext && need > PIPE_MAX_BYTES ? need : PIPE_MAX_BYTES);

    if (rc != SR_OK) {
        return rc;
    }
    if (c->tainted) { /* the wait noticed a restart */
        count_outcome(c, SR_PUSH_STALE);
        return SR_OK;
    }
    return pend_add(c, name, &f[0], f[1].data, f[1].len, ext, ext || c->hold_many);
}

/* Pushes sent from a caller's buffer that a failed call leaves unanswered:
 * never re-sent (the buffer is the caller's again). */
static void
drop_ext(sr_client *c)
{
    for (int i = c->npend - 1; i >= 0; i--) {
        if (c->pend[i]->ext != NULL) {
            pend_remove(c, i);
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
static int
push_partitioned(sr_client *c, const char *name, const sr_wire_pushdesc *pd, const uint8_t *grad,
                 size_t bytes, size_t part)
{
    uint8_t buf[SR_WIRE_BODY_MAX];
    int     rc = SR_OK;

    for (size_t off = 0; off < bytes && rc == SR_OK; off += part) {
        sr_wire_pushdesc p = *pd;
        size_t           len = bytes - off < part ? bytes - off : part;
        frame            desc = {buf, 0};

        /* Room for this partition beside at most one more (descriptors
         * included: they count in pend_bytes too). */
        if ((rc = wait_room(c, len + SR_WIRE_BODY_MAX, 2 * (part + SR_WIRE_BODY_MAX))) != SR_OK) {
            break;
        }
        if (c->tainted) { /* a restart: the rest is stale too */
            count_outcome(c, SR_PUSH_STALE);
            continue;
        }
        p.count = len;
        p.offset = off;
        if ((desc.len = sr_wire_pushdesc_encode(&p, buf, sizeof(buf))) == 0) {
            rc = fail(c, SR_EINVAL, "push %s: cannot encode", SR_ESC(name));
            break;
        }
        rc = pend_add(c, name, &desc, grad + off, len, off + len < bytes, 0);
    }
    if (rc == SR_OK) {
        rc = wait_ext(c);
    }
    drop_ext(c);
    return rc != SR_OK ? rc : take_deferred(c);
}

static int
push_desc(sr_client *c, const char *name, uint64_t count, uint8_t *buf, size_t cap, frame *f,
          const decl **out)
{
    sr_wire_pushdesc p;
    const decl      *d = NULL;

    memset(&p, 0, sizeof(p));
    if (sr_name_check(name, strlen(name)) != SR_OK) {
        return fail(c, SR_EINVAL, "push \"%s\": %s", SR_ESC(name), sr_errdetail());
    }
    snprintf(p.name, sizeof(p.name), "%s", name);
    d = find_decl(c, name);
    /* The dtype of an undeclared variable is checked by the coordinator. */
    p.dtype = (uint8_t)(d ? d->dtype : SR_FLOAT32);
    p.count = count;
    *out = d;
    f->data = buf;
    f->len = sr_wire_pushdesc_encode(&p, buf, cap);
    if (d != NULL && (d->flags & SR_DECLARE_NOT_TRAINABLE)) {
        return fail(c, SR_EINVAL, "push %s: declared not trainable", SR_ESC(name));
    }
    return f->len ? SR_OK : fail(c, SR_EINVAL, "push %s: cannot encode", SR_ESC(name));
}

int
sr_client_push(sr_client *c, const char *name, const void *grad, size_t bytes)
{
    uint8_t     buf[SR_WIRE_BODY_MAX];
    frame       f[2];
    const decl *d;
    int         rc;

    if (c == NULL || name == NULL || (grad == NULL && bytes > 0)) {
        return sr_fail(SR_EINVAL, "sr_client_push: NULL argument");
    }
    if (!c->ready_done) {
        return fail(c, SR_ENOTREADY, "push %s: call sr_client_ready first", SR_ESC(name));
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
    if ((rc = check_size(c, "push", name, f[0].len + (part ? part : bytes))) != SR_OK) {
        return rc;
    }
    if (part > 0) {
        sr_wire_pushdesc p;
        memset(&p, 0, sizeof(p));
        snprintf(p.name, sizeof(p.name), "%s", name);
        p.dtype = (uint8_t)d->dtype;
        return push_partitioned(c, name, &p, grad, bytes, part);
    }
    if (whole && (bytes <= PIPE_PUSH_MAX || c->hold_next)) {
        return push_pipelined(c, name, f);
    }
    rc = push_common(c, SR_MSG_PUSH, name, f, 2);
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
sr_client_push_many(sr_client *c, size_t n, const char *const *names, const void *const *grads,
                    const size_t *bytes)
{
    int rc = SR_OK;

    if (c == NULL || (n > 0 && (names == NULL || grads == NULL || bytes == NULL))) {
        return sr_fail(SR_EINVAL, "sr_client_push_many: NULL argument");
    }
    c->hold_many = c->chain_ok;
    for (size_t i = 0; i < n && rc == SR_OK; i++) {
        rc = sr_client_push(c, names[i], grads[i], bytes[i]);
    }
    c->hold_many = 0;
    /* Nothing stays held after the call: a refused send leaves them to the
     * resends, like any push whose message was lost. */
    if (c->held > 0 && send_held(c, 1, 0) != 0 && rc == SR_OK) {
        rc = fail(c, SR_EMSG, "send PUSH: %s", zmq_strerror(errno));
    }
    return rc;
}

int
sr_client_push_sparse(sr_client *c, const char *name, size_t nrows, const int64_t *row_indices,
                      const void *rows, size_t rows_bytes)
{
    uint8_t     buf[SR_WIRE_BODY_MAX];
    frame       f[3];
    const decl *d;
    int         rc;

    if (c == NULL || name == NULL || (nrows > 0 && (row_indices == NULL || rows == NULL))) {
        return sr_fail(SR_EINVAL, "sr_client_push_sparse: NULL argument");
    }
    if (!c->ready_done) {
        return fail(c, SR_ENOTREADY, "push %s: call sr_client_ready first", SR_ESC(name));
    }
    if ((rc = push_desc(c, name, nrows, buf, sizeof(buf), &f[0], &d)) != SR_OK) {
        return rc;
    }
    f[1].data = row_indices;
    f[1].len = nrows * sizeof(int64_t);
    f[2].data = rows;
    f[2].len = rows_bytes;
    if ((rc = check_size(c, "push", name, f[0].len + f[1].len + rows_bytes)) != SR_OK) {
        return rc;
    }
    return push_common(c, SR_MSG_PUSH_SPARSE, name, f, 3);
}

int
sr_client_step(sr_client *c)
{
    if (c == NULL) {
        return sr_fail(SR_EINVAL, "sr_client_step: NULL client");
    }
    if (!c->ready_done) {
        return fail(c, SR_ENOTREADY, "step: call sr_client_ready first");
    }
    /* A client that pulls asks for the variables with its token: for a small
     * model the coordinator sends them along, and this round's pulls need
     * no round trip (docs/protocol.md, TOKEN). */
    drop_cache(c);
    c->req_flags = c->pulled ? SR_WIRE_F_WANT_VARS : 0;
    c->pulled = 0;
    int rc = rpc(c, SR_MSG_TOKEN, c->local_step, 0, NULL, 0, 1);
    c->req_flags = 0;
    if (rc == RESTARTED) {
        /* The step completes at the restored global step; the next round
         * pulls only from the new incarnation. */
        rc = resync(c);
        c->tainted = 0;
        return rc != SR_OK ? rc : take_deferred(c);
    }
    if (rc < 0) {
        return rc;
    }
    if (c->rh.status != SR_OK) {
        return reply_error(c, "step");
    }
    c->local_step = c->rh.local_step;
    c->tainted = 0;
    take_cache(c);
    /* The pushes' answers came before the token's (one connection, in
     * order); wait for any re-sent one all the same. */
    if (c->npend > 0 && (rc = flush_pushes(c)) != SR_OK) {
        return rc;
    }
    return take_deferred(c);
}

int
sr_client_push_step(sr_client *c, const char *name, const void *grad, size_t bytes)
{
    int rc;

    if (c == NULL) {
        return sr_fail(SR_EINVAL, "sr_client_push_step: NULL client");
    }
    if (!c->ready_done) { /* before the push: nothing may stay held */
        return fail(c, SR_ENOTREADY, "push %s: call sr_client_ready first", SR_ESC(name));
    }
    c->hold_next = c->chain_ok;
    rc = sr_client_push(c, name, grad, bytes);
    c->hold_next = 0;
    if (rc == SR_OK) {
        rc = sr_client_step(c); /* takes the push's answer, or fails */
    }
    drop_ext(c);
    return rc;
}

int
sr_client_flush(sr_client *c)
{
    int rc;

    if (c == NULL) {
        return sr_fail(SR_EINVAL, "sr_client_flush: NULL client");
    }
    if ((rc = flush_pushes(c)) != SR_OK) {
        return rc;
    }
    return take_deferred(c);
}

int64_t
sr_client_local_step(const sr_client *c)
{
    return c != NULL ? c->local_step : -1;
}

int
sr_client_global_step(sr_client *c, int64_t *out)
{
    sr_wire_ping_rep rep;

    if (c == NULL || out == NULL) {
        return sr_fail(SR_EINVAL, "sr_client_global_step: NULL argument");
    }
    for (;;) {
        int rc = rpc(c, SR_MSG_PING, 0, 0, NULL, 0, 0);
        if (rc == RESTARTED) {
            if ((rc = resync(c)) != SR_OK) {
                return rc;
            }
            continue;
        }
        if (rc < 0) {
            return rc;
        }
        break;
    }
    if (c->rh.status != SR_OK) {
        return reply_error(c, "global step");
    }
    if (c->nrep != 1 || sr_wire_ping_rep_decode(zmq_msg_data(&c->rep[0]), zmq_msg_size(&c->rep[0]),
                                                &rep) != SR_OK) {
        return fail(c, SR_EPROTO, "global step: malformed reply");
    }
    c->global_step = rep.global_step;
    *out = rep.global_step;
    return SR_OK;
}

int
sr_client_stats_get(const sr_client *c, sr_client_stats *out)
{
    if (c == NULL || out == NULL) {
        return sr_fail(SR_EINVAL, "sr_client_stats_get: NULL argument");
    }
    *out = c->stats;
    return SR_OK;
}

uint64_t
sr_client_incarnation(const sr_client *c)
{
    return c != NULL ? c->incarnation : 0;
}
