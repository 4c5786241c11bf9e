/*
 * Shared gpu/ suite (see gpu_suite.h).  Inputs are small integers chosen so
 * every result is exact in every dtype: sums of values in [-9, 9]; products
 * of values in {1, 2, -1}; averages of G x s for s in [-5, 5] (so each
 * input times 1/G is exactly s, whatever the rounding of 1/G).  Results are
 * compared byte for byte with the reference.
 */
#include "sr_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "gpu/gpu_int.h"
#include "gpu_suite.h"

#define NG   4
#define MAXG 8

static const int         Gs[NG] = {1, 2, 3, 8};
static const sr_dtype    DTYPES[] = {SR_FLOAT32, SR_FLOAT64, SR_INT32, SR_INT64};
static const sr_gpu_op   OPS[] = {SR_GPU_SUM, SR_GPU_PROD, SR_GPU_MIN, SR_GPU_MAX};
static const size_t      SIZES[] = {0, 1, 7, 33, 1001, 20001};
static const char *const OP_NAMES[] = {"?", "sum", "prod", "min", "max"};
static const char *const COLL_NAMES[] = {"?", "reduce", "broadcast", "allreduce", "average"};

/* Suite handles: fusion threshold 256 B (so 1001 elements go direct and
 * batches fuse), a 4 KiB fusion buffer (so big batches need several
 * stages). */
#define SUITE_THRESHOLD   256
#define SUITE_FUSE_BUFFER 4096

typedef struct {
    sr_gpu_backend_kind backend;
    int                 devices; /* visible GPUs (nccl) */
    sr_gpu             *g[NG];   /* NULL: this G is not available */
    char                why[NG][256];
} suite;

/* One tensor of a test: its inputs, expected result and buffers. */
typedef struct {
    sr_gpu_coll   coll;
    sr_gpu_op     op;
    int           root;
    int           in_place;
    sr_dtype      dt;
    size_t        count;
    int           salt;
    void         *send[MAXG];
    void         *recv[MAXG];
    void         *root_out;
    void         *in[MAXG]; /* host copies of the inputs */
    void         *exp;      /* host copy of the expected result */
    sr_gpu_tensor t;
} tcase;

int
gpu_suite_device_count(void)
{
    int n = 0;
    (void)sr_gpu_device_count(&n);
    return n;
}

void
gpu_suite_require_gpus(int need)
{
    int         have = gpu_suite_device_count();
    const char *req = getenv("SR_TEST_REQUIRE_GPU");

    if (have >= need) {
        return;
    }
    if (have == 0 && req != NULL && strcmp(req, "1") == 0) {
        fail_msg("no CUDA GPU visible, and SR_TEST_REQUIRE_GPU=1 forbids skipping");
    }
    print_message("  skipped: needs %d CUDA GPU(s), %d visible\n", need, have);
    skip();
}

/* ---- values ---------------------------------------------------------------- */

static int64_t
gen(const tcase *c, int part, size_t k, int G)
{
    static const int64_t pm[3] = {1, 2, -1};
    size_t               x = k + (size_t)c->salt * 17;

    switch (c->coll) {
    case SR_GPU_BROADCAST:
        return (int64_t)((x * 31 + (size_t)part * 7) % 1001) - 500;
    case SR_GPU_AVERAGE:
        return (int64_t)G * ((int64_t)((x * 3 + (size_t)part * 5) % 11) - 5);
    default:
        if (c->op == SR_GPU_PROD) {
            return pm[(x + 2 * (size_t)part) % 3];
        }
        return (int64_t)((x * 7 + (size_t)part * 13) % 19) - 9;
    }
}

static void
put(sr_dtype dt, void *base, size_t k, int64_t v)
{
    switch (dt) {
    case SR_FLOAT32:
        ((float *)base)[k] = (float)v;
        break;
    case SR_FLOAT64:
        ((double *)base)[k] = (double)v;
        break;
    case SR_INT32:
        ((int32_t *)base)[k] = (int32_t)v;
        break;
    default:
        ((int64_t *)base)[k] = v;
        break;
    }
}

static double
get(sr_dtype dt, const void *base, size_t k)
{
    switch (dt) {
    case SR_FLOAT32:
        return ((const float *)base)[k];
    case SR_FLOAT64:
        return ((const double *)base)[k];
    case SR_INT32:
        return ((const int32_t *)base)[k];
    default:
        return (double)((const int64_t *)base)[k];
    }
}

