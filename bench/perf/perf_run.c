/*
 * One run and what is made of it: a syncrep run (sync_run: the coordinator
 * and W workers) or a baseline run (base_run), their window
 * (window_from_workers, reset_slots); the table's cells (new_cell,
 * finish_cell, print_diag, add_mem, size_text) and the output
 * (print_table, write_json).
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

/* ---- runs ---------------------------------------------------------------- */

void
reset_slots(shm *sh)
{
    for (int i = 0; i < MAX_PROCS; i++) {
        slot *s = &sh->s[i];
        s->failed = 0;
        s->err[0] = '\0';
        s->t_start_ns = s->t_end_ns = 0;
        s->tok_start = s->tok_end = 0;
        s->push_ns = s->pull_ns = s->step_ns = s->iters = 0;
        s->coord_cpu_s = s->self_cpu_s = 0;
        s->coord_faults = s->self_faults = 0;
        s->stale = s->duplicate = s->resends = 0;
        s->checked = s->wrong = s->final_step = s->hwm_kib = 0;
        s->phase = PH_IDLE;
        s->last_tok = -1;
        s->inc = 0;
        s->nrec = 0;
    }
    sh->stop_at = 0;
}

/* The window as seen by the first worker to reach each end: n steps between
 * the release of token `warm` and the release of token `warm + n`. */
static int
window_from_workers(const shm *sh, int W, int64_t *t_ns, int64_t *steps)
{
    int64_t t0 = INT64_MAX, t1 = INT64_MAX, k0 = 0, k1 = 0;
    for (int w = 0; w < W; w++) {
        const slot *s = &sh->s[w];
        if (s->t_start_ns == 0 || s->t_end_ns == 0) {
            return -1;
        }
        if (s->t_start_ns < t0) {
            t0 = s->t_start_ns;
            k0 = s->tok_start;
        }
        if (s->t_end_ns < t1) {
            t1 = s->t_end_ns;
            k1 = s->tok_end;
        }
    }
    *t_ns = t1 - t0;
    *steps = k1 - k0;
    return *t_ns > 0 && *steps > 0 ? 0 : -1;
}

