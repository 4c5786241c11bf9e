/*
 * The rows of the table (docs/performance.md): ingest (row_ingest), the
 * small-model step rate (row_small), the durable commit (row_commit, with
 * the disk's floors timed_writes_us, fdatasync_floor_us, raw_rewrite_ms),
 * recovery from kill -9 (row_recovery, wait_all_tokens, find_rec,
 * log_bind_wall_ms), many variables (row_many) and memory (row_memory);
 * run_pairs and close_ratio_cell pair syncrep and baseline repetitions.
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

static const char *const phase_names[] = {"idle", "pull", "push", "step"};

/* ---- rows ------------------------------------------------------------------ */

/* A row's cell whose repetitions are in: dropped if none ran, else judged
 * by its ratio. */
static void
close_ratio_cell(bench *b, cell *x, double min_ratio)
{
    if (x->nreps == 0) {
        b->ncells--;
        return;
    }
    finish_cell(x);
    x->met = x->ratio >= min_ratio;
}

/* A cell's repetitions: syncrep running c against its baseline -- the raw
 * ZeroMQ one of c, or (other) syncrep running `other` -- alternating which
 * runs first.  0, or -1 when a run failed (counted; the cell keeps the
 * repetitions before it).  last (may be NULL): the last syncrep run's result. */
static int
run_pairs(bench *b, cell *x, const run_cfg *c, const run_cfg *other, run_res *last)
{
    for (int rep = 0; rep < b->reps && !interrupted; rep++) {
        run_res rs, rb;
        int     bad = 0;
        for (int k = 0; k < 2 && !bad; k++) {
            if ((k == 0) == (rep % 2 == 1)) {
                bad = (other != NULL ? sync_run(b, other, &rb) : base_run(b, c, &rb)) != 0;
            } else {
                bad = sync_run(b, c, &rs) != 0;
            }
        }
        if (bad) {
            b->failures++;
            return -1;
        }
        if (rs.wrong || rb.wrong) {
            b->failures++;
        }
        print_diag("syncrep", &rs, c->loop, 1);
        print_diag(other != NULL ? "one var" : "baseline", &rb, c->loop, other != NULL);
        x->sr[x->nreps] = rs.value;
        x->base[x->nreps++] = rb.value;
        if (last != NULL) {
            *last = rs;
        }
    }
    return 0;
}

/* issue 28: a --checkpoint-budget run's achieved interval, into note: the
 * policy's k at the end, the mean steps per commit over the whole run, and
 * the overhead the coordinator measured itself. */
static void
budget_note(const run_res *r, char *note, size_t cap)
{
    size_t n = strlen(note);
    double mean = r->commits > 0 ? (double)r->steps_total / (double)r->commits : -1;

    snprintf(note + n, cap - n, "%sinterval k=%" PRId64 " (%.1f steps/commit), own %.1f%%",
             n ? "; " : "", r->ckpt_interval, mean, r->ckpt_overhead_pct);
}

int
row_ingest(bench *b)
{
    static const size_t sizes[] = {1 * MIB, 16 * MIB, 64 * MIB};
    static const int    ws[] = {2, 4};
    int                 rc = 0;

    printf("# row 1: ingest -- push + step (no pull), R = W, --checkpoint-every-steps 0;\n"
           "#        baseline: W DEALERs send [index, piece][gradient piece of <= 2 MiB] to one\n"
           "#        ROUTER that sums into one buffer, %s;\n"
           "#        GB/s = W x S x steps / window (10^9 bytes)\n",
           b->ingest_stream ? "streaming (at most ~4 MiB or 2 messages queued per pipe end)"
                            : "each piece acknowledged, as many in flight as libsyncrep keeps "
                              "(2 for a variable of several pieces, else 1)");
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]) && !interrupted; si++) {
        for (size_t wi = 0; wi < sizeof(ws) / sizeof(ws[0]); wi++) {
            for (int split = 0; split < 2; split++) {
                size_t S = sizes[si];
                int    W = ws[wi];
                if (split && (S != 64 * MIB || W != 4)) {
                    continue; /* one split model: W=4, 64 MiB as 16 variables of 4 MiB */
                }
                /* About 0.5 s of steps (at most 400; at least 3, or 2 for the
                 * page-fault-bound 64 MiB messages) after 2 warm-up steps. */
                int     one_big = S == 64 * MIB && !split;
                run_cfg c = {.W = W,
                             .bytes = S,
                             .nvars = split ? (int)(S / PART_BYTES) : 1,
                             .loop = LOOP_PUSH,
                             .ckpt = 0,
                             .sync_normal = 1,
                             .warm = 2,
                             .steps = 400,
                             .min_steps = one_big ? 2 : 3,
                             .target_ms = b->quick ? 300 : 500,
                             .ack = !b->ingest_stream,
                             .kill_at_end = 1};
                char    cfgtxt[96], st[24], vars[24];
                snprintf(vars, sizeof(vars), "%dx4MiB vars", c.nvars);
                snprintf(cfgtxt, sizeof(cfgtxt), "ingest W=%d S=%s %s", W,
                         size_text(S, st, sizeof(st)), split ? vars : "1 var");
                if (b->filter != NULL && strstr(cfgtxt, b->filter) == NULL) {
                    continue;
                }
                cell *x = new_cell(b, 1, cfgtxt, "GB/s", ">= 0.80");
                if (x == NULL) {
                    return -1;
                }
                x->has_target = 1;
                printf("# %s\n", cfgtxt);
                int64_t n = 0;
                for (int rep = 0; rep < b->reps && !interrupted; rep++) {
                    run_res rs, rb;
                    run_cfg cb = c;
                    int     bad;
                    /* Alternate which goes first; the baseline streams as many steps
                     * as syncrep's latest window had. */
                    if (rep % 2 == 1 && n > 0) {
                        cb.steps = n;
                        bad = base_run(b, &cb, &rb) != 0 || sync_run(b, &c, &rs) != 0;
                    } else {
                        bad = sync_run(b, &c, &rs) != 0;
                        cb.steps = n = rs.steps;
                        bad = bad || base_run(b, &cb, &rb) != 0;
                    }
                    if (bad) {
                        b->failures++;
                        rc = -1;
                        break;
                    }
                    n = rs.steps;
                    if (rs.wrong || rb.wrong) {
                        b->failures++;
                    }
                    print_diag("syncrep", &rs, c.loop, 1);
                    print_diag("baseline", &rb, c.loop, 0);
                    x->sr[x->nreps] = rs.value;
                    x->base[x->nreps++] = rb.value;
                    if (W == 4) {
                        char label[96];
                        snprintf(label, sizeof(label), "W=4 S=%s %s push+step ckpt=0", st,
                                 split ? vars : "1 var");
                        add_mem(b, label, 2 * S, rs.hwm_mib);
                    }
                }
                close_ratio_cell(b, x, 0.8);
            }
        }
    }
    return rc;
}

