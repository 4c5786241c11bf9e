/*
 * fashion_mnist_train: one worker of a synchronous data-parallel training
 * job on Fashion-MNIST, served by `syncrep coordinator`.  Each process trains
 * an MLP (784 -> 256 ReLU -> 10, softmax cross-entropy) on its own shard of
 * the training set in the loop  pull -> compute -> push -> step.  Task 0,
 * the chief, declares the model with seeded initial values (checked, not
 * re-initialised, when the store already holds it), evaluates test-set
 * accuracy every --eval-every steps and after a coordinator restart, and
 * stops the job's clock: it exits when the accuracy reaches the target or the
 * global step reaches --max-steps, writing --result-file.  Coordinator
 * restarts are invisible here except as a new incarnation: the client library
 * resynchronises inside the calls.  See docs/example.md.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef EX_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "examples/fashion_mnist/data.h"
#include "examples/fashion_mnist/mlp.h"
#include "syncrep/gpu.h"
#include "syncrep/syncrep.h"

#define PROG       "fashion_mnist_train"
#define HIDDEN     256
#define EVAL_CHUNK 1000
#define JOB_DONE   1 /* client_fail: SR_EDONE, the job was ended (not a failure) */

static const char usage_text[] =
    "usage: " PROG " --task-index I --workers N [options]\n"
    "\n"
    "One worker of a synchronous training job on Fashion-MNIST (task 0 is the chief).\n"
    "\n"
    "  --connect ENDPOINT      the coordinator (default tcp://127.0.0.1:7070)\n"
    "  --task-index I          this worker's task, 0..N-1 (required; 0 = chief)\n"
    "  --workers N             worker processes in the job: the training set is cut\n"
    "                          into N shards (required)\n"
    "  --data-dir DIR          the IDX files (default " EX_DATA_DEFAULT_DIR ")\n"
    "  --batch B               examples per worker per step (default 64)\n"
    "  --seed S                initial weights, shards and batch order (default 1)\n"
    "  --local-replicas G      split each batch over G local replicas reduced through\n"
    "                          gpu/ (default 1)\n"
    "  --eval-every K          chief: test accuracy every K steps (default 200)\n"
    "  --target-accuracy A     chief: stop when test accuracy >= A (default 0.85)\n"
    "  --max-steps M           stop at global step M (default 5000)\n"
    "  --log-every K           progress line every K steps (default 100)\n"
    "  --result-file PATH      chief: write the outcome there (key=value lines)\n"
    "  --timeout-ms MS         how long the coordinator may be unreachable (default 60000)\n"
    "  --server-public-key-file F   CURVE: the coordinator's public key (coord.public\n"
    "                          of syncrep keygen); env SYNCREP_SERVER_PUBLIC_KEY (the key)\n"
    "  --public-key-file F     CURVE: this worker's public key; env SYNCREP_PUBLIC_KEY\n"
    "  --secret-key-file F     CURVE: this worker's secret key; env SYNCREP_SECRET_KEY\n"
    "                          (all three or none: a file's first line is its Z85 key;\n"
    "                          an option wins over the environment)\n"
    "\n"
    "Exit status: 0 done (target or step budget), 1 failure, 2 usage error.\n";

typedef struct {
    const char *endpoint;
    int         task;
    int         workers;
    const char *data_dir;
    int         batch;
    uint64_t    seed;
    int         replicas;
    int64_t     eval_every;
    double      target;
    int64_t     max_steps;
    int64_t     log_every;
    const char *result_file;
    int         timeout_ms;
    /* issue 22: CURVE keys (Z85 text, 40 characters + NUL), "" = none */
    char server_key[41];
    char public_key[41];
    char secret_key[41];
} options;

/* What the chief reports at the end. */
typedef struct {
    int64_t step;             /* global step of the last evaluation */
    double  accuracy;         /* its test accuracy */
    int     restarts;         /* coordinator restarts this process saw */
    int64_t restart_step;     /* step restored by the last restart, -1 none */
    double  restart_accuracy; /* accuracy right after it */
    double  seconds;          /* since the model became ready */
} outcome;

