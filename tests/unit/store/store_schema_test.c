/* store_schema.c: schema versions, migrations and every refusal on open.
 * A refused file must be left byte-identical. */
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>

#include "store_test_util.h"

static void
sql_exec(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

/* A closed store with one variable committed a few times (~ several pages). */
static void
make_store(const char *path)
{
    sr_store     *st = open_small(path, 4096, 3);
    const int64_t shape[1] = {16 * 1024};
    float        *v = malloc(sizeof(float) * 16 * 1024);
    int64_t       id;

    fill_pattern(v, SR_FLOAT32, 16 * 1024, 2, 0);
    assert_sr_ok(sr_store_declare(st, "w", SR_FLOAT32, 1, shape, 1, v, sizeof(float) * 16 * 1024,
                                  &id, NULL));
    assert_sr_ok(sr_store_set_ready(st));
    for (int64_t g = 1; g <= 2; g++) {
        fill_pattern(v, SR_FLOAT32, 16 * 1024, 2, g);
        sr_store_tensor t = {.var_id = id, .data = v, .len_bytes = sizeof(float) * 16 * 1024};
        sr_store_commit c = {.global_step = g, .tensors = &t, .ntensors = 1};
        assert_sr_ok(sr_store_commit_step(st, &c));
    }
    sr_store_close(st);
    free(v);
}

/* Open must fail with `want`, name the file, and leave it byte-identical
 * (read-write and read-only). */
static void
assert_refused(const char *path, sr_err want, const char *needle)
{
    size_t        len;
    uint8_t      *before = read_file_bytes(path, &len);
    sr_store     *st = NULL;
    sr_store_opts rw = small_opts(64, 3);
    sr_store_opts ro = {.readonly = 1};

    assert_non_null(before);
    assert_sr_err(sr_store_open(path, &rw, &st), want);
    assert_null(st);
    assert_non_null(strstr(sr_errdetail(), path));
    if (needle != NULL) {
        assert_non_null(strstr(sr_errdetail(), needle));
    }
    assert_file_is(path, before, len);
    assert_sr_err(sr_store_open(path, &ro, &st), want);
    assert_file_is(path, before, len);
    free(before);
}

static void
test_schema_new_file_gets_current_version(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 64, 3);
    sr_store_close(st);
    assert_int_equal(sql_i64(f->path, "PRAGMA user_version"), SR_STORE_SCHEMA_VERSION);
    assert_int_equal(sql_i64(f->path, "SELECT count(*) FROM sqlite_schema WHERE name IN"
                                      " ('meta','variable','tensor','chunk','chunk_data',"
                                      "'worker','step_log','checkpoint','rewind')"),
                     9);
}

static void
test_schema_current_file_reopens_unchanged(void **state)
{
    store_fixture *f = *state;
    size_t         len;
    uint8_t       *before;
    sr_store      *st = NULL;
    sr_store_opts  o = small_opts(64, 3);
    sr_store_info  info;

    make_store(f->path);
    before = read_file_bytes(f->path, &len);
    assert_sr_ok(sr_store_open(f->path, &o, &st));
    assert_sr_ok(sr_store_get_info(st, &info));
    assert_int_equal(info.schema_version, SR_STORE_SCHEMA_VERSION);
    assert_int_equal(info.global_step, 2);
    sr_store_close(st);
    assert_file_is(f->path, before, len);
    free(before);
}

/* Version 0 by hand: an SQLite file that carries syncrep's application_id
 * but no tables (what a crash before the first migration commits leaves,
 * or an older tool's empty file) migrates to the current version. */