/* Median time of n writes of `bytes` to a file in the run's directory (the
 * stores' file system), each appended (`append`) or rewriting the start in
 * place, each followed by an fdatasync when `sync`; in µs, or -1.  One
 * untimed write and fdatasync first (for in place: the blocks exist). */
static double
timed_writes_us(const bench *b, size_t bytes, int n, int append, int sync)
{
    char     path[256];
    double  *t = malloc((size_t)n * sizeof(*t));
    uint8_t *buf = malloc(bytes);
    int      fd = -1, ok = t != NULL && buf != NULL;
    double   med = -1;

    snprintf(path, sizeof(path), "%s/timed-writes.bin", b->dir);
    if (ok && (fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600)) < 0) {
        ok = 0;
    }
    if (ok) {
        memset(buf, 0x5a, bytes);
    }
    for (int i = -1; ok && i < n; i++) {
        int64_t t0 = now_ns();
        off_t   off = append ? (off_t)(i + 1) * (off_t)bytes : 0;
        buf[0] = (uint8_t)i;
        ok = pwrite(fd, buf, bytes, off) == (ssize_t)bytes &&
             ((!sync && i >= 0) || fdatasync(fd) == 0);
        if (ok && i >= 0) {
            t[i] = (double)(now_ns() - t0) / 1e3;
        }
    }
    if (ok) {
        med = median(t, n);
    }
    if (fd >= 0) {
        close(fd);
        unlink(path);
    }
    free(buf);
    free(t);
    return med;
}

/* The least a synchronous FULL commit of the 4 KiB model costs here: one
 * fdatasync after appending what such a commit appends to the WAL (8-9
 * frames of 4 KiB pages); median of 100, in µs, or -1. */
static double
fdatasync_floor_us(const bench *b)
{
    return timed_writes_us(b, 37 * 1024, 100, 1, 1);
}

/* issue 28: the 4 KiB model under --checkpoint-budget 3 (NORMAL, sync).
 * The target is the interval, k = 1: the policy commits every step when a
 * commit costs at most 3 % of a step.  Two cells: the row's loop as it is
 * (a step is a round trip and nothing else, ~0.3 ms here, so a commit of
 * ~0.1 ms is 30-40 % of it and no 3 % budget can commit every step: no
 * target, its interval shown), and the same with each worker spending
 * 10 ms before each push, as a small model's forward and backward pass
 * would (compute_us; the baseline's workers too), which carries the
 * target.  The ratio is against the same baseline as the cells above, with
 * the same compute. */
static int
row_small_budget(bench *b, int compute_ms)
{
    run_cfg c = {.W = 4,
                 .bytes = 4 * KIB,
                 .nvars = 1,
                 .loop = LOOP_FULL,
                 .budget_pct = 3,
                 .sync_normal = 1,
                 .page_kib = 4,
                 .warm = compute_ms > 0 ? 10 : 20,
                 .steps = 5000,
                 .min_steps = 20,
                 .target_ms = compute_ms > 0 ? (b->quick ? 1000 : 2000) : (b->quick ? 500 : 750),
                 .compute_us = compute_ms * 1000};
    run_res last;
    char    cfgtxt[96];

    if (compute_ms > 0) {
        snprintf(cfgtxt, sizeof(cfgtxt), "4KiB W=4 budget=3%% NORMAL compute %dms", compute_ms);
    } else {
        snprintf(cfgtxt, sizeof(cfgtxt), "4KiB W=4 budget=3%% NORMAL");
    }
    if (b->filter != NULL && strstr(cfgtxt, b->filter) == NULL) {
        return 0;
    }
    cell *x = new_cell(b, 2, cfgtxt, "steps/s", compute_ms > 0 ? "k = 1" : "none");
    if (x == NULL) {
        return -1;
    }
    x->has_target = compute_ms > 0;
    printf("# %s\n", cfgtxt);
    memset(&last, 0, sizeof(last));
    int rc = run_pairs(b, x, &c, NULL, &last) != 0 ? -1 : 0;
    if (x->nreps == 0) {
        b->ncells--;
        return rc;
    }
    finish_cell(x);
    x->met = last.ckpt_interval == 1;
    budget_note(&last, x->note, sizeof(x->note));
    return rc;
}

