/* store.c and the public API's round trips: files, declare, read, commit
 * validation, small records, export, read-only handles. */
#include <sqlite3.h>

#include "store_test_util.h"

static void
test_store_open_new_file_is_0600_wal_current_schema(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 0, 0);
    sr_store_info  info;
    struct stat    sb;
    char           wal[700];

    assert_int_equal(stat(f->path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    assert_sr_ok(sr_store_get_info(st, &info));
    snprintf(wal, sizeof(wal), "%s-wal", f->path); /* exists once a transaction ran */
    assert_int_equal(stat(wal, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    snprintf(wal, sizeof(wal), "%s-shm", f->path);
    assert_int_equal(stat(wal, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    snprintf(wal, sizeof(wal), "%s-wal", f->path);
    assert_int_equal(info.global_step, 0);
    assert_int_equal(info.incarnation, 0);
    assert_int_equal(info.model_ready, 0);
    assert_int_equal(info.schema_version, SR_STORE_SCHEMA_VERSION);
    assert_int_equal(info.nvariables, 0);
    assert_int_equal(info.ncheckpoints, 0);
    sr_store_close(st);
    assert_false(file_exists(wal)); /* checkpointed and removed on close */
    assert_int_equal(sql_i64(f->path, "PRAGMA user_version"), SR_STORE_SCHEMA_VERSION);
    assert_int_equal(sql_i64(f->path, "PRAGMA application_id"), 0x53524550);
    assert_int_equal(sql_i64(f->path, "PRAGMA page_size"), 65536);
    assert_int_equal(sql_i64(f->path, "SELECT count(*) FROM meta WHERE key = 'format'"), 1);
}

/* page_size applies to a new store only; an existing one keeps its own;
 * anything but a power of two in 512..65536 is refused. */
static void
test_store_page_size_new_store_only_and_checked(void **state)
{
    store_fixture *f = *state;
    sr_store_opts  o = small_opts(0, 0);
    sr_store      *st = NULL;
    const int      bad[] = {256, 1000, 131072, -4096};

    o.create = 1;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        o.page_size = bad[i];
        assert_sr_err(sr_store_open(f->path, &o, &st), SR_EINVAL);
        assert_non_null(strstr(sr_errdetail(), "page_size"));
        assert_false(file_exists(f->path));
    }
    o.page_size = 4096;
    assert_sr_ok(sr_store_open(f->path, &o, &st));
    sr_store_close(st);
    assert_int_equal(sql_i64(f->path, "PRAGMA page_size"), 4096);
    o.page_size = 16384;
    assert_sr_ok(sr_store_open(f->path, &o, &st));
    sr_store_close(st);
    assert_int_equal(sql_i64(f->path, "PRAGMA page_size"), 4096);
}

static void
test_store_declare_every_dtype_roundtrip_matches(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 64, 3);
    const int      dtypes[] = {SR_FLOAT32, SR_FLOAT64, SR_INT32, SR_INT64};
    const int64_t  shape[2] = {3, 7};
    uint8_t        in[21 * 8], out[21 * 8];
    sr_store_var  *vars = NULL;
    size_t         n = 0;

    for (int d = 0; d < 4; d++) {
        size_t  nb = 21 * sr_dtype_size(dtypes[d]);
        int64_t id;
        int     existed = -1;
        char    name[16];
        snprintf(name, sizeof(name), "v%d", d);
        fill_pattern(in, dtypes[d], 21, (uint64_t)d, 0);
        assert_sr_ok(
            sr_store_declare(st, name, dtypes[d], 2, shape, d != 2, in, nb, &id, &existed));
        assert_int_equal(existed, 0);
        memset(out, 0xEE, sizeof(out));
        assert_sr_ok(sr_store_read_tensor(st, id, NULL, -1, out, nb));
        assert_memory_equal(in, out, nb);
        /* and after a commit of new values */
        fill_pattern(in, dtypes[d], 21, (uint64_t)d, 1);
        sr_store_tensor t = {.var_id = id, .data = in, .len_bytes = nb};
        sr_store_commit c = {.global_step = 0, .tensors = &t, .ntensors = 1};
        assert_sr_ok(sr_store_commit_step(st, &c));
        assert_sr_ok(sr_store_read_tensor(st, id, "", -1, out, nb));
        assert_memory_equal(in, out, nb);
    }
    assert_sr_ok(sr_store_list_vars(st, &vars, &n));
    assert_int_equal(n, 4);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(vars[i].dtype, dtypes[i]);
        assert_int_equal(vars[i].ndim, 2);
        assert_int_equal(vars[i].shape[0], 3);
        assert_int_equal(vars[i].shape[1], 7);
        assert_int_equal(vars[i].nbytes, 21 * sr_dtype_size(dtypes[i]));
        assert_int_equal(vars[i].trainable, i != 2);
        assert_int_equal(vars[i].created_step, 0);
        assert_int_equal(vars[i].chunk_bytes, 64);
        if (i > 0) {
            assert_true(vars[i].id > vars[i - 1].id);
        }
    }
    free(vars);
    sr_store_close(st);
}

/* Sizes chunk-1, chunk, chunk+1 (element-aligned), and 2 chunks +- 1 element. */
static void
test_store_chunk_boundaries_roundtrip_matches(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 64, 3);
    const int      dtypes[] = {SR_FLOAT32, SR_INT64};

    for (int d = 0; d < 2; d++) {
        size_t       es = sr_dtype_size(dtypes[d]);
        const size_t sizes[] = {64 - es, 64, 64 + es, 128 - es, 128, 128 + es};
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
            int64_t  shape[1] = {(int64_t)(sizes[k] / es)};
            uint8_t  in[256], out[256];
            int64_t  id;
            size_t   nchunks;
            uint64_t cb;
            char     name[32];

            snprintf(name, sizeof(name), "b%d_%zu", d, sizes[k]);
            fill_pattern(in, dtypes[d], (size_t)shape[0], k, 0);
            assert_sr_ok(
                sr_store_declare(st, name, dtypes[d], 1, shape, 1, in, sizes[k], &id, NULL));
            assert_sr_ok(sr_store_nchunks(st, id, &nchunks));
            assert_int_equal(nchunks, (sizes[k] + 63) / 64);
            assert_sr_ok(sr_store_chunk_bytes(st, id, &cb));
            assert_int_equal(cb, 64);
            memset(out, 0, sizeof(out));
            assert_sr_ok(sr_store_read_tensor(st, id, NULL, -1, out, sizes[k]));
            assert_memory_equal(in, out, sizes[k]);
            assert_sr_err(sr_store_read_tensor(st, id, NULL, -1, out, sizes[k] + es), SR_EINVAL);
        }
    }
    char *report = NULL;
    assert_sr_ok(sr_store_verify(st, &report));
    assert_string_equal(report, "");
    free(report);
    sr_store_close(st);
}