/* Everything the training loop uses. */
typedef struct {
    const options *o;
    ex_mlp_dims    dims;
    ex_dataset     train, test;
    ex_sampler     sampler;
    ex_mlp_params  params, grads;
    ex_mlp_work   *work;
    float         *x;      /* batch x pixels */
    uint8_t       *y;      /* batch */
    float         *test_x; /* chief: the test set as floats */
    uint8_t       *pred;   /* chief: EVAL_CHUNK predictions */
    sr_client     *c;
    sr_gpu        *gpu;                    /* G > 1: the host backend reducing the replicas */
    ex_mlp_params  rgrads[SR_GPU_MAX_DEV]; /* G > 1: replica r's gradients, on participant r */
} trainer;

static void say(const options *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
say(const options *o, const char *fmt, ...)
{
    va_list ap;

    printf("task %d: ", o->task);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int
usage_error(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, PROG ": ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see " PROG " --help)\n");
    return 2;
}

static int
parse_i64(const char *s, long long min, long long max, long long *out)
{
    char     *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (*s == '\0' || errno != 0 || *end != '\0' || v < min || v > max) {
        return -1;
    }
    *out = v;
    return 0;
}

static int
parse_f64(const char *s, double *out)
{
    char  *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (*s == '\0' || errno != 0 || *end != '\0') {
        return -1;
    }
    *out = v;
    return 0;
}

/* A CURVE key into out (41 bytes): the first line of the file `path`, or
 * the text of `text` (an environment variable); 0, or -1 with why. */
static int
read_key(const char *path, const char *text, char *out, char *why, size_t cap)
{
    char   line[256];
    size_t n;

    if (path != NULL) {
        FILE *f = fopen(path, "r");
        if (f == NULL) {
            snprintf(why, cap, "cannot read %s: %s", path, strerror(errno));
            return -1;
        }
        if (fgets(line, sizeof(line), f) == NULL) {
            line[0] = '\0';
        }
        fclose(f);
    } else {
        snprintf(line, sizeof(line), "%s", text);
    }
    n = strcspn(line, "\r\n \t");
    if (n != 40) {
        snprintf(why, cap, "%s: not a Z85 CURVE key (40 characters, syncrep keygen)",
                 path != NULL ? path : "the environment's key");
        return -1;
    }
    memcpy(out, line, 40);
    out[40] = '\0';
    return 0;
}

/* The three keys from the options' files, else the environment (the names
 * the Python package reads); all three or none.  0, or 2 (usage error). */
static int
resolve_keys(options *o, const char *files[3])
{
    static const char *const env[3] = {"SYNCREP_SERVER_PUBLIC_KEY", "SYNCREP_PUBLIC_KEY",
                                       "SYNCREP_SECRET_KEY"};
    static const char *const opt[3] = {"--server-public-key-file", "--public-key-file",
                                       "--secret-key-file"};
    char                    *dst[3] = {o->server_key, o->public_key, o->secret_key};
    int                      have = 0;
    char                     why[512];

    for (int k = 0; k < 3; k++) {
        const char *e = getenv(env[k]);
        dst[k][0] = '\0';
        if (files[k] == NULL && (e == NULL || e[0] == '\0')) {
            continue;
        }
        if (read_key(files[k], e, dst[k], why, sizeof(why)) != 0) {
            return usage_error("%s: %s", files[k] != NULL ? opt[k] : env[k], why);
        }
        have++;
    }
    if (have != 0 && have != 3) {
        return usage_error("CURVE needs all three keys (%s, %s, %s or %s, %s, %s): %d given",
                           opt[0], opt[1], opt[2], env[0], env[1], env[2], have);
    }
    return 0;
}

/* Returns 0 to run, 1 for --help (printed), 2 for a usage error (printed). */
static int
parse_options(int argc, char **argv, options *o)
{
    long long   v;
    const char *keyfile[3] = {NULL, NULL, NULL};

    memset(o, 0, sizeof(*o));
    o->endpoint = "tcp://127.0.0.1:7070";
    o->task = -1;
    o->workers = 0;
    o->data_dir = EX_DATA_DEFAULT_DIR;
    o->batch = 64;
    o->seed = 1;
    o->replicas = 1;
    o->eval_every = 200;
    o->target = 0.85;
    o->max_steps = 5000;
    o->log_every = 100;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            return 1;
        }
        if (i + 1 >= argc) {
            return usage_error("%s needs a value", a);
        }
        const char *val = argv[++i];
        int         bad = 0;
        if (strcmp(a, "--connect") == 0) {
            o->endpoint = val;
        } else if (strcmp(a, "--task-index") == 0) {
            bad = parse_i64(val, 0, 1 << 20, &v);
            o->task = (int)v;
        } else if (strcmp(a, "--workers") == 0) {
            bad = parse_i64(val, 1, 1 << 20, &v);
            o->workers = (int)v;
        } else if (strcmp(a, "--data-dir") == 0) {
            o->data_dir = val;
        } else if (strcmp(a, "--batch") == 0) {
            bad = parse_i64(val, 1, 1 << 16, &v);
            o->batch = (int)v;
        } else if (strcmp(a, "--seed") == 0) {
            bad = parse_i64(val, 0, INT64_MAX, &v);
            o->seed = (uint64_t)v;
        } else if (strcmp(a, "--local-replicas") == 0) {
            bad = parse_i64(val, 1, 64, &v);
            o->replicas = (int)v;
        } else if (strcmp(a, "--eval-every") == 0) {
            bad = parse_i64(val, 1, INT64_MAX, &v);
            o->eval_every = v;
        } else if (strcmp(a, "--target-accuracy") == 0) {
            bad = parse_f64(val, &o->target) || !(o->target > 0 && o->target <= 1);
        } else if (strcmp(a, "--max-steps") == 0) {
            bad = parse_i64(val, 0, INT64_MAX, &v);
            o->max_steps = v;
        } else if (strcmp(a, "--log-every") == 0) {
            bad = parse_i64(val, 1, INT64_MAX, &v);
            o->log_every = v;
        } else if (strcmp(a, "--result-file") == 0) {
            o->result_file = val;
        } else if (strcmp(a, "--timeout-ms") == 0) {
            bad = parse_i64(val, 1, 24LL * 3600 * 1000, &v);
            o->timeout_ms = (int)v;
        } else if (strcmp(a, "--server-public-key-file") == 0) {
            keyfile[0] = val;
        } else if (strcmp(a, "--public-key-file") == 0) {
            keyfile[1] = val;
        } else if (strcmp(a, "--secret-key-file") == 0) {
            keyfile[2] = val;
        } else {
            return usage_error("unknown option '%s'", a);
        }
        if (bad) {
            return usage_error("bad value '%s' for %s", val, a);
        }
    }
    if (o->task < 0 || o->workers < 1) {
        return usage_error("--task-index and --workers are required");
    }
    if (o->task >= o->workers) {
        return usage_error("--task-index %d is outside 0..%d (--workers %d)", o->task,
                           o->workers - 1, o->workers);
    }
    if (o->batch % o->replicas != 0) {
        return usage_error("--batch %d does not split evenly over --local-replicas %d", o->batch,
                           o->replicas);
    }
    return resolve_keys(o, keyfile);
}

