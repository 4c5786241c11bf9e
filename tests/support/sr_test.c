/* Test support.  See tests/support/sr_test.h. */
#include "sr_test.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "tools/proc.h"

void
sr_test_check(int rc, int want, const char *expr, const char *file, int line)
{
    if (rc != want) {
        print_error("%s:%d: %s returned %s (%d), expected %s (%d): %s\n", file, line, expr,
                    sr_errname(rc), rc, sr_errname(want), want, sr_errdetail());
        _fail(file, line);
    }
}

void
sr_test_near(double a, double b, double eps, const char *expr, const char *file, int line)
{
    if (!(fabs(a - b) <= eps)) {
        print_error("%s:%d: %s: %.17g != %.17g (eps %g)\n", file, line, expr, a, b, eps);
        _fail(file, line);
    }
}

int
sr_test_wait_until(int (*pred)(void *arg), void *arg, int timeout_ms)
{
    int64_t deadline = sr_clock_now_ms() + timeout_ms;
    for (;;) {
        if (pred(arg)) {
            return 1;
        }
        if (sr_clock_now_ms() >= deadline) {
            return 0;
        }
        sr_clock_sleep_ms(5);
    }
}

char *
sr_test_mkdtemp(const char *tag)
{
    const char *tmp = getenv("TMPDIR");
    char        buf[512];
    snprintf(buf, sizeof(buf), "%s/sr-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
    if (mkdtemp(buf) == NULL) {
        return NULL;
    }
    return strdup(buf);
}

void
sr_test_rmdir_rf(const char *path)
{
    DIR           *d;
    struct dirent *e;
    char           sub[1024];
    struct stat    sb;

    if (path == NULL || (d = opendir(path)) == NULL) {
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
        if (lstat(sub, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            sr_test_rmdir_rf(sub);
        } else {
            unlink(sub);
        }
    }
    closedir(d);
    rmdir(path);
}

void
sr_test_ipc_endpoint(const char *dir, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "ipc://%s/%s", dir, name);
}

/* The children are tools/proc.h's: one supervisor for the tests, chaos/ and
 * bench/perf. */
pid_t
sr_test_spawn(char *const argv[], const char *log_path)
{
    return sr_proc_spawn(argv, log_path, 0);
}

void
sr_test_kill(pid_t pid, int sig)
{
    sr_proc_signal(pid, sig);
}

int
sr_test_reap(pid_t pid, int timeout_ms)
{
    int status;

    switch (sr_proc_wait(pid, timeout_ms, &status)) {
    case 1:
        return status;
    case 0:
        sr_proc_kill9(pid);
        return -1;
    default:
        return -1;
    }
}

const char *
sr_test_syncrep_bin(void)
{
    const char *env = getenv("SR_SYNCREP_BIN"); /* test another build of the command */
    if (env != NULL && *env != '\0') {
        return env;
    }
#ifdef SR_SYNCREP_BIN
    return SR_SYNCREP_BIN;
#else
    return "syncrep";
#endif
}
