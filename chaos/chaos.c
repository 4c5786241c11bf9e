/*
 * `syncrep chaos`: a real coordinator and real workers (fork/exec of this
 * binary), SIGKILLed and SIGSTOPped on a schedule drawn from --seed alone
 * (so a seed replays the same faults), restarted after seeded delays, with
 * the worker count cycling through --resize at coordinator restarts.  At
 * the end everything is stopped cleanly and chaos_verify.c judges the store.
 * Writes DIR/report.json and DIR/timeline.svg.  docs/chaos.md.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chaos/chaos.h"
#include "chaos/chaos_model.h"
#include "cli/cli.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/strbuf.h"
#include "tools/coord_argv.h"
#include "tools/proc.h"
#include "tools/status_client.h"
#include "wire/wire.h"

#define MAX_WORKERS  64
#define MAX_EVENTS   4096
#define MAX_SAMPLES  20000
#define QUIET_TAIL_S 4.0 /* no faults at the end: liveness must show */

enum { ROLE_COORD = 0, ROLE_CHIEF = 1, ROLE_WORKER = 2 };
static const char *const role_name[3] = {"coordinator", "chief", "worker"};
static const char *const role_color[3] = {"#d62728", "#1f77b4", "#ff7f0e"};

enum { ACT_KILL = 0, ACT_STOP = 1 };

/* A planned fault: drawn entirely from the seed, before anything runs. */
typedef struct {
    double t; /* seconds from the start */
    int    role;
    int    task;      /* chief: 0; worker: its task index */
    int    action;    /* ACT_KILL: SIGKILL then restart; ACT_STOP: SIGSTOP then SIGCONT */
    double down_s;    /* until the restart / SIGCONT */
    int    resize_to; /* coordinator: worker count after the restart (0 = same) */
    int    resume;    /* coordinator: restart with --resume-from-step */
} fault;

/* Something that happened, for the timeline and the report. */
typedef struct {
    double t;
    int    role;
    int    task;
    char   what[16]; /* kill, stop, cont, restart, resume, resize */
} event;

typedef struct {
    double  t;
    int64_t step;
} sample;

typedef struct {
    /* options */
    int      workers, R, M, checkpoint_every;
    double   duration, kill_every;
    uint64_t seed;
    int      targets[3];
    int      resize[16], nresize;
    int      print_plan;      /* --print-plan: print the schedule and exit */
    int      commit_async;    /* --commit async */
    int64_t  partition_bytes; /* --partition-bytes for the coordinator; -1 = its default */
    int64_t  wal_limit_kib;   /* --wal-limit-kib for the coordinator; 0 = its default */
    char     out[PATH_MAX];
    char     store[PATH_MAX + 16], endpoint[PATH_MAX + 32], self[PATH_MAX];
    sr_optim optim;
    /* processes */
    pid_t coord;
    pid_t wpid[MAX_WORKERS];
    int   nworkers; /* current size */
    int   curR, curM;
    /* the plan and what happened */
    fault  plan[MAX_EVENTS];
    int    nplan;
    event  ev[MAX_EVENTS];
    int    nev;
    sample samples[MAX_SAMPLES];
    int    nsamples;
    int    kills[3], stops, restarts[3], resizes, resumes;
    /* status polling */
    sr_status_client *status;
    int64_t           gstep, committed, restored;
    uint64_t          inc;
    int64_t           max_committed_before_inc[1024]; /* by incarnation */
    double            coord_restart_t;                /* awaiting recovery since, or < 0 */
    uint64_t          coord_restart_inc;              /* the incarnation seen before the restart */
    double            recovery[256];
    int               nrecovery;
    double            pending_live_t[MAX_EVENTS]; /* restarts still waiting for progress */
    int64_t           pending_live_step[MAX_EVENTS];
    uint64_t          pending_live_inc[MAX_EVENTS];
    int               npending;
    int               liveness_failed;
    char              liveness_detail[256];
    double            t0;
} chaos;

static volatile sig_atomic_t chaos_interrupted;

static void
on_int(int sig)
{
    (void)sig;
    chaos_interrupted = 1;
}

static double
now_s(const chaos *c)
{
    return sr_clock_now_ms() / 1000.0 - c->t0;
}

/* ---- processes ---------------------------------------------------------- */

static pid_t
spawn(chaos *c, char *const argv[], const char *log_name)
{
    char path[PATH_MAX + 64];

    snprintf(path, sizeof(path), "%s/%s", c->out, log_name);
    return sr_proc_spawn(argv, path, 0); /* the harness's children die with it */
}

