/* store_chunk.c: dirty-chunk commits, versions and recycling, retention,
 * rewind, rewriting a step, a full disk, and verify catching damage. */
#include <sqlite3.h>

#include "store_test_util.h"

#define N 80 /* float32 elements: 320 bytes = 5 chunks of 64 */

static void
sql_exec(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

static int64_t
declare_w(sr_store *st)
{
    return declare_ready_f32(st, "w", N);
}

static void
commit_dense(sr_store *st, int64_t id, int64_t g)
{
    float v[N];
    fill_pattern(v, SR_FLOAT32, N, 1, g);
    sr_store_tensor t = {.var_id = id, .data = v, .len_bytes = sizeof(v)};
    sr_store_commit c = {.global_step = g, .tensors = &t, .ntensors = 1};
    assert_sr_ok(sr_store_commit_step(st, &c));
}

static void
assert_reads_step(sr_store *st, int64_t id, int64_t at, int64_t want_step)
{
    float want[N], got[N];
    fill_pattern(want, SR_FLOAT32, N, 1, want_step);
    assert_sr_ok(sr_store_read_tensor(st, id, NULL, at, got, sizeof(got)));
    assert_memory_equal(got, want, sizeof(want));
}

static void
test_chunk_dirty_commit_writes_only_dirty_chunks_old_step_keeps_old(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 64, 3);
    int64_t        id = declare_w(st);
    float          v0[N], v1[N], want[N], got[N];
    uint8_t        dirty[5] = {0, 1, 0, 0, 1};
    int64_t        versions0 = sql_i64(f->path, "SELECT count(*) FROM chunk");

    assert_int_equal(versions0, 5);
    fill_pattern(v0, SR_FLOAT32, N, 1, 0);
    /* Non-dirty chunks hold garbage: the store must not look at them. */
    memset(v1, 0xAB, sizeof(v1));
    fill_pattern(want, SR_FLOAT32, N, 1, 1);
    memcpy(v1 + 16, want + 16, 64);
    memcpy(v1 + 64, want + 64, 64);
    sr_store_tensor t = {.var_id = id, .data = v1, .len_bytes = sizeof(v1), .dirty = dirty};
    sr_store_commit c = {.global_step = 1, .tensors = &t, .ntensors = 1};
    assert_sr_ok(sr_store_commit_step(st, &c));
    /* Two new versions, the other three chunks untouched. */
    assert_int_equal(sql_i64(f->path, "SELECT count(*) FROM chunk"), 7);
    assert_int_equal(sql_i64(f->path, "SELECT count(*) FROM chunk WHERE step = 1"), 2);
    assert_int_equal(sql_i64(f->path, "SELECT count(*) FROM chunk_data"), 7);
    memcpy(want, v0, sizeof(want));
    memcpy(want + 16, v1 + 16, 64);
    memcpy(want + 64, v1 + 64, 64);
    assert_sr_ok(sr_store_read_tensor(st, id, NULL, -1, got, sizeof(got)));
    assert_memory_equal(got, want, sizeof(want));
    assert_sr_ok(sr_store_read_tensor(st, id, NULL, 0, got, sizeof(got)));
    assert_memory_equal(got, v0, sizeof(v0));
    assert_verify_clean(st);
    sr_store_close(st);
}

/* A version superseded by one that stops changing is pruned once the
 * retained steps pass it, by a commit that does not write that chunk (the
 * prune after a handle's first looks only at what the steps since
 * superseded, not at every chunk: store.c STMT_VERSION_SUPERSEDED); and a
 * chunk that never changes keeps its one version. */
static void
test_chunk_prune_of_a_chunk_that_stopped_changing(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 64, 2);
    int64_t        id = declare_w(st);
    float          v[N];
    uint8_t        dirty[5] = {1, 0, 0, 0, 0};

    commit_dense(st, id, 1);
    commit_dense(st, id, 2); /* chunks 1..4: versions 1 and 2 (and 0) */
    for (int64_t g = 3; g <= 6; g++) {
        fill_pattern(v, SR_FLOAT32, N, 1, g);
        sr_store_tensor t = {.var_id = id, .data = v, .len_bytes = sizeof(v), .dirty = dirty};
        sr_store_commit c = {.global_step = g, .tensors = &t, .ntensors = 1};
        assert_sr_ok(sr_store_commit_step(st, &c));
        /* K = 2: steps g - 1 and g stay; chunk 1's versions before 2 are
         * superseded at or before them once g - 1 >= 2. */
        assert_int_equal(sql_i64(f->path, "SELECT count(*) FROM chunk WHERE idx = 1"), 1);
        assert_int_equal(sql_i64(f->path, "SELECT min(step) FROM chunk WHERE idx = 1"), 2);
        assert_int_equal(sql_i64(f->path, "SELECT count(*) FROM chunk WHERE idx = 0"), 2);
    }
    assert_verify_clean(st);
    sr_store_close(st);
}

