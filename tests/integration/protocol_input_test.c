/*
 * Bad and hostile input at the protocol level: every malformed or wrong
 * message is answered or dropped and changes nothing, one by one and from a
 * hostile client sending every class of them while two honest workers
 * train.  docs/protocol.md, "Malformed input".
 */
#include "sr_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "raw_peer.h"
#include "syncrep/syncrep.h"
#include "wire/wire.h"

static void
test_protocol_bad_messages_answered_and_change_nothing(void **state)
{
    sr_harness    h;
    sr_client    *chief = proto_setup(&h, "bad", "1");
    raw_peer      r;
    const double  g = 1.0;
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

    /* Unknown variable, wrong dtype, wrong size, not trainable. */
    raw_push(&r, 1, "nope", SR_FLOAT64, &g, sizeof(g), 0, 1);
    raw_expect_error(&r, SR_ENOENT);
    raw_push(&r, 1, "x", SR_FLOAT32, &gf, sizeof(gf), 0, 2);
    raw_expect_error(&r, SR_EINVAL);
    raw_push(&r, 1, "x", SR_FLOAT64, &g, 4, 0, 3);
    raw_expect_error(&r, SR_EINVAL);
    raw_push(&r, 1, "n", SR_INT64, &gi, sizeof(gi), 0, 4);
    raw_expect_error(&r, SR_EINVAL);
    /* (A NaN is refused too, but takes its task's place in the step:
     * integrity_test, "a non-finite gradient never stalls the step".) */
    /* A frame larger than any variable (plus 1 MiB): refused as malformed. */
    size_t  big_len = (2u << 20) + 8;
    double *big = calloc(1, big_len);
    assert_non_null(big);
    raw_push(&r, 1, "x", SR_FLOAT64, big, big_len, 0, 6);
    raw_expect_error(&r, SR_EPROTO);
    free(big);
    /* A push with a missing data frame, and an unreadable descriptor. */
    const void *b1[1] = {"\x01\x00x\x02"};
    size_t      l1[1] = {4};
    raw_send(&r, SR_MSG_PUSH, 1, 0, 6, b1, l1, 1);
    raw_expect_error(&r, SR_EPROTO);
    /* A request for another incarnation. */
    r.incarnation += 7;
    raw_push(&r, 1, "x", SR_FLOAT64, &g, sizeof(g), 0, 7);
    raw_expect_error(&r, SR_ESTALE);
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
    raw_expect_error(&r, SR_ENOENT);

    /* Nothing changed: no step applied, x as declared; and the coordinator
     * still serves: one good push (R = 1) applies a step. */
    assert_sr_ok(sr_client_global_step(chief, &gs));
    assert_int_equal(gs, 0);
    assert_true(proto_pull_x(chief) == 10.0);
    assert_sr_ok(sr_client_push(chief, "x", &g, sizeof(g)));
    assert_sr_ok(sr_client_global_step(chief, &gs));
    assert_int_equal(gs, 1);
    assert_true(proto_pull_x(chief) == 9.0);

    /* The chief re-declaring x with another shape or dtype: refused. */
    const int64_t shape[1] = {2};
    const double  two[2] = {0, 0};
    raw_close(&r);
    sr_client *chief2 = sr_harness_client(&h, 0);
    assert_sr_err(sr_client_declare(chief2, "x", SR_FLOAT64, 1, shape, two), SR_EEXIST);
    assert_non_null(strstr(sr_client_error(chief2), "float64[]"));
    assert_sr_err(sr_client_declare(chief2, "x", SR_FLOAT32, 0, NULL, &gf), SR_EEXIST);
    assert_true(proto_pull_x(chief) == 9.0);
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
    assert_true(proto_pull_x(chief) == 9.0);

    sr_client_close(chief2);
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
bad_chain(raw_peer *r, int n, int last)
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
raw_pull_many(raw_peer *r, int n, const void *body, size_t body_len)
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
    raw_peer         r;
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
        /* A NaN for a step that never comes: refused, and its (stale) place
         * taken nowhere; one for the open step would count as task 1's
         * absent gradient, the policy integrity_test checks. */
        raw_push(&r, 1, "x", SR_FLOAT64, nan_g, sizeof(nan_g), INT64_MAX / 2, 0);
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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protocol_bad_messages_answered_and_change_nothing),
        cmocka_unit_test(test_protocol_hostile_client_during_training_changes_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
