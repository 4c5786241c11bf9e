/*
 * Pulls: a variable's current value into the caller's buffer.  A pull is
 * served from the values the last token reply carried when they are there
 * (take_cache, pull_cached: docs/protocol.md, TOKEN); the others go as PULL
 * requests, several names in one when the coordinator takes them
 * (SR_WIRE_F_MANY), at most SR__PULL_WINDOW (SR__PULL_WINDOW_BYTES of values)
 * unanswered.  Each PULL in flight is an sr__req context in the connection's
 * id map (pull_ops): its reply copies the values out and sends the next
 * ones; a restart puts its items back to be sent to the new incarnation.
 *
 * Functions: sr__pull_drop_cache, sr__pull_take_cache, batch_room,
 * batch_slot, batch_send, pull_send, batch_fill, deliver, pull_value,
 * batch_answer, pull_reply, pull_lost, pull_cached, batch_forget,
 * sr_client_pull_many, sr__pull_many_into, sr_client_pull, sr__pull_free.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/mem.h"
#include "core/name.h"
#include "core/text.h"
#include "worker/client_int.h"

void
sr__pull_drop_cache(sr_client *c)
{
    for (int i = 0; i < c->ncache; i++) {
        zmq_msg_close(&c->cache[i].value);
    }
    c->ncache = 0;
    c->cache_whole = 0;
    c->cache_live = 0;
}

/* The cache entry of `name`, searched from *at on (a delta's variables come
 * in the coordinator's order, as the whole list did), or a new one at the
 * end; NULL without memory. */
static sr__cached *
cache_entry(sr_client *c, const char *name, int *at)
{
    for (int k = 0; k < c->ncache; k++) {
        int i = (*at + k) % c->ncache;
        if (strcmp(c->cache[i].name, name) == 0) {
            *at = i + 1;
            zmq_msg_close(&c->cache[i].value);
            return &c->cache[i];
        }
    }
    sr__cached *p = sr_grow_array(c->cache, &c->cap_cache, c->ncache + 1, sizeof(*p));
    if (p == NULL) {
        return NULL;
    }
    c->cache = p;
    snprintf(p[c->ncache].name, sizeof(p[c->ncache].name), "%s", name);
    return &p[c->ncache++];
}

/* Keep the variables a TOKEN reply carried (vars header, then pairs of
 * descriptor and value): all of them, or a delta merged into the whole
 * cache.  Anything malformed empties the cache (pulls then ask, and the
 * next token asks for every variable). */
void
sr__pull_take_cache(sr_client *c, int asked)
{
    sr_wire_vars_hdr vh;
    int              delta = (c->rh.flags & SR_WIRE_F_HAVE_VARS) != 0, at = 0;

    c->cache_live = 0;
    if (!asked) {
        return; /* nothing asked, nothing came: the cache stays for the next delta */
    }
    if (!delta || !c->cache_whole) {
        sr__pull_drop_cache(c);
    }
    if (c->nrep < 1 ||
        sr_wire_vars_hdr_decode(zmq_msg_data(&c->rep[0]), zmq_msg_size(&c->rep[0]), &vh) != SR_OK ||
        (int64_t)c->nrep != 1 + 2 * (int64_t)vh.nvars || (delta && !c->cache_whole)) {
        sr__pull_drop_cache(c);
        return;
    }
    for (uint32_t i = 0; i < vh.nvars; i++) {
        sr_wire_vardesc d;
        sr__cached     *e;
        if (sr_wire_vardesc_decode(zmq_msg_data(&c->rep[1 + 2 * i]),
                                   zmq_msg_size(&c->rep[1 + 2 * i]), &d) != SR_OK ||
            (e = cache_entry(c, d.name, &at)) == NULL) {
            sr__pull_drop_cache(c);
            return;
        }
        zmq_msg_init(&e->value);
        zmq_msg_move(&e->value, &c->rep[2 + 2 * i]);
    }
    c->cache_step = vh.global_step;
    c->cache_whole = 1;
    c->cache_live = 1;
}

/* Whether item i may join the pulls in flight (always when none are). */
static int
batch_room(const sr__pull_batch *b, size_t i)
{
    return b->inflight == 0 ||
           (b->inflight < SR__PULL_WINDOW && b->inflight_bytes <= SR__PULL_WINDOW_BYTES &&
            b->sizes[i] <= SR__PULL_WINDOW_BYTES - b->inflight_bytes);
}

/* A free request context (each in flight holds at least one item, and at
 * most SR__PULL_WINDOW items are). */
