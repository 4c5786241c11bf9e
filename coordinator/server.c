/*
 * The coordinator's loop: one thread, one ROUTER socket.  Each turn drains
 * up to 256 queued messages (recv_one -> sr__coord_dispatch -> dispatch_one:
 * checks shared by every request, then the handler of its type), sends the
 * push answers held for the batch, and does the periodic work (commit
 * retries, expiry of parked tokens, workers that left, the step-rate log).
 * It also performs the lifecycle's transitions drawn in server_int.h
 * (sr__coord_wait_model, sr__coord_serve, drain, stop_when_drained), and
 * sr_coord_run ties start-up, the loop and the final commit together.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "coordinator/exclusive.h"
#include "coordinator/server_int.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/text.h"

static void
count_malformed(coord *c, const char *why)
{
    sr__coord_count_bad(c, &c->malformed, &c->last_malformed_log_ms, "COORD-MALFORMED", why);
}

/* A body frame larger than the largest variable plus 1 MiB: nothing but a
 * DECLARE (whose size the handler checks against the declared shape) may
 * be that big. */
static int
oversized(const coord *c, zmq_msg_t *body, int n)
{
    uint64_t limit = c->max_var_bytes + (1u << 20);
    for (int i = 0; i < n; i++) {
        if (zmq_msg_size(&body[i]) > limit) {
            return 1;
        }
    }
    return 0;
}

/* FINISH: the chief ends the job at the current global step (the steps
 * applied so far; a step in progress is dropped); from any other task
 * SR_EINVAL, before the model is ready SR_ENOTREADY; again: a no-op. */
static void
handle_finish(coord *c, req_ctx *r)
{
    if (r->cl->task != 0) {
        REPLY_ERR(r, SR_EINVAL, "finish: only the chief (task 0) ends a job, not task %d",
                  r->cl->task);
        return;
    }
    if (c->state == COORD_WAIT_MODEL) {
        REPLY_ERR(r, SR_ENOTREADY, "finish: model not ready");
        return;
    }
    if (c->state == COORD_SERVING) {
        sr__coord_end_job(c, "finished by the chief");
    }
    sr__coord_send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, NULL, 0);
}

/* One request with header h (decoded) and nbody body frames, from the peer
 * `rid`; `chained`: it came in a chain (the client reads chained replies). */
static void
dispatch_one(coord *c, zmq_msg_t *rid, const sr_wire_header *h, zmq_msg_t *body, int nbody,
             int chained)
{
    req_ctx r;
    int     type;

    memset(&r, 0, sizeof(r));
    r.rid = zmq_msg_data(rid);
    r.rid_len = zmq_msg_size(rid);
    r.h = *h;
    r.body = body;
    r.nbody = nbody;
    type = r.h.type;
    if (type & SR_WIRE_REPLY) {
        count_malformed(c, "a reply sent to the coordinator");
        return;
    }
    if (type != SR_MSG_DECLARE && oversized(c, r.body, r.nbody)) {
        /* Larger than any variable: no valid message of this type is this
         * big.  (Beyond the transport's limit, ZeroMQ drops the connection
         * before the coordinator sees anything.) */
        count_malformed(c, "oversized frame");
        REPLY_ERR(&r, SR_EPROTO, "a frame is larger than any variable of the model plus headroom");
        return;
    }
    if (type == SR_MSG_STATUS) {
        sr__coord_handle_status(c, &r); /* operators' tools are not workers */
        return;
    }
    if (type == SR_MSG_CTL) {
        sr__coord_handle_ctl(c, &r); /* issue 26: nor is `syncrep ctl` */
        return;
    }
    if (sr__coord_admit(c, &r) != 0) {
        return;
    }
    r.cl->chained += (uint64_t)chained;
    if (type != SR_MSG_PING && type != SR_MSG_TOKEN && r.h.request_id > r.cl->last_req) {
        r.cl->last_req = r.h.request_id;
        if (r.h.request_id > r.cl->parked_req) {
            /* The client moved on: it no longer waits for a token.  (An
             * older request re-sent while the token is parked, a pipelined
             * push, does not withdraw it.) */
            r.cl->parked = 0;
        }
    }
    if (type != SR_MSG_HELLO && type != SR_MSG_PING && type != SR_MSG_STATUS &&
        r.h.incarnation != c->incarnation) {
        if (type == SR_MSG_PUSH || type == SR_MSG_PUSH_SPARSE) {
            r.cl->stale++;
        }
        REPLY_ERR(&r, SR_ESTALE, "request for incarnation %" PRIu64 ", coordinator is %" PRIu64,
                  r.h.incarnation, c->incarnation);
        return;
    }
    if (c->state == COORD_DONE &&
        (type == SR_MSG_PUSH || type == SR_MSG_PUSH_SPARSE || type == SR_MSG_TOKEN)) {
        REPLY_ERR(&r, SR_EDONE, "the job has ended at step %" PRId64, c->global_step);
        return;
    }
    switch (type) {
    case SR_MSG_HELLO:
        sr__coord_handle_hello(c, &r);
        break;
    case SR_MSG_DECLARE:
        sr__coord_handle_declare(c, &r);
        break;
    case SR_MSG_READY:
        sr__coord_handle_ready(c, &r);
        break;
    case SR_MSG_PULL:
        sr__coord_handle_pull(c, &r);
        break;
    case SR_MSG_PUSH:
        sr__coord_handle_push(c, &r);
        break;
    case SR_MSG_PUSH_SPARSE:
        sr__coord_handle_push_sparse(c, &r);
        break;
    case SR_MSG_TOKEN:
        sr__coord_handle_token(c, &r);
        break;
    case SR_MSG_PING:
        sr__coord_handle_ping(c, &r);
        break;
    case SR_MSG_BYE:
        r.cl->parked = 0;
        r.cl->gone = 1;
        SR_LOG(SR_LOG_NOTICE, "COORD-WORKER-LEFT", "task=%d client=%016" PRIx64 " (bye)",
               r.cl->task, r.cl->client_id);
        sr__coord_send_reply(c, r.rid, r.rid_len, &r.h, SR_OK, c->global_step, NULL, 0);
        break;
    case SR_MSG_FINISH:
        handle_finish(c, &r);
        break;
    case SR_MSG_MODEL:
        sr__coord_handle_model(c, &r);
        break;
    case SR_MSG_CURSOR: /* issue 24: cursor */
        sr__coord_handle_cursor(c, &r);
        break;
    default:
        count_malformed(c, "unknown type");
        REPLY_ERR(&r, SR_EPROTO, "unknown message type %d", type);
        break;
    }
}

