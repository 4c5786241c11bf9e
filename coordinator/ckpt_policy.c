/*
 * The checkpoint policy: measured step time and commit cost in, "commit
 * this step?" and the interval out.  No clock, no I/O: server_step.c and
 * server_commit.c pass the times.  The model and the state machine are in
 * ckpt_policy.h; docs/operations.md says which policy fits which model.
 */
#include "coordinator/ckpt_policy.h"

#include <math.h>
#include <string.h>

/* The newest sample's weight in every EWMA. */
#define EWMA_W 0.25
/* A step time above this many times the average counts as this many: one
 * pause (a worker restarting, a coordinator start) must not make every
 * commit look cheap for the next dozen steps. */
#define OUTLIER_X 4.0
/* No interval above this, even with --checkpoint-max-steps 0. */
#define K_CAP 1000000

static void
ewma(double *avg, double sample)
{
    *avg = *avg < 0 ? sample : *avg + EWMA_W * (sample - *avg);
}

/* T as the budget divides by: the clean step time, else every step's. */
static double
step_time(const sr_ckpt *p)
{
    return p->t_ns >= 0 ? p->t_ns : p->t_all_ns;
}

static void
recompute(sr_ckpt *p)
{
    double t = step_time(p);

    if (p->state == SR_CKPT_FIXED) {
        return;
    }
    if (p->c_ns < 0 || t < 0) {
        p->k = 1; /* PROBE: every step, until the costs are known */
        return;
    }
    double denom = p->o.budget_pct / 100.0 * t;
    /* Less a rounding's worth, so that exactly the budget is not one more. */
    double k = denom > 0 ? ceil(p->c_ns / denom * (1 - 1e-9)) : K_CAP;
    if (!(k >= 1)) {
        k = 1;
    }
    if (k > K_CAP) {
        k = K_CAP;
    }
    p->k = (int64_t)k;
    if (p->o.max_steps > 0 && p->k > p->o.max_steps) {
        p->k = p->o.max_steps;
    }
    p->state = SR_CKPT_STEADY;
}

/* One commit's cost to the steps, covering `cover` steps. */
static void
record_cost(sr_ckpt *p, double cost_ns, int64_t cover)
{
    double t = step_time(p);

    ewma(&p->c_ns, cost_ns);
    if (t > 0 && cover > 0) {
        /* Decayed sums, not an average of ratios: the probe's commit of a
         * single step weighs as one step's time, not as a whole interval. */
        p->ov_cost_ns = p->ov_cost_ns * (1 - EWMA_W) + cost_ns;
        p->ov_time_ns = p->ov_time_ns * (1 - EWMA_W) + (double)cover * t;
        p->overhead = p->ov_cost_ns / p->ov_time_ns;
    }
}

/* async: the slow-down of the steps the writer overlapped, once a clean
 * step time exists; the writer's own time until then. */
static void
judge_async(sr_ckpt *p)
{
    double cost;

    if (p->t_ns >= 0) {
        cost = p->ovl_sum_ns - (double)p->ovl_n * p->t_ns;
        cost = cost > 0 ? cost : 0;
    } else if (p->writer_ns >= 0) {
        cost = p->writer_ns;
    } else {
        return; /* nothing to judge by yet: stays open */
    }
    record_cost(p, cost, p->ovl_cover);
    p->ovl_open = 0;
    p->ovl_n = 0;
    p->ovl_sum_ns = 0;
}

void
sr__ckpt_init(sr_ckpt *p, const sr_ckpt_opts *o, int64_t step, int64_t now_ns)
{
    memset(p, 0, sizeof(*p));
    p->o = *o;
    p->state = o->budget_pct > 0 ? SR_CKPT_PROBE : SR_CKPT_FIXED;
    p->k = p->state == SR_CKPT_FIXED ? o->every : 1;
    p->last_step = step;
    p->last_ns = now_ns;
    p->t_ns = p->t_all_ns = p->c_ns = p->writer_ns = p->overhead = p->bg_share_ns = -1;
}

int
sr__ckpt_step(sr_ckpt *p, int64_t step, int64_t now_ns, int overlapped)
{
    if (p->prev_step_ns > 0) {
        double d = (double)(now_ns - p->prev_step_ns - p->path_ns);
        d = d > 0 ? d : 0;
        if (p->t_all_ns > 0 && d > OUTLIER_X * p->t_all_ns) {
            d = OUTLIER_X * p->t_all_ns;
        }
        ewma(&p->t_all_ns, d);
        if (!p->o.async || !overlapped) {
            ewma(&p->t_ns, d);
            if (p->o.async && p->ovl_open) {
                judge_async(p);
            }
        } else {
            p->ovl_sum_ns += d;
            p->ovl_n++;
        }
    }
    p->path_ns = 0;
    p->prev_step_ns = now_ns;
    recompute(p);
    if (p->state == SR_CKPT_FIXED) {
        return p->o.every > 0 && step % p->o.every == 0;
    }
    return step - p->last_step >= p->k || (p->o.max_ns > 0 && now_ns - p->last_ns >= p->o.max_ns);
}

void
sr__ckpt_started(sr_ckpt *p, int64_t step, int64_t now_ns)
{
    int64_t cover = step - p->last_step;

    if (p->o.async) {
        if (p->ovl_open) {
            judge_async(p); /* every step since the last start was overlapped */
        }
        p->ovl_open = 1;
        p->ovl_cover = cover;
        p->ovl_n = 0;
        p->ovl_sum_ns = 0;
    }
    p->cover = cover;
    p->last_step = step;
    p->last_ns = now_ns;
    recompute(p);
}

void
sr__ckpt_cost(sr_ckpt *p, int64_t cost_ns, int64_t bg_ns)
{
    if (p->o.async) {
        p->writer_ns = (double)cost_ns;
        return;
    }
    p->path_ns = cost_ns;
    p->bg_commits++;
    if (bg_ns > 0) { /* a pass: the pages of the commits since the last one */
        ewma(&p->bg_share_ns, (double)bg_ns / (double)p->bg_commits);
        p->bg_commits = 0;
    }
    record_cost(p, (double)cost_ns + (p->bg_share_ns > 0 ? p->bg_share_ns : 0), p->cover);
    recompute(p);
}

int64_t
sr__ckpt_interval(const sr_ckpt *p)
{
    return p->k;
}

double
sr__ckpt_overhead(const sr_ckpt *p)
{
    return p->overhead > 0 ? p->overhead : 0;
}

const char *
sr__ckpt_state_name(sr_ckpt_state s)
{
    switch (s) {
    case SR_CKPT_FIXED:
        return "fixed";
    case SR_CKPT_PROBE:
        return "probe";
    case SR_CKPT_STEADY:
        return "steady";
    }
    return "?";
}
