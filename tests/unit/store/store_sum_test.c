/* store_sum.c: a byte flipped inside a stored chunk is caught wherever the
 * bytes leave the store (read, rewind, export, verify), named by variable,
 * slot, step and chunk, and never served; the retained steps that do not
 * read it stay usable.  Schema-2 stores get their checksums when migrated. */
#include <sqlite3.h>

#include "store_test_util.h"

#define NELEM 4096 /* float32: 16 KiB, 4 chunks of 4 KiB */
#define CHUNK 4096

static void
sql_exec(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

/* A closed store: "w" (4 chunks) and "b" (one chunk), declared at step 0 and
 * committed densely at steps 1..3; K = 3 retains 1, 2, 3. */
static void
make_store(const char *path, int64_t *w_id, int64_t *b_id)
{
    sr_store     *st = open_small(path, CHUNK, 3);
    const int64_t shape[1] = {NELEM}, bshape[1] = {8};
    float        *w = malloc(sizeof(float) * NELEM);
    float         b[8];

    fill_pattern(w, SR_FLOAT32, NELEM, 1, 0);
    fill_pattern(b, SR_FLOAT32, 8, 2, 0);
    assert_sr_ok(
        sr_store_declare(st, "w", SR_FLOAT32, 1, shape, 1, w, sizeof(float) * NELEM, w_id, NULL));
    assert_sr_ok(sr_store_declare(st, "b", SR_FLOAT32, 1, bshape, 1, b, sizeof(b), b_id, NULL));
    assert_sr_ok(sr_store_set_ready(st));
    for (int64_t g = 1; g <= 3; g++) {
        fill_pattern(w, SR_FLOAT32, NELEM, 1, g);
        fill_pattern(b, SR_FLOAT32, 8, 2, g);
        sr_store_tensor t[2] = {{.var_id = *w_id, .data = w, .len_bytes = sizeof(float) * NELEM},
                                {.var_id = *b_id, .data = b, .len_bytes = sizeof(b)}};
        sr_store_commit c = {.global_step = g, .tensors = t, .ntensors = 2};
        assert_sr_ok(sr_store_commit_step(st, &c));
    }
    sr_store_close(st);
    free(w);
}

/* Flip one bit of byte `off` of the version of `var` chunk `idx` written at
 * `step`, through SQLite directly (the store's pages stay valid). */
static void
flip_byte(const char *path, const char *var, int64_t idx, int64_t step, int off)
{
    sqlite3      *db = NULL;
    sqlite3_stmt *s = NULL;
    sqlite3_blob *b = NULL;
    uint8_t       byte;

    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT c.data_id FROM chunk c JOIN tensor t ON"
                                        " t.id = c.tensor_id JOIN variable v ON v.id = t.var_id"
                                        " WHERE v.name = ?1 AND t.slot = '' AND c.idx = ?2"
                                        " AND c.step = ?3",
                                        -1, &s, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(s, 1, var, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, idx);
    sqlite3_bind_int64(s, 3, step);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    int64_t data_id = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    assert_int_equal(sqlite3_blob_open(db, "main", "chunk_data", "data", data_id, 1, &b),
                     SQLITE_OK);
    assert_int_equal(sqlite3_blob_read(b, &byte, 1, off), SQLITE_OK);
    byte ^= 0x10;
    assert_int_equal(sqlite3_blob_write(b, &byte, 1, off), SQLITE_OK);
    sqlite3_blob_close(b);
    assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

static void
assert_names(const char *detail, const char *var, const char *step, const char *chunk)
{
    assert_non_null(strstr(detail, var));
    assert_non_null(strstr(detail, step));
    assert_non_null(strstr(detail, chunk));
    assert_non_null(strstr(detail, "checksum"));
}

static int64_t
global_step(sr_store *st)
{
    sr_store_info info;
    assert_sr_ok(sr_store_get_info(st, &info));
    return info.global_step;
}

/* A flip in the current step: every read, rewind, export and verify refuses
 * it, naming variable, step and chunk; other tensors still read. */
static void
test_sum_flip_in_current_step_is_ecorrupt_everywhere(void **state)
{
    store_fixture *f = *state;
    int64_t        w_id, b_id;
    float         *w = malloc(sizeof(float) * NELEM), b[8], want[8];
    char           out[700];
    char          *rep = NULL;

    make_store(f->path, &w_id, &b_id);
    flip_byte(f->path, "w", 2, 3, 100);
    sr_store *st = open_small(f->path, CHUNK, 3);

    assert_sr_err(sr_store_read_tensor(st, w_id, "", -1, w, sizeof(float) * NELEM), SR_ECORRUPT);
    assert_names(sr_errdetail(), "variable 'w'", "step 3", "chunk 2");
    assert_non_null(strstr(sr_store_errmsg(st), "chunk 2"));
    /* Not sticky: another tensor, and an older step of the same one, read. */
    assert_sr_ok(sr_store_read_tensor(st, b_id, "", -1, b, sizeof(b)));
    fill_pattern(want, SR_FLOAT32, 8, 2, 3);
    assert_memory_equal(b, want, sizeof(b));
    assert_sr_ok(sr_store_read_tensor(st, w_id, "", 2, w, sizeof(float) * NELEM));
    assert_sr_err(sr_store_read_tensor(st, w_id, "", 3, w, sizeof(float) * NELEM), SR_ECORRUPT);

    snprintf(out, sizeof(out), "%s/out.db", f->dir);
    assert_sr_err(sr_store_export(st, out, -1), SR_ECORRUPT);
    assert_names(sr_errdetail(), "variable 'w'", "step 3", "chunk 2");
    assert_false(file_exists(out));

    assert_sr_err(sr_store_verify(st, &rep), SR_ECORRUPT);
    assert_non_null(strstr(rep, "variable 'w' slot '': chunk 2 version 3 fails its checksum"));
    assert_non_null(strstr(rep, "retained steps: 1 ok, 2 ok, 3 corrupt"));
    free(rep);

    int64_t *steps = NULL;
    size_t   n = 0;
    assert_sr_ok(sr_store_intact_steps(st, &steps, &n));
    assert_int_equal(n, 2);
    assert_int_equal(steps[0], 1);
    assert_int_equal(steps[1], 2);
    free(steps);

    /* An intact step can still be exported (and rewound to). */
    assert_sr_ok(sr_store_export(st, out, 2));
    assert_sr_ok(sr_store_rewind(st, 2));
    assert_int_equal(global_step(st), 2);
    assert_sr_ok(sr_store_verify(st, &rep));
    free(rep);
    sr_store_close(st);
    free(w);
}

/* A flip in an old retained step only: the latest state reads, verify names
 * that step as corrupt and the others intact, a rewind to it is refused and
 * changes nothing. */
static void
test_sum_flip_in_old_step_names_that_step(void **state)
{
    store_fixture *f = *state;
    int64_t        w_id, b_id;
    float         *w = malloc(sizeof(float) * NELEM), *want = malloc(sizeof(float) * NELEM);
    char          *rep = NULL;

    make_store(f->path, &w_id, &b_id);
    flip_byte(f->path, "w", 0, 1, 4095);
    sr_store *st = open_small(f->path, CHUNK, 3);

    assert_sr_ok(sr_store_read_tensor(st, w_id, "", -1, w, sizeof(float) * NELEM));
    fill_pattern(want, SR_FLOAT32, NELEM, 1, 3);
    assert_memory_equal(w, want, sizeof(float) * NELEM);
    assert_sr_err(sr_store_read_tensor(st, w_id, "", 1, w, sizeof(float) * NELEM), SR_ECORRUPT);
    assert_names(sr_errdetail(), "variable 'w'", "step 1", "chunk 0");

    assert_sr_err(sr_store_rewind(st, 1), SR_ECORRUPT);
    assert_names(sr_errdetail(), "variable 'w'", "step 1", "chunk 0");
    assert_int_equal(global_step(st), 3);
    sr_store_rewind_rec *rw = NULL;
    size_t               nrw = 0;
    assert_sr_ok(sr_store_list_rewinds(st, &rw, &nrw));
    assert_int_equal(nrw, 0);
    free(rw);

    assert_sr_err(sr_store_verify(st, &rep), SR_ECORRUPT);
    assert_non_null(strstr(rep, "chunk 0 version 1 fails its checksum"));
    assert_non_null(strstr(rep, "retained steps: 1 corrupt, 2 ok, 3 ok"));
    free(rep);
    int64_t *steps = NULL;
    size_t   n = 0;
    assert_sr_ok(sr_store_intact_steps(st, &steps, &n));
    assert_int_equal(n, 2);
    assert_int_equal(steps[0], 2);
    assert_int_equal(steps[1], 3);
    free(steps);
    sr_store_close(st);
    free(w);
    free(want);
}

/* A version that serves several steps (a sparse update left it in place):
 * a flip there makes every step that reads it corrupt. */
static void
test_sum_flip_in_shared_version_marks_every_reader(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, CHUNK, 3);
    const int64_t  shape[1] = {NELEM};
    float         *w = malloc(sizeof(float) * NELEM);
    int64_t        id;
    uint8_t        dirty[4] = {1, 0, 0, 0};
    char          *rep = NULL;

    fill_pattern(w, SR_FLOAT32, NELEM, 1, 0);
    assert_sr_ok(
        sr_store_declare(st, "w", SR_FLOAT32, 1, shape, 1, w, sizeof(float) * NELEM, &id, NULL));
    assert_sr_ok(sr_store_set_ready(st));
    for (int64_t g = 1; g <= 2; g++) {
        sr_store_tensor t = {
            .var_id = id, .data = w, .len_bytes = sizeof(float) * NELEM, .dirty = dirty};
        sr_store_commit c = {.global_step = g, .tensors = &t, .ntensors = 1};
        assert_sr_ok(sr_store_commit_step(st, &c));
    }
    sr_store_close(st);
    flip_byte(f->path, "w", 3, 0, 7); /* chunk 3 was written at step 0 only */
    st = open_small(f->path, CHUNK, 3);
    assert_sr_err(sr_store_verify(st, &rep), SR_ECORRUPT);
    assert_non_null(strstr(rep, "retained steps: 0 corrupt, 1 corrupt, 2 corrupt"));
    free(rep);
    assert_sr_err(sr_store_read_tensor(st, id, "", -1, w, sizeof(float) * NELEM), SR_ECORRUPT);
    assert_names(sr_errdetail(), "variable 'w'", "step 2", "chunk 3 (version of step 0)");
    sr_store_close(st);
    free(w);
}

/* Schema 2 had no checksums: the migration computes one per version from the
 * bytes it finds, so a flip after the migration is caught. */
static void
test_sum_v2_store_migrates_with_checksums(void **state)
{
    store_fixture *f = *state;
    int64_t        w_id, b_id;
    float         *w = malloc(sizeof(float) * NELEM), *want = malloc(sizeof(float) * NELEM);
    char          *rep = NULL;
    sr_store_opts  ro = {.readonly = 1};
    sr_store      *st = NULL;

    make_store(f->path, &w_id, &b_id);
    sql_exec(f->path, "ALTER TABLE chunk DROP COLUMN sum; DROP TABLE rollback;"
                      "DROP TABLE step_replicas; DROP TABLE ctl_change; DROP TABLE member;"
                      "DELETE FROM meta WHERE key = 'store_id';"
                      "ALTER TABLE worker DROP COLUMN cursor;" /* issue 24 */
                      "PRAGMA user_version = 2;");
    assert_sr_err(sr_store_open(f->path, &ro, &st), SR_ENOTSUP);
    st = open_small(f->path, CHUNK, 3);
    sr_store_close(st);
    assert_int_equal(sql_i64(f->path, "PRAGMA user_version"), SR_STORE_SCHEMA_VERSION);
    assert_int_equal(sql_i64(f->path, "SELECT count(*) FROM chunk WHERE sum IS NULL"), 0);
    assert_int_equal(sql_i64(f->path, "SELECT count(*) FROM chunk"), 15); /* 3 x (4 + 1) */
    assert_true(sql_i64(f->path, "SELECT value FROM meta WHERE key = 'store_id'") > 0);
    st = open_small(f->path, CHUNK, 3);
    for (int64_t g = 1; g <= 3; g++) {
        assert_sr_ok(sr_store_read_tensor(st, w_id, "", g, w, sizeof(float) * NELEM));
        fill_pattern(want, SR_FLOAT32, NELEM, 1, g);
        assert_memory_equal(w, want, sizeof(float) * NELEM);
    }
    assert_sr_ok(sr_store_verify(st, &rep));
    free(rep);
    sr_store_close(st);
    flip_byte(f->path, "w", 1, 2, 0);
    st = open_small(f->path, CHUNK, 3);
    assert_sr_err(sr_store_read_tensor(st, w_id, "", 2, w, sizeof(float) * NELEM), SR_ECORRUPT);
    assert_names(sr_errdetail(), "variable 'w'", "step 2", "chunk 1");
    sr_store_close(st);
    free(w);
    free(want);
}

/* A version with no checksum (a damaged row) is never served either. */
static void
test_sum_missing_checksum_is_ecorrupt(void **state)
{
    store_fixture *f = *state;
    int64_t        w_id, b_id;
    float          b[8];
    char          *rep = NULL;

    make_store(f->path, &w_id, &b_id);
    sql_exec(f->path, "UPDATE chunk SET sum = NULL WHERE tensor_id = (SELECT t.id FROM tensor t"
                      " JOIN variable v ON v.id = t.var_id WHERE v.name = 'b') AND step = 3");
    sr_store *st = open_small(f->path, CHUNK, 3);
    assert_sr_err(sr_store_read_tensor(st, b_id, "", -1, b, sizeof(b)), SR_ECORRUPT);
    assert_non_null(strstr(sr_errdetail(), "no checksum"));
    assert_sr_err(sr_store_verify(st, &rep), SR_ECORRUPT);
    assert_non_null(strstr(rep, "variable 'b' slot '': chunk 0 version 3 has no checksum"));
    free(rep);
    sr_store_close(st);
}

int
main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, store_fixture_setup, store_fixture_teardown)
    const struct CMUnitTest tests[] = {
        T(test_sum_flip_in_current_step_is_ecorrupt_everywhere),
        T(test_sum_flip_in_old_step_names_that_step),
        T(test_sum_flip_in_shared_version_marks_every_reader),
        T(test_sum_v2_store_migrates_with_checksums),
        T(test_sum_missing_checksum_is_ecorrupt),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
