/*
 * What the coordinator tells about itself: the STATUS reply's JSON
 * (sr__coord_status_json; docs/operations.md) and the shutdown log's commit
 * and WAL checkpoint lines (sr__coord_log_commits,
 * sr__coord_log_wal_checkpoints).
 */
#include <inttypes.h>

#include "coordinator/server_int.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/strbuf.h"

/* The connection that commits the steps (the async writer's, else the
 * loop's): the one whose WAL checkpoints STATUS and the log report. */
sr_store *
sr__coord_commit_store(const coord *c)
{
    return c->wst != NULL ? c->wst : c->st;
}

/* The tasks of the job (0..N-1) the open step still waits for: those
 * whose share some accumulator not yet taken lacks.  Empty when no step
 * is open (WAIT_MODEL, DONE).  What `syncrep status` names when a step
 * stalls. */
static void
waits_for(const coord *c, sr_strbuf *b)
{
    int share = sr__coord_task_share(c->o), first = 1;

    if (c->state != COORD_SERVING && c->state != COORD_DRAINING) {
        return;
    }
    for (int32_t t = 0; t < c->o->N; t++) {
        int waiting = 0;
        for (size_t i = 0; i < c->nvars && !waiting; i++) {
            const cvar *v = &c->vars[i];
            for (uint32_t p = 0; v->has_acc && p < v->nparts && !waiting; p++) {
                const sr_accum *a = &v->acc[p];
                int             n = 0;
                for (int k = 0; k < a->count; k++) {
                    n += a->contrib[k].task_index == t;
                }
                waiting = !a->taken && n < share;
            }
        }
        if (waiting) {
            sr_strbuf_printf(b, "%s%d", first ? "" : ",", t);
            first = 0;
        }
    }
}

void
sr__coord_status_json(coord *c, sr_strbuf *b)
{
    int64_t now = sr__coord_now_ms(c);

    sr_strbuf_printf(
        b,
        "{\"incarnation\":%" PRIu64 ",\"global_step\":%" PRId64 ",\"committed_step\":%" PRId64
        ",\"restored_step\":%" PRId64 ",\"model_ready\":%s,"
        "\"replicas_to_aggregate\":%d,\"total_replicas\":%d,\"optimizer\":\"%s\","
        "\"steps_per_s\":%.3f,\"tokens_available\":%zu,\"malformed\":%" PRIu64
        ",\"refused\":%" PRIu64 ",\"nonfinite\":%" PRIu64
        ",\"clients\":%zu,\"deterministic_sum\":%s,\"max_steps\":%" PRId64 ",\"done\":%s,",
        c->incarnation, c->global_step, c->committed_step, c->restored_step,
        sr__coord_model_ready(c) ? "true" : "false", c->o->R, c->o->N,
        sr__optim_name(c->o->optim.kind), sr__coord_metrics_step_rate(c), c->tokens.len,
        c->malformed, c->refused, c->nonfinite, c->nclients,
        c->o->deterministic_sum ? "true" : "false", c->o->max_steps,
        c->state == COORD_DONE ? "true" : "false");
    /* issue 25: the rate the next update (global_step -> + 1) uses. */
    sr_strbuf_printf(b, "\"learning_rate\":%.17g,\"accumulators\":[",
                     sr__optim_lr_at(&c->o->optim, c->global_step));
    int first = 1;
    for (size_t i = 0; i < c->nvars; i++) {
        cvar *v = &c->vars[i];
        if (!v->has_acc) {
            continue;
        }
        sr_strbuf_printf(b, "%s{\"name\":", first ? "" : ",");
        sr_strbuf_json_str(b, v->meta.name);
        /* A partitioned variable shows its least advanced partition. */
        const sr_accum *a = &v->acc[0];
        for (uint32_t p = 1; p < v->nparts; p++) {
            if (v->acc[p].count + v->acc[p].taken * a->R < a->count + a->taken * a->R) {
                a = &v->acc[p];
            }
        }
        sr_strbuf_printf(b, ",\"partitions\":%u,\"step\":%" PRId64 ",\"count\":%d,\"taken\":%s}",
                         v->nparts, a->step, a->count, a->taken ? "true" : "false");
        first = 0;
    }
    sr_strbuf_printf(b, "],\"step_waits_for\":[");
    waits_for(c, b);
    sr_strbuf_printf(b, "],\"workers\":[");
    for (size_t i = 0; i < c->nworkers; i++) {
        worker  *w = &c->workers[i];
        uint64_t acc = w->accepted, stale = w->stale, dup = w->duplicate, errs = w->errors;
        uint64_t chained = w->chained, over = w->over_share;
        int64_t  seen = -1;
        int      parked = 0, live = 0;
        for (size_t k = 0; k < c->nclients; k++) {
            client *cl = &c->clients[k];
            if (cl->task != w->task) {
                continue;
            }
            acc += cl->accepted;
            stale += cl->stale;
            dup += cl->duplicate;
            errs += cl->errors;
            chained += cl->chained;
            over += cl->over_share;
            parked |= cl->parked;
            live |= !cl->gone;
            if (seen < 0 || now - cl->last_seen_ms < seen) {
                seen = now - cl->last_seen_ms;
            }
        }
        sr_strbuf_printf(b,
                         "%s{\"task_index\":%d,\"local_step\":%" PRId64 ",\"last_seen_ms\":%" PRId64
                         ",\"seconds_since_seen\":%.3f,\"stragglers\":%" PRIu64
                         ",\"connected\":%s,\"waiting_for_token\":%s,"
                         "\"accepted\":%" PRIu64 ",\"stale\":%" PRIu64 ",\"duplicate\":%" PRIu64
                         ",\"beyond_share\":%" PRIu64 ",\"rejected\":%" PRIu64
                         ",\"chained\":%" PRIu64 "}",
                         i ? "," : "", w->task, w->local_step, w->last_seen_wall_ms,
                         seen < 0 ? -1.0 : seen / 1000.0, sr__coord_metrics_stragglers(c, w->task),
                         live ? "true" : "false", parked ? "true" : "false", acc, stale, dup, over,
                         errs, chained);
    }
    sr_store_ckpt_stats ck;
    sr_store_get_ckpt_stats(sr__coord_commit_store(c), &ck);
    sr_strbuf_printf(b,
                     "],\"wal_checkpoints\":{\"thread\":%s,\"passes\":%" PRIu64
                     ",\"pass_max_ms\":%.3f,\"inline\":%" PRIu64 ",\"inline_max_ms\":%.3f"
                     ",\"waits\":%" PRIu64 ",\"failures\":%" PRIu64 ",\"max_wal_frames\":%" PRIu64
                     ",\"last_error\":",
                     ck.background ? "true" : "false", ck.passes, ck.pass_max_us / 1000.0,
                     ck.inline_passes, ck.inline_max_us / 1000.0, ck.waits, ck.failures,
                     ck.max_frames);
    sr_strbuf_json_str(b, ck.last_error);
    sr_strbuf_printf(b,
                     "},\"commits\":{\"count\":%" PRIu64 ",\"mean_ms\":%.3f,\"max_ms\":%.3f"
                     ",\"last_ms\":%.3f,\"failures\":%" PRIu64 "}",
                     atomic_load(&c->commits), sr__coord_commit_mean_ms(c),
                     atomic_load(&c->commit_max_us) / 1000.0,
                     atomic_load(&c->commit_last_us) / 1000.0, atomic_load(&c->commit_failures));
    sr_strbuf_printf(b,
                     ",\"token_piggyback\":{\"whole\":%" PRIu64 ",\"delta\":%" PRIu64
                     ",\"variables\":%" PRIu64 ",\"bytes\":%" PRIu64 "}",
                     c->piggy_whole, c->piggy_delta, c->piggy_vars, c->piggy_bytes);
    sr__coord_packs_json(c, b);          /* issue 23: a model's tensors by name */
    sr__coord_ckpt_json(c, b);           /* issue 28: the steps at risk */
    sr__coord_members_json(c, b);        /* issue 26: elastic */
    sr__coord_metrics_status_json(c, b); /* issue 26: the metrics' fields, and the closing } */
}

