/*
 * Start-up and shutdown: an empty coordinator with the real I/O
 * (sr__coord_init), the store locked, opened and checked against the
 * options (sr__coord_open_store, nothing written yet), the socket bound
 * (sr__coord_open_socket), then the incarnation begun, the rewind asked for
 * and the model loaded (sr__coord_start); sr__coord_free releases all of
 * it.  A start refused before sr__coord_start leaves the store as it was.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/exclusive.h"
#include "coordinator/server_int.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/strbuf.h"
#include "core/text.h"

/* --resume-from-step S: S must be a retained checkpoint.  Checked before
 * anything is written (a new incarnation included), so a refused start
 * changes nothing; the message lists the steps there are. */
static sr_err
check_resume_step(coord *c, int64_t step)
{
    int64_t *steps = NULL;
    size_t   n = 0, len = 0;
    char     have[256] = "none";
    sr_err   rc = sr_store_list_checkpoints(c->st, &steps, &n);

    for (size_t i = 0; rc == SR_OK && i < n; i++) {
        if (steps[i] == step) {
            free(steps);
            return SR_OK;
        }
        if (len < sizeof(have)) { /* snprintf truncates what does not fit */
            len += (size_t)snprintf(have + len, sizeof(have) - len, "%s%" PRId64, i ? " " : "",
                                    steps[i]);
        }
    }
    free(steps);
    return rc != SR_OK ? rc
                       : sr_fail(SR_ENOENT,
                                 "%s: step %" PRId64 " is not a retained checkpoint (retained: %s)",
                                 c->o->store_path, step, have);
}

/* Lock and open the store, check what the options ask of it, and note the
 * largest variable (the socket's message limit): nothing written yet but a
 * new store's empty schema. */
sr_err
sr__coord_open_store(coord *c)
{
    sr_store_opts        so;
    sr_store_var        *metas = NULL;
    size_t               n = 0;
    sr_err               rc;
    const sr_coord_opts *o = c->o;

    sr__coord_store_opts(o, &so);
    so.create = 1;
    /* A store behind its mark is refused here, before anything is written,
     * unless the operator accepted it (recorded by sr__coord_start). */
    so.accept_rollback = o->accept_rollback;
    if ((rc = sr__coord_lock_store(o->store_path, &c->lock_fd)) != SR_OK ||
        (rc = sr_store_open(o->store_path, &so, &c->st)) != SR_OK) {
        return rc;
    }
    if (o->resume_from_step >= 0 && (rc = check_resume_step(c, o->resume_from_step)) != SR_OK) {
        return rc;
    }
    if ((rc = sr_store_list_vars(c->st, &metas, &n)) != SR_OK) {
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        c->largest_var = metas[i].nbytes > c->largest_var ? metas[i].nbytes : c->largest_var;
    }
    free(metas);
    return SR_OK;
}

/* The store opened and the socket bound: a new incarnation, the rewind
 * asked for, the model loaded. */
/* The model failed its checksums at load (the detail says where): say
 * which retained steps are intact, the ones --resume-from-step can
 * restore.  Nothing is served from a corrupt step. */
static void
log_intact_steps(coord *c)
{
    char        why[1024];
    int64_t    *steps = NULL;
    size_t      n = 0;
    sr_strbuf   b;
    const char *text = NULL;

    snprintf(why, sizeof(why), "%s", sr_errdetail());
    sr_strbuf_init(&b);
    if (sr_store_intact_steps(c->st, &steps, &n) == SR_OK) {
        for (size_t i = 0; i < n; i++) {
            sr_strbuf_printf(&b, "%s%" PRId64, i ? "," : "", steps[i]);
        }
    }
    if (sr_strbuf_result(&b, &text) != SR_OK || n == 0) {
        text = "none";
    }
    SR_LOG(SR_LOG_ERR, "COORD-CORRUPT",
           "the store's latest step fails its checksums; intact retained steps: %s (restart "
           "with --resume-from-step S on one of them, or restore the store from a copy)",
           text);
    sr_fail(SR_ECORRUPT, "%s; intact retained steps: %s", why, text);
    free(steps);
    sr_strbuf_free(&b);
}

