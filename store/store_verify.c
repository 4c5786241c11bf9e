/*
 * sr_store_verify: SQLite's integrity_check plus syncrep's own invariants,
 * read in one snapshot:
 *   - meta present (format, global_step, incarnation, model_ready), the
 *     application_id and schema version are this build's;
 *   - the global step equals the newest retained checkpoint (a ready model
 *     has at least one);
 *   - for each retained step S (and the current step), every tensor that
 *     existed at S has every chunk, at the right size;
 *   - no chunk version after the global step, no stray chunk index, no
 *     chunk bytes that no version references, no tensor without variable;
 *   - every chunk version matches its checksum (store_sum.c), and the
 *     report says which retained steps are intact;
 *   - the store is not behind its mark (store_mark.c).
 * One report line per problem.  See docs/store.md.
 */
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "core/text.h"
#include "store/store_int.h"

#define MAX_LINES 200 /* report lines before "... and N more" */

typedef struct {
    sr_strbuf b;
    size_t    nproblems;
} report;

static void problem(report *r, const char *fmt, ...) SR_PRINTF(2, 3);

static void
problem(report *r, const char *fmt, ...)
{
    char    line[1024];
    va_list ap;

    r->nproblems++;
    if (r->nproblems > MAX_LINES) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    for (char *p = line; *p != '\0'; p++) {
        *p = *p == '\n' ? ' ' : *p; /* one line per problem */
    }
    sr_strbuf_printf(&r->b, "%s\n", line);
}

static sr_err
check_sqlite(sr_store *st, report *rep)
{
    sqlite3_stmt *s = NULL;
    int           r;

    if ((r = sqlite3_prepare_v2(st->db, "PRAGMA integrity_check(100)", -1, &s, NULL)) !=
        SQLITE_OK) {
        return sr__store_sqlerr(st, r, "integrity_check");
    }
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        const char *line = (const char *)sqlite3_column_text(s, 0);
        if (line == NULL || strcmp(line, "ok") != 0) {
            problem(rep, "integrity_check: %s", line ? line : "?");
        }
    }
    sqlite3_finalize(s);
    if (r != SQLITE_DONE) {
        if ((r & 0xff) == SQLITE_CORRUPT || (r & 0xff) == SQLITE_NOTADB) {
            problem(rep, "integrity_check: %s", sqlite3_errmsg(st->db));
            return SR_OK;
        }
        return sr__store_sqlerr(st, r, "integrity_check");
    }
    return SR_OK;
}

static void
check_meta(sr_store *st, report *rep, int64_t *g, int64_t *ready)
{
    static const char *const keys[] = {"global_step", "incarnation", "model_ready"};
    int64_t                  v = 0;

    *g = -1;
    *ready = 0;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if (sr__store_meta_i64(st, keys[i], &v) != SR_OK) {
            problem(rep, "meta: %s", sr_errdetail());
            continue;
        }
        if (i == 0) {
            *g = v;
        } else if (i == 2) {
            *ready = v;
        }
    }
    if (sr__store_query_i64(
            st, "SELECT count(*) FROM meta WHERE key = 'format' AND value = '" SR_STORE_FORMAT "'",
            &v) != SR_OK ||
        v != 1) {
        problem(rep, "meta: format '%s' missing", SR_STORE_FORMAT);
    }
    if (sr__store_query_i64(st, "PRAGMA application_id", &v) != SR_OK ||
        (uint32_t)v != SR_STORE_APP_ID) {
        problem(rep, "application_id is 0x%08x, want 0x%08x", (unsigned)v, SR_STORE_APP_ID);
    }
    if (sr__store_query_i64(st, "PRAGMA user_version", &v) != SR_OK ||
        v != SR_STORE_SCHEMA_VERSION) {
        problem(rep, "schema version %lld, want %d", (long long)v, SR_STORE_SCHEMA_VERSION);
    }
}

/* The steps of steps[] that read a bad version: the version of chunk idx
 * written at `lo` serves every step in [lo, hi) at which the tensor existed. */
