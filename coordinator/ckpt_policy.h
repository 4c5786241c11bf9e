/*
 * The checkpoint policy (issue 28): after each applied step, decide whether
 * that step is committed.  Pure and clock-injected: every time is an
 * argument in monotonic nanoseconds, so the unit test drives it exactly
 * (tests/unit/coordinator/ckpt_policy_test.c).  server_step.c asks it,
 * server_commit.c feeds it what the commits cost.  docs/operations.md,
 * "Choosing a checkpoint policy".
 *
 * Two policies:
 *   fixed  (--checkpoint-every-steps k): step s is committed when k > 0 and
 *          s % k == 0; costs are still measured, for status and metrics.
 *   budget (--checkpoint-budget PCT): commit every k steps, k the smallest
 *          interval whose measured cost is within PCT of the steps' time:
 *              k = ceil(C / (PCT/100 * T)), 1 <= k <= --checkpoint-max-steps
 *          and a commit also when --checkpoint-max-seconds have passed since
 *          the last one, whatever it costs.
 *
 * What is measured (EWMAs, weight 1/4 for the newest sample):
 *   T  the step time without the commit: the time between two applies,
 *      less the commit that held the earlier step's tokens (--commit sync);
 *      with --commit async, only steps the writer did not overlap count.
 *   C  what one commit costs the steps.  sync: the commit's own time (it is
 *      on the step's path: the tokens wait for it), plus its share of the
 *      store's WAL checkpoint thread (which copies the commits' pages into
 *      the database beside the steps): each pass's time divided among the
 *      commits since the pass before, whose pages it copied (an EWMA over
 *      passes; charging a whole pass to the one commit it followed made C
 *      jump a hundredfold at every pass).  async: the slow-down of
 *      the steps the writer overlapped, sum(d_i) - n * T over those steps
 *      (it competes with the workers for the cores), judged at the first
 *      step the writer no longer overlaps; until a clean step time exists,
 *      the writer's own time stands in (an upper bound: it makes k larger,
 *      which creates the clean steps that measure T).
 *   overhead  the fraction of the steps' time durability took: the commits'
 *      costs over the time of the steps they covered (n * T for a commit
 *      covering n steps), both sums decayed by 3/4 a commit.
 *
 * States of the budget policy:
 *
 *     init          first C and T known
 *   ---------> PROBE ------------------> STEADY --+
 *              (commit every step,         ^      | a commit's cost or a
 *               to measure C and T)        +------+ step time: k recomputed
 *
 *   transition        function
 *   -> PROBE          sr__ckpt_init
 *   PROBE -> STEADY   sr__ckpt_cost, _step or _started, once C and T are known
 *   STEADY -> STEADY  the same (k follows the costs)
 *
 * Invariants: FIXED never changes state.  PROBE: interval() == 1.  STEADY:
 * 1 <= interval() <= max_steps (when set).  last_step <= the step of every
 * later sr__ckpt_step call.
 */
#ifndef SR_CKPT_POLICY_H
#define SR_CKPT_POLICY_H

#include <stdint.h>

typedef enum {
    SR_CKPT_FIXED = 0,  /* --checkpoint-every-steps */
    SR_CKPT_PROBE = 1,  /* budget: measuring the first commit and step */
    SR_CKPT_STEADY = 2, /* budget: k from the measured costs */
} sr_ckpt_state;

typedef struct {
    double  budget_pct; /* > 0: the budget policy; 0: fixed */
    int64_t every;      /* fixed: commit every k steps; 0 = never (only at shutdown) */
    int64_t max_steps;  /* budget: commit at least every K steps; 0 = no bound */
    int64_t max_ns;     /* budget: commit at least every S s (in ns); 0 = no bound */
    int     async;      /* --commit async: C is the slow-down of overlapped steps */
} sr_ckpt_opts;

typedef struct {
    sr_ckpt_opts  o;
    sr_ckpt_state state;
    int64_t       k;            /* the current interval in steps (fixed: every) */
    int64_t       last_step;    /* the step the last commit started from */
    int64_t       last_ns;      /* ... and when */
    int64_t       prev_step_ns; /* when the previous step was applied; 0: none yet */
    int64_t       path_ns;      /* sync: the commit that held the previous step's tokens */
    double        t_ns;         /* T: the step time without commits (EWMA; < 0: unknown) */
    double        t_all_ns;     /* every step's time less path commits (async fallback) */
    double        c_ns;         /* C: one commit's cost to the steps (EWMA; < 0: unknown) */
    double        bg_share_ns; /* sync: a commit's share of a WAL checkpoint pass (< 0: none yet) */
    int64_t       bg_commits;  /* sync: commits since the last pass */
    double        writer_ns;   /* async: the writer's time for the last commit (< 0: none) */
    double        overhead;    /* the measured fraction (< 0: unknown) */
    double        ov_cost_ns;  /* ... its decayed sum of commit costs */
    double        ov_time_ns;  /* ... and of the covered steps' time */
    int64_t       cover;       /* sync: the steps the commit being timed covers */
    int64_t       ovl_n;       /* async: steps the writer overlapped since its start */
    double        ovl_sum_ns;  /* ... their summed step times */
    int64_t       ovl_cover;   /* ... the steps the commit being judged covered */
    int           ovl_open;    /* a commit's slow-down is being summed */
} sr_ckpt;

/* Start the policy at `step` (the restored step counts as committed) at
 * time now_ns.  A budget starts in PROBE, a fixed interval in FIXED. */
void sr__ckpt_init(sr_ckpt *p, const sr_ckpt_opts *o, int64_t step, int64_t now_ns);

/* Step `step` was applied at now_ns; `overlapped`: the async writer was busy
 * at some point during it (ignored with sync).  Returns 1 when the step
 * is due to be committed, else 0. */
int sr__ckpt_step(sr_ckpt *p, int64_t step, int64_t now_ns, int overlapped);

/* A commit of the state at `step` started at now_ns (sync: the commit
 * itself; async: the snapshot handed to the writer). */
void sr__ckpt_started(sr_ckpt *p, int64_t step, int64_t now_ns);

/* The commit just started (sync) or the writer's last one (async) took
 * cost_ns; bg_ns (sync only; 0 between passes): the time the WAL
 * checkpoint thread spent since the commit before.  sync: C is cost_ns
 * plus the commits' share of the passes, and the next step's time excludes
 * cost_ns (only the commit itself held its tokens back). */
void sr__ckpt_cost(sr_ckpt *p, int64_t cost_ns, int64_t bg_ns);

/* The current interval in steps (0: fixed, never). */
int64_t sr__ckpt_interval(const sr_ckpt *p);

/* The measured overhead, a fraction of the steps' time (0 until known). */
double sr__ckpt_overhead(const sr_ckpt *p);

/* "fixed", "probe" or "steady". */
const char *sr__ckpt_state_name(sr_ckpt_state s);

#endif
