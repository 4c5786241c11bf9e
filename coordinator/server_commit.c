/*
 * Committing a step to the store.  sr__coord_build_job gathers what changed
 * since the last commit (every dirty variable's value and slots, the
 * workers' local steps, the step-log rows) into a commit_job; with
 * `copies` (--commit async) the job holds a reference on each value (the
 * apply never writes a referenced buffer) and copies of the slots, dirty
 * maps and log, so the loop goes on changing its own.  --commit sync:
 * sr__coord_commit_now commits on the loop's connection.  --commit async:
 * sr__coord_async_snapshot hands a job to the writer thread (writer_main),
 * which commits it on its own connection; sr__coord_writer_stop brings back
 * a job it could not commit.  Both go through timed_commit, counted for
 * STATUS.  The policy that decides when to commit is ckpt_policy.c's,
 * asked by server_step.c; the commits here tell it what they cost
 * (issue 28: sync, the commit's time on the step's path; async, the
 * writer's time and which steps it overlapped, sr__coord_writer_poll).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/server_int.h"
#include "core/clock.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/text.h"

void
sr__coord_job_free(commit_job *j)
{
    if (j == NULL) {
        return;
    }
    for (size_t i = 0; i < j->nown; i++) {
        free(j->own[i]);
    }
    for (size_t i = 0; i < j->nheld; i++) {
        sr__coord_vbuf_release(j->held[i]);
    }
    free(j->own);
    free(j->held);
    free(j->t);
    free(j->w);
    free(j->log);
    free(j->rep); /* issue 26 */
    free(j);
}

static void *
job_copy(commit_job *j, const void *p, size_t n)
{
    void *q = malloc(n ? n : 1);
    if (q != NULL) {
        memcpy(q, p, n);
        j->own[j->nown++] = q;
    }
    return q;
}

/* Build the commit of the current state: every dirty variable's value and
 * slots, the workers and the step-log rows not yet committed. */
sr_err
sr__coord_build_job(coord *c, int copies, commit_job **out)
{
    commit_job *j = calloc(1, sizeof(*j));
    size_t      nt = 0;

    if (j == NULL || (j->t = calloc(c->nvars * 4 + 1, sizeof(*j->t))) == NULL ||
        (j->w = calloc(c->nworkers + 1, sizeof(*j->w))) == NULL ||
        (copies && (j->own = calloc(c->nvars * 5 + 2, sizeof(void *))) == NULL) ||
        (copies && (j->held = calloc(c->nvars + 1, sizeof(vbuf *))) == NULL)) {
        sr__coord_job_free(j);
        return sr_fail(SR_ENOMEM, "commit arrays");
    }
    for (size_t i = 0; i < c->nvars; i++) {
        cvar *v = &c->vars[i];
        if (!v->dirty_any) {
            continue;
        }
        const struct {
            const char *slot;
            void       *data;
            int         all;
        } parts[4] = {
            {"", v->value, 0},
            {c->o->optim.kind == SR_OPT_MOMENTUM ? "momentum" : "adam_m", v->s1, 0},
            {"adam_v", v->s2, 0},
            {"ema", v->ema, 1},
        };
        const uint8_t *dirty = v->dirty;
        if (copies && (dirty = job_copy(j, v->dirty, v->nchunks)) == NULL) {
            sr__coord_job_free(j);
            return sr_fail(SR_ENOMEM, "commit snapshot");
        }
        for (int p = 0; p < 4; p++) {
            if (parts[p].data == NULL) {
                continue;
            }
            const void *data = parts[p].data;
            if (copies && p == 0) {
                /* The value is never written while referenced (sr__coord_apply_target). */
                atomic_fetch_add(&v->vb->refs, 1);
                j->held[j->nheld++] = v->vb;
            } else if (copies && (data = job_copy(j, data, (size_t)v->meta.nbytes)) == NULL) {
                sr__coord_job_free(j);
                return sr_fail(SR_ENOMEM, "commit snapshot of %s", SR_ESC(v->meta.name));
            }
            j->t[nt].var_id = v->meta.id;
            j->t[nt].slot = parts[p].slot;
            j->t[nt].data = data;
            j->t[nt].len_bytes = (size_t)v->meta.nbytes;
            j->t[nt].dirty = parts[p].all ? NULL : dirty;
            nt++;
        }
    }
    for (size_t i = 0; i < c->nworkers; i++) {
        j->w[i].task_index = c->workers[i].task;
        j->w[i].local_step = c->workers[i].local_step;
        j->w[i].last_seen_ms = c->workers[i].last_seen_wall_ms;
        j->w[i].incarnation = c->incarnation;
        sr__coord_cursor_row(c, &c->workers[i], &j->w[i]); /* issue 24: cursor */
    }
    if (c->nlog > 0) {
        if ((j->log = malloc(c->nlog * sizeof(*j->log))) == NULL) {
            sr__coord_job_free(j);
            return sr_fail(SR_ENOMEM, "commit step log");
        }
        memcpy(j->log, c->log, c->nlog * sizeof(*j->log));
    }
    j->cm.global_step = c->global_step;
    j->cm.tensors = j->t;
    j->cm.ntensors = nt;
    j->cm.workers = j->w;
    j->cm.nworkers = c->nworkers;
    j->cm.log = j->log;
    j->cm.nlog = c->nlog;
    if (sr__coord_members_job(c, j) != SR_OK) { /* issue 26: step_replicas */
        sr__coord_job_free(j);
        return SR_ENOMEM;
    }
    *out = j;
    return SR_OK;
}

