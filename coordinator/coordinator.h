/*
 * The coordinator process: holds the model, accumulates pushes, applies the
 * optimizer, commits steps to the store and hands out step tokens, over one
 * ZeroMQ ROUTER socket.  Only the CLI calls this.  docs/architecture.md.
 */
#ifndef SR_COORDINATOR_H
#define SR_COORDINATOR_H

#include <signal.h>
#include <stdint.h>

#include "coordinator/coord_int.h"
#include "core/error.h"

enum { SR_WAL_CKPT_AUTO = 0, SR_WAL_CKPT_THREAD = 1, SR_WAL_CKPT_INLINE = 2 };

typedef struct {
    const char *store_path;  /* created if absent */
    const char *bind;        /* ZeroMQ endpoint */
    int         R;           /* replicas to aggregate (>= 1) */
    int         N;           /* total replicas (default R) */
    int         init_tokens; /* tokens when the model becomes ready; -1 = R */
    sr_optim    optim;
    int         checkpoint_every;      /* commit every k steps; 0 = only at shutdown */
    int         keep_checkpoints;      /* retained restorable steps */
    int64_t     keep_every_steps;      /* issue 22: also keep the first committed step of
                                          every K steps (sparse history, sr_store_opts);
                                          0 = none; -1 (default) = the rule the store
                                          recorded, so a restart need not repeat it */
    int     store_page_size;           /* a new store's SQLite page size; 0 = the store's */
    int64_t wal_limit_bytes;           /* the store's wal_checkpoint_bytes; 0 = its default */
    int     wal_checkpoint;            /* who copies a full WAL into the store file:
                                          SR_WAL_CKPT_AUTO (the store's thread with --commit
                                          sync, the writer itself with async), _THREAD, _INLINE */
    int64_t resume_from_step;          /* -1 = latest; else rewind to this retained step */
    int     accept_rollback;           /* start on a store behind its mark (sr_store_opts
                                          accept_rollback); recorded with the incarnation */
    int         step_log;              /* record contributors of every step */
    int         sync_normal;           /* synchronous=NORMAL instead of FULL */
    int         nonfinite_allow;       /* accept NaN/Inf gradients */
    int         grace_ms;              /* SIGINT/SIGTERM: time to finish the step */
    int         log_interval_ms;       /* step-rate log period */
    int         worker_timeout_ms;     /* a worker not heard from this long has left */
    const char *curve_secret_key_file; /* CURVE on when set (with authorized_keys) */
    const char *authorized_keys;       /* client public keys admitted */
    int         commit_async;          /* commit in a writer thread; tokens do not wait for it */
    int         commit_interval_ms;    /* async: start a commit at most this often (default 1) */
    uint64_t    piggyback_max_bytes;   /* TOKEN replies carry the model up to this size */
    uint64_t    partition_bytes;       /* split variables above this into partitions, each
                                          its own accumulator and push (0 = never) */
    uint64_t max_message_bytes;        /* ZMQ_MAXMSGSIZE floor; the largest variable plus
                                          headroom is always allowed */
    int      deterministic_sum;        /* sum a step's gradients in task order, not arrival order */
    int      max_clients;     /* clients admitted at once (each worker process is one); 0: auto */
    int      max_tasks;       /* task indexes admitted are 0..max_tasks-1; 0: N */
    unsigned given;           /* SR_COORD_GIVEN_* bits: the job's recipe options set by the caller
                                 (the others come from the store, sr_coord_resolve_opts) */
    int  reconfigure;         /* a given recipe option may differ from the store's */
    int  allow_new_variables; /* a DECLARE may add a variable to a ready model */
    char reconfigured[512];   /* "optimizer adam->sgd ..." (sr_coord_resolve_opts): the
                                 changes --reconfigure applied; "" for none */
    int64_t max_steps;        /* the job ends when the global step reaches it; 0: never */
    /* issue 26: metrics */
    const char *metrics_bind; /* "ADDR:PORT" of the Prometheus endpoint; NULL: none */
    /* Issue 27: dead and half-open worker connections found in seconds
     * (docs/network.md).  sr_coord_opts_default sets the defaults. */
    int heartbeat_ivl_ms;      /* ZeroMQ PING every this often (1000; <= 0 = off) */
    int heartbeat_timeout_ms;  /* no traffic this long after a PING: drop the connection (5000) */
    int tcp_keepalive_idle_s;  /* TCP keepalive: idle seconds before the first probe (10;
                                  <= 0 = off, the kernel's settings) */
    int tcp_keepalive_intvl_s; /* seconds between probes (2) */
    int tcp_keepalive_cnt;     /* unanswered probes before the kernel drops it (3) */
    /* issue 26: elastic. */
    int min_replicas;       /* M: steps go on with R' = max(M, live) replicas when fewer
                               than R are live; 0 (default): R, never fewer */
    const char *admin_keys; /* with CURVE: the client public keys that may use ctl */
    /* issue 28: the checkpoint budget (coordinator/ckpt_policy.h, docs/operations.md). */
    double checkpoint_budget_pct;   /* > 0: commit as often as keeps the measured commit cost
                                       within PCT % of the steps' time (checkpoint_every is
                                       then unused); 0: checkpoint_every */
    int64_t checkpoint_max_steps;   /* with a budget: commit at least every K steps (0: none) */
    double  checkpoint_max_seconds; /* with a budget: commit at least every S s (0: none) */
} sr_coord_opts;

