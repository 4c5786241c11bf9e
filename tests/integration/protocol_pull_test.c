/*
 * Pulls in flight and many variables: a pull reply sent from the value's
 * memory keeps the old value while the next step applies, unread pulls pin
 * at most four values, sr_client_pull_many and sr_client_push_many over a
 * model of many variables, the PULL of many on the wire, and partitions as
 * accumulators of their own.  docs/protocol.md, "PULL (4)" and "Partitions".
 */
#include "sr_test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "harness.h"
#include "raw_peer.h"
#include "store/store.h"
#include "syncrep/syncrep.h"
#include "wire/wire.h"

/* Partitions: x = float64[6] with --partition-bytes 16 is 3 partitions of 2
 * rows (16 bytes), each its own accumulator (R = 2).  The client splits its
 * pushes; a raw peer may push one partition or the whole variable; anything
 * else is refused, naming the layout, and changes nothing. */
static void
test_protocol_partitions_each_an_accumulator(void **state)
{
    sr_harness    h;
    sr_client    *c[2];
    raw_peer      r;
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
    assert_int_equal(raw_push_outcome(&r), SR_PUSH_ACCEPTED);
    raw_push_at(&r, 1, "x", SR_FLOAT64, g + 1, 16, 8, 0, 2);
    raw_expect_error(&r, SR_EINVAL);
    assert_non_null(strstr((const char *)r.body[0], "3 partition(s) of 16 bytes"));
    raw_push_at(&r, 1, "x", SR_FLOAT64, g + 2, 24, 16, 0, 3);
    raw_expect_error(&r, SR_EINVAL);
    /* An offset whose partition index only wraps to 1 in 32 bits. */
    raw_push_at(&r, 1, "x", SR_FLOAT64, g + 2, 16, 16 + (16ull << 32), 0, 3);
    raw_expect_error(&r, SR_EINVAL);
    /* Partition 1 has its R = 2 now; the whole push completes 0 and 2 and
     * is stale in 1 (taken): accepted where it counted. */
    raw_push(&r, 1, "x", SR_FLOAT64, g, sizeof(g), 0, 4);
    assert_int_equal(raw_push_outcome(&r), SR_PUSH_ACCEPTED);
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
    assert_true(sr_harness_json_num(out, "\"chained\":") >= 3 * 36);
    assert_true(sr_harness_json_num(t1, "\"chained\":") >= 3 * 36);

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

/* The PULL of many variables on the wire (SR_WIRE_F_MANY, announced in
 * HELLO): the values in the request's order, laid out as a TOKEN reply's;
 * too many names, an unknown one, a bad name frame: one error reply, no
 * value sent. */
static void
test_protocol_pull_many_on_the_wire(void **state)
{
    sr_harness       h;
    sr_client       *chief = proto_setup(&h, "pullmany", "1");
    raw_peer         r;
    uint8_t          hb[SR_WIRE_HEADER_BYTES], nb[SR_WIRE_PULL_MANY_MAX + 1][SR_WIRE_BODY_MAX];
    const void      *f[SR_WIRE_PULL_MANY_MAX + 2];
    size_t           len[SR_WIRE_PULL_MANY_MAX + 2];
    raw_whole_msg    m;
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
    raw_recv_whole(&r, &m);
    assert_int_equal(m.n, 8); /* header, vars header, 3 x (vardesc, value) */
    raw_whole_hdr(&m, 0, SR_MSG_PULL, SR_WIRE_F_MANY, SR_OK);
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
        raw_recv_whole(&r, &m);
        assert_int_equal(m.n, 2); /* header, error text */
        raw_whole_hdr(&m, 0, SR_MSG_PULL, 0, k == 1 ? SR_ENOENT : SR_EPROTO);
        const char *why[3] = {"25 names", "nope", "bad name frame 2"};
        assert_non_null(memmem(m.data[1], m.len[1], why[k], strlen(why[k])));
    }
    assert_true(proto_pull_x(chief) == 10.0);
    raw_close(&r);
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
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
stalled_peer_setup(sr_harness *h, raw_peer *r, float *w, const char *commit)
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
    /* The mark before the connect: set after it, ZeroMQ ignored it (the
     * peer's I/O thread read replies on, and under load one could leave the
     * coordinator early: a fifth pull answered). */
    raw_open_rcvhwm(r, h->endpoint, 0x3333, hwm);
    raw_hello(r, 1);
    raw_send(r, SR_MSG_HELLO, 1, 0, 0, NULL, NULL, 0);
    raw_send(r, SR_MSG_HELLO, 1, 0, 0, NULL, NULL, 0);
    return chief;
}

static void
pull_in_flight_case(const char *commit)
{
    sr_harness     h;
    raw_peer       r;
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
    assert_int_equal(raw_push_outcome(&r), SR_PUSH_ACCEPTED);
    assert_int_equal(raw_push_outcome(&r), SR_PUSH_ACCEPTED);
    /* And the next adds into the buffers as they went round. */
    fill(g, 4.0f);
    raw_push(&r, 1, "w", SR_FLOAT32, g, PF_N * sizeof(float), 2, 3);
    assert_int_equal(raw_push_outcome(&r), SR_PUSH_ACCEPTED);
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
    raw_peer   r;
    float     *w = malloc(PF_N * sizeof(float));
    (void)state;

    assert_non_null(w);
    sr_client *chief = stalled_peer_setup(&h, &r, w, "sync");
    for (int i = 0; i < 6; i++) {
        raw_pull(&r, "w");
    }
    raw_expect_reply(&r, SR_MSG_HELLO, 10000);
    raw_expect_reply(&r, SR_MSG_HELLO, 10000);
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
    raw_expect_reply(&r, SR_MSG_PULL, 10000);
    raw_close(&r);
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
    free(w);
}