int
row_small(bench *b)
{
    int rc = 0;

    printf("# row 2: step rate, 4 KiB model, 4 workers, pull -> push -> step, checkpoint every "
           "step,\n#        --store-page-kib 4 (small model: small pages), --commit sync and "
           "async;\n"
           "#        baseline: one DEALER/ROUTER round trip per worker per step\n");
    for (int k = 0; k < 4 && !interrupted; k++) {
        int     normal = k % 2 == 0, async = k >= 2;
        run_cfg c = {.W = 4,
                     .bytes = 4 * KIB,
                     .nvars = 1,
                     .loop = LOOP_FULL,
                     .ckpt = 1,
                     .sync_normal = normal,
                     .page_kib = 4,
                     .async = async,
                     .warm = 20,
                     .steps = 5000,
                     .min_steps = 20,
                     .target_ms = b->quick ? 500 : 750};
        char    cfgtxt[96];
        snprintf(cfgtxt, sizeof(cfgtxt), "4KiB W=4 ckpt=1 %s%s", normal ? "NORMAL" : "FULL",
                 async ? " async" : "");
        if (b->filter != NULL && strstr(cfgtxt, b->filter) == NULL) {
            continue;
        }
        cell *x = new_cell(b, 2, cfgtxt, "steps/s", ">= 0.80");
        if (x == NULL) {
            return -1;
        }
        x->has_target = 1;
        printf("# %s\n", cfgtxt);
        rc = run_pairs(b, x, &c, NULL, NULL) != 0 ? -1 : rc;
        close_ratio_cell(b, x, 0.8);
        double floor_us = !normal && !async && x->nreps > 0 ? fdatasync_floor_us(b) : -1;
        if (floor_us > 0) {
            /* A sync FULL step is at least a baseline round trip plus that
             * fdatasync (the tokens wait for it): the ratio cannot exceed
             * this, whatever syncrep's own code costs. */
            snprintf(x->note, sizeof(x->note), "fdatasync %.0f us: ratio <= %.2f", floor_us,
                     1.0 / (1.0 + x->base_med * floor_us / 1e6));
        }
    }
    if (rc < 0 || interrupted || (rc = row_small_budget(b, 0)) < 0 || interrupted) {
        return rc;
    }
    return row_small_budget(b, 10);
}

/* The least a commit of `bytes` costs here on the step's path: rewriting
 * that many bytes in place, with an fdatasync when `full`; median of 9, in
 * ms, or -1.  What any store pays at least, whatever its format. */
static double
raw_rewrite_ms(const bench *b, size_t bytes, int full)
{
    double us = timed_writes_us(b, bytes, 9, 0, full);
    return us < 0 ? -1 : us / 1e3;
}

