/*
 * The coordinator's server driven in-process through its I/O seam
 * (coord_io, server_int.h): requests go to sr__coord_dispatch as received
 * messages, replies are recorded by a fake send, time is a number the test
 * sets.  A real store in a temp dir; no socket, no sleep, no thread.
 * R = N = 2, SGD with lr 0.5 and gradients every float represents exactly.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sr_test.h"

#include "coordinator/server_int.h"
#include "core/dtype.h"
#include "core/log.h"

/* ---- the fake I/O: every frame sent, in order ---------------------------- */

#define MAX_FRAMES 256

typedef struct {
    uint8_t *data;
    size_t   len;
    int      more; /* ZMQ_SNDMORE: the message goes on */
} sent_frame;

typedef struct {
    sent_frame f[MAX_FRAMES];
    size_t     n;
    size_t     read; /* frames taken by next_reply */
    int64_t    now_ms;
} fake_io;

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

/* One reply message: its routing id, header and body frames. */
typedef struct {
    char           rid[16];
    sr_wire_header h;
    sent_frame    *body;
    int            nbody;
} reply;

/* The next unread message, or 0 when every sent frame has been read. */
static int
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

enum { TASK0_ID = 0xA0, TASK1_ID = 0xB1 };

typedef struct {
    char         *dir;
    char          path[600];
    sr_coord_opts o;
    coord         c;
    fake_io       io;
    uint64_t      req_id;
} fixture;

static void
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

static int
setup(void **state)
{
    fixture *t = calloc(1, sizeof(*t));

    if (t == NULL || (t->dir = sr_test_mkdtemp("coord")) == NULL) {
        free(t);
        return -1;
    }
    sr_log_set_level(SR_LOG_ERR);
    snprintf(t->path, sizeof(t->path), "%s/c.db", t->dir);
    sr_coord_opts_default(&t->o);
    t->o.store_path = t->path;
    t->o.R = 2;
    t->o.N = 2;
    t->o.optim.lr = 0.5;
    t->o.sync_normal = 1;
    t->io.now_ms = 1000;
    *state = t;
    return 0;
}

static int
teardown(void **state)
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

typedef struct {
    const void *p;
    size_t      n;
} blob;

static sr_wire_header
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

static void
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

/* A request with no body; its header for the caller's checks. */
static sr_wire_header
simple(fixture *t, const char *rid, int type, uint64_t client_id, int32_t task)
{
    sr_wire_header h = hdr(t, type, client_id, task);
    deliver(t, rid, &h, NULL, 0);
    return h;
}

/* The chief declares w: float32[2] = {1, 2}. */
static void
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

static void
mark_ready(fixture *t)
{
    sr_wire_ready_req q = {1};
    uint8_t           b[8];
    sr_wire_header    h = hdr(t, SR_MSG_READY, TASK0_ID, 0);
    blob              body[1] = {{b, sr_wire_ready_req_encode(&q, b, sizeof(b))}};
    deliver(t, "a", &h, body, 1);
}

static void
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

/* Both tasks say HELLO; the chief declares w and marks the model ready. */
static void
job_ready(fixture *t)
{
    reply r;

    fixture_open(t);
    simple(t, "a", SR_MSG_HELLO, TASK0_ID, 0);
    simple(t, "b", SR_MSG_HELLO, TASK1_ID, 1);
    declare_w(t);
    mark_ready(t);
    while (next_reply(&t->io, &r)) {
        assert_int_equal(r.h.status, SR_OK);
    }
}

static client *
client_of(fixture *t, uint64_t id)
{
    for (size_t i = 0; i < t->c.nclients; i++) {
        if (t->c.clients[i].client_id == id) {
            return &t->c.clients[i];
        }
    }
    fail_msg("no client %" PRIx64, id);
    return NULL;
}

static int
push_outcome(const reply *r)
{
    sr_wire_push_rep rep;
    assert_int_equal(r->h.type, SR_MSG_PUSH | SR_WIRE_REPLY);
    assert_int_equal(r->h.status, SR_OK);
    assert_int_equal(r->nbody, 1);
    assert_sr_ok(sr_wire_push_rep_decode(r->body[0].data, r->body[0].len, &rep));
    return rep.outcome;
}

static const float *
w_value(fixture *t)
{
    cvar *v = sr__coord_find_var(&t->c, "w");
    assert_non_null(v);
    return v->value;
}

/* ---- tests -------------------------------------------------------------- */