static sr__pull_req *
batch_slot(sr__pull_batch *b)
{
    for (size_t i = 0; i < SR__PULL_WINDOW; i++) {
        if (b->reqs[i].req.id == 0) {
            return &b->reqs[i];
        }
    }
    return NULL;
}

static const sr__req_ops pull_ops;

/* Send one PULL for the items in flight under request id `req` (a resend),
 * or for the next items to send (req 0): several names in one request when
 * the coordinator takes them (SR_WIRE_F_MANY), as many as fit the window. */
static int
batch_send(sr_client *c, sr__pull_batch *b, uint64_t req)
{
    uint8_t       buf[SR_WIRE_PULL_MANY_MAX][SR_WIRE_BODY_MAX];
    sr__frame     f[SR_WIRE_PULL_MANY_MAX];
    size_t        idx[SR_WIRE_PULL_MANY_MAX];
    int           nf = 0, most = c->many_ok ? SR_WIRE_PULL_MANY_MAX : 1;
    uint16_t      flags = req != 0 ? SR_WIRE_F_RESEND : 0;
    sr__pull_req *r = NULL;

    if (req == 0 && ((r = batch_slot(b)) == NULL || sr__conn_reserve(c, 1) != SR_OK)) {
        errno = ENOMEM;
        return -1;
    }
    for (size_t i = req != 0 ? b->first : b->next; i < b->n && nf < most; i++) {
        if (req != 0 ? b->item[i].state != SR__PULL_IN_FLIGHT || b->item[i].req != req
                     : b->item[i].state != SR__PULL_TO_SEND) {
            if (req != 0 && i >= b->next) {
                break;
            }
            continue;
        }
        if (req == 0 && !batch_room(b, i)) {
            break;
        }
        f[nf] = (sr__frame){buf[nf], sr_wire_name_encode(b->names[i], buf[nf], sizeof(buf[nf]))};
        idx[nf++] = i;
        if (req == 0) {
            b->item[i].state = SR__PULL_IN_FLIGHT;
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
        return sr__conn_send(c, SR_MSG_PULL, req, flags, 0, 0, f, nf);
    }
    req = ++c->next_req;
    for (int k = 0; k < nf; k++) {
        b->item[idx[k]].req = req;
    }
    /* The request is in flight even if its message is refused: the call
     * fails, and batch_forget takes it out of the map. */
    r->req = (sr__req){.id = req, .type = SR_MSG_PULL, .ops = &pull_ops};
    r->b = b;
    sr__conn_track(c, &r->req);
    /* Pushes held back go first, alone: with many names there is no room for them. */
    if (nf > 1 && c->held > 0 && sr__conn_send_held(c, 1, 0) != 0) {
        return -1;
    }
    return sr__conn_send_request(c, SR_MSG_PULL, req, flags, 0, 0, f, nf);
}

/* pull_ops' send: a PULL is only ever re-sent (never held back). */
static int
pull_send(sr_client *c, sr__req *r, uint16_t flags, int more, int dontwait)
{
    (void)flags;
    (void)more;
    (void)dontwait;
    return batch_send(c, ((sr__pull_req *)r)->b, r->id);
}

/* Send pulls while the window has room. */
static void
batch_fill(sr_client *c, sr__pull_batch *b)
{
    while (b->rc == SR_OK && b->next < b->n) {
        if (b->item[b->next].state != SR__PULL_TO_SEND) {
            b->next++;
            continue;
        }
        if (!batch_room(b, b->next)) {
            return;
        }
        if (batch_send(c, b, 0) != 0) {
            b->rc = sr__fail(c, SR_EMSG, "send PULL: %s", zmq_strerror(errno));
            return;
        }
    }
}

/* Item i's value (its size checked) to where the batch wants it. */
static void
deliver(const sr__pull_batch *b, size_t i, zmq_msg_t *value)
{
    if (b->sink != NULL) {
        b->sink(b->sink_arg, i, value);
    } else if (b->sizes[i] > 0) {
        memcpy(b->dsts[i], zmq_msg_data(value), b->sizes[i]);
    }
}

/* Item i of b from a PULL reply (its descriptor and value frames); named:
 * the descriptor must name it (a reply of many). */
static sr_err
pull_value(sr_client *c, const sr__pull_batch *b, size_t i, const zmq_msg_t *desc, zmq_msg_t *value,
           int named)
{
    const char     *name = b->names[i];
    size_t          dst_bytes = b->sizes[i];
    sr_wire_vardesc vd;
    size_t          n = zmq_msg_size(value);

    if (sr_wire_vardesc_decode(zmq_msg_data((zmq_msg_t *)desc), zmq_msg_size((zmq_msg_t *)desc),
                               &vd) != SR_OK ||
        (named && strcmp(vd.name, name) != 0)) {
        return sr__fail(c, SR_EPROTO, "pull %s: malformed reply", SR_ESC(name));
    }
    if (n != dst_bytes) {
        char s[160];
        sr_shape_format(vd.ndim, vd.shape, s, sizeof(s));
        return sr__fail(c, SR_EINVAL, "pull %s: variable is %s%s = %zu bytes, buffer is %zu",
                        SR_ESC(name), sr_dtype_name(vd.dtype), s, n, dst_bytes);
    }
    deliver(b, i, value);
    c->global_step = c->rh.local_step;
    return SR_OK;
}

/* The reply in c->rh answers the pulls of its request id (n items, from
 * item i on): copy the values out, or return the refusal. */
static sr_err
batch_answer(sr_client *c, sr__pull_batch *b, size_t i, size_t n)
{
    sr_wire_vars_hdr vh;
    sr_err           rc = SR_OK;

    if (c->rh.status != SR_OK) {
        return sr__reply_error(c, "pull");
    }
    if (n == 1) {
        return c->nrep != 2
                   ? sr__fail(c, SR_EPROTO, "pull %s: malformed reply", SR_ESC(b->names[i]))
                   : pull_value(c, b, i, &c->rep[0], &c->rep[1], 0);
    }
    if (c->nrep < 1 ||
        sr_wire_vars_hdr_decode(zmq_msg_data(&c->rep[0]), zmq_msg_size(&c->rep[0]), &vh) != SR_OK ||
        vh.nvars != n || (size_t)c->nrep != 1 + 2 * n) {
        return sr__fail(c, SR_EPROTO, "pull %s...: malformed reply", SR_ESC(b->names[i]));
    }
    for (size_t k = 0; rc == SR_OK && k < n; i++) {
        if (b->item[i].req == c->rh.request_id) {
            rc = pull_value(c, b, i, &c->rep[1 + 2 * k], &c->rep[2 + 2 * k], 1);
            k++;
        }
    }
    return rc;
}

/* pull_ops' reply: copy the values out (or keep the refusal), send the next
 * ones. */
static void
pull_reply(sr_client *c, sr__req *r)
{
    sr__pull_batch *b = ((sr__pull_req *)r)->b;
    size_t          i, n = 0;

    r->id = 0;
    for (i = b->first; i < b->next; i++) {
        if (b->item[i].state == SR__PULL_IN_FLIGHT && b->item[i].req == c->rh.request_id) {
            break;
        }
    }
    if (i == b->next) {
        return;
    }
    for (size_t k = i; k < b->next; k++) {
        n += b->item[k].state == SR__PULL_IN_FLIGHT && b->item[k].req == c->rh.request_id;
    }
    sr_err rc = batch_answer(c, b, i, n);
    if (rc != SR_OK && b->rc == SR_OK) {
        b->rc = rc;
    }
    for (size_t k = i; k < b->next; k++) {
        if (b->item[k].state == SR__PULL_IN_FLIGHT && b->item[k].req == c->rh.request_id) {
            b->item[k].state = SR__PULL_DONE;
            b->inflight--;
            b->inflight_bytes -= b->sizes[k];
            b->left--;
        }
    }
    while (b->first < b->next && b->item[b->first].state == SR__PULL_DONE) {
        b->first++;
    }
    batch_fill(c, b);
}

/* pull_ops' lost: a restart lost the answer; those pulls go again (to the new
 * incarnation, once resync is done). */
static void
pull_lost(sr_client *c, sr__req *r)
{
    sr__pull_batch *b = ((sr__pull_req *)r)->b;

    (void)c;
    for (size_t i = b->first; i < b->next; i++) {
        if (b->item[i].state == SR__PULL_IN_FLIGHT && b->item[i].req == r->id) {
            b->item[i].state = SR__PULL_TO_SEND;
            b->inflight--;
            b->inflight_bytes -= b->sizes[i];
        }
    }
    b->next = b->first;
    r->id = 0;
}

static const sr__req_ops pull_ops = {pull_reply, pull_send, pull_lost};

/* Serve a pull from the variables that came with this round's token (the
 * values as of that moment; with a delta, the unchanged ones of an earlier
 * token are the same values).  Pulls mostly come in the coordinator's order:
 * the search starts at the last one found. */
static int
pull_cached(sr_client *c, const sr__pull_batch *b, size_t item)
{
    const char *name = b->names[item];
    size_t      dst_bytes = b->sizes[item];

    for (int k = 0; c->cache_live && k < c->ncache; k++) {
        int i = (c->cache_next + c->ncache - 1 + k) % c->ncache; /* from the last one found */
        if (strcmp(c->cache[i].name, name) == 0 && zmq_msg_size(&c->cache[i].value) == dst_bytes) {
            deliver(b, item, &c->cache[i].value);
            c->cache_next = i + 1;
            c->global_step = c->cache_step;
            c->stats.pulls_cached++;
            return 1;
        }
    }
    return 0;
}

/* The call is over: its PULLs still in flight (a failure) leave the map;
 * their late answers are ignored. */
static void
batch_forget(sr_client *c, sr__pull_batch *b)
{
    for (size_t i = 0; i < SR__PULL_WINDOW; i++) {
        if (b->reqs[i].req.id != 0) {
            sr__conn_forget(c, &b->reqs[i].req);
            b->reqs[i].req.id = 0;
        }
    }
}

int
sr_client_pull_many(sr_client *c, size_t n, const char *const *names, void *const *dsts,
                    const size_t *dst_bytes)
{
    return sr__pull_many_into(c, n, names, dsts, dst_bytes, NULL, NULL);
}

sr_err
sr__pull_many_into(sr_client *c, size_t n, const char *const *names, void *const *dsts,
                   const size_t *dst_bytes, sr__pull_sink sink, void *sink_arg)
{
    sr__pull_batch b;
    sr_err         rc = SR_OK;

    if (c == NULL ||
        (n > 0 && (names == NULL || (sink == NULL && dsts == NULL) || dst_bytes == NULL))) {
        return sr_fail(SR_EINVAL, "sr_client_pull_many: NULL argument");
    }
    for (size_t i = 0; i < n; i++) {
        if (names[i] == NULL || (sink == NULL && dsts[i] == NULL && dst_bytes[i] > 0)) {
            return sr_fail(SR_EINVAL, "sr_client_pull_many: NULL argument (item %zu)", i);
        }
        if (sr_name_check(names[i], strlen(names[i])) != SR_OK) {
            return sr__fail(c, SR_EINVAL, "pull \"%s\": %s", SR_ESC(names[i]), sr_errdetail());
        }
    }
    if (n == 0) {
        return SR_OK;
    }
    sr__pull_item *items = sr_grow_array(c->batch_items, &c->cap_batch, n, sizeof(*items));
    if (items == NULL) {
        return sr__fail(c, SR_ENOMEM, "pull: %zu variables", n);
    }
    c->batch_items = items;
    if (c->batch_reqs == NULL &&
        (c->batch_reqs = calloc(SR__PULL_WINDOW, sizeof(*c->batch_reqs))) == NULL) {
        return sr__fail(c, SR_ENOMEM, "pull: %zu variables", n);
    }
    memset(&b, 0, sizeof(b));
    b.n = n;
    b.names = names;
    b.dsts = dsts;
    b.sizes = dst_bytes;
    b.sink = sink;
    b.sink_arg = sink_arg;
    b.item = items;
    b.reqs = c->batch_reqs;
    c->pulled = 1;
    for (size_t i = 0; i < n; i++) {
        b.item[i].state = pull_cached(c, &b, i) ? SR__PULL_DONE : SR__PULL_TO_SEND;
        b.left += b.item[i].state == SR__PULL_TO_SEND;
    }
    while (b.first < n && b.item[b.first].state == SR__PULL_DONE) {
        b.first++;
    }
    b.next = b.first;
    while (b.left > 0) {
        sr__call w = {.kind = SR__WAIT_PULLS, .pulls = &b};
        int      restarted = 0;

        batch_fill(c, &b);
        rc = b.rc != SR_OK ? b.rc : sr__conn_call(c, &w, &restarted);
        batch_forget(c, &b);
        if (rc == SR_OK && restarted) {
            /* The answers in flight are lost (pull_lost): those pulls go to
             * the new incarnation (this round is tainted: resync). */
            if ((rc = sr__session_resync(c)) != SR_OK) {
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

void
sr__pull_free(sr_client *c)
{
    sr__pull_drop_cache(c);
    free(c->cache);
    free(c->batch_items);
    free(c->batch_reqs);
}