static int64_t
reference(const tcase *c, size_t k, int G)
{
    int64_t acc = c->coll == SR_GPU_AVERAGE ? 0 : gen(c, 0, k, G);

    if (c->coll == SR_GPU_BROADCAST) {
        return gen(c, c->root, k, G);
    }
    if (c->coll == SR_GPU_AVERAGE) {
        for (int i = 0; i < G; i++) {
            acc += gen(c, i, k, G) / G;
        }
        return acc;
    }
    for (int i = 1; i < G; i++) {
        int64_t v = gen(c, i, k, G);
        switch (c->op) {
        case SR_GPU_SUM:
            acc += v;
            break;
        case SR_GPU_PROD:
            acc *= v;
            break;
        case SR_GPU_MIN:
            acc = v < acc ? v : acc;
            break;
        default:
            acc = v > acc ? v : acc;
            break;
        }
    }
    return acc;
}

/* ---- buffers ---------------------------------------------------------------- */

static size_t
tbytes(const tcase *c)
{
    return c->count * sr_dtype_size(c->dt);
}

static void *
xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

/* Allocate and fill c's buffers on g; build c->t for sr_gpu_group. */
static void
prep(sr_gpu *g, tcase *c)
{
    int    G = sr_gpu_ndev(g);
    size_t bytes = tbytes(c);

    assert_true(G <= MAXG);
    c->exp = xmalloc(bytes);
    for (size_t k = 0; k < c->count; k++) {
        put(c->dt, c->exp, k, reference(c, k, G));
    }
    for (int i = 0; i < G; i++) {
        c->in[i] = xmalloc(bytes);
        for (size_t k = 0; k < c->count; k++) {
            put(c->dt, c->in[i], k, gen(c, i, k, G));
        }
        assert_sr_ok(sr_gpu_alloc(g, i, bytes, &c->send[i]));
        assert_sr_ok(sr_gpu_copy_from_host(g, i, c->send[i], c->in[i], bytes));
        c->recv[i] = NULL;
        if (c->coll == SR_GPU_ALLREDUCE && !c->in_place) {
            assert_sr_ok(sr_gpu_alloc(g, i, bytes, &c->recv[i]));
        }
    }
    c->root_out = NULL;
    if (c->coll == SR_GPU_REDUCE || c->coll == SR_GPU_AVERAGE) {
        if (c->in_place) {
            c->root_out = c->send[c->root];
        } else {
            assert_sr_ok(sr_gpu_alloc(g, c->root, bytes, &c->root_out));
        }
    }
    c->t = (sr_gpu_tensor){.bufs = c->send,
                           .out = c->coll == SR_GPU_ALLREDUCE && !c->in_place ? c->recv : NULL,
                           .root_out = c->root_out,
                           .count = c->count,
                           .dtype = c->dt};
}

static void
release(sr_gpu *g, tcase *c)
{
    int G = sr_gpu_ndev(g);

    for (int i = 0; i < G; i++) {
        sr_gpu_free(g, i, c->send[i]);
        sr_gpu_free(g, i, c->recv[i]);
        free(c->in[i]);
    }
    if (c->root_out != NULL && !c->in_place) {
        sr_gpu_free(g, c->root, c->root_out);
    }
    free(c->exp);
}

static void
describe(const tcase *c, int G, char *buf, size_t len)
{
    snprintf(buf, len, "%s G=%d dtype=%s op=%s count=%zu root=%d in_place=%d salt=%d",
             COLL_NAMES[c->coll], G, sr_dtype_name(c->dt), OP_NAMES[c->op], c->count, c->root,
             c->in_place, c->salt);
}

/* Read `dev` of participant part and compare it with `want`, exactly. */
static void
expect_buf(sr_gpu *g, const tcase *c, int part, const void *dev, const void *want, const char *what)
{
    size_t bytes = tbytes(c);
    void  *got;
    char   ctx[192];

    if (bytes == 0) {
        return;
    }
    got = xmalloc(bytes);
    assert_sr_ok(sr_gpu_copy_to_host(g, part, got, dev, bytes));
    if (memcmp(got, want, bytes) != 0) {
        size_t k = 0;
        while (get(c->dt, got, k) == get(c->dt, want, k) &&
               memcmp((char *)got + k * sr_dtype_size(c->dt),
                      (const char *)want + k * sr_dtype_size(c->dt), sr_dtype_size(c->dt)) == 0) {
            k++;
        }
        describe(c, sr_gpu_ndev(g), ctx, sizeof(ctx));
        fail_msg("%s: participant %d %s[%zu] = %.17g, expected %.17g", ctx, part, what, k,
                 get(c->dt, got, k), get(c->dt, want, k));
    }
    free(got);
}

/* Check the results of c after its collective ran. */
static void
verify(sr_gpu *g, const tcase *c)
{
    int G = sr_gpu_ndev(g);

    switch (c->coll) {
    case SR_GPU_BROADCAST:
        for (int i = 0; i < G; i++) {
            expect_buf(g, c, i, c->send[i], c->exp, "buffer");
        }
        return;
    case SR_GPU_ALLREDUCE:
        for (int i = 0; i < G; i++) {
            expect_buf(g, c, i, c->in_place ? c->send[i] : c->recv[i], c->exp, "result");
            if (!c->in_place) {
                expect_buf(g, c, i, c->send[i], c->in[i], "input (must be unchanged)");
            }
        }
        return;
    default:
        expect_buf(g, c, c->root, c->root_out, c->exp, "result");
        for (int i = 0; i < G; i++) {
            if (!(c->in_place && i == c->root)) {
                expect_buf(g, c, i, c->send[i], c->in[i], "input (must be unchanged)");
            }
        }
        return;
    }
}

