/*
 * Issue 26, elastic membership, driven in-process through the coordinator's
 * I/O seam as server_test.c does (the fixture of server_fixture.c): R = N = 3 with
 * --min-replicas 2, SGD with lr 0.5, gradients every float represents
 * exactly.  A worker that leaves lowers R' for the open step at once; one
 * that comes back raises it at the next step boundary; CTL changes R and
 * the learning rate at a boundary, durably; a task beyond N grows N.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sr_test.h"

#include "coordinator/server_int.h"
#include "core/dtype.h"
#include "core/log.h"
#include "server_fixture.h"

/* ---- the fixture (server_fixture.c) ------------------------------------ */

static int
setup(void **state)
{
    fixture *t = fixture_new(3, 3);

    if (t == NULL) {
        return -1;
    }
    t->o.min_replicas = 2;
    t->o.step_log = 1;
    *state = t;
    return 0;
}

static int
teardown(void **state)
{
    return fixture_teardown(state);
}

/* Both tasks say HELLO; the chief declares w and marks the model ready. */
static void
job_ready(fixture *t)
{
    reply r;

    fixture_open(t);
    simple(t, "a", SR_MSG_HELLO, TASK0_ID, 0);
    simple(t, "b", SR_MSG_HELLO, TASK1_ID, 1);
    simple(t, "c", SR_MSG_HELLO, TASK2_ID, 2);
    declare_w(t);
    mark_ready(t);
    while (next_reply(&t->io, &r)) {
        assert_int_equal(r.h.status, SR_OK);
    }
}

static const float *
w_value(fixture *t)
{
    cvar *v = sr__coord_find_var(&t->c, "w");
    assert_non_null(v);
    return v->value;
}

/* Send CTL: the reply's status; its text into text (may be NULL). */
static int
ctl(fixture *t, const sr_wire_ctl_req *q, char *text, size_t cap)
{
    uint8_t        b[SR_WIRE_CTL_REQ_BYTES];
    reply          r;
    sr_wire_header h = hdr(t, SR_MSG_CTL, 0, -1);
    blob           body[1] = {{b, sr_wire_ctl_req_encode(q, b, sizeof(b))}};

    deliver(t, "op", &h, body, 1);
    assert_true(next_reply(&t->io, &r));
    assert_string_equal(r.rid, "op");
    assert_int_equal(r.h.type, SR_MSG_CTL | SR_WIRE_REPLY);
    if (text != NULL) {
        size_t n = r.nbody > 0 ? r.body[0].len : 0;
        n = n < cap - 1 ? n : cap - 1;
        memcpy(text, n ? (const char *)r.body[0].data : "", n);
        text[n] = '\0';
    }
    return r.h.status;
}

/* Drain every reply. */
static void
drain(fixture *t)
{
    reply r;
    sr__coord_flush_held_batch(&t->c, 1);
    while (next_reply(&t->io, &r)) {
    }
}

static sr_store_step_replicas
step_row(fixture *t, int64_t step)
{
    sr_store_step_replicas *rows = NULL, out;
    size_t                  n = 0;
    assert_sr_ok(sr_store_read_step_replicas(t->c.st, step, step + 1, &rows, &n));
    assert_int_equal(n, 1);
    out = rows[0];
    free(rows);
    return out;
}

/* A worker leaves during step 0 with two of three gradients in: the step
 * completes with those two (mean of them, exactly) and records R' = 2; the
 * next step takes at 2; the worker comes back during step 2, R' rises to 3
 * at the boundary, and step 3 waits for all three. */
