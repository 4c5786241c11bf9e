/* A raw ZeroMQ peer for the protocol tests.  See raw_peer.h. */
#include "raw_peer.h"

#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "sr_test.h"

void
raw_open_rcvhwm(raw_peer *r, const char *endpoint, uint64_t client_id, int rcvhwm)
{
    int zero = 0;
    memset(r, 0, sizeof(*r));
    r->ctx = zmq_ctx_new();
    r->sock = zmq_socket(r->ctx, ZMQ_DEALER);
    zmq_setsockopt(r->sock, ZMQ_LINGER, &zero, sizeof(zero));
    if (rcvhwm >= 0) {
        assert_int_equal(zmq_setsockopt(r->sock, ZMQ_RCVHWM, &rcvhwm, sizeof(rcvhwm)), 0);
    }
    assert_int_equal(zmq_connect(r->sock, endpoint), 0);
    r->client_id = client_id;
}

void
raw_open(raw_peer *r, const char *endpoint, uint64_t client_id)
{
    raw_open_rcvhwm(r, endpoint, client_id, -1);
}

void
raw_close(raw_peer *r)
{
    zmq_close(r->sock);
    zmq_ctx_term(r->ctx);
}

void
raw_send_frames(raw_peer *r, const void *const *f, const size_t *len, int n)
{
    for (int i = 0; i < n; i++) {
        assert_true(zmq_send(r->sock, f[i], len[i], i + 1 < n ? ZMQ_SNDMORE : 0) >= 0);
    }
}

size_t
raw_hdr_task(raw_peer *r, uint8_t *hb, int type, int task, uint16_t flags, int64_t local_step,
             uint64_t seq)
{
    sr_wire_header h;
    memset(&h, 0, sizeof(h));
    h.type = (uint8_t)type;
    h.flags = flags;
    h.request_id = ++r->req;
    h.incarnation = r->incarnation;
    h.client_id = r->client_id;
    h.task_index = task;
    h.local_step = local_step;
    h.seq = seq;
    sr_wire_header_encode(&h, hb);
    return SR_WIRE_HEADER_BYTES;
}

size_t
raw_hdr(raw_peer *r, uint8_t *hb, int type, uint16_t flags, int64_t local_step, uint64_t seq)
{
    return raw_hdr_task(r, hb, type, 1, flags, local_step, seq);
}

void
raw_send(raw_peer *r, int type, int task, int64_t local_step, uint64_t seq, const void *const *body,
         const size_t *blen, int nbody)
{
    uint8_t     hb[SR_WIRE_HEADER_BYTES];
    const void *f[4];
    size_t      len[4];

    raw_hdr_task(r, hb, type, task, 0, local_step, seq);
    f[0] = hb;
    len[0] = sizeof(hb);
    for (int i = 0; i < nbody; i++) {
        f[i + 1] = body[i];
        len[i + 1] = blen[i];
    }
    raw_send_frames(r, f, len, nbody + 1);
}

int
raw_recv(raw_peer *r, int timeout_ms)
{
    zmq_pollitem_t it = {r->sock, 0, ZMQ_POLLIN, 0};
    uint8_t        hb[SR_WIRE_HEADER_BYTES + 8];
    int            more = 1, n;

    if (zmq_poll(&it, 1, timeout_ms) <= 0) {
        return -1;
    }
    n = zmq_recv(r->sock, hb, sizeof(hb), 0);
    assert_sr_ok(sr_wire_header_decode(hb, (size_t)n, &r->rh));
    size_t sz = sizeof(more);
    zmq_getsockopt(r->sock, ZMQ_RCVMORE, &more, &sz);
    r->nbody = 0;
    while (more) {
        n = zmq_recv(r->sock, r->body[r->nbody < 2 ? r->nbody : 1], sizeof(r->body[0]), 0);
        if (r->nbody < 2) {
            r->body_len[r->nbody] = (size_t)(n < (int)sizeof(r->body[0]) ? n : 4095);
            r->nbody++;
        }
        zmq_getsockopt(r->sock, ZMQ_RCVMORE, &more, &sz);
    }
    return 0;
}

void
raw_hello(raw_peer *r, int task)
{
    raw_send(r, SR_MSG_HELLO, task, 0, 0, NULL, NULL, 0);
    assert_int_equal(raw_recv(r, 10000), 0);
    assert_int_equal(r->rh.status, SR_OK);
    r->incarnation = r->rh.incarnation;
}

int
raw_ask(raw_peer *r, int type, int task)
{
    raw_send(r, type, task, 0, 0, NULL, NULL, 0);
    assert_int_equal(raw_recv(r, 10000), 0);
    assert_int_equal(r->rh.request_id, r->req);
    if (type == SR_MSG_HELLO && r->rh.status == SR_OK) {
        r->incarnation = r->rh.incarnation;
    }
    return r->rh.status;
}

