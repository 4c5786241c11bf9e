/*
 * The step engine: what happens when a push takes the last accumulator of
 * a step.  The whole path, in order (to change how a step is committed,
 * start at commit_step):
 *
 *   server_push.c    finish_push: the push is answered (held) and counted
 *   this file        sr__coord_step_took: every accumulator taken?
 *                    apply_step: apply_var on each trainable variable,
 *                      then global step + 1
 *                    commit_step: the checkpoint policy (ckpt_policy.c:
 *                      every k steps, or a budget's measured k)
 *                      --commit sync:  sr__coord_commit_and_release: commit,
 *                                      then release_tokens; a failed commit
 *                                      holds the tokens, retried by the loop
 *                      --commit async: sr__coord_async_snapshot, then
 *                                      release_tokens at once
 *   server_commit.c  sr__coord_commit_now, or the writer: timed_commit
 *   server_peers.c   sr__coord_serve_parked (from release_tokens): parked
 *                    TOKEN requests get the new step's tokens
 *
 * Invariant: with --commit sync, the tokens of a step the policy commits
 * are released only after its commit succeeded.
 */
#include <inttypes.h>
#include <math.h>

#include "coordinator/server_int.h"
#include "core/clock.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/text.h"

static sr_err
log_contribs(coord *c, const cvar *v, uint32_t p, int64_t step)
{
    const sr_accum   *a = &v->acc[p];
    sr_store_contrib *l;

    if (!c->o->step_log) {
        return SR_OK;
    }
    l = sr_grow_array(c->log, &c->cap_log, c->nlog + (size_t)a->count, sizeof(*l));
    if (l == NULL) {
        return sr_fail(SR_ENOMEM, "step log of %zu rows", c->nlog + (size_t)a->count);
    }
    c->log = l;
    for (int i = 0; i < a->count; i++) {
        if (a->contrib[i].absent) {
            continue; /* a refused gradient: its task's place, nothing to replay */
        }
        l = &c->log[c->nlog++];
        l->step = step;
        l->var_id = v->meta.id;
        l->part = (int64_t)((uint64_t)p * v->part_rows * v->row_elems);
        l->pos = i;
        l->task_index = a->contrib[i].task_index;
        l->local_step = a->contrib[i].local_step;
    }
    return SR_OK;
}

/* n tokens of the new global step; parked requests are served at once.
 * At --max-steps the job ends instead (DONE).
 * Tokens older than g - 1 left in the queue are dropped first: no worker
 * takes one but a newly started one, for a round that can only be stale,
 * and with a backup replica gone for good one token a step would pile up
 * (the queue stays within a step or two). */
static void
release_tokens(coord *c, size_t n)
{
    if (c->state == COORD_SERVING && sr__coord_at_max_steps(c)) {
        sr__coord_end_job(c, "--max-steps reached"); /* its waiting workers get SR_EDONE */
        return;
    }
    sr__tokens_drop_below(&c->tokens, c->global_step - 1);
    if (sr__tokens_put(&c->tokens, c->global_step, n) != SR_OK) {
        SR_LOG(SR_LOG_ERR, "COORD-TOKENS", "cannot queue %zu tokens: %s", n, sr_errdetail());
        return;
    }
    sr__coord_serve_parked(c);
}

/* Commit the state and release the tokens waiting for it (pending_release);
 * a failed commit keeps them back and is retried from the loop (periodic,
 * every second). */
void
sr__coord_commit_and_release(coord *c)
{
    sr_err rc = sr__coord_commit_now(c);
    if (rc != SR_OK) {
        if (!c->commit_pending) {
            SR_LOG(SR_LOG_ERR, "COORD-COMMIT-FAIL",
                   "step=%" PRId64 " err=%s detail=\"%s\"; tokens held, retrying", c->global_step,
                   sr_errname(rc), sr_errdetail());
        }
        c->commit_pending = 1;
        c->commit_retry_ms = sr__coord_now_ms(c) + 1000;
        return;
    }
    if (c->commit_pending) {
        SR_LOG(SR_LOG_NOTICE, "COORD-COMMIT-OK", "step=%" PRId64 " committed after retry",
               c->global_step);
    }
    c->commit_pending = 0;
    if (c->pending_release > 0) {
        size_t n = (size_t)c->pending_release;
        c->pending_release = 0;
        release_tokens(c, n);
    }
}