static void
run_single(sr_gpu *g, tcase *c)
{
    switch (c->coll) {
    case SR_GPU_REDUCE:
        assert_sr_ok(sr_gpu_reduce(g, c->send, c->root_out, c->count, c->dt, c->op, c->root));
        break;
    case SR_GPU_BROADCAST:
        assert_sr_ok(sr_gpu_broadcast(g, c->send, c->count, c->dt, c->root));
        break;
    case SR_GPU_ALLREDUCE:
        assert_sr_ok(
            sr_gpu_allreduce(g, c->send, c->in_place ? NULL : c->recv, c->count, c->dt, c->op));
        break;
    default:
        assert_sr_ok(sr_gpu_average(g, c->send, c->root_out, c->count, c->dt, c->root));
        break;
    }
}

static void
one_case(sr_gpu *g, tcase c)
{
    prep(g, &c);
    run_single(g, &c);
    verify(g, &c);
    release(g, &c);
}

/* ---- suite plumbing ------------------------------------------------------------ */

static sr_gpu *
open_handle(const suite *s, int G, size_t threshold, size_t buffer, int timeout_ms)
{
    sr_gpu_options o = {.backend = s->backend,
                        .ndev = G,
                        .timeout_ms = timeout_ms,
                        .fuse_threshold_bytes = threshold,
                        .fuse_buffer_bytes = buffer};
    sr_gpu        *g = NULL;

    assert_sr_ok(sr_gpu_open(&g, &o));
    assert_int_equal(sr_gpu_ndev(g), G);
    assert_int_equal(sr_gpu_backend(g), s->backend);
    return g;
}

/* The group's state: cmocka hands it to every test as *state. */
static suite the_suite;

static int
suite_setup(void **state)
{
    suite *s = &the_suite;

    *state = s;
    s->devices = gpu_suite_device_count();
    for (int gi = 0; gi < NG; gi++) {
        sr_gpu_options o = {.backend = s->backend,
                            .ndev = Gs[gi],
                            .timeout_ms = 30000,
                            .fuse_threshold_bytes = SUITE_THRESHOLD,
                            .fuse_buffer_bytes = SUITE_FUSE_BUFFER};
        if (s->backend == SR_GPU_NCCL && s->devices < Gs[gi]) {
            snprintf(s->why[gi], sizeof(s->why[gi]), "needs %d CUDA GPUs, %d visible", Gs[gi],
                     s->devices);
            continue;
        }
        if (sr_gpu_open(&s->g[gi], &o) != SR_OK) {
            snprintf(s->why[gi], sizeof(s->why[gi]), "open failed: %s", sr_errdetail());
            s->g[gi] = NULL;
            if (s->backend == SR_GPU_HOST) {
                print_error("%s\n", s->why[gi]);
                return -1;
            }
        }
    }
    return 0;
}

static int
suite_teardown(void **state)
{
    suite *s = *state;
    for (int gi = 0; gi < NG; gi++) {
        sr_gpu_close(s->g[gi]);
        s->g[gi] = NULL;
    }
    return 0;
}

/* Start of every table test: which G can run; the others print why. */
static int
usable(suite *s, int gi)
{
    if (s->g[gi] != NULL) {
        return 1;
    }
    if (s->backend == SR_GPU_HOST || s->devices > 0) {
        print_message("  skipped G=%d: %s\n", Gs[gi], s->why[gi]);
    }
    return 0;
}

/* End of every table test: a test where no G could run is a visible skip,
 * never a silent pass. */
static void
finish(int ran)
{
    if (ran == 0) {
        gpu_suite_require_gpus(1);
        print_message("  skipped: no participant count of this suite could run\n");
        skip();
    }
}

/* Largest available G >= min_g, or -1. */
static int
largest(suite *s, int min_g)
{
    for (int gi = NG - 1; gi >= 0; gi--) {
        if (s->g[gi] != NULL && Gs[gi] >= min_g) {
            return gi;
        }
    }
    return -1;
}

/* ---- table tests ------------------------------------------------------------------ */

