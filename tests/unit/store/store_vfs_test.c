/*
 * The syncrep VFS (store/store_vfs.c): a small commit reaches the WAL in one
 * write instead of two per frame, another process reading the store while
 * it commits only ever sees whole committed steps, big pages go straight
 * through, and a WAL write that the OS refuses fails the commit and leaves
 * the previous step intact (docs/store.md, "The syncrep VFS").
 *
 * The WAL checkpoint (store/store_ckpt.c): run by the store's thread, the
 * WAL stays bounded, the committer only copies the short rest of a cycle,
 * and readers in another process still see only whole steps; with
 * checkpoint_inline the committer does it all (docs/store.md,
 * "Checkpoints").
 */
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "store_test_util.h"

#define NELEM 1024 /* a 4 KiB float32 variable */

static sr_store *
open_wal(const char *path, int page_size, int readonly, int64_t wal_bytes, int ckpt_inline)
{
    sr_store_opts o = small_opts(0, 3);
    sr_store     *st = NULL;
    o.page_size = page_size;
    o.sync = SR_STORE_SYNC_NORMAL;
    o.readonly = readonly;
    o.skip_quick_check = readonly;
    o.wal_checkpoint_bytes = wal_bytes;
    o.checkpoint_inline = ckpt_inline;
    assert_sr_ok(sr_store_open(path, &o, &st));
    return st;
}

static sr_store *
open_paged(const char *path, int page_size, int readonly)
{
    return open_wal(path, page_size, readonly, 0, 0);
}

static int64_t
declare_var(sr_store *st, size_t nelem)
{
    int64_t shape[1] = {(int64_t)nelem};
    int64_t id;
    int     existed;
    float  *v = calloc(nelem, sizeof(float));
    assert_non_null(v);
    fill_pattern(v, SR_FLOAT32, nelem, 1, 0);
    assert_sr_ok(sr_store_declare(st, "w", SR_FLOAT32, 1, shape, 1, v, nelem * sizeof(float), &id,
                                  &existed));
    assert_sr_ok(sr_store_set_ready(st));
    free(v);
    return id;
}

/* Commit step `step` of the pattern; returns what sr_store_commit_step did. */
static sr_err
commit_pattern(sr_store *st, int64_t id, float *v, size_t nelem, int64_t step)
{
    sr_store_worker  w[4];
    sr_store_contrib log[4];
    fill_pattern(v, SR_FLOAT32, nelem, 1, step);
    for (int i = 0; i < 4; i++) {
        w[i] = (sr_store_worker){.task_index = i, .local_step = step, .incarnation = 1};
        log[i] = (sr_store_contrib){
            .step = step - 1, .var_id = id, .pos = i, .task_index = i, .local_step = step - 1};
    }
    sr_store_tensor t = {.var_id = id, .data = v, .len_bytes = nelem * sizeof(float)};
    sr_store_commit c = {.global_step = step,
                         .tensors = &t,
                         .ntensors = 1,
                         .workers = w,
                         .nworkers = 4,
                         .log = log,
                         .nlog = 4};
    return sr_store_commit_step(st, &c);
}

/* Reap a forked child (sr_test_reap: killed after a minute) and require
 * exit status 0. */