static void
trainer_free(trainer *t)
{
    for (int r = 0; t->gpu != NULL && r < t->o->replicas; r++) {
        for (int k = 0; k < EX_MLP_NPARAMS; k++) {
            sr_gpu_free(t->gpu, r, ex_mlp_param(&t->rgrads[r], k));
        }
    }
    sr_gpu_close(t->gpu);
    sr_client_close(t->c);
    ex_dataset_free(&t->train);
    ex_dataset_free(&t->test);
    ex_sampler_free(&t->sampler);
    ex_mlp_params_free(&t->params);
    ex_mlp_params_free(&t->grads);
    ex_mlp_work_destroy(t->work);
    free(t->x);
    free(t->y);
    free(t->test_x);
    free(t->pred);
}

/* Load the data, allocate the model and its scratch.  Errors are printed. */
static int
trainer_init(trainer *t, const options *o)
{
    char   err[1024];
    sr_err rc;
    int    max_batch = o->batch > EVAL_CHUNK ? o->batch : EVAL_CHUNK;

    memset(t, 0, sizeof(*t));
    t->o = o;
    if ((rc = ex_dataset_load(o->data_dir, "train", &t->train, err, sizeof(err))) != SR_OK ||
        (o->task == 0 &&
         (rc = ex_dataset_load(o->data_dir, "t10k", &t->test, err, sizeof(err))) != SR_OK)) {
        fprintf(stderr, PROG ": cannot load the data (%s): %s\n", sr_errname(rc), err);
        return -1;
    }
    if (o->task == 0 && t->test.pixels != t->train.pixels) {
        fprintf(stderr, PROG ": test images have %d pixels, training images %d\n", t->test.pixels,
                t->train.pixels);
        return -1;
    }
    if ((rc = ex_sampler_init(&t->sampler, t->train.n, o->task, o->workers, o->seed,
                              (size_t)o->batch)) != SR_OK) {
        fprintf(stderr, PROG ": %s: a shard of %zu / %d examples cannot hold a batch of %d\n",
                sr_strerror(rc), t->train.n, o->workers, o->batch);
        return -1;
    }
    t->dims.in = t->train.pixels;
    t->dims.hidden = HIDDEN;
    t->dims.out = EX_DATA_CLASSES;
    if ((rc = ex_mlp_params_new(&t->dims, &t->params)) != SR_OK ||
        (rc = ex_mlp_params_new(&t->dims, &t->grads)) != SR_OK ||
        (rc = ex_mlp_work_new(&t->dims, max_batch, &t->work)) != SR_OK ||
        (t->x = malloc((size_t)o->batch * (size_t)t->dims.in * sizeof(float))) == NULL ||
        (t->y = malloc((size_t)o->batch)) == NULL) {
        fprintf(stderr, PROG ": cannot allocate the model: %s\n",
                sr_strerror(rc != SR_OK ? rc : SR_ENOMEM));
        return -1;
    }
    if (o->task == 0) {
        t->test_x = malloc(t->test.n * (size_t)t->dims.in * sizeof(float));
        t->pred = malloc(EVAL_CHUNK);
        if (t->test_x == NULL || t->pred == NULL) {
            fprintf(stderr, PROG ": cannot allocate the test set (%zu images)\n", t->test.n);
            return -1;
        }
        ex_dataset_to_float(&t->test, NULL, 0, t->test.n, t->test_x, NULL);
    }
    return 0;
}

