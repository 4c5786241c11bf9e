/*
 * Chunked, versioned tensors: declare, commit, read, rewind.
 *
 * A tensor (a variable's value or one optimizer slot) is cut into chunks of
 * the variable's chunk_bytes.  Each chunk has one or more versions: a row
 * chunk(tensor_id, idx, step, data_id) plus the bytes in chunk_data(id,
 * data).  Reading tensor T as of step S takes, for each chunk, the version
 * with the greatest step <= S.
 *
 * A commit at step g writing chunk i of T:
 *   1. a version with step == g exists: overwrite its bytes in place;
 *   2. else a version no retained step other than g needs (needed = for
 *      some retained S, the newest version <= S) is recycled: its step
 *      becomes g and its bytes are overwritten in place (same size);
 *   3. else a new version is inserted (zeroblob, then blob_write).
 * Bytes are always written with sqlite3_blob_write into an existing row:
 * replacing a big BLOB through INSERT/UPDATE is about half as fast.  The
 * commit then moves the global step, upserts workers, writes the step log,
 * records checkpoint g, drops checkpoints beyond K and the versions only
 * they needed, all in one BEGIN IMMEDIATE transaction, whose chunk bytes
 * are written last (sr__store_write_bytes says why).  With dense updates
 * every step the steady state is K versions per chunk, all recycled.
 *
 * With sparse history (keep_every_steps E) the first checkpoint of each
 * window of E steps older than the newest K stays too; the pruning then
 * asks of each version in the affected range whether a checkpoint lies in
 * [its step, the next version's step) (prune_sparse).
 *
 * Invariant (relied on by the version pruning): either there is no
 * checkpoint, or the newest checkpoint is the global step, and every
 * version with step >= the oldest of the newest K checkpoints is at a
 * checkpoint's step; after every commit each version is needed by some
 * retained step.  See docs/store.md.
 */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/mem.h"
#include "core/name.h"
#include "core/text.h"
#include "store/store_int.h"

static sr_err
scratch_reserve(sr_store *st, size_t pairs)
{
    int64_t *p = sr_grow_array(st->scratch, &st->scratch_cap, pairs, 2 * sizeof(*p));
    if (p == NULL) {
        return sr__store_fail(st, SR_ENOMEM, "chunk version list (%zu)", pairs);
    }
    st->scratch = p;
    return SR_OK;
}

sr_err
sr__store_blob_at(sr_store *st, sqlite3_blob **blob, int64_t data_id, int writable, size_t size)
{
    int r = SQLITE_OK;

    if (*blob != NULL) {
        r = sqlite3_blob_reopen(*blob, data_id);
        if (r != SQLITE_OK) {
            /* An aborted handle cannot be moved: start a fresh one. */
            sqlite3_blob_close(*blob);
            *blob = NULL;
        }
    }
    if (*blob == NULL) {
        r = sqlite3_blob_open(st->db, "main", "chunk_data", "data", data_id, writable, blob);
        if (r != SQLITE_OK) {
            *blob = NULL;
            return sr__store_sqlerr(st, r, "open chunk data");
        }
    }
    if ((size_t)sqlite3_blob_bytes(*blob) != size) {
        return sr__store_fail(st, SR_ECORRUPT, "%s: chunk data %lld is %d bytes, want %zu",
                              st->path, (long long)data_id, sqlite3_blob_bytes(*blob), size);
    }
    return SR_OK;
}

/* Is a version spanning steps [lo, hi) needed by a retained step in keep
 * (ascending)?  Binary search: with sparse history keep grows with the
 * run's length. */
static int
needed(int64_t lo, int64_t hi, const int64_t *keep, size_t nkeep)
{
    size_t a = 0, b = nkeep;

    while (a < b) { /* the first keep[i] >= lo */
        size_t m = a + (b - a) / 2;
        if (keep[m] < lo) {
            a = m + 1;
        } else {
            b = m;
        }
    }
    return a < nkeep && keep[a] < hi;
}

/* Write src[off, off + len) into chunk_data row data_id (`size` bytes)
 * through *blob (opened or moved there). */
static sr_err
blob_write_at(sr_store *st, sqlite3_blob **blob, int64_t data_id, size_t size, const uint8_t *src,
              size_t off, size_t len)
{
    sr_err rc = sr__store_blob_at(st, blob, data_id, 1, size);
    int    r;

    if (rc == SR_OK &&
        (r = sqlite3_blob_write(*blob, src + off, (int)len, (int)off)) != SQLITE_OK) {
        rc = sr__store_sqlerr(st, r, "write chunk data");
    }
    return rc;
}

/* Queue `size` bytes from src for chunk_data row data_id. */
static sr_err
queue_write(sr_store *st, int64_t data_id, const uint8_t *src, size_t size)
{
    store_write *p = sr_grow_array(st->pend, &st->pend_cap, st->npend + 1, sizeof(*p));
    if (p == NULL) {
        return sr__store_fail(st, SR_ENOMEM, "chunk write list (%zu)", st->npend + 1);
    }
    st->pend = p;
    st->pend[st->npend++] = (store_write){data_id, src, size};
    return SR_OK;
}