static void
test_store_chunk_bytes_rounds_down_to_dtype(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 100, 3); /* not a multiple of 8 */
    const int64_t  shape[1] = {40};
    int64_t        id;
    uint64_t       cb;
    size_t         n;

    assert_sr_ok(sr_store_declare(st, "d", SR_FLOAT64, 1, shape, 1, NULL, 0, &id, NULL));
    assert_sr_ok(sr_store_chunk_bytes(st, id, &cb));
    assert_int_equal(cb, 96);
    assert_sr_ok(sr_store_nchunks(st, id, &n));
    assert_int_equal(n, 4); /* 320 bytes = 96 * 3 + 32 */
    sr_store_close(st);
}

static void
test_store_empty_and_scalar_shapes_roundtrip(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 64, 3);
    const int64_t  empty[2] = {4, 0};
    double         scalar = 2.5, out = 0;
    int64_t        ide, ids;
    size_t         n;

    assert_sr_ok(sr_store_declare(st, "empty", SR_FLOAT32, 2, empty, 1, NULL, 0, &ide, NULL));
    assert_sr_ok(sr_store_declare(st, "scalar", SR_FLOAT64, 0, NULL, 1, &scalar, 8, &ids, NULL));
    assert_sr_ok(sr_store_nchunks(st, ide, &n));
    assert_int_equal(n, 0);
    assert_sr_ok(sr_store_nchunks(st, ids, &n));
    assert_int_equal(n, 1);
    assert_sr_ok(sr_store_read_tensor(st, ide, NULL, -1, NULL, 0));
    assert_sr_ok(sr_store_read_tensor(st, ids, NULL, -1, &out, 8));
    assert_true(out == 2.5);
    scalar = -1.0;
    sr_store_tensor t[3] = {
        {.var_id = ide, .data = NULL, .len_bytes = 0},
        {.var_id = ids, .data = &scalar, .len_bytes = 8},
        {.var_id = ide, .slot = "m", .data = NULL, .len_bytes = 0},
    };
    sr_store_commit c = {.global_step = 1, .tensors = t, .ntensors = 3};
    assert_sr_ok(sr_store_commit_step(st, &c));
    assert_sr_ok(sr_store_read_tensor(st, ids, NULL, 1, &out, 8));
    assert_true(out == -1.0);
    assert_sr_ok(sr_store_read_tensor(st, ide, "m", 1, NULL, 0));
    char *report = NULL;
    assert_sr_ok(sr_store_verify(st, &report));
    free(report);
    sr_store_close(st);
}

