/*
 * worker/conn.c through the public calls, on the fake peer's clock: resend
 * times, late and duplicate replies, the TOKEN wait's PINGs, a new
 * connection, the timeout (docs/protocol.md, "Resends and deduplication").
 */
#include <stdlib.h>
#include <string.h>

#include "fake_peer.h"
#include "sr_test.h"

/* Drop the first `drop` PINGs of a request id; then answer (twice when
 * dup). */
typedef struct {
    int      drop, dup, seen;
    uint64_t id;
} ping_script;

static void
drop_pings(fake *f, const fake_req *r)
{
    ping_script *s = f->user;

    if (r->h.type == SR_MSG_PING && (s->id == 0 || s->id == r->h.request_id)) {
        s->id = r->h.request_id;
        if (s->seen++ < s->drop) {
            return;
        }
        if (s->dup) {
            fake_answer(f, r);
        }
    }
    fake_answer(f, r);
}

static void
test_conn_unanswered_request_is_resent_after_its_resend_time(void **state)
{
    (void)state;
    fake            f;
    sr_client      *c;
    ping_script     s = {.drop = 2};
    int64_t         step, t0;
    sr_client_stats st;

    fake_init(&f);
    assert_sr_ok(fake_open(&f, 1, &c));
    f.handler = drop_pings;
    f.user = &s;
    t0 = f.now_ms;
    assert_sr_ok(sr_client_global_step(c, &step));
    assert_int_equal(step, 3);
    /* HELLO, then the PING under one request id at 0, after 1 s and after
     * 2 s more (the interval doubles); between them, at 2 s, the wait's own
     * keep-alive PING under a new id. */
    assert_int_equal(f.nlog, 5);
    const int     call[3] = {1, 2, 4};
    const int64_t at[3] = {0, 1000, 3000};
    for (int k = 0; k < 3; k++) {
        const fake_req *r = &f.log[call[k]];
        assert_int_equal(r->h.type, SR_MSG_PING);
        assert_int_equal(r->h.request_id, f.log[1].h.request_id);
        assert_int_equal(r->h.flags, k == 0 ? 0 : SR_WIRE_F_RESEND);
        assert_int_equal(r->at_ms, t0 + at[k]);
    }
    assert_int_equal(f.log[3].h.type, SR_MSG_PING);
    assert_int_equal(f.log[3].h.flags, 0);
    assert_int_equal(f.log[3].at_ms, t0 + 2000);
    assert_true(f.log[3].h.request_id > f.log[1].h.request_id);
    assert_sr_ok(sr_client_stats_get(c, &st));
    assert_int_equal(st.resends, 2);
    sr_client_close(c);
    fake_free(&f);
}

static void
test_conn_duplicate_late_reply_is_ignored(void **state)
{
    (void)state;
    fake        f;
    sr_client  *c;
    ping_script s = {.drop = 1, .dup = 1};
    int64_t     step;

    fake_init(&f);
    assert_sr_ok(fake_open(&f, 1, &c));
    f.handler = drop_pings;
    f.user = &s;
    f.global_step = 5;
    assert_sr_ok(sr_client_global_step(c, &step));
    assert_int_equal(step, 5);
    /* The resend was answered twice: the second answer (step 5) is still
     * queued, ahead of the next call's answer (step 9), and must not be
     * taken for it. */
    f.global_step = 9;
    assert_sr_ok(sr_client_global_step(c, &step));
    assert_int_equal(step, 9);
    assert_int_equal(f.out == NULL, 1);
    sr_client_close(c);
    fake_free(&f);
}

/* Park the TOKEN: answer it 3.5 s after the first one arrived. */
static void
park_token(fake *f, const fake_req *r)
{
    if (r->h.type == SR_MSG_TOKEN) {
        if (!(r->h.flags & SR_WIRE_F_RESEND)) {
            fake_reply(f, r, 3500, 0, 11, NULL, 0);
        }
        return;
    }
    fake_answer(f, r);
}