static sr_err
write_chunk(sr_store *st, int64_t tensor_id, int64_t idx, int64_t g, int64_t floor,
            const int64_t *keep, size_t nkeep, const uint8_t *src, size_t size)
{
    sqlite3_stmt *s;
    sr_err        rc;
    size_t        n = 0;
    int           r;
    int64_t       data_id = -1;
    uint64_t      sum = 0;

    /* The new version's checksum, in the same transaction as its bytes. */
    if (src != NULL) {
        sum = sr__store_sum(src, size);
    } else if ((rc = sr__store_sum_zeros(size, &sum)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    if ((rc = sr__store_stmt(st, STMT_CHUNK_VERSIONS, &s)) != SR_OK) {
        return rc;
    }
    sqlite3_bind_int64(s, 1, tensor_id);
    sqlite3_bind_int64(s, 2, idx);
    sqlite3_bind_int64(s, 3, floor);
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        if ((rc = scratch_reserve(st, n + 1)) != SR_OK) {
            sqlite3_reset(s);
            return rc;
        }
        st->scratch[2 * n] = sqlite3_column_int64(s, 0);
        st->scratch[2 * n + 1] = sqlite3_column_int64(s, 1);
        n++;
    }
    sqlite3_reset(s);
    if (r != SQLITE_DONE) {
        return sr__store_sqlerr(st, r, "read chunk versions");
    }
    const int64_t *ver = st->scratch; /* (step, data_id) pairs, ascending step */
    if (n > 0 && ver[2 * (n - 1)] > g) {
        return sr__store_fail(st, SR_ECORRUPT,
                              "%s: tensor %lld chunk %lld has a version at step "
                              "%lld, after the commit's step %lld",
                              st->path, (long long)tensor_id, (long long)idx,
                              (long long)ver[2 * (n - 1)], (long long)g);
    }
    if (n > 0 && ver[2 * (n - 1)] == g) {
        data_id = ver[2 * (n - 1) + 1]; /* rewriting step g: in place */
        if ((rc = sr__store_stmt(st, STMT_CHUNK_SUM, &s)) != SR_OK) {
            return rc;
        }
        sqlite3_bind_int64(s, 1, tensor_id);
        sqlite3_bind_int64(s, 2, idx);
        sqlite3_bind_int64(s, 3, g);
        sqlite3_bind_int64(s, 4, (sqlite3_int64)sum);
        if ((rc = sr__store_run(st, s, "write chunk checksum")) != SR_OK) {
            return rc;
        }
    } else {
        for (size_t j = 0; j < n; j++) {
            int64_t hi = j + 1 < n ? ver[2 * (j + 1)] : INT64_MAX;
            if (!needed(ver[2 * j], hi, keep, nkeep)) {
                if ((rc = sr__store_stmt(st, STMT_CHUNK_RESTEP, &s)) != SR_OK) {
                    return rc;
                }
                sqlite3_bind_int64(s, 1, g);
                sqlite3_bind_int64(s, 2, tensor_id);
                sqlite3_bind_int64(s, 3, idx);
                sqlite3_bind_int64(s, 4, ver[2 * j]);
                sqlite3_bind_int64(s, 5, (sqlite3_int64)sum);
                if ((rc = sr__store_run(st, s, "recycle chunk version")) != SR_OK) {
                    return rc;
                }
                data_id = ver[2 * j + 1];
                break;
            }
        }
    }
    if (data_id < 0) {
        if ((rc = sr__store_stmt(st, STMT_DATA_INSERT, &s)) != SR_OK) {
            return rc;
        }
        sqlite3_bind_int64(s, 1, (sqlite3_int64)size);
        if ((rc = sr__store_run(st, s, "insert chunk data")) != SR_OK) {
            return rc;
        }
        data_id = sqlite3_last_insert_rowid(st->db);
        if ((rc = sr__store_stmt(st, STMT_CHUNK_INSERT, &s)) != SR_OK) {
            return rc;
        }
        sqlite3_bind_int64(s, 1, tensor_id);
        sqlite3_bind_int64(s, 2, idx);
        sqlite3_bind_int64(s, 3, g);
        sqlite3_bind_int64(s, 4, data_id);
        sqlite3_bind_int64(s, 5, (sqlite3_int64)sum);
        if ((rc = sr__store_run(st, s, "insert chunk version")) != SR_OK) {
            return rc;
        }
        if (src == NULL) {
            return SR_OK; /* a fresh zeroblob is the value */
        }
        /* Its pages were just written (zeros) and are still in the cache:
         * the bytes go in at once rather than last. */
        sqlite3_blob *blob = NULL;
        rc = blob_write_at(st, &blob, data_id, size, src, 0, size);
        sqlite3_blob_close(blob);
        return rc;
    }
    if (src == NULL) {
        return sr__store_fail(st, SR_EINVAL, "%s: no data for an existing chunk", st->path);
    }
    return queue_write(st, data_id, src, size);
}

/* How many of the first bytes of a chunk_data blob of `size` bytes live in
 * its row's b-tree leaf page; the rest fill overflow pages.  SQLite's file
 * format: a table leaf keeps a payload P of more than U - 35 bytes (U, the
 * usable page size) as M = (U - 12) * 32 / 255 - 23 bytes plus
 * (P - M) % (U - 4), or just M when that exceeds U - 35; the payload of a
 * chunk_data row is its record, a header (its own size, the NULL of the
 * rowid alias, the blob's serial type 2 * size + 12 as a varint) and then
 * the bytes.  0 when the page size is not known. */
static size_t
leaf_bytes(const sr_store *st, size_t size)
{
    uint64_t u = (uint64_t)st->usable, type = 2 * (uint64_t)size + 12, tl = 1;

    if (u < 512) {
        return 0;
    }
    while (tl < 8 && (type >> (7 * tl)) != 0) {
        tl++;
    }
    uint64_t hdr = 2 + tl, p = hdr + size, max_local = u - 35, min_local = (u - 12) * 32 / 255 - 23;
    if (p <= max_local) {
        return size;
    }
    uint64_t local = min_local + (p - min_local) % (u - 4);
    if (local > max_local) {
        local = min_local;
    }
    return local > hdr ? (size_t)(local - hdr) : 0;
}

/*
 * Writing the bytes last.  A transaction that dirties more pages than
 * SQLite's page cache holds spills the oldest dirty pages into the WAL
 * before its commit.  If it then modifies a spilled page again, SQLite
 * rewrites that frame in place and, at the commit, reads back every frame
 * written after it to recompute the WAL's running checksums: a second read
 * and write of nearly the whole commit (16 MiB of chunks, 4 MiB each: ~270
 * more pread and pwrite calls, 13.8 against 10.4 ms, docs/store.md).  So
 * the chunk rows, the small records and the pruning come first and the
 * bytes of recycled versions last: first each row's leaf part (the leaf
 * pages are few and shared by the rows), then the overflow pages, each
 * touched once, in order.  (A new version is written by write_chunk at
 * once, while the pages its INSERT just zeroed are in the cache; that
 * happens in the first K commits of a tensor only.)  Any split is correct;
 * this one only avoids touching a page twice.
 */
sr_err
sr__store_write_bytes(sr_store *st)
{
    sqlite3_blob *blob = NULL;
    sr_err        rc = SR_OK;

    for (int pass = 0; pass < 2 && rc == SR_OK; pass++) {
        for (size_t i = 0; i < st->npend && rc == SR_OK; i++) {
            const store_write *w = &st->pend[i];
            size_t             lead = leaf_bytes(st, w->size);
            size_t             off = pass == 0 ? 0 : lead;
            size_t             len = pass == 0 ? lead : w->size - lead;

            if (len > 0) {
                rc = blob_write_at(st, &blob, w->data_id, w->size, w->src, off, len);
            }
        }
    }
    /* An open write blob would make COMMIT fail ("statements in progress"). */
    sqlite3_blob_close(blob);
    st->npend = 0;
    return rc;
}

sr_err
sr__store_write_tensor(sr_store *st, const store_var *v, int64_t tensor_id, const void *data,
                       const uint8_t *dirty, int64_t g, int64_t floor, const int64_t *keep,
                       size_t nkeep)
{
    const uint8_t *src = data;
    uint64_t       cb = v->v.chunk_bytes;
    sr_err         rc;

    for (uint64_t i = 0; i < v->nchunks; i++) {
        if (dirty != NULL && dirty[i] == 0) {
            continue;
        }
        uint64_t off = i * cb;
        uint64_t size = v->v.nbytes - off < cb ? v->v.nbytes - off : cb;
        rc = write_chunk(st, tensor_id, (int64_t)i, g, floor, keep, nkeep, src ? src + off : NULL,
                         (size_t)size);
        if (rc != SR_OK) {
            return rc;
        }
    }
    return SR_OK;
}

static sr_err
insert_tensor(sr_store *st, int64_t var_id, const char *slot, int64_t g, int64_t *out)
{
    sqlite3_stmt *s;
    sr_err        rc;

    if ((rc = sr__store_stmt(st, STMT_TENSOR_INSERT, &s)) != SR_OK) {
        return rc;
    }
    sqlite3_bind_int64(s, 1, var_id);
    sqlite3_bind_text(s, 2, slot, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, g);
    if ((rc = sr__store_run(st, s, "insert tensor")) != SR_OK) {
        return rc;
    }
    *out = sqlite3_last_insert_rowid(st->db);
    return SR_OK;
}

static int
checkpoint_exists(sr_store *st, int64_t step, sr_err *rc)
{
    sqlite3_stmt *s;
    int           r;

    if ((*rc = sr__store_stmt(st, STMT_CKPT_HAS, &s)) != SR_OK) {
        return 0;
    }
    sqlite3_bind_int64(s, 1, step);
    r = sqlite3_step(s);
    sqlite3_reset(s);
    if (r != SQLITE_ROW && r != SQLITE_DONE) {
        *rc = sr__store_sqlerr(st, r, "read checkpoint");
    }
    return r == SQLITE_ROW;
}

static sr_err record_keep_every(sr_store *st, int64_t every);

/* Sparse history (keep_every_steps E > 0): drop the checkpoints older than
 * `oldest` that are not the first of their window of E steps (those are
 * keep[0..nsparse)), then the versions only they needed.  Such a version lies
 * after the newest retained step before the first dropped checkpoint (a
 * version at or before it spans that step, which stays), so only the
 * versions in that range are looked at: one or two per chunk. */
static sr_err
prune_sparse(sr_store *st, int64_t oldest, size_t nsparse)
{
    sqlite3_stmt *s;
    sr_err        rc = SR_OK;
    int           r;
    size_t        j = 0, ndrop = 0;
    int64_t       lo = -1;

    if ((rc = sr__store_stmt(st, STMT_CKPT_BELOW, &s)) != SR_OK) {
        return rc;
    }
    sqlite3_bind_int64(s, 1, oldest);
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t step = sqlite3_column_int64(s, 0);
        while (j < nsparse && st->keep[j] < step) {
            j++;
        }
        if (j < nsparse && st->keep[j] == step) {
            continue; /* the first of its window: stays */
        }
        if (ndrop == 0) {
            lo = j > 0 ? st->keep[j - 1] : -1;
        }
        if ((rc = scratch_reserve(st, ndrop + 1)) != SR_OK) {
            break;
        }
        st->scratch[ndrop++] = step;
    }
    sqlite3_reset(s);
    if (rc != SR_OK) {
        return rc;
    }
    if (r != SQLITE_DONE) {
        return sr__store_sqlerr(st, r, "read checkpoints");
    }
    if (ndrop == 0) {
        return SR_OK; /* nothing dropped: no version lost its step */
    }
    for (size_t i = 0; i < ndrop; i++) {
        if ((rc = sr__store_stmt(st, STMT_CKPT_DROP, &s)) != SR_OK) {
            return rc;
        }
        sqlite3_bind_int64(s, 1, st->scratch[i]);
        if ((rc = sr__store_run(st, s, "prune checkpoints")) != SR_OK) {
            return rc;
        }
    }
    if ((rc = sr__store_stmt(st, STMT_VERSION_PRUNE_IN, &s)) != SR_OK) {
        return rc;
    }
    sqlite3_bind_int64(s, 1, lo);
    sqlite3_bind_int64(s, 2, oldest);
    return sr__store_run(st, s, "prune chunk versions");
}