/* A message: the routing id, then one request, or a chain of them
 * (docs/protocol.md, Chains): each PUSH header flagged SR_WIRE_F_CHAIN is
 * followed by its two body frames and the next request's header.  The
 * requests are handled in order, as if they had come one by one. */
void
sr__coord_dispatch(coord *c, zmq_msg_t *parts, int nparts)
{
    int at = 1;

    if (nparts < 2 || zmq_msg_size(&parts[0]) == 0) {
        count_malformed(c, "fewer than two frames");
        return;
    }
    for (;;) {
        sr_wire_header h;
        int            n = nparts - at;

        if (sr_wire_header_decode(zmq_msg_data(&parts[at]), zmq_msg_size(&parts[at]), &h) !=
            SR_OK) {
            count_malformed(c, sr_errdetail());
            return; /* nothing trustworthy to reply to */
        }
        if ((h.flags & SR_WIRE_F_CHAIN) && !(h.type & SR_WIRE_REPLY)) {
            if (h.type != SR_MSG_PUSH || n < 4) {
                count_malformed(c, "bad chain");
                sr__coord_send_error(
                    c, zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), &h, SR_EPROTO,
                    "a chained request must be a PUSH with two body frames, followed "
                    "by another request");
                return; /* the rest of the chain is not handled */
            }
            n = 3;
        }
        dispatch_one(c, &parts[0], &h, &parts[at + 1], n - 1, at > 1 || at + n < nparts);
        at += n;
        if (at >= nparts) {
            return;
        }
    }
}

/* Two clients with one task index, the older still heard from well after
 * the newer joined: two workers were started with the same task index
 * (they share one task's place in each step).  A restarted worker's old client
 * falls silent instead, or says BYE.  Logged once per client. */
static void
check_shared_tasks(coord *c, int64_t now)
{
    if (now - c->last_shared_check_ms < 1000) {
        return;
    }
    c->last_shared_check_ms = now;
    for (size_t i = 0; i < c->nclients; i++) {
        client *a = &c->clients[i];
        for (size_t j = 0; !a->gone && !a->shared_warned && j < c->nclients; j++) {
            client *b = &c->clients[j];
            if (j != i && !b->gone && b->task == a->task && b->joined_ms >= a->joined_ms &&
                a->last_seen_ms > b->joined_ms + SHARED_TASK_MS) {
                a->shared_warned = b->shared_warned = 1;
                SR_LOG(SR_LOG_WARN, "COORD-TASK-SHARED",
                       "task=%d clients=%016" PRIx64 ",%016" PRIx64
                       " both active: two workers started with the same task index? They "
                       "share one task's place in each step",
                       a->task, a->client_id, b->client_id);
            }
        }
    }
}