int
row_commit(bench *b)
{
    /* Checkpoint every step: [0] NORMAL, [1] FULL, [2] NORMAL async,
     * [3] FULL async; [4] checkpointing off, the baseline of all four. */
    /* [5] (issue 25): adamw + weight decay + --clip-norm, checkpointing
     * off: its step rate against [4]'s SGD is the cost of the optimizer's
     * apply (a 16 MiB model: 4 M elements). */
    /* [6], [7] (issue 28): --checkpoint-budget 3, NORMAL and FULL (sync),
     * against [4]: overhead <= 3.5 %, the achieved interval beside it. */
    enum { NC = 8, BASE = 4, OPT = 5, BUD = 6, NBUD = 2 };
    run_cfg     c[NC];
    const char *who[NC] = {"NORMAL",           "FULL",          "NORMAL async",
                           "FULL async",       "ckpt=0",        "ckpt=0 adamw+clip",
                           "budget=3% NORMAL", "budget=3% FULL"};
    cell       *x[BASE], *xo, *xb[NBUD];
    run_res     rb_last[NBUD];
    int         rc = 0;

    for (int i = 0; i < NC; i++) {
        run_cfg ci = {.W = 4,
                      .bytes = 16 * MIB,
                      .nvars = 1,
                      .loop = LOOP_FULL,
                      .ckpt = i < BASE,
                      .adamw_clip = i == OPT,
                      .sync_normal = i % 2 == 0,
                      .async = i == 2 || i == 3,
                      .warm = 3,
                      /* Three WAL checkpoint cycles: 512 MiB of WAL holds
                       * ~31 commits of 16 MiB.  A checkpoint run by the
                       * store's thread costs the steps after the one that
                       * filled the WAL, so one cycle's window would miss
                       * most of it; three are close to the long-run mean
                       * whoever runs the checkpoint. */
                      .steps = b->quick ? 8 : 93};
        if (i >= BUD) {
            /* A budget's interval is 10-35 steps here: a window of several. */
            ci.budget_pct = 3;
            ci.steps = b->quick ? 40 : 186;
        }
        if (i == BASE || i == OPT) {
            /* Their windows are the budget cells' baseline too: as long as
             * theirs, so that a target of 3.5 % is not judged on windows
             * whose run-to-run spread (a few per cent over 93 steps here)
             * is larger than it. */
            ci.steps = b->quick ? 40 : 186;
        }
        c[i] = ci;
    }
    printf("# row 3: durable commit -- 16 MiB model (1 var), 4 workers, pull -> push -> step;\n"
           "#        checkpoint every step (--commit sync and async) vs "
           "--checkpoint-every-steps 0\n#        (same program, same run)\n");
    for (int i = 0; i < BASE; i++) {
        char cfgtxt[96];
        snprintf(cfgtxt, sizeof(cfgtxt), "16MiB W=4 ckpt=1 vs 0 %s", who[i]);
        /* The target (<= 10 % overhead) is stated for NORMAL. */
        if ((x[i] = new_cell(b, 3, cfgtxt, "steps/s", i % 2 == 0 ? ">= 0.90" : "-")) == NULL) {
            return -1;
        }
        x[i]->has_target = i % 2 == 0;
    }
    if ((xo = new_cell(b, 3, "16MiB W=4 ckpt=0 adamw+clip vs sgd", "steps/s", ">= 0.83")) == NULL) {
        return -1;
    }
    xo->has_target = 1;
    for (int i = 0; i < NBUD; i++) {
        char cfgtxt[96];
        snprintf(cfgtxt, sizeof(cfgtxt), "16MiB W=4 budget=3%% vs ckpt=0 %s",
                 i == 0 ? "NORMAL" : "FULL");
        if ((xb[i] = new_cell(b, 3, cfgtxt, "steps/s", "overhead <= 3.5%")) == NULL) {
            return -1;
        }
        xb[i]->has_target = 1;
    }
    int reps = b->reps;
    printf("# %d repetitions, each running the %d in a rotating order\n", reps, NC);
    for (int rep = 0; rep < reps && !interrupted; rep++) {
        run_res r[NC];
        int     bad = 0;
        for (int k = 0; k < NC && !bad; k++) {
            int i = (k + rep) % NC; /* rotate the order across repetitions */
            /* The rotation keeps each run's predecessor: without a flush
             * the runs after the commit-heavy ones (ckpt=0 after FULL
             * async) paid for their writeback, which favoured every cell
             * measured against ckpt=0. */
            sync();
            bad = sync_run(b, &c[i], &r[i]) != 0;
        }
        if (bad) {
            b->failures++;
            rc = -1;
            break;
        }
        for (int i = 0; i < NC; i++) {
            b->failures += r[i].wrong > 0;
            print_diag(who[i], &r[i], LOOP_FULL, 1);
        }
        for (int i = 0; i < BASE; i++) {
            x[i]->sr[x[i]->nreps] = r[i].value;
            x[i]->base[x[i]->nreps++] = r[BASE].value;
        }
        xo->sr[xo->nreps] = r[OPT].value;
        xo->base[xo->nreps++] = r[BASE].value;
        for (int i = 0; i < NBUD; i++) {
            xb[i]->sr[xb[i]->nreps] = r[BUD + i].value;
            xb[i]->base[xb[i]->nreps++] = r[BASE].value;
            rb_last[i] = r[BUD + i];
            printf("#   %-12s interval k=%" PRId64 ", %" PRId64 " commits in %" PRId64
                   " steps, own overhead %.1f%%\n",
                   who[BUD + i], r[BUD + i].ckpt_interval, r[BUD + i].commits,
                   r[BUD + i].steps_total, r[BUD + i].ckpt_overhead_pct);
        }
        add_mem(b, "W=4 S=16MiB 1 var pull+push+step ckpt=1 NORMAL", 2 * 16 * MIB, r[0].hwm_mib);
    }
    if (x[0]->nreps == 0) {
        b->ncells -= BASE + 1 + NBUD;
        return rc;
    }
    for (int i = 0; i < NBUD; i++) {
        finish_cell(xb[i]);
        xb[i]->met = xb[i]->ratio >= 0.965; /* overhead <= 3.5 % */
        snprintf(xb[i]->note, sizeof(xb[i]->note), "overhead %.1f%%", (1 - xb[i]->ratio) * 100);
        budget_note(&rb_last[i], xb[i]->note, sizeof(xb[i]->note));
    }
    finish_cell(xo);
    /* The target: adamw + clipping's apply within 1.2x of SGD's; here the
     * step's rate is the measure (the apply is on the step's path), the
     * apply alone is bench/optim/optim_apply's. */
    xo->met = xo->ratio >= 1 / 1.2;
    snprintf(xo->note, sizeof(xo->note), "adamw+clip step %.1f ms vs sgd %.1f ms",
             xo->sr_med > 0 ? 1000.0 / xo->sr_med : -1,
             xo->base_med > 0 ? 1000.0 / xo->base_med : -1);
    for (int i = 0; i < BASE; i++) {
        finish_cell(x[i]);
        x[i]->met = i % 2 == 0 ? x[i]->ratio >= 0.9 : 1;
        snprintf(x[i]->note, sizeof(x[i]->note), "overhead %.1f%%", (1 - x[i]->ratio) * 100);
        /* --commit sync: the commit is on the step's path, so the overhead
         * is at least a raw rewrite of the model's bytes against the step
         * without commits. */
        double raw = i < 2 ? raw_rewrite_ms(b, 16 * MIB, i == 1) : -1;
        if (raw > 0 && x[i]->base_med > 0) {
            size_t n = strlen(x[i]->note);
            snprintf(x[i]->note + n, sizeof(x[i]->note) - n, "; raw rewrite %.1f ms: >= %.1f%%",
                     raw, raw / (1000.0 / x[i]->base_med + raw) * 100);
        }
    }
    return rc;
}