static void
mark_corrupt(const store_var *v, const store_tensor *t, int64_t lo, int64_t hi,
             const int64_t *steps, size_t nsteps, uint8_t *corrupt)
{
    for (size_t k = 0; k < nsteps; k++) {
        int64_t at = steps[k];
        if (at >= lo && at < hi && at >= v->v.created_step && at >= t->created_step) {
            corrupt[k] = 1;
        }
    }
}

/* A chunk index's oldest version (first_step) must exist at every retained
 * step at which the tensor existed. */
static void
check_first_version(report *rep, const store_var *v, const store_tensor *t, uint64_t idx,
                    int64_t first_step, const int64_t *steps, size_t nsteps, uint8_t *corrupt)
{
    for (size_t k = 0; k < nsteps; k++) {
        int64_t at = steps[k];
        if (at >= v->v.created_step && at >= t->created_step && first_step > at) {
            problem(rep, "step %lld: variable '%s' slot '%s': chunk %llu missing", (long long)at,
                    SR_ESC(v->v.name), SR_ESC(t->slot), (unsigned long long)idx);
            corrupt[k] = 1;
        }
    }
}

/* Chunk indices [from, to) have no version at all. */
static void
report_gap(report *rep, const store_var *v, const store_tensor *t, uint64_t from, uint64_t to,
           const int64_t *steps, size_t nsteps, uint8_t *corrupt)
{
    if (from + 1 == to) {
        problem(rep, "variable '%s' slot '%s': chunk %llu missing", SR_ESC(v->v.name),
                SR_ESC(t->slot), (unsigned long long)from);
    } else if (from < to) {
        problem(rep, "variable '%s' slot '%s': chunks %llu..%llu missing", SR_ESC(v->v.name),
                SR_ESC(t->slot), (unsigned long long)from, (unsigned long long)(to - 1));
    }
    if (from < to) {
        mark_corrupt(v, t, 0, INT64_MAX, steps, nsteps, corrupt);
    }
}

/* One version's bytes: a BLOB of the right size whose checksum matches.
 * Returns 1 when it is bad (reported), 0 when good; *rc gets a failure that
 * is not the version's (SQLite, memory). */
static int
check_version_bytes(sr_store *st, report *rep, sqlite3_stmt *s, sqlite3_blob **blob,
                    const store_var *v, const store_tensor *t, uint64_t want, sr_err *rc)
{
    int64_t     idx = sqlite3_column_int64(s, 0);
    int64_t     step = sqlite3_column_int64(s, 1);
    const char *type = (const char *)sqlite3_column_text(s, 4);
    int64_t     len = sqlite3_column_int64(s, 5);
    uint64_t    got = 0;

    if (sqlite3_column_type(s, 3) == SQLITE_NULL) {
        problem(rep, "variable '%s' slot '%s': chunk %lld version %lld: data %lld missing",
                SR_ESC(v->v.name), SR_ESC(t->slot), (long long)idx, (long long)step,
                (long long)sqlite3_column_int64(s, 2));
        return 1;
    }
    if (type == NULL || strcmp(type, "blob") != 0) {
        problem(rep, "variable '%s' slot '%s': chunk %lld version %lld is %s, not a blob",
                SR_ESC(v->v.name), SR_ESC(t->slot), (long long)idx, (long long)step,
                type ? type : "?");
        return 1;
    }
    if ((uint64_t)len != want) {
        problem(rep, "variable '%s' slot '%s': chunk %lld version %lld is %lld bytes, want %llu",
                SR_ESC(v->v.name), SR_ESC(t->slot), (long long)idx, (long long)step, (long long)len,
                (unsigned long long)want);
        return 1;
    }
    if (sqlite3_column_type(s, 6) == SQLITE_NULL) {
        problem(rep, "variable '%s' slot '%s': chunk %lld version %lld has no checksum",
                SR_ESC(v->v.name), SR_ESC(t->slot), (long long)idx, (long long)step);
        return 1;
    }
    if ((*rc = sr__store_blob_sum(st, blob, sqlite3_column_int64(s, 2), (size_t)want, &got)) !=
        SR_OK) {
        return 0;
    }
    if (got != (uint64_t)sqlite3_column_int64(s, 6)) {
        problem(rep,
                "variable '%s' slot '%s': chunk %lld version %lld fails its checksum (stored "
                "%016llx, computed %016llx)",
                SR_ESC(v->v.name), SR_ESC(t->slot), (long long)idx, (long long)step,
                (unsigned long long)sqlite3_column_int64(s, 6), (unsigned long long)got);
        return 1;
    }
    return 0;
}

