/*
 * The store handle: open/close, the one place SQLite errors become sr_err,
 * cached statements, transactions with the sticky-failure rule, the
 * variable cache, small records (info, config, incarnation, workers, step
 * log, checkpoints, rewinds) and the online export.  Chunked tensors and the
 * commit live in store_chunk.c, the file checks and migrations in
 * store_schema.c.  See docs/store.md.
 *
 * Invariant: outside a public call the connection is in autocommit mode (no
 * transaction open) and no cached statement holds a cursor.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/mem.h"
#include "core/text.h"
#include "store/store_int.h"

static const char *const stmt_sql[STMT_COUNT] = {
    [STMT_BEGIN] = "BEGIN",
    [STMT_BEGIN_IMMEDIATE] = "BEGIN IMMEDIATE",
    [STMT_COMMIT] = "COMMIT",
    [STMT_ROLLBACK] = "ROLLBACK",
    [STMT_META_GET] = "SELECT value FROM meta WHERE key = ?1",
    [STMT_META_SET] = "INSERT INTO meta(key, value) VALUES (?1, ?2)"
                      " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
    [STMT_DATA_VERSION] = "PRAGMA data_version",
    [STMT_VARS] = "SELECT id, name, dtype, ndim, shape, nbytes, chunk_bytes, trainable,"
                  " created_step FROM variable ORDER BY id",
    [STMT_TENSORS] = "SELECT id, var_id, slot, created_step FROM tensor ORDER BY var_id, slot",
    [STMT_VAR_ONE] = "SELECT id, name, dtype, ndim, shape, nbytes, chunk_bytes, trainable,"
                     " created_step FROM variable WHERE id = ?1",
    /* The versions superseded by one written after ?2 and at or before ?1:
     * once every version superseded at or before ?2 is gone, the only ones
     * a prune to ?1 may remove (a commit looks at the chunks it wrote, not
     * at every chunk that never changes). */
    [STMT_VERSION_SUPERSEDED] = "SELECT o.tensor_id, o.idx, o.step FROM chunk AS n JOIN chunk AS o"
                                " ON o.tensor_id = n.tensor_id AND o.idx = n.idx AND"
                                " o.step < n.step WHERE n.step > ?2 AND n.step <= ?1",
    [STMT_VERSION_DELETE] = "DELETE FROM chunk WHERE tensor_id = ?1 AND idx = ?2 AND step = ?3",
    [STMT_TENSORS_OF] = "SELECT id, var_id, slot, created_step FROM tensor WHERE var_id = ?1"
                        " ORDER BY slot",
    [STMT_VAR_INSERT] = "INSERT INTO variable(name, dtype, ndim, shape, nbytes, chunk_bytes,"
                        " trainable, created_step) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [STMT_TENSOR_INSERT] = "INSERT INTO tensor(var_id, slot, created_step) VALUES (?1, ?2, ?3)",
    [STMT_CKPT_TOP] = "SELECT step FROM checkpoint ORDER BY step DESC LIMIT ?1",
    [STMT_CKPT_ALL] = "SELECT step FROM checkpoint ORDER BY step",
    [STMT_CKPT_HAS] = "SELECT 1 FROM checkpoint WHERE step = ?1",
    [STMT_CKPT_PUT] = "INSERT OR REPLACE INTO checkpoint(step, created_ms) VALUES (?1, ?2)",
    [STMT_CKPT_PRUNE] = "DELETE FROM checkpoint WHERE step < ?1",
    [STMT_CKPT_SPARSE] = "SELECT min(step) FROM checkpoint WHERE step < ?1 GROUP BY step / ?2"
                         " ORDER BY 1",
    [STMT_CKPT_BELOW] = "SELECT step FROM checkpoint WHERE step < ?1 ORDER BY step",
    [STMT_CKPT_DROP] = "DELETE FROM checkpoint WHERE step = ?1",
    [STMT_CHUNK_VERSIONS] = "SELECT step, data_id FROM chunk WHERE tensor_id = ?1 AND idx = ?2"
                            " AND step > ?3 ORDER BY step",
    [STMT_CHUNK_RESTEP] = "UPDATE chunk SET step = ?1, sum = ?5 WHERE tensor_id = ?2"
                          " AND idx = ?3 AND step = ?4",
    [STMT_CHUNK_INSERT] = "INSERT INTO chunk(tensor_id, idx, step, data_id, sum)"
                          " VALUES (?1, ?2, ?3, ?4, ?5)",
    [STMT_CHUNK_SUM] = "UPDATE chunk SET sum = ?4 WHERE tensor_id = ?1 AND idx = ?2 AND step = ?3",
    [STMT_DATA_INSERT] = "INSERT INTO chunk_data(data) VALUES (zeroblob(?1))",
    /* A version older than the oldest retained step m is needed only if it
     * is the newest version <= m of its chunk; every version >= m is at a
     * retained step (commits create checkpoints, rewinds delete later ones). */
    [STMT_VERSION_PRUNE] = "DELETE FROM chunk WHERE step < ?1 AND EXISTS (SELECT 1 FROM chunk"
                           " AS n WHERE n.tensor_id = chunk.tensor_id AND n.idx = chunk.idx"
                           " AND n.step > chunk.step AND n.step <= ?1)",
    /* With sparse history (keep_every_steps) a version is needed when a
     * checkpoint lies in [its step, the next version's step); only the
     * versions between the newest retained step before a dropped checkpoint
     * and the oldest recent one can have lost theirs (store_chunk.c). */
    [STMT_VERSION_PRUNE_IN] = "DELETE FROM chunk WHERE step > ?1 AND step < ?2 AND NOT EXISTS"
                              " (SELECT 1 FROM checkpoint AS k WHERE k.step >= chunk.step AND"
                              " k.step < coalesce((SELECT min(n.step) FROM chunk AS n WHERE"
                              " n.tensor_id = chunk.tensor_id AND n.idx = chunk.idx AND"
                              " n.step > chunk.step), 9223372036854775807))",
    [STMT_CHUNK_AT] = "SELECT data_id, step, sum FROM chunk WHERE tensor_id = ?1 AND idx = ?2"
                      " AND step <= ?3 ORDER BY step DESC LIMIT 1",
    /* issue 24: ?5 the cursor, NULL to keep the stored one. */
    [STMT_WORKER_UPSERT] = "INSERT INTO worker(task_index, local_step, last_seen_ms, incarnation,"
                           " cursor) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(task_index) DO"
                           " UPDATE SET local_step = excluded.local_step,"
                           " last_seen_ms = excluded.last_seen_ms,"
                           " incarnation = excluded.incarnation,"
                           " cursor = coalesce(excluded.cursor, worker.cursor)",
    [STMT_LOG_PUT] = "INSERT OR REPLACE INTO step_log(step, var_id, part, pos, task_index,"
                     " local_step) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [STMT_REPLICAS_PUT] = "INSERT OR REPLACE INTO step_replicas(step, replicas, replicas_open,"
                          " total, min_replicas, live) VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
};

/* ---------------------------------------------------------------------------
 * Errors
 */

sr_err
sr__store_ret(sr_store *st, sr_err rc)
{
    if (rc != SR_OK && st != NULL) {
        snprintf(st->errmsg, sizeof(st->errmsg), "%s", sr_errdetail());
    }
    return rc;
}

sr_err
sr__store_fail(sr_store *st, sr_err e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sr_vfail(e, fmt, ap);
    va_end(ap);
    return sr__store_ret(st, e);
}