/* Row 4 helpers: the first record of worker w at or after index `from`
 * with incarnation > inc and token >= tok; -1 if none. */
static int64_t
find_rec(const slot *s, int64_t from, uint64_t inc, int64_t tok, int64_t *tok_out)
{
    int64_t n = __atomic_load_n(&s->nrec, __ATOMIC_ACQUIRE);
    for (int64_t i = from; i < n; i++) {
        if (s->recs[i].inc > inc && s->recs[i].tok >= tok) {
            if (tok_out != NULL) {
                *tok_out = s->recs[i].tok;
            }
            return i;
        }
    }
    return -1;
}

/* Wall-clock ms of the coordinator's COORD-BIND log line; -1 if none. */
static int64_t
log_bind_wall_ms(const char *log)
{
    FILE *f = fopen(log, "r");
    char  line[512];
    int   y, mo, d, h, mi, s, ms;

    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, "COORD-BIND") != NULL &&
            sscanf(line, "%d-%d-%dT%d:%d:%d.%dZ", &y, &mo, &d, &h, &mi, &s, &ms) == 7) {
            struct tm tm;
            memset(&tm, 0, sizeof(tm));
            tm.tm_year = y - 1900;
            tm.tm_mon = mo - 1;
            tm.tm_mday = d;
            tm.tm_hour = h;
            tm.tm_min = mi;
            tm.tm_sec = s;
            fclose(f);
            return (int64_t)timegm(&tm) * 1000 + ms;
        }
    }
    fclose(f);
    return -1;
}

/* Wait until every worker has a token >= tok in an incarnation > inc. */
static int
wait_all_tokens(bench *b, int W, uint64_t inc, int64_t tok, int timeout_ms, pid_t coord,
                const pid_t *pids)
{
    int64_t deadline = sr_clock_now_ms() + timeout_ms;
    while (!interrupted && sr_clock_now_ms() < deadline) {
        int all = 1;
        for (int w = 0; w < W; w++) {
            if (find_rec(&b->sh->s[w], 0, inc, tok, NULL) < 0) {
                all = 0;
            }
            if (waitpid(pids[w], NULL, WNOHANG) == pids[w]) {
                untrack(b, pids[w]);
                fprintf(stderr, "# recovery: worker %d exited: %s\n", w, b->sh->s[w].err);
                return -1;
            }
        }
        if (coord > 0 && waitpid(coord, NULL, WNOHANG) == coord) {
            untrack(b, coord);
            fprintf(stderr, "# recovery: the coordinator exited\n");
            return -1;
        }
        if (all) {
            return 0;
        }
        sleep_ms(2);
    }
    return -1;
}

