/*
 * Seed 000's two scenarios (TensorFlow's SyncReplicasOptimizerV2 test),
 * through the public client API against a real coordinator process:
 * v0 = 0.0, v1 = 1.0, v_sparse = [[3], [4]]; worker i pushes 0.1 + 0.2 i to
 * v0, 0.9 + 0.2 i to v1 and row 1 of v_sparse; SGD with learning rate 2.0;
 * init tokens = the number of workers.
 */
#include "sr_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "syncrep/syncrep.h"

typedef struct {
    sr_client *c;
    int        id;
    atomic_int pushed; /* set once the pushes of a round were acknowledged */
    int        rc;
} worker;

static void
declare_model(sr_client *c, int chief)
{
    const float   v0 = 0.0f, v1 = 1.0f, vs[2] = {3.0f, 4.0f};
    const int64_t shape[2] = {2, 1};

    assert_sr_ok(sr_client_declare(c, "v0", SR_FLOAT32, 0, NULL, chief ? &v0 : NULL));
    assert_sr_ok(sr_client_declare(c, "v1", SR_FLOAT32, 0, NULL, chief ? &v1 : NULL));
    assert_sr_ok(sr_client_declare(c, "v_sparse", SR_FLOAT32, 2, shape, chief ? vs : NULL));
}

/* One train_op of the seed: push the three gradients, then take a token. */
static int
train(worker *w)
{
    const float   g0 = 0.1f + (float)w->id * 0.2f;
    const float   g1 = 0.9f + (float)w->id * 0.2f;
    const float   gs = 0.1f + (float)w->id * 0.2f;
    const int64_t row = 1;
    int           rc;

    if ((rc = sr_client_push(w->c, "v0", &g0, sizeof(g0))) != 0 ||
        (rc = sr_client_push(w->c, "v1", &g1, sizeof(g1))) != 0 ||
        (rc = sr_client_push_sparse(w->c, "v_sparse", 1, &row, &gs, sizeof(gs))) != 0) {
        return rc;
    }
    atomic_store(&w->pushed, 1);
    return sr_client_step(w->c);
}

static void *
train_thread(void *arg)
{
    worker *w = arg;
    w->rc = train(w);
    return NULL;
}

static int
pushed(void *arg)
{
    return atomic_load(&((worker *)arg)->pushed);
}

static float
pull1(sr_client *c, const char *name)
{
    float v = -999.0f;
    assert_sr_ok(sr_client_pull(c, name, &v, sizeof(v)));
    return v;
}

static int64_t
global_step(sr_client *c)
{
    int64_t g = -1;
    assert_sr_ok(sr_client_global_step(c, &g));
    return g;
}

static void
start(sr_harness *h, worker *w, int n, const char *nstr)
{
    sr_harness_start(h, "--replicas-to-aggregate", "2", "--total-replicas", nstr, "--init-tokens",
                     nstr, "--learning-rate", "2.0", NULL);
    for (int i = 0; i < n; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].id = i;
        w[i].c = sr_harness_client(h, i);
        declare_model(w[i].c, i == 0);
    }
    assert_sr_ok(sr_client_ready(w[0].c));
    for (int i = 1; i < n; i++) {
        assert_sr_ok(sr_client_ready(w[i].c));
    }
}

