/*
 * Process supervision for the programs that run a coordinator and workers
 * from outside (the chaos harness, bench/perf, the tests): start a child in
 * its own process group that dies with this process, wait for it with a
 * timeout, stop it (SIGTERM, then SIGKILL), all by the PID it was started
 * with, never by name.  A caller signals only children it has not reaped
 * yet: a reaped PID may belong to another process.
 */
#ifndef SR_TOOLS_PROC_H
#define SR_TOOLS_PROC_H

#include <sys/types.h>

/* sr_proc_spawn's flags. */
enum {
    SR_PROC_LOG_TRUNC = 1 << 0, /* truncate the log instead of appending to it */
};

/* fork(), the child in a process group of its own (set on both sides, so
 * no signal races it), SIGKILLed when this process dies, with SIGINT and
 * SIGTERM at their defaults; stdio is flushed first.  Returns 0 in the
 * child, the PID in the parent, -1 (errno set) if fork failed. */
pid_t sr_proc_fork(void);

/* sr_proc_fork, then exec argv[0] (a path) with argv, stdout and stderr
 * appended to log_path (NULL: inherited; flags SR_PROC_LOG_TRUNC: the log
 * truncated).  A failed exec is reported on the log and exits 127.
 * Returns the PID, or -1. */
pid_t sr_proc_spawn(char *const argv[], const char *log_path, int flags);

/* Send sig to the child `pid` and its process group (nothing if pid <= 0). */
void sr_proc_signal(pid_t pid, int sig);

/* Wait up to timeout_ms (0: just look; < 0: for ever) for `pid` to exit.
 * 1 and *status (may be NULL) its wait status if it did (reaped), 0 if it
 * is still running, -1 if it is no child of this process. */
int sr_proc_wait(pid_t pid, int timeout_ms, int *status);

/* SIGCONT and SIGTERM, up to grace_ms to exit, then SIGKILL; reaped either
 * way.  Its wait status, or -1 if it had to be killed or was no child. */
int sr_proc_stop(pid_t pid, int grace_ms);

/* SIGKILL (the group too) and reap.  Its wait status, or -1. */
int sr_proc_kill9(pid_t pid);

#endif
