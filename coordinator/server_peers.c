/*
 * Peers: the client table (sr__coord_admit: only this job's tasks, each
 * client keeping its task index; sr__coord_reclaim_gone: clients that left),
 * the per-task worker records the store keeps (sr__coord_touch_worker), push
 * answers held back to leave with the client's next reply
 * (sr__coord_push_reply, sr__coord_flush_held), parked TOKEN requests and
 * the token rule (token_floor, sr__coord_give_token, sr__coord_serve_parked),
 * and the pull slots that bound what a client may pin
 * (sr__coord_take_pull_slots).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/server_int.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/text.h"

static client *
find_client(coord *c, uint64_t id)
{
    for (size_t i = 0; i < c->nclients; i++) {
        if (c->clients[i].client_id == id) {
            return &c->clients[i];
        }
    }
    return NULL;
}

static worker *
get_worker(coord *c, int32_t task)
{
    for (size_t i = 0; i < c->nworkers; i++) {
        if (c->workers[i].task == task) {
            return &c->workers[i];
        }
    }
    worker *w = sr_grow_array(c->workers, &c->cap_workers, c->nworkers + 1, sizeof(*w));
    if (w == NULL) {
        return NULL;
    }
    c->workers = w;
    w = &c->workers[c->nworkers++];
    memset(w, 0, sizeof(*w));
    w->task = task;
    return w;
}

worker *
sr__coord_get_worker(coord *c, int32_t task)
{
    return get_worker(c, task);
}

void
sr__coord_touch_worker(coord *c, int32_t task, int64_t local_step)
{
    worker *w = get_worker(c, task);
    if (w != NULL) {
        if (local_step >= 0) {
            w->local_step = local_step;
        }
        w->last_seen_wall_ms = sr_clock_wall_ms();
    }
}

/* Send the push answers held back for cl, in order: one message each
 * (HELD_ALONE), or chained, each flagged SR_WIRE_F_CHAIN, after the routing
 * id the caller has just sent: before the caller's reply
 * (HELD_BEFORE_REPLY), or on their own, the last one unflagged and ending
 * the message (HELD_ONE_MESSAGE). */
void
sr__coord_send_held(coord *c, client *cl, int how)
{
    for (size_t i = 0; i < cl->nheld; i++) {
        sr_wire_push_rep rep = {cl->held[i].outcome};
        uint8_t          buf[8];
        size_t           n = sr_wire_push_rep_encode(&rep, buf, sizeof(buf));
        int              end = how == HELD_ONE_MESSAGE && i + 1 == cl->nheld;
        if (how == HELD_ALONE) {
            frame f = {buf, n};
            sr__coord_send_reply(c, cl->rid, cl->rid_len, &cl->held[i].h, SR_OK, cl->held[i].step,
                                 &f, 1);
        } else if (sr__coord_send_hdr(c, &cl->held[i].h, SR_OK, cl->held[i].step,
                                      end ? 0 : SR_WIRE_F_CHAIN, 1) == 0) {
            /* the rest of a message ZeroMQ took */
            sr__coord_send(c, buf, n, end ? 0 : ZMQ_SNDMORE);
        }
    }
    if (cl->nheld > 0) {
        cl->nheld = 0;
        c->nholding--;
    }
}

