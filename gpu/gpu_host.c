/*
 * The host backend: the same collectives on host memory, one thread per
 * participant.  A run is dispatched to all G threads at once; each walks the
 * plan, doing its own participant's copies and taking units of the stage's
 * collectives from a shared counter until none are left, with a barrier
 * before and after each stage's collectives (a unit reads every
 * participant's buffers).  The caller waits at most timeout_ms; then it
 * aborts the run (threads stop at the next barrier or block) and the handle
 * turns sticky.  Plans without collectives (G = 1, copies) run inline in the
 * caller: nothing is launched.  See docs/gpu.md.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#define HAVE_STREAM_STORES 1
#endif

#include "core/dtype.h"
#include "core/log.h"
#include "gpu/gpu_int.h"

/* Elements are processed in blocks this large: the partial result of a
 * block stays in the thread's cache-resident scratch while it is copied to
 * the outputs, so every input is read once. */
#define BLOCK_BYTES ((size_t)16 << 10)
/* Threads take a collective's elements this many bytes at a time: large
 * enough that each thread streams through memory, small enough that an idle
 * thread can take over a descheduled one's share. */
#define UNIT_BYTES ((size_t)256 << 10)
/* Alignment of host buffers and scratch: whole cache lines. */
#define LINE_BYTES 64
/* Collectives at least this large write their outputs with non-temporal
 * stores: they will not be read from cache soon, and skipping the
 * read-for-ownership of each destination line saves a third of the memory
 * traffic of a reduce or all-reduce. */
#define STREAM_MIN_BYTES ((size_t)4 << 20)

typedef struct host_state host_state;

typedef struct {
    host_state *h;
    int         part;
    void       *tmp; /* BLOCK_BYTES, line-aligned: one block's partial result */
} host_worker;

struct host_state {
    sr_gpu             *g;
    int                 nthreads; /* threads started */
    pthread_t          *threads;
    host_worker        *workers;
    pthread_mutex_t     mu;
    pthread_cond_t      work_cv; /* a new run, or quit */
    pthread_cond_t      done_cv; /* a thread finished its part of the run */
    pthread_cond_t      bar_cv;  /* barrier release, or abort */
    uint64_t            gen;     /* run generation */
    int                 done;    /* threads finished with this run */
    int                 quit;
    int                 bar_count;
    uint64_t            bar_gen;
    int                *arrived; /* [G] barriers each participant reached this run */
    int                 stall;   /* participant + 1 that stalls this run (test seam) */
    const sr__gpu_plan *plan;
    atomic_int          abort;
    /* Work sharing: a stage's collectives are cut into units that the
     * threads take in turn, so one descheduled thread does not hold the
     * others back.  Set up by the caller before each run. */
    atomic_size_t *next;       /* [stage] next unit to take */
    size_t        *stage_blks; /* [stage] units in the stage */
    size_t        *first_blk;  /* [coll] its first unit within its stage */
    size_t         cap_stages, cap_colls;
};

/* ---- element kernels ------------------------------------------------------ */

/* d = a op b, element-wise; d may be a or b.  Integer sums and products
 * wrap in unsigned arithmetic (as NCCL's), never signed overflow. */
#define SR_HOST_BINOPS(NAME, T, U)                                              \
    static void NAME##_sum(void *d_, const void *a_, const void *b_, size_t n)  \
    {                                                                           \
        T       *d = d_;                                                        \
        const T *a = a_, *b = b_;                                               \
        for (size_t k = 0; k < n; k++) {                                        \
            d[k] = (T)((U)a[k] + (U)b[k]);                                      \
        }                                                                       \
    }                                                                           \
    static void NAME##_prod(void *d_, const void *a_, const void *b_, size_t n) \
    {                                                                           \
        T       *d = d_;                                                        \
        const T *a = a_, *b = b_;                                               \
        for (size_t k = 0; k < n; k++) {                                        \
            d[k] = (T)((U)a[k] * (U)b[k]);                                      \
        }                                                                       \
    }                                                                           \
    static void NAME##_min(void *d_, const void *a_, const void *b_, size_t n)  \
    {                                                                           \
        T       *d = d_;                                                        \
        const T *a = a_, *b = b_;                                               \
        for (size_t k = 0; k < n; k++) {                                        \
            d[k] = b[k] < a[k] ? b[k] : a[k];                                   \
        }                                                                       \
    }                                                                           \
    static void NAME##_max(void *d_, const void *a_, const void *b_, size_t n)  \
    {                                                                           \
        T       *d = d_;                                                        \
        const T *a = a_, *b = b_;                                               \
        for (size_t k = 0; k < n; k++) {                                        \
            d[k] = b[k] > a[k] ? b[k] : a[k];                                   \
        }                                                                       \
    }