/* G > 1: one host-backend participant per local replica, each with its own
 * gradient buffers.  The replicas share the pulled parameters: on the host
 * backend they are all in this process's memory, so the broadcast a GPU node
 * needs (sr_gpu_broadcast from the root) would only copy them. */
static int
replicas_init(trainer *t)
{
    sr_gpu_options go;
    sr_err         rc;

    if (t->o->replicas == 1) {
        return 0;
    }
    memset(&go, 0, sizeof(go));
    go.backend = SR_GPU_HOST;
    go.ndev = t->o->replicas;
    if ((rc = sr_gpu_open(&t->gpu, &go)) != SR_OK) {
        fprintf(stderr, PROG ": --local-replicas %d: %s: %s\n", t->o->replicas, sr_strerror(rc),
                sr_errdetail());
        return -1;
    }
    for (int r = 0; r < t->o->replicas; r++) {
        for (int k = 0; k < EX_MLP_NPARAMS; k++) {
            void  *p = NULL;
            size_t bytes = ex_mlp_param_count(&t->dims, k) * sizeof(float);
            if ((rc = sr_gpu_alloc(t->gpu, r, bytes, &p)) != SR_OK) {
                fprintf(stderr, PROG ": replica %d: %s: %s\n", r, sr_strerror(rc),
                        sr_gpu_error(t->gpu));
                return -1;
            }
            switch (k) {
            case EX_MLP_W1:
                t->rgrads[r].w1 = p;
                break;
            case EX_MLP_B1:
                t->rgrads[r].b1 = p;
                break;
            case EX_MLP_W2:
                t->rgrads[r].w2 = p;
                break;
            default:
                t->rgrads[r].b2 = p;
                break;
            }
        }
    }
    return 0;
}

/* The gradient of this worker's batch into t->grads, and its mean loss.  With
 * G local replicas each computes the gradient of its B / G examples, and
 * gpu/ averages the G gradients onto the root (participant 0) into
 * t->grads: the mean over equal sub-batches is the gradient of the batch. */
