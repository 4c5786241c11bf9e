/* tools/proc.c: children started, waited for, stopped and killed by PID. */
#include "sr_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/proc.h"

/* The first line of path into buf ("" if none). */
static void
first_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    buf[0] = '\0';
    if (f != NULL) {
        if (fgets(buf, (int)len, f) == NULL) {
            buf[0] = '\0';
        }
        fclose(f);
    }
}

static void
test_proc_spawn_logs_and_exit_status(void **state)
{
    char *dir = sr_test_mkdtemp("proc");
    char  log[600], line[256];
    int   st = -1;
    (void)state;

    assert_non_null(dir);
    snprintf(log, sizeof(log), "%s/child.log", dir);
    char *const say[] = {"/bin/sh", "-c", "echo one; exit 3", NULL};
    pid_t       pid = sr_proc_spawn(say, log, 0);
    assert_true(pid > 0);
    assert_int_equal(sr_proc_wait(pid, 10000, &st), 1);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    assert_int_equal(sr_proc_wait(pid, 0, &st), -1); /* reaped: no child any more */

    /* Appended by default, truncated with SR_PROC_LOG_TRUNC. */
    char *const two[] = {"/bin/sh", "-c", "echo two", NULL};
    assert_int_equal(sr_proc_wait(sr_proc_spawn(two, log, 0), 10000, &st), 1);
    first_line(log, line, sizeof(line));
    assert_string_equal(line, "one\n");
    assert_int_equal(sr_proc_wait(sr_proc_spawn(two, log, SR_PROC_LOG_TRUNC), 10000, &st), 1);
    first_line(log, line, sizeof(line));
    assert_string_equal(line, "two\n");

    /* A failed exec says so on the log and exits 127. */
    char *const none[] = {"/nonexistent/syncrep", NULL};
    assert_int_equal(sr_proc_wait(sr_proc_spawn(none, log, SR_PROC_LOG_TRUNC), 10000, &st), 1);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 127);
    first_line(log, line, sizeof(line));
    assert_non_null(strstr(line, "exec /nonexistent/syncrep"));
    sr_test_rmdir_rf(dir);
    free(dir);
}

/* The log at path (arg) starts with "ready". */
static int
file_says_ready(void *arg)
{
    char line[64];
    first_line(arg, line, sizeof(line));
    return strcmp(line, "ready\n") == 0;
}

/* Nothing is left in process group *arg (its orphans reaped by init). */
static int
group_gone(void *arg)
{
    return kill(-*(pid_t *)arg, 0) == -1;
}

static void
test_proc_stop_terms_then_kills(void **state)
{
    int st = -1;
    (void)state;

    /* A child that exits on SIGTERM: its wait status. */
    char *const sleeper[] = {"/bin/sleep", "30", NULL};
    pid_t       pid = sr_proc_spawn(sleeper, NULL, 0);
    assert_true(pid > 0);
    assert_int_equal(sr_proc_wait(pid, 0, &st), 0); /* still running */
    st = sr_proc_stop(pid, 10000);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);

    /* One that ignores it: killed after the grace, -1, and its group too. */
    char *dir = sr_test_mkdtemp("proc");
    char  log[600];
    assert_non_null(dir);
    snprintf(log, sizeof(log), "%s/stubborn.log", dir);
    char *const stubborn[] = {"/bin/sh", "-c", "trap '' TERM; echo ready; sleep 30 & wait", NULL};
    pid = sr_proc_spawn(stubborn, log, 0);
    assert_true(pid > 0);
    assert_true(sr_test_wait_until(file_says_ready, log, 10000)); /* the trap is set */
    assert_int_equal(sr_proc_stop(pid, 200), -1);
    assert_true(sr_test_wait_until(group_gone, &pid, 10000)); /* its sleep died too */
    sr_test_rmdir_rf(dir);
    free(dir);

    /* A stopped child is continued so that it can exit. */
    pid = sr_proc_spawn(sleeper, NULL, 0);
    sr_proc_signal(pid, SIGSTOP);
    st = sr_proc_stop(pid, 10000);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);

    pid = sr_proc_spawn(sleeper, NULL, 0);
    st = sr_proc_kill9(pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    assert_int_equal(sr_proc_kill9(0), -1);
    assert_int_equal(sr_proc_stop(-1, 10), -1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_proc_spawn_logs_and_exit_status),
        cmocka_unit_test(test_proc_stop_terms_then_kills),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
