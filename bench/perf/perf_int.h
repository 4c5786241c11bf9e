/*
 * perf's internals, shared by its files: the run shapes and results, the
 * shared mapping children report through, the table's cells, and the
 * functions one file calls in another (perf_proc.c, perf_worker.c,
 * perf_run.c, perf_rows.c; main is in perf.c).
 */
#ifndef SR_PERF_INT_H
#define SR_PERF_INT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "syncrep/syncrep.h"

#define KIB            1024u
#define MIB            (1024u * 1024u)
#define MAX_W          8
#define MAX_PROCS      (MAX_W + 2)
#define REC_MAX        8192
#define PART_BYTES     (4u * MIB) /* "split" models: variables of 4 MiB */
#define MAX_REPS       15
#define MAX_CELLS      64 /* the table's rows; a full run has 41 */
#define MAX_EXTRA      16
#define MAX_KILLS      20
#define LR             0.0009765625 /* 2^-10: every expected value below is exact */
#define RUN_TIMEOUT_MS 300000       /* a run that takes longer has hung: a failure */
#define LR_TEXT        "0.0009765625"

enum { LOOP_PUSH = 0, LOOP_FULL = 1 }; /* push + step | pull + push + step */
enum { PH_IDLE = 0, PH_PULL = 1, PH_PUSH = 2, PH_STEP = 3 };

/* One syncrep or baseline run's shape. */
typedef struct {
    int     W;                   /* workers; R = N = W */
    size_t  bytes;               /* model bytes (float32) */
    int     nvars;               /* variables of bytes / nvars each */
    int     loop;                /* LOOP_PUSH or LOOP_FULL */
    int     ckpt;                /* --checkpoint-every-steps */
    int     sync_normal;         /* --sync normal (else full) */
    int     page_kib;            /* > 0: --store-page-kib */
    int     async;               /* --commit async (else the default, sync) */
    int64_t warm;                /* steps before the timed window */
    int64_t steps;               /* steps in the timed window; the most, with target_ms */
    int64_t min_steps;           /* with target_ms: the fewest */
    int     target_ms;           /* > 0: close the window after about this long */
    int     ack;                 /* row 1 baseline: one acknowledged message in flight */
    int     kill_at_end;         /* SIGKILL the coordinator after the window (skips its final
                                    commit, which the row does not measure) */
    int many;                    /* row 6: MANY_CALLS sr_client_pull_many / sr_client_push_many,
                                    MANY_MODEL the model API (sr_client_model_step), else a
                                    call per variable */
    const int64_t *tensor_elems; /* row 6: each variable's float32 elements (nvars of
                                    them, summing to bytes / 4); NULL: bytes / nvars each */
    /* issue 25: --optimizer adamw --weight-decay 0.01 --clip-norm 1 instead of
     * SGD (worker 0 then checks only that the model changed, not its values). */
    int adamw_clip;
    /* issue 23, token deltas: this many not-trainable float32[4] variables
     * declared beside the model and never pulled (the token used to carry
     * them all every step). */
    int frozen;
    /* issue 28: > 0: --checkpoint-budget PCT instead of --checkpoint-every-steps */
    double budget_pct;
    /* issue 28: each worker (syncrep's and the baseline's) spends this long
     * before each push, as a model's forward and backward pass would
     * (asleep: the accelerator's time, not the CPU's). */
    int compute_us;
    /* issue 23, with MANY_MODEL: the gradients written once into the
     * client's own buffers (sr_client_model_grad) and the step called with
     * grads and values NULL: no gather, no scatter (the API's zero-copy use). */
    int model_inplace;
} run_cfg;

enum { MANY_CALLS = 1, MANY_MODEL = 2 };

/* Variable v's bytes in c. */
size_t run_cfg_tensor_bytes(const run_cfg *c, int v);

/* A worker's token: the step value it got and when, in which incarnation. */
typedef struct {
    int64_t  t_ns;
    int64_t  tok;
    uint64_t inc;
} rec;

/* What one child reports.  Counters and window fields are written by the
 * child and read after it exited; phase, last_tok, inc and nrec are read
 * while it runs (row 4). */
typedef struct {
    int               failed;
    char              err[512];
    int64_t           t_start_ns, t_end_ns; /* the window's ends (monotonic) */
    int64_t           tok_start, tok_end;
    int64_t           push_ns, pull_ns, step_ns; /* inside the calls, in the window */
    int64_t           iters;                     /* loop iterations in the window */
    double            coord_cpu_s;               /* worker 0: coordinator CPU in the window */
    int64_t           coord_faults;              /* worker 0: coordinator page faults in it */
    double            self_cpu_s;                /* own process CPU in the window */
    int64_t           self_faults;               /* own page faults in the window */
    uint64_t          stale, duplicate, resends; /* push outcomes in the window */
    int64_t           checked, wrong;            /* verified elements, wrong ones */
    int64_t           final_step;                /* worker 0: global step it verified at */
    int64_t           hwm_kib;                   /* receivers: own VmHWM */
    volatile int      phase;                     /* PH_* */
    volatile int64_t  last_tok;                  /* -1 before the first token */
    volatile uint64_t inc;                       /* incarnation of the last token */
    volatile int64_t  nrec;                      /* recs[0..nrec) are valid */
    rec               recs[REC_MAX];
} slot;

typedef struct {
    volatile int64_t stop_at; /* workers stop at their first token >= this (0: never) */
    slot             s[MAX_PROCS];
} shm;

