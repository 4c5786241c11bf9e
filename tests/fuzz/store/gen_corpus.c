/*
 * Writes the store fuzz target's seed corpus (the checked-in
 * tests/fuzz/store/corpus/): small valid stores built with the store API
 * (variables of every dtype, a scalar, an empty tensor, multi-chunk tensors,
 * optimizer slots, sparse updates, workers, step log, several checkpoints,
 * incarnations with a config, a rewind), each in several open modes, then
 * damaged copies: truncated, header fields changed, b-tree pages garbled,
 * chunk blobs flipped, rows made inconsistent, foreign and empty files.
 *
 *     build/tests/fuzz/store/fuzz_store_gen_corpus tests/fuzz/store/corpus \
 *         [tests/fuzz/store/pending]
 *
 * corpus/fuzz-* are not written here: they are inputs libFuzzer found new
 * coverage with, kept when the seeds are regenerated (drop them after a
 * schema change).  With a second directory the generator also writes there
 * the crash-* reproducers of store bugs not fixed yet (pending/README); a
 * fix moves its file to corpus/ (and its line in emit_crashes() to the
 * corpus part).
 *
 * The store makes new files with 64 KiB pages; every store here is
 * rewritten with 512-byte pages (journal_mode=DELETE, page_size=512, VACUUM)
 * and its wall clock fields are set to fixed values, so the files are small
 * and running the generator again rewrites the same bytes.  File format: fuzz_store.h
 * (a mode byte, then the file).  Files named "valid-*" must open read-only
 * and verify clean (checked here and by tests/fuzz/replay.c).
 *
 * A test tool: unlike the target it includes sqlite3.h, to edit and damage
 * the stores.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "fuzz_store.h"
#include "store/store.h"

#define PAGE 512 /* page size of every seed (the smallest SQLite has) */

typedef struct {
    uint8_t *p;
    size_t   n;
} bytes;

static const char *outdir; /* where emit() writes: corpus/, or pending/ */
static char        work[4096];
static int         failed;
static int         written;
static size_t      total_bytes;

#define M_RO     0x00
#define M_RW     FUZZ_STORE_RW
#define M_COMMIT (FUZZ_STORE_RW | FUZZ_STORE_COMMIT)
#define M_ALL    (FUZZ_STORE_RW | FUZZ_STORE_COMMIT | FUZZ_STORE_REWIND | FUZZ_STORE_INCARNATION)
#define KEEP(k)  ((unsigned)((k)-1) << FUZZ_STORE_KEEP_SHIFT)

/* ---- small helpers --------------------------------------------------- */

static void
die(const char *what, const char *why)
{
    fprintf(stderr, "gen_corpus: %s: %s\n", what, why);
    exit(1);
}

static void
must(sr_err rc, const char *what)
{
    if (rc != SR_OK) {
        fprintf(stderr, "gen_corpus: %s: %s: %s\n", what, sr_errname(rc), sr_errdetail());
        exit(1);
    }
}

static void
wpath(char *buf, size_t len, const char *name)
{
    if (snprintf(buf, len, "%s/%s", work, name) >= (int)len) {
        die(name, "path too long");
    }
}

static void
unlink_store(const char *path)
{
    static const char *const sfx[] = {"", "-wal", "-shm", "-journal", "-mark"};
    char                     p[4200];

    for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", path, sfx[i]);
        unlink(p);
    }
}

static bytes
read_bytes(const char *path)
{
    FILE *f = fopen(path, "rb");
    bytes b = {NULL, 0};
    long  n = 0;

    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0) {
        die(path, strerror(errno));
    }
    if ((b.p = malloc(n > 0 ? (size_t)n : 1)) == NULL || fread(b.p, 1, (size_t)n, f) != (size_t)n) {
        die(path, "read");
    }
    fclose(f);
    b.n = (size_t)n;
    return b;
}

static void
write_bytes_to(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");

    if (f == NULL || (n > 0 && fwrite(p, 1, n, f) != n) || fclose(f) != 0) {
        die(path, strerror(errno));
    }
}

/* ---- emitting -------------------------------------------------------- */

/* Write mode byte + file as corpus file `name`.  valid-* must pass
 * fuzz_store_seed_ok, everything else must not (so a "bad" seed that the
 * store starts accepting is noticed too; a few seeds are damaged in ways
 * only reads see, and are named sem-*: not checked). */
static void
emit(const char *name, unsigned mode, const uint8_t *p, size_t n)
{
    char     path[4200];
    uint8_t *buf = malloc(n + 1);

    if (buf == NULL) {
        die(name, "malloc");
    }
    buf[0] = (uint8_t)mode;
    if (n > 0) {
        memcpy(buf + 1, p, n);
    }
    if (strncmp(name, "valid-", 6) == 0 && !fuzz_store_seed_ok(buf, n + 1)) {
        fprintf(stderr, "gen_corpus: %s: does not open and verify clean\n", name);
        failed = 1;
    }
    if (strncmp(name, "bad-", 4) == 0 && fuzz_store_seed_ok(buf, n + 1)) {
        fprintf(stderr, "gen_corpus: %s: opens and verifies clean\n", name);
        failed = 1;
    }
    if (snprintf(path, sizeof(path), "%s/%s", outdir, name) >= (int)sizeof(path)) {
        die(name, "path too long");
    }
    write_bytes_to(path, buf, n + 1);
    free(buf);
    written++;
    total_bytes += n + 1;
}

/* ---- SQLite edits ---------------------------------------------------- */

static sqlite3 *
db_open(const char *path)
{
    sqlite3 *db = NULL;

    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        die(path, db ? sqlite3_errmsg(db) : "sqlite3_open_v2");
    }
    return db;
}

