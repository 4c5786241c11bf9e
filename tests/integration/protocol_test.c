/*
 * The coordinator at the protocol level, with a raw ZeroMQ DEALER beside
 * real clients: exactly-once pushes, a parked token request whose peer went
 * away, malformed and wrong messages (each answered or dropped, none
 * changing the model), declaration conflicts, and `syncrep status`.
 */
#include "sr_test.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "core/text.h"
#include "harness.h"
#include "store/store.h"
#include "syncrep/syncrep.h"
#include "wire/wire.h"

typedef struct {
    void          *ctx, *sock;
    uint64_t       client_id;
    uint64_t       incarnation;
    uint64_t       req;
    sr_wire_header rh;
    uint8_t        body[2][4096];
    size_t         body_len[2];
    int            nbody;
} raw;

static void
raw_open(raw *r, const char *endpoint, uint64_t client_id)
{
    int zero = 0;
    memset(r, 0, sizeof(*r));
    r->ctx = zmq_ctx_new();
    r->sock = zmq_socket(r->ctx, ZMQ_DEALER);
    zmq_setsockopt(r->sock, ZMQ_LINGER, &zero, sizeof(zero));
    assert_int_equal(zmq_connect(r->sock, endpoint), 0);
    r->client_id = client_id;
}

static void
raw_close(raw *r)
{
    zmq_close(r->sock);
    zmq_ctx_term(r->ctx);
}

/* Send frames as they are (f[0] may be a deliberately broken header). */
static void
raw_send_frames(raw *r, const void *const *f, const size_t *len, int n)
{
    for (int i = 0; i < n; i++) {
        assert_true(zmq_send(r->sock, f[i], len[i], i + 1 < n ? ZMQ_SNDMORE : 0) >= 0);
    }
}

