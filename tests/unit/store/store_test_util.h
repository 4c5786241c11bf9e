/*
 * Helpers shared by the store tests: a temp directory per test, opening
 * stores with small chunks, deterministic values that every dtype represents
 * exactly, and whole-file snapshots for "left byte-identical" checks.
 */
#ifndef SR_STORE_TEST_UTIL_H
#define SR_STORE_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "sr_test.h"
#include "store/store.h"

typedef struct {
    char *dir;       /* sr_test_mkdtemp */
    char  path[600]; /* dir/s.db */
} store_fixture;

static inline int
store_fixture_setup(void **state)
{
    store_fixture *f = calloc(1, sizeof(*f));
    if (f == NULL || (f->dir = sr_test_mkdtemp("store")) == NULL) {
        free(f);
        return -1;
    }
    snprintf(f->path, sizeof(f->path), "%s/s.db", f->dir);
    *state = f;
    return 0;
}

static inline int
store_fixture_teardown(void **state)
{
    store_fixture *f = *state;
    sr_test_rmdir_rf(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static inline sr_store_opts
small_opts(uint32_t chunk_bytes, int keep)
{
    sr_store_opts o;
    memset(&o, 0, sizeof(o));
    o.create = 1;
    o.chunk_bytes = chunk_bytes;
    o.keep_checkpoints = keep;
    return o;
}

static inline sr_store *
open_small(const char *path, uint32_t chunk_bytes, int keep)
{
    sr_store_opts o = small_opts(chunk_bytes, keep);
    sr_store     *st = NULL;
    assert_sr_ok(sr_store_open(path, &o, &st));
    return st;
}

/* Element i of a tensor at (tag, step): small integers, exact in every dtype. */
static inline int64_t
pattern_value(uint64_t tag, int64_t step, size_t i)
{
    return (int64_t)((tag * 7919u + (uint64_t)step * 131u + i * 7u) % 100003u) - 50000;
}

static inline void
fill_pattern(void *buf, int dtype, size_t nelems, uint64_t tag, int64_t step)
{
    for (size_t i = 0; i < nelems; i++) {
        int64_t v = pattern_value(tag, step, i);
        switch (dtype) {
        case SR_FLOAT32:
            ((float *)buf)[i] = (float)v * 0.5f;
            break;
        case SR_FLOAT64:
            ((double *)buf)[i] = (double)v * 0.25;
            break;
        case SR_INT32:
            ((int32_t *)buf)[i] = (int32_t)v;
            break;
        default:
            ((int64_t *)buf)[i] = v * 1000003;
            break;
        }
    }
}

/* The whole file, malloc'd (NULL if missing); *len set. */
static inline uint8_t *
read_file_bytes(const char *path, size_t *len)
{
    FILE    *f = fopen(path, "rb");
    uint8_t *buf;
    long     n;

    *len = 0;
    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf != NULL && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = n > 0 ? (size_t)n : 0;
    return buf;
}

static inline void
write_file_bytes(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static inline void
assert_file_is(const char *path, const uint8_t *want, size_t want_len)
{
    size_t   len;
    uint8_t *got = read_file_bytes(path, &len);
    assert_non_null(got);
    assert_int_equal(len, want_len);
    assert_memory_equal(got, want, want_len);
    free(got);
}

static inline int
file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Declare float32 `name` of n elements, fill_pattern(tag 1, step 0), and
 * mark the model ready; its id. */
static inline int64_t
declare_ready_f32(sr_store *st, const char *name, size_t n)
{
    const int64_t shape[1] = {(int64_t)n};
    float        *v = malloc(n * sizeof(*v));
    int64_t       id;

    assert_non_null(v);
    fill_pattern(v, SR_FLOAT32, n, 1, 0);
    assert_sr_ok(sr_store_declare(st, name, SR_FLOAT32, 1, shape, 1, v, n * sizeof(*v), &id, NULL));
    free(v);
    assert_sr_ok(sr_store_set_ready(st));
    return id;
}

/* sr_store_verify finds nothing (the report is printed when it does). */
static inline void
assert_verify_clean(sr_store *st)
{
    char  *rep = NULL;
    sr_err rc = sr_store_verify(st, &rep);
    if (rc != SR_OK) {
        print_error("verify report:\n%s", rep ? rep : "(none)");
    }
    assert_sr_ok(rc);
    free(rep);
}

/* One integer from a query on the file, through SQLite directly. */
static inline int64_t
sql_i64(const char *path, const char *sql)
{
    sqlite3      *db = NULL;
    sqlite3_stmt *s = NULL;
    int64_t       v = -1;

    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    if (sqlite3_step(s) == SQLITE_ROW) {
        v = sqlite3_column_int64(s, 0);
    }
    sqlite3_finalize(s);
    sqlite3_close(db);
    return v;
}

#endif
