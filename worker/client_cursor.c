/*
 * Issue 24: the worker's data cursor (sr_client_set_cursor,
 * sr_client_cursor; docs/protocol.md, CURSOR).
 *
 * The cursor a worker resumes from moves only with a round that counted:
 *
 *   HELLO (open, resync) --> fetch: CURSOR (no body) -> the coordinator's
 *   set_cursor(b): CURSOR(b) for local_step; round := b
 *   a push of the round counted, no resync since --> cur := round
 *
 * so a round whose gradient was dropped (stale, tainted by a restart) is
 * computed again from the same samples, and one that counted is not.
 */
#include <string.h>

#include "worker/client_int.h"

/* The last round's cursor, if its gradient counted. */
static void
close_round(sr_client *c)
{
    if (c->round_set && c->stats.resyncs == c->round_resyncs &&
        c->stats.accepted + c->stats.duplicate > c->round_counted) {
        memcpy(c->cur, c->round, c->round_len);
        c->cur_len = c->round_len;
        c->cur_fetch = 0;
        c->round_set = 0;
    }
}

/* CURSOR to the coordinator: f (NULL: ask); against a restart, again after
 * the resync. */
static sr_err
cursor_rpc(sr_client *c, const sr__frame *f)
{
    for (;;) {
        sr__call w = {.kind = SR__WAIT_REPLY,
                      .type = SR_MSG_CURSOR,
                      .f = f,
                      .nf = f != NULL,
                      .local_step = c->local_step};
        int      restarted = 0;
        sr_err   rc = sr__conn_call(c, &w, &restarted);

        if (rc == SR_OK && restarted) {
            if ((rc = sr__session_resync(c)) != SR_OK) {
                return rc;
            }
            continue;
        }
        if (rc != SR_OK) {
            return rc;
        }
        return c->rh.status != SR_OK ? sr__reply_error(c, "cursor") : SR_OK;
    }
}

int
sr_client_set_cursor(sr_client *c, const void *cursor, size_t len)
{
    sr_err rc;

    if (c == NULL || (cursor == NULL && len > 0)) {
        return sr_fail(SR_EINVAL, "sr_client_set_cursor: NULL argument");
    }
    if (len > SR_WIRE_CURSOR_MAX) {
        return sr__fail(c, SR_EINVAL, "set_cursor: %zu bytes, at most %d", len, SR_WIRE_CURSOR_MAX);
    }
    if (!c->ready_done) {
        return sr__fail(c, SR_ENOTREADY, "set_cursor: call sr_client_ready first");
    }
    close_round(c);
    sr__frame f = {cursor, len};
    uint64_t  counted = c->stats.accepted + c->stats.duplicate;
    if ((rc = cursor_rpc(c, &f)) != SR_OK) {
        return rc;
    }
    /* After a restart in the call, this round's pushes are dropped (the
     * client is tainted): the round never counts, as it should not. */
    if (len > 0) {
        memcpy(c->round, cursor, len);
    }
    c->round_len = (uint32_t)len;
    c->round_counted = counted;
    c->round_resyncs = c->stats.resyncs;
    c->round_set = 1;
    return SR_OK;
}

int
sr_client_cursor(sr_client *c, void *buf, size_t cap, size_t *len)
{
    sr_err rc;

    if (c == NULL || len == NULL || (buf == NULL && cap > 0)) {
        return sr_fail(SR_EINVAL, "sr_client_cursor: NULL argument");
    }
    close_round(c);
    if (c->cur_fetch) {
        if (!c->ready_done) {
            return sr__fail(c, SR_ENOTREADY, "cursor: call sr_client_ready first");
        }
        if ((rc = cursor_rpc(c, NULL)) != SR_OK) {
            return rc;
        }
        if (c->nrep > 1 || (c->nrep == 1 && zmq_msg_size(&c->rep[0]) > SR_WIRE_CURSOR_MAX)) {
            return sr__fail(c, SR_EPROTO, "cursor: malformed reply");
        }
        c->cur_len = c->nrep == 1 ? (uint32_t)zmq_msg_size(&c->rep[0]) : 0;
        if (c->cur_len > 0) {
            memcpy(c->cur, zmq_msg_data(&c->rep[0]), c->cur_len);
        }
        c->cur_fetch = 0;
    }
    if (cap < c->cur_len) {
        return sr__fail(c, SR_EINVAL, "cursor: %u bytes, the buffer has %zu", c->cur_len, cap);
    }
    if (c->cur_len > 0) {
        memcpy(buf, c->cur, c->cur_len);
    }
    *len = c->cur_len;
    return SR_OK;
}