static void
periodic(coord *c)
{
    int64_t now = sr__coord_now_ms(c);

    if (c->commit_pending && now >= c->commit_retry_ms) {
        sr__coord_commit_and_release(c);
    }
    if (c->writer_started) {
        sr__coord_async_snapshot(c);
    }
    for (size_t i = 0; i < c->nclients; i++) {
        client *cl = &c->clients[i];
        if (cl->parked && now - cl->last_seen_ms > PARKED_EXPIRE_MS) {
            cl->parked = 0; /* stopped asking: do not hand it a token */
        }
        if (!cl->gone && now - cl->last_seen_ms > c->o->worker_timeout_ms) {
            cl->gone = 1;
            SR_LOG(SR_LOG_NOTICE, "COORD-WORKER-LEFT",
                   "task=%d client=%016" PRIx64 " (not heard from for %d ms)", cl->task,
                   cl->client_id, c->o->worker_timeout_ms);
        }
    }
    sr__coord_members_tick(c); /* issue 26: membership, R' */
    check_shared_tasks(c, now);
    sr__coord_reclaim_gone(c, RECLAIM_AFTER_MS);
    sr__coord_metrics_publish(c, 0); /* issue 26: at most every 100 ms */
    if (now - c->last_rate_ms >= c->o->log_interval_ms) {
        double secs = (now - c->last_rate_ms) / 1000.0;
        c->steps_per_s = c->last_rate_ms ? (c->global_step - c->last_rate_step) / secs : 0.0;
        if (c->last_rate_ms && c->global_step != c->last_rate_step) {
            SR_LOG(SR_LOG_INFO, "COORD-STEP",
                   "global_step=%" PRId64 " committed=%" PRId64 " steps_per_s=%.2f lr=%.9g"
                   " checkpoint_interval_steps=%" PRId64 " checkpoint_overhead_pct=%.2f",
                   c->global_step, c->committed_step, c->steps_per_s,
                   sr__optim_lr_at(&c->o->optim, c->global_step),                   /* issue 25 */
                   sr__ckpt_interval(&c->ckpt), 100 * sr__ckpt_overhead(&c->ckpt)); /* 28 */
        }
        c->last_rate_ms = now;
        c->last_rate_step = c->global_step;
    }
}

/* ---- lifecycle transitions (server_int.h draws them) ------------------- */

/* DONE: how long the coordinator stays up for the workers to learn of the
 * end (each gets SR_EDONE) when they do not all leave first. */
#define DONE_LINGER_MS 10000

/* STARTING -> WAIT_MODEL: the incarnation has begun and the store's model
 * is loaded (sr__coord_start). */
void
sr__coord_wait_model(coord *c)
{
    SR_ASSERT(c->state == COORD_STARTING);
    c->state = COORD_WAIT_MODEL;
}

/* WAIT_MODEL -> SERVING: the model is ready (restored from the store, or
 * marked by the chief): K init tokens at the current global step. */
void
sr__coord_serve(coord *c)
{
    int k = c->o->init_tokens >= 0 ? c->o->init_tokens : c->o->R;

    SR_ASSERT(c->state == COORD_WAIT_MODEL);
    c->state = COORD_SERVING;
    if (sr__tokens_put(&c->tokens, c->global_step, (size_t)k) != SR_OK) {
        SR_LOG(SR_LOG_ERR, "COORD-TOKENS", "cannot queue %d init tokens: %s", k, sr_errdetail());
    }
    SR_LOG(SR_LOG_NOTICE, "COORD-READY",
           "model ready variables=%zu trainable=%zu global_step=%" PRId64 " init_tokens=%d",
           c->nvars, c->ntrainable, c->global_step, k);
    if (sr__coord_at_max_steps(c)) {
        sr__coord_end_job(c, "the store is at --max-steps already");
    }
}

/* SERVING -> DONE: the job has ended at the global step (why: --max-steps
 * or the chief's FINISH).  No token is queued any more; the workers
 * waiting for one, and every later push or token request, are answered
 * SR_EDONE; pulls of the final values are still served. */