/* Record checkpoint g, then drop checkpoints beyond the newest K (but the
 * sparse history, keep[0..nsparse)) and the versions only they needed.
 * `oldest` is the oldest recent step that stays. */
/* Drop the versions that a version written in (since, oldest] superseded
 * (once every version superseded at or before `since` is gone, the only
 * ones a prune to `oldest` may remove): found with a join, then deleted one
 * by one by key.  One DELETE ... WHERE (key) IN (SELECT ...) did the same
 * but opened a temporary b-tree for the list on every commit, ~10 us of a
 * 4 KiB model's ~60 us commit (bench/store/store_small). */
static sr_err
prune_superseded(sr_store *st, int64_t oldest, int64_t since)
{
    enum { LOCAL = 16 };
    int64_t       local[3 * LOCAL], *key = local;
    size_t        n = 0, cap = LOCAL;
    sqlite3_stmt *s;
    sr_err        rc;
    int           r;

    if ((rc = sr__store_stmt(st, STMT_VERSION_SUPERSEDED, &s)) != SR_OK) {
        return rc;
    }
    sqlite3_bind_int64(s, 1, oldest);
    sqlite3_bind_int64(s, 2, since);
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        if (n == cap) {
            int64_t *grown = malloc(2 * cap * 3 * sizeof(*grown));
            if (grown == NULL) {
                sqlite3_reset(s);
                rc = sr__store_fail(st, SR_ENOMEM, "%s: prune %zu chunk versions", st->path, n);
                goto out;
            }
            memcpy(grown, key, n * 3 * sizeof(*key));
            if (key != local) {
                free(key);
            }
            key = grown;
            cap *= 2;
        }
        for (int k = 0; k < 3; k++) {
            key[3 * n + (size_t)k] = sqlite3_column_int64(s, k);
        }
        n++;
    }
    sqlite3_reset(s);
    if (r != SQLITE_DONE) {
        rc = sr__store_sqlerr(st, r, "find superseded chunk versions");
        goto out;
    }
    for (size_t i = 0; i < n && rc == SR_OK; i++) {
        if ((rc = sr__store_stmt(st, STMT_VERSION_DELETE, &s)) != SR_OK) {
            break;
        }
        for (int k = 0; k < 3; k++) {
            sqlite3_bind_int64(s, k + 1, key[3 * i + (size_t)k]);
        }
        rc = sr__store_run(st, s, "prune chunk versions");
    }