static void
test_chunk_retention_keeps_k_steps_older_is_enoent(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 64, 3);
    int64_t        id = declare_w(st);
    int64_t       *steps = NULL;
    size_t         n = 0;
    float          buf[N];

    for (int64_t g = 1; g <= 8; g++) {
        commit_dense(st, id, g);
        if (g >= 3) {
            /* Steady state: K versions per chunk, recycled, no growth. */
            assert_int_equal(sql_i64(f->path, "SELECT count(*) FROM chunk"), 15);
            assert_int_equal(sql_i64(f->path, "SELECT count(*) FROM chunk_data"), 15);
            assert_int_equal(sql_i64(f->path, "SELECT max(id) FROM chunk_data"), 15);
        }
    }
    assert_sr_ok(sr_store_list_checkpoints(st, &steps, &n));
    assert_int_equal(n, 3);
    assert_int_equal(steps[0], 6);
    assert_int_equal(steps[1], 7);
    assert_int_equal(steps[2], 8);
    free(steps);
    for (int64_t g = 6; g <= 8; g++) {
        assert_reads_step(st, id, g, g);
    }
    assert_reads_step(st, id, -1, 8);
    assert_sr_err(sr_store_read_tensor(st, id, NULL, 5, buf, sizeof(buf)), SR_ENOENT);
    assert_sr_err(sr_store_read_tensor(st, id, NULL, 0, buf, sizeof(buf)), SR_ENOENT);
    assert_sr_err(sr_store_read_tensor(st, id, NULL, 9, buf, sizeof(buf)), SR_ENOENT);
    assert_verify_clean(st);
    sr_store_close(st);
}

/* Chunk c written only at steps s with s % 5 == c: reads at every retained
 * step see each chunk's newest write at or before it. */
static void
test_chunk_sparse_history_each_retained_step_reads_right(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 64, 4);
    int64_t        id = declare_w(st);
    float          v[N], want[N], got[N];

    for (int64_t g = 1; g <= 12; g++) {
        uint8_t dirty[5] = {0};
        dirty[g % 5] = 1;
        fill_pattern(v, SR_FLOAT32, N, 1, g);
        sr_store_tensor t = {.var_id = id, .data = v, .len_bytes = sizeof(v), .dirty = dirty};
        sr_store_commit c = {.global_step = g, .tensors = &t, .ntensors = 1};
        assert_sr_ok(sr_store_commit_step(st, &c));
        for (int64_t at = g - 3 > 0 ? g - 3 : 0; at <= g; at++) {
            for (int ch = 0; ch < 5; ch++) {
                int64_t last = 0;
                for (int64_t s = 1; s <= at; s++) {
                    if (s % 5 == ch) {
                        last = s;
                    }
                }
                float tmp[N];
                fill_pattern(tmp, SR_FLOAT32, N, 1, last);
                memcpy(want + ch * 16, tmp + ch * 16, 64);
            }
            assert_sr_ok(sr_store_read_tensor(st, id, NULL, at, got, sizeof(got)));
            assert_memory_equal(got, want, sizeof(want));
        }
    }
    /* Versions no retained step needs are gone: at most K + 1 per chunk. */
    assert_true(sql_i64(f->path, "SELECT max(n) FROM (SELECT count(*) AS n FROM chunk"
                                 " GROUP BY tensor_id, idx)") <= 5);
    assert_int_equal(sql_i64(f->path, "SELECT count(*) FROM chunk_data"),
                     sql_i64(f->path, "SELECT count(*) FROM chunk"));
    assert_verify_clean(st);
    sr_store_close(st);
}

static void
test_chunk_rewrite_same_step_overwrites_in_place(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 64, 3);
    int64_t        id = declare_w(st);
    sr_store_info  info;

    commit_dense(st, id, 1);
    int64_t rows = sql_i64(f->path, "SELECT count(*) FROM chunk_data");
    float   v[N];
    fill_pattern(v, SR_FLOAT32, N, 1, 77);
    sr_store_tensor t = {.var_id = id, .data = v, .len_bytes = sizeof(v)};
    sr_store_commit c = {.global_step = 1, .tensors = &t, .ntensors = 1};
    assert_sr_ok(sr_store_commit_step(st, &c));
    assert_int_equal(sql_i64(f->path, "SELECT count(*) FROM chunk_data"), rows);
    assert_reads_step(st, id, -1, 77);
    assert_reads_step(st, id, 0, 0);
    assert_sr_ok(sr_store_get_info(st, &info));
    assert_int_equal(info.global_step, 1);
    assert_int_equal(info.ncheckpoints, 2);
    sr_store_close(st);
}