static void
test_store_declare_same_is_existing_other_is_eexist(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 64, 3);
    const int64_t  s23[2] = {2, 3}, s32[2] = {3, 2}, s6[1] = {6};
    int64_t        id, id2 = -1;
    int            existed = -1;
    float          init[6] = {1, 2, 3, 4, 5, 6}, out[6];

    assert_sr_ok(
        sr_store_declare(st, "w", SR_FLOAT32, 2, s23, 1, init, sizeof(init), &id, &existed));
    assert_int_equal(existed, 0);
    /* Same dtype and shape: existed, value untouched (other initial value ignored). */
    float other[6] = {0};
    assert_sr_ok(
        sr_store_declare(st, "w", SR_FLOAT32, 2, s23, 1, other, sizeof(other), &id2, &existed));
    assert_int_equal(existed, 1);
    assert_int_equal(id2, id);
    assert_sr_ok(sr_store_read_tensor(st, id, NULL, -1, out, sizeof(out)));
    assert_memory_equal(out, init, sizeof(init));
    assert_sr_err(sr_store_declare(st, "w", SR_FLOAT32, 2, s32, 1, NULL, 0, &id2, NULL), SR_EEXIST);
    assert_non_null(strstr(sr_errdetail(), "[2,3]"));
    assert_non_null(strstr(sr_errdetail(), "[3,2]"));
    assert_non_null(strstr(sr_store_errmsg(st), "[3,2]"));
    assert_sr_err(sr_store_declare(st, "w", SR_INT32, 2, s23, 1, NULL, 0, &id2, NULL), SR_EEXIST);
    assert_non_null(strstr(sr_errdetail(), "int32"));
    assert_sr_err(sr_store_declare(st, "w", SR_FLOAT32, 1, s6, 1, NULL, 0, &id2, NULL), SR_EEXIST);
    /* Bad input is EINVAL. */
    assert_sr_err(sr_store_declare(st, "x", SR_FLOAT32, 2, s23, 1, init, 5, &id2, NULL), SR_EINVAL);
    assert_sr_err(sr_store_declare(st, "x", 99, 2, s23, 1, NULL, 0, &id2, NULL), SR_EINVAL);
    assert_sr_err(sr_store_declare(st, "", SR_FLOAT32, 2, s23, 1, NULL, 0, &id2, NULL), SR_EINVAL);
    char longname[SR_STORE_MAX_NAME + 2];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_sr_err(sr_store_declare(st, longname, SR_FLOAT32, 2, s23, 1, NULL, 0, &id2, NULL),
                  SR_EINVAL);
    /* Names are UTF-8 without control characters (core/name.h). */
    assert_sr_err(sr_store_declare(st, "a\nb", SR_FLOAT32, 2, s23, 1, NULL, 0, &id2, NULL),
                  SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), "0x0a at byte 1"));
    assert_sr_err(sr_store_declare(st, "bad\xff", SR_FLOAT32, 2, s23, 1, NULL, 0, &id2, NULL),
                  SR_EINVAL);
    sr_store_info info;
    assert_sr_ok(sr_store_get_info(st, &info));
    assert_int_equal(info.nvariables, 1);
    sr_store_close(st);
}