out:
    if (key != local) {
        free(key);
    }
    return rc;
}

static sr_err
checkpoint_and_prune(sr_store *st, int64_t g, int64_t oldest, size_t nsparse, int64_t every)
{
    sqlite3_stmt *s;
    sr_err        rc;

    if ((rc = sr__store_stmt(st, STMT_CKPT_PUT, &s)) != SR_OK) {
        return rc;
    }
    sqlite3_bind_int64(s, 1, g);
    sqlite3_bind_int64(s, 2, sr_clock_wall_ms());
    if ((rc = sr__store_run(st, s, "record checkpoint")) != SR_OK) {
        return rc;
    }
    if ((rc = record_keep_every(st, every)) != SR_OK) {
        return rc;
    }
    st->pruning_to = -1;
    if (every > 0) {
        return prune_sparse(st, oldest, nsparse);
    }
    if ((rc = sr__store_stmt(st, STMT_CKPT_PRUNE, &s)) != SR_OK) {
        return rc;
    }
    sqlite3_bind_int64(s, 1, oldest);
    if ((rc = sr__store_run(st, s, "prune checkpoints")) != SR_OK) {
        return rc;
    }
    /* After the first prune of this handle, only what the steps since the
     * last one superseded (prune_superseded). */
    if (st->pruned_to >= 0 && st->pruned_to <= oldest) {
        rc = prune_superseded(st, oldest, st->pruned_to);
    } else if ((rc = sr__store_stmt(st, STMT_VERSION_PRUNE, &s)) == SR_OK) {
        sqlite3_bind_int64(s, 1, oldest);
        rc = sr__store_run(st, s, "prune chunk versions");
    }
    if (rc == SR_OK) {
        st->pruning_to = oldest;
    }
    return rc;
}

/* The rule the store recorded (meta 'keep_every_steps'; 0 when absent). */
static sr_err
stored_keep_every(sr_store *st, int64_t *out)
{
    sqlite3_stmt *s;
    sr_err        rc;
    int           r;

    if ((rc = sr__store_stmt(st, STMT_META_GET, &s)) != SR_OK) {
        return rc;
    }
    sqlite3_bind_text(s, 1, "keep_every_steps", -1, SQLITE_STATIC);
    r = sqlite3_step(s);
    *out = r == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    sqlite3_reset(s);
    if (r != SQLITE_ROW && r != SQLITE_DONE) {
        return sr__store_sqlerr(st, r, "read meta");
    }
    if (*out < 0) {
        return sr__store_fail(st, SR_ECORRUPT, "%s: meta 'keep_every_steps' is %lld", st->path,
                              (long long)*out);
    }
    return SR_OK;
}

sr_err
sr__store_keep_every(sr_store *st, int64_t *out)
{
    int64_t every = st->opts.keep_every_steps;

    if (every == 0) {
        return stored_keep_every(st, out);
    }
    *out = every > 0 ? every : 0;
    return SR_OK;
}

/* Record the handle's sparse-history rule, when it sets one, for later
 * handles that do not (in the write transaction of a commit). */
static sr_err
record_keep_every(sr_store *st, int64_t every)
{
    int64_t stored = 0;
    sr_err  rc;

    if (st->opts.keep_every_steps == 0) {
        return SR_OK;
    }
    if ((rc = stored_keep_every(st, &stored)) != SR_OK || stored == every) {
        return rc;
    }
    return sr__store_meta_set_i64(st, "keep_every_steps", every);
}

static void
reverse_steps(int64_t *a, size_t n)
{
    for (size_t i = 0; i < n / 2; i++) {
        int64_t t = a[i];
        a[i] = a[n - 1 - i];
        a[n - 1 - i] = t;
    }
}

static sr_err
keep_reserve(sr_store *st, size_t n)
{
    int64_t *p = sr_grow_array(st->keep, &st->keep_cap, n, sizeof(*p));
    if (p == NULL) {
        return sr__store_fail(st, SR_ENOMEM, "retained step list (%zu)", n);
    }
    st->keep = p;
    return SR_OK;
}

/* The retained steps after a commit at g, other than g itself, ascending,
 * into st->keep[0..*nkeep): first the sparse history (*nsparse of them: with
 * the rule in force E > 0 (*every), the first checkpoint of each window of E
 * steps older than the recent ones), then the newest K - 1 others.
 * *oldest: the oldest recent step that stays (g when K = 1). */
static sr_err
retained_after(sr_store *st, int64_t g, size_t *nkeep, size_t *nsparse, int64_t *oldest,
               int64_t *every)
{
    sqlite3_stmt *s;
    sr_err        rc;
    int           r;
    size_t        n = 0, k = (size_t)st->opts.keep_checkpoints;

    if ((rc = sr__store_keep_every(st, every)) != SR_OK || (rc = keep_reserve(st, k)) != SR_OK ||
        (rc = sr__store_stmt(st, STMT_CKPT_TOP, &s)) != SR_OK) {
        return rc;
    }
    sqlite3_bind_int64(s, 1, (sqlite3_int64)k);
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t step = sqlite3_column_int64(s, 0);
        if (step != g && n + 1 < k) {
            st->keep[n++] = step; /* descending */
        }
    }
    sqlite3_reset(s);
    if (r != SQLITE_DONE) {
        return sr__store_sqlerr(st, r, "read checkpoints");
    }
    *oldest = n > 0 ? st->keep[n - 1] : g;
    size_t ns = 0;
    if (*every > 0) {
        /* Sparse steps go in front: count them, move the recent ones up. */
        if ((rc = sr__store_stmt(st, STMT_CKPT_SPARSE, &s)) != SR_OK) {
            return rc;
        }
        sqlite3_bind_int64(s, 1, *oldest);
        sqlite3_bind_int64(s, 2, *every);
        while ((r = sqlite3_step(s)) == SQLITE_ROW) {
            if ((rc = keep_reserve(st, n + ns + 1)) != SR_OK) {
                sqlite3_reset(s);
                return rc;
            }
            st->keep[n + ns++] = sqlite3_column_int64(s, 0); /* after the recent, for now */
        }
        sqlite3_reset(s);
        if (r != SQLITE_DONE) {
            return sr__store_sqlerr(st, r, "read checkpoints");
        }
    }
    /* keep = recent (descending), sparse (ascending).  Reversed whole:
     * sparse (descending), recent (ascending); then the sparse part. */
    reverse_steps(st->keep, n + ns);
    reverse_steps(st->keep, ns);
    *nkeep = n + ns;
    *nsparse = ns;
    return SR_OK;
}