static void
test_chunk_set_ready_makes_initial_step_restorable(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 64, 3);
    int64_t        id = declare_w(st);
    int64_t       *steps = NULL;
    size_t         n = 0;
    sr_store_info  info;

    assert_sr_ok(sr_store_get_info(st, &info));
    assert_int_equal(info.model_ready, 1);
    assert_sr_ok(sr_store_list_checkpoints(st, &steps, &n));
    assert_int_equal(n, 1);
    assert_int_equal(steps[0], 0);
    free(steps);
    assert_sr_ok(sr_store_set_ready(st)); /* idempotent */
    commit_dense(st, id, 1);
    assert_reads_step(st, id, 0, 0);
    assert_verify_clean(st);
    sr_store_close(st);
}

static void
test_chunk_keep_one_updates_in_place(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 64, 1);
    int64_t        id = declare_w(st);

    for (int64_t g = 1; g <= 4; g++) {
        commit_dense(st, id, g);
        assert_int_equal(sql_i64(f->path, "SELECT count(*) FROM chunk_data"), 5);
    }
    assert_reads_step(st, id, -1, 4);
    assert_verify_clean(st);
    sr_store_close(st);
}

static void
test_chunk_rewind_restores_step_drops_later_and_records(void **state)
{
    store_fixture       *f = *state;
    sr_store            *st = open_small(f->path, 64, 4);
    int64_t              id = declare_w(st);
    const int64_t        shape[1] = {3};
    int64_t              late;
    uint64_t             inc;
    sr_store_info        info;
    sr_store_rewind_rec *rw = NULL;
    sr_store_contrib    *log = NULL;
    size_t               n = 0;
    float                buf[3];

    assert_sr_ok(sr_store_new_incarnation(st, &inc));
    for (int64_t g = 1; g <= 5; g++) {
        float            v[N];
        sr_store_contrib l = {
            .step = g - 1, .var_id = id, .pos = 0, .task_index = 0, .local_step = g - 1};
        fill_pattern(v, SR_FLOAT32, N, 1, g);
        sr_store_tensor t[2] = {
            {.var_id = id, .data = v, .len_bytes = sizeof(v)},
            {.var_id = id, .slot = g >= 4 ? "m" : "s", .data = v, .len_bytes = sizeof(v)}};
        sr_store_commit c = {.global_step = g, .tensors = t, .ntensors = 2, .log = &l, .nlog = 1};
        assert_sr_ok(sr_store_commit_step(st, &c));
        if (g == 4) {
            assert_sr_ok(
                sr_store_declare(st, "late", SR_FLOAT32, 1, shape, 1, NULL, 0, &late, NULL));
        }
    }
    assert_sr_err(sr_store_rewind(st, 1), SR_ENOENT); /* only 2..5 retained */
    assert_sr_ok(sr_store_rewind(st, 3));
    assert_sr_ok(sr_store_get_info(st, &info));
    assert_int_equal(info.global_step, 3);
    assert_int_equal(info.ncheckpoints, 2);
    assert_int_equal(info.nvariables, 1);
    assert_reads_step(st, id, -1, 3);
    assert_reads_step(st, id, 2, 2);
    assert_sr_err(sr_store_read_tensor(st, late, NULL, -1, buf, sizeof(buf)), SR_ENOENT);
    float m[N];
    assert_sr_err(sr_store_read_tensor(st, id, "m", -1, m, sizeof(m)), SR_ENOENT);
    assert_sr_ok(sr_store_read_tensor(st, id, "s", -1, m, sizeof(m)));
    assert_sr_ok(sr_store_read_log(st, 0, 100, &log, &n));
    assert_int_equal(n, 3); /* applied in the commits to 1, 2, 3 */
    assert_int_equal(log[2].step, 2);
    free(log);
    assert_sr_ok(sr_store_list_rewinds(st, &rw, &n));
    assert_int_equal(n, 1);
    assert_int_equal(rw[0].incarnation, 1);
    assert_int_equal(rw[0].from_step, 5);
    assert_int_equal(rw[0].to_step, 3);
    assert_true(rw[0].at_ms > 0);
    free(rw);
    assert_verify_clean(st);
    /* The new branch continues from 3. */
    commit_dense(st, id, 4);
    assert_reads_step(st, id, 3, 3);
    assert_reads_step(st, id, -1, 4);
    assert_verify_clean(st);
    sr_store_close(st);
}