static sr_err
map_sqlite(sqlite3 *db, int rc)
{
    switch (rc & 0xff) {
    case SQLITE_FULL:
        return SR_ENOSPC;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return SR_EACCES;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return SR_ECORRUPT;
    case SQLITE_NOMEM:
        return SR_ENOMEM;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return SR_ETIMEDOUT;
    case SQLITE_TOOBIG:
    case SQLITE_CONSTRAINT:
    case SQLITE_RANGE:
        return SR_EINVAL;
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
        if (db != NULL) {
            int e = sqlite3_system_errno(db);
            if (e == ENOSPC || e == EDQUOT) {
                return SR_ENOSPC;
            }
            if (e == EACCES || e == EPERM || e == EROFS) {
                return SR_EACCES;
            }
        }
        return SR_ESTORE;
    default:
        return SR_ESTORE;
    }
}

sr_err
sr__store_sqlerr(sr_store *st, int rc, const char *what)
{
    sqlite3    *db = st ? st->db : NULL;
    const char *msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sr_err      e = map_sqlite(db, rc);

    return sr__store_fail(st, e, "%s: %s: %s (%s, sqlite %d)", st ? st->path : "?", what, msg,
                          sqlite3_errstr(rc), rc);
}

sr_err
sr__store_check(sr_store *st)
{
    if (st == NULL) {
        return sr_fail(SR_EINVAL, "store handle is NULL");
    }
    if (st->sticky != SR_OK) {
        return sr_fail(st->sticky, "%s (handle failed earlier; close and reopen)", st->errmsg);
    }
    sr_clear_error();
    return SR_OK;
}

/* ---------------------------------------------------------------------------
 * Statements and transactions
 */

sr_err
sr__store_stmt(sr_store *st, store_stmt_id id, sqlite3_stmt **out)
{
    sqlite3_stmt *s = st->stmt[id];
    int           rc;

    if (s == NULL) {
        rc = sqlite3_prepare_v3(st->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &s, NULL);
        if (rc != SQLITE_OK) {
            return sr__store_sqlerr(st, rc, "prepare");
        }
        st->stmt[id] = s;
    } else {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
    }
    *out = s;
    return SR_OK;
}

sr_err
sr__store_run(sr_store *st, sqlite3_stmt *s, const char *what)
{
    int rc;

    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        return sr__store_sqlerr(st, rc, what);
    }
    return SR_OK;
}

sr_err
sr__store_exec(sr_store *st, const char *sql)
{
    int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        return sr__store_sqlerr(st, rc, sql);
    }
    return SR_OK;
}

sr_err
sr__store_query_i64(sr_store *st, const char *sql, int64_t *out)
{
    sqlite3_stmt *s = NULL;
    int           rc;
    sr_err        e = SR_OK;

    if ((rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL)) != SQLITE_OK) {
        return sr__store_sqlerr(st, rc, sql);
    }
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *out = sqlite3_column_int64(s, 0);
    } else if (rc == SQLITE_DONE) {
        e = sr__store_fail(st, SR_ECORRUPT, "%s: %s: no row", st->path, sql);
    } else {
        e = sr__store_sqlerr(st, rc, sql);
    }
    sqlite3_finalize(s);
    return e;
}

static sr_err
run_id(sr_store *st, store_stmt_id id, const char *what)
{
    sqlite3_stmt *s;
    sr_err        rc;

    if ((rc = sr__store_stmt(st, id, &s)) != SR_OK) {
        return rc;
    }
    return sr__store_run(st, s, what);
}

sr_err
sr__store_begin_read(sr_store *st)
{
    return run_id(st, STMT_BEGIN, "BEGIN");
}

sr_err
sr__store_begin_write(sr_store *st)
{
    sr_err rc;

    if (st->opts.readonly) {
        return sr__store_fail(st, SR_EACCES, "%s: opened read-only", st->path);
    }
    rc = run_id(st, STMT_BEGIN_IMMEDIATE, "BEGIN IMMEDIATE");
    st->in_write = rc == SR_OK;
    return rc;
}

/* The sticky rule: a COMMIT that failed with an I/O or corruption error may
 * or may not have reached the disk, and a failed ROLLBACK leaves the
 * connection in an unknown transaction state.  Either way nothing this
 * handle believes can be trusted, so it refuses every later call. */
static void
make_sticky(sr_store *st, sr_err rc)
{
    st->sticky = rc != SR_OK ? rc : SR_ESTORE;
    sr__store_cache_drop(st);
}

sr_err
sr__store_end(sr_store *st, sr_err rc)
{
    int    crc;
    sr_err rrc;
    int    wrote = st->in_write;

    st->in_write = 0;
    if (rc == SR_OK) {
        sqlite3_stmt *s;
        if ((rc = sr__store_stmt(st, STMT_COMMIT, &s)) == SR_OK) {
            crc = sqlite3_step(s);
            sqlite3_reset(s);
            if (crc == SQLITE_DONE) {
                return SR_OK;
            }
            rc = sr__store_sqlerr(st, crc, "COMMIT");
            if (wrote && ((crc & 0xff) == SQLITE_IOERR || (crc & 0xff) == SQLITE_CORRUPT)) {
                if (!sqlite3_get_autocommit(st->db)) {
                    sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
                }
                make_sticky(st, rc);
                return rc;
            }
        }
    }
    /* Failure: whatever the transaction did is abandoned. */
    sr__store_cache_drop(st);
    if (sqlite3_get_autocommit(st->db)) {
        return rc; /* SQLite already rolled back (SQLITE_FULL, IOERR ...) */
    }
    char keep[sizeof(st->errmsg)];
    snprintf(keep, sizeof(keep), "%s", sr_errdetail());
    rrc = run_id(st, STMT_ROLLBACK, "ROLLBACK");
    if (rrc != SR_OK || !sqlite3_get_autocommit(st->db)) {
        make_sticky(st, rrc != SR_OK ? rrc : SR_ESTORE);
        return sr__store_fail(st, st->sticky, "%s; then ROLLBACK failed: %s", keep, st->errmsg);
    }
    sr_fail(rc, "%s", keep);
    return sr__store_ret(st, rc);
}

/* ---------------------------------------------------------------------------
 * meta
 */

sr_err
sr__store_meta_i64(sr_store *st, const char *key, int64_t *out)
{
    sqlite3_stmt *s;
    sr_err        rc;
    int           r;

    if ((rc = sr__store_stmt(st, STMT_META_GET, &s)) != SR_OK) {
        return rc;
    }
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    r = sqlite3_step(s);
    if (r == SQLITE_ROW && sqlite3_column_type(s, 0) == SQLITE_INTEGER) {
        *out = sqlite3_column_int64(s, 0);
        sqlite3_reset(s);
        return SR_OK;
    }
    sqlite3_reset(s);
    if (r == SQLITE_ROW || r == SQLITE_DONE) {
        return sr__store_fail(st, SR_ECORRUPT, "%s: meta '%s' is %s", st->path, key,
                              r == SQLITE_ROW ? "not an integer" : "missing");
    }
    return sr__store_sqlerr(st, r, "read meta");
}

static sr_err
meta_get_text(sr_store *st, const char *key, char **out)
{
    sqlite3_stmt *s;
    sr_err        rc;
    int           r;
    const char   *t = "";
    char         *copy;

    if ((rc = sr__store_stmt(st, STMT_META_GET, &s)) != SR_OK) {
        return rc;
    }
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    r = sqlite3_step(s);
    if (r == SQLITE_ROW) {
        t = (const char *)sqlite3_column_text(s, 0);
        t = t ? t : "";
    } else if (r != SQLITE_DONE) {
        sqlite3_reset(s);
        return sr__store_sqlerr(st, r, "read meta");
    }
    copy = strdup(t);
    sqlite3_reset(s);
    if (copy == NULL) {
        return sr__store_fail(st, SR_ENOMEM, "meta '%s'", key);
    }
    *out = copy;
    return SR_OK;
}