static int
compute_grads(trainer *t, float *loss)
{
    const int G = t->o->replicas, b = t->o->batch / G;
    const int in = t->dims.in;
    sr_err    rc;

    if (G == 1) {
        return ex_mlp_loss_grad(&t->dims, &t->params, t->x, t->y, b, t->work, &t->grads, loss) ==
                       SR_OK
                   ? 0
                   : -1;
    }
    *loss = 0.0f;
    for (int r = 0; r < G; r++) {
        float l;
        if (ex_mlp_loss_grad(&t->dims, &t->params, t->x + (size_t)r * b * in, t->y + r * b, b,
                             t->work, &t->rgrads[r], &l) != SR_OK) {
            return -1;
        }
        *loss += l / (float)G;
    }
    void         *bufs[EX_MLP_NPARAMS][SR_GPU_MAX_DEV];
    sr_gpu_tensor ts[EX_MLP_NPARAMS];
    for (int k = 0; k < EX_MLP_NPARAMS; k++) {
        for (int r = 0; r < G; r++) {
            bufs[k][r] = ex_mlp_param(&t->rgrads[r], k);
        }
        ts[k] = (sr_gpu_tensor){.bufs = bufs[k],
                                .out = NULL,
                                .root_out = ex_mlp_param(&t->grads, k),
                                .count = ex_mlp_param_count(&t->dims, k),
                                .dtype = SR_FLOAT32};
    }
    if ((rc = sr_gpu_group(t->gpu, SR_GPU_AVERAGE, ts, EX_MLP_NPARAMS, SR_GPU_SUM, 0)) != SR_OK) {
        fprintf(stderr, PROG ": task %d: averaging %d replicas: %s: %s\n", t->o->task, G,
                sr_strerror(rc), sr_gpu_error(t->gpu));
        return -1;
    }
    return 0;
}

static int
client_fail(const trainer *t, const char *what, int rc)
{
    if (rc == SR_EDONE) {
        return JOB_DONE; /* not a failure: the chief (or --max-steps) ended the job */
    }
    fprintf(stderr, PROG ": task %d: %s: %s: %s\n", t->o->task, what, sr_strerror(rc),
            sr_client_error(t->c));
    return -1;
}

/* The chief has what it trained for: it ends the job, so the other workers'
 * next step returns SR_EDONE and they stop too (instead of waiting for
 * tokens that no longer come). */
static void
end_job(trainer *t)
{
    int rc = sr_client_finish(t->c);
    if (rc != 0) {
        fprintf(stderr, PROG ": task %d: finish: %s: %s\n", t->o->task, sr_strerror(rc),
                sr_client_error(t->c));
    }
}

/* A loop call's failure rc: JOB_DONE (the job was ended) is the end of the
 * training, everything else a failure. */
static int
job_ended(const trainer *t, int rc)
{
    if (rc == JOB_DONE) {
        say(t->o, "the job has ended at step %" PRId64, sr_client_local_step(t->c));
        return 0;
    }
    return rc;
}

/* Connect, declare the four variables (the chief with its seeded initial
 * values) and wait until the model is ready. */
static int
join(trainer *t)
{
    sr_client_options co;
    int64_t           shape[2];
    int               rc;

    memset(&co, 0, sizeof(co));
    co.endpoint = t->o->endpoint;
    co.task_index = t->o->task;
    co.timeout_ms = t->o->timeout_ms;
    if (t->o->server_key[0] != '\0') { /* CURVE (issue 22) */
        co.server_public_key = t->o->server_key;
        co.public_key = t->o->public_key;
        co.secret_key = t->o->secret_key;
    }
    if ((rc = sr_client_open(&t->c, &co)) != 0) {
        fprintf(stderr, PROG ": task %d: cannot reach the coordinator at %s: %s: %s\n", t->o->task,
                t->o->endpoint, sr_strerror(rc), sr_errdetail());
        return -1;
    }
    if (t->o->task == 0) {
        ex_mlp_init(&t->dims, t->o->seed, &t->params);
    }
    for (int k = 0; k < EX_MLP_NPARAMS; k++) {
        int ndim = ex_mlp_param_shape(&t->dims, k, shape);
        rc = sr_client_declare(t->c, ex_mlp_param_name(k), SR_FLOAT32, ndim, shape,
                               t->o->task == 0 ? ex_mlp_param(&t->params, k) : NULL);
        if (rc != 0) {
            return client_fail(t, "declare", rc);
        }
    }
    if ((rc = sr_client_ready(t->c)) != 0) {
        return client_fail(t, "ready", rc);
    }
    return 0;
}

/* Every parameter in one call: the pulls travel together (and come from the
 * token when the model is small: --piggyback-max-kib). */
