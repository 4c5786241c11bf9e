/* store_mark.c: a store that committed step S never silently comes back
 * below S or empty.  A child commits 40 steps and exits without closing (the
 * whole history is in the -wal, as after a crash); then the -wal is deleted,
 * emptied, cut in half or bit-flipped, and a read-write open must refuse
 * naming both steps, leave the files as they were, verify must report it,
 * and accept_rollback must proceed and record it. */
#include <fcntl.h>
#include <sys/wait.h>

#include "store_test_util.h"

#define NELEM 1024
#define STEPS 40

static void
suffixed(const char *path, const char *sfx, char *out, size_t len)
{
    int n = snprintf(out, len, "%s%s", path, sfx);
    assert_true(n > 0 && (size_t)n < len);
}

/* A child process declares "w", commits steps 1..STEPS and exits without
 * closing the store: nothing is checkpointed into the file. */
static void
commit_in_child(const char *path)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        sr_store_opts o = small_opts(0, 3);
        sr_store     *st = NULL;
        const int64_t shape[1] = {NELEM};
        float         v[NELEM];
        int64_t       id;
        o.sync = SR_STORE_SYNC_NORMAL;
        o.wal_checkpoint_bytes = (int64_t)512 << 20; /* never reached: all in the -wal */
        if (sr_store_open(path, &o, &st) != SR_OK ||
            sr_store_declare(st, "w", SR_FLOAT32, 1, shape, 1, NULL, 0, &id, NULL) != SR_OK ||
            sr_store_set_ready(st) != SR_OK) {
            _exit(1);
        }
        for (int64_t g = 1; g <= STEPS; g++) {
            fill_pattern(v, SR_FLOAT32, NELEM, 1, g);
            sr_store_tensor t = {.var_id = id, .data = v, .len_bytes = sizeof(v)};
            sr_store_commit c = {.global_step = g, .tensors = &t, .ntensors = 1};
            if (sr_store_commit_step(st, &c) != SR_OK) {
                _exit(1);
            }
        }
        _exit(0); /* no close: the -wal keeps everything */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static sr_store_opts
rw_opts(int accept)
{
    sr_store_opts o = small_opts(0, 3);
    o.accept_rollback = accept;
    return o;
}

/* The refusal: SR_EROLLBACK naming both steps and what was found; the store
 * file, its -wal and its mark are left as they were. */
static void
assert_refused_rollback(const char *path, const char *what)
{
    char          wal[700], mark[700];
    size_t        n_db, n_wal, n_mark;
    sr_store     *st = NULL;
    sr_store_opts o = rw_opts(0);

    suffixed(path, "-wal", wal, sizeof(wal));
    suffixed(path, "-mark", mark, sizeof(mark));
    uint8_t *db = read_file_bytes(path, &n_db);
    uint8_t *w = read_file_bytes(wal, &n_wal);
    uint8_t *m = read_file_bytes(mark, &n_mark);
    assert_sr_err(sr_store_open(path, &o, &st), SR_EROLLBACK);
    assert_null(st);
    const char *d = sr_errdetail();
    assert_non_null(strstr(d, path));
    assert_non_null(strstr(d, "step 40 was committed"));
    assert_non_null(strstr(d, "behind its mark"));
    assert_non_null(strstr(d, what));
    assert_non_null(strstr(d, "..40"));
    assert_file_is(path, db, n_db);
    if (w != NULL) {
        assert_file_is(wal, w, n_wal);
    } else {
        assert_false(file_exists(wal));
    }
    assert_file_is(mark, m, n_mark);
    free(db);
    free(w);
    free(m);
}

/* verify (read-only) reports the store behind its mark and fails. */
static void
assert_verify_reports(const char *path)
{
    sr_store_opts ro = {.readonly = 1, .skip_quick_check = 1};
    sr_store     *st = NULL;
    char         *rep = NULL;

    assert_sr_ok(sr_store_open(path, &ro, &st));
    assert_sr_err(sr_store_verify(st, &rep), SR_ECORRUPT);
    assert_non_null(strstr(rep, "behind its mark"));
    assert_non_null(strstr(rep, "step 40"));
    free(rep);
    sr_store_close(st);
}

