/*
 * Issue 22 through the real `syncrep` command: a refused --bind says what is
 * wrong in words and leaves no store behind; --version, help COMMAND and
 * chaos-worker --help.
 */
#include "sr_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <sys/file.h>

#include "harness.h"
#include "store/store.h"

/* Run `syncrep ARGS...` (NULL-terminated, at most 16) with stdout and stderr
 * into dir/out.txt; the exit code, the output into out (cap bytes). */
static int
run_syncrep(const char *dir, char *out, size_t cap, const char *const *args)
{
    char        log[700];
    const char *argv[20];
    size_t      n = 0;
    FILE       *f;

    argv[n++] = sr_test_syncrep_bin();
    for (size_t i = 0; args[i] != NULL && n + 1 < sizeof(argv) / sizeof(argv[0]); i++) {
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    snprintf(log, sizeof(log), "%s/out.txt", dir);
    unlink(log);
    pid_t pid = sr_test_spawn((char *const *)argv, log);
    assert_true(pid > 0);
    int st = sr_test_reap(pid, 30000);
    assert_true(st >= 0 && WIFEXITED(st));
    out[0] = '\0';
    if ((f = fopen(log, "r")) != NULL) {
        size_t len = fread(out, 1, cap - 1, f);
        out[len] = '\0';
        fclose(f);
    }
    return WEXITSTATUS(st);
}

/* `syncrep coordinator --store dir/bind.db --bind EP ...`: refused with exit
 * 2, the output holding want, and no store file (nor its -lock) made. */
static void
expect_bind_refused(const char *dir, const char *ep, const char *want)
{
    char store[600], lock[700], out[4096];

    snprintf(store, sizeof(store), "%s/bind.db", dir);
    snprintf(lock, sizeof(lock), "%s-lock", store);
    const char *const args[] = {
        "coordinator", "--store",         store, "--bind", ep, "--replicas-to-aggregate",
        "1",           "--learning-rate", "0.1", NULL};
    int rc = run_syncrep(dir, out, sizeof(out), args);
    if (rc != 2 || strstr(out, want) == NULL) {
        fprintf(stderr, "--bind %s: exit %d, output:\n%s(wanted \"%s\")\n", ep, rc, out, want);
    }
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, want));
    assert_int_equal(access(store, F_OK), -1);
    assert_int_equal(access(lock, F_OK), -1);
}

/* Each of the binds the issue names (a host name, a bare host:port, a
 * missing port) and a few more: words, exit 2, no store. */
static void
test_ops_bind_refused_in_words_no_store(void **state)
{
    char *dir = sr_test_mkdtemp("ops-bind");
    (void)state;

    expect_bind_refused(dir, "tcp://localhost:7999",
                        "'localhost' is neither an IP address of this machine");
    expect_bind_refused(dir, "localhost:7999", "is not an endpoint: --bind takes tcp://");
    expect_bind_refused(dir, "tcp://127.0.0.1", "has no port");
    expect_bind_refused(dir, "tcp://127.0.0.1:", "has no port after the ':'");
    expect_bind_refused(dir, "tcp://127.0.0.1:99999", "is not a number 0..65535");
    expect_bind_refused(dir, "tcp://:7999", "has no address before the port");
    expect_bind_refused(dir, "udp://127.0.0.1:7999", "unknown transport 'udp'");
    expect_bind_refused(dir, "tcp://192.0.2.1:7999", "is not an address of this machine");
    /* A port another process listens on (the trial binds a socket that
     * never listens: a worker connecting meanwhile cannot reach it). */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t          alen = sizeof(a);
    int                fd = socket(AF_INET, SOCK_STREAM, 0);
    char               ep[64];
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
    expect_bind_refused(dir, ep, "the port is in use by another process");
    snprintf(ep, sizeof(ep), "tcp://lo:%u", (unsigned)ntohs(a.sin_port));
    expect_bind_refused(dir, ep, "the port is in use by another process");
    close(fd);
    sr_test_rmdir_rf(dir);
    free(dir);
}

