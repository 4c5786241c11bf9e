/*
 * `syncrep chaos`: a real coordinator and real workers (fork/exec of this
 * binary), SIGKILLed and SIGSTOPped on a schedule drawn from --seed alone
 * (so a seed replays the same faults), restarted after seeded delays, with
 * the worker count cycling through --resize at coordinator restarts.  At
 * the end everything is stopped cleanly and chaos_verify.c judges the store.
 * Writes DIR/report.json and DIR/timeline.svg.  docs/chaos.md.
 *
 * This file: the options and the entry points (parse_list, parse_args,
 * sr__chaos_main, sr__chaos_worker_cli); the plan is in chaos_plan.c, the
 * run in chaos_run.c, the report and timeline in chaos_report.c.
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
#include "tools/args.h"
#include "tools/coord_argv.h"
#include "tools/proc.h"
#include "tools/status_client.h"
#include "wire/wire.h"

#include "chaos/chaos_int.h"

/* ---- main --------------------------------------------------------------- */

/* Issue 22: which signal cut the run short (the report and the exit status
 * say so); the run itself stops through chaos_run.c's handler. */
static volatile sig_atomic_t got_signal;

static void
on_signal(int sig)
{
    got_signal = sig;
    sr__chaos_on_signal(sig);
}

static const char usage_text[] =
    "usage: syncrep chaos --workers N --replicas-to-aggregate R [--total-replicas M]\n"
    "                     --duration SECONDS --seed S [--kill-every SECONDS]\n"
    "                     [--targets coordinator,chief,worker,worker-loss,join,\n"
    "                                process,network]\n"
    "                     [--resize 4,3,5] [--resize-runtime] [--min-replicas M]\n"
    "                     [--worker-timeout-ms MS]\n"
    "                     [--checkpoint-every-steps K | --checkpoint-budget PCT]\n"
    "                     [--commit sync|async]\n"
    "                     [--optimizer sgd|momentum|adam|adamw] [--partition-bytes B]\n"
    "                     [--weight-decay WD] [--nesterov] [--clip-norm C]\n"
    "                     [--lr-schedule constant|step|cosine|linear] [--warmup-steps W]\n"
    "                     [--decay-steps T] [--lr-min LR] [--step-every S --step-gamma G]\n"
    "                     [--wal-limit-kib K] [--out DIR] [--print-plan]\n"
    "                     [--model-api]\n"
    "\n"
    "Runs a real coordinator and N real workers of a deterministic model, kills and\n"
    "restarts them on a schedule drawn from the seed, then verifies from the store:\n"
    "replay (bit for bit), strictness, exactly R, R distinct tasks (at most ceil(R/N)\n"
    "gradients of one task in a step), no lost commits, liveness.\n"
    "Writes DIR/report.json and DIR/timeline.svg; exit 0 only if all hold (1 if one\n"
    "fails; interrupted by SIGINT/SIGTERM: the report says so, exit 130/143).\n"
    "--print-plan prints the fault schedule the seed gives, and runs nothing.\n"
    "--partition-bytes B (e.g. 32) splits the model's variables into partitions.\n"
    "--wal-limit-kib K (e.g. 64) makes the store's WAL checkpoints run all the time.\n"
    "--model-api: the workers declare a model of a dozen tensors as one\n"
    "(sr_client_declare_model) and train with sr_client_model_step; the replay\n"
    "checks every tensor of every step by name (docs/chaos.md).\n"
    "The recipe options are the coordinator's (docs/optimizers.md); --weight-decay\n"
    "defaults to 0 here, adamw's included, and the replay uses exactly these.\n"
    "Elastic (issue 26): worker-loss kills a worker for several worker timeouts,\n"
    "join starts a new task index; --resize-runtime resizes through `ctl` instead of\n"
    "at coordinator restarts; --min-replicas M lets steps go on with max(M, live).\n"
    "Then after each loss (the only fault in its window) the job must apply two\n"
    "steps within the worker timeout + 1 s.\n"
    "--checkpoint-budget PCT (issue 28) runs the coordinator's adaptive policy; each\n"
    "coordinator kill's lost steps (the global step STATUS gave just before it, less\n"
    "the step the next incarnation restored) are reported, and with --commit sync\n"
    "must be fewer than the interval STATUS gave then.\n"
    "Network (issue 27, root): network runs the job in a namespace network (a host\n"
    "each, TCP on 198.18.0.0/24) and cuts a host's link, partitions one way, drops\n"
    "5-30 % of packets or powers a host off, 2-8 s each; process = the coordinator,\n"
    "chief and worker kills.  Without root, ip or nft it refuses (exit 2).\n";

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
    int       every_given = 0; /* issue 28 */

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
    c->optim.step_gamma = 0.1;
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
        if (strcmp(a, "--nesterov") == 0) { /* issue 25 */
            sr_coord_argv_parse_recipe(&c->optim, a, NULL);
            continue;
        }
        if (strcmp(a, "--resize-runtime") == 0) { /* issue 26 */
            c->resize_runtime = 1;
            continue;
        }
        if (strcmp(a, "--model-api") == 0) { /* issue 23 */
            c->model_api = 1;
            continue;
        }
        if (i + 1 >= argc) {
            return sr_args_usage_error("chaos", "%s needs a value", a);
        }
        const char *val = argv[++i];
        int         bad = 0;
        if (strcmp(a, "--workers") == 0) {
            bad = sr_args_parse_i64(val, 1, MAX_WORKERS, &v);
            c->workers = (int)v;
        } else if (strcmp(a, "--replicas-to-aggregate") == 0) {
            bad = sr_args_parse_i64(val, 1, MAX_WORKERS * 4, &v);
            c->R = (int)v;
        } else if (strcmp(a, "--total-replicas") == 0) {
            bad = sr_args_parse_i64(val, 1, MAX_WORKERS * 4, &v);
            c->M = (int)v;
        } else if (strcmp(a, "--duration") == 0) {
            bad = sr_args_parse_f64(val, &d) || d <= 0;
            c->duration = d;
        } else if (strcmp(a, "--seed") == 0) {
            bad = sr_args_parse_i64(val, 0, INT64_MAX, &v);
            c->seed = (uint64_t)v;
            have_seed = 1;
        } else if (strcmp(a, "--kill-every") == 0) {
            bad = sr_args_parse_f64(val, &d) || d < 0;
            c->kill_every = d;
        } else if (strcmp(a, "--checkpoint-every-steps") == 0) {
            bad = sr_args_parse_i64(val, 1, 1000000, &v);
            c->checkpoint_every = (int)v;
            every_given = 1;
        } else if (strcmp(a, "--checkpoint-budget") == 0) { /* issue 28 */
            bad = sr_args_parse_f64(val, &d) || !(d > 0 && d <= 100);
            c->checkpoint_budget = d;
        } else if (strcmp(a, "--commit") == 0) {
            bad = strcmp(val, "sync") != 0 && strcmp(val, "async") != 0;
            c->commit_async = strcmp(val, "async") == 0;
        } else if (strcmp(a, "--partition-bytes") == 0) {
            bad = sr_args_parse_i64(val, 0, 1LL << 40, &v);
            c->partition_bytes = v;
        } else if (strcmp(a, "--wal-limit-kib") == 0) {
            bad = sr_args_parse_i64(val, 1, 1LL << 30, &v);
            c->wal_limit_kib = v;
        } else if (strcmp(a, "--optimizer") == 0) {
            bad = sr__optim_parse(val, &c->optim.kind) != SR_OK;
        } else if ((bad = sr_coord_argv_parse_recipe(&c->optim, a, val)) != 0) {
            bad = bad < 0; /* issue 25: --lr-schedule, --clip-norm, ... */
        } else if (strcmp(a, "--out") == 0) {
            bad = sr_snprintf(c->out, sizeof(c->out), "%s", val) != SR_OK;
        } else if (strcmp(a, "--resize") == 0) {
            c->nresize = parse_list(val, c->resize, 16);
            bad = c->nresize <= 0;
        } else if (strcmp(a, "--min-replicas") == 0) { /* issue 26 */
            bad = sr_args_parse_i64(val, 1, MAX_WORKERS * 4, &v);
            c->min_replicas = (int)v;
        } else if (strcmp(a, "--worker-timeout-ms") == 0) {
            bad = sr_args_parse_i64(val, 100, 3600000, &v);
            c->worker_timeout_ms = (int)v;
        } else if (strcmp(a, "--targets") == 0) {
            have_targets = 1;
            memset(c->targets, 0, sizeof(c->targets));
            memset(c->elastic_targets, 0, sizeof(c->elastic_targets));
            char buf[128];
            snprintf(buf, sizeof(buf), "%s", val);
            for (char *tok = strtok(buf, ","); tok != NULL; tok = strtok(NULL, ",")) {
                int k;
                if (strcmp(tok, "network") == 0) { /* issue 27 */
                    c->net_target = 1;
                    continue;
                }
                if (strcmp(tok, "process") == 0) { /* issue 27: every role's process */
                    c->targets[0] = c->targets[1] = c->targets[2] = 1;
                    continue;
                }
                if (strcmp(tok, "worker-loss") == 0 || strcmp(tok, "join") == 0) {
                    c->elastic_targets[tok[0] == 'j'] = 1; /* issue 26 */
                    continue;
                }
                for (k = 0; k < 3 && strcmp(tok, sr__chaos_role_name[k]) != 0; k++) {
                }
                if (k == 3) {
                    return sr_args_usage_error("chaos", "unknown target '%s'", tok);
                }
                c->targets[k] = 1;
            }
        } else {
            return sr_args_usage_error("chaos", "unknown option '%s'", a);
        }
        if (bad) {
            return sr_args_usage_error("chaos", "bad value '%s' for %s", val, a);
        }
    }
    if (c->workers < 1 || c->R < 1 || c->duration <= 0 || !have_seed) {
        return sr_args_usage_error("chaos", "--workers, --replicas-to-aggregate, --duration "
                                            "and --seed are required");
    }
    if (c->M == 0) {
        c->M = c->workers;
    }
    if (c->M < c->R) {
        return sr_args_usage_error("chaos",
                                   "--total-replicas %d < R %d: the harness runs one "
                                   "batch per worker per step",
                                   c->M, c->R);
    }
    if (!have_targets) {
        c->targets[0] = c->targets[1] = c->targets[2] = 1;
    }
    if (c->min_replicas > c->R) { /* issue 26 */
        return sr_args_usage_error("chaos", "--min-replicas %d is above R %d", c->min_replicas,
                                   c->R);
    }
    if ((c->elastic_targets[0] || c->elastic_targets[1]) && c->worker_timeout_ms == 0) {
        c->worker_timeout_ms = 1000; /* a loss is noticed in a second, not ten */
    }
    if (every_given && c->checkpoint_budget > 0) { /* issue 28 */
        return sr_args_usage_error("chaos", "--checkpoint-budget and --checkpoint-every-steps "
                                            "are two policies: give one");
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
        sr__chaos_plan_make(c);
        for (int i = 0; i < c->nplan; i++) {
            const fault             *f = &c->plan[i];
            static const char *const act[] = {"kill", "stop", "loss", "join", "ctl-resize"};
            if (f->action >= ACT_NET_LINK) { /* issue 27 */
                printf("%8.3f %-11s task %-2d net-%-6s down %.3f host %d dir %d pct %d\n", f->t,
                       sr__chaos_role_name[f->role], f->task,
                       sr__chaos_net_kind_name[f->action - ACT_NET_LINK], f->down_s, f->net_host,
                       f->dir, f->pct);
                continue;
            }
            printf("%8.3f %-11s task %-2d %-4s down %.3f resize %d resume %d\n", f->t,
                   sr__chaos_role_name[f->role], f->task, act[f->action], f->down_s, f->resize_to,
                   f->resume);
        }
        free(c);
        return 0;
    }
    char why[256];
    if (c->net_target && sr__chaos_net_check(why, sizeof(why)) != 0) { /* before anything is made */
        fprintf(stderr, "syncrep chaos: --targets network: %s\n", why);
        free(c);
        return 2;
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
    if (c->net_target && sr__chaos_net_setup(c) != 0) { /* issue 27: tcp:// in the network */
        free(c);
        return 2;
    }
    for (int i = 0; i < 1024; i++) {
        c->max_committed_before_inc[i] = -1;
    }
    sr__chaos_plan_make(c);
    fprintf(stderr,
            "[chaos] seed %" PRIu64 ": %d workers, R=%d, N=%d, %.0fs, %d faults planned, out %s\n",
            c->seed, c->workers, c->R, c->M, c->duration, c->nplan, c->out);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* In the network the harness watches from the coordinator's host: the
     * status client's I/O thread starts there (chaos_net.h), so network faults
     * never hide the steps from it. */
    int saved_ns = -1;
    if (c->net_up && sr__chaos_net_enter(&c->net, 0, &saved_ns) != 0) {
        rc = sr_fail(SR_EINVAL, "cannot enter the coordinator's host namespace");
    } else {
        rc = sr_status_client_open(&c->status, c->endpoint);
        sr__chaos_net_leave(saved_ns);
    }
    if (rc != SR_OK) {
        fprintf(stderr, "syncrep chaos: %s\n", sr_errdetail());
        if (c->net_up) {
            sr__chaos_net_down(c->net.prefix);
        }
        free(c);
        return 2;
    }
    c->t0 = sr_clock_now_ms() / 1000.0;
    sr__chaos_run(c);
    if (got_signal != 0) {
        c->interrupted = (int)got_signal;
        c->interrupted_t = sr_clock_now_ms() / 1000.0 - c->t0;
        fprintf(stderr,
                "[chaos] INTERRUPTED by %s after %.1f s of %.0f: the report covers only the "
                "part that ran, and the run counts as failed\n",
                got_signal == SIGINT ? "SIGINT" : "SIGTERM", c->interrupted_t, c->duration);
    }
    sr_status_client_close(c->status);
    c->status = NULL;
    if (c->net_up) {
        sr__chaos_net_down(c->net.prefix); /* every namespace, veth and rule it made */
    }

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
    passed = passed && live->passed && c->interrupted == 0;
    sr__chaos_report_write(c, checks, SR_CHAOS_NCHECKS + 1, passed,
                           rc == SR_OK ? e.global_step : c->gstep);
    sr__chaos_report_svg(c);
    for (int i = 0; i <= SR_CHAOS_NCHECKS; i++) {
        fprintf(stderr, "[chaos] %-16s %s%s%s\n", checks[i].name,
                checks[i].passed ? "PASS" : "FAIL", checks[i].passed ? "" : ": ",
                checks[i].passed ? "" : checks[i].detail);
    }
    fprintf(stderr,
            "[chaos] %s: global step %" PRId64
            ", report %s/report.json, timeline %s/timeline.svg\n",
            passed           ? "PASSED"
            : c->interrupted ? "INTERRUPTED"
                             : "FAILED",
            rc == SR_OK ? e.global_step : c->gstep, c->out, c->out);
    if (rc == SR_OK) {
        sr_chaos_evidence_free(&e);
    }
    int interrupted = c->interrupted;
    free(c);
    return interrupted ? 128 + interrupted : passed ? 0 : 1;
}

