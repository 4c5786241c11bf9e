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
#include <zmq.h>

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

/* host: in the namespace network (issue 27), the host it runs on (0 the
 * coordinator's, i worker i-1's); the child is forked there. */
static pid_t
spawn(chaos *c, char *const argv[], const char *log_name, int host)
{
    char  path[PATH_MAX + 64];
    int   saved = -1;
    pid_t pid;

    snprintf(path, sizeof(path), "%s/%s", c->out, log_name);
    if (c->net_up && sr__chaos_net_enter(&c->net, host, &saved) != 0) {
        return -1;
    }
    pid = sr_proc_spawn(argv, path, 0); /* the harness's children die with it */
    sr__chaos_net_leave(saved);
    return pid;
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
    if (c->checkpoint_budget > 0) {      /* issue 28 */
        sr_coord_argv_opt(&a, "--checkpoint-budget", "%g", c->checkpoint_budget);
    } else {
        sr_coord_argv_opt(&a, "--checkpoint-every-steps", "%d", c->checkpoint_every);
    }
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
    /* issue 26: elastic membership. */
    if (c->min_replicas > 0) {
        sr_coord_argv_opt(&a, "--min-replicas", "%d",
                          c->min_replicas < c->curR ? c->min_replicas : c->curR);
    }
    if (c->worker_timeout_ms > 0) {
        sr_coord_argv_opt(&a, "--worker-timeout-ms", "%d", c->worker_timeout_ms);
    }
    if (c->elastic_targets[1] || c->resize_runtime) {
        sr_coord_argv_opt(&a, "--max-tasks", "%d", MAX_WORKERS);
    }
    c->coord =
        sr_coord_argv_get(&a) != NULL ? spawn(c, sr_coord_argv_get(&a), "coordinator.log", 0) : -1;
}

static void
start_worker(chaos *c, int task)
{
    char  t[16], s[32], log[32];
    char *argv[] = {c->self,
                    "chaos-worker",
                    "--connect",
                    c->endpoint,
                    "--task-index",
                    t,
                    "--seed",
                    s,
                    c->model_api ? "--model-api" : NULL,
                    NULL};
    snprintf(t, sizeof(t), "%d", task);
    snprintf(s, sizeof(s), "%" PRIu64, c->seed);
    snprintf(log, sizeof(log), "worker-%d.log", task);
    c->wpid[task] = spawn(c, argv, log, task + 1);
}

static void note(chaos *c, int role, int task, const char *what);

/* A process the harness did not kill exited (every kill reaps its own):
 * issue 27, a worker that gave up with an error stalled a run with R = N
 * for ever, unseen.  Noted, restarted 0.5 s later (sr__chaos_run), and the
 * run fails liveness naming it. */
static void
self_exit(chaos *c, int role, int task, int st)
{
    double t = sr_clock_now_ms() / 1000.0 - c->t0;
    c->exited_at[role == ROLE_COORD ? MAX_WORKERS : task] = t;
    c->self_exits++;
    note(c, role, task, "exited");
    fprintf(stderr, "[chaos] %s %d exited by itself (%s %d) at %.1fs\n", sr__chaos_role_name[role],
            task, WIFEXITED(st) ? "exit status" : "signal",
            WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), t);
    if (c->self_exits == 1) {
        snprintf(c->self_exit_detail, sizeof(c->self_exit_detail),
                 "%s %d exited by itself (%s %d) at %.1fs: see its log", sr__chaos_role_name[role],
                 task, WIFEXITED(st) ? "exit status" : "signal",
                 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), t);
    }
}