static void
test_schema_version0_file_migrates_to_current(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = NULL;
    sr_store_opts  ro = {.readonly = 1};
    sr_store_opts  rw = small_opts(64, 3);
    sr_store_info  info;

    sql_exec(f->path, "PRAGMA application_id = 1397900624"); /* 0x53524550 */
    assert_int_equal(sql_i64(f->path, "PRAGMA user_version"), 0);
    /* Read-only cannot migrate: refused, unchanged. */
    {
        size_t   len;
        uint8_t *before = read_file_bytes(f->path, &len);
        assert_sr_err(sr_store_open(f->path, &ro, &st), SR_ENOTSUP);
        assert_file_is(f->path, before, len);
        free(before);
    }
    assert_sr_ok(sr_store_open(f->path, &rw, &st));
    assert_sr_ok(sr_store_get_info(st, &info));
    assert_int_equal(info.schema_version, SR_STORE_SCHEMA_VERSION);
    assert_int_equal(info.global_step, 0);
    sr_store_close(st);
    assert_int_equal(sql_i64(f->path, "PRAGMA user_version"), SR_STORE_SCHEMA_VERSION);
}

/* A schema-1 store (step log without partitions) migrates to 2: its step
 * log rows keep their values with part 0; read-only refuses to migrate. */
static void
test_schema_v1_step_log_migrates_with_part_0(void **state)
{
    store_fixture    *f = *state;
    sr_store         *st = NULL;
    sr_store_opts     ro = {.readonly = 1};
    sr_store_opts     rw = small_opts(64, 3);
    const int64_t     shape[1] = {4};
    float             v[4] = {1, 2, 3, 4};
    int64_t           id;
    sr_store_contrib *log = NULL;
    size_t            n = 0;

    rw.create = 1;
    assert_sr_ok(sr_store_open(f->path, &rw, &st));
    assert_sr_ok(sr_store_declare(st, "w", SR_FLOAT32, 1, shape, 1, v, sizeof(v), &id, NULL));
    assert_sr_ok(sr_store_set_ready(st));
    sr_store_contrib l[2] = {{0, id, 0, 0, 3, 0}, {0, id, 0, 1, 5, 0}};
    sr_store_tensor  t = {.var_id = id, .data = v, .len_bytes = sizeof(v)};
    sr_store_commit  c = {.global_step = 1, .tensors = &t, .ntensors = 1, .log = l, .nlog = 2};
    assert_sr_ok(sr_store_commit_step(st, &c));
    sr_store_close(st);
    /* Back to schema 1's step log. */
    sql_exec(f->path, "CREATE TABLE old(step INTEGER NOT NULL, var_id INTEGER NOT NULL,"
                      " pos INTEGER NOT NULL, task_index INTEGER NOT NULL,"
                      " local_step INTEGER NOT NULL, PRIMARY KEY (step, var_id, pos))"
                      " WITHOUT ROWID;"
                      "INSERT INTO old SELECT step, var_id, pos, task_index, local_step"
                      " FROM step_log;"
                      "DROP TABLE step_log; ALTER TABLE old RENAME TO step_log;"
                      "ALTER TABLE chunk DROP COLUMN sum; DROP TABLE rollback;"
                      "DROP TABLE step_replicas; DROP TABLE ctl_change; DROP TABLE member;"
                      "DELETE FROM meta WHERE key = 'store_id';"
                      "ALTER TABLE worker DROP COLUMN cursor;" /* issue 24 */
                      "PRAGMA user_version = 1;");
    assert_sr_err(sr_store_open(f->path, &ro, &st), SR_ENOTSUP);
    assert_int_equal(sql_i64(f->path, "PRAGMA user_version"), 1);
    rw.create = 0;
    assert_sr_ok(sr_store_open(f->path, &rw, &st));
    assert_sr_ok(sr_store_read_log(st, 0, 10, &log, &n));
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(log[i].step, 0);
        assert_int_equal(log[i].var_id, id);
        assert_int_equal(log[i].part, 0);
        assert_int_equal(log[i].pos, (int)i);
        assert_int_equal(log[i].task_index, i == 0 ? 3 : 5);
    }
    free(log);
    sr_store_close(st);
    assert_int_equal(sql_i64(f->path, "PRAGMA user_version"), SR_STORE_SCHEMA_VERSION);
}

