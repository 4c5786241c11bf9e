/*
 * Crash atomicity: a child process commits steps in a loop (synchronous =
 * FULL; dense variables, an optimizer slot, and a variable updated through
 * sparse dirty chunks, all derived from the step number), and the parent
 * SIGKILLs it at random moments.  After every kill the parent opens the
 * store and checks that it holds exactly some committed step g: every
 * retained checkpoint's tensors equal what the child wrote at that step,
 * the workers and step log belong to g, and sr_store_verify is clean.  The
 * child of the next round resumes from the stored step.
 *
 * A WAL limit of a few commits makes the store's checkpoint thread run
 * throughout, so kills also land while it copies the WAL into the file.
 * The test runs twice: with the default 64 KiB pages, and with 4 KiB pages
 * and SQLite's heap limited to 64 KiB in the child, where every chunk
 * overflows its row's leaf page (the commit writes the leaf parts, then
 * the overflow pages: store_chunk.c), every commit spills pages into the
 * WAL before it ends, and the small WAL writes go through the syncrep
 * VFS's buffer.
 *
 * The only sleep is the random delay before each kill: that is the test.
 * In three rounds of four it starts once the child says it has made its
 * first commit (a pipe), so every such round advances and the kills land in
 * the commits after it however slowly the child runs (a loaded machine, a
 * sanitizer build); in the fourth it starts at the fork, so kills land in
 * the start-up (open, declare) and the first commit too.
 * SR_CRASH_SEED=N replays a run; SR_CRASH_ROUNDS=N changes the count.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "store_test_util.h"

#define CHUNK       4096
#define NA          16384 /* "a": float32, 64 KiB = 16 chunks, dense, plus slot "m" */
#define NB          1000  /* "b": int64, 8000 bytes = 2 chunks, dense */
#define NS          2048  /* "s": float64, 16 KiB = 4 chunks, one dirty chunk per step */
#define NS_CHUNKS   4
#define S_PER_CHUNK (CHUNK / 8)
#define KEEP        3
#define MAX_BYTES   (NA * 4) /* the largest tensor */
_Static_assert(NS * 8 <= MAX_BYTES && NB * 8 <= MAX_BYTES, "MAX_BYTES");

/* The sparse variable's chunk c was last written at the greatest step
 * s <= g with s % 4 == c (s >= 1), else at declaration (0). */
static int64_t
sparse_last(int64_t g, int c)
{
    for (int64_t s = g; s >= 1; s--) {
        if (s % NS_CHUNKS == c) {
            return s;
        }
    }
    return 0;
}

static void
expect_sparse(double *buf, int64_t g)
{
    static double tmp[NS];
    for (int c = 0; c < NS_CHUNKS; c++) {
        fill_pattern(tmp, SR_FLOAT64, NS, 13, sparse_last(g, c));
        memcpy(buf + c * S_PER_CHUNK, tmp + c * S_PER_CHUNK, CHUNK);
    }
}

/* The page size of the test that runs (0: the default, 64 KiB). */
static int page_size;

static sr_store_opts
crash_opts(void)
{
    sr_store_opts o;
    memset(&o, 0, sizeof(o));
    o.page_size = page_size;
    o.sync = SR_STORE_SYNC_FULL;
    o.chunk_bytes = CHUNK;
    o.keep_checkpoints = KEEP;
    /* A WAL limit of a few commits: kills land in the WAL checkpoints of
     * the store's thread (and the committer's) all the time. */
    o.wal_checkpoint_bytes = 1 << 20;
    return o;
}

/* The child: declare (idempotent), mark ready, then commit g+1, g+2 ...
 * until killed, writing a byte to `ready` after the first.  Exits (never
 * returns) with a nonzero code on any error. */
