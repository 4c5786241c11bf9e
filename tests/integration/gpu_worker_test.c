/*
 * The worker path of gpu/ on the host backend, end to end: 2 workers with
 * G = 3 local replicas each average their replicas' gradients on the node
 * and push; the coordinator (R = 2) averages the two pushes, so one SGD step
 * at learning rate 1 moves w by exactly minus the mean of the 6 replica
 * gradients.  Then sr_gpu_pull_broadcast gives every local replica the value.
 */
#include "sr_test.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "syncrep/syncrep.h"
#include "syncrep/worker_gpu.h"

#define G 3
#define N 5

typedef struct {
    sr_harness *h;
    int         task;
    int         rc;
    double      pulled[G][N];
    uint64_t    launches;
} worker;

static int
step_applied(void *arg)
{
    int64_t gs = 0;
    return sr_client_global_step(arg, &gs) == 0 && gs >= 1;
}

static void *
run(void *arg)
{
    worker        *w = arg;
    sr_client     *c = NULL;
    sr_gpu        *g = NULL;
    sr_gpu_options o;
    const int64_t  shape[1] = {N};
    const double   zeros[N] = {0};
    double         grad[G][N], pinned[N];
    void          *bufs[G];

    memset(&o, 0, sizeof(o));
    o.backend = SR_GPU_HOST;
    o.ndev = G;
    c = sr_harness_client(w->h, w->task);
    if ((w->rc = sr_gpu_open(&g, &o)) != 0 ||
        (w->rc = sr_client_declare(c, "w", SR_FLOAT64, 1, shape, w->task == 0 ? zeros : NULL)) ||
        (w->rc = sr_client_ready(c)) != 0) {
        goto out;
    }
    for (int r = 0; r < G; r++) {
        for (int k = 0; k < N; k++) {
            /* Replica r of worker t: 3 (3t + r + 1) (k + 1), multiples of G. */
            grad[r][k] = 3.0 * (3 * w->task + r + 1) * (k + 1);
        }
        bufs[r] = grad[r];
    }
    if ((w->rc = sr_gpu_push_average(g, c, "w", bufs, N, SR_FLOAT64, pinned, sizeof(pinned))) ||
        (w->rc = sr_client_step(c)) != 0) {
        goto out;
    }
    /* The init token let this worker through; the other may not have pushed. */
    if (!sr_test_wait_until(step_applied, c, 20000)) {
        w->rc = SR_ETIMEDOUT;
        goto out;
    }
    for (int r = 0; r < G; r++) {
        memset(w->pulled[r], 0xff, sizeof(w->pulled[r]));
        bufs[r] = w->pulled[r];
    }
    w->rc = sr_gpu_pull_broadcast(g, c, "w", bufs, N, SR_FLOAT64, pinned, sizeof(pinned));
    sr_gpu_stats st;
    sr_gpu_stats_get(g, &st);
    w->launches = st.launches;
out:
    if (w->rc != 0) {
        fprintf(stderr, "worker %d: %s / %s\n", w->task, sr_client_error(c),
                g ? sr_gpu_error(g) : "");
    }
    sr_gpu_close(g);
    sr_client_close(c);
    return NULL;
}

static void
test_gpu_worker_two_workers_three_replicas_average_of_six(void **state)
{
    sr_harness h;
    worker     w[2];
    pthread_t  t[2];
    (void)state;

    sr_harness_init(&h, "gpuw");
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "1.0", NULL);
    for (int i = 0; i < 2; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].h = &h;
        w[i].task = i;
        assert_int_equal(pthread_create(&t[i], NULL, run, &w[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        assert_sr_ok(w[i].rc);
        assert_true(w[i].launches > 0);
    }
    /* The mean of 3 (1..6) (k + 1) over the six replicas is 10.5 (k + 1). */
    for (int i = 0; i < 2; i++) {
        for (int r = 0; r < G; r++) {
            for (int k = 0; k < N; k++) {
                assert_near(w[i].pulled[r][k], -10.5 * (k + 1), 1e-12);
            }
        }
    }
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_worker_two_workers_three_replicas_average_of_six),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