/* The state went into a commit (or a snapshot of one): start afresh. */
static void
mark_clean(coord *c)
{
    c->nlog = 0;
    sr__coord_members_committed(c); /* issue 26 */
    for (size_t i = 0; i < c->nvars; i++) {
        if (c->vars[i].dirty_any) {
            memset(c->vars[i].dirty, 0, c->vars[i].nchunks ? c->vars[i].nchunks : 1);
            c->vars[i].dirty_any = 0;
        }
    }
}

/* sr_store_commit_step, counted in c's commit counters (STATUS "commits",
 * the shutdown log's COORD-COMMITS).  The loop or the writer thread. */
static sr_err
timed_commit(coord *c, sr_store *st, const sr_store_commit *cm)
{
    int64_t  t0 = sr_clock_now_ns();
    sr_err   rc = sr_store_commit_step(st, cm);
    uint64_t us = (uint64_t)((sr_clock_now_ns() - t0) / 1000);

    if (rc != SR_OK) {
        atomic_fetch_add(&c->commit_failures, 1);
        return rc;
    }
    atomic_fetch_add(&c->commits, 1);
    atomic_fetch_add(&c->commit_us, us);
    atomic_store(&c->commit_last_us, us);
    sr__coord_metrics_commit_done(c, us); /* issue 26: syncrep_commit_duration_seconds */
    uint64_t max = atomic_load(&c->commit_max_us);
    while (us > max && !atomic_compare_exchange_weak(&c->commit_max_us, &max, us)) {
    }
    return rc;
}

/* The mean of the timed commits, in ms (0 when none). */
double
sr__coord_commit_mean_ms(const coord *c)
{
    uint64_t n = atomic_load(&c->commits);
    return n ? (double)atomic_load(&c->commit_us) / 1000.0 / (double)n : 0.0;
}

sr_err
sr__coord_commit_now(coord *c)
{
    commit_job *j = NULL;
    sr_err      rc = sr__coord_build_job(c, 0, &j);

    if (rc != SR_OK) {
        return rc;
    }
    int64_t t0 = sr_clock_now_ns();
    rc = timed_commit(c, c->st, &j->cm);
    if (rc == SR_OK) {
        c->committed_step = c->global_step;
        mark_clean(c);
        /* issue 28: on the loop's thread, so on the step's path: C.  With
         * it, the time the store's WAL checkpoint thread spent since the
         * last commit (copying the commits' pages into the database, with
         * an fsync at FULL): it runs beside the steps on the same cores and
         * disk, a cost of durability the commit's own time leaves out (an
         * upper bound, as the async writer's time is).  The policy shares
         * each pass among the commits it copied. */
        sr_store_ckpt_stats ks;
        sr_store_get_ckpt_stats(c->st, &ks);
        uint64_t thread_us = ks.pass_us >= c->ckpt_thread_us ? ks.pass_us - c->ckpt_thread_us : 0;
        c->ckpt_thread_us = ks.pass_us;
        sr__ckpt_started(&c->ckpt, c->global_step, t0);
        sr__ckpt_cost(&c->ckpt, (int64_t)atomic_load(&c->commit_last_us) * 1000,
                      (int64_t)thread_us * 1000);
    }
    sr__coord_job_free(j);
    return rc;
}