static void
test_gpu_reduce_matches_reference(void **state)
{
    suite *s = *state;
    int    ran = 0;

    for (int gi = 0; gi < NG; gi++) {
        if (!usable(s, gi)) {
            continue;
        }
        ran++;
        for (size_t d = 0; d < 4; d++) {
            for (size_t o = 0; o < 4; o++) {
                for (size_t z = 0; z < sizeof(SIZES) / sizeof(SIZES[0]); z++) {
                    for (int r = 0; r < 2; r++) {
                        tcase c = {.coll = SR_GPU_REDUCE,
                                   .op = OPS[o],
                                   .dt = DTYPES[d],
                                   .count = SIZES[z],
                                   .root = r ? Gs[gi] - 1 : 0,
                                   .in_place = (int)(z % 2)};
                        one_case(s->g[gi], c);
                    }
                }
            }
        }
    }
    finish(ran);
}

static void
test_gpu_allreduce_matches_reference(void **state)
{
    suite *s = *state;
    int    ran = 0;

    for (int gi = 0; gi < NG; gi++) {
        if (!usable(s, gi)) {
            continue;
        }
        ran++;
        for (size_t d = 0; d < 4; d++) {
            for (size_t o = 0; o < 4; o++) {
                for (size_t z = 0; z < sizeof(SIZES) / sizeof(SIZES[0]); z++) {
                    for (int ip = 0; ip < 2; ip++) {
                        tcase c = {.coll = SR_GPU_ALLREDUCE,
                                   .op = OPS[o],
                                   .dt = DTYPES[d],
                                   .count = SIZES[z],
                                   .in_place = ip};
                        one_case(s->g[gi], c);
                    }
                }
            }
        }
    }
    finish(ran);
}

static void
test_gpu_broadcast_copies_root_everywhere(void **state)
{
    suite *s = *state;
    int    ran = 0;

    for (int gi = 0; gi < NG; gi++) {
        if (!usable(s, gi)) {
            continue;
        }
        ran++;
        for (size_t d = 0; d < 4; d++) {
            for (size_t z = 0; z < sizeof(SIZES) / sizeof(SIZES[0]); z++) {
                for (int root = 0; root < Gs[gi]; root++) {
                    tcase c = {.coll = SR_GPU_BROADCAST,
                               .op = SR_GPU_SUM,
                               .dt = DTYPES[d],
                               .count = SIZES[z],
                               .root = root};
                    one_case(s->g[gi], c);
                }
            }
        }
    }
    finish(ran);
}

static void
test_gpu_average_is_sum_over_g_on_root(void **state)
{
    suite *s = *state;
    int    ran = 0;

    for (int gi = 0; gi < NG; gi++) {
        if (!usable(s, gi)) {
            continue;
        }
        ran++;
        for (size_t d = 0; d < 4; d++) {
            for (size_t z = 0; z < sizeof(SIZES) / sizeof(SIZES[0]); z++) {
                for (int r = 0; r < 2; r++) {
                    tcase c = {.coll = SR_GPU_AVERAGE,
                               .op = SR_GPU_SUM,
                               .dt = DTYPES[d],
                               .count = SIZES[z],
                               .root = r ? Gs[gi] - 1 : 0,
                               .in_place = (int)(z % 2)};
                    one_case(s->g[gi], c);
                }
            }
        }
    }
    finish(ran);
}

/* Reduce and broadcast are adjoint: broadcasting x and reducing the copies
 * with sum gives G x. */
static void
test_gpu_broadcast_then_reduce_sum_is_g_times_input(void **state)
{
    suite *s = *state;
    int    ran = 0;

    for (int gi = 0; gi < NG; gi++) {
        if (!usable(s, gi)) {
            continue;
        }
        ran++;
        sr_gpu *g = s->g[gi];
        int     G = Gs[gi];
        for (size_t d = 0; d < 4; d++) {
            for (size_t z = 0; z < sizeof(SIZES) / sizeof(SIZES[0]); z++) {
                int   root = (int)(z % (size_t)G);
                tcase c = {.coll = SR_GPU_BROADCAST,
                           .op = SR_GPU_SUM,
                           .dt = DTYPES[d],
                           .count = SIZES[z],
                           .root = root};
                void *sum = NULL;
                prep(g, &c);
                assert_sr_ok(sr_gpu_alloc(g, root, tbytes(&c), &sum));
                assert_sr_ok(sr_gpu_broadcast(g, c.send, c.count, c.dt, root));
                assert_sr_ok(sr_gpu_reduce(g, c.send, sum, c.count, c.dt, SR_GPU_SUM, root));
                for (size_t k = 0; k < c.count; k++) {
                    put(c.dt, c.exp, k, (int64_t)G * gen(&c, root, k, G));
                }
                expect_buf(g, &c, root, sum, c.exp, "G x input");
                sr_gpu_free(g, root, sum);
                release(g, &c);
            }
        }
    }
    finish(ran);
}

/* Collectives of 4 MiB and more write their outputs with non-temporal
 * stores on the host backend; this covers that path with outputs that start
 * off a 16-byte boundary. */
