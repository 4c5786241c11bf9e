/*
 * local_reduce: time sr_gpu_reduce, sr_gpu_broadcast and sr_gpu_allreduce
 * (float32, sum, root 0) for sizes 4 KiB .. 256 MiB (x4), in nccl-tests'
 * terms: algbw = bytes / time; busbw = algbw x 2(n-1)/n for all-reduce and
 * = algbw for reduce and broadcast.  A baseline runs in the same process:
 * memcpy for the host backend, ncclAllReduce called directly for nccl; the
 * footer reports the ratio against its target.  Results are verified after
 * the timings; any wrong value makes the exit status 1 (3 with
 * --enforce-target when the baseline ratio misses its target).  docs/gpu.md.
 *
 *   local_reduce [--backend auto|host|nccl] [--ndev N] [--min-bytes B]
 *                [--max-bytes B] [--iters N] [--json FILE] [--enforce-target]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "gpu/gpu_raw.h"
#include "syncrep/gpu.h"

#define MAXG SR_GPU_MAX_DEV
#define MIB  ((size_t)1 << 20)
/* Sizes from which the baseline ratio is judged (bandwidth-bound). */
#define RATIO_FROM_BYTES (16 * MIB)
#define HOST_TARGET      0.5
#define NCCL_TARGET      0.9
/* Timed rounds per size; see measure_size. */
#define ROUNDS 3

typedef struct {
    sr_gpu_backend_kind backend;
    int                 ndev;
    size_t              min_bytes, max_bytes;
    int                 iters; /* 0 = by size */
    const char         *json;
    int                 enforce;
} options;

typedef enum { OP_REDUCE, OP_ALLREDUCE, OP_BROADCAST, NOPS } bench_op;

static const char *const OP_NAME[NOPS] = {"reduce", "allreduce", "broadcast"};

typedef struct {
    bench_op op;
    size_t   bytes, count;
    int      iters;
    double   time_us, algbw, busbw; /* GB/s = 1e9 bytes/s */
    uint64_t wrong;
    double   base_bw, ratio; /* < 0: no baseline for this row */
} row;

/* Buffers of one size. */
typedef struct {
    sr_gpu *g;
    int     G;
    size_t  count, bytes;
    void   *send[MAXG], *recv[MAXG], *root_out;
    void   *bc[MAXG];    /* broadcast's in-place buffers, apart so every op stays idempotent */
    float  *stage;       /* host staging for fills and checks */
    char   *msrc, *mdst; /* the memcpy baseline's buffers (host backend) */
} bufs;

static void
usage(FILE *f)
{
    fprintf(f, "usage: local_reduce [--backend auto|host|nccl] [--ndev N] [--min-bytes B]\n"
               "                    [--max-bytes B] [--iters N] [--json FILE] [--enforce-target]\n"
               "  sizes accept K, M, G suffixes (binary); defaults 4K .. 256M, x4 steps\n");
}