static void
assert_child_ok(pid_t pid)
{
    int status = sr_test_reap(pid, 60000);
    assert_true(status != -1 && WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void
assert_step(sr_store *st, int64_t id, size_t nelem, int64_t step)
{
    sr_store_info info;
    float        *want = malloc(nelem * sizeof(float)), *got = malloc(nelem * sizeof(float));
    assert_non_null(want);
    assert_non_null(got);
    assert_sr_ok(sr_store_get_info(st, &info));
    assert_int_equal(info.global_step, step);
    fill_pattern(want, SR_FLOAT32, nelem, 1, step);
    assert_sr_ok(sr_store_read_tensor(st, id, NULL, -1, got, nelem * sizeof(float)));
    assert_memory_equal(got, want, nelem * sizeof(float));
    free(want);
    free(got);
}

/* Reopen the store in 4 KiB pages: it holds `step`, and verifies clean. */
static void
assert_reopened(const char *path, int64_t id, size_t nelem, int64_t step)
{
    sr_store *st = open_paged(path, 4096, 0);
    char     *report = NULL;
    assert_step(st, id, nelem, step);
    assert_sr_ok(sr_store_verify(st, &report));
    free(report);
    sr_store_close(st);
}

static void
test_small_commit_is_one_wal_write(void **state)
{
    store_fixture     *f = *state;
    sr_store          *st = open_paged(f->path, 4096, 0);
    int64_t            id = declare_var(st, NELEM);
    float              v[NELEM];
    sr_store_wal_stats a, b;

    assert_sr_ok(commit_pattern(st, id, v, NELEM, 1));
    sr_store *rd = open_paged(f->path, 4096, 1); /* a second connection */
    sr_store_get_wal_stats(&a);
    for (int64_t s = 2; s <= 51; s++) {
        assert_sr_ok(commit_pattern(st, id, v, NELEM, s));
        /* Committed means readable by another connection at once. */
        assert_step(rd, id, NELEM, s);
    }
    sr_store_get_wal_stats(&b);
    uint64_t asked = b.wal_writes - a.wal_writes, done = b.file_writes - a.file_writes;
    /* Each commit is several frames (value, chunk rows, meta, workers, step
     * log, checkpoint), two writes each, and one write to the file. */
    assert_true(asked >= 50 * 8);
    assert_int_equal(done, 50);
    sr_store_close(rd);
    sr_store_close(st);
    assert_reopened(f->path, id, NELEM, 51);
}

static void
test_big_pages_go_straight_through(void **state)
{
    store_fixture     *f = *state;
    sr_store          *st = open_paged(f->path, 65536, 0);
    size_t             n = 256 * 1024; /* 1 MiB: 16 full pages */
    int64_t            id = declare_var(st, n);
    float             *v = malloc(n * sizeof(float));
    sr_store_wal_stats a, b;

    assert_non_null(v);
    sr_store_get_wal_stats(&a);
    for (int64_t s = 1; s <= 5; s++) {
        assert_sr_ok(commit_pattern(st, id, v, n, s));
    }
    sr_store_get_wal_stats(&b);
    /* Headers are gathered only up to the next big page: nothing saved, and
     * nothing lost. */
    assert_true(b.file_writes - a.file_writes >= (b.wal_writes - a.wal_writes) / 2);
    sr_store_close(st);
    st = open_paged(f->path, 65536, 0);
    assert_step(st, id, n, 5);
    sr_store_close(st);
    free(v);
}

/* A reader process checks every step it sees against the pattern while the
 * writer commits; it exits 0 after `want` good reads and no bad one. */
static int
reader_main(const char *path, int64_t id, size_t nelem, int64_t last, int want)
{
    sr_store_opts o = small_opts(0, 3);
    sr_store     *st = NULL;
    size_t        size = nelem * sizeof(float);
    float        *got = malloc(size), *exp = malloc(size);
    int           good = 0;

    o.readonly = 1;
    o.skip_quick_check = 1;
    o.sync = SR_STORE_SYNC_NORMAL;
    if (got == NULL || exp == NULL || sr_store_open(path, &o, &st) != SR_OK) {
        return 2;
    }
    for (long i = 0; i < 2000000 && good < want; i++) {
        sr_store_info info;
        if (sr_store_get_info(st, &info) != SR_OK) {
            return 3;
        }
        sr_err rc = sr_store_read_tensor(st, id, NULL, info.global_step, got, size);
        if (rc == SR_ENOENT) {
            continue; /* pruned meanwhile: three steps are retained */
        }
        if (rc != SR_OK) {
            return 4;
        }
        fill_pattern(exp, SR_FLOAT32, nelem, 1, info.global_step);
        if (memcmp(got, exp, size) != 0) {
            return 5;
        }
        good++;
        if (info.global_step >= last) {
            break;
        }
    }
    sr_store_close(st);
    free(got);
    free(exp);
    return good > 0 ? 0 : 6;
}

static void
test_reader_process_sees_only_committed_steps(void **state)
{
    store_fixture *f = *state;
    sr_store      *st = open_paged(f->path, 4096, 0);
    int64_t        id = declare_var(st, NELEM);
    float          v[NELEM];

    assert_sr_ok(commit_pattern(st, id, v, NELEM, 1));
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        _exit(reader_main(f->path, id, NELEM, 400, 200));
    }
    for (int64_t s = 2; s <= 400; s++) {
        assert_sr_ok(commit_pattern(st, id, v, NELEM, s));
    }
    assert_child_ok(pid);
    sr_store_close(st);
}

/* The child commits until the OS refuses a WAL write (RLIMIT_FSIZE: the
 * file may not grow past a limit, a full disk as far as SQLite can tell);
 * exit 0 when that commit failed cleanly (SR_ENOSPC, or SR_ESTORE for an I/O error). */
static int
limited_writer(const char *path, int64_t id, size_t nelem, int64_t step, off_t room, int64_t heap)
{
    sr_store_opts o = small_opts(0, 3);
    sr_store     *st = NULL;
    float        *v = calloc(nelem, sizeof(float));
    char          wal[700];
    struct stat   sb;

    if (v == NULL) {
        return 5;
    }
    sr_store_set_heap_limit(heap);
    o.page_size = 4096;
    o.sync = SR_STORE_SYNC_NORMAL;
    o.skip_quick_check = 1;
    signal(SIGXFSZ, SIG_IGN);
    if (sr_store_open(path, &o, &st) != SR_OK) {
        return 2;
    }
    snprintf(wal, sizeof(wal), "%s-wal", path);
    if (stat(wal, &sb) != 0) {
        return 3;
    }
    /* Room for part of one more commit. */
    struct rlimit rl = {.rlim_cur = (rlim_t)(sb.st_size + room), .rlim_max = RLIM_INFINITY};
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) {
        return 4;
    }
    sr_err rc = commit_pattern(st, id, v, nelem, step);
    sr_store_close(st);
    free(v);
    return rc == SR_ENOSPC || rc == SR_ESTORE ? 0 : 10 + (int)rc;
}

