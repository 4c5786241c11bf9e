/*
 * The model as the unit of a step (issue 23): sr_client_declare_model and
 * sr_client_model_step against a real coordinator.  The packs are an
 * implementation detail; what is checked is what a user sees: every tensor
 * trains as the per-variable API would (exact values), keeps its name
 * (pull by name, the store's members), survives restarts of the
 * coordinator and of the chief, and a changed tensor list is refused with
 * a message naming the tensor.  Also with a worker process killed (-9) and
 * restarted mid-training.  Backup replicas and N < R: model_replicas_test.c.
 */
#include "sr_test.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "model_fixture.h"
#include "store/store.h"
#include "syncrep/syncrep.h"

/* Run `syncrep store ARGS...` (NULL-terminated, at most 6), output into
 * log; its exit code. */
static int
run_store_cli(const char *log, const char *const *args)
{
    const char *argv[10] = {sr_test_syncrep_bin(), "store"};
    size_t      n = 2;
    for (size_t i = 0; args[i] != NULL && n + 1 < 10; i++) {
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    pid_t pid = sr_test_spawn((char *const *)argv, log);
    assert_true(pid > 0);
    int ws = sr_test_reap(pid, 30000);
    assert_true(ws >= 0 && WIFEXITED(ws));
    return WEXITSTATUS(ws);
}

#define PYTHON "/usr/bin/python3"

/* numpy reads the npz: exactly the tensors given (name dtype shape hex of
 * the bytes, four arguments each), nothing else (no pack). */
static const char check_npz_py[] =
    "import sys\n"
    "import numpy as np\n"
    "z = np.load(sys.argv[1])\n"
    "a = sys.argv[2:]\n"
    "names = set()\n"
    "for i in range(0, len(a), 4):\n"
    "    n, dt, sh, hx = a[i:i + 4]\n"
    "    x = z[n]\n"
    "    assert x.dtype == np.dtype(dt), (n, x.dtype)\n"
    "    assert list(x.shape) == [int(d) for d in sh.split(',') if d], (n, x.shape)\n"
    "    assert x.tobytes().hex() == hx, (n, x)\n"
    "    names.add(n)\n"
    "assert set(z.files) == names, (sorted(z.files), sorted(names))\n";

static void
hex_of(const void *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) {
        sprintf(out + 2 * i, "%02x", ((const unsigned char *)p)[i]);
    }
}

/* Issue 23: `store inspect` names each tensor, `store export --format npz`
 * writes each under its name with its dtype, shape and exact bytes (the
 * values the workers trained to), never the packs. */
static void
check_store_cli_names(const sr_harness *h, const worker *w)
{
    char log[700], npz[700], hx[NT][200];
    snprintf(log, sizeof(log), "%s/cli.log", h->dir);
    snprintf(npz, sizeof(npz), "%s/model.npz", h->dir);

    const char *a1[] = {"inspect", h->store, NULL};
    assert_int_equal(run_store_cli(log, a1), 0);
    assert_true(sr_harness_file_count(log, "model tensors (5"));
    assert_true(sr_harness_file_count(log, "bn.running_mean"));
    const char *a2[] = {"inspect", h->store, "--json", NULL};
    assert_int_equal(run_store_cli(log, a2), 0);
    assert_true(sr_harness_file_count(log, "{\"name\":\"layer.w\",\"dtype\":\"float32\","
                                           "\"shape\":[2,3],\"bytes\":24,\"trainable\":true,"));
    const char *a3[] = {"export", h->store, "--format", "npz", npz, NULL};
    assert_int_equal(run_store_cli(log, a3), 0);
    if (access(PYTHON, X_OK) != 0) {
        fprintf(stderr, "%s missing: %s not validated\n", PYTHON, npz);
        return;
    }
    hex_of(w->w, sizeof(w->w), hx[0]);
    hex_of(w->b, sizeof(w->b), hx[1]);
    hex_of(&w->s, sizeof(w->s), hx[2]);
    hex_of(w->mean, sizeof(w->mean), hx[3]);
    hex_of(w->count, sizeof(w->count), hx[4]);
    char *const argv[] = {PYTHON,
                          "-c",
                          (char *)check_npz_py,
                          npz,
                          "layer.w",
                          "float32",
                          "2,3",
                          hx[0],
                          "layer.b",
                          "float32",
                          "3",
                          hx[1],
                          "scale",
                          "float64",
                          "",
                          hx[2],
                          "bn.running_mean",
                          "float32",
                          "4",
                          hx[3],
                          "bn.count",
                          "int64",
                          "2",
                          hx[4],
                          NULL};
    pid_t       pid = sr_test_spawn(argv, log);
    assert_true(pid > 0);
    int ws = sr_test_reap(pid, 60000);
    if (!(WIFEXITED(ws) && WEXITSTATUS(ws) == 0)) {
        fprintf(stderr, "numpy check of %s failed, see %s\n", npz, log);
        fail();
    }
}