/* A 0-byte file found at the path is not a new store, even with create: it
 * may be a store that lost its contents.  Refused, named, left as it is. */
static void
test_schema_empty_file_is_refused_even_with_create(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = NULL;
    sr_store_opts  o = small_opts(64, 3);
    char           mark[700];

    write_file_bytes(f->path, "", 0);
    o.create = 0;
    assert_sr_err(sr_store_open(f->path, &o, &st), SR_ECORRUPT);
    o.create = 1;
    assert_sr_err(sr_store_open(f->path, &o, &st), SR_ECORRUPT);
    assert_non_null(strstr(sr_errdetail(), f->path));
    assert_non_null(strstr(sr_errdetail(), "empty file, 0 bytes"));
    assert_null(st);
    assert_file_is(f->path, (const uint8_t *)"", 0);
    snprintf(mark, sizeof(mark), "%s-mark", f->path);
    assert_false(file_exists(mark));
    /* A file this open creates is a new store. */
    unlink(f->path);
    assert_sr_ok(sr_store_open(f->path, &o, &st));
    sr_store_close(st);
    assert_int_equal(sql_i64(f->path, "PRAGMA page_size"), 65536);
}

/* user_version that no build ever wrote (negative, or far above ours) is a
 * damaged header, not a newer schema. */
static void
test_schema_absurd_user_version_is_ecorrupt_not_eversion(void **state)
{
    store_fixture *f = *state;
    size_t         len;
    uint8_t       *bytes;

    make_store(f->path);
    sql_exec(f->path, "PRAGMA user_version = 5000");
    assert_refused(f->path, SR_ECORRUPT, "user_version 5000");
    assert_non_null(strstr(sr_errdetail(), "damaged header"));
    sql_exec(f->path, "PRAGMA user_version = -3");
    assert_refused(f->path, SR_ECORRUPT, "user_version -3");
    /* The raw header too: byte 60..63 garbled. */
    sql_exec(f->path, "PRAGMA user_version = 3");
    bytes = read_file_bytes(f->path, &len);
    bytes[60] = 0xA7;
    write_file_bytes(f->path, bytes, len);
    assert_refused(f->path, SR_ECORRUPT, "damaged header");
    free(bytes);
}

/* The raw header's magic and application_id are named when wrong. */
static void
test_schema_damaged_magic_and_app_id_are_named(void **state)
{
    store_fixture *f = *state;
    size_t         len;
    uint8_t       *bytes;

    make_store(f->path);
    bytes = read_file_bytes(f->path, &len);
    bytes[3] ^= 0x20;
    write_file_bytes(f->path, bytes, len);
    assert_refused(f->path, SR_ECORRUPT, "magic");
    bytes[3] ^= 0x20;
    bytes[70] ^= 0x01;
    write_file_bytes(f->path, bytes, len);
    assert_refused(f->path, SR_ECORRUPT, "application_id");
    free(bytes);
}

static void
test_schema_newer_version_is_eversion_unchanged(void **state)
{
    store_fixture *f = *state;

    make_store(f->path);
    sql_exec(f->path, "PRAGMA user_version = 99");
    assert_refused(f->path, SR_EVERSION, "99");
}

static void
test_schema_foreign_sqlite_file_is_ecorrupt_unchanged(void **state)
{
    store_fixture *f = *state;
    char           wal[700];

    sql_exec(f->path, "CREATE TABLE t(x); INSERT INTO t VALUES (1), (2);");
    assert_refused(f->path, SR_ECORRUPT, "not a syncrep store");
    snprintf(wal, sizeof(wal), "%s-wal", f->path);
    assert_false(file_exists(wal));
}

/* Right application_id, but no meta table: still not ours. */
static void
test_schema_app_id_without_meta_is_ecorrupt_unchanged(void **state)
{
    store_fixture *f = *state;

    sql_exec(f->path, "PRAGMA application_id = 1397900624; PRAGMA user_version = 1;"
                      " CREATE TABLE t(x);");
    assert_refused(f->path, SR_ECORRUPT, "not a syncrep store");
}