/* Commit steps 1..last - 1 of an nelem variable in 4 KiB pages, then have
 * a child commit step `last` with the WAL limited to `room` more bytes and
 * SQLite's heap to `heap` (0: none): that commit fails, the store still
 * holds step last - 1 (clean), and takes step last afterwards. */
static void
refused_commit(store_fixture *f, size_t nelem, int64_t last, off_t room, int64_t heap)
{
    sr_store *st = open_paged(f->path, 4096, 0);
    int64_t   id = declare_var(st, nelem);
    float    *v = malloc(nelem * sizeof(float));

    assert_non_null(v);
    for (int64_t s = 1; s < last; s++) {
        assert_sr_ok(commit_pattern(st, id, v, nelem, s));
    }
    sr_store_close(st);

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        _exit(limited_writer(f->path, id, nelem, last, room, heap));
    }
    assert_child_ok(pid);

    assert_reopened(f->path, id, nelem, last - 1);
    st = open_paged(f->path, 4096, 0);
    assert_sr_ok(commit_pattern(st, id, v, nelem, last));
    sr_store_close(st);
    assert_reopened(f->path, id, nelem, last);
    free(v);
}

static void
test_refused_wal_write_fails_the_commit(void **state)
{
    /* Room for part of one small commit (~9 frames of 4 KiB). */
    refused_commit(*state, NELEM, 3, 10000, 0);
}

/* The same for a big commit whose pages spill into the WAL before it ends
 * (1 MiB in 4 KiB pages, SQLite's heap at 256 KiB, step 5 recycles its
 * chunk's version so its bytes are written last): the refusal lands in a
 * spill, in the middle of the chunk's bytes. */
static void
test_refused_wal_write_mid_spill(void **state)
{
    refused_commit(*state, 256 * 1024, 5, 500000, 256 << 10);
}

/* Open file descriptors of this process. */
static int
count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int  n = 0;
    assert_non_null(d);
    while (readdir(d) != NULL) {
        n++;
    }
    closedir(d);
    return n;
}

/* synchronous=FULL: while a big commit writes its frames, the layer starts
 * their writeback every MiB (so the commit's fsync finds most of it on
 * disk); NORMAL, which syncs no commit, starts none.  The layer's own
 * descriptor of the WAL is closed with the store; the steps read back. */
