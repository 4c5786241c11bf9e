/*
 * store/store_ckpt.c: the WAL checkpoint of a read-write store, run by a
 * thread of its own so that a commit does not wait for it.
 *
 * SQLite's default checkpoints inside the commit that makes the WAL reach
 * its size limit: that commit fsyncs the whole WAL, copies the pages into the
 * database file and fsyncs it, 0.5-0.7 s for the default 512 MiB here, on
 * the step's critical path once every 31 steps of a 16 MiB model
 * (docs/store.md, "Checkpoints").  Here the commit's WAL hook only asks:
 *
 *   1. the WAL holds T frames (wal_checkpoint_bytes / page size; by default
 *      16 x the largest commit, within 8..512 MiB: auto_limit) or more and
 *      the thread is idle: the thread runs a PASSIVE checkpoint on its own
 *      connection (it copies what the WAL held when it started; commits go on
 *      meanwhile and append);
 *   2. after a pass, commits made during it are left ("lag").  A restart of
 *      the WAL from its start needs every frame copied while no commit is
 *      made, which a pass that takes longer than a step never sees.  So while
 *      the lag is larger than max(T / 16, two commits) the thread runs
 *      another pass (each shorter than the one before as long as the disk
 *      keeps up), and once it is smaller the committing thread copies that
 *      last bit itself (a short PASSIVE checkpoint in the hook); the next
 *      commit then restarts the WAL;
 *   3. if the WAL reaches 2 T frames anyway (a disk slower than the commits),
 *      the committer waits for the running pass and checkpoints itself: the
 *      -wal file stays bounded.
 *
 * With opts.checkpoint_inline (or if the thread cannot be started) the hook
 * does what SQLite's wal_autocheckpoint does, a PASSIVE checkpoint in the
 * commit that finds T frames or more, and counts it the same way.
 *
 * A checkpoint never changes what a reader sees and never loses a commit:
 * the pages it copies are committed ones, and a crash at any instant leaves
 * the WAL to replay.  A failed pass (a full disk growing the database file)
 * is counted and retried; the WAL still holds everything.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "store/store_int.h"

enum { CK_IDLE, CK_RUNNING, CK_DONE };

struct store_ckpt {
    pthread_mutex_t     mu;
    pthread_cond_t      cv; /* state changes, in both directions */
    pthread_t           thread;
    int                 started; /* the thread exists (started on first need) */
    int                 state;   /* CK_*; the thread runs a pass while RUNNING */
    int                 stop;
    int                 no_thread;  /* inline mode, or the thread could not start */
    sqlite3            *db;         /* the thread's connection (its own) */
    int64_t             done_ckpt;  /* frames the last pass had copied (its pnCkpt) */
    int                 done_rc;    /* the last pass's SQLite result */
    int64_t             frames;     /* T (committer only when auto) */
    int                 auto_limit; /* T follows the commits (wal_checkpoint_bytes 0) */
    int64_t             min_frames; /* auto: T's bounds */
    int64_t             max_frames;
    int64_t             big_commit;    /* auto, committer only: the largest commit's frames */
    int64_t             last_frame;    /* committer only: the WAL's frames at the last hook */
    int64_t             commit_frames; /* committer only: frames of the last commit */
    sr_store_ckpt_stats stats;
};

static void
set_error(store_ckpt *ck, const char *what, int r, sqlite3 *db)
{
    snprintf(ck->stats.last_error, sizeof(ck->stats.last_error), "%s: %s (%d)", what,
             db != NULL ? sqlite3_errmsg(db) : sqlite3_errstr(r), r);
}

/* One more checkpoint of `us` microseconds in the stats (under ck->mu). */
static void
count_pass(uint64_t *n, uint64_t *total_us, uint64_t *max_us, int64_t us)
{
    (*n)++;
    *total_us += (uint64_t)us;
    if ((uint64_t)us > *max_us) {
        *max_us = (uint64_t)us;
    }
}

/* The thread's connection: the same file through the same VFS, the same
 * synchronous setting (a checkpoint syncs as its connection says).  A query
 * opens the WAL, which a checkpoint on a fresh connection may not do. */
