/* Process supervision by PID.  See proc.h. */
#include "tools/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"

pid_t
sr_proc_fork(void)
{
    pid_t parent = getpid();
    pid_t pid;

    fflush(NULL);
    if ((pid = fork()) < 0) {
        return -1;
    }
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        setpgid(0, 0); /* terminal signals go to the parent, which cleans up */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(1); /* the parent died before the line above */
        }
        return 0;
    }
    setpgid(pid, pid); /* also from the parent: no race with a signal to the group */
    return pid;
}

pid_t
sr_proc_spawn(char *const argv[], const char *log_path, int flags)
{
    pid_t pid = sr_proc_fork();

    if (pid != 0) {
        return pid;
    }
    if (log_path != NULL) {
        int mode = (flags & SR_PROC_LOG_TRUNC) ? O_TRUNC : O_APPEND;
        int fd = open(log_path, O_WRONLY | O_CREAT | mode, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
    }
    execv(argv[0], argv);
    fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

void
sr_proc_signal(pid_t pid, int sig)
{
    if (pid > 0) {
        kill(-pid, sig);
        kill(pid, sig);
    }
}

int
sr_proc_wait(pid_t pid, int timeout_ms, int *status)
{
    int     st = 0;
    int64_t deadline = sr_clock_now_ms() + timeout_ms;

    if (pid <= 0) {
        return -1;
    }
    for (;;) {
        pid_t r = waitpid(pid, &st, timeout_ms < 0 ? 0 : WNOHANG);
        if (r == pid) {
            if (status != NULL) {
                *status = st;
            }
            return 1;
        }
        if (r < 0 && errno != EINTR) {
            return -1;
        }
        if (r == 0 && sr_clock_now_ms() >= deadline) {
            return 0;
        }
        if (r == 0) {
            sr_clock_sleep_ms(5);
        }
    }
}

int
sr_proc_kill9(pid_t pid)
{
    int st;

    if (pid <= 0) {
        return -1;
    }
    sr_proc_signal(pid, SIGKILL);
    return sr_proc_wait(pid, -1, &st) == 1 ? st : -1;
}

int
sr_proc_stop(pid_t pid, int grace_ms)
{
    int st;

    if (pid <= 0) {
        return -1;
    }
    sr_proc_signal(pid, SIGCONT);
    sr_proc_signal(pid, SIGTERM);
    switch (sr_proc_wait(pid, grace_ms, &st)) {
    case 1:
        return st;
    case 0:
        sr_proc_kill9(pid);
        return -1;
    default:
        return -1;
    }
}