static void
test_full_commit_starts_writeback(void **state)
{
    enum { N = 1 << 20 }; /* 4 MiB of float32 */
    store_fixture *f = *state;
    float         *v = malloc(N * sizeof(float));
    int            fds = count_fds();
    int64_t        id = 0;

    assert_non_null(v);
    for (int full = 1; full >= 0; full--) {
        sr_store_opts o = small_opts(0, 3);
        sr_store     *st = NULL;
        o.sync = full ? SR_STORE_SYNC_FULL : SR_STORE_SYNC_NORMAL;
        assert_sr_ok(sr_store_open(f->path, &o, &st));
        if (full) {
            id = declare_var(st, N);
        }
        for (int64_t s = 1; s <= 3; s++) {
            sr_store_wal_stats a, b;
            int64_t            step = (full ? 0 : 3) + s;
            sr_store_get_wal_stats(&a);
            assert_sr_ok(commit_pattern(st, id, v, N, step));
            sr_store_get_wal_stats(&b);
            if (full) {
                assert_true(b.writebacks - a.writebacks >= 3);
            } else {
                assert_int_equal(b.writebacks, a.writebacks);
            }
        }
        sr_store_close(st);
        assert_int_equal(count_fds(), fds);
    }
    assert_reopened(f->path, id, N, 6);
    free(v);
}

static void
remove_store(const char *path)
{
    static const char *const sfx[] = {"", "-wal", "-shm", "-mark"};
    char                     p[700];
    for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", path, sfx[i]);
        unlink(p);
    }
}

/* Commits far bigger than the layer's buffer, in every page size it
 * gathers: the buffer reaches the file in writes the default VFS takes
 * whole (a 256 KiB buffer made each of these fail as a full disk). */
static void
test_commits_bigger_than_the_buffer(void **state)
{
    enum { N = 128 * 1024 }; /* 512 KiB of float32 */
    store_fixture *f = *state;
    float         *v = malloc(N * sizeof(float));
    const int      pages[] = {1024, 4096, 16384};

    assert_non_null(v);
    for (size_t p = 0; p < sizeof(pages) / sizeof(pages[0]); p++) {
        remove_store(f->path);
        sr_store *st = open_paged(f->path, pages[p], 0);
        int64_t   id = declare_var(st, N);
        for (int64_t s = 1; s <= 3; s++) {
            assert_sr_ok(commit_pattern(st, id, v, N, s));
        }
        sr_store_close(st);
        st = open_paged(f->path, pages[p], 0);
        assert_step(st, id, N, 3);
        sr_store_close(st);
    }
    free(v);
}

/* A commit bigger than SQLite's page cache (4 MiB in 1 MiB chunks and
 * 4 KiB pages: ~1,030 frames; SQLite's heap limited to 2 MiB, as the
 * coordinator limits it to 8) spills pages into the WAL before it ends.  The store writes the chunk
 * bytes last, each page once, so no spilled page is modified again and SQLite asks for two writes
 * per frame (header, page), no more.  Were a spilled page modified again, the commit would rewrite
 * the checksum of every frame after it: a read and a third write per frame (store_chunk.c, "Writing
 * the bytes last"). */
static void
test_big_commit_writes_each_frame_once(void **state)
{
    enum { N = 1 << 20 }; /* 4 MiB of float32 */
    store_fixture *f = *state;
    sr_store_opts  o = small_opts(1 << 20, 3);
    sr_store      *st = NULL;
    float         *v = malloc(N * sizeof(float));

    assert_non_null(v);
    o.page_size = 4096;
    o.sync = SR_STORE_SYNC_NORMAL;
    sr_store_set_heap_limit(2 << 20);
    assert_sr_ok(sr_store_open(f->path, &o, &st));
    int64_t id = declare_var(st, N);
    for (int64_t s = 1; s <= 8; s++) {
        sr_store_wal_stats  a, b;
        sr_store_ckpt_stats ka, kb;
        sr_store_get_wal_stats(&a);
        sr_store_get_ckpt_stats(st, &ka);
        assert_sr_ok(commit_pattern(st, id, v, N, s));
        sr_store_get_wal_stats(&b);
        sr_store_get_ckpt_stats(st, &kb);
        uint64_t frames = kb.wal_frames - ka.wal_frames, asked = b.wal_writes - a.wal_writes;
        print_message("step %lld: %llu frames, %llu writes\n", (long long)s,
                      (unsigned long long)frames, (unsigned long long)asked);
        assert_true(frames >= (uint64_t)N * sizeof(float) / 4096);
        if (s >= 3) {
            /* From step 3 on every chunk recycles a version (K = 3: the
             * declaration and steps 1 and 2 made three). */
            assert_true(asked <= 2 * frames);
        }
    }
    sr_store_close(st);
    sr_store_set_heap_limit(0);
    assert_reopened(f->path, id, N, 8);
    free(v);
}

