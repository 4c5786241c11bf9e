/*
 * store_small: the cost of one small commit (issue 28), the store calls a
 * coordinator makes for one step of a small model (perf row 2): one float32
 * variable of --kib KiB (4) in --page-kib KiB pages (4, the setting for a
 * small model), its one dirty chunk, --workers rows (4) whose local step
 * moves every commit, with --step-log also a step-log row per worker and
 * the step's step_replicas row; retention K = 3, the store's automatic WAL
 * limit and its checkpoint thread (a coordinator's defaults with --commit
 * sync; --checkpoint inline has the commits run them).  The mark is
 * rewritten by every commit, as in the coordinator.
 *
 *   store_small [--dir DIR] [--commits N] [--runs R] [--sync full|normal|both]
 *               [--kib K] [--page-kib P] [--workers W] [--step-log]
 *               [--wal-kib W] [--checkpoint inline|thread] [--json FILE]
 *
 * Each run opens a fresh store, commits 200 warm-up steps and then N timed
 * ones (default 20,000 at NORMAL, 2,000 at FULL); it prints the median, mean
 * and 99th percentile of the timed commits in microseconds and the WAL
 * writes per commit (sr_store_get_wal_stats: the writes SQLite made and
 * those that reached the file).  Runs alternate FULL and NORMAL.  Reported,
 * never asserted: the issue-28 target is ~15 us a commit at NORMAL, so that a
 * 0.5 ms step commits every step under --checkpoint-budget 3.
 *
 * For a breakdown run it under `strace -c -f` (system calls per commit) or
 * `perf record -g` (where the CPU goes; docs/store.md, "What a small commit
 * costs" says how it was done).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/mem.h"
#include "store/store.h"

#include "bench_store.h"

#define WARM    200
#define KEEP    3
#define MAX_WKS 64

typedef struct {
    int    sync;
    int    commits;
    double median_us, mean_us, p99_us;
    double wal_writes, file_writes; /* per commit */
} result;

typedef struct {
    size_t  kib;
    int     page_kib;
    int     workers;
    int     step_log;
    int64_t wal_bytes;
    int     inline_ckpt;
} config;