/* Result of one run. */
typedef struct {
    double  value;                          /* GB/s (row 1) or steps/s */
    int64_t steps;                          /* in the window */
    double  step_ms;                        /* window / steps */
    double  server_faults;                  /* coordinator / receiver page faults per step */
    double  worker_faults;                  /* page faults per step per worker */
    double  wall_s;                         /* the whole run: start-up, warm-up, window, shutdown */
    double  push_ms, pull_ms, step_wait_ms; /* per step, mean over workers */
    double  server_cpu;                     /* coordinator / receiver CPU share of a core */
    double  worker_cpu;                     /* mean worker CPU share of a core */
    double  hwm_mib;                        /* coordinator VmHWM before shutdown */
    char    wal[240]; /* its store commits and WAL checkpoints (log_store_lines) */
    /* issue 28, from the shutdown's COORD-COMMITS line: the store commits of
     * the whole run, the policy's interval at the end and its measured
     * overhead in % (-1: no such line); steps_total: the last global step. */
    int64_t  commits, ckpt_interval, steps_total;
    double   ckpt_overhead_pct;
    uint64_t stale, duplicate, resends;
    int64_t  checked, wrong;
} run_res;

/* A table row: a configuration, its syncrep and baseline values, a target. */
typedef struct {
    int    row;
    char   config[96];
    char   unit[16];
    char   target[24];
    int    nreps;
    double sr[MAX_REPS], base[MAX_REPS];
    double sr_med, base_med, ratio; /* ratio: median of the per-rep ratios */
    int    has_target, met;
    char   note[160];
} cell;

typedef struct {
    char   label[96];
    size_t held_bytes;
    double hwm_mib;
} mem_obs;

typedef struct {
    const char *syncrep;
    const char *extra[MAX_EXTRA]; /* --coord-arg: appended to every coordinator */
    int         nextra;
    char        dir[128];
    int         run_id;
    int         quick, reps, enforce, kills;
    int         ingest_stream; /* row 1 baseline streams instead of acking */
    const char *filter;        /* rows 1-2: only configurations containing this */
    unsigned    seed;
    shm        *sh;
    pid_t       kids[MAX_PROCS]; /* children alive, 0 = free slot */
    int         failures;        /* wrong values or failed processes */
    cell        cells[MAX_CELLS];
    int         ncells;
    mem_obs     mem[MAX_CELLS];
    int         nmem;
} bench;

/* Set by SIGINT / SIGTERM (on_signal): every loop stops, children are killed. */
extern volatile sig_atomic_t interrupted;
/* --push-then-step: workers end a round with push + step, not push_step. */
extern int push_then_step;

/* perf_proc.c */
void    on_signal(int sig);
int64_t now_ns(void);
double  cpu_self_s(void);
void    sleep_ms(int ms);
void    sleep_us(int us);
double  median(const double *v, int n);
void    fail_msg(slot *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
float   grad_at(size_t i);
double  proc_stat(pid_t pid, int64_t *faults);
int64_t self_faults(void);
int64_t proc_hwm_kib(pid_t pid);
void    untrack(bench *b, pid_t pid);
void    kill9(bench *b, pid_t pid);
void    kill_all(bench *b);
pid_t   fork_child(bench *b);
void    print_log_tail(const char *path);
void    log_store_lines(const char *log, char *out, size_t len);
/* issue 28: r's commits, ckpt_interval and ckpt_overhead_pct from the log's
 * COORD-COMMITS line (-1 each when there is none). */
void  log_ckpt_line(const char *log, run_res *r);
pid_t spawn_coordinator(bench *b, const run_cfg *c, const char *store, const char *endpoint,
                        const char *log);
int   wait_bound(bench *b, pid_t pid, const char *sock_path, int timeout_ms);
int   stop_process(bench *b, pid_t pid, int timeout_ms);
int   wait_children(bench *b, const pid_t *pids, int n, int timeout_ms, pid_t watch,
                    const char *what);
void  remove_run_files(const char *dir, const char *stem);
void  report_child_errors(const shm *sh, int n, const char *what);

/* perf_worker.c */
int sync_worker(const run_cfg *c, int w, const char *endpoint, pid_t coord, shm *sh);
int stream_sender(const run_cfg *c, int w, const char *endpoint, shm *sh);
int stream_receiver(const run_cfg *c, const char *endpoint, shm *sh, int me);
int rtt_worker(const run_cfg *c, int w, const char *endpoint, shm *sh);
int rtt_receiver(const run_cfg *c, const char *endpoint, shm *sh, int me);

/* perf_run.c */
void        reset_slots(shm *sh);
int         sync_run(bench *b, const run_cfg *c, run_res *r);
int         base_run(bench *b, const run_cfg *c, run_res *r);
cell       *new_cell(bench *b, int row, const char *config, const char *unit, const char *target);
void        finish_cell(cell *x);
void        print_diag(const char *who, const run_res *r, int loop, int sync);
void        add_mem(bench *b, const char *label, size_t held, double hwm);
const char *size_text(size_t bytes, char *buf, size_t len);
void        print_table(const bench *b);
int         write_json(const bench *b, const char *path);

/* perf_rows.c */
int row_ingest(bench *b);
int row_small(bench *b);
int row_commit(bench *b);
int row_recovery(bench *b);
int row_many(bench *b);
int row_memory(bench *b);

#endif