int
row_recovery(bench *b)
{
    const int W = 4;
    run_cfg   c = {.W = W,
                   .bytes = 16 * MIB,
                   .nvars = 1,
                   .loop = LOOP_FULL,
                   .ckpt = 1,
                   .sync_normal = 0,
                   .warm = INT64_MAX}; /* no timed window: tokens only */
    char      store[256], sock[256], endpoint[270], log[256];
    pid_t     coord, pids[MAX_W];
    int       nw = 0, ok = 1, kills = b->kills;
    double    rec_ms[MAX_KILLS], bind_ms[MAX_KILLS], back_ms[MAX_KILLS], intervals[4 * MAX_REPS];
    int       nint = 0, nrec = 0;
    uint64_t  inc = 0;
    int64_t   restored = 0;
    unsigned  seed = b->seed;

    printf("# row 4: recovery -- kill -9 of the coordinator of a running job (4 workers, 16 MiB,\n"
           "#        pull -> push -> step, checkpoint every step, FULL); restart at once on the "
           "same store;\n"
           "#        time from the kill to the first token of the first step applied by the new\n"
           "#        incarnation (%d kills, seed %u); baseline: the job's steady step time\n",
           kills, seed);
    snprintf(store, sizeof(store), "%s/r.db", b->dir);
    snprintf(sock, sizeof(sock), "%s/r.sock", b->dir);
    snprintf(endpoint, sizeof(endpoint), "ipc://%s", sock);
    snprintf(log, sizeof(log), "%s/r.log", b->dir);
    reset_slots(b->sh);
    if ((coord = spawn_coordinator(b, &c, store, endpoint, log)) < 0 ||
        wait_bound(b, coord, sock, 60000) != 0) {
        fprintf(stderr, "# recovery: the coordinator did not start\n");
        print_log_tail(log);
        kill_all(b);
        remove_run_files(b->dir, "r");
        b->failures++;
        return -1;
    }
    for (int w = 0; w < W; w++) {
        pid_t pid = fork_child(b);
        if (pid == 0) {
            _exit(sync_worker(&c, w, endpoint, coord, b->sh) == 0 ? 0 : 1);
        }
        pids[nw++] = pid;
    }
    /* Running: every worker past step 3 of the first incarnation. */
    if (wait_all_tokens(b, W, 0, 3, 120000, coord, pids) != 0) {
        ok = 0;
    }
    for (int k = 0; k < kills && ok && !interrupted; k++) {
        int64_t t_kill, wall_kill, from[MAX_W];
        char    phases[64] = "";

        /* Steady-state step time: worker 0's token intervals just before. */
        const slot *s0 = &b->sh->s[0];
        int64_t     n0 = __atomic_load_n(&s0->nrec, __ATOMIC_ACQUIRE);
        if (n0 >= 2 && nint < (int)(sizeof(intervals) / sizeof(intervals[0])) &&
            s0->recs[n0 - 1].tok == s0->recs[n0 - 2].tok + 1 &&
            s0->recs[n0 - 1].inc == s0->recs[n0 - 2].inc) {
            intervals[nint++] = (double)(s0->recs[n0 - 1].t_ns - s0->recs[n0 - 2].t_ns) / 1e6;
        }
        sleep_ms((int)(rand_r(&seed) % 250)); /* land the kill anywhere in a step */
        for (int w = 0; w < W; w++) {
            int    ph = b->sh->s[w].phase;
            size_t used = strlen(phases);
            snprintf(phases + used, sizeof(phases) - used, "%s%s", w ? "," : "",
                     phase_names[ph >= 0 && ph <= PH_STEP ? ph : 0]);
            from[w] = __atomic_load_n(&b->sh->s[w].nrec, __ATOMIC_ACQUIRE);
            if (b->sh->s[w].inc > inc) {
                inc = b->sh->s[w].inc;
            }
        }
        wall_kill = sr_clock_wall_ms();
        t_kill = now_ns();
        kill9(b, coord);
        /* The new incarnation logs to its own file, for its bind time. */
        unlink(log);
        snprintf(log, sizeof(log), "%s/r%d.log", b->dir, k + 1);
        if ((coord = spawn_coordinator(b, &c, store, endpoint, log)) < 0) {
            ok = 0;
            break;
        }
        /* Every worker back (a token in the new incarnation), then the
         * restored step g_r is the smallest of those first tokens. */
        if (wait_all_tokens(b, W, inc, 0, 120000, coord, pids) != 0) {
            ok = 0;
            break;
        }
        restored = INT64_MAX;
        int64_t t_back = INT64_MAX;
        for (int w = 0; w < W; w++) {
            int64_t tok, i = find_rec(&b->sh->s[w], from[w], inc, 0, &tok);
            if (i >= 0 && tok < restored) {
                restored = tok;
            }
            if (i >= 0 && b->sh->s[w].recs[i].t_ns < t_back) {
                t_back = b->sh->s[w].recs[i].t_ns;
            }
        }
        if (wait_all_tokens(b, W, inc, restored + 2, 120000, coord, pids) != 0) {
            ok = 0;
            break;
        }
        int64_t t_applied = INT64_MAX;
        for (int w = 0; w < W; w++) {
            int64_t i = find_rec(&b->sh->s[w], from[w], inc, restored + 1, NULL);
            if (i >= 0 && b->sh->s[w].recs[i].t_ns < t_applied) {
                t_applied = b->sh->s[w].recs[i].t_ns;
            }
        }
        int64_t bind_wall = log_bind_wall_ms(log);
        rec_ms[nrec] = (double)(t_applied - t_kill) / 1e6;
        bind_ms[nrec] = bind_wall >= 0 ? (double)(bind_wall - wall_kill) : NAN;
        back_ms[nrec] = (double)(t_back - t_kill) / 1e6;
        printf("#   kill %2d: workers in [%s]; coordinator bound after %6.0f ms, first token of "
               "the new incarnation %6.0f ms, step %" PRId64 " applied after %6.0f ms\n",
               k + 1, phases, bind_ms[nrec], back_ms[nrec], restored + 1, rec_ms[nrec]);
        fflush(stdout);
        nrec++;
    }
    /* Stop: every worker stops at its first token >= the stop step. */
    if (ok) {
        int64_t top = 0;
        for (int w = 0; w < W; w++) {
            top = b->sh->s[w].last_tok > top ? b->sh->s[w].last_tok : top;
        }
        b->sh->stop_at = top + 2;
        if (wait_children(b, pids, nw, 120000, coord, "recovery workers") != 0) {
            ok = 0;
        }
        report_child_errors(b->sh, W, "recovery worker");
    }
    if (stop_process(b, coord, 60000) != 0 && ok) {
        ok = 0;
    }
    if (!ok) {
        print_log_tail(log);
        kill_all(b);
        b->failures++;
    } else {
        printf("#   verified: model = -step*lr*g at step %" PRId64 " (%" PRId64 " elements)\n",
               b->sh->s[0].final_step, b->sh->s[0].checked);
    }
    unlink(log);
    remove_run_files(b->dir, "r");
    if (nrec == 0) {
        return -1;
    }
    cell *x = new_cell(b, 4, "16MiB W=4 kill -9, median of kills", "ms", "<= 1000 ms");
    if (x == NULL) {
        return -1;
    }
    x->has_target = 1;
    double step_ms = median(intervals, nint);
    for (int i = 0; i < nrec && i < MAX_REPS; i++) {
        x->sr[i] = rec_ms[i];
        x->base[i] = step_ms;
        x->nreps++;
    }
    finish_cell(x);
    x->met = x->sr_med <= 1000;
    snprintf(x->note, sizeof(x->note), "bind %.0f ms, first token %.0f ms (medians)",
             median(bind_ms, nrec), median(back_ms, nrec));
    return ok ? 0 : -1;
}