/* accept_rollback opens; the new incarnation records the loss and resets
 * the mark, so the next plain open is fine. */
static void
assert_accepted(const char *path, int64_t *restored)
{
    sr_store_opts          o = rw_opts(1);
    sr_store              *st = NULL;
    sr_store_rollback      rb;
    sr_store_rollback_rec *recs = NULL;
    size_t                 n = 0;
    uint64_t               inc = 0;

    assert_sr_ok(sr_store_open(path, &o, &st));
    assert_sr_ok(sr_store_get_rollback(st, &rb));
    assert_true(rb.behind);
    assert_true(rb.accepted);
    assert_int_equal(rb.mark_step, STEPS);
    assert_true(rb.store_step < STEPS);
    *restored = rb.store_step;
    assert_sr_ok(sr_store_new_incarnation(st, &inc));
    assert_sr_ok(sr_store_list_rollbacks(st, &recs, &n));
    assert_int_equal(n, 1);
    assert_int_equal(recs[0].incarnation, inc);
    assert_int_equal(recs[0].from_step, STEPS);
    assert_int_equal(recs[0].to_step, rb.store_step);
    assert_string_equal(recs[0].cause, rb.cause);
    free(recs);
    sr_store_close(st);
    o.accept_rollback = 0;
    assert_sr_ok(sr_store_open(path, &o, &st));
    assert_sr_ok(sr_store_get_rollback(st, &rb));
    assert_false(rb.behind);
    sr_store_close(st);
}

static void
test_mark_wal_deleted_refused_then_accepted(void **state)
{
    store_fixture *f = *state;
    char           wal[700];
    int64_t        restored = -1;

    commit_in_child(f->path);
    suffixed(f->path, "-wal", wal, sizeof(wal));
    assert_int_equal(unlink(wal), 0);
    assert_refused_rollback(f->path, "the -wal is missing");
    assert_non_null(strstr(sr_errdetail(), "at step 0 with no variables"));
    assert_verify_reports(f->path);
    assert_accepted(f->path, &restored);
    assert_int_equal(restored, 0);
}

static void
test_mark_wal_truncated_to_zero_refused(void **state)
{
    store_fixture *f = *state;
    char           wal[700];
    int64_t        restored = -1;

    commit_in_child(f->path);
    suffixed(f->path, "-wal", wal, sizeof(wal));
    assert_int_equal(truncate(wal, 0), 0);
    assert_refused_rollback(f->path, "the -wal is empty (0 bytes)");
    assert_verify_reports(f->path);
    assert_accepted(f->path, &restored);
    assert_int_equal(restored, 0);
}

static void
test_mark_wal_cut_in_half_refused(void **state)
{
    store_fixture *f = *state;
    char           wal[700];
    struct stat    sb;
    int64_t        restored = -1;

    commit_in_child(f->path);
    suffixed(f->path, "-wal", wal, sizeof(wal));
    assert_int_equal(stat(wal, &sb), 0);
    assert_int_equal(truncate(wal, sb.st_size / 2), 0);
    assert_refused_rollback(f->path, "shorter than the");
    assert_verify_reports(f->path);
    assert_accepted(f->path, &restored);
    assert_true(restored > 0 && restored < STEPS);
}

static void
test_mark_wal_bit_flipped_refused(void **state)
{
    store_fixture *f = *state;
    char           wal[700];
    size_t         n;
    int64_t        restored = -1;

    commit_in_child(f->path);
    suffixed(f->path, "-wal", wal, sizeof(wal));
    uint8_t *w = read_file_bytes(wal, &n);
    assert_non_null(w);
    w[n / 2] ^= 0x01;
    write_file_bytes(wal, w, n);
    free(w);
    assert_refused_rollback(f->path, "did not all replay");
    assert_verify_reports(f->path);
    assert_accepted(f->path, &restored);
    assert_true(restored < STEPS);
}