/* HELLO, DECLARE, READY, PUSH, TOKEN of two tasks: every reply's status and
 * outcome, and the step applied and committed when the second task pushed. */
static void
test_dispatch_r2_sequence_applies_and_commits_step(void **state)
{
    fixture          *t = *state;
    reply             r;
    sr_wire_hello_rep hello;
    sr_wire_ping_rep  ready;

    fixture_open(t);
    assert_int_equal(t->c.state, COORD_WAIT_MODEL);
    sr_wire_header h = simple(t, "a", SR_MSG_HELLO, TASK0_ID, 0);
    assert_true(next_reply(&t->io, &r));
    assert_string_equal(r.rid, "a");
    assert_int_equal(r.h.type, SR_MSG_HELLO | SR_WIRE_REPLY);
    assert_int_equal(r.h.request_id, h.request_id);
    assert_int_equal(r.h.incarnation, t->c.incarnation);
    assert_int_equal(r.h.status, SR_OK);
    assert_int_equal(r.h.flags, SR_WIRE_F_CHAIN | SR_WIRE_F_MANY);
    assert_int_equal(r.nbody, 1);
    assert_sr_ok(sr_wire_hello_rep_decode(r.body[0].data, r.body[0].len, &hello));
    assert_int_equal(hello.model_ready, 0);
    assert_int_equal(hello.global_step, 0);
    assert_int_equal(hello.replicas_to_aggregate, 2);
    assert_int_equal(hello.total_replicas, 2);

    /* Before the model is ready, a push is refused. */
    push_w(t, "a", TASK0_ID, 0, 0, 1, 2.0f, 4.0f);
    assert_true(next_reply(&t->io, &r));
    assert_int_equal(r.h.status, SR_ENOTREADY);

    declare_w(t);
    assert_true(next_reply(&t->io, &r));
    assert_int_equal(r.h.type, SR_MSG_DECLARE | SR_WIRE_REPLY);
    assert_int_equal(r.h.status, SR_OK);
    assert_int_equal(r.nbody, 0);

    mark_ready(t);
    assert_true(next_reply(&t->io, &r));
    assert_int_equal(r.h.type, SR_MSG_READY | SR_WIRE_REPLY);
    assert_int_equal(r.h.status, SR_OK);
    assert_sr_ok(sr_wire_ping_rep_decode(r.body[0].data, r.body[0].len, &ready));
    assert_int_equal(ready.model_ready, 1);
    assert_int_equal(t->c.state, COORD_SERVING);
    assert_int_equal(t->c.tokens.len, 2); /* K = R init tokens of step 0 */

    simple(t, "b", SR_MSG_HELLO, TASK1_ID, 1);
    assert_true(next_reply(&t->io, &r));
    assert_int_equal(r.h.status, SR_OK);

    /* Task 0's push is held to the end of the batch, then answered. */
    push_w(t, "a", TASK0_ID, 0, 0, 2, 2.0f, 4.0f);
    assert_false(next_reply(&t->io, &r));
    sr__coord_flush_held_batch(&t->c, 0);
    assert_true(next_reply(&t->io, &r));
    assert_string_equal(r.rid, "a");
    assert_int_equal(push_outcome(&r), SR_PUSH_ACCEPTED);
    assert_int_equal(t->c.global_step, 0);

    /* An init token, at once: the step the worker is on. */
    h = simple(t, "a", SR_MSG_TOKEN, TASK0_ID, 0);
    assert_true(next_reply(&t->io, &r));
    assert_int_equal(r.h.type, SR_MSG_TOKEN | SR_WIRE_REPLY);
    assert_int_equal(r.h.request_id, h.request_id);
    assert_int_equal(r.h.status, SR_OK);
    assert_int_equal(r.h.local_step, 0);

    /* Task 1's push is the R-th: w -= 0.5 * mean({2, 4}, {4, 8}). */
    push_w(t, "b", TASK1_ID, 1, 0, 1, 4.0f, 8.0f);
    sr__coord_flush_held_batch(&t->c, 0);
    assert_true(next_reply(&t->io, &r));
    assert_string_equal(r.rid, "b");
    assert_int_equal(push_outcome(&r), SR_PUSH_ACCEPTED);
    assert_false(next_reply(&t->io, &r));
    assert_int_equal(t->c.global_step, 1);
    assert_int_equal(t->c.committed_step, 1);
    assert_true(w_value(t)[0] == -0.5f);
    assert_true(w_value(t)[1] == -1.0f);
    assert_int_equal(t->c.tokens.len, 3); /* one init token left, two of step 1 */
}

