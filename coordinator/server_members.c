/*
 * Issue 26, elastic membership: the live membership table (which task
 * indexes are live, when each joined and left, its local step: the worker
 * records of server_peers.c) and the replicas in force, R' (the diagram
 * and the rule are in server_int.h, "issue 26: elastic").
 *
 * Why R' is lowered at once but raised only at a step boundary: a step
 * whose accumulators already hold R' gradients must not wait for a worker
 * that is gone (the job would stall, TensorFlow's SyncReplicasOptimizer's
 * failure), while a worker that comes back computes the next step against
 * variables it has pulled; raising R' during a step would make the step
 * wait for a gradient that worker may never send for it.  Each step
 * records the R' it averaged over (step_replicas, committed with the step),
 * so the replay verifier divides as the coordinator did.
 *
 * docs/architecture.md, "Elastic membership"; docs/operations.md.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/server_int.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/text.h"

int
sr__coord_replicas_effective(const coord *c)
{
    return c->el_R > 0 ? c->el_R : c->o->R;
}

int
sr__coord_min_replicas(const coord *c)
{
    int m = c->o->min_replicas;
    return m > 0 && m < c->o->R ? m : c->o->R;
}

/* 1 if a client of task t is live (not gone). */
static int
task_live(const coord *c, int32_t t)
{
    for (size_t i = 0; i < c->nclients; i++) {
        if (c->clients[i].task == t && !c->clients[i].gone) {
            return 1;
        }
    }
    return 0;
}

/* The worker records follow the clients: joins and departures logged,
 * el_live and el_present counted, a task beyond N noted for the boundary. */
static void
refresh(coord *c, int64_t now)
{
    int64_t wall = sr_clock_wall_ms();
    int     live = 0, present = 0;
    int     grace = c->el_since_ms == 0 || now - c->el_since_ms < c->o->worker_timeout_ms;

    /* Every live client's task has a record (a client may not have pushed yet). */
    for (size_t i = 0; i < c->nclients; i++) {
        if (!c->clients[i].gone) {
            sr__coord_get_worker(c, c->clients[i].task);
        }
    }
    for (size_t i = 0; i < c->nworkers; i++) {
        worker *w = &c->workers[i];
        int     now_live = task_live(c, w->task);
        if (now_live && !w->live) {
            w->live = 1;
            w->joined_wall_ms = wall;
            w->left_wall_ms = 0;
            SR_LOG(SR_LOG_NOTICE, "COORD-MEMBER-LIVE",
                   "task=%d local_step=%" PRId64 " global_step=%" PRId64, w->task, w->local_step,
                   c->global_step);
        } else if (!now_live && w->live) {
            w->live = 0;
            w->left_wall_ms = wall;
            SR_LOG(SR_LOG_NOTICE, "COORD-MEMBER-LEFT",
                   "task=%d local_step=%" PRId64 " global_step=%" PRId64, w->task, w->local_step,
                   c->global_step);
        }
        live += w->live;
        if (w->live && w->task >= c->o->N && w->task + 1 > c->el_N_want) {
            c->el_N_want = w->task + 1;
        }
    }
    present = live;
    if (grace) {
        /* At the start no worker has been heard from yet: the tasks of the
         * job not seen so far count until the timeout has passed. */
        for (int32_t t = 0; t < c->o->N; t++) {
            int seen = 0;
            for (size_t i = 0; i < c->nworkers && !seen; i++) {
                seen = c->workers[i].task == t && c->workers[i].joined_wall_ms != 0;
            }
            present += !seen;
        }
    }
    c->el_live = live;
    c->el_present = present;
}

/* R' for the tasks present now (server_int.h). */
static int
target_replicas(const coord *c)
{
    int     R = c->o->R, M = sr__coord_min_replicas(c);
    int64_t cap = (int64_t)c->el_present * sr__coord_task_share(c->o);

    if (M >= R) {
        return R;
    }
    if (cap > R) {
        cap = R;
    }
    return cap < M ? M : (int)cap;
}