/* The store file deleted with its -wal: a new store is not created over a
 * mark that vouches for committed steps, unless accepted. */
static void
test_mark_store_deleted_is_not_recreated_silently(void **state)
{
    store_fixture *f = *state;
    char           p[700];
    sr_store      *st = NULL;
    sr_store_opts  o = rw_opts(0);
    int64_t        restored = -1;

    commit_in_child(f->path);
    unlink(f->path);
    suffixed(f->path, "-wal", p, sizeof(p));
    unlink(p);
    suffixed(f->path, "-shm", p, sizeof(p));
    unlink(p);
    assert_sr_err(sr_store_open(f->path, &o, &st), SR_EROLLBACK);
    assert_non_null(strstr(sr_errdetail(), "does not exist"));
    assert_non_null(strstr(sr_errdetail(), "committed step 40"));
    assert_false(file_exists(f->path));
    assert_accepted(f->path, &restored);
    assert_int_equal(restored, 0);
}

/* What is not a rollback: a clean close, a rewind (the mark follows it), a
 * missing, damaged or foreign mark (rewritten, not refused); read-only
 * opens never write the mark. */
static void
test_mark_legitimate_cases_open(void **state)
{
    store_fixture    *f = *state;
    char              mark[700], other[700];
    sr_store_opts     o = rw_opts(0);
    sr_store_opts     ro = {.readonly = 1};
    sr_store         *st = NULL;
    sr_store_rollback rb;
    size_t            n;

    commit_in_child(f->path);
    suffixed(f->path, "-mark", mark, sizeof(mark));
    /* Recovery replays the whole -wal: at the mark. */
    assert_sr_ok(sr_store_open(f->path, &o, &st));
    assert_sr_ok(sr_store_get_rollback(st, &rb));
    assert_int_equal(rb.state, SR_STORE_MARK_OK);
    assert_false(rb.behind);
    assert_int_equal(rb.mark_step, STEPS);
    assert_sr_ok(sr_store_rewind(st, 39));
    sr_store_close(st);
    assert_sr_ok(sr_store_open(f->path, &o, &st));
    assert_sr_ok(sr_store_get_rollback(st, &rb));
    assert_false(rb.behind);
    assert_int_equal(rb.mark_step, 39);
    sr_store_close(st);

    /* Damaged both slots: rewritten with a notice. */
    uint8_t *m = read_file_bytes(mark, &n);
    memset(m, 0x5A, n);
    write_file_bytes(mark, m, n);
    free(m);
    assert_sr_ok(sr_store_open(f->path, &o, &st));
    assert_sr_ok(sr_store_get_rollback(st, &rb));
    assert_int_equal(rb.state, SR_STORE_MARK_DAMAGED);
    sr_store_close(st);
    assert_sr_ok(sr_store_open(f->path, &o, &st));
    assert_sr_ok(sr_store_get_rollback(st, &rb));
    assert_int_equal(rb.state, SR_STORE_MARK_OK);
    assert_int_equal(rb.mark_step, 39);
    sr_store_close(st);

    /* Another store's mark (higher step): replaced, not a rollback. */
    suffixed(f->dir, "/o.db", other, sizeof(other));
    commit_in_child(other);
    char omark[700];
    suffixed(other, "-mark", omark, sizeof(omark));
    m = read_file_bytes(omark, &n);
    write_file_bytes(mark, m, n);
    free(m);
    assert_sr_ok(sr_store_open(f->path, &o, &st));
    assert_sr_ok(sr_store_get_rollback(st, &rb));
    assert_int_equal(rb.state, SR_STORE_MARK_FOREIGN);
    assert_false(rb.behind);
    sr_store_close(st);

    /* Missing: created; a read-only open creates none. */
    unlink(mark);
    assert_sr_ok(sr_store_open(f->path, &ro, &st));
    sr_store_close(st);
    assert_false(file_exists(mark));
    assert_sr_ok(sr_store_open(f->path, &o, &st));
    assert_sr_ok(sr_store_get_rollback(st, &rb));
    assert_int_equal(rb.state, SR_STORE_MARK_MISSING);
    sr_store_close(st);
    assert_true(file_exists(mark));
    struct stat sb;
    assert_int_equal(stat(mark, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
}

/* A torn write of the newer slot leaves the older one, which is read. */
static void
test_mark_torn_slot_falls_back_to_the_other(void **state)
{
    store_fixture    *f = *state;
    char              mark[700];
    sr_store_opts     o = rw_opts(0);
    sr_store         *st = NULL;
    sr_store_rollback rb;
    size_t            n;

    commit_in_child(f->path);
    suffixed(f->path, "-mark", mark, sizeof(mark));
    uint8_t *m = read_file_bytes(mark, &n);
    assert_int_equal(n, 576);
    /* Step 40 was the child's last write; flip a byte in both slots in
     * turn: one of them reads as the newer, the other as step 39 or 40. */
    for (int slot = 0; slot < 2; slot++) {
        uint8_t *c = malloc(n);
        memcpy(c, m, n);
        c[slot * 512 + 30] ^= 0xFF;
        write_file_bytes(mark, c, n);
        free(c);
        assert_sr_ok(sr_store_open(f->path, &o, &st));
        assert_sr_ok(sr_store_get_rollback(st, &rb));
        assert_int_equal(rb.state, SR_STORE_MARK_OK);
        assert_false(rb.behind);
        assert_true(rb.mark_step == 39 || rb.mark_step == 40);
        sr_store_close(st);
        write_file_bytes(mark, m, n);
    }
    free(m);
}

/* Two read-write handles (a coordinator's loop and its commit writer)
 * commit in turn: the mark follows the newest commit whichever wrote it. */
static void
test_mark_two_handles_keep_it_current(void **state)
{
    store_fixture    *f = *state;
    sr_store_opts     o = rw_opts(0);
    sr_store         *a = NULL, *b = NULL;
    sr_store_rollback rb;
    const int64_t     shape[1] = {4};
    float             v[4] = {1, 2, 3, 4};
    int64_t           id;

    assert_sr_ok(sr_store_open(f->path, &o, &a));
    assert_sr_ok(sr_store_declare(a, "w", SR_FLOAT32, 1, shape, 1, v, sizeof(v), &id, NULL));
    assert_sr_ok(sr_store_set_ready(a));
    assert_sr_ok(sr_store_open(f->path, &o, &b));
    for (int64_t g = 1; g <= 6; g++) {
        sr_store_tensor t = {.var_id = id, .data = v, .len_bytes = sizeof(v)};
        sr_store_commit c = {.global_step = g, .tensors = &t, .ntensors = 1};
        assert_sr_ok(sr_store_commit_step(g <= 4 ? b : a, &c)); /* b, then a again */
    }
    sr_store_close(a);
    sr_store_close(b);
    assert_sr_ok(sr_store_open(f->path, &o, &a));
    assert_sr_ok(sr_store_get_rollback(a, &rb));
    assert_int_equal(rb.state, SR_STORE_MARK_OK);
    assert_int_equal(rb.mark_step, 6);
    assert_false(rb.behind);
    sr_store_close(a);
}

static int
setup(void **state)
{
    return store_fixture_setup(state);
}

int
main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, store_fixture_teardown)
    const struct CMUnitTest tests[] = {
        T(test_mark_wal_deleted_refused_then_accepted),
        T(test_mark_wal_truncated_to_zero_refused),
        T(test_mark_wal_cut_in_half_refused),
        T(test_mark_wal_bit_flipped_refused),
        T(test_mark_store_deleted_is_not_recreated_silently),
        T(test_mark_legitimate_cases_open),
        T(test_mark_torn_slot_falls_back_to_the_other),
        T(test_mark_two_handles_keep_it_current),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
