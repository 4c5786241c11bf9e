/*
 * The model as the unit of a step (issue 23): sr_client_declare_model and
 * sr_client_model_step against a real coordinator.  The packs are an
 * implementation detail; what is checked is what a user sees: every tensor
 * trains as the per-variable API would (exact values), keeps its name
 * (pull by name, the store's members), survives restarts of the
 * coordinator and of the chief, and a changed tensor list is refused with
 * a message naming the tensor.  Also with a worker process killed (-9) and
 * restarted mid-training, with fewer workers than replicas (N < R), and
 * with backup replicas over two packs, each averaging one replica set
 * (judged against the store's step log).
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
#include "store/store.h"
#include "syncrep/syncrep.h"

/* The model: trainable float32 w[2,3] and b[3], trainable float64 s (a
 * scalar), not trainable float32 mean[4] and int64 count[2]. */
enum { T_W, T_B, T_S, T_MEAN, T_COUNT, NT };

static const int64_t shape_w[] = {2, 3}, shape_b[] = {3}, shape_mean[] = {4}, shape_count[] = {2};
static const float   w0[6] = {1, 2, 3, 4, 5, 6}, b0[3] = {0.5f, -0.5f, 1}, mean0[4] = {9, 8, 7, 6};
static const double  s0 = 2.0;
static const int64_t count0[2] = {11, 12};

static void
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

/* Task k's gradients (exact in binary): w: (k+1) * 0.25 * (i+1), b: k+1,
 * s: 0.5 * (k+1). */
typedef struct {
    float  gw[6], gb[3];
    double gs;
} grads;

static void
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

typedef struct {
    sr_client *c;
    int        task;
    int        reversed; /* declared its tensors in reverse order */
    int64_t    until;    /* train until the local step reaches it */
    int64_t    at;       /* its local step after the last round (atomic) */
    int        rc;
    float      w[6], b[3], mean[4];
    double     s;
    int64_t    count[2];
} worker;

/* The gradient and value pointers of w in its declared order. */
static void
pointers(worker *w, const grads *g, const void **gp, void **vp)
{
    const void *gt[NT] = {g->gw, g->gb, &g->gs, NULL, NULL};
    void       *vt[NT] = {w->w, w->b, &w->s, w->mean, w->count};
    for (int i = 0; i < NT; i++) {
        gp[i] = gt[w->reversed ? NT - 1 - i : i];
        vp[i] = vt[w->reversed ? NT - 1 - i : i];
    }
}

static void *
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

static void
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
static void
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
static void
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
main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--trainer") == 0) {
        return trainer_main(argv[2], atoi(argv[3]));
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_trains_exactly),
        cmocka_unit_test(test_model_restarts_and_changed_lists),
        cmocka_unit_test(test_model_backup_replicas),
        cmocka_unit_test(test_model_worker_kill9_restart),
        cmocka_unit_test(test_model_fewer_workers_than_replicas),
        cmocka_unit_test(test_model_backup_replicas_two_packs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
