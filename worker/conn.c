/*
 * The client's connection layer: request ids, framing and chains, the
 * requests in flight, and the one wait loop every call goes through
 * (sr__conn_call), over the I/O seam in c->io (conn_zmq.c, or a test's fake).
 *
 * The in-flight requests are an id map (c->flight, in request id order) of
 * sr__req contexts, as in nng's req0: each knows how to send itself again,
 * what to do with its reply and what to do when a restart loses it.  A reply
 * is matched by request id and type; one that matches nothing (an answer to
 * a request already answered, a late PING reply) is ignored once its
 * incarnation has been checked.  Resends go in request id order (pushes in
 * seq order, then pulls, then the call's own request), at the call's resend
 * time: 1 s doubling up to 16 s, later for big requests (resend_after_ms),
 * every second for a TOKEN with a PING; at once on a new connection.
 * docs/protocol.md, "Resends and deduplication", is the contract.
 *
 * Functions: sr__fail, sr__reply_error, sr__check_size, sr__conn_send_frames,
 * extra, sr__conn_send, sr__conn_send_held,
 * sr__conn_send_request, sr__conn_drop_reply, recv_msg, sr__conn_reserve, sr__conn_track,
 * sr__conn_forget, sr__conn_lose_all, find_flight, take_flight,
 * resend_after_ms, wait_over, resend_all, sr__conn_call, sr__conn_close.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/text.h"
#include "worker/client_int.h"

/* ---- errors ------------------------------------------------------------- */

sr_err
sr__fail(sr_client *c, sr_err code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof(c->err), fmt, ap);
    va_end(ap);
    sr_fail(code, "%s", c->err);
    return code;
}

/* The error reply's text (frame 1), or the code's text. */
sr_err
sr__reply_error(sr_client *c, const char *what)
{
    sr_err code = (sr_err)c->rh.status;
    if (c->nrep >= 1 && zmq_msg_size(&c->rep[0]) > 0) {
        const char *text = zmq_msg_data(&c->rep[0]);
        size_t      n = zmq_msg_size(&c->rep[0]), wl = strlen(what);
        /* The coordinator's text often names the operation already. */
        int named = n > wl && memcmp(text, what, wl) == 0 && text[wl] == ':';
        return sr__fail(c, code, "%s%s%.*s", named ? "" : what, named ? "" : ": ", (int)n, text);
    }
    return sr__fail(c, code, "%s: %s", what, sr_strerror(code));
}

/* A request whose frames hold `bytes`: refused here when the coordinator
 * announced it takes no message that big (ZeroMQ would drop the connection
 * and the call would only time out).  The limit applies to each frame as it
 * travels, CURVE's few bytes of encryption included: 1 KiB of margin. */
sr_err
sr__check_size(sr_client *c, const char *what, const char *name, uint64_t bytes)
{
    if (c->max_msg == 0 || bytes + 1024 <= c->max_msg) {
        return SR_OK;
    }
    return sr__fail(c, SR_EINVAL,
                    "%s %s: a message of %" PRIu64 " bytes, more than the coordinator at %s "
                    "accepts (%" PRIu64 " bytes; its --max-message-mib)",
                    what, SR_ESC(name), bytes, c->endpoint, c->max_msg);
}

/* ---- sending ------------------------------------------------------------ */

/* One request's frames; more: another request follows in this message;
 * dontwait: the first frame's (ZeroMQ takes the rest of a message whose
 * first frame it took).  0, or -1 with errno. */
