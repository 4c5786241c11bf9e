/*
 * What the coordinator reports: `syncrep status` (JSON and the human
 * form), the WAL checkpoints and commits it counts, the async commit
 * interval seen through STATUS and a restart, and the warning for two
 * workers under one task index.  docs/protocol.md, "STATUS (9)".
 */
#include "sr_test.h"

#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "raw_peer.h"
#include "syncrep/syncrep.h"
#include "wire/wire.h"

static void
test_protocol_status_reports_workers_and_counts(void **state)
{
    sr_harness   h;
    sr_client   *chief = proto_setup(&h, "status", "1");
    const double g = 1.0;
    char         cmd[1200], out[8192];
    FILE        *p;
    size_t       n;
    (void)state;

    assert_sr_ok(sr_client_push(chief, "x", &g, sizeof(g))); /* accepted: step 1 */
    assert_sr_ok(sr_client_push(chief, "x", &g, sizeof(g))); /* stale: still local 0 */
    assert_sr_ok(sr_client_flush(chief)); /* both answered before we ask another socket */
    assert_int_equal(sr_harness_status(&h, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "\"global_step\":1"));
    assert_non_null(strstr(out, "\"replicas_to_aggregate\":1"));
    assert_non_null(strstr(out, "\"task_index\":0"));
    assert_non_null(strstr(out, "\"accepted\":1,\"stale\":1,\"duplicate\":0"));
    /* The human form names the columns. */
    snprintf(cmd, sizeof(cmd), "%s status --connect %s", sr_test_syncrep_bin(), h.endpoint);
    p = popen(cmd, "r");
    n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    assert_int_equal(pclose(p), 0);
    assert_non_null(strstr(out, "global step 1"));
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

/* Wait until STATUS shows `key` at least `least` (the last text in out). */
typedef struct {
    sr_harness *h;
    const char *key;
    long long   least;
    char        out[8192];
} status_wait;

static int
status_reached(void *arg)
{
    status_wait *w = arg;
    return sr_harness_status(w->h, w->out, sizeof(w->out)) == 0 &&
           sr_harness_json_num(w->out, w->key) >= w->least;
}

/* A coordinator (R = 1, plus the option pairs a1 v1, a2 v2) and its chief,
 * which declares x = 10 and makes n steps of gradient 1 with push_step. */
static sr_client *
start_and_step(sr_harness *h, const char *tag, const char *a1, const char *v1, const char *a2,
               const char *v2, int n)
{
    const double g = 1.0, x0 = 10.0;
    sr_harness_init(h, tag);
    sr_harness_start(h, "--replicas-to-aggregate", "1", "--learning-rate", "1.0", a1, v1, a2, v2,
                     NULL);
    sr_client *c = sr_harness_client(h, 0);
    assert_sr_ok(sr_client_declare(c, "x", SR_FLOAT64, 0, NULL, &x0));
    assert_sr_ok(sr_client_ready(c));
    assert_sr_ok(sr_client_step(c));
    for (int i = 1; i <= n; i++) {
        assert_sr_ok(sr_client_push_step(c, "x", &g, sizeof(g)));
    }
    return c;
}

/* Start the (stopped) coordinator again on its store, check that the chief
 * pulls x == want, stop it and clean up. */
static void
restart_expect_x(sr_harness *h, double want)
{
    const double x0 = 10.0;
    sr_harness_start(h, "--replicas-to-aggregate", "1", "--learning-rate", "1.0", NULL);
    sr_client *c = sr_harness_client(h, 0);
    assert_sr_ok(sr_client_declare(c, "x", SR_FLOAT64, 0, NULL, &x0));
    assert_true(proto_pull_x(c) == want);
    sr_client_close(c);
    assert_int_equal(sr_harness_stop(h), 0);
    sr_harness_fini(h);
}

/* --wal-limit-kib 64: the store's WAL fills every few steps.  By default its
 * thread copies it (STATUS and the shutdown log say so) and the committed
 * steps survive a restart; with --wal-checkpoint inline the commits do it. */
static void
test_protocol_wal_checkpoints(void **state)
{
    (void)state;

    for (int inl = 0; inl <= 1; inl++) {
        sr_harness  h;
        status_wait w = {.h = &h, .key = "\"passes\":", .least = 1};
        sr_client  *c = start_and_step(&h, inl ? "walinline" : "walthread", "--wal-limit-kib", "64",
                                       "--wal-checkpoint", inl ? "inline" : "thread", 40);
        if (inl) {
            assert_int_equal(sr_harness_status(&h, w.out, sizeof(w.out)), 0);
            assert_non_null(strstr(w.out, "\"wal_checkpoints\":{\"thread\":false,\"passes\":0,"));
            assert_true(sr_harness_json_num(w.out, "\"inline\":") >= 1);
        } else {
            /* The thread's pass ends on its own time. */
            assert_int_equal(sr_test_wait_until(status_reached, &w, 20000), 1);
            assert_non_null(strstr(w.out, "\"wal_checkpoints\":{\"thread\":true,"));
        }
        assert_int_equal(sr_harness_json_num(w.out, "\"failures\":"), 0);
        /* Every step was committed (--commit sync), each commit timed. */
        const char *cm = strstr(w.out, "\"commits\":{");
        assert_non_null(cm);
        assert_true(sr_harness_json_num(cm, "\"count\":") >= 40);
        assert_int_equal(sr_harness_json_num(cm, "\"failures\":"), 0);
        assert_null(strstr(cm, "\"max_ms\":0.000"));
        sr_client_close(c);
        assert_int_equal(sr_harness_stop(&h), 0);
        assert_int_equal(sr_harness_log_count(&h, inl ? "COORD-WAL-CKPT inline passes=0"
                                                      : "COORD-WAL-CKPT thread passes="),
                         1);
        assert_int_equal(sr_harness_log_count(&h, "COORD-COMMITS count="), 1);
        restart_expect_x(&h, 10.0 - 40 * 1.0); /* every committed step is there */
    }
}

/* --commit async with --commit-interval-ms: the writer commits at most that
 * often, so steps run ahead of the commits; once the job is idle the last
 * step is committed all the same, and survives a restart. */
static void
test_protocol_async_commit_interval(void **state)
{
    sr_harness  h;
    status_wait w = {.h = &h, .key = "\"committed_step\":", .least = 30};
    (void)state;

    sr_client *c =
        start_and_step(&h, "asyncint", "--commit", "async", "--commit-interval-ms", "300", 30);
    assert_int_equal(sr_test_wait_until(status_reached, &w, 20000), 1);
    assert_int_equal(sr_harness_json_num(w.out, "\"committed_step\":"), 30);
    assert_int_equal(sr_harness_json_num(w.out, "\"global_step\":"), 30);
    /* Steps in between went into the next commit: fewer commits than steps
     * (30 steps would have to take 300 ms each to need 30). */
    const char *cm = strstr(w.out, "\"commits\":{");
    assert_non_null(cm);
    assert_in_range(sr_harness_json_num(cm, "\"count\":"), 1, 29);
    sr_client_close(c);
    sr_harness_kill9(&h); /* no shutdown commit: what is stored is what the writer did */
    restart_expect_x(&h, 10.0 - 30 * 1.0);
}

typedef struct {
    sr_harness *h;
    sr_client  *talk[2];
} shared_arg;

/* The older clients talk (a PING each); has the coordinator warned of a
 * shared task index? */
static int
task_shared_logged(void *arg)
{
    shared_arg *a = arg;
    int64_t     gs;
    for (int i = 0; i < 2; i++) {
        assert_sr_ok(sr_client_global_step(a->talk[i], &gs));
    }
    return sr_harness_log_count(a->h, "COORD-TASK-SHARED") > 0;
}

/* Two workers started with the same task index and both active: the
 * coordinator warns (their pushes would count as two replicas), once.  A
 * worker restarted under its index (the old client said BYE) is not warned
 * about. */
static void
test_protocol_two_workers_one_task_index_warned(void **state)
{
    sr_harness h;
    sr_client *chief = proto_setup(&h, "shared", "1");
    shared_arg a = {&h, {NULL, NULL}};
    (void)state;

    sr_client *old2 = sr_harness_client(&h, 2);
    sr_client_close(old2); /* a restart: the old one leaves */
    a.talk[1] = sr_harness_client(&h, 2);
    a.talk[0] = sr_harness_client(&h, 1);
    sr_client *twin = sr_harness_client(&h, 1); /* task 1 twice, both alive */
    assert_int_equal(sr_test_wait_until(task_shared_logged, &a, 15000), 1);
    assert_int_equal(sr_harness_log_count(&h, "COORD-TASK-SHARED task=1 "), 1);
    assert_int_equal(sr_harness_log_count(&h, "COORD-TASK-SHARED task=2 "), 0);
    sr_client_close(twin);
    sr_client_close(a.talk[0]);
    sr_client_close(a.talk[1]);
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protocol_status_reports_workers_and_counts),
        cmocka_unit_test(test_protocol_wal_checkpoints),
        cmocka_unit_test(test_protocol_async_commit_interval),
        cmocka_unit_test(test_protocol_two_workers_one_task_index_warned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
