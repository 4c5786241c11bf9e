/*
 * coordinator/server_cursor.c driven in-process (server_fixture.h), issue
 * 24's exactly-once data: a cursor sent for step S is pending; an accepted
 * push of that task computed at S confirms it; when S is applied it is the
 * task's current cursor, committed in its worker row.  A round whose pushes
 * were dropped never confirms; a restart loses what was pending or
 * confirmed, as it loses the open step; malformed CURSORs are refused and
 * change nothing.  R = N = 2, checkpoint every step.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sr_test.h"

#include "server_fixture.h"

enum { TASK0B_ID = 0xA7 }; /* TASK0_ID, TASK1_ID: server_fixture.h */

/* A CURSOR request: set (body) or ask (body NULL, n 0 frames). */
/* cmocka setup: R = N = 2, SGD lr 0.5. */
static int
setup(void **state)
{
    *state = fixture_new(2, 2);
    return *state != NULL ? 0 : -1;
}

static reply
cursor_rpc(fixture *t, const char *rid, uint64_t client_id, int32_t task, int64_t local_step,
           const blob *body, int nbody)
{
    reply          r;
    sr_wire_header h = hdr(t, SR_MSG_CURSOR, client_id, task);

    h.local_step = local_step;
    deliver(t, rid, &h, body, nbody);
    assert_true(next_reply(&t->io, &r));
    assert_string_equal(r.rid, rid);
    assert_int_equal(r.h.type, SR_MSG_CURSOR | SR_WIRE_REPLY);
    return r;
}

static void
set_cursor(fixture *t, const char *rid, uint64_t client_id, int32_t task, int64_t local_step,
           const char *cur)
{
    blob  b = {cur, strlen(cur)};
    reply r = cursor_rpc(t, rid, client_id, task, local_step, &b, 1);
    assert_int_equal(r.h.status, SR_OK);
    assert_int_equal(r.nbody, 0);
}

/* The cursor the coordinator would resume task from ("" for none). */
static const char *
ask(fixture *t, const char *rid, uint64_t client_id, int32_t task)
{
    static char buf[SR_WIRE_CURSOR_MAX + 1];
    reply       r = cursor_rpc(t, rid, client_id, task, 0, NULL, 0);

    assert_int_equal(r.h.status, SR_OK);
    assert_true(r.nbody <= 1);
    size_t n = r.nbody ? r.body[0].len : 0;
    assert_true(n <= SR_WIRE_CURSOR_MAX);
    memcpy(buf, n ? (const char *)r.body[0].data : "", n);
    buf[n] = '\0';
    return buf;
}

/* Task's cursor in the store's worker rows ("-" when it has none). */
static const char *
stored(fixture *t, int32_t task)
{
    static char      buf[SR_WIRE_CURSOR_MAX + 1];
    sr_store_worker *rows = NULL;
    size_t           n = 0;

    strcpy(buf, "-");
    assert_sr_ok(sr_store_list_workers(t->c.st, &rows, &n));
    for (size_t i = 0; i < n; i++) {
        if (rows[i].task_index == task && rows[i].has_cursor) {
            memcpy(buf, rows[i].cursor, rows[i].cursor_len);
            buf[rows[i].cursor_len] = '\0';
        }
    }
    free(rows);
    return buf;
}

/* Both tasks say HELLO; the chief declares w and marks the model ready. */
static void
job_ready(fixture *t)
{
    fixture_open(t);
    simple(t, "a", SR_MSG_HELLO, TASK0_ID, 0);
    simple(t, "b", SR_MSG_HELLO, TASK1_ID, 1);
    declare_w(t);
    mark_ready(t);
    fixture_drain(t);
}

/* pending -> confirmed -> current, and committed with the step. */
static void
test_cursor_pending_confirmed_current_committed(void **state)
{
    fixture *t = *state;

    job_ready(t);
    assert_string_equal(ask(t, "a", TASK0_ID, 0), ""); /* never set */
    set_cursor(t, "a", TASK0_ID, 0, 0, "t0:e0p4");
    /* Pending: no gradient of it counted yet, so not the one to resume from. */
    assert_string_equal(ask(t, "a", TASK0_ID, 0), "");
    push_w(t, "a", TASK0_ID, 0, 0, 1, 2.0f, 4.0f);
    fixture_drain(t);
    /* Confirmed: its gradient is in the open step; answered with that step + 1. */
    reply r = cursor_rpc(t, "a", TASK0_ID, 0, 0, NULL, 0);
    assert_int_equal(r.nbody, 1);
    assert_memory_equal(r.body[0].data, "t0:e0p4", 7);
    assert_int_equal(r.h.local_step, 1);
    assert_int_equal(t->c.global_step, 0);
    assert_string_equal(stored(t, 0), "-"); /* not committed before its step */
    /* Task 1's push completes step 0: the cursor is current and committed. */
    set_cursor(t, "b", TASK1_ID, 1, 0, "t1:e0p4");
    push_w(t, "b", TASK1_ID, 1, 0, 1, 2.0f, 4.0f);
    fixture_drain(t);
    assert_int_equal(t->c.global_step, 1);
    assert_int_equal(t->c.committed_step, 1);
    assert_string_equal(stored(t, 0), "t0:e0p4");
    assert_string_equal(stored(t, 1), "t1:e0p4");
    assert_string_equal(ask(t, "a", TASK0_ID, 0), "t0:e0p4");
    assert_string_equal(ask(t, "b", TASK1_ID, 1), "t1:e0p4");
}

/* A cursor whose round's push is dropped as stale stays pending, is never
 * committed, and is replaced by the next round's. */
