/*
 * The mark: a small record beside the store (PATH-mark, mode 0600) saying
 * which step this store last committed, so that a store that comes back
 * below it (a lost, truncated, zeroed or damaged -wal, an older copy of the
 * file, a deleted store) is reported instead of silently serving an older
 * model or an empty one.  docs/store.md, "The mark".
 *
 * The file holds two 64-byte slots, at offsets 0 and 512 (two sectors), each
 * little-endian:
 *
 *   0  magic "SRMARK01"       32  incarnation (u64)
 *   8  seq (u64)              40  wal_bytes (u64): -wal length the commit left
 *  16  store_id (i64)         48  flags (u32: 1 = model ready), 0 (u32)
 *  24  step (i64)             56  XXH3_64bits of bytes 0..55
 *
 * A write goes to slot seq % 2 with seq one more than the newest valid
 * slot's (read back before each write: two handles of one coordinator, the
 * loop's and the commit writer's, both write it), so a torn write (power
 * lost inside the pwrite) leaves the other slot whole; the reader takes the
 * valid slot with the larger seq.
 *
 * When it is written, by read-write handles only, each time after SQLite's
 * COMMIT returned: sr_store_commit_step (step = max(mark, committed step):
 * a store found behind its mark never lowers it by committing),
 * sr_store_set_ready, sr_store_rewind (the one legitimate way back: the mark
 * follows it), sr_store_new_incarnation (with an accepted rollback: recorded
 * in the `rollback` table in the same transaction, then the mark reset to the
 * store).  Never fsynced: at synchronous=FULL the commit was durable before
 * the mark's write was issued, so a mark that reaches the disk never claims
 * more than the store holds, and one that does not is only behind (which is
 * not a rollback).  At NORMAL the mark may reach the disk before WAL frames
 * that a power loss then loses: reported as the rollback it is.
 *
 * Transitions of what a read-write open finds (sr__store_mark_check):
 *
 *   no PATH-mark / unreadable / another store's   -> NOTICE, a fresh mark
 *   store step >= mark step (and ready if it was) -> OK
 *   store step <  mark step, or ready lost        -> SR_EROLLBACK, nothing
 *                                                    written; with
 *                                                    accept_rollback: open,
 *                                                    recorded by the next
 *                                                    new_incarnation
 *   store file missing, a mark of committed steps -> the same (precheck)
 *
 * The mark is always read before the store's step is, so a reader racing a
 * commit sees the store at or above the mark it read.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "store/store_int.h"

#define MARK_MAGIC "SRMARK01"
#define MARK_SLOT  64
#define MARK_GAP   512 /* slot 1's offset: another sector than slot 0 */

static void
put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static uint64_t
get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

static void
encode(const store_mark *m, uint8_t *b)
{
    memset(b, 0, MARK_SLOT);
    memcpy(b, MARK_MAGIC, 8);
    put64(b + 8, m->seq);
    put64(b + 16, (uint64_t)m->store_id);
    put64(b + 24, (uint64_t)m->step);
    put64(b + 32, m->incarnation);
    put64(b + 40, m->wal_bytes);
    put64(b + 48, (uint64_t)(m->ready ? 1u : 0u));
    put64(b + 56, sr__store_sum(b, 56));
}

/* 0 when slot b is a valid mark (into *m), -1 when not. */
static int
decode(const uint8_t *b, store_mark *m)
{
    if (memcmp(b, MARK_MAGIC, 8) != 0 || get64(b + 56) != sr__store_sum(b, 56)) {
        return -1;
    }
    m->seq = get64(b + 8);
    m->store_id = (int64_t)get64(b + 16);
    m->step = (int64_t)get64(b + 24);
    m->incarnation = get64(b + 32);
    m->wal_bytes = get64(b + 40);
    m->ready = (get64(b + 48) & 1u) != 0;
    return 0;
}

static void
mark_path(const char *path, const char *sfx, char *out, size_t len)
{
    snprintf(out, len, "%s%s", path, sfx);
}