int
sync_run(bench *b, const run_cfg *c, run_res *r)
{
    char    stem[32], store[256], sock[256], endpoint[270], log[256];
    pid_t   coord, pids[MAX_W];
    int     ok = 1, nw = 0;
    int64_t win_ns = 0, steps = 0, t_run = now_ns();

    memset(r, 0, sizeof(*r));
    snprintf(stem, sizeof(stem), "s%d", ++b->run_id);
    snprintf(store, sizeof(store), "%s/%s.db", b->dir, stem);
    snprintf(sock, sizeof(sock), "%s/%s.sock", b->dir, stem);
    snprintf(endpoint, sizeof(endpoint), "ipc://%s", sock);
    snprintf(log, sizeof(log), "%s/%s.log", b->dir, stem);
    reset_slots(b->sh);
    b->sh->stop_at = c->warm + c->steps;
    if ((coord = spawn_coordinator(b, c, store, endpoint, log)) < 0 ||
        wait_bound(b, coord, sock, 60000) != 0) {
        fprintf(stderr, "# syncrep coordinator did not start\n");
        print_log_tail(log);
        kill_all(b);
        remove_run_files(b->dir, stem);
        return -1;
    }
    for (int w = 0; w < c->W; w++) {
        pid_t pid = fork_child(b);
        if (pid == 0) {
            _exit(sync_worker(c, w, endpoint, coord, b->sh) == 0 ? 0 : 1);
        }
        if (pid < 0) {
            ok = 0;
            break;
        }
        pids[nw++] = pid;
    }
    if (!ok || wait_children(b, pids, nw, RUN_TIMEOUT_MS, coord, "syncrep workers") != 0) {
        ok = 0;
    }
    if (ok) {
        int64_t kib = proc_hwm_kib(coord);
        r->hwm_mib = kib >= 0 ? (double)kib / 1024.0 : NAN;
    }
    if (c->kill_at_end) {
        kill9(b, coord);
    } else if (stop_process(b, coord, 60000) != 0 && ok) {
        fprintf(stderr, "# syncrep coordinator did not exit cleanly\n");
        ok = 0;
    }
    report_child_errors(b->sh, c->W, "syncrep worker");
    if (ok && window_from_workers(b->sh, c->W, &win_ns, &steps) != 0) {
        fprintf(stderr, "# syncrep run: no timed window\n");
        ok = 0;
    }
    if (!ok) {
        print_log_tail(log);
        kill_all(b);
        remove_run_files(b->dir, stem);
        return -1;
    }
    double secs = (double)win_ns / 1e9;
    r->steps = steps;
    r->step_ms = secs * 1e3 / (double)steps;
    r->value = c->loop == LOOP_PUSH ? (double)c->W * (double)c->bytes * (double)steps / secs / 1e9
                                    : (double)steps / secs;
    for (int w = 0; w < c->W; w++) {
        const slot *s = &b->sh->s[w];
        double      it = s->iters > 0 ? (double)s->iters : 1;
        r->push_ms += (double)s->push_ns / 1e6 / it / c->W;
        r->pull_ms += (double)s->pull_ns / 1e6 / it / c->W;
        r->step_wait_ms += (double)s->step_ns / 1e6 / it / c->W;
        r->worker_cpu += s->self_cpu_s / ((double)(s->t_end_ns - s->t_start_ns) / 1e9) / c->W;
        r->worker_faults += (double)s->self_faults / it / c->W;
        r->stale += s->stale;
        r->duplicate += s->duplicate;
        r->resends += s->resends;
    }
    const slot *s0 = &b->sh->s[0];
    r->server_cpu = s0->coord_cpu_s / ((double)(s0->t_end_ns - s0->t_start_ns) / 1e9);
    r->server_faults = (double)s0->coord_faults / (double)(s0->iters > 0 ? s0->iters : 1);
    r->checked = s0->checked;
    r->wrong = s0->wrong;
    log_store_lines(log, r->wal, sizeof(r->wal));
    log_ckpt_line(log, r); /* issue 28 */
    r->steps_total = s0->final_step;
    remove_run_files(b->dir, stem);
    r->wall_s = (double)(now_ns() - t_run) / 1e9;
    return 0;
}

