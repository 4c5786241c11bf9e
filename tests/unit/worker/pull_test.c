/*
 * worker/pull.c on the fake peer: a PULL whose expected answer is big waits
 * longer before its first resend (docs/protocol.md, "Resends": 1 s up to
 * 1 MiB, then 5 s, or the time at 100 MB/s), PINGing every 2 s meanwhile;
 * the values a token reply carried serve the next round's pulls.
 */
#include <stdlib.h>
#include <string.h>

#include "fake_peer.h"
#include "sr_test.h"

/* Drop the first PULL; refuse its resend (the test only needs its time). */
static void
drop_first_pull(fake *f, const fake_req *r)
{
    if (r->h.type == SR_MSG_PULL) {
        if (r->h.flags & SR_WIRE_F_RESEND) {
            fake_frame t = {(uint8_t *)"gone", 4};
            fake_reply(f, r, 0, SR_EINVAL, 0, &t, 1);
        }
        return;
    }
    fake_answer(f, r);
}

/* The time from the PULL to its first resend, and the PINGs between. */
static void
pull_resend_after(size_t bytes, int64_t want_ms, int want_pings)
{
    fake       f;
    sr_client *c;
    float      small[4];

    fake_init(&f);
    assert_sr_ok(fake_open(&f, 1, &c));
    f.handler = drop_first_pull;
    /* The value need not exist here: the answer is a refusal. */
    assert_sr_err(sr_client_pull(c, "w", small, bytes), SR_EINVAL);
    int p = fake_find(&f, SR_MSG_PULL, 0), q = fake_find(&f, SR_MSG_PULL, p + 1);
    assert_true(p >= 0 && q > p);
    assert_int_equal(f.log[q].h.request_id, f.log[p].h.request_id);
    assert_int_equal(f.log[q].h.flags, SR_WIRE_F_RESEND);
    assert_int_equal(f.log[q].at_ms - f.log[p].at_ms, want_ms);
    assert_int_equal(fake_count(&f, SR_MSG_PING), want_pings);
    for (int i = p + 1; i < q; i++) {
        assert_int_equal(f.log[i].h.type, SR_MSG_PING);
        assert_int_equal(f.log[i].at_ms - f.log[p].at_ms, 2000 * (i - p));
    }
    sr_client_close(c);
    fake_free(&f);
}

static void
test_pull_small_answer_is_resent_after_1s(void **state)
{
    (void)state;
    pull_resend_after(16, 1000, 0);
}

static void
test_pull_big_answer_waits_5s_before_its_first_resend(void **state)
{
    (void)state;
    pull_resend_after(2u << 20, 5000, 2);
}

static void
test_pull_huge_answer_waits_its_time_at_100_MBps(void **state)
{
    (void)state;
    /* 2 GiB at 100 MB/s: 21 474 ms (the PINGs go at 2, 4, ... 20 s). */
    pull_resend_after((size_t)2 << 30, 21474, 10);
}

/* A TOKEN asking for the variables gets "w" (4 floats of 7) along. */
static void
token_with_vars(fake *f, const fake_req *r)
{
    if (r->h.type == SR_MSG_TOKEN && (r->h.flags & SR_WIRE_F_WANT_VARS)) {
        uint8_t          vb[64], db[512];
        float            v[4] = {7, 7, 7, 7};
        sr_wire_vars_hdr vh = {.global_step = 4, .nvars = 1};
        sr_wire_vardesc  d;
        memset(&d, 0, sizeof(d));
        strcpy(d.name, "w");
        d.dtype = SR_FLOAT32;
        d.ndim = 1;
        d.shape[0] = 4;
        fake_frame fr[3] = {{vb, sr_wire_vars_hdr_encode(&vh, vb, sizeof(vb))},
                            {db, sr_wire_vardesc_encode(&d, db, sizeof(db))},
                            {(uint8_t *)v, sizeof(v)}};
        fake_reply(f, r, 0, 0, 4, fr, 3);
        return;
    }
    fake_answer(f, r);
}

static void
test_pull_after_token_with_vars_is_served_from_the_cache(void **state)
{
    (void)state;
    fake            f;
    sr_client      *c;
    float           w[4];
    sr_client_stats st;

    fake_init(&f);
    assert_sr_ok(fake_open(&f, 0, &c));
    assert_sr_ok(sr_client_ready(c));
    f.handler = token_with_vars;
    assert_sr_ok(sr_client_pull(c, "w", w, sizeof(w))); /* asks: zeros */
    assert_true(w[0] == 0.0f);
    assert_sr_ok(sr_client_step(c));
    int pulls = fake_count(&f, SR_MSG_PULL);
    assert_sr_ok(sr_client_pull(c, "w", w, sizeof(w)));
    assert_int_equal(fake_count(&f, SR_MSG_PULL), pulls); /* no round trip */
    assert_true(w[0] == 7.0f && w[3] == 7.0f);
    assert_sr_ok(sr_client_stats_get(c, &st));
    assert_int_equal(st.pulls_cached, 1);
    sr_client_close(c);
    fake_free(&f);
}

/* Token deltas (issue 23): the variables "a" and "b" (float32[2]); a TOKEN
 * holding nothing gets both (a = 1, b = 2, step 4), one holding step 4's
 * gets b = 9 alone (step 5). */
