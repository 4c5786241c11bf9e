/*
 * Opening a file safely, and the schema's versions.
 *
 * Identity is checked before anything is written: first the raw 100-byte
 * SQLite header (magic, application_id, user_version) with plain read(),
 * then the same through SQLite plus the meta table, then quick_check.  Only
 * after all of that are journal mode, page size or the schema touched, so a
 * refused file is left byte-identical.  New stores are created in rollback
 * mode, so their header (application_id, user_version) is in the main file
 * from the first commit, and switched to WAL afterwards.
 *
 * Schema versions (PRAGMA user_version) and the migrations between them:
 *
 *     empty (0) --migrate_0_1--> 1 --migrate_1_2--> 2 --migrate_2_3--> 3
 *               --migrate_3_4--> 4 --(future)--> ...
 *
 *   state      user_version  contents                          who moves it
 *   empty      0             0-byte file we created             migrate_0_1
 *   v1         1             the tables of schema_v1 below      migrate_1_2
 *   v2         2             step_log gains `part` (partitions)  migrate_2_3
 *   v3         3             chunk.sum, meta store_id, rollback  migrate_3_4
 *   v4         4             member (#23), step_replicas, ctl_change (#26),
 *                             worker.cursor (#24)                (current)
 *   newer      N+1..1000     refused: SR_EVERSION, nothing written
 *   absurd     > 1000, < 0   a damaged header: SR_ECORRUPT
 *
 * Each migration k -> k+1 also sets user_version = k+1; all pending ones run
 * in one BEGIN IMMEDIATE transaction, so a crash or a failure leaves the
 * version the file had, never a half-migrated file.  Invariant on exit of sr__store_setup
 * (read-write): user_version == SR_STORE_SCHEMA_VERSION, journal_mode == WAL. See docs/store.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/mem.h"
#include "store/store_int.h"

typedef struct {
    int         from;           /* user_version before */
    const char *what;           /* for errors and logs */
    sr_err (*fn)(sr_store *st); /* runs inside the migration's transaction */
} migration;

static const char schema_v1[] =
    "CREATE TABLE meta(key TEXT PRIMARY KEY NOT NULL, value NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE variable("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " name TEXT NOT NULL UNIQUE,"
    " dtype INTEGER NOT NULL,"
    " ndim INTEGER NOT NULL,"
    " shape TEXT NOT NULL,"
    " nbytes INTEGER NOT NULL,"
    " chunk_bytes INTEGER NOT NULL,"
    " trainable INTEGER NOT NULL,"
    " created_step INTEGER NOT NULL);"
    "CREATE TABLE tensor("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " var_id INTEGER NOT NULL,"
    " slot TEXT NOT NULL,"
    " created_step INTEGER NOT NULL,"
    " UNIQUE (var_id, slot));"
    /* Version bookkeeping, small rows; the bytes live in chunk_data so that
     * re-stepping a version never rewrites its blob. */
    "CREATE TABLE chunk("
    " tensor_id INTEGER NOT NULL,"
    " idx INTEGER NOT NULL,"
    " step INTEGER NOT NULL,"
    " data_id INTEGER NOT NULL UNIQUE,"
    " PRIMARY KEY (tensor_id, idx, step)) WITHOUT ROWID;"
    "CREATE INDEX chunk_step ON chunk(step);"
    "CREATE TABLE chunk_data(id INTEGER PRIMARY KEY, data BLOB NOT NULL);"
    "CREATE TABLE worker("
    " task_index INTEGER PRIMARY KEY,"
    " local_step INTEGER NOT NULL,"
    " last_seen_ms INTEGER NOT NULL,"
    " incarnation INTEGER NOT NULL);"
    "CREATE TABLE step_log("
    " step INTEGER NOT NULL,"
    " var_id INTEGER NOT NULL,"
    " pos INTEGER NOT NULL,"
    " task_index INTEGER NOT NULL,"
    " local_step INTEGER NOT NULL,"
    " PRIMARY KEY (step, var_id, pos)) WITHOUT ROWID;"
    "CREATE TABLE checkpoint(step INTEGER PRIMARY KEY, created_ms INTEGER NOT NULL);"
    "CREATE TABLE incarnation("
    " incarnation INTEGER PRIMARY KEY,"
    " restored_step INTEGER NOT NULL,"
    " started_ms INTEGER NOT NULL,"
    " config TEXT NOT NULL DEFAULT '');"
    "CREATE TABLE rewind("
    " id INTEGER PRIMARY KEY,"
    " incarnation INTEGER NOT NULL,"
    " from_step INTEGER NOT NULL,"
    " to_step INTEGER NOT NULL,"
    " at_ms INTEGER NOT NULL);"
    "CREATE TRIGGER chunk_free AFTER DELETE ON chunk BEGIN"
    " DELETE FROM chunk_data WHERE id = OLD.data_id; END;"
    "CREATE TRIGGER tensor_free AFTER DELETE ON tensor BEGIN"
    " DELETE FROM chunk WHERE tensor_id = OLD.id; END;"
    "CREATE TRIGGER variable_free AFTER DELETE ON variable BEGIN"
    " DELETE FROM tensor WHERE var_id = OLD.id; END;";