sr_err
sr__store_meta_set_i64(sr_store *st, const char *key, int64_t v)
{
    sqlite3_stmt *s;
    sr_err        rc;

    if ((rc = sr__store_stmt(st, STMT_META_SET, &s)) != SR_OK) {
        return rc;
    }
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, v);
    return sr__store_run(st, s, "write meta");
}

/* ---------------------------------------------------------------------------
 * Variable cache
 */

void
sr__store_cache_drop(sr_store *st)
{
    for (size_t i = 0; i < st->ntensors; i++) {
        free(st->tensors[i].slot);
    }
    free(st->tensors);
    free(st->vars);
    st->tensors = NULL;
    st->vars = NULL;
    st->ntensors = 0;
    st->nvars = 0;
    st->cap_vars = 0;
    st->cap_tensors = 0;
    st->cache_ok = 0;
    st->pruned_to = -1;
}

/* "[2,3]" -> ndim 2, shape {2, 3}. */
int
sr__store_parse_shape(const char *text, int *ndim, int64_t *shape)
{
    const char *p = text;
    char       *end;
    int         n = 0;

    if (p == NULL || *p++ != '[') {
        return -1;
    }
    if (*p == ']') {
        *ndim = 0;
        return p[1] == '\0' ? 0 : -1;
    }
    for (;;) {
        if (n >= SR_MAX_NDIM) {
            return -1;
        }
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno != 0 || end == p || v < 0) {
            return -1;
        }
        shape[n++] = v;
        p = end;
        if (*p == ']') {
            break;
        }
        if (*p++ != ',') {
            return -1;
        }
    }
    *ndim = n;
    return p[1] == '\0' ? 0 : -1;
}

static sr_err
var_from_row(sr_store *st, sqlite3_stmt *s, store_var *out)
{
    sr_store_var *v = &out->v;
    const char   *name = (const char *)sqlite3_column_text(s, 1);
    const char   *shape = (const char *)sqlite3_column_text(s, 4);
    uint64_t      nbytes;
    int64_t       cb = sqlite3_column_int64(s, 6);

    memset(out, 0, sizeof(*out));
    v->id = sqlite3_column_int64(s, 0);
    v->dtype = sqlite3_column_int(s, 2);
    v->nbytes = (uint64_t)sqlite3_column_int64(s, 5);
    v->trainable = sqlite3_column_int(s, 7);
    v->created_step = sqlite3_column_int64(s, 8);
    if (name == NULL || strlen(name) > SR_STORE_MAX_NAME ||
        sr__store_parse_shape(shape, &v->ndim, v->shape) != 0 ||
        sqlite3_column_int(s, 3) != v->ndim ||
        sr_shape_bytes(v->dtype, v->ndim, v->shape, &nbytes) != SR_OK || nbytes != v->nbytes ||
        cb <= 0 || cb > (int64_t)SR_STORE_MAX_CHUNK_BYTES ||
        cb % (int64_t)sr_dtype_size(v->dtype) != 0) {
        return sr__store_fail(st, SR_ECORRUPT, "%s: variable id %lld has a bad row", st->path,
                              (long long)v->id);
    }
    snprintf(v->name, sizeof(v->name), "%s", name);
    v->chunk_bytes = (uint32_t)cb;
    out->nchunks = (v->nbytes + (uint64_t)cb - 1) / (uint64_t)cb;
    return SR_OK;
}

/* Append the rows of vs (variables, by id) and ts (tensors, by (var_id,
 * slot)) to the cache; both are reset. */
static sr_err
cache_append(sr_store *st, sqlite3_stmt *vs, sqlite3_stmt *ts)
{
    int r;

    while ((r = sqlite3_step(vs)) == SQLITE_ROW) {
        store_var *p = sr_grow_array(st->vars, &st->cap_vars, st->nvars + 1, sizeof(*p));
        sr_err     rc;
        if (p == NULL) {
            sqlite3_reset(vs);
            return sr__store_fail(st, SR_ENOMEM, "variable cache");
        }
        st->vars = p;
        if ((rc = var_from_row(st, vs, &st->vars[st->nvars])) != SR_OK) {
            sqlite3_reset(vs);
            return rc;
        }
        st->nvars++;
    }
    sqlite3_reset(vs);
    if (r != SQLITE_DONE) {
        return sr__store_sqlerr(st, r, "read variables");
    }
    while ((r = sqlite3_step(ts)) == SQLITE_ROW) {
        const char   *slot = (const char *)sqlite3_column_text(ts, 2);
        store_tensor *p =
            sr_grow_array(st->tensors, &st->cap_tensors, st->ntensors + 1, sizeof(*p));
        if (p == NULL) {
            sqlite3_reset(ts);
            return sr__store_fail(st, SR_ENOMEM, "tensor cache");
        }
        st->tensors = p;
        store_tensor *t = &st->tensors[st->ntensors];
        t->id = sqlite3_column_int64(ts, 0);
        t->var_id = sqlite3_column_int64(ts, 1);
        t->created_step = sqlite3_column_int64(ts, 3);
        if ((t->slot = strdup(slot ? slot : "")) == NULL) {
            sqlite3_reset(ts);
            return sr__store_fail(st, SR_ENOMEM, "tensor cache");
        }
        st->ntensors++;
    }
    sqlite3_reset(ts);
    if (r != SQLITE_DONE) {
        return sr__store_sqlerr(st, r, "read tensors");
    }
    return SR_OK;
}

static sr_err
cache_fill(sr_store *st)
{
    sqlite3_stmt *vs, *ts;
    sr_err        rc;

    if ((rc = sr__store_stmt(st, STMT_VARS, &vs)) != SR_OK ||
        (rc = sr__store_stmt(st, STMT_TENSORS, &ts)) != SR_OK) {
        return rc;
    }
    return cache_append(st, vs, ts);
}

void
sr__store_cache_add_var(sr_store *st, int64_t var_id)
{
    sqlite3_stmt *vs, *ts;
    size_t        nv = st->nvars;

    /* Appended, the cache stays sorted only for the largest id (and no
     * other connection may have written since it was read). */
    if (!st->cache_ok || (nv > 0 && st->vars[nv - 1].v.id >= var_id) ||
        (st->ntensors > 0 && st->tensors[st->ntensors - 1].var_id >= var_id) ||
        sr__store_stmt(st, STMT_VAR_ONE, &vs) != SR_OK ||
        sr__store_stmt(st, STMT_TENSORS_OF, &ts) != SR_OK) {
        sr__store_cache_drop(st);
        return;
    }
    sqlite3_bind_int64(vs, 1, var_id);
    sqlite3_bind_int64(ts, 1, var_id);
    if (cache_append(st, vs, ts) != SR_OK || st->nvars != nv + 1) {
        sr__store_cache_drop(st);
    }
}