/* The held answers, now: in one message to a client that reads chains. */
void
sr__coord_flush_held(coord *c, client *cl)
{
    int chained = cl->chained > 0 && cl->nheld > 1;
    if (chained && sr__coord_send(c, cl->rid, cl->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        chained = 0; /* the peer is gone or its queue full: each is tried (and lost) alone */
    }
    sr__coord_send_held(c, cl, chained ? HELD_ONE_MESSAGE : HELD_ALONE);
}

/* After a batch of messages: answers held for a client that is not waiting
 * for its token go out now (it may be waiting for them); a waiting one's
 * go out with the token, or after PUSH_REPLY_HOLD_MS (well before the
 * client's one-second resend). */
void
sr__coord_flush_held_batch(coord *c, int all)
{
    int64_t now = sr__coord_now_ms(c);

    for (size_t i = 0; c->nholding > 0 && i < c->nclients; i++) {
        client *cl = &c->clients[i];
        if (cl->nheld > 0 &&
            (all || !cl->parked || now - cl->held_since_ms >= PUSH_REPLY_HOLD_MS)) {
            sr__coord_flush_held(c, cl);
        }
    }
}

void
sr__coord_push_reply(coord *c, req_ctx *r, int outcome)
{
    sr_wire_push_rep rep = {(uint8_t)outcome};
    uint8_t          buf[8];
    frame            f = {buf, sr_wire_push_rep_encode(&rep, buf, sizeof(buf))};
    client          *cl = r->cl;

    if (outcome == SR_PUSH_ACCEPTED) {
        cl->accepted++;
        sr__coord_cursor_accepted(c, cl->task, r->h.local_step); /* issue 24: cursor */
    } else if (outcome == SR_PUSH_STALE) {
        cl->stale++;
    } else {
        cl->duplicate++;
    }
    /* Held back until the end of this batch at least (sr__coord_flush_held_batch). */
    if (cl->nheld >= (cl->chained > 0 ? PUSH_REPLY_HOLD_MAX_CHAIN : PUSH_REPLY_HOLD_MAX)) {
        sr__coord_flush_held(c, cl);
    }
    held_reply *q = sr_grow_array(cl->held, &cl->cap_held, cl->nheld + 1, sizeof(*q));
    if (q == NULL) { /* no memory: answer now, after what is held */
        sr__coord_flush_held(c, cl);
        sr__coord_send_reply(c, cl->rid, cl->rid_len, &r->h, SR_OK, c->global_step, &f, 1);
        return;
    }
    cl->held = q;
    if (cl->nheld == 0) {
        cl->held_since_ms = sr__coord_now_ms(c);
        c->nholding++;
    }
    q[cl->nheld].h = r->h;
    q[cl->nheld].step = c->global_step;
    q[cl->nheld].outcome = (uint8_t)outcome;
    cl->nheld++;
}

/* The smallest token value cl may take now.  Tokens carry no owner, but a
 * worker takes at most its task's share of one value's tokens (one when
 * N >= R): a worker that already holds a token of step g and pushed for it
 * waits for g + 1 instead of taking the token of a worker still on its
 * way.  (Its first token may be of the step it is on: the seed's first
 * rounds take the init tokens so.) */
static int64_t
token_floor(const coord *c, const client *cl)
{
    int64_t floor = 0;
    if (cl->have_token) {
        floor =
            cl->last_token_count < sr__coord_task_share(c->o) ? cl->last_token : cl->last_token + 1;
    }
    return floor > cl->min_token ? floor : cl->min_token;
}

int
sr__coord_give_token(coord *c, client *cl, uint64_t req_id, int want)
{
    int64_t v;

    if (c->commit_pending || sr__tokens_take_min(&c->tokens, token_floor(c, cl), &v) != 0) {
        return -1;
    }
    if (sr__coord_send_token_reply(c, cl, req_id, v, want) != 0) {
        /* The peer is gone: the token must not vanish with it. */
        sr__tokens_unget(&c->tokens, v);
        cl->parked = 0;
        return -2;
    }
    cl->parked = 0;
    cl->token_req = req_id;
    cl->token_val = v;
    cl->last_token_count = cl->have_token && cl->last_token == v ? cl->last_token_count + 1 : 1;
    cl->last_token = v;
    cl->have_token = 1;
    sr__coord_touch_worker(c, cl->task, v);
    return 0;
}

/* Hand out tokens to the parked clients, oldest request first; a client
 * waiting for a later step's token (min_token) than any queued is passed
 * over, and the ones after it are served. */
void
sr__coord_serve_parked(coord *c)
{
    uint64_t after = 0; /* parked_order of the last client considered */

    while (c->tokens.len > 0 && !c->commit_pending) {
        client *best = NULL;
        for (size_t i = 0; i < c->nclients; i++) {
            client *cl = &c->clients[i];
            if (cl->parked && cl->parked_order > after &&
                (best == NULL || cl->parked_order < best->parked_order)) {
                best = cl;
            }
        }
        if (best == NULL) {
            return;
        }
        after = best->parked_order;
        sr__coord_give_token(c, best, best->parked_req, best->parked_want);
    }
}

/* Free pull slots of r's client for the values of vars[0..n): 0, or -1
 * after an error reply: too many replies are still being sent to it
 * (PULLS_IN_FLIGHT...), or no memory. */
int
sr__coord_take_pull_slots(coord *c, const req_ctx *r, cvar *const *vars, int n, pull_slot **out)
{
    client  *cl = r->cl;
    uint64_t pinned = 0;
    int      busy = 0, got = 0;

    if (cl->pulls == NULL && (cl->pulls = calloc(PULLS_IN_FLIGHT, sizeof(*cl->pulls))) == NULL) {
        REPLY_ERR(r, SR_ENOMEM, "pull %s: no memory", SR_ESC(vars[0]->meta.name));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        pinned += vars[i]->meta.nbytes;
    }
    for (int i = 0; i < PULLS_IN_FLIGHT; i++) {
        if (atomic_load(&cl->pulls[i].busy) != 0) {
            busy++;
            pinned += cl->pulls[i].bytes;
        } else if (got < n) {
            out[got++] = &cl->pulls[i];
        }
    }
    if (got < n || (busy + n > PULLS_IN_FLIGHT_BIG && pinned > PULL_PIN_BYTES)) {
        /* libsyncrep keeps fewer in flight; its resends of a slow pull
         * reuse the request id, and the first reply wins. */
        REPLY_ERR(r, SR_EPROTO,
                  "pull %s: too many earlier pull replies to this client are still being sent "
                  "(at most %d, or %d holding over %u MiB)",
                  SR_ESC(vars[0]->meta.name), PULLS_IN_FLIGHT, PULLS_IN_FLIGHT_BIG,
                  PULL_PIN_BYTES >> 20);
        return -1;
    }
    return 0;
}

/* Forget a client that left (BYE, or silent past the worker timeout) once
 * nothing of it is in flight: no parked token, no held answer, no pull
 * reply ZeroMQ still sends from its slots.  Its counts go to its task's
 * record, so status totals stay whole.  1 if it was reclaimed. */
static int
reclaim_client(coord *c, size_t i)
{
    client *cl = &c->clients[i];
    worker *w;

    if (!cl->gone || cl->parked || cl->nheld > 0) {
        return 0;
    }
    for (size_t k = 0; cl->pulls != NULL && k < PULLS_IN_FLIGHT; k++) {
        if (atomic_load(&cl->pulls[k].busy) != 0) {
            return 0;
        }
    }
    if ((w = get_worker(c, cl->task)) != NULL) {
        w->accepted += cl->accepted;
        w->stale += cl->stale;
        w->duplicate += cl->duplicate;
        w->errors += cl->errors;
        w->chained += cl->chained;
        w->over_share += cl->over_share;
    }
    SR_LOG(SR_LOG_DEBUG, "COORD-CLIENT-RECLAIMED", "task=%d client=%016" PRIx64, cl->task,
           cl->client_id);
    free(cl->held);
    free(cl->pulls);
    c->clients[i] = c->clients[--c->nclients];
    return 1;
}

/* Reclaim the clients gone for longer than `idle_ms` (0: any gone one);
 * how many were. */
size_t
sr__coord_reclaim_gone(coord *c, int64_t idle_ms)
{
    int64_t now = sr__coord_now_ms(c);
    size_t  n = 0;

    for (size_t i = c->nclients; i-- > 0;) {
        if (now - c->clients[i].last_seen_ms >= idle_ms && reclaim_client(c, i)) {
            n++;
        }
    }
    return n;
}

static void
count_refused(coord *c, const char *why)
{
    sr__coord_count_bad(c, &c->refused, &c->last_refused_log_ms, "COORD-REFUSED", why);
}

/* The job's task indexes are 0 .. job_tasks - 1: N by default, or
 * --max-tasks (spare workers beyond N). */
static int
job_tasks(const sr_coord_opts *o)
{
    return o->max_tasks > 0 ? o->max_tasks : o->N;
}

/* Clients admitted at once: --max-clients, by default a few per task. */
static size_t
client_limit(const sr_coord_opts *o)
{
    int tasks = job_tasks(o) > o->R ? job_tasks(o) : o->R;
    return o->max_clients > 0 ? (size_t)o->max_clients : (size_t)(tasks > 16 ? 4 * tasks : 64);
}

/* The client of request r (r->cl), made at its first request.  Only a
 * worker of this job is admitted: task index in [0, N), the same in every
 * request of a client, and a place in the client table (max_clients;
 * clients that left are reclaimed to make room).  Anything else is
 * answered with an error and changes nothing.  0, or -1 after the reply. */
int
sr__coord_admit(coord *c, req_ctx *r)
{
    const sr_wire_header *h = &r->h;
    client               *cl = find_client(c, h->client_id);
    char                  why[160];

    if (cl != NULL && h->task_index != cl->task) {
        snprintf(why, sizeof(why), "client %016" PRIx64 " is task %d; a request said task %d",
                 h->client_id, cl->task, h->task_index);
        count_refused(c, why);
        REPLY_ERR(r, SR_EPROTO, "%s: a client keeps its task index", why);
        return -1;
    }
    if (cl == NULL && (h->task_index < 0 || h->task_index >= job_tasks(c->o))) {
        snprintf(why, sizeof(why), "task index %d is not a worker of this job", h->task_index);
        count_refused(c, why);
        REPLY_ERR(r, SR_EINVAL, "%s: its workers are tasks 0..%d (--total-replicas, --max-tasks)",
                  why, job_tasks(c->o) - 1);
        return -1;
    }
    if (cl == NULL && c->nclients >= client_limit(c->o) && sr__coord_reclaim_gone(c, 0) == 0) {
        snprintf(why, sizeof(why), "client table full (%zu clients)", c->nclients);
        count_refused(c, why);
        REPLY_ERR(r, SR_ELIMIT,
                  "%s: no more clients are admitted until one leaves (--max-clients %zu)", why,
                  client_limit(c->o));
        return -1;
    }
    if (cl == NULL) {
        cl = sr_grow_array(c->clients, &c->cap_clients, c->nclients + 1, sizeof(*cl));
        if (cl == NULL) {
            REPLY_ERR(r, SR_ENOMEM, "client table: out of memory");
            return -1;
        }
        c->clients = cl;
        cl = &c->clients[c->nclients++];
        memset(cl, 0, sizeof(*cl));
        cl->client_id = h->client_id;
        cl->task = h->task_index;
        cl->joined_ms = sr__coord_now_ms(c);
        SR_LOG(SR_LOG_NOTICE, "COORD-WORKER-JOIN", "task=%d client=%016" PRIx64, h->task_index,
               h->client_id);
    } else if (cl->gone) {
        cl->gone = 0;
        SR_LOG(SR_LOG_NOTICE, "COORD-WORKER-BACK", "task=%d client=%016" PRIx64, cl->task,
               cl->client_id);
    }
    if (r->rid_len <= sizeof(cl->rid)) {
        memcpy(cl->rid, r->rid, r->rid_len);
        cl->rid_len = r->rid_len;
    }
    cl->last_seen_ms = sr__coord_now_ms(c);
    r->cl = cl;
    return 0;
}