sr_err
sr__store_mark_read(const char *path, store_mark *out, int *state)
{
    char       p[4096 + 8];
    uint8_t    b[MARK_GAP + MARK_SLOT];
    store_mark s0, s1;
    int        fd, v0, v1;
    ssize_t    n;

    memset(out, 0, sizeof(*out));
    out->step = -1;
    mark_path(path, "-mark", p, sizeof(p));
    if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0) {
        int e = errno;
        if (e == ENOENT) {
            *state = SR_STORE_MARK_MISSING;
            return SR_OK;
        }
        return sr_fail(sr_err_from_errno(e, SR_ESTORE), "%s: %s", p, strerror(e));
    }
    n = pread(fd, b, sizeof(b), 0);
    close(fd);
    if (n < 0) {
        int e = errno;
        return sr_fail(SR_ESTORE, "%s: read: %s", p, strerror(e));
    }
    v0 = n >= MARK_SLOT && decode(b, &s0) == 0;
    v1 = n >= MARK_GAP + MARK_SLOT && decode(b + MARK_GAP, &s1) == 0;
    if (!v0 && !v1) {
        *state = SR_STORE_MARK_DAMAGED;
        return SR_OK;
    }
    *out = v0 && (!v1 || s0.seq > s1.seq) ? s0 : s1;
    *state = SR_STORE_MARK_OK;
    return SR_OK;
}

/* The -wal as the open found it, before SQLite touched it: for messages. */
static void
describe_wal(const sr_store *st, char *out, size_t len)
{
    const store_mark *m = &st->mark;

    if (st->wal_size_at_open < 0) {
        snprintf(out, len, "the -wal is missing");
    } else if (st->wal_size_at_open == 0) {
        snprintf(out, len, "the -wal is empty (0 bytes)");
    } else if (m->wal_bytes > 0 && (uint64_t)st->wal_size_at_open < m->wal_bytes) {
        snprintf(out, len, "the -wal is %lld bytes, shorter than the %llu the last commit left",
                 (long long)st->wal_size_at_open, (unsigned long long)m->wal_bytes);
    } else {
        snprintf(out, len,
                 "the -wal is %lld bytes (the last commit left %llu): its frames did not all "
                 "replay (damaged), or the store file was replaced by an older copy",
                 (long long)st->wal_size_at_open, (unsigned long long)m->wal_bytes);
    }
}

sr_err
sr__store_mark_precheck_missing(sr_store *st)
{
    store_mark m;
    int        state = 0;
    sr_err     rc;

    if (!st->marked || (rc = sr__store_mark_read(st->path, &m, &state)) != SR_OK ||
        state != SR_STORE_MARK_OK) {
        return SR_OK; /* no (readable) mark: nothing says a store was here */
    }
    st->mark = m;
    st->rb.state = SR_STORE_MARK_OK;
    st->rb.behind = 1;
    st->rb.store_step = 0;
    st->rb.mark_step = m.step;
    st->rb.mark_incarnation = m.incarnation;
    snprintf(st->rb.cause, sizeof(st->rb.cause), "the store file is missing");
    if (!st->opts.accept_rollback) {
        return sr__store_fail(st, SR_EROLLBACK,
                              "%s does not exist, but %s-mark says store %016llx committed step "
                              "%lld (incarnation %llu): the store was lost or moved.  Restore "
                              "it, or accept starting a new, empty store (coordinator: "
                              "--accept-rollback; the loss is recorded)",
                              st->path, st->path, (unsigned long long)m.store_id, (long long)m.step,
                              (unsigned long long)m.incarnation);
    }
    st->rb.accepted = 1;
    return SR_OK;
}

/* A meta integer, or `dflt` when it is missing or not an integer (a
 * damaged store: verify and the calls that need it report that). */
static int64_t
meta_or(sr_store *st, const char *key, int64_t dflt)
{
    int64_t v = dflt;

    if (sr__store_meta_i64(st, key, &v) != SR_OK) {
        v = dflt;
    }
    return v;
}

/* What the store holds now, read after the mark (see the file comment).
 * 0 when it could say; -1 when meta has no global step (nothing compared). */