sr_err
sr__coord_start(coord *c)
{
    sr_store_info        info;
    sr_strbuf            cfg;
    const char          *cfg_text;
    sr_err               rc;
    const sr_coord_opts *o = c->o;

    /* The new incarnation first, so a rewind is recorded as its own (and an
     * accepted rollback, in the same transaction). */
    sr_store_rollback rb;
    if ((rc = sr_store_new_incarnation(c->st, &c->incarnation)) != SR_OK ||
        (rc = sr_store_get_rollback(c->st, &rb)) != SR_OK) {
        return rc;
    }
    if (rb.behind) {
        SR_LOG(SR_LOG_WARN, "COORD-ROLLBACK-ACCEPTED",
               "store=%s incarnation=%" PRIu64 " mark_step=%" PRId64 " store_step=%" PRId64
               " cause=\"%s\"",
               o->store_path, c->incarnation, rb.mark_step, rb.store_step, rb.cause);
    }
    if (o->resume_from_step >= 0) {
        sr_store_info before;
        if ((rc = sr_store_get_info(c->st, &before)) != SR_OK ||
            (rc = sr_store_rewind(c->st, o->resume_from_step)) != SR_OK) {
            return rc;
        }
        SR_LOG(SR_LOG_NOTICE, "COORD-REWIND",
               "store=%s incarnation=%" PRIu64 " from_step=%" PRId64 " to_step=%" PRId64,
               o->store_path, c->incarnation, before.global_step, o->resume_from_step);
    }
    if ((rc = sr_store_get_info(c->st, &info)) != SR_OK) {
        return rc;
    }
    c->global_step = info.global_step;
    c->committed_step = info.global_step;
    c->restored_step = info.global_step;
    sr_strbuf_init(&cfg);
    sr_strbuf_printf(&cfg,
                     "{\"replicas_to_aggregate\":%d,\"total_replicas\":%d,\"optimizer\":\"%s\","
                     "\"learning_rate\":%.17g,\"checkpoint_every_steps\":%d,\"step_log\":%s,"
                     "\"commit\":\"%s\",\"sync\":\"%s\",\"partition_bytes\":%" PRIu64 "}",
                     o->R, o->N, sr__optim_name(o->optim.kind), o->optim.lr, o->checkpoint_every,
                     o->step_log ? "true" : "false", o->commit_async ? "async" : "sync",
                     o->sync_normal ? "normal" : "full", o->partition_bytes);
    rc = sr_strbuf_result(&cfg, &cfg_text);
    if (rc == SR_OK) {
        rc = sr_store_set_config(c->st, cfg_text);
    }
    sr_strbuf_free(&cfg);
    if (rc == SR_OK && (rc = sr__coord_load_model(c)) == SR_ECORRUPT) {
        log_intact_steps(c);
    }
    if (rc != SR_OK) {
        return rc;
    }
    SR_LOG(SR_LOG_NOTICE, "COORD-START",
           "store=%s incarnation=%" PRIu64 " restored_step=%" PRId64 " variables=%zu ready=%d "
           "R=%d N=%d optimizer=%s",
           o->store_path, c->incarnation, c->global_step, c->nvars, info.model_ready, o->R, o->N,
           sr__optim_name(o->optim.kind));
    sr__coord_wait_model(c);
    if (info.model_ready) {
        sr__coord_serve(c);
    }
    return SR_OK;
}

/* 1 for endpoints only this machine can reach. */
static int
is_local_endpoint(const char *ep)
{
    static const char *const local[] = {"ipc://",           "inproc://",    "tcp://127.",
                                        "tcp://localhost:", "tcp://[::1]:", "tcp://lo:"};
    for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++) {
        if (strncmp(ep, local[i], strlen(local[i])) == 0) {
            return 1;
        }
    }
    return 0;
}

