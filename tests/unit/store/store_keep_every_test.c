/* store_chunk.c, keep_every_steps (issue 22): besides the newest
 * keep_checkpoints steps, the first committed step of each window of E
 * steps stays restorable (values and slots), the versions nothing needs are
 * pruned, a rewind to a sparse step works, and reopening with another E (or
 * none) applies the new rule at the next commit. */
#include <sqlite3.h>

#include "store_test_util.h"

#define N      80 /* float32 elements: 320 bytes = 5 chunks of 64 */
#define CHUNKS 5
#define CE     (N / CHUNKS) /* elements per chunk */

static sr_store *
open_every(const char *path, int keep, int64_t every)
{
    sr_store_opts o = small_opts(64, keep);
    sr_store     *st = NULL;
    o.keep_every_steps = every;
    assert_sr_ok(sr_store_open(path, &o, &st));
    return st;
}

/* Chunk 0 is written at steps 1 and 3 only (so nothing recycles its
 * version of step 1: only the pruning can remove it); chunks 1..4 and the
 * "momentum" slot at every commit. */
static int
chunk0_written(int64_t g)
{
    return g == 1 || g == 3;
}

/* The value the store must give for step s, when the commits were exactly
 * the steps in [0, s] for which `committed` holds. */
static void
value_at(float *v, int64_t s, int (*committed)(int64_t))
{
    int64_t last0 = 0;
    float   tmp[N];

    for (int64_t g = 1; g <= s; g++) {
        if (committed(g) && chunk0_written(g)) {
            last0 = g;
        }
    }
    fill_pattern(v, SR_FLOAT32, N, 1, s);
    fill_pattern(tmp, SR_FLOAT32, N, 1, last0);
    memcpy(v, tmp, CE * sizeof(float));
}

static int
every_step(int64_t g)
{
    (void)g;
    return 1;
}

static int64_t
declare_w(sr_store *st)
{
    return declare_ready_f32(st, "w", N);
}

static void
commit_at(sr_store *st, int64_t id, int64_t g)
{
    float   v[N], m[N];
    uint8_t dirty[CHUNKS] = {0, 1, 1, 1, 1};

    dirty[0] = chunk0_written(g) ? 1 : 0;
    fill_pattern(v, SR_FLOAT32, N, 1, g);
    fill_pattern(m, SR_FLOAT32, N, 2, g);
    sr_store_tensor t[2] = {
        {.var_id = id, .data = v, .len_bytes = sizeof(v), .dirty = dirty},
        {.var_id = id, .slot = "momentum", .data = m, .len_bytes = sizeof(m)},
    };
    sr_store_commit c = {.global_step = g, .tensors = t, .ntensors = 2};
    assert_sr_ok(sr_store_commit_step(st, &c));
}

static void
assert_step_is(sr_store *st, int64_t id, int64_t s, int (*committed)(int64_t))
{
    float want[N], got[N];

    value_at(want, s, committed);
    assert_sr_ok(sr_store_read_tensor(st, id, NULL, s, got, sizeof(got)));
    assert_memory_equal(got, want, sizeof(want));
    if (s > 0) {
        fill_pattern(want, SR_FLOAT32, N, 2, s);
        assert_sr_ok(sr_store_read_tensor(st, id, "momentum", s, got, sizeof(got)));
        assert_memory_equal(got, want, sizeof(want));
    }
}

static void
assert_checkpoints(sr_store *st, const int64_t *want, size_t n)
{
    int64_t *got = NULL;
    size_t   cnt = 0;

    assert_sr_ok(sr_store_list_checkpoints(st, &got, &cnt));
    for (size_t i = 0; i < cnt && i < n; i++) {
        if (got[i] != want[i]) {
            print_error("checkpoint %zu: %lld, want %lld\n", i, (long long)got[i],
                        (long long)want[i]);
        }
    }
    assert_int_equal(cnt, n);
    assert_memory_equal(got, want, n * sizeof(*want));
    free(got);
}

static void
test_keep_every_retains_window_starts_and_prunes_the_rest(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_every(f->path, 2, 5);
    int64_t        id = declare_w(st);
    const int64_t  want[] = {0, 5, 10, 15, 20, 22, 23};

    for (int64_t g = 1; g <= 23; g++) {
        commit_at(st, id, g);
    }
    assert_checkpoints(st, want, sizeof(want) / sizeof(want[0]));
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        assert_step_is(st, id, want[i], every_step);
    }
    /* A dropped step is refused. */
    float buf[N];
    assert_sr_err(sr_store_read_tensor(st, id, NULL, 21, buf, sizeof(buf)), SR_ENOENT);
    /* Versions: chunks 1..4 one per retained step (4 x 7); chunk 0 the ones
     * those steps read, at 0 and 3 (its version of step 1 went when steps 1
     * and 2 were dropped): nothing else is kept.  The slot: one per
     * retained step but step 0 (first written at 1). */
    assert_int_equal(sql_i64(f->path, "SELECT count(*) FROM chunk AS c JOIN tensor AS t ON"
                                      " t.id = c.tensor_id WHERE t.slot = ''"),
                     4 * 7 + 2);
    assert_int_equal(sql_i64(f->path, "SELECT count(*) FROM chunk AS c JOIN tensor AS t ON"
                                      " t.id = c.tensor_id WHERE t.slot = 'momentum'"),
                     5 * 6);
    assert_int_equal(sql_i64(f->path, "SELECT count(*) FROM chunk_data"),
                     sql_i64(f->path, "SELECT count(*) FROM chunk"));
    assert_verify_clean(st);
    sr_store_close(st);
}

