/*
 * kill -9 of the coordinator between steps and in the middle of a step;
 * it restarts on the same store and training continues, with no step lost
 * after its commit and none applied twice.  The model is one float64 x = 100
 * with every gradient 1.0 and SGD at 0.5, so after global step g exactly
 * x = 100 - 0.5 g; the step log must hold exactly R contributions per step,
 * each computed at that step.
 */
#include "sr_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "harness.h"
#include "store/store.h"
#include "syncrep/syncrep.h"

/* Workers train until their local step reaches `until`: with anonymous
 * tokens a fast worker may take a slow one's token and contribute twice to a
 * step (as in TensorFlow), so a fixed number of rounds per worker could end
 * with one worker waiting for a partner that has stopped. */
typedef struct {
    sr_client  *c;
    const char *name; /* a float64 variable of n elements; gradient[i] = i + 1 */
    int         n;
    int64_t     until;
    int         rc;
    char        err[512];
} loop_arg;

#define LOOP_MAX_N 8

static void *
loop(void *p)
{
    loop_arg *a = p;
    double    v[LOOP_MAX_N], g[LOOP_MAX_N];
    size_t    bytes = (size_t)a->n * sizeof(double);

    for (int i = 0; i < a->n; i++) {
        g[i] = (double)(i + 1);
    }
    for (int i = 0; sr_client_local_step(a->c) < a->until; i++) {
        if ((a->rc = sr_client_pull(a->c, a->name, v, bytes)) != 0 ||
            (a->rc = sr_client_push(a->c, a->name, g, bytes)) != 0 ||
            (a->rc = sr_client_step(a->c)) != 0) {
            snprintf(a->err, sizeof(a->err), "%s", sr_client_error(a->c));
            /* Say it now: the other worker may wait for this one forever. */
            fprintf(stderr, "worker failed in round %d: %s (%d)\n", i, a->err, a->rc);
            return NULL;
        }
    }
    return NULL;
}