/* Commit with a 256 KiB WAL limit (64 pages of 4 KiB, ~6 commits of a
 * 16 KiB variable) until the committer has run `cycles` checkpoints and at
 * least 200 steps.  With `reader`, a reader process checks every step it
 * sees meanwhile (up to step 200); without, the WAL's size is checked too
 * (a reader can hold back the WAL's restart, so its size is not bounded
 * then).  Returns the last step. */
static int64_t
commit_cycles(store_fixture *f, int ckpt_inline, int reader, int cycles, sr_store_ckpt_stats *out)
{
    enum { N = 4 * NELEM, WAL_BYTES = 256 << 10 };
    sr_store *st = open_wal(f->path, 4096, 0, WAL_BYTES, ckpt_inline);
    int64_t   id = declare_var(st, N);
    float    *v = malloc(N * sizeof(float));
    char      wal[700];
    int64_t   s = 1, most = 0;

    assert_non_null(v);
    assert_sr_ok(commit_pattern(st, id, v, N, s));
    pid_t pid = reader ? fork() : 0;
    assert_true(pid >= 0);
    if (reader && pid == 0) {
        _exit(reader_main(f->path, id, N, 200, 1 << 30));
    }
    snprintf(wal, sizeof(wal), "%s-wal", f->path);
    do {
        struct stat sb;
        assert_sr_ok(commit_pattern(st, id, v, N, ++s));
        sr_store_get_ckpt_stats(st, out);
        assert_int_equal(stat(wal, &sb), 0);
        most = sb.st_size > most ? sb.st_size : most;
    } while ((out->inline_passes < (uint64_t)cycles || s < 200) && s < 100000);
    if (reader) {
        assert_child_ok(pid); /* it saw only whole steps, up to step 200 */
    }
    assert_int_equal(out->background, !ckpt_inline);
    assert_int_equal(out->failures, 0);
    assert_string_equal(out->last_error, "");
    /* A commit is 4 value pages plus a few others: the WAL never holds more
     * than twice its limit plus a commit (the thread's lag; then the
     * committer waits), inline never more than the limit plus a commit. */
    int64_t limit = (ckpt_inline ? 1 : 2) * (WAL_BYTES / 4096) + 16;
    if (!reader) {
        assert_true((int64_t)out->max_frames <= limit);
        assert_true(most <= 32 + limit * (4096 + 24));
    }
    sr_store_close(st);
    assert_reopened(f->path, id, N, s);
    free(v);
    return s;
}

static void
test_checkpoint_thread(void **state)
{
    for (int reader = 0; reader <= 1; reader++) {
        sr_store_ckpt_stats k;
        commit_cycles(*state, 0, reader, 20, &k);
        /* Every cycle starts with a pass of the thread; the committer only
         * copied what came after it (or waited, when the thread fell
         * behind).  A reader can keep the WAL from restarting; above twice
         * its limit every commit then copies what it can itself, as SQLite
         * does above the limit. */
        assert_true(k.passes >= (reader ? 1 : 20));
        assert_true(k.inline_passes >= 20);
        remove_store(((store_fixture *)*state)->path);
    }
}

static int
thread_passes(sr_store *st)
{
    sr_store_ckpt_stats k;
    sr_store_get_ckpt_stats(st, &k);
    return (int)k.passes;
}

static int
thread_pass_done(void *arg)
{
    void **a = arg;
    return thread_passes(a[0]) >= *(int *)a[1];
}

/* Commit until the WAL holds `frames` (the commit that reaches it hands the
 * checkpoint to the thread and returns without copying anything), then wait
 * until the thread's pass number `pass` is done.  With `rd`, a read
 * transaction is opened on it just before that commit: the pass cannot copy
 * past the reader's snapshot, so it leaves the last commit to copy. */
