/*
 * worker/client_cursor.c on the fake peer (issue 24, exactly-once data):
 * the cursor a worker resumes from is fetched after HELLO, moves to a
 * round's cursor only when a push of that round counted (accepted or
 * duplicate) with no restart since, and is fetched again after a resync;
 * the refusals send nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "fake_peer.h"
#include "sr_test.h"

/* The fake coordinator's cursor side: what it holds for the task, what it
 * was last sent, and the outcome it gives the pushes. */
typedef struct {
    char stored[64];              /* answered to a CURSOR without a body */
    char sent[SR_CURSOR_MAX + 1]; /* the last CURSOR body */
    int  sent_step;               /* ... and its header's local_step */
    int  outcome;                 /* SR_PUSH_ACCEPTED, _STALE, _DUPLICATE */
} peer;

static void
handler(fake *f, const fake_req *r)
{
    peer *p = f->user;

    if (r->h.type == SR_MSG_CURSOR) {
        if (r->nbody == 1) {
            assert_true(r->body[0].len < sizeof(p->sent));
            memcpy(p->sent, r->body[0].data, r->body[0].len);
            p->sent[r->body[0].len] = '\0';
            p->sent_step = (int)r->h.local_step;
            fake_reply(f, r, 0, SR_OK, f->global_step, NULL, 0);
        } else {
            fake_frame fr = {(uint8_t *)p->stored, strlen(p->stored)};
            fake_reply(f, r, 0, SR_OK, f->global_step, &fr, fr.len > 0);
        }
        return;
    }
    if (r->h.type == SR_MSG_PUSH && p->outcome != SR_PUSH_ACCEPTED) {
        uint8_t          b[64];
        sr_wire_push_rep q = {.outcome = (uint8_t)p->outcome};
        fake_frame       fr = {b, sr_wire_push_rep_encode(&q, b, sizeof(b))};
        fake_reply(f, r, 0, SR_OK, 0, &fr, 1);
        return;
    }
    fake_answer(f, r);
}

static const int64_t SHAPE[1] = {4};
static const float   INIT[4] = {0}, GRAD[4] = {1, 1, 1, 1};

/* A chief on the fake with w declared and the model ready. */
static sr_client *
open_ready(fake *f, peer *p)
{
    sr_client *c;

    fake_init(f);
    memset(p, 0, sizeof(*p));
    f->handler = handler;
    f->user = p;
    assert_sr_ok(fake_open(f, 0, &c));
    assert_sr_ok(sr_client_declare(c, "w", SR_FLOAT32, 1, SHAPE, INIT));
    assert_sr_ok(sr_client_ready(c));
    return c;
}

/* The cursor as a C string ("" when none). */
static const char *
cursor(sr_client *c)
{
    static char buf[SR_CURSOR_MAX + 1];
    size_t      n = 99;
    assert_sr_ok(sr_client_cursor(c, buf, SR_CURSOR_MAX, &n));
    assert_true(n <= SR_CURSOR_MAX);
    buf[n] = '\0';
    return buf;
}

/* One round: its cursor, a push, the step. */
static void
round_(sr_client *c, const char *cur)
{
    assert_sr_ok(sr_client_set_cursor(c, cur, strlen(cur)));
    assert_sr_ok(sr_client_push(c, "w", GRAD, sizeof(GRAD)));
    assert_sr_ok(sr_client_step(c));
}

/* After HELLO the cursor is the coordinator's, asked for once; a round
 * that counted moves it to the round's cursor without asking again. */
static void
test_cursor_fetched_once_then_moves_with_counted_rounds(void **state)
{
    (void)state;
    fake       f;
    peer       p;
    sr_client *c = open_ready(&f, &p);

    strcpy(p.stored, "epoch=1 pos=8");
    assert_string_equal(cursor(c), "epoch=1 pos=8");
    assert_string_equal(cursor(c), "epoch=1 pos=8");
    assert_int_equal(fake_count(&f, SR_MSG_CURSOR), 1);
    int ask = fake_find(&f, SR_MSG_CURSOR, 0);
    assert_int_equal(f.log[ask].nbody, 0);

    int64_t step = sr_client_local_step(c);
    round_(c, "epoch=1 pos=12");
    assert_string_equal(p.sent, "epoch=1 pos=12");
    assert_int_equal(p.sent_step, step); /* for the round's step */
    /* The CURSOR went before the round's push. */
    assert_true(fake_find(&f, SR_MSG_CURSOR, ask + 1) < fake_find(&f, SR_MSG_PUSH, 0));
    assert_string_equal(cursor(c), "epoch=1 pos=12");
    assert_int_equal(fake_count(&f, SR_MSG_CURSOR), 2); /* the set only: no fetch */

    p.outcome = SR_PUSH_DUPLICATE; /* a resend already counted: it counted */
    round_(c, "epoch=1 pos=16");
    assert_string_equal(cursor(c), "epoch=1 pos=16");
    sr_client_close(c);
    fake_free(&f);
}