/* Both workers train variable `name` (n float64) until `until`. */
static void
train_until(sr_client **c, const char *name, int n, int64_t until)
{
    pthread_t t[2];
    loop_arg  a[2];

    for (int i = 0; i < 2; i++) {
        memset(&a[i], 0, sizeof(a[i]));
        a[i].c = c[i];
        a[i].name = name;
        a[i].n = n;
        a[i].until = until;
        assert_int_equal(pthread_create(&t[i], NULL, loop, &a[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        if (a[i].rc != 0) {
            fprintf(stderr, "worker %d: %s\n", i, a[i].err);
        }
        assert_sr_ok(a[i].rc);
    }
}

/* The scalar x with gradient 1. */
static void
run_until(sr_client **c, int64_t until)
{
    train_until(c, "x", 1, until);
}

static int64_t
gstep(sr_client *c)
{
    int64_t g = -1;
    assert_sr_ok(sr_client_global_step(c, &g));
    return g;
}

/* Workers 0 and 1 of the scalar x = x0 (float64), the model ready. */
static void
open_x_pair(sr_harness *h, sr_client **c, double x0)
{
    for (int i = 0; i < 2; i++) {
        c[i] = sr_harness_client(h, i);
        assert_sr_ok(sr_client_declare(c[i], "x", SR_FLOAT64, 0, NULL, i == 0 ? &x0 : NULL));
    }
    assert_sr_ok(sr_client_ready(c[0]));
    assert_sr_ok(sr_client_ready(c[1]));
}

static void
start(sr_harness *h)
{
    sr_harness_start(h, "--replicas-to-aggregate", "2", "--learning-rate", "0.5", "--step-log",
                     NULL);
}

static void
test_restart_kill9_between_and_mid_step_loses_nothing(void **state)
{
    sr_harness h;
    sr_client *c[2];
    double     x0 = 100.0, x;
    int64_t    g1, g2, g3, gfinal;
    (void)state;

    sr_harness_init(&h, "restart");
    start(&h);
    open_x_pair(&h, c, x0);
    run_until(c, 5);
    g1 = gstep(c[0]);
    assert_true(g1 >= 5);

    /* Between steps: every applied step was committed before its tokens. */
    sr_harness_kill9(&h);
    start(&h);
    g2 = gstep(c[0]); /* the client resynchronises transparently */
    assert_int_equal(g2, g1);
    run_until(c, g1 + 5);
    g2 = gstep(c[0]);
    assert_true(g2 >= g1 + 5);

    /* Mid-step: one of the two gradients is in the accumulator. */
    const double g = 1.0;
    assert_sr_ok(sr_client_pull(c[0], "x", &x, sizeof(x)));
    assert_sr_ok(sr_client_push(c[0], "x", &g, sizeof(g)));
    assert_sr_ok(sr_client_flush(c[0]));
    sr_harness_kill9(&h);
    start(&h);
    g3 = gstep(c[1]);
    assert_int_equal(g3, g2); /* the half-done step left no trace */
    /* Worker 0's pending token request now completes at the restored step. */
    assert_sr_ok(sr_client_step(c[0]));
    assert_int_equal(sr_client_local_step(c[0]), g3);
    run_until(c, g3 + 5);
    gfinal = gstep(c[0]);
    assert_true(gfinal >= g3 + 5);

    assert_sr_ok(sr_client_pull(c[1], "x", &x, sizeof(x)));
    assert_true(x == 100.0 - 0.5 * (double)gfinal);

    sr_client_stats s;
    assert_sr_ok(sr_client_stats_get(c[0], &s));
    assert_true(s.resyncs >= 2);
    /* x is 8 bytes: the tokens carried it, and most pulls needed no round trip. */
    assert_true(s.pulls_cached > 0);
    for (int i = 0; i < 2; i++) {
        sr_client_close(c[i]);
    }
    assert_int_equal(sr_harness_stop(&h), 0);

    /* The store: the same state, and exactly R contributions per step, each
     * computed at the step it was applied in. */
    sr_store         *st;
    sr_store_opts     o;
    sr_store_info     info;
    sr_store_contrib *log = NULL;
    size_t            n = 0;
    memset(&o, 0, sizeof(o));
    o.readonly = 1;
    assert_sr_ok(sr_store_open(h.store, &o, &st));
    assert_sr_ok(sr_store_get_info(st, &info));
    assert_int_equal(info.global_step, gfinal);
    assert_int_equal(info.incarnation, 3);
    assert_sr_ok(sr_store_read_log(st, 0, gfinal, &log, &n));
    assert_int_equal(n, 2 * (size_t)gfinal);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(log[i].step, (int64_t)(i / 2));
        assert_int_equal(log[i].pos, (int32_t)(i % 2));
        assert_int_equal(log[i].local_step, log[i].step);
    }
    free(log);
    sr_store_close(st);
    sr_harness_fini(&h);
}

#define PV_N 8
_Static_assert(PV_N <= LOOP_MAX_N, "loop() holds at most LOOP_MAX_N elements");

/* The partition size may change between runs (with --reconfigure: it is
 * part of the job's recipe): a coordinator killed while
 * v = float64[8] was 4 partitions (16 bytes) comes back with 2 (32 bytes);
 * the clients learn the new layout from the new incarnation's HELLO, the
 * model stays exact, and the step log has each step's layout, R = 2 in
 * every partition. */
static void
test_restart_with_another_partition_size(void **state)
{
    sr_harness    h;
    sr_client    *c[2];
    const int64_t shape[1] = {PV_N};
    double        v0[PV_N], v[PV_N];
    int64_t       g1, gfinal;
    (void)state;

    for (int i = 0; i < PV_N; i++) {
        v0[i] = 1000.0 + i;
    }
    sr_harness_init(&h, "reparts");
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "0.5", "--step-log",
                     "--partition-bytes", "16", NULL);
    for (int i = 0; i < 2; i++) {
        c[i] = sr_harness_client(&h, i);
        assert_sr_ok(sr_client_declare(c[i], "v", SR_FLOAT64, 1, shape, i == 0 ? v0 : NULL));
    }
    assert_sr_ok(sr_client_ready(c[0]));
    assert_sr_ok(sr_client_ready(c[1]));
    train_until(c, "v", PV_N, 4);
    g1 = gstep(c[0]);
    sr_harness_kill9(&h);
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "0.5", "--step-log",
                     "--partition-bytes", "32", "--reconfigure", NULL);
    assert_int_equal(gstep(c[0]), g1);
    train_until(c, "v", PV_N, g1 + 4);
    gfinal = gstep(c[0]);
    assert_sr_ok(sr_client_pull(c[1], "v", v, sizeof(v)));
    for (int i = 0; i < PV_N; i++) {
        assert_true(v[i] == v0[i] - 0.5 * (double)(i + 1) * (double)gfinal);
    }
    for (int i = 0; i < 2; i++) {
        sr_client_close(c[i]);
    }
    assert_int_equal(sr_harness_stop(&h), 0);

    sr_store             *st;
    sr_store_opts         o = {.readonly = 1};
    sr_store_contrib     *log = NULL;
    sr_store_incarnation *incs = NULL;
    size_t                n = 0, ninc = 0;
    assert_sr_ok(sr_store_open(h.store, &o, &st));
    assert_sr_ok(sr_store_list_incarnations(st, &incs, &ninc));
    assert_int_equal(ninc, 2);
    assert_int_equal(incs[1].restored_step, g1);
    assert_sr_ok(sr_store_read_log(st, 0, gfinal, &log, &n));
    /* Steps before the restart: parts 0, 2, 4, 6; after: 0, 4; 2 rows each. */
    size_t want = 0;
    for (int64_t s = 0; s < gfinal; s++) {
        want += 2 * (s < g1 ? 4 : 2);
    }
    assert_int_equal(n, want);
    for (size_t i = 0; i < n; i++) {
        int64_t per = log[i].step < g1 ? 2 : 4; /* rows per partition */
        assert_int_equal(log[i].part % per, 0);
        assert_true(log[i].part < PV_N);
        assert_int_equal(log[i].local_step, log[i].step);
        /* ordered by (step, part, pos): pos alternates 0, 1 */
        assert_int_equal(log[i].pos, (int32_t)(i % 2));
    }
    free(log);
    free(incs);
    sr_store_close(st);
    sr_harness_fini(&h);
}