static int
pull_all(trainer *t)
{
    const char *names[EX_MLP_NPARAMS];
    void       *dsts[EX_MLP_NPARAMS];
    size_t      bytes[EX_MLP_NPARAMS];

    for (int k = 0; k < EX_MLP_NPARAMS; k++) {
        names[k] = ex_mlp_param_name(k);
        dsts[k] = ex_mlp_param(&t->params, k);
        bytes[k] = ex_mlp_param_count(&t->dims, k) * sizeof(float);
    }
    int rc = sr_client_pull_many(t->c, EX_MLP_NPARAMS, names, dsts, bytes);
    return rc != 0 ? client_fail(t, "pull", rc) : 0;
}

/* Push every gradient and take the next token; the last push goes with the
 * token request (sr_client_push_step: one message for a small one). */
static int
push_and_step(trainer *t)
{
    int k, rc;

    for (k = 0; k < EX_MLP_NPARAMS - 1; k++) {
        rc = sr_client_push(t->c, ex_mlp_param_name(k), ex_mlp_param(&t->grads, k),
                            ex_mlp_param_count(&t->dims, k) * sizeof(float));
        if (rc != 0) {
            return client_fail(t, "push", rc);
        }
    }
    rc = sr_client_push_step(t->c, ex_mlp_param_name(k), ex_mlp_param(&t->grads, k),
                             ex_mlp_param_count(&t->dims, k) * sizeof(float));
    return rc != 0 ? client_fail(t, "push and step", rc) : 0;
}

/* Test-set accuracy of the current parameters. */
static double
evaluate(trainer *t)
{
    size_t correct = 0;

    for (size_t i = 0; i < t->test.n; i += EVAL_CHUNK) {
        size_t n = t->test.n - i < EVAL_CHUNK ? t->test.n - i : EVAL_CHUNK;
        ex_mlp_predict(&t->dims, &t->params, t->test_x + i * (size_t)t->dims.in, (int)n, t->work,
                       t->pred);
        for (size_t j = 0; j < n; j++) {
            correct += t->pred[j] == t->test.labels[i + j];
        }
    }
    return (double)correct / (double)t->test.n;
}

/* Write the outcome atomically (temp file, fsync, rename), so the script
 * never reads half of it. */
static int
write_result(const options *o, const outcome *r, const char *reason)
{
    char  tmp[4096];
    FILE *f;
    int   ok;

    if (o->result_file == NULL) {
        return 0;
    }
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", o->result_file) >= (int)sizeof(tmp)) {
        fprintf(stderr, PROG ": --result-file path too long\n");
        return -1;
    }
    if ((f = fopen(tmp, "w")) == NULL) {
        fprintf(stderr, PROG ": cannot write %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "reason=%s\nstep=%" PRId64 "\naccuracy=%.4f\ntarget=%.4f\nrestarts=%d\n", reason,
            r->step, r->accuracy, o->target, r->restarts);
    if (r->restart_step >= 0) {
        fprintf(f, "restart_step=%" PRId64 "\nrestart_accuracy=%.4f\n", r->restart_step,
                r->restart_accuracy);
    }
    fprintf(f, "seconds=%.1f\n", r->seconds);
    ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, o->result_file) != 0) {
        fprintf(stderr, PROG ": cannot write %s: %s\n", o->result_file, strerror(errno));
        return -1;
    }
    return 0;
}

/* Progress of one worker between two progress lines. */
typedef struct {
    double  t0;    /* time of the last line */
    int64_t step0; /* local step then */
    double  loss;  /* summed batch losses since */
    int     nloss;
} progress;

static void
progress_line(trainer *t, progress *p, int64_t step)
{
    double now = now_s();
    double rate = now > p->t0 ? (double)(step - p->step0) / (now - p->t0) : 0.0;

    if (p->nloss > 0) {
        say(t->o, "step %6" PRId64 "  %6.1f steps/s  loss %.4f", step, rate, p->loss / p->nloss);
    }
    p->t0 = now;
    p->step0 = step;
    p->loss = 0.0;
    p->nloss = 0;
}

/* The loop  pull -> compute -> push -> step, until the chief's criterion or
 * the step budget.  Returns 0 when done, -1 on failure. */