static void
test_schema_random_bytes_file_is_ecorrupt_unchanged(void **state)
{
    store_fixture *f = *state;
    uint8_t        junk[8192];
    uint32_t       x = 12345;

    for (size_t i = 0; i < sizeof(junk); i++) {
        x = x * 1103515245u + 12345u;
        junk[i] = (uint8_t)(x >> 16);
    }
    write_file_bytes(f->path, junk, sizeof(junk));
    assert_refused(f->path, SR_ECORRUPT, "not a syncrep store");
    write_file_bytes(f->path, "hello", 5); /* shorter than a header */
    assert_refused(f->path, SR_ECORRUPT, "not a syncrep store");
}

static void
test_schema_truncated_store_is_ecorrupt_unchanged(void **state)
{
    store_fixture *f = *state;
    size_t         len;
    uint8_t       *full;

    make_store(f->path);
    full = read_file_bytes(f->path, &len);
    assert_true(len >= 4 * 65536);
    write_file_bytes(f->path, full, len / 2);
    assert_refused(f->path, SR_ECORRUPT, NULL);
    free(full);
}

static void
test_schema_garbled_store_pages_are_ecorrupt_unchanged(void **state)
{
    store_fixture *f = *state;
    size_t         len;
    uint8_t       *bytes;

    make_store(f->path);
    bytes = read_file_bytes(f->path, &len);
    /* Pages 2 .. 3 hold the first tables' b-trees: overwrite them. */
    memset(bytes + 65536, 0x5A, 2 * 65536);
    write_file_bytes(f->path, bytes, len);
    assert_refused(f->path, SR_ECORRUPT, NULL);
    free(bytes);
}

static void
test_schema_garbled_store_header_is_ecorrupt_unchanged(void **state)
{
    store_fixture *f = *state;
    size_t         len;
    uint8_t       *bytes;

    make_store(f->path);
    bytes = read_file_bytes(f->path, &len);
    bytes[16] = 0x00; /* page size 3: invalid */
    bytes[17] = 0x03;
    write_file_bytes(f->path, bytes, len);
    assert_refused(f->path, SR_ECORRUPT, NULL);
    free(bytes);
}

static void
test_schema_quick_check_skipped_opens_garbled_data_page(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = NULL;
    sr_store_opts  o = small_opts(64, 3);

    make_store(f->path);
    /* skip_quick_check opens without reading every page: the same file that
     * the default refuses is opened (and verify then reports it). */
    size_t   len;
    uint8_t *bytes = read_file_bytes(f->path, &len);
    memset(bytes + len - 65536, 0x5A, 65536);
    write_file_bytes(f->path, bytes, len);
    free(bytes);
    assert_sr_err(sr_store_open(f->path, &o, &st), SR_ECORRUPT);
    o.skip_quick_check = 1;
    assert_sr_ok(sr_store_open(f->path, &o, &st));
    char *rep = NULL;
    assert_sr_err(sr_store_verify(st, &rep), SR_ECORRUPT);
    assert_non_null(strstr(rep, "integrity_check"));
    free(rep);
    sr_store_close(st);
}

static void
test_schema_missing_file_without_create_is_enoent_not_created(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = NULL;
    sr_store_opts  o = {0};
    sr_store_opts  ro = {.readonly = 1, .create = 1};
    char           sub[700];

    assert_sr_err(sr_store_open(f->path, &o, &st), SR_ENOENT);
    assert_non_null(strstr(sr_errdetail(), f->path));
    assert_sr_err(sr_store_open(f->path, &ro, &st), SR_ENOENT); /* readonly never creates */
    assert_false(file_exists(f->path));
    snprintf(sub, sizeof(sub), "%s/no/such/dir/s.db", f->dir);
    o.create = 1;
    assert_sr_err(sr_store_open(sub, &o, &st), SR_ENOENT);
}