static void
child_run(const char *path, int ready)
{
    static float   a[NA], m[NA];
    static int64_t b[NB];
    static double  s[NS];
    sr_store_opts  o = crash_opts();
    sr_store      *st = NULL;
    sr_store_info  info;
    const int64_t  sa[1] = {NA}, sb[1] = {NB}, ss[1] = {NS};
    int64_t        ida, idb, ids;

    if (page_size != 0) {
        sr_store_set_heap_limit(64 << 10); /* every commit spills */
    }
    if (sr_store_open(path, &o, &st) != SR_OK) {
        _exit(10);
    }
    fill_pattern(a, SR_FLOAT32, NA, 10, 0);
    fill_pattern(b, SR_INT64, NB, 12, 0);
    fill_pattern(s, SR_FLOAT64, NS, 13, 0);
    if (sr_store_declare(st, "a", SR_FLOAT32, 1, sa, 1, a, sizeof(a), &ida, NULL) != SR_OK ||
        sr_store_declare(st, "b", SR_INT64, 1, sb, 1, b, sizeof(b), &idb, NULL) != SR_OK ||
        sr_store_declare(st, "s", SR_FLOAT64, 1, ss, 1, s, sizeof(s), &ids, NULL) != SR_OK ||
        sr_store_set_ready(st) != SR_OK || sr_store_get_info(st, &info) != SR_OK) {
        _exit(11);
    }
    for (int64_t g = info.global_step + 1;; g++) {
        uint8_t dirty[NS_CHUNKS] = {0};
        int     c = (int)(g % NS_CHUNKS);

        fill_pattern(a, SR_FLOAT32, NA, 10, g);
        fill_pattern(m, SR_FLOAT32, NA, 11, g);
        fill_pattern(b, SR_INT64, NB, 12, g);
        /* Only chunk c is right; the rest is garbage the store must skip. */
        memset(s, 0xCD, sizeof(s));
        static double tmp[NS];
        fill_pattern(tmp, SR_FLOAT64, NS, 13, g);
        memcpy(s + c * S_PER_CHUNK, tmp + c * S_PER_CHUNK, CHUNK);
        dirty[c] = 1;
        sr_store_tensor t[4] = {
            {.var_id = ida, .data = a, .len_bytes = sizeof(a)},
            {.var_id = ida, .slot = "m", .data = m, .len_bytes = sizeof(m)},
            {.var_id = idb, .data = b, .len_bytes = sizeof(b)},
            {.var_id = ids, .data = s, .len_bytes = sizeof(s), .dirty = dirty},
        };
        sr_store_worker w = {
            .task_index = 0, .local_step = g - 1, .last_seen_ms = g, .incarnation = 1};
        sr_store_contrib l[2] = {{g - 1, ida, 0, 0, 0, g - 1}, {g - 1, ida, 0, 1, 1, g - 1}};
        sr_store_commit  cm = {.global_step = g,
                               .tensors = t,
                               .ntensors = 4,
                               .workers = &w,
                               .nworkers = 1,
                               .log = l,
                               .nlog = 2};
        if (sr_store_commit_step(st, &cm) != SR_OK) {
            _exit(12);
        }
        if (ready >= 0) {
            if (write(ready, "r", 1) != 1) {
                _exit(14);
            }
            close(ready);
            ready = -1;
        }
    }
}

static void
check_tensor_at(sr_store *st, int64_t id, const char *slot, int64_t at, const void *want,
                size_t len)
{
    static uint8_t got[MAX_BYTES];
    assert_true(len <= sizeof(got));
    assert_sr_ok(sr_store_read_tensor(st, id, slot, at, got, len));
    assert_memory_equal(got, want, len);
}

/* Open after a kill: exactly one committed step, whole.  Returns it. */
static int64_t
check_store(const char *path)
{
    static float   a[NA];
    static int64_t b[NB];
    static double  s[NS];
    sr_store_opts  o = crash_opts();
    sr_store      *st = NULL;
    sr_store_info  info;
    sr_store_var  *vars = NULL;
    int64_t       *steps = NULL;
    size_t         nvars = 0, nsteps = 0;
    char          *rep = NULL;

    assert_sr_ok(sr_store_open(path, &o, &st));
    assert_sr_ok(sr_store_get_info(st, &info));
    int64_t g = info.global_step;
    assert_sr_ok(sr_store_list_vars(st, &vars, &nvars));
    assert_sr_ok(sr_store_list_checkpoints(st, &steps, &nsteps));
    if (!info.model_ready) {
        /* Killed during the first start-up: declared variables hold their
         * initial values at step 0. */
        assert_int_equal(g, 0);
        assert_int_equal(nsteps, 0);
        for (size_t i = 0; i < nvars; i++) {
            uint64_t       tag = strcmp(vars[i].name, "a") == 0   ? 10
                                 : strcmp(vars[i].name, "b") == 0 ? 12
                                                                  : 13;
            static uint8_t want[MAX_BYTES];
            fill_pattern(want, vars[i].dtype, vars[i].nbytes / sr_dtype_size(vars[i].dtype), tag,
                         0);
            check_tensor_at(st, vars[i].id, NULL, -1, want, vars[i].nbytes);
        }
    } else {
        assert_int_equal(nvars, 3);
        /* Checkpoints: exactly the last K committed steps. */
        int64_t first = g - (KEEP - 1) > 0 ? g - (KEEP - 1) : 0;
        assert_int_equal(nsteps, (size_t)(g - first + 1));
        for (size_t k = 0; k < nsteps; k++) {
            int64_t at = steps[k];
            assert_int_equal(at, first + (int64_t)k);
            fill_pattern(a, SR_FLOAT32, NA, 10, at);
            check_tensor_at(st, vars[0].id, NULL, at, a, sizeof(a));
            if (at >= 1) {
                fill_pattern(a, SR_FLOAT32, NA, 11, at);
                check_tensor_at(st, vars[0].id, "m", at, a, sizeof(a));
            } else {
                assert_sr_err(sr_store_read_tensor(st, vars[0].id, "m", at, a, sizeof(a)),
                              SR_ENOENT);
            }
            fill_pattern(b, SR_INT64, NB, 12, at);
            check_tensor_at(st, vars[1].id, NULL, at, b, sizeof(b));
            expect_sparse(s, at);
            check_tensor_at(st, vars[2].id, NULL, at, s, sizeof(s));
        }
        if (g >= 1) {
            sr_store_worker  *w = NULL;
            sr_store_contrib *l = NULL;
            size_t            n = 0;
            assert_sr_ok(sr_store_list_workers(st, &w, &n));
            assert_int_equal(n, 1);
            assert_int_equal(w[0].local_step, g - 1);
            assert_int_equal(w[0].last_seen_ms, g);
            free(w);
            assert_sr_ok(sr_store_read_log(st, g - 1, g + 1, &l, &n));
            assert_int_equal(n, 2);
            free(l);
        }
    }
    rep = NULL;
    sr_err rc = sr_store_verify(st, &rep);
    if (rc != SR_OK) {
        print_error("verify at step %lld:\n%s", (long long)g, rep ? rep : "");
    }
    assert_sr_ok(rc);
    free(rep);
    free(vars);
    free(steps);
    sr_store_close(st);
    return g;
}