static int
parse_size(const char *s, size_t *out)
{
    char              *end;
    unsigned long long v = strtoull(s, &end, 10);

    switch (*end) {
    case 'K':
    case 'k':
        v <<= 10;
        end++;
        break;
    case 'M':
    case 'm':
        v <<= 20;
        end++;
        break;
    case 'G':
    case 'g':
        v <<= 30;
        end++;
        break;
    default:
        break;
    }
    if (*end != '\0' || v == 0) {
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

static int
parse_args(int argc, char **argv, options *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--enforce-target") == 0) {
            o->enforce = 1;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        if (v == NULL) {
            usage(stderr);
            return -1;
        }
        i++;
        if (strcmp(a, "--backend") == 0) {
            if (strcmp(v, "host") == 0) {
                o->backend = SR_GPU_HOST;
            } else if (strcmp(v, "nccl") == 0) {
                o->backend = SR_GPU_NCCL;
            } else if (strcmp(v, "auto") == 0) {
                o->backend = SR_GPU_AUTO;
            } else {
                fprintf(stderr, "local_reduce: unknown backend '%s'\n", v);
                return -1;
            }
        } else if (strcmp(a, "--ndev") == 0) {
            o->ndev = atoi(v);
        } else if (strcmp(a, "--iters") == 0) {
            o->iters = atoi(v);
        } else if (strcmp(a, "--json") == 0) {
            o->json = v;
        } else if (strcmp(a, "--min-bytes") == 0 || strcmp(a, "--max-bytes") == 0) {
            size_t *dst = strcmp(a, "--min-bytes") == 0 ? &o->min_bytes : &o->max_bytes;
            if (parse_size(v, dst) != 0) {
                fprintf(stderr, "local_reduce: bad size '%s'\n", v);
                return -1;
            }
        } else {
            usage(stderr);
            return -1;
        }
    }
    if (o->min_bytes > o->max_bytes || o->ndev < 0 || o->iters < 0) {
        usage(stderr);
        return -1;
    }
    return 0;
}

/* Iterations when not given: about 1 GiB moved per measurement, 3..200. */
static int
iters_for(const options *o, size_t bytes)
{
    size_t n = ((size_t)1 << 30) / bytes;
    if (o->iters > 0) {
        return o->iters;
    }
    return n < 3 ? 3 : n > 200 ? 200 : (int)n;
}

/* Exactly representable inputs: every sum is exact. */
static float
input(int part, size_t k)
{
    return (float)((int)((k * 7 + (size_t)part * 3) % 13) - 6);
}

static float
expected(const bufs *b, bench_op op, size_t k)
{
    float s = 0;
    if (op == OP_BROADCAST) {
        return input(0, k);
    }
    for (int i = 0; i < b->G; i++) {
        s += input(i, k);
    }
    return s;
}

static int
fail_gpu(const char *what, sr_err rc)
{
    fprintf(stderr, "local_reduce: %s: %s: %s\n", what, sr_errname(rc), sr_errdetail());
    return -1;
}

static void
free_bufs(bufs *b)
{
    for (int i = 0; i < b->G; i++) {
        sr_gpu_free(b->g, i, b->send[i]);
        sr_gpu_free(b->g, i, b->recv[i]);
        sr_gpu_free(b->g, i, b->bc[i]);
    }
    sr_gpu_free(b->g, 0, b->root_out);
    sr_gpu_host_free(b->g, b->stage);
    free(b->msrc);
    free(b->mdst);
    b->msrc = b->mdst = NULL;
    memset(b->send, 0, sizeof(b->send));
    memset(b->recv, 0, sizeof(b->recv));
    memset(b->bc, 0, sizeof(b->bc));
    b->root_out = NULL;
    b->stage = NULL;
}

static int
fill_inputs(bufs *b)
{
    sr_err rc;
    for (int i = 0; i < b->G; i++) {
        for (size_t k = 0; k < b->count; k++) {
            b->stage[k] = input(i, k);
        }
        if ((rc = sr_gpu_copy_from_host(b->g, i, b->send[i], b->stage, b->bytes)) != SR_OK ||
            (rc = sr_gpu_copy_from_host(b->g, i, b->bc[i], b->stage, b->bytes)) != SR_OK) {
            return fail_gpu("fill", rc);
        }
    }
    return 0;
}

static int
alloc_bufs(bufs *b, size_t bytes)
{
    sr_err rc;

    b->bytes = bytes;
    b->count = bytes / sizeof(float);
    for (int i = 0; i < b->G; i++) {
        if ((rc = sr_gpu_alloc(b->g, i, bytes, &b->send[i])) != SR_OK ||
            (rc = sr_gpu_alloc(b->g, i, bytes, &b->recv[i])) != SR_OK ||
            (rc = sr_gpu_alloc(b->g, i, bytes, &b->bc[i])) != SR_OK) {
            return fail_gpu("alloc", rc);
        }
    }
    if ((rc = sr_gpu_alloc(b->g, 0, bytes, &b->root_out)) != SR_OK ||
        (rc = sr_gpu_host_alloc(b->g, bytes, (void **)&b->stage)) != SR_OK) {
        return fail_gpu("alloc", rc);
    }
    return fill_inputs(b);
}

static uint64_t
count_wrong(bufs *b, bench_op op, int part, void *dev)
{
    uint64_t wrong = 0;
    if (sr_gpu_copy_to_host(b->g, part, b->stage, dev, b->bytes) != SR_OK) {
        return b->count;
    }
    for (size_t k = 0; k < b->count; k++) {
        wrong += b->stage[k] != expected(b, op, k);
    }
    return wrong;
}

static uint64_t
verify(bufs *b, bench_op op)
{
    uint64_t wrong = 0;
    switch (op) {
    case OP_REDUCE:
        return count_wrong(b, op, 0, b->root_out);
    case OP_ALLREDUCE:
        for (int i = 0; i < b->G; i++) {
            wrong += count_wrong(b, op, i, b->recv[i]);
        }
        return wrong;
    default:
        for (int i = 0; i < b->G; i++) {
            wrong += count_wrong(b, op, i, b->bc[i]);
        }
        return wrong;
    }
}

static sr_err
call(bufs *b, bench_op op)
{
    switch (op) {
    case OP_REDUCE:
        return sr_gpu_reduce(b->g, b->send, b->root_out, b->count, SR_FLOAT32, SR_GPU_SUM, 0);
    case OP_ALLREDUCE:
        return sr_gpu_allreduce(b->g, b->send, b->recv, b->count, SR_FLOAT32, SR_GPU_SUM);
    default:
        return sr_gpu_broadcast(b->g, b->bc, b->count, SR_FLOAT32, 0);
    }
}

static double
bus_factor(bench_op op, int G)
{
    return op == OP_ALLREDUCE ? 2.0 * (G - 1) / G : 1.0;
}

/* The baseline's bandwidth at this size: memcpy (host), raw ncclAllReduce
 * busbw (nccl; algbw when G = 1, where busbw is 0 by definition). */
static int
baseline(const options *o, bufs *b, int iters, double *bw)
{
    double us = 0;

    if (sr_gpu_backend(b->g) == SR_GPU_NCCL) {
        sr_err rc = sr__gpu_raw_allreduce(b->g, b->send, b->recv, b->count, SR_FLOAT32, 1, &us);
        if (rc == SR_OK) {
            rc = sr__gpu_raw_allreduce(b->g, b->send, b->recv, b->count, SR_FLOAT32, iters, &us);
        }
        if (rc != SR_OK) {
            return fail_gpu("raw ncclAllReduce", rc);
        }
        double alg = (double)b->bytes / (us * 1e3);
        *bw = b->G > 1 ? alg * bus_factor(OP_ALLREDUCE, b->G) : alg;
        return 0;
    }
    (void)o;
    /* Called through a volatile pointer so the compiler cannot drop copies
     * whose destination is overwritten before it is read (the warm-up one
     * in particular, which takes the first-touch page faults). */
    void *(*volatile copy)(void *, const void *, size_t) = memcpy;
    if (b->msrc == NULL) {
        b->msrc = malloc(b->bytes);
        b->mdst = malloc(b->bytes);
        if (b->msrc == NULL || b->mdst == NULL) {
            fprintf(stderr, "local_reduce: out of memory for the memcpy baseline\n");
            return -1;
        }
        memset(b->msrc, 1, b->bytes);
        copy(b->mdst, b->msrc, b->bytes);
    }
    int64_t t0 = sr_clock_now_ns();
    for (int it = 0; it < iters; it++) {
        copy(b->mdst, b->msrc, b->bytes);
    }
    int64_t t1 = sr_clock_now_ns();
    *bw = (double)b->bytes * iters / (double)(t1 - t0);
    return 0;
}

/* Mean microseconds per call over `iters` calls. */
static int
time_op(bufs *b, bench_op op, int iters, double *us)
{
    sr_err  rc;
    int64_t t0 = sr_clock_now_ns(), t1;

    for (int it = 0; it < iters; it++) {
        if ((rc = call(b, op)) != SR_OK) {
            return fail_gpu(OP_NAME[op], rc);
        }
    }
    t1 = sr_clock_now_ns();
    *us = (double)(t1 - t0) / 1e3 / iters;
    return 0;
}

/* One size: a warm-up call of each collective (pages, connections), then
 * ROUNDS rounds of {baseline, reduce, all-reduce, broadcast}, each a timed
 * loop; a collective's time is its best round's mean, the baseline's its
 * best round.  Interleaving keeps a noisy neighbour from landing on one
 * column only.  Then every result is verified. */
static int
measure_size(const options *o, bufs *b, int iters, row out[NOPS], double *base_bw)
{
    double best[NOPS], us, bw;
    int    per = (iters + ROUNDS - 1) / ROUNDS;
    sr_err rc;

    *base_bw = 0;
    for (int op = 0; op < NOPS; op++) {
        best[op] = -1;
        if ((rc = call(b, (bench_op)op)) != SR_OK) {
            return fail_gpu(OP_NAME[op], rc);
        }
    }
    for (int r = 0; r < ROUNDS; r++) {
        if (baseline(o, b, per, &bw) != 0) {
            return -1;
        }
        *base_bw = bw > *base_bw ? bw : *base_bw;
        for (int op = 0; op < NOPS; op++) {
            if (time_op(b, (bench_op)op, per, &us) != 0) {
                return -1;
            }
            best[op] = best[op] < 0 || us < best[op] ? us : best[op];
        }
    }
    for (int op = 0; op < NOPS; op++) {
        row *r = &out[op];
        r->op = (bench_op)op;
        r->bytes = b->bytes;
        r->count = b->count;
        r->iters = per * ROUNDS;
        r->time_us = best[op];
        r->algbw = (double)b->bytes / (r->time_us * 1e3);
        r->busbw = r->algbw * bus_factor((bench_op)op, b->G);
        r->wrong = verify(b, (bench_op)op);
        r->base_bw = -1;
        r->ratio = -1;
    }
    return 0;
}

static void
print_row(const row *r)
{
    char base[32] = "-", ratio[32] = "-";
    if (r->base_bw >= 0) {
        snprintf(base, sizeof(base), "%.2f", r->base_bw);
        snprintf(ratio, sizeof(ratio), "%.2f", r->ratio);
    }
    printf("%10s %12zu %11zu  float    sum    0 %6d %11.1f %8.2f %8.2f %7" PRIu64 " %8s %6s\n",
           OP_NAME[r->op], r->bytes, r->count, r->iters, r->time_us, r->algbw, r->busbw, r->wrong,
           base, ratio);
    fflush(stdout);
}

static void
write_json(const options *o, const sr_gpu *g, const row *rows, size_t n, double summary[NOPS],
           double target, int ok)
{
    FILE *f = fopen(o->json, "w");
    if (f == NULL) {
        perror(o->json);
        return;
    }
    fprintf(f,
            "{\n  \"bench\": \"local_reduce\",\n  \"backend\": \"%s\",\n  \"ndev\": %d,\n"
            "  \"dtype\": \"float32\",\n  \"op\": \"sum\",\n  \"results\": [\n",
            sr_gpu_backend_name(sr_gpu_backend(g)), sr_gpu_ndev(g));
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        fprintf(f,
                "    {\"collective\": \"%s\", \"bytes\": %zu, \"count\": %zu, \"iters\": %d, "
                "\"time_us\": %.3f, \"algbw_gbs\": %.4f, \"busbw_gbs\": %.4f, \"wrong\": %" PRIu64,
                OP_NAME[r->op], r->bytes, r->count, r->iters, r->time_us, r->algbw, r->busbw,
                r->wrong);
        if (r->base_bw >= 0) {
            fprintf(f, ", \"baseline_gbs\": %.4f, \"ratio\": %.4f", r->base_bw, r->ratio);
        }
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
    }
    fprintf(f, "  ],\n  \"baseline\": \"%s\",\n  \"target_ratio\": %.2f,\n  \"ratio\": {",
            sr_gpu_backend(g) == SR_GPU_NCCL ? "ncclAllReduce" : "memcpy", target);
    for (int op = 0; op < NOPS; op++) {
        fprintf(f, "%s\"%s\": %.4f", op ? ", " : "", OP_NAME[op], summary[op]);
    }
    fprintf(f, "},\n  \"ok\": %s\n}\n", ok ? "true" : "false");
    fclose(f);
}