static int
thread_open(store_ckpt *ck, const char *path, int sync_normal)
{
    int r =
        sqlite3_open_v2(path, &ck->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, SR_STORE_VFS);
    if (r == SQLITE_OK) {
        char sql[96];
        snprintf(sql, sizeof(sql), "PRAGMA synchronous = %s; SELECT count(*) FROM sqlite_schema",
                 sync_normal ? "NORMAL" : "FULL");
        sqlite3_extended_result_codes(ck->db, 1);
        sqlite3_busy_timeout(ck->db, 1000); /* for the query (a recovery elsewhere) */
        r = sqlite3_exec(ck->db, sql, NULL, NULL, NULL);
    }
    if (r != SQLITE_OK) {
        pthread_mutex_lock(&ck->mu);
        set_error(ck, "checkpoint connection", r, ck->db);
        pthread_mutex_unlock(&ck->mu);
        sqlite3_close_v2(ck->db);
        ck->db = NULL;
    }
    return r;
}

typedef struct {
    store_ckpt *ck;
    char       *path;
    int         sync_normal;
} thread_arg;

static void *
thread_main(void *p)
{
    thread_arg *a = p;
    store_ckpt *ck = a->ck;

    pthread_mutex_lock(&ck->mu);
    for (;;) {
        while (ck->state != CK_RUNNING && !ck->stop) {
            pthread_cond_wait(&ck->cv, &ck->mu);
        }
        if (ck->stop) {
            break;
        }
        pthread_mutex_unlock(&ck->mu);
        int     nlog = -1, nckpt = -1;
        int64_t t0 = sr_clock_now_ns() / 1000;
        int     r = ck->db != NULL ? SQLITE_OK : thread_open(ck, a->path, a->sync_normal);
        if (r == SQLITE_OK) {
            r = sqlite3_wal_checkpoint_v2(ck->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &nlog, &nckpt);
        }
        int64_t us = sr_clock_now_ns() / 1000 - t0;
        pthread_mutex_lock(&ck->mu);
        ck->done_rc = r;
        ck->done_ckpt = r == SQLITE_OK ? nckpt : -1;
        if (r == SQLITE_OK) {
            count_pass(&ck->stats.passes, &ck->stats.pass_us, &ck->stats.pass_max_us, us);
        } else if (r != SQLITE_BUSY) {
            ck->stats.failures++;
            if (ck->db != NULL) {
                set_error(ck, "checkpoint", r, ck->db);
            }
        }
        ck->state = CK_DONE;
        pthread_cond_broadcast(&ck->cv);
    }
    pthread_mutex_unlock(&ck->mu);
    sqlite3_close_v2(ck->db);
    ck->db = NULL;
    free(a->path);
    free(a);
    return NULL;
}

/* Start the thread; on failure the committer checkpoints itself (SQLite's
 * own behaviour), so this never fails a commit. */
static int
thread_start(sr_store *st, store_ckpt *ck)
{
    thread_arg *a = calloc(1, sizeof(*a));
    if (a == NULL || (a->path = strdup(st->path)) == NULL) {
        free(a);
        return -1;
    }
    a->ck = ck;
    a->sync_normal = st->opts.sync == SR_STORE_SYNC_NORMAL;
    if (pthread_create(&ck->thread, NULL, thread_main, a) != 0) {
        free(a->path);
        free(a);
        return -1;
    }
    ck->started = 1;
    return 0;
}

/* A PASSIVE checkpoint on the committing connection (case 2's last bit,
 * case 3, or no thread). */