static void
start_coordinator(chaos *c, int64_t resume_step)
{
    sr_coord_argv a;

    sr_coord_argv_init(&a, c->self, c->store, c->endpoint);
    sr_coord_argv_opt(&a, "--replicas-to-aggregate", "%d", c->curR);
    sr_coord_argv_opt(&a, "--total-replicas", "%d", c->curM);
    sr_coord_argv_opt(&a, "--optimizer", "%s", sr__optim_name(c->optim.kind));
    sr_coord_argv_opt(&a, "--learning-rate", "%.17g", c->optim.lr);
    sr_coord_argv_opt(&a, "--ema-decay", "%.17g", c->optim.ema_decay);
    sr_coord_argv_opt(&a, "--checkpoint-every-steps", "%d", c->checkpoint_every);
    sr_coord_argv_opt(&a, "--keep-checkpoints", "5");
    sr_coord_argv_add(&a, "--step-log");
    sr_coord_argv_opt(&a, "--commit", "%s", c->commit_async ? "async" : "sync");
    /* Process crashes, not power loss: NORMAL is durable here. */
    sr_coord_argv_opt(&a, "--sync", "normal");
    sr_coord_argv_opt(&a, "--log-level", "notice");
    if (c->partition_bytes >= 0) {
        sr_coord_argv_opt(&a, "--partition-bytes", "%" PRId64, c->partition_bytes);
    }
    if (c->wal_limit_kib > 0) {
        sr_coord_argv_opt(&a, "--wal-limit-kib", "%" PRId64, c->wal_limit_kib);
    }
    if (resume_step >= 0) {
        sr_coord_argv_opt(&a, "--resume-from-step", "%" PRId64, resume_step);
    }
    c->coord =
        sr_coord_argv_get(&a) != NULL ? spawn(c, sr_coord_argv_get(&a), "coordinator.log") : -1;
}

static void
start_worker(chaos *c, int task)
{
    char  t[16], s[32], log[32];
    char *argv[] = {c->self, "chaos-worker", "--connect", c->endpoint, "--task-index",
                    t,       "--seed",       s,           NULL};
    snprintf(t, sizeof(t), "%d", task);
    snprintf(s, sizeof(s), "%" PRIu64, c->seed);
    snprintf(log, sizeof(log), "worker-%d.log", task);
    c->wpid[task] = spawn(c, argv, log);
}

static void
reap_all(chaos *c)
{
    int   st;
    pid_t p;
    while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
        if (p == c->coord) {
            c->coord = 0;
        }
        for (int i = 0; i < MAX_WORKERS; i++) {
            if (c->wpid[i] == p) {
                c->wpid[i] = 0;
            }
        }
    }
}

/* SIGCONT and SIGTERM, then SIGKILL after grace_ms; reaps. */
static void
stop_pid(pid_t *pid, int grace_ms)
{
    if (*pid > 0) {
        sr_proc_stop(*pid, grace_ms);
        *pid = 0;
    }
}

static void
kill9(pid_t *pid)
{
    if (*pid > 0) {
        sr_proc_kill9(*pid);
        *pid = 0;
    }
}

static void
note(chaos *c, int role, int task, const char *what)
{
    if (c->nev < MAX_EVENTS) {
        event *e = &c->ev[c->nev++];
        e->t = now_s(c);
        e->role = role;
        e->task = task;
        snprintf(e->what, sizeof(e->what), "%s", what);
    }
}

/* ---- status ------------------------------------------------------------- */

/* Ask the coordinator for its state; 0 if it answered within 200 ms. */
static int
poll_status(chaos *c)
{
    char   *json = NULL;
    size_t  len;
    int     status;
    int64_t g, cm, inc, rs;

    if (sr_status_client_ask(c->status, 200, &status, &json, &len) != SR_OK) {
        return -1;
    }
    if (status != SR_OK || sr__chaos_json_i64(json, "global_step", &g) ||
        sr__chaos_json_i64(json, "committed_step", &cm) ||
        sr__chaos_json_i64(json, "incarnation", &inc) ||
        sr__chaos_json_i64(json, "restored_step", &rs)) {
        free(json);
        return -1;
    }
    free(json);
    c->restored = rs;
    c->gstep = g;
    c->committed = cm;
    c->inc = (uint64_t)inc;
    if (inc >= 0 && inc < 1024 && cm > c->max_committed_before_inc[inc]) {
        c->max_committed_before_inc[inc] = cm;
    }
    return 0;
}

/* ---- the plan ----------------------------------------------------------- */

