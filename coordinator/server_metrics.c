/*
 * The coordinator's side of the metrics (issue 26; docs/metrics.md): the
 * hooks the step, push and commit paths call, and the snapshot the loop
 * fills from its own state, renders (metrics.c) and publishes to the HTTP
 * endpoint (metrics_http.c) at most every PUBLISH_MS.  Everything here runs
 * on the loop's thread except sr__coord_metrics_commit_done, which the
 * --commit async writer calls too (atomics only).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/server_int.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/mem.h"

#ifndef SR_PROJECT_VERSION
#define SR_PROJECT_VERSION "unknown"
#endif

#define PUBLISH_MS          100          /* the longest a scrape's text lags the loop's state */
#define STEP_RATE_WINDOW_NS 5000000000LL /* STATUS's steps_per_s: over the last 5 s */
#define APPLY_RING          (sizeof(((coord *)0)->m_apply_ns) / sizeof(int64_t))

sr_err
sr__coord_metrics_open(coord *c)
{
    sr_err rc;

    sr_metrics_hist_init(&c->m_step, sr_metrics_step_bounds_s, sr_metrics_step_nbounds);
    sr_metrics_hist_init(&c->m_commit, sr_metrics_commit_bounds_s, sr_metrics_commit_nbounds);
    atomic_init(&c->m_last_commit_ms, 0);
    sr_strbuf_init(&c->m_text);
    c->m_start_wall_ms = sr_clock_wall_ms();
    c->m_start_ns = sr_clock_now_ns();
    if (c->o->metrics_bind == NULL) {
        return SR_OK;
    }
    if ((rc = sr_metrics_http_open(&c->metrics, c->o->metrics_bind)) != SR_OK) {
        return rc;
    }
    SR_LOG(SR_LOG_NOTICE, "COORD-METRICS", "serving Prometheus metrics at http://%s/metrics",
           sr_metrics_http_address(c->metrics));
    return SR_OK;
}

void
sr__coord_metrics_close(coord *c)
{
    sr_metrics_http_close(c->metrics);
    c->metrics = NULL;
    free(c->m_straggler);
    c->m_straggler = NULL;
    c->m_nstraggler = 0;
    sr_strbuf_free(&c->m_text);
}

/* syncrep_replicas_effective: the elastic R' (R when at least R workers are
 * live; server_members.c), read here only. */
int
sr__coord_metrics_replicas_effective(const coord *c)
{
    return sr__coord_replicas_effective(c); /* the elastic R' (server_members.c) */
}

uint64_t
sr__coord_metrics_stragglers(const coord *c, int32_t task)
{
    return task >= 0 && (size_t)task < c->m_nstraggler ? c->m_straggler[task] : 0;
}

void
sr__coord_metrics_step_applied(coord *c)
{
    int64_t now = sr_clock_now_ns();

    if (c->m_last_apply_ns != 0) {
        sr_metrics_hist_observe_ns(&c->m_step, now - c->m_last_apply_ns);
    }
    c->m_last_apply_ns = now;
    c->m_apply_ns[c->m_napply++ % APPLY_RING] = now;
}

/* The applies within the window, over the window (or the time since the
 * metrics began, when shorter); when the ring holds fewer than the
 * window's applies (thousands of steps a second), over the ring's span. */
double
sr__coord_metrics_step_rate(const coord *c)
{
    int64_t now = sr_clock_now_ns(), oldest = now;
    size_t  k = 0;

    while (k < c->m_napply && k < APPLY_RING) {
        int64_t t = c->m_apply_ns[(c->m_napply - 1 - k) % APPLY_RING];
        if (now - t > STEP_RATE_WINDOW_NS) {
            break;
        }
        oldest = t;
        k++;
    }
    if (k == 0) {
        return 0.0;
    }
    int64_t span = STEP_RATE_WINDOW_NS;
    if (k == APPLY_RING) {
        span = now - oldest;
    } else if (now - c->m_start_ns < span) {
        span = now - c->m_start_ns;
    }
    return span > 0 ? (double)k * 1e9 / (double)span : 0.0;
}

/* Tasks with a client that has not left. */
static uint64_t
live_tasks(const coord *c)
{
    uint64_t n = 0;
    for (size_t i = 0; i < c->nworkers; i++) {
        int live = 0;
        for (size_t k = 0; k < c->nclients && !live; k++) {
            live = c->clients[k].task == c->workers[i].task && !c->clients[k].gone;
        }
        n += (uint64_t)live;
    }
    return n;
}

void
sr__coord_metrics_status_json(const coord *c, sr_strbuf *b)
{
    int64_t last = atomic_load(&c->m_last_commit_ms);

    sr_strbuf_printf(b,
                     ",\"workers_live\":%" PRIu64 ",\"replicas_effective\":%d"
                     ",\"bytes_in\":%" PRIu64 ",\"bytes_out\":%" PRIu64
                     ",\"seconds_since_commit\":%.3f,\"metrics\":",
                     live_tasks(c), sr__coord_metrics_replicas_effective(c), c->m_bytes_in,
                     c->m_bytes_out, last > 0 ? (sr_clock_wall_ms() - last) / 1000.0 : -1.0);
    if (c->metrics != NULL) {
        sr_strbuf_printf(b, "\"http://%s/metrics\"}", sr_metrics_http_address(c->metrics));
    } else {
        sr_strbuf_printf(b, "null}");
    }
}