static int
task1_joined(void *arg)
{
    char out[8192];
    return sr_harness_status(arg, out, sizeof(out)) == 0 &&
           strstr(out, "\"task_index\":1,") != NULL;
}

static void *
ready_thread(void *arg)
{
    sr_client *c = arg;
    return (void *)(intptr_t)sr_client_ready(c);
}

/* A worker waiting for the chief while the coordinator restarts keeps
 * waiting, and is ready once the chief (who came later) is. */
static void
test_restart_while_worker_waits_for_chief(void **state)
{
    sr_harness h;
    sr_client *w, *chief;
    pthread_t  t;
    void      *ret;
    double     x0 = 7.0, x = 0;
    (void)state;

    sr_harness_init(&h, "waitchief");
    start(&h);
    w = sr_harness_client(&h, 1);
    assert_sr_ok(sr_client_declare(w, "x", SR_FLOAT64, 0, NULL, NULL));
    assert_int_equal(pthread_create(&t, NULL, ready_thread, w), 0);
    sr_harness_kill9(&h);
    start(&h);
    /* The worker finds the new coordinator (and resynchronises) before the
     * chief has declared anything. */
    assert_true(sr_test_wait_until(task1_joined, &h, 20000));
    chief = sr_harness_client(&h, 0);
    assert_sr_ok(sr_client_declare(chief, "x", SR_FLOAT64, 0, NULL, &x0));
    assert_sr_ok(sr_client_ready(chief));
    pthread_join(t, &ret);
    assert_int_equal((int)(intptr_t)ret, SR_OK);
    assert_sr_ok(sr_client_pull(w, "x", &x, sizeof(x)));
    assert_true(x == 7.0);
    sr_client_close(w);
    sr_client_close(chief);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

/* A coordinator (R = 2, --grace-ms 20000) stopping in the middle of a step:
 * the chief's gradient of step 0 is in, then SIGTERM. */
static void
stop_mid_step(sr_harness *h, const char *tag, sr_client *c[2])
{
    const double x0 = 1.0, g = 1.0;

    sr_harness_init(h, tag);
    sr_harness_start(h, "--replicas-to-aggregate", "2", "--learning-rate", "0.5", "--grace-ms",
                     "20000", NULL);
    open_x_pair(h, c, x0);
    assert_sr_ok(sr_client_push(c[0], "x", &g, sizeof(g))); /* 1 of 2 */
    assert_sr_ok(sr_client_flush(c[0]));                    /* ... and it arrived */
    kill(h->pid, SIGTERM);
}

/* Still serving during the grace period: worker 1's gradient completes the
 * step, which the coordinator commits before it exits 0.  The store's info
 * into *info. */
static void
finish_step_and_exit(sr_harness *h, sr_client *c[2], sr_store_info *info)
{
    const double  g = 1.0;
    sr_store     *st;
    sr_store_opts o;

    assert_sr_ok(sr_client_push(c[1], "x", &g, sizeof(g)));
    assert_sr_ok(sr_client_flush(c[1]));
    int ws = sr_harness_stop(h); /* already stopping: reaps it */
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    memset(&o, 0, sizeof(o));
    o.readonly = 1;
    assert_sr_ok(sr_store_open(h->store, &o, &st));
    assert_sr_ok(sr_store_get_info(st, info));
    assert_int_equal(info->global_step, 1);
    sr_store_close(st);
}

/* SIGTERM in the middle of a step: the coordinator waits (within its grace
 * period) for the step to complete, commits it, and exits 0. */
static void
test_restart_sigterm_finishes_the_step_in_progress(void **state)
{
    sr_harness    h;
    sr_client    *c[2];
    sr_store_info info;
    (void)state;

    stop_mid_step(&h, "sigterm", c);
    finish_step_and_exit(&h, c, &info);
    for (int i = 0; i < 2; i++) {
        sr_client_close(c[i]);
    }
    sr_harness_fini(&h);
}

/* Start `syncrep coordinator` on store at endpoint (R = 2; plus `opt val`
 * unless opt is NULL), wait for it to exit; its wait status.  Output into
 * log. */
static int
run_coordinator(const char *store, const char *endpoint, const char *log, const char *opt,
                const char *val)
{
    char *argv[] = {(char *)sr_test_syncrep_bin(),
                    "coordinator",
                    "--store",
                    (char *)store,
                    "--bind",
                    (char *)endpoint,
                    "--replicas-to-aggregate",
                    "2",
                    "--learning-rate",
                    "0.5",
                    (char *)opt,
                    (char *)val,
                    NULL};
    pid_t pid = sr_test_spawn(argv, log);
    assert_true(pid > 0);
    return sr_test_reap(pid, 20000);
}

/* One store, one coordinator: a second one started on the store while the
 * first still runs (here in its SIGTERM grace period, as a supervisor that
 * restarts it too early would) is refused at start, naming the holder, and
 * changes nothing; so is one on another store at the first one's ipc://
 * endpoint (ZeroMQ would have taken the endpoint over), or at a tcp:// port
 * in use (refused before its store is made); and so is a start
 * with --resume-from-step of a step that is not retained (the incarnation
 * is not even bumped).  Once the first is gone, however it went (SIGKILL
 * here), the store is free again. */
static void
test_restart_refused_starts_change_nothing(void **state)
{
    sr_harness    h;
    sr_client    *c[2];
    sr_store     *st;
    sr_store_opts o;
    sr_store_info info;
    char          log2[600], other[600], ep2[700], want[64];
    int           ws;
    (void)state;

    stop_mid_step(&h, "second", c);

    snprintf(log2, sizeof(log2), "%s/second.log", h.dir);
    sr_test_ipc_endpoint(h.dir, "second.sock", ep2, sizeof(ep2));
    ws = run_coordinator(h.store, ep2, log2, NULL, NULL);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
    snprintf(want, sizeof(want), "(pid %d holds", (int)h.pid);
    assert_true(sr_harness_file_count(log2, "is in use by another coordinator"));
    assert_true(sr_harness_file_count(log2, want));

    snprintf(other, sizeof(other), "%s/other.db", h.dir);
    ws = run_coordinator(other, h.endpoint, log2, NULL, NULL);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
    assert_true(sr_harness_file_count(log2, "another process is listening there"));
    assert_int_equal(access(other, F_OK), -1); /* refused before the store is made */

    /* A tcp:// port another process has bound (here: this test). */
    struct sockaddr_in sa;
    socklen_t          sl = sizeof(sa);
    char               tcp[64];
    int                ls = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(ls >= 0 && bind(ls, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(ls, 1) == 0);
    assert_int_equal(getsockname(ls, (struct sockaddr *)&sa, &sl), 0);
    snprintf(tcp, sizeof(tcp), "tcp://127.0.0.1:%d", (int)ntohs(sa.sin_port));
    ws = run_coordinator(other, tcp, log2, NULL, NULL);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
    assert_true(sr_harness_file_count(log2, "the port is in use by another process"));
    assert_int_equal(access(other, F_OK), -1);

    /* The first one still serves, finishes the step and exits cleanly. */
    finish_step_and_exit(&h, c, &info);
    assert_int_equal(info.incarnation, 1); /* the refused one never opened it */

    /* A step that is not retained: refused before anything is written. */
    ws = run_coordinator(h.store, h.endpoint, log2, "--resume-from-step", "7");
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
    assert_true(sr_harness_file_count(log2, "step 7 is not a retained checkpoint (retained: 0 1)"));
    /* A bind ZeroMQ refuses (a host name: not checked beforehand): refused
     * before the store counts an incarnation. */
    snprintf(tcp, sizeof(tcp), "tcp://localhost:%d", (int)ntohs(sa.sin_port));
    ws = run_coordinator(h.store, tcp, log2, NULL, NULL);
    close(ls);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
    assert_true(sr_harness_file_count(log2, "bind tcp://localhost:"));
    memset(&o, 0, sizeof(o));
    o.readonly = 1;
    assert_sr_ok(sr_store_open(h.store, &o, &st));
    assert_sr_ok(sr_store_get_info(st, &info));
    assert_int_equal(info.incarnation, 1);
    sr_store_close(st);

    /* Free again after a SIGKILL. */
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "0.5", NULL);
    sr_harness_kill9(&h);
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "0.5", NULL);
    int64_t gs = -1;
    assert_sr_ok(sr_client_global_step(c[0], &gs));
    assert_int_equal(gs, 1);
    assert_int_equal(sr_harness_stop(&h), 0);
    for (int i = 0; i < 2; i++) {
        sr_client_close(c[i]);
    }
    sr_harness_fini(&h);
}