static void
test_cursor_stale_round_never_confirms(void **state)
{
    fixture *t = *state;

    job_ready(t);
    /* A cursor for step 1 is not confirmed by an accepted push of step 0. */
    set_cursor(t, "a", TASK0_ID, 0, 1, "early");
    push_w(t, "a", TASK0_ID, 0, 0, 1, 1.0f, 1.0f);
    fixture_drain(t);
    assert_string_equal(ask(t, "a", TASK0_ID, 0), "");
    set_cursor(t, "a", TASK0_ID, 0, 0, "A");
    push_w(t, "a", TASK0_ID, 0, 0, 4, 1.0f, 1.0f); /* beyond the task's share: dropped */
    set_cursor(t, "b", TASK1_ID, 1, 0, "B");
    push_w(t, "b", TASK1_ID, 1, 0, 1, 1.0f, 1.0f);
    fixture_drain(t);
    assert_int_equal(t->c.global_step, 1);
    assert_string_equal(stored(t, 0), "-");
    assert_string_equal(stored(t, 1), "B");
    set_cursor(t, "a", TASK0_ID, 0, 1, "A");
    push_w(t, "a", TASK0_ID, 0, 1, 5, 1.0f, 1.0f);
    set_cursor(t, "b", TASK1_ID, 1, 1, "B1");
    push_w(t, "b", TASK1_ID, 1, 1, 2, 1.0f, 1.0f);
    fixture_drain(t);
    assert_int_equal(t->c.global_step, 2);
    assert_string_equal(stored(t, 0), "A");
    /* Task 0 computes at step 0 again (it missed the token): stale. */
    set_cursor(t, "a", TASK0_ID, 0, 1, "A-again");
    push_w(t, "a", TASK0_ID, 0, 1, 6, 1.0f, 1.0f);
    fixture_drain(t);
    assert_string_equal(ask(t, "a", TASK0_ID, 0), "A");
    /* The next round's cursor replaces the pending one and counts. */
    set_cursor(t, "a", TASK0_ID, 0, 2, "A2");
    push_w(t, "a", TASK0_ID, 0, 2, 7, 1.0f, 1.0f);
    set_cursor(t, "b", TASK1_ID, 1, 2, "B2");
    push_w(t, "b", TASK1_ID, 1, 2, 3, 1.0f, 1.0f);
    fixture_drain(t);
    assert_int_equal(t->c.global_step, 3);
    assert_string_equal(stored(t, 0), "A2");
    assert_string_equal(ask(t, "a", TASK0_ID, 0), "A2");
}

/* A restart loses the confirmed cursor of the open step, as it loses the
 * step: a worker (a new process too) resumes from the committed one. */
static void
test_cursor_restart_resumes_from_the_committed(void **state)
{
    fixture *t = *state;

    job_ready(t);
    set_cursor(t, "a", TASK0_ID, 0, 0, "A");
    push_w(t, "a", TASK0_ID, 0, 0, 1, 1.0f, 1.0f);
    set_cursor(t, "b", TASK1_ID, 1, 0, "B");
    push_w(t, "b", TASK1_ID, 1, 0, 1, 1.0f, 1.0f);
    fixture_drain(t);
    set_cursor(t, "a", TASK0_ID, 0, 1, "A2"); /* confirmed, its step never applied */
    push_w(t, "a", TASK0_ID, 0, 1, 2, 1.0f, 1.0f);
    fixture_drain(t);
    assert_string_equal(ask(t, "a", TASK0_ID, 0), "A2");

    fixture_close(t); /* kill -9 */
    fixture_open(t);
    simple(t, "a2", SR_MSG_HELLO, TASK0B_ID, 0);
    simple(t, "b", SR_MSG_HELLO, TASK1_ID, 1);
    fixture_drain(t);
    assert_int_equal(t->c.global_step, 1);
    assert_string_equal(ask(t, "a2", TASK0B_ID, 0), "A");
    assert_string_equal(ask(t, "b", TASK1_ID, 1), "B");
}

/* Two body frames, or one over SR_WIRE_CURSOR_MAX, are refused and change
 * nothing; the largest cursor is taken. */
static void
test_cursor_refusals_change_nothing(void **state)
{
    fixture    *t = *state;
    static char big[SR_WIRE_CURSOR_MAX + 1];

    job_ready(t);
    set_cursor(t, "a", TASK0_ID, 0, 0, "A");
    push_w(t, "a", TASK0_ID, 0, 0, 1, 1.0f, 1.0f);
    fixture_drain(t);
    blob  two[2] = {{"x", 1}, {"y", 1}};
    reply r = cursor_rpc(t, "a", TASK0_ID, 0, 0, two, 2);
    assert_int_equal(r.h.status, SR_EPROTO);
    memset(big, 'z', sizeof(big));
    blob over = {big, sizeof(big)};
    r = cursor_rpc(t, "a", TASK0_ID, 0, 1, &over, 1);
    assert_int_equal(r.h.status, SR_EINVAL);
    assert_true(r.nbody >= 1);
    assert_non_null(memmem(r.body[0].data, r.body[0].len, "at most 4096", 12));
    assert_string_equal(ask(t, "a", TASK0_ID, 0), "A");
    blob max = {big, SR_WIRE_CURSOR_MAX};
    r = cursor_rpc(t, "a", TASK0_ID, 0, 0, &max, 1);
    assert_int_equal(r.h.status, SR_OK);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cursor_pending_confirmed_current_committed, setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cursor_stale_round_never_confirms, setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cursor_restart_resumes_from_the_committed, setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cursor_refusals_change_nothing, setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