static sr_err
migrate_0_1(sr_store *st)
{
    sr_err  rc;
    int64_t n = 0;
    char    sql[512];

    if ((rc = sr__store_query_i64(st, "SELECT count(*) FROM sqlite_schema", &n)) != SR_OK) {
        return rc;
    }
    if (n != 0) {
        return sr__store_fail(st, SR_ECORRUPT,
                              "%s: not a syncrep store (schema version 0 but %lld tables)",
                              st->path, (long long)n);
    }
    if ((rc = sr__store_exec(st, schema_v1)) != SR_OK) {
        return rc;
    }
    if ((rc = sr_snprintf(sql, sizeof(sql),
                          "PRAGMA application_id = %d;"
                          "INSERT INTO meta(key, value) VALUES ('format', '%s'),"
                          " ('global_step', 0), ('incarnation', 0), ('model_ready', 0),"
                          " ('created_ms', %lld);",
                          SR_STORE_APP_ID, SR_STORE_FORMAT, (long long)sr_clock_wall_ms())) !=
        SR_OK) {
        return sr__store_ret(st, rc);
    }
    return sr__store_exec(st, sql);
}

/* Schema 2: the step log records the partition of each contribution
 * (variables split into partitions have one accumulator per partition).
 * Rows of schema 1 were whole variables: part 0. */
static sr_err
migrate_1_2(sr_store *st)
{
    return sr__store_exec(st, "CREATE TABLE step_log2("
                              " step INTEGER NOT NULL,"
                              " var_id INTEGER NOT NULL,"
                              " part INTEGER NOT NULL,"
                              " pos INTEGER NOT NULL,"
                              " task_index INTEGER NOT NULL,"
                              " local_step INTEGER NOT NULL,"
                              " PRIMARY KEY (step, var_id, part, pos)) WITHOUT ROWID;"
                              "INSERT INTO step_log2 SELECT step, var_id, 0, pos, task_index,"
                              " local_step FROM step_log;"
                              "DROP TABLE step_log;"
                              "ALTER TABLE step_log2 RENAME TO step_log;");
}

/* A random 63-bit id naming this store (meta 'store_id'): the mark beside
 * the store (store_mark.c) says which store it belongs to. */
static int64_t
random_store_id(void)
{
    uint64_t v = 0;

    if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v)) {
        /* No entropy source: the clock and the pid, mixed (splitmix64). */
        v = (uint64_t)sr_clock_now_ns() ^ ((uint64_t)getpid() << 32);
        v += 0x9e3779b97f4a7c15ull;
        v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ull;
        v = (v ^ (v >> 27)) * 0x94d049bb133111ebull;
        v ^= v >> 31;
    }
    v &= (uint64_t)INT64_MAX;
    return v != 0 ? (int64_t)v : 1;
}