static void
make_plan(chaos *c)
{
    sr_chaos_rng r;
    double       t = 0;
    int          ntargets = 0, size = c->workers, rz = 0, resumed = 0;
    int          roles[3];

    sr_chaos_rng_seed(&r, c->seed);
    for (int i = 0; i < 3; i++) {
        if (c->targets[i]) {
            roles[ntargets++] = i;
        }
    }
    if (ntargets == 0 || c->kill_every <= 0) {
        return;
    }
    for (;;) {
        t += c->kill_every * (0.5 + sr_chaos_rng_unit(&r));
        if (t > c->duration - QUIET_TAIL_S || c->nplan >= MAX_EVENTS) {
            break;
        }
        fault *f = &c->plan[c->nplan++];
        memset(f, 0, sizeof(*f));
        f->t = t;
        f->role = roles[sr_chaos_rng_next(&r) % (uint64_t)ntargets];
        if (f->role == ROLE_WORKER && size < 2) {
            f->role = ROLE_CHIEF; /* no other worker to hit */
        }
        f->task =
            f->role == ROLE_WORKER ? 1 + (int)(sr_chaos_rng_next(&r) % (uint64_t)(size - 1)) : 0;
        f->action = (f->role != ROLE_COORD && sr_chaos_rng_unit(&r) < 0.2) ? ACT_STOP : ACT_KILL;
        f->down_s = f->action == ACT_STOP ? 0.5 + 1.5 * sr_chaos_rng_unit(&r)
                                          : 0.1 + 0.9 * sr_chaos_rng_unit(&r);
        if (f->role == ROLE_COORD) {
            if (c->nresize > 0) {
                f->resize_to = c->resize[rz++ % c->nresize];
                size = f->resize_to;
            }
            if (!resumed && t >= c->duration / 3) {
                f->resume = 1; /* exercise --resume-from-step once per run */
                resumed = 1;
            }
        }
    }
}

/* ---- running ------------------------------------------------------------ */

static void
resize_to(chaos *c, int n)
{
    int backups = c->M - c->R;
    if (n < 1) {
        n = 1;
    }
    for (int i = n; i < c->nworkers; i++) {
        stop_pid(&c->wpid[i], 1500);
    }
    for (int i = c->nworkers; i < n; i++) {
        start_worker(c, i);
    }
    if (n != c->nworkers) {
        c->resizes++;
        note(c, ROLE_COORD, n, "resize");
    }
    c->nworkers = n;
    c->curM = n;
    c->curR = n - backups >= 1 ? n - backups : 1;
}

/* The oldest retained checkpoint older than the newest, from the store. */
static int64_t
resume_target(chaos *c)
{
    sr_store     *st = NULL;
    sr_store_opts o;
    int64_t      *cp = NULL, target = -1;
    size_t        n = 0;

    memset(&o, 0, sizeof(o));
    o.readonly = 1;
    o.skip_quick_check = 1;
    if (sr_store_open(c->store, &o, &st) == SR_OK &&
        sr_store_list_checkpoints(st, &cp, &n) == SR_OK && n >= 2) {
        target = cp[0];
    }
    free(cp);
    sr_store_close(st);
    return target;
}

static void
expect_progress(chaos *c)
{
    if (c->npending < MAX_EVENTS) {
        c->pending_live_t[c->npending] = now_s(c);
        c->pending_live_step[c->npending] = c->gstep;
        c->pending_live_inc[c->npending] = c->inc;
        c->npending++;
    }
}

static void
do_fault(chaos *c, const fault *f, double *up_at, pid_t **stopped, int64_t *resume_step)
{
    if (f->role == ROLE_COORD) {
        kill9(&c->coord);
        c->kills[ROLE_COORD]++;
        note(c, ROLE_COORD, 0, "kill");
        *up_at = now_s(c) + f->down_s;
        *resume_step = f->resume ? -2 : -1; /* -2: pick a retained step at the restart */
        return;
    }
    pid_t *p = &c->wpid[f->task];
    if (f->task >= c->nworkers || *p <= 0) {
        return; /* resized away or already down */
    }
    if (f->action == ACT_STOP) {
        kill(*p, SIGSTOP);
        c->stops++;
        note(c, f->role, f->task, "stop");
        *stopped = p;
    } else {
        kill9(p);
        c->kills[f->role]++;
        note(c, f->role, f->task, "kill");
    }
    *up_at = now_s(c) + f->down_s;
}

static void
print_progress(chaos *c, int final)
{
    static double last_line = -100;
    double        t = now_s(c);
    double        rate = t > 0 ? c->gstep / t : 0;
    int           tty = isatty(2);

    if (!tty && !final && t - last_line < 5.0) {
        return; /* a log file gets a line every 5 s, not a redrawn one */
    }
    last_line = t;
    fprintf(stderr,
            "%s[chaos] %5.1fs  step %-7" PRId64 " %6.1f steps/s  kills: coordinator %d chief %d "
            "worker %d  stops %d  restarts %d  workers %d%s",
            tty ? "\r" : "", t, c->gstep, rate, c->kills[0], c->kills[1], c->kills[2], c->stops,
            c->restarts[0] + c->restarts[1] + c->restarts[2], c->nworkers,
            final || !tty ? "\n" : "   ");
}

typedef struct {
    int     role, task;
    double  at;
    int     is_cont;
    pid_t  *pid;
    int64_t resume;
} pending_up;

