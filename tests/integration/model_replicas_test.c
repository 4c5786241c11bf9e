/*
 * The model API with backup replicas and with fewer workers than replicas
 * (issue 23): R = 1 of N = 2 (exact values whichever push a step takes),
 * N < R (each pack's step takes ceil(R / N) gradients of each task, as the
 * store's step log shows), and backup replicas over two packs, each pack
 * averaging one replica set (replayed from the step log, bit for bit).
 */
#include "sr_test.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model_fixture.h"
#include "store/store.h"
#include "syncrep/syncrep.h"

/* Backup replicas (R = 1, N = 2): each step takes the first push of a
 * round; both tasks push the same gradients, so the values are exact
 * whichever it is. */
static void *
train_same(void *arg)
{
    worker     *w = arg;
    grads       g;
    const void *gp[NT];
    void       *vp[NT];

    grads_of(0, &g);
    pointers(w, &g, gp, vp);
    w->rc = sr_client_model_pull(w->c, vp);
    while (w->rc == 0 && sr_client_local_step(w->c) < w->until) {
        w->rc = sr_client_model_step(w->c, gp, vp);
    }
    if (w->rc == 0) {
        w->rc = sr_client_model_pull(w->c, vp);
    }
    return NULL;
}

static void
test_model_backup_replicas(void **state)
{
    sr_harness h;
    worker     w[2];
    pthread_t  th[2];
    (void)state;

    sr_harness_init(&h, "model-backup");
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--total-replicas", "2", "--learning-rate",
                     "0.5", "--max-steps", "5", NULL);
    open_worker(&h, &w[0], 0, 0);
    open_worker(&h, &w[1], 1, 0);
    assert_sr_ok(sr_client_ready(w[0].c));
    assert_sr_ok(sr_client_ready(w[1].c));
    for (int k = 0; k < 2; k++) {
        w[k].until = 100; /* --max-steps ends it: SR_EDONE */
        assert_int_equal(pthread_create(&th[k], NULL, train_same, &w[k]), 0);
    }
    for (int k = 0; k < 2; k++) {
        pthread_join(th[k], NULL);
        assert_int_equal(w[k].rc, SR_EDONE);
    }
    {
        float x[6];
        grads g;
        grads_of(0, &g);
        assert_sr_ok(sr_client_pull(w[0].c, "layer.w", x, sizeof(x)));
        for (int i = 0; i < 6; i++) {
            float v = w0[i];
            for (int s = 0; s < 5; s++) {
                v -= 0.5f * g.gw[i];
            }
            assert_true(x[i] == v);
        }
    }
    for (int k = 0; k < 2; k++) {
        sr_client_close(w[k].c);
    }
    sr_harness_fini(&h);
}

typedef struct {
    sr_store_contrib *log;
    size_t            nlog;
    int64_t           steps;
} job_log;

static void
read_job(const sr_harness *h, job_log *j)
{
    sr_store     *st;
    sr_store_opts so = {.readonly = 1};
    sr_store_info info;

    assert_sr_ok(sr_store_open(h->store, &so, &st));
    assert_sr_ok(sr_store_get_info(st, &info));
    j->steps = info.global_step;
    assert_sr_ok(sr_store_read_log(st, 0, info.global_step, &j->log, &j->nlog));
    sr_store_close(st);
}

/* The store id of the pack that holds tensor `name`. */
static int64_t
pack_of(const sr_harness *h, const char *name)
{
    sr_store        *st;
    sr_store_opts    so = {.readonly = 1};
    sr_store_member *m;
    sr_store_var    *v;
    size_t           nm, nv;
    int64_t          id = -1;

    assert_sr_ok(sr_store_open(h->store, &so, &st));
    assert_sr_ok(sr_store_list_members(st, &m, &nm));
    assert_sr_ok(sr_store_list_vars(st, &v, &nv));
    for (size_t i = 0; i < nm; i++) {
        for (size_t k = 0; strcmp(m[i].name, name) == 0 && k < nv; k++) {
            id = strcmp(v[k].name, m[i].pack) == 0 ? v[k].id : id;
        }
    }
    free(m);
    free(v);
    sr_store_close(st);
    assert_true(id >= 0);
    return id;
}

/* The tasks of pack `id`'s contributions at step s (count returned), each
 * from the step the gradient was computed at. */
static int
tasks_at(const job_log *j, int64_t id, int64_t s, int32_t *tasks, int cap)
{
    int n = 0;
    for (size_t k = 0; k < j->nlog; k++) {
        if (j->log[k].step == s && j->log[k].var_id == id) {
            assert_true(n < cap);
            assert_true(j->log[k].local_step == s);
            tasks[n++] = j->log[k].task_index;
        }
    }
    return n;
}

/* N < R (R = 4 of N = 2, DESIGN.md): a replica computes several batches a
 * step.  Each pack's step takes ceil(R / N) = 2 gradients of each task, as
 * the step log shows, and their mean: the values of the R = 2 job, exact
 * (the gradients are exact in binary, so the sum of four over 4 is the sum
 * of two over 2). */