static void
crash_rounds(store_fixture *f)
{
    const char   *env = getenv("SR_CRASH_SEED");
    const char   *renv = getenv("SR_CRASH_ROUNDS");
    unsigned      seed = env ? (unsigned)strtoul(env, NULL, 10) : 20240611u;
    int           rounds = renv ? atoi(renv) : 60;
    int64_t       prev = 0, g = 0;
    sr_store_opts o = crash_opts();
    sr_store     *st = NULL;
    int           killed_in_commit = 0;

    print_message("crash test: seed %u (SR_CRASH_SEED=%u replays), %d rounds\n", seed, seed,
                  rounds);
    o.create = 1;
    assert_sr_ok(sr_store_open(f->path, &o, &st));
    sr_store_close(st);
    for (int r = 0; r < rounds; r++) {
        int             status = 0;
        long            delay_ms = 1 + (long)(rand_r(&seed) % 40);
        struct timespec ts = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
        int             fd[2];

        assert_int_equal(pipe(fd), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fd[0]);
            child_run(f->path, fd[1]);
            _exit(13);
        }
        close(fd[1]);
        int waited = r % 4 != 0;
        if (waited) {
            /* Wait (up to a minute) for the child's byte, or its end. */
            struct pollfd p = {.fd = fd[0], .events = POLLIN};
            char          byte;
            assert_int_equal(poll(&p, 1, 60000), 1);
            assert_true(read(fd[0], &byte, 1) >= 0); /* 0: it ended (below) */
        }
        close(fd[0]);
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        assert_int_equal(kill(pid, SIGKILL), 0);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFSIGNALED(status)) {
            fail_msg("round %d: child exited by itself (code %d) before the kill", r,
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        }
        g = check_store(f->path);
        assert_true(g >= prev); /* a crash never loses a committed step */
        if (waited && g <= prev) {
            /* The child had committed a step before its byte: it must be there. */
            fail_msg("round %d: step %lld committed before the kill is gone (store at %lld)", r,
                     (long long)prev + 1, (long long)g);
        }
        killed_in_commit += g > prev;
        prev = g;
    }
    print_message("crash test: %d rounds, final step %lld, %d rounds advanced\n", rounds,
                  (long long)g, killed_in_commit);
    assert_true(killed_in_commit >= rounds - (rounds + 3) / 4); /* every waited round */
}

static void
test_crash_sigkill_mid_commit_leaves_one_whole_step(void **state)
{
    page_size = 0;
    crash_rounds(*state);
}

static void
test_crash_small_pages_spilling_commits(void **state)
{
    page_size = 4096;
    crash_rounds(*state);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_crash_sigkill_mid_commit_leaves_one_whole_step,
                                        store_fixture_setup, store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_crash_small_pages_spilling_commits,
                                        store_fixture_setup, store_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
