/*
 * The model of the model API's integration tests (model_fixture.h): its
 * tensors, each task's gradients, a worker training it in a thread, and
 * the values the per-variable API's arithmetic gives.
 */
#include "sr_test.h"

#include <pthread.h>
#include <string.h>

#include "model_fixture.h"

static const int64_t shape_w[] = {2, 3}, shape_b[] = {3}, shape_mean[] = {4}, shape_count[] = {2};
const float          w0[6] = {1, 2, 3, 4, 5, 6}, b0[3] = {0.5f, -0.5f, 1}, mean0[4] = {9, 8, 7, 6};
const double         s0 = 2.0;
const int64_t        count0[2] = {11, 12};

void
specs(sr_tensor_spec t[NT], int reversed)
{
    sr_tensor_spec all[NT] = {
        {"layer.w", SR_FLOAT32, 2, shape_w, w0, 0},
        {"layer.b", SR_FLOAT32, 1, shape_b, b0, 0},
        {"scale", SR_FLOAT64, 0, NULL, &s0, 0},
        {"bn.running_mean", SR_FLOAT32, 1, shape_mean, mean0, SR_DECLARE_NOT_TRAINABLE},
        {"bn.count", SR_INT64, 1, shape_count, count0, 0},
    };
    for (int i = 0; i < NT; i++) {
        t[i] = all[reversed ? NT - 1 - i : i];
    }
}

void
grads_of(int k, grads *g)
{
    for (int i = 0; i < 6; i++) {
        g->gw[i] = (float)(k + 1) * 0.25f * (float)(i + 1);
    }
    for (int i = 0; i < 3; i++) {
        g->gb[i] = (float)(k + 1);
    }
    g->gs = 0.5 * (k + 1);
}

/* The gradient and value pointers of w in its declared order. */
void
pointers(worker *w, const grads *g, const void **gp, void **vp)
{
    const void *gt[NT] = {g->gw, g->gb, &g->gs, NULL, NULL};
    void       *vt[NT] = {w->w, w->b, &w->s, w->mean, w->count};
    for (int i = 0; i < NT; i++) {
        gp[i] = gt[w->reversed ? NT - 1 - i : i];
        vp[i] = vt[w->reversed ? NT - 1 - i : i];
    }
}

void *
train(void *arg)
{
    worker     *w = arg;
    grads       g;
    const void *gp[NT];
    void       *vp[NT];

    grads_of(w->task, &g);
    pointers(w, &g, gp, vp);
    w->rc = sr_client_model_pull(w->c, vp);
    while (w->rc == 0 && sr_client_local_step(w->c) < w->until) {
        w->rc = sr_client_model_step(w->c, gp, vp);
        __atomic_store_n(&w->at, sr_client_local_step(w->c), __ATOMIC_RELEASE);
    }
    return NULL;
}

void
open_worker(sr_harness *h, worker *w, int task, int reversed)
{
    sr_tensor_spec t[NT];

    memset(w, 0, sizeof(*w));
    w->task = task;
    w->reversed = reversed;
    w->c = sr_harness_client(h, task);
    specs(t, reversed);
    assert_sr_ok(sr_client_declare_model(w->c, NT, t));
}

/* Two workers train `steps` rounds together (R = N = 2). */
void
run_pair(sr_harness *h, worker *w, int64_t until)
{
    pthread_t th[2];
    for (int k = 0; k < 2; k++) {
        w[k].until = until;
        assert_int_equal(pthread_create(&th[k], NULL, train, &w[k]), 0);
    }
    for (int k = 0; k < 2; k++) {
        pthread_join(th[k], NULL);
        assert_sr_ok(w[k].rc);
    }
}

/* The values after `steps` SGD steps (lr 0.5) of the two tasks' mean
 * gradient: the per-variable API's arithmetic, in float32 as the apply. */
void
expect_values(const worker *w, int steps)
{
    grads g0, g1;
    grads_of(0, &g0);
    grads_of(1, &g1);
    for (int i = 0; i < 6; i++) {
        float x = w0[i];
        for (int s = 0; s < steps; s++) {
            x -= 0.5f * ((g0.gw[i] + g1.gw[i]) / 2.0f);
        }
        assert_true(w->w[i] == x);
    }
    for (int i = 0; i < 3; i++) {
        float x = b0[i];
        for (int s = 0; s < steps; s++) {
            x -= 0.5f * ((g0.gb[i] + g1.gb[i]) / 2.0f);
        }
        assert_true(w->b[i] == x);
    }
    assert_true(w->s == s0 - 0.5 * 0.75 * steps); /* (0.5 + 1.0) / 2 a step */
    assert_memory_equal(w->mean, mean0, sizeof(mean0));
    assert_memory_equal(w->count, count0, sizeof(count0));
}