/* The job's recipe: the options a store keeps from one start to the next
 * (docs/operations.md, "Restarting").  R, N and the rest are free. */
enum {
    SR_COORD_GIVEN_OPTIMIZER = 1u << 0,
    SR_COORD_GIVEN_LR = 1u << 1,
    SR_COORD_GIVEN_MOMENTUM = 1u << 2,
    SR_COORD_GIVEN_BETA1 = 1u << 3,
    SR_COORD_GIVEN_BETA2 = 1u << 4,
    SR_COORD_GIVEN_EPSILON = 1u << 5,
    SR_COORD_GIVEN_EMA = 1u << 6,
    SR_COORD_GIVEN_SPARSE_MEAN = 1u << 7,
    SR_COORD_GIVEN_NONFINITE = 1u << 8,
    SR_COORD_GIVEN_PARTITION = 1u << 9,
    /* issue 25: the torch.optim recipe options (docs/optimizers.md). */
    SR_COORD_GIVEN_NESTEROV = 1u << 10,
    SR_COORD_GIVEN_WEIGHT_DECAY = 1u << 11,
    SR_COORD_GIVEN_LR_SCHEDULE = 1u << 12,
    SR_COORD_GIVEN_WARMUP = 1u << 13,
    SR_COORD_GIVEN_DECAY_STEPS = 1u << 14,
    SR_COORD_GIVEN_LR_MIN = 1u << 15,
    SR_COORD_GIVEN_STEP_EVERY = 1u << 16,
    SR_COORD_GIVEN_STEP_GAMMA = 1u << 17,
    SR_COORD_GIVEN_CLIP_NORM = 1u << 18
};

/* Defaults for everything but store_path, R and optim.lr. */
void sr_coord_opts_default(sr_coord_opts *o);

/* issue 28: SR_EINVAL, naming the option, when the checkpoint options do not
 * fit: a budget outside (0, 100], a negative bound, or a bound without a
 * budget.  sr_coord_run checks it too; the CLI first, for a usage error. */
sr_err sr_coord_check_checkpoint(const sr_coord_opts *o);

/* Run until *stop becomes nonzero (then finish the step in progress within
 * grace_ms, commit, and return SR_OK).  Returns an error when start-up fails
 * (store, bind, bad options) or the store fails in a way that cannot be
 * retried; the error is logged before returning. */
sr_err sr_coord_run(const sr_coord_opts *o, volatile sig_atomic_t *stop);

/* Before sr_coord_run: read the recipe the store at o->store_path last ran
 * with (nothing when it does not exist yet, or records none) and take it
 * for every recipe option not in o->given.  A given one that differs is
 * SR_EINVAL naming the option, the stored value and the given one, unless
 * o->reconfigure (then o->reconfigured lists the changes, old->new).  Also
 * SR_EINVAL: a given option the (resulting) optimizer does not use
 * (--momentum without momentum, --beta1/--beta2/--epsilon without adam or
 * adamw, --nesterov without momentum, --step-every/--step-gamma without
 * --lr-schedule step, --decay-steps/--lr-min without cosine or linear), or
 * settings that do not fit (sr__optim_check).  adamw's weight decay
 * defaults to 0.01 (torch.optim.AdamW's) when neither given nor stored.
 * Opens the store under its writer lock and writes nothing.  When the
 * store exists but cannot be locked or opened: that error (SR_EBUSY,
 * SR_EROLLBACK, ...) if no learning rate was given, else SR_OK with o as it
 * was (sr_coord_run then refuses the start, logging the reason). */
sr_err sr_coord_resolve_opts(sr_coord_opts *o);

#endif