/* ResNet-50's parameter list (torchvision's resnet50, 161 tensors, 25.56 M
 * float32): conv weights, each followed by its BatchNorm's weight and bias,
 * then fc.  Fills e[161]; returns the count. */
static int
resnet50_elems(int64_t *e)
{
    static const int widths[4] = {64, 128, 256, 512}, blocks[4] = {3, 4, 6, 3};
    int              n = 0, in = 64;

    e[n++] = 64 * 3 * 7 * 7, e[n++] = 64, e[n++] = 64;
    for (int l = 0; l < 4; l++) {
        int w = widths[l], out = 4 * w;
        for (int k = 0; k < blocks[l]; k++) {
            int cin = k == 0 ? in : out;
            e[n++] = (int64_t)w * cin, e[n++] = w, e[n++] = w;
            e[n++] = (int64_t)w * w * 9, e[n++] = w, e[n++] = w;
            e[n++] = (int64_t)out * w, e[n++] = out, e[n++] = out;
            if (k == 0) {
                e[n++] = (int64_t)out * cin, e[n++] = out, e[n++] = out;
            }
        }
        in = out;
    }
    e[n++] = 2048 * 1000, e[n++] = 1000;
    return n;
}

/* Row 6 (beyond the five): models of many variables against the
 * same bytes in one variable, both run by syncrep in this run, so the ratio
 * is what the per-tensor work costs.  Cells: 2,000 variables of 1 KiB with
 * the calls meant for them (sr_client_pull_many, sr_client_push_many), with
 * a call per variable and with the model API (sr_client_model_step, issue
 * 23: the coordinator packs the tensors), 200 of 50 KiB (a network's
 * layers) with the calls for many and with the model API at 2 and 4
 * workers, ResNet-50's parameter list with the model API, and one
 * variable beside 10,000 not-trainable ones that the token no longer
 * carries every step (token deltas).  The model API's cells and the last
 * have targets (issue 23). */
int
row_many(bench *b)
{
    static int64_t resnet[161];
    static const struct {
        int         nvars, kib, many, W, resnet, frozen, inplace;
        double      target;
        const char *target_text;
    } shapes[] = {
        {2000, 1, MANY_CALLS, 2, 0, 0, 0, 0, "none"},
        {2000, 1, 0, 2, 0, 0, 0, 0, "none"},
        {2000, 1, MANY_MODEL, 2, 0, 0, 0, 0.8, ">= 0.8"},
        {200, 50, MANY_CALLS, 2, 0, 0, 0, 0, "none"},
        {200, 50, MANY_MODEL, 2, 0, 0, 0, 0.9, ">= 0.9"},
        {200, 50, MANY_MODEL, 4, 0, 0, 0, 0.9, ">= 0.9"},
        /* The same with the gradients in the client's buffers and the values
         * left in its own copy (sr_client_model_grad / _value): what the
         * model API costs without the program's gather and scatter. */
        {200, 50, MANY_MODEL, 4, 0, 0, 1, 0, "none"},
        {161, 0, MANY_MODEL, 2, 1, 0, 0, 0.8, ">= 0.8"},
        /* Token deltas: one 4 KiB variable beside 10,000 not-trainable ones
         * against the same variable alone (our target; before the deltas,
         * 352 against 26 steps/s: issue 23). */
        {1, 4, 0, 2, 0, 10000, 0, 0.8, ">= 0.8"},
    };
    static const char *const how[] = {"a call per variable", "pull_many/push_many", "model API"};
    int                      rc = 0, nres = resnet50_elems(resnet);
    int64_t                  resnet_elems = 0;

    for (int i = 0; i < nres; i++) {
        resnet_elems += resnet[i];
    }
    printf("# row 6: many variables -- 2 or 4 workers, float32 variables (2,000 x 1 KiB, 200 x 50 "
           "KiB,\n"
           "#        ResNet-50's 161 tensors), pull -> push -> step (the model API: one call),\n"
           "#        checkpoint every step, NORMAL, --commit sync;\n"
           "#        baseline: the same bytes as one variable (syncrep too, same run)\n");
    for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]) && !interrupted; k++) {
        size_t  bytes = shapes[k].resnet ? (size_t)resnet_elems * sizeof(float)
                                         : (size_t)shapes[k].nvars * (size_t)shapes[k].kib * KIB;
        run_cfg c = {.W = shapes[k].W,
                     .bytes = bytes,
                     .nvars = shapes[k].resnet ? nres : shapes[k].nvars,
                     .loop = LOOP_FULL,
                     .ckpt = 1,
                     .sync_normal = 1,
                     .warm = 5,
                     .steps = 2000,
                     .min_steps = 10,
                     .target_ms = b->quick ? 1000 : 2000,
                     .many = shapes[k].many,
                     .tensor_elems = shapes[k].resnet ? resnet : NULL,
                     .frozen = shapes[k].frozen,
                     .model_inplace = shapes[k].inplace};
        run_cfg one = c;
        char    cfgtxt[96];
        one.nvars = 1;
        one.many = 0;
        one.tensor_elems = NULL;
        one.frozen = 0;
        one.model_inplace = 0;
        if (shapes[k].frozen > 0) {
            snprintf(cfgtxt, sizeof(cfgtxt), "%dKiB + %d frozen x16B W=%d %s", shapes[k].kib,
                     shapes[k].frozen, shapes[k].W, how[shapes[k].many]);
        } else if (shapes[k].resnet) {
            snprintf(cfgtxt, sizeof(cfgtxt), "ResNet-50 %d tensors %.1fMiB W=%d %s", nres,
                     (double)bytes / MIB, shapes[k].W, how[shapes[k].many]);
        } else {
            snprintf(cfgtxt, sizeof(cfgtxt), "%dx%dKiB W=%d %s%s", shapes[k].nvars, shapes[k].kib,
                     shapes[k].W, how[shapes[k].many], shapes[k].inplace ? " in place" : "");
        }
        if (b->filter != NULL && strstr(cfgtxt, b->filter) == NULL) {
            continue;
        }
        cell *x = new_cell(b, 6, cfgtxt, "steps/s", shapes[k].target_text);
        if (x == NULL) {
            return -1;
        }
        x->has_target = shapes[k].target > 0;
        printf("# %s\n", cfgtxt);
        rc = run_pairs(b, x, &c, &one, NULL) != 0 ? -1 : rc;
        close_ratio_cell(b, x, shapes[k].target);
    }
    return rc;
}