/* One chunk version of a schema-2 store, to be given its checksum. */
typedef struct {
    int64_t tensor_id, idx, step, data_id, len;
} old_version;

static sr_err
collect_versions(sr_store *st, old_version **out, size_t *n)
{
    sqlite3_stmt *s = NULL;
    old_version  *a = NULL;
    size_t        cnt = 0, cap = 0;
    int           r;

    r = sqlite3_prepare_v2(st->db,
                           "SELECT c.tensor_id, c.idx, c.step, c.data_id,"
                           " length(CAST(d.data AS BLOB)) FROM chunk c"
                           " JOIN chunk_data d ON d.id = c.data_id",
                           -1, &s, NULL);
    if (r != SQLITE_OK) {
        return sr__store_sqlerr(st, r, "read chunk versions");
    }
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        old_version *p = cnt < cap ? a : sr_grow_array(a, &cap, cnt + 1, sizeof(*a));
        if (p == NULL) {
            sqlite3_finalize(s);
            free(a);
            return sr__store_fail(st, SR_ENOMEM, "%zu chunk versions", cnt + 1);
        }
        a = p;
        a[cnt++] = (old_version){sqlite3_column_int64(s, 0), sqlite3_column_int64(s, 1),
                                 sqlite3_column_int64(s, 2), sqlite3_column_int64(s, 3),
                                 sqlite3_column_int64(s, 4)};
    }
    sqlite3_finalize(s);
    if (r != SQLITE_DONE) {
        free(a);
        return sr__store_sqlerr(st, r, "read chunk versions");
    }
    *out = a;
    *n = cnt;
    return SR_OK;
}

/* Every existing chunk version gets the checksum of the bytes it holds (the
 * migration reads every blob once).  A version whose data row is missing or
 * whose pages SQLite finds damaged keeps no sum: every read of it and verify
 * report that ("has no checksum"), and the open does not fail on a blob that
 * only some retained step needs (an earlier migration step may already have
 * committed: a refusal here would not leave the file as it was anyway). */
static sr_err
sum_versions(sr_store *st)
{
    old_version  *a = NULL;
    size_t        n = 0;
    sqlite3_blob *blob = NULL;
    sqlite3_stmt *s;
    sr_err        rc;

    if ((rc = collect_versions(st, &a, &n)) != SR_OK) {
        return rc;
    }
    for (size_t i = 0; i < n && rc == SR_OK; i++) {
        uint64_t sum = 0;
        if ((rc = sr__store_blob_sum(st, &blob, a[i].data_id, (size_t)a[i].len, &sum)) ==
            SR_ECORRUPT) {
            rc = SR_OK;
            continue;
        }
        if (rc != SR_OK || (rc = sr__store_stmt(st, STMT_CHUNK_SUM, &s)) != SR_OK) {
            break;
        }
        sqlite3_bind_int64(s, 1, a[i].tensor_id);
        sqlite3_bind_int64(s, 2, a[i].idx);
        sqlite3_bind_int64(s, 3, a[i].step);
        sqlite3_bind_int64(s, 4, (sqlite3_int64)sum);
        rc = sr__store_run(st, s, "write chunk checksum");
    }
    sqlite3_blob_close(blob);
    free(a);
    return rc;
}

/* Schema 3: chunk versions carry checksums (store_sum.c), the store has an
 * id (for its mark, store_mark.c), and accepted rollbacks are recorded. */
static sr_err
migrate_2_3(sr_store *st)
{
    sr_err rc;

    if ((rc = sr__store_exec(st, "ALTER TABLE chunk ADD COLUMN sum INTEGER;"
                                 "CREATE TABLE rollback("
                                 " id INTEGER PRIMARY KEY,"
                                 " incarnation INTEGER NOT NULL,"
                                 " from_step INTEGER NOT NULL,"
                                 " to_step INTEGER NOT NULL,"
                                 " at_ms INTEGER NOT NULL,"
                                 " cause TEXT NOT NULL DEFAULT '');")) != SR_OK ||
        (rc = sr__store_meta_set_i64(st, "store_id", random_store_id())) != SR_OK) {
        return rc;
    }
    return sum_versions(st);
}