static void
db_exec(sqlite3 *db, const char *sql)
{
    char *err = NULL;

    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "gen_corpus: %s: %s\n", sql, err ? err : "?");
        exit(1);
    }
}

static void
sql_edit(const char *path, const char *sql)
{
    sqlite3 *db = db_open(path);
    db_exec(db, sql);
    if (sqlite3_close(db) != SQLITE_OK) {
        die(path, "close");
    }
}

/* Fixed wall-clock fields, so the bytes do not depend on the time. */
static const char normalize_sql[] =
    "UPDATE meta SET value = 1700000000000 WHERE key = 'created_ms';"
    "UPDATE checkpoint SET created_ms = 1700000000000 + step;"
    "UPDATE incarnation SET started_ms = 1700000000000 + incarnation;"
    "UPDATE rewind SET at_ms = 1700000000000 + id;";

/* Rewrite the store with 512-byte pages in rollback mode (wal: then switched to
 * WAL, which only changes two header bytes) and read it back. */
static bytes
finish(const char *path, int wal)
{
    sqlite3 *db = db_open(path);

    db_exec(db, "PRAGMA journal_mode=DELETE; PRAGMA page_size=512; VACUUM;");
    if (wal) {
        db_exec(db, "PRAGMA journal_mode=WAL;");
    }
    if (sqlite3_close(db) != SQLITE_OK) {
        die(path, "close");
    }
    return read_bytes(path);
}

/* ---- stores built with the API --------------------------------------- */

typedef enum {
    STORE_BASIC, /* everything: see build() */
    STORE_FRESH, /* variables declared, not ready, no checkpoint */
    STORE_EMPTY, /* created, nothing in it */
} store_kind;

static void
fill_f32(float *p, size_t n, float base)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = base + (float)i * 0.5f;
    }
}

static void
build(const char *path, store_kind kind, int keep)
{
    sr_store        *st = NULL;
    sr_store_opts    o;
    int64_t          kernel, bias, scale, emb, empty, counter, late;
    const int64_t    s_kernel[2] = {4, 8}, s_bias[1] = {8}, s_emb[2] = {16, 4};
    const int64_t    s_empty[2] = {3, 0}, s_counter[1] = {5}, s_late[1] = {2};
    float            k[32], b[8], mom[32], late_v[2] = {1.0f, 2.0f};
    double           sc = 0.25;
    int64_t          e[64], adam[64];
    int32_t          cnt[5];
    uint64_t         inc = 0;
    uint8_t          dirty[8];
    sr_store_tensor  t[8];
    sr_store_worker  w[3];
    sr_store_contrib log[4];
    sr_store_commit  c;

    unlink_store(path);
    memset(&o, 0, sizeof(o));
    o.create = 1;
    o.sync = SR_STORE_SYNC_NORMAL;
    o.chunk_bytes = 64; /* several chunks per tensor */
    o.keep_checkpoints = keep;
    must(sr_store_open(path, &o, &st), "open");
    if (kind == STORE_EMPTY) {
        sr_store_close(st);
        return;
    }
    fill_f32(k, 32, 0.5f);
    for (int i = 0; i < 64; i++) {
        e[i] = (int64_t)i * 1000003;
    }
    must(sr_store_declare(st, "dense/kernel", SR_FLOAT32, 2, s_kernel, 1, k, sizeof(k), &kernel,
                          NULL),
         "declare kernel");
    must(sr_store_declare(st, "dense/bias", SR_FLOAT32, 1, s_bias, 1, NULL, 0, &bias, NULL),
         "declare bias");
    must(sr_store_declare(st, "lr_scale", SR_FLOAT64, 0, NULL, 0, &sc, sizeof(sc), &scale, NULL),
         "declare scale");
    must(sr_store_declare(st, "embedding", SR_INT64, 2, s_emb, 1, e, sizeof(e), &emb, NULL),
         "declare embedding");
    must(sr_store_declare(st, "empty", SR_INT32, 2, s_empty, 1, NULL, 0, &empty, NULL),
         "declare empty");
    must(sr_store_declare(st, "counter", SR_INT32, 1, s_counter, 0, NULL, 0, &counter, NULL),
         "declare counter");
    if (kind == STORE_FRESH) {
        sr_store_close(st);
        return;
    }
    must(sr_store_set_ready(st), "ready");
    must(sr_store_new_incarnation(st, &inc), "incarnation");
    must(sr_store_set_config(st, "{\"replicas_to_aggregate\":2,\"total_replicas\":3}"), "config");
    (void)empty;
    late = -1;
    int rewound = 0;
    for (int64_t g = 1; g <= 6; g++) {
        size_t nt = 0;
        fill_f32(k, 32, (float)g);
        fill_f32(mom, 32, (float)g * 0.125f);
        fill_f32(b, 8, -(float)g);
        for (int i = 0; i < 64; i++) {
            e[i] += g;
            adam[i] = g * 7 + i;
        }
        for (int i = 0; i < 5; i++) {
            cnt[i] = (int32_t)(0x11111111u * (unsigned)(i + 1)) + (int32_t)g;
        }
        memset(dirty, 0, sizeof(dirty));
        dirty[g % 8] = 1;
        dirty[(g + 3) % 8] = 1;
        t[nt++] = (sr_store_tensor){kernel, NULL, k, sizeof(k), NULL};
        t[nt++] = (sr_store_tensor){kernel, "momentum", mom, sizeof(mom), NULL};
        t[nt++] = (sr_store_tensor){bias, "", b, sizeof(b), NULL};
        t[nt++] = (sr_store_tensor){emb, NULL, e, sizeof(e), dirty};
        if (g >= 2) {
            t[nt++] = (sr_store_tensor){emb, "adam_m", adam, sizeof(adam), dirty};
        }
        if (g % 2 == 0) {
            t[nt++] = (sr_store_tensor){counter, NULL, cnt, sizeof(cnt), NULL};
        }
        for (int i = 0; i < 3; i++) {
            w[i] = (sr_store_worker){.task_index = i,
                                     .local_step = g - (i == 2),
                                     .last_seen_ms = 1700000000000 + g * 10 + i,
                                     .incarnation = inc};
        }
        log[0] = (sr_store_contrib){g - 1, kernel, 0, 0, 0, g - 1};
        log[1] = (sr_store_contrib){g - 1, kernel, 0, 1, 1, g - 1};
        log[2] = (sr_store_contrib){g - 1, bias, 0, 0, 1, g - 1};
        log[3] = (sr_store_contrib){g - 1, emb, 0, 0, 2, g - 2};
        memset(&c, 0, sizeof(c));
        c.global_step = g;
        c.tensors = t;
        c.ntensors = nt;
        c.workers = w;
        c.nworkers = 3;
        c.log = log;
        c.nlog = 4;
        must(sr_store_commit_step(st, &c), "commit");
        if (g == 5 && !rewound) {
            /* Back to the oldest retained step, in a new incarnation, and
             * on from there. */
            int64_t *ck = NULL;
            size_t   nck = 0;
            must(sr_store_list_checkpoints(st, &ck, &nck), "checkpoints");
            int64_t to = ck[0];
            free(ck);
            must(sr_store_new_incarnation(st, &inc), "incarnation 2");
            must(sr_store_rewind(st, to), "rewind");
            rewound = 1;
            g = to;
        } else if (rewound && late < 0 && g >= 5) {
            /* Declared after the older retained checkpoints. */
            must(sr_store_declare(st, "late/var", SR_FLOAT32, 1, s_late, 1, late_v, sizeof(late_v),
                                  &late, NULL),
                 "declare late");
        }
    }
    sr_store_close(st);
}