static int
store_state(sr_store *st, int empty, int64_t *step, int64_t *ready, int64_t *nvars, int64_t *id)
{
    *step = 0;
    *ready = 0;
    *nvars = 0;
    *id = 0;
    if (empty) {
        return 0;
    }
    *step = meta_or(st, "global_step", -1);
    *ready = meta_or(st, "model_ready", 0);
    *id = meta_or(st, "store_id", 0); /* 0: a schema-2 store, given one by its migration */
    if (sr__store_query_i64(st, "SELECT count(*) FROM variable", nvars) != SR_OK) {
        *nvars = 0;
    }
    sr_clear_error();
    return *step >= 0 ? 0 : -1;
}

sr_err
sr__store_mark_check(sr_store *st, int empty)
{
    store_mark m;
    int        state = 0;
    int64_t    step, ready, nvars, id;
    sr_err     rc;
    char       wal[256];

    if (st->rb.behind) {
        return SR_OK; /* the store file was missing: precheck decided */
    }
    if ((rc = sr__store_mark_read(st->path, &m, &state)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    if (store_state(st, empty, &step, &ready, &nvars, &id) != 0) {
        return SR_OK; /* no global step to compare: the store's own checks say why */
    }
    if (state == SR_STORE_MARK_OK && id != 0 && m.store_id != id) {
        state = SR_STORE_MARK_FOREIGN;
    }
    st->rb.state = state;
    st->rb.store_step = step;
    st->rb.store_ready = (int)ready;
    st->rb.nvariables = nvars;
    st->rb.mark_step = state == SR_STORE_MARK_OK ? m.step : -1;
    st->rb.mark_incarnation = state == SR_STORE_MARK_OK ? m.incarnation : 0;
    if (state != SR_STORE_MARK_OK) {
        return SR_OK;
    }
    st->mark = m;
    if (step >= m.step && (ready || !m.ready)) {
        return SR_OK;
    }
    st->rb.behind = 1;
    describe_wal(st, wal, sizeof(wal));
    snprintf(st->rb.cause, sizeof(st->rb.cause), "%s", wal);
    if (st->opts.readonly) {
        return SR_OK; /* verify reports it */
    }
    if (!st->opts.accept_rollback) {
        return sr__store_fail(
            st, SR_EROLLBACK,
            "%s is behind its mark: the store is at step %lld%s, %s-mark says step %lld was "
            "committed%s (incarnation %llu); %s.  Starting would lose steps %lld..%lld.  "
            "Restore the -wal or the store if you can, or accept the older state "
            "(coordinator: --accept-rollback; recorded in the store)",
            st->path, (long long)step, nvars == 0 ? " with no variables" : "", st->path,
            (long long)m.step, m.ready ? " with the model ready" : "",
            (unsigned long long)m.incarnation, wal, (long long)(m.step > step ? step + 1 : step),
            (long long)(m.step > step ? m.step : step));
    }
    st->rb.accepted = 1;
    return SR_OK;
}

/* The newest valid record in the open mark file (another handle on the
 * store, the coordinator's commit writer, may have written since): 0 and
 * *out filled, or -1. */
static int
newest_on_disk(const sr_store *st, store_mark *out)
{
    uint8_t    b[MARK_GAP + MARK_SLOT];
    store_mark s0, s1;
    ssize_t    n = pread(st->mark_fd, b, sizeof(b), 0);
    int        v0 = n >= MARK_SLOT && decode(b, &s0) == 0;
    int        v1 = n >= MARK_GAP + MARK_SLOT && decode(b + MARK_GAP, &s1) == 0;

    if (!v0 && !v1) {
        return -1;
    }
    *out = v0 && (!v1 || s0.seq > s1.seq) ? s0 : s1;
    return 0;
}

/* Write the handle's mark record into the next slot (no fsync: see the
 * file comment).  `keep_max`: the record vouches for at least what the
 * file already says for this store (a commit; a rewind or a reset says
 * exactly its step).  A failure is logged, never returned: the commit it
 * follows is durable, and a mark left behind is not a false alarm. */
static void
mark_write(sr_store *st, int keep_max)
{
    uint8_t    b[MARK_SLOT];
    store_mark cur;

    if (st->mark_fd < 0) {
        return;
    }
    if (newest_on_disk(st, &cur) == 0) {
        st->mark.seq = cur.seq > st->mark.seq ? cur.seq : st->mark.seq;
        if (keep_max && cur.store_id == st->mark.store_id && cur.step > st->mark.step) {
            st->mark.step = cur.step;
        }
    }
    st->mark.seq++;
    encode(&st->mark, b);
    off_t   off = (st->mark.seq % 2) ? MARK_GAP : 0;
    ssize_t n = pwrite(st->mark_fd, b, sizeof(b), off);
    if (n != (ssize_t)sizeof(b)) {
        int e = n < 0 ? errno : ENOSPC;
        SR_LOG(SR_LOG_WARN, "STORE-MARK-WRITE", "path=%s-mark step=%" PRId64 " err=\"%s\"",
               st->path, st->mark.step, strerror(e));
    }
}

static const char *
state_name(int state)
{
    return state == SR_STORE_MARK_MISSING   ? "missing"
           : state == SR_STORE_MARK_DAMAGED ? "unreadable (bad magic or checksum)"
           : state == SR_STORE_MARK_FOREIGN ? "another store's"
                                            : "ok";
}

sr_err
sr__store_mark_open(sr_store *st)
{
    char    p[4096 + 8];
    int64_t id, step, ready, inc;

    mark_path(st->path, "-mark", p, sizeof(p));
    st->mark_fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    st->mark_created = st->mark_fd >= 0;
    if (st->mark_fd < 0 && errno == EEXIST) {
        st->mark_fd = open(p, O_RDWR | O_CLOEXEC);
    }
    if (st->mark_fd < 0) {
        int e = errno;
        return sr__store_fail(st, sr_err_from_errno(e, SR_ESTORE), "%s: cannot open: %s", p,
                              strerror(e));
    }
    (void)fchmod(st->mark_fd, 0600);
    id = meta_or(st, "store_id", 0);
    step = meta_or(st, "global_step", 0);
    ready = meta_or(st, "model_ready", 0);
    inc = meta_or(st, "incarnation", 0);
    sr_clear_error();
    if (st->rb.behind) {
        return SR_OK; /* accepted: reset by sr_store_new_incarnation */
    }
    if (st->rb.state != SR_STORE_MARK_OK) {
        if (!st->created) { /* a new store's first mark is no news */
            SR_LOG(SR_LOG_NOTICE, "STORE-MARK",
                   "path=%s-mark was %s; written for store %016llx at step %" PRId64, st->path,
                   state_name(st->rb.state), (unsigned long long)id, step);
        }
        st->mark.seq = 0;
        st->mark.store_id = id;
        st->mark.step = step;
        st->mark.ready = ready != 0;
        st->mark.incarnation = (uint64_t)inc;
        st->mark.wal_bytes = 0;
        mark_write(st, 0);
    }
    st->mark.store_id = id;
    return SR_OK;
}

void
sr__store_mark_close(sr_store *st)
{
    if (st->mark_fd >= 0) {
        close(st->mark_fd);
        st->mark_fd = -1;
    }
}

void
sr__store_mark_committed(sr_store *st, int64_t step, int ready, uint64_t wal_bytes)
{
    if (st->mark_fd < 0) {
        return;
    }
    if (step > st->mark.step) {
        st->mark.step = step;
    }
    st->mark.ready = st->mark.ready || ready;
    st->mark.wal_bytes = wal_bytes;
    mark_write(st, 1);
}

void
sr__store_mark_reset(sr_store *st, int64_t step, int ready, uint64_t incarnation)
{
    if (st->mark_fd < 0) {
        return;
    }
    st->mark.step = step;
    st->mark.ready = ready;
    st->mark.incarnation = incarnation;
    mark_write(st, 0);
}

sr_err
sr_store_get_rollback(sr_store *st, sr_store_rollback *out)
{
    if (st == NULL || out == NULL) {
        return sr_fail(SR_EINVAL, "sr_store_get_rollback: NULL argument");
    }
    *out = st->rb;
    return SR_OK;
}