/* A task's second push for the open step is answered stale and counted
 * beyond its share; the step applies only when the second task pushes. */
static void
test_push_second_of_one_task_is_stale_beyond_share(void **state)
{
    fixture *t = *state;
    reply    r;

    job_ready(t);
    push_w(t, "a", TASK0_ID, 0, 0, 1, 2.0f, 4.0f);
    push_w(t, "a", TASK0_ID, 0, 0, 2, 8.0f, 8.0f);
    sr__coord_flush_held_batch(&t->c, 0);
    assert_true(next_reply(&t->io, &r));
    assert_int_equal(push_outcome(&r), SR_PUSH_ACCEPTED);
    assert_true(next_reply(&t->io, &r));
    assert_int_equal(push_outcome(&r), SR_PUSH_STALE);
    assert_false(next_reply(&t->io, &r));
    client *a = client_of(t, TASK0_ID);
    assert_int_equal(a->accepted, 1);
    assert_int_equal(a->stale, 1);
    assert_int_equal(a->over_share, 1);
    assert_int_equal(a->min_token, 1); /* it waits for the next step's token */
    assert_int_equal(t->c.global_step, 0);
    assert_true(w_value(t)[0] == 1.0f);

    /* The same seq again is a duplicate, counted nowhere else. */
    push_w(t, "a", TASK0_ID, 0, 0, 2, 8.0f, 8.0f);
    sr__coord_flush_held_batch(&t->c, 0);
    assert_true(next_reply(&t->io, &r));
    assert_int_equal(push_outcome(&r), SR_PUSH_DUPLICATE);
    assert_int_equal(a->over_share, 1);

    push_w(t, "b", TASK1_ID, 1, 0, 1, 4.0f, 8.0f);
    sr__coord_flush_held_batch(&t->c, 0);
    assert_true(next_reply(&t->io, &r));
    assert_int_equal(push_outcome(&r), SR_PUSH_ACCEPTED);
    assert_int_equal(t->c.global_step, 1);
    assert_true(w_value(t)[0] == -0.5f);
    assert_true(w_value(t)[1] == -1.0f);

    /* STATUS reports it per task. */
    sr_strbuf   b;
    const char *json;
    sr_strbuf_init(&b);
    sr__coord_status_json(&t->c, &b);
    assert_sr_ok(sr_strbuf_result(&b, &json));
    assert_non_null(strstr(json, "\"task_index\":0,"));
    assert_non_null(strstr(json, "\"accepted\":1,\"stale\":1,\"duplicate\":1,\"beyond_share\":1,"));
    sr_strbuf_free(&b);
}

/* With no init tokens, a TOKEN parks; the step's apply serves it.  The
 * client then holds a token of step 1 and waits for step 2's, leaving the
 * other step-1 token to the other task. */
static void
test_token_parks_until_apply_then_waits_for_next_step(void **state)
{
    fixture *t = *state;
    reply    r;

    t->o.init_tokens = 0;
    job_ready(t);
    assert_int_equal(t->c.tokens.len, 0);
    push_w(t, "a", TASK0_ID, 0, 0, 1, 2.0f, 4.0f);
    sr_wire_header ta = simple(t, "a", SR_MSG_TOKEN, TASK0_ID, 0);
    client        *a = client_of(t, TASK0_ID);
    assert_true(a->parked);
    /* Its push's answer waits for the token's (the client is parked). */
    sr__coord_flush_held_batch(&t->c, 0);
    assert_false(next_reply(&t->io, &r));

    push_w(t, "b", TASK1_ID, 1, 0, 1, 4.0f, 8.0f);
    assert_int_equal(t->c.global_step, 1);
    assert_false(a->parked);
    assert_true(next_reply(&t->io, &r)); /* a's held answer goes first */
    assert_string_equal(r.rid, "a");
    assert_int_equal(push_outcome(&r), SR_PUSH_ACCEPTED);
    assert_true(next_reply(&t->io, &r));
    assert_string_equal(r.rid, "a");
    assert_int_equal(r.h.type, SR_MSG_TOKEN | SR_WIRE_REPLY);
    assert_int_equal(r.h.request_id, ta.request_id);
    assert_int_equal(r.h.local_step, 1);
    assert_int_equal(t->c.tokens.len, 1);

    /* a holds step 1's token: a new TOKEN parks, step 1's stays queued. */
    simple(t, "a", SR_MSG_TOKEN, TASK0_ID, 0);
    assert_true(a->parked);
    assert_int_equal(t->c.tokens.len, 1);
    sr__coord_flush_held_batch(&t->c, 0);
    assert_true(next_reply(&t->io, &r)); /* only b's held push answer: a got nothing */
    assert_string_equal(r.rid, "b");
    assert_int_equal(push_outcome(&r), SR_PUSH_ACCEPTED);
    assert_false(next_reply(&t->io, &r));
    /* b takes it. */
    sr_wire_header tb = simple(t, "b", SR_MSG_TOKEN, TASK1_ID, 1);
    assert_true(next_reply(&t->io, &r));
    assert_string_equal(r.rid, "b");
    assert_int_equal(r.h.request_id, tb.request_id);
    assert_int_equal(r.h.local_step, 1);
    assert_int_equal(t->c.tokens.len, 0);
    assert_true(a->parked);
}