static void
test_store_commit_bad_input_is_einval_nothing_changed(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 64, 3);
    const int64_t  shape[1] = {40};
    float          a[40], b[40], out[40];
    int64_t        id;
    sr_store_info  info;

    fill_pattern(a, SR_FLOAT32, 40, 1, 0);
    fill_pattern(b, SR_FLOAT32, 40, 1, 9);
    assert_sr_ok(sr_store_declare(st, "w", SR_FLOAT32, 1, shape, 1, a, sizeof(a), &id, NULL));
    sr_store_tensor good = {.var_id = id, .data = b, .len_bytes = sizeof(b)};
    sr_store_commit c = {.global_step = 5, .tensors = &good, .ntensors = 1};
    assert_sr_ok(sr_store_commit_step(st, &c));
    fill_pattern(a, SR_FLOAT32, 40, 1, 5);
    good.data = a;

    /* Step before the stored one. */
    c.global_step = 4;
    assert_sr_err(sr_store_commit_step(st, &c), SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), "stored step is 5"));
    /* Unknown variable. */
    sr_store_tensor bad = {.var_id = id + 100, .data = a, .len_bytes = sizeof(a)};
    c = (sr_store_commit){.global_step = 6, .tensors = &bad, .ntensors = 1};
    assert_sr_err(sr_store_commit_step(st, &c), SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), "no variable"));
    /* Wrong length. */
    bad = (sr_store_tensor){.var_id = id, .data = a, .len_bytes = sizeof(a) - 4};
    assert_sr_err(sr_store_commit_step(st, &c), SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), "len_bytes 156"));
    /* NULL data. */
    bad = (sr_store_tensor){.var_id = id, .data = NULL, .len_bytes = sizeof(a)};
    assert_sr_err(sr_store_commit_step(st, &c), SR_EINVAL);
    /* The same tensor twice; the first write would be valid. */
    sr_store_tensor two[2] = {good, good};
    c = (sr_store_commit){.global_step = 6, .tensors = two, .ntensors = 2};
    assert_sr_err(sr_store_commit_step(st, &c), SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), "both"));
    /* Step log naming no variable, after a valid tensor. */
    sr_store_contrib lg = {.step = 5, .var_id = id + 7, .pos = 0, .task_index = 0};
    c = (sr_store_commit){.global_step = 6, .tensors = &good, .ntensors = 1, .log = &lg, .nlog = 1};
    assert_sr_err(sr_store_commit_step(st, &c), SR_EINVAL);
    /* Negative worker task index. */
    sr_store_worker w = {.task_index = -1};
    c = (sr_store_commit){
        .global_step = 6, .tensors = &good, .ntensors = 1, .workers = &w, .nworkers = 1};
    assert_sr_err(sr_store_commit_step(st, &c), SR_EINVAL);
    assert_sr_err(sr_store_commit_step(st, NULL), SR_EINVAL);

    /* Nothing changed: step 5 with b, still one checkpoint, no slot. */
    assert_sr_ok(sr_store_get_info(st, &info));
    assert_int_equal(info.global_step, 5);
    assert_int_equal(info.ncheckpoints, 1);
    assert_sr_ok(sr_store_read_tensor(st, id, NULL, -1, out, sizeof(out)));
    assert_memory_equal(out, b, sizeof(b));
    char *rep = NULL;
    assert_sr_ok(sr_store_verify(st, &rep));
    free(rep);
    /* And the handle still works. */
    c = (sr_store_commit){.global_step = 6, .tensors = &good, .ntensors = 1};
    assert_sr_ok(sr_store_commit_step(st, &c));
    assert_sr_ok(sr_store_read_tensor(st, id, NULL, 6, out, sizeof(out)));
    assert_memory_equal(out, a, sizeof(a));
    sr_store_close(st);
}

