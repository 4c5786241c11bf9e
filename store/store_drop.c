/*
 * store/store_drop.c: remove one variable from a store (issue 22).
 *
 * A program that declared another model against a live store (with
 * --allow-new-variables) can leave a variable the job does not want; an
 * operator removes it with `syncrep store drop-variable STORE NAME`, the
 * coordinator stopped (the CLI holds the store's writer lock meanwhile).
 * In one write transaction: the variable's step-log rows, then the variable
 * row, whose triggers (store_schema.c) delete its tensors (value and
 * optimizer slots), their chunk versions and the chunks' bytes.  Nothing
 * else refers to a variable, so every retained checkpoint stays restorable
 * (a rewind reads the variables that remain) and verify stays clean.  The
 * commit is durable at the store's synchronous setting; the cache is dropped
 * so the handle reads the new variable list.  docs/store.md, "Dropping a
 * variable".
 */
#include <string.h>

#include "core/text.h"
#include "store/store_int.h"

static sr_err
drop_rows(sr_store *st, int64_t id)
{
    static const char *const sql[] = {"DELETE FROM step_log WHERE var_id = ?1",
                                      "DELETE FROM variable WHERE id = ?1"};
    for (size_t i = 0; i < sizeof(sql) / sizeof(sql[0]); i++) {
        sqlite3_stmt *s = NULL;
        int           r = sqlite3_prepare_v2(st->db, sql[i], -1, &s, NULL);
        if (r == SQLITE_OK) {
            sqlite3_bind_int64(s, 1, id);
            r = sqlite3_step(s);
        }
        sqlite3_finalize(s);
        if (r != SQLITE_DONE) {
            return sr__store_sqlerr(st, r, "drop variable");
        }
    }
    return SR_OK;
}

sr_err
sr_store_drop_variable(sr_store *st, const char *name, sr_store_var *dropped)
{
    sr_err  rc;
    int64_t id = -1;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if (name == NULL) {
        return sr__store_fail(st, SR_EINVAL, "sr_store_drop_variable: NULL name");
    }
    if ((rc = sr__store_begin_write(st)) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    if ((rc = sr__store_cache_load(st)) == SR_OK) {
        for (size_t i = 0; i < st->nvars && id < 0; i++) {
            if (strcmp(st->vars[i].v.name, name) == 0) {
                id = st->vars[i].v.id;
                if (dropped != NULL) {
                    *dropped = st->vars[i].v;
                }
            }
        }
        if (id < 0) {
            rc = sr__store_fail(st, SR_ENOENT, "%s: no variable '%s'", st->path, SR_ESC(name));
        }
    }
    if (rc == SR_OK) {
        rc = drop_rows(st, id);
    }
    sr__store_cache_drop(st);
    rc = sr__store_end(st, rc);
    return sr__store_ret(st, rc);
}