/* ---------------------------------------------------------------------------
 * Declare / ready
 */

_Static_assert(SR_STORE_MAX_NAME == SR_NAME_MAX, "one limit for names: core/name.h");

static sr_err
check_name(sr_store *st, const char *name, const char *what)
{
    size_t n;

    if (name == NULL) {
        return sr__store_fail(st, SR_EINVAL, "%s name is NULL", what);
    }
    n = strlen(name);
    if (n > SR_STORE_MAX_NAME) {
        return sr__store_fail(st, SR_EINVAL, "%s name '%s' is %zu bytes (max %d)", what,
                              SR_ESC(name), n, SR_STORE_MAX_NAME);
    }
    return SR_OK;
}

static sr_err
declare_tx(sr_store *st, const char *name, int dtype, int ndim, const int64_t *shape, int trainable,
           const void *data, uint64_t nbytes, int64_t *out_id, int *existed)
{
    sqlite3_stmt *s;
    store_var     v;
    sr_err        rc;
    int64_t       g = 0, tensor_id = 0;
    char          shp[256], want[256];
    size_t        es = sr_dtype_size(dtype);
    uint32_t      cb;

    if ((rc = sr__store_cache_load(st)) != SR_OK) {
        return rc;
    }
    sr_shape_format(ndim, shape, want, sizeof(want));
    for (size_t i = 0; i < st->nvars; i++) {
        const sr_store_var *e = &st->vars[i].v;
        if (strcmp(e->name, name) != 0) {
            continue;
        }
        int same = e->dtype == dtype && e->ndim == ndim;
        for (int d = 0; same && d < ndim; d++) {
            same = e->shape[d] == shape[d];
        }
        if (!same) {
            sr_shape_format(e->ndim, e->shape, shp, sizeof(shp));
            return sr__store_fail(
                st, SR_EEXIST, "%s: variable '%s' is stored as %s %s, declared as %s %s", st->path,
                SR_ESC(name), sr_dtype_name(e->dtype), shp, sr_dtype_name(dtype), want);
        }
        *out_id = e->id;
        *existed = 1;
        return SR_OK;
    }
    if ((rc = sr__store_meta_i64(st, "global_step", &g)) != SR_OK) {
        return rc;
    }
    cb = st->opts.chunk_bytes - st->opts.chunk_bytes % (uint32_t)es;
    cb = cb < es ? (uint32_t)es : cb;
    memset(&v, 0, sizeof(v));
    if ((rc = sr__store_stmt(st, STMT_VAR_INSERT, &s)) != SR_OK) {
        return rc;
    }
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 2, dtype);
    sqlite3_bind_int(s, 3, ndim);
    sqlite3_bind_text(s, 4, want, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 5, (sqlite3_int64)nbytes);
    sqlite3_bind_int64(s, 6, cb);
    sqlite3_bind_int(s, 7, trainable != 0);
    sqlite3_bind_int64(s, 8, g);
    if ((rc = sr__store_run(st, s, "insert variable")) != SR_OK) {
        return rc;
    }
    v.v.id = sqlite3_last_insert_rowid(st->db);
    v.v.nbytes = nbytes;
    v.v.chunk_bytes = cb;
    v.nchunks = (nbytes + cb - 1) / cb;
    if ((rc = insert_tensor(st, v.v.id, "", g, &tensor_id)) != SR_OK) {
        return rc;
    }
    st->npend = 0;
    if ((rc = sr__store_write_tensor(st, &v, tensor_id, data, NULL, g, -1, NULL, 0)) != SR_OK ||
        (rc = sr__store_write_bytes(st)) != SR_OK) {
        return rc;
    }
    *out_id = v.v.id;
    *existed = 0;
    return SR_OK;
}