sr_err
sr__store_cache_load(sr_store *st)
{
    sqlite3_stmt *s;
    sr_err        rc;
    int64_t       dv;
    int           r;

    if ((rc = sr__store_stmt(st, STMT_DATA_VERSION, &s)) != SR_OK) {
        return rc;
    }
    r = sqlite3_step(s);
    dv = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    if (r != SQLITE_ROW) {
        return sr__store_sqlerr(st, r, "PRAGMA data_version");
    }
    if (st->cache_ok && dv == st->cache_data_version) {
        return SR_OK;
    }
    sr__store_cache_drop(st);
    if ((rc = cache_fill(st)) != SR_OK) {
        sr__store_cache_drop(st);
        return rc;
    }
    st->cache_ok = 1;
    st->cache_data_version = dv;
    return SR_OK;
}

const store_var *
sr__store_var(const sr_store *st, int64_t var_id)
{
    size_t lo = 0, hi = st->nvars;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (st->vars[mid].v.id == var_id) {
            return &st->vars[mid];
        }
        if (st->vars[mid].v.id < var_id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

const store_tensor *
sr__store_tensor(const sr_store *st, int64_t var_id, const char *slot)
{
    size_t lo = 0, hi = st->ntensors;

    /* The cache is ordered by var_id, then slot (SQLite's BINARY collation
     * is memcmp order, as strcmp). */
    while (lo < hi) {
        size_t              mid = lo + (hi - lo) / 2;
        const store_tensor *t = &st->tensors[mid];
        int c = t->var_id < var_id ? -1 : t->var_id > var_id ? 1 : strcmp(t->slot, slot);
        if (c == 0) {
            return t;
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

sr_err
sr__store_checkpoints(sr_store *st, int64_t **out, size_t *n)
{
    sqlite3_stmt *s;
    sr_err        rc;
    int           r;
    int64_t      *a = NULL;
    size_t        cnt = 0, cap = 0;

    if ((rc = sr__store_stmt(st, STMT_CKPT_ALL, &s)) != SR_OK) {
        return rc;
    }
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        if (cnt == cap) {
            size_t   ncap = cap ? cap * 2 : 8;
            int64_t *p = realloc(a, ncap * sizeof(*p));
            if (p == NULL) {
                sqlite3_reset(s);
                free(a);
                return sr__store_fail(st, SR_ENOMEM, "checkpoint list");
            }
            a = p;
            cap = ncap;
        }
        a[cnt++] = sqlite3_column_int64(s, 0);
    }
    sqlite3_reset(s);
    if (r != SQLITE_DONE) {
        free(a);
        return sr__store_sqlerr(st, r, "read checkpoints");
    }
    *out = a;
    *n = cnt;
    return SR_OK;
}

/* ---------------------------------------------------------------------------
 * Files
 */

void
sr__store_unlink_all(const char *path)
{
    static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
    char                     p[4096];

    for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
        if (snprintf(p, sizeof(p), "%s%s", path, sfx[i]) < (int)sizeof(p)) {
            unlink(p);
        }
    }
}

sr_err
sr__store_dirname(const char *path, char *dir, size_t len)
{
    const char *slash = strrchr(path, '/');

    if (slash == NULL) {
        return sr_snprintf(dir, len, ".");
    }
    if (slash == path) {
        return sr_snprintf(dir, len, "/");
    }
    return sr_snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

sr_err
sr__store_sync_dir(const char *path)
{
    char dir[4096];
    int  fd;

    if (sr__store_dirname(path, dir, sizeof(dir)) != SR_OK) {
        return SR_EINVAL;
    }
    if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        return sr_fail(SR_ESTORE, "%s: open directory: %s", dir, strerror(errno));
    }
    if (fsync(fd) != 0 && errno != EINVAL) {
        int e = errno;
        close(fd);
        return sr_fail(SR_ESTORE, "%s: fsync directory: %s", dir, strerror(e));
    }
    close(fd);
    return SR_OK;
}

/* ---------------------------------------------------------------------------
 * Open / close
 */

static sr_err
fill_opts(const sr_store_opts *in, sr_store_opts *o)
{
    if (in != NULL) {
        *o = *in;
    } else {
        memset(o, 0, sizeof(*o));
    }
    if (o->sync != SR_STORE_SYNC_FULL && o->sync != SR_STORE_SYNC_NORMAL) {
        return sr_fail(SR_EINVAL, "sr_store_open: sync %d is not FULL (0) or NORMAL (1)", o->sync);
    }
    if (o->busy_timeout_ms < 0 || o->keep_checkpoints < 0 || o->max_page_count < 0 ||
        o->wal_checkpoint_bytes < 0 || o->keep_every_steps < SR_STORE_KEEP_EVERY_OFF) {
        return sr_fail(SR_EINVAL,
                       "sr_store_open: negative busy_timeout_ms, keep_checkpoints, "
                       "max_page_count or wal_checkpoint_bytes, or keep_every_steps below -1");
    }
    if (o->page_size == 0) {
        o->page_size = SR_STORE_PAGE_SIZE;
    }
    if (o->page_size < 512 || o->page_size > 65536 || (o->page_size & (o->page_size - 1)) != 0) {
        return sr_fail(SR_EINVAL, "sr_store_open: page_size %d is not a power of two in 512..65536",
                       o->page_size);
    }
    if (o->busy_timeout_ms == 0) {
        o->busy_timeout_ms = 5000;
    }
    if (o->keep_checkpoints == 0) {
        o->keep_checkpoints = 3;
    }
    if (o->chunk_bytes == 0) {
        o->chunk_bytes = SR_STORE_DEFAULT_CHUNK_BYTES;
    }
    if (o->chunk_bytes > SR_STORE_MAX_CHUNK_BYTES) {
        return sr_fail(SR_EINVAL, "sr_store_open: chunk_bytes %u > %u", o->chunk_bytes,
                       SR_STORE_MAX_CHUNK_BYTES);
    }
    if (o->readonly) {
        o->create = 0;
    }
    return SR_OK;
}

static void
store_free(sr_store *st)
{
    for (int i = 0; i < STMT_COUNT; i++) {
        sqlite3_finalize(st->stmt[i]);
        st->stmt[i] = NULL;
    }
    sr__store_ckpt_stop(st);
    sr__store_mark_close(st);
    sqlite3_close_v2(st->db);
    st->db = NULL;
    sr__store_cache_drop(st);
    free(st->scratch);
    free(st->pend);
    free(st->keep);
    free(st->keys);
    free(st->sumbuf);
    free(st->path);
    free(st);
}

/* After a refused rollback: an empty -wal and a -shm that SQLite created
 * while looking at the store go again, so its files are as they were (a
 * read-write open: the coordinator holds PATH-lock, nobody else is in). */
static void
remove_new_companions(const char *path, int64_t had_wal, int had_shm)
{
    char        p[4096 + 8];
    struct stat sb;

    if (had_wal < 0 && snprintf(p, sizeof(p), "%s-wal", path) < (int)sizeof(p) &&
        stat(p, &sb) == 0 && sb.st_size == 0) {
        unlink(p);
    }
    if (!had_shm && snprintf(p, sizeof(p), "%s-shm", path) < (int)sizeof(p)) {
        unlink(p);
    }
}

/* sr_store_open; `marked` = 1: a read-write handle keeps the store's mark
 * (store_mark.c); an export's copy does not. */
static sr_err
store_open(const char *path, const sr_store_opts *opts, int marked, sr_store **out)
{
    sr_store *st = NULL;
    sr_err    rc;
    int       created = 0, empty = 0, r, flags;

    if (path == NULL || *path == '\0' || out == NULL) {
        return sr_fail(SR_EINVAL, "sr_store_open: NULL or empty argument");
    }
    if ((st = calloc(1, sizeof(*st))) == NULL || (st->path = strdup(path)) == NULL) {
        free(st);
        return sr_fail(SR_ENOMEM, "sr_store_open: %zu bytes", sizeof(*st));
    }
    st->pruned_to = -1; /* the first prune looks at every version */
    if ((rc = fill_opts(opts, &st->opts)) != SR_OK) {
        goto fail;
    }
    st->marked = marked && !st->opts.readonly;
    st->mark_fd = -1;
    st->mark.step = -1;
    st->rb.mark_step = -1;
    st->keep_cap = (size_t)st->opts.keep_checkpoints;
    if ((st->keep = calloc(st->keep_cap, sizeof(*st->keep))) == NULL) {
        rc = sr_fail(SR_ENOMEM, "sr_store_open: keep_checkpoints %d", st->opts.keep_checkpoints);
        goto fail;
    }
    if ((rc = sr__store_precheck(st, &created, &empty)) != SR_OK) {
        goto fail;
    }
    flags = st->opts.readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
    if ((r = sr__store_vfs_init()) != SQLITE_OK) {
        rc = sr_fail(SR_ESTORE, "%s: cannot register the SQLite VFS: %s", path, sqlite3_errstr(r));
        goto fail;
    }
    r = sqlite3_open_v2(path, &st->db, flags | SQLITE_OPEN_NOMUTEX, SR_STORE_VFS);
    if (r != SQLITE_OK) {
        rc = sr__store_sqlerr(st, r, "open");
        goto fail;
    }
    sqlite3_extended_result_codes(st->db, 1);
    sqlite3_busy_timeout(st->db, st->opts.busy_timeout_ms);
    if ((rc = sr__store_setup(st, empty)) != SR_OK) {
        goto fail;
    }
    st->created = created;
    if (st->marked && (rc = sr__store_mark_open(st)) != SR_OK) {
        goto fail;
    }
    if (created && (rc = sr__store_sync_dir(path)) != SR_OK) {
        goto fail;
    }
    sr_clear_error();
    *out = st;
    return SR_OK;
fail:
    /* A refused store keeps its -wal as found (SQLite would otherwise copy
     * what it could replay into the file and delete the rest on close). */
    if (st->db != NULL) {
        sqlite3_db_config(st->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
    }
    int64_t had_wal = st->wal_size_at_open;
    int     had_shm = st->shm_at_open;
    int     new_mark = st->mark_created;
    store_free(st);
    if (created && new_mark) {
        char m[4096 + 8];
        if (snprintf(m, sizeof(m), "%s-mark", path) < (int)sizeof(m)) {
            unlink(m); /* the store this open created is gone: so is its mark */
        }
    }
    if (!created && rc == SR_EROLLBACK) {
        remove_new_companions(path, had_wal, had_shm);
    }
    if (created) {
        sr__store_unlink_all(path);
    }
    return rc;
}

sr_err
sr_store_open(const char *path, const sr_store_opts *opts, sr_store **out)
{
    return store_open(path, opts, 1, out);
}

void
sr_store_close(sr_store *st)
{
    if (st == NULL) {
        return;
    }
    store_free(st);
}

void
sr_store_set_heap_limit(int64_t bytes)
{
    sqlite3_soft_heap_limit64(bytes);
}

const char *
sr_store_errmsg(const sr_store *st)
{
    return st != NULL ? st->errmsg : "";
}

/* ---------------------------------------------------------------------------
 * Small records
 */

static sr_err
record_incarnation(sr_store *st, int64_t inc)
{
    sqlite3_stmt *s = NULL;
    int64_t       g = 0;
    sr_err        rc;
    int           r;

    if ((rc = sr__store_meta_i64(st, "global_step", &g)) != SR_OK) {
        return rc;
    }
    r = sqlite3_prepare_v2(st->db,
                           "INSERT OR REPLACE INTO incarnation(incarnation,"
                           " restored_step, started_ms) VALUES (?1, ?2, ?3)",
                           -1, &s, NULL);
    if (r != SQLITE_OK) {
        return sr__store_sqlerr(st, r, "record incarnation");
    }
    sqlite3_bind_int64(s, 1, inc);
    sqlite3_bind_int64(s, 2, g);
    sqlite3_bind_int64(s, 3, sr_clock_wall_ms());
    rc = sr__store_run(st, s, "record incarnation");
    sqlite3_finalize(s);
    return rc;
}

/* The accepted rollback of this handle's open, as incarnation inc's. */
static sr_err
record_rollback(sr_store *st, int64_t inc)
{
    sqlite3_stmt *s = NULL;
    sr_err        rc;
    int           r;

    r = sqlite3_prepare_v2(st->db,
                           "INSERT INTO rollback(incarnation, from_step, to_step, at_ms, cause)"
                           " VALUES (?1, ?2, ?3, ?4, ?5)",
                           -1, &s, NULL);
    if (r != SQLITE_OK) {
        return sr__store_sqlerr(st, r, "record rollback");
    }
    sqlite3_bind_int64(s, 1, inc);
    sqlite3_bind_int64(s, 2, st->rb.mark_step);
    sqlite3_bind_int64(s, 3, st->rb.store_step);
    sqlite3_bind_int64(s, 4, sr_clock_wall_ms());
    sqlite3_bind_text(s, 5, st->rb.cause, -1, SQLITE_STATIC);
    rc = sr__store_run(st, s, "record rollback");
    sqlite3_finalize(s);
    return rc;
}

sr_err
sr_store_new_incarnation(sr_store *st, uint64_t *out)
{
    sr_err  rc;
    int64_t inc = 0;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if (out == NULL) {
        return sr__store_fail(st, SR_EINVAL, "sr_store_new_incarnation: out is NULL");
    }
    if ((rc = sr__store_begin_write(st)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    rc = sr__store_meta_i64(st, "incarnation", &inc);
    if (rc == SR_OK && (inc < 0 || inc == INT64_MAX)) {
        rc = sr__store_fail(st, SR_ECORRUPT, "%s: incarnation %lld cannot be incremented", st->path,
                            (long long)inc);
    }
    if (rc == SR_OK) {
        inc++;
        rc = sr__store_meta_set_i64(st, "incarnation", inc);
    }
    if (rc == SR_OK) {
        rc = record_incarnation(st, inc);
    }
    int recording = st->rb.accepted && !st->rb.recorded;
    if (rc == SR_OK && recording) {
        rc = record_rollback(st, inc);
    }
    if ((rc = sr__store_end(st, rc)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    if (recording) {
        /* The loss is on record: the mark now vouches for the store as it is. */
        st->rb.recorded = 1;
        sr__store_mark_reset(st, st->rb.store_step, st->rb.store_ready, (uint64_t)inc);
    } else {
        sr__store_mark_reset(st, st->mark.step, st->mark.ready, (uint64_t)inc);
    }
    *out = (uint64_t)inc;
    return SR_OK;
}

sr_err
sr_store_get_info(sr_store *st, sr_store_info *out)
{
    sr_store_info info;
    sr_err        rc;
    int64_t       inc = 0, ready = 0, ver = 0;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if (out == NULL) {
        return sr__store_fail(st, SR_EINVAL, "sr_store_get_info: out is NULL");
    }
    memset(&info, 0, sizeof(info));
    if ((rc = sr__store_begin_read(st)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    if ((rc = sr__store_meta_i64(st, "global_step", &info.global_step)) == SR_OK &&
        (rc = sr__store_meta_i64(st, "incarnation", &inc)) == SR_OK &&
        (rc = sr__store_meta_i64(st, "model_ready", &ready)) == SR_OK &&
        (rc = sr__store_query_i64(st, "PRAGMA user_version", &ver)) == SR_OK &&
        (rc = sr__store_query_i64(st, "SELECT count(*) FROM variable", &info.nvariables)) ==
            SR_OK &&
        (rc = sr__store_query_i64(st, "SELECT count(*) FROM checkpoint", &info.ncheckpoints)) ==
            SR_OK) {
        rc = sr__store_keep_every(st, &info.keep_every_steps);
    }
    if ((rc = sr__store_end(st, rc)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    info.incarnation = (uint64_t)inc;
    info.model_ready = ready != 0;
    info.schema_version = (int)ver;
    *out = info;
    return SR_OK;
}

sr_err
sr_store_set_config(sr_store *st, const char *json)
{
    sqlite3_stmt *s;
    sr_err        rc;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if (json == NULL) {
        return sr__store_fail(st, SR_EINVAL, "sr_store_set_config: json is NULL");
    }
    if ((rc = sr__store_begin_write(st)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    if ((rc = sr__store_stmt(st, STMT_META_SET, &s)) == SR_OK) {
        sqlite3_bind_text(s, 1, "config", -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, json, -1, SQLITE_STATIC);
        rc = sr__store_run(st, s, "write config");
    }
    if (rc == SR_OK) {
        int r = sqlite3_prepare_v2(st->db,
                                   "UPDATE incarnation SET config = ?1 WHERE"
                                   " incarnation = (SELECT max(incarnation) FROM incarnation)",
                                   -1, &s, NULL);
        if (r != SQLITE_OK) {
            rc = sr__store_sqlerr(st, r, "record config");
        } else {
            sqlite3_bind_text(s, 1, json, -1, SQLITE_STATIC);
            rc = sr__store_run(st, s, "record config");
            sqlite3_finalize(s);
        }
    }
    return sr__store_ret(st, sr__store_end(st, rc));
}

sr_err
sr_store_get_config(sr_store *st, char **out)
{
    sr_err rc;
    char  *text = NULL;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if (out == NULL) {
        return sr__store_fail(st, SR_EINVAL, "sr_store_get_config: out is NULL");
    }
    if ((rc = sr__store_begin_read(st)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    rc = meta_get_text(st, "config", &text);
    if ((rc = sr__store_end(st, rc)) != SR_OK) {
        free(text);
        return sr__store_ret(st, rc);
    }
    *out = text;
    return SR_OK;
}

/* Run `fn` inside a read transaction with a fresh variable cache. */
static sr_err
with_cache(sr_store *st)
{
    sr_err rc;

    if ((rc = sr__store_begin_read(st)) != SR_OK) {
        return rc;
    }
    rc = sr__store_cache_load(st);
    return sr__store_end(st, rc);
}

sr_err
sr_store_list_vars(sr_store *st, sr_store_var **out, size_t *n)
{
    sr_store_var *a;
    sr_err        rc;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if (out == NULL || n == NULL) {
        return sr__store_fail(st, SR_EINVAL, "sr_store_list_vars: NULL argument");
    }
    if ((rc = with_cache(st)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    if ((a = calloc(st->nvars ? st->nvars : 1, sizeof(*a))) == NULL) {
        return sr__store_fail(st, SR_ENOMEM, "sr_store_list_vars");
    }
    for (size_t i = 0; i < st->nvars; i++) {
        a[i] = st->vars[i].v;
    }
    *out = a;
    *n = st->nvars;
    return SR_OK;
}

sr_err
sr_store_find_var(sr_store *st, const char *name, sr_store_var *out)
{
    sr_err rc;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if (name == NULL || out == NULL) {
        return sr__store_fail(st, SR_EINVAL, "sr_store_find_var: NULL argument");
    }
    if ((rc = with_cache(st)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    for (size_t i = 0; i < st->nvars; i++) {
        if (strcmp(st->vars[i].v.name, name) == 0) {
            *out = st->vars[i].v;
            return SR_OK;
        }
    }
    return sr__store_fail(st, SR_ENOENT, "%s: no variable '%s'", st->path, SR_ESC(name));
}

sr_err
sr_store_list_slots(sr_store *st, int64_t var_id, char ***out, size_t *n)
{
    sr_err rc;
    char **names;
    size_t cnt = 0;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if (out == NULL || n == NULL) {
        return sr__store_fail(st, SR_EINVAL, "sr_store_list_slots: NULL argument");
    }
    if ((rc = with_cache(st)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    if (sr__store_var(st, var_id) == NULL) {
        return sr__store_fail(st, SR_ENOENT, "%s: no variable with id %lld", st->path,
                              (long long)var_id);
    }
    if ((names = calloc(st->ntensors ? st->ntensors : 1, sizeof(*names))) == NULL) {
        return sr__store_fail(st, SR_ENOMEM, "sr_store_list_slots");
    }
    for (size_t i = 0; i < st->ntensors; i++) {
        if (st->tensors[i].var_id != var_id || st->tensors[i].slot[0] == '\0') {
            continue;
        }
        if ((names[cnt] = strdup(st->tensors[i].slot)) == NULL) {
            sr_store_free_names(names, cnt);
            return sr__store_fail(st, SR_ENOMEM, "sr_store_list_slots");
        }
        cnt++;
    }
    *out = names;
    *n = cnt;
    return SR_OK;
}

void
sr_store_free_names(char **names, size_t n)
{
    if (names == NULL) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        free(names[i]);
    }
    free(names);
}

static sr_err
var_meta(sr_store *st, int64_t var_id, const store_var **out)
{
    sr_err rc;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if ((rc = with_cache(st)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    if ((*out = sr__store_var(st, var_id)) == NULL) {
        return sr__store_fail(st, SR_ENOENT, "%s: no variable with id %lld", st->path,
                              (long long)var_id);
    }
    return SR_OK;
}

sr_err
sr_store_nchunks(sr_store *st, int64_t var_id, size_t *out)
{
    const store_var *v;
    sr_err           rc;

    if (out == NULL) {
        return sr__store_fail(st, SR_EINVAL, "sr_store_nchunks: out is NULL");
    }
    if ((rc = var_meta(st, var_id, &v)) != SR_OK) {
        return rc;
    }
    *out = (size_t)v->nchunks;
    return SR_OK;
}

sr_err
sr_store_chunk_bytes(sr_store *st, int64_t var_id, uint64_t *out)
{
    const store_var *v;
    sr_err           rc;

    if (out == NULL) {
        return sr__store_fail(st, SR_EINVAL, "sr_store_chunk_bytes: out is NULL");
    }
    if ((rc = var_meta(st, var_id, &v)) != SR_OK) {
        return rc;
    }
    *out = v->v.chunk_bytes;
    return SR_OK;
}

/* Collect rows of an ad-hoc query (not a hot path) into a malloc'd array of
 * `size`-byte records filled by `row`. */
static sr_err
collect(sr_store *st, const char *sql, const int64_t *binds, int nbinds, size_t size,
        void (*row)(sqlite3_stmt *s, void *rec), void **out, size_t *n)
{
    sqlite3_stmt *s = NULL;
    char         *a = NULL;
    size_t        cnt = 0, cap = 0;
    sr_err        rc = SR_OK;
    int           r;

    if ((r = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL)) != SQLITE_OK) {
        return sr__store_sqlerr(st, r, "prepare");
    }
    for (int i = 0; i < nbinds; i++) {
        sqlite3_bind_int64(s, i + 1, binds[i]);
    }
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        if (cnt == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            char  *p = realloc(a, ncap * size);
            if (p == NULL) {
                rc = sr__store_fail(st, SR_ENOMEM, "%zu records", ncap);
                goto fail;
            }
            a = p;
            cap = ncap;
        }
        memset(a + cnt * size, 0, size);
        row(s, a + cnt * size);
        cnt++;
    }
    if (r != SQLITE_DONE) {
        rc = sr__store_sqlerr(st, r, "query");
        goto fail;
    }
    sqlite3_finalize(s);
    if (a == NULL && (a = malloc(size)) == NULL) {
        return sr__store_fail(st, SR_ENOMEM, "empty list");
    }
    *out = a;
    *n = cnt;
    return SR_OK;
fail:
    sqlite3_finalize(s);
    free(a);
    return rc;
}

static sr_err
collect_tx(sr_store *st, const char *sql, const int64_t *binds, int nbinds, size_t size,
           void (*row)(sqlite3_stmt *s, void *rec), void **out, size_t *n)
{
    sr_err rc;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if (out == NULL || n == NULL) {
        return sr__store_fail(st, SR_EINVAL, "NULL output argument");
    }
    if ((rc = sr__store_begin_read(st)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    rc = collect(st, sql, binds, nbinds, size, row, out, n);
    if (rc != SR_OK) {
        return sr__store_ret(st, sr__store_end(st, rc));
    }
    if ((rc = sr__store_end(st, rc)) != SR_OK) {
        free(*out);
        *out = NULL;
        return sr__store_ret(st, rc);
    }
    return SR_OK;
}

sr_err
sr__store_collect_tx(sr_store *st, const char *sql, const int64_t *binds, int nbinds, size_t size,
                     void (*row)(sqlite3_stmt *s, void *rec), void **out, size_t *n)
{
    return collect_tx(st, sql, binds, nbinds, size, row, out, n);
}

static void
worker_row(sqlite3_stmt *s, void *rec)
{
    sr_store_worker *w = rec;
    w->task_index = sqlite3_column_int(s, 0);
    w->local_step = sqlite3_column_int64(s, 1);
    w->last_seen_ms = sqlite3_column_int64(s, 2);
    w->incarnation = (uint64_t)sqlite3_column_int64(s, 3);
    /* issue 24: cursor */
    if (sqlite3_column_type(s, 4) != SQLITE_NULL) {
        const void *b = sqlite3_column_blob(s, 4);
        int         n = sqlite3_column_bytes(s, 4);
        if (n >= 0 && n <= SR_STORE_CURSOR_MAX) { /* longer: not written by us; ignored */
            w->has_cursor = 1;
            w->cursor_len = (uint32_t)n;
            if (n > 0 && b != NULL) {
                memcpy(w->cursor, b, (size_t)n);
            }
        }
    }
}

sr_err
sr_store_list_workers(sr_store *st, sr_store_worker **out, size_t *n)
{
    return collect_tx(st,
                      "SELECT task_index, local_step, last_seen_ms, incarnation, cursor"
                      " FROM worker ORDER BY task_index",
                      NULL, 0, sizeof(**out), worker_row, (void **)out, n);
}

static void
step_row(sqlite3_stmt *s, void *rec)
{
    *(int64_t *)rec = sqlite3_column_int64(s, 0);
}

sr_err
sr_store_list_checkpoints(sr_store *st, int64_t **out, size_t *n)
{
    return collect_tx(st, "SELECT step FROM checkpoint ORDER BY step", NULL, 0, sizeof(**out),
                      step_row, (void **)out, n);
}

static void
rewind_row(sqlite3_stmt *s, void *rec)
{
    sr_store_rewind_rec *r = rec;
    r->incarnation = (uint64_t)sqlite3_column_int64(s, 0);
    r->from_step = sqlite3_column_int64(s, 1);
    r->to_step = sqlite3_column_int64(s, 2);
    r->at_ms = sqlite3_column_int64(s, 3);
}

sr_err
sr_store_list_rewinds(sr_store *st, sr_store_rewind_rec **out, size_t *n)
{
    return collect_tx(st, "SELECT incarnation, from_step, to_step, at_ms FROM rewind ORDER BY id",
                      NULL, 0, sizeof(**out), rewind_row, (void **)out, n);
}

static void
rollback_row(sqlite3_stmt *s, void *rec)
{
    sr_store_rollback_rec *r = rec;
    const char            *c = (const char *)sqlite3_column_text(s, 4);
    r->incarnation = (uint64_t)sqlite3_column_int64(s, 0);
    r->from_step = sqlite3_column_int64(s, 1);
    r->to_step = sqlite3_column_int64(s, 2);
    r->at_ms = sqlite3_column_int64(s, 3);
    snprintf(r->cause, sizeof(r->cause), "%s", c != NULL ? c : "");
}

sr_err
sr_store_list_rollbacks(sr_store *st, sr_store_rollback_rec **out, size_t *n)
{
    return collect_tx(st,
                      "SELECT incarnation, from_step, to_step, at_ms, cause FROM rollback"
                      " ORDER BY id",
                      NULL, 0, sizeof(**out), rollback_row, (void **)out, n);
}

uint64_t
sr__store_wal_bytes(const sr_store *st)
{
    int64_t frames = sr__store_ckpt_wal_frames(st);

    /* The WAL's 32-byte header, then frames of a 24-byte header + a page. */
    return frames > 0 ? 32u + (uint64_t)frames * (24u + (uint64_t)st->page_size) : 0;
}

/* Incarnations: records and their config strings in one block, so that a
 * plain free() releases everything. */
static sr_err
incarnations_tx(sr_store *st, sr_store_incarnation **out, size_t *n)
{
    sqlite3_stmt *s = NULL;
    int64_t       cnt = 0, text = 0;
    size_t        i = 0, off;
    char         *block = NULL;
    sr_err        rc;
    int           r;

    if ((rc = sr__store_query_i64(st, "SELECT count(*) FROM incarnation", &cnt)) != SR_OK ||
        (rc = sr__store_query_i64(st,
                                  "SELECT coalesce(sum(length(CAST(config AS BLOB))), 0)"
                                  " FROM incarnation",
                                  &text)) != SR_OK) {
        return rc;
    }
    off = (size_t)cnt * sizeof(sr_store_incarnation);
    size_t total = off + (size_t)text + (size_t)cnt + 1;
    if ((block = malloc(total)) == NULL) {
        return sr__store_fail(st, SR_ENOMEM, "%lld incarnations", (long long)cnt);
    }
    r = sqlite3_prepare_v2(st->db,
                           "SELECT incarnation, restored_step, started_ms, config FROM"
                           " incarnation ORDER BY incarnation",
                           -1, &s, NULL);
    if (r != SQLITE_OK) {
        free(block);
        return sr__store_sqlerr(st, r, "read incarnations");
    }
    while ((r = sqlite3_step(s)) == SQLITE_ROW && i < (size_t)cnt) {
        sr_store_incarnation *e = (sr_store_incarnation *)(void *)block + i++;
        const char           *c = (const char *)sqlite3_column_text(s, 3);
        size_t                len = (size_t)sqlite3_column_bytes(s, 3);
        e->incarnation = (uint64_t)sqlite3_column_int64(s, 0);
        e->restored_step = sqlite3_column_int64(s, 1);
        e->started_ms = sqlite3_column_int64(s, 2);
        if (c != NULL && len + 1 > total - off) {
            /* Sized from the stored bytes; text must not be longer (UTF-8
             * stores only, checked at open, but never trust it). */
            sqlite3_finalize(s);
            free(block);
            return sr__store_fail(st, SR_ECORRUPT, "%s: incarnation config longer than stored",
                                  st->path);
        }
        memcpy(block + off, c ? c : "", c ? len : 0);
        block[off + (c ? len : 0)] = '\0';
        e->config = block + off;
        off += (c ? len : 0) + 1;
    }
    sqlite3_finalize(s);
    if (r != SQLITE_DONE && r != SQLITE_ROW) {
        free(block);
        return sr__store_sqlerr(st, r, "read incarnations");
    }
    *out = (sr_store_incarnation *)(void *)block;
    *n = i;
    return SR_OK;
}

sr_err
sr_store_list_incarnations(sr_store *st, sr_store_incarnation **out, size_t *n)
{
    sr_err rc;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if (out == NULL || n == NULL) {
        return sr__store_fail(st, SR_EINVAL, "sr_store_list_incarnations: NULL argument");
    }
    if ((rc = sr__store_begin_read(st)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    sr_store_incarnation *list = NULL;
    size_t                cnt = 0;
    rc = incarnations_tx(st, &list, &cnt);
    if ((rc = sr__store_end(st, rc)) != SR_OK) {
        free(list);
        return sr__store_ret(st, rc);
    }
    *out = list;
    *n = cnt;
    return SR_OK;
}

static void
contrib_row(sqlite3_stmt *s, void *rec)
{
    sr_store_contrib *c = rec;
    c->step = sqlite3_column_int64(s, 0);
    c->var_id = sqlite3_column_int64(s, 1);
    c->part = sqlite3_column_int64(s, 2);
    c->pos = sqlite3_column_int(s, 3);
    c->task_index = sqlite3_column_int(s, 4);
    c->local_step = sqlite3_column_int64(s, 5);
}

sr_err
sr_store_read_log(sr_store *st, int64_t from, int64_t to, sr_store_contrib **out, size_t *n)
{
    const int64_t b[2] = {from, to};
    return collect_tx(st,
                      "SELECT step, var_id, part, pos, task_index, local_step FROM step_log"
                      " WHERE step >= ?1 AND step < ?2 ORDER BY step, var_id, part, pos",
                      b, 2, sizeof(**out), contrib_row, (void **)out, n);
}

/* ---------------------------------------------------------------------------
 * Export
 */

static sr_err
export_copy(sr_store *st, const char *out_path)
{
    sqlite3        *dst = NULL;
    sqlite3_backup *b;
    int             r;
    sr_err          rc = SR_OK;

    r = sqlite3_open_v2(out_path, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (r != SQLITE_OK) {
        rc = sr__store_fail(st, map_sqlite(dst, r), "%s: open export copy: %s", out_path,
                            dst ? sqlite3_errmsg(dst) : sqlite3_errstr(r));
        sqlite3_close_v2(dst);
        return rc;
    }
    sqlite3_exec(dst, "PRAGMA synchronous=FULL", NULL, NULL, NULL);
    /* One step(-1) copies every page inside one read transaction of the
     * source: a consistent snapshot, and in WAL mode writers elsewhere are
     * not blocked. */
    if ((b = sqlite3_backup_init(dst, "main", st->db, "main")) == NULL) {
        rc = sr__store_fail(st, map_sqlite(dst, sqlite3_errcode(dst)), "%s: backup init: %s",
                            out_path, sqlite3_errmsg(dst));
        sqlite3_close_v2(dst);
        return rc;
    }
    r = sqlite3_backup_step(b, -1);
    sqlite3_backup_finish(b);
    if (r != SQLITE_DONE) {
        int ec = sqlite3_errcode(dst) != SQLITE_OK ? sqlite3_errcode(dst) : r;
        rc = sr__store_fail(st, map_sqlite(dst, ec), "%s: backup of %s: %s (%s)", out_path,
                            st->path, sqlite3_errmsg(dst), sqlite3_errstr(r));
    }
    if (sqlite3_close(dst) != SQLITE_OK && rc == SR_OK) {
        rc = sr__store_fail(st, SR_ESTORE, "%s: close export copy: %s", out_path,
                            sqlite3_errmsg(dst));
        sqlite3_close_v2(dst);
    }
    return rc;
}

/* The chunk versions of an export's copy at its global step, against
 * their sums. */
static sr_err
check_copy_sums(sr_store *copy)
{
    int64_t g = 0;
    sr_err  rc;

    if ((rc = sr__store_begin_read(copy)) != SR_OK) {
        return rc;
    }
    if ((rc = sr__store_meta_i64(copy, "global_step", &g)) == SR_OK) {
        rc = sr__store_check_sums(copy, g);
    }
    return sr__store_end(copy, rc);
}

sr_err
sr_store_export(sr_store *st, const char *out_path, int64_t step)
{
    sr_err        rc;
    int           fd, retained = 0;
    int64_t       g = 0;
    sr_store     *copy = NULL;
    sr_store_opts o;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if (out_path == NULL || *out_path == '\0' || step < -1) {
        return sr__store_fail(st, SR_EINVAL, "sr_store_export: bad out_path or step");
    }
    if (step >= 0) {
        sqlite3_stmt *s;
        if ((rc = sr__store_begin_read(st)) != SR_OK) {
            return sr__store_ret(st, rc);
        }
        rc = sr__store_meta_i64(st, "global_step", &g);
        if (rc == SR_OK && (rc = sr__store_stmt(st, STMT_CKPT_HAS, &s)) == SR_OK) {
            sqlite3_bind_int64(s, 1, step);
            retained = sqlite3_step(s) == SQLITE_ROW;
            sqlite3_reset(s);
        }
        if ((rc = sr__store_end(st, rc)) != SR_OK) {
            return sr__store_ret(st, rc);
        }
        if (!retained) {
            return sr__store_fail(st, SR_ENOENT, "%s: step %lld is not a retained checkpoint",
                                  st->path, (long long)step);
        }
    }
    fd = open(out_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        return sr__store_fail(st,
                              e == EEXIST                                 ? SR_EEXIST
                              : e == ENOENT                               ? SR_ENOENT
                              : (e == EACCES || e == EPERM || e == EROFS) ? SR_EACCES
                              : e == ENOSPC                               ? SR_ENOSPC
                                                                          : SR_ESTORE,
                              "%s: create export file: %s", out_path, strerror(e));
    }
    close(fd);
    if ((rc = export_copy(st, out_path)) != SR_OK) {
        goto fail;
    }
    memset(&o, 0, sizeof(o));
    o.sync = SR_STORE_SYNC_FULL;
    o.skip_quick_check = 1;
    o.keep_checkpoints = st->opts.keep_checkpoints;
    o.keep_every_steps = st->opts.keep_every_steps;
    /* What leaves the store is the exported step: its chunk versions in the
     * copy are checked against their sums (by the rewind, when there is
     * one).  Older retained steps travel with their sums and are checked
     * when read from the copy, so an intact step can be exported from a
     * store where another one is corrupt. */
    if ((rc = store_open(out_path, &o, 0, &copy)) != SR_OK ||
        (step >= 0 && step != g ? (rc = sr_store_rewind(copy, step))
                                : (rc = check_copy_sums(copy))) != SR_OK) {
        sr__store_ret(st, rc);
        goto fail;
    }
    sr_store_close(copy);
    copy = NULL;
    if ((rc = sr__store_sync_dir(out_path)) != SR_OK) {
        sr__store_ret(st, rc);
        goto fail;
    }
    return SR_OK;
fail:
    sr_store_close(copy);
    sr__store_unlink_all(out_path);
    return rc;
}
