/* Test support.  See tests/support/sr_test.h. */
#include "sr_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

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

pid_t
sr_test_spawn(char *const argv[], const char *log_path)
{
    pid_t pid = fork();
    if (pid < 0) {
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        /* If the test dies (a ctest timeout), its children die with it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (log_path != NULL) {
            int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
            if (fd >= 0) {
                dup2(fd, 1);
                dup2(fd, 2);
                close(fd);
            }
        }
        execv(argv[0], argv);
        _exit(127);
    }
    setpgid(pid, pid); /* also from the parent: no race with the kill below */
    return pid;
}

void
sr_test_kill(pid_t pid, int sig)
{
    if (pid > 0) {
        kill(-pid, sig);
        kill(pid, sig);
    }
}

int
sr_test_reap(pid_t pid, int timeout_ms)
{
    int     status;
    int64_t deadline = sr_clock_now_ms() + timeout_ms;

    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            return status;
        }
        if (r < 0 && errno != EINTR) {
            return -1;
        }
        if (sr_clock_now_ms() >= deadline) {
            sr_test_kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        sr_clock_sleep_ms(5);
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