static int
rollback_accepted(void *h)
{
    return sr_harness_log_count(h, "COORD-ROLLBACK-ACCEPTED") >= 1 &&
           sr_harness_log_count(h, "COORD-START ") >= 1;
}

/* A coordinator killed with its history in the -wal (a tiny model never
 * fills the WAL), the -wal then lost: the next start is refused, naming the
 * committed step and what it found, and leaves the store as it was;
 * --accept-rollback starts, and the store records the loss. */
static void
test_restart_after_lost_wal_refused_until_accepted(void **state)
{
    sr_harness h;
    sr_client *c[2];
    char       wal[700], log2[700];
    double     x0 = 100.0;
    (void)state;

    sr_harness_init(&h, "lostwal");
    start(&h);
    open_x_pair(&h, c, x0);
    run_until(c, 5);
    int64_t g = gstep(c[0]);
    sr_harness_kill9(&h);
    snprintf(wal, sizeof(wal), "%s-wal", h.store);
    assert_int_equal(unlink(wal), 0);

    snprintf(log2, sizeof(log2), "%s/refused.log", h.dir);
    int ws = run_coordinator(h.store, h.endpoint, log2, NULL, NULL);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
    assert_true(sr_harness_file_count(log2, "behind its mark"));
    assert_true(sr_harness_file_count(log2, "the -wal is missing"));
    char want[64];
    snprintf(want, sizeof(want), "says step %lld was committed", (long long)g);
    assert_true(sr_harness_file_count(log2, want));
    assert_int_equal(access(wal, F_OK), -1); /* left as it was */

    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "0.5",
                     "--accept-rollback", NULL);
    assert_true(sr_test_wait_until(rollback_accepted, &h, 20000));
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_store              *st;
    sr_store_opts          o = {.readonly = 1};
    sr_store_rollback_rec *r = NULL;
    size_t                 n = 0;
    assert_sr_ok(sr_store_open(h.store, &o, &st));
    assert_sr_ok(sr_store_list_rollbacks(st, &r, &n));
    assert_int_equal(n, 1);
    assert_int_equal(r[0].from_step, g);
    assert_int_equal(r[0].to_step, 0);
    free(r);
    sr_store_close(st);
    for (int i = 0; i < 2; i++) {
        sr_client_close(c[i]);
    }
    sr_harness_fini(&h);
}