static void
reap_all(chaos *c)
{
    int   st;
    pid_t p;
    while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
        if (p == c->coord) {
            c->coord = 0;
            self_exit(c, ROLE_COORD, 0, st);
        }
        for (int i = 0; i < MAX_WORKERS; i++) {
            if (c->wpid[i] == p) {
                c->wpid[i] = 0;
                self_exit(c, i == 0 ? ROLE_CHIEF : ROLE_WORKER, i, st);
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
    if (sr__chaos_json_i64(json, "interval_steps", &c->interval)) { /* issue 28 */
        c->interval = -1;
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

/* issue 28: a coordinator kill is about to happen: the global step and the
 * checkpoint interval just before it (unknown: not judged). */
static void
crash_start(chaos *c)
{
    c->crash_open = poll_status(c) == 0 && c->interval > 0;
    c->crash_gstep = c->gstep;
    c->crash_interval = c->interval;
    c->crash_inc = c->inc;
}

/* issue 28: the incarnation after the kill answered: the steps it lost.
 * With --commit sync a step the policy commits holds its tokens until the
 * commit is done, so fewer than the interval are ever uncommitted; async
 * may lose the writer's snapshot too (reported, not judged). */
static void
crash_judge(chaos *c)
{
    int64_t lost = c->crash_gstep - c->restored;

    c->crash_open = 0;
    if (lost < 0) {
        lost = 0; /* more was committed than the last poll saw */
    }
    c->crash_n++;
    c->crash_sum_lost += lost;
    if (lost > c->crash_max_lost) {
        c->crash_max_lost = lost;
    }
    if (c->crash_interval > c->crash_max_interval) {
        c->crash_max_interval = c->crash_interval;
    }
    if (!c->commit_async && lost >= c->crash_interval && lost > 0) {
        if (c->crash_over++ == 0) {
            snprintf(c->crash_detail, sizeof(c->crash_detail),
                     "a coordinator kill at step %" PRId64 " lost %" PRId64
                     " steps (restored %" PRId64 "), not fewer than the interval %" PRId64,
                     c->crash_gstep, lost, c->restored, c->crash_interval);
        }
    }
}

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

static void ctl_resize(chaos *c, int n); /* issue 26, below */

static void
do_fault(chaos *c, const fault *f, double *up_at, pid_t **stopped, int64_t *resume_step)
{
    if (f->action == ACT_RESIZE) {
        ctl_resize(c, f->resize_to);
        return;
    }
    if (f->action == ACT_JOIN) {
        if (c->nworkers < MAX_WORKERS && c->nworkers < c->workers + MAX_JOINED) {
            start_worker(c, c->nworkers);
            note(c, ROLE_WORKER, c->nworkers, "join");
            c->nworkers++;
            c->joins++;
        } else if (c->nworkers > 1) {
            /* At the cap: the newest task leaves (BYE), a later join brings it back. */
            c->nworkers--;
            stop_pid(&c->wpid[c->nworkers], 1500);
            note(c, ROLE_WORKER, c->nworkers, "leave");
            c->leaves++;
        }
        return;
    }
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
    } else if (f->action == ACT_LOSS) {
        kill9(p);
        c->losses++;
        note(c, f->role, f->task, "loss");
    } else {
        kill9(p);
        c->kills[f->role]++;
        note(c, f->role, f->task, "kill");
    }
    *up_at = now_s(c) + f->down_s;
}

/* ---- issue 26: elastic faults ------------------------------------------ */

/* CTL set-replicas R, N (and M when the run has one) to the coordinator:
 * 0 when it took the change (docs/protocol.md, "CTL (12)"). */
static int
send_ctl(chaos *c, int R, int N)
{
    void           *ctx = NULL, *sock = NULL;
    uint8_t         hb[SR_WIRE_HEADER_BYTES], body[SR_WIRE_CTL_REQ_BYTES];
    sr_wire_header  h;
    sr_wire_ctl_req q = {SR_WIRE_CTL_SET_REPLICAS, SR_WIRE_CTL_R | SR_WIRE_CTL_N, R, N, 0, 0};
    int             zero = 0, rc = -1, saved = -1;

    if (c->net_up && sr__chaos_net_enter(&c->net, 0, &saved) != 0) {
        return -1;
    }
    /* In the network (issue 27), from the coordinator's host: the context's
     * I/O thread starts there (the socket below is its first). */
    ctx = zmq_ctx_new();
    sock = ctx ? zmq_socket(ctx, ZMQ_DEALER) : NULL;
    if (c->min_replicas > 0) {
        q.fields |= SR_WIRE_CTL_M;
        q.min_replicas = c->min_replicas < R ? c->min_replicas : R;
    }
    if (sock != NULL && zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof(zero)) == 0 &&
        zmq_connect(sock, c->endpoint) == 0) {
        memset(&h, 0, sizeof(h));
        h.type = SR_MSG_CTL;
        h.request_id = 1;
        h.task_index = -1;
        sr_wire_header_encode(&h, hb);
        sr_wire_ctl_req_encode(&q, body, sizeof(body));
        zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
        if (zmq_send(sock, hb, sizeof(hb), ZMQ_SNDMORE) >= 0 &&
            zmq_send(sock, body, sizeof(body), 0) >= 0 && zmq_poll(&it, 1, 3000) > 0) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, sock, 0) >= 0 &&
                sr_wire_header_decode(zmq_msg_data(&m), zmq_msg_size(&m), &h) == SR_OK &&
                h.status == SR_OK) {
                rc = 0;
            }
            zmq_msg_close(&m);
        }
    }
    if (sock != NULL) {
        zmq_close(sock);
    }
    if (ctx != NULL) {
        zmq_ctx_term(ctx);
    }
    sr__chaos_net_leave(saved);
    return rc;
}

