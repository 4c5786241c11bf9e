/* `syncrep coordinator`: parse options, install signal handlers, run. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "coordinator/coordinator.h"
#include "coordinator/lr_schedule.h"
#include "core/log.h"
#include "core/mem.h"
#include "store/store.h"

static volatile sig_atomic_t stop_flag;

static void
on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static const char usage_text[] =
    "usage: syncrep coordinator --store PATH --replicas-to-aggregate R [--learning-rate LR] "
    "[options]\n"
    "\n"
    "  A store keeps its job's recipe (optimizer and its settings, learning rate and\n"
    "  its schedule, weight decay, clipping, EMA, sparse mean, non-finite policy,\n"
    "  partition size): a restart takes it for\n"
    "  every one of those options not given; one given with another value is\n"
    "  refused without --reconfigure (docs/operations.md, \"Restarting\").\n"
    "\n"
    "  --store PATH                  SQLite store (created if absent)\n"
    "  --bind ENDPOINT               default tcp://127.0.0.1:7070 (ipc://PATH works too;\n"
    "                                tcp:// takes an IP address, * or an interface, not a\n"
    "                                host name: tcp://0.0.0.0:P binds every interface)\n"
    "  --replicas-to-aggregate R     gradients averaged per variable per step (required)\n"
    "  --total-replicas N            workers taking part (default R; N > R: backups)\n"
    "  --init-tokens K               tokens when the model becomes ready (default R;\n"
    "                                refused if K < R - N)\n"
    "  --optimizer sgd|momentum|adam|adamw\n"
    "                                default sgd (docs/optimizers.md: the torch.optim\n"
    "                                settings each maps to)\n"
    "  --learning-rate LR            required for a new store; default: the store's\n"
    "  --momentum M                  default 0.9 (--optimizer momentum only)\n"
    "  --beta1 B1 --beta2 B2         default 0.9, 0.999 (--optimizer adam, adamw)\n"
    "  --epsilon E                   default 1e-8 (--optimizer adam, adamw)\n"
    "  --nesterov                    momentum: Nesterov's form (torch SGD nesterov=True)\n"
    "  --weight-decay WD             sgd/momentum/adam: L2 added to the gradient;\n"
    "                                adamw: decoupled (default 0.01 there, else 0)\n"
    "  --lr-schedule constant|step|cosine|linear\n"
    "                                the learning rate of global step s (default\n"
    "                                constant); the update s -> s+1 uses step s's rate\n"
    "  --warmup-steps W              linear warm-up from 0 over the first W steps (0)\n"
    "  --decay-steps T               cosine/linear: steps from the end of warm-up to\n"
    "                                --lr-min, which holds after them (required there)\n"
    "  --lr-min LR                   the floor of cosine/linear (default 0)\n"
    "  --step-every S --step-gamma G step: multiply the rate by G every S steps (G 0.1)\n"
    "  --clip-norm C                 scale each step's averaged gradients to a global\n"
    "                                L2 norm <= C (torch clip_grad_norm_; 0 = off)\n"
    "  --ema-decay D                 keep exponential moving averages of the variables\n"
    "  --checkpoint-every-steps N    default 1 (every step durable); 0 = only on shutdown\n"
    "  --checkpoint-budget PCT       instead of a fixed interval: commit as often as keeps\n"
    "                                the measured commit cost within PCT % of the steps'\n"
    "                                time (every step for a small model, every k for a\n"
    "                                big one, k following the costs; docs/operations.md)\n"
    "  --checkpoint-max-steps K      with a budget: commit at least every K steps\n"
    "  --checkpoint-max-seconds S    with a budget: commit at least every S seconds\n"
    "                                (a budget and --checkpoint-every-steps: refused)\n"
    "  --keep-checkpoints K          retained restorable steps (default 3)\n"
    "  --keep-every-steps E          also keep the first committed step of every E\n"
    "                                steps (sparse history to roll back to after a\n"
    "                                divergence); 0 = none.  Recorded in the store: a\n"
    "                                restart without it keeps the recorded E\n"
    "  --store-page-kib P            SQLite page size of a NEW store: 1..64, a power of two\n"
    "                                (64; 4 commits a model up to ~512 KiB faster,\n"
    "                                docs/store.md)\n"
    "  --resume-from-step S          restore retained step S instead of the latest\n"
    "  --accept-rollback             start even though the store is behind the step it\n"
    "                                last committed (a lost or damaged -wal, an older copy,\n"
    "                                a missing store: refused without it); the loss is\n"
    "                                recorded in the store (docs/operations.md)\n"
    "  --step-log                    record the contributors of every step in the store\n"
    "  --sync full|normal            SQLite synchronous mode (default full)\n"
    "  --wal-limit-kib K             the store's WAL is copied into its file once it\n"
    "                                holds K KiB (default: 16 commits' worth, 8 MiB to\n"
    "                                512 MiB, so a lost -wal loses few steps)\n"
    "  --wal-checkpoint thread|inline\n"
    "                                who copies the WAL into the store file when it is\n"
    "                                full: a thread of the store, or the commit that\n"
    "                                filled it (a stall of that commit). Default: the\n"
    "                                thread with --commit sync, inline with async (the\n"
    "                                writer thread is off the step's path already)\n"
    "  --sparse-mean per-row|per-replica\n"
    "                                divide a sparse row's sum by the gradients that\n"
    "                                touched it (default) or by R\n"
    "  --nonfinite reject|allow      refuse gradients with NaN/Inf (default reject)\n"
    "  --grace-ms MS                 on SIGINT/SIGTERM, time to finish the step (2000)\n"
    "  --curve-secret-key-file F     CURVE: encrypt and authenticate (syncrep keygen)\n"
    "  --authorized-keys FILE        CURVE: client public keys admitted, one a line\n"
    "  --commit sync|async           sync (default): a step's tokens go out after its commit;\n"
    "                                async: a writer thread commits while the next step runs\n"
    "                                (a crash may lose the steps not yet committed, never more)\n"
    "  --commit-interval-ms M        async: the writer starts a commit at most every M ms\n"
    "                                (1; 0 = as often as it can): a small model then does\n"
    "                                not commit every step on the workers' cores\n"
    "  --piggyback-max-kib K         a step's token carries the whole model when it is at\n"
    "                                most K KiB (1024; 0 = never): saves the pulls' round trips\n"
    "  --partition-kib K             variables above K KiB are split into partitions of\n"
    "                                about K KiB along their first dimension, each its own\n"
    "                                accumulator and message (2048; 0 = never)\n"
    "  --partition-bytes B           the same in bytes (tests: tiny partitions)\n"
    "  --max-message-mib M           largest request accepted (64; raised to the largest\n"
    "                                stored variable + 1 MiB; initial values above it are\n"
    "                                declared in parts)\n"
    "  --deterministic-sum           sum each step's gradients in task order, whatever\n"
    "                                order they arrive in: bit-reproducible runs (keeps\n"
    "                                up to R gradients per variable until the step)\n"
    "  --max-steps S                 the job ends when the global step reaches S: the\n"
    "                                last step is committed, workers' sr_client_step\n"
    "                                returns SR_EDONE, the coordinator exits 0 once they\n"
    "                                have left (at most 10 s later)\n"
    "  --max-tasks T                 task indexes 0..T-1 may join (default N; more lets\n"
    "                                spare workers wait beyond the N); others are refused\n"
    "  --max-clients C               worker clients admitted at once (default 64, or\n"
    "                                4 per task above 16 tasks); more are refused\n"
    "  --reconfigure                 apply recipe options that differ from the store's\n"
    "                                (logged as COORD-RECONFIGURE, recorded with the\n"
    "                                incarnation); refused without it\n"
    "  --allow-new-variables         let the chief declare a variable the model lacks\n"
    "                                once it is ready (refused without it: a program\n"
    "                                declaring another model must not change this one)\n"
    "  --log-level LEVEL             err|warn|notice|info|debug (default info)\n"
    "  --metrics-bind ADDR:PORT      serve Prometheus metrics at http://ADDR:PORT/metrics\n"
    "                                (e.g. 127.0.0.1:9464; docs/metrics.md)\n"
    "  --heartbeat-ivl-ms MS         ZeroMQ heartbeat to every worker connection every MS\n"
    "                                (1000; 0 = off): a dead or half-open one is dropped\n"
    "  --heartbeat-timeout-ms MS     ... when nothing is heard MS after a PING (5000)\n"
    "  --tcp-keepalive-idle-s S      TCP keepalive after S idle seconds (10; 0 = off)\n"
    "  --tcp-keepalive-intvl-s S     seconds between keepalive probes (2)\n"
    "  --tcp-keepalive-cnt N         unanswered probes before the kernel drops it (3)\n"
    "                                (docs/network.md)\n"
    "  --min-replicas M              elastic: when a worker has been gone for\n"
    "                                --worker-timeout-ms and fewer than R are live, steps\n"
    "                                go on with max(M, live) replicas, rising back at a\n"
    "                                step boundary (default R: never fewer)\n"
    "  --worker-timeout-ms MS        a worker not heard from this long has left (10000)\n"
    "  --admin-keys FILE             CURVE: the client public keys that may use\n"
    "                                `syncrep ctl` (none: nobody may)\n";

static int
need(int i, int argc, char **argv)
{
    if (i + 1 >= argc) {
        sr_args_usage_error("coordinator", "%s needs a value", argv[i]);
        return 0;
    }
    return 1;
}

int
sr__cli_coordinator(int argc, char **argv)
{
    sr_coord_opts o;
    long long     v;
    int           every_given = 0; /* issue 28: --checkpoint-every-steps on the line */

    sr_coord_opts_default(&o);
    o.R = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (strcmp(a, "--step-log") == 0) {
            o.step_log = 1;
            continue;
        }
        if (strcmp(a, "--deterministic-sum") == 0) {
            o.deterministic_sum = 1;
            continue;
        }
        if (strcmp(a, "--accept-rollback") == 0) {
            o.accept_rollback = 1;
            continue;
        }
        if (strcmp(a, "--reconfigure") == 0) {
            o.reconfigure = 1;
            continue;
        }
        if (strcmp(a, "--nesterov") == 0) { /* issue 25 */
            o.optim.nesterov = 1;
            o.given |= SR_COORD_GIVEN_NESTEROV;
            continue;
        }
        if (strcmp(a, "--allow-new-variables") == 0) {
            o.allow_new_variables = 1;
            continue;
        }
        if (!need(i, argc, argv)) {
            return 2;
        }
        const char *val = argv[++i];
        int         bad = 0;
        if (strcmp(a, "--store") == 0) {
            o.store_path = val;
        } else if (strcmp(a, "--bind") == 0) {
            o.bind = val;
        } else if (strcmp(a, "--replicas-to-aggregate") == 0) {
            bad = sr_args_parse_i64(val, 1, 1 << 20, &v);
            o.R = (int)v;
        } else if (strcmp(a, "--total-replicas") == 0) {
            bad = sr_args_parse_i64(val, 1, 1 << 20, &v);
            o.N = (int)v;
        } else if (strcmp(a, "--max-steps") == 0) {
            bad = sr_args_parse_i64(val, 1, INT64_MAX, &v);
            o.max_steps = (int64_t)v;
        } else if (strcmp(a, "--max-tasks") == 0) {
            bad = sr_args_parse_i64(val, 1, 1 << 20, &v);
            o.max_tasks = (int)v;
        } else if (strcmp(a, "--max-clients") == 0) {
            bad = sr_args_parse_i64(val, 1, 1 << 20, &v);
            o.max_clients = (int)v;
        } else if (strcmp(a, "--init-tokens") == 0) {
            bad = sr_args_parse_i64(val, 0, 1 << 20, &v);
            o.init_tokens = (int)v;
        } else if (strcmp(a, "--optimizer") == 0) {
            bad = sr__optim_parse(val, &o.optim.kind) != SR_OK;
            o.given |= SR_COORD_GIVEN_OPTIMIZER;
        } else if (strcmp(a, "--learning-rate") == 0) {
            bad = sr_args_parse_f64(val, &o.optim.lr) || !(o.optim.lr > 0);
            o.given |= SR_COORD_GIVEN_LR;
        } else if (strcmp(a, "--momentum") == 0) {
            bad = sr_args_parse_f64(val, &o.optim.momentum) || o.optim.momentum < 0;
            o.given |= SR_COORD_GIVEN_MOMENTUM;
        } else if (strcmp(a, "--beta1") == 0) {
            bad = sr_args_parse_f64(val, &o.optim.beta1) ||
                  !(o.optim.beta1 >= 0 && o.optim.beta1 < 1);
            o.given |= SR_COORD_GIVEN_BETA1;
        } else if (strcmp(a, "--beta2") == 0) {
            bad = sr_args_parse_f64(val, &o.optim.beta2) ||
                  !(o.optim.beta2 >= 0 && o.optim.beta2 < 1);
            o.given |= SR_COORD_GIVEN_BETA2;
        } else if (strcmp(a, "--epsilon") == 0) {
            bad = sr_args_parse_f64(val, &o.optim.epsilon) || !(o.optim.epsilon > 0);
            o.given |= SR_COORD_GIVEN_EPSILON;
        } else if (strcmp(a, "--ema-decay") == 0) {
            bad = sr_args_parse_f64(val, &o.optim.ema_decay) ||
                  !(o.optim.ema_decay >= 0 && o.optim.ema_decay < 1);
            o.optim.ema = 1;
            o.given |= SR_COORD_GIVEN_EMA;
        } else if (strcmp(a, "--checkpoint-every-steps") == 0) {
            bad = sr_args_parse_i64(val, 0, 1LL << 30, &v);
            o.checkpoint_every = (int)v;
            every_given = 1;
        } else if (strcmp(a, "--checkpoint-budget") == 0) { /* issue 28 */
            bad = sr_args_parse_f64(val, &o.checkpoint_budget_pct) ||
                  !(o.checkpoint_budget_pct > 0 && o.checkpoint_budget_pct <= 100);
        } else if (strcmp(a, "--checkpoint-max-steps") == 0) {
            bad = sr_args_parse_i64(val, 1, 1LL << 40, &v);
            o.checkpoint_max_steps = (int64_t)v;
        } else if (strcmp(a, "--checkpoint-max-seconds") == 0) {
            bad = sr_args_parse_f64(val, &o.checkpoint_max_seconds) ||
                  !(o.checkpoint_max_seconds > 0 && o.checkpoint_max_seconds <= 1e9);
        } else if (strcmp(a, "--store-page-kib") == 0) {
            bad = sr_args_parse_i64(val, 1, 64, &v) || (v & (v - 1)) != 0;
            o.store_page_size = (int)v * 1024;
        } else if (strcmp(a, "--wal-limit-kib") == 0) {
            bad = sr_args_parse_i64(val, 1, 1LL << 30, &v);
            o.wal_limit_bytes = v << 10;
        } else if (strcmp(a, "--wal-checkpoint") == 0) {
            bad = strcmp(val, "thread") != 0 && strcmp(val, "inline") != 0;
            o.wal_checkpoint = strcmp(val, "inline") == 0 ? SR_WAL_CKPT_INLINE : SR_WAL_CKPT_THREAD;
        } else if (strcmp(a, "--keep-checkpoints") == 0) {
            bad = sr_args_parse_i64(val, 1, 1 << 20, &v);
            o.keep_checkpoints = (int)v;
        } else if (strcmp(a, "--keep-every-steps") == 0) {
            bad = sr_args_parse_i64(val, 0, INT64_MAX, &v);
            o.keep_every_steps = v;
        } else if (strcmp(a, "--resume-from-step") == 0) {
            bad = sr_args_parse_i64(val, 0, INT64_MAX, &v);
            o.resume_from_step = v;
        } else if (strcmp(a, "--sync") == 0) {
            bad = strcmp(val, "full") != 0 && strcmp(val, "normal") != 0;
            o.sync_normal = strcmp(val, "normal") == 0;
        } else if (strcmp(a, "--sparse-mean") == 0) {
            bad = strcmp(val, "per-row") != 0 && strcmp(val, "per-replica") != 0;
            o.optim.sparse_mean = strcmp(val, "per-replica") == 0 ? SR_SPARSE_MEAN_PER_REPLICA
                                                                  : SR_SPARSE_MEAN_PER_ROW;
            o.given |= SR_COORD_GIVEN_SPARSE_MEAN;
        } else if (strcmp(a, "--nonfinite") == 0) {
            bad = strcmp(val, "reject") != 0 && strcmp(val, "allow") != 0;
            o.nonfinite_allow = strcmp(val, "allow") == 0;
            o.given |= SR_COORD_GIVEN_NONFINITE;
        } else if (strcmp(a, "--curve-secret-key-file") == 0) {
            o.curve_secret_key_file = val;
        } else if (strcmp(a, "--authorized-keys") == 0) {
            o.authorized_keys = val;
        } else if (strcmp(a, "--commit") == 0) {
            bad = strcmp(val, "sync") != 0 && strcmp(val, "async") != 0;
            o.commit_async = strcmp(val, "async") == 0;
        } else if (strcmp(a, "--commit-interval-ms") == 0) {
            bad = sr_args_parse_i64(val, 0, 3600000, &v);
            o.commit_interval_ms = (int)v;
        } else if (strcmp(a, "--piggyback-max-kib") == 0) {
            bad = sr_args_parse_i64(val, 0, 1 << 30, &v);
            o.piggyback_max_bytes = (uint64_t)v << 10;
        } else if (strcmp(a, "--partition-kib") == 0) {
            bad = sr_args_parse_i64(val, 0, 1 << 30, &v);
            o.partition_bytes = (uint64_t)v << 10;
            o.given |= SR_COORD_GIVEN_PARTITION;
        } else if (strcmp(a, "--partition-bytes") == 0) {
            bad = sr_args_parse_i64(val, 0, 1LL << 40, &v);
            o.partition_bytes = (uint64_t)v;
            o.given |= SR_COORD_GIVEN_PARTITION;
        } else if (strcmp(a, "--max-message-mib") == 0) {
            bad = sr_args_parse_i64(val, 1, 1 << 20, &v);
            o.max_message_bytes = (uint64_t)v << 20;
        } else if (strcmp(a, "--grace-ms") == 0) {
            bad = sr_args_parse_i64(val, 0, 3600000, &v);
            o.grace_ms = (int)v;
        } else if (strcmp(a, "--weight-decay") == 0) { /* issue 25 from here */
            bad = sr_args_parse_f64(val, &o.optim.weight_decay) || !(o.optim.weight_decay >= 0);
            o.given |= SR_COORD_GIVEN_WEIGHT_DECAY;
        } else if (strcmp(a, "--lr-schedule") == 0) {
            bad = sr__lr_parse(val, &o.optim.lr_schedule) != SR_OK;
            o.given |= SR_COORD_GIVEN_LR_SCHEDULE;
        } else if (strcmp(a, "--warmup-steps") == 0) {
            bad = sr_args_parse_i64(val, 0, 1LL << 50, &v);
            o.optim.warmup_steps = (int64_t)v;
            o.given |= SR_COORD_GIVEN_WARMUP;
        } else if (strcmp(a, "--decay-steps") == 0) {
            bad = sr_args_parse_i64(val, 1, 1LL << 50, &v);
            o.optim.decay_steps = (int64_t)v;
            o.given |= SR_COORD_GIVEN_DECAY_STEPS;
        } else if (strcmp(a, "--lr-min") == 0) {
            bad = sr_args_parse_f64(val, &o.optim.lr_min) || !(o.optim.lr_min >= 0);
            o.given |= SR_COORD_GIVEN_LR_MIN;
        } else if (strcmp(a, "--step-every") == 0) {
            bad = sr_args_parse_i64(val, 1, 1LL << 50, &v);
            o.optim.step_every = (int64_t)v;
            o.given |= SR_COORD_GIVEN_STEP_EVERY;
        } else if (strcmp(a, "--step-gamma") == 0) {
            bad = sr_args_parse_f64(val, &o.optim.step_gamma) || !(o.optim.step_gamma >= 0);
            o.given |= SR_COORD_GIVEN_STEP_GAMMA;
        } else if (strcmp(a, "--clip-norm") == 0) {
            bad = sr_args_parse_f64(val, &o.optim.clip_norm) || !(o.optim.clip_norm >= 0);
            o.given |= SR_COORD_GIVEN_CLIP_NORM;
        } else if (strcmp(a, "--heartbeat-ivl-ms") == 0) { /* issue 27: docs/network.md */
            bad = sr_args_parse_i64(val, 0, 3600000, &v) || (v > 0 && v < 10);
            o.heartbeat_ivl_ms = (int)v;
        } else if (strcmp(a, "--heartbeat-timeout-ms") == 0) {
            bad = sr_args_parse_i64(val, 100, 6553500, &v);
            o.heartbeat_timeout_ms = (int)v;
        } else if (strcmp(a, "--tcp-keepalive-idle-s") == 0) {
            bad = sr_args_parse_i64(val, 0, 86400, &v);
            o.tcp_keepalive_idle_s = (int)v;
        } else if (strcmp(a, "--tcp-keepalive-intvl-s") == 0) {
            bad = sr_args_parse_i64(val, 1, 3600, &v);
            o.tcp_keepalive_intvl_s = (int)v;
        } else if (strcmp(a, "--tcp-keepalive-cnt") == 0) {
            bad = sr_args_parse_i64(val, 1, 100, &v);
            o.tcp_keepalive_cnt = (int)v;
        } else if (strcmp(a, "--log-level") == 0) {
            int lvl;
            bad = sr_log_parse_level(val, &lvl) != SR_OK;
            if (!bad) {
                sr_log_set_level(lvl);
            }
        } else if (strcmp(a, "--metrics-bind") == 0) { /* issue 26 */
            o.metrics_bind = val;
        } else if (strcmp(a, "--min-replicas") == 0) { /* issue 26 */
            bad = sr_args_parse_i64(val, 1, 1 << 20, &v);
            o.min_replicas = (int)v;
        } else if (strcmp(a, "--worker-timeout-ms") == 0) {
            bad = sr_args_parse_i64(val, 100, 3600000, &v);
            o.worker_timeout_ms = (int)v;
        } else if (strcmp(a, "--admin-keys") == 0) {
            o.admin_keys = val;
        } else {
            return sr_args_usage_error("coordinator", "unknown option '%s'", a);
        }
        if (bad) {
            return sr_args_usage_error("coordinator", "bad value '%s' for %s", val, a);
        }
    }
    if (o.store_path == NULL) {
        return sr_args_usage_error("coordinator", "--store is required");
    }
    if (o.R < 1) {
        return sr_args_usage_error("coordinator", "--replicas-to-aggregate is required");
    }
    if (o.N < 0) {
        o.N = o.R;
    }
    if ((o.curve_secret_key_file == NULL) != (o.authorized_keys == NULL)) {
        return sr_args_usage_error("coordinator", "--curve-secret-key-file and --authorized-keys "
                                                  "go together");
    }
    /* Issue 22: a --bind refused in words, before a store is created. */
    char why[512];
    if (sr__cli_check_bind(o.bind, why, sizeof(why)) != 0) {
        return sr_args_usage_error("coordinator", "%s", why);
    }
    if (o.min_replicas > o.R) { /* issue 26 */
        return sr_args_usage_error("coordinator",
                                   "--min-replicas %d is above --replicas-to-aggregate %d",
                                   o.min_replicas, o.R);
    }
    if (o.admin_keys != NULL && o.curve_secret_key_file == NULL) {
        return sr_args_usage_error("coordinator", "--admin-keys needs CURVE "
                                                  "(--curve-secret-key-file, --authorized-keys)");
    }
    if (every_given && o.checkpoint_budget_pct > 0) { /* issue 28 */
        return sr_args_usage_error("coordinator",
                                   "--checkpoint-budget and --checkpoint-every-steps are two "
                                   "policies: give one (bound a budget with "
                                   "--checkpoint-max-steps)");
    }
    if (sr_coord_check_checkpoint(&o) != SR_OK) {
        return sr_args_usage_error("coordinator", "%s", sr_errdetail());
    }
    int k = o.init_tokens >= 0 ? o.init_tokens : o.R;
    if (k < o.R - o.N) {
        return sr_args_usage_error("coordinator",
                                   "--init-tokens %d is too few to finish the first step "
                                   "(need at least R - N = %d)",
                                   k, o.R - o.N);
    }

    /* The store's recipe for what was not given; a given option that
     * changes it is refused here, before the store counts an incarnation. */
    sr_err rc = sr_coord_resolve_opts(&o);
    if (rc != SR_OK) {
        fprintf(stderr, "syncrep coordinator: %s: %s\n", sr_strerror(rc), sr_errdetail());
        return 1;
    }
    if (!(o.optim.lr > 0)) {
        return sr_args_usage_error("coordinator", "--learning-rate is required (the store "
                                                  "records none)");
    }

    /* Each gradient arrives in a buffer ZeroMQ mallocs and frees: keep
     * freed buffers for reuse rather than fault fresh ones in (core/mem.h). */
    sr_tune_malloc();
    /* SQLite's page cache: about 8 MiB instead of what the largest
     * transaction touched (which never-trimmed heap would keep resident). */
    sr_store_set_heap_limit(8 << 20);

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    rc = sr_coord_run(&o, &stop_flag);
    if (rc != SR_OK) {
        fprintf(stderr, "syncrep coordinator: %s: %s\n", sr_strerror(rc), sr_errdetail());
        return 1;
    }
    return 0;
}