static void
fill_wal(sr_store *st, int64_t id, float *v, size_t n, int64_t *s, uint64_t frames, int pass,
         sqlite3 *rd)
{
    sr_store_ckpt_stats k;
    uint64_t            prev = 0, inl;

    sr_store_get_ckpt_stats(st, &k);
    inl = k.inline_passes;
    for (;;) {
        sr_store_get_ckpt_stats(st, &k);
        uint64_t cur = k.wal_frames;
        if (rd != NULL && cur + (cur - prev) >= frames) {
            assert_int_equal(
                sqlite3_exec(rd, "BEGIN; SELECT count(*) FROM meta;", NULL, NULL, NULL), SQLITE_OK);
            rd = NULL;
        }
        prev = cur;
        assert_sr_ok(commit_pattern(st, id, v, n, ++*s));
        sr_store_get_ckpt_stats(st, &k);
        if (k.wal_frames >= frames) {
            break;
        }
    }
    assert_int_equal(k.inline_passes, inl); /* the filling commit did not copy */
    void *arg[2] = {st, &pass};
    assert_int_equal(sr_test_wait_until(thread_pass_done, arg, 30000), 1);
}

/* Two cycles the way they go when the disk keeps up.  (1) The thread copies
 * everything before the next commit, which then restarts the WAL from its
 * start: the committer copies nothing.  (2) A reader holds the thread's
 * pass back by one commit: the next commit copies the rest itself, a short
 * checkpoint without waiting, and the one after restarts the WAL. */
static void
test_checkpoint_thread_cycle(void **state)
{
    enum { N = 4 * NELEM, WAL_BYTES = 256 << 10, T = WAL_BYTES / 4096 };
    store_fixture      *f = *state;
    sr_store           *st = open_wal(f->path, 4096, 0, WAL_BYTES, 0);
    int64_t             id = declare_var(st, N);
    float              *v = malloc(N * sizeof(float));
    int64_t             s = 0;
    sr_store_ckpt_stats k;
    sqlite3            *rd = NULL;

    assert_non_null(v);
    fill_wal(st, id, v, N, &s, T, 1, NULL);
    sr_store_get_ckpt_stats(st, &k);
    uint64_t full = k.max_frames;
    assert_sr_ok(commit_pattern(st, id, v, N, ++s));
    sr_store_get_ckpt_stats(st, &k); /* restarted: the WAL starts at frame 0 again */
    assert_true(k.wal_frames < full / 4);
    assert_int_equal(k.max_frames, full);
    assert_int_equal(k.passes, 1);
    assert_int_equal(k.inline_passes, 0);

    assert_int_equal(sqlite3_open_v2(f->path, &rd, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    fill_wal(st, id, v, N, &s, full, 2, rd);
    assert_int_equal(sqlite3_exec(rd, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    assert_sr_ok(commit_pattern(st, id, v, N, ++s));
    sr_store_get_ckpt_stats(st, &k);
    assert_int_equal(k.inline_passes, 1);
    assert_int_equal(k.waits, 0);
    assert_true(k.max_frames < 2 * T); /* never near the limit where commits wait */
    uint64_t most = k.max_frames;
    assert_sr_ok(commit_pattern(st, id, v, N, ++s));
    sr_store_get_ckpt_stats(st, &k);
    assert_true(k.wal_frames < full / 4);
    assert_int_equal(k.max_frames, most);
    assert_int_equal(k.passes, 2);
    assert_int_equal(k.inline_passes, 1);
    assert_int_equal(k.failures, 0);
    assert_step(st, id, N, s);
    sqlite3_close(rd);
    sr_store_close(st);
    st = open_paged(f->path, 4096, 0);
    assert_step(st, id, N, s);
    sr_store_close(st);
    free(v);
}

static void
test_checkpoint_inline(void **state)
{
    for (int reader = 0; reader <= 1; reader++) {
        sr_store_ckpt_stats k;
        commit_cycles(*state, 1, reader, 20, &k);
        assert_int_equal(k.passes, 0);
        assert_int_equal(k.waits, 0);
        assert_true(k.inline_passes >= 20);
        remove_store(((store_fixture *)*state)->path);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_small_commit_is_one_wal_write, store_fixture_setup,
                                        store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_big_pages_go_straight_through, store_fixture_setup,
                                        store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_reader_process_sees_only_committed_steps,
                                        store_fixture_setup, store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refused_wal_write_fails_the_commit,
                                        store_fixture_setup, store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refused_wal_write_mid_spill, store_fixture_setup,
                                        store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_commits_bigger_than_the_buffer, store_fixture_setup,
                                        store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_big_commit_writes_each_frame_once, store_fixture_setup,
                                        store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_full_commit_starts_writeback, store_fixture_setup,
                                        store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_thread, store_fixture_setup,
                                        store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_thread_cycle, store_fixture_setup,
                                        store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_inline, store_fixture_setup,
                                        store_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
