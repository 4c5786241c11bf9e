/* The server tests' shared fixture (server_fixture.h). */
#include "server_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sr_test.h"

#include "core/dtype.h"
#include "core/log.h"

/* ---- the fake I/O: every frame sent, in order ---------------------------- */

static int
fake_send(void *ctx, const void *data, size_t len, int flags)
{
    fake_io *io = ctx;

    assert_true(io->n < MAX_FRAMES);
    sent_frame *s = &io->f[io->n++];
    s->data = malloc(len ? len : 1);
    assert_non_null(s->data);
    memcpy(s->data, data, len);
    s->len = len;
    s->more = (flags & ZMQ_SNDMORE) != 0;
    return (int)len;
}

/* Sent at once: the message's free function runs (a pull slot or a value's
 * reference is released) as when ZeroMQ has sent it. */
static int
fake_send_msg(void *ctx, zmq_msg_t *m, int flags)
{
    int n = fake_send(ctx, zmq_msg_data(m), zmq_msg_size(m), flags);
    zmq_msg_close(m);
    return n;
}

static int64_t
fake_now(void *ctx)
{
    return ((fake_io *)ctx)->now_ms;
}

int
next_reply(fake_io *io, reply *r)
{
    if (io->read == io->n) {
        return 0;
    }
    sent_frame *rid = &io->f[io->read];
    sent_frame *hdr = &io->f[io->read + 1];
    assert_true(io->read + 1 < io->n);
    assert_true(rid->more);
    assert_true(rid->len < sizeof(r->rid));
    memcpy(r->rid, rid->data, rid->len);
    r->rid[rid->len] = '\0';
    assert_sr_ok(sr_wire_header_decode(hdr->data, hdr->len, &r->h));
    io->read += 2;
    r->body = &io->f[io->read];
    r->nbody = 0;
    for (int more = hdr->more; more; r->nbody++, io->read++) {
        assert_true(io->read < io->n);
        more = io->f[io->read].more;
    }
    return 1;
}

/* ---- the fixture: a coordinator on a temp-dir store ---------------------- */

void
fixture_open(fixture *t)
{
    sr__coord_init(&t->c, &t->o);
    t->c.io.send = fake_send;
    t->c.io.send_msg = fake_send_msg;
    t->c.io.now_ms = fake_now;
    t->c.io.ctx = &t->io;
    assert_sr_ok(sr__coord_open_store(&t->c));
    assert_sr_ok(sr__coord_start(&t->c));
}

void
fixture_drain(fixture *t)
{
    reply r;
    sr__coord_flush_held_batch(&t->c, 1);
    while (next_reply(&t->io, &r)) {
    }
}

void
fixture_close(fixture *t)
{
    fixture_drain(t);
    sr__coord_free(&t->c);
    memset(&t->c, 0, sizeof(t->c));
}

fixture *
fixture_new(int R, int N)
{
    fixture *t = calloc(1, sizeof(*t));

    if (t == NULL || (t->dir = sr_test_mkdtemp("coord")) == NULL) {
        free(t);
        return NULL;
    }
    sr_log_set_level(SR_LOG_ERR);
    snprintf(t->path, sizeof(t->path), "%s/c.db", t->dir);
    sr_coord_opts_default(&t->o);
    t->o.store_path = t->path;
    t->o.R = R;
    t->o.N = N;
    t->o.optim.lr = 0.5;
    t->o.sync_normal = 1;
    t->io.now_ms = 1000;
    return t;
}

int
fixture_teardown(void **state)
{
    fixture *t = *state;

    sr__coord_free(&t->c);
    for (size_t i = 0; i < t->io.n; i++) {
        free(t->io.f[i].data);
    }
    sr_test_rmdir_rf(t->dir);
    free(t->dir);
    free(t);
    return 0;
}

/* ---- requests ----------------------------------------------------------- */

sr_wire_header
hdr(fixture *t, int type, uint64_t client_id, int32_t task)
{
    sr_wire_header h;

    memset(&h, 0, sizeof(h));
    h.type = (uint8_t)type;
    h.request_id = ++t->req_id;
    h.incarnation = t->c.incarnation;
    h.client_id = client_id;
    h.task_index = task;
    return h;
}

void
deliver(fixture *t, const char *rid, const sr_wire_header *h, const blob *body, int nbody)
{
    zmq_msg_t parts[8];
    uint8_t   hb[SR_WIRE_HEADER_BYTES];
    int       n = 0;

    sr_wire_header_encode(h, hb);
    const blob all[8] = {{rid, strlen(rid)}, {hb, sizeof(hb)}};
    for (; n < 2 + nbody; n++) {
        const blob *b = n < 2 ? &all[n] : &body[n - 2];
        assert_int_equal(zmq_msg_init_size(&parts[n], b->n), 0);
        memcpy(zmq_msg_data(&parts[n]), b->p, b->n);
    }
    sr__coord_dispatch(&t->c, parts, n);
    for (int i = 0; i < n; i++) {
        zmq_msg_close(&parts[i]);
    }
}

sr_wire_header
simple(fixture *t, const char *rid, int type, uint64_t client_id, int32_t task)
{
    sr_wire_header h = hdr(t, type, client_id, task);
    deliver(t, rid, &h, NULL, 0);
    return h;
}

void
declare_w(fixture *t)
{
    sr_wire_vardesc d;
    uint8_t         db[SR_WIRE_BODY_MAX];
    const float     init[2] = {1.0f, 2.0f};

    memset(&d, 0, sizeof(d));
    snprintf(d.name, sizeof(d.name), "w");
    d.dtype = SR_FLOAT32;
    d.ndim = 1;
    d.shape[0] = 2;
    sr_wire_header h = hdr(t, SR_MSG_DECLARE, TASK0_ID, 0);
    blob           body[2] = {{db, sr_wire_vardesc_encode(&d, db, sizeof(db))}, {init, 8}};
    deliver(t, "a", &h, body, 2);
}

void
mark_ready(fixture *t)
{
    sr_wire_ready_req q = {1};
    uint8_t           b[8];
    sr_wire_header    h = hdr(t, SR_MSG_READY, TASK0_ID, 0);
    blob              body[1] = {{b, sr_wire_ready_req_encode(&q, b, sizeof(b))}};
    deliver(t, "a", &h, body, 1);
}

void
push_w(fixture *t, const char *rid, uint64_t client_id, int32_t task, int64_t local_step,
       uint64_t seq, float g0, float g1)
{
    sr_wire_pushdesc p;
    uint8_t          pb[SR_WIRE_BODY_MAX];
    const float      g[2] = {g0, g1};

    memset(&p, 0, sizeof(p));
    snprintf(p.name, sizeof(p.name), "w");
    p.dtype = SR_FLOAT32;
    p.count = sizeof(g);
    sr_wire_header h = hdr(t, SR_MSG_PUSH, client_id, task);
    h.local_step = local_step;
    h.seq = seq;
    blob body[2] = {{pb, sr_wire_pushdesc_encode(&p, pb, sizeof(pb))}, {g, sizeof(g)}};
    deliver(t, rid, &h, body, 2);
}