/* ---- token deltas (issue 23): what did not change is not sent again ----- */

#define TD_FROZEN 50 /* not-trainable float32[2] f00..: f_i = {i, -i} */

/* The status's "token_piggyback" counter `key`. */
static uint64_t
td_counter(sr_harness *h, const char *key)
{
    char        out[16384], pat[64];
    const char *p;

    assert_int_equal(sr_harness_status(h, out, sizeof(out)), 0);
    p = strstr(out, "\"token_piggyback\":");
    assert_non_null(p);
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    p = strstr(p, pat);
    assert_non_null(p);
    return strtoull(p + strlen(pat), NULL, 10);
}

/* One trainable w = float32[4] and TD_FROZEN small not-trainable variables:
 * the first token carries all 51, every later one only w (the frozen ones'
 * values are the earlier token's), and every pull of every round after the
 * first is served from them, exactly.  A TOKEN flagged SR_WIRE_F_HAVE_VARS
 * without its frame is refused, naming it. */
static void
test_protocol_token_sends_only_changed_variables(void **state)
{
    sr_harness      h;
    sr_client      *c;
    raw_peer        r;
    const int64_t   shape4[1] = {4}, shape2[1] = {2};
    const float     w0[4] = {1, 2, 3, 4}, g[4] = {1, 1, 1, 1};
    float           w[4], fv[2];
    char            name[8];
    sr_client_stats st;
    const int       rounds = 5;
    (void)state;

    sr_harness_init(&h, "tdelta");
    /* No init tokens: every round's push counts (one worker, R = 1). */
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--init-tokens", "0", "--learning-rate",
                     "1.0", "--max-tasks", "2", NULL);
    c = sr_harness_client(&h, 0);
    assert_sr_ok(sr_client_declare(c, "w", SR_FLOAT32, 1, shape4, w0));
    for (int i = 0; i < TD_FROZEN; i++) {
        const float f0[2] = {(float)i, (float)-i};
        snprintf(name, sizeof(name), "f%02d", i);
        assert_sr_ok(
            sr_client_declare_ex(c, name, SR_FLOAT32, 1, shape2, f0, SR_DECLARE_NOT_TRAINABLE));
    }
    assert_sr_ok(sr_client_ready(c));
    for (int k = 0; k < rounds; k++) {
        assert_sr_ok(sr_client_pull(c, "w", w, sizeof(w)));
        for (int j = 0; j < 4; j++) {
            assert_true(w[j] == w0[j] - (float)k); /* lr 1, one replica */
        }
        for (int i = 0; i < TD_FROZEN; i++) {
            snprintf(name, sizeof(name), "f%02d", i);
            assert_sr_ok(sr_client_pull(c, name, fv, sizeof(fv)));
            assert_true(fv[0] == (float)i && fv[1] == (float)-i);
        }
        assert_sr_ok(sr_client_push(c, "w", g, sizeof(g)));
        assert_sr_ok(sr_client_step(c));
    }
    assert_sr_ok(sr_client_stats_get(c, &st));
    assert_int_equal(st.pulls_cached, (uint64_t)(rounds - 1) * (1 + TD_FROZEN));
    /* Five tokens: the first whole (51 variables), four deltas of w alone. */
    assert_int_equal(td_counter(&h, "whole"), 1);
    assert_int_equal(td_counter(&h, "delta"), rounds - 1);
    assert_int_equal(td_counter(&h, "variables"), 1 + TD_FROZEN + (rounds - 1));

    /* On the wire: the flag without its frame, and with a short one. */
    uint8_t           hb[SR_WIRE_HEADER_BYTES], one = 0;
    const void *const f1[1] = {hb};
    const void *const f2[2] = {hb, &one};
    size_t            l[2] = {0, 1};
    raw_open(&r, h.endpoint, 0x7d7d);
    raw_hello(&r, 1);
    l[0] = raw_hdr(&r, hb, SR_MSG_TOKEN, SR_WIRE_F_WANT_VARS | SR_WIRE_F_HAVE_VARS, 0, 0);
    raw_send_frames(&r, f1, l, 1);
    raw_expect_error(&r, SR_EPROTO);
    assert_non_null(strstr((const char *)r.body[0], "SR_WIRE_F_HAVE_VARS"));
    l[0] = raw_hdr(&r, hb, SR_MSG_TOKEN, SR_WIRE_F_WANT_VARS | SR_WIRE_F_HAVE_VARS, 0, 0);
    raw_send_frames(&r, f2, l, 2);
    raw_expect_error(&r, SR_EPROTO);
    assert_non_null(strstr((const char *)r.body[0], "have"));
    raw_close(&r);
    /* Refused, they changed nothing: the client's next round is as before. */
    assert_sr_ok(sr_client_pull(c, "w", w, sizeof(w)));
    assert_true(w[0] == w0[0] - (float)rounds);
    sr_client_close(c);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protocol_partitions_each_an_accumulator),
        cmocka_unit_test(test_protocol_pull_in_flight_keeps_the_old_value),
        cmocka_unit_test(test_protocol_unread_pulls_hold_at_most_four_values),
        cmocka_unit_test(test_protocol_pull_many_and_push_many),
        cmocka_unit_test(test_protocol_pull_many_on_the_wire),
        cmocka_unit_test(test_protocol_token_sends_only_changed_variables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