static void
test_gpu_large_tensors_match_reference(void **state)
{
    suite *s = *state;
    int    ran = 0;

    for (int gi = 1; gi < 3; gi++) { /* G = 2 and 3 */
        if (!usable(s, gi)) {
            continue;
        }
        ran++;
        sr_gpu *g = s->g[gi];
        for (size_t ci = 1; ci <= 4; ci++) {
            for (int ip = 0; ip < 2; ip++) {
                one_case(g, (tcase){.coll = (sr_gpu_coll)ci,
                                    .op = SR_GPU_SUM,
                                    .root = 1,
                                    .dt = ip ? SR_FLOAT64 : SR_FLOAT32,
                                    .count = ((size_t)1 << (ip ? 19 : 20)) + 3,
                                    .in_place = ip});
            }
        }
        /* Outputs 4 bytes past an aligned start. */
        tcase  c = {.coll = SR_GPU_ALLREDUCE,
                    .op = SR_GPU_MAX,
                    .dt = SR_INT32,
                    .count = ((size_t)1 << 20) + 5,
                    .in_place = 1};
        void  *raw[MAXG];
        size_t bytes = c.count * 4;
        prep(g, &c);
        for (int i = 0; i < Gs[gi]; i++) {
            assert_sr_ok(sr_gpu_alloc(g, i, bytes + 64, &raw[i]));
            c.recv[i] = (char *)raw[i] + 4;
        }
        assert_sr_ok(sr_gpu_allreduce(g, c.send, c.recv, c.count, c.dt, c.op));
        c.in_place = 0;
        verify(g, &c);
        for (int i = 0; i < Gs[gi]; i++) {
            sr_gpu_free(g, i, raw[i]);
            c.recv[i] = NULL;
        }
        release(g, &c);
    }
    finish(ran);
}

/* ---- batches and fusion ---------------------------------------------------------- */

/* A batch mixing every dtype, zero-length tensors and tensors above the
 * threshold; returns the number of tensors under the threshold. */
static size_t
make_batch(tcase *cs, size_t n, sr_gpu_coll coll, sr_gpu_op op, int root, int big_every)
{
    size_t small = 0;

    for (size_t k = 0; k < n; k++) {
        tcase *c = &cs[k];
        memset(c, 0, sizeof(*c));
        c->coll = coll;
        c->op = op;
        c->root = root;
        c->dt = DTYPES[k % 4];
        c->count = 1 + (k * 7) % 29; /* <= 29 x 8 = 232 bytes < 256 */
        c->salt = (int)k;
        c->in_place = (int)(k % 3 == 1);
        if (k % 37 == 5) {
            c->count = 0;
        } else if (big_every > 0 && k % (size_t)big_every == 3) {
            c->count = 1001;
        }
        small += c->count > 0 && c->count * sr_dtype_size(c->dt) < SUITE_THRESHOLD;
    }
    return small;
}

static void
run_batch(sr_gpu *g, tcase *cs, size_t n, sr_gpu_coll coll, sr_gpu_op op, int root)
{
    sr_gpu_tensor *ts = xmalloc(n * sizeof(*ts));

    for (size_t k = 0; k < n; k++) {
        prep(g, &cs[k]);
        ts[k] = cs[k].t;
    }
    assert_sr_ok(sr_gpu_group(g, coll, ts, n, op, root));
    for (size_t k = 0; k < n; k++) {
        verify(g, &cs[k]);
        release(g, &cs[k]);
    }
    free(ts);
}

static void
test_gpu_group_fuses_small_tensors_into_one_launch(void **state)
{
    suite *s = *state;
    int    gi = largest(s, 2);
    tcase  cs[200];

    if (gi < 0) {
        print_message("  skipped: needs G >= 2 (%s)\n", s->why[1]);
        gpu_suite_require_gpus(2);
        skip();
    }
    int     G = Gs[gi];
    sr_gpu *g = open_handle(s, G, SUITE_THRESHOLD, (size_t)1 << 20, 30000);
    for (size_t ci = 1; ci <= 4; ci++) {
        sr_gpu_coll  coll = (sr_gpu_coll)ci;
        sr_gpu_stats a, b;

        /* 200 float32 tensors under the threshold: one collective. */
        for (size_t k = 0; k < 200; k++) {
            memset(&cs[k], 0, sizeof(cs[k]));
            cs[k] = (tcase){.coll = coll,
                            .op = SR_GPU_SUM,
                            .root = G - 1,
                            .dt = SR_FLOAT32,
                            .count = 1 + k % 40,
                            .salt = (int)k};
        }
        assert_sr_ok(sr_gpu_stats_get(g, &a));
        run_batch(g, cs, 200, coll, SR_GPU_SUM, G - 1);
        assert_sr_ok(sr_gpu_stats_get(g, &b));
        assert_int_equal(b.launches - a.launches, 1);
        assert_int_equal(b.groups - a.groups, 1);
        assert_int_equal(b.fused_tensors - a.fused_tensors, 200);
        assert_int_equal(b.tensors - a.tensors, 200);

        /* Every dtype, zero-length and big tensors: one collective per
         * dtype plus one per big tensor, still one group. */
        size_t small = make_batch(cs, 160, coll, SR_GPU_MAX, 0, 40);
        size_t big = 0;
        for (size_t k = 0; k < 160; k++) {
            big += cs[k].count == 1001;
        }
        assert_sr_ok(sr_gpu_stats_get(g, &a));
        run_batch(g, cs, 160, coll, SR_GPU_MAX, 0);
        assert_sr_ok(sr_gpu_stats_get(g, &b));
        assert_int_equal(b.launches - a.launches, 4 + big);
        assert_int_equal(b.groups - a.groups, 1);
        assert_int_equal(b.fused_tensors - a.fused_tensors, small);
    }
    sr_gpu_close(g);
}

