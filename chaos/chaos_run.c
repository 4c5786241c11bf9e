/*
 * Running a chaos job: the processes (spawn, start_coordinator,
 * start_worker, reap_all, stop_pid, kill9 on tools/proc.h), the
 * coordinator's state seen through STATUS (poll_status), the faults as
 * planned (do_fault, resize_to, resume_target), liveness after each
 * restart (expect_progress), the events noted for the report (note,
 * print_progress), and the loop itself (sr__chaos_run).  docs/chaos.md.
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
#include "core/clock.h"
#include "core/log.h"
#include "core/strbuf.h"
#include "tools/coord_argv.h"
#include "tools/proc.h"
#include "tools/status_client.h"
#include "wire/wire.h"

#include "chaos/chaos_int.h"

static volatile sig_atomic_t chaos_interrupted;

void
sr__chaos_on_signal(int sig)
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
    sr_coord_argv_recipe(&a, &c->optim); /* issue 25: schedule, weight decay, clipping */
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

void
sr__chaos_run(chaos *c)
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