static void
test_members_loss_lowers_r_at_once_return_raises_at_boundary(void **state)
{
    fixture *t = *state;

    job_ready(t);
    sr__coord_members_tick(&t->c);
    assert_int_equal(t->c.el_live, 3);
    assert_int_equal(sr__coord_replicas_effective(&t->c), 3);
    push_w(t, "a", TASK0_ID, 0, 0, 1, 2.0f, 4.0f);
    push_w(t, "b", TASK1_ID, 1, 0, 1, 4.0f, 8.0f);
    sr__coord_members_tick(&t->c);
    assert_int_equal(t->c.global_step, 0); /* all three live: waits for task 2 */
    simple(t, "c", SR_MSG_BYE, TASK2_ID, 2);
    sr__coord_members_tick(&t->c);
    assert_int_equal(t->c.el_live, 2);
    assert_int_equal(t->c.global_step, 1);
    assert_int_equal(t->c.committed_step, 1);
    /* w -= 0.5 * mean({2, 4}, {4, 8}) */
    assert_true(w_value(t)[0] == -0.5f);
    assert_true(w_value(t)[1] == -1.0f);
    sr_store_step_replicas s0 = step_row(t, 0);
    assert_int_equal(s0.replicas, 2);
    assert_int_equal(s0.replicas_open, 3);
    assert_int_equal(s0.min_replicas, 2);
    assert_int_equal(s0.live, 2);
    assert_int_equal(sr__coord_replicas_effective(&t->c), 2);
    /* One step's max(N, R') tokens, N = 3. */
    drain(t);

    /* Step 1 at R' = 2. */
    push_w(t, "a", TASK0_ID, 0, 1, 2, 1.0f, 1.0f);
    push_w(t, "b", TASK1_ID, 1, 1, 2, 3.0f, 1.0f);
    assert_int_equal(t->c.global_step, 2);
    assert_true(w_value(t)[0] == -1.5f);
    assert_true(w_value(t)[1] == -1.5f);
    assert_int_equal(step_row(t, 1).replicas, 2);
    assert_int_equal(step_row(t, 1).replicas_open, 2);

    /* Task 2 comes back (a new process: a new client) during step 2. */
    simple(t, "c2", SR_MSG_HELLO, TASK2B_ID, 2);
    sr__coord_members_tick(&t->c);
    assert_int_equal(t->c.el_live, 3);
    assert_int_equal(sr__coord_replicas_effective(&t->c), 2); /* not during the step */
    push_w(t, "a", TASK0_ID, 0, 2, 3, 2.0f, 2.0f);
    push_w(t, "b", TASK1_ID, 1, 2, 3, 2.0f, 2.0f);
    assert_int_equal(t->c.global_step, 3);
    assert_int_equal(sr__coord_replicas_effective(&t->c), 3);
    push_w(t, "a", TASK0_ID, 0, 3, 4, 2.0f, 2.0f);
    push_w(t, "b", TASK1_ID, 1, 3, 4, 2.0f, 2.0f);
    sr__coord_members_tick(&t->c);
    assert_int_equal(t->c.global_step, 3);
    push_w(t, "c2", TASK2B_ID, 2, 3, 1, 8.0f, 2.0f);
    assert_int_equal(t->c.global_step, 4);
    /* w -= 0.5 * mean({2,2},{2,2},{8,2}) = 0.5 * {4, 2} after step 2's {2, 2} */
    assert_true(w_value(t)[0] == -1.5f - 1.0f - 2.0f);
    assert_true(w_value(t)[1] == -1.5f - 1.0f - 1.0f);
    assert_int_equal(step_row(t, 3).replicas, 3);

    /* STATUS shows the table. */
    sr_strbuf   b;
    const char *json;
    sr_strbuf_init(&b);
    sr__coord_status_json(&t->c, &b);
    assert_sr_ok(sr_strbuf_result(&b, &json));
    assert_non_null(strstr(json, "\"elastic\":{\"replicas_effective\":3,\"min_replicas\":2,"
                                 "\"workers_live\":3,"));
    assert_non_null(strstr(json, "{\"task_index\":2,\"live\":true,"));
    sr_strbuf_free(&b);
}