static void
test_seed_two_workers(void **state)
{
    sr_harness h;
    worker     w[2];
    pthread_t  t[2];
    float      vs[2];
    (void)state;

    sr_harness_init(&h, "seed2");
    start(&h, w, 2, "2");

    assert_true(pull1(w[0].c, "v0") == 0.0f);
    assert_true(pull1(w[0].c, "v1") == 1.0f);
    assert_int_equal(sr_client_local_step(w[0].c), 0);
    assert_int_equal(global_step(w[1].c), 0);
    assert_int_equal(sr_client_local_step(w[1].c), 0);
    assert_sr_ok(sr_client_pull(w[1].c, "v_sparse", vs, sizeof(vs)));
    assert_true(vs[0] == 3.0f && vs[1] == 4.0f);

    /* The init tokens let the workers run one after the other. */
    assert_sr_ok(train(&w[0]));
    assert_sr_ok(train(&w[1]));
    assert_int_equal(global_step(w[1].c), 1);
    assert_near(pull1(w[1].c, "v0"), 0 - (0.1 + 0.3) / 2 * 2.0, 1e-6);
    assert_near(pull1(w[1].c, "v1"), 1 - (0.9 + 1.1) / 2 * 2.0, 1e-6);
    assert_sr_ok(sr_client_pull(w[1].c, "v_sparse", vs, sizeof(vs)));
    assert_near(vs[0], 3.0, 1e-6);
    assert_near(vs[1], 4.0 - (0.1 + 0.3) / 2 * 2.0, 1e-6);
    /* The init tokens carried step 0: the next round is computed too early. */
    assert_int_equal(sr_client_local_step(w[0].c), 0);
    assert_int_equal(sr_client_local_step(w[1].c), 0);

    assert_sr_ok(train(&w[0]));
    assert_sr_ok(train(&w[1]));
    assert_int_equal(global_step(w[1].c), 1);
    assert_int_equal(sr_client_local_step(w[0].c), 1);
    assert_int_equal(sr_client_local_step(w[1].c), 1);
    assert_near(pull1(w[1].c, "v0"), 0 - (0.1 + 0.3) / 2 * 2.0, 1e-6);
    assert_near(pull1(w[1].c, "v1"), 1 - (0.9 + 1.1) / 2 * 2.0, 1e-6);

    /* The queue is empty: the two workers must work together. */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, train_thread, &w[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        assert_sr_ok(w[i].rc);
    }
    assert_int_equal(global_step(w[1].c), 2);
    assert_near(pull1(w[1].c, "v0"), 0 - 2 * (0.1 + 0.3) / 2 * 2.0, 1e-6);
    assert_near(pull1(w[1].c, "v1"), 1 - 2 * (0.9 + 1.1) / 2 * 2.0, 1e-6);

    sr_client_stats s;
    assert_sr_ok(sr_client_stats_get(w[0].c, &s));
    assert_int_equal(s.accepted, 6); /* rounds 1 and 3 x three variables */
    assert_int_equal(s.stale, 3);    /* round 2 */
    assert_int_equal(s.duplicate, 0);

    for (int i = 0; i < 2; i++) {
        sr_client_close(w[i].c);
    }
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

static void
test_seed_three_workers_one_backup(void **state)
{
    sr_harness h;
    worker     w[3];
    pthread_t  t0, t1;
    (void)state;

    sr_harness_init(&h, "seed3");
    start(&h, w, 3, "3");
    assert_int_equal(global_step(w[1].c), 0);
    assert_int_equal(sr_client_local_step(w[1].c), 0);

    /* Workers 0 and 2 finish first: their average is applied. */
    assert_sr_ok(train(&w[0]));
    assert_sr_ok(train(&w[2]));
    assert_int_equal(global_step(w[1].c), 1);
    assert_near(pull1(w[1].c, "v0"), 0 - (0.1 + 0.5) / 2 * 2.0, 1e-6);
    assert_near(pull1(w[1].c, "v1"), 1 - (0.9 + 1.3) / 2 * 2.0, 1e-6);

    /* Worker 1 is late: its gradients are stale and dropped. */
    assert_sr_ok(train(&w[1]));
    sr_client_stats s;
    assert_sr_ok(sr_client_stats_get(w[1].c, &s));
    assert_int_equal(s.stale, 3);
    assert_int_equal(s.accepted, 0);

    /* Local steps are still 0: these rounds are dropped too. */
    assert_sr_ok(train(&w[0]));
    assert_sr_ok(train(&w[1]));
    assert_sr_ok(train(&w[2]));
    assert_int_equal(global_step(w[1].c), 1);
    assert_int_equal(sr_client_local_step(w[1].c), 1);

    /* Worker 0 alone cannot finish the step. */
    assert_int_equal(pthread_create(&t0, NULL, train_thread, &w[0]), 0);
    assert_true(sr_test_wait_until(pushed, &w[0], 20000));
    assert_int_equal(global_step(w[1].c), 1);
    assert_int_equal(pthread_create(&t1, NULL, train_thread, &w[1]), 0);
    pthread_join(t1, NULL);
    assert_sr_ok(w[1].rc);
    pthread_join(t0, NULL);
    assert_sr_ok(w[0].rc);

    assert_int_equal(global_step(w[1].c), 2);
    assert_near(pull1(w[1].c, "v0"), -0.6 - (0.1 + 0.3) / 2 * 2.0, 1e-6);
    assert_near(pull1(w[1].c, "v1"), -1.2 - (0.9 + 1.1) / 2 * 2.0, 1e-6);

    for (int i = 0; i < 3; i++) {
        sr_client_close(w[i].c);
    }
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_two_workers),
        cmocka_unit_test(test_seed_three_workers_one_backup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
