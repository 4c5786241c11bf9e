/*
 * perf's helpers and its children: clocks and medians (now_ns, cpu_self_s,
 * sleep_ms, median), a child's failure (fail_msg), the gradient (grad_at),
 * /proc readings (proc_stat, self_faults, proc_hwm_kib), and the children
 * it started, tracked by PID so that only those are signalled (track,
 * untrack, tracked, kill9, kill_all, fork_child, spawn_coordinator,
 * wait_bound, stop_process, wait_children) on tools/proc.h; the
 * coordinator's log (print_log_tail, log_store_lines) and a run's files
 * (remove_run_files, report_child_errors).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "core/clock.h"
#include "core/mem.h"
#include "syncrep/syncrep.h"
#include "tools/coord_argv.h"
#include "tools/proc.h"

#include "perf_int.h"

volatile sig_atomic_t interrupted;

void
on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* ---- small helpers ------------------------------------------------------ */

int64_t
now_ns(void)
{
    return sr_clock_now_ns();
}

double
cpu_self_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void
sleep_ms(int ms)
{
    sleep_us(ms * 1000);
}

void
sleep_us(int us)
{
    struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000L};
    nanosleep(&ts, NULL);
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double
median(const double *v, int n)
{
    double tmp[MAX_REPS * 4];
    if (n <= 0) {
        return NAN;
    }
    if (n > (int)(sizeof(tmp) / sizeof(tmp[0]))) {
        n = (int)(sizeof(tmp) / sizeof(tmp[0]));
    }
    memcpy(tmp, v, (size_t)n * sizeof(*v));
    qsort(tmp, (size_t)n, sizeof(*tmp), cmp_double);
    return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

void
fail_msg(slot *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof(s->err), fmt, ap);
    va_end(ap);
    s->failed = 1;
}

/* Gradient value of element i: exactly representable, so every sum and
 * every SGD result below is exact and compared with ==. */
float
grad_at(size_t i)
{
    return 0.25f * (float)(1 + i % 8);
}

/* utime + stime of a process in seconds, and its minor + major page
 * faults, from /proc/PID/stat; -1 if unreadable. */
double
proc_stat(pid_t pid, int64_t *faults)
{
    char               path[64], buf[1024];
    FILE              *f;
    size_t             n;
    unsigned long long ut = 0, st = 0, minf = 0, majf = 0;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "r")) == NULL) {
        return -1;
    }
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %llu %*u %llu %*u %llu %llu", &minf,
                            &majf, &ut, &st) != 4) {
        return -1;
    }
    *faults = (int64_t)(minf + majf);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

int64_t
self_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (int64_t)(ru.ru_minflt + ru.ru_majflt);
}

/* VmHWM of a live process in KiB (peak resident set); -1 if unreadable. */
int64_t
proc_hwm_kib(pid_t pid)
{
    char      path[64], line[256];
    FILE     *f;
    long long kib = -1;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if ((f = fopen(path, "r")) == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "VmHWM: %lld kB", &kib) == 1) {
            break;
        }
    }
    fclose(f);
    return kib;
}

/* ---- child processes ------------------------------------------------------ */

static int
track(bench *b, pid_t pid)
{
    for (int i = 0; i < MAX_PROCS; i++) {
        if (b->kids[i] == 0) {
            b->kids[i] = pid;
            return 0;
        }
    }
    return -1;
}

void
untrack(bench *b, pid_t pid)
{
    for (int i = 0; i < MAX_PROCS; i++) {
        if (b->kids[i] == pid) {
            b->kids[i] = 0;
        }
    }
}

/* Whether pid is a child of ours not reaped yet: only those are signalled,
 * since a reaped PID may already belong to another process. */
static int
tracked(const bench *b, pid_t pid)
{
    for (int i = 0; i < MAX_PROCS; i++) {
        if (pid > 0 && b->kids[i] == pid) {
            return 1;
        }
    }
    return 0;
}

/* SIGKILL and reap a child of ours, if it still is one. */
void
kill9(bench *b, pid_t pid)
{
    if (tracked(b, pid)) {
        sr_proc_kill9(pid);
        untrack(b, pid);
    }
}

/* SIGKILL and reap every child still alive (by PID, never by name). */
void
kill_all(bench *b)
{
    for (int i = 0; i < MAX_PROCS; i++) {
        kill9(b, b->kids[i]);
    }
}

/* sr_proc_fork (tools/proc.h), the child tracked; in the child, freed
 * buffers kept as libsyncrep and the coordinator keep them. */