/* A store of `kind` (keep checkpoints), normalized, with `sql` applied (may
 * be NULL), shrunk; `wal` as in finish(). */
static bytes
make(store_kind kind, int keep, const char *sql, int wal)
{
    char path[4200];

    wpath(path, sizeof(path), "seed.db");
    build(path, kind, keep);
    sql_edit(path, normalize_sql);
    if (sql != NULL) {
        sql_edit(path, sql);
    }
    bytes b = finish(path, wal);
    unlink_store(path);
    return b;
}

/* A plain SQLite file (not made by the store) from `sql`. */
static bytes
make_sqlite(const char *sql)
{
    char     path[4200];
    sqlite3 *db;

    wpath(path, sizeof(path), "plain.db");
    unlink_store(path);
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        die(path, "create");
    }
    db_exec(db, "PRAGMA page_size=512;");
    db_exec(db, sql);
    sqlite3_close(db);
    bytes b = read_bytes(path);
    unlink_store(path);
    return b;
}

/* The basic store re-encoded in UTF-16le (SQLite cannot ATTACH across
 * encodings, so rows are copied value by value), with `sql` applied to the
 * copy.  A legitimate SQLite file with the store's schema and contents. */
static bytes
make_utf16(const char *sql)
{
    char          src_path[4200], dst_path[4200];
    sqlite3      *src, *dst;
    sqlite3_stmt *q, *tables;

    wpath(src_path, sizeof(src_path), "utf8.db");
    wpath(dst_path, sizeof(dst_path), "utf16.db");
    build(src_path, STORE_BASIC, 3);
    sql_edit(src_path, normalize_sql);
    unlink_store(dst_path);
    src = db_open(src_path);
    if (sqlite3_open_v2(dst_path, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        die(dst_path, "create");
    }
    db_exec(dst, "PRAGMA encoding='UTF-16le'; PRAGMA page_size=512; BEGIN;");
    /* Tables, then indexes, then triggers, each in creation order. */
    if (sqlite3_prepare_v2(src,
                           "SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL AND name NOT"
                           " LIKE 'sqlite_%' ORDER BY type = 'table' DESC, type = 'index' DESC,"
                           " rowid",
                           -1, &q, NULL) != SQLITE_OK) {
        die(src_path, sqlite3_errmsg(src));
    }
    while (sqlite3_step(q) == SQLITE_ROW) {
        db_exec(dst, (const char *)sqlite3_column_text(q, 0));
    }
    sqlite3_finalize(q);
    if (sqlite3_prepare_v2(src,
                           "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY"
                           " name = 'sqlite_sequence', rowid",
                           -1, &tables, NULL) != SQLITE_OK) {
        die(src_path, sqlite3_errmsg(src));
    }
    while (sqlite3_step(tables) == SQLITE_ROW) {
        char          sel[256], ins[512];
        const char   *name = (const char *)sqlite3_column_text(tables, 0);
        sqlite3_stmt *r, *w;
        int           ncol, off;

        snprintf(sel, sizeof(sel), "SELECT * FROM \"%s\"", name);
        if (sqlite3_prepare_v2(src, sel, -1, &r, NULL) != SQLITE_OK) {
            die(sel, sqlite3_errmsg(src));
        }
        ncol = sqlite3_column_count(r);
        off = snprintf(ins, sizeof(ins), "INSERT INTO \"%s\" VALUES (", name);
        for (int i = 0; i < ncol; i++) {
            off += snprintf(ins + off, sizeof(ins) - (size_t)off, "%s?", i ? "," : "");
        }
        snprintf(ins + off, sizeof(ins) - (size_t)off, ")");
        if (sqlite3_prepare_v2(dst, ins, -1, &w, NULL) != SQLITE_OK) {
            die(ins, sqlite3_errmsg(dst));
        }
        while (sqlite3_step(r) == SQLITE_ROW) {
            for (int i = 0; i < ncol; i++) {
                sqlite3_bind_value(w, i + 1, sqlite3_column_value(r, i));
            }
            if (sqlite3_step(w) != SQLITE_DONE) {
                die(ins, sqlite3_errmsg(dst));
            }
            sqlite3_reset(w);
        }
        sqlite3_finalize(w);
        sqlite3_finalize(r);
    }
    sqlite3_finalize(tables);
    db_exec(dst, "COMMIT;");
    {
        char pragmas[128];
        snprintf(pragmas, sizeof(pragmas), "PRAGMA application_id=%d; PRAGMA user_version=%d;",
                 0x53524550, SR_STORE_SCHEMA_VERSION);
        db_exec(dst, pragmas);
    }
    if (sql != NULL) {
        db_exec(dst, sql);
    }
    sqlite3_close(src);
    sqlite3_close(dst);
    unlink_store(src_path);
    bytes b = read_bytes(dst_path);
    unlink_store(dst_path);
    return b;
}

/* ---- raw damage ------------------------------------------------------ */

static uint32_t
get_be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void
put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* `b` with bytes [off, off+n) replaced by v[0..n). */
static void
emit_poke(const char *name, unsigned mode, const bytes *b, size_t off, const uint8_t *v, size_t n)
{
    uint8_t *c = malloc(b->n);

    if (c == NULL || off + n > b->n) {
        die(name, "poke out of range");
    }
    memcpy(c, b->p, b->n);
    memcpy(c + off, v, n);
    emit(name, mode, c, b->n);
    free(c);
}

static void
emit_poke1(const char *name, unsigned mode, const bytes *b, size_t off, uint8_t v)
{
    emit_poke(name, mode, b, off, &v, 1);
}

static void
emit_poke32(const char *name, unsigned mode, const bytes *b, size_t off, uint32_t v)
{
    uint8_t x[4];
    put_be32(x, v);
    emit_poke(name, mode, b, off, x, 4);
}

/* Root page of each table of the (512-byte page) store in `b`. */
typedef struct {
    char     name[64];
    uint32_t root;
} root;

static size_t
table_roots(const bytes *b, root *out, size_t cap)
{
    char          path[4200];
    sqlite3      *db;
    sqlite3_stmt *q;
    size_t        n = 0;

    wpath(path, sizeof(path), "roots.db");
    unlink_store(path);
    write_bytes_to(path, b->p, b->n);
    db = db_open(path);
    if (sqlite3_prepare_v2(db,
                           "SELECT name, rootpage FROM sqlite_schema WHERE type = 'table' AND"
                           " rootpage > 0 ORDER BY name",
                           -1, &q, NULL) != SQLITE_OK) {
        die(path, sqlite3_errmsg(db));
    }
    while (n < cap && sqlite3_step(q) == SQLITE_ROW) {
        snprintf(out[n].name, sizeof(out[n].name), "%s", (const char *)sqlite3_column_text(q, 0));
        out[n].root = (uint32_t)sqlite3_column_int(q, 1);
        n++;
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    unlink_store(path);
    return n;
}

/* Garble the b-tree page `pgno` (its header starts at 100 on page 1): the
 * page type, the cell count and a byte of the last cell written, and with
 * `all` also the first freeblock, the content start and a cell pointer. */
static void
emit_btree(const char *table, unsigned mode, const bytes *b, uint32_t pgno, int all)
{
    char   name[160];
    size_t page = (size_t)(pgno - 1) * PAGE, hdr = page + (pgno == 1 ? 100 : 0);

    if (page + PAGE > b->n) {
        return;
    }
    /* 0x0d table leaf, 0x05 table interior, 0x0a index leaf, 0x02 index
     * interior: type 0x00 is none of them. */
    snprintf(name, sizeof(name), "bad-btree-%s-type", table);
    emit_poke1(name, mode, b, hdr, 0x00);
    snprintf(name, sizeof(name), "sem-btree-%s-ncells", table);
    emit_poke(name, mode, b, hdr + 3, (const uint8_t[]){0x7f, 0xff}, 2);
    snprintf(name, sizeof(name), "sem-btree-%s-cell-byte", table);
    emit_poke1(name, mode, b, page + PAGE - 7, (uint8_t)(b->p[page + PAGE - 7] ^ 0x40));
    if (!all) {
        return;
    }
    snprintf(name, sizeof(name), "sem-btree-%s-type-index", table);
    emit_poke1(name, mode, b, hdr, b->p[hdr] == 0x0d ? 0x0a : 0x0d);
    snprintf(name, sizeof(name), "sem-btree-%s-freeblock", table);
    emit_poke(name, mode, b, hdr + 1, (const uint8_t[]){0x01, 0xf0}, 2);
    snprintf(name, sizeof(name), "sem-btree-%s-content-start", table);
    emit_poke(name, mode, b, hdr + 5, (const uint8_t[]){0x00, 0x09}, 2);
    /* The first cell pointer (after an 8- or 12-byte header). */
    size_t cp = hdr + (b->p[hdr] == 0x05 || b->p[hdr] == 0x02 ? 12 : 8);
    snprintf(name, sizeof(name), "sem-btree-%s-cellptr", table);
    emit_poke(name, mode, b, cp, (const uint8_t[]){0x01, 0xfe}, 2);
}

static size_t
find(const bytes *b, const uint8_t *pat, size_t n)
{
    for (size_t i = 0; i + n <= b->n; i++) {
        if (memcmp(b->p + i, pat, n) == 0) {
            return i;
        }
    }
    return SIZE_MAX;
}

/* ---- the corpus ------------------------------------------------------ */

static void
emit_valid(void)
{
    bytes b;

    b = make(STORE_BASIC, 3, NULL, 0);
    emit("valid-basic-ro", M_RO, b.p, b.n);
    emit("valid-basic-rw", M_RW, b.p, b.n);
    emit("valid-basic-commit", M_COMMIT | KEEP(3), b.p, b.n);
    emit("valid-basic-commit-rewind", M_COMMIT | FUZZ_STORE_REWIND | KEEP(3), b.p, b.n);
    emit("valid-basic-all-keep1", M_ALL | KEEP(1), b.p, b.n);
    emit("valid-basic-all-keep4-normal", M_ALL | KEEP(4) | FUZZ_STORE_SYNC_NORMAL, b.p, b.n);
    free(b.p);

    b = make(STORE_BASIC, 3, NULL, 1);
    emit("valid-basic-wal-ro", M_RO, b.p, b.n);
    emit("valid-basic-wal-all", M_ALL | KEEP(3), b.p, b.n);
    free(b.p);

    b = make(STORE_BASIC, 1, NULL, 0);
    emit("valid-keep1-ro", M_RO, b.p, b.n);
    emit("valid-keep1-all", M_ALL | KEEP(1), b.p, b.n);
    free(b.p);

    b = make(STORE_FRESH, 3, NULL, 0);
    emit("valid-fresh-ro", M_RO, b.p, b.n);
    emit("valid-fresh-all", M_ALL | KEEP(2), b.p, b.n);
    free(b.p);

    b = make(STORE_EMPTY, 3, NULL, 0);
    emit("valid-empty-store-ro", M_RO, b.p, b.n);
    emit("valid-empty-store-all", M_ALL | KEEP(3), b.p, b.n);
    free(b.p);

    /* A chunk's bytes changed: the store opens, but the chunk's checksum
     * (schema 3) refuses its reads, and verify reports it.  The counter's
     * last value is 0x11111111*(i+1) + 6. */
    b = make(STORE_BASIC, 3, NULL, 0);
    uint8_t pat[8];
    for (int i = 0; i < 2; i++) {
        int32_t v = (int32_t)(0x11111111u * (unsigned)(i + 1)) + 6;
        memcpy(pat + 4 * i, &v, 4);
    }
    size_t at = find(&b, pat, sizeof(pat));
    if (at == SIZE_MAX) {
        die("bad-chunk-bitflip", "counter bytes not found");
    }
    emit_poke1("bad-chunk-bitflip-ro", M_RO, &b, at + 2, (uint8_t)(b.p[at + 2] ^ 0x10));
    emit_poke1("bad-chunk-bitflip-all", M_ALL | KEEP(3), &b, at + 2, (uint8_t)(b.p[at + 2] ^ 0x10));
    /* The bytes just before the blob: its record header (serial type). */
    emit_poke1("sem-chunk-record-header", M_RO, &b, at - 1, (uint8_t)(b.p[at - 1] ^ 0x04));
    emit_poke1("sem-chunk-record-header-rw", M_ALL, &b, at - 1, (uint8_t)(b.p[at - 1] ^ 0x04));
    free(b.p);

    /* Re-encoded in UTF-16 (ASCII config): opens and verifies clean. */
    b = make_utf16(NULL);
    /* Refused at open since the store accepts UTF-8 files only. */
    emit("sem-utf16le-ro", M_RO, b.p, b.n);
    emit("sem-utf16le-commit", M_COMMIT | FUZZ_STORE_REWIND | KEEP(3), b.p, b.n);
    free(b.p);
}

static void
emit_header_damage(void)
{
    bytes b = make(STORE_BASIC, 3, NULL, 0);

    /* Truncations. */
    emit("bad-trunc-0-bytes", M_RO, b.p, 0);
    emit("bad-trunc-99", M_RO, b.p, 99);
    emit("bad-trunc-100", M_RO, b.p, 100);
    emit("bad-trunc-100-rw", M_RW, b.p, 100);
    emit("bad-trunc-1-page", M_RO, b.p, PAGE);
    emit("bad-trunc-half", M_RO, b.p, b.n / 2 / PAGE * PAGE);
    emit("bad-trunc-half-rw", M_ALL, b.p, b.n / 2 / PAGE * PAGE);
    emit("bad-trunc-last-page", M_RO, b.p, b.n - PAGE);
    emit("bad-trunc-last-page-rw", M_ALL, b.p, b.n - PAGE);
    emit("sem-trunc-1-byte", M_RO, b.p, b.n - 1);
    emit("bad-trunc-mid-page", M_RW, b.p, b.n - PAGE / 2);

    /* The 100-byte header. */
    emit_poke1("bad-header-magic", M_RO, &b, 0, 'X');
    emit_poke1("bad-header-magic-nul", M_RW, &b, 15, 'x');
    emit_poke("bad-header-pagesize-768", M_RO, &b, 16, (const uint8_t[]){0x03, 0x00}, 2);
    emit_poke("bad-header-pagesize-65536", M_RO, &b, 16, (const uint8_t[]){0x00, 0x01}, 2);
    emit_poke("bad-header-pagesize-1024", M_RW, &b, 16, (const uint8_t[]){0x04, 0x00}, 2);
    emit_poke1("sem-header-write-version-3", M_RW, &b, 18, 3);
    emit_poke1("sem-header-read-version-3", M_RO, &b, 19, 3);
    emit_poke1("sem-header-reserved-32", M_RO, &b, 20, 32);
    emit_poke1("sem-header-max-payload", M_RO, &b, 21, 32);
    emit_poke32("sem-header-change-counter", M_ALL, &b, 24, 0xdeadbeef);
    emit_poke32("sem-header-dbsize-huge", M_RO, &b, 28, 0x7fffffff);
    emit_poke32("sem-header-dbsize-huge-rw", M_ALL, &b, 28, 0x7fffffff);
    emit_poke32("sem-header-dbsize-1", M_RO, &b, 28, 1);
    emit_poke32("sem-header-freelist-trunk", M_ALL, &b, 32, 3);
    emit_poke32("sem-header-freelist-count", M_ALL, &b, 36, 1000);
    emit_poke32("sem-header-schema-cookie", M_RO, &b, 40, 0x12345);
    emit_poke32("sem-header-schema-format-5", M_RO, &b, 44, 5);
    emit_poke32("sem-header-autovacuum", M_RW, &b, 52, 2);
    emit_poke32("sem-header-encoding-utf16le", M_RO, &b, 56, 2);
    emit_poke32("sem-header-encoding-utf16be", M_RW, &b, 56, 3);
    emit_poke32("sem-header-encoding-0", M_RO, &b, 56, 0);
    emit_poke32("bad-header-user-version-newer", M_RO, &b, 60, SR_STORE_SCHEMA_VERSION + 1);
    emit_poke32("bad-header-user-version-newer-rw", M_ALL, &b, 60, SR_STORE_SCHEMA_VERSION + 1);
    emit_poke32("bad-header-user-version-absurd", M_RW, &b, 60, 5000);
    emit_poke32("bad-header-user-version-max", M_RO, &b, 60, 0xffffffff);
    emit_poke32("bad-header-user-version-0", M_RO, &b, 60, 0);
    emit_poke32("bad-header-user-version-0-rw", M_RW, &b, 60, 0);
    emit_poke32("sem-header-incremental-vacuum", M_RW, &b, 64, 1);
    emit_poke32("bad-header-appid", M_RO, &b, 68, 0x12345678);
    emit_poke32("bad-header-appid-rw", M_ALL, &b, 68, 0x12345678);
    emit_poke32("bad-header-appid-0", M_RO, &b, 68, 0);
    emit_poke32("sem-header-version-valid-for", M_RW, &b, 92, get_be32(b.p + 92) + 1);

    /* B-tree pages of every table. */
    root   r[32];
    size_t nr = table_roots(&b, r, 32);
    emit_btree("sqlite_schema", M_RO, &b, 1, 1);
    emit_btree("sqlite_schema-rw", M_ALL, &b, 1, 0);
    for (size_t i = 0; i < nr; i++) {
        int main_table = strcmp(r[i].name, "variable") == 0 || strcmp(r[i].name, "chunk") == 0;
        emit_btree(r[i].name, strcmp(r[i].name, "chunk_data") == 0 ? M_ALL : M_RO, &b, r[i].root,
                   main_table);
    }
    /* The last page (chunk blobs or an index). */
    emit_btree("last-page", M_RO, &b, (uint32_t)(b.n / PAGE), 0);
    free(b.p);
}

/* A store whose rows were edited with SQL (as a foreign tool or bit rot
 * could), named and opened with `mode`. */
static void
emit_sql(const char *name, unsigned mode, const char *sql)
{
    bytes b = make(STORE_BASIC, 3, sql, 0);
    emit(name, mode, b.p, b.n);
    free(b.p);
}

static void
emit_row_damage(void)
{
    /* Identity. */
    emit_sql("bad-meta-format-other", M_RO, "UPDATE meta SET value = 'other' WHERE key = 'format'");
    emit_sql("bad-meta-no-format", M_RW, "DELETE FROM meta WHERE key = 'format'");
    emit_sql("bad-no-meta-table", M_RO, "DROP TABLE meta");
    emit_sql("bad-appid-pragma", M_RW, "PRAGMA application_id = 1");
    char newer[64];
    snprintf(newer, sizeof(newer), "PRAGMA user_version = %d", SR_STORE_SCHEMA_VERSION + 1);
    emit_sql("bad-user-version-pragma-newer", M_RW, newer);
    emit_sql("bad-user-version-pragma-negative", M_RW, "PRAGMA user_version = -7");
    emit_sql("bad-user-version-pragma-0", M_RO, "PRAGMA user_version = 0");

    /* meta values. */
    emit_sql("bad-meta-no-global-step", M_ALL, "DELETE FROM meta WHERE key = 'global_step'");
    emit_sql("bad-meta-global-step-text", M_ALL,
             "UPDATE meta SET value = 'six' WHERE key = 'global_step'");
    emit_sql("bad-meta-global-step-ahead", M_ALL,
             "UPDATE meta SET value = 9 WHERE key = 'global_step'");
    emit_sql("bad-meta-no-incarnation", M_ALL, "DELETE FROM meta WHERE key = 'incarnation'");
    emit_sql("bad-no-checkpoints-ready", M_ALL, "DELETE FROM checkpoint");
    emit_sql("valid-meta-config-json-unicode", M_RO,
             "UPDATE meta SET value = '{\"name\":\"caf\xc3\xa9 \xe4\xb8\xad\"}'"
             " WHERE key = 'config'");
    emit_sql("valid-incarnation-config-unicode", M_RO,
             "UPDATE incarnation SET config = '{\"name\":\"\xe4\xb8\xad\xe6\x96\x87\"}'");
    emit_sql("valid-incarnation-config-blob", M_RO, "UPDATE incarnation SET config = x'7b7d00ff'");
    emit_sql("valid-incarnation-config-real", M_RO, "UPDATE incarnation SET config = 1.5e300");
    emit_sql("valid-no-config", M_ALL,
             "DELETE FROM meta WHERE key = 'config'; UPDATE incarnation SET config = ''");

    /* Variable rows. */
    emit_sql("bad-var-shape-text", M_ALL,
             "UPDATE variable SET shape = '[4,x]' WHERE name = 'dense/kernel'");
    emit_sql("bad-var-shape-9-dims", M_RO,
             "UPDATE variable SET shape = '[1,1,1,1,1,1,1,1,8]', ndim = 9"
             " WHERE name = 'dense/bias'");
    emit_sql("bad-var-shape-negative", M_RO,
             "UPDATE variable SET shape = '[-8]' WHERE name = 'dense/bias'");
    emit_sql("bad-var-nbytes", M_ALL, "UPDATE variable SET nbytes = 64 WHERE name = 'dense/bias'");
    emit_sql("bad-var-ndim", M_RO, "UPDATE variable SET ndim = 3 WHERE name = 'dense/kernel'");
    emit_sql("bad-var-chunk-bytes-0", M_RO,
             "UPDATE variable SET chunk_bytes = 0 WHERE name = 'embedding'");
    emit_sql("bad-var-chunk-bytes-odd", M_ALL,
             "UPDATE variable SET chunk_bytes = 6 WHERE name = 'dense/kernel'");
    emit_sql("bad-var-chunk-bytes-huge", M_RO,
             "UPDATE variable SET chunk_bytes = 1073741824 WHERE name = 'embedding'");
    emit_sql("bad-var-dtype-99", M_RO, "UPDATE variable SET dtype = 99 WHERE name = 'counter'");
    emit_sql("bad-var-long-name", M_RO,
             "UPDATE variable SET name = printf('%.300c', 'n') WHERE name = 'counter'");
    emit_sql("bad-var-chunk-size-changed", M_ALL,
             "UPDATE variable SET chunk_bytes = 32 WHERE name = 'embedding'");
    emit_sql("valid-var-created-later", M_ALL,
             "UPDATE variable SET created_step = 100 WHERE name = 'dense/bias'");

    /* Chunks and tensors. */
    emit_sql("bad-chunk-missing", M_ALL,
             "DELETE FROM chunk WHERE idx = 0 AND tensor_id = (SELECT id FROM tensor WHERE"
             " slot = '' AND var_id = (SELECT id FROM variable WHERE name = 'dense/kernel'))");
    emit_sql("bad-chunk-short", M_ALL,
             "UPDATE chunk_data SET data = zeroblob(3) WHERE id = (SELECT max(id) FROM"
             " chunk_data)");
    emit_sql("bad-chunk-stray-idx", M_RO,
             "INSERT INTO chunk_data(id, data) VALUES (9999, zeroblob(4));"
             " INSERT INTO chunk(tensor_id, idx, step, data_id) VALUES (1, 99, 6, 9999)");
    emit_sql("bad-chunk-after-step", M_ALL,
             "UPDATE chunk SET step = 100 WHERE data_id = (SELECT max(data_id) FROM chunk)");
    emit_sql("bad-chunk-orphan-data", M_ALL,
             "INSERT INTO chunk_data(id, data) VALUES (9999, x'00')");
    emit_sql("bad-chunk-no-tensor", M_RO,
             "INSERT INTO chunk_data(id, data) VALUES (9999, zeroblob(4));"
             " INSERT INTO chunk(tensor_id, idx, step, data_id) VALUES (999, 0, 6, 9999)");
    emit_sql("sem-chunk-data-text-ascii", M_ALL,
             "UPDATE chunk_data SET data = 'abcdefgh' WHERE id IN (SELECT data_id FROM chunk"
             " WHERE tensor_id = (SELECT id FROM tensor WHERE slot = '' AND var_id = (SELECT id"
             " FROM variable WHERE name = 'lr_scale')))");
    emit_sql("bad-chunk-data-text", M_ALL,
             "UPDATE chunk_data SET data = 'not a blob' WHERE id = (SELECT max(id) FROM"
             " chunk_data)");
    emit_sql("bad-tensor-no-var", M_RO,
             "INSERT INTO tensor(var_id, slot, created_step) VALUES (999, '', 0)");
    emit_sql("bad-var-no-value-tensor", M_ALL,
             "DELETE FROM tensor WHERE slot = '' AND var_id = (SELECT id FROM variable WHERE"
             " name = 'dense/bias')");
    emit_sql("valid-slot-created-later", M_ALL,
             "UPDATE tensor SET created_step = 6 WHERE slot = 'adam_m'");

    /* Other tables. */
    emit_sql("valid-workers-odd-values", M_ALL,
             "UPDATE worker SET local_step = 'abc', last_seen_ms = 1.5, incarnation = -1");
    emit_sql("valid-log-many", M_ALL,
             "INSERT INTO step_log SELECT step + 1000, var_id, part, pos, task_index, local_step"
             " FROM step_log");
    emit_sql("valid-rewinds-many", M_RO,
             "INSERT INTO rewind(incarnation, from_step, to_step, at_ms) SELECT incarnation,"
             " from_step + 10, to_step, at_ms FROM rewind; INSERT INTO rewind(incarnation,"
             " from_step, to_step, at_ms) SELECT incarnation, from_step, to_step, at_ms FROM"
             " rewind");
    emit_sql("valid-incarnations-many", M_ALL,
             "INSERT INTO incarnation SELECT incarnation + 10, restored_step, started_ms,"
             " config || config FROM incarnation");
}

static void
emit_foreign(void)
{
    bytes b;
    char  sql[256];

    b = make_sqlite("CREATE TABLE t(x); INSERT INTO t VALUES (1);");
    emit("bad-foreign-sqlite", M_RO, b.p, b.n);
    emit("bad-foreign-sqlite-rw", M_RW, b.p, b.n);
    free(b.p);

    snprintf(sql, sizeof(sql), "PRAGMA application_id = %d; CREATE TABLE t(x);", 0x53524550);
    b = make_sqlite(sql);
    emit("bad-appid-v0-with-table", M_RO, b.p, b.n);
    emit("bad-appid-v0-with-table-rw", M_RW, b.p, b.n);
    free(b.p);

    /* Our application_id, version 0 and no tables: the empty state;
     * read-write migrates it (read-only: SR_ENOTSUP). */
    snprintf(sql, sizeof(sql), "PRAGMA application_id = %d; CREATE TABLE t(x); DROP TABLE t;",
             0x53524550);
    b = make_sqlite(sql);
    emit("bad-appid-v0-empty-ro", M_RO, b.p, b.n);
    emit("sem-appid-v0-empty-rw", M_ALL, b.p, b.n);
    free(b.p);

    snprintf(sql, sizeof(sql),
             "PRAGMA application_id = %d; PRAGMA user_version = 1; CREATE TABLE t(x);", 0x53524550);
    b = make_sqlite(sql);
    emit("bad-appid-v1-no-meta", M_RO, b.p, b.n);
    free(b.p);

    snprintf(sql, sizeof(sql),
             "PRAGMA application_id = %d; PRAGMA user_version = 1;"
             " CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;"
             " INSERT INTO meta VALUES ('format', 'syncrep-store');",
             0x53524550);
    b = make_sqlite(sql);
    emit("sem-meta-only", M_ALL, b.p, b.n);
    free(b.p);

    static const char text[] = "this is not an SQLite database, just some text\n";
    emit("bad-not-sqlite", M_RO, (const uint8_t *)text, sizeof(text) - 1);
    emit("bad-empty-file", M_RO, (const uint8_t *)"", 0);
    emit("bad-empty-file-rw", M_RW, (const uint8_t *)"", 0);
    /* An empty file with create: the store makes a new one in it. */
    emit("sem-empty-file-create", M_ALL | FUZZ_STORE_CREATE, (const uint8_t *)"", 0);
    /* No byte at all: mode 0 and an empty file. */
    char path[4200];
    if (snprintf(path, sizeof(path), "%s/sem-zero-length-input", outdir) >= (int)sizeof(path)) {
        die("sem-zero-length-input", "path too long");
    }
    write_bytes_to(path, NULL, 0);
    written++;
}

/* Reproducers of store bugs the fuzz target found, all fixed: they stay in
 * the corpus so the bugs cannot come back. */
static void
emit_crashes(void)
{
    bytes b;

    /* store.c incarnations_tx: the block is sized with the UTF-16 length of
     * the configs but filled with their (longer) UTF-8 text. */
    b = make_utf16("UPDATE incarnation SET config = '\xe4\xb8\xad\xe6\x96\x87\xe4\xb8\xad"
                   "\xe6\x96\x87\xe4\xb8\xad\xe6\x96\x87\xe4\xb8\xad\xe6\x96\x87'");
    emit("crash-utf16-config-overflow", M_RO, b.p, b.n);
    free(b.p);

    /* store_verify.c: tables other than meta/variable/tensor/chunk/
     * chunk_data/checkpoint are not checked to exist. */
    emit_sql("crash-verify-no-worker-table", M_RO, "DROP TABLE worker");

    /* store_verify.c check_tensor: length() of a non-BLOB is not its byte
     * size (an 8-digit integer "is" 8 bytes). */
    emit_sql("crash-verify-integer-chunk", M_RO,
             "UPDATE chunk_data SET data = 12345678 WHERE id IN (SELECT data_id FROM chunk"
             " WHERE tensor_id = (SELECT id FROM tensor WHERE slot = '' AND var_id = (SELECT id"
             " FROM variable WHERE name = 'lr_scale')))");

    /* store.c sr_store_new_incarnation: inc++ on meta incarnation
     * INT64_MAX is a signed overflow (UBSan). */
    emit_sql("crash-new-incarnation-overflow", FUZZ_STORE_RW | FUZZ_STORE_INCARNATION,
             "UPDATE meta SET value = 9223372036854775807 WHERE key = 'incarnation'");

    /* store_verify.c check_tensor: one int64 per chunk of the declared
     * size, whatever the chunks stored (2^29 chunks: 4 GiB). */
    emit_sql("crash-verify-huge-chunk-count", M_RO,
             "UPDATE variable SET shape = '[536870912]', nbytes = 2147483648, chunk_bytes = 4"
             " WHERE name = 'dense/bias'");
}

int
main(int argc, char **argv)
{
    const char *tmp = getenv("TMPDIR");

    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s CORPUS_DIR [PENDING_DIR]\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        if (mkdir(argv[i], 0755) != 0 && errno != EEXIST) {
            die(argv[i], strerror(errno));
        }
    }
    outdir = argv[1];
    snprintf(work, sizeof(work), "%s/gen_corpus.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(work) == NULL) {
        die(work, strerror(errno));
    }
    emit_valid();
    emit_header_damage();
    emit_row_damage();
    emit_foreign();
    emit_crashes();
    printf("gen_corpus: wrote %d files, %zu bytes, to %s\n", written, total_bytes, outdir);
    if (argc == 3) {
        /* PENDING_DIR: reproducers of bugs not fixed yet go here (none now). */
        outdir = argv[2];
    }
    rmdir(work);
    return failed;
}
