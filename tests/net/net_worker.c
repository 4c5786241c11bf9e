/*
 * The deterministic worker of the network tests (tests/net/net_test.sh) and
 * of the Slurm example (examples/slurm/): pull -> gradient -> push -> step
 * until the coordinator's --max-steps ends the job (SR_EDONE), then pull
 * the final values and print their hash, so that a run through faults can
 * be compared bit for bit with a fault-free one.  The gradient is a pure
 * function of the pulled values and the task, so with --init-tokens 0 and
 * R = N the final values depend on nothing else.  docs/network.md.
 *
 * Its place in the job comes from the options, else the environment, with
 * the Python launcher's rules (python/syncrep/env.py): the endpoint from
 * SYNCREP_COORDINATOR, the task from SYNCREP_TASK_INDEX, then torchrun's
 * RANK, Kubeflow's PET_NODE_RANK, Slurm's SLURM_PROCID; CURVE keys from
 * --keys DIR, else SYNCREP_SERVER_PUBLIC_KEY, SYNCREP_PUBLIC_KEY and
 * SYNCREP_SECRET_KEY.
 *
 * Output, one line each: NETW-STEP task=T step=S t_ms=MS (every completed
 * step, wall-clock milliseconds), NETW-FINAL task=T step=S hash=H.
 */
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "syncrep/syncrep.h"

#define NW 256 /* float32 "w" */
#define NB 16  /* float64 "b" */

typedef struct {
    const char *endpoint;
    int         task;
    int         pace_ms;
    int         timeout_ms;
    const char *keys; /* DIR with coord.public, worker.public, worker.secret */
    char        server_pub[64], pub[64], sec[64];
} args;

static int64_t
wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The first line of DIR/NAME (a Z85 key) into out; 0 on success. */
static int
read_key(const char *dir, const char *name, char *out, size_t cap)
{
    char  path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if ((f = fopen(path, "r")) == NULL) {
        fprintf(stderr, "net_worker: cannot open %s\n", path);
        return -1;
    }
    if (fgets(out, (int)cap, f) == NULL) {
        fclose(f);
        fprintf(stderr, "net_worker: %s is empty\n", path);
        return -1;
    }
    fclose(f);
    out[strcspn(out, "\r\n")] = '\0';
    return 0;
}

/* The task index from the first launcher variable that is set. */
static int
task_from_env(int *task, const char **source)
{
    static const char *const vars[] = {"SYNCREP_TASK_INDEX", "RANK", "PET_NODE_RANK",
                                       "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        char       *end;
        if (v != NULL && *v != '\0') {
            long t = strtol(v, &end, 10);
            if (*end != '\0' || t < 0 || t > 1 << 20) {
                fprintf(stderr, "net_worker: %s=\"%s\" is not a task index\n", vars[i], v);
                return -1;
            }
            *task = (int)t;
            *source = vars[i];
            return 0;
        }
    }
    return -1;
}

static int
parse(int argc, char **argv, args *a)
{
    const char *source = "--task";

    memset(a, 0, sizeof(*a));
    a->task = -1;
    a->timeout_ms = 120000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--connect") == 0) {
            a->endpoint = argv[i + 1];
        } else if (strcmp(argv[i], "--task") == 0) {
            a->task = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--pace-ms") == 0) {
            a->pace_ms = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--timeout-ms") == 0) {
            a->timeout_ms = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--keys") == 0) {
            a->keys = argv[i + 1];
        } else {
            fprintf(stderr, "net_worker: unknown option %s\n", argv[i]);
            return -1;
        }
    }
    if (a->endpoint == NULL) {
        a->endpoint = getenv("SYNCREP_COORDINATOR");
    }
    if (a->task < 0 && task_from_env(&a->task, &source) != 0) {
        fprintf(stderr, "net_worker: no task index (--task, SYNCREP_TASK_INDEX, RANK, "
                        "PET_NODE_RANK or SLURM_PROCID)\n");
        return -1;
    }
    if (a->endpoint == NULL) {
        fprintf(stderr, "net_worker: no endpoint (--connect or SYNCREP_COORDINATOR)\n");
        return -1;
    }
    if (a->keys != NULL && (read_key(a->keys, "coord.public", a->server_pub, 64) != 0 ||
                            read_key(a->keys, "worker.public", a->pub, 64) != 0 ||
                            read_key(a->keys, "worker.secret", a->sec, 64) != 0)) {
        return -1;
    }
    if (a->keys == NULL && getenv("SYNCREP_SERVER_PUBLIC_KEY") != NULL) {
        const char *k[3] = {getenv("SYNCREP_SERVER_PUBLIC_KEY"), getenv("SYNCREP_PUBLIC_KEY"),
                            getenv("SYNCREP_SECRET_KEY")};
        if (k[1] == NULL || k[2] == NULL) {
            fprintf(stderr, "net_worker: SYNCREP_SERVER_PUBLIC_KEY needs SYNCREP_PUBLIC_KEY and "
                            "SYNCREP_SECRET_KEY\n");
            return -1;
        }
        snprintf(a->server_pub, 64, "%s", k[0]);
        snprintf(a->pub, 64, "%s", k[1]);
        snprintf(a->sec, 64, "%s", k[2]);
        a->keys = "(environment)";
    }
    fprintf(stderr, "net_worker: task=%d (from %s) endpoint=%s curve=%s\n", a->task, source,
            a->endpoint, a->keys ? "on" : "off");
    return 0;
}