static const char worker_usage_text[] =
    "usage: syncrep chaos-worker --connect ENDPOINT --task-index I --seed S [--timeout-ms MS]\n"
    "\n"
    "The deterministic worker `syncrep chaos` starts (one per task): it trains the\n"
    "chaos model (docs/chaos.md), whose gradients are a function of the seed, the\n"
    "task index and the step alone, so the verifier can replay every step.  Run by\n"
    "hand it joins any coordinator at ENDPOINT as task I and trains until killed.\n"
    "\n"
    "  --connect ENDPOINT   the coordinator (tcp://HOST:PORT or ipc://PATH)\n"
    "  --task-index I       this worker's task (0 is the chief: it declares the model)\n"
    "  --seed S             the chaos run's seed (the same for every worker)\n"
    "  --timeout-ms MS      how long one call waits for the coordinator (60000)\n"
    "  --model-api          train the --model-api model with sr_client_model_step\n";

int
sr__chaos_worker_cli(int argc, char **argv)
{
    const char *endpoint = NULL;
    long long   task = -1, seed = -1, timeout = 60000;
    int         model_api = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(worker_usage_text, stdout);
            return 0;
        }
    }
    for (int i = 1; i < argc; i += 2) {
        if (strcmp(argv[i], "--model-api") == 0) { /* a flag: no value to skip */
            model_api = 1;
            i--;
            continue;
        }
        if (i + 1 >= argc) {
            return sr_args_usage_error("chaos-worker", "%s needs a value", argv[i]);
        }
        int bad = 0;
        if (strcmp(argv[i], "--connect") == 0) {
            endpoint = argv[i + 1];
        } else if (strcmp(argv[i], "--task-index") == 0) {
            bad = sr_args_parse_i64(argv[i + 1], 0, MAX_WORKERS, &task);
        } else if (strcmp(argv[i], "--seed") == 0) {
            bad = sr_args_parse_i64(argv[i + 1], 0, INT64_MAX, &seed);
        } else if (strcmp(argv[i], "--timeout-ms") == 0) {
            bad = sr_args_parse_i64(argv[i + 1], 1, 3600000, &timeout);
        } else {
            return sr_args_usage_error("chaos-worker", "unknown option '%s'", argv[i]);
        }
        if (bad) {
            return sr_args_usage_error("chaos-worker", "bad value '%s' for %s", argv[i + 1],
                                       argv[i]);
        }
    }
    if (endpoint == NULL || task < 0 || seed < 0) {
        return sr_args_usage_error("chaos-worker", "--connect, --task-index and --seed are "
                                                   "required");
    }
    return sr__chaos_worker_main(endpoint, (int)task, (uint64_t)seed, (int)timeout, model_api);
}