sr_err
sr_store_declare(sr_store *st, const char *name, int dtype, int ndim, const int64_t *shape,
                 int trainable, const void *data, size_t len_bytes, int64_t *out_id,
                 int *out_existed)
{
    sr_err   rc;
    uint64_t nbytes;
    int64_t  id = 0;
    int      existed = 0;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if ((rc = check_name(st, name, "variable")) != SR_OK) {
        return rc;
    }
    if (name[0] == '\0' || out_id == NULL) {
        return sr__store_fail(st, SR_EINVAL, "sr_store_declare: empty name or NULL out_id");
    }
    if (sr_name_check(name, strlen(name)) != SR_OK) {
        return sr__store_fail(st, SR_EINVAL, "variable \"%s\": %s", SR_ESC(name), sr_errdetail());
    }
    if ((rc = sr_shape_bytes(dtype, ndim, shape, &nbytes)) != SR_OK) {
        return sr__store_fail(st, rc, "variable '%s': %s", SR_ESC(name), sr_errdetail());
    }
    if (data != NULL && len_bytes != nbytes) {
        return sr__store_fail(st, SR_EINVAL,
                              "variable '%s': initial value is %zu bytes, "
                              "%s x shape is %llu",
                              SR_ESC(name), len_bytes, sr_dtype_name(dtype),
                              (unsigned long long)nbytes);
    }
    if ((rc = sr__store_begin_write(st)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    rc = declare_tx(st, name, dtype, ndim, shape, trainable, data, nbytes, &id, &existed);
    if ((rc = sr__store_end(st, rc)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    if (!existed) {
        sr__store_cache_add_var(st, id);
    }
    *out_id = id;
    if (out_existed != NULL) {
        *out_existed = existed;
    }
    return SR_OK;
}

sr_err
sr_store_set_ready(sr_store *st)
{
    sr_err  rc;
    int64_t g = 0, oldest = 0, every = 0;
    size_t  nkeep = 0, nsparse = 0;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if ((rc = sr__store_begin_write(st)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    if ((rc = sr__store_meta_i64(st, "global_step", &g)) == SR_OK &&
        (rc = sr__store_meta_set_i64(st, "model_ready", 1)) == SR_OK) {
        int has = checkpoint_exists(st, g, &rc);
        if (rc == SR_OK && !has &&
            (rc = retained_after(st, g, &nkeep, &nsparse, &oldest, &every)) == SR_OK) {
            rc = checkpoint_and_prune(st, g, oldest, nsparse, every);
        }
    }
    if ((rc = sr__store_end(st, rc)) == SR_OK) {
        sr__store_mark_committed(st, g, 1, sr__store_wal_bytes(st));
    }
    return sr__store_ret(st, rc);
}

/* ---------------------------------------------------------------------------
 * Commit
 */

typedef struct {
    int64_t     var_id;
    const char *slot;
    size_t      i;
} tensor_key;

static int
cmp_key(const void *a, const void *b)
{
    const tensor_key *x = a, *y = b;
    if (x->var_id != y->var_id) {
        return x->var_id < y->var_id ? -1 : 1;
    }
    return strcmp(x->slot, y->slot);
}

static const char *
slot_of(const sr_store_tensor *t)
{
    return t->slot != NULL ? t->slot : "";
}

/* Everything that can be checked before a byte is written. */
static sr_err
validate(sr_store *st, const sr_store_commit *c, int64_t g_stored)
{
    tensor_key *keys = NULL;
    sr_err      rc = SR_OK;

    if (c->global_step < g_stored) {
        return sr__store_fail(st, SR_EINVAL,
                              "%s: commit of step %lld but the stored step is "
                              "%lld (steps never go back; use rewind)",
                              st->path, (long long)c->global_step, (long long)g_stored);
    }
    if ((c->ntensors > 0 && c->tensors == NULL) || (c->nworkers > 0 && c->workers == NULL) ||
        (c->nlog > 0 && c->log == NULL)) {
        return sr__store_fail(st, SR_EINVAL, "commit: NULL array with a nonzero count");
    }
    for (size_t i = 0; i < c->ntensors; i++) {
        const sr_store_tensor *t = &c->tensors[i];
        const store_var       *v = sr__store_var(st, t->var_id);
        if (v == NULL) {
            return sr__store_fail(st, SR_EINVAL, "commit: tensor %zu: no variable with id %lld", i,
                                  (long long)t->var_id);
        }
        if ((rc = check_name(st, slot_of(t), "slot")) != SR_OK) {
            return rc;
        }
        if (t->len_bytes != v->v.nbytes) {
            return sr__store_fail(st, SR_EINVAL,
                                  "commit: tensor %zu (variable '%s' slot '%s'): "
                                  "len_bytes %zu != the variable's %llu bytes",
                                  i, SR_ESC(v->v.name), slot_of(t), t->len_bytes,
                                  (unsigned long long)v->v.nbytes);
        }
        if (t->data == NULL && t->len_bytes > 0) {
            return sr__store_fail(st, SR_EINVAL,
                                  "commit: tensor %zu (variable '%s'): data is "
                                  "NULL",
                                  i, SR_ESC(v->v.name));
        }
    }
    if (c->ntensors > 1) {
        if (st->keys_cap < c->ntensors * sizeof(*keys)) {
            void *p = realloc(st->keys, c->ntensors * sizeof(*keys));
            if (p == NULL) {
                return sr__store_fail(st, SR_ENOMEM, "commit: %zu tensors", c->ntensors);
            }
            st->keys = p;
            st->keys_cap = c->ntensors * sizeof(*keys);
        }
        keys = st->keys;
        for (size_t i = 0; i < c->ntensors; i++) {
            keys[i] = (tensor_key){c->tensors[i].var_id, slot_of(&c->tensors[i]), i};
        }
        qsort(keys, c->ntensors, sizeof(*keys), cmp_key);
        for (size_t i = 1; i < c->ntensors && rc == SR_OK; i++) {
            if (cmp_key(&keys[i - 1], &keys[i]) == 0) {
                rc = sr__store_fail(st, SR_EINVAL,
                                    "commit: tensors %zu and %zu are both "
                                    "variable %lld slot '%s'",
                                    keys[i - 1].i, keys[i].i, (long long)keys[i].var_id,
                                    keys[i].slot);
            }
        }
        if (rc != SR_OK) {
            return rc;
        }
    }
    for (size_t i = 0; i < c->nworkers; i++) {
        if (c->workers[i].task_index < 0) {
            return sr__store_fail(st, SR_EINVAL, "commit: worker %zu has task index %d", i,
                                  (int)c->workers[i].task_index);
        }
    }
    for (size_t i = 0; i < c->nlog; i++) {
        const sr_store_contrib *l = &c->log[i];
        const store_var        *v = sr__store_var(st, l->var_id);
        size_t                  es = v != NULL ? sr_dtype_size(v->v.dtype) : 0;
        if (v == NULL || l->pos < 0 || l->task_index < 0 || l->part < 0 ||
            (l->part > 0 && (uint64_t)l->part * es >= v->v.nbytes)) {
            return sr__store_fail(st, SR_EINVAL,
                                  "commit: step log row %zu (step %lld var %lld part %lld "
                                  "pos %d task %d) names no variable, no element of it, or "
                                  "is negative",
                                  i, (long long)l->step, (long long)l->var_id, (long long)l->part,
                                  (int)l->pos, (int)l->task_index);
        }
    }
    return SR_OK;
}

static sr_err
commit_rows(sr_store *st, const sr_store_commit *c)
{
    sqlite3_stmt *s;
    sr_err        rc;

    for (size_t i = 0; i < c->nworkers; i++) {
        const sr_store_worker *w = &c->workers[i];
        if ((rc = sr__store_stmt(st, STMT_WORKER_UPSERT, &s)) != SR_OK) {
            return rc;
        }
        sqlite3_bind_int(s, 1, w->task_index);
        sqlite3_bind_int64(s, 2, w->local_step);
        sqlite3_bind_int64(s, 3, w->last_seen_ms);
        sqlite3_bind_int64(s, 4, (sqlite3_int64)w->incarnation);
        /* issue 24: cursor (NULL keeps the stored one) */
        if (w->has_cursor && w->cursor_len <= SR_STORE_CURSOR_MAX) {
            sqlite3_bind_blob(s, 5, w->cursor, (int)w->cursor_len, SQLITE_TRANSIENT);
        } else {
            sqlite3_bind_null(s, 5);
        }
        if ((rc = sr__store_run(st, s, "upsert worker")) != SR_OK) {
            return rc;
        }
    }
    for (size_t i = 0; i < c->nlog; i++) {
        const sr_store_contrib *l = &c->log[i];
        if ((rc = sr__store_stmt(st, STMT_LOG_PUT, &s)) != SR_OK) {
            return rc;
        }
        sqlite3_bind_int64(s, 1, l->step);
        sqlite3_bind_int64(s, 2, l->var_id);
        sqlite3_bind_int64(s, 3, l->part);
        sqlite3_bind_int(s, 4, l->pos);
        sqlite3_bind_int(s, 5, l->task_index);
        sqlite3_bind_int64(s, 6, l->local_step);
        if ((rc = sr__store_run(st, s, "write step log")) != SR_OK) {
            return rc;
        }
    }
    return sr__store_put_step_replicas(st, c); /* issue 26 */
}

static sr_err
commit_tx(sr_store *st, const sr_store_commit *c, int *new_tensors)
{
    sr_err  rc;
    int64_t g = c->global_step, stored = 0, oldest = 0, every = 0;
    size_t  nkeep = 0, nsparse = 0;

    st->npend = 0;
    if ((rc = sr__store_cache_load(st)) != SR_OK ||
        (rc = sr__store_meta_i64(st, "global_step", &stored)) != SR_OK ||
        (rc = validate(st, c, stored)) != SR_OK ||
        (rc = retained_after(st, g, &nkeep, &nsparse, &oldest, &every)) != SR_OK) {
        return rc;
    }
    for (size_t i = 0; i < c->ntensors && rc == SR_OK; i++) {
        const sr_store_tensor *t = &c->tensors[i];
        const store_var       *v = sr__store_var(st, t->var_id);
        const store_tensor    *ten = sr__store_tensor(st, t->var_id, slot_of(t));
        const uint8_t         *dirty = t->dirty;
        int64_t                tid;

        if (ten != NULL) {
            tid = ten->id;
        } else {
            /* First write of a slot: every chunk, whatever `dirty` says. */
            if ((rc = insert_tensor(st, t->var_id, slot_of(t), g, &tid)) != SR_OK) {
                break;
            }
            *new_tensors = 1;
            dirty = NULL;
        }
        /* The sparse history (keep[0..nsparse)) lies at or before its newest
         * step: those versions stay and are not read (sr__store_write_tensor). */
        rc = sr__store_write_tensor(st, v, tid, t->data, dirty, g,
                                    nsparse > 0 ? st->keep[nsparse - 1] : -1, st->keep + nsparse,
                                    nkeep - nsparse);
    }
    if (rc != SR_OK || (rc = sr__store_meta_set_i64(st, "global_step", g)) != SR_OK ||
        (rc = commit_rows(st, c)) != SR_OK ||
        (rc = checkpoint_and_prune(st, g, oldest, nsparse, every)) != SR_OK) {
        st->npend = 0;
        return rc;
    }
    return sr__store_write_bytes(st); /* last: see sr__store_write_bytes */
}

sr_err
sr_store_commit_step(sr_store *st, const sr_store_commit *c)
{
    sr_err rc;
    int    new_tensors = 0;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if (c == NULL || c->global_step < 0) {
        return sr__store_fail(st, SR_EINVAL,
                              "sr_store_commit_step: NULL commit or negative "
                              "step");
    }
    if ((rc = sr__store_begin_write(st)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    st->pruning_to = -1;
    rc = commit_tx(st, c, &new_tensors);
    rc = sr__store_end(st, rc);
    if (rc == SR_OK && new_tensors) {
        sr__store_cache_drop(st);
    }
    if (rc == SR_OK) {
        st->pruned_to = st->pruning_to;
    }
    if (rc == SR_OK) {
        /* After COMMIT returned: the mark never claims more than the store
         * holds (store_mark.c). */
        sr__store_mark_committed(st, c->global_step, 0, sr__store_wal_bytes(st));
    }
    return sr__store_ret(st, rc);
}

/* ---------------------------------------------------------------------------
 * Read
 */

static sr_err
read_tx(sr_store *st, int64_t var_id, const char *slot, int64_t step, void *dst, size_t len_bytes)
{
    const store_var    *v;
    const store_tensor *t;
    sqlite3_stmt       *s;
    sqlite3_blob       *blob = NULL;
    sr_err              rc;
    int64_t             g = 0, at;
    uint8_t            *out = dst;

    if ((rc = sr__store_cache_load(st)) != SR_OK ||
        (rc = sr__store_meta_i64(st, "global_step", &g)) != SR_OK) {
        return rc;
    }
    if ((v = sr__store_var(st, var_id)) == NULL) {
        return sr__store_fail(st, SR_ENOENT, "%s: no variable with id %lld", st->path,
                              (long long)var_id);
    }
    if (len_bytes != v->v.nbytes || (dst == NULL && len_bytes > 0)) {
        return sr__store_fail(st, SR_EINVAL,
                              "read '%s': buffer of %zu bytes for a %llu-byte "
                              "tensor",
                              SR_ESC(v->v.name), len_bytes, (unsigned long long)v->v.nbytes);
    }
    at = step == -1 ? g : step;
    if (at != g) {
        int has = at < g ? checkpoint_exists(st, at, &rc) : 0;
        if (rc != SR_OK) {
            return rc;
        }
        if (!has) {
            return sr__store_fail(st, SR_ENOENT, "%s: step %lld is not retained (current %lld)",
                                  st->path, (long long)at, (long long)g);
        }
    }
    if (v->v.created_step > at) {
        return sr__store_fail(st, SR_ENOENT,
                              "%s: variable '%s' was declared at step %lld, "
                              "after %lld",
                              st->path, SR_ESC(v->v.name), (long long)v->v.created_step,
                              (long long)at);
    }
    t = sr__store_tensor(st, var_id, slot);
    if (t == NULL || t->created_step > at) {
        return sr__store_fail(st, SR_ENOENT, "%s: variable '%s' has no slot '%s' at step %lld",
                              st->path, SR_ESC(v->v.name), SR_ESC(slot), (long long)at);
    }
    for (uint64_t i = 0; i < v->nchunks && rc == SR_OK; i++) {
        uint64_t off = i * v->v.chunk_bytes;
        uint64_t size = v->v.nbytes - off < v->v.chunk_bytes ? v->v.nbytes - off : v->v.chunk_bytes;
        int64_t  data_id, version;
        uint64_t sum;
        int      r, has_sum;

        if ((rc = sr__store_stmt(st, STMT_CHUNK_AT, &s)) != SR_OK) {
            break;
        }
        sqlite3_bind_int64(s, 1, t->id);
        sqlite3_bind_int64(s, 2, (sqlite3_int64)i);
        sqlite3_bind_int64(s, 3, at);
        r = sqlite3_step(s);
        data_id = sqlite3_column_int64(s, 0);
        version = sqlite3_column_int64(s, 1);
        has_sum = sqlite3_column_type(s, 2) != SQLITE_NULL;
        sum = (uint64_t)sqlite3_column_int64(s, 2);
        sqlite3_reset(s);
        if (r == SQLITE_DONE) {
            rc = sr__store_fail(st, SR_ECORRUPT,
                                "%s: variable '%s' slot '%s' step %lld: chunk "
                                "%llu missing",
                                st->path, SR_ESC(v->v.name), SR_ESC(slot), (long long)at,
                                (unsigned long long)i);
        } else if (r != SQLITE_ROW) {
            rc = sr__store_sqlerr(st, r, "read chunk version");
        } else if ((rc = sr__store_blob_at(st, &blob, data_id, 0, (size_t)size)) == SR_OK) {
            r = sqlite3_blob_read(blob, out + off, (int)size, 0);
            if (r != SQLITE_OK) {
                rc = sr__store_sqlerr(st, r, "read chunk data");
            } else if (!has_sum) {
                rc = sr__store_fail(st, SR_ECORRUPT,
                                    "%s: variable '%s' slot '%s' step %lld: chunk %llu (version "
                                    "of step %lld) has no checksum",
                                    st->path, v->v.name, slot, (long long)at, (unsigned long long)i,
                                    (long long)version);
            } else {
                uint64_t got = sr__store_sum(out + off, (size_t)size);
                if (got != sum) {
                    rc = sr__store_sum_mismatch(st, v, t, i, at, version, sum, got);
                }
            }
        }
    }
    sqlite3_blob_close(blob);
    return rc;
}

sr_err
sr_store_read_tensor(sr_store *st, int64_t var_id, const char *slot, int64_t step, void *dst,
                     size_t len_bytes)
{
    sr_err rc;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if (step < -1) {
        return sr__store_fail(st, SR_EINVAL, "sr_store_read_tensor: step %lld", (long long)step);
    }
    if ((rc = sr__store_begin_read(st)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    rc = read_tx(st, var_id, slot != NULL ? slot : "", step, dst, len_bytes);
    return sr__store_ret(st, sr__store_end(st, rc));
}

/* ---------------------------------------------------------------------------
 * Rewind
 */

static sr_err
exec_step(sr_store *st, const char *sql, int64_t step)
{
    sqlite3_stmt *s = NULL;
    int           r;
    sr_err        rc;

    if ((r = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL)) != SQLITE_OK) {
        return sr__store_sqlerr(st, r, sql);
    }
    sqlite3_bind_int64(s, 1, step);
    rc = sr__store_run(st, s, sql);
    sqlite3_finalize(s);
    return rc;
}

static sr_err
rewind_tx(sr_store *st, int64_t step)
{
    static const char *const drop[] = {
        "DELETE FROM checkpoint WHERE step > ?1", "DELETE FROM chunk WHERE step > ?1",
        "DELETE FROM tensor WHERE created_step > ?1",
        "DELETE FROM variable WHERE created_step > ?1",
        "DELETE FROM member WHERE created_step > ?1",
        /* A log row's step is the step before its apply: rows >= S belong
         * to commits after S. */
        "DELETE FROM step_log WHERE step >= ?1",
        "DELETE FROM step_replicas WHERE step >= ?1", /* issue 26 */
    };
    sqlite3_stmt *s = NULL;
    sr_err        rc = SR_OK;
    int64_t       g = 0, inc = 0;
    int           r;

    if ((rc = sr__store_meta_i64(st, "global_step", &g)) != SR_OK ||
        (rc = sr__store_meta_i64(st, "incarnation", &inc)) != SR_OK) {
        return rc;
    }
    int has = checkpoint_exists(st, step, &rc);
    if (rc != SR_OK) {
        return rc;
    }
    if (!has) {
        return sr__store_fail(st, SR_ENOENT,
                              "%s: step %lld is not a retained checkpoint "
                              "(current step %lld)",
                              st->path, (long long)step, (long long)g);
    }
    /* The step rewound to becomes the state served: its bytes must be
     * whole before anything newer is deleted (the transaction rolls back). */
    if ((rc = sr__store_check_sums(st, step)) != SR_OK) {
        return rc;
    }
    for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++) {
        if ((rc = exec_step(st, drop[i], step)) != SR_OK) {
            return rc;
        }
    }
    if ((rc = sr__store_meta_set_i64(st, "global_step", step)) != SR_OK) {
        return rc;
    }
    /* The incarnation that rewinds starts from the rewound step. */
    r = sqlite3_prepare_v2(st->db,
                           "UPDATE incarnation SET restored_step = ?1"
                           " WHERE incarnation = ?2",
                           -1, &s, NULL);
    if (r != SQLITE_OK) {
        return sr__store_sqlerr(st, r, "record rewind");
    }
    sqlite3_bind_int64(s, 1, step);
    sqlite3_bind_int64(s, 2, inc);
    rc = sr__store_run(st, s, "record rewind");
    sqlite3_finalize(s);
    s = NULL;
    if (rc != SR_OK) {
        return rc;
    }
    r = sqlite3_prepare_v2(st->db,
                           "INSERT INTO rewind(incarnation, from_step, to_step, at_ms)"
                           " VALUES (?1, ?2, ?3, ?4)",
                           -1, &s, NULL);
    if (r != SQLITE_OK) {
        return sr__store_sqlerr(st, r, "record rewind");
    }
    sqlite3_bind_int64(s, 1, inc);
    sqlite3_bind_int64(s, 2, g);
    sqlite3_bind_int64(s, 3, step);
    sqlite3_bind_int64(s, 4, sr_clock_wall_ms());
    rc = sr__store_run(st, s, "record rewind");
    sqlite3_finalize(s);
    return rc;
}

sr_err
sr_store_rewind(sr_store *st, int64_t step)
{
    sr_err rc;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if (step < 0) {
        return sr__store_fail(st, SR_EINVAL, "sr_store_rewind: step %lld", (long long)step);
    }
    if ((rc = sr__store_begin_write(st)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    rc = rewind_tx(st, step);
    rc = sr__store_end(st, rc);
    sr__store_cache_drop(st);
    if (rc == SR_OK) {
        /* The one legitimate way back: the mark follows it. */
        sr__store_mark_reset(st, step, st->mark.ready, st->mark.incarnation);
    }
    return sr__store_ret(st, rc);
}