/* Flip one byte of variable x's value as committed at `step` (SQLite
 * directly, behind the store's back: a disk's or an editor's damage). */
static void
flip_x_at(const char *store, int64_t step)
{
    sqlite3      *db = NULL;
    sqlite3_stmt *q = NULL;
    sqlite3_blob *b = NULL;
    uint8_t       byte;

    assert_int_equal(sqlite3_open_v2(store, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT c.data_id FROM chunk c JOIN tensor t ON t.id = "
                                        "c.tensor_id JOIN variable v ON v.id = t.var_id WHERE "
                                        "v.name = 'x' AND t.slot = '' AND c.step = ?",
                                        -1, &q, NULL),
                     SQLITE_OK);
    sqlite3_bind_int64(q, 1, step);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    int64_t id = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    assert_int_equal(sqlite3_blob_open(db, "main", "chunk_data", "data", id, 1, &b), SQLITE_OK);
    assert_int_equal(sqlite3_blob_read(b, &byte, 1, 7), SQLITE_OK);
    byte ^= 0x10; /* x's exponent: a different number, not a NaN */
    assert_int_equal(sqlite3_blob_write(b, &byte, 1, 7), SQLITE_OK);
    sqlite3_blob_close(b);
    assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

/* A flipped byte in the latest step: the coordinator refuses to start and
 * serve it, naming the chunk and the intact retained steps; started with
 * --resume-from-step on one of them it serves that step's exact value. */
static void
test_restart_corrupt_latest_step_refused_names_intact_steps(void **state)
{
    sr_harness h;
    sr_client *c[2];
    char       log2[700], want[160];
    double     x0 = 100.0, x;
    (void)state;

    sr_harness_init(&h, "corrupt");
    start(&h);
    open_x_pair(&h, c, x0);
    run_until(c, 5);
    for (int i = 0; i < 2; i++) {
        sr_client_close(c[i]);
    }
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_store     *st;
    sr_store_opts o = {.readonly = 1};
    sr_store_info info;
    assert_sr_ok(sr_store_open(h.store, &o, &st));
    assert_sr_ok(sr_store_get_info(st, &info));
    sr_store_close(st);
    int64_t g = info.global_step;
    assert_true(g >= 5);
    flip_x_at(h.store, g);

    snprintf(log2, sizeof(log2), "%s/refused.log", h.dir);
    int ws = run_coordinator(h.store, h.endpoint, log2, NULL, NULL);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
    assert_true(sr_harness_file_count(log2, "fails its checksum"));
    snprintf(want, sizeof(want), "intact retained steps: %lld,%lld ", (long long)(g - 2),
             (long long)(g - 1));
    assert_true(sr_harness_file_count(log2, want));

    snprintf(want, sizeof(want), "%lld", (long long)(g - 1));
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "0.5",
                     "--resume-from-step", want, NULL);
    c[0] = sr_harness_client(&h, 0);
    assert_sr_ok(sr_client_pull(c[0], "x", &x, sizeof(x)));
    assert_true(x == 100.0 - 0.5 * (double)(g - 1));
    sr_client_close(c[0]);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

/* Issue 22: --keep-every-steps E keeps the first committed step of every
 * window of E steps besides the last --keep-checkpoints, across a kill -9
 * and a restart that does not repeat the option (the store recorded it);
 * --resume-from-step to such an old step gives exactly that step's x. */
static void
test_restart_keep_every_steps_resume_from_old_step(void **state)
{
    sr_harness h;
    sr_client *c[2];
    double     x0 = 100.0, x;
    char       want[64];
    (void)state;

    sr_harness_init(&h, "keepevery");
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "0.5",
                     "--keep-checkpoints", "2", "--keep-every-steps", "5", NULL);
    open_x_pair(&h, c, x0);
    run_until(c, 12);
    assert_int_equal(sr_harness_log_count(&h, "keep_every_steps=5"), 1);
    sr_harness_kill9(&h);
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "0.5",
                     "--keep-checkpoints", "2", NULL);
    run_until(c, 24);
    assert_int_equal(sr_harness_log_count(&h, "keep_every_steps=5"), 2); /* recorded */
    sr_harness_kill9(&h);

    /* Every window of 5 steps older than the last two checkpoints kept one
     * step (its first commit), and no other. */
    int64_t      *ck = NULL;
    size_t        n = 0;
    sr_store     *st;
    sr_store_opts o = {.readonly = 1};
    assert_sr_ok(sr_store_open(h.store, &o, &st));
    assert_sr_ok(sr_store_list_checkpoints(st, &ck, &n));
    sr_store_close(st);
    assert_true(n >= 2 + 4);
    int64_t recent = ck[n - 2];
    assert_int_equal(ck[0], 0);
    for (size_t i = 0; i + 2 < n; i++) {
        assert_int_equal(ck[i] / 5, (int64_t)i); /* one per window, in order */
    }
    assert_int_equal(recent / 5 + 1 >= (int64_t)(n - 2), 1);
    int64_t back = ck[2]; /* the first of steps 10..14 */
    free(ck);

    for (int i = 0; i < 2; i++) {
        sr_client_close(c[i]);
    }
    snprintf(want, sizeof(want), "%lld", (long long)back);
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "0.5",
                     "--resume-from-step", want, NULL);
    open_x_pair(&h, c, x0);
    assert_sr_ok(sr_client_pull(c[0], "x", &x, sizeof(x)));
    if (x != 100.0 - 0.5 * (double)back) {
        fprintf(stderr, "x = %.17g at step %lld\n", x, (long long)back);
    }
    assert_true(x == 100.0 - 0.5 * (double)back);
    assert_int_equal(gstep(c[0]), back);
    /* Training goes on from there. */
    run_until(c, back + 3);
    assert_sr_ok(sr_client_pull(c[1], "x", &x, sizeof(x)));
    assert_true(x == 100.0 - 0.5 * (double)gstep(c[1]));
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
        cmocka_unit_test(test_restart_kill9_between_and_mid_step_loses_nothing),
        cmocka_unit_test(test_restart_while_worker_waits_for_chief),
        cmocka_unit_test(test_restart_sigterm_finishes_the_step_in_progress),
        cmocka_unit_test(test_restart_with_another_partition_size),
        cmocka_unit_test(test_restart_refused_starts_change_nothing),
        cmocka_unit_test(test_restart_after_lost_wal_refused_until_accepted),
        cmocka_unit_test(test_restart_corrupt_latest_step_refused_names_intact_steps),
        cmocka_unit_test(test_restart_keep_every_steps_resume_from_old_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