static uint64_t
fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ b[i]) * 1099511628211ull;
    }
    return h;
}

static int
declare(sr_client *c, int task)
{
    float   w0[NW];
    double  b0[NB];
    int64_t sw[1] = {NW}, sb[1] = {NB};
    int     rc;

    for (int i = 0; i < NW; i++) {
        w0[i] = (float)(0.01 * (i % 17) - 0.05);
    }
    for (int i = 0; i < NB; i++) {
        b0[i] = 0.1 * i;
    }
    if ((rc = sr_client_declare(c, "w", SR_FLOAT32, 1, sw, task == 0 ? w0 : NULL)) != 0 ||
        (rc = sr_client_declare(c, "b", SR_FLOAT64, 1, sb, task == 0 ? b0 : NULL)) != 0) {
        return rc;
    }
    return sr_client_ready(c);
}

/* One round; the gradients depend only on the pulled values and the task. */
static int
round_once(sr_client *c, int task)
{
    float  w[NW], gw[NW];
    double b[NB], gb[NB];
    int    rc;

    if ((rc = sr_client_pull(c, "w", w, sizeof(w))) != 0 ||
        (rc = sr_client_pull(c, "b", b, sizeof(b))) != 0) {
        return rc;
    }
    for (int i = 0; i < NW; i++) {
        gw[i] = sinf(w[i] * (float)(task + 1)) + 0.001f * (float)(i % 7);
    }
    for (int i = 0; i < NB; i++) {
        gb[i] = cos(b[i]) * (task + 1) - 0.25 * (double)task;
    }
    if ((rc = sr_client_push(c, "w", gw, sizeof(gw))) != 0) {
        return rc;
    }
    return sr_client_push_step(c, "b", gb, sizeof(gb));
}

static int
final(sr_client *c, int task)
{
    float    w[NW];
    double   b[NB];
    uint64_t h = 1469598103934665603ull;
    int      rc;

    if ((rc = sr_client_pull(c, "w", w, sizeof(w))) != 0 ||
        (rc = sr_client_pull(c, "b", b, sizeof(b))) != 0) {
        fprintf(stderr, "net_worker: final pull: %s\n", sr_client_error(c));
        return 1;
    }
    h = fnv1a(fnv1a(h, w, sizeof(w)), b, sizeof(b));
    sr_client_stats s;
    sr_client_stats_get(c, &s);
    printf("NETW-FINAL task=%d step=%" PRId64 " hash=%016" PRIx64 " accepted=%" PRIu64
           " stale=%" PRIu64 " duplicate=%" PRIu64 " resends=%" PRIu64 " resyncs=%" PRIu64 "\n",
           task, sr_client_local_step(c), h, s.accepted, s.stale, s.duplicate, s.resends,
           s.resyncs);
    fflush(stdout);
    return 0;
}

int
main(int argc, char **argv)
{
    args              a;
    sr_client_options o;
    sr_client        *c = NULL;
    int               rc;

    signal(SIGPIPE, SIG_IGN);
    if (parse(argc, argv, &a) != 0) {
        return 2;
    }
    memset(&o, 0, sizeof(o));
    o.endpoint = a.endpoint;
    o.task_index = a.task;
    o.timeout_ms = a.timeout_ms;
    if (a.keys != NULL) {
        o.server_public_key = a.server_pub;
        o.public_key = a.pub;
        o.secret_key = a.sec;
    }
    if ((rc = sr_client_open(&c, &o)) != 0) {
        fprintf(stderr, "net_worker: open: %s: %s\n", sr_errname(rc), sr_errdetail());
        return 1;
    }
    if ((rc = declare(c, a.task)) != 0) {
        fprintf(stderr, "net_worker: declare: %s: %s\n", sr_errname(rc), sr_client_error(c));
        sr_client_close(c);
        return 1;
    }
    while ((rc = round_once(c, a.task)) == 0) {
        printf("NETW-STEP task=%d step=%" PRId64 " t_ms=%" PRId64 "\n", a.task,
               sr_client_local_step(c), wall_ms());
        fflush(stdout);
        if (a.pace_ms > 0) {
            usleep((useconds_t)a.pace_ms * 1000);
        }
    }
    if (rc != SR_EDONE) {
        fprintf(stderr, "net_worker: task=%d: %s: %s\n", a.task, sr_errname(rc),
                sr_client_error(c));
        sr_client_close(c);
        return 1;
    }
    rc = final(c, a.task);
    sr_client_close(c);
    return rc;
}