static void
test_gpu_group_overflowing_fusion_buffer_uses_stages(void **state)
{
    suite *s = *state;
    int    ran = 0;
    tcase  cs[150];

    for (int gi = 0; gi < NG; gi++) {
        if (!usable(s, gi)) {
            continue;
        }
        ran++;
        for (size_t ci = 1; ci <= 4; ci++) {
            for (size_t o = 0; o < 4; o++) {
                sr_gpu_stats a, b;
                sr_gpu_coll  coll = (sr_gpu_coll)ci;
                int          root = (int)(o % (size_t)Gs[gi]);
                make_batch(cs, 150, coll, OPS[o], root, 50);
                assert_sr_ok(sr_gpu_stats_get(s->g[gi], &a));
                run_batch(s->g[gi], cs, 150, coll, OPS[o], root);
                assert_sr_ok(sr_gpu_stats_get(s->g[gi], &b));
                if (Gs[gi] == 1) {
                    assert_int_equal(b.launches, a.launches);
                } else {
                    /* ~15 KiB of small tensors through a 4 KiB buffer. */
                    assert_true(b.groups - a.groups >= 4);
                    assert_true(b.launches - a.launches >= b.groups - a.groups);
                }
            }
        }
    }
    finish(ran);
}

/* ---- G = 1, zero length, bad arguments ------------------------------------------------ */

static void
test_gpu_single_device_launches_nothing(void **state)
{
    suite       *s = *state;
    sr_gpu      *g = s->g[0];
    sr_gpu_stats st;
    tcase        cs[40];

    if (!usable(s, 0)) {
        finish(0);
    }
    for (size_t ci = 1; ci <= 4; ci++) {
        one_case(
            g, (tcase){.coll = (sr_gpu_coll)ci, .op = SR_GPU_SUM, .dt = SR_FLOAT32, .count = 1001});
        one_case(g, (tcase){.coll = (sr_gpu_coll)ci,
                            .op = SR_GPU_PROD,
                            .dt = SR_INT64,
                            .count = 33,
                            .in_place = 1});
        make_batch(cs, 40, (sr_gpu_coll)ci, SR_GPU_SUM, 0, 10);
        run_batch(g, cs, 40, (sr_gpu_coll)ci, SR_GPU_SUM, 0);
    }
    assert_sr_ok(sr_gpu_stats_get(g, &st));
    assert_true(st.calls >= 12);
    assert_int_equal(st.launches, 0);
    assert_int_equal(st.groups, 0);
}

static void
test_gpu_zero_length_with_null_buffers_does_nothing(void **state)
{
    suite *s = *state;
    int    ran = 0;

    for (int gi = 0; gi < NG; gi++) {
        if (!usable(s, gi)) {
            continue;
        }
        ran++;
        sr_gpu      *g = s->g[gi];
        sr_gpu_stats a, b;
        void        *nulls[MAXG] = {0};
        assert_sr_ok(sr_gpu_stats_get(g, &a));
        assert_sr_ok(sr_gpu_reduce(g, nulls, NULL, 0, SR_FLOAT32, SR_GPU_SUM, 0));
        assert_sr_ok(sr_gpu_reduce(g, NULL, NULL, 0, SR_INT64, SR_GPU_MIN, 0));
        assert_sr_ok(sr_gpu_broadcast(g, nulls, 0, SR_FLOAT64, 0));
        assert_sr_ok(sr_gpu_allreduce(g, nulls, NULL, 0, SR_INT32, SR_GPU_MAX));
        assert_sr_ok(sr_gpu_average(g, nulls, NULL, 0, SR_FLOAT32, 0));
        assert_sr_ok(sr_gpu_group(g, SR_GPU_ALLREDUCE, NULL, 0, SR_GPU_SUM, 0));
        assert_sr_ok(sr_gpu_copy_to_host(g, 0, NULL, NULL, 0));
        assert_sr_ok(sr_gpu_stats_get(g, &b));
        assert_int_equal(b.launches, a.launches);
        assert_int_equal(b.calls - a.calls, 6);
    }
    finish(ran);
}

