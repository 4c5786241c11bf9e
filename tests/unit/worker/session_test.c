/*
 * worker/session.c on the fake peer: a reply with a new incarnation makes
 * the client resync (HELLO, then the chief re-declares, check only, and
 * re-marks ready) and finish the call against the new incarnation.
 */
#include <stdlib.h>
#include <string.h>

#include "fake_peer.h"
#include "sr_test.h"

static void
test_session_new_incarnation_resyncs_the_chief(void **state)
{
    (void)state;
    fake            f;
    sr_client      *c;
    sr_client_stats st;
    const int64_t   shape[1] = {4};
    const float     init[4] = {1, 2, 3, 4};
    int64_t         step;

    fake_init(&f);
    assert_sr_ok(fake_open(&f, 0, &c));
    assert_sr_ok(sr_client_declare(c, "w", SR_FLOAT32, 1, shape, init));
    assert_sr_ok(sr_client_ready(c));
    assert_int_equal(sr_client_incarnation(c), 7);
    int first = f.nlog;
    f.incarnation = 8; /* the coordinator restarted, at step 12 */
    f.global_step = 12;
    assert_sr_ok(sr_client_global_step(c, &step));
    assert_int_equal(step, 12);
    /* PING (old), HELLO (incarnation 0), DECLARE (check only), READY
     * (mark), the PING again (new). */
    const int      want[5] = {SR_MSG_PING, SR_MSG_HELLO, SR_MSG_DECLARE, SR_MSG_READY, SR_MSG_PING};
    const uint64_t inc[5] = {7, 0, 8, 8, 8};
    assert_int_equal(f.nlog - first, 5);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(f.log[first + i].h.type, want[i]);
        assert_int_equal(f.log[first + i].h.incarnation, inc[i]);
    }
    sr_wire_vardesc vd;
    const fake_req *d = &f.log[first + 2];
    assert_int_equal(d->nbody, 1); /* no initial value: the model is ready */
    assert_sr_ok(sr_wire_vardesc_decode(d->body[0].data, d->body[0].len, &vd));
    assert_string_equal(vd.name, "w");
    assert_true(vd.flags & SR_WIRE_DECLARE_CHECK_ONLY);
    sr_wire_ready_req rq;
    const fake_req   *rd = &f.log[first + 3];
    assert_sr_ok(sr_wire_ready_req_decode(rd->body[0].data, rd->body[0].len, &rq));
    assert_int_equal(rq.mark, 1);
    assert_int_equal(sr_client_incarnation(c), 8);
    assert_int_equal(sr_client_local_step(c), 12);
    assert_sr_ok(sr_client_stats_get(c, &st));
    assert_int_equal(st.resyncs, 1);
    sr_client_close(c);
    fake_free(&f);
}

/* A pipelined push in flight when the restart is noticed is dropped as
 * stale and never re-sent to the new incarnation. */
static void
hold_pushes(fake *f, const fake_req *r)
{
    if (r->h.type != SR_MSG_PUSH) {
        fake_answer(f, r);
    }
}

static void
test_session_restart_drops_pipelined_pushes_as_stale(void **state)
{
    (void)state;
    fake            f;
    sr_client      *c;
    sr_client_stats st;
    const int64_t   shape[1] = {4};
    const float     init[4] = {0}, g[4] = {1, 1, 1, 1};

    fake_init(&f);
    assert_sr_ok(fake_open(&f, 0, &c));
    assert_sr_ok(sr_client_declare(c, "w", SR_FLOAT32, 1, shape, init));
    assert_sr_ok(sr_client_ready(c));
    f.handler = hold_pushes;
    assert_sr_ok(sr_client_push(c, "w", g, sizeof(g)));
    f.incarnation = 9;
    assert_sr_ok(sr_client_step(c)); /* completes at the restored step */
    assert_int_equal(fake_count(&f, SR_MSG_PUSH), 1);
    assert_sr_ok(sr_client_stats_get(c, &st));
    assert_int_equal(st.pushes, 1);
    assert_int_equal(st.stale, 1);
    assert_int_equal(st.resyncs, 1);
    assert_int_equal(sr_client_incarnation(c), 9);
    sr_client_close(c);
    fake_free(&f);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_session_new_incarnation_resyncs_the_chief),
        cmocka_unit_test(test_session_restart_drops_pipelined_pushes_as_stale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