void
sr__coord_end_job(coord *c, const char *why)
{
    SR_ASSERT(c->state == COORD_SERVING);
    c->state = COORD_DONE;
    c->done_at_ms = sr__coord_now_ms(c);
    sr__tokens_drop_below(&c->tokens, INT64_MAX);
    SR_LOG(SR_LOG_NOTICE, "COORD-DONE", "global_step=%" PRId64 " (%s): the job has ended",
           c->global_step, why);
    for (size_t i = 0; i < c->nclients; i++) {
        client        *cl = &c->clients[i];
        sr_wire_header h;
        if (!cl->parked) {
            continue;
        }
        memset(&h, 0, sizeof(h));
        h.type = SR_MSG_TOKEN;
        h.request_id = cl->parked_req;
        h.client_id = cl->client_id;
        h.task_index = cl->task;
        h.incarnation = c->incarnation;
        cl->parked = 0;
        sr__coord_flush_held(c, cl);
        sr__coord_send_error(c, cl->rid, cl->rid_len, &h, SR_EDONE, "the job has ended");
    }
}

/* DONE -> STOPPED once every client has left (said BYE, or fell silent;
 * a coordinator that started DONE waits for one to come), after
 * DONE_LINGER_MS, or on the stop flag. */
static void
stop_when_done(coord *c, int stop)
{
    int live = 0;

    SR_ASSERT(c->state == COORD_DONE);
    for (size_t i = 0; i < c->nclients; i++) {
        live += !c->clients[i].gone;
    }
    if (stop || (live == 0 && c->nclients > 0) ||
        sr__coord_now_ms(c) - c->done_at_ms >= DONE_LINGER_MS) {
        c->state = COORD_STOPPED;
    }
}

static int
step_in_progress(const coord *c)
{
    for (size_t i = 0; i < c->nvars; i++) {
        for (uint32_t p = 0; c->vars[i].has_acc && p < c->vars[i].nparts; p++) {
            if (c->vars[i].acc[p].count > 0 || c->vars[i].acc[p].taken) {
                return 1;
            }
        }
    }
    return 0;
}

/* The stop flag: SERVING -> DRAINING, to finish the step in progress
 * within grace_ms; WAIT_MODEL -> STOPPED, as no step can be in progress
 * before the model is ready. */
static void
drain(coord *c)
{
    SR_ASSERT(c->state == COORD_WAIT_MODEL || c->state == COORD_SERVING);
    SR_LOG(SR_LOG_NOTICE, "COORD-STOPPING",
           "signal received; finishing the step in progress (grace %d ms)", c->o->grace_ms);
    if (c->state == COORD_WAIT_MODEL) {
        c->state = COORD_STOPPED;
        return;
    }
    c->state = COORD_DRAINING;
    c->drain_deadline_ms = sr__coord_now_ms(c) + c->o->grace_ms;
}

/* DRAINING -> STOPPED once no step is in progress or the grace is over. */
static void
stop_when_drained(coord *c)
{
    SR_ASSERT(c->state == COORD_DRAINING);
    if (!step_in_progress(c) || sr__coord_now_ms(c) >= c->drain_deadline_ms) {
        c->state = COORD_STOPPED;
    }
}

/* Receive one multipart message (non-blocking) and dispatch it.  Returns 1
 * if a message was handled, 0 if none was waiting. */
static int
recv_one(coord *c)
{
    zmq_msg_t parts[MAX_PARTS];
    int       n = 0, more = 1, overflow = 0;

    while (more) {
        zmq_msg_t *m = &parts[n < MAX_PARTS ? n : MAX_PARTS - 1];
        if (n >= MAX_PARTS) {
            zmq_msg_close(m); /* keep the last slot for draining */
            overflow = 1;
        }
        zmq_msg_init(m);
        if (zmq_msg_recv(m, c->sock, n == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            zmq_msg_close(m);
            if (n == 0) {
                return 0;
            }
            break;
        }
        more = zmq_msg_more(m);
        c->m_bytes_in += zmq_msg_size(m); /* issue 26: syncrep_received_bytes_total */
        if (n < MAX_PARTS) {
            n++;
        }
    }
    if (overflow) {
        count_malformed(c, "too many frames");
        /* Reply so the peer is not left waiting, if the header decodes. */
        sr_wire_header h;
        if (n >= 2 &&
            sr_wire_header_decode(zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), &h) == SR_OK &&
            !(h.type & SR_WIRE_REPLY)) {
            sr__coord_send_error(c, zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), &h, SR_EPROTO,
                                 "too many frames");
        }
    } else {
        sr__coord_dispatch(c, parts, n);
    }
    for (int i = 0; i < n; i++) {
        zmq_msg_close(&parts[i]);
    }
    return 1;
}