/* Every accumulator takes at r from now on; how many were taken by it. */
static int
set_all(coord *c, int r)
{
    int ntook = 0;

    for (size_t i = 0; i < c->nvars; i++) {
        cvar *v = &c->vars[i];
        for (uint32_t p = 0; v->has_acc && p < v->nparts; p++) {
            int took = 0;
            if (sr__accum_set_replicas(&v->acc[p], r, &took) != SR_OK) {
                SR_LOG(SR_LOG_ERR, "COORD-REPLICAS", "variable %s: %s", SR_ESC(v->meta.name),
                       sr_errdetail());
            }
            ntook += took;
        }
    }
    return ntook;
}

void
sr__coord_members_tick(coord *c)
{
    int64_t now = sr__coord_now_ms(c);

    if (c->state == COORD_SERVING && c->el_since_ms == 0) {
        c->el_since_ms = now;
    }
    refresh(c, now);
    if (c->state != COORD_SERVING && c->state != COORD_DRAINING) {
        return;
    }
    int want = target_replicas(c), have = sr__coord_replicas_effective(c);
    if (want >= have) {
        return; /* raised only at a step boundary */
    }
    c->el_R = want;
    if (c->el_R_open == 0) {
        c->el_R_open = have;
    }
    SR_LOG(SR_LOG_WARN, "COORD-REPLICAS-LOWERED",
           "replicas=%d (was %d) R=%d M=%d live=%d global_step=%" PRId64
           ": the open step completes with the gradients it has if they reach %d",
           want, have, c->o->R, sr__coord_min_replicas(c), c->el_live, c->global_step, want);
    int ntook = set_all(c, want);
    if (ntook > 0) {
        sr__coord_step_took(c, ntook);
    }
}

/* The step just applied (global_step - 1): its replicas, for the commit. */
static void
record_step(coord *c)
{
    int r = sr__coord_replicas_effective(c);
    int open = c->el_R_open > 0 ? c->el_R_open : r;

    if (!c->o->step_log && r == c->o->R && open == c->o->R) {
        return; /* nothing a verifier could not read from the configuration */
    }
    sr_store_step_replicas *p =
        sr_grow_array(c->el_rep, &c->el_cap_rep, c->el_nrep + 1, sizeof(*p));
    if (p == NULL) {
        SR_LOG(SR_LOG_ERR, "COORD-STEPLOG", "step_replicas of step %" PRId64 ": no memory",
               c->global_step - 1);
        return;
    }
    c->el_rep = p;
    p = &c->el_rep[c->el_nrep++];
    p->step = c->global_step - 1;
    p->replicas = r;
    p->replicas_open = open;
    p->total = c->o->N;
    p->min_replicas = sr__coord_min_replicas(c);
    p->live = c->el_live;
}

/* The pending ctl changes go into the options in force. */
static void
apply_pending(coord *c)
{
    el_ctl *p = &c->el_pending;

    if (p->has_R) {
        SR_LOG(SR_LOG_NOTICE, "COORD-CTL-APPLIED",
               "replicas_to_aggregate=%d (was %d) from_step=%" PRId64, p->R, c->el_opts.R,
               c->global_step);
        c->el_opts.R = p->R;
    }
    if (p->has_N) {
        SR_LOG(SR_LOG_NOTICE, "COORD-CTL-APPLIED", "total_replicas=%d (was %d) from_step=%" PRId64,
               p->N, c->el_opts.N, c->global_step);
        c->el_opts.N = p->N;
    }
    if (p->has_M) {
        SR_LOG(SR_LOG_NOTICE, "COORD-CTL-APPLIED", "min_replicas=%d (was %d) from_step=%" PRId64,
               p->M, c->el_opts.min_replicas, c->global_step);
        c->el_opts.min_replicas = p->M;
    }
    if (p->has_lr) {
        SR_LOG(SR_LOG_NOTICE, "COORD-CTL-APPLIED",
               "learning_rate=%.17g (was %.17g) from_step=%" PRId64, p->lr, c->el_opts.optim.lr,
               c->global_step);
        c->el_opts.optim.lr = p->lr; /* the base rate: one field (issue 25 builds on it) */
    }
    memset(p, 0, sizeof(*p));
}