/* Without --min-replicas (M = R, today's behaviour) a loss never lowers R. */
static void
test_members_default_min_replicas_never_lowers(void **state)
{
    fixture *t = *state;

    t->o.min_replicas = 0;
    job_ready(t);
    sr__coord_members_tick(&t->c);
    push_w(t, "a", TASK0_ID, 0, 0, 1, 2.0f, 4.0f);
    push_w(t, "b", TASK1_ID, 1, 0, 1, 4.0f, 8.0f);
    simple(t, "c", SR_MSG_BYE, TASK2_ID, 2);
    sr__coord_members_tick(&t->c);
    assert_int_equal(t->c.el_live, 2);
    assert_int_equal(t->c.global_step, 0);
    assert_int_equal(sr__coord_replicas_effective(&t->c), 3);
}

/* M is a floor: with two of three gone and M = 2 the step waits for two. */
static void
test_members_never_below_min_replicas(void **state)
{
    fixture *t = *state;

    job_ready(t);
    sr__coord_members_tick(&t->c);
    push_w(t, "a", TASK0_ID, 0, 0, 1, 2.0f, 4.0f);
    simple(t, "b", SR_MSG_BYE, TASK1_ID, 1);
    simple(t, "c", SR_MSG_BYE, TASK2_ID, 2);
    sr__coord_members_tick(&t->c);
    assert_int_equal(t->c.el_live, 1);
    assert_int_equal(sr__coord_replicas_effective(&t->c), 2);
    assert_int_equal(t->c.global_step, 0);
}

/* CTL set-replicas lowers R at the next boundary, set --learning-rate
 * changes the base rate there; both are rows of ctl_change, and a
 * restarted coordinator with the same options keeps them; other options
 * win. */
static void
test_ctl_changes_apply_at_boundary_and_survive_restart(void **state)
{
    fixture *t = *state;
    char     text[256];

    t->o.min_replicas = 0;
    job_ready(t);
    push_w(t, "a", TASK0_ID, 0, 0, 1, 2.0f, 4.0f);
    sr_wire_ctl_req q = {SR_WIRE_CTL_SET_REPLICAS, SR_WIRE_CTL_R, 2, 0, 0, 0};
    assert_int_equal(ctl(t, &q, text, sizeof(text)), SR_OK);
    assert_non_null(strstr(text, "from step 1: replicas_to_aggregate=2 total_replicas=3"));
    sr_wire_ctl_req lr = {SR_WIRE_CTL_SET, SR_WIRE_CTL_LR, 0, 0, 0, 0.25};
    assert_int_equal(ctl(t, &lr, text, sizeof(text)), SR_OK);
    assert_non_null(strstr(text, "learning_rate=0.25"));
    /* Step 0 still takes at 3, with lr 0.5. */
    push_w(t, "b", TASK1_ID, 1, 0, 1, 4.0f, 8.0f);
    assert_int_equal(t->c.global_step, 0);
    push_w(t, "c", TASK2_ID, 2, 0, 1, 6.0f, 12.0f);
    assert_int_equal(t->c.global_step, 1);
    assert_true(w_value(t)[0] == 1.0f - 0.5f * 4.0f);
    assert_int_equal(t->c.o->R, 2);
    assert_true(t->c.o->optim.lr == 0.25);
    /* Step 1 takes at 2, with lr 0.25. */
    drain(t);
    push_w(t, "a", TASK0_ID, 0, 1, 2, 4.0f, 4.0f);
    push_w(t, "b", TASK1_ID, 1, 1, 2, 4.0f, 0.0f);
    assert_int_equal(t->c.global_step, 2);
    assert_true(w_value(t)[0] == -1.0f - 0.25f * 4.0f);

    sr_store_ctl_change *l = NULL;
    size_t               n = 0;
    assert_sr_ok(sr_store_list_ctl_changes(t->c.st, &l, &n));
    assert_int_equal(n, 2);
    assert_string_equal(l[0].key, "replicas_to_aggregate");
    assert_true(l[0].base == 3 && l[0].value == 2 && l[0].step == 1);
    assert_string_equal(l[1].key, "learning_rate");
    free(l);

    /* Restart with the same options: both kept. */
    sr__coord_free(&t->c);
    t->io.read = t->io.n;
    fixture_open(t);
    assert_int_equal(t->c.o->R, 2);
    assert_true(t->c.o->optim.lr == 0.25);
    /* Restart with R 4 given: the options win for R; lr still kept. */
    sr__coord_free(&t->c);
    t->o.R = 4;
    t->o.N = 4;
    fixture_open(t);
    assert_int_equal(t->c.o->R, 4);
    assert_true(t->c.o->optim.lr == 0.25);
}