SR_HOST_BINOPS(f32, float, float)
SR_HOST_BINOPS(f64, double, double)
SR_HOST_BINOPS(i32, int32_t, uint32_t)
SR_HOST_BINOPS(i64, int64_t, uint64_t)

typedef void (*binop_fn)(void *d, const void *a, const void *b, size_t n);

static binop_fn
binop(sr_dtype dt, sr_gpu_op op)
{
    static const binop_fn table[4][4] = {
        {f32_sum, f32_prod, f32_min, f32_max},
        {f64_sum, f64_prod, f64_min, f64_max},
        {i32_sum, i32_prod, i32_min, i32_max},
        {i64_sum, i64_prod, i64_min, i64_max},
    };
    return table[dt - SR_FLOAT32][op - SR_GPU_SUM];
}

/* Average, floats: NCCL's ncclAvg multiplies every input by (T)(1/G) and
 * sums the products; doing the same here keeps both backends bit-identical
 * whenever the result does not depend on the summation order. */
static void
f32_premul(float *d, const float *a, const float *b, size_t n, float s, int first)
{
    for (size_t k = 0; k < n; k++) {
        float x = first ? a[k] * s : a[k];
        float y = b[k] * s;
        d[k] = x + y;
    }
}

static void
f64_premul(double *d, const double *a, const double *b, size_t n, double s, int first)
{
    for (size_t k = 0; k < n; k++) {
        double x = first ? a[k] * s : a[k];
        double y = b[k] * s;
        d[k] = x + y;
    }
}

/* Average, integers: the wrapped sum divided by G, truncated toward zero. */
static void
int_div(sr_dtype dt, void *d, size_t n, int G)
{
    if (dt == SR_INT32) {
        int32_t *p = d;
        for (size_t k = 0; k < n; k++) {
            p[k] /= G;
        }
    } else {
        int64_t *p = d;
        for (size_t k = 0; k < n; k++) {
            p[k] /= G;
        }
    }
}

/* Combine the G inputs of block [b, b + len) into dst, starting with input
 * `first` (the root, or 0 for all-reduce): dst may be that input (in
 * place), and it is consumed before dst is first written. */
static void
reduce_block(const sr__gpu_coll *c, void *const *send, int G, int first, void *dst, size_t b,
             size_t len)
{
    size_t      at = b * sr_dtype_size(c->dtype);
    const void *in[SR_GPU_MAX_DEV];

    in[0] = (const char *)send[first] + at;
    for (int j = 0, n = 1; j < G; j++) {
        if (j != first) {
            in[n++] = (const char *)send[j] + at;
        }
    }
    if (c->kind == SR_GPU_AVERAGE && c->dtype == SR_FLOAT32) {
        float s = (float)(1.0 / G);
        f32_premul(dst, in[0], in[1], len, s, 1);
        for (int j = 2; j < G; j++) {
            f32_premul(dst, dst, in[j], len, s, 0);
        }
        return;
    }
    if (c->kind == SR_GPU_AVERAGE && c->dtype == SR_FLOAT64) {
        double s = 1.0 / G;
        f64_premul(dst, in[0], in[1], len, s, 1);
        for (int j = 2; j < G; j++) {
            f64_premul(dst, dst, in[j], len, s, 0);
        }
        return;
    }
    binop_fn f = binop(c->dtype, c->kind == SR_GPU_AVERAGE ? SR_GPU_SUM : c->op);
    f(dst, in[0], in[1], len);
    for (int j = 2; j < G; j++) {
        f(dst, dst, in[j], len);
    }
    if (c->kind == SR_GPU_AVERAGE) {
        int_div(c->dtype, dst, len, G);
    }
}