pid_t
fork_child(bench *b)
{
    pid_t pid = sr_proc_fork();

    if (pid == 0) {
        /* Baselines keep freed buffers as libsyncrep and the coordinator do
         * (core/mem.h): the rows compare protocols, not allocator modes. */
        sr_tune_malloc();
        return 0;
    }
    if (pid > 0) {
        track(b, pid);
    }
    return pid;
}

void
print_log_tail(const char *path)
{
    FILE *f = fopen(path, "r");
    char  line[512];
    long  size;

    if (f == NULL) {
        return;
    }
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, size > 4000 ? size - 4000 : 0, SEEK_SET);
    fprintf(stderr, "# ---- tail of %s ----\n", path);
    while (fgets(line, sizeof(line), f) != NULL) {
        fprintf(stderr, "#   %s", line);
    }
    fclose(f);
}

/* The coordinator's COORD-COMMITS and COORD-WAL-CKPT lines, shortened into
 * out: its store commits (how many, mean and longest, over the whole run),
 * who ran its WAL checkpoints, how many, the longest, the most frames the
 * WAL held ("" if there are no such lines, no commit and no checkpoint). */
void
log_store_lines(const char *log, char *out, size_t len)
{
    FILE    *f = fopen(log, "r");
    char     line[512], who[16], cm[64] = "", ck[160] = "";
    uint64_t passes, inl, waits, fails, frames, n;
    double   pass_ms, inl_ms, mean_ms, max_ms;

    out[0] = '\0';
    if (f == NULL) {
        return;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *p = strstr(line, "COORD-WAL-CKPT ");
        const char *q = strstr(line, "COORD-COMMITS ");
        if (q != NULL &&
            sscanf(q + 14, "count=%" SCNu64 " mean_ms=%lf max_ms=%lf failures=%" SCNu64, &n,
                   &mean_ms, &max_ms, &fails) == 4 &&
            n + fails > 0) {
            snprintf(cm, sizeof(cm), "commit %.1f ms (max %.0f, %" PRIu64 "%s)", mean_ms, max_ms, n,
                     fails ? " FAILED" : "");
        }
        if (p != NULL &&
            sscanf(p + 15,
                   "%15s passes=%" SCNu64 " pass_max_ms=%lf inline=%" SCNu64
                   " inline_max_ms=%lf waits=%" SCNu64 " failures=%" SCNu64
                   " max_wal_frames=%" SCNu64,
                   who, &passes, &pass_ms, &inl, &inl_ms, &waits, &fails, &frames) == 8 &&
            passes + inl + fails > 0) {
            /* Inline, the committer's passes are all there is. */
            int  thread = strcmp(who, "thread") == 0;
            char th[64] = "";
            if (thread) {
                snprintf(th, sizeof(th), "thread %" PRIu64 " (max %.0f ms) ", passes, pass_ms);
            }
            snprintf(ck, sizeof(ck),
                     "ckpt %sinline %" PRIu64 " (max %.0f ms) wal <= %" PRIu64 " frames%s%s", th,
                     inl, inl_ms, frames, waits ? " waited" : "", fails ? " FAILED" : "");
        }
    }
    fclose(f);
    snprintf(out, len, "%s%s%s", cm, cm[0] && ck[0] ? "  " : "", ck);
}

