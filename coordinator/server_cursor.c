/*
 * Issue 24: the workers' data cursors (exactly-once data across restarts;
 * docs/protocol.md, CURSOR; docs/python.md, Exactly-once data).
 *
 * A worker sends its cursor (opaque bytes: epoch, position, RNG state) for
 * the round it is computing, before that round's pushes.  It goes with the
 * step its gradient goes into, and with nothing else:
 *
 *   CURSOR(local_step S) --> pend (S) --a push of S accepted--> conf (S)
 *        --the global step passes S (step S applied)--> cur --commit--> store
 *
 *  state   meaning                                       moved by
 *  pend    sent for step S, no gradient of it counted    handle_cursor
 *  conf    a gradient of S counted after it was sent     sr__coord_cursor_accepted
 *  cur     the cursor of the last applied step it went   promote (every use)
 *          into; committed with the steps after it
 *
 * A cursor whose round's pushes were all dropped (stale, beyond the task's
 * share, from before a restart) never leaves pend, and the next round's
 * replaces it.  A coordinator that restarts loses pend and conf with the
 * step in progress: the store's cursor is the one of its last committed
 * step, as the model is.  The cursor a worker resumes from (a CURSOR with
 * no body) is conf when its gradient is in the open step, else cur, else
 * the store's.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/server_int.h"
#include "core/log.h"

_Static_assert(SR_WIRE_CURSOR_MAX == SR_STORE_CURSOR_MAX, "one limit for cursors");

static worker *
find_worker(coord *c, int32_t task)
{
    for (size_t i = 0; i < c->nworkers; i++) {
        if (c->workers[i].task == task) {
            return &c->workers[i];
        }
    }
    return NULL;
}

/* A confirmed cursor of a step that has been applied becomes the current. */
static void
promote(const coord *c, worker *w)
{
    if (w->conf_have && w->conf_step < c->global_step) {
        memcpy(w->cur, w->conf, w->conf_len);
        w->cur_len = w->conf_len;
        w->cur_known = 1;
        w->conf_have = 0;
    }
}

/* The store's cursor of w's task, once per incarnation: 0, or -1 after a
 * store failure (the detail in sr_errdetail). */
static int
load_stored(coord *c, worker *w)
{
    sr_store_worker *rows = NULL;
    size_t           n = 0;

    if (w->cur_known) {
        return 0;
    }
    if (sr_store_list_workers(c->st, &rows, &n) != SR_OK) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (rows[i].task_index == w->task && rows[i].has_cursor) {
            memcpy(w->cur, rows[i].cursor, rows[i].cursor_len);
            w->cur_len = rows[i].cursor_len;
            w->cur_known = 1;
        }
    }
    free(rows);
    return 0;
}

void
sr__coord_cursor_accepted(coord *c, int32_t task, int64_t local_step)
{
    worker *w = find_worker(c, task);

    if (w == NULL || !w->pend_have || w->pend_step != local_step) {
        return;
    }
    promote(c, w);
    memcpy(w->conf, w->pend, w->pend_len);
    w->conf_len = w->pend_len;
    w->conf_step = w->pend_step;
    w->conf_have = 1;
    w->pend_have = 0;
}

void
sr__coord_cursor_row(coord *c, worker *w, sr_store_worker *row)
{
    promote(c, w);
    row->has_cursor = w->cur_known;
    row->cursor_len = w->cur_known ? w->cur_len : 0;
    if (w->cur_known && w->cur_len > 0) {
        memcpy(row->cursor, w->cur, w->cur_len);
    }
}

void
sr__coord_handle_cursor(coord *c, req_ctx *r)
{
    worker *w;

    if (r->nbody > 1) {
        REPLY_ERR(r, SR_EPROTO, "cursor: %d body frames (0: ask, 1: the cursor)", r->nbody);
        return;
    }
    if (r->nbody == 1 && zmq_msg_size(&r->body[0]) > SR_WIRE_CURSOR_MAX) {
        REPLY_ERR(r, SR_EINVAL, "cursor: %zu bytes, at most %d", zmq_msg_size(&r->body[0]),
                  SR_WIRE_CURSOR_MAX);
        return;
    }
    sr__coord_touch_worker(c, r->cl->task, -1);
    if ((w = find_worker(c, r->cl->task)) == NULL) {
        REPLY_ERR(r, SR_ENOMEM, "cursor: no memory for task %d's record", r->cl->task);
        return;
    }
    promote(c, w);
    if (r->nbody == 1) {
        size_t len = zmq_msg_size(&r->body[0]);
        memcpy(w->pend, zmq_msg_data(&r->body[0]), len);
        w->pend_len = (uint32_t)len;
        w->pend_step = r->h.local_step;
        w->pend_have = 1;
        sr__coord_send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, NULL, 0);
        return;
    }
    if (!w->conf_have && load_stored(c, w) < 0) {
        REPLY_ERR(r, SR_ESTORE, "cursor: reading task %d's stored cursor: %s", w->task,
                  sr_errdetail());
        return;
    }
    if (w->conf_have) {
        frame f = {w->conf, w->conf_len};
        sr__coord_send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, w->conf_step + 1, &f, 1);
    } else if (w->cur_known) {
        frame f = {w->cur, w->cur_len};
        sr__coord_send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, &f, 1);
    } else {
        sr__coord_send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, NULL, 0);
    }
}
