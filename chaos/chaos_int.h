/*
 * The chaos harness's internals, shared by chaos.c (options, entry
 * points), chaos_plan.c, chaos_run.c and chaos_report.c: the planned
 * faults, the events and samples recorded, and the harness's state.
 */
#ifndef SR_CHAOS_INT_H
#define SR_CHAOS_INT_H

#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "chaos/chaos.h"
#include "chaos/chaos_net.h"
#include "tools/status_client.h"

#define MAX_WORKERS  64
#define MAX_EVENTS   4096
#define MAX_SAMPLES  20000
#define QUIET_TAIL_S 4.0 /* no faults at the end: liveness must show */

enum { ROLE_COORD = 0, ROLE_CHIEF = 1, ROLE_WORKER = 2 };

enum { ACT_KILL = 0, ACT_STOP = 1 };
/* issue 26: elastic faults.  ACT_LOSS: a worker SIGKILLed and restarted only
 * after a long stretch (several worker timeouts); ACT_JOIN: a new task index
 * appears (role ROLE_WORKER); ACT_RESIZE: the job resized at runtime through
 * CTL (role ROLE_COORD, resize_to), no process restarted. */
enum { ACT_LOSS = 2, ACT_JOIN = 3, ACT_RESIZE = 4 };
#define MAX_JOINED 8 /* task indexes a run's joins add at most beyond its size */
/* issue 27: faults over the namespace network (--targets network): a host's
 * cable pulled, a one-way partition, a packet-loss burst, a power loss. */
enum { ACT_NET_LINK = 5, ACT_NET_ONEWAY = 6, ACT_NET_LOSS = 7, ACT_NET_POWER = 8 };
#define NET_KINDS  4
#define MAX_NETREC 1024

/* A planned fault: drawn entirely from the seed, before anything runs. */
typedef struct {
    double t; /* seconds from the start */
    int    role;
    int    task;      /* chief: 0; worker: its task index */
    int    action;    /* ACT_KILL: SIGKILL then restart; ACT_STOP: SIGSTOP then SIGCONT */
    double down_s;    /* until the restart / SIGCONT */
    int    resize_to; /* coordinator: worker count after the restart (0 = same) */
    int    resume;    /* coordinator: restart with --resume-from-step */
    /* issue 27: a network fault's host (0 the coordinator's, i worker i-1's),
     * one-way direction (1 host -> c dropped, 2 c -> host) and loss % */
    int net_host, dir, pct;
} fault;

/* issue 27: a network fault as it ran, for the report. */
typedef struct {
    int      kind; /* ACT_NET_* - ACT_NET_LINK */
    int      host, dir, pct;
    double   start, until, end; /* end < 0: still on */
    double   next_s;            /* end to the next applied step; < 0: none seen */
    int64_t  step_end;
    uint64_t inc_end;
} netrec;

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
    int      model_api;       /* --model-api (issue 23): workers use sr_client_model_step */
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
    /* issue 22: the signal (SIGINT/SIGTERM) that cut the run short, 0 if none,
     * and when (seconds from the start) */
    int    interrupted;
    double interrupted_t;
    /* issue 26: elastic (chaos.c options, chaos_plan.c, chaos_run.c). */
    int      min_replicas;       /* --min-replicas for the coordinator; 0: not given (R) */
    int      worker_timeout_ms;  /* --worker-timeout-ms for the coordinator; 0: its default */
    int      resize_runtime;     /* --resize-runtime: --resize acts through CTL, no restart */
    int      elastic_targets[2]; /* --targets worker-loss, join */
    int      losses, joins, leaves, ctl_resizes, ctl_failures;
    int      loss_judged, loss_unjudged;
    double   loss_worst_s; /* the longest wait for progress after a judged loss */
    double   loss_t;       /* the loss being judged: when (< 0: none) */
    int64_t  loss_step;    /* the global step then */
    uint64_t loss_inc;
    int      loss_failed;
    char     loss_detail[256];
    /* issue 28: --checkpoint-budget for the coordinator (0: --checkpoint-every-steps),
     * and the steps each coordinator kill lost (chaos_run.c crash_start, crash_judge):
     * the global step and interval STATUS gave just before it, against the step
     * the next incarnation restored. */
    double   checkpoint_budget;
    int64_t  interval;   /* STATUS "interval_steps" at the last poll (-1: unknown) */
    int      crash_open; /* a kill awaits the next incarnation */
    int64_t  crash_gstep, crash_interval;
    uint64_t crash_inc;
    int      crash_n, crash_over; /* kills judged; of them losing more than the interval */
    int64_t  crash_max_lost, crash_max_interval, crash_sum_lost;
    char     crash_detail[200];
    /* issue 27: the namespace network (chaos.c options, chaos_plan.c,
     * chaos_run.c, chaos_net.c). */
    int          net_target; /* --targets network */
    int          net_up;     /* the network is built: processes run in its hosts */
    sr_chaos_net net;
    int          net_busy[SR_NET_MAX_HOSTS]; /* a network fault on that host now */
    int          net_faults[NET_KINDS], net_skipped, net_errors;
    netrec       netrec[MAX_NETREC];
    int          nnetrec;
    /* issue 27: processes that exited by themselves (nobody killed them):
     * noted, restarted 0.5 s later, and liveness fails naming the first.
     * exited_at by task, [MAX_WORKERS] the coordinator; 0: none pending. */
    int    self_exits;
    double exited_at[MAX_WORKERS + 1];
    char   self_exit_detail[160];
} chaos;

/* The network fault kinds' names (report, plan), by ACT_NET_* - ACT_NET_LINK. */
extern const char *const sr__chaos_net_kind_name[NET_KINDS];

/* chaos_run.c (issue 27): build the namespace network for c (the caller
 * ran sr__chaos_net_check) and point c->endpoint at the coordinator's host;
 * -1 with the reason on stderr. */
int sr__chaos_net_setup(chaos *c);

/* The role names reports print, by ROLE_*. */
extern const char *const sr__chaos_role_name[3];

/* chaos_run.c: the SIGINT / SIGTERM handler (the run stops, cleanly). */
void sr__chaos_on_signal(int sig);

/* chaos_run.c: run the job with c's plan until c->duration, then stop
 * everything cleanly. */
void sr__chaos_run(chaos *c);

/* chaos_plan.c: draw c->plan from c->seed and the options. */
void sr__chaos_plan_make(chaos *c);

/* chaos_report.c: the timeline's legend column in px (issue 22: wide enough
 * for "coordinator restart" at ~7 px a character, plus its swatch). */
#define SR__CHAOS_LEGEND_W 200.0

/* chaos_report.c: write c->out/timeline.svg. */
void sr__chaos_report_svg(chaos *c);

/* chaos_report.c: write c->out/report.json; 0 on success. */
int sr__chaos_report_write(chaos *c, const sr_chaos_check *checks, int nchecks, int passed,
                           int64_t gstep);

#endif