static int
sparse_commits(int64_t g)
{
    static const int64_t at[] = {3, 7, 12, 14, 18, 21, 26, 31, 33};
    for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
        if (at[i] == g) {
            return 1;
        }
    }
    return 0;
}

static void
test_keep_every_keeps_first_committed_step_of_a_window(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_every(f->path, 2, 10);
    int64_t        id = declare_w(st);
    const int64_t  want[] = {0, 12, 21, 31, 33};

    /* A checkpoint policy that commits every few steps never lands on a
     * multiple of 10 but 0: each window keeps its first commit. */
    for (int64_t g = 1; g <= 33; g++) {
        if (sparse_commits(g)) {
            commit_at(st, id, g);
        }
    }
    assert_checkpoints(st, want, sizeof(want) / sizeof(want[0]));
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        assert_step_is(st, id, want[i], sparse_commits);
    }
    assert_verify_clean(st);
    sr_store_close(st);
}

static void
test_keep_every_rewind_to_sparse_step_then_train_on(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_every(f->path, 2, 5);
    int64_t        id = declare_w(st);
    const int64_t  want[] = {0, 5, 10, 15, 16, 17};

    for (int64_t g = 1; g <= 23; g++) {
        commit_at(st, id, g);
    }
    assert_sr_ok(sr_store_rewind(st, 10));
    assert_step_is(st, id, 10, every_step);
    for (int64_t g = 11; g <= 17; g++) {
        commit_at(st, id, g);
    }
    assert_checkpoints(st, want, sizeof(want) / sizeof(want[0]));
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        assert_step_is(st, id, want[i], every_step);
    }
    assert_verify_clean(st);
    sr_store_close(st);
}

static void
test_keep_every_reopened_with_another_rule_applies_it(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_every(f->path, 2, 5);
    int64_t        id = declare_w(st);

    for (int64_t g = 1; g <= 23; g++) {
        commit_at(st, id, g);
    }
    sr_store_close(st);
    /* Every 10 now: 5 and 15 go at the next commit, 0, 10, 20 stay. */
    st = open_every(f->path, 2, 10);
    commit_at(st, id, 24);
    const int64_t want10[] = {0, 10, 20, 23, 24};
    assert_checkpoints(st, want10, sizeof(want10) / sizeof(want10[0]));
    for (size_t i = 0; i < sizeof(want10) / sizeof(want10[0]); i++) {
        assert_step_is(st, id, want10[i], every_step);
    }
    assert_verify_clean(st);
    sr_store_close(st);
    /* A handle that does not say keeps the recorded rule. */
    st = open_every(f->path, 2, 0);
    sr_store_info info;
    assert_sr_ok(sr_store_get_info(st, &info));
    assert_int_equal(info.keep_every_steps, 10);
    commit_at(st, id, 25);
    const int64_t want10b[] = {0, 10, 20, 24, 25};
    assert_checkpoints(st, want10b, sizeof(want10b) / sizeof(want10b[0]));
    sr_store_close(st);
    /* Off: only the last two stay, and only their versions (chunks 1..4:
     * two each; chunk 0: the one of step 3, which both read). */
    st = open_every(f->path, 2, SR_STORE_KEEP_EVERY_OFF);
    commit_at(st, id, 26);
    const int64_t want0[] = {25, 26};
    assert_checkpoints(st, want0, 2);
    assert_step_is(st, id, 25, every_step);
    assert_step_is(st, id, 26, every_step);
    assert_int_equal(sql_i64(f->path, "SELECT count(*) FROM chunk AS c JOIN tensor AS t ON"
                                      " t.id = c.tensor_id WHERE t.slot = ''"),
                     4 * 2 + 1);
    assert_verify_clean(st);
    sr_store_close(st);
    /* Recorded too: a handle that does not say keeps none. */
    st = open_every(f->path, 2, 0);
    assert_sr_ok(sr_store_get_info(st, &info));
    assert_int_equal(info.keep_every_steps, 0);
    sr_store_close(st);
}

static void
test_keep_every_negative_is_einval(void **state)
{
    store_fixture *f = *state;
    sr_store_opts  o = small_opts(64, 2);
    sr_store      *st = NULL;

    o.keep_every_steps = -2;
    assert_sr_err(sr_store_open(f->path, &o, &st), SR_EINVAL);
    assert_null(st);
    assert_non_null(strstr(sr_errdetail(), "keep_every_steps"));
    assert_false(file_exists(f->path));
}

int
main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, store_fixture_setup, store_fixture_teardown)
    const struct CMUnitTest tests[] = {
        T(test_keep_every_retains_window_starts_and_prunes_the_rest),
        T(test_keep_every_keeps_first_committed_step_of_a_window),
        T(test_keep_every_rewind_to_sparse_step_then_train_on),
        T(test_keep_every_reopened_with_another_rule_applies_it),
        T(test_keep_every_negative_is_einval),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