/* --version prints project()'s version; help COMMAND prints that command's
 * usage (exit 0), an unknown one exits 2; chaos-worker --help is its usage. */
static void
test_ops_version_and_help_command(void **state)
{
    char *dir = sr_test_mkdtemp("ops-help");
    char  out[8192], want[64];
    (void)state;

    snprintf(want, sizeof(want), "syncrep %s\n", SR_PROJECT_VERSION);
    assert_int_equal(run_syncrep(dir, out, sizeof(out), (const char *const[]){"--version", NULL}),
                     0);
    assert_string_equal(out, want);
    assert_int_equal(
        run_syncrep(dir, out, sizeof(out), (const char *const[]){"help", "coordinator", NULL}), 0);
    assert_non_null(strstr(out, "usage: syncrep coordinator --store PATH"));
    assert_int_equal(
        run_syncrep(dir, out, sizeof(out), (const char *const[]){"help", "store", NULL}), 0);
    assert_non_null(strstr(out, "usage: syncrep store"));
    assert_int_equal(
        run_syncrep(dir, out, sizeof(out), (const char *const[]){"help", "chaos-worker", NULL}), 0);
    assert_non_null(strstr(out, "usage: syncrep chaos-worker --connect ENDPOINT"));
    assert_int_equal(
        run_syncrep(dir, out, sizeof(out), (const char *const[]){"chaos-worker", "--help", NULL}),
        0);
    assert_non_null(strstr(out, "--task-index I"));
    assert_int_equal(
        run_syncrep(dir, out, sizeof(out), (const char *const[]){"help", "bogus", NULL}), 2);
    assert_non_null(strstr(out, "unknown command 'bogus'"));
    assert_int_equal(run_syncrep(dir, out, sizeof(out),
                                 (const char *const[]){"chaos-worker", "--bogus", "1", NULL}),
                     2);
    assert_non_null(strstr(out, "unknown option '--bogus'"));
    sr_test_rmdir_rf(dir);
    free(dir);
}

/* A store with variables "keep" and "junk" (the second with a momentum
 * slot), the step log on, committed to step 3 with every step retained. */
static void
make_two_var_store(const char *path, int64_t *keep_id, int64_t *junk_id)
{
    sr_store_opts o;
    sr_store     *st = NULL;
    const int64_t shape[1] = {8};
    float         v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint64_t      inc;

    memset(&o, 0, sizeof(o));
    o.create = 1;
    o.keep_checkpoints = 10;
    assert_sr_ok(sr_store_open(path, &o, &st));
    assert_sr_ok(sr_store_new_incarnation(st, &inc));
    assert_sr_ok(
        sr_store_declare(st, "keep", SR_FLOAT32, 1, shape, 1, v, sizeof(v), keep_id, NULL));
    assert_sr_ok(
        sr_store_declare(st, "junk", SR_FLOAT32, 1, shape, 1, v, sizeof(v), junk_id, NULL));
    assert_sr_ok(sr_store_set_ready(st));
    for (int64_t step = 1; step <= 3; step++) {
        for (int i = 0; i < 8; i++) {
            v[i] += 1;
        }
        sr_store_tensor t[3] = {
            {.var_id = *keep_id, .data = v, .len_bytes = sizeof(v)},
            {.var_id = *junk_id, .data = v, .len_bytes = sizeof(v)},
            {.var_id = *junk_id, .slot = "momentum", .data = v, .len_bytes = sizeof(v)}};
        sr_store_contrib log[2] = {{.step = step - 1, .var_id = *keep_id, .task_index = 0},
                                   {.step = step - 1, .var_id = *junk_id, .task_index = 0}};
        sr_store_commit  c = {
             .global_step = step, .tensors = t, .ntensors = 3, .log = log, .nlog = 2};
        assert_sr_ok(sr_store_commit_step(st, &c));
    }
    sr_store_close(st);
}