/* Every chunk present, as a BLOB of the right size with its checksum, for
 * each step in steps[] at which t existed; corrupt[k] = 1 for each step
 * steps[k] that reads a bad or missing chunk.  Streams the versions in
 * (index, step) order, so memory does not depend on the chunk count a
 * (possibly corrupt) variable row claims. */
static sr_err
check_tensor(sr_store *st, report *rep, const store_tensor *t, const int64_t *steps, size_t nsteps,
             int64_t g, uint8_t *corrupt)
{
    const store_var *v = sr__store_var(st, t->var_id);
    sqlite3_stmt    *s = NULL;
    sqlite3_blob    *blob = NULL;
    uint64_t         next = 0; /* the lowest index not seen yet */
    int64_t          cur = -1; /* the index of the previous row */
    int64_t          bad = -1; /* the step of the previous row's version when it was bad */
    sr_err           rc = SR_OK;
    int              r;

    if (v == NULL) {
        problem(rep, "tensor %lld (slot '%s'): variable %lld missing", (long long)t->id,
                SR_ESC(t->slot), (long long)t->var_id);
        return SR_OK;
    }
    r = sqlite3_prepare_v2(st->db,
                           "SELECT c.idx, c.step, c.data_id, d.id, typeof(d.data),"
                           " length(CAST(d.data AS BLOB)), c.sum FROM chunk c"
                           " LEFT JOIN chunk_data d ON d.id = c.data_id WHERE c.tensor_id = ?1"
                           " ORDER BY c.idx, c.step",
                           -1, &s, NULL);
    if (r != SQLITE_OK) {
        return sr__store_sqlerr(st, r, "verify chunks");
    }
    sqlite3_bind_int64(s, 1, t->id);
    while (rc == SR_OK && (r = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t idx = sqlite3_column_int64(s, 0);
        int64_t step = sqlite3_column_int64(s, 1);
        if (idx < 0 || (uint64_t)idx >= v->nchunks) {
            problem(rep, "variable '%s' slot '%s': stray chunk %lld (has %llu)", SR_ESC(v->v.name),
                    SR_ESC(t->slot), (long long)idx, (unsigned long long)v->nchunks);
            continue;
        }
        if (bad >= 0) {
            /* The previous version was bad: it served the steps up to this
             * version of the same index, or every later step. */
            mark_corrupt(v, t, bad, idx == cur ? step : INT64_MAX, steps, nsteps, corrupt);
            bad = -1;
        }
        if (idx != cur) {
            /* The first (oldest) version of a new index. */
            report_gap(rep, v, t, next, (uint64_t)idx, steps, nsteps, corrupt);
            check_first_version(rep, v, t, (uint64_t)idx, step, steps, nsteps, corrupt);
            next = (uint64_t)idx + 1;
            cur = idx;
        }
        uint64_t off = (uint64_t)idx * v->v.chunk_bytes;
        uint64_t want = v->v.nbytes - off < v->v.chunk_bytes ? v->v.nbytes - off : v->v.chunk_bytes;
        if (check_version_bytes(st, rep, s, &blob, v, t, want, &rc)) {
            bad = step;
        }
        if (step > g) {
            problem(rep,
                    "variable '%s' slot '%s': chunk %lld has a version at step %lld, after "
                    "the global step %lld",
                    SR_ESC(v->v.name), SR_ESC(t->slot), (long long)idx, (long long)step,
                    (long long)g);
        }
    }
    if (bad >= 0) {
        mark_corrupt(v, t, bad, INT64_MAX, steps, nsteps, corrupt);
    }
    sqlite3_blob_close(blob);
    sqlite3_finalize(s);
    if (rc != SR_OK) {
        return rc;
    }
    if (r != SQLITE_DONE) {
        return sr__store_sqlerr(st, r, "verify chunks");
    }
    report_gap(rep, v, t, next, v->nchunks, steps, nsteps, corrupt);
    return SR_OK;
}

/* Every table with every column the code reads (a damaged schema may still
 * pass integrity_check). */
static void
check_schema(sr_store *st, report *rep)
{
    static const char *const queries[] = {
        "SELECT key, value FROM meta",
        "SELECT id, name, dtype, ndim, shape, nbytes, chunk_bytes, trainable, created_step"
        " FROM variable",
        "SELECT id, var_id, slot, created_step FROM tensor",
        "SELECT tensor_id, idx, step, data_id, sum FROM chunk",
        "SELECT id, data FROM chunk_data",
        "SELECT task_index, local_step, last_seen_ms, incarnation FROM worker",
        "SELECT step, var_id, part, pos, task_index, local_step FROM step_log",
        "SELECT step, created_ms FROM checkpoint",
        "SELECT incarnation, restored_step, started_ms, config FROM incarnation",
        "SELECT id, incarnation, from_step, to_step, at_ms FROM rewind",
        "SELECT id, incarnation, from_step, to_step, at_ms, cause FROM rollback",
    };
    for (size_t i = 0; i < sizeof(queries) / sizeof(queries[0]); i++) {
        sqlite3_stmt *s = NULL;
        if (sqlite3_prepare_v2(st->db, queries[i], -1, &s, NULL) != SQLITE_OK) {
            problem(rep, "schema: %s (%s)", sqlite3_errmsg(st->db), queries[i]);
        }
        sqlite3_finalize(s);
    }
}

/* The steps to check: the retained ones and the current step (which must be
 * whole too), ascending, malloc'd.  *nretained: how many are retained. */
static sr_err
steps_to_check(sr_store *st, int64_t g, int64_t **out, size_t *n, size_t *nretained)
{
    int64_t *steps = NULL;
    size_t   cnt = 0;
    sr_err   rc;

    if ((rc = sr__store_checkpoints(st, &steps, &cnt)) != SR_OK) {
        return rc;
    }
    *nretained = cnt;
    if (cnt == 0 || steps[cnt - 1] != g) {
        int64_t *p = realloc(steps, (cnt + 1) * sizeof(*p));
        if (p == NULL) {
            free(steps);
            return sr__store_fail(st, SR_ENOMEM, "verify");
        }
        steps = p;
        steps[cnt++] = g;
    }
    *out = steps;
    *n = cnt;
    return SR_OK;
}

/* Every tensor's chunks for steps[] (check_tensor), into rep and corrupt[]. */
static sr_err
check_chunks(sr_store *st, report *rep, const int64_t *steps, size_t nsteps, int64_t g,
             uint8_t *corrupt)
{
    sr_err rc = SR_OK;

    sr__store_cache_drop(st);
    if (sr__store_cache_load(st) != SR_OK) {
        problem(rep, "variables: %s", sr_errdetail());
        memset(corrupt, 1, nsteps);
        return SR_OK;
    }
    for (size_t i = 0; i < st->ntensors && rc == SR_OK; i++) {
        rc = check_tensor(st, rep, &st->tensors[i], steps, nsteps, g, corrupt);
        if (rc == SR_ECORRUPT) {
            problem(rep, "%s", sr_errdetail()); /* SQLite found a damaged page */
            memset(corrupt, 1, nsteps);
            rc = SR_OK;
        }
    }
    return rc;
}

/* "retained steps: 3 ok, 4 corrupt, 5 ok" (a note, not a problem). */
static void
note_steps(report *rep, const int64_t *steps, size_t nretained, const uint8_t *corrupt)
{
    sr_strbuf_printf(&rep->b, "retained steps:");
    for (size_t k = 0; k < nretained; k++) {
        sr_strbuf_printf(&rep->b, "%s %lld %s", k ? "," : "", (long long)steps[k],
                         corrupt[k] ? "corrupt" : "ok");
    }
    sr_strbuf_printf(&rep->b, "%s\n", nretained ? "" : " none");
}

/* The store against its mark (read before this transaction's snapshot, so
 * a commit racing verify never looks like a rollback). */
static void
check_mark(sr_store *st, report *rep, const store_mark *m, int mark_state, int64_t g, int64_t ready)
{
    int64_t id = 0;

    if (mark_state != SR_STORE_MARK_OK || g < 0) {
        return; /* no mark to compare (the coordinator writes one when it opens) */
    }
    if (sr__store_meta_i64(st, "store_id", &id) == SR_OK && id != 0 && id != m->store_id) {
        return; /* another store's: not evidence about this one */
    }
    sr_clear_error();
    if (g < m->step || (m->ready && !ready)) {
        problem(rep,
                "store is behind its mark: global step %lld%s, %s-mark says step %lld was "
                "committed%s (incarnation %llu): steps %lld..%lld are lost%s%s",
                (long long)g, ready ? "" : " (model not ready)", st->path, (long long)m->step,
                m->ready ? " with the model ready" : "", (unsigned long long)m->incarnation,
                (long long)(g + 1), (long long)(m->step > g ? m->step : g),
                st->rb.behind ? "; " : "", st->rb.behind ? st->rb.cause : "");
    }
}

static sr_err
verify_tx(sr_store *st, report *rep, const store_mark *m, int mark_state)
{
    int64_t *steps = NULL;
    uint8_t *corrupt = NULL;
    size_t   nsteps = 0, nretained = 0;
    int64_t  g = -1, ready = 0, n = 0;
    sr_err   rc;

    if ((rc = check_sqlite(st, rep)) != SR_OK) {
        return rc;
    }
    check_schema(st, rep);
    check_meta(st, rep, &g, &ready);
    check_mark(st, rep, m, mark_state, g, ready);
    if ((rc = steps_to_check(st, g, &steps, &nsteps, &nretained)) != SR_OK) {
        if (rc == SR_ENOMEM) {
            return rc;
        }
        problem(rep, "checkpoints: %s", sr_errdetail());
        return SR_OK;
    }
    if (nretained > 0 && steps[nretained - 1] != g) {
        problem(rep, "global step %lld is not the newest checkpoint %lld", (long long)g,
                (long long)steps[nretained - 1]);
    }
    if (nretained == 0 && ready) {
        problem(rep, "model is ready but no checkpoint is retained");
    }
    if ((corrupt = calloc(nsteps, 1)) == NULL) {
        free(steps);
        return sr__store_fail(st, SR_ENOMEM, "verify");
    }
    rc = check_chunks(st, rep, steps, nsteps, g, corrupt);
    if (rc == SR_OK && rep->nproblems > 0) {
        note_steps(rep, steps, nretained, corrupt);
    }
    free(steps);
    free(corrupt);
    if (rc != SR_OK) {
        return rc;
    }
    for (size_t i = 0; i < st->nvars; i++) {
        if (sr__store_tensor(st, st->vars[i].v.id, "") == NULL) {
            problem(rep, "variable '%s' has no value tensor", SR_ESC(st->vars[i].v.name));
        }
    }
    if (sr__store_query_i64(st,
                            "SELECT count(*) FROM chunk_data WHERE id NOT IN"
                            " (SELECT data_id FROM chunk)",
                            &n) == SR_OK &&
        n > 0) {
        problem(rep, "%lld chunk data rows are referenced by no version", (long long)n);
    }
    if (sr__store_query_i64(st,
                            "SELECT count(*) FROM chunk WHERE tensor_id NOT IN"
                            " (SELECT id FROM tensor)",
                            &n) == SR_OK &&
        n > 0) {
        problem(rep, "%lld chunk versions belong to no tensor", (long long)n);
    }
    return SR_OK;
}

/* The retained steps whose every chunk is present and matches its sum. */
static sr_err
intact_tx(sr_store *st, int64_t **out, size_t *n)
{
    report   rep;
    int64_t *steps = NULL, g = 0;
    uint8_t *corrupt = NULL;
    size_t   nsteps = 0, nretained = 0, k = 0;
    sr_err   rc;

    memset(&rep, 0, sizeof(rep));
    sr_strbuf_init(&rep.b);
    if ((rc = sr__store_meta_i64(st, "global_step", &g)) != SR_OK ||
        (rc = steps_to_check(st, g, &steps, &nsteps, &nretained)) != SR_OK) {
        sr_strbuf_free(&rep.b);
        return rc;
    }
    if ((corrupt = calloc(nsteps, 1)) == NULL) {
        rc = sr__store_fail(st, SR_ENOMEM, "intact steps");
    } else {
        rc = check_chunks(st, &rep, steps, nsteps, g, corrupt);
    }
    for (size_t i = 0; rc == SR_OK && i < nretained; i++) {
        if (!corrupt[i]) {
            steps[k++] = steps[i];
        }
    }
    sr_strbuf_free(&rep.b);
    free(corrupt);
    if (rc != SR_OK) {
        free(steps);
        return rc;
    }
    *out = steps;
    *n = k;
    return SR_OK;
}

sr_err
sr_store_intact_steps(sr_store *st, int64_t **steps, size_t *n)
{
    int64_t *list = NULL;
    size_t   cnt = 0;
    sr_err   rc;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if (steps == NULL || n == NULL) {
        return sr__store_fail(st, SR_EINVAL, "sr_store_intact_steps: NULL argument");
    }
    if ((rc = sr__store_begin_read(st)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    rc = intact_tx(st, &list, &cnt);
    sr__store_cache_drop(st);
    if ((rc = sr__store_end(st, rc)) != SR_OK) {
        free(list);
        return sr__store_ret(st, rc);
    }
    *steps = list;
    *n = cnt;
    return SR_OK;
}

sr_err
sr_store_verify(sr_store *st, char **report_out)
{
    report      rep;
    sr_err      rc;
    const char *text;
    char       *copy;
    store_mark  m;
    int         mark_state = 0;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if (report_out == NULL) {
        return sr__store_fail(st, SR_EINVAL, "sr_store_verify: report is NULL");
    }
    if ((rc = sr__store_mark_read(st->path, &m, &mark_state)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    memset(&rep, 0, sizeof(rep));
    sr_strbuf_init(&rep.b);
    if ((rc = sr__store_begin_read(st)) != SR_OK) {
        sr_strbuf_free(&rep.b);
        return sr__store_ret(st, rc);
    }
    rc = verify_tx(st, &rep, &m, mark_state);
    sr__store_cache_drop(st);
    rc = sr__store_end(st, rc);
    if (rc == SR_ECORRUPT) {
        problem(&rep, "%s", sr_errdetail()); /* SQLite met a damaged page */
    } else if (rc != SR_OK) {
        sr_strbuf_free(&rep.b);
        return sr__store_ret(st, rc);
    }
    if (rep.nproblems > MAX_LINES) {
        sr_strbuf_printf(&rep.b, "... and %zu more problems\n", rep.nproblems - MAX_LINES);
    }
    if ((rc = sr_strbuf_result(&rep.b, &text)) != SR_OK || (copy = strdup(text)) == NULL) {
        sr_strbuf_free(&rep.b);
        return sr__store_fail(st, SR_ENOMEM, "verify report");
    }
    sr_strbuf_free(&rep.b);
    *report_out = copy;
    if (rep.nproblems > 0) {
        return sr__store_fail(st, SR_ECORRUPT, "%s: verify found %zu problem%s", st->path,
                              rep.nproblems, rep.nproblems == 1 ? "" : "s");
    }
    return SR_OK;
}
