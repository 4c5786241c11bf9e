/*
 * Integrity against well-formed messages with hostile values, and R
 * replicas as R tasks (issue 20, items 1 and 4), against a real
 * coordinator process:
 * - only the job's workers are admitted (task index 0..N-1, the same in
 *   every request of a client), the client table is bounded and what a
 *   departed client leaves is reclaimed; nothing refused stops a commit;
 * - a step averages R gradients of R distinct tasks: with a worker dead
 *   for good the others wait instead of filling its place;
 * - --deterministic-sum sums each step in task order.
 */
#include "sr_test.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "raw_peer.h"
#include "store/store.h"
#include "syncrep/syncrep.h"
#include "wire/wire.h"

/* ---- helpers ------------------------------------------------------------ */

static long long
status_num(sr_harness *h, const char *key)
{
    char out[16384];
    assert_int_equal(sr_harness_status(h, out, sizeof(out)), 0);
    return sr_harness_json_num(out, key);
}

/* A worker training the scalar "x" (gradient 1) until its local step
 * reaches `until`. */
typedef struct {
    sr_client *c;
    int64_t    until;
    int        rc;
    int        task; /* train_mixed's gradient depends on it */
} trainer;

static void *
train(void *arg)
{
    trainer     *t = arg;
    const double g = 1.0;
    while (t->rc == 0 && sr_client_local_step(t->c) < t->until) {
        if ((t->rc = sr_client_push(t->c, "x", &g, sizeof(g))) == 0) {
            t->rc = sr_client_step(t->c);
        }
    }
    return NULL;
}

static void
train_all(trainer *t, int n)
{
    pthread_t th[8];
    for (int i = 0; i < n; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, train, &t[i]), 0);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        assert_sr_ok(t[i].rc);
    }
}

/* Workers 0..n-1 of a model of one float64 scalar x = 0. */
static void
open_workers(sr_harness *h, sr_client **c, int n)
{
    const double x0 = 0.0;
    for (int i = 0; i < n; i++) {
        c[i] = sr_harness_client(h, i);
        assert_sr_ok(sr_client_declare(c[i], "x", SR_FLOAT64, 0, NULL, i == 0 ? &x0 : NULL));
    }
    assert_sr_ok(sr_client_ready(c[0]));
    for (int i = 1; i < n; i++) {
        assert_sr_ok(sr_client_ready(c[i]));
    }
}

/* The step log of the store, read after the coordinator stopped. */
static sr_store_contrib *
read_log(const sr_harness *h, int64_t *steps, size_t *n)
{
    sr_store         *st;
    sr_store_opts     o = {.readonly = 1};
    sr_store_info     info;
    sr_store_contrib *log = NULL;

    assert_sr_ok(sr_store_open(h->store, &o, &st));
    assert_sr_ok(sr_store_get_info(st, &info));
    assert_sr_ok(sr_store_read_log(st, 0, info.global_step, &log, n));
    *steps = info.global_step;
    sr_store_close(st);
    return log;
}

/* ---- admission ------------------------------------------------------------ */

/* A HELLO with task index -1 (what tools send), one beyond the job and a
 * client that changes its task index are refused with a clear reply, and
 * change nothing: the workers' steps are committed as if they had not
 * come, and the store keeps rows of the job's tasks only.  (Before: the
 * task -1 record made every later commit fail.) */
static void
test_integrity_outsiders_refused_and_commits_go_on(void **state)
{
    sr_harness       h;
    sr_client       *c[2];
    trainer          t[2];
    raw_peer         p;
    sr_store        *st;
    sr_store_opts    o = {.readonly = 1};
    sr_store_info    info;
    sr_store_worker *w = NULL;
    size_t           nw = 0;
    (void)state;

    sr_harness_init(&h, "admit");
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "1.0", NULL);
    open_workers(&h, c, 2);

    raw_open(&p, h.endpoint, 0x7001);
    assert_int_equal(raw_ask(&p, SR_MSG_HELLO, -1), SR_EINVAL);
    assert_int_equal(raw_ask(&p, SR_MSG_HELLO, 2), SR_EINVAL);
    assert_int_equal(raw_ask(&p, SR_MSG_HELLO, INT32_MAX), SR_EINVAL);
    assert_int_equal(raw_ask(&p, SR_MSG_HELLO, 1), SR_OK);    /* a worker's index: admitted */
    assert_int_equal(raw_ask(&p, SR_MSG_PING, 0), SR_EPROTO); /* ...and kept */
    assert_int_equal(raw_ask(&p, SR_MSG_TOKEN, 5), SR_EPROTO);
    assert_int_equal(raw_ask(&p, SR_MSG_BYE, 1), SR_OK);
    raw_close(&p);
    assert_true(sr_harness_log_count(&h, "COORD-REFUSED") >= 1);

    for (int i = 0; i < 2; i++) {
        t[i] = (trainer){.c = c[i], .until = 6};
    }
    train_all(t, 2);
    assert_true(status_num(&h, "\"committed_step\":") >= 5);
    assert_int_equal(status_num(&h, "\"refused\":"), 5);
    assert_int_equal(sr_harness_log_count(&h, "COORD-COMMIT-FAIL"), 0);
    for (int i = 0; i < 2; i++) {
        sr_client_close(c[i]);
    }
    assert_int_equal(sr_harness_stop(&h), 0);

    assert_sr_ok(sr_store_open(h.store, &o, &st));
    assert_sr_ok(sr_store_get_info(st, &info));
    assert_true(info.global_step >= 5);
    assert_sr_ok(sr_store_list_workers(st, &w, &nw));
    assert_int_equal(nw, 2);
    for (size_t i = 0; i < nw; i++) {
        assert_true(w[i].task_index == 0 || w[i].task_index == 1);
    }
    free(w);
    sr_store_close(st);
    sr_harness_fini(&h);
}