sr_err
sr_coord_run(const sr_coord_opts *o, volatile sig_atomic_t *stop)
{
    coord  c;
    sr_err rc = SR_OK;

    if (o->R < 1 || o->N < 1) {
        return sr_fail(SR_EINVAL, "replicas-to-aggregate (%d) and total-replicas (%d) must be >= 1",
                       o->R, o->N);
    }
    int k = o->init_tokens >= 0 ? o->init_tokens : o->R;
    if (k < o->R - o->N) {
        return sr_fail(SR_EINVAL,
                       "--init-tokens %d is too few to finish the first step: need at least "
                       "R - N = %d",
                       k, o->R - o->N);
    }
    if ((rc = sr_coord_check_checkpoint(o)) != SR_OK) { /* issue 28 */
        return rc;
    }
    sr__coord_init(&c, o);
    /* The endpoint checked and bound before the store counts an incarnation:
     * a refused start writes nothing into it (a new store stays empty). */
    if ((rc = sr__coord_check_endpoint(o->bind)) != SR_OK ||
        (rc = sr__coord_metrics_open(&c)) != SR_OK || /* issue 26: --metrics-bind */
        (rc = sr__coord_open_store(&c)) != SR_OK || (rc = sr__coord_open_socket(&c)) != SR_OK ||
        (rc = sr__coord_start(&c)) != SR_OK ||
        (o->commit_async && (rc = sr__coord_writer_start(&c)) != SR_OK)) {
        SR_LOG(SR_LOG_ERR, "COORD-START-FAIL", "err=%s detail=\"%s\"", sr_errname(rc),
               sr_errdetail());
        sr__coord_free(&c);
        return rc;
    }
    c.last_rate_ms = sr__coord_now_ms(&c);
    c.last_rate_step = c.global_step;
    sr__coord_metrics_publish(&c, 1); /* issue 26: the first scrape finds the started state */
    for (;;) {
        zmq_pollitem_t it[3] = {{c.sock, 0, ZMQ_POLLIN, 0}};
        int            nit = 1 + sr__auth_pollitems(c.auth, &it[1]);
        int            handled = 0;

        if (*stop && (c.state == COORD_WAIT_MODEL || c.state == COORD_SERVING)) {
            drain(&c);
        }
        if (c.state == COORD_DRAINING) {
            stop_when_drained(&c);
        }
        if (c.state == COORD_DONE) {
            stop_when_done(&c, *stop);
        }
        if (c.state == COORD_STOPPED) {
            break;
        }
        /* A snapshot waiting (for the writer or --commit-interval-ms)
         * goes out soon. */
        int wait_ms = c.writer_started && c.commit_wanted ? 1 : 100;
        if (zmq_poll(it, nit, wait_ms) < 0 && errno != EINTR) {
            rc = sr_fail(SR_EMSG, "zmq_poll: %s", zmq_strerror(errno));
            c.state = COORD_STOPPED; /* the socket failed: nothing more to serve */
            break;
        }
        sr__auth_handle(c.auth);
        /* Drain what is queued before the periodic work, in bounded batches. */
        while (handled < 256 && recv_one(&c)) {
            handled++;
        }
        sr__coord_flush_held_batch(&c, 0);
        periodic(&c);
    }
    sr__coord_flush_held_batch(&c, 1);
    sr__coord_log_wal_checkpoints(&c);
    if (c.writer_started) {
        sr_err wrc = sr__coord_writer_stop(&c);
        if (wrc != SR_OK) {
            SR_LOG(SR_LOG_ERR, "COORD-COMMIT-FAIL", "the writer's last snapshot: %s",
                   sr_errdetail());
        }
    }
    if (rc == SR_OK && (c.global_step != c.committed_step || c.nlog > 0)) {
        rc = sr__coord_commit_now(&c);
        if (rc != SR_OK) {
            SR_LOG(SR_LOG_ERR, "COORD-COMMIT-FAIL", "final commit of step %" PRId64 ": %s",
                   c.global_step, sr_errdetail());
        }
    }
    sr__coord_log_commits(&c);
    SR_LOG(SR_LOG_NOTICE, "COORD-SHUTDOWN",
           "incarnation=%" PRIu64 " global_step=%" PRId64 " committed_step=%" PRId64, c.incarnation,
           c.global_step, c.committed_step);
    sr__coord_free(&c);
    return rc;
}