/* Only a worker of this job is admitted, and a client keeps its task. */
static void
test_admit_task_minus_one_is_einval(void **state)
{
    fixture *t = *state;
    reply    r;

    fixture_open(t);
    simple(t, "x", SR_MSG_HELLO, 0xC0, -1);
    assert_true(next_reply(&t->io, &r));
    assert_int_equal(r.h.type, SR_MSG_HELLO | SR_WIRE_REPLY);
    assert_int_equal(r.h.status, SR_EINVAL);
    assert_int_equal(t->c.nclients, 0);
    assert_int_equal(t->c.refused, 1);
    simple(t, "x", SR_MSG_HELLO, 0xC0, 2); /* N = 2: tasks 0 and 1 */
    assert_true(next_reply(&t->io, &r));
    assert_int_equal(r.h.status, SR_EINVAL);
    assert_int_equal(t->c.refused, 2);
}

static void
test_admit_task_switch_is_eproto(void **state)
{
    fixture *t = *state;
    reply    r;

    fixture_open(t);
    simple(t, "a", SR_MSG_HELLO, TASK0_ID, 0);
    assert_true(next_reply(&t->io, &r));
    assert_int_equal(r.h.status, SR_OK);
    simple(t, "a", SR_MSG_PING, TASK0_ID, 1);
    assert_true(next_reply(&t->io, &r));
    assert_int_equal(r.h.type, SR_MSG_PING | SR_WIRE_REPLY);
    assert_int_equal(r.h.status, SR_EPROTO);
    assert_int_equal(t->c.refused, 1);
    assert_int_equal(t->c.nclients, 1);
    assert_int_equal(client_of(t, TASK0_ID)->task, 0);
}

/* Run one step with momentum and the step log, committed only at shutdown,
 * so its state is dirty for build_job. */
static void
one_dirty_step(fixture *t)
{
    reply r;

    t->o.checkpoint_every = 0;
    t->o.step_log = 1;
    t->o.optim.kind = SR_OPT_MOMENTUM;
    job_ready(t);
    push_w(t, "a", TASK0_ID, 0, 0, 1, 2.0f, 4.0f);
    push_w(t, "b", TASK1_ID, 1, 0, 1, 4.0f, 8.0f);
    sr__coord_flush_held_batch(&t->c, 1);
    while (next_reply(&t->io, &r)) {
        assert_int_equal(push_outcome(&r), SR_PUSH_ACCEPTED);
    }
    assert_int_equal(t->c.global_step, 1);
    assert_int_equal(t->c.committed_step, 0);
}

/* The async writer's job: a reference on the value (never copied: the apply
 * does not write a referenced buffer), copies of the slot, dirty map and
 * step log, so the loop may change its own. */