void
log_ckpt_line(const char *log, run_res *r)
{
    FILE    *f = fopen(log, "r");
    char     line[512];
    uint64_t n, fails;
    double   mean_ms, max_ms;

    r->commits = r->ckpt_interval = -1;
    r->ckpt_overhead_pct = -1;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        const char *q = strstr(line, "COORD-COMMITS ");
        int64_t     k;
        double      pct;
        if (q != NULL &&
            sscanf(q + 14,
                   "count=%" SCNu64 " mean_ms=%lf max_ms=%lf failures=%" SCNu64
                   " checkpoint_interval_steps=%" SCNd64 " checkpoint_overhead_pct=%lf",
                   &n, &mean_ms, &max_ms, &fails, &k, &pct) == 6) {
            r->commits = (int64_t)n;
            r->ckpt_interval = k;
            r->ckpt_overhead_pct = pct;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
}

pid_t
spawn_coordinator(bench *b, const run_cfg *c, const char *store, const char *endpoint,
                  const char *log)
{
    sr_coord_argv a;
    pid_t         pid;

    sr_coord_argv_init(&a, b->syncrep, store, endpoint);
    sr_coord_argv_opt(&a, "--replicas-to-aggregate", "%d", c->W);
    sr_coord_argv_opt(&a, "--learning-rate", "%s", LR_TEXT);
    if (c->budget_pct > 0) { /* issue 28 */
        sr_coord_argv_opt(&a, "--checkpoint-budget", "%g", c->budget_pct);
    } else {
        sr_coord_argv_opt(&a, "--checkpoint-every-steps", "%d", c->ckpt);
    }
    sr_coord_argv_opt(&a, "--sync", "%s", c->sync_normal ? "normal" : "full");
    if (c->page_kib > 0) {
        sr_coord_argv_opt(&a, "--store-page-kib", "%d", c->page_kib);
    }
    if (c->async) {
        sr_coord_argv_opt(&a, "--commit", "async");
    }
    if (c->adamw_clip) { /* issue 25 */
        sr_coord_argv_opt(&a, "--optimizer", "adamw");
        sr_coord_argv_opt(&a, "--weight-decay", "0.01");
        sr_coord_argv_opt(&a, "--clip-norm", "1");
    }
    sr_coord_argv_opt(&a, "--log-level", "notice");
    for (int i = 0; i < b->nextra; i++) {
        sr_coord_argv_add(&a, b->extra[i]);
    }
    if (sr_coord_argv_get(&a) == NULL) {
        fprintf(stderr, "# the coordinator's command line is too long\n");
        return -1;
    }
    if ((pid = sr_proc_spawn(sr_coord_argv_get(&a), log, SR_PROC_LOG_TRUNC)) > 0) {
        track(b, pid);
    }
    return pid;
}

/* Wait for the coordinator to bind (its ipc socket appears). */
int
wait_bound(bench *b, pid_t pid, const char *sock_path, int timeout_ms)
{
    struct stat st;
    int64_t     deadline = sr_clock_now_ms() + timeout_ms;

    while (sr_clock_now_ms() < deadline && !interrupted) {
        if (stat(sock_path, &st) == 0 && S_ISSOCK(st.st_mode)) {
            return 0;
        }
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            untrack(b, pid); /* reaped: its PID may be reused, never signal it */
            return -1;
        }
        sleep_ms(2);
    }
    return -1;
}

/* SIGTERM, wait up to timeout_ms, then SIGKILL.  0 if it exited 0. */
int
stop_process(bench *b, pid_t pid, int timeout_ms)
{
    int st;

    if (!tracked(b, pid)) {
        return -1; /* already reaped: it did not wait to be stopped */
    }
    st = sr_proc_stop(pid, timeout_ms);
    untrack(b, pid);
    return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* Wait for every pid in `pids` to exit 0.  On a failure, a timeout or an
 * interrupt, kill them all (the caller kills the coordinator).  `watch`, if
 * not 0, must stay alive meanwhile. */
int
wait_children(bench *b, const pid_t *pids, int n, int timeout_ms, pid_t watch, const char *what)
{
    int     left = n, bad = 0;
    int64_t deadline = sr_clock_now_ms() + timeout_ms;
    int     done[MAX_PROCS] = {0};

    while (left > 0 && !bad) {
        int progressed = 0;
        for (int i = 0; i < n; i++) {
            int st;
            if (done[i] || waitpid(pids[i], &st, WNOHANG) != pids[i]) {
                continue;
            }
            done[i] = 1;
            left--;
            progressed = 1;
            untrack(b, pids[i]);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                fprintf(stderr, "# %s: process %d of %d failed (%s %d)\n", what, i, n,
                        WIFEXITED(st) ? "exit" : "signal",
                        WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
                bad = 1;
            }
        }
        if (watch > 0 && waitpid(watch, NULL, WNOHANG) == watch) {
            untrack(b, watch);
            fprintf(stderr, "# %s: the coordinator exited early\n", what);
            bad = 1;
        }
        if (interrupted) {
            bad = 1;
        } else if (sr_clock_now_ms() > deadline) {
            fprintf(stderr, "# %s: timed out after %d s\n", what, timeout_ms / 1000);
            bad = 1;
        }
        if (!progressed && !bad && left > 0) {
            sleep_ms(5);
        }
    }
    if (bad) {
        for (int i = 0; i < n; i++) {
            if (!done[i]) {
                kill9(b, pids[i]);
            }
        }
    }
    return bad ? -1 : 0;
}

void
remove_run_files(const char *dir, const char *stem)
{
    static const char *const sfx[] = {".db",      ".db-wal",  ".db-shm", ".db-journal",
                                      ".db-lock", ".db-mark", ".sock",   ".log"};
    char                     p[400];
    for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s%s", dir, stem, sfx[i]);
        unlink(p);
    }
}

void
report_child_errors(const shm *sh, int n, const char *what)
{
    for (int i = 0; i < n; i++) {
        if (sh->s[i].failed) {
            fprintf(stderr, "# %s: process %d: %s\n", what, i, sh->s[i].err);
        }
    }
}