int
main(int argc, char **argv)
{
    options        o = {.backend = SR_GPU_AUTO, .min_bytes = 4 << 10, .max_bytes = 256 * MIB};
    sr_gpu_options go = {0};
    sr_gpu        *g = NULL;
    bufs           b;
    row           *rows = NULL;
    size_t         nrows = 0, cap = 0;
    uint64_t       wrong = 0;
    double         summary[NOPS], bus_sum = 0, base_peak = 0, ours_peak = 0, target;
    int            nsizes = 0, failed = 0, met;
    sr_err         rc;

    if (parse_args(argc, argv, &o) != 0) {
        return 2;
    }
    go.backend = o.backend;
    go.ndev = o.ndev;
    if (o.ndev == 0 && o.backend != SR_GPU_NCCL) {
        int have = 0;
        (void)sr_gpu_device_count(&have);
        go.ndev = o.backend == SR_GPU_HOST || have == 0 ? 2 : 0;
    }
    if ((rc = sr_gpu_open(&g, &go)) != SR_OK) {
        fail_gpu("sr_gpu_open", rc);
        return 2;
    }
    memset(&b, 0, sizeof(b));
    b.g = g;
    b.G = sr_gpu_ndev(g);
    target = sr_gpu_backend(g) == SR_GPU_NCCL ? NCCL_TARGET : HOST_TARGET;
    printf("# local_reduce: backend=%s ndev=%d dtype=float32 op=sum root=0 iters=%s\n",
           sr_gpu_backend_name(sr_gpu_backend(g)), b.G, o.iters ? "fixed" : "~1GiB/size (3..200)");
    printf("# time(us): mean per call (each call waits for completion) of the best of %d "
           "interleaved rounds\n# algbw = bytes/time, GB/s = 1e9 B/s; busbw as nccl-tests: "
           "allreduce algbw*2(n-1)/n, reduce and broadcast algbw\n",
           ROUNDS);
    printf("# baseline (base_bw, same run): %s; ratio = busbw / base_bw%s\n",
           sr_gpu_backend(g) == SR_GPU_NCCL ? "ncclAllReduce called directly (allreduce rows)"
                                            : "single-thread memcpy of the same size",
           b.G == 1 ? " (G = 1: algbw, busbw is 0)" : "");
    printf("#\n# %8s %12s %11s %6s %6s %4s %6s %11s %8s %8s %7s %8s %6s\n", "collective", "size(B)",
           "count", "type", "redop", "root", "iters", "time(us)", "algbw", "busbw", "#wrong",
           "base_bw", "ratio");
    for (int op = 0; op < NOPS; op++) {
        summary[op] = -1;
    }
    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 4) {
        int    iters = iters_for(&o, bytes), is_nccl = sr_gpu_backend(g) == SR_GPU_NCCL;
        double base_bw = -1;
        row   *nr;
        if (nrows + NOPS > cap) {
            cap = cap ? cap * 2 : 32;
            if ((nr = realloc(rows, cap * sizeof(*rows))) == NULL) {
                fprintf(stderr, "local_reduce: out of memory\n");
                failed = 1;
                break;
            }
            rows = nr;
        }
        if (alloc_bufs(&b, bytes) != 0 ||
            measure_size(&o, &b, iters, &rows[nrows], &base_bw) != 0) {
            failed = 1;
            free_bufs(&b);
            break;
        }
        free_bufs(&b);
        nsizes++;
        for (int op = 0; op < NOPS; op++) {
            row *r = &rows[nrows++];
            if (!is_nccl || op == OP_ALLREDUCE) {
                double ours = b.G == 1 && is_nccl ? r->algbw : r->busbw;
                r->base_bw = base_bw;
                r->ratio = base_bw > 0 ? ours / base_bw : 0;
                if (is_nccl) {
                    ours_peak = ours > ours_peak ? ours : ours_peak;
                    base_peak = base_bw > base_peak ? base_bw : base_peak;
                }
                if (!is_nccl && bytes >= RATIO_FROM_BYTES &&
                    (summary[op] < 0 || r->ratio < summary[op])) {
                    summary[op] = r->ratio;
                }
            }
            wrong += r->wrong;
            bus_sum += r->busbw;
            print_row(r);
        }
    }
    if (sr_gpu_backend(g) == SR_GPU_NCCL) {
        summary[OP_ALLREDUCE] = base_peak > 0 ? ours_peak / base_peak : -1;
    }
    printf("# Out of bounds values : %" PRIu64 " %s\n", wrong, wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %.3f GB/s\n", nrows ? bus_sum / (double)nrows : 0.0);
    met = 1;
    if (sr_gpu_backend(g) == SR_GPU_NCCL) {
        met = summary[OP_ALLREDUCE] >= target;
        printf("# allreduce peak vs ncclAllReduce peak: %.2f (target >= %.2f): %s\n",
               summary[OP_ALLREDUCE], target,
               summary[OP_ALLREDUCE] < 0 ? "no data"
               : met                     ? "met"
                                         : "NOT met");
    } else {
        printf("# busbw / memcpy bw, minimum over sizes >= 16 MiB (target >= %.2f):", target);
        for (int op = 0; op < NOPS; op++) {
            if (summary[op] < 0) {
                printf(" %s -", OP_NAME[op]);
                continue;
            }
            met = met && summary[op] >= target;
            printf(" %s %.2f", OP_NAME[op], summary[op]);
        }
        printf(": %s\n", summary[OP_REDUCE] < 0 ? "no sizes >= 16 MiB" : met ? "met" : "NOT met");
    }
    int ok = !failed && wrong == 0 && nsizes > 0 && (!o.enforce || met);
    printf("# %s\n", ok ? "OK" : "FAILED");
    if (o.json != NULL) {
        write_json(&o, g, rows, nrows, summary, target, ok);
    }
    free(rows);
    sr_gpu_close(g);
    if (failed || wrong != 0 || nsizes == 0) {
        return 1;
    }
    return o.enforce && !met ? 3 : 0;
}