static void
test_build_job_copies_holds_value_copies_rest(void **state)
{
    fixture    *t = *state;
    commit_job *j = NULL;

    one_dirty_step(t);
    cvar *v = sr__coord_find_var(&t->c, "w");
    assert_true(v->dirty_any);
    assert_int_equal(atomic_load(&v->vb->refs), 1);
    assert_sr_ok(sr__coord_build_job(&t->c, 1, &j));
    assert_int_equal(j->cm.global_step, 1);
    assert_int_equal(j->cm.ntensors, 2); /* the value and the momentum slot */
    assert_string_equal(j->t[0].slot, "");
    assert_ptr_equal(j->t[0].data, v->value);
    assert_int_equal(j->nheld, 1);
    assert_ptr_equal(j->held[0], v->vb);
    assert_int_equal(atomic_load(&v->vb->refs), 2);
    assert_string_equal(j->t[1].slot, "momentum");
    assert_ptr_not_equal(j->t[1].data, v->s1);
    assert_memory_equal(j->t[1].data, v->s1, 8);
    assert_ptr_not_equal(j->t[0].dirty, v->dirty);
    assert_int_equal(j->nown, 2); /* the dirty map and the slot */
    assert_int_equal(j->cm.nworkers, 2);
    assert_int_equal(j->cm.nlog, 2); /* the step's two contributions */
    assert_ptr_not_equal(j->cm.log, t->c.log);
    assert_int_equal(j->cm.log[0].task_index, 0);
    assert_int_equal(j->cm.log[1].task_index, 1);
    sr__coord_job_free(j);
    assert_int_equal(atomic_load(&v->vb->refs), 1);
}

/* The loop's own commit: the job points into the live state. */
static void
test_build_job_in_place_points_into_state(void **state)
{
    fixture    *t = *state;
    commit_job *j = NULL;

    one_dirty_step(t);
    cvar *v = sr__coord_find_var(&t->c, "w");
    assert_sr_ok(sr__coord_build_job(&t->c, 0, &j));
    assert_int_equal(j->cm.ntensors, 2);
    assert_ptr_equal(j->t[0].data, v->value);
    assert_ptr_equal(j->t[1].data, v->s1);
    assert_ptr_equal(j->t[0].dirty, v->dirty);
    assert_int_equal(j->nheld, 0);
    assert_int_equal(j->nown, 0);
    assert_int_equal(atomic_load(&v->vb->refs), 1);
    sr__coord_job_free(j);
    assert_sr_ok(sr__coord_commit_now(&t->c));
    assert_int_equal(t->c.committed_step, 1);
    assert_false(v->dirty_any);
    assert_int_equal(t->c.nlog, 0);
}

/* A restart on a store whose model is ready: STARTING -> WAIT_MODEL ->
 * SERVING inside sr__coord_start, a new incarnation, R init tokens of the
 * restored step; a request of the old incarnation is SR_ESTALE and a
 * gradient computed before the restart is stale. */
static void
test_start_ready_store_serves_restored_step(void **state)
{
    fixture *t = *state;
    reply    r;

    job_ready(t);
    push_w(t, "a", TASK0_ID, 0, 0, 1, 2.0f, 4.0f);
    push_w(t, "b", TASK1_ID, 1, 0, 1, 4.0f, 8.0f);
    assert_int_equal(t->c.committed_step, 1);
    uint64_t old = t->c.incarnation;
    sr__coord_free(&t->c);
    t->io.read = t->io.n;

    fixture_open(t);
    assert_int_equal(t->c.state, COORD_SERVING);
    assert_int_equal(t->c.incarnation, old + 1);
    assert_int_equal(t->c.global_step, 1);
    assert_int_equal(t->c.restored_step, 1);
    assert_int_equal(t->c.tokens.len, 2);
    assert_true(w_value(t)[0] == -0.5f);
    assert_true(w_value(t)[1] == -1.0f);

    sr_wire_header h = hdr(t, SR_MSG_TOKEN, TASK0_ID, 0);
    h.incarnation = old;
    deliver(t, "a", &h, NULL, 0);
    assert_true(next_reply(&t->io, &r));
    assert_int_equal(r.h.status, SR_ESTALE);
    assert_int_equal(r.h.incarnation, old + 1);

    push_w(t, "a", TASK0_ID, 0, 0, 1, 2.0f, 4.0f);
    sr__coord_flush_held_batch(&t->c, 0);
    assert_true(next_reply(&t->io, &r));
    assert_int_equal(push_outcome(&r), SR_PUSH_STALE);
    assert_int_equal(client_of(t, TASK0_ID)->over_share, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_dispatch_r2_sequence_applies_and_commits_step, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_push_second_of_one_task_is_stale_beyond_share, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_token_parks_until_apply_then_waits_for_next_step,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_admit_task_minus_one_is_einval, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admit_task_switch_is_eproto, setup, teardown),
        cmocka_unit_test_setup_teardown(test_build_job_copies_holds_value_copies_rest, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_build_job_in_place_points_into_state, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_ready_store_serves_restored_step, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