/* The coordinator's replicas_to_aggregate is r (polled for up to 10 s). */
static int
wait_replicas(chaos *c, int r)
{
    for (int i = 0; i < 200; i++) {
        char   *json = NULL;
        size_t  len;
        int     status;
        int64_t v = -1;
        if (sr_status_client_ask(c->status, 200, &status, &json, &len) == SR_OK &&
            status == SR_OK) {
            sr__chaos_json_i64(json, "replicas_to_aggregate", &v);
        }
        free(json);
        if (v == r) {
            return 0;
        }
        sr_clock_sleep_ms(50);
    }
    return -1;
}

/* Resize to n workers through CTL, no restart: a grown job's workers start
 * first; a shrunk one's extra workers stop only once the coordinator no
 * longer needs their gradients (R in force lowered). */
static void
ctl_resize(chaos *c, int n)
{
    int backups = c->M - c->R;
    int R = n - backups >= 1 ? n - backups : 1;

    if (n < 1 || n == c->nworkers || c->coord <= 0) {
        return;
    }
    for (int i = c->nworkers; i < n; i++) {
        start_worker(c, i);
    }
    if (send_ctl(c, R, n) != 0 || wait_replicas(c, R) != 0) {
        c->ctl_failures++;
        note(c, ROLE_COORD, n, "ctl-fail");
        return;
    }
    for (int i = n; i < c->nworkers; i++) {
        stop_pid(&c->wpid[i], 1500);
    }
    c->ctl_resizes++;
    note(c, ROLE_COORD, n, "ctl-resize");
    c->nworkers = n;
    c->curM = n;
    c->curR = R;
}

/* Workers running and not stopped (a SIGSTOPped one is not counted). */
static int
workers_up(const chaos *c, pid_t *const *stopped, int nstopped)
{
    int n = 0;
    for (int i = 0; i < c->nworkers; i++) {
        int st = 0;
        for (int k = 0; k < nstopped; k++) {
            st |= stopped[k] == &c->wpid[i];
        }
        n += c->wpid[i] > 0 && !st;
    }
    return n;
}

/* A loss to judge: the job must apply two steps within the worker timeout
 * + 1 s (the one in progress may have had the dead worker's gradient; the
 * next one cannot wait for it longer than the timeout). */