/* A header frame of a request from r, task 1 unless given (not sent). */
static size_t
raw_hdr_task(raw *r, uint8_t *hb, int type, int task, uint16_t flags, int64_t local_step,
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

static size_t
raw_hdr(raw *r, uint8_t *hb, int type, uint16_t flags, int64_t local_step, uint64_t seq)
{
    return raw_hdr_task(r, hb, type, 1, flags, local_step, seq);
}

static void
raw_send(raw *r, int type, int task, int64_t local_step, uint64_t seq, const void *const *body,
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

/* Receive one reply within timeout_ms; 0 if one came. */
static int
raw_recv(raw *r, int timeout_ms)
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

static void
raw_hello(raw *r, int task)
{
    raw_send(r, SR_MSG_HELLO, task, 0, 0, NULL, NULL, 0);
    assert_int_equal(raw_recv(r, 10000), 0);
    assert_int_equal(r->rh.status, SR_OK);
    r->incarnation = r->rh.incarnation;
}

static void
raw_push_at(raw *r, int task, const char *name, int dtype, const void *g, size_t len,
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

static void
raw_push(raw *r, int task, const char *name, int dtype, const void *g, size_t len, int64_t step,
         uint64_t seq)
{
    raw_push_at(r, task, name, dtype, g, len, 0, step, seq);
}

static int
push_outcome(raw *r)
{
    sr_wire_push_rep rep;
    assert_int_equal(raw_recv(r, 10000), 0);
    assert_int_equal(r->rh.status, SR_OK);
    assert_sr_ok(sr_wire_push_rep_decode(r->body[0], r->body_len[0], &rep));
    return rep.outcome;
}

static double
pull_x(sr_client *c)
{
    double x = -1;
    assert_sr_ok(sr_client_pull(c, "x", &x, sizeof(x)));
    return x;
}

/* A chief with x = 10 (float64) and an int64 counter, R = 2. */
static sr_client *
setup(sr_harness *h, const char *tag, const char *R)
{
    const double  x0 = 10.0;
    const int64_t n0 = 7;
    sr_client    *chief;

    sr_harness_init(h, tag);
    /* Raw clients and second workers join as tasks 1 and 2. */
    sr_harness_start(h, "--replicas-to-aggregate", R, "--learning-rate", "1.0", "--max-tasks", "3",
                     NULL);
    chief = sr_harness_client(h, 0);
    assert_sr_ok(sr_client_declare(chief, "x", SR_FLOAT64, 0, NULL, &x0));
    assert_sr_ok(sr_client_declare(chief, "n", SR_INT64, 0, NULL, &n0));
    assert_sr_ok(sr_client_ready(chief));
    return chief;
}

static void
test_protocol_resent_push_counted_once(void **state)
{
    sr_harness   h;
    sr_client   *chief = setup(&h, "dup", "2");
    raw          r;
    const double g1 = 2.0, g2 = 4.0;
    int64_t      gs;
    (void)state;

    raw_open(&r, h.endpoint, 0x1111);
    raw_hello(&r, 1);
    raw_push(&r, 1, "x", SR_FLOAT64, &g1, sizeof(g1), 0, 1);
    assert_int_equal(push_outcome(&r), SR_PUSH_ACCEPTED);
    /* The same (client, seq) again, as a client resending after a timeout. */
    raw_push(&r, 1, "x", SR_FLOAT64, &g1, sizeof(g1), 0, 1);
    assert_int_equal(push_outcome(&r), SR_PUSH_DUPLICATE);
    assert_sr_ok(sr_client_global_step(chief, &gs));
    assert_int_equal(gs, 0); /* one of R = 2 so far */
    assert_sr_ok(sr_client_push(chief, "x", &g2, sizeof(g2)));
    assert_sr_ok(sr_client_global_step(chief, &gs));
    assert_int_equal(gs, 1);
    assert_true(pull_x(chief) == 10.0 - (2.0 + 4.0) / 2);
    raw_close(&r);
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

static int
task1_not_waiting(void *arg)
{
    char        out[8192];
    const char *w;
    if (sr_harness_status(arg, out, sizeof(out)) != 0 ||
        (w = strstr(out, "\"task_index\":1,")) == NULL) {
        return 0;
    }
    return strstr(w, "\"waiting_for_token\":false") != NULL;
}

static void expect_error(raw *r, int code);

/* Partitions: x = float64[6] with --partition-bytes 16 is 3 partitions of 2
 * rows (16 bytes), each its own accumulator (R = 2).  The client splits its
 * pushes; a raw peer may push one partition or the whole variable; anything
 * else is refused, naming the layout, and changes nothing. */
static void
test_protocol_partitions_each_an_accumulator(void **state)
{
    sr_harness    h;
    sr_client    *c[2];
    raw           r;
    const int64_t shape[1] = {6};
    const double  x0[6] = {10, 20, 30, 40, 50, 60};
    double        g[6] = {1, 2, 3, 4, 5, 6}, x[6];
    char          out[8192];
    (void)state;

    sr_harness_init(&h, "parts");
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "1.0",
                     "--partition-bytes", "16", "--step-log", NULL);
    for (int i = 0; i < 2; i++) {
        c[i] = sr_harness_client(&h, i);
        assert_sr_ok(sr_client_declare(c[i], "x", SR_FLOAT64, 1, shape, i == 0 ? x0 : NULL));
    }
    assert_sr_ok(sr_client_ready(c[0]));
    assert_sr_ok(sr_client_ready(c[1]));
    assert_int_equal(sr_harness_status(&h, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "\"partitions\":3"));

    /* Worker 0 through the client (3 partition messages; the call returns
     * when the first two are answered, the flush waits for the last);
     * worker 1 raw: partition 1, a bad offset, a bad length, then the whole
     * variable. */
    assert_sr_ok(sr_client_push(c[0], "x", g, sizeof(g)));
    assert_sr_ok(sr_client_flush(c[0]));
    raw_open(&r, h.endpoint, 0x2222);
    raw_hello(&r, 1);
    raw_push_at(&r, 1, "x", SR_FLOAT64, g + 2, 16, 16, 0, 1);
    assert_int_equal(push_outcome(&r), SR_PUSH_ACCEPTED);
    raw_push_at(&r, 1, "x", SR_FLOAT64, g + 1, 16, 8, 0, 2);
    expect_error(&r, SR_EINVAL);
    assert_non_null(strstr((const char *)r.body[0], "3 partition(s) of 16 bytes"));
    raw_push_at(&r, 1, "x", SR_FLOAT64, g + 2, 24, 16, 0, 3);
    expect_error(&r, SR_EINVAL);
    /* An offset whose partition index only wraps to 1 in 32 bits. */
    raw_push_at(&r, 1, "x", SR_FLOAT64, g + 2, 16, 16 + (16ull << 32), 0, 3);
    expect_error(&r, SR_EINVAL);
    /* Partition 1 has its R = 2 now; the whole push completes 0 and 2 and
     * is stale in 1 (taken): accepted where it counted. */
    raw_push(&r, 1, "x", SR_FLOAT64, g, sizeof(g), 0, 4);
    assert_int_equal(push_outcome(&r), SR_PUSH_ACCEPTED);
    raw_close(&r);

    assert_sr_ok(sr_client_step(c[0]));
    assert_sr_ok(sr_client_pull(c[0], "x", x, sizeof(x)));
    for (int i = 0; i < 6; i++) {
        assert_true(x[i] == x0[i] - g[i]); /* mean of two equal gradients, lr 1 */
    }
    sr_client_close(c[0]);
    sr_client_close(c[1]);
    assert_int_equal(sr_harness_stop(&h), 0);

    /* The step log: 3 partitions (elements 0, 2, 4) x 2 contributions. */
    sr_store         *st;
    sr_store_opts     o = {.readonly = 1};
    sr_store_contrib *log = NULL;
    size_t            n = 0;
    assert_sr_ok(sr_store_open(h.store, &o, &st));
    assert_sr_ok(sr_store_read_log(st, 0, 1, &log, &n));
    assert_int_equal(n, 6);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(log[i].part, (int64_t)(i / 2) * 2);
        assert_int_equal(log[i].pos, (int)(i % 2));
        /* Worker 0's partitions were all answered before worker 1 sent:
         * it came first everywhere. */
        assert_int_equal(log[i].task_index, (int)(i % 2));
    }
    free(log);
    sr_store_close(st);
    sr_harness_fini(&h);
}

/* Small pushes of declared variables are pipelined: push returns before the
 * answer, the step (or sr_client_flush) takes it, and a refusal is reported
 * there, once, naming the variable, with nothing applied. */
static void
test_protocol_pipelined_push_refusal_reported_by_flush_and_step(void **state)
{
    sr_harness      h;
    sr_client      *chief = setup(&h, "pipeline", "1");
    const int64_t   bad = 3;
    const double    g = 1.0;
    sr_client_stats s;
    int64_t         gs;
    (void)state;

    assert_sr_ok(sr_client_push(chief, "n", &bad, sizeof(bad))); /* int64: not trainable */
    assert_sr_err(sr_client_flush(chief), SR_EINVAL);
    assert_non_null(strstr(sr_client_error(chief), "push n"));
    assert_sr_ok(sr_client_flush(chief)); /* reported once */

    assert_sr_ok(sr_client_push(chief, "n", &bad, sizeof(bad)));
    assert_sr_ok(sr_client_push(chief, "x", &g, sizeof(g)));
    assert_sr_err(sr_client_step(chief), SR_EINVAL); /* x's push still counted */
    assert_non_null(strstr(sr_client_error(chief), "push n"));
    assert_int_equal(sr_client_local_step(chief), 0); /* the init token */
    assert_sr_ok(sr_client_global_step(chief, &gs));
    assert_int_equal(gs, 1);
    assert_true(pull_x(chief) == 9.0);
    assert_sr_ok(sr_client_stats_get(chief, &s));
    assert_int_equal(s.accepted, 1);
    assert_int_equal(s.pushes, 1); /* refusals are not pushes */

    /* Many in flight (computed at local step 0: stale), answered in one step. */
    for (int i = 0; i < 200; i++) {
        assert_sr_ok(sr_client_push(chief, "x", &g, sizeof(g)));
    }
    assert_sr_ok(sr_client_step(chief));
    assert_int_equal(sr_client_local_step(chief), 1);
    assert_sr_ok(sr_client_stats_get(chief, &s));
    assert_int_equal(s.accepted, 1);
    assert_int_equal(s.stale, 200);
    assert_true(pull_x(chief) == 9.0);
    assert_sr_ok(sr_client_push(chief, "x", &g, sizeof(g)));
    assert_sr_ok(sr_client_step(chief));
    assert_sr_ok(sr_client_stats_get(chief, &s));
    assert_int_equal(s.accepted, 2);
    assert_true(pull_x(chief) == 8.0);
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

static void *
step_thread(void *arg)
{
    sr_client *c = arg;
    intptr_t   rc = sr_client_step(c);
    return (void *)rc;
}

static void
test_protocol_parked_token_of_vanished_peer_not_lost(void **state)
{
    sr_harness h;
    sr_client *chief = setup(&h, "park", "1");
    raw        r;
    int64_t    gs;
    (void)state;

    /* One init token (R = 1).  The chief takes it. */
    assert_sr_ok(sr_client_step(chief));
    /* A peer asks for a token (none left: it is parked), then vanishes. */
    raw_open(&r, h.endpoint, 0x2222);
    raw_hello(&r, 1);
    raw_send(&r, SR_MSG_TOKEN, 1, 0, 0, NULL, NULL, 0);
    assert_int_equal(raw_recv(&r, 300), -1); /* parked: no answer */
    raw_close(&r);
    /* The coordinator drops the request once the peer is gone: at once when
     * ZeroMQ reports it unreachable, at the latest when it stops pinging. */
    assert_true(sr_test_wait_until(task1_not_waiting, &h, 20000));
    /* The next step's tokens (max(N, R) = 1) must reach the chief, not the
     * vanished peer: the chief pushes, applies step 1, and gets its token. */
    const double g = 1.0;
    assert_sr_ok(sr_client_push(chief, "x", &g, sizeof(g)));
    pthread_t t;
    void     *ret;
    assert_int_equal(pthread_create(&t, NULL, step_thread, chief), 0);
    pthread_join(t, &ret);
    assert_int_equal((intptr_t)ret, SR_OK);
    assert_sr_ok(sr_client_global_step(chief, &gs));
    assert_int_equal(gs, 1);
    assert_int_equal(sr_client_local_step(chief), 1);
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

static void
expect_error(raw *r, int code)
{
    assert_int_equal(raw_recv(r, 10000), 0);
    if (r->rh.status != code) {
        fprintf(stderr, "status %d (%s): %.*s\n", r->rh.status, sr_errname(r->rh.status),
                (int)r->body_len[0], (const char *)r->body[0]);
    }
    assert_int_equal(r->rh.status, code);
    assert_true(r->nbody >= 1 && r->body_len[0] > 0); /* the error text */
}

static void
test_protocol_bad_messages_answered_and_change_nothing(void **state)
{
    sr_harness    h;
    sr_client    *chief = setup(&h, "bad", "1");
    raw           r;
    const double  g = 1.0, nan_g = 0.0 / 0.0;
    const float   gf = 1.0f;
    const int64_t gi = 1;
    int64_t       gs;
    (void)state;

    raw_open(&r, h.endpoint, 0x3333);
    raw_hello(&r, 1);

    /* Garbage and a short header: no header to answer to; dropped. */
    const void *junk[1] = {"not a syncrep message at all......"};
    size_t      jlen[1] = {30};
    raw_send_frames(&r, junk, jlen, 1);
    const void *shorth[1] = {"SRP1"};
    size_t      slen[1] = {4};
    raw_send_frames(&r, shorth, slen, 1);
    assert_int_equal(raw_recv(&r, 300), -1);

    /* Unknown variable, wrong dtype, wrong size, not trainable, NaN. */
    raw_push(&r, 1, "nope", SR_FLOAT64, &g, sizeof(g), 0, 1);
    expect_error(&r, SR_ENOENT);
    raw_push(&r, 1, "x", SR_FLOAT32, &gf, sizeof(gf), 0, 2);
    expect_error(&r, SR_EINVAL);
    raw_push(&r, 1, "x", SR_FLOAT64, &g, 4, 0, 3);
    expect_error(&r, SR_EINVAL);
    raw_push(&r, 1, "n", SR_INT64, &gi, sizeof(gi), 0, 4);
    expect_error(&r, SR_EINVAL);
    raw_push(&r, 1, "x", SR_FLOAT64, &nan_g, sizeof(nan_g), 0, 5);
    expect_error(&r, SR_ENONFINITE);
    /* A frame larger than any variable (plus 1 MiB): refused as malformed. */
    size_t  big_len = (2u << 20) + 8;
    double *big = calloc(1, big_len);
    assert_non_null(big);
    raw_push(&r, 1, "x", SR_FLOAT64, big, big_len, 0, 6);
    expect_error(&r, SR_EPROTO);
    free(big);
    /* A push with a missing data frame, and an unreadable descriptor. */
    const void *b1[1] = {"\x01\x00x\x02"};
    size_t      l1[1] = {4};
    raw_send(&r, SR_MSG_PUSH, 1, 0, 6, b1, l1, 1);
    expect_error(&r, SR_EPROTO);
    /* A request for another incarnation. */
    r.incarnation += 7;
    raw_push(&r, 1, "x", SR_FLOAT64, &g, sizeof(g), 0, 7);
    expect_error(&r, SR_ESTALE);
    r.incarnation -= 7;
    /* A non-chief declaring a variable the chief never declared. */
    sr_wire_vardesc vd;
    uint8_t         vb[SR_WIRE_BODY_MAX];
    memset(&vd, 0, sizeof(vd));
    snprintf(vd.name, sizeof(vd.name), "intruder");
    vd.dtype = SR_FLOAT32;
    const void *db[1] = {vb};
    size_t      dl[1] = {sr_wire_vardesc_encode(&vd, vb, sizeof(vb))};
    raw_send(&r, SR_MSG_DECLARE, 1, 0, 0, db, dl, 1);
    expect_error(&r, SR_ENOENT);

    /* Nothing changed: no step applied, x as declared; and the coordinator
     * still serves: one good push (R = 1) applies a step. */
    assert_sr_ok(sr_client_global_step(chief, &gs));
    assert_int_equal(gs, 0);
    assert_true(pull_x(chief) == 10.0);
    assert_sr_ok(sr_client_push(chief, "x", &g, sizeof(g)));
    assert_sr_ok(sr_client_global_step(chief, &gs));
    assert_int_equal(gs, 1);
    assert_true(pull_x(chief) == 9.0);

    /* The chief re-declaring x with another shape or dtype: refused. */
    const int64_t shape[1] = {2};
    const double  two[2] = {0, 0};
    raw_close(&r);
    sr_client *chief2 = sr_harness_client(&h, 0);
    assert_sr_err(sr_client_declare(chief2, "x", SR_FLOAT64, 1, shape, two), SR_EEXIST);
    assert_non_null(strstr(sr_client_error(chief2), "float64[]"));
    assert_sr_err(sr_client_declare(chief2, "x", SR_FLOAT32, 0, NULL, &gf), SR_EEXIST);
    assert_true(pull_x(chief) == 9.0);
    /* A pull into a buffer of the wrong size is refused by the client. */
    float small;
    assert_sr_err(sr_client_pull(chief, "x", &small, sizeof(small)), SR_EINVAL);

    /* A variable bigger than this machine's memory (with its accumulator):
     * refused, saying so, before anything is allocated. */
    const int64_t huge[1] = {INT64_C(1) << 40};
    assert_sr_err(sr_client_declare(chief, "huge", SR_FLOAT32, 1, huge, NULL), SR_ENOMEM);
    assert_non_null(strstr(sr_client_error(chief), "more than this machine's memory"));
    /* A worker pushing a float64 gradient of a variable it did not declare:
     * the refusal says why the dtype went as float32, and the coordinator's
     * text is not prefixed twice. */
    sr_client *w = sr_harness_client(&h, 1);
    assert_sr_ok(sr_client_ready(w));
    assert_sr_err(sr_client_push(w, "x", &g, sizeof(g)), SR_EINVAL);
    assert_non_null(strstr(sr_client_error(w), "was not declared by this client"));
    assert_null(strstr(sr_client_error(w), "push x: push x"));
    sr_client_close(w);
    assert_true(pull_x(chief) == 9.0);

    sr_client_close(chief2);
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

static void
test_protocol_status_reports_workers_and_counts(void **state)
{
    sr_harness   h;
    sr_client   *chief = setup(&h, "status", "1");
    const double g = 1.0;
    char         cmd[1200], out[8192];
    FILE        *p;
    size_t       n;
    (void)state;

    assert_sr_ok(sr_client_push(chief, "x", &g, sizeof(g))); /* accepted: step 1 */
    assert_sr_ok(sr_client_push(chief, "x", &g, sizeof(g))); /* stale: still local 0 */
    assert_sr_ok(sr_client_flush(chief)); /* both answered before we ask another socket */
    assert_int_equal(sr_harness_status(&h, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "\"global_step\":1"));
    assert_non_null(strstr(out, "\"replicas_to_aggregate\":1"));
    assert_non_null(strstr(out, "\"task_index\":0"));
    assert_non_null(strstr(out, "\"accepted\":1,\"stale\":1,\"duplicate\":0"));
    /* The human form names the columns. */
    snprintf(cmd, sizeof(cmd), "%s status --connect %s", sr_test_syncrep_bin(), h.endpoint);
    p = popen(cmd, "r");
    n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    assert_int_equal(pclose(p), 0);
    assert_non_null(strstr(out, "global step 1"));
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

/* ---- a hostile client while two honest workers train ------------------ */

#define HX_N    4
#define HX_LR   0.25
#define HX_STEP 40

typedef struct {
    sr_client *c;
    int        rc;
    int        chain; /* ends each round with sr_client_push_step */
} honest;

static const double hx_target[HX_N] = {1.0, -2.0, 0.5, 3.0};

/* Both workers compute the same gradient x - target from the same x, so the
 * result is the same whichever of them the accumulator takes. */
static void *
honest_loop(void *arg)
{
    honest *w = arg;
    double  x[HX_N], g[HX_N];
    while (w->rc == 0 && sr_client_local_step(w->c) < HX_STEP) {
        if ((w->rc = sr_client_pull(w->c, "x", x, sizeof(x))) != 0) {
            break;
        }
        for (int i = 0; i < HX_N; i++) {
            g[i] = x[i] - hx_target[i];
        }
        if (w->chain) {
            w->rc = sr_client_push_step(w->c, "x", g, sizeof(g));
            continue;
        }
        if ((w->rc = sr_client_push(w->c, "x", g, sizeof(g))) != 0) {
            break;
        }
        w->rc = sr_client_step(w->c);
    }
    return NULL;
}

/* n wrong PUSHes of x (float32 for float64) chained in one message, then
 * `last` (a header only, unflagged), or nothing if last is 0: every one is
 * refused, whatever the chain. */
static void
bad_chain(raw *r, int n, int last)
{
    const float      f32[HX_N] = {1, 1, 1, 1};
    sr_wire_pushdesc pd;
    uint8_t          pdb[SR_WIRE_BODY_MAX], hb[16][SR_WIRE_HEADER_BYTES];
    const void      *f[64];
    size_t           len[64];
    int              k = 0;

    memset(&pd, 0, sizeof(pd));
    snprintf(pd.name, sizeof(pd.name), "x");
    pd.dtype = SR_FLOAT32;
    pd.count = sizeof(f32);
    for (int i = 0; i < n && i < 15; i++) {
        f[k] = hb[i];
        len[k++] = raw_hdr(r, hb[i], SR_MSG_PUSH, SR_WIRE_F_CHAIN, 0, 0);
        f[k] = pdb;
        len[k++] = sr_wire_pushdesc_encode(&pd, pdb, sizeof(pdb));
        f[k] = f32;
        len[k++] = sizeof(f32);
    }
    if (last != 0) { /* a flagged PING: refused */
        f[k] = hb[15];
        len[k++] = raw_hdr(r, hb[15], last, last == SR_MSG_PING ? SR_WIRE_F_CHAIN : 0, 0, 0);
    }
    raw_send_frames(r, f, len, k);
}

/* A PULL of many (SR_WIRE_F_MANY) with n body frames, each `body` (which
 * need not be a name). */
static void
raw_pull_many(raw *r, int n, const void *body, size_t body_len)
{
    uint8_t     hb[SR_WIRE_HEADER_BYTES];
    const void *f[32];
    size_t      len[32];

    f[0] = hb;
    len[0] = raw_hdr(r, hb, SR_MSG_PULL, SR_WIRE_F_MANY, 0, 0);
    for (int i = 1; i <= n && i < 32; i++) {
        f[i] = body;
        len[i] = body_len;
    }
    raw_send_frames(r, f, len, n + 1 < 32 ? n + 1 : 32);
}

typedef struct {
    const char *endpoint;
    atomic_int  stop; /* set by the test's thread */
    long        sent;
} hostile;

/* Every class of bad message, over and over, without ever waiting. */
static void *
hostile_loop(void *arg)
{
    hostile         *h = arg;
    raw              r;
    const double     nan_g[HX_N] = {0, 0.0 / 0.0, 0, 0};
    const double     short_g[2] = {1, 1};
    const float      f32[HX_N] = {1, 1, 1, 1};
    const int64_t    big_idx[1] = {1 << 20};
    const double     row[HX_N] = {1, 1, 1, 1};
    sr_wire_pushdesc pd;
    uint8_t          pdb[SR_WIRE_BODY_MAX];

    raw_open(&r, h->endpoint, 0x6666);
    raw_hello(&r, 1);
    while (!h->stop) {
        const void *junk[1] = {"\xff\xfe garbage that is not a header at all....."};
        size_t      jl[1] = {40};
        raw_send_frames(&r, junk, jl, 1);
        raw_send(&r, 77, 1, 0, 0, NULL, NULL, 0); /* unknown type */
        raw_push(&r, 1, "nope", SR_FLOAT64, row, sizeof(row), 0, 0);
        raw_push(&r, 1, "x", SR_FLOAT32, f32, sizeof(f32), 0, 0);
        raw_push(&r, 1, "x", SR_FLOAT64, short_g, sizeof(short_g), 0, 0);
        raw_push(&r, 1, "x", SR_FLOAT64, nan_g, sizeof(nan_g), 0, 0);
        raw_push(&r, 1, "n", SR_INT64, big_idx, sizeof(big_idx), 0, 0);
        memset(&pd, 0, sizeof(pd));
        snprintf(pd.name, sizeof(pd.name), "x");
        pd.dtype = SR_FLOAT64;
        pd.count = 1;
        const void *sb[3] = {pdb, big_idx, row};
        size_t      sl[3] = {sr_wire_pushdesc_encode(&pd, pdb, sizeof(pdb)), 8, 8};
        raw_send(&r, SR_MSG_PUSH_SPARSE, 1, 0, 0, sb, sl, 3); /* a scalar has no rows */
        r.incarnation += 1000;
        raw_push(&r, 1, "x", SR_FLOAT64, row, sizeof(row), 0, 0); /* another incarnation */
        r.incarnation -= 1000;
        bad_chain(&r, 2, SR_MSG_PING);  /* two wrong pushes, then a flagged PING */
        bad_chain(&r, 1, 0);            /* a flagged push with nothing after it */
        bad_chain(&r, 11, SR_MSG_PING); /* 35 frames: too many */
        uint8_t nb[SR_WIRE_BODY_MAX];
        size_t  nl = sr_wire_name_encode("x", nb, sizeof(nb));
        raw_pull_many(&r, 0, NULL, 0); /* no name */
        raw_pull_many(&r, 30, nb, nl); /* too many names */
        raw_pull_many(&r, 3,
                      "\x09\x00"
                      "abc",
                      5);              /* frames that are no names */
        raw_pull_many(&r, 24, nb, nl); /* 24 values, read below */
        /* Well-formed, with hostile values: task indexes outside the job
         * (each from a new client), this client under another task's index
         * with a gradient that would otherwise count, steps at the ends of
         * the range. */
        uint64_t me = r.client_id;
        r.client_id = 0x100000 + (uint64_t)h->sent;
        raw_send(&r, SR_MSG_HELLO, -1, 0, 0, NULL, NULL, 0);
        raw_send(&r, SR_MSG_HELLO, INT32_MIN, 0, 0, NULL, NULL, 0);
        raw_send(&r, SR_MSG_TOKEN, 2, 0, 0, NULL, NULL, 0);
        r.client_id = me;
        raw_push(&r, 0, "x", SR_FLOAT64, row, sizeof(row), 0, 0);
        raw_push(&r, 1, "x", SR_FLOAT64, row, sizeof(row), INT64_MAX, 0);
        raw_push(&r, 1, "x", SR_FLOAT64, row, sizeof(row), INT64_MIN, 0);
        h->sent += 22;
        /* drain the answers so the socket never blocks */
        while (raw_recv(&r, 0) == 0) {
        }
    }
    raw_close(&r);
    return NULL;
}

static void
test_protocol_hostile_client_during_training_changes_nothing(void **state)
{
    sr_harness    h;
    honest        w[2];
    hostile       bad = {0};
    pthread_t     tw[2], th;
    const double  x0[HX_N] = {0, 0, 0, 0};
    const int64_t n0 = 0, shape[1] = {HX_N};
    double        x[HX_N], want[HX_N];
    int64_t       gs;
    (void)state;

    sr_harness_init(&h, "hostile");
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "0.25", NULL);
    for (int i = 0; i < 2; i++) {
        w[i].rc = 0;
        w[i].chain = i == 1;
        w[i].c = sr_harness_client(&h, i);
        assert_sr_ok(sr_client_declare(w[i].c, "x", SR_FLOAT64, 1, shape, i == 0 ? x0 : NULL));
        if (i == 0) {
            assert_sr_ok(sr_client_declare(w[i].c, "n", SR_INT64, 0, NULL, &n0));
            assert_sr_ok(sr_client_ready(w[i].c));
        }
    }
    assert_sr_ok(sr_client_ready(w[1].c));
    bad.endpoint = h.endpoint;
    assert_int_equal(pthread_create(&th, NULL, hostile_loop, &bad), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_create(&tw[i], NULL, honest_loop, &w[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(tw[i], NULL);
        assert_sr_ok(w[i].rc);
    }
    bad.stop = 1;
    pthread_join(th, NULL);
    assert_true(bad.sent > 0);

    /* The same as training without the hostile client: x_{s+1} = x_s - lr g_s. */
    assert_sr_ok(sr_client_global_step(w[0].c, &gs));
    assert_true(gs >= HX_STEP);
    memcpy(want, x0, sizeof(want));
    for (int64_t s = 0; s < gs; s++) {
        for (int i = 0; i < HX_N; i++) {
            double g = want[i] - hx_target[i];
            double sum = g + g;
            want[i] -= HX_LR * (sum / 2.0);
        }
    }
    assert_sr_ok(sr_client_pull(w[0].c, "x", x, sizeof(x)));
    assert_memory_equal(x, want, sizeof(x));
    fprintf(stderr, "hostile messages sent: %ld, steps: %lld\n", bad.sent, (long long)gs);
    for (int i = 0; i < 2; i++) {
        sr_client_close(w[i].c);
    }
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

/* Receive the next reply and check its type. */
static void
expect_reply(raw *r, int type, int timeout_ms)
{
    assert_int_equal(raw_recv(r, timeout_ms), 0);
    assert_int_equal(r->rh.type, type | SR_WIRE_REPLY);
    assert_int_equal(r->rh.status, SR_OK);
}

/* A push's answer is held back so that it leaves with the pusher's token
 * (one wake-up for the worker), but never for long: a pusher whose token
 * has to wait gets the answer within the hold (200 ms), long before its
 * one-second resend and the 3.5 s after which a silent peer's parked
 * request is dropped. */
static void
test_protocol_push_answer_held_for_the_token_not_longer(void **state)
{
    sr_harness   h;
    sr_client   *chief = setup(&h, "hold", "2");
    raw          r;
    const double g = 2.0;
    (void)state;

    raw_open(&r, h.endpoint, 0x4444);
    raw_hello(&r, 1);
    /* The chief and the peer take the two init tokens (max(N, R) = 2): the
     * peer's next request waits. */
    assert_sr_ok(sr_client_step(chief));
    raw_send(&r, SR_MSG_TOKEN, 1, 0, 0, NULL, NULL, 0);
    expect_reply(&r, SR_MSG_TOKEN, 10000);
    /* Push (one of R = 2), ask for a token: parked; the push's answer
     * comes on its own, well before 3.5 s. */
    raw_push(&r, 1, "x", SR_FLOAT64, &g, sizeof(g), 0, 1);
    raw_send(&r, SR_MSG_TOKEN, 1, 0, 0, NULL, NULL, 0);
    expect_reply(&r, SR_MSG_PUSH, 2000);
    assert_int_equal(raw_recv(&r, 0), -1); /* no token yet */
    /* The chief completes the step: the parked request gets step 1. */
    assert_sr_ok(sr_client_push(chief, "x", &g, sizeof(g)));
    expect_reply(&r, SR_MSG_TOKEN, 10000);
    assert_int_equal(r.rh.local_step, 1);
    /* Push and token together, the step completed by the chief at once:
     * the push's answer still comes first. */
    assert_sr_ok(sr_client_step(chief)); /* step 1's other token */
    assert_int_equal(sr_client_local_step(chief), 1);
    raw_push(&r, 1, "x", SR_FLOAT64, &g, sizeof(g), 1, 2);
    raw_send(&r, SR_MSG_TOKEN, 1, 1, 0, NULL, NULL, 0);
    assert_sr_ok(sr_client_push(chief, "x", &g, sizeof(g)));
    expect_reply(&r, SR_MSG_PUSH, 10000);
    expect_reply(&r, SR_MSG_TOKEN, 10000);
    assert_int_equal(r.rh.local_step, 2);
    assert_true(pull_x(chief) == 10.0 - 2 * 2.0);
    raw_close(&r);
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

/* ---- chains: several requests in one message, their replies in one ----- */

/* One whole message as it came: each frame copied (at most 8 of 512 bytes). */
typedef struct {
    int     n;
    size_t  len[8];
    uint8_t data[8][512];
} whole_msg;

static void
recv_whole(raw *r, whole_msg *m)
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

/* Header frame `i` of m: decoded, of this type (a reply), flags, status. */
static sr_wire_header
whole_hdr(const whole_msg *m, int i, int type, uint16_t flags, int status)
{
    sr_wire_header h;
    assert_true(i < m->n);
    assert_sr_ok(sr_wire_header_decode(m->data[i], m->len[i], &h));
    assert_int_equal(h.type, type | SR_WIRE_REPLY);
    assert_int_equal(h.flags, flags);
    assert_int_equal(h.status, status);
    return h;
}

/* x's gradient g as PUSH frames (header flagged `flags`, pushdesc, data). */
static void
push_frames(raw *r, uint8_t *hb, uint8_t *pd, const double *g, uint16_t flags, int64_t step,
            uint64_t seq, const void **f, size_t *len)
{
    sr_wire_pushdesc p;
    memset(&p, 0, sizeof(p));
    snprintf(p.name, sizeof(p.name), "x");
    p.dtype = SR_FLOAT64;
    p.count = sizeof(*g);
    f[0] = hb;
    len[0] = raw_hdr(r, hb, SR_MSG_PUSH, flags, step, seq);
    f[1] = pd;
    len[1] = sr_wire_pushdesc_encode(&p, pd, SR_WIRE_BODY_MAX);
    f[2] = g;
    len[2] = sizeof(*g);
}

/* A PUSH flagged SR_WIRE_F_CHAIN and a TOKEN request in one message: one
 * message back, the push's answer (flagged) then the token.  Chains the
 * coordinator must refuse are answered with SR_EPROTO and change nothing:
 * the flag on a TOKEN, and a flagged PUSH with nothing after it. */
static void
test_protocol_chain_push_and_token_one_message_each_way(void **state)
{
    sr_harness       h;
    sr_client       *chief = setup(&h, "chain", "1");
    raw              r;
    const double     g = 2.0;
    uint8_t          hb[2][SR_WIRE_HEADER_BYTES], pd[SR_WIRE_BODY_MAX];
    const void      *f[4];
    size_t           len[4];
    whole_msg        m;
    sr_wire_push_rep pr;
    sr_wire_header   th;
    int64_t          gs;
    char             out[8192];
    (void)state;

    raw_open(&r, h.endpoint, 0x5555);
    raw_hello(&r, 1);
    assert_int_equal(r.rh.flags & SR_WIRE_F_CHAIN, SR_WIRE_F_CHAIN); /* takes chains */
    raw_send(&r, SR_MSG_TOKEN, 1, 0, 0, NULL, NULL, 0);
    expect_reply(&r, SR_MSG_TOKEN, 10000);
    assert_int_equal(r.rh.local_step, 0); /* the init token (R = 1) */

    for (int64_t step = 0; step < 2; step++) {
        push_frames(&r, hb[0], pd, &g, SR_WIRE_F_CHAIN, step, (uint64_t)step + 1, f, len);
        f[3] = hb[1];
        len[3] = raw_hdr(&r, hb[1], SR_MSG_TOKEN, 0, step, 0);
        raw_send_frames(&r, f, len, 4);
        recv_whole(&r, &m);
        assert_int_equal(m.n, 3);
        whole_hdr(&m, 0, SR_MSG_PUSH, SR_WIRE_F_CHAIN, SR_OK);
        assert_sr_ok(sr_wire_push_rep_decode(m.data[1], m.len[1], &pr));
        assert_int_equal(pr.outcome, SR_PUSH_ACCEPTED);
        th = whole_hdr(&m, 2, SR_MSG_TOKEN, 0, SR_OK);
        assert_int_equal(th.local_step, step + 1); /* R = 1: the push made the step */
    }
    assert_true(pull_x(chief) == 10.0 - 2 * 2.0);
    assert_int_equal(sr_harness_status(&h, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "\"rejected\":0,\"chained\":4}")); /* task 1: 2 x 2 */

    /* The flag on a TOKEN: refused, the push behind it not handled. */
    f[0] = hb[1];
    len[0] = raw_hdr(&r, hb[1], SR_MSG_TOKEN, SR_WIRE_F_CHAIN, 2, 0);
    push_frames(&r, hb[0], pd, &g, 0, 2, 3, &f[1], &len[1]);
    raw_send_frames(&r, f, len, 4);
    recv_whole(&r, &m);
    assert_int_equal(m.n, 2); /* header, error text */
    whole_hdr(&m, 0, SR_MSG_TOKEN, 0, SR_EPROTO);
    /* A flagged PUSH with nothing after it: refused, not counted. */
    push_frames(&r, hb[0], pd, &g, SR_WIRE_F_CHAIN, 2, 4, f, len);
    raw_send_frames(&r, f, len, 3);
    recv_whole(&r, &m);
    whole_hdr(&m, 0, SR_MSG_PUSH, 0, SR_EPROTO);
    assert_non_null(memmem(m.data[1], m.len[1], "chained", 7));
    assert_sr_ok(sr_client_global_step(chief, &gs));
    assert_int_equal(gs, 2); /* R = 1: either push would have made step 3 */
    assert_true(pull_x(chief) == 10.0 - 2 * 2.0);
    raw_close(&r);
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

/* sr_client_push_step: the push and the token in one call (one message
 * each way: the coordinator counts the chained requests); a push refused
 * before it is sent takes no step. */
static void
test_protocol_push_step_pushes_and_steps(void **state)
{
    sr_harness      h;
    sr_client      *chief = setup(&h, "pushstep", "1");
    const double    g = 1.0;
    sr_client_stats s;
    char            out[8192];
    (void)state;

    assert_sr_ok(sr_client_step(chief)); /* the init token: local step 0 */
    for (int i = 1; i <= 3; i++) {
        assert_sr_ok(sr_client_push_step(chief, "x", &g, sizeof(g)));
        assert_int_equal(sr_client_local_step(chief), i);
    }
    assert_true(pull_x(chief) == 10.0 - 3 * 1.0);
    assert_sr_ok(sr_client_stats_get(chief, &s));
    assert_int_equal(s.accepted, 3);
    assert_int_equal(s.pushes, 3);
    assert_int_equal(s.resends, 0);
    assert_int_equal(sr_harness_status(&h, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "\"chained\":6}")); /* 3 x (PUSH + TOKEN) */
    /* Refused by the client (wrong size) or by the coordinator before any
     * token (no such variable): an error, and no step. */
    assert_sr_err(sr_client_push_step(chief, "x", &g, 4), SR_EINVAL);
    assert_sr_err(sr_client_push_step(chief, "nope", &g, sizeof(g)), SR_ENOENT);
    assert_int_equal(sr_client_local_step(chief), 3);
    /* Still in step with push + step afterwards. */
    assert_sr_ok(sr_client_push(chief, "x", &g, sizeof(g)));
    assert_sr_ok(sr_client_step(chief));
    assert_int_equal(sr_client_local_step(chief), 4);
    assert_true(pull_x(chief) == 10.0 - 4 * 1.0);
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

/* The integer after "key": in a STATUS text; -1 if absent. */
static long long
status_num(const char *out, const char *key)
{
    const char *p = strstr(out, key);
    return p != NULL ? strtoll(p + strlen(key), NULL, 10) : -1;
}

/* ---- many variables: sr_client_pull_many, sr_client_push_many ---------- */

#define MV_N   40   /* small variables mv00..: float32[i + 1] */
#define MV_BIG 3000 /* float32 elements of "big": three partitions of 4 KiB */

static void
mv_name(char *buf, int i)
{
    snprintf(buf, 8, "mv%02d", i);
}

/* Element j of variable i after `steps` steps: each step subtracts
 * lr x mean(1, 2) = 0.5 x 1.5 (exact in float32). */
static float
mv_value(int i, size_t j, int steps)
{
    return (float)(i * 100 + (int)(j % 50)) - 0.75f * (float)steps;
}

/* Two workers train a model of 40 small variables, a partitioned one
 * and an int64 counter with sr_client_pull_many and sr_client_push_many:
 * every value is exact after each step, the pushes went in chains (STATUS
 * counts them), and every push was accepted once.  Then what either call
 * refuses: an unknown name or a wrong size among many, NULL arguments. */
static void
test_protocol_pull_many_and_push_many(void **state)
{
    sr_harness      h;
    sr_client      *w[2];
    char            names_buf[MV_N + 2][8];
    const char     *names[MV_N + 2];
    void           *vals[MV_N + 2];
    const void     *grads[2][MV_N + 1];
    size_t          bytes[MV_N + 2];
    float          *big = malloc((size_t)MV_BIG * sizeof(float));
    float          *g[2];
    int64_t         n0 = 7, n = 0, shape[1];
    sr_client_stats st;
    char            out[16384];
    (void)state;

    assert_non_null(big);
    sr_harness_init(&h, "many");
    /* Small partitions: the model stays small (ThreadSanitizer makes every
     * byte ZeroMQ sends from instrumented memory slow). */
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "0.5",
                     "--partition-bytes", "4096", NULL);
    for (int i = 0; i < MV_N + 2; i++) {
        size_t elems = i < MV_N ? (size_t)i + 1 : i == MV_N ? (size_t)MV_BIG : 1;
        names[i] = names_buf[i];
        if (i < MV_N) {
            mv_name(names_buf[i], i);
        } else {
            snprintf(names_buf[i], 8, "%s", i == MV_N ? "big" : "n");
        }
        bytes[i] = elems * (i <= MV_N ? sizeof(float) : sizeof(int64_t));
        vals[i] = i == MV_N ? (void *)big : i == MV_N + 1 ? (void *)&n : malloc(bytes[i]);
        assert_non_null(vals[i]);
    }
    for (int k = 0; k < 2; k++) {
        g[k] = malloc((size_t)MV_BIG * sizeof(float));
        assert_non_null(g[k]);
        for (size_t j = 0; j < (size_t)MV_BIG; j++) {
            g[k][j] = (float)(k + 1);
        }
        for (int i = 0; i <= MV_N; i++) {
            grads[k][i] = g[k];
        }
        w[k] = sr_harness_client(&h, k);
        for (int i = 0; i <= MV_N; i++) {
            float *init = k == 0 ? vals[i] : NULL;
            for (size_t j = 0; init != NULL && j < bytes[i] / sizeof(float); j++) {
                init[j] = mv_value(i, j, 0);
            }
            shape[0] = (int64_t)(bytes[i] / sizeof(float));
            assert_sr_ok(sr_client_declare(w[k], names[i], SR_FLOAT32, 1, shape, init));
        }
        assert_sr_ok(
            sr_client_declare_ex(w[k], "n", SR_INT64, 0, NULL, &n0, SR_DECLARE_NOT_TRAINABLE));
    }
    for (int k = 0; k < 2; k++) {
        assert_sr_ok(sr_client_ready(w[k]));
        assert_sr_ok(sr_client_step(w[k])); /* the init tokens: local step 0 */
    }
    for (int step = 0; step < 3; step++) {
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < MV_N + 2; i++) {
                memset(vals[i], 0xff, bytes[i]);
            }
            assert_sr_ok(sr_client_pull_many(w[k], MV_N + 2, names, vals, bytes));
            for (int i = 0; i <= MV_N; i++) {
                const float *v = vals[i];
                for (size_t j = 0; j < bytes[i] / sizeof(float); j++) {
                    if (v[j] != mv_value(i, j, step)) {
                        fail_msg("step %d, worker %d: %s[%zu] = %g, want %g", step, k, names[i], j,
                                 (double)v[j], (double)mv_value(i, j, step));
                    }
                }
            }
            assert_int_equal(n, 7);
            assert_sr_ok(sr_client_push_many(w[k], MV_N + 1, names, grads[k], bytes));
        }
        for (int k = 0; k < 2; k++) {
            assert_sr_ok(sr_client_step(w[k]));
            assert_int_equal(sr_client_local_step(w[k]), step + 1);
        }
    }
    for (int k = 0; k < 2; k++) {
        assert_sr_ok(sr_client_flush(w[k]));
        assert_sr_ok(sr_client_stats_get(w[k], &st));
        /* 40 pushes and the partitions of "big" (3) a step */
        assert_int_equal(st.pushes, 3 * (MV_N + 3));
        assert_int_equal(st.accepted, st.pushes);
        assert_int_equal(st.resends, 0);
    }
    assert_int_equal(sr_harness_status(&h, out, sizeof(out)), 0);
    /* Ten pushes a message: at least the first nine of every ten chained. */
    const char *t1 = strstr(out, "{\"task_index\":1,");
    assert_non_null(t1);
    assert_true(status_num(out, "\"chained\":") >= 3 * 36);
    assert_true(status_num(t1, "\"chained\":") >= 3 * 36);

    /* Refusals: the first failure, named. */
    const char *bad[3] = {"mv01", "nope", "mv02"};
    void       *bv[3] = {vals[1], vals[0], vals[2]};
    size_t      bb[3] = {bytes[1], bytes[0], bytes[2]};
    assert_sr_err(sr_client_pull_many(w[1], 3, bad, bv, bb), SR_ENOENT);
    assert_non_null(strstr(sr_client_error(w[1]), "nope"));
    bad[1] = "mv03";
    assert_sr_err(sr_client_pull_many(w[1], 3, bad, bv, bb), SR_EINVAL);
    assert_non_null(strstr(sr_client_error(w[1]), "pull mv03: variable is float32[4] = 16 bytes"));
    assert_sr_err(sr_client_pull_many(w[1], 3, NULL, bv, bb), SR_EINVAL);
    assert_sr_ok(sr_client_pull_many(w[1], 0, NULL, NULL, NULL));
    /* A push refused among many: the ones before it are pushed. */
    bad[1] = "nope";
    const void *bg[3] = {g[1], g[1], g[1]};
    assert_sr_err(sr_client_push_many(w[1], 3, bad, bg, bb), SR_ENOENT);
    assert_sr_ok(sr_client_flush(w[1])); /* mv01's answer */
    assert_sr_ok(sr_client_stats_get(w[1], &st));
    assert_int_equal(st.pushes, 3 * (MV_N + 3) + 1);
    /* Still in step: the other worker's pushes make step 4. */
    assert_sr_ok(sr_client_push_many(w[0], MV_N + 1, names, grads[0], bytes));
    assert_sr_ok(sr_client_push_many(w[1], MV_N + 1, names, grads[1], bytes));
    assert_sr_ok(sr_client_step(w[0]));
    assert_sr_ok(sr_client_pull_many(w[0], MV_N + 2, names, vals, bytes));
    assert_true(((float *)vals[5])[3] == mv_value(5, 3, 4));
    assert_true(big[MV_BIG - 1] == mv_value(MV_N, MV_BIG - 1, 4));

    for (int k = 0; k < 2; k++) {
        sr_client_close(w[k]);
        free(g[k]);
    }
    for (int i = 0; i < MV_N; i++) {
        free(vals[i]);
    }
    free(big);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

/* Resumes a SIGSTOPped coordinator after `ms` (the fault this test injects). */
typedef struct {
    pid_t pid;
    int   ms;
} resume_later;

static void *
resume_thread(void *arg)
{
    const resume_later *r = arg;
    struct timespec     ts = {r->ms / 1000, (long)(r->ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    kill(r->pid, SIGCONT);
    return NULL;
}

/* A pull whose value is big is not sent again after a second of waiting
 * (a resent PULL is answered again, value and all: a 2 GiB model's pulls
 * went out up to four times): the coordinator stopped for 1.5 s, the
 * 2 MiB pull waits for it and is answered once, no resend. */
static void
test_protocol_big_pull_not_resent_while_on_its_way(void **state)
{
    sr_harness      h;
    sr_client      *c;
    const int64_t   n = 1 << 19; /* 2 MiB of float32 */
    float          *v = malloc((size_t)n * sizeof(float));
    sr_client_stats st;
    pthread_t       t;
    resume_later    rl;
    (void)state;

    assert_non_null(v);
    for (int64_t i = 0; i < n; i++) {
        v[i] = (float)(i % 97);
    }
    sr_harness_init(&h, "bigpull");
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--learning-rate", "1.0", NULL);
    c = sr_harness_client(&h, 0);
    assert_sr_ok(sr_client_declare(c, "w", SR_FLOAT32, 1, &n, v));
    assert_sr_ok(sr_client_ready(c));
    memset(v, 0, (size_t)n * sizeof(float));
    rl.pid = h.pid;
    rl.ms = 1500;
    assert_int_equal(kill(h.pid, SIGSTOP), 0);
    assert_int_equal(pthread_create(&t, NULL, resume_thread, &rl), 0);
    assert_sr_ok(sr_client_pull(c, "w", v, (size_t)n * sizeof(float)));
    pthread_join(t, NULL);
    assert_true(v[n - 1] == (float)((n - 1) % 97));
    assert_sr_ok(sr_client_stats_get(c, &st));
    assert_int_equal(st.resends, 0);
    sr_client_close(c);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
    free(v);
}

/* The PULL of many variables on the wire (SR_WIRE_F_MANY, announced in
 * HELLO): the values in the request's order, laid out as a TOKEN reply's;
 * too many names, an unknown one, a bad name frame: one error reply, no
 * value sent. */
static void
test_protocol_pull_many_on_the_wire(void **state)
{
    sr_harness       h;
    sr_client       *chief = setup(&h, "pullmany", "1");
    raw              r;
    uint8_t          hb[SR_WIRE_HEADER_BYTES], nb[SR_WIRE_PULL_MANY_MAX + 1][SR_WIRE_BODY_MAX];
    const void      *f[SR_WIRE_PULL_MANY_MAX + 2];
    size_t           len[SR_WIRE_PULL_MANY_MAX + 2];
    whole_msg        m;
    sr_wire_vars_hdr vh;
    sr_wire_vardesc  vd;
    double           x;
    int64_t          n;
    (void)state;

    raw_open(&r, h.endpoint, 0x6666);
    raw_hello(&r, 1);
    assert_int_equal(r.rh.flags & SR_WIRE_F_MANY, SR_WIRE_F_MANY);
    const char *want[3] = {"n", "x", "n"};
    f[0] = hb;
    len[0] = raw_hdr(&r, hb, SR_MSG_PULL, SR_WIRE_F_MANY, 0, 0);
    for (int i = 0; i < 3; i++) {
        f[i + 1] = nb[i];
        len[i + 1] = sr_wire_name_encode(want[i], nb[i], sizeof(nb[i]));
    }
    raw_send_frames(&r, f, len, 4);
    recv_whole(&r, &m);
    assert_int_equal(m.n, 8); /* header, vars header, 3 x (vardesc, value) */
    whole_hdr(&m, 0, SR_MSG_PULL, SR_WIRE_F_MANY, SR_OK);
    assert_sr_ok(sr_wire_vars_hdr_decode(m.data[1], m.len[1], &vh));
    assert_int_equal(vh.nvars, 3);
    assert_int_equal(vh.global_step, 0);
    for (int i = 0; i < 3; i++) {
        assert_sr_ok(sr_wire_vardesc_decode(m.data[2 + 2 * i], m.len[2 + 2 * i], &vd));
        assert_string_equal(vd.name, want[i]);
    }
    assert_int_equal(m.len[5], sizeof(x));
    memcpy(&x, m.data[5], sizeof(x));
    memcpy(&n, m.data[7], sizeof(n));
    assert_true(x == 10.0 && n == 7);

    /* 25 names; an unknown one; a frame that is no name. */
    for (int k = 0; k < 3; k++) {
        int names = k == 0 ? SR_WIRE_PULL_MANY_MAX + 1 : 3;
        len[0] = raw_hdr(&r, hb, SR_MSG_PULL, SR_WIRE_F_MANY, 0, 0);
        for (int i = 0; i < names; i++) {
            f[i + 1] = nb[i];
            len[i + 1] = sr_wire_name_encode(k == 1 && i == 1 ? "nope" : "x", nb[i], sizeof(nb[i]));
        }
        if (k == 2) {
            len[2] = 1;
        }
        raw_send_frames(&r, f, len, names + 1);
        recv_whole(&r, &m);
        assert_int_equal(m.n, 2); /* header, error text */
        whole_hdr(&m, 0, SR_MSG_PULL, 0, k == 1 ? SR_ENOENT : SR_EPROTO);
        const char *why[3] = {"25 names", "nope", "bad name frame 2"};
        assert_non_null(memmem(m.data[1], m.len[1], why[k], strlen(why[k])));
    }
    assert_true(pull_x(chief) == 10.0);
    raw_close(&r);
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

/* Wait until STATUS shows `key` at least `least` (the last text in out). */
typedef struct {
    sr_harness *h;
    const char *key;
    long long   least;
    char        out[8192];
} status_wait;

static int
status_reached(void *arg)
{
    status_wait *w = arg;
    return sr_harness_status(w->h, w->out, sizeof(w->out)) == 0 &&
           status_num(w->out, w->key) >= w->least;
}

/* A coordinator (R = 1, plus the option pairs a1 v1, a2 v2) and its chief,
 * which declares x = 10 and makes n steps of gradient 1 with push_step. */
static sr_client *
start_and_step(sr_harness *h, const char *tag, const char *a1, const char *v1, const char *a2,
               const char *v2, int n)
{
    const double g = 1.0, x0 = 10.0;
    sr_harness_init(h, tag);
    sr_harness_start(h, "--replicas-to-aggregate", "1", "--learning-rate", "1.0", a1, v1, a2, v2,
                     NULL);
    sr_client *c = sr_harness_client(h, 0);
    assert_sr_ok(sr_client_declare(c, "x", SR_FLOAT64, 0, NULL, &x0));
    assert_sr_ok(sr_client_ready(c));
    assert_sr_ok(sr_client_step(c));
    for (int i = 1; i <= n; i++) {
        assert_sr_ok(sr_client_push_step(c, "x", &g, sizeof(g)));
    }
    return c;
}

/* Start the (stopped) coordinator again on its store, check that the chief
 * pulls x == want, stop it and clean up. */
static void
restart_expect_x(sr_harness *h, double want)
{
    const double x0 = 10.0;
    sr_harness_start(h, "--replicas-to-aggregate", "1", "--learning-rate", "1.0", NULL);
    sr_client *c = sr_harness_client(h, 0);
    assert_sr_ok(sr_client_declare(c, "x", SR_FLOAT64, 0, NULL, &x0));
    assert_true(pull_x(c) == want);
    sr_client_close(c);
    assert_int_equal(sr_harness_stop(h), 0);
    sr_harness_fini(h);
}

/* --wal-limit-kib 64: the store's WAL fills every few steps.  By default its
 * thread copies it (STATUS and the shutdown log say so) and the committed
 * steps survive a restart; with --wal-checkpoint inline the commits do it. */
static void
test_protocol_wal_checkpoints(void **state)
{
    (void)state;

    for (int inl = 0; inl <= 1; inl++) {
        sr_harness  h;
        status_wait w = {.h = &h, .key = "\"passes\":", .least = 1};
        sr_client  *c = start_and_step(&h, inl ? "walinline" : "walthread", "--wal-limit-kib", "64",
                                       "--wal-checkpoint", inl ? "inline" : "thread", 40);
        if (inl) {
            assert_int_equal(sr_harness_status(&h, w.out, sizeof(w.out)), 0);
            assert_non_null(strstr(w.out, "\"wal_checkpoints\":{\"thread\":false,\"passes\":0,"));
            assert_true(status_num(w.out, "\"inline\":") >= 1);
        } else {
            /* The thread's pass ends on its own time. */
            assert_int_equal(sr_test_wait_until(status_reached, &w, 20000), 1);
            assert_non_null(strstr(w.out, "\"wal_checkpoints\":{\"thread\":true,"));
        }
        assert_int_equal(status_num(w.out, "\"failures\":"), 0);
        /* Every step was committed (--commit sync), each commit timed. */
        const char *cm = strstr(w.out, "\"commits\":{");
        assert_non_null(cm);
        assert_true(status_num(cm, "\"count\":") >= 40);
        assert_int_equal(status_num(cm, "\"failures\":"), 0);
        assert_null(strstr(cm, "\"max_ms\":0.000"));
        sr_client_close(c);
        assert_int_equal(sr_harness_stop(&h), 0);
        assert_int_equal(sr_harness_log_count(&h, inl ? "COORD-WAL-CKPT inline passes=0"
                                                      : "COORD-WAL-CKPT thread passes="),
                         1);
        assert_int_equal(sr_harness_log_count(&h, "COORD-COMMITS count="), 1);
        restart_expect_x(&h, 10.0 - 40 * 1.0); /* every committed step is there */
    }
}

/* --commit async with --commit-interval-ms: the writer commits at most that
 * often, so steps run ahead of the commits; once the job is idle the last
 * step is committed all the same, and survives a restart. */
static void
test_protocol_async_commit_interval(void **state)
{
    sr_harness  h;
    status_wait w = {.h = &h, .key = "\"committed_step\":", .least = 30};
    (void)state;

    sr_client *c =
        start_and_step(&h, "asyncint", "--commit", "async", "--commit-interval-ms", "300", 30);
    assert_int_equal(sr_test_wait_until(status_reached, &w, 20000), 1);
    assert_int_equal(status_num(w.out, "\"committed_step\":"), 30);
    assert_int_equal(status_num(w.out, "\"global_step\":"), 30);
    /* Steps in between went into the next commit: fewer commits than steps
     * (30 steps would have to take 300 ms each to need 30). */
    const char *cm = strstr(w.out, "\"commits\":{");
    assert_non_null(cm);
    assert_in_range(status_num(cm, "\"count\":"), 1, 29);
    sr_client_close(c);
    sr_harness_kill9(&h); /* no shutdown commit: what is stored is what the writer did */
    restart_expect_x(&h, 10.0 - 30 * 1.0);
}

/* sr_client_push_step sends a push bigger than a pipelined one (1 MiB) but
 * of one partition from the caller's buffer, in the token request's
 * message.  When the step fails (the coordinator gone), that push is
 * forgotten: never re-sent from a buffer the caller may have freed (under
 * AddressSanitizer a re-send would read freed memory; without, the flush
 * below would wait and time out). */
static void
test_protocol_push_step_sends_from_the_callers_buffer(void **state)
{
    enum { N = 3 << 16 }; /* 1.5 MiB of float64: one partition (2 MiB) */
    sr_harness        h;
    sr_client        *c;
    sr_client_options o;
    const int64_t     shape[1] = {N};
    double           *w = calloc(N, sizeof(double)), *g = malloc(N * sizeof(double));
    sr_client_stats   s;
    char              out[8192];
    (void)state;

    assert_non_null(w);
    assert_non_null(g);
    sr_harness_init(&h, "pushstep2");
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--learning-rate", "1.0", NULL);
    memset(&o, 0, sizeof(o));
    o.endpoint = h.endpoint;
    o.timeout_ms = 5000; /* the last step times out; enough for a slow start (sanitizers) */
    assert_sr_ok(sr_client_open(&c, &o));
    assert_sr_ok(sr_client_declare(c, "w", SR_FLOAT64, 1, shape, w));
    assert_sr_ok(sr_client_ready(c));
    assert_sr_ok(sr_client_step(c)); /* the init token */
    for (int i = 0; i < N; i++) {
        g[i] = (double)i;
    }
    assert_sr_ok(sr_client_push_step(c, "w", g, N * sizeof(double)));
    assert_int_equal(sr_client_local_step(c), 1);
    assert_sr_ok(sr_client_pull(c, "w", w, N * sizeof(double)));
    for (int i = 0; i < N; i++) {
        if (w[i] != -(double)i) {
            fail_msg("w[%d] = %g, want %g", i, w[i], -(double)i);
        }
    }
    assert_sr_ok(sr_client_stats_get(c, &s));
    assert_int_equal(s.accepted, 1);
    assert_int_equal(sr_harness_status(&h, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "\"chained\":2}")); /* the 1.5 MiB PUSH and the TOKEN */

    assert_int_equal(sr_harness_stop(&h), 0);
    assert_sr_err(sr_client_push_step(c, "w", g, N * sizeof(double)), SR_ETIMEDOUT);
    free(g);
    assert_sr_ok(sr_client_flush(c)); /* nothing left to re-send */
    sr_client_close(c);
    free(w);
    sr_harness_fini(&h);
}

/* A pull reply is sent from the value's memory while the next step is
 * applied: the reply must carry the value as it was, bit for bit, and the
 * buffers must go round correctly afterwards.  The raw peer reads nothing
 * (receive HWM 1, two HELLO replies unread), so the 4 MiB reply stays in
 * the coordinator's socket while the push behind it completes the step
 * (R = 1, 4 partitions).  Writing the apply in place makes this fail.  A
 * second push while the reply is still unread finds the old value's buffer
 * busy: with --commit sync the coordinator waits 50 ms for it, then takes a
 * third buffer (and logs it). */
#define PF_N ((size_t)1 << 20)

typedef struct {
    sr_client *c;
    int64_t    step;
} step_wait;

static int
step_reached(void *arg)
{
    const step_wait *s = arg;
    int64_t          gs = -1;
    return sr_client_global_step(s->c, &gs) == SR_OK && gs == s->step;
}

/* Wait for global step `step`, then check w[i] == i - delta everywhere. */
static void
expect_w(sr_client *chief, float *w, int64_t step, float delta, const char *commit)
{
    step_wait s = {chief, step};
    assert_true(sr_test_wait_until(step_reached, &s, 20000));
    assert_sr_ok(sr_client_pull(chief, "w", w, PF_N * sizeof(float)));
    for (size_t i = 0; i < PF_N; i++) {
        if (w[i] != (float)i - delta) {
            fail_msg("%s: w[%zu] = %g at step %" PRId64 ", want %g", commit, i, w[i], step,
                     (float)i - delta);
        }
    }
}

static void
fill(float *g, float x)
{
    for (size_t i = 0; i < PF_N; i++) {
        g[i] = x;
    }
}

/* A coordinator (R = 1, 4 partitions) with w = float32[PF_N], w[i] = i,
 * the chief, and a raw peer that reads nothing for now: receive HWM 1 and
 * two HELLO replies left unread, so a big reply to it stays unsent. */
static sr_client *
stalled_peer_setup(sr_harness *h, raw *r, float *w, const char *commit)
{
    sr_client *chief;
    int64_t    shape[1] = {(int64_t)PF_N};
    int        hwm = 1;

    for (size_t i = 0; i < PF_N; i++) {
        w[i] = (float)i;
    }
    sr_harness_init(h, "pullfly");
    sr_harness_start(h, "--replicas-to-aggregate", "1", "--learning-rate", "1.0",
                     "--partition-bytes", "1048576", "--commit", commit, "--max-tasks", "2", NULL);
    chief = sr_harness_client(h, 0);
    assert_sr_ok(sr_client_declare(chief, "w", SR_FLOAT32, 1, shape, w));
    assert_sr_ok(sr_client_ready(chief));
    raw_open(r, h->endpoint, 0x3333);
    assert_int_equal(zmq_setsockopt(r->sock, ZMQ_RCVHWM, &hwm, sizeof(hwm)), 0);
    raw_hello(r, 1);
    raw_send(r, SR_MSG_HELLO, 1, 0, 0, NULL, NULL, 0);
    raw_send(r, SR_MSG_HELLO, 1, 0, 0, NULL, NULL, 0);
    return chief;
}

static void
raw_pull(raw *r, const char *name)
{
    uint8_t     nb[SR_WIRE_BODY_MAX];
    const void *body[1] = {nb};
    size_t      len[1] = {sr_wire_name_encode(name, nb, sizeof(nb))};
    raw_send(r, SR_MSG_PULL, 1, 0, 0, body, len, 1);
}

static void
pull_in_flight_case(const char *commit)
{
    sr_harness     h;
    raw            r;
    float         *w = malloc(PF_N * sizeof(float)), *g = malloc(PF_N * sizeof(float));
    sr_wire_header rh;
    zmq_msg_t      m;

    assert_true(w != NULL && g != NULL);
    sr_client *chief = stalled_peer_setup(&h, &r, w, commit);
    fill(g, 1.0f);
    raw_pull(&r, "w");
    raw_push(&r, 1, "w", SR_FLOAT32, g, PF_N * sizeof(float), 0, 1);
    /* The step applies while the reply is unread; the chief sees it. */
    expect_w(chief, w, 1, 1.0f, commit);
    /* The next one too, its sums in a buffer of their own. */
    fill(g, 2.0f);
    raw_push(&r, 1, "w", SR_FLOAT32, g, PF_N * sizeof(float), 1, 2);
    expect_w(chief, w, 2, 3.0f, commit);
    assert_int_equal(sr_harness_log_count(&h, "COORD-SPARE-WAIT"), strcmp(commit, "sync") == 0);
    /* Now read: two HELLO replies, the pull (the value before the steps),
     * the pushes' answers. */
    assert_int_equal(raw_recv(&r, 10000), 0);
    assert_int_equal(raw_recv(&r, 10000), 0);
    zmq_msg_init(&m);
    assert_true(zmq_msg_recv(&m, r.sock, 0) >= 0);
    assert_sr_ok(sr_wire_header_decode(zmq_msg_data(&m), zmq_msg_size(&m), &rh));
    assert_int_equal(rh.type, SR_MSG_PULL | SR_WIRE_REPLY);
    assert_int_equal(rh.status, SR_OK);
    assert_true(zmq_msg_recv(&m, r.sock, 0) >= 0); /* the descriptor */
    assert_true(zmq_msg_recv(&m, r.sock, 0) >= 0);
    assert_int_equal(zmq_msg_size(&m), PF_N * sizeof(float));
    const float *old = zmq_msg_data(&m);
    for (size_t i = 0; i < PF_N; i++) {
        if (old[i] != (float)i) {
            fail_msg("%s: pulled w[%zu] = %g, want the value before the step, %g", commit, i,
                     old[i], (float)i);
        }
    }
    zmq_msg_close(&m);
    assert_int_equal(push_outcome(&r), SR_PUSH_ACCEPTED);
    assert_int_equal(push_outcome(&r), SR_PUSH_ACCEPTED);
    /* And the next adds into the buffers as they went round. */
    fill(g, 4.0f);
    raw_push(&r, 1, "w", SR_FLOAT32, g, PF_N * sizeof(float), 2, 3);
    assert_int_equal(push_outcome(&r), SR_PUSH_ACCEPTED);
    expect_w(chief, w, 3, 7.0f, commit);
    raw_close(&r);
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
    free(w);
    free(g);
}

static void
test_protocol_pull_in_flight_keeps_the_old_value(void **state)
{
    (void)state;
    pull_in_flight_case("sync");
    pull_in_flight_case("async");
}

/* A client that asks for pulls and reads none pins at most 4 values (each
 * unsent reply holds one, and would hold a new one every step): the fifth
 * and sixth pulls are refused, after the four replies, in order. */
static void
test_protocol_unread_pulls_hold_at_most_four_values(void **state)
{
    sr_harness h;
    raw        r;
    float     *w = malloc(PF_N * sizeof(float));
    (void)state;

    assert_non_null(w);
    sr_client *chief = stalled_peer_setup(&h, &r, w, "sync");
    for (int i = 0; i < 6; i++) {
        raw_pull(&r, "w");
    }
    expect_reply(&r, SR_MSG_HELLO, 10000);
    expect_reply(&r, SR_MSG_HELLO, 10000);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(raw_recv(&r, 10000), 0);
        assert_int_equal(r.rh.type, SR_MSG_PULL | SR_WIRE_REPLY);
        if (i < 4) {
            assert_int_equal(r.rh.status, SR_OK);
        } else {
            assert_int_equal(r.rh.status, SR_EPROTO);
            r.body[0][r.body_len[0] < sizeof(r.body[0]) ? r.body_len[0] : 4095] = '\0';
            assert_non_null(strstr((const char *)r.body[0], "still being sent"));
        }
    }
    /* Read, they free their slots: pulls are answered again. */
    raw_pull(&r, "w");
    expect_reply(&r, SR_MSG_PULL, 10000);
    raw_close(&r);
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
    free(w);
}

/* A raw DECLARE part of y (float32[n]) from task 0: bytes [off, off + len). */
static void
raw_declare_part(raw *r, const char *name, int64_t n, const float *v, uint64_t off, size_t len)
{
    sr_wire_vardesc  vd;
    sr_wire_pushdesc p;
    uint8_t          vb[SR_WIRE_BODY_MAX], pb[SR_WIRE_BODY_MAX];

    memset(&vd, 0, sizeof(vd));
    snprintf(vd.name, sizeof(vd.name), "%s", name);
    vd.dtype = SR_FLOAT32;
    vd.flags = SR_WIRE_DECLARE_PART;
    vd.ndim = 1;
    vd.shape[0] = n;
    memset(&p, 0, sizeof(p));
    snprintf(p.name, sizeof(p.name), "%s", name);
    p.dtype = SR_FLOAT32;
    p.count = len;
    p.offset = off;
    const void *body[3] = {vb, pb, (const uint8_t *)v + off};
    size_t      blen[3] = {sr_wire_vardesc_encode(&vd, vb, sizeof(vb)),
                           sr_wire_pushdesc_encode(&p, pb, sizeof(pb)), len};
    raw_send(r, SR_MSG_DECLARE, 0, 0, 0, body, blen, 3);
}

static void
expect_ok(raw *r)
{
    assert_int_equal(raw_recv(r, 10000), 0);
    assert_int_equal(r->rh.status, SR_OK);
}

/* An initial value bigger than the coordinator's message limit goes in
 * parts (the limit comes in HELLO); any other request that big is refused
 * by the client at once, naming the option, instead of being dropped by
 * ZeroMQ (which left the call to time out).  Raw parts: in order from byte
 * 0, resends harmless, a part of another declaration at 0 starts that one,
 * and a part that does not fit is refused. */
static void
test_protocol_declare_in_parts(void **state)
{
    sr_harness    h;
    raw           r;
    const int64_t n = 3 << 18; /* float32: 3 MiB, the limit 1 MiB */
    const int64_t shape[1] = {n};
    float        *v0 = malloc((size_t)n * sizeof(float)), *v = malloc((size_t)n * sizeof(float));
    float         y0[2048], y[1024]; /* y is float32[1024]; y0 has room for a part past it */
    char          out[8192];
    (void)state;

    assert_non_null(v0);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++) {
        v0[i] = (float)(i % 9973) - 0.5f;
    }
    for (int i = 0; i < 2048; i++) {
        y0[i] = (float)i;
    }
    sr_harness_init(&h, "declparts");
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--learning-rate", "1.0",
                     "--max-message-mib", "1", "--partition-kib", "0", NULL);
    sr_client *chief = sr_harness_client(&h, 0);
    assert_sr_ok(sr_client_declare(chief, "big", SR_FLOAT32, 1, shape, v0));
    assert_sr_ok(sr_client_ready(chief));
    assert_int_equal(sr_harness_log_count(&h, "variable=\"big\""), 1);
    assert_int_equal(sr_harness_log_count(&h, "(in parts)"), 1);
    memset(v, 0, (size_t)n * sizeof(float));
    assert_sr_ok(sr_client_pull(chief, "big", v, (size_t)n * sizeof(float)));
    assert_memory_equal(v, v0, (size_t)n * sizeof(float));

    /* Partitions off: a 3 MiB push is one message, over the limit. */
    assert_sr_err(sr_client_push(chief, "big", v0, (size_t)n * sizeof(float)), SR_EINVAL);
    assert_non_null(strstr(sr_client_error(chief), "--max-message-mib"));
    assert_int_equal(sr_harness_status(&h, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "\"global_step\":0"));

    /* Raw parts of y (4 KiB in two halves). */
    raw_open(&r, h.endpoint, 0x5151);
    raw_hello(&r, 0);
    raw_declare_part(&r, "y", 1024, y0, 2048, 2048); /* not from byte 0 */
    expect_error(&r, SR_EINVAL);
    assert_non_null(strstr((const char *)r.body[0], "in order from byte 0"));
    raw_declare_part(&r, "y", 1024, y0, 0, 2048);
    expect_ok(&r);
    raw_declare_part(&r, "y", 1024, y0, 0, 2048); /* a resend */
    expect_ok(&r);
    raw_declare_part(&r, "y", 1024, y0, 2048, 4096); /* past the end */
    expect_error(&r, SR_EINVAL);
    raw_declare_part(&r, "z", 1024, y0, 0, 2048); /* z starts: y's parts are dropped */
    expect_ok(&r);
    raw_declare_part(&r, "y", 1024, y0, 2048, 2048);
    expect_error(&r, SR_EINVAL);
    assert_sr_err(sr_client_pull(chief, "y", y, sizeof(y)), SR_ENOENT);
    raw_declare_part(&r, "y", 1024, y0, 0, 2048);
    expect_ok(&r);
    raw_declare_part(&r, "y", 1024, y0, 2048, 2048); /* the last: y exists */
    expect_ok(&r);
    raw_declare_part(&r, "y", 1024, y0, 2048, 2048); /* a resend of it */
    expect_ok(&r);
    /* A part whose descriptor names another variable: malformed. */
    {
        sr_wire_vardesc  vd;
        sr_wire_pushdesc p;
        uint8_t          vb[SR_WIRE_BODY_MAX], pb[SR_WIRE_BODY_MAX];
        memset(&vd, 0, sizeof(vd));
        memset(&p, 0, sizeof(p));
        snprintf(vd.name, sizeof(vd.name), "q");
        snprintf(p.name, sizeof(p.name), "other");
        vd.dtype = p.dtype = SR_FLOAT32;
        vd.flags = SR_WIRE_DECLARE_PART;
        p.count = 4;
        const void *body[3] = {vb, pb, y0};
        size_t      blen[3] = {sr_wire_vardesc_encode(&vd, vb, sizeof(vb)),
                               sr_wire_pushdesc_encode(&p, pb, sizeof(pb)), 4};
        raw_send(&r, SR_MSG_DECLARE, 0, 0, 0, body, blen, 3);
        expect_error(&r, SR_EPROTO);
    }
    raw_close(&r);
    assert_sr_ok(sr_client_pull(chief, "y", y, sizeof(y)));
    assert_memory_equal(y, y0, sizeof(y));
    assert_sr_err(sr_client_pull(chief, "z", y, sizeof(y)), SR_ENOENT);
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);

    /* Restarted on the store: the limit grows to the biggest variable + 1
     * MiB, and the value is the declared one. */
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--learning-rate", "1.0",
                     "--max-message-mib", "1", "--partition-kib", "0", NULL);
    chief = sr_harness_client(&h, 0);
    assert_sr_ok(sr_client_declare(chief, "big", SR_FLOAT32, 1, shape, v0));
    assert_sr_ok(sr_client_ready(chief));
    memset(v, 0, (size_t)n * sizeof(float));
    assert_sr_ok(sr_client_pull(chief, "big", v, (size_t)n * sizeof(float)));
    assert_memory_equal(v, v0, (size_t)n * sizeof(float));
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
    free(v0);
    free(v);
}

typedef struct {
    sr_harness *h;
    sr_client  *talk[2];
} shared_arg;

/* The older clients talk (a PING each); has the coordinator warned of a
 * shared task index? */
static int
task_shared_logged(void *arg)
{
    shared_arg *a = arg;
    int64_t     gs;
    for (int i = 0; i < 2; i++) {
        assert_sr_ok(sr_client_global_step(a->talk[i], &gs));
    }
    return sr_harness_log_count(a->h, "COORD-TASK-SHARED") > 0;
}

/* Two workers started with the same task index and both active: the
 * coordinator warns (their pushes would count as two replicas), once.  A
 * worker restarted under its index (the old client said BYE) is not warned
 * about. */
static void
test_protocol_two_workers_one_task_index_warned(void **state)
{
    sr_harness h;
    sr_client *chief = setup(&h, "shared", "1");
    shared_arg a = {&h, {NULL, NULL}};
    (void)state;

    sr_client *old2 = sr_harness_client(&h, 2);
    sr_client_close(old2); /* a restart: the old one leaves */
    a.talk[1] = sr_harness_client(&h, 2);
    a.talk[0] = sr_harness_client(&h, 1);
    sr_client *twin = sr_harness_client(&h, 1); /* task 1 twice, both alive */
    assert_int_equal(sr_test_wait_until(task_shared_logged, &a, 15000), 1);
    assert_int_equal(sr_harness_log_count(&h, "COORD-TASK-SHARED task=1 "), 1);
    assert_int_equal(sr_harness_log_count(&h, "COORD-TASK-SHARED task=2 "), 0);
    sr_client_close(twin);
    sr_client_close(a.talk[0]);
    sr_client_close(a.talk[1]);
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

/* ---- names are data --------------------------------------------------- */

/* Every byte of a text a peer or an operator reads is printable: ASCII
 * 0x20..0x7e, or well-formed UTF-8 above the C1 controls. */
static void
assert_printable(const void *text, size_t len)
{
    const unsigned char *s = text;
    uint32_t             cp;
    size_t               n;

    for (size_t i = 0; i < len; i += n) {
        n = sr_utf8_decode(s + i, len - i, &cp, NULL);
        if (n == 0 || cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) {
            fail_msg("byte %zu of '%.*s' is not printable", i, (int)len, (const char *)text);
        }
    }
}

/* A DECLARE of float32 scalar `name` (len bytes, no NUL) from task. */
static void
raw_declare(raw *r, int task, const char *name)
{
    sr_wire_vardesc vd;
    uint8_t         vb[SR_WIRE_BODY_MAX];
    memset(&vd, 0, sizeof(vd));
    snprintf(vd.name, sizeof(vd.name), "%s", name);
    vd.dtype = SR_FLOAT32;
    const void *db[1] = {vb};
    size_t      dl[1] = {sr_wire_vardesc_encode(&vd, vb, sizeof(vb))};
    assert_true(dl[0] > 0);
    raw_send(r, SR_MSG_DECLARE, task, 0, 0, db, dl, 1);
}

/* A PULL of one name, or (many) of "x" and then `name`, from task 0. */
static void
raw_pull_name(raw *r, const char *name, int many)
{
    uint8_t     hb[SR_WIRE_HEADER_BYTES], n1[2 + SR_WIRE_MAX_NAME], n2[2 + SR_WIRE_MAX_NAME];
    const void *f[3] = {hb, n1, n2};
    size_t      len[3];

    len[0] = raw_hdr_task(r, hb, SR_MSG_PULL, 0, many ? SR_WIRE_F_MANY : 0, 0, 0); /* as task 0 */
    len[1] = sr_wire_name_encode(many ? "x" : name, n1, sizeof(n1));
    len[2] = sr_wire_name_encode(name, n2, sizeof(n2));
    assert_true(len[1] > 0 && len[2] > 0);
    raw_send_frames(r, f, len, many ? 3 : 2);
}

/* The reply is SR_EINVAL naming the byte at fault, in printable text. */
static void
expect_bad_name(raw *r)
{
    expect_error(r, SR_EINVAL);
    assert_printable(r->body[0], r->body_len[0]);
    assert_non_null(memmem(r->body[0], r->body_len[0], "at byte", 7));
}

#define PYTHON "/usr/bin/python3"

/* json (text) is valid JSON (python3's strict json.load of it as UTF-8),
 * and every name in names[0..n) is one of its "accumulators" (key acc) or
 * "variables". */
static void
assert_json_names(const char *dir, const char *json, const char *key, const char *const *names,
                  int n)
{
    static const char py[] = "import json, sys\n"
                             "d = json.load(open(sys.argv[1], encoding='utf-8'))\n"
                             "have = {a['name'] for a in d[sys.argv[2]]}\n"
                             "miss = [n for n in sys.argv[3:] if n not in have]\n"
                             "print('missing', [m.encode() for m in miss])\n"
                             "sys.exit(1 if miss else 0)\n";
    char              path[700], log[700];
    const char       *argv[24] = {PYTHON, "-c", py, path, key};
    FILE             *f;

    if (access(PYTHON, X_OK) != 0) {
        fprintf(stderr, "%s missing: JSON of %s not validated\n", PYTHON, dir);
        return;
    }
    snprintf(path, sizeof(path), "%s/names.json", dir);
    snprintf(log, sizeof(log), "%s/names.log", dir);
    assert_non_null(f = fopen(path, "w"));
    fputs(json, f);
    fclose(f);
    assert_true(n <= 18);
    for (int i = 0; i < n; i++) {
        argv[5 + i] = names[i];
    }
    argv[5 + n] = NULL;
    pid_t pid = sr_test_spawn((char *const *)argv, log);
    assert_true(pid > 0);
    int st = sr_test_reap(pid, 30000);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        fprintf(stderr, "not valid JSON, or names missing (see %s): %s\n", log, json);
    }
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* No line of the coordinator's log starts with `forged`, and none holds a
 * raw control character or invalid UTF-8. */
static void
assert_log_clean(const sr_harness *h, const char *forged)
{
    FILE *f = fopen(h->log, "r");
    char  line[4096];

    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        size_t n = strlen(line);
        assert_false(strncmp(line, forged, strlen(forged)) == 0);
        if (n > 0 && line[n - 1] == '\n') {
            n--;
        }
        assert_printable(line, n);
    }
    fclose(f);
}

/* Names are valid UTF-8 without control characters.  A DECLARE, PULL or
 * PUSH of a name with a newline, an escape code or invalid UTF-8 is
 * SR_EINVAL naming the byte, in printable text, and declares nothing;
 * PyTorch-style and non-ASCII names declare, train and pull exactly; the
 * log and `status --json` stay clean and valid.  A store made before the
 * rule may hold a bad name: the coordinator's status still prints it as
 * valid JSON. */
static void
test_protocol_names_are_data(void **state)
{
    static const char *const bad[] = {
        "a\nCOORD-FAKE forged=1", "\x1b[31mred", "ff\xff",  "\xc0\xaf",
        "\xed\xa0\x80",           "c1\xc2\x85",  "del\x7f",
    };
    static const char *const good[] = {
        "layer1.0.conv1.weight",
        "module.encoder.layers.11.self_attn.in_proj_bias",
        "Gewichte/Gr\xc3\xb6\xc3\x9f"
        "e",
        "\xe9\x87\x8d\xe3\x81\xbf",
        "with spaces, \"quotes\" and \\back\\slashes",
        "\xf0\x9f\x94\xa5/emoji",
    };
    const int     nbad = (int)(sizeof(bad) / sizeof(bad[0]));
    const int     ngood = (int)(sizeof(good) / sizeof(good[0]));
    const int64_t shape[1] = {2};
    const float   v0[2] = {1.0f, 2.0f}, g[2] = {0.5f, 0.25f};
    const double  gx = 1.0;
    sr_harness    h;
    const double  x0 = 10.0;
    sr_client    *chief;
    raw           r;
    char          out[16384];
    int64_t       gs;
    (void)state;

    sr_harness_init(&h, "names");
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--learning-rate", "1.0", NULL);
    chief = sr_harness_client(&h, 0);
    assert_sr_ok(sr_client_declare(chief, "x", SR_FLOAT64, 0, NULL, &x0));
    for (int i = 0; i < ngood; i++) {
        assert_sr_ok(sr_client_declare(chief, good[i], SR_FLOAT32, 1, shape, v0));
    }
    assert_sr_ok(sr_client_ready(chief));

    raw_open(&r, h.endpoint, 0x4e4e);
    raw_hello(&r, 0); /* the chief's task: a declaration would create the variable */
    for (int i = 0; i < nbad; i++) {
        float f = 1.0f;
        raw_declare(&r, 0, bad[i]);
        expect_bad_name(&r);
        raw_pull_name(&r, bad[i], 0);
        expect_bad_name(&r);
        raw_pull_name(&r, bad[i], 1);
        expect_bad_name(&r);
        raw_push(&r, 0, bad[i], SR_FLOAT32, &f, sizeof(f), 0, (uint64_t)i + 1);
        expect_bad_name(&r);
        /* libsyncrep refuses before sending, in printable words. */
        assert_sr_err(sr_client_declare(chief, bad[i], SR_FLOAT32, 0, NULL, &f), SR_EINVAL);
        assert_printable(sr_client_error(chief), strlen(sr_client_error(chief)));
        assert_non_null(strstr(sr_client_error(chief), "at byte"));
        assert_sr_err(sr_client_pull(chief, bad[i], &f, sizeof(f)), SR_EINVAL);
        assert_sr_err(sr_client_push(chief, bad[i], &f, sizeof(f)), SR_EINVAL);
    }
    raw_close(&r);
    /* The refusal names what is wrong. */
    assert_sr_err(sr_client_declare(chief, bad[0], SR_FLOAT32, 0, NULL, v0), SR_EINVAL);
    assert_non_null(strstr(sr_client_error(chief), "control character 0x0a at byte 1"));
    assert_non_null(strstr(sr_client_error(chief), "a\\x0aCOORD-FAKE"));

    /* Good names: declared (above), trained (R = 1, lr 1: v - g), pulled. */
    for (int i = 0; i < ngood; i++) {
        assert_sr_ok(sr_client_push(chief, good[i], g, sizeof(g)));
    }
    assert_sr_ok(sr_client_push(chief, "x", &gx, sizeof(gx)));
    assert_sr_ok(sr_client_flush(chief));
    assert_sr_ok(sr_client_global_step(chief, &gs));
    assert_int_equal(gs, 1);
    for (int i = 0; i < ngood; i++) {
        float v[2] = {0, 0};
        assert_sr_ok(sr_client_pull(chief, good[i], v, sizeof(v)));
        assert_true(v[0] == 0.5f && v[1] == 1.75f);
    }
    assert_int_equal(sr_harness_log_count(&h, "variable=\"with spaces, \\\"quotes\\\" and "
                                              "\\\\back\\\\slashes\""),
                     1);

    /* status --json: valid, every good name there, no bad one. */
    assert_int_equal(sr_harness_status(&h, out, sizeof(out)), 0);
    assert_json_names(h.dir, out, "accumulators", good, ngood);
    assert_null(strstr(out, "COORD-FAKE"));
    assert_null(strstr(out, "red\""));
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    assert_log_clean(&h, "COORD-FAKE");

    /* Nothing bad was declared: the store holds x and the good names. */
    sr_store     *st;
    sr_store_var *vars;
    size_t        nvars;
    sr_store_opts ro = {.readonly = 1};
    assert_sr_ok(sr_store_open(h.store, &ro, &st));
    assert_sr_ok(sr_store_list_vars(st, &vars, &nvars));
    assert_int_equal(nvars, 1 + (size_t)ngood);
    free(vars);
    sr_store_close(st);

    /* A store made before the rule: one name gets a newline, an escape
     * code and invalid bytes behind syncrep's back. */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(h.store, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "UPDATE variable SET name = CAST(X'6f6c640a1b5b33316dffc0af' AS "
                                  "TEXT) WHERE name = 'layer1.0.conv1.weight'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_changes(db), 1);
    sqlite3_close(db);
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--learning-rate", "1.0", NULL);
    assert_int_equal(sr_harness_status(&h, out, sizeof(out)), 0);
    const char *old[2] = {"old\n\x1b[31m\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", good[4]};
    assert_json_names(h.dir, out, "accumulators", old, 2);
    assert_non_null(strstr(out, "\"old\\u000a\\u001b[31m\\ufffd\\ufffd\\ufffd\""));
    /* It cannot be pulled by its name (no such name can be sent). */
    raw_open(&r, h.endpoint, 0x4e4f);
    raw_hello(&r, 0);
    raw_pull_name(&r, "old\n\x1b[31m\xff\xc0\xaf", 0);
    expect_bad_name(&r);
    raw_close(&r);
    assert_int_equal(sr_harness_stop(&h), 0);
    assert_log_clean(&h, "COORD-FAKE");
    sr_harness_fini(&h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protocol_resent_push_counted_once),
        cmocka_unit_test(test_protocol_pipelined_push_refusal_reported_by_flush_and_step),
        cmocka_unit_test(test_protocol_partitions_each_an_accumulator),
        cmocka_unit_test(test_protocol_parked_token_of_vanished_peer_not_lost),
        cmocka_unit_test(test_protocol_bad_messages_answered_and_change_nothing),
        cmocka_unit_test(test_protocol_status_reports_workers_and_counts),
        cmocka_unit_test(test_protocol_hostile_client_during_training_changes_nothing),
        cmocka_unit_test(test_protocol_pull_in_flight_keeps_the_old_value),
        cmocka_unit_test(test_protocol_push_answer_held_for_the_token_not_longer),
        cmocka_unit_test(test_protocol_unread_pulls_hold_at_most_four_values),
        cmocka_unit_test(test_protocol_chain_push_and_token_one_message_each_way),
        cmocka_unit_test(test_protocol_push_step_pushes_and_steps),
        cmocka_unit_test(test_protocol_pull_many_and_push_many),
        cmocka_unit_test(test_protocol_pull_many_on_the_wire),
        cmocka_unit_test(test_protocol_big_pull_not_resent_while_on_its_way),
        cmocka_unit_test(test_protocol_wal_checkpoints),
        cmocka_unit_test(test_protocol_async_commit_interval),
        cmocka_unit_test(test_protocol_push_step_sends_from_the_callers_buffer),
        cmocka_unit_test(test_protocol_declare_in_parts),
        cmocka_unit_test(test_protocol_two_workers_one_task_index_warned),
        cmocka_unit_test(test_protocol_names_are_data),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