static int
run_one(const char *dir, const config *cf, int sync, int n, result *res)
{
    char                   path[1100];
    sr_store_opts          o;
    sr_store              *st = NULL;
    size_t                 nbytes = cf->kib * 1024;
    float                 *val = malloc(nbytes);
    double                *us = calloc((size_t)n, sizeof(*us));
    sr_store_worker        w[MAX_WKS];
    sr_store_contrib       log[MAX_WKS];
    sr_store_step_replicas rep;
    sr_store_tensor        t;
    sr_store_wal_stats     w0, w1;
    uint8_t                dirty = 1;
    int64_t                var_id = 0, shape[1] = {(int64_t)(nbytes / 4)};
    uint64_t               inc = 0;
    sr_err                 rc = SR_OK;
    double                 total = 0;

    snprintf(path, sizeof(path), "%s/small.db", dir);
    bench_rm_store(path);
    memset(&o, 0, sizeof(o));
    o.create = 1;
    o.sync = sync;
    o.keep_checkpoints = KEEP;
    o.page_size = cf->page_kib * 1024;
    o.wal_checkpoint_bytes = cf->wal_bytes;
    o.checkpoint_inline = cf->inline_ckpt;
    if (val == NULL || us == NULL) {
        fprintf(stderr, "# out of memory\n");
        goto fail;
    }
    for (size_t i = 0; i < nbytes / 4; i++) {
        val[i] = (float)i * 0.001f;
    }
    if ((rc = sr_store_open(path, &o, &st)) != SR_OK ||
        (rc = sr_store_new_incarnation(st, &inc)) != SR_OK ||
        (rc = sr_store_declare(st, "w", SR_FLOAT32, 1, shape, 1, val, nbytes, &var_id, NULL)) !=
            SR_OK ||
        (rc = sr_store_set_ready(st)) != SR_OK) {
        fprintf(stderr, "# %s: %s: %s\n", path, sr_strerror(rc), sr_errdetail());
        goto fail;
    }
    t = (sr_store_tensor){
        .var_id = var_id, .slot = "", .data = val, .len_bytes = nbytes, .dirty = &dirty};
    memset(w, 0, sizeof(w));
    for (int i = 0; i < cf->workers; i++) {
        w[i].task_index = i;
        w[i].incarnation = inc;
    }
    for (int r = -WARM; r < n; r++) {
        int64_t g = r + WARM + 1;
        for (int i = 0; i < cf->workers; i++) {
            w[i].local_step = g - 1;
            w[i].last_seen_ms = sr_clock_wall_ms();
            log[i] = (sr_store_contrib){.step = g - 1,
                                        .var_id = var_id,
                                        .part = 0,
                                        .pos = i,
                                        .task_index = i,
                                        .local_step = g - 1};
        }
        rep = (sr_store_step_replicas){.step = g - 1,
                                       .replicas = cf->workers,
                                       .replicas_open = cf->workers,
                                       .total = cf->workers,
                                       .min_replicas = 1,
                                       .live = cf->workers};
        val[(size_t)g % (nbytes / 4)] += 1.0f; /* a different value each step */
        sr_store_commit c = {.global_step = g,
                             .tensors = &t,
                             .ntensors = 1,
                             .workers = w,
                             .nworkers = (size_t)cf->workers,
                             .log = cf->step_log ? log : NULL,
                             .nlog = cf->step_log ? (size_t)cf->workers : 0,
                             .replicas = cf->step_log ? &rep : NULL,
                             .nreplicas = cf->step_log ? 1 : 0};
        if (r == 0) {
            sr_store_get_wal_stats(&w0);
        }
        int64_t t0 = sr_clock_now_ns();
        if ((rc = sr_store_commit_step(st, &c)) != SR_OK) {
            fprintf(stderr, "# commit %" PRId64 ": %s: %s\n", g, sr_strerror(rc), sr_errdetail());
            goto fail;
        }
        if (r >= 0) {
            us[r] = (double)(sr_clock_now_ns() - t0) / 1e3;
            total += us[r];
        }
    }
    sr_store_get_wal_stats(&w1);
    sr_store_close(st);
    bench_rm_store(path);
    qsort(us, (size_t)n, sizeof(*us), bench_cmp_double);
    res->sync = sync;
    res->commits = n;
    res->median_us = n % 2 ? us[n / 2] : (us[n / 2 - 1] + us[n / 2]) / 2;
    res->mean_us = total / n;
    res->p99_us = us[(size_t)((double)n * 0.99)];
    res->wal_writes = (double)(w1.wal_writes - w0.wal_writes) / n;
    res->file_writes = (double)(w1.file_writes - w0.file_writes) / n;
    free(val);
    free(us);
    return 0;
fail:
    sr_store_close(st);
    bench_rm_store(path);
    free(val);
    free(us);
    return -1;
}

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: store_small [--dir DIR] [--commits N] [--runs R] [--sync full|normal|both]\n"
            "                   [--kib K] [--page-kib P] [--workers W] [--step-log]\n"
            "                   [--wal-kib W] [--checkpoint inline|thread] [--json FILE]\n"
            "  --commits N  timed commits per run (default 20000 at NORMAL, 2000 at FULL)\n"
            "  --runs R     runs of each sync mode, alternating (default 3)\n"
            "  --kib K      the variable's size in KiB (default 4)\n"
            "  --page-kib P the store's page size in KiB (default 4)\n"
            "  --workers W  worker rows per commit (default 4, at most %d)\n"
            "  --step-log   also W step-log rows and a step_replicas row per commit\n"
            "  --wal-kib W  sr_store_opts.wal_checkpoint_bytes in KiB (default 0: automatic)\n"
            "  --checkpoint inline|thread  who runs the WAL checkpoints (default thread)\n",
            MAX_WKS);
}

