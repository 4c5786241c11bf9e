/*
 * The end of a job (issue 22, "a finished job never ends"): the
 * coordinator's --max-steps and the chief's sr_client_finish end it; every
 * waiting and later step returns SR_EDONE, the last step is committed, and
 * the coordinator exits 0 once the workers have left.
 */
#include "sr_test.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "store/store.h"
#include "syncrep/syncrep.h"

/* A worker that trains the scalar x (gradient 1) until a call fails. */
typedef struct {
    sr_client *c;
    int        rc;
    int        rounds;
} looper;

static void *
loop_until_error(void *arg)
{
    looper      *l = arg;
    const double g = 1.0;
    while ((l->rc = sr_client_push(l->c, "x", &g, sizeof(g))) == 0 &&
           (l->rc = sr_client_step(l->c)) == 0) {
        l->rounds++;
    }
    return NULL;
}

static void
open_pair(sr_harness *h, sr_client **c)
{
    const double x0 = 0.0;
    for (int i = 0; i < 2; i++) {
        c[i] = sr_harness_client(h, i);
        assert_sr_ok(sr_client_declare(c[i], "x", SR_FLOAT64, 0, NULL, i == 0 ? &x0 : NULL));
    }
    assert_sr_ok(sr_client_ready(c[0]));
    assert_sr_ok(sr_client_ready(c[1]));
}

static int64_t
stored_step(const sr_harness *h)
{
    sr_store     *st;
    sr_store_opts o = {.readonly = 1};
    sr_store_info info;
    assert_sr_ok(sr_store_open(h->store, &o, &st));
    assert_sr_ok(sr_store_get_info(st, &info));
    sr_store_close(st);
    return info.global_step;
}

/* --max-steps 5: both workers run until their step returns SR_EDONE; the
 * model is at step 5 exactly, committed; the coordinator exits 0 by itself
 * once they have said BYE (before: they waited, or trained past the
 * target).  A coordinator started again on that store ends the job at
 * once. */
static void
test_job_end_max_steps(void **state)
{
    sr_harness h;
    sr_client *c[2];
    looper     l[2];
    pthread_t  t[2];
    double     x;
    int64_t    gs;
    (void)state;

    sr_harness_init(&h, "maxsteps");
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "1.0", "--init-tokens",
                     "0", "--max-steps", "5", NULL);
    open_pair(&h, c);
    for (int i = 0; i < 2; i++) {
        l[i] = (looper){c[i], 0, 0};
        assert_int_equal(pthread_create(&t[i], NULL, loop_until_error, &l[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(l[i].rc, SR_EDONE);
        assert_int_equal(l[i].rounds, 4); /* steps 0..3 gave a token; step 4's ended it */
    }
    assert_sr_ok(sr_client_global_step(c[0], &gs));
    assert_int_equal(gs, 5);
    assert_sr_ok(sr_client_pull(c[1], "x", &x, sizeof(x))); /* the final values */
    assert_true(x == -5.0);
    assert_int_equal(sr_client_step(c[0]), SR_EDONE); /* and every later step */
    for (int i = 0; i < 2; i++) {
        sr_client_close(c[i]);
    }
    int st = sr_test_reap(h.pid, 15000);
    h.pid = 0;
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(sr_harness_log_count(&h, "COORD-DONE global_step=5"), 1);
    assert_int_equal(stored_step(&h), 5);

    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "1.0", "--max-steps",
                     "5", NULL);
    const double x0 = 0.0;
    c[0] = sr_harness_client(&h, 0);
    assert_sr_ok(sr_client_declare(c[0], "x", SR_FLOAT64, 0, NULL, &x0)); /* checked only */
    assert_sr_ok(sr_client_ready(c[0]));
    assert_int_equal(sr_client_step(c[0]), SR_EDONE);
    sr_client_close(c[0]);
    st = sr_test_reap(h.pid, 15000);
    h.pid = 0;
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(stored_step(&h), 5);
    sr_harness_fini(&h);
}

/* The chief ends the job with sr_client_finish: the other worker's waiting
 * step returns SR_EDONE; a finish from another task is refused. */
static void
test_job_end_finished_by_the_chief(void **state)
{
    sr_harness   h;
    sr_client   *c[2];
    looper       l;
    pthread_t    t;
    const double g = 1.0;
    (void)state;

    sr_harness_init(&h, "finish");
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "1.0", "--init-tokens",
                     "0", NULL);
    open_pair(&h, c);
    assert_sr_err(sr_client_finish(c[1]), SR_EINVAL);
    for (int round = 0; round < 3; round++) { /* three steps together */
        l = (looper){c[1], 0, 0};
        assert_sr_ok(sr_client_push(c[1], "x", &g, sizeof(g)));
        assert_sr_ok(sr_client_push(c[0], "x", &g, sizeof(g)));
        assert_sr_ok(sr_client_step(c[0]));
        assert_sr_ok(sr_client_step(c[1]));
    }
    l = (looper){c[1], 0, 0};
    assert_int_equal(pthread_create(&t, NULL, loop_until_error, &l), 0);
    assert_sr_ok(sr_client_finish(c[0]));
    pthread_join(t, NULL);
    assert_int_equal(l.rc, SR_EDONE);
    assert_int_equal(l.rounds, 0);
    assert_sr_ok(sr_client_finish(c[0])); /* again: a no-op */
    assert_int_equal(sr_client_step(c[0]), SR_EDONE);
    for (int i = 0; i < 2; i++) {
        sr_client_close(c[i]);
    }
    int st = sr_test_reap(h.pid, 15000);
    h.pid = 0;
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(sr_harness_log_count(&h, "COORD-DONE global_step=3 (finished by the chief)"),
                     1);
    assert_int_equal(stored_step(&h), 3);
    sr_harness_fini(&h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_end_max_steps),
        cmocka_unit_test(test_job_end_finished_by_the_chief),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