/* Every tensor trains as the per-variable calls would, bit for bit; a pull
 * of one tensor by name works; the store names every tensor (members) and
 * keeps them in three packs (float32 trainable, float64 trainable, the not
 * trainable float32 and int64 ones apart). */
static void
test_model_trains_exactly(void **state)
{
    sr_harness       h;
    worker           w[2];
    float            b[3];
    sr_store        *st;
    sr_store_opts    so = {.readonly = 1};
    sr_store_member *m;
    size_t           n;
    (void)state;

    sr_harness_init(&h, "model");
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "0.5", "--init-tokens",
                     "0", NULL);
    open_worker(&h, &w[0], 0, 0);
    open_worker(&h, &w[1], 1, 1); /* another order: the same layout */
    assert_sr_ok(sr_client_ready(w[0].c));
    assert_sr_ok(sr_client_ready(w[1].c));
    run_pair(&h, w, 4);
    expect_values(&w[0], 4);
    expect_values(&w[1], 4);
    assert_sr_ok(sr_client_pull(w[0].c, "layer.b", b, sizeof(b)));
    assert_memory_equal(b, w[0].b, sizeof(b));
    /* A pack's tensor takes no per-variable push. */
    assert_int_not_equal(sr_client_push(w[0].c, "layer.b", b, sizeof(b)), 0);
    for (int k = 0; k < 2; k++) {
        sr_client_close(w[k].c);
    }
    assert_int_equal(sr_harness_stop(&h), 0);

    assert_sr_ok(sr_store_open(h.store, &so, &st));
    assert_sr_ok(sr_store_list_members(st, &m, &n));
    assert_int_equal(n, NT); /* every tensor is a member, by its name */
    sr_store_close(st);
    free(m);
    check_store_cli_names(&h, &w[0]);
    sr_harness_fini(&h);
}

/* Restarts: the coordinator killed (-9) between rounds and again, the
 * chief's client replaced by a new one that lists the tensors in reverse:
 * training goes on from the stored layout to the exact values.  Then a
 * declaration that lacks a tensor, changes one's shape, or adds one to the
 * ready model is refused, naming it. */
static void
test_model_restarts_and_changed_lists(void **state)
{
    sr_harness     h;
    worker         w[2];
    sr_tensor_spec t[NT + 1];
    sr_client     *c;
    int64_t        bad_shape[] = {3, 2}, one = 1;
    (void)state;

    sr_harness_init(&h, "model-restart");
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "0.5", "--init-tokens",
                     "0", NULL);
    open_worker(&h, &w[0], 0, 0);
    open_worker(&h, &w[1], 1, 0);
    assert_sr_ok(sr_client_ready(w[0].c));
    assert_sr_ok(sr_client_ready(w[1].c));
    run_pair(&h, w, 2);
    sr_harness_kill9(&h);
    sr_harness_start(&h, "--replicas-to-aggregate", "2", NULL);
    run_pair(&h, w, 4);
    expect_values(&w[0], 4);

    /* The chief restarts with the tensors in reverse order. */
    sr_client_close(w[0].c);
    open_worker(&h, &w[0], 0, 1);
    assert_sr_ok(sr_client_ready(w[0].c));
    sr_harness_kill9(&h);
    sr_harness_start(&h, "--replicas-to-aggregate", "2", NULL);
    run_pair(&h, w, 6);
    expect_values(&w[0], 6);
    expect_values(&w[1], 6);
    {
        float  wv[6];
        double sv;
        assert_sr_ok(sr_client_pull(w[1].c, "layer.w", wv, sizeof(wv)));
        assert_sr_ok(sr_client_pull(w[1].c, "scale", &sv, sizeof(sv)));
        assert_memory_equal(wv, w[1].w, sizeof(wv));
        assert_true(sv == w[1].s);
    }

    /* A list that lacks a stored tensor. */
    c = sr_harness_client(&h, 0);
    specs(t, 0);
    assert_int_equal(sr_client_declare_model(c, NT - 1, t), SR_EINVAL);
    assert_non_null(strstr(sr_client_error(c), "bn.count"));
    /* A changed shape. */
    t[T_W].shape = bad_shape;
    assert_int_equal(sr_client_declare_model(c, NT, t), SR_EEXIST);
    assert_non_null(strstr(sr_client_error(c), "layer.w"));
    /* A new tensor on the ready model. */
    specs(t, 0);
    t[NT] = (sr_tensor_spec){"extra", SR_FLOAT32, 1, &one, NULL, 0};
    assert_int_equal(sr_client_declare_model(c, NT + 1, t), SR_EINVAL);
    assert_non_null(strstr(sr_client_error(c), "--allow-new-variables"));
    /* A name of the coordinator's. */
    t[NT].name = SR_STORE_PACK_PREFIX "9";
    assert_int_equal(sr_client_declare_model(c, NT + 1, t), SR_EINVAL);
    sr_client_close(c);
    for (int k = 0; k < 2; k++) {
        sr_client_close(w[k].c);
    }
    sr_harness_fini(&h);
}

