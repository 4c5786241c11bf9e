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
#include "server_fixture.h"

/* ---- the fixture (server_fixture.c) ------------------------------------ */

static int
setup(void **state)
{
    *state = fixture_new(2, 2);
    return *state != NULL ? 0 : -1;
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