static void
run(chaos *c)
{
    pending_up up[MAX_EVENTS];
    int        nup = 0, next = 0;
    double     last_print = -1;

    c->curR = c->R;
    c->curM = c->M;
    c->nworkers = c->workers;
    c->coord_restart_t = -1;
    start_coordinator(c, -1);
    for (int i = 0; i < c->workers; i++) {
        start_worker(c, i);
    }
    while (!chaos_interrupted && now_s(c) < c->duration) {
        double t = now_s(c);
        reap_all(c);
        while (next < c->nplan && c->plan[next].t <= t) {
            const fault *f = &c->plan[next++];
            double       at = 0;
            pid_t       *stopped = NULL;
            int64_t      resume = -1;
            if (f->role == ROLE_COORD && c->coord <= 0) {
                continue; /* already down */
            }
            do_fault(c, f, &at, &stopped, &resume);
            if (at > 0 && nup < MAX_EVENTS) {
                pending_up *u = &up[nup++];
                u->role = f->role;
                u->task = f->task;
                u->at = at;
                u->is_cont = stopped != NULL;
                u->pid = stopped;
                u->resume = resume;
                if (f->role == ROLE_COORD && f->resize_to > 0) {
                    u->task = f->resize_to; /* carried to the restart */
                }
            }
        }
        for (int i = 0; i < nup; i++) {
            pending_up *u = &up[i];
            if (u->at > t) {
                continue;
            }
            if (u->is_cont) {
                if (*u->pid > 0) {
                    kill(*u->pid, SIGCONT);
                }
                note(c, u->role, u->task, "cont");
                expect_progress(c);
            } else if (u->role == ROLE_COORD) {
                int64_t rs = -1;
                if (u->task > 0) {
                    resize_to(c, u->task);
                }
                if (u->resume == -2 && (rs = resume_target(c)) >= 0) {
                    c->resumes++;
                    note(c, ROLE_COORD, 0, "resume");
                }
                start_coordinator(c, rs);
                c->restarts[ROLE_COORD]++;
                note(c, ROLE_COORD, 0, "restart");
                c->coord_restart_t = t;
                c->coord_restart_inc = c->inc;
                expect_progress(c);
            } else if (u->task < c->nworkers && c->wpid[u->task] <= 0) {
                start_worker(c, u->task);
                c->restarts[u->role]++;
                note(c, u->role, u->task, "restart");
                expect_progress(c);
            }
            up[i] = up[--nup];
            i--;
        }
        if (poll_status(c) == 0) {
            if (c->nsamples < MAX_SAMPLES) {
                c->samples[c->nsamples].t = now_s(c);
                c->samples[c->nsamples].step = c->gstep;
                c->nsamples++;
            }
            /* Recovery: the restarted coordinator's first applied step. */
            if (c->coord_restart_t >= 0 && c->inc != c->coord_restart_inc &&
                c->gstep > c->restored) {
                if (c->nrecovery < 256) {
                    c->recovery[c->nrecovery++] = now_s(c) - c->coord_restart_t;
                }
                c->coord_restart_t = -1;
            }
            /* Liveness: a step applied since each restart. */
            for (int i = 0; i < c->npending; i++) {
                int progressed = c->inc == c->pending_live_inc[i]
                                     ? c->gstep > c->pending_live_step[i]
                                     : c->gstep > c->restored;
                if (progressed) {
                    c->npending--;
                    c->pending_live_t[i] = c->pending_live_t[c->npending];
                    c->pending_live_step[i] = c->pending_live_step[c->npending];
                    c->pending_live_inc[i] = c->pending_live_inc[c->npending];
                    i--;
                }
            }
        }
        if (now_s(c) - last_print >= 0.5) {
            print_progress(c, 0);
            last_print = now_s(c);
        }
        sr_clock_sleep_ms(50);
    }
    /* Whatever is still stopped gets going again, then everything stops. */
    for (int i = 0; i < nup; i++) {
        if (up[i].is_cont && *up[i].pid > 0) {
            kill(*up[i].pid, SIGCONT);
        }
    }
    poll_status(c);
    print_progress(c, 1);
    if (c->npending > 0) {
        c->liveness_failed = 1;
        snprintf(c->liveness_detail, sizeof(c->liveness_detail),
                 "%d restart(s) not followed by progress; the first at %.1fs (step %" PRId64 ")",
                 c->npending, c->pending_live_t[0], c->pending_live_step[0]);
    }
    if (c->nrecovery == 0 && c->restarts[ROLE_COORD] > 0) {
        c->liveness_failed = 1;
        snprintf(c->liveness_detail, sizeof(c->liveness_detail),
                 "no coordinator restart was followed by an applied step");
    }
    stop_pid(&c->coord, 10000);
    for (int i = 0; i < MAX_WORKERS; i++) {
        stop_pid(&c->wpid[i], 2000);
    }
    reap_all(c);
}