/* At most --max-clients clients at once: one more is refused (SR_ELIMIT),
 * and gets in once a client that left (BYE) is reclaimed.  Thousands of
 * HELLOs leave no more than that behind. */
static void
test_integrity_client_table_bounded_and_reclaimed(void **state)
{
    sr_harness h;
    raw_peer   p[4], extra;
    (void)state;

    sr_harness_init(&h, "clients");
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "1.0", "--max-clients",
                     "4", NULL);
    for (int i = 0; i < 4; i++) {
        raw_open(&p[i], h.endpoint, 0x8000 + (uint64_t)i);
        assert_int_equal(raw_ask(&p[i], SR_MSG_HELLO, i % 2), SR_OK);
    }
    raw_open(&extra, h.endpoint, 0x9000);
    for (int i = 0; i < 2000; i++) { /* each HELLO a new client */
        extra.client_id = 0x9000 + (uint64_t)i;
        assert_int_equal(raw_ask(&extra, SR_MSG_HELLO, 1), SR_ELIMIT);
    }
    assert_int_equal(status_num(&h, "\"clients\":"), 4);
    assert_int_equal(raw_ask(&p[3], SR_MSG_BYE, 1), SR_OK);
    assert_int_equal(raw_ask(&extra, SR_MSG_HELLO, 1), SR_OK);
    assert_int_equal(status_num(&h, "\"clients\":"), 4);
    assert_int_equal(status_num(&h, "\"refused\":"), 2000);
    for (int i = 0; i < 4; i++) {
        raw_close(&p[i]);
    }
    raw_close(&extra);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

/* ---- R replicas are R tasks ------------------------------------------------ */

typedef struct {
    sr_harness *h;
    int         tasks;
} waiting_arg;

/* Every live worker has pushed beyond its share and waits for a token. */
static int
all_waiting(void *arg)
{
    waiting_arg *a = arg;
    char         out[16384];
    const char  *at = out;
    int          n = 0;

    if (sr_harness_status(a->h, out, sizeof(out)) != 0) {
        return 0;
    }
    while ((at = strstr(at, "\"waiting_for_token\":true")) != NULL) {
        const char *share = strstr(at, "\"beyond_share\":");
        n += share != NULL && strtoll(share + 15, NULL, 10) > 0;
        at++;
    }
    return n == a->tasks;
}

/* R = N = 3 and task 2 not there: tasks 0 and 1 take the init tokens,
 * push again, and wait; no step is taken with one of them twice (before:
 * a survivor's second gradient filled the missing task's place every
 * step).  Task 2 arrives and training goes on, every step from three
 * distinct tasks. */