int
base_run(bench *b, const run_cfg *c, run_res *r)
{
    char    stem[32], sock[256], endpoint[270];
    pid_t   pids[MAX_PROCS];
    int     n = 0, ok = 1;
    int64_t win_ns = 0, steps = c->steps, t_run = now_ns();

    memset(r, 0, sizeof(*r));
    snprintf(stem, sizeof(stem), "b%d", ++b->run_id);
    snprintf(sock, sizeof(sock), "%s/%s.sock", b->dir, stem);
    snprintf(endpoint, sizeof(endpoint), "ipc://%s", sock);
    reset_slots(b->sh);
    b->sh->stop_at = c->warm + c->steps; /* the rtt receiver may lower it */
    pid_t pid = fork_child(b);
    if (pid == 0) {
        int rc = c->loop == LOOP_PUSH ? stream_receiver(c, endpoint, b->sh, c->W)
                                      : rtt_receiver(c, endpoint, b->sh, c->W);
        _exit(rc == 0 ? 0 : 1);
    }
    if (pid < 0) {
        return -1;
    }
    pids[n++] = pid;
    for (int w = 0; w < c->W && ok; w++) {
        if ((pid = fork_child(b)) == 0) {
            int rc = c->loop == LOOP_PUSH ? stream_sender(c, w, endpoint, b->sh)
                                          : rtt_worker(c, w, endpoint, b->sh);
            _exit(rc == 0 ? 0 : 1);
        }
        if (pid < 0) {
            ok = 0;
        } else {
            pids[n++] = pid;
        }
    }
    if (!ok || wait_children(b, pids, n, RUN_TIMEOUT_MS, 0, "baseline") != 0) {
        ok = 0;
    }
    report_child_errors(b->sh, c->W + 1, "baseline");
    remove_run_files(b->dir, stem);
    if (!ok) {
        kill_all(b);
        return -1;
    }
    const slot *rs = &b->sh->s[c->W];
    steps = b->sh->stop_at - c->warm;
    if (c->loop == LOOP_PUSH) {
        win_ns = rs->t_end_ns - rs->t_start_ns;
        r->value = (double)c->W * (double)c->bytes * (double)steps / ((double)win_ns / 1e9) / 1e9;
        r->checked = rs->checked;
        r->wrong = rs->wrong;
    } else {
        /* The first worker to get each end's reply, as for syncrep's tokens. */
        int64_t t0 = INT64_MAX, t1 = INT64_MAX;
        for (int w = 0; w < c->W; w++) {
            t0 = b->sh->s[w].t_start_ns < t0 ? b->sh->s[w].t_start_ns : t0;
            t1 = b->sh->s[w].t_end_ns < t1 ? b->sh->s[w].t_end_ns : t1;
        }
        win_ns = t1 - t0;
        r->value = (double)steps / ((double)win_ns / 1e9);
        for (int w = 0; w < c->W; w++) {
            r->checked += b->sh->s[w].checked;
            r->wrong += b->sh->s[w].wrong;
        }
    }
    r->steps = steps;
    r->step_ms = (double)win_ns / 1e6 / (double)steps;
    r->server_cpu = rs->self_cpu_s / ((double)(rs->t_end_ns - rs->t_start_ns) / 1e9);
    r->server_faults = (double)rs->self_faults / (double)steps;
    r->wall_s = (double)(now_ns() - t_run) / 1e9;
    r->hwm_mib = (double)rs->hwm_kib / 1024.0;
    for (int w = 0; w < c->W; w++) {
        const slot *s = &b->sh->s[w];
        if (s->t_end_ns > s->t_start_ns && s->t_start_ns > 0) {
            r->worker_cpu += s->self_cpu_s / ((double)(s->t_end_ns - s->t_start_ns) / 1e9) / c->W;
        }
        if (s->iters > 0) {
            r->step_wait_ms += (double)s->step_ns / 1e6 / (double)s->iters / c->W;
            r->worker_faults += (double)s->self_faults / (double)s->iters / c->W;
        }
    }
    return win_ns > 0 ? 0 : -1;
}

/* ---- cells and the table --------------------------------------------------- */

cell *
new_cell(bench *b, int row, const char *config, const char *unit, const char *target)
{
    cell *x;
    if (b->ncells >= MAX_CELLS) {
        /* Never silently short: until 2026-12-04 a full run stopped after
         * 32 cells and row 6's targets never ran under ./run bench. */
        fprintf(stderr, "# perf: no room for cell '%s' (row %d): MAX_CELLS %d\n", config, row,
                MAX_CELLS);
        b->failures++;
        return NULL;
    }
    x = &b->cells[b->ncells++];
    memset(x, 0, sizeof(*x));
    x->row = row;
    snprintf(x->config, sizeof(x->config), "%s", config);
    snprintf(x->unit, sizeof(x->unit), "%s", unit);
    snprintf(x->target, sizeof(x->target), "%s", target);
    return x;
}

void
finish_cell(cell *x)
{
    double r[MAX_REPS];
    for (int i = 0; i < x->nreps; i++) {
        r[i] = x->sr[i] / x->base[i];
    }
    x->sr_med = median(x->sr, x->nreps);
    x->base_med = median(x->base, x->nreps);
    x->ratio = median(r, x->nreps);
}

/* One run's line: the value, the window, where a worker's step went
 * (syncrep: in pull, push and waiting for the token), the server's (the
 * coordinator's or the receiver's) CPU share of one core and page faults per
 * step, the workers' mean CPU share and faults per step. */
void
print_diag(const char *who, const run_res *r, int loop, int sync)
{
    printf("#   %-12s %9.3f %-7s %4" PRId64 " steps %8.2f ms/step", who, r->value,
           loop == LOOP_PUSH ? "GB/s" : "steps/s", r->steps, r->step_ms);
    if (sync) {
        if (loop == LOOP_FULL) {
            printf("  pull %6.2f", r->pull_ms);
        }
        printf("  push %6.2f  wait %6.2f ms", r->push_ms, r->step_wait_ms);
    }
    printf("  server cpu %3.0f%% flt %6.0f  worker cpu %3.0f%% flt %6.0f", r->server_cpu * 100,
           r->server_faults, r->worker_cpu * 100, r->worker_faults);
    if (r->hwm_mib > 0) {
        printf("  hwm %.0f MiB", r->hwm_mib);
    }
    if (r->stale || r->duplicate || r->resends) {
        printf("  stale %" PRIu64 " dup %" PRIu64 " resends %" PRIu64, r->stale, r->duplicate,
               r->resends);
    }
    if (r->wal[0] != '\0') {
        printf("  %s", r->wal);
    }
    printf("  (%.1f s)\n", r->wall_s);
    fflush(stdout);
}

