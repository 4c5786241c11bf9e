/*
 * Issue 26, elastic membership: what the store keeps of it (schema 4).
 *
 *   step_replicas  one row per applied step, written inside that step's
 *                  commit transaction (sr__store_put_step_replicas, from
 *                  commit_rows): the replicas it averaged over, so the
 *                  replay verifier divides as the coordinator did.  A
 *                  rewind drops the rows of the steps it drops, with the
 *                  step log's (rewind_tx).
 *   ctl_change     every change `syncrep ctl` made to a running job, in its
 *                  own durable transaction before the coordinator answers:
 *                  a restarted coordinator re-applies the latest of each
 *                  key whose base still matches its options.
 *
 * docs/store.md, "Elastic membership".
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_int.h"

sr_err
sr__store_put_step_replicas(sr_store *st, const sr_store_commit *c)
{
    for (size_t i = 0; i < c->nreplicas; i++) {
        const sr_store_step_replicas *p = &c->replicas[i];
        sqlite3_stmt                 *s;
        sr_err                        rc;

        if ((rc = sr__store_stmt(st, STMT_REPLICAS_PUT, &s)) != SR_OK) {
            return rc;
        }
        sqlite3_bind_int64(s, 1, p->step);
        sqlite3_bind_int(s, 2, p->replicas);
        sqlite3_bind_int(s, 3, p->replicas_open);
        sqlite3_bind_int(s, 4, p->total);
        sqlite3_bind_int(s, 5, p->min_replicas);
        sqlite3_bind_int(s, 6, p->live);
        if ((rc = sr__store_run(st, s, "write step_replicas")) != SR_OK) {
            return rc;
        }
    }
    return SR_OK;
}

static void
replicas_row(sqlite3_stmt *s, void *rec)
{
    sr_store_step_replicas *p = rec;
    p->step = sqlite3_column_int64(s, 0);
    p->replicas = sqlite3_column_int(s, 1);
    p->replicas_open = sqlite3_column_int(s, 2);
    p->total = sqlite3_column_int(s, 3);
    p->min_replicas = sqlite3_column_int(s, 4);
    p->live = sqlite3_column_int(s, 5);
}

sr_err
sr_store_read_step_replicas(sr_store *st, int64_t from, int64_t to, sr_store_step_replicas **out,
                            size_t *n)
{
    const int64_t b[2] = {from, to};
    return sr__store_collect_tx(st,
                                "SELECT step, replicas, replicas_open, total, min_replicas, live"
                                " FROM step_replicas WHERE step >= ?1 AND step < ?2 ORDER BY step",
                                b, 2, sizeof(**out), replicas_row, (void **)out, n);
}

sr_err
sr_store_add_ctl_change(sr_store *st, const sr_store_ctl_change *rec)
{
    sqlite3_stmt *s = NULL;
    sr_err        rc;
    int           r;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if (rec == NULL || rec->key[0] == '\0' || memchr(rec->key, '\0', sizeof(rec->key)) == NULL) {
        return sr__store_fail(st, SR_EINVAL, "ctl change: NULL, empty or unterminated key");
    }
    if ((rc = sr__store_begin_write(st)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    r = sqlite3_prepare_v2(st->db,
                           "INSERT INTO ctl_change(incarnation, step, at_ms, key, base, value)"
                           " VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
                           -1, &s, NULL);
    if (r != SQLITE_OK) {
        rc = sr__store_sqlerr(st, r, "prepare ctl_change");
    } else {
        sqlite3_bind_int64(s, 1, (sqlite3_int64)rec->incarnation);
        sqlite3_bind_int64(s, 2, rec->step);
        sqlite3_bind_int64(s, 3, rec->at_ms);
        sqlite3_bind_text(s, 4, rec->key, -1, SQLITE_STATIC);
        sqlite3_bind_double(s, 5, rec->base);
        sqlite3_bind_double(s, 6, rec->value);
        if ((r = sqlite3_step(s)) != SQLITE_DONE) {
            rc = sr__store_sqlerr(st, r, "write ctl_change");
        }
    }
    sqlite3_finalize(s);
    return sr__store_ret(st, sr__store_end(st, rc));
}

static void
ctl_row(sqlite3_stmt *s, void *rec)
{
    sr_store_ctl_change *p = rec;
    const char          *k = (const char *)sqlite3_column_text(s, 4);
    p->id = sqlite3_column_int64(s, 0);
    p->incarnation = (uint64_t)sqlite3_column_int64(s, 1);
    p->step = sqlite3_column_int64(s, 2);
    p->at_ms = sqlite3_column_int64(s, 3);
    snprintf(p->key, sizeof(p->key), "%s", k != NULL ? k : "");
    p->base = sqlite3_column_double(s, 5);
    p->value = sqlite3_column_double(s, 6);
}

sr_err
sr_store_list_ctl_changes(sr_store *st, sr_store_ctl_change **out, size_t *n)
{
    return sr__store_collect_tx(st,
                                "SELECT id, incarnation, step, at_ms, key, base, value"
                                " FROM ctl_change ORDER BY id",
                                NULL, 0, sizeof(**out), ctl_row, (void **)out, n);
}