void
sr__coord_members_step_applied(coord *c)
{
    int before = sr__coord_replicas_effective(c);

    record_step(c);
    apply_pending(c);
    if (c->el_N_want > c->el_opts.N) {
        SR_LOG(SR_LOG_NOTICE, "COORD-MEMBER-GROW",
               "total_replicas=%d (was %d): task %d joined; replicas_to_aggregate stays %d",
               c->el_N_want, c->el_opts.N, c->el_N_want - 1, c->el_opts.R);
        c->el_opts.N = c->el_N_want;
    }
    refresh(c, sr__coord_now_ms(c));
    int r = target_replicas(c);
    if (r != before) {
        SR_LOG(SR_LOG_NOTICE, "COORD-REPLICAS",
               "replicas=%d (was %d) R=%d N=%d M=%d live=%d from_step=%" PRId64, r, before, c->o->R,
               c->o->N, sr__coord_min_replicas(c), c->el_live, c->global_step);
    }
    c->el_R = r;
    c->el_R_open = r;
    set_all(c, r); /* every accumulator is open and empty: none is taken */
}

sr_err
sr__coord_members_job(coord *c, commit_job *j)
{
    if (c->el_nrep == 0) {
        return SR_OK;
    }
    if ((j->rep = malloc(c->el_nrep * sizeof(*j->rep))) == NULL) {
        return sr_fail(SR_ENOMEM, "commit step_replicas");
    }
    memcpy(j->rep, c->el_rep, c->el_nrep * sizeof(*j->rep));
    j->cm.replicas = j->rep;
    j->cm.nreplicas = c->el_nrep;
    return SR_OK;
}

void
sr__coord_members_committed(coord *c)
{
    c->el_nrep = 0;
}

void
sr__coord_members_json(coord *c, sr_strbuf *b)
{
    const el_ctl *p = &c->el_pending;

    sr_strbuf_printf(b,
                     ",\"elastic\":{\"replicas_effective\":%d,\"min_replicas\":%d,"
                     "\"workers_live\":%d,\"pending\":{",
                     sr__coord_replicas_effective(c), sr__coord_min_replicas(c), c->el_live);
    const char *sep = "";
    if (p->has_R) {
        sr_strbuf_printf(b, "\"replicas_to_aggregate\":%d", p->R);
        sep = ",";
    }
    if (p->has_N) {
        sr_strbuf_printf(b, "%s\"total_replicas\":%d", sep, p->N);
        sep = ",";
    }
    if (p->has_M) {
        sr_strbuf_printf(b, "%s\"min_replicas\":%d", sep, p->M);
        sep = ",";
    }
    if (p->has_lr) {
        sr_strbuf_printf(b, "%s\"learning_rate\":%.17g", sep, p->lr);
    }
    sr_strbuf_printf(b, "},\"learning_rate\":%.17g,\"members\":[", c->o->optim.lr);
    for (size_t i = 0; i < c->nworkers; i++) {
        const worker *w = &c->workers[i];
        sr_strbuf_printf(b,
                         "%s{\"task_index\":%d,\"live\":%s,\"joined_ms\":%" PRId64
                         ",\"left_ms\":%" PRId64 ",\"local_step\":%" PRId64 "}",
                         i ? "," : "", w->task, w->live ? "true" : "false", w->joined_wall_ms,
                         w->left_wall_ms, w->local_step);
    }
    sr_strbuf_printf(b, "]}");
}

void
sr__coord_members_free(coord *c)
{
    free(c->el_rep);
    c->el_rep = NULL;
    c->el_nrep = c->el_cap_rep = 0;
}