static void
test_chunk_full_disk_commit_is_enospc_previous_intact(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 4096, 3);
    const int64_t  shape[1] = {64 * 1024}; /* 256 KiB = 64 chunks */
    float         *v = malloc(sizeof(float) * 64 * 1024), *got = malloc(sizeof(float) * 64 * 1024);
    size_t         nb = sizeof(float) * 64 * 1024;
    int64_t        id, pages;
    sr_store_info  info;

    fill_pattern(v, SR_FLOAT32, 64 * 1024, 9, 0);
    assert_sr_ok(sr_store_declare(st, "big", SR_FLOAT32, 1, shape, 1, v, nb, &id, NULL));
    assert_sr_ok(sr_store_set_ready(st));
    fill_pattern(v, SR_FLOAT32, 64 * 1024, 9, 1);
    sr_store_tensor t = {.var_id = id, .data = v, .len_bytes = nb};
    sr_store_commit c = {.global_step = 1, .tensors = &t, .ntensors = 1};
    assert_sr_ok(sr_store_commit_step(st, &c));
    sr_store_close(st);

    pages = sql_i64(f->path, "PRAGMA page_count");
    sr_store_opts o = small_opts(4096, 3);
    o.max_page_count = pages + 2; /* far less than another 256 KiB of versions */
    assert_sr_ok(sr_store_open(f->path, &o, &st));
    fill_pattern(v, SR_FLOAT32, 64 * 1024, 9, 2);
    c.global_step = 2;
    assert_sr_err(sr_store_commit_step(st, &c), SR_ENOSPC);
    assert_non_null(strstr(sr_store_errmsg(st), f->path));
    /* Rolled back; the handle is usable; step 1 intact. */
    assert_sr_ok(sr_store_get_info(st, &info));
    assert_int_equal(info.global_step, 1);
    assert_int_equal(info.ncheckpoints, 2);
    fill_pattern(v, SR_FLOAT32, 64 * 1024, 9, 1);
    assert_sr_ok(sr_store_read_tensor(st, id, NULL, -1, got, nb));
    assert_memory_equal(got, v, nb);
    fill_pattern(v, SR_FLOAT32, 64 * 1024, 9, 0);
    assert_sr_ok(sr_store_read_tensor(st, id, NULL, 0, got, nb));
    assert_memory_equal(got, v, nb);
    assert_verify_clean(st);
    /* A sparse commit that fits still works on the same handle. */
    uint8_t dirty[64] = {0};
    dirty[0] = 1;
    fill_pattern(v, SR_FLOAT32, 64 * 1024, 9, 2);
    t.dirty = dirty;
    assert_sr_ok(sr_store_commit_step(st, &c));
    sr_store_close(st);
    /* And everything is still there after reopening. */
    st = open_small(f->path, 4096, 3);
    fill_pattern(v, SR_FLOAT32, 64 * 1024, 9, 1);
    assert_sr_ok(sr_store_read_tensor(st, id, NULL, 1, got, nb));
    assert_memory_equal(got, v, nb);
    assert_verify_clean(st);
    sr_store_close(st);
    free(v);
    free(got);
}

static void
test_chunk_verify_missing_or_short_chunk_is_ecorrupt(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 64, 3);
    int64_t        id = declare_w(st);
    float          buf[N];
    char          *rep = NULL;

    commit_dense(st, id, 1);
    sr_store_close(st);
    /* Damage the bookkeeping behind the store's back: drop chunk 2 of step
     * 1 (step 0's version then serves step 1 silently, so also drop it),
     * and shorten one blob. */
    sql_exec(f->path, "DELETE FROM chunk WHERE idx = 2;"
                      "UPDATE chunk_data SET data = zeroblob(10) WHERE id ="
                      " (SELECT data_id FROM chunk WHERE idx = 3 AND step = 1);");
    st = open_small(f->path, 64, 3);
    assert_sr_err(sr_store_verify(st, &rep), SR_ECORRUPT);
    assert_non_null(rep);
    assert_non_null(strstr(rep, "chunk 2 missing"));
    assert_non_null(strstr(rep, "chunk 3 version 1 is 10 bytes"));
    free(rep);
    assert_sr_err(sr_store_read_tensor(st, id, NULL, -1, buf, sizeof(buf)), SR_ECORRUPT);
    sr_store_close(st);
}

int
main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, store_fixture_setup, store_fixture_teardown)
    const struct CMUnitTest tests[] = {
        T(test_chunk_dirty_commit_writes_only_dirty_chunks_old_step_keeps_old),
        T(test_chunk_prune_of_a_chunk_that_stopped_changing),
        T(test_chunk_retention_keeps_k_steps_older_is_enoent),
        T(test_chunk_sparse_history_each_retained_step_reads_right),
        T(test_chunk_rewrite_same_step_overwrites_in_place),
        T(test_chunk_set_ready_makes_initial_step_restorable),
        T(test_chunk_keep_one_updates_in_place),
        T(test_chunk_rewind_restores_step_drops_later_and_records),
        T(test_chunk_full_disk_commit_is_enospc_previous_intact),
        T(test_chunk_verify_missing_or_short_chunk_is_ecorrupt),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