static void
test_store_records_incarnations_config_workers_log_roundtrip(void **state)
{
    store_fixture    *f = *state;
    sr_store         *st = open_small(f->path, 64, 3);
    const int64_t     shape[1] = {4};
    float             v[4] = {1, 2, 3, 4};
    int64_t           id;
    uint64_t          inc = 0;
    char             *cfg = NULL;
    sr_store_worker  *ws = NULL;
    sr_store_contrib *log = NULL;
    size_t            n = 0;

    assert_sr_ok(sr_store_new_incarnation(st, &inc));
    assert_int_equal(inc, 1);
    assert_sr_ok(sr_store_new_incarnation(st, &inc));
    assert_int_equal(inc, 2);
    assert_sr_ok(sr_store_get_config(st, &cfg));
    assert_string_equal(cfg, "");
    free(cfg);
    assert_sr_ok(sr_store_set_config(st, "{\"replicas\": 2}"));
    assert_sr_ok(sr_store_get_config(st, &cfg));
    assert_string_equal(cfg, "{\"replicas\": 2}");
    free(cfg);

    assert_sr_ok(sr_store_declare(st, "w", SR_FLOAT32, 1, shape, 1, v, sizeof(v), &id, NULL));
    assert_sr_ok(sr_store_set_ready(st));
    for (int64_t g = 1; g <= 3; g++) {
        sr_store_worker w[2] = {
            {.task_index = 1, .local_step = g, .last_seen_ms = 1000 + g, .incarnation = inc},
            {.task_index = 0, .local_step = g - 1, .last_seen_ms = 2000 + g, .incarnation = inc}};
        /* Two partitions of w: elements [0, 2) and [2, 4). */
        sr_store_contrib l[3] = {
            {g - 1, id, 2, 0, 0, g - 1}, {g - 1, id, 0, 0, 1, g - 1}, {g - 1, id, 0, 1, 0, g - 1}};
        sr_store_tensor t = {.var_id = id, .data = v, .len_bytes = sizeof(v)};
        sr_store_commit c = {.global_step = g,
                             .tensors = &t,
                             .ntensors = 1,
                             .workers = w,
                             .nworkers = 2,
                             .log = l,
                             .nlog = 3};
        assert_sr_ok(sr_store_commit_step(st, &c));
    }
    /* A partition past the variable's last element: refused. */
    sr_store_contrib bad = {3, id, 4, 0, 0, 3};
    sr_store_tensor  t4 = {.var_id = id, .data = v, .len_bytes = sizeof(v)};
    sr_store_commit  c4 = {.global_step = 4, .tensors = &t4, .ntensors = 1, .log = &bad, .nlog = 1};
    assert_sr_err(sr_store_commit_step(st, &c4), SR_EINVAL);
    assert_non_null(strstr(sr_store_errmsg(st), "part 4"));
    assert_sr_ok(sr_store_list_workers(st, &ws, &n));
    assert_int_equal(n, 2);
    assert_int_equal(ws[0].task_index, 0);
    assert_int_equal(ws[0].local_step, 2);
    assert_int_equal(ws[0].last_seen_ms, 2003);
    assert_int_equal(ws[1].task_index, 1);
    assert_int_equal(ws[1].local_step, 3);
    assert_int_equal(ws[1].incarnation, 2);
    free(ws);
    assert_sr_ok(sr_store_read_log(st, 1, 3, &log, &n));
    assert_int_equal(n, 6);
    assert_int_equal(log[0].step, 1);
    assert_int_equal(log[0].part, 0);
    assert_int_equal(log[0].pos, 0);
    assert_int_equal(log[0].task_index, 1);
    assert_int_equal(log[1].pos, 1);
    assert_int_equal(log[1].task_index, 0);
    assert_int_equal(log[2].part, 2);
    assert_int_equal(log[2].pos, 0);
    assert_int_equal(log[2].task_index, 0);
    assert_int_equal(log[3].step, 2);
    free(log);
    assert_sr_ok(sr_store_read_log(st, 0, 100, &log, &n));
    assert_int_equal(n, 9);
    free(log);

    /* Incarnations: each with the step it started from and its config. */
    sr_store_incarnation *incs = NULL;
    assert_sr_ok(sr_store_new_incarnation(st, &inc));
    assert_int_equal(inc, 3);
    assert_sr_ok(sr_store_rewind(st, 2));
    assert_sr_ok(sr_store_new_incarnation(st, &inc));
    assert_sr_ok(sr_store_set_config(st, "{\"replicas_to_aggregate\":3}"));
    assert_sr_ok(sr_store_list_incarnations(st, &incs, &n));
    assert_int_equal(n, 4);
    assert_int_equal(incs[0].incarnation, 1);
    assert_int_equal(incs[0].restored_step, 0);
    assert_string_equal(incs[0].config, "");
    assert_int_equal(incs[1].incarnation, 2);
    assert_string_equal(incs[1].config, "{\"replicas\": 2}");
    /* Incarnation 3 rewound to step 2: that is the step it started from. */
    assert_int_equal(incs[2].restored_step, 2);
    assert_string_equal(incs[2].config, "");
    assert_int_equal(incs[3].incarnation, 4);
    assert_int_equal(incs[3].restored_step, 2);
    assert_string_equal(incs[3].config, "{\"replicas_to_aggregate\":3}");
    assert_true(incs[3].started_ms > 0);
    free(incs); /* one block */
    sr_store_close(st);
}