/* Bad CTL requests are refused, naming what was wrong, and change nothing. */
static void
test_ctl_bad_requests_refused_change_nothing(void **state)
{
    fixture *t = *state;
    char     text[256];

    job_ready(t);
    /* M above R. */
    sr_wire_ctl_req q = {SR_WIRE_CTL_SET_REPLICAS, SR_WIRE_CTL_R, 1, 0, 0, 0};
    assert_int_equal(ctl(t, &q, text, sizeof(text)), SR_EINVAL);
    assert_non_null(strstr(text, "min replicas 2 is above replicas to aggregate 1"));
    /* A malformed body. */
    uint8_t        junk[3] = {1, 2, 3};
    reply          r;
    sr_wire_header h = hdr(t, SR_MSG_CTL, 0, -1);
    blob           body[1] = {{junk, sizeof(junk)}};
    deliver(t, "op", &h, body, 1);
    assert_true(next_reply(&t->io, &r));
    assert_int_equal(r.h.status, SR_EPROTO);
    /* N above --max-tasks. */
    sr__coord_free(&t->c);
    t->io.read = t->io.n;
    t->o.max_tasks = 4;
    fixture_open(t);
    sr_wire_ctl_req big = {SR_WIRE_CTL_SET_REPLICAS, SR_WIRE_CTL_N, 0, 5, 0, 0};
    assert_int_equal(ctl(t, &big, text, sizeof(text)), SR_EINVAL);
    assert_non_null(strstr(text, "--max-tasks 4"));
    sr_store_ctl_change *l = NULL;
    size_t               n = 9;
    assert_sr_ok(sr_store_list_ctl_changes(t->c.st, &l, &n));
    assert_int_equal(n, 0);
    free(l);
    assert_int_equal(t->c.el_pending.has_R + t->c.el_pending.has_N, 0);
}

/* A task index >= N (admitted by --max-tasks) joins: N grows to cover it
 * at the next boundary, R stays, and the step's tokens follow N'. */
static void
test_members_join_beyond_n_grows_n_at_boundary(void **state)
{
    fixture *t = *state;

    t->o.max_tasks = 5;
    job_ready(t);
    simple(t, "d", SR_MSG_HELLO, 0xD3, 3);
    sr__coord_members_tick(&t->c);
    assert_int_equal(t->c.el_live, 4);
    assert_int_equal(t->c.o->N, 3);
    size_t before = t->c.tokens.len;
    push_w(t, "a", TASK0_ID, 0, 0, 1, 2.0f, 4.0f);
    push_w(t, "b", TASK1_ID, 1, 0, 1, 4.0f, 8.0f);
    push_w(t, "d", 0xD3, 3, 0, 1, 6.0f, 12.0f);
    assert_int_equal(t->c.global_step, 1);
    assert_int_equal(t->c.o->N, 4);
    assert_int_equal(t->c.o->R, 3);
    /* Tokens of step 1: max(N' = 4, R' = 3); the init ones of step 0 are kept. */
    assert_int_equal(t->c.tokens.len, before + 4);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_members_loss_lowers_r_at_once_return_raises_at_boundary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_members_default_min_replicas_never_lowers, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_members_never_below_min_replicas, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ctl_changes_apply_at_boundary_and_survive_restart,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_ctl_bad_requests_refused_change_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_members_join_beyond_n_grows_n_at_boundary, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