/* ---- report ------------------------------------------------------------- */

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void
write_svg(chaos *c)
{
    char    path[PATH_MAX + 32];
    FILE   *f;
    double  W = 900, H = 420, L = 70, B = 50, T = 40, Rm = 150;
    double  tmax = c->duration > 0 ? c->duration : 1;
    int64_t smax = 1;

    for (int i = 0; i < c->nsamples; i++) {
        if (c->samples[i].step > smax) {
            smax = c->samples[i].step;
        }
    }
    snprintf(path, sizeof(path), "%s/timeline.svg", c->out);
    if ((f = fopen(path, "w")) == NULL) {
        return;
    }
    double pw = W - L - Rm, ph = H - T - B;
#define X(t) (L + (t) / tmax * pw)
#define Y(s) (T + ph - (double)(s) / (double)smax * ph)
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n",
            W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f,
            "<text x=\"%.0f\" y=\"22\" font-size=\"15\">syncrep chaos: seed %" PRIu64
            ", %d kills, %d restarts, global step %" PRId64 "</text>\n",
            L, c->seed, c->kills[0] + c->kills[1] + c->kills[2],
            c->restarts[0] + c->restarts[1] + c->restarts[2], c->gstep);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", L,
            T + ph, L + pw, T + ph);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", L, T,
            L, T + ph);
    for (int k = 0; k <= 5; k++) {
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0fs</text>\n",
                X(tmax * k / 5), T + ph + 18, tmax * k / 5);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%" PRId64 "</text>\n", L - 6,
                Y(smax * k / 5) + 4, smax * k / 5);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">time</text>\n", L + pw / 2,
            H - 10);
    fprintf(f,
            "<text x=\"16\" y=\"%.1f\" transform=\"rotate(-90 16 %.1f)\" "
            "text-anchor=\"middle\">global step</text>\n",
            T + ph / 2, T + ph / 2);
    for (int i = 0; i < c->nev; i++) {
        const event *e = &c->ev[i];
        int          restart = strcmp(e->what, "restart") == 0 || strcmp(e->what, "cont") == 0;
        if (strcmp(e->what, "kill") && strcmp(e->what, "stop") && !restart) {
            continue;
        }
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"%s\" %s opacity=\"0.8\"><title>%.2fs %s %s %d</title></line>\n",
                X(e->t), T, X(e->t), T + ph, role_color[e->role], restart ? "1" : "2",
                restart ? "stroke-dasharray=\"4 3\"" : "", e->t, role_name[e->role], e->what,
                e->task);
    }
    fprintf(f, "<polyline fill=\"none\" stroke=\"black\" stroke-width=\"1.5\" points=\"");
    for (int i = 0; i < c->nsamples; i++) {
        fprintf(f, "%.1f,%.1f ", X(c->samples[i].t), Y(c->samples[i].step));
    }
    fprintf(f, "\"/>\n");
    for (int r = 0; r < 3; r++) {
        double y = T + 10 + r * 36;
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"2\"/>\n",
                L + pw + 14, y, L + pw + 34, y, role_color[r]);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%s kill</text>\n", L + pw + 40, y + 4,
                role_name[r]);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-dasharray=\"4 3\"/>\n",
                L + pw + 14, y + 16, L + pw + 34, y + 16, role_color[r]);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%s restart</text>\n", L + pw + 40, y + 20,
                role_name[r]);
    }
    fprintf(f, "</svg>\n");
#undef X
#undef Y
    fclose(f);
}