static void
token_delta(fake *f, const fake_req *r)
{
    if (r->h.type != SR_MSG_TOKEN || !(r->h.flags & SR_WIRE_F_WANT_VARS)) {
        fake_answer(f, r);
        return;
    }
    uint8_t      vb[64], db[2][512];
    float        a[2] = {1, 1}, b[2] = {2, 2}, b9[2] = {9, 9};
    sr_wire_have have;
    int          delta = (r->h.flags & SR_WIRE_F_HAVE_VARS) && r->nbody == 1 &&
                sr_wire_have_decode(r->body[0].data, r->body[0].len, &have) == SR_OK &&
                have.global_step == 4;
    sr_wire_vars_hdr vh = {.global_step = delta ? 5 : 4, .nvars = delta ? 1 : 2};
    sr_wire_vardesc  d;
    fake_frame       fr[5];
    int              n = 0;

    memset(&d, 0, sizeof(d));
    d.dtype = SR_FLOAT32;
    d.ndim = 1;
    d.shape[0] = 2;
    fr[n++] = (fake_frame){vb, sr_wire_vars_hdr_encode(&vh, vb, sizeof(vb))};
    if (!delta) {
        strcpy(d.name, "a");
        fr[n++] = (fake_frame){db[0], sr_wire_vardesc_encode(&d, db[0], sizeof(db[0]))};
        fr[n++] = (fake_frame){(uint8_t *)a, sizeof(a)};
    }
    strcpy(d.name, "b");
    fr[n++] = (fake_frame){db[1], sr_wire_vardesc_encode(&d, db[1], sizeof(db[1]))};
    fr[n++] = (fake_frame){(uint8_t *)(delta ? b9 : b), sizeof(b)};
    f->token_flags = delta ? SR_WIRE_F_HAVE_VARS : 0;
    fake_reply(f, r, 0, 0, vh.global_step, fr, n);
}

static void
pull_ab(sr_client *c, float a, float b)
{
    float x[2];
    assert_sr_ok(sr_client_pull(c, "a", x, sizeof(x)));
    assert_true(x[0] == a && x[1] == a);
    assert_sr_ok(sr_client_pull(c, "b", x, sizeof(x)));
    assert_true(x[0] == b && x[1] == b);
}

static void
test_pull_token_delta_is_merged_into_the_cache(void **state)
{
    (void)state;
    fake            f;
    sr_client      *c;
    sr_client_stats st;

    fake_init(&f);
    f.value_bytes = 8; /* a PULL's answer: zeros */
    assert_sr_ok(fake_open(&f, 0, &c));
    assert_sr_ok(sr_client_ready(c));
    f.handler = token_delta;
    pull_ab(c, 0, 0); /* asked */
    assert_sr_ok(sr_client_step(c));
    int t = fake_find(&f, SR_MSG_TOKEN, 0);
    assert_true(t >= 0 && !(f.log[t].h.flags & SR_WIRE_F_HAVE_VARS) && f.log[t].nbody == 0);
    pull_ab(c, 1, 2); /* the whole list */
    assert_sr_ok(sr_client_step(c));
    t = fake_find(&f, SR_MSG_TOKEN, t + 1);
    assert_true(t >= 0 && (f.log[t].h.flags & SR_WIRE_F_HAVE_VARS) && f.log[t].nbody == 1);
    int pulls = fake_count(&f, SR_MSG_PULL);
    pull_ab(c, 1, 9); /* a from the first token, b from the delta */
    assert_int_equal(fake_count(&f, SR_MSG_PULL), pulls);
    assert_sr_ok(sr_client_stats_get(c, &st));
    assert_int_equal(st.pulls_cached, 4);
    /* It holds step 5's values now (the fake answers that whole: a = 1,
     * b = 2 of step 4). */
    sr_wire_have have;
    assert_sr_ok(sr_client_step(c));
    t = fake_find(&f, SR_MSG_TOKEN, t + 1);
    assert_true(t >= 0 && (f.log[t].h.flags & SR_WIRE_F_HAVE_VARS));
    assert_sr_ok(sr_wire_have_decode(f.log[t].body[0].data, f.log[t].body[0].len, &have));
    assert_int_equal(have.global_step, 5);
    /* A round without pulls asks for nothing; the cache is not served in
     * the round after (its values are a step old) but kept for a delta. */
    assert_sr_ok(sr_client_step(c));
    t = fake_find(&f, SR_MSG_TOKEN, t + 1);
    assert_true(t >= 0 && !(f.log[t].h.flags & SR_WIRE_F_WANT_VARS));
    pull_ab(c, 0, 0);
    assert_int_equal(fake_count(&f, SR_MSG_PULL), pulls + 2);
    assert_sr_ok(sr_client_step(c));
    t = fake_find(&f, SR_MSG_TOKEN, t + 1);
    assert_true(t >= 0 && (f.log[t].h.flags & SR_WIRE_F_HAVE_VARS));
    assert_sr_ok(sr_wire_have_decode(f.log[t].body[0].data, f.log[t].body[0].len, &have));
    assert_int_equal(have.global_step, 4);
    sr_client_close(c);
    fake_free(&f);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pull_small_answer_is_resent_after_1s),
        cmocka_unit_test(test_pull_big_answer_waits_5s_before_its_first_resend),
        cmocka_unit_test(test_pull_huge_answer_waits_its_time_at_100_MBps),
        cmocka_unit_test(test_pull_after_token_with_vars_is_served_from_the_cache),
        cmocka_unit_test(test_pull_token_delta_is_merged_into_the_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