static void
expect_detail(const char *needle)
{
    if (strstr(sr_errdetail(), needle) == NULL) {
        fail_msg("detail \"%s\" does not mention \"%s\"", sr_errdetail(), needle);
    }
}

static void
test_gpu_bad_arguments_are_einval_with_detail(void **state)
{
    suite *s = *state;
    int    gi = largest(s, 1);
    char   who[32];
    tcase  c = {.coll = SR_GPU_REDUCE, .op = SR_GPU_SUM, .dt = SR_FLOAT32, .count = 5};

    if (gi < 0) {
        finish(0);
    }
    sr_gpu *g = s->g[gi];
    int     G = Gs[gi];
    prep(g, &c);

    assert_sr_err(sr_gpu_reduce(g, c.send, c.root_out, 5, SR_FLOAT32, SR_GPU_SUM, G), SR_EINVAL);
    expect_detail("root");
    assert_sr_err(sr_gpu_broadcast(g, c.send, 5, SR_FLOAT32, -1), SR_EINVAL);
    expect_detail("root -1");
    assert_sr_err(sr_gpu_average(g, c.send, c.root_out, 5, SR_FLOAT32, G + 3), SR_EINVAL);
    expect_detail("root");

    /* A NULL buffer: the detail names the participant. */
    void *saved = c.send[G - 1];
    c.send[G - 1] = NULL;
    assert_sr_err(sr_gpu_allreduce(g, c.send, NULL, 5, SR_FLOAT32, SR_GPU_SUM), SR_EINVAL);
    snprintf(who, sizeof(who), "participant %d", G - 1);
    expect_detail(who);
    expect_detail("NULL");
    assert_non_null(strstr(sr_gpu_error(g), who));
    c.send[G - 1] = saved;
    assert_sr_err(sr_gpu_reduce(g, c.send, NULL, 5, SR_FLOAT32, SR_GPU_SUM, 0), SR_EINVAL);
    expect_detail("participant 0");
    expect_detail("result buffer");
    assert_sr_err(sr_gpu_reduce(g, NULL, c.root_out, 5, SR_FLOAT32, SR_GPU_SUM, 0), SR_EINVAL);
    expect_detail("array is NULL");

    assert_sr_err(sr_gpu_reduce(g, c.send, c.root_out, 5, (sr_dtype)99, SR_GPU_SUM, 0), SR_EINVAL);
    expect_detail("unknown dtype 99");
    assert_sr_err(sr_gpu_allreduce(g, c.send, NULL, 5, (sr_dtype)0, SR_GPU_SUM), SR_EINVAL);
    expect_detail("unknown dtype");
    assert_sr_err(sr_gpu_reduce(g, c.send, c.root_out, 5, SR_FLOAT32, (sr_gpu_op)0, 0), SR_EINVAL);
    expect_detail("unknown reduction op 0");
    assert_sr_err(sr_gpu_allreduce(g, c.send, NULL, 5, SR_FLOAT32, (sr_gpu_op)9), SR_EINVAL);
    expect_detail("unknown reduction op 9");
    assert_sr_err(sr_gpu_group(g, (sr_gpu_coll)7, &c.t, 1, SR_GPU_SUM, 0), SR_EINVAL);
    expect_detail("unknown collective 7");
    assert_sr_err(sr_gpu_group(g, SR_GPU_REDUCE, NULL, 3, SR_GPU_SUM, 0), SR_EINVAL);
    assert_sr_err(sr_gpu_reduce(g, c.send, c.root_out, SIZE_MAX / 2, SR_FLOAT32, SR_GPU_SUM, 0),
                  SR_EINVAL);
    expect_detail("overflows");

    /* In a batch the detail names the tensor too. */
    sr_gpu_tensor ts[3] = {c.t, c.t, c.t};
    ts[2].dtype = (sr_dtype)42;
    assert_sr_err(sr_gpu_group(g, SR_GPU_ALLREDUCE, ts, 3, SR_GPU_SUM, 0), SR_EINVAL);
    expect_detail("tensor 2");

    /* Memory helpers. */
    void *p = NULL;
    assert_sr_err(sr_gpu_alloc(g, G, 16, &p), SR_EINVAL);
    expect_detail("participant");
    assert_sr_err(sr_gpu_alloc(g, -1, 16, &p), SR_EINVAL);
    assert_null(p);
    assert_sr_err(sr_gpu_copy_to_host(g, G, c.in[0], c.send[0], 4), SR_EINVAL);
    assert_sr_err(sr_gpu_copy_from_host(g, 0, NULL, c.in[0], 4), SR_EINVAL);

    /* None of that is sticky: the handle still works. */
    run_single(g, &c);
    verify(g, &c);
    release(g, &c);
}

