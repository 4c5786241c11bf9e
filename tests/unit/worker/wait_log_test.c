/*
 * Issue 22, "never silent": a wait of the client (worker/conn.c's
 * sr__conn_call, worker/session.c's sr_client_ready) that lasts 5 s logs one
 * WORKER-WAIT line, then not again for that wait: naming the endpoint when
 * the coordinator does not answer, saying the step has not completed when it
 * answers; SYNCREP_QUIET=1 silences it.  On the fake peer's clock: no sleeps.
 */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "fake_peer.h"
#include "sr_test.h"

typedef struct {
    int  n;          /* WORKER-WAIT lines */
    char last[1024]; /* the last one */
} captured;

static void
capture(void *arg, int level, const char *id, const char *msg)
{
    captured *cap = arg;
    (void)level;
    if (strcmp(id, "WORKER-WAIT") == 0) {
        cap->n++;
        snprintf(cap->last, sizeof(cap->last), "%s", msg);
    }
}

/* The TOKEN answered 12 s after it was first sent; PINGs answered. */
static void
slow_token(fake *f, const fake_req *r)
{
    if (r->h.type == SR_MSG_TOKEN) {
        if (!(r->h.flags & SR_WIRE_F_RESEND)) {
            fake_reply(f, r, 12000, 0, 11, NULL, 0);
        }
        return;
    }
    fake_answer(f, r);
}

/* Nothing answered. */
static void
deaf(fake *f, const fake_req *r)
{
    (void)f;
    (void)r;
}

static int
setup(void **state)
{
    (void)state;
    unsetenv("SYNCREP_QUIET");
    return 0;
}

static int
teardown(void **state)
{
    (void)state;
    sr_log_set_sink(NULL, NULL);
    unsetenv("SYNCREP_QUIET");
    return 0;
}

/* A step whose token takes 12 s while the coordinator answers: one line,
 * saying so; QUIET: none. */
static void
test_wait_log_token_wait_says_once_that_the_step_has_not_completed(void **state)
{
    (void)state;
    for (int quiet = 0; quiet <= 1; quiet++) {
        fake       f;
        sr_client *c;
        captured   cap = {0};

        if (quiet) {
            setenv("SYNCREP_QUIET", "1", 1);
        }
        sr_log_set_sink(capture, &cap);
        fake_init(&f);
        assert_sr_ok(fake_open(&f, 0, &c));
        assert_sr_ok(sr_client_ready(c));
        f.handler = slow_token;
        assert_sr_ok(sr_client_step(c));
        assert_int_equal(sr_client_local_step(c), 11);
        assert_int_equal(cap.n, quiet ? 0 : 1);
        if (!quiet) {
            assert_non_null(strstr(cap.last, "waiting for the step's token from "
                                             "fake://coordinator since 5 s"));
            assert_non_null(strstr(cap.last, "the coordinator answers, the step has not "
                                             "completed"));
        }
        sr_client_close(c);
        fake_free(&f);
        sr_log_set_sink(NULL, NULL);
    }
}

/* A coordinator that does not answer: one line naming the endpoint, then the
 * call's SR_ETIMEDOUT after timeout_ms (60 s of fake time), no second line. */
static void
test_wait_log_unreachable_coordinator_named_once(void **state)
{
    (void)state;
    fake       f;
    sr_client *c;
    captured   cap = {0};
    int64_t    step;

    sr_log_set_sink(capture, &cap);
    fake_init(&f);
    assert_sr_ok(fake_open(&f, 1, &c));
    f.handler = deaf;
    assert_sr_err(sr_client_global_step(c, &step), SR_ETIMEDOUT);
    assert_int_equal(cap.n, 1);
    assert_non_null(strstr(cap.last, "no answer from the coordinator at fake://coordinator"));
    assert_non_null(strstr(cap.last, "task=1"));
    sr_client_close(c);
    fake_free(&f);
}

/* An answer within 5 s: no line at all. */
static void
test_wait_log_quick_answer_logs_nothing(void **state)
{
    (void)state;
    fake       f;
    sr_client *c;
    captured   cap = {0};

    sr_log_set_sink(capture, &cap);
    fake_init(&f);
    assert_sr_ok(fake_open(&f, 0, &c));
    assert_sr_ok(sr_client_ready(c));
    assert_sr_ok(sr_client_step(c));
    assert_int_equal(cap.n, 0);
    sr_client_close(c);
    fake_free(&f);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_wait_log_token_wait_says_once_that_the_step_has_not_completed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_log_unreachable_coordinator_named_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_wait_log_quick_answer_logs_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