static void
test_store_slot_created_on_first_write_absent_before(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 64, 3);
    const int64_t  shape[1] = {40};
    float          v[40], m[40], out[40];
    uint8_t        dirty[3] = {0, 1, 0}; /* ignored on a slot's first write */
    int64_t        id;
    char         **names = NULL;
    size_t         n = 0;

    fill_pattern(v, SR_FLOAT32, 40, 3, 0);
    assert_sr_ok(sr_store_declare(st, "w", SR_FLOAT32, 1, shape, 1, v, sizeof(v), &id, NULL));
    assert_sr_ok(sr_store_set_ready(st));
    fill_pattern(m, SR_FLOAT32, 40, 4, 1);
    sr_store_tensor t[2] = {
        {.var_id = id, .data = v, .len_bytes = sizeof(v)},
        {.var_id = id, .slot = "momentum", .data = m, .len_bytes = sizeof(m), .dirty = dirty}};
    sr_store_commit c = {.global_step = 1, .tensors = t, .ntensors = 2};
    assert_sr_ok(sr_store_commit_step(st, &c));
    assert_sr_ok(sr_store_list_slots(st, id, &names, &n));
    assert_int_equal(n, 1);
    assert_string_equal(names[0], "momentum");
    sr_store_free_names(names, n);
    assert_sr_ok(sr_store_read_tensor(st, id, "momentum", -1, out, sizeof(out)));
    assert_memory_equal(out, m, sizeof(m));
    assert_sr_err(sr_store_read_tensor(st, id, "momentum", 0, out, sizeof(out)), SR_ENOENT);
    assert_sr_err(sr_store_read_tensor(st, id, "adam_v", -1, out, sizeof(out)), SR_ENOENT);
    assert_sr_err(sr_store_read_tensor(st, id + 1, NULL, -1, out, sizeof(out)), SR_ENOENT);
    assert_sr_err(sr_store_list_slots(st, id + 1, &names, &n), SR_ENOENT);
    sr_store_close(st);
}

static void
test_store_find_var_by_name(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 64, 3);
    const int64_t  shape[1] = {5};
    int64_t        id;
    sr_store_var   v;

    assert_sr_ok(sr_store_declare(st, "bias", SR_INT32, 1, shape, 0, NULL, 0, &id, NULL));
    assert_sr_ok(sr_store_find_var(st, "bias", &v));
    assert_int_equal(v.id, id);
    assert_int_equal(v.nbytes, 20);
    assert_int_equal(v.trainable, 0);
    assert_sr_err(sr_store_find_var(st, "nope", &v), SR_ENOENT);
    sr_store_close(st);
}