static void
checkpoint_here(sr_store *st, store_ckpt *ck, int waited)
{
    int64_t t0 = sr_clock_now_ns() / 1000;
    int     r = sqlite3_wal_checkpoint_v2(st->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    int64_t us = sr_clock_now_ns() / 1000 - t0;

    pthread_mutex_lock(&ck->mu);
    if (r == SQLITE_OK) {
        count_pass(&ck->stats.inline_passes, &ck->stats.inline_us, &ck->stats.inline_max_us, us);
    } else if (r != SQLITE_BUSY) {
        ck->stats.failures++;
        set_error(ck, "checkpoint", r, st->db);
    }
    ck->stats.waits += waited;
    pthread_mutex_unlock(&ck->mu);
}

/* The automatic limit: T = SR_STORE_WAL_COMMITS x the largest commit so far,
 * within [min_frames, max_frames].  A small model's WAL is copied into the
 * file every ~16 commits (so losing the -wal loses at most about that
 * many), a big one keeps the cap that makes checkpoints cheap (pages
 * rewritten by several commits are copied once).  Committer only. */
static void
auto_limit(store_ckpt *ck)
{
    if (ck->commit_frames <= ck->big_commit) {
        return;
    }
    ck->big_commit = ck->commit_frames;
    int64_t t = SR_STORE_WAL_COMMITS * ck->big_commit;
    ck->frames = t < ck->min_frames ? ck->min_frames : t > ck->max_frames ? ck->max_frames : t;
}

static int
wal_hook(void *p, sqlite3 *db, const char *name, int nframe)
{
    sr_store   *st = p;
    store_ckpt *ck = st->ckpt;
    int64_t     n = nframe;
    (void)db;
    (void)name;

    ck->commit_frames = n > ck->last_frame ? n - ck->last_frame : n;
    ck->last_frame = n;
    if (ck->auto_limit) {
        auto_limit(ck);
    }
    pthread_mutex_lock(&ck->mu);
    ck->stats.wal_frames = (uint64_t)n;
    if ((uint64_t)n > ck->stats.max_frames) {
        ck->stats.max_frames = (uint64_t)n;
    }
    if (n < ck->frames) {
        /* The WAL restarted (or is not full yet): a finished pass belongs to
         * the previous cycle. */
        if (ck->state == CK_DONE) {
            ck->state = CK_IDLE;
        }
        pthread_mutex_unlock(&ck->mu);
        return SQLITE_OK;
    }
    int here = 0, waited = 0;
    if (!ck->started && !ck->no_thread && thread_start(st, ck) != 0) {
        ck->no_thread = 1; /* SQLite's own way from now on */
    }
    if (ck->no_thread) {
        here = 1;
    } else if (n >= 2 * ck->frames) {
        while (ck->state == CK_RUNNING) {
            pthread_cond_wait(&ck->cv, &ck->mu);
            waited = 1;
        }
        here = 1;
        ck->state = CK_IDLE;
    } else if (ck->state == CK_DONE) {
        int64_t small = ck->frames / 16;
        if (small < 2 * ck->commit_frames) {
            small = 2 * ck->commit_frames;
        }
        if (ck->done_rc == SQLITE_OK && n - ck->done_ckpt <= small) {
            here = 1;
            ck->state = CK_IDLE;
        } else {
            ck->state = CK_RUNNING;
            pthread_cond_broadcast(&ck->cv);
        }
    } else if (ck->state == CK_IDLE) {
        ck->state = CK_RUNNING;
        pthread_cond_broadcast(&ck->cv);
    }
    pthread_mutex_unlock(&ck->mu);
    if (here) {
        checkpoint_here(st, ck, waited);
    }
    return SQLITE_OK;
}

sr_err
sr__store_ckpt_setup(sr_store *st, int64_t page_size)
{
    int64_t page = page_size > 0 ? page_size : 4096;
    int64_t frames = st->opts.wal_checkpoint_bytes / page;
    frames = frames < 16 ? 16 : frames > INT32_MAX ? INT32_MAX : frames;

    store_ckpt *ck = calloc(1, sizeof(*ck));
    if (ck == NULL) {
        return sr__store_fail(st, SR_ENOMEM, "checkpoint state");
    }
    pthread_mutex_init(&ck->mu, NULL);
    pthread_cond_init(&ck->cv, NULL);
    ck->frames = frames;
    if (st->opts.wal_checkpoint_bytes == 0) {
        ck->auto_limit = 1;
        ck->min_frames = SR_STORE_WAL_MIN_BYTES / page;
        ck->max_frames = SR_STORE_WAL_MAX_BYTES / page;
        ck->frames = ck->min_frames; /* until the first commit says more */
    }
    ck->no_thread = st->opts.checkpoint_inline;
    st->ckpt = ck;
    sqlite3_wal_hook(st->db, wal_hook, st);
    return SR_OK;
}

void
sr__store_ckpt_stop(sr_store *st)
{
    store_ckpt *ck = st->ckpt;
    if (ck == NULL) {
        return;
    }
    if (st->db != NULL) {
        sqlite3_wal_hook(st->db, NULL, NULL);
    }
    pthread_mutex_lock(&ck->mu);
    ck->stop = 1;
    pthread_cond_broadcast(&ck->cv);
    pthread_mutex_unlock(&ck->mu);
    if (ck->started) {
        pthread_join(ck->thread, NULL);
    }
    pthread_cond_destroy(&ck->cv);
    pthread_mutex_destroy(&ck->mu);
    free(ck);
    st->ckpt = NULL;
}

int64_t
sr__store_ckpt_wal_frames(const sr_store *st)
{
    return st->ckpt != NULL ? st->ckpt->last_frame : 0;
}

void
sr_store_get_ckpt_stats(sr_store *st, sr_store_ckpt_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (st == NULL || st->ckpt == NULL) {
        return;
    }
    pthread_mutex_lock(&st->ckpt->mu);
    *out = st->ckpt->stats;
    out->background = !st->ckpt->no_thread;
    pthread_mutex_unlock(&st->ckpt->mu);
}