/* Apply v's taken accumulators to its value and slots: into the buffer
 * sr__coord_apply_target chooses, so that no pull or commit reading the
 * previous value sees it change.  t is the 1-based count of applied steps;
 * so the step's optimizer (its learning rate and clipping factor). */
static void
apply_var(coord *c, cvar *v, int64_t t, const sr_optim *so)
{
    vbuf *to = sr__coord_apply_target(c, v);
    if (to == NULL) {
        /* Out of memory while pulls or the writer still read the value:
         * give them a moment to finish before writing in place. */
        SR_LOG(SR_LOG_ERR, "COORD-APPLY-WAIT", "%s", sr_errdetail());
        for (int k = 0; k < 1000 && atomic_load(&v->vb->refs) > 1; k++) {
            sr_clock_sleep_ms(1);
        }
        to = v->vb;
    }
    vbuf *from = v->vb; /* the previous value; == to when in place */
    v->vb = to;
    v->value = to->data;
    size_t es = sr_dtype_size(v->meta.dtype);
    for (uint32_t p = 0; p < v->nparts; p++) {
        uint64_t r0, nr;
        sr__coord_part_range(v, p, &r0, &nr);
        uint64_t e0 = r0 * v->row_elems;
        size_t   off = (size_t)e0 * es;
        sr__optim_apply_accum_from(so, t, &v->acc[p], (uint8_t *)v->value + off, from->data + off,
                                   v->s1 ? (uint8_t *)v->s1 + off : NULL,
                                   v->s2 ? (uint8_t *)v->s2 + off : NULL, v->dirty, v->chunk_elems,
                                   e0);
        if (log_contribs(c, v, p, c->global_step) != SR_OK) {
            SR_LOG(SR_LOG_ERR, "COORD-STEPLOG", "%s", sr_errdetail());
        }
        sr__accum_reset(&v->acc[p]);
    }
    if (to == v->ab) {
        /* The sums are the value now; the previous value becomes the
         * next step's sums once its pulls are sent (sr__coord_acc_memory). */
        v->ab = NULL;
        for (uint32_t p = 0; p < v->nparts; p++) {
            sr__accum_set_sum(&v->acc[p], NULL);
        }
    }
    if (from != to) {
        /* Pulls and the writer drop their references when done; the
         * buffer is kept for the apply after next (async) or the next
         * step's sums (sync, after the hand-over above). */
        if (v->spare == NULL && (c->o->commit_async || v->ab == NULL)) {
            v->spare = from;
        } else {
            sr__coord_vbuf_release(from);
        }
    }
    if (v->ema != NULL) {
        uint64_t n = v->meta.nbytes / sr_dtype_size(v->meta.dtype);
        if (v->meta.dtype == SR_FLOAT32) {
            sr__ema_f32(c->o->optim.ema_decay, v->ema, v->value, n);
        } else {
            sr__ema_f64(c->o->optim.ema_decay, v->ema, v->value, n);
        }
    }
    v->dirty_any = 1;
    v->fresh_from = c->global_step + 1;
}

/* issue 28: one COORD-CKPT-INTERVAL line when the budget's interval moves
 * by a quarter or more, so the log always says how many steps are at risk. */
static void
log_interval(coord *c)
{
    int64_t k = sr__ckpt_interval(&c->ckpt);
    int64_t was = c->ckpt_logged_k;

    if (c->ckpt.state == SR_CKPT_FIXED || k == was || (k * 4 < was * 5 && k * 5 > was * 4)) {
        return;
    }
    c->ckpt_logged_k = k;
    SR_LOG(SR_LOG_INFO, "COORD-CKPT-INTERVAL",
           "global_step=%" PRId64 " committed_step=%" PRId64 " interval_steps=%" PRId64
           " was=%" PRId64 " step_ms=%.3f commit_ms=%.3f overhead_pct=%.2f budget_pct=%g",
           c->global_step, c->committed_step, k, was,
           (c->ckpt.t_ns >= 0 ? c->ckpt.t_ns : c->ckpt.t_all_ns) / 1e6, c->ckpt.c_ns / 1e6,
           100 * sr__ckpt_overhead(&c->ckpt), c->o->checkpoint_budget_pct);
}