static void
test_model_fewer_workers_than_replicas(void **state)
{
    sr_harness h;
    worker     w[2];
    job_log    j;
    (void)state;

    sr_harness_init(&h, "model-nlr");
    sr_harness_start(&h, "--replicas-to-aggregate", "4", "--total-replicas", "2", "--learning-rate",
                     "0.5", "--step-log", NULL);
    open_worker(&h, &w[0], 0, 0);
    open_worker(&h, &w[1], 1, 1);
    assert_sr_ok(sr_client_ready(w[0].c));
    assert_sr_ok(sr_client_ready(w[1].c));
    run_pair(&h, w, 3);
    expect_values(&w[0], 3);
    expect_values(&w[1], 3);
    for (int k = 0; k < 2; k++) {
        sr_client_close(w[k].c);
    }
    assert_int_equal(sr_harness_stop(&h), 0);
    read_job(&h, &j);
    assert_int_equal(j.steps, 3);
    for (int64_t s = 0; s < j.steps; s++) {
        const char *in[] = {"layer.w", "scale"}; /* the float32 and the float64 pack */
        for (int p = 0; p < 2; p++) {
            int32_t t[8];
            int     n = tasks_at(&j, pack_of(&h, in[p]), s, t, 8), per[2] = {0, 0};
            assert_int_equal(n, 4);
            for (int k = 0; k < n; k++) {
                per[t[k]]++;
            }
            assert_int_equal(per[0], 2);
            assert_int_equal(per[1], 2);
        }
    }
    free(j.log);
    sr_harness_fini(&h);
}

/* Backup replicas over two packs (R = 2 of N = 3, three workers whose
 * gradients differ): each pack's step takes the first two tasks that push
 * it, the packs of one step maybe different pairs.  Replayed from the step
 * log, the float32 pack's two tensors (layer.w, layer.b) move by the mean
 * of its pair, the float64 one (scale) by its own pack's pair: bit for bit
 * the pulled values, so every tensor of a pack averaged one replica set. */
static void
test_model_backup_replicas_two_packs(void **state)
{
    sr_harness h;
    worker     w[3];
    pthread_t  th[3];
    job_log    j;
    grads      g[3];
    float      xw[6], xb[3];
    double     xs = s0;
    (void)state;

    sr_harness_init(&h, "model-backup2");
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--total-replicas", "3", "--learning-rate",
                     "0.5", "--max-steps", "6", "--step-log", NULL);
    for (int k = 0; k < 3; k++) {
        open_worker(&h, &w[k], k, k == 1);
        grads_of(k, &g[k]);
    }
    for (int k = 0; k < 3; k++) {
        assert_sr_ok(sr_client_ready(w[k].c));
    }
    for (int k = 0; k < 3; k++) {
        w[k].until = 100; /* --max-steps ends it: SR_EDONE */
        assert_int_equal(pthread_create(&th[k], NULL, train, &w[k]), 0);
    }
    for (int k = 0; k < 3; k++) {
        pthread_join(th[k], NULL);
        assert_int_equal(w[k].rc, SR_EDONE);
    }
    float  pw[6], pb[3];
    double ps;
    assert_sr_ok(sr_client_pull(w[0].c, "layer.w", pw, sizeof(pw)));
    assert_sr_ok(sr_client_pull(w[0].c, "layer.b", pb, sizeof(pb)));
    assert_sr_ok(sr_client_pull(w[0].c, "scale", &ps, sizeof(ps)));
    for (int k = 0; k < 3; k++) {
        sr_client_close(w[k].c);
    }
    assert_int_equal(sr_harness_stop(&h), 0);

    read_job(&h, &j);
    assert_int_equal(j.steps, 6);
    int64_t f32 = pack_of(&h, "layer.w"), f64 = pack_of(&h, "scale");
    assert_int_equal(pack_of(&h, "layer.b"), f32);
    assert_true(f32 != f64);
    memcpy(xw, w0, sizeof(xw));
    memcpy(xb, b0, sizeof(xb));
    for (int64_t s = 0; s < j.steps; s++) {
        int32_t a[4], b[4];
        assert_int_equal(tasks_at(&j, f32, s, a, 4), 2);
        assert_int_equal(tasks_at(&j, f64, s, b, 4), 2);
        assert_true(a[0] != a[1] && b[0] != b[1]); /* R replicas are R tasks */
        for (int i = 0; i < 6; i++) {
            xw[i] -= 0.5f * ((g[a[0]].gw[i] + g[a[1]].gw[i]) / 2.0f);
        }
        for (int i = 0; i < 3; i++) {
            xb[i] -= 0.5f * ((g[a[0]].gb[i] + g[a[1]].gb[i]) / 2.0f);
        }
        xs -= 0.5 * ((g[b[0]].gs + g[b[1]].gs) / 2.0);
    }
    assert_memory_equal(pw, xw, sizeof(xw));
    assert_memory_equal(pb, xb, sizeof(xb));
    assert_true(ps == xs);
    free(j.log);
    sr_harness_fini(&h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_backup_replicas),
        cmocka_unit_test(test_model_fewer_workers_than_replicas),
        cmocka_unit_test(test_model_backup_replicas_two_packs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