sr_err
sr__coord_open_socket(coord *c)
{
    int     one = 1, zero = 0, hwm = SR_COORD_RCVHWM;
    int64_t maxmsg = (int64_t)c->o->max_message_bytes;
    sr_err  rc;

    if ((c->ctx = zmq_ctx_new()) == NULL || (c->sock = zmq_socket(c->ctx, ZMQ_ROUTER)) == NULL) {
        return sr_fail(SR_EMSG, "zmq socket: %s", zmq_strerror(errno));
    }
    zmq_setsockopt(c->sock, ZMQ_ROUTER_MANDATORY, &one, sizeof(one));
    zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_setsockopt(c->sock, ZMQ_RCVHWM, &hwm, sizeof(hwm));
    zmq_setsockopt(c->sock, ZMQ_SNDHWM, &(int){SR_COORD_SNDHWM}, sizeof(int));
    /* A frame may hold the largest variable plus its descriptor. */
    if (c->largest_var > 0 && (int64_t)c->largest_var + (1 << 20) > maxmsg) {
        maxmsg = (int64_t)c->largest_var + (1 << 20);
    }
    zmq_setsockopt(c->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg));
    c->max_msg = maxmsg;
    c->io.ctx = c->sock;
    if (c->o->curve_secret_key_file != NULL) {
        rc = sr__auth_open(c->ctx, c->sock, c->o->curve_secret_key_file, c->o->authorized_keys,
                           &c->auth);
        if (rc != SR_OK) {
            return rc;
        }
    } else if (!is_local_endpoint(c->o->bind)) {
        SR_LOG(SR_LOG_WARN, "COORD-PLAINTEXT",
               "binding %s without CURVE: anyone who can reach it can change the model "
               "(see --curve-secret-key-file, docs/security.md)",
               c->o->bind);
    }
    if (zmq_bind(c->sock, c->o->bind) != 0) {
        return sr_fail(SR_EMSG, "bind %s: %s", c->o->bind, zmq_strerror(errno));
    }
    char   ep[256];
    size_t len = sizeof(ep);
    if (zmq_getsockopt(c->sock, ZMQ_LAST_ENDPOINT, ep, &len) == 0) {
        SR_LOG(SR_LOG_NOTICE, "COORD-BIND", "endpoint=%s curve=%s max_message_bytes=%" PRId64, ep,
               c->auth ? "on" : "off", maxmsg);
    }
    return SR_OK;
}

/* The real I/O (coord_io): the ROUTER socket and the monotonic clock. */
static int
zmq_io_send(void *sock, const void *data, size_t len, int flags)
{
    return zmq_send(sock, data, len, flags);
}

static int
zmq_io_send_msg(void *sock, zmq_msg_t *m, int flags)
{
    return zmq_msg_send(m, sock, flags);
}

static int64_t
clock_now_ms(void *unused)
{
    (void)unused;
    return sr_clock_now_ms();
}

/* An empty coordinator in STARTING with the real I/O (the socket comes
 * with sr__coord_open_socket); release with sr__coord_free. */
void
sr__coord_init(coord *c, const sr_coord_opts *o)
{
    memset(c, 0, sizeof(*c));
    c->o = o;
    c->lock_fd = -1;
    c->state = COORD_STARTING;
    c->io.send = zmq_io_send;
    c->io.send_msg = zmq_io_send_msg;
    c->io.now_ms = clock_now_ms;
    sr__tokens_init(&c->tokens);
}

void
sr_coord_opts_default(sr_coord_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->bind = "tcp://127.0.0.1:7070";
    o->N = -1;
    o->init_tokens = -1;
    o->optim.kind = SR_OPT_SGD;
    o->optim.momentum = 0.9;
    o->optim.beta1 = 0.9;
    o->optim.beta2 = 0.999;
    o->optim.epsilon = 1e-8;
    o->optim.ema_decay = 0.999;
    o->checkpoint_every = 1;
    o->keep_checkpoints = 3;
    o->resume_from_step = -1;
    o->grace_ms = 2000;
    o->log_interval_ms = 5000;
    o->worker_timeout_ms = 10000;
    o->max_message_bytes = 64u << 20;
    o->piggyback_max_bytes = 1u << 20;
    o->commit_interval_ms = 1;
    o->partition_bytes = 2u << 20;
}

void
sr__coord_free(coord *c)
{
    sr__coord_writer_stop(c);
    for (size_t i = 0; i < c->nvars; i++) {
        sr__coord_free_var(&c->vars[i]);
    }
    free(c->vars);
    free(c->index);
    free(c->workers);
    free(c->log);
    free(c->scratch[0]);
    free(c->scratch[1]);
    free(c->sp_idx);
    free(c->sp_rows);
    free(c->sp_start);
    sr__coord_pdecl_drop(c);
    sr__tokens_destroy(&c->tokens);
    sr__auth_close(c->auth);
    if (c->sock != NULL) {
        zmq_close(c->sock);
    }
    if (c->ctx != NULL) {
        /* After it, no pull slot is written any more.  A signal (a second
         * SIGTERM) interrupts it with EINTR before the I/O thread is done:
         * go on waiting, or the slots below would be freed under it. */
        while (zmq_ctx_term(c->ctx) != 0 && errno == EINTR) {
        }
    }
    for (size_t i = 0; i < c->nclients; i++) {
        free(c->clients[i].held);
        free(c->clients[i].pulls);
    }
    free(c->clients);
    sr_store_close(c->st);
    sr__coord_unlock_store(c->lock_fd);
}