/* The commit policy, after step g's apply (global_step is now g + 1):
 * when the checkpoint policy says (ckpt_policy.h: every
 * --checkpoint-every-steps k steps, or a --checkpoint-budget's measured
 * interval) the step is committed, and its
 * max(N, R') tokens (R' the replicas in force, server_members.c) are released after the commit
 * (--commit sync) or at once while the writer commits a snapshot (--commit async: a crash may lose
 * this step, never an older committed one; docs/performance.md).  Other
 * steps release their tokens at once and go into the next commit. */
static void
commit_step(coord *c)
{
    int    r = sr__coord_replicas_effective(c); /* issue 26: R' of the next step */
    size_t ntok = (size_t)(c->o->N > r ? c->o->N : r);
    int    overlapped = 0;

    if (c->o->commit_async) {
        /* Overlapped: the writer was busy at some point of this step. */
        int busy = sr__coord_writer_poll(c);
        overlapped = c->ckpt_overlap;
        c->ckpt_overlap = busy;
    }
    int due = sr__ckpt_step(&c->ckpt, c->global_step, sr_clock_now_ns(), overlapped);
    log_interval(c);

    if (due && c->o->commit_async) {
        c->commit_wanted = 1;
        sr__coord_async_snapshot(c);
        release_tokens(c, ntok);
    } else if (due) {
        c->pending_release += (int64_t)ntok;
        sr__coord_commit_and_release(c);
    } else {
        release_tokens(c, ntok);
    }
}

/* issue 25: the sum of the squares of the step's averaged gradients, over
 * every trainable variable (in the store's order, partitions in order: the
 * chaos verifier adds them up the same way), for --clip-norm; 0 without it.
 * Each accumulator summed its own squares as it was taken (in the add loop
 * of its last push: sr__accum_set_sumsq), so this reads no gradient; the
 * apply scales the gradients in its own pass. */
static double
step_sumsq(const coord *c)
{
    double total = 0;

    if (!(c->o->optim.clip_norm > 0)) {
        return 0;
    }
    for (size_t i = 0; i < c->nvars; i++) {
        const cvar *v = &c->vars[i];
        for (uint32_t p = 0; v->has_acc && p < v->nparts; p++) {
            total += sr__accum_sumsq(&v->acc[p]);
        }
    }
    return total;
}

/* Every accumulator is taken: apply them all, advance the global step,
 * commit as the policy says and release the tokens.  The update from step
 * g to g + 1 uses the learning rate of step g (sr__optim_at_step). */
static void
apply_step(coord *c)
{
    int64_t  t = c->global_step + 1; /* 1-based count of applied steps */
    double   sumsq = step_sumsq(c);
    sr_optim so = sr__optim_at_step(&c->o->optim, c->global_step, sumsq);

    for (size_t i = 0; i < c->nvars; i++) {
        if (c->vars[i].has_acc) {
            apply_var(c, &c->vars[i], t, &so);
        }
    }
    c->ntaken = 0;
    c->global_step++;
    sr__coord_metrics_step_applied(c); /* issue 26: syncrep_step_duration_seconds */
    if (c->o->optim.clip_norm > 0) {
        SR_LOG(SR_LOG_DEBUG, "COORD-APPLY",
               "global_step=%" PRId64 " lr=%.9g grad_norm=%.9g clip_scale=%.9g", c->global_step,
               so.lr, sqrt(sumsq), so.grad_scale);
    } else {
        SR_LOG(SR_LOG_DEBUG, "COORD-APPLY", "global_step=%" PRId64 " lr=%.9g", c->global_step,
               so.lr);
    }
    sr__coord_members_step_applied(c); /* issue 26: the step boundary */
    commit_step(c);
}

/* Count the partitions a push's acceptance took; apply the step when every
 * accumulator is taken. */
void
sr__coord_step_took(coord *c, int ntook)
{
    c->ntaken += (size_t)ntook;
    if (ntook > 0 && c->ntaken == c->ntrainable) {
        apply_step(c);
    }
}