int
main(int argc, char **argv)
{
    config      cf = {4, 4, 4, 0, 0, 0};
    const char *dir = NULL, *json = NULL;
    char        tmpl[1024];
    int         commits = 0, runs = 3, made_dir = 0, bad = 0, want_full = 1, want_normal = 1;
    result      res[64];
    int         nres = 0;

    sr_tune_malloc(); /* as the coordinator does (cli/cmd_coordinator.c) */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--step-log") == 0) {
            cf.step_log = 1;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (v == NULL) {
            usage(stderr);
            return 2;
        }
        i++;
        if (strcmp(a, "--dir") == 0) {
            dir = v;
        } else if (strcmp(a, "--json") == 0) {
            json = v;
        } else if (strcmp(a, "--commits") == 0 && atoi(v) >= 10 && atoi(v) <= 10000000) {
            commits = atoi(v);
        } else if (strcmp(a, "--runs") == 0 && atoi(v) >= 1 && atoi(v) <= 16) {
            runs = atoi(v);
        } else if (strcmp(a, "--kib") == 0 && atol(v) >= 1 && atol(v) <= 65536) {
            cf.kib = (size_t)atol(v);
        } else if (strcmp(a, "--page-kib") == 0 && atoi(v) >= 1 && atoi(v) <= 64 &&
                   (atoi(v) & (atoi(v) - 1)) == 0) {
            cf.page_kib = atoi(v);
        } else if (strcmp(a, "--workers") == 0 && atoi(v) >= 0 && atoi(v) <= MAX_WKS) {
            cf.workers = atoi(v);
        } else if (strcmp(a, "--wal-kib") == 0 && atol(v) >= 0) {
            cf.wal_bytes = (int64_t)atol(v) << 10;
        } else if (strcmp(a, "--checkpoint") == 0 &&
                   (strcmp(v, "inline") == 0 || strcmp(v, "thread") == 0)) {
            cf.inline_ckpt = strcmp(v, "inline") == 0;
        } else if (strcmp(a, "--sync") == 0 &&
                   (strcmp(v, "full") == 0 || strcmp(v, "normal") == 0 || strcmp(v, "both") == 0)) {
            want_full = strcmp(v, "normal") != 0;
            want_normal = strcmp(v, "full") != 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (dir == NULL) {
        if (bench_temp_dir(tmpl, sizeof(tmpl), "small") != 0) {
            return 1;
        }
        dir = tmpl;
        made_dir = 1;
    }
    sr_store_set_heap_limit(8 << 20); /* the coordinator's */
    printf("# store_small: sr_store_commit_step of one step of a small model: %zu KiB "
           "float32, 1 chunk, %d worker rows%s, %d KiB pages, keep %d, WAL limit %s, "
           "checkpoints %s\n",
           cf.kib, cf.workers, cf.step_log ? ", step log + step_replicas" : "", cf.page_kib, KEEP,
           cf.wal_bytes ? "given" : "automatic", cf.inline_ckpt ? "inline" : "by the thread");
    printf("# %-6s %3s %8s %10s %10s %10s %11s %12s\n", "sync", "run", "commits", "median(us)",
           "mean(us)", "p99(us)", "wal_writes", "file_writes");
    for (int r = 0; r < runs; r++) {
        for (int y = 0; y < 2; y++) {
            int sync = y == 0 ? SR_STORE_SYNC_FULL : SR_STORE_SYNC_NORMAL;
            if ((y == 0 && !want_full) || (y == 1 && !want_normal) || nres >= 64) {
                continue;
            }
            int     n = commits > 0 ? commits : (y == 0 ? 2000 : 20000);
            result *p = &res[nres];
            if (run_one(dir, &cf, sync, n, p) != 0) {
                bad = 1;
                continue;
            }
            printf("  %-6s %3d %8d %10.1f %10.1f %10.1f %11.2f %12.2f\n",
                   y == 0 ? "FULL" : "NORMAL", r + 1, p->commits, p->median_us, p->mean_us,
                   p->p99_us, p->wal_writes, p->file_writes);
            fflush(stdout);
            nres++;
        }
    }
    if (json != NULL) {
        FILE *f = fopen(json, "w");
        if (f == NULL) {
            fprintf(stderr, "# %s: %s\n", json, strerror(errno));
            bad = 1;
        } else {
            fprintf(f,
                    "{\"benchmark\":\"store_small\",\"kib\":%zu,\"page_kib\":%d,\"workers\":%d,"
                    "\"step_log\":%d,\"results\":[",
                    cf.kib, cf.page_kib, cf.workers, cf.step_log);
            for (int i = 0; i < nres; i++) {
                fprintf(f,
                        "%s{\"sync\":\"%s\",\"commits\":%d,\"median_us\":%.2f,\"mean_us\":%.2f,"
                        "\"p99_us\":%.2f,\"wal_writes\":%.3f,\"file_writes\":%.3f}",
                        i ? "," : "", res[i].sync == SR_STORE_SYNC_FULL ? "FULL" : "NORMAL",
                        res[i].commits, res[i].median_us, res[i].mean_us, res[i].p99_us,
                        res[i].wal_writes, res[i].file_writes);
            }
            fprintf(f, "]}\n");
            fclose(f);
        }
    }
    if (made_dir) {
        rmdir(dir);
    }
    printf("# %s\n", bad ? "FAILED" : "OK");
    return bad ? 1 : 0;
}