/* Copy n bytes; with `stream`, through non-temporal stores (the caller
 * fences before other threads may read dst). */
static void
copy_out(void *dst, const void *src, size_t n, int stream)
{
#ifdef HAVE_STREAM_STORES
    if (stream) {
        char       *d = dst;
        const char *s = src;
        size_t      head = (16 - ((uintptr_t)d & 15)) & 15;
        head = head < n ? head : n;
        memcpy(d, s, head);
        d += head;
        s += head;
        n -= head;
        for (; n >= 64; n -= 64, d += 64, s += 64) {
            __m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);
            __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
            __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
            _mm_stream_si128((__m128i *)(void *)d, a);
            _mm_stream_si128((__m128i *)(void *)(d + 16), b);
            _mm_stream_si128((__m128i *)(void *)(d + 32), c);
            _mm_stream_si128((__m128i *)(void *)(d + 48), e);
        }
        memcpy(d, s, n);
        return;
    }
#endif
    (void)stream;
    memcpy(dst, src, n);
}

/* Elements [b, b + len) of collective c, reduced into the thread's scratch
 * `tmp` from every input before any output of them is written, so
 * recv[i] == send[i] (in place) is safe. */
static void
coll_block(const sr__gpu_plan *plan, const sr__gpu_coll *c, int G, size_t b, size_t len, void *tmp)
{
    size_t       es = sr_dtype_size(c->dtype);
    size_t       at = b * es;
    int          stream = c->count * es >= STREAM_MIN_BYTES;
    void *const *send = sr__gpu_ptrs(plan, c->send_at);
    void *const *recv = sr__gpu_ptrs(plan, c->recv_at);

    if (c->kind == SR_GPU_BROADCAST) {
        const char *src = (const char *)send[c->root] + at;
        for (int i = 0; i < G; i++) {
            if (i != c->root && recv[i] != send[c->root]) {
                copy_out((char *)recv[i] + at, src, len * es, stream);
            }
        }
        return;
    }
    int first = c->kind == SR_GPU_ALLREDUCE ? 0 : c->root;
    reduce_block(c, send, G, first, tmp, b, len);
    for (int i = 0; i < G; i++) {
        if (c->kind == SR_GPU_ALLREDUCE || i == c->root) {
            copy_out((char *)recv[i] + at, tmp, len * es, stream);
        }
    }
}

/* Work unit j of collective c: UNIT_BYTES of elements, processed block by
 * block; different units touch disjoint elements. */
static void
coll_unit(const sr__gpu_plan *plan, const sr__gpu_coll *c, int G, size_t j, void *tmp)
{
    size_t es = sr_dtype_size(c->dtype);
    size_t unit = UNIT_BYTES / es, blk = BLOCK_BYTES / es;
    size_t lo = j * unit, hi = c->count - lo < unit ? c->count : lo + unit;

    for (size_t b = lo; b < hi; b += blk) {
        coll_block(plan, c, G, b, hi - b < blk ? hi - b : blk, tmp);
    }
}

static size_t
blocks_of(const sr__gpu_coll *c)
{
    size_t unit = UNIT_BYTES / sr_dtype_size(c->dtype);
    return (c->count + unit - 1) / unit;
}

/* Take units of stage s until none are left (or the run is aborted). */
static void
stage_blocks(host_state *h, const sr__gpu_plan *plan, size_t s, void *tmp)
{
    const sr__gpu_stage *st = &plan->stages[s];
    size_t               k = st->coll_lo;

    for (;;) {
        size_t j = atomic_fetch_add_explicit(&h->next[s], 1, memory_order_relaxed);
        if (j >= h->stage_blks[s] || atomic_load_explicit(&h->abort, memory_order_relaxed)) {
            break;
        }
        /* Units are taken in increasing order: the collective only moves on. */
        while (k + 1 < st->coll_hi && h->first_blk[k + 1] <= j) {
            k++;
        }
        coll_unit(plan, &plan->colls[k], h->g->ndev, j - h->first_blk[k], tmp);
    }
#ifdef HAVE_STREAM_STORES
    _mm_sfence(); /* the barrier after this stage publishes streamed stores */
#endif
}