static int
write_report(chaos *c, const sr_chaos_check *checks, int nchecks, int passed, int64_t gstep)
{
    sr_strbuf   b;
    const char *text;
    char        path[PATH_MAX + 32];
    double      p50 = 0, mx = 0;
    FILE       *f;

    if (c->nrecovery > 0) {
        qsort(c->recovery, (size_t)c->nrecovery, sizeof(double), cmp_double);
        p50 = c->recovery[(c->nrecovery - 1) / 2];
        mx = c->recovery[c->nrecovery - 1];
    }
    sr_strbuf_init(&b);
    sr_strbuf_printf(&b,
                     "{\n  \"passed\": %s,\n  \"seed\": %" PRIu64 ",\n  \"global_step\": %" PRId64
                     ",\n  \"config\": {\"workers\": %d, \"replicas_to_aggregate\": %d, "
                     "\"total_replicas\": %d, \"duration_s\": %.1f, \"kill_every_s\": %.2f, "
                     "\"checkpoint_every_steps\": %d, \"optimizer\": \"%s\", \"commit\": \"%s\", "
                     "\"partition_bytes\": %" PRId64 ", \"targets\": [",
                     passed ? "true" : "false", c->seed, gstep, c->workers, c->R, c->M, c->duration,
                     c->kill_every, c->checkpoint_every, sr__optim_name(c->optim.kind),
                     c->commit_async ? "async" : "sync", c->partition_bytes);
    int first = 1;
    for (int i = 0; i < 3; i++) {
        if (c->targets[i]) {
            sr_strbuf_printf(&b, "%s\"%s\"", first ? "" : ", ", role_name[i]);
            first = 0;
        }
    }
    sr_strbuf_printf(&b, "], \"resize\": [");
    for (int i = 0; i < c->nresize; i++) {
        sr_strbuf_printf(&b, "%s%d", i ? ", " : "", c->resize[i]);
    }
    sr_strbuf_printf(&b,
                     "]},\n  \"kills\": {\"coordinator\": %d, \"chief\": %d, \"worker\": %d},\n"
                     "  \"stops\": %d,\n  \"restarts\": {\"coordinator\": %d, \"chief\": %d, "
                     "\"worker\": %d, \"total\": %d},\n  \"resizes\": %d,\n  \"resumes\": %d,\n"
                     "  \"recovery_seconds\": {\"count\": %d, \"p50\": %.3f, \"max\": %.3f},\n"
                     "  \"invariants\": [\n",
                     c->kills[0], c->kills[1], c->kills[2], c->stops, c->restarts[0],
                     c->restarts[1], c->restarts[2],
                     c->restarts[0] + c->restarts[1] + c->restarts[2], c->resizes, c->resumes,
                     c->nrecovery, p50, mx);
    for (int i = 0; i < nchecks; i++) {
        sr_strbuf_printf(&b, "    {\"name\": ");
        sr_strbuf_json_str(&b, checks[i].name);
        sr_strbuf_printf(&b, ", \"passed\": %s, \"detail\": ", checks[i].passed ? "true" : "false");
        sr_strbuf_json_str(&b, checks[i].detail);
        sr_strbuf_printf(&b, "}%s\n", i + 1 < nchecks ? "," : "");
    }
    sr_strbuf_printf(&b, "  ],\n  \"events\": [");
    for (int i = 0; i < c->nev; i++) {
        sr_strbuf_printf(&b, "%s\n    {\"t\": %.3f, \"role\": \"%s\", \"task\": %d, \"what\": ",
                         i ? "," : "", c->ev[i].t, role_name[c->ev[i].role], c->ev[i].task);
        sr_strbuf_json_str(&b, c->ev[i].what);
        sr_strbuf_printf(&b, "}");
    }
    sr_strbuf_printf(&b, "\n  ]\n}\n");
    snprintf(path, sizeof(path), "%s/report.json", c->out);
    if (sr_strbuf_result(&b, &text) != SR_OK || (f = fopen(path, "w")) == NULL) {
        sr_strbuf_free(&b);
        return -1;
    }
    fputs(text, f);
    fclose(f);
    sr_strbuf_free(&b);
    return 0;
}

/* ---- main --------------------------------------------------------------- */

static const char usage_text[] =
    "usage: syncrep chaos --workers N --replicas-to-aggregate R [--total-replicas M]\n"
    "                     --duration SECONDS --seed S [--kill-every SECONDS]\n"
    "                     [--targets coordinator,chief,worker] [--resize 4,3,5]\n"
    "                     [--checkpoint-every-steps K] [--commit sync|async]\n"
    "                     [--optimizer sgd|momentum|adam] [--partition-bytes B]\n"
    "                     [--wal-limit-kib K] [--out DIR] [--print-plan]\n"
    "\n"
    "Runs a real coordinator and N real workers of a deterministic model, kills and\n"
    "restarts them on a schedule drawn from the seed, then verifies from the store:\n"
    "replay (bit for bit), strictness, exactly R, R distinct tasks (at most ceil(R/N)\n"
    "gradients of one task in a step), no lost commits, liveness.\n"
    "Writes DIR/report.json and DIR/timeline.svg; exit 0 only if all hold.\n"
    "--print-plan prints the fault schedule the seed gives, and runs nothing.\n"
    "--partition-bytes B (e.g. 32) splits the model's variables into partitions.\n"
    "--wal-limit-kib K (e.g. 64) makes the store's WAL checkpoints run all the time.\n";

static int
parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        long  v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > MAX_WORKERS) {
            return -1;
        }
        out[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') {
            return -1;
        }
    }
    return n;
}