static int
train(trainer *t)
{
    const options *o = t->o;
    const int      chief = o->task == 0;
    outcome        r = {0, 0.0, 0, -1, 0.0, 0.0};
    progress       p;
    double         start = now_s();
    uint64_t       inc = sr_client_incarnation(t->c);
    int64_t        step = sr_client_local_step(t->c);
    int64_t        last_eval = -1, next_log, next_eval;
    int            restarted = 0, rc;
    const int      resumed = step > 0;

    if (o->replicas > 1) {
        say(o,
            "model ready at global step %" PRId64 "; shard of %zu examples, batch %d over %d "
            "local replicas (gpu/ host backend)",
            step, t->sampler.n, o->batch, o->replicas);
    } else {
        say(o, "model ready at global step %" PRId64 "; shard of %zu examples, batch %d", step,
            t->sampler.n, o->batch);
    }
    p.t0 = start;
    p.step0 = step;
    p.loss = 0.0;
    p.nloss = 0;
    next_log = (step / o->log_every + 1) * o->log_every;
    next_eval = (step / o->eval_every + 1) * o->eval_every;
    for (;;) {
        step = sr_client_local_step(t->c);
        if (sr_client_incarnation(t->c) != inc) {
            /* The client resynchronised with a restarted coordinator inside the
             * last call: the local step is now the step the store restored. */
            inc = sr_client_incarnation(t->c);
            r.restarts++;
            restarted = 1;
            say(o,
                "coordinator restarted (incarnation %" PRIu64 "): resuming from step %" PRId64
                " restored from the store",
                inc, step);
            next_log = (step / o->log_every + 1) * o->log_every;
        }
        if ((rc = pull_all(t)) != 0) {
            return job_ended(t, rc);
        }
        if (sr_client_incarnation(t->c) != inc) {
            continue; /* restarted between two pulls: pull all four at the restored step */
        }
        /* The chief evaluates every eval_every steps, at once on a resumed
         * store or after a restart (to show nothing was lost), and at the end. */
        if (chief && (restarted || step >= o->max_steps || step >= next_eval ||
                      (last_eval < 0 && resumed))) {
            double t0 = now_s();
            r.accuracy = evaluate(t);
            r.step = step;
            r.seconds = now_s() - start;
            last_eval = step;
            next_eval = (step / o->eval_every + 1) * o->eval_every;
            say(o, "step %6" PRId64 "  test accuracy %.2f%% (%zu images, %.2f s)%s", step,
                100.0 * r.accuracy, t->test.n, now_s() - t0,
                restarted ? "  <- after the coordinator restart" : "");
            if (restarted) {
                r.restart_step = step;
                r.restart_accuracy = r.accuracy;
                restarted = 0;
            }
            if (r.accuracy >= o->target) {
                say(o, "target accuracy %.2f%% reached at step %" PRId64 " (%.1f s)",
                    100.0 * o->target, step, r.seconds);
                end_job(t);
                return write_result(o, &r, "target");
            }
        }
        restarted = 0;
        if (step >= o->max_steps) {
            say(o, "step budget %" PRId64 " reached", o->max_steps);
            if (chief) {
                end_job(t);
            }
            return chief ? write_result(o, &r, "max-steps") : 0;
        }

        const size_t *idx = ex_sampler_batch(&t->sampler, step);
        float         loss;
        ex_dataset_to_float(&t->train, idx, 0, (size_t)o->batch, t->x, t->y);
        if (compute_grads(t, &loss) != 0) {
            fprintf(stderr, PROG ": task %d: cannot compute the gradient at step %" PRId64 "\n",
                    o->task, step);
            return -1;
        }
        p.loss += loss;
        p.nloss++;
        if ((rc = push_and_step(t)) != 0) {
            return job_ended(t, rc);
        }
        if (sr_client_local_step(t->c) >= next_log) {
            progress_line(t, &p, sr_client_local_step(t->c));
            next_log = (sr_client_local_step(t->c) / o->log_every + 1) * o->log_every;
        }
    }
}

int
main(int argc, char **argv)
{
    options o;
    trainer t;
    int     rc;

    if ((rc = parse_options(argc, argv, &o)) != 0) {
        return rc == 1 ? 0 : 2;
    }
    /* Lines from several workers share a terminal: keep each one whole. */
    setvbuf(stdout, NULL, _IOLBF, 0);
#ifdef EX_HAVE_OPENBLAS
    /* One process per worker already fills the cores; BLAS threads on top of
     * that only contend.  OPENBLAS_NUM_THREADS is read too late to undo. */
    openblas_set_num_threads(1);
#endif
    if (trainer_init(&t, &o) != 0 || replicas_init(&t) != 0 || join(&t) != 0 || train(&t) != 0) {
        trainer_free(&t);
        return 1;
    }
    trainer_free(&t);
    return 0;
}