static void
test_integrity_dead_worker_not_replaced_by_a_live_one(void **state)
{
    sr_harness        h;
    sr_client        *c[3];
    trainer           t[3];
    pthread_t         th[2];
    waiting_arg       wa;
    sr_store_contrib *log;
    size_t            n;
    int64_t           steps;
    (void)state;

    sr_harness_init(&h, "rtasks");
    sr_harness_start(&h, "--replicas-to-aggregate", "3", "--learning-rate", "1.0", "--step-log",
                     NULL);
    open_workers(&h, c, 2);
    for (int i = 0; i < 2; i++) {
        t[i] = (trainer){.c = c[i], .until = 4};
        assert_int_equal(pthread_create(&th[i], NULL, train, &t[i]), 0);
    }
    wa = (waiting_arg){&h, 2};
    assert_int_equal(sr_test_wait_until(all_waiting, &wa, 15000), 1);
    assert_int_equal(status_num(&h, "\"global_step\":"), 0);
    char out[16384];
    assert_int_equal(sr_harness_status(&h, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "\"step_waits_for\":[2]")); /* the task that is not there */

    c[2] = sr_harness_client(&h, 2);
    assert_sr_ok(sr_client_declare(c[2], "x", SR_FLOAT64, 0, NULL, NULL));
    assert_sr_ok(sr_client_ready(c[2]));
    t[2] = (trainer){.c = c[2], .until = 4};
    train(&t[2]);
    assert_sr_ok(t[2].rc);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        assert_sr_ok(t[i].rc);
    }
    for (int i = 0; i < 3; i++) {
        sr_client_close(c[i]);
    }
    assert_int_equal(sr_harness_stop(&h), 0);

    log = read_log(&h, &steps, &n);
    assert_true(steps >= 3);
    assert_int_equal(n, 3 * (size_t)steps);
    for (size_t i = 0; i < n; i += 3) {
        int seen = 0;
        for (size_t k = i; k < i + 3; k++) {
            assert_int_equal(log[k].step, log[i].step);
            seen |= 1 << log[k].task_index;
        }
        assert_int_equal(seen, 7); /* tasks 0, 1 and 2 */
    }
    free(log);
    sr_harness_fini(&h);
}

/* N = 3, R = 2 and the backup replica (task 2) gone for good: the two
 * others train, each step from both; the token a step meant for task 2 is
 * not left to pile up in the queue (nobody may take it but a new worker,
 * for a stale round). */
static void
test_integrity_dead_backup_leaves_no_pile_of_tokens(void **state)
{
    sr_harness        h;
    sr_client        *c[2];
    trainer           t[2];
    sr_store_contrib *log;
    size_t            n;
    int64_t           steps;
    (void)state;

    sr_harness_init(&h, "backup");
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--total-replicas", "3", "--learning-rate",
                     "1.0", "--step-log", NULL);
    open_workers(&h, c, 2);
    for (int i = 0; i < 2; i++) {
        t[i] = (trainer){.c = c[i], .until = 60};
    }
    train_all(t, 2);
    assert_true(status_num(&h, "\"global_step\":") >= 59);
    assert_true(status_num(&h, "\"tokens_available\":") <= 6);
    for (int i = 0; i < 2; i++) {
        sr_client_close(c[i]);
    }
    assert_int_equal(sr_harness_stop(&h), 0);
    log = read_log(&h, &steps, &n);
    assert_int_equal(n, 2 * (size_t)steps);
    for (size_t i = 0; i < n; i += 2) {
        assert_int_not_equal(log[i].task_index, log[i + 1].task_index);
    }
    free(log);
    sr_harness_fini(&h);
}

/* --deterministic-sum: every step's contributions are summed, and logged,
 * in task order, whatever order they came in. */
static void
test_integrity_deterministic_sum_in_task_order(void **state)
{
    sr_harness        h;
    sr_client        *c[3];
    trainer           t[3];
    sr_store_contrib *log;
    size_t            n;
    int64_t           steps;
    double            x;
    (void)state;

    sr_harness_init(&h, "detsum");
    sr_harness_start(&h, "--replicas-to-aggregate", "3", "--learning-rate", "1.0", "--step-log",
                     "--deterministic-sum", NULL);
    open_workers(&h, c, 3);
    for (int i = 0; i < 3; i++) {
        t[i] = (trainer){.c = c[i], .until = 8};
    }
    train_all(t, 3);
    char out[16384];
    assert_int_equal(sr_harness_status(&h, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "\"deterministic_sum\":true"));
    assert_sr_ok(sr_client_pull(c[0], "x", &x, sizeof(x)));
    for (int i = 0; i < 3; i++) {
        sr_client_close(c[i]);
    }
    assert_int_equal(sr_harness_stop(&h), 0);

    log = read_log(&h, &steps, &n);
    assert_true(x == -(double)steps);
    assert_int_equal(n, 3 * (size_t)steps);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(log[i].task_index, (int)(i % 3));
        assert_int_equal(log[i].pos, (int)(i % 3));
    }
    free(log);
    sr_harness_fini(&h);
}

/* A worker whose gradient depends on its task and on the value it pulled,
 * with bits that make the sum's order matter: (g0 + 1e16) - 1e16 is 0,
 * (1e16 - 1e16) + g0 is g0. */
static void *
train_mixed(void *arg)
{
    trainer *t = arg;
    int      task = t->task;
    double   x;

    while (t->rc == 0 && sr_client_local_step(t->c) < t->until) {
        if ((t->rc = sr_client_pull(t->c, "x", &x, sizeof(x))) != 0) {
            break;
        }
        const double g = task == 1 ? 1e16 : task == 2 ? -1e16 : x / 3.0 + 0.1;
        if ((t->rc = sr_client_push(t->c, "x", &g, sizeof(g))) == 0) {
            t->rc = sr_client_step(t->c);
        }
    }
    return NULL;
}