static void
judge_loss_start(chaos *c, int up)
{
    int m = c->min_replicas > 0 && c->min_replicas < c->curR ? c->min_replicas : c->curR;

    if (c->loss_t >= 0) {
        c->loss_unjudged++; /* another fault in its window: not judged */
        c->loss_t = -1;
    }
    if (up < m) {
        c->loss_unjudged++; /* fewer than M left: the job must wait */
        return;
    }
    if (poll_status(c) != 0) {
        c->loss_unjudged++; /* the step at the kill is not known */
        return;
    }
    c->loss_t = now_s(c);
    c->loss_step = c->gstep;
    c->loss_inc = c->inc;
}

static void
judge_loss_poll(chaos *c)
{
    double bound = (c->worker_timeout_ms > 0 ? c->worker_timeout_ms : 10000) / 1000.0 + 1.0;
    double waited = now_s(c) - c->loss_t;

    if (c->loss_t < 0) {
        return;
    }
    if (c->inc != c->loss_inc) {
        c->loss_unjudged++;
        c->loss_t = -1;
    } else if (c->gstep >= c->loss_step + 2) {
        c->loss_judged++;
        if (waited > c->loss_worst_s) {
            c->loss_worst_s = waited;
        }
        c->loss_t = -1;
    } else if (waited > bound) {
        c->loss_judged++;
        if (!c->loss_failed) {
            c->loss_failed = 1;
            snprintf(c->loss_detail, sizeof(c->loss_detail),
                     "after the loss at %.1fs (step %" PRId64 ") no two steps within %.1f s",
                     c->loss_t, c->loss_step, bound);
        }
        c->loss_t = -1;
    }
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

/* A coordinator (re)started on the same store: with `resize` workers first
 * (0: as many as now), and from a retained step when resume is -2. */
static void
restart_coordinator(chaos *c, double t, int resize, int64_t resume)
{
    int64_t rs = -1;
    if (resize > 0) {
        resize_to(c, resize);
    }
    if (resume == -2 && (rs = resume_target(c)) >= 0) {
        c->resumes++;
        note(c, ROLE_COORD, 0, "resume");
    }
    start_coordinator(c, rs);
    c->restarts[ROLE_COORD]++;
    note(c, ROLE_COORD, 0, "restart");
    c->coord_restart_t = t;
    c->coord_restart_inc = c->inc;
    expect_progress(c);
}

/* ---- issue 27: network faults ------------------------------------------ */

const char *const sr__chaos_net_kind_name[NET_KINDS] = {"link", "oneway", "loss", "power"};

int
sr__chaos_net_setup(chaos *c)
{
    char prefix[48], addr[32];
    int  size = c->workers;

    for (int i = 0; i < c->nresize; i++) {
        size = c->resize[i] > size ? c->resize[i] : size;
    }
    size += c->elastic_targets[1] ? MAX_JOINED : 0;
    if (size + 1 > SR_NET_MAX_HOSTS) {
        fprintf(stderr, "syncrep chaos: --targets network: %d workers need %d hosts, at most %d\n",
                size, size + 1, SR_NET_MAX_HOSTS);
        return -1;
    }
    snprintf(prefix, sizeof(prefix), "srnet-%ld-", (long)getpid());
    if (sr__chaos_net_up(&c->net, prefix, size + 1) != 0) {
        fprintf(stderr, "syncrep chaos: --targets network: cannot build the network\n");
        return -1;
    }
    c->net_up = 1;
    snprintf(c->endpoint, sizeof(c->endpoint), "tcp://%s:7070",
             sr__chaos_net_host_addr(0, addr, sizeof(addr)));
    fprintf(stderr, "[chaos] network: %d hosts (%sc at %s, workers' from 198.18.0.2), %s\n",
            size + 1, prefix, addr, c->endpoint);
    return 0;
}

static int
net_powered_off(const chaos *c, int host)
{
    for (int i = 0; i < c->nnetrec; i++) {
        const netrec *r = &c->netrec[i];
        if (r->end < 0 && r->host == host && r->kind == ACT_NET_POWER - ACT_NET_LINK) {
            return 1;
        }
    }
    return 0;
}

static const char *const net_on_what[NET_KINDS] = {"link-down", "oneway-on", "loss-on",
                                                   "power-off"};
static const char *const net_off_what[NET_KINDS] = {"link-up", "oneway-off", "loss-off",
                                                    "power-on"};

static int
net_role(int host)
{
    return host == 0 ? ROLE_COORD : host == 1 ? ROLE_CHIEF : ROLE_WORKER;
}

/* Start network fault f at t: recorded in c->netrec until it ends.  A fault
 * on a host that has one already, or on a worker's host resized away, is
 * skipped (counted). */
static void
net_fault_start(chaos *c, const fault *f, double t)
{
    int h = f->net_host, kind = f->action - ACT_NET_LINK, rc = -1;

    if (h >= c->net.nhosts || c->net_busy[h] || (h > 0 && h - 1 >= c->nworkers) ||
        c->nnetrec >= MAX_NETREC) {
        c->net_skipped++;
        return;
    }
    if (kind == 0) {
        rc = sr__chaos_net_link(&c->net, h, 0);
    } else if (kind == 1) {
        rc = sr__chaos_net_oneway(&c->net, h, f->dir);
    } else if (kind == 2) {
        rc = sr__chaos_net_loss(&c->net, h, f->pct);
    } else {
        /* Power loss: every process on the host at once, and its cable. */
        pid_t *p = h == 0 ? &c->coord : &c->wpid[h - 1];
        rc = sr__chaos_net_power_off(&c->net, h) < 0 ? -1 : 0;
        if (*p > 0) {
            sr_proc_wait(*p, 2000, NULL);
            *p = 0;
        }
    }
    if (rc != 0) {
        c->net_errors++;
        fprintf(stderr, "[chaos] network fault %s on host %d could not be applied\n",
                sr__chaos_net_kind_name[kind], h);
        return;
    }
    netrec *r = &c->netrec[c->nnetrec++];
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->host = h;
    r->dir = kind == 1 ? f->dir : 0;
    r->pct = kind == 2 ? f->pct : 0;
    r->start = t;
    r->until = t + f->down_s;
    r->end = -1;
    r->next_s = -1;
    c->net_busy[h] = 1;
    c->net_faults[kind]++;
    note(c, net_role(h), h == 0 ? 0 : h - 1, net_on_what[kind]);
}

/* End r: link up, rules lifted; a powered-off host's process started again
 * (the coordinator on the same store, as an operator would) unless a
 * planned restart of it is pending (coord_pending) or it runs already.
 * From here the time to the next applied step is measured. */
static void
net_fault_end(chaos *c, netrec *r, double t, int coord_pending, int liveness)
{
    int h = r->host, task = h - 1;

    if (r->kind == 1) {
        sr__chaos_net_oneway(&c->net, h, 0);
    } else if (r->kind == 2) {
        sr__chaos_net_loss(&c->net, h, 0);
    } else {
        sr__chaos_net_link(&c->net, h, 1);
    }
    note(c, net_role(h), h == 0 ? 0 : task, net_off_what[r->kind]);
    c->net_busy[h] = 0;
    r->end = t;
    poll_status(c);
    r->step_end = c->gstep;
    r->inc_end = c->inc;
    if (!liveness) {
        return; /* the run is over */
    }
    if (r->kind == 3 && h == 0 && c->coord <= 0 && !coord_pending) {
        restart_coordinator(c, t, 0, -1);
    } else if (r->kind == 3 && h > 0 && task < c->nworkers && c->wpid[task] <= 0) {
        start_worker(c, task);
        c->restarts[net_role(h)]++;
        note(c, net_role(h), task, "restart");
    }
    expect_progress(c);
}

/* The network faults whose time is up end; those that ended see their next
 * applied step (the same rule as liveness). */
static void
net_poll(chaos *c, double t, const pending_up *up, int nup, int polled)
{
    int coord_pending = 0;

    for (int i = 0; i < nup; i++) {
        coord_pending |= !up[i].is_cont && up[i].role == ROLE_COORD;
    }
    for (int i = 0; i < c->nnetrec; i++) {
        netrec *r = &c->netrec[i];
        if (r->end < 0 && r->until <= t) {
            net_fault_end(c, r, t, coord_pending, 1);
        } else if (polled && r->end >= 0 && r->next_s < 0 &&
                   (c->inc == r->inc_end ? c->gstep > r->step_end : c->gstep > c->restored)) {
            r->next_s = now_s(c) - r->end;
        }
    }
}

static int
cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* At the end: what is still on is lifted; a summary on stderr. */
static void
net_finish(chaos *c)
{
    double v[MAX_NETREC], worst_at = 0;
    int    n = 0, worst = -1, total = 0;

    for (int i = 0; i < c->nnetrec; i++) {
        netrec *r = &c->netrec[i];
        if (r->end < 0) {
            net_fault_end(c, r, now_s(c), 1, 0);
        } else if (r->next_s >= 0) {
            v[n++] = r->next_s;
            if (worst < 0 || r->next_s > c->netrec[worst].next_s) {
                worst = i;
                worst_at = r->end;
            }
        }
    }
    for (int k = 0; k < NET_KINDS; k++) {
        total += c->net_faults[k];
    }
    qsort(v, (size_t)n, sizeof(double), cmp_dbl);
    fprintf(stderr,
            "[chaos] network: %d faults (link %d, oneway %d, loss %d, power %d), %d skipped (a "
            "fault on that host already), %d not applied; fault end to the next applied step: "
            "%d measured, p50 %.3f s, max %.3f s",
            total, c->net_faults[0], c->net_faults[1], c->net_faults[2], c->net_faults[3],
            c->net_skipped, c->net_errors, n, n ? v[(n - 1) / 2] : 0.0, n ? v[n - 1] : 0.0);
    if (worst >= 0) {
        fprintf(stderr, " (%s on host %d, ended at %.1fs)",
                sr__chaos_net_kind_name[c->netrec[worst].kind], c->netrec[worst].host, worst_at);
    }
    fprintf(stderr, "\n");
}

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
    c->loss_t = -1;
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
            int was_loss = f->action == ACT_LOSS && f->task < c->nworkers && c->wpid[f->task] > 0;
            if (c->loss_t >= 0) {
                c->loss_unjudged++; /* another fault in a loss's window */
                c->loss_t = -1;
            }
            if (f->action >= ACT_NET_LINK) { /* issue 27 */
                net_fault_start(c, f, t);
                continue;
            }
            if (f->role == ROLE_COORD && f->action == ACT_KILL) {
                crash_start(c); /* issue 28 */
            }
            do_fault(c, f, &at, &stopped, &resume);
            if (resume == -2) {
                c->crash_open = 0; /* a rewind loses steps on purpose */
            }
            if (was_loss) {
                pid_t *st[MAX_EVENTS];
                int    ns = 0;
                for (int k = 0; k < nup; k++) {
                    if (up[k].is_cont) {
                        st[ns++] = up[k].pid;
                    }
                }
                judge_loss_start(c, workers_up(c, st, ns));
            }
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
            if (c->net_up && !u->is_cont &&
                net_powered_off(c, u->role == ROLE_COORD ? 0 : u->task + 1)) {
                continue; /* issue 27: its host is off; it comes back with the power */
            }
            if (u->is_cont) {
                if (*u->pid > 0) {
                    kill(*u->pid, SIGCONT);
                }
                note(c, u->role, u->task, "cont");
                expect_progress(c);
            } else if (u->role == ROLE_COORD) {
                if (c->coord <= 0) {
                    restart_coordinator(c, t, u->task, u->resume);
                }
            } else if (u->task < c->nworkers && c->wpid[u->task] <= 0) {
                start_worker(c, u->task);
                c->restarts[u->role]++;
                note(c, u->role, u->task, "restart");
                expect_progress(c);
            }
            up[i] = up[--nup];
            i--;
        }
        /* Processes that exited by themselves, 0.5 s later (issue 27). */
        for (int i = 0; i <= MAX_WORKERS; i++) {
            int h = i == MAX_WORKERS ? 0 : i + 1;
            if (c->exited_at[i] <= 0 || t < c->exited_at[i] + 0.5 ||
                (c->net_up && net_powered_off(c, h))) {
                continue;
            }
            c->exited_at[i] = 0;
            if (i == MAX_WORKERS && c->coord <= 0) {
                restart_coordinator(c, t, 0, -1);
            } else if (i < c->nworkers && c->wpid[i] <= 0) {
                start_worker(c, i);
                c->restarts[i == 0 ? ROLE_CHIEF : ROLE_WORKER]++;
                note(c, i == 0 ? ROLE_CHIEF : ROLE_WORKER, i, "restart");
                expect_progress(c);
            }
        }
        int polled = poll_status(c) == 0;
        if (c->net_up) {
            net_poll(c, now_s(c), up, nup, polled); /* issue 27 */
        }
        if (polled) {
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
            judge_loss_poll(c); /* issue 26 */
            if (c->crash_open && c->inc != c->crash_inc) {
                crash_judge(c); /* issue 28 */
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
    if (c->net_up) {
        net_finish(c); /* issue 27 */
    }
    poll_status(c);
    print_progress(c, 1);
    if (c->npending > 0) {
        c->liveness_failed = 1;
        snprintf(c->liveness_detail, sizeof(c->liveness_detail),
                 "%d restart(s) not followed by progress; the first at %.1fs (step %" PRId64 ")",
                 c->npending, c->pending_live_t[0], c->pending_live_step[0]);
    }
    if (c->loss_failed && !c->liveness_failed) { /* issue 26 */
        c->liveness_failed = 1;
        snprintf(c->liveness_detail, sizeof(c->liveness_detail), "%s", c->loss_detail);
    }
    if (c->losses + c->joins + c->leaves + c->ctl_resizes > 0) {
        fprintf(stderr,
                "[chaos] elastic: %d worker losses (%d judged, %d with another fault in the "
                "window or fewer than M left), %d joins, %d leaves, %d ctl resizes (%d failed); "
                "longest wait for two steps after a judged loss %.2f s (bound: the worker "
                "timeout + 1 s)\n",
                c->losses, c->loss_judged, c->loss_unjudged, c->joins, c->leaves, c->ctl_resizes,
                c->ctl_failures, c->loss_worst_s);
    }
    if (c->crash_n > 0) { /* issue 28 */
        fprintf(stderr,
                "[chaos] steps lost per coordinator kill: %d judged, max %" PRId64
                ", mean %.1f; the largest interval then %" PRId64 "%s\n",
                c->crash_n, c->crash_max_lost, (double)c->crash_sum_lost / c->crash_n,
                c->crash_max_interval,
                c->commit_async ? " (async: the writer's snapshot may add to it)" : "");
    }
    if (c->crash_over > 0 && !c->liveness_failed) {
        c->liveness_failed = 1;
        snprintf(c->liveness_detail, sizeof(c->liveness_detail), "%s", c->crash_detail);
    }
    if (c->ctl_failures > 0 && !c->liveness_failed) {
        c->liveness_failed = 1;
        snprintf(c->liveness_detail, sizeof(c->liveness_detail),
                 "%d resize(s) through ctl were refused or not applied", c->ctl_failures);
    }
    if (c->self_exits > 0 && !c->liveness_failed) { /* issue 27 */
        c->liveness_failed = 1;
        snprintf(c->liveness_detail, sizeof(c->liveness_detail),
                 "%d process(es) exited by "
                 "themselves; the first: %s",
                 c->self_exits, c->self_exit_detail);
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