/* Number the units of every stage's collectives for stage_blocks(). */
static sr_err
prepare_blocks(host_state *h, const sr__gpu_plan *plan)
{
    if (plan->nstages > h->cap_stages) {
        atomic_size_t *n = realloc(h->next, plan->nstages * sizeof(*n));
        size_t        *t = n != NULL ? realloc(h->stage_blks, plan->nstages * sizeof(*t)) : NULL;
        if (n != NULL) {
            h->next = n;
        }
        if (t == NULL) {
            return sr_fail(SR_ENOMEM, "host backend: tables for %zu stages", plan->nstages);
        }
        h->stage_blks = t;
        h->cap_stages = plan->nstages;
    }
    if (plan->ncolls > h->cap_colls) {
        size_t *f = realloc(h->first_blk, plan->ncolls * sizeof(*f));
        if (f == NULL) {
            return sr_fail(SR_ENOMEM, "host backend: tables for %zu collectives", plan->ncolls);
        }
        h->first_blk = f;
        h->cap_colls = plan->ncolls;
    }
    for (size_t s = 0; s < plan->nstages; s++) {
        size_t total = 0;
        for (size_t k = plan->stages[s].coll_lo; k < plan->stages[s].coll_hi; k++) {
            h->first_blk[k] = total;
            total += blocks_of(&plan->colls[k]);
        }
        h->stage_blks[s] = total;
        atomic_init(&h->next[s], 0);
    }
    return SR_OK;
}

/* ---- threads -------------------------------------------------------------- */