/* issue 28: the checkpoint policy of c's options, from the step it starts at. */
void
sr__coord_ckpt_init(coord *c)
{
    sr_ckpt_opts po;

    po.budget_pct = c->o->checkpoint_budget_pct;
    po.every = c->o->checkpoint_every;
    po.max_steps = c->o->checkpoint_max_steps;
    po.max_ns = (int64_t)(c->o->checkpoint_max_seconds * 1e9);
    po.async = c->o->commit_async;
    sr__ckpt_init(&c->ckpt, &po, c->global_step, sr_clock_now_ns());
    c->ckpt_logged_k = sr__ckpt_interval(&c->ckpt);
}

/* issue 28, --commit async: what the writer did since the last look.  A
 * commit it finished gives the policy the writer's time, and it and a job
 * still in hand mark the step in progress as overlapped (ckpt_overlap).
 * Also brings committed_step up to the writer's.  Returns 1 while the
 * writer holds a job. */
int
sr__coord_writer_poll(coord *c)
{
    if (!c->writer_started) {
        return 0; /* not yet (or no longer) started: nothing to look at */
    }
    pthread_mutex_lock(&c->wmu);
    int     busy = c->wjob != NULL;
    int64_t done = c->wcommitted;
    pthread_mutex_unlock(&c->wmu);
    c->committed_step = done;
    if (done != c->ckpt_wseen) {
        c->ckpt_wseen = done;
        sr__ckpt_cost(&c->ckpt, (int64_t)atomic_load(&c->commit_last_us) * 1000, 0);
        c->ckpt_overlap = 1;
    }
    if (busy) {
        c->ckpt_overlap = 1;
    }
    return busy;
}

/* The writer thread (--commit async): commits the jobs the loop hands it, one
 * at a time, through its own store connection; a failed commit is retried
 * every second (the loop snapshots nothing new meanwhile). */
static void *
writer_main(void *arg)
{
    coord *c = arg;

    pthread_mutex_lock(&c->wmu);
    for (;;) {
        while (c->wjob == NULL && !c->wstop) {
            pthread_cond_wait(&c->wcv, &c->wmu);
        }
        if (c->wjob == NULL) {
            break;
        }
        commit_job *j = c->wjob;
        pthread_mutex_unlock(&c->wmu);
        sr_err rc = timed_commit(c, c->wst, &j->cm);
        if (rc != SR_OK) {
            SR_LOG(SR_LOG_ERR, "COORD-COMMIT-FAIL",
                   "async step=%" PRId64 " err=%s detail=\"%s\"; retrying", j->cm.global_step,
                   sr_errname(rc), sr_store_errmsg(c->wst));
        }
        pthread_mutex_lock(&c->wmu);
        if (rc == SR_OK) {
            c->wcommitted = j->cm.global_step;
            c->wjob = NULL;
            sr__coord_job_free(j);
            pthread_cond_broadcast(&c->wcv);
        } else if (c->wstop) {
            break; /* the loop takes the job back and tries itself */
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&c->wcv, &c->wmu, &ts);
        }
    }
    pthread_mutex_unlock(&c->wmu);
    return NULL;
}

/* --commit async: hand the writer a snapshot if it is idle and the last
 * one is at least --commit-interval-ms old; otherwise the snapshot waits
 * (commit_wanted) and the dirty state keeps accumulating.  The interval
 * keeps a small model from committing every step on cores its workers need
 * (docs/performance.md, row 2); the loop polls every millisecond while a
 * snapshot waits, so an idle job is committed soon after its last step. */