/* A round whose push was dropped as stale leaves the cursor where the last
 * counted round put it: its samples are computed again. */
static void
test_cursor_stale_round_does_not_move_it(void **state)
{
    (void)state;
    fake       f;
    peer       p;
    sr_client *c = open_ready(&f, &p);

    round_(c, "A");
    assert_string_equal(cursor(c), "A");
    p.outcome = SR_PUSH_STALE;
    round_(c, "B");
    assert_string_equal(p.sent, "B");
    assert_string_equal(cursor(c), "A");
    p.outcome = SR_PUSH_ACCEPTED;
    round_(c, "B");
    assert_string_equal(cursor(c), "B");
    sr_client_close(c);
    fake_free(&f);
}

/* A coordinator restart after the round's push was accepted, before its
 * step was applied: the round does not count (its gradient died with that
 * incarnation), and the cursor is the new incarnation's (fetched again). */
static void
test_cursor_after_restart_is_the_coordinators(void **state)
{
    (void)state;
    fake            f;
    peer            p;
    sr_client      *c = open_ready(&f, &p);
    sr_client_stats st;

    round_(c, "A");
    assert_string_equal(cursor(c), "A");
    assert_sr_ok(sr_client_set_cursor(c, "B", 1));
    assert_sr_ok(sr_client_push(c, "w", GRAD, sizeof(GRAD)));
    assert_sr_ok(sr_client_flush(c)); /* accepted by incarnation 7 ... */
    assert_sr_ok(sr_client_stats_get(c, &st));
    assert_int_equal(st.accepted, 2);
    f.incarnation = 8; /* ... which died: the new one committed only up to round A */
    strcpy(p.stored, "A");
    int before = fake_count(&f, SR_MSG_CURSOR);
    (void)sr_client_step(c);
    assert_sr_ok(sr_client_stats_get(c, &st));
    assert_int_equal(st.resyncs, 1);
    assert_string_equal(cursor(c), "A");
    assert_int_equal(fake_count(&f, SR_MSG_CURSOR), before + 1); /* asked again */
    int last = fake_find(&f, SR_MSG_CURSOR, 0);
    for (int i = last; i >= 0; i = fake_find(&f, SR_MSG_CURSOR, i + 1)) {
        last = i;
    }
    assert_int_equal(f.log[last].nbody, 0);
    assert_int_equal(f.log[last].h.incarnation, 8);
    sr_client_close(c);
    fake_free(&f);
}

/* Refusals: before ready, too long, NULL, a buffer too small; the first
 * three send nothing. */
static void
test_cursor_refusals_send_nothing(void **state)
{
    (void)state;
    fake       f;
    peer       p;
    sr_client *c;
    char       big[SR_CURSOR_MAX + 1];
    char       small[2];
    size_t     n = 0;

    fake_init(&f);
    memset(&p, 0, sizeof(p));
    f.handler = handler;
    f.user = &p;
    assert_sr_ok(fake_open(&f, 0, &c));
    assert_int_equal(sr_client_set_cursor(c, "x", 1), SR_ENOTREADY);
    assert_non_null(strstr(sr_client_error(c), "sr_client_ready"));
    assert_int_equal(sr_client_cursor(c, small, sizeof(small), &n), SR_ENOTREADY);
    assert_sr_ok(sr_client_declare(c, "w", SR_FLOAT32, 1, SHAPE, INIT));
    assert_sr_ok(sr_client_ready(c));
    memset(big, 'x', sizeof(big));
    assert_int_equal(sr_client_set_cursor(c, big, sizeof(big)), SR_EINVAL);
    assert_non_null(strstr(sr_client_error(c), "at most 4096"));
    assert_int_equal(sr_client_set_cursor(c, NULL, 3), SR_EINVAL);
    assert_int_equal(sr_client_set_cursor(NULL, "x", 1), SR_EINVAL);
    assert_int_equal(sr_client_cursor(c, small, sizeof(small), NULL), SR_EINVAL);
    assert_int_equal(fake_count(&f, SR_MSG_CURSOR), 0);
    /* The largest cursor is fine; a buffer smaller than the cursor is not. */
    assert_sr_ok(sr_client_set_cursor(c, big, SR_CURSOR_MAX));
    strcpy(p.stored, "abc");
    assert_int_equal(sr_client_cursor(c, small, sizeof(small), &n), SR_EINVAL);
    assert_non_null(strstr(sr_client_error(c), "3 bytes, the buffer has 2"));
    sr_client_close(c);
    fake_free(&f);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cursor_fetched_once_then_moves_with_counted_rounds),
        cmocka_unit_test(test_cursor_stale_round_does_not_move_it),
        cmocka_unit_test(test_cursor_after_restart_is_the_coordinators),
        cmocka_unit_test(test_cursor_refusals_send_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