void
add_mem(bench *b, const char *label, size_t held, double hwm)
{
    for (int i = 0; i < b->nmem; i++) {
        if (strcmp(b->mem[i].label, label) == 0) {
            if (hwm > b->mem[i].hwm_mib) {
                b->mem[i].hwm_mib = hwm;
            }
            return;
        }
    }
    if (b->nmem < MAX_CELLS) {
        mem_obs *m = &b->mem[b->nmem++];
        snprintf(m->label, sizeof(m->label), "%s", label);
        m->held_bytes = held;
        m->hwm_mib = hwm;
    }
}

const char *
size_text(size_t bytes, char *buf, size_t len)
{
    if (bytes >= MIB) {
        snprintf(buf, len, "%zuMiB", bytes / MIB);
    } else {
        snprintf(buf, len, "%zuKiB", bytes / KIB);
    }
    return buf;
}

/* ---- output ------------------------------------------------------------- */

void
print_table(const bench *b)
{
    printf("#\n# %-3s %-44s %10s %10s %-8s %7s %-14s %s\n", "row", "configuration", "syncrep",
           "baseline", "unit", "ratio", "target", "result");
    for (int i = 0; i < b->ncells; i++) {
        const cell *x = &b->cells[i];
        printf("  %-3d %-44s %10.3f %10.3f %-8s %7.3f %-14s %s", x->row, x->config, x->sr_med,
               x->base_med, x->unit, x->ratio, x->target,
               !x->has_target ? "-"
               : x->met       ? "OK"
                              : "MISS");
        if (x->note[0]) {
            printf("  (%s)", x->note);
        }
        printf("\n");
    }
}

static void
json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') {
            fputc('\\', f);
        }
        fputc(*s, f);
    }
    fputc('"', f);
}

static void
json_num(FILE *f, double v)
{
    if (isfinite(v)) {
        fprintf(f, "%.6g", v);
    } else {
        fputs("null", f);
    }
}

int
write_json(const bench *b, const char *path)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "# %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "{\"benchmark\":\"perf\",\"reps\":%d,\"quick\":%s,\"failures\":%d,\"rows\":[",
            b->reps, b->quick ? "true" : "false", b->failures);
    for (int i = 0; i < b->ncells; i++) {
        const cell *x = &b->cells[i];
        fprintf(f, "%s{\"row\":%d,\"config\":", i ? "," : "", x->row);
        json_str(f, x->config);
        fprintf(f, ",\"unit\":");
        json_str(f, x->unit);
        fprintf(f, ",\"syncrep\":");
        json_num(f, x->sr_med);
        fprintf(f, ",\"baseline\":");
        json_num(f, x->base_med);
        fprintf(f, ",\"ratio\":");
        json_num(f, x->ratio);
        fprintf(f, ",\"target\":");
        json_str(f, x->target);
        fprintf(f, ",\"result\":\"%s\",\"note\":", !x->has_target ? "-" : x->met ? "OK" : "MISS");
        json_str(f, x->note);
        fprintf(f, ",\"syncrep_reps\":[");
        for (int k = 0; k < x->nreps; k++) {
            fprintf(f, "%s", k ? "," : "");
            json_num(f, x->sr[k]);
        }
        fprintf(f, "],\"baseline_reps\":[");
        for (int k = 0; k < x->nreps; k++) {
            fprintf(f, "%s", k ? "," : "");
            json_num(f, x->base[k]);
        }
        fprintf(f, "]}");
    }
    fprintf(f, "]}\n");
    return fclose(f) == 0 ? 0 : -1;
}