/* Row 5's model-API observations (issue 23): the coordinator of a model of
 * many tensors, packed (sr_client_declare_model), at W=4 with pull -> push
 * -> step as row 3: 2,000 x 8 KiB, the same bytes as one variable (so the
 * difference is what the 2,000 members cost), and ResNet-50's parameter
 * list. */
static int
mem_model_cells(bench *b)
{
    static int64_t resnet[161];
    int            nres = resnet50_elems(resnet);
    int64_t        relems = 0;
    char           label[96];

    for (int i = 0; i < nres; i++) {
        relems += resnet[i];
    }
    run_cfg base = {.W = 4,
                    .bytes = 2000 * 8 * KIB,
                    .nvars = 2000,
                    .loop = LOOP_FULL,
                    .ckpt = 1,
                    .sync_normal = 1,
                    .warm = 3,
                    .steps = 4,
                    .many = MANY_MODEL};
    run_cfg cells[3] = {base, base, base};
    cells[1].nvars = 1; /* the same bytes as one variable */
    cells[1].many = 0;
    cells[2].bytes = (size_t)relems * sizeof(float);
    cells[2].nvars = nres;
    cells[2].tensor_elems = resnet;
    for (int i = 0; i < 3 && !interrupted; i++) {
        run_res r;
        if (sync_run(b, &cells[i], &r) != 0) {
            b->failures++;
            return -1;
        }
        if (i < 2) {
            snprintf(label, sizeof(label), "W=4 2000x8KiB %s pull+push+step ckpt=1 NORMAL",
                     i == 0 ? "model API" : "as 1 var");
        } else {
            snprintf(label, sizeof(label),
                     "W=4 ResNet-50 %d tensors %.1fMiB model API pull+push+step ckpt=1 NORMAL",
                     nres, (double)cells[i].bytes / MIB);
        }
        add_mem(b, label, 2 * cells[i].bytes, r.hwm_mib);
    }
    return 0;
}

int
row_memory(bench *b)
{
    if (b->nmem == 0) {
        /* Rows 1 and 3 were not run: the two largest of their configurations. */
        run_cfg big = {.W = 4,
                       .bytes = 64 * MIB,
                       .nvars = 1,
                       .loop = LOOP_PUSH,
                       .sync_normal = 1,
                       .warm = 2,
                       .steps = 2};
        run_cfg mid = {.W = 4,
                       .bytes = 16 * MIB,
                       .nvars = 1,
                       .loop = LOOP_FULL,
                       .ckpt = 1,
                       .sync_normal = 1,
                       .warm = 3,
                       .steps = 4};
        run_res r;
        if (sync_run(b, &big, &r) != 0) {
            b->failures++;
            return -1;
        }
        add_mem(b, "W=4 S=64MiB 1 var push+step ckpt=0", 2 * big.bytes, r.hwm_mib);
        if (sync_run(b, &mid, &r) != 0) {
            b->failures++;
            return -1;
        }
        add_mem(b, "W=4 S=16MiB 1 var pull+push+step ckpt=1 NORMAL", 2 * mid.bytes, r.hwm_mib);
    }
    int rc = mem_model_cells(b); /* the rows' cells are printed all the same */
    for (int i = 0; i < b->nmem; i++) {
        const mem_obs *m = &b->mem[i];
        double         held = (double)m->held_bytes / MIB;
        double         limit = 1.1 * held + 32;
        cell          *x = new_cell(b, 5, m->label, "MiB", "<= 1.1x+32MiB");
        if (x == NULL) {
            return -1;
        }
        x->has_target = 1;
        x->sr[0] = m->hwm_mib;
        x->base[0] = held;
        x->nreps = 1;
        finish_cell(x);
        x->met = m->hwm_mib <= limit;
        snprintf(x->note, sizeof(x->note), "limit %.0f MiB; held = value + accumulator (sgd)",
                 limit);
    }
    return rc;
}