/* One job of 3 workers for 12 steps from x = 0, --init-tokens 0 (no wasted
 * round: each step takes exactly the gradients of its value); x at the end. */
static double
reproducible_run(const char *tag)
{
    sr_harness h;
    sr_client *c[3];
    trainer    t[3];
    pthread_t  th[3];
    double     x;

    sr_harness_init(&h, tag);
    sr_harness_start(&h, "--replicas-to-aggregate", "3", "--learning-rate", "0.5", "--init-tokens",
                     "0", "--deterministic-sum", NULL);
    open_workers(&h, c, 3);
    for (int i = 0; i < 3; i++) {
        t[i] = (trainer){.c = c[i], .until = 12, .task = i};
        assert_int_equal(pthread_create(&th[i], NULL, train_mixed, &t[i]), 0);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        assert_sr_ok(t[i].rc);
    }
    assert_sr_ok(sr_client_pull(c[0], "x", &x, sizeof(x)));
    for (int i = 0; i < 3; i++) {
        sr_client_close(c[i]);
    }
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
    return x;
}

/* Two runs of the same job with --init-tokens 0 --deterministic-sum end on
 * the same bits, whatever the arrival order of each step's gradients. */
static void
test_integrity_deterministic_runs_are_bit_identical(void **state)
{
    (void)state;
    double a = reproducible_run("repro1"), b = reproducible_run("repro2");
    assert_memory_equal(&a, &b, sizeof(a));
}

typedef struct {
    sr_client *c;
    int        push_rc, step_rc;
} nan_pusher;

static void *
push_nan(void *arg)
{
    nan_pusher  *p = arg;
    const double nan_g = 0.0 / 0.0;
    p->push_rc = sr_client_push(p->c, "x", &nan_g, sizeof(nan_g));
    p->step_rc = sr_client_step(p->c);
    return NULL;
}

/* R = N = 2 and worker 1's gradient holds a NaN (--nonfinite reject): it
 * is refused, and the pusher learns it from the call that carries the
 * answer (SR_ENONFINITE), but it takes its task's place in the step, so the
 * step is taken with worker 0's gradient alone instead of waiting forever
 * for one that cannot come (before: both workers blocked in
 * sr_client_step, nothing logged).  Logged once, counted in STATUS. */
static void
test_integrity_nonfinite_gradient_never_stalls_the_step(void **state)
{
    sr_harness   h;
    sr_client   *c[2];
    pthread_t    t;
    nan_pusher   p;
    const double g = 2.0;
    double       x;
    (void)state;

    sr_harness_init(&h, "nonfinite");
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "1.0", "--init-tokens",
                     "0", NULL);
    open_workers(&h, c, 2);
    p = (nan_pusher){c[1], 1, 1};
    assert_int_equal(pthread_create(&t, NULL, push_nan, &p), 0);
    assert_sr_ok(sr_client_push(c[0], "x", &g, sizeof(g)));
    assert_sr_ok(sr_client_step(c[0]));
    pthread_join(t, NULL);
    assert_sr_ok(p.push_rc); /* pipelined: the answer comes with the step */
    assert_int_equal(p.step_rc, SR_ENONFINITE);
    assert_int_equal(sr_client_local_step(c[0]), 1);
    assert_sr_ok(sr_client_pull(c[0], "x", &x, sizeof(x)));
    assert_true(x == 0.0 - 1.0 * (2.0 / 1.0)); /* worker 0's gradient, averaged over 1 */
    assert_int_equal(status_num(&h, "\"nonfinite\":"), 1);
    assert_int_equal(sr_harness_log_count(&h, "COORD-NONFINITE step=0 task=1"), 1);
    /* Worker 1's step call took its token too, and reported the refusal:
     * it goes on at step 1 like the other. */
    assert_int_equal(sr_client_local_step(c[1]), 1);
    for (int i = 0; i < 2; i++) {
        sr_client_close(c[i]);
    }
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_integrity_outsiders_refused_and_commits_go_on),
        cmocka_unit_test(test_integrity_client_table_bounded_and_reclaimed),
        cmocka_unit_test(test_integrity_dead_worker_not_replaced_by_a_live_one),
        cmocka_unit_test(test_integrity_dead_backup_leaves_no_pile_of_tokens),
        cmocka_unit_test(test_integrity_nonfinite_gradient_never_stalls_the_step),
        cmocka_unit_test(test_integrity_deterministic_sum_in_task_order),
        cmocka_unit_test(test_integrity_deterministic_runs_are_bit_identical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
