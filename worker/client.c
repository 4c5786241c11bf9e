/*
 * libsyncrep's public lifecycle: open (HELLO over a fresh connection),
 * close (BYE), the step (the TOKEN barrier), flush, and what a training loop
 * reads back (error text, steps, stats, incarnation).  The client is layered
 * in data-path order (client_int.h names the files): the connection
 * (conn.c, over the I/O seam of conn_zmq.c), pushes (push.c), pulls
 * (pull.c), the session and resync (session.c), and this file on top.
 *
 * A TOKEN request is re-sent with the same request id while waiting (the
 * coordinator answers a re-sent, already answered id with the same token),
 * and PINGs prove the coordinator is alive while the step waits.
 *
 * Functions: random_id, sr__client_open_io, sr_client_open, sr_client_close,
 * sr_client_error, sr_client_step, sr_client_flush, sr_client_local_step,
 * sr_client_global_step, sr_client_stats_get, sr_client_incarnation.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/mem.h"
#include "core/text.h"
#include "worker/client_int.h"

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

/* sr_client_open over a given I/O seam (NULL: a ZeroMQ DEALER to
 * opts->endpoint).  The client owns io from the call on, failure included
 * (io->close). */
sr_err
sr__client_open_io(sr_client **out, const sr_client_options *opts, const sr__io *io)
{
    sr_client *c;
    sr_err     rc;

    if ((c = calloc(1, sizeof(*c))) == NULL) {
        if (io != NULL && io->close != NULL) {
            io->close(io->arg);
        }
        return sr_fail(SR_ENOMEM, "sr_client_open");
    }
    c->task = opts->task_index;
    c->timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : SR__DEFAULT_TIMEOUT_MS;
    c->client_id = random_id();
    c->local_step = -1;
    if (io != NULL) {
        c->io = *io;
    }
    if ((c->endpoint = strdup(opts->endpoint)) == NULL) {
        rc = sr_fail(SR_ENOMEM, "sr_client_open");
        goto fail;
    }
    if (io == NULL && (rc = sr__io_zmq_open(&c->io, opts, c->client_id)) != SR_OK) {
        goto fail;
    }
    if ((rc = sr__session_hello(c)) != SR_OK) {
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

int
sr_client_open(sr_client **out, const sr_client_options *opts)
{
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
    return sr__client_open_io(out, opts, NULL);
}

void
sr_client_close(sr_client *c)
{
    if (c == NULL) {
        return;
    }
    sr__conn_close(c);
    sr__pull_free(c);
    sr__push_free(c);
    sr__model_free(c);
    for (size_t i = 0; i < c->ndecls; i++) {
        free(c->decls[i].init);
    }
    free(c->decls);
    if (c->io.close != NULL) {
        c->io.close(c->io.arg);
    }
    free(c->endpoint);
    free(c);
}

const char *
sr_client_error(const sr_client *c)
{
    return c != NULL ? c->err : "NULL client";
}

int
sr_client_step(sr_client *c)
{
    sr_err rc;
    int    restarted;

    if (c == NULL) {
        return sr_fail(SR_EINVAL, "sr_client_step: NULL client");
    }
    if (!c->ready_done) {
        return sr__fail(c, SR_ENOTREADY, "step: call sr_client_ready first");
    }
    /* A client that pulls asks for the variables with its token: for a small
     * model the coordinator sends them along, and this round's pulls need
     * no round trip (docs/protocol.md, TOKEN). */
    /* With every variable of an earlier token at hand, it asks only for
     * those changed since (token deltas: issue 23). */
    int          asked = c->pulled;
    sr_wire_have have = {c->cache_step};
    uint8_t      hb[16];
    sr__frame    hf = {hb, c->cache_whole ? sr_wire_have_encode(&have, hb, sizeof(hb)) : 0};
    sr__call     w = {.kind = SR__WAIT_TOKEN,
                      .type = SR_MSG_TOKEN,
                      .flags = asked ? SR_WIRE_F_WANT_VARS : 0,
                      .local_step = c->local_step};
    if (asked && hf.len > 0) {
        w.flags |= SR_WIRE_F_HAVE_VARS;
        w.f = &hf;
        w.nf = 1;
    }
    c->cache_live = 0;
    c->pulled = 0;
    if ((rc = sr__conn_call(c, &w, &restarted)) != SR_OK) {
        return rc;
    }
    if (restarted) {
        /* The step completes at the restored global step; the next round
         * pulls only from the new incarnation. */
        rc = sr__session_resync(c);
        c->tainted = 0;
        return rc != SR_OK ? rc : sr__push_take_deferred(c);
    }
    if (c->rh.status != SR_OK) {
        return sr__reply_error(c, "step");
    }
    c->local_step = c->rh.local_step;
    c->tainted = 0;
    sr__pull_take_cache(c, asked);
    /* The pushes' answers came before the token's (one connection, in
     * order); wait for any re-sent one all the same. */
    if (c->npend > 0 && (rc = sr__push_flush(c, &restarted)) != SR_OK) {
        return rc;
    }
    return sr__push_take_deferred(c);
}

int
sr_client_flush(sr_client *c)
{
    sr_err rc;
    int    restarted;

    if (c == NULL) {
        return sr_fail(SR_EINVAL, "sr_client_flush: NULL client");
    }
    if ((rc = sr__push_flush(c, &restarted)) != SR_OK) {
        return rc;
    }
    return sr__push_take_deferred(c);
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
    sr__call         w = {.kind = SR__WAIT_REPLY, .type = SR_MSG_PING};

    if (c == NULL || out == NULL) {
        return sr_fail(SR_EINVAL, "sr_client_global_step: NULL argument");
    }
    for (;;) {
        int    restarted;
        sr_err rc = sr__conn_call(c, &w, &restarted);
        if (rc != SR_OK) {
            return rc;
        }
        if (!restarted) {
            break;
        }
        if ((rc = sr__session_resync(c)) != SR_OK) {
            return rc;
        }
    }
    if (c->rh.status != SR_OK) {
        return sr__reply_error(c, "global step");
    }
    if (c->nrep != 1 || sr_wire_ping_rep_decode(zmq_msg_data(&c->rep[0]), zmq_msg_size(&c->rep[0]),
                                                &rep) != SR_OK) {
        return sr__fail(c, SR_EPROTO, "global step: malformed reply");
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