void
sr__coord_metrics_after_push(coord *c, int32_t task, int64_t g0)
{
    if (c->global_step == g0 || task < 0) {
        return;
    }
    if ((size_t)task >= c->m_nstraggler) {
        size_t    n = (size_t)task + 1;
        uint64_t *a = realloc(c->m_straggler, n * sizeof(*a));
        if (a == NULL) {
            return; /* one count lost: metrics never fail a push */
        }
        memset(a + c->m_nstraggler, 0, (n - c->m_nstraggler) * sizeof(*a));
        c->m_straggler = a;
        c->m_nstraggler = n;
    }
    c->m_straggler[task]++;
}

void
sr__coord_metrics_commit_done(coord *c, uint64_t us)
{
    sr_metrics_hist_observe_ns(&c->m_commit, (int64_t)us * 1000);
    atomic_store(&c->m_last_commit_ms, sr_clock_wall_ms());
}

/* The per-task rows and the totals that come from clients and workers.
 * tasks[] has room for c->nworkers rows. */
static void
fill_tasks(coord *c, sr_metrics_snapshot *s, sr_metrics_task *tasks)
{
    for (size_t i = 0; i < c->nclients; i++) {
        const client *cl = &c->clients[i];
        s->pushes_accepted += cl->accepted;
        s->pushes_stale += cl->stale;
        s->pushes_duplicate += cl->duplicate;
        s->pushes_rejected += cl->errors;
    }
    for (size_t i = 0; i < c->nworkers; i++) {
        const worker    *w = &c->workers[i];
        sr_metrics_task *t = &tasks[s->ntasks++];
        int              live = 0;
        s->pushes_accepted += w->accepted; /* its clients reclaimed so far */
        s->pushes_stale += w->stale;
        s->pushes_duplicate += w->duplicate;
        s->pushes_rejected += w->errors;
        memset(t, 0, sizeof(*t));
        t->task = w->task;
        t->last_seen_unix_s = w->last_seen_wall_ms > 0 ? w->last_seen_wall_ms / 1000.0 : -1.0;
        t->local_step_lag = c->global_step - w->local_step;
        t->stragglers = sr__coord_metrics_stragglers(c, w->task);
        for (size_t k = 0; k < c->nclients && !live; k++) {
            live = c->clients[k].task == w->task && !c->clients[k].gone;
        }
        t->live = live;
    }
    s->workers_live = live_tasks(c);
}

static int
by_task(const void *a, const void *b)
{
    const sr_metrics_task *x = a, *y = b;
    return (x->task > y->task) - (x->task < y->task);
}

void
sr__coord_metrics_publish(coord *c, int force)
{
    int64_t             now = sr__coord_now_ms(c);
    sr_metrics_snapshot s;
    sr_metrics_task    *tasks;

    if (c->metrics == NULL || (!force && now - c->m_last_publish_ms < PUBLISH_MS)) {
        return;
    }
    c->m_last_publish_ms = now;
    if ((tasks = calloc(c->nworkers ? c->nworkers : 1, sizeof(*tasks))) == NULL) {
        return; /* the previous text stays served */
    }
    memset(&s, 0, sizeof(s));
    s.version = SR_PROJECT_VERSION;
    s.store = c->o->store_path;
    s.bind = c->o->bind;
    s.optimizer = sr__optim_name(c->o->optim.kind);
    s.incarnation = c->incarnation;
    s.restarts = c->incarnation > 0 ? c->incarnation - 1 : 0;
    s.start_time_unix_s = c->m_start_wall_ms / 1000.0;
    s.model_ready = sr__coord_model_ready(c);
    s.done = c->state == COORD_DONE;
    s.global_step = c->global_step;
    s.committed_step = c->committed_step;
    s.checkpoint_interval_steps = sr__ckpt_interval(&c->ckpt); /* issue 28 */
    s.checkpoint_overhead_ratio = sr__ckpt_overhead(&c->ckpt);
    s.replicas_configured = c->o->R;
    s.replicas_effective = sr__coord_metrics_replicas_effective(c);
    s.total_replicas = c->o->N;
    s.tokens_available = c->tokens.len;
    s.nonfinite = c->nonfinite;
    s.malformed = c->malformed;
    s.refused = c->refused;
    s.bytes_in = c->m_bytes_in;
    s.bytes_out = c->m_bytes_out;
    s.commits = atomic_load(&c->commits);
    s.commit_failures = atomic_load(&c->commit_failures);
    sr_metrics_hist_read(&c->m_step, &s.step);
    sr_metrics_hist_read(&c->m_commit, &s.commit);
    fill_tasks(c, &s, tasks);
    qsort(tasks, s.ntasks, sizeof(*tasks), by_task);
    s.tasks = tasks;
    c->m_text.len = 0; /* reuse the buffer */
    if (sr_metrics_render(&s, &c->m_text) == SR_OK) {
        sr_metrics_http_publish(c->metrics, c->m_text.data, c->m_text.len);
    } else {
        sr_strbuf_free(&c->m_text); /* a failed buffer stays failed: start afresh */
        sr_strbuf_init(&c->m_text);
    }
    free(tasks);
}