int
sr__conn_send_frames(sr_client *c, int type, uint64_t req_id, uint16_t flags, int64_t local_step,
                     uint64_t seq, const sr__frame *f, int nf, int more, int dontwait)
{
    sr_wire_header h;
    uint8_t        hb[SR_WIRE_HEADER_BYTES];

    memset(&h, 0, sizeof(h));
    h.type = (uint8_t)type;
    h.flags = flags;
    h.request_id = req_id;
    h.incarnation = c->incarnation;
    h.client_id = c->client_id;
    h.task_index = c->task;
    h.local_step = local_step;
    h.seq = seq;
    sr_wire_header_encode(&h, hb);
    if (c->io.send(c->io.arg, hb, sizeof(hb),
                   (nf || more ? SR__IO_MORE : 0) | (dontwait ? SR__IO_DONTWAIT : 0)) < 0) {
        return -1;
    }
    for (int i = 0; i < nf; i++) {
        if (c->io.send(c->io.arg, f[i].data, f[i].len, i + 1 < nf || more ? SR__IO_MORE : 0) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Resends, PINGs and BYE are extras: when the queue to the coordinator is
 * full (it is busy or gone) they are skipped rather than waited for. */
static int
extra(int type, uint16_t flags)
{
    return (flags & SR_WIRE_F_RESEND) || type == SR_MSG_PING || type == SR_MSG_BYE;
}

/* A request alone in its message. */
int
sr__conn_send(sr_client *c, int type, uint64_t req_id, uint16_t flags, int64_t local_step,
              uint64_t seq, const sr__frame *f, int nf)
{
    return sr__conn_send_frames(c, type, req_id, flags, local_step, seq, f, nf, 0,
                                extra(type, flags));
}

/* Send the held-back pushes (the last c->held requests in flight) in one
 * message, each flagged SR_WIRE_F_CHAIN but (alone) the last; not alone, a
 * request follows (sr__conn_send_request).  Unsent on failure, they are
 * re-sent later. */
int
sr__conn_send_held(sr_client *c, int alone, int dontwait)
{
    int first = c->nflight - c->held;

    c->held = 0;
    for (int i = first; i < c->nflight; i++) {
        int end = alone && i == c->nflight - 1;
        if (c->flight[i]->ops->send(c, c->flight[i], end ? 0 : SR_WIRE_F_CHAIN, !end,
                                    i == first ? dontwait : 0) != 0) {
            return -1;
        }
    }
    return 0;
}

/* A new request, behind the held-back pushes if there are some: all in one
 * message, the pushes flagged SR_WIRE_F_CHAIN. */
int
sr__conn_send_request(sr_client *c, int type, uint64_t req_id, uint16_t flags, int64_t local_step,
                      uint64_t seq, const sr__frame *f, int nf)
{
    if (c->held > 0 && sr__conn_send_held(c, 0, extra(type, flags)) != 0) {
        return -1;
    }
    return sr__conn_send(c, type, req_id, flags, local_step, seq, f, nf);
}

/* ---- receiving ---------------------------------------------------------- */

void
sr__conn_drop_reply(sr_client *c)
{
    for (int i = 0; i < c->nrep; i++) {
        zmq_msg_close(&c->rep[i]);
    }
    c->nrep = 0;
}

/* Receive one reply into c->rh / c->rep.  Returns 0, or -1 if it was not a
 * well-formed reply (discarded). */
static int
recv_msg(sr_client *c)
{
    zmq_msg_t hm;
    int       more = 0, ok, chained;

    sr__conn_drop_reply(c);
    zmq_msg_init(&hm);
    if (c->io.recv(c->io.arg, &hm, &more) < 0) {
        zmq_msg_close(&hm);
        return -1;
    }
    ok = sr_wire_header_decode(zmq_msg_data(&hm), zmq_msg_size(&hm), &c->rh) == SR_OK &&
         (c->rh.type & SR_WIRE_REPLY);
    /* A chained push answer (a dense or a sparse push's: the coordinator
     * chains both when it holds them, issue 27) has one body frame; the next
     * reply follows it.  (On a HELLO reply the flag means the coordinator
     * takes chains.) */
    chained = ok &&
              (c->rh.type == (SR_MSG_PUSH | SR_WIRE_REPLY) ||
               c->rh.type == (SR_MSG_PUSH_SPARSE | SR_WIRE_REPLY)) &&
              (c->rh.flags & SR_WIRE_F_CHAIN) != 0;
    zmq_msg_close(&hm);
    c->chain_more = 0;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (c->io.recv(c->io.arg, &m, &more) < 0) {
            zmq_msg_close(&m);
            return -1;
        }
        if (c->nrep == c->cap_rep && c->cap_rep < SR__MAX_REPLY_FRAMES) {
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

/* ---- the id map --------------------------------------------------------- */

/* Room in the map for n more requests, so that sr__conn_track cannot fail
 * after a request went out. */
sr_err
sr__conn_reserve(sr_client *c, int n)
{
    if (c->nflight + n > c->cap_flight) {
        int nc = c->cap_flight ? c->cap_flight : 32;
        while (nc < c->nflight + n) {
            nc *= 2;
        }
        sr__req **p = realloc(c->flight, (size_t)nc * sizeof(*p));
        if (p == NULL) {
            return sr__fail(c, SR_ENOMEM, "%d requests in flight", c->nflight + n);
        }
        c->flight = p;
        c->cap_flight = nc;
    }
    return SR_OK;
}

/* r (r->id above every id in flight, room reserved) is in flight until its
 * reply, its loss or sr__conn_forget. */
void
sr__conn_track(sr_client *c, sr__req *r)
{
    SR_ASSERT(c->nflight < c->cap_flight);
    SR_ASSERT(c->nflight == 0 || c->flight[c->nflight - 1]->id < r->id);
    c->flight[c->nflight++] = r;
}

/* The index of request id `id` in the map, or -1 (binary search: ids grow). */
static int
find_flight(const sr_client *c, uint64_t id)
{
    int lo = 0, hi = c->nflight - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (c->flight[mid]->id == id) {
            return mid;
        }
        if (c->flight[mid]->id < id) {
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return -1;
}

static void
take_flight(sr_client *c, int i)
{
    if (i >= c->nflight - c->held) {
        c->held--;
    }
    memmove(&c->flight[i], &c->flight[i + 1], (size_t)(c->nflight - i - 1) * sizeof(c->flight[0]));
    c->nflight--;
}

void
sr__conn_forget(sr_client *c, sr__req *r)
{
    int i = find_flight(c, r->id);
    if (i >= 0) {
        take_flight(c, i);
    }
}

/* A restart: nothing in flight will be answered. */
void
sr__conn_lose_all(sr_client *c)
{
    while (c->nflight > 0) {
        sr__req *r = c->flight[c->nflight - 1];
        take_flight(c, c->nflight - 1);
        r->ops->lost(c, r);
    }
    c->held = 0;
}

/* ---- the wait loop ------------------------------------------------------ */

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

/* Whether a wait without a request of its own is over. */
static int
wait_over(const sr_client *c, const sr__call *w)
{
    switch (w->kind) {
    case SR__WAIT_PULLS:
        return w->pulls->left == 0 || w->pulls->rc != SR_OK;
    case SR__WAIT_EXT:
        return c->npend_ext == 0;
    case SR__WAIT_ROOM:
        return c->npend == 0 || (c->npend < SR__PIPE_MAX_COUNT && w->need <= w->budget &&
                                 c->pend_bytes <= w->budget - w->need);
    default:
        return 0;
    }
}

/* Everything in flight again, then the call's request (req 0: none). */
static void
resend_all(sr_client *c, const sr__call *w, uint64_t req)
{
    c->held = 0; /* all of them go now */
    for (int i = 0; i < c->nflight; i++) {
        if (c->flight[i]->ops->send(c, c->flight[i], SR_WIRE_F_RESEND, 0, 1) == 0) {
            c->stats.resends++;
        }
    }
    if (req != 0 &&
        sr__conn_send(c, w->type, req, (uint16_t)(SR_WIRE_F_RESEND | w->flags), w->local_step,
                      w->seq, w->f, w->nf) == 0 &&
        w->kind != SR__WAIT_TOKEN) {
        c->stats.resends++;
    }
}

/* Issue 22, "never silent": a wait that passes this says so, once. */
#define SAY_WAIT_AFTER_MS 5000

int
sr__conn_quiet(void)
{
    const char *q = getenv("SYNCREP_QUIET");
    return q != NULL && q[0] != '\0' && strcmp(q, "0") != 0;
}

/* The one line of a wait of waited_ms in which the coordinator was last
 * heard silent_ms ago: unreachable (naming the endpoint) or answering while
 * the awaited reply does not come (a step that cannot complete). */
static void
say_waiting(const sr_client *c, const sr__call *w, int64_t waited_ms, int64_t silent_ms)
{
    const char *what = w->kind == SR__WAIT_TOKEN   ? "the step's token"
                       : w->kind == SR__WAIT_PULLS ? "the variables (PULL)"
                       : w->kind == SR__WAIT_REPLY ? sr_wire_type_name(w->type)
                                                   : "the answers to its pushes";
    if (sr__conn_quiet()) {
        return;
    }
    if (silent_ms >= SAY_WAIT_AFTER_MS) {
        SR_LOG(SR_LOG_WARN, "WORKER-WAIT",
               "task=%d endpoint=%s waited_s=%" PRId64 " waiting for %s: no answer from the "
               "coordinator at %s for %" PRId64 " s (is it running? still trying, up to "
               "timeout_ms=%d; SYNCREP_QUIET=1 silences this)",
               c->task, c->endpoint, waited_ms / 1000, what, c->endpoint, silent_ms / 1000,
               c->timeout_ms);
    } else {
        SR_LOG(SR_LOG_WARN, "WORKER-WAIT",
               "task=%d endpoint=%s local_step=%" PRId64 " waited_s=%" PRId64
               " waiting for %s from %s since %" PRId64 " s: the coordinator answers, the step "
               "has not completed (`syncrep status --connect %s` names the task(s) it waits "
               "for; SYNCREP_QUIET=1 silences this)",
               c->task, c->endpoint, c->local_step, waited_ms / 1000, what, c->endpoint,
               waited_ms / 1000, c->endpoint);
    }
}

/* Send the call's request (if it has one) and wait, taking the replies of
 * the requests in flight on the way, until its reply is in c->rh / c->rep
 * (its status may be an error) or the wait without a request is over.  A
 * reply with a new incarnation ends the wait with *restarted = 1: what was in
 * flight is lost (each request's ops->lost has run), the call's own request
 * too.  Errors: SR_ETIMEDOUT (nothing heard for timeout_ms), SR_EMSG. */
sr_err
sr__conn_call(sr_client *c, const sr__call *w, int *restarted)
{
    int      has_req = w->kind == SR__WAIT_REPLY || w->kind == SR__WAIT_TOKEN;
    int      token = w->kind == SR__WAIT_TOKEN;
    uint64_t req = has_req ? ++c->next_req : 0;
    uint64_t ping_id = 0;
    size_t   bytes = c->pend_bytes + (w->pulls != NULL ? w->pulls->inflight_bytes : 0);
    int64_t  now = c->io.now_ms(c->io.arg);
    int64_t  last_contact = now;
    int64_t  interval, next_resend, next_ping = now + SR__PING_EVERY_MS;
    int64_t  started = now; /* issue 22: the wait's one line after SAY_WAIT_AFTER_MS */
    int      said = 0;

    *restarted = 0;
    for (int i = 0; i < w->nf; i++) {
        bytes += w->f[i].len;
    }
    interval = token ? 1000 : resend_after_ms(bytes);
    next_resend = now + interval;
    if (!has_req && wait_over(c, w)) {
        return SR_OK;
    }
    /* Held pushes are waited for: they go now, alone. */
    if (!has_req && c->held > 0 && sr__conn_send_held(c, 1, 0) != 0) {
        return sr__fail(c, SR_EMSG, "send PUSH: %s", zmq_strerror(errno));
    }
    if (has_req &&
        sr__conn_send_request(c, w->type, req, w->flags, w->local_step, w->seq, w->f, w->nf) != 0) {
        return sr__fail(c, SR_EMSG, "send %s: %s", sr_wire_type_name(w->type), zmq_strerror(errno));
    }
    for (;;) {
        int64_t wait =
            (token || next_resend < next_ping ? next_resend : next_ping) - c->io.now_ms(c->io.arg);
        int ev = SR__IO_IN; /* the rest of the message just read */

        if (!c->chain_more) {
            ev = c->io.poll(c->io.arg, wait > 0 ? wait : 0);
        }
        if (ev < 0 && errno != EINTR) {
            return sr__fail(c, SR_EMSG, "poll: %s", zmq_strerror(errno));
        }
        if (ev > 0 && (ev & SR__IO_RECONNECTED)) {
            /* A new connection (a restarted coordinator, most likely): what
             * was in flight on the old one is lost, so send it again now
             * rather than at the resend timer (pushes are deduplicated). */
            next_resend = c->io.now_ms(c->io.arg);
            continue;
        }
        if (ev > 0 && (ev & SR__IO_IN)) {
            if (recv_msg(c) != 0) {
                continue;
            }
            last_contact = c->io.now_ms(c->io.arg);
            if (c->incarnation != 0 && c->rh.incarnation != c->incarnation) {
                sr__conn_lose_all(c);
                *restarted = 1;
                return SR_OK;
            }
            if (has_req && c->rh.request_id == req) {
                return SR_OK;
            }
            int i = find_flight(c, c->rh.request_id);
            if (i >= 0 && (c->rh.type & ~SR_WIRE_REPLY) == c->flight[i]->type) {
                sr__req *r = c->flight[i];
                take_flight(c, i);
                r->ops->reply(c, r);
                if (!has_req && wait_over(c, w)) {
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
        now = c->io.now_ms(c->io.arg);
        if (!said && now - started >= SAY_WAIT_AFTER_MS) {
            said = 1;
            say_waiting(c, w, now - started, now - last_contact);
        }
        if (!token && c->incarnation != 0 && now >= next_ping) {
            /* A long wait (a big value on its way, a busy coordinator): the
             * coordinator hears from this client all the same (it reports a
             * client it has not heard from for 10 s as gone).  Not before
             * HELLO is answered. */
            ping_id = ++c->next_req;
            sr__conn_send(c, SR_MSG_PING, ping_id, 0, 0, 0, NULL, 0);
            next_ping = now + SR__PING_EVERY_MS;
        }
        if (now - last_contact >= c->timeout_ms) {
            return sr__fail(c, SR_ETIMEDOUT, "%s: no answer from %s for %d ms",
                            has_req                     ? sr_wire_type_name(w->type)
                            : w->kind == SR__WAIT_PULLS ? "PULL"
                                                        : "push",
                            c->endpoint, c->timeout_ms);
        }
        if (now >= next_resend) {
            resend_all(c, w, req);
            if (token) {
                ping_id = ++c->next_req;
                sr__conn_send(c, SR_MSG_PING, ping_id, 0, 0, 0, NULL, 0);
            } else if (interval < 16000) {
                interval *= 2;
            }
            next_resend = now + interval;
        }
    }
}

/* Best effort BYE (lets the coordinator forget us at once); the reply's
 * frames and the map go.  The seam stays (the caller closes it last). */
void
sr__conn_close(sr_client *c)
{
    if (c->io.send != NULL && c->incarnation != 0) {
        sr__conn_send_request(c, SR_MSG_BYE, ++c->next_req, 0, 0, 0, NULL, 0);
    }
    sr__conn_drop_reply(c);
    free(c->rep);
    free(c->flight);
}