static void
test_conn_token_wait_resends_and_pings_every_second(void **state)
{
    (void)state;
    fake            f;
    sr_client      *c;
    sr_client_stats st;
    int64_t         t0;

    fake_init(&f);
    assert_sr_ok(fake_open(&f, 0, &c));
    assert_sr_ok(sr_client_ready(c));
    f.handler = park_token;
    int first = f.nlog;
    t0 = f.now_ms;
    assert_sr_ok(sr_client_step(c));
    assert_int_equal(sr_client_local_step(c), 11);
    /* TOKEN at 0; at 1, 2 and 3 s the same TOKEN again and a PING. */
    assert_int_equal(f.nlog - first, 7);
    assert_int_equal(f.log[first].h.type, SR_MSG_TOKEN);
    assert_int_equal(f.log[first].at_ms, t0);
    for (int k = 1; k <= 3; k++) {
        const fake_req *tok = &f.log[first + 2 * k - 1], *ping = &f.log[first + 2 * k];
        assert_int_equal(tok->h.type, SR_MSG_TOKEN);
        assert_int_equal(tok->h.request_id, f.log[first].h.request_id);
        assert_int_equal(tok->h.flags, SR_WIRE_F_RESEND);
        assert_int_equal(tok->at_ms, t0 + 1000 * k);
        assert_int_equal(ping->h.type, SR_MSG_PING);
        assert_int_equal(ping->at_ms, t0 + 1000 * k);
    }
    assert_sr_ok(sr_client_stats_get(c, &st));
    assert_int_equal(st.resends, 0); /* a TOKEN's resends are its wait, not resends */
    sr_client_close(c);
    fake_free(&f);
}

/* No answer to the first PING; a new connection comes up 300 ms later. */
static void
reconnect_after_send(fake *f, const fake_req *r)
{
    ping_script *s = f->user;
    if (r->h.type == SR_MSG_PING && s->seen++ == 0) {
        f->now_ms += 300;
        f->reconnect = 1;
        return;
    }
    fake_answer(f, r);
}

static void
test_conn_new_connection_resends_at_once(void **state)
{
    (void)state;
    fake        f;
    sr_client  *c;
    ping_script s = {0};
    int64_t     step, t0;

    fake_init(&f);
    assert_sr_ok(fake_open(&f, 1, &c));
    f.handler = reconnect_after_send;
    f.user = &s;
    t0 = f.now_ms;
    assert_sr_ok(sr_client_global_step(c, &step));
    assert_int_equal(f.nlog, 3);
    assert_int_equal(f.log[2].h.type, SR_MSG_PING);
    assert_int_equal(f.log[2].h.flags, SR_WIRE_F_RESEND);
    assert_int_equal(f.log[2].at_ms, t0 + 300); /* not at the 1 s timer */
    sr_client_close(c);
    fake_free(&f);
}

static void
silent(fake *f, const fake_req *r)
{
    (void)f;
    (void)r;
}

static void
test_conn_silent_coordinator_times_out(void **state)
{
    (void)state;
    fake       f;
    sr_client *c;
    int64_t    step, t0;

    fake_init(&f);
    assert_sr_ok(fake_open(&f, 1, &c));
    f.handler = silent;
    t0 = f.now_ms;
    assert_sr_err(sr_client_global_step(c, &step), SR_ETIMEDOUT);
    assert_int_equal(f.now_ms, t0 + 60000);
    assert_non_null(strstr(sr_client_error(c), "no answer from fake://coordinator for 60000 ms"));
    sr_client_close(c);
    fake_free(&f);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conn_unanswered_request_is_resent_after_its_resend_time),
        cmocka_unit_test(test_conn_duplicate_late_reply_is_ignored),
        cmocka_unit_test(test_conn_token_wait_resends_and_pings_every_second),
        cmocka_unit_test(test_conn_new_connection_resends_at_once),
        cmocka_unit_test(test_conn_silent_coordinator_times_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