static void
test_schema_directory_path_is_ecorrupt(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = NULL;
    sr_store_opts  o = small_opts(64, 3);

    assert_sr_err(sr_store_open(f->dir, &o, &st), SR_ECORRUPT);
    assert_non_null(strstr(sr_errdetail(), "not a regular file"));
}

/* /sys refuses file creation even to root (EACCES), unlike a chmod'ed
 * directory: this checks creating a store in an unwritable location. */
static void
test_schema_create_under_sysfs_is_eacces(void **state)
{
    sr_store     *st = NULL;
    sr_store_opts o = small_opts(64, 3);
    const char   *path = "/sys/sr-store-test.db";
    int           fd;
    (void)state;

    fd = open("/sys", O_RDONLY | O_DIRECTORY);
    if (fd < 0) {
        skip();
    }
    close(fd);
    assert_sr_err(sr_store_open(path, &o, &st), SR_EACCES);
    assert_non_null(strstr(sr_errdetail(), path));
    assert_false(file_exists(path));
}

/* A store in a directory without write permission (the WAL cannot be
 * created there).  Root ignores permission bits, so this only runs as a
 * non-root user. */
static void
test_schema_rw_open_in_unwritable_dir_is_eacces_nonroot(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = NULL;
    sr_store_opts  o = small_opts(64, 3);

    if (geteuid() == 0) {
        skip();
    }
    make_store(f->path);
    size_t   len;
    uint8_t *before = read_file_bytes(f->path, &len);
    assert_int_equal(chmod(f->dir, 0500), 0);
    assert_sr_err(sr_store_open(f->path, &o, &st), SR_EACCES);
    assert_file_is(f->path, before, len);
    assert_int_equal(chmod(f->dir, 0700), 0);
    assert_int_equal(chmod(f->path, 0400), 0);
    assert_sr_err(sr_store_open(f->path, &o, &st), SR_EACCES);
    assert_file_is(f->path, before, len);
    free(before);
}

static void
test_schema_bad_options_are_einval(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = NULL;
    sr_store_opts  o = small_opts(64, 3);

    o.sync = 7;
    assert_sr_err(sr_store_open(f->path, &o, &st), SR_EINVAL);
    o = small_opts(64, -1);
    assert_sr_err(sr_store_open(f->path, &o, &st), SR_EINVAL);
    o = small_opts(1u << 30, 3);
    assert_sr_err(sr_store_open(f->path, &o, &st), SR_EINVAL);
    assert_sr_err(sr_store_open(NULL, &o, &st), SR_EINVAL);
    assert_false(file_exists(f->path));
}

int
main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, store_fixture_setup, store_fixture_teardown)
    const struct CMUnitTest tests[] = {
        T(test_schema_new_file_gets_current_version),
        T(test_schema_current_file_reopens_unchanged),
        T(test_schema_version0_file_migrates_to_current),
        T(test_schema_v1_step_log_migrates_with_part_0),
        T(test_schema_empty_file_is_refused_even_with_create),
        T(test_schema_absurd_user_version_is_ecorrupt_not_eversion),
        T(test_schema_damaged_magic_and_app_id_are_named),
        T(test_schema_newer_version_is_eversion_unchanged),
        T(test_schema_foreign_sqlite_file_is_ecorrupt_unchanged),
        T(test_schema_app_id_without_meta_is_ecorrupt_unchanged),
        T(test_schema_random_bytes_file_is_ecorrupt_unchanged),
        T(test_schema_truncated_store_is_ecorrupt_unchanged),
        T(test_schema_garbled_store_pages_are_ecorrupt_unchanged),
        T(test_schema_garbled_store_header_is_ecorrupt_unchanged),
        T(test_schema_quick_check_skipped_opens_garbled_data_page),
        T(test_schema_missing_file_without_create_is_enoent_not_created),
        T(test_schema_directory_path_is_ecorrupt),
        T(test_schema_create_under_sysfs_is_eacces),
        T(test_schema_rw_open_in_unwritable_dir_is_eacces_nonroot),
        T(test_schema_bad_options_are_einval),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