static void
test_store_export_while_open_copy_matches_and_step_rewinds(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 64, 3);
    sr_store      *cp = NULL;
    const int64_t  shape[1] = {50};
    float          v[50], out[50];
    int64_t        id;
    char           out1[700], out2[700];
    struct stat    sb;
    sr_store_info  info;
    sr_store_opts  ro = {.readonly = 1};

    fill_pattern(v, SR_FLOAT32, 50, 5, 0);
    assert_sr_ok(sr_store_declare(st, "w", SR_FLOAT32, 1, shape, 1, v, sizeof(v), &id, NULL));
    assert_sr_ok(sr_store_set_ready(st));
    for (int64_t g = 1; g <= 4; g++) {
        fill_pattern(v, SR_FLOAT32, 50, 5, g);
        sr_store_tensor t = {.var_id = id, .data = v, .len_bytes = sizeof(v)};
        sr_store_commit c = {.global_step = g, .tensors = &t, .ntensors = 1};
        assert_sr_ok(sr_store_commit_step(st, &c));
    }
    snprintf(out1, sizeof(out1), "%s/copy.db", f->dir);
    snprintf(out2, sizeof(out2), "%s/copy3.db", f->dir);
    assert_sr_ok(sr_store_export(st, out1, -1));
    assert_sr_ok(sr_store_export(st, out2, 3));
    assert_int_equal(stat(out1, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    assert_int_equal(stat(out2, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    /* Refuses an existing target and leaves it alone. */
    assert_sr_err(sr_store_export(st, out1, -1), SR_EEXIST);
    assert_sr_err(sr_store_export(st, f->path, -1), SR_EEXIST);
    char out3[700];
    snprintf(out3, sizeof(out3), "%s/copy0.db", f->dir);
    assert_sr_err(sr_store_export(st, out3, 0), SR_ENOENT); /* step 0 no longer retained */
    assert_false(file_exists(out3));

    /* The original keeps working after the export. */
    fill_pattern(v, SR_FLOAT32, 50, 5, 5);
    sr_store_tensor t = {.var_id = id, .data = v, .len_bytes = sizeof(v)};
    sr_store_commit c = {.global_step = 5, .tensors = &t, .ntensors = 1};
    assert_sr_ok(sr_store_commit_step(st, &c));

    assert_sr_ok(sr_store_open(out1, &ro, &cp));
    assert_sr_ok(sr_store_get_info(cp, &info));
    assert_int_equal(info.global_step, 4);
    assert_int_equal(info.model_ready, 1);
    assert_sr_ok(sr_store_read_tensor(cp, id, NULL, -1, out, sizeof(out)));
    fill_pattern(v, SR_FLOAT32, 50, 5, 4);
    assert_memory_equal(out, v, sizeof(v));
    assert_sr_ok(sr_store_read_tensor(cp, id, NULL, 2, out, sizeof(out)));
    fill_pattern(v, SR_FLOAT32, 50, 5, 2);
    assert_memory_equal(out, v, sizeof(v));
    sr_store_close(cp);

    assert_sr_ok(sr_store_open(out2, &ro, &cp));
    assert_sr_ok(sr_store_get_info(cp, &info));
    assert_int_equal(info.global_step, 3);
    assert_int_equal(info.ncheckpoints, 2); /* 2 and 3 */
    assert_sr_ok(sr_store_read_tensor(cp, id, NULL, -1, out, sizeof(out)));
    fill_pattern(v, SR_FLOAT32, 50, 5, 3);
    assert_memory_equal(out, v, sizeof(v));
    assert_sr_err(sr_store_read_tensor(cp, id, NULL, 4, out, sizeof(out)), SR_ENOENT);
    char *rep = NULL;
    assert_sr_ok(sr_store_verify(cp, &rep));
    free(rep);
    sr_store_close(cp);

    assert_sr_ok(sr_store_get_info(st, &info));
    assert_int_equal(info.global_step, 5);
    sr_store_close(st);
}

static void
test_store_readonly_open_reads_while_writer_open(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 64, 3);
    sr_store      *ro = NULL;
    const int64_t  shape[1] = {30};
    int32_t        v[30], out[30];
    int64_t        id;
    sr_store_opts  o = {.readonly = 1};
    sr_store_info  info;

    fill_pattern(v, SR_INT32, 30, 6, 0);
    assert_sr_ok(sr_store_declare(st, "w", SR_INT32, 1, shape, 1, v, sizeof(v), &id, NULL));
    assert_sr_ok(sr_store_set_ready(st));
    assert_sr_ok(sr_store_open(f->path, &o, &ro));
    assert_sr_ok(sr_store_get_info(ro, &info));
    assert_int_equal(info.global_step, 0);
    fill_pattern(v, SR_INT32, 30, 6, 1);
    sr_store_tensor t = {.var_id = id, .data = v, .len_bytes = sizeof(v)};
    sr_store_commit c = {.global_step = 1, .tensors = &t, .ntensors = 1};
    assert_sr_ok(sr_store_commit_step(st, &c));
    assert_sr_ok(sr_store_get_info(ro, &info));
    assert_int_equal(info.global_step, 1);
    assert_sr_ok(sr_store_read_tensor(ro, id, NULL, -1, out, sizeof(out)));
    assert_memory_equal(out, v, sizeof(v));
    char *rep = NULL;
    assert_sr_ok(sr_store_verify(ro, &rep));
    free(rep);
    sr_store_close(ro);
    sr_store_close(st);
}

static void
test_store_readonly_handle_commit_is_eacces(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_small(f->path, 64, 3);
    const int64_t  shape[1] = {4};
    int64_t        id;
    float          v[4] = {1, 2, 3, 4};
    sr_store_opts  o = {.readonly = 1, .create = 1};
    sr_store_info  info;

    assert_sr_ok(sr_store_declare(st, "w", SR_FLOAT32, 1, shape, 1, v, sizeof(v), &id, NULL));
    sr_store_close(st);
    assert_sr_ok(sr_store_open(f->path, &o, &st));
    sr_store_tensor t = {.var_id = id, .data = v, .len_bytes = sizeof(v)};
    sr_store_commit c = {.global_step = 1, .tensors = &t, .ntensors = 1};
    assert_sr_err(sr_store_commit_step(st, &c), SR_EACCES);
    assert_non_null(strstr(sr_store_errmsg(st), f->path));
    uint64_t inc;
    assert_sr_err(sr_store_new_incarnation(st, &inc), SR_EACCES);
    assert_sr_ok(sr_store_get_info(st, &info)); /* still usable for reading */
    assert_int_equal(info.global_step, 0);
    sr_store_close(st);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_store_open_new_file_is_0600_wal_current_schema,
                                        store_fixture_setup, store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_store_page_size_new_store_only_and_checked,
                                        store_fixture_setup, store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_store_declare_every_dtype_roundtrip_matches,
                                        store_fixture_setup, store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_store_chunk_boundaries_roundtrip_matches,
                                        store_fixture_setup, store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_store_chunk_bytes_rounds_down_to_dtype,
                                        store_fixture_setup, store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_store_empty_and_scalar_shapes_roundtrip,
                                        store_fixture_setup, store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_store_declare_same_is_existing_other_is_eexist,
                                        store_fixture_setup, store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_store_commit_bad_input_is_einval_nothing_changed,
                                        store_fixture_setup, store_fixture_teardown),
        cmocka_unit_test_setup_teardown(
            test_store_records_incarnations_config_workers_log_roundtrip, store_fixture_setup,
            store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_store_slot_created_on_first_write_absent_before,
                                        store_fixture_setup, store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_store_find_var_by_name, store_fixture_setup,
                                        store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_store_export_while_open_copy_matches_and_step_rewinds,
                                        store_fixture_setup, store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_store_readonly_open_reads_while_writer_open,
                                        store_fixture_setup, store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_store_readonly_handle_commit_is_eacces,
                                        store_fixture_setup, store_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
