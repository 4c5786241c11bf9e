/*
 * store/store_vacuum.c: give a store's free pages back to the file system
 * (issue 22).
 *
 * Retention drops versions (checkpoints beyond --keep-checkpoints, their
 * chunk versions and bytes) and `store drop-variable` drops whole variables;
 * SQLite puts their pages on its free list and reuses them for later
 * commits, so the file never shrinks by itself.  `syncrep store vacuum
 * STORE` (coordinator stopped: the CLI holds STORE-lock) runs SQLite's
 * VACUUM, which rebuilds the file from the live rows only, then a
 * TRUNCATE checkpoint so that the rebuilt pages are in the main file and the
 * -wal is empty.  VACUUM is one transaction: a crash inside it leaves the
 * store as it was.  The global step, the variables, every retained version
 * and the mark's step are unchanged; the mark is rewritten for the -wal's new
 * length.  docs/store.md, "Vacuum".
 */
#include <sys/stat.h>

#include "store/store_int.h"

static int64_t
file_bytes(const char *path, const char *suffix)
{
    char        p[4200];
    struct stat sb;

    snprintf(p, sizeof(p), "%s%s", path, suffix);
    return stat(p, &sb) == 0 ? (int64_t)sb.st_size : 0;
}

sr_err
sr_store_vacuum(sr_store *st, int64_t *before_bytes, int64_t *after_bytes)
{
    sr_err  rc;
    int64_t g = 0, ready = 0;
    int64_t before;

    if ((rc = sr__store_check(st)) != SR_OK) {
        return rc;
    }
    if (st->opts.readonly) {
        return sr__store_fail(st, SR_EACCES, "%s: opened read-only", st->path);
    }
    before = file_bytes(st->path, "") + file_bytes(st->path, "-wal");
    if ((rc = sr__store_exec(st, "VACUUM")) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    if ((rc = sr__store_exec(st, "PRAGMA wal_checkpoint(TRUNCATE)")) != SR_OK) {
        return sr__store_ret(st, rc);
    }
    sr__store_cache_drop(st);
    if ((rc = sr__store_begin_read(st)) == SR_OK) {
        if ((rc = sr__store_meta_i64(st, "global_step", &g)) == SR_OK) {
            rc = sr__store_meta_i64(st, "model_ready", &ready);
        }
        rc = sr__store_end(st, rc);
    }
    if (rc != SR_OK) {
        return sr__store_ret(st, rc);
    }
    sr__store_mark_committed(st, g, ready != 0, sr__store_wal_bytes(st));
    if (before_bytes != NULL) {
        *before_bytes = before;
    }
    if (after_bytes != NULL) {
        *after_bytes = file_bytes(st->path, "") + file_bytes(st->path, "-wal");
    }
    return SR_OK;
}