/* drop-variable: refused (exit 1, nothing changed) while the writer lock is
 * held, as a running coordinator holds it; an unknown name is refused naming
 * it; then the variable, its slot, versions and step-log rows go, the other
 * stays, verify is clean, inspect shows added_at, and a rewind to a retained
 * step still works. */
static void
test_ops_store_drop_variable(void **state)
{
    char         *dir = sr_test_mkdtemp("ops-drop");
    char          path[600], lockp[700], out[8192];
    int64_t       keep_id, junk_id;
    sr_store_opts o;
    sr_store     *st = NULL;
    sr_store_var *vars = NULL;
    size_t        n = 0;
    (void)state;

    snprintf(path, sizeof(path), "%s/s.db", dir);
    snprintf(lockp, sizeof(lockp), "%s-lock", path);
    make_two_var_store(path, &keep_id, &junk_id);

    int fd = open(lockp, O_RDWR | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    assert_int_equal(
        run_syncrep(dir, out, sizeof(out),
                    (const char *const[]){"store", "drop-variable", path, "junk", NULL}),
        1);
    assert_non_null(strstr(out, "in use by another coordinator"));
    close(fd); /* the "coordinator" stopped */

    assert_int_equal(
        run_syncrep(dir, out, sizeof(out),
                    (const char *const[]){"store", "drop-variable", path, "nope", NULL}),
        1);
    assert_non_null(strstr(out, "no variable 'nope'"));

    memset(&o, 0, sizeof(o));
    o.readonly = 1;
    assert_sr_ok(sr_store_open(path, &o, &st));
    assert_sr_ok(sr_store_list_vars(st, &vars, &n));
    assert_int_equal(n, 2); /* the refusals changed nothing */
    free(vars);
    sr_store_close(st);

    assert_int_equal(
        run_syncrep(dir, out, sizeof(out),
                    (const char *const[]){"store", "drop-variable", path, "junk", NULL}),
        0);
    assert_non_null(strstr(out, "dropped variable 'junk' (float32 [8], added at step 0)"));
    assert_int_equal(
        run_syncrep(dir, out, sizeof(out), (const char *const[]){"store", "verify", path, NULL}),
        0);
    assert_int_equal(
        run_syncrep(dir, out, sizeof(out), (const char *const[]){"store", "inspect", path, NULL}),
        0);
    assert_non_null(strstr(out, "added_at"));
    assert_non_null(strstr(out, "variables (1)"));
    assert_null(strstr(out, "junk"));

    memset(&o, 0, sizeof(o));
    assert_sr_ok(sr_store_open(path, &o, &st));
    sr_store_contrib *log = NULL;
    assert_sr_ok(sr_store_read_log(st, 0, 10, &log, &n));
    assert_int_equal(n, 3); /* keep's rows only */
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(log[i].var_id, keep_id);
    }
    free(log);
    sr_store_var v;
    assert_sr_err(sr_store_find_var(st, "junk", &v), SR_ENOENT);
    assert_sr_ok(sr_store_rewind(st, 1));
    float got[8];
    assert_sr_ok(sr_store_read_tensor(st, keep_id, NULL, -1, got, sizeof(got)));
    assert_true(got[0] == 2.0f && got[7] == 9.0f);
    sr_store_close(st);
    assert_int_equal(
        run_syncrep(dir, out, sizeof(out), (const char *const[]){"store", "verify", path, NULL}),
        0);
    sr_test_rmdir_rf(dir);
    free(dir);
}

static int64_t
bytes_of(const char *path)
{
    struct stat sb;
    char        wal[700];
    int64_t     n = stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0;

    snprintf(wal, sizeof(wal), "%s-wal", path);
    return n + (stat(wal, &sb) == 0 ? (int64_t)sb.st_size : 0);
}