/* issue 28: ,"checkpoint":{...}: the policy, its current interval and
 * measured overhead, and the steps a crash would lose now. */
void
sr__coord_ckpt_json(const coord *c, sr_strbuf *b)
{
    const sr_ckpt *p = &c->ckpt;
    double         t = p->t_ns >= 0 ? p->t_ns : p->t_all_ns;

    sr_strbuf_printf(b,
                     ",\"checkpoint\":{\"policy\":\"%s\",\"state\":\"%s\","
                     "\"budget_pct\":%g,\"max_steps\":%" PRId64 ",\"max_seconds\":%g,"
                     "\"interval_steps\":%" PRId64 ",\"overhead_ratio\":%.6f,"
                     "\"step_ms\":%.3f,\"commit_cost_ms\":%.3f,\"steps_at_risk\":%" PRId64 "}",
                     p->state == SR_CKPT_FIXED ? "every" : "budget", sr__ckpt_state_name(p->state),
                     c->o->checkpoint_budget_pct, c->o->checkpoint_max_steps,
                     c->o->checkpoint_max_seconds, sr__ckpt_interval(p), sr__ckpt_overhead(p),
                     t > 0 ? t / 1e6 : 0.0, p->c_ns > 0 ? p->c_ns / 1e6 : 0.0,
                     c->global_step - c->committed_step);
}

/* At shutdown, after the last commit: how many store commits, their time. */
void
sr__coord_log_commits(const coord *c)
{
    SR_LOG(SR_LOG_NOTICE, "COORD-COMMITS",
           "count=%" PRIu64 " mean_ms=%.3f max_ms=%.3f failures=%" PRIu64
           " checkpoint_interval_steps=%" PRId64 " checkpoint_overhead_pct=%.2f",
           atomic_load(&c->commits), sr__coord_commit_mean_ms(c),
           atomic_load(&c->commit_max_us) / 1000.0, atomic_load(&c->commit_failures),
           sr__ckpt_interval(&c->ckpt), 100 * sr__ckpt_overhead(&c->ckpt)); /* issue 28 */
}

/* At shutdown: what the WAL checkpoints of the committing connection did. */
void
sr__coord_log_wal_checkpoints(const coord *c)
{
    sr_store_ckpt_stats k;

    sr_store_get_ckpt_stats(sr__coord_commit_store(c), &k);
    SR_LOG(SR_LOG_NOTICE, "COORD-WAL-CKPT",
           "%s passes=%" PRIu64 " pass_max_ms=%.1f inline=%" PRIu64 " inline_max_ms=%.1f"
           " waits=%" PRIu64 " failures=%" PRIu64 " max_wal_frames=%" PRIu64 "%s%s",
           k.background ? "thread" : "inline", k.passes, k.pass_max_us / 1000.0, k.inline_passes,
           k.inline_max_us / 1000.0, k.waits, k.failures, k.max_frames,
           k.last_error[0] ? " last_error=" : "", k.last_error);
}