/* Schema 4.  Issue 23: the tensors of models declared as a whole live in
 * packs (store_member.c): `member` names each one's place in its pack. */
static sr_err
migrate_3_4_members(sr_store *st)
{
    return sr__store_exec(st, "CREATE TABLE member("
                              " name TEXT PRIMARY KEY NOT NULL,"
                              " pack TEXT NOT NULL,"
                              " offset INTEGER NOT NULL,"
                              " dtype INTEGER NOT NULL,"
                              " shape TEXT NOT NULL,"
                              " nbytes INTEGER NOT NULL,"
                              " trainable INTEGER NOT NULL,"
                              " pos INTEGER NOT NULL,"
                              " created_step INTEGER NOT NULL) WITHOUT ROWID;");
}

/* ---- issue 26: elastic ---------------------------------------------------
 * Schema 4: the replicas each step averaged over (step_replicas, written
 * with the step's commit; rewinds drop its rows with the step log's), and
 * the changes `syncrep ctl` made to a running job (ctl_change). */
static sr_err
migrate_3_4_elastic(sr_store *st)
{
    return sr__store_exec(st, "CREATE TABLE step_replicas("
                              " step INTEGER PRIMARY KEY,"
                              " replicas INTEGER NOT NULL,"
                              " replicas_open INTEGER NOT NULL,"
                              " total INTEGER NOT NULL,"
                              " min_replicas INTEGER NOT NULL,"
                              " live INTEGER NOT NULL);"
                              "CREATE TABLE ctl_change("
                              " id INTEGER PRIMARY KEY,"
                              " incarnation INTEGER NOT NULL,"
                              " step INTEGER NOT NULL,"
                              " at_ms INTEGER NOT NULL,"
                              " key TEXT NOT NULL,"
                              " base REAL NOT NULL,"
                              " value REAL NOT NULL);");
}
/* ---- end issue 26 -------------------------------------------------------- */

/* Schema 4: one migration; each issue's DDL in its own block above. */
static sr_err
migrate_3_4(sr_store *st)
{
    sr_err rc;

    /* ---- issue 24: cursor.  A worker's data cursor (opaque bytes, at most
     * SR_STORE_CURSOR_MAX), committed with the step its gradient went into;
     * NULL: none stored. */
    if ((rc = sr__store_exec(st, "ALTER TABLE worker ADD COLUMN cursor BLOB;")) != SR_OK) {
        return rc;
    }
    /* ---- end issue 24 */
    if ((rc = migrate_3_4_members(st)) != SR_OK) {
        return rc;
    }
    return migrate_3_4_elastic(st);
}

static const migration migrations[] = {
    {0, "create the schema", migrate_0_1},
    {1, "step log partitions", migrate_1_2},
    {2, "chunk checksums, store id, rollbacks", migrate_2_3},
    {3, "model packs (members); elastic: step replicas, ctl changes; worker cursors", migrate_3_4},
};

_Static_assert(sizeof(migrations) / sizeof(migrations[0]) == SR_STORE_SCHEMA_VERSION,
               "one migration per schema version");

static uint32_t
be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* The directory must be writable too: SQLite creates PATH-wal and PATH-shm
 * next to the file. */
static sr_err
check_dir_writable(sr_store *st)
{
    char dir[4096];

    if (sr__store_dirname(st->path, dir, sizeof(dir)) != SR_OK) {
        return sr__store_ret(st, SR_EINVAL);
    }
    if (access(dir, W_OK) != 0) {
        int e = errno;
        return sr__store_fail(st,
                              sr_err_from_errno(e, SR_ESTORE) == SR_ENOENT ? SR_ENOENT : SR_EACCES,
                              "%s: directory %s is not writable (needed for the WAL): %s", st->path,
                              dir, strerror(e));
    }
    return SR_OK;
}