/* vacuum: a store whose retention dropped versions shrinks back.  Nine
 * retained versions of a 256 KiB variable, then a commit with
 * keep_checkpoints 1 drops eight of them: the file keeps its size (SQLite
 * reuses free pages, it does not return them); `store vacuum` gives them
 * back (measured: more than halved), nothing stored changes (verify clean,
 * the latest value intact), and it is refused while the lock is held. */
static void
test_ops_store_vacuum_shrinks_after_retention(void **state)
{
    char         *dir = sr_test_mkdtemp("ops-vacuum");
    char          path[600], lockp[700], out[8192];
    sr_store_opts o;
    sr_store     *st = NULL;
    const int64_t shape[1] = {65536};
    float        *v = calloc(65536, sizeof(float)), *got = calloc(65536, sizeof(float));
    int64_t       id;
    uint64_t      inc;
    (void)state;

    assert_non_null(v);
    assert_non_null(got);
    snprintf(path, sizeof(path), "%s/s.db", dir);
    snprintf(lockp, sizeof(lockp), "%s-lock", path);
    memset(&o, 0, sizeof(o));
    o.create = 1;
    o.keep_checkpoints = 10;
    o.page_size = 4096;
    assert_sr_ok(sr_store_open(path, &o, &st));
    assert_sr_ok(sr_store_new_incarnation(st, &inc));
    assert_sr_ok(sr_store_declare(st, "w", SR_FLOAT32, 1, shape, 1, v, 65536 * 4, &id, NULL));
    assert_sr_ok(sr_store_set_ready(st));
    for (int64_t step = 1; step <= 9; step++) {
        if (step == 9) { /* retention drops the older versions now */
            sr_store_close(st);
            o.keep_checkpoints = 1;
            assert_sr_ok(sr_store_open(path, &o, &st));
        }
        for (int i = 0; i < 65536; i++) {
            v[i] = (float)(step * 100000 + i);
        }
        sr_store_tensor t = {.var_id = id, .data = v, .len_bytes = 65536 * 4};
        sr_store_commit c = {.global_step = step, .tensors = &t, .ntensors = 1};
        assert_sr_ok(sr_store_commit_step(st, &c));
    }
    sr_store_close(st);
    int64_t before = bytes_of(path);

    int fd = open(lockp, O_RDWR | O_CREAT, 0600);
    assert_true(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0);
    assert_int_equal(
        run_syncrep(dir, out, sizeof(out), (const char *const[]){"store", "vacuum", path, NULL}),
        1);
    assert_non_null(strstr(out, "in use by another coordinator"));
    close(fd);
    assert_int_equal(bytes_of(path), before);

    assert_int_equal(
        run_syncrep(dir, out, sizeof(out), (const char *const[]){"store", "vacuum", path, NULL}),
        0);
    int64_t after = bytes_of(path);
    fprintf(stderr, "vacuum: %lld bytes before, %lld after\n", (long long)before, (long long)after);
    assert_non_null(strstr(out, "vacuumed"));
    assert_true(before > 9 * 65536 * 4 / 2); /* the dropped versions' pages were kept */
    assert_true(after * 2 < before);
    assert_int_equal(
        run_syncrep(dir, out, sizeof(out), (const char *const[]){"store", "verify", path, NULL}),
        0);
    memset(&o, 0, sizeof(o));
    o.readonly = 1;
    assert_sr_ok(sr_store_open(path, &o, &st));
    assert_sr_ok(sr_store_read_tensor(st, id, NULL, -1, got, 65536 * 4));
    assert_memory_equal(got, v, 65536 * 4);
    sr_store_close(st);
    free(v);
    free(got);
    sr_test_rmdir_rf(dir);
    free(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_bind_refused_in_words_no_store),
        cmocka_unit_test(test_ops_version_and_help_command),
        cmocka_unit_test(test_ops_store_drop_variable),
        cmocka_unit_test(test_ops_store_vacuum_shrinks_after_retention),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