static int
parse_args(chaos *c, int argc, char **argv)
{
    long long v;
    double    d;
    int       have_targets = 0;

    c->workers = 0;
    c->R = 0;
    c->M = 0;
    c->duration = 0;
    c->kill_every = 2.0;
    c->checkpoint_every = 1;
    c->partition_bytes = -1;
    c->optim.kind = SR_OPT_ADAM;
    c->optim.lr = 0.05;
    c->optim.beta1 = 0.9;
    c->optim.beta2 = 0.999;
    c->optim.epsilon = 1e-8;
    c->optim.momentum = 0.9;
    c->optim.ema = 1;
    c->optim.ema_decay = 0.9;
    snprintf(c->out, sizeof(c->out), "chaos-out");
    int have_seed = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            return 1;
        }
        if (strcmp(a, "--print-plan") == 0) {
            c->print_plan = 1;
            continue;
        }
        if (i + 1 >= argc) {
            return sr__cli_usage_error("chaos", "%s needs a value", a);
        }
        const char *val = argv[++i];
        int         bad = 0;
        if (strcmp(a, "--workers") == 0) {
            bad = sr__cli_parse_i64(val, 1, MAX_WORKERS, &v);
            c->workers = (int)v;
        } else if (strcmp(a, "--replicas-to-aggregate") == 0) {
            bad = sr__cli_parse_i64(val, 1, MAX_WORKERS * 4, &v);
            c->R = (int)v;
        } else if (strcmp(a, "--total-replicas") == 0) {
            bad = sr__cli_parse_i64(val, 1, MAX_WORKERS * 4, &v);
            c->M = (int)v;
        } else if (strcmp(a, "--duration") == 0) {
            bad = sr__cli_parse_f64(val, &d) || d <= 0;
            c->duration = d;
        } else if (strcmp(a, "--seed") == 0) {
            bad = sr__cli_parse_i64(val, 0, INT64_MAX, &v);
            c->seed = (uint64_t)v;
            have_seed = 1;
        } else if (strcmp(a, "--kill-every") == 0) {
            bad = sr__cli_parse_f64(val, &d) || d < 0;
            c->kill_every = d;
        } else if (strcmp(a, "--checkpoint-every-steps") == 0) {
            bad = sr__cli_parse_i64(val, 1, 1000000, &v);
            c->checkpoint_every = (int)v;
        } else if (strcmp(a, "--commit") == 0) {
            bad = strcmp(val, "sync") != 0 && strcmp(val, "async") != 0;
            c->commit_async = strcmp(val, "async") == 0;
        } else if (strcmp(a, "--partition-bytes") == 0) {
            bad = sr__cli_parse_i64(val, 0, 1LL << 40, &v);
            c->partition_bytes = v;
        } else if (strcmp(a, "--wal-limit-kib") == 0) {
            bad = sr__cli_parse_i64(val, 1, 1LL << 30, &v);
            c->wal_limit_kib = v;
        } else if (strcmp(a, "--optimizer") == 0) {
            bad = sr__optim_parse(val, &c->optim.kind) != SR_OK;
        } else if (strcmp(a, "--out") == 0) {
            bad = sr_snprintf(c->out, sizeof(c->out), "%s", val) != SR_OK;
        } else if (strcmp(a, "--resize") == 0) {
            c->nresize = parse_list(val, c->resize, 16);
            bad = c->nresize <= 0;
        } else if (strcmp(a, "--targets") == 0) {
            have_targets = 1;
            memset(c->targets, 0, sizeof(c->targets));
            char buf[128];
            snprintf(buf, sizeof(buf), "%s", val);
            for (char *tok = strtok(buf, ","); tok != NULL; tok = strtok(NULL, ",")) {
                int k;
                for (k = 0; k < 3 && strcmp(tok, role_name[k]) != 0; k++) {
                }
                if (k == 3) {
                    return sr__cli_usage_error("chaos", "unknown target '%s'", tok);
                }
                c->targets[k] = 1;
            }
        } else {
            return sr__cli_usage_error("chaos", "unknown option '%s'", a);
        }
        if (bad) {
            return sr__cli_usage_error("chaos", "bad value '%s' for %s", val, a);
        }
    }
    if (c->workers < 1 || c->R < 1 || c->duration <= 0 || !have_seed) {
        return sr__cli_usage_error("chaos", "--workers, --replicas-to-aggregate, --duration "
                                            "and --seed are required");
    }
    if (c->M == 0) {
        c->M = c->workers;
    }
    if (c->M < c->R) {
        return sr__cli_usage_error("chaos",
                                   "--total-replicas %d < R %d: the harness runs one "
                                   "batch per worker per step",
                                   c->M, c->R);
    }
    if (!have_targets) {
        c->targets[0] = c->targets[1] = c->targets[2] = 1;
    }
    return 0;
}