static sr_err
create_file(sr_store *st, int *created)
{
    int fd = open(st->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

    if (fd < 0) {
        int e = errno;
        if (e == EEXIST) {
            return SR_OK; /* raced with another creator: treat as existing */
        }
        return sr__store_fail(st, sr_err_from_errno(e, SR_ESTORE),
                              "%s: cannot create the store: %s", st->path, strerror(e));
    }
    /* Exactly 0600 whatever the umask; SQLite gives PATH-wal, PATH-shm and
     * PATH-journal the database file's mode. */
    if (fchmod(fd, 0600) != 0) {
        int e = errno;
        close(fd);
        unlink(st->path);
        return sr__store_fail(st, sr_err_from_errno(e, SR_ESTORE), "%s: chmod 0600: %s", st->path,
                              strerror(e));
    }
    close(fd);
    *created = 1;
    return SR_OK;
}

/* The user_version a file carries (in its raw header or through SQLite):
 * ours or older is fine, a small number above ours a newer build's
 * (SR_EVERSION), anything else a damaged header (SR_ECORRUPT). */
static sr_err
check_version(sr_store *st, int64_t v, const char *where)
{
    if (v < 0 || v > SR_STORE_MAX_SCHEMA_VERSION) {
        return sr__store_fail(st, SR_ECORRUPT,
                              "%s: damaged header (%s): user_version %lld is not a schema "
                              "version (this build's is %d)",
                              st->path, where, (long long)v, SR_STORE_SCHEMA_VERSION);
    }
    if (v > SR_STORE_SCHEMA_VERSION) {
        return sr__store_fail(st, SR_EVERSION,
                              "%s: schema version %lld is newer than this build's %d", st->path,
                              (long long)v, SR_STORE_SCHEMA_VERSION);
    }
    return SR_OK;
}

/* PATH-wal's size before SQLite opens (and may create or replay) it: what
 * a rollback message says about the -wal (store_mark.c). */
static void
record_wal_size(sr_store *st)
{
    char        wal[4096 + 8];
    struct stat sb;

    snprintf(wal, sizeof(wal), "%s-wal", st->path);
    st->wal_size_at_open = stat(wal, &sb) == 0 ? (int64_t)sb.st_size : -1;
    snprintf(wal, sizeof(wal), "%s-shm", st->path);
    st->shm_at_open = stat(wal, &sb) == 0;
}

sr_err
sr__store_precheck(sr_store *st, int *created, int *empty)
{
    struct stat       sb;
    unsigned char     hdr[100];
    ssize_t           n;
    int               fd;
    sr_err            rc;
    static const char magic[16] = "SQLite format 3";

    *created = 0;
    *empty = 0;
    record_wal_size(st);
    if (stat(st->path, &sb) != 0) {
        int e = errno;
        if (e != ENOENT) {
            return sr__store_fail(st, sr_err_from_errno(e, SR_ESTORE), "%s: %s", st->path,
                                  strerror(e));
        }
        if (!st->opts.create) {
            return sr__store_fail(st, SR_ENOENT, "%s: no such store%s", st->path,
                                  st->opts.readonly ? "" : " (create not requested)");
        }
        /* Before creating anything: did a store live here? */
        if ((rc = sr__store_mark_precheck_missing(st)) != SR_OK) {
            return rc;
        }
        if ((rc = create_file(st, created)) != SR_OK) {
            return rc;
        }
        if (stat(st->path, &sb) != 0) {
            int e2 = errno;
            return sr__store_fail(st, sr_err_from_errno(e2, SR_ESTORE), "%s: %s", st->path,
                                  strerror(e2));
        }
    }
    if (!S_ISREG(sb.st_mode)) {
        return sr__store_fail(st, SR_ECORRUPT, "not a syncrep store: %s (not a regular file)",
                              st->path);
    }
    fd = open(st->path, (st->opts.readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return sr__store_fail(st, sr_err_from_errno(e, SR_ESTORE), "%s: cannot open%s: %s",
                              st->path, st->opts.readonly ? "" : " for writing", strerror(e));
    }
    n = pread(fd, hdr, sizeof(hdr), 0);
    close(fd);
    if (n < 0) {
        int e = errno;
        return sr__store_fail(st, SR_ESTORE, "%s: read header: %s", st->path, strerror(e));
    }
    if (!st->opts.readonly && (rc = check_dir_writable(st)) != SR_OK) {
        return rc;
    }
    if (n == 0) {
        /* Only a file this open created is a new store: an empty file found
         * at the path may be a store that lost its contents, and making a
         * new one there would hide that. */
        if (!*created) {
            return sr__store_fail(st, SR_ECORRUPT,
                                  "not a syncrep store: %s (empty file, 0 bytes%s)", st->path,
                                  st->opts.create ? "; remove it to create a new store there" : "");
        }
        *empty = 1;
        return SR_OK;
    }
    if (n < (ssize_t)sizeof(hdr)) {
        return sr__store_fail(st, SR_ECORRUPT,
                              "not a syncrep store: %s (not an SQLite database: %zd bytes, "
                              "shorter than its 100-byte header)",
                              st->path, n);
    }
    if (memcmp(hdr, magic, sizeof(magic)) != 0) {
        return sr__store_fail(st, SR_ECORRUPT,
                              "not a syncrep store: %s (not an SQLite database: the header's "
                              "magic string at offset 0 is wrong)",
                              st->path);
    }
    if (be32(hdr + 68) != SR_STORE_APP_ID) {
        return sr__store_fail(st, SR_ECORRUPT,
                              "not a syncrep store: %s (SQLite application_id 0x%08x, "
                              "want 0x%08x)",
                              st->path, be32(hdr + 68), SR_STORE_APP_ID);
    }
    if ((rc = check_version(st, (int32_t)be32(hdr + 60), "header")) != SR_OK) {
        return rc;
    }
    /* Text encoding (offset 56): syncrep writes UTF-8 only, and its text
     * handling (configs, names, the tensor cache's order) assumes it. */
    if (be32(hdr + 56) != 1 && be32(hdr + 56) != 0) {
        return sr__store_fail(st, SR_ECORRUPT,
                              "not a syncrep store: %s (text encoding %u, syncrep writes UTF-8)",
                              st->path, be32(hdr + 56));
    }
    return SR_OK;
}

/* The same identity questions, asked through SQLite (which sees the WAL). */
static sr_err
check_identity(sr_store *st, int64_t *version)
{
    sqlite3_stmt *s = NULL;
    int64_t       app = 0;
    sr_err        rc;
    int           r;

    if ((rc = sr__store_query_i64(st, "PRAGMA application_id", &app)) != SR_OK) {
        return rc;
    }
    if ((uint32_t)app != SR_STORE_APP_ID) {
        return sr__store_fail(st, SR_ECORRUPT, "not a syncrep store: %s (application_id 0x%08x)",
                              st->path, (unsigned)app);
    }
    if ((rc = sr__store_query_i64(st, "PRAGMA user_version", version)) != SR_OK) {
        return rc;
    }
    if ((rc = check_version(st, *version, "user_version")) != SR_OK) {
        return rc;
    }
    if (*version == 0) {
        return SR_OK; /* empty: migrate_0_1 checks that there are no tables */
    }
    r = sqlite3_prepare_v2(st->db, "SELECT value FROM meta WHERE key = 'format'", -1, &s, NULL);
    if (r != SQLITE_OK) {
        if ((r & 0xff) == SQLITE_ERROR) {
            return sr__store_fail(st, SR_ECORRUPT, "not a syncrep store: %s (no meta table)",
                                  st->path);
        }
        return sr__store_sqlerr(st, r, "read meta");
    }
    r = sqlite3_step(s);
    if (r == SQLITE_ROW) {
        const char *f = (const char *)sqlite3_column_text(s, 0);
        rc = f != NULL && strcmp(f, SR_STORE_FORMAT) == 0
                 ? SR_OK
                 : sr__store_fail(st, SR_ECORRUPT, "not a syncrep store: %s (meta format '%s')",
                                  st->path, f ? f : "");
    } else if (r == SQLITE_DONE) {
        rc = sr__store_fail(st, SR_ECORRUPT, "not a syncrep store: %s (meta has no format)",
                            st->path);
    } else {
        rc = sr__store_sqlerr(st, r, "read meta");
    }
    sqlite3_finalize(s);
    return rc;
}

static sr_err
quick_check(sr_store *st)
{
    sqlite3_stmt *s = NULL;
    int           r, nbad = 0;
    char          msg[768] = "";
    size_t        off = 0;

    if ((r = sqlite3_prepare_v2(st->db, "PRAGMA quick_check(8)", -1, &s, NULL)) != SQLITE_OK) {
        return sr__store_sqlerr(st, r, "quick_check");
    }
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        const char *line = (const char *)sqlite3_column_text(s, 0);
        if (line != NULL && strcmp(line, "ok") == 0) {
            continue;
        }
        nbad++;
        if (off < sizeof(msg)) {
            int w =
                snprintf(msg + off, sizeof(msg) - off, "%s%s", off ? "; " : "", line ? line : "?");
            off += w > 0 ? (size_t)w : 0;
        }
    }
    sqlite3_finalize(s);
    if (r != SQLITE_DONE) {
        return sr__store_sqlerr(st, r, "quick_check");
    }
    if (nbad > 0) {
        return sr__store_fail(st, SR_ECORRUPT, "%s: corrupt (quick_check): %s", st->path, msg);
    }
    return SR_OK;
}

/* Run migrations[v], v+1, ... up to this build's version, inside the
 * caller's write transaction. */
static sr_err
migrate_from(sr_store *st, int64_t v)
{
    sr_err rc = SR_OK;
    char   sql[64];

    for (; v < SR_STORE_SCHEMA_VERSION && rc == SR_OK; v++) {
        SR_ASSERT(migrations[v].from == v);
        rc = migrations[v].fn(st);
        if (rc == SR_OK) {
            snprintf(sql, sizeof(sql), "PRAGMA user_version = %lld", (long long)(v + 1));
            rc = sr__store_exec(st, sql);
        }
        if (rc != SR_OK) {
            char keep[512];
            snprintf(keep, sizeof(keep), "%s", sr_errdetail());
            sr_fail(rc, "%s: migration %lld -> %lld (%s) failed: %s", st->path, (long long)v,
                    (long long)(v + 1), migrations[v].what, keep);
            sr__store_ret(st, rc);
        }
    }
    return rc;
}

/* Every pending migration in one BEGIN IMMEDIATE transaction: a crash or a
 * failure in any step leaves the version the file had (a refused open
 * changes nothing, even when a later step finds a damaged page). */
static sr_err
migrate(sr_store *st)
{
    int64_t v = 0;
    sr_err  rc;

    if ((rc = sr__store_begin_write(st)) != SR_OK) {
        return rc;
    }
    /* Read inside the write lock: another process may have migrated. */
    if ((rc = sr__store_query_i64(st, "PRAGMA user_version", &v)) != SR_OK) {
        return sr__store_end(st, rc);
    }
    if (v > SR_STORE_SCHEMA_VERSION) {
        return sr__store_end(st, sr__store_fail(st, SR_EVERSION,
                                                "%s: schema version %lld is newer than this "
                                                "build's %d",
                                                st->path, (long long)v, SR_STORE_SCHEMA_VERSION));
    }
    return sr__store_end(st, migrate_from(st, v));
}

static sr_err
set_wal(sr_store *st)
{
    sqlite3_stmt *s = NULL;
    int           r;
    sr_err        rc = SR_OK;

    if ((r = sqlite3_prepare_v2(st->db, "PRAGMA journal_mode = WAL", -1, &s, NULL)) != SQLITE_OK) {
        return sr__store_sqlerr(st, r, "journal_mode");
    }
    r = sqlite3_step(s);
    if (r != SQLITE_ROW) {
        rc = sr__store_sqlerr(st, r, "journal_mode = WAL");
    } else if (sqlite3_stricmp((const char *)sqlite3_column_text(s, 0), "wal") != 0) {
        rc = sr__store_fail(st, SR_ESTORE, "%s: journal_mode stays '%s', WAL unavailable", st->path,
                            (const char *)sqlite3_column_text(s, 0));
    }
    sqlite3_finalize(s);
    return rc;
}

/* SQLite's default checkpoints every 1000 pages (64 MiB here).  Recycled
 * chunk versions rewrite the same pages every K commits, and a checkpoint
 * copies each page once however often the WAL holds it: a bigger WAL makes
 * the second write of WAL mode mostly disappear.  The WAL file keeps its
 * largest size while open (it is reused from the start, which is cheaper
 * than growing it) and is removed on a clean close.  Who runs the
 * checkpoint: store_ckpt.c.  Also records the usable page size, which the
 * commit's byte writes follow (store_chunk.c, sr__store_write_bytes). */
static sr_err
setup_checkpoints(sr_store *st)
{
    int64_t page = 0;
    sr_err  rc;

    if ((rc = sr__store_query_i64(st, "PRAGMA page_size", &page)) != SR_OK) {
        return rc;
    }
    /* -1: read the reserved bytes per page, change nothing. */
    int reserve = -1;
    if (sqlite3_file_control(st->db, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserve) != SQLITE_OK ||
        reserve < 0) {
        reserve = 0;
    }
    st->usable = page - reserve;
    st->page_size = page;
    return sr__store_ckpt_setup(st, page);
}

sr_err
sr__store_setup(sr_store *st, int empty)
{
    int64_t version = 0;
    sr_err  rc;
    char    sql[128];

    if (!empty) {
        if ((rc = check_identity(st, &version)) != SR_OK) {
            return rc;
        }
        if (!st->opts.skip_quick_check && (rc = quick_check(st)) != SR_OK) {
            return rc;
        }
    }
    /* The mark before any write (a refused rollback changes nothing). */
    if ((st->marked || st->opts.readonly) &&
        (rc = sr__store_mark_check(st, empty || version == 0)) != SR_OK) {
        return rc;
    }
    if (st->opts.readonly) {
        if (version < SR_STORE_SCHEMA_VERSION) {
            return sr__store_fail(st, SR_ENOTSUP,
                                  "%s: schema version %lld needs a migration to %d; open it "
                                  "read-write once",
                                  st->path, (long long)version, SR_STORE_SCHEMA_VERSION);
        }
        return SR_OK;
    }
    /* Connection settings.  secure_delete is compiled on in some builds; it
     * would zero every freed page (pruned versions) for nothing. */
    snprintf(sql, sizeof(sql), "PRAGMA secure_delete = OFF; PRAGMA synchronous = %s;",
             st->opts.sync == SR_STORE_SYNC_NORMAL ? "NORMAL" : "FULL");
    if ((rc = sr__store_exec(st, sql)) != SR_OK) {
        return rc;
    }
    /* At FULL a big commit's WAL writeback starts while its frames are
     * written, not at its fsync (store_vfs.c); an optimisation only. */
    int writeback = st->opts.sync == SR_STORE_SYNC_FULL;
    (void)sqlite3_file_control(st->db, "main", SR__FCNTL_WAL_WRITEBACK, &writeback);
    if (st->opts.max_page_count > 0) {
        snprintf(sql, sizeof(sql), "PRAGMA max_page_count = %lld",
                 (long long)st->opts.max_page_count);
        if ((rc = sr__store_exec(st, sql)) != SR_OK) {
            return rc;
        }
    }
    if (empty) {
        /* Only possible before the first table exists (and before WAL). */
        snprintf(sql, sizeof(sql), "PRAGMA page_size = %d", st->opts.page_size);
        if ((rc = sr__store_exec(st, sql)) != SR_OK) {
            return rc;
        }
    }
    if (version < SR_STORE_SCHEMA_VERSION && (rc = migrate(st)) != SR_OK) {
        return rc;
    }
    if ((rc = set_wal(st)) != SR_OK) {
        return rc;
    }
    return setup_checkpoints(st);
}