static void
test_gpu_timeout_aborts_and_sticks(void **state)
{
    suite *s = *state;
    int    G = s->backend == SR_GPU_HOST ? 3 : (s->devices >= 2 ? 2 : 1);
    char   who[48];

    if (s->backend == SR_GPU_NCCL) {
        gpu_suite_require_gpus(1);
    }
    sr_gpu *g = open_handle(s, G, SUITE_THRESHOLD, SUITE_FUSE_BUFFER, 100);
    tcase   c = {.coll = SR_GPU_ALLREDUCE, .op = SR_GPU_SUM, .dt = SR_FLOAT32, .count = 1001};
    prep(g, &c);

    /* Participant G-1 never completes: the call must come back with
     * SR_ETIMEDOUT instead of hanging, and name it. */
    sr__gpu_test_stall(g, G - 1);
    assert_sr_err(sr_gpu_allreduce(g, c.send, c.recv, c.count, c.dt, c.op), SR_ETIMEDOUT);
    snprintf(who, sizeof(who), "participant(s) %d", G - 1);
    expect_detail(who);
    expect_detail("100 ms");
    assert_non_null(strstr(sr_gpu_error(g), "did not complete"));

    /* Sticky: every later call fails the same way, even valid ones. */
    assert_sr_err(sr_gpu_allreduce(g, c.send, c.recv, c.count, c.dt, c.op), SR_ETIMEDOUT);
    expect_detail("unusable");
    assert_sr_err(sr_gpu_broadcast(g, c.send, c.count, c.dt, 0), SR_ETIMEDOUT);
    assert_sr_err(sr_gpu_copy_to_host(g, 0, c.in[0], c.send[0], 4), SR_ETIMEDOUT);
    assert_non_null(strstr(sr_gpu_error(g), "did not complete"));

    /* Memory can still be released, and the handle closed. */
    for (int i = 0; i < G; i++) {
        sr_gpu_free(g, i, c.send[i]);
        sr_gpu_free(g, i, c.recv[i]);
        free(c.in[i]);
    }
    free(c.exp);
    sr_gpu_close(g);
}

static void
test_gpu_alloc_and_copies_round_trip(void **state)
{
    suite *s = *state;
    int    ran = 0;

    for (int gi = 0; gi < NG; gi++) {
        if (!usable(s, gi)) {
            continue;
        }
        ran++;
        sr_gpu *g = s->g[gi];
        int64_t src[100], back[100];
        void   *dev = NULL, *host = NULL, *empty = NULL;
        for (int k = 0; k < 100; k++) {
            src[k] = (int64_t)k * 1000003 - 7;
        }
        for (int i = 0; i < Gs[gi]; i++) {
            memset(back, 0, sizeof(back));
            assert_sr_ok(sr_gpu_alloc(g, i, sizeof(src), &dev));
            assert_sr_ok(sr_gpu_alloc(g, i, 0, &empty));
            assert_non_null(empty);
            assert_sr_ok(sr_gpu_copy_from_host(g, i, dev, src, sizeof(src)));
            assert_sr_ok(sr_gpu_copy_to_host(g, i, back, dev, sizeof(back)));
            assert_memory_equal(src, back, sizeof(src));
            sr_gpu_free(g, i, dev);
            sr_gpu_free(g, i, empty);
        }
        assert_sr_ok(sr_gpu_host_alloc(g, 4096, &host));
        memset(host, 0x5a, 4096);
        sr_gpu_host_free(g, host);
        sr_gpu_free(g, 0, NULL);
        sr_gpu_host_free(g, NULL);
    }
    finish(ran);
}

int
gpu_suite_run(sr_gpu_backend_kind backend, const char *name)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_reduce_matches_reference),
        cmocka_unit_test(test_gpu_allreduce_matches_reference),
        cmocka_unit_test(test_gpu_broadcast_copies_root_everywhere),
        cmocka_unit_test(test_gpu_average_is_sum_over_g_on_root),
        cmocka_unit_test(test_gpu_broadcast_then_reduce_sum_is_g_times_input),
        cmocka_unit_test(test_gpu_large_tensors_match_reference),
        cmocka_unit_test(test_gpu_group_fuses_small_tensors_into_one_launch),
        cmocka_unit_test(test_gpu_group_overflowing_fusion_buffer_uses_stages),
        cmocka_unit_test(test_gpu_single_device_launches_nothing),
        cmocka_unit_test(test_gpu_zero_length_with_null_buffers_does_nothing),
        cmocka_unit_test(test_gpu_bad_arguments_are_einval_with_detail),
        cmocka_unit_test(test_gpu_timeout_aborts_and_sticks),
        cmocka_unit_test(test_gpu_alloc_and_copies_round_trip),
    };

    memset(&the_suite, 0, sizeof(the_suite));
    the_suite.backend = backend;
    return _cmocka_run_group_tests(name, tests, sizeof(tests) / sizeof(tests[0]), suite_setup,
                                   suite_teardown);
}