int
sr__chaos_main(int argc, char **argv)
{
    chaos            *c = calloc(1, sizeof(chaos));
    sr_chaos_evidence e;
    sr_chaos_check    checks[SR_CHAOS_NCHECKS + 1];
    int               rc, passed;
    ssize_t           n;

    if (c == NULL) {
        fprintf(stderr, "syncrep chaos: out of memory\n");
        return 1;
    }
    if ((rc = parse_args(c, argc, argv)) != 0) {
        free(c);
        return rc == 1 ? 0 : rc;
    }
    if ((n = readlink("/proc/self/exe", c->self, sizeof(c->self) - 1)) <= 0) {
        fprintf(stderr, "syncrep chaos: cannot find my own binary: %s\n", strerror(errno));
        free(c);
        return 1;
    }
    c->self[n] = '\0';
    if (c->print_plan) {
        make_plan(c);
        for (int i = 0; i < c->nplan; i++) {
            const fault *f = &c->plan[i];
            printf("%8.3f %-11s task %-2d %-4s down %.3f resize %d resume %d\n", f->t,
                   role_name[f->role], f->task, f->action == ACT_STOP ? "stop" : "kill", f->down_s,
                   f->resize_to, f->resume);
        }
        free(c);
        return 0;
    }
    if (mkdir(c->out, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "syncrep chaos: mkdir %s: %s\n", c->out, strerror(errno));
        free(c);
        return 1;
    }
    snprintf(c->store, sizeof(c->store), "%s/store.db", c->out);
    if (access(c->store, F_OK) == 0) {
        fprintf(stderr, "syncrep chaos: %s exists; use a fresh --out directory\n", c->store);
        free(c);
        return 1;
    }
    char abs[PATH_MAX];
    if (realpath(c->out, abs) == NULL) {
        snprintf(abs, sizeof(abs), "%s", c->out);
    }
    snprintf(c->endpoint, sizeof(c->endpoint), "ipc://%s/coord.sock", abs);
    for (int i = 0; i < 1024; i++) {
        c->max_committed_before_inc[i] = -1;
    }
    make_plan(c);
    fprintf(stderr,
            "[chaos] seed %" PRIu64 ": %d workers, R=%d, N=%d, %.0fs, %d faults planned, out %s\n",
            c->seed, c->workers, c->R, c->M, c->duration, c->nplan, c->out);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_int;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if ((rc = sr_status_client_open(&c->status, c->endpoint)) != SR_OK) {
        fprintf(stderr, "syncrep chaos: %s\n", sr_errdetail());
        free(c);
        return 2;
    }
    c->t0 = sr_clock_now_ms() / 1000.0;
    run(c);
    sr_status_client_close(c->status);
    c->status = NULL;

    /* Verify from the store. */
    memset(checks, 0, sizeof(checks));
    rc = sr_chaos_load(c->store, c->seed, &c->optim, &e);
    if (rc != SR_OK) {
        fprintf(stderr, "syncrep chaos: cannot load %s: %s: %s\n", c->store, sr_strerror(rc),
                sr_errdetail());
        for (int i = 0; i < SR_CHAOS_NCHECKS; i++) {
            checks[i].name = sr__chaos_check_name(i);
            snprintf(checks[i].detail, sizeof(checks[i].detail), "store unreadable");
        }
        passed = 0;
    } else {
        for (size_t i = 1; i < e.nincs && i < 1024; i++) {
            /* The most the previous incarnation was seen to have committed. */
            uint64_t prev = e.incs[i - 1].incarnation;
            e.min_restore[i] = prev < 1024 ? c->max_committed_before_inc[prev] : -1;
        }
        passed = sr_chaos_verify(&e, checks);
    }
    sr_chaos_check *live = &checks[SR_CHAOS_NCHECKS];
    live->name = "liveness";
    live->passed = !c->liveness_failed;
    snprintf(live->detail, sizeof(live->detail), "%s",
             c->liveness_failed ? c->liveness_detail : "ok");
    passed = passed && live->passed;
    write_report(c, checks, SR_CHAOS_NCHECKS + 1, passed, rc == SR_OK ? e.global_step : c->gstep);
    write_svg(c);
    for (int i = 0; i <= SR_CHAOS_NCHECKS; i++) {
        fprintf(stderr, "[chaos] %-16s %s%s%s\n", checks[i].name,
                checks[i].passed ? "PASS" : "FAIL", checks[i].passed ? "" : ": ",
                checks[i].passed ? "" : checks[i].detail);
    }
    fprintf(stderr,
            "[chaos] %s: global step %" PRId64
            ", report %s/report.json, timeline %s/timeline.svg\n",
            passed ? "PASSED" : "FAILED", rc == SR_OK ? e.global_step : c->gstep, c->out, c->out);
    if (rc == SR_OK) {
        sr_chaos_evidence_free(&e);
    }
    free(c);
    return passed ? 0 : 1;
}

int
sr__chaos_worker_cli(int argc, char **argv)
{
    const char *endpoint = NULL;
    long long   task = -1, seed = -1, timeout = 60000;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--connect") == 0) {
            endpoint = argv[i + 1];
        } else if (strcmp(argv[i], "--task-index") == 0) {
            sr__cli_parse_i64(argv[i + 1], 0, MAX_WORKERS, &task);
        } else if (strcmp(argv[i], "--seed") == 0) {
            sr__cli_parse_i64(argv[i + 1], 0, INT64_MAX, &seed);
        } else if (strcmp(argv[i], "--timeout-ms") == 0) {
            sr__cli_parse_i64(argv[i + 1], 1, 3600000, &timeout);
        }
    }
    if (endpoint == NULL || task < 0 || seed < 0) {
        return sr__cli_usage_error("chaos-worker", "--connect, --task-index and --seed are "
                                                   "required");
    }
    return sr__chaos_worker_main(endpoint, (int)task, (uint64_t)seed, (int)timeout);
}