/* The trainer process (this program run as `model_test --trainer ENDPOINT
 * TASK`): task TASK's worker, its tensors in reverse order, training until
 * it is killed.  A process of its own, exec'd rather than only forked: a
 * forked copy of the multi-threaded test could not start its client's
 * threads (ThreadSanitizer refuses, and POSIX allows only async-signal-safe
 * calls there). */
static int
trainer_main(const char *endpoint, int task)
{
    sr_client_options o;
    sr_client        *c;
    sr_tensor_spec    t[NT];
    worker            w;
    grads             g;
    const void       *gp[NT];
    void             *vp[NT];

    memset(&o, 0, sizeof(o));
    o.endpoint = endpoint;
    o.task_index = task;
    o.timeout_ms = 60000;
    memset(&w, 0, sizeof(w));
    w.reversed = 1;
    specs(t, 1);
    grads_of(task, &g);
    pointers(&w, &g, gp, vp);
    if (sr_client_open(&c, &o) != 0 || sr_client_declare_model(c, NT, t) != 0 ||
        sr_client_ready(c) != 0 || sr_client_model_pull(c, vp) != 0) {
        return 3;
    }
    while (sr_client_model_step(c, gp, vp) == 0) {
    }
    return 0;
}

static pid_t
spawn_trainer(sr_harness *h, int task)
{
    char  self[4096], tbuf[16], log[1200];
    char *argv[] = {self, "--trainer", h->endpoint, tbuf, NULL};

    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    assert_true(n > 0);
    self[n] = '\0';
    snprintf(tbuf, sizeof(tbuf), "%d", task);
    snprintf(log, sizeof(log), "%s/trainer-%d.log", h->dir, task);
    pid_t pid = sr_test_spawn(argv, log);
    assert_true(pid > 0);
    return pid;
}

typedef struct {
    worker *w;
    int64_t beyond;
} at_wait;

static int
chief_beyond(void *arg)
{
    at_wait *a = arg;
    return __atomic_load_n(&a->w->at, __ATOMIC_ACQUIRE) > a->beyond;
}

/* Task 1 is a process killed (-9) twice while the chief (a thread) trains
 * with it, and restarted each time: the round it was in is lost or half
 * pushed (a pack's push of the open step that arrived is not taken again:
 * beyond its share), and the values after 12 steps are exact. */
static void
test_model_worker_kill9_restart(void **state)
{
    sr_harness h;
    worker     w;
    pthread_t  th;
    pid_t      pid;
    (void)state;

    sr_harness_init(&h, "model-wkill");
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "0.5", "--init-tokens",
                     "0", NULL);
    open_worker(&h, &w, 0, 0);
    assert_sr_ok(sr_client_ready(w.c));
    pid = spawn_trainer(&h, 1);
    w.until = 12;
    assert_int_equal(pthread_create(&th, NULL, train, &w), 0);
    for (int64_t beyond = 3; beyond <= 7; beyond += 4) {
        at_wait a = {&w, beyond};
        assert_true(sr_test_wait_until(chief_beyond, &a, 30000));
        sr_test_kill(pid, SIGKILL);
        sr_test_reap(pid, 10000);
        pid = spawn_trainer(&h, 1);
    }
    pthread_join(th, NULL);
    assert_sr_ok(w.rc);
    sr_test_kill(pid, SIGKILL);
    sr_test_reap(pid, 10000);
    expect_values(&w, 12);
    sr_client_close(w.c);
    sr_harness_fini(&h);
}

/* The store's step log and each pack's id, by a member's name. */
int
main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--trainer") == 0) {
        return trainer_main(argv[2], atoi(argv[3]));
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_trains_exactly),
        cmocka_unit_test(test_model_restarts_and_changed_lists),
        cmocka_unit_test(test_model_worker_kill9_restart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