void
sr__coord_async_snapshot(coord *c)
{
    commit_job *j = NULL;
    int         idle = !sr__coord_writer_poll(c);

    if (!idle || !c->commit_wanted) {
        return;
    }
    int64_t now = sr_clock_now_ns();
    if (now - c->last_snapshot_ns < (int64_t)c->o->commit_interval_ms * 1000000) {
        return;
    }
    c->last_snapshot_ns = now;
    if (sr__coord_build_job(c, 1, &j) != SR_OK) {
        SR_LOG(SR_LOG_ERR, "COORD-SNAPSHOT", "%s; retrying", sr_errdetail());
        return;
    }
    mark_clean(c);
    c->commit_wanted = 0;
    /* issue 28: before the hand-over; the writer owns (and frees) j after it. */
    sr__ckpt_started(&c->ckpt, c->global_step, now);
    c->ckpt_overlap = 1;
    pthread_mutex_lock(&c->wmu);
    c->wjob = j;
    pthread_cond_signal(&c->wcv);
    pthread_mutex_unlock(&c->wmu);
}

/* The store options of the coordinator's connections. */
void
sr__coord_store_opts(const sr_coord_opts *o, sr_store_opts *so)
{
    memset(so, 0, sizeof(*so));
    so->sync = o->sync_normal ? SR_STORE_SYNC_NORMAL : SR_STORE_SYNC_FULL;
    so->keep_checkpoints = o->keep_checkpoints;
    /* -1: the store's recorded rule (0 there); 0: none (recorded so). */
    so->keep_every_steps = o->keep_every_steps < 0    ? (o->keep_every_steps == -1 ? 0 : -2)
                           : o->keep_every_steps == 0 ? SR_STORE_KEEP_EVERY_OFF
                                                      : o->keep_every_steps;
    so->page_size = o->store_page_size;
    so->checkpoint_inline = o->wal_checkpoint == SR_WAL_CKPT_INLINE;
    so->wal_checkpoint_bytes = o->wal_limit_bytes;
}

sr_err
sr__coord_writer_start(coord *c)
{
    sr_store_opts so;

    sr__coord_store_opts(c->o, &so);
    so.skip_quick_check = 1; /* the loop's connection checked the file */
    /* The writer runs off the step's path already: by default it copies the
     * WAL itself when it fills (no third thread taking CPU from the step). */
    so.checkpoint_inline = c->o->wal_checkpoint != SR_WAL_CKPT_THREAD;
    sr_err rc = sr_store_open(c->o->store_path, &so, &c->wst);
    if (rc != SR_OK) {
        return rc;
    }
    pthread_mutex_init(&c->wmu, NULL);
    pthread_cond_init(&c->wcv, NULL);
    c->wcommitted = c->committed_step;
    c->ckpt_wseen = c->committed_step; /* issue 28 */
    if (pthread_create(&c->writer, NULL, writer_main, c) != 0) {
        return sr_fail(SR_ENOMEM, "cannot start the commit writer thread");
    }
    c->writer_started = 1;
    return SR_OK;
}

/* Stop the writer after its current job; a job it could not commit comes
 * back to the loop's connection. */
sr_err
sr__coord_writer_stop(coord *c)
{
    sr_err rc = SR_OK;

    if (!c->writer_started) {
        return SR_OK;
    }
    pthread_mutex_lock(&c->wmu);
    c->wstop = 1;
    pthread_cond_broadcast(&c->wcv);
    pthread_mutex_unlock(&c->wmu);
    pthread_join(c->writer, NULL);
    c->writer_started = 0;
    c->committed_step = c->wcommitted;
    if (c->wjob != NULL) {
        rc = timed_commit(c, c->st, &c->wjob->cm);
        if (rc == SR_OK) {
            c->committed_step = c->wjob->cm.global_step;
        }
        sr__coord_job_free(c->wjob);
        c->wjob = NULL;
    }
    sr_store_close(c->wst);
    c->wst = NULL;
    pthread_mutex_destroy(&c->wmu);
    pthread_cond_destroy(&c->wcv);
    return rc;
}