void
raw_push_at(raw_peer *r, int task, const char *name, int dtype, const void *g, size_t len,
            uint64_t offset, int64_t step, uint64_t seq)
{
    sr_wire_pushdesc p;
    uint8_t          pd[SR_WIRE_BODY_MAX];
    memset(&p, 0, sizeof(p));
    snprintf(p.name, sizeof(p.name), "%s", name);
    p.dtype = (uint8_t)dtype;
    p.count = len;
    p.offset = offset;
    const void *body[2] = {pd, g};
    size_t      blen[2] = {sr_wire_pushdesc_encode(&p, pd, sizeof(pd)), len};
    raw_send(r, SR_MSG_PUSH, task, step, seq, body, blen, 2);
}

void
raw_push(raw_peer *r, int task, const char *name, int dtype, const void *g, size_t len,
         int64_t step, uint64_t seq)
{
    raw_push_at(r, task, name, dtype, g, len, 0, step, seq);
}

void
raw_pull(raw_peer *r, const char *name)
{
    uint8_t     nb[SR_WIRE_BODY_MAX];
    const void *body[1] = {nb};
    size_t      len[1] = {sr_wire_name_encode(name, nb, sizeof(nb))};
    raw_send(r, SR_MSG_PULL, 1, 0, 0, body, len, 1);
}

int
raw_push_outcome(raw_peer *r)
{
    sr_wire_push_rep rep;
    assert_int_equal(raw_recv(r, 10000), 0);
    assert_int_equal(r->rh.status, SR_OK);
    assert_sr_ok(sr_wire_push_rep_decode(r->body[0], r->body_len[0], &rep));
    return rep.outcome;
}

void
raw_expect_error(raw_peer *r, int code)
{
    assert_int_equal(raw_recv(r, 10000), 0);
    if (r->rh.status != code) {
        fprintf(stderr, "status %d (%s): %.*s\n", r->rh.status, sr_errname(r->rh.status),
                (int)r->body_len[0], (const char *)r->body[0]);
    }
    assert_int_equal(r->rh.status, code);
    assert_true(r->nbody >= 1 && r->body_len[0] > 0); /* the error text */
}

void
raw_expect_reply(raw_peer *r, int type, int timeout_ms)
{
    assert_int_equal(raw_recv(r, timeout_ms), 0);
    assert_int_equal(r->rh.type, type | SR_WIRE_REPLY);
    assert_int_equal(r->rh.status, SR_OK);
}

void
raw_expect_ok(raw_peer *r)
{
    assert_int_equal(raw_recv(r, 10000), 0);
    assert_int_equal(r->rh.status, SR_OK);
}

void
raw_recv_whole(raw_peer *r, raw_whole_msg *m)
{
    zmq_pollitem_t it = {r->sock, 0, ZMQ_POLLIN, 0};
    int            more = 1;
    size_t         sz = sizeof(more);

    assert_int_equal(zmq_poll(&it, 1, 10000), 1);
    m->n = 0;
    while (more) {
        assert_true(m->n < 8);
        int k = zmq_recv(r->sock, m->data[m->n], sizeof(m->data[0]), 0);
        assert_true(k >= 0 && k <= (int)sizeof(m->data[0]));
        m->len[m->n++] = (size_t)k;
        zmq_getsockopt(r->sock, ZMQ_RCVMORE, &more, &sz);
    }
}

sr_wire_header
raw_whole_hdr(const raw_whole_msg *m, int i, int type, uint16_t flags, int status)
{
    sr_wire_header h;
    assert_true(i < m->n);
    assert_sr_ok(sr_wire_header_decode(m->data[i], m->len[i], &h));
    assert_int_equal(h.type, type | SR_WIRE_REPLY);
    assert_int_equal(h.flags, flags);
    assert_int_equal(h.status, status);
    return h;
}

double
proto_pull_x(sr_client *c)
{
    double x = -1;
    assert_sr_ok(sr_client_pull(c, "x", &x, sizeof(x)));
    return x;
}

sr_client *
proto_setup(sr_harness *h, const char *tag, const char *R)
{
    const double  x0 = 10.0;
    const int64_t n0 = 7;
    sr_client    *chief;

    sr_harness_init(h, tag);
    /* Raw clients and second workers join as tasks 1 and 2; the tests
     * declare more variables once the model is ready. */
    sr_harness_start(h, "--replicas-to-aggregate", R, "--learning-rate", "1.0", "--max-tasks", "3",
                     "--allow-new-variables", NULL);
    chief = sr_harness_client(h, 0);
    assert_sr_ok(sr_client_declare(chief, "x", SR_FLOAT64, 0, NULL, &x0));
    assert_sr_ok(sr_client_declare(chief, "n", SR_INT64, 0, NULL, &n0));
    assert_sr_ok(sr_client_ready(chief));
    return chief;
}