/* Returns 0 when all G participants arrived, -1 when the run was aborted. */
static int
barrier(host_state *h, int part)
{
    int rc = 0;

    pthread_mutex_lock(&h->mu);
    h->arrived[part]++;
    if (atomic_load(&h->abort)) {
        rc = -1;
    } else if (++h->bar_count == h->g->ndev) {
        h->bar_count = 0;
        h->bar_gen++;
        pthread_cond_broadcast(&h->bar_cv);
    } else {
        uint64_t gen = h->bar_gen;
        while (gen == h->bar_gen && !atomic_load(&h->abort)) {
            pthread_cond_wait(&h->bar_cv, &h->mu);
        }
        rc = gen == h->bar_gen ? -1 : 0;
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

static void
do_copies(const sr__gpu_plan *plan, size_t lo, size_t hi, int part)
{
    for (size_t k = lo; k < hi; k++) {
        const sr__gpu_copy *cp = &plan->copies[k];
        if (part < 0 || cp->part == part) {
            memmove(cp->dst, cp->src, cp->bytes);
        }
    }
}

static void
run_part(host_state *h, const sr__gpu_plan *plan, int part, void *tmp)
{
    for (size_t s = 0; s < plan->nstages; s++) {
        const sr__gpu_stage *st = &plan->stages[s];
        do_copies(plan, st->pre_lo, st->pre_hi, part);
        if (st->coll_hi > st->coll_lo) {
            if (barrier(h, part) != 0) {
                return;
            }
            stage_blocks(h, plan, s, tmp);
            if (barrier(h, part) != 0) {
                return;
            }
        }
        do_copies(plan, st->post_lo, st->post_hi, part);
    }
}

static void *
worker_main(void *arg)
{
    host_worker *w = arg;
    host_state  *h = w->h;
    uint64_t     seen = 0;

    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (h->gen == seen && !h->quit) {
            pthread_cond_wait(&h->work_cv, &h->mu);
        }
        if (h->quit) {
            break;
        }
        seen = h->gen;
        const sr__gpu_plan *plan = h->plan;
        int                 stall = h->stall == w->part + 1;
        if (stall) {
            /* Test seam: behave like a participant that never shows up. */
            while (!atomic_load(&h->abort)) {
                pthread_cond_wait(&h->bar_cv, &h->mu);
            }
        } else {
            pthread_mutex_unlock(&h->mu);
            run_part(h, plan, w->part, w->tmp);
            pthread_mutex_lock(&h->mu);
        }
        if (++h->done == h->g->ndev) {
            pthread_cond_signal(&h->done_cv);
        }
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static void
host_close(sr_gpu *g)
{
    host_state *h = g->be_state;

    if (h == NULL) {
        return;
    }
    pthread_mutex_lock(&h->mu);
    h->quit = 1;
    pthread_cond_broadcast(&h->work_cv);
    pthread_mutex_unlock(&h->mu);
    for (int i = 0; i < h->nthreads; i++) {
        pthread_join(h->threads[i], NULL);
    }
    for (int i = 0; h->workers != NULL && i < h->g->ndev; i++) {
        free(h->workers[i].tmp);
    }
    pthread_cond_destroy(&h->work_cv);
    pthread_cond_destroy(&h->done_cv);
    pthread_cond_destroy(&h->bar_cv);
    pthread_mutex_destroy(&h->mu);
    free(h->threads);
    free(h->workers);
    free(h->arrived);
    free(h->next);
    free(h->stage_blks);
    free(h->first_blk);
    free(h);
    g->be_state = NULL;
}

static sr_err
host_open(sr_gpu *g, const sr_gpu_options *o)
{
    pthread_condattr_t ca;
    host_state        *h;
    int                G, e;

    (void)o;
    if (g->ndev == 0) {
        g->ndev = 1;
    }
    G = g->ndev;
    if ((h = calloc(1, sizeof(*h))) == NULL) {
        return sr_fail(SR_ENOMEM, "sr_gpu_open(host): %zu bytes", sizeof(*h));
    }
    h->g = g;
    atomic_init(&h->abort, 0);
    h->threads = calloc((size_t)G, sizeof(*h->threads));
    h->workers = calloc((size_t)G, sizeof(*h->workers));
    h->arrived = calloc((size_t)G, sizeof(*h->arrived));
    if (h->threads == NULL || h->workers == NULL || h->arrived == NULL) {
        free(h->threads);
        free(h->workers);
        free(h->arrived);
        free(h);
        return sr_fail(SR_ENOMEM, "sr_gpu_open(host): thread tables for %d participants", G);
    }
    /* The caller's timed wait uses the monotonic clock, like everything else. */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->work_cv, NULL);
    pthread_cond_init(&h->done_cv, &ca);
    pthread_cond_init(&h->bar_cv, NULL);
    pthread_condattr_destroy(&ca);
    g->be_state = h;
    if (G == 1) {
        return SR_OK; /* a single participant never needs a thread */
    }
    for (int i = 0; i < G; i++) {
        h->workers[i] = (host_worker){.h = h, .part = i};
        if ((e = posix_memalign(&h->workers[i].tmp, LINE_BYTES, BLOCK_BYTES)) != 0) {
            h->workers[i].tmp = NULL;
            return sr_fail(SR_ENOMEM, "sr_gpu_open(host): scratch of thread %d: %s", i,
                           strerror(e));
        }
        if ((e = pthread_create(&h->threads[i], NULL, worker_main, &h->workers[i])) != 0) {
            return sr_fail(SR_ENOMEM, "sr_gpu_open(host): starting thread %d of %d: %s", i, G,
                           strerror(e));
        }
        h->nthreads++;
    }
    return SR_OK;
}

static int
host_check_buf(sr_gpu *g, int part, const void *p, char *why, size_t why_len)
{
    (void)g;
    (void)part;
    (void)p;
    (void)why;
    (void)why_len;
    return 0;
}

static sr_err
host_alloc(sr_gpu *g, int part, size_t bytes, void **out)
{
    void *p = NULL;
    int   e;

    (void)g;
    (void)part;
    /* Round up to whole lines: 0 bytes still gives a unique pointer. */
    bytes = bytes == 0 ? LINE_BYTES : (bytes + LINE_BYTES - 1) / LINE_BYTES * LINE_BYTES;
    if ((e = posix_memalign(&p, LINE_BYTES, bytes)) != 0) {
        return sr_fail(SR_ENOMEM, "host buffer of %zu bytes: %s", bytes, strerror(e));
    }
    *out = p;
    return SR_OK;
}

static void
host_free(sr_gpu *g, int part, void *p)
{
    (void)g;
    (void)part;
    free(p);
}

static sr_err
host_host_alloc(sr_gpu *g, size_t bytes, void **out)
{
    return host_alloc(g, 0, bytes, out);
}

static void
host_host_free(sr_gpu *g, void *p)
{
    (void)g;
    free(p);
}

/* Names the participants that reached the fewest barriers: the ones the
 * others were waiting for. */
static void
describe_laggards(host_state *h, char *buf, size_t len)
{
    int    G = h->g->ndev, least = -1;
    size_t at = 0;

    for (int i = 0; i < G; i++) {
        if (least < 0 || h->arrived[i] < least) {
            least = h->arrived[i];
        }
    }
    buf[0] = '\0';
    for (int i = 0; i < G && at < len; i++) {
        if (h->arrived[i] == least) {
            int n = snprintf(buf + at, len - at, "%s%d", at ? "," : "", i);
            at += n > 0 ? (size_t)n : 0;
        }
    }
}

static sr_err
host_run(sr_gpu *g, const sr__gpu_plan *plan)
{
    host_state     *h = g->be_state;
    struct timespec ts;
    int             G = g->ndev, timed_out = 0;
    size_t          ncolls = 0;

    for (size_t s = 0; s < plan->nstages; s++) {
        ncolls += plan->stages[s].coll_hi - plan->stages[s].coll_lo;
    }
    if (ncolls == 0) {
        /* Copies only: they are ordered on the caller's thread, no launch. */
        for (size_t s = 0; s < plan->nstages; s++) {
            do_copies(plan, plan->stages[s].pre_lo, plan->stages[s].pre_hi, -1);
            do_copies(plan, plan->stages[s].post_lo, plan->stages[s].post_hi, -1);
        }
        return SR_OK;
    }
    if (prepare_blocks(h, plan) != SR_OK) {
        return SR_ENOMEM;
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += g->timeout_ms / 1000;
    ts.tv_nsec += (long)(g->timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&h->mu);
    h->plan = plan;
    h->done = 0;
    h->bar_count = 0;
    memset(h->arrived, 0, (size_t)G * sizeof(*h->arrived));
    h->stall = g->test_stall;
    h->gen++;
    pthread_cond_broadcast(&h->work_cv);
    while (h->done < G) {
        if (pthread_cond_timedwait(&h->done_cv, &h->mu, &ts) == ETIMEDOUT && h->done < G) {
            timed_out = 1;
            break;
        }
    }
    if (timed_out) {
        char laggards[256];
        describe_laggards(h, laggards, sizeof(laggards));
        atomic_store(&h->abort, 1);
        pthread_cond_broadcast(&h->bar_cv);
        /* Wait for the threads to leave the caller's buffers: they stop at
         * the next block or barrier, so this is short. */
        while (h->done < G) {
            pthread_cond_wait(&h->done_cv, &h->mu);
        }
        pthread_mutex_unlock(&h->mu);
        SR_LOG(SR_LOG_WARN, "GPU-ABORT", "backend=host timeout_ms=%d behind=%s", g->timeout_ms,
               laggards);
        return sr_fail(SR_ETIMEDOUT,
                       "host collective did not complete within %d ms: "
                       "participant(s) %s behind; run aborted",
                       g->timeout_ms, laggards);
    }
    pthread_mutex_unlock(&h->mu);
    return SR_OK;
}

const sr__gpu_backend sr__gpu_host_backend = {
    .kind = SR_GPU_HOST,
    .open = host_open,
    .close = host_close,
    .check_buf = host_check_buf,
    .alloc = host_alloc,
    .free = host_free,
    .host_alloc = host_host_alloc,
    .host_free = host_host_free,
    .run = host_run,
};
