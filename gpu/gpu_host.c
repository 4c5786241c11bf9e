/*
 * The host backend: the same collectives on host memory, one thread per
 * participant: the caller is participant 0, the others have a worker thread
 * each.  A collective's elements are cut into units that the threads take
 * from a shared counter until none are left; a unit is one pass over memory
 * (a fused kernel reads every input of a line, combines them in registers
 * and writes the result to every output).  A run that is only collectives
 * is one pool of units that the caller starts on at once and that at most
 * one thread per CPU takes from; a run with copies walks the plan on every
 * participant's thread, each doing its own copies, with a barrier only
 * where collectives must wait for copies or be waited for (plan_barriers).
 * The caller waits at most timeout_ms; then it aborts the run (threads stop
 * at the next barrier or unit) and the handle turns sticky.  Plans without
 * collectives (G = 1, copies) run inline in the caller: nothing is
 * launched.  See docs/gpu.md.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#define HAVE_STREAM_STORES 1
#endif

#include "core/dtype.h"
#include "core/log.h"
#include "gpu/gpu_int.h"

/* Broadcast copies a unit this many bytes at a time to every output, so the
 * root's bytes are read from memory once and from L1 for the other outputs. */
#define BLOCK_BYTES ((size_t)16 << 10)
/* Threads take a collective's elements this many bytes at a time: large
 * enough that each thread streams through memory, small enough that an idle
 * thread can take over a descheduled one's share. */
#define UNIT_BYTES ((size_t)256 << 10)
/* Alignment of host buffers; the reduction kernels work a line at a time. */
#define LINE_BYTES 64
/* The kernels ask for every input this many bytes in all ahead of the line
 * they combine (each of G inputs 1/G of it, in whole lines): the hardware
 * prefetchers alone keep too few lines in flight for one core to stream G
 * inputs and G outputs (measured here: 8 KiB makes a one-thread all-reduce
 * over two inputs a fifth to a third faster; 4 KiB per input thrashes L1
 * with G = 8). */
#define PREFETCH_WINDOW_BYTES ((size_t)8 << 10)
/* Collectives at least this large write their outputs with non-temporal
 * stores: they will not be read from cache soon, and skipping the
 * read-for-ownership of each destination line saves a third of the memory
 * traffic of a reduce or all-reduce. */
#define STREAM_MIN_BYTES ((size_t)4 << 20)

/* Barriers a stage's collectives need (plan_barriers). */
#define BAR_BEFORE 1
#define BAR_AFTER  2

typedef struct host_state host_state;

typedef struct {
    host_state *h;
    int         part;
} host_worker;

struct host_state {
    sr_gpu             *g;
    int                 nthreads; /* worker threads started (participants 1, 2, ...) */
    int                 helpers;  /* threads that take units of a shared run: min(G, CPUs) */
    pthread_t          *threads;  /* [G]; [0] unused: the caller is participant 0 */
    host_worker        *workers;
    pthread_mutex_t     mu;
    pthread_cond_t      work_cv;  /* a new run, or quit: workers that help in shared runs */
    pthread_cond_t      joint_cv; /* a new joint run, or quit: the other workers */
    pthread_cond_t      done_cv;  /* a worker left the run */
    pthread_cond_t      bar_cv;   /* barrier release, or abort */
    uint64_t            gen;      /* run generation */
    int                 open;     /* the run still takes workers in */
    int                 shared;   /* the run is one pool of units, no copies or barriers */
    int                 active;   /* workers inside the run */
    int                 done;     /* workers finished with the run */
    int                 quit;
    int                 bar_count;
    uint64_t            bar_gen;
    int                *arrived; /* [G] start, barriers and end each participant reached this run */
    int                 stall;   /* participant + 1 that stalls this run (test seam) */
    const sr__gpu_plan *plan;
    atomic_int          abort;
    /* Work sharing: a stage's collectives are cut into units that the
     * threads take in turn, so one descheduled thread does not hold the
     * others back.  Set up by the caller before each run. */
    atomic_size_t *next;       /* [stage] next unit to take */
    size_t        *stage_blks; /* [stage] units in the stage */
    unsigned char *bars;       /* [stage] BAR_BEFORE | BAR_AFTER its collectives */
    size_t        *first_blk;  /* [coll] its first unit within its stage */
    size_t         cap_stages, cap_colls;
};

/* ---- element kernels ------------------------------------------------------ */

/* One reduction as the kernels see it: combine in[0..nin) element by element
 * (in[0] first: the root, or participant 0 for all-reduce) and write the
 * result to out[0..nout).  Element ranges are relative to these bases. */
typedef struct {
    const void *in[SR_GPU_MAX_DEV];
    void       *out[SR_GPU_MAX_DEV];
    int         nin, nout;
    int         G;      /* participants: the divisor of an integer average */
    double      scale;  /* 1/G: the premultiplier of a float average */
    int         stream; /* write outputs with non-temporal stores */
    size_t      ahead;  /* bytes each input is prefetched ahead */
} span;

/* A line is VECS vectors of 16 bytes, in GCC/Clang vector types, so a
 * line's partial result stays in registers (SSE2 on x86-64; the compiler
 * lowers them elsewhere). */
#define VEC_BYTES 16
#define VECS      (LINE_BYTES / VEC_BYTES)
typedef float    v_f32 __attribute__((vector_size(VEC_BYTES)));
typedef double   v_f64 __attribute__((vector_size(VEC_BYTES)));
typedef int32_t  v_i32 __attribute__((vector_size(VEC_BYTES)));
typedef uint32_t v_u32 __attribute__((vector_size(VEC_BYTES)));
typedef int64_t  v_i64 __attribute__((vector_size(VEC_BYTES)));
typedef uint64_t v_u64 __attribute__((vector_size(VEC_BYTES)));

/* Fused kernels: one pass over memory.  For each line of elements, every
 * input is read into registers and combined there, then the line is written
 * to every output; nothing goes through a scratch buffer, so a thread keeps
 * its loads and stores in flight together instead of alternating phases.
 * All inputs of a line are read before any output of it is written, so an
 * output may be an input (in place).  The order of operations is fixed,
 * element by element: acc = FIRST(in[0]), acc = STEP(acc, in[j]) for j = 1,
 * 2, ..., then LAST(acc) — so float results depend only on the inputs and
 * the root, never on the threads or the unit size.  Integer sums and
 * products wrap in unsigned arithmetic (as NCCL's), never signed overflow.
 * Float averages multiply every input by (T)(1/G) and sum the products, as
 * NCCL's ncclAvg does, so both backends agree bit for bit whenever the
 * result does not depend on the summation order; integer averages divide
 * the wrapped sum by G, truncated toward zero.  Min and max keep the
 * scalar rule acc = b < acc ? b : acc through a comparison mask (a
 * comparison with NaN is false, so the running result stays).
 *
 * A range starts with the partial line up to the first output's next line
 * boundary, so its full lines can be streamed: full lines of streamed
 * collectives take non-temporal stores where an output is 16-byte aligned;
 * an output off that alignment, and the partial lines at both ends, take
 * ordinary stores.  A partial line is loaded zero-padded: the padding is
 * combined like any element (0 op 0 cannot trap) and never written out. */
#define SR_HOST_KERNEL(NAME, T, V, FIRST, STEP, LAST)                                         \
    static inline void NAME##_load(V x[VECS], const char *p, size_t bytes, size_t ahead)      \
    {                                                                                         \
        char pad[LINE_BYTES];                                                                 \
        __builtin_prefetch(p + ahead);                                                        \
        if (bytes < LINE_BYTES) {                                                             \
            memset(pad, 0, sizeof(pad));                                                      \
            memcpy(pad, p, bytes);                                                            \
            p = pad;                                                                          \
        }                                                                                     \
        for (int v = 0; v < VECS; v++) {                                                      \
            memcpy(&x[v], p + v * VEC_BYTES, VEC_BYTES);                                      \
        }                                                                                     \
    }                                                                                         \
    static inline void NAME##_put(const span *sp, size_t at, const V acc[VECS], size_t bytes) \
    {                                                                                         \
        for (int o = 0; o < sp->nout; o++) {                                                  \
            char *d = (char *)sp->out[o] + at;                                                \
            if (bytes < LINE_BYTES) {                                                         \
                memcpy(d, acc, bytes);                                                        \
                continue;                                                                     \
            }                                                                                 \
            if (CAN_STREAM && sp->stream && ((uintptr_t)d & 15) == 0) {                       \
                STREAM_LINE(d, acc);                                                          \
                continue;                                                                     \
            }                                                                                 \
            for (int v = 0; v < VECS; v++) {                                                  \
                memcpy(d + v * VEC_BYTES, &acc[v], VEC_BYTES);                                \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
    static inline void NAME##_line(const span *sp, size_t at, size_t bytes)                   \
    {                                                                                         \
        const V vs = (V){0} + (T)sp->scale;                                                   \
        V       acc[VECS], b[VECS];                                                           \
        (void)vs;                                                                             \
        NAME##_load(acc, (const char *)sp->in[0] + at, bytes, sp->ahead);                     \
        for (int v = 0; v < VECS; v++) {                                                      \
            acc[v] = FIRST(acc[v]);                                                           \
        }                                                                                     \
        for (int j = 1; j < sp->nin; j++) {                                                   \
            NAME##_load(b, (const char *)sp->in[j] + at, bytes, sp->ahead);                   \
            for (int v = 0; v < VECS; v++) {                                                  \
                acc[v] = STEP(acc[v], b[v]);                                                  \
            }                                                                                 \
        }                                                                                     \
        for (int v = 0; v < VECS; v++) {                                                      \
            acc[v] = LAST(acc[v]);                                                            \
        }                                                                                     \
        NAME##_put(sp, at, acc, bytes);                                                       \
    }                                                                                         \
    static void NAME(const span *sp, size_t lo, size_t n)                                     \
    {                                                                                         \
        size_t at = lo * sizeof(T), end = (lo + n) * sizeof(T);                               \
        size_t head = (size_t)(-(uintptr_t)((char *)sp->out[0] + at)) & (LINE_BYTES - 1);     \
        head -= head % sizeof(T);                                                             \
        if (head > 0) {                                                                       \
            head = head < end - at ? head : end - at;                                         \
            NAME##_line(sp, at, head);                                                        \
            at += head;                                                                       \
        }                                                                                     \
        for (; end - at >= LINE_BYTES; at += LINE_BYTES) {                                    \
            NAME##_line(sp, at, LINE_BYTES);                                                  \
        }                                                                                     \
        if (at < end) {                                                                       \
            NAME##_line(sp, at, end - at);                                                    \
        }                                                                                     \
    }

/* Write the line acc to d with non-temporal stores (the caller fences
 * before other threads read d). */
#ifdef HAVE_STREAM_STORES
#define CAN_STREAM 1
#define STREAM_LINE(d, acc)                                                            \
    for (int v = 0; v < VECS; v++) {                                                   \
        _mm_stream_si128((__m128i *)(void *)((d) + v * VEC_BYTES), (__m128i)(acc)[v]); \
    }
#else
#define CAN_STREAM          0
#define STREAM_LINE(d, acc) (void)0
#endif

#define SR_ID(x)           (x)
#define SR_SEL(M, m, x, y) ((__typeof__(x))(((M)(x) & (m)) | ((M)(y) & ~(m))))
#define SR_ADD(a, b)       ((a) + (b))
#define SR_MUL(a, b)       ((a) * (b))
#define SR_PRE_FIRST(x)    ((x) * (vs))
#define SR_PRE_STEP(a, b)  ((a) + (b) * (vs))
#define SR_DIV_G(x)        ((x) / sp->G)
/* Elements of b replace those of a where b < a (min) or b > a (max). */
#define SR_MIN32(a, b)   SR_SEL(v_i32, (b) < (a), b, a)
#define SR_MAX32(a, b)   SR_SEL(v_i32, (b) > (a), b, a)
#define SR_MIN64(a, b)   SR_SEL(v_i64, (b) < (a), b, a)
#define SR_MAX64(a, b)   SR_SEL(v_i64, (b) > (a), b, a)
#define SR_ADD_U32(a, b) ((v_i32)((v_u32)(a) + (v_u32)(b)))
#define SR_MUL_U32(a, b) ((v_i32)((v_u32)(a) * (v_u32)(b)))
#define SR_ADD_U64(a, b) ((v_i64)((v_u64)(a) + (v_u64)(b)))
#define SR_MUL_U64(a, b) ((v_i64)((v_u64)(a) * (v_u64)(b)))

SR_HOST_KERNEL(f32_sum, float, v_f32, SR_ID, SR_ADD, SR_ID)
SR_HOST_KERNEL(f32_prod, float, v_f32, SR_ID, SR_MUL, SR_ID)
SR_HOST_KERNEL(f32_min, float, v_f32, SR_ID, SR_MIN32, SR_ID)
SR_HOST_KERNEL(f32_max, float, v_f32, SR_ID, SR_MAX32, SR_ID)
SR_HOST_KERNEL(f32_avg, float, v_f32, SR_PRE_FIRST, SR_PRE_STEP, SR_ID)
SR_HOST_KERNEL(f64_sum, double, v_f64, SR_ID, SR_ADD, SR_ID)
SR_HOST_KERNEL(f64_prod, double, v_f64, SR_ID, SR_MUL, SR_ID)
SR_HOST_KERNEL(f64_min, double, v_f64, SR_ID, SR_MIN64, SR_ID)
SR_HOST_KERNEL(f64_max, double, v_f64, SR_ID, SR_MAX64, SR_ID)
SR_HOST_KERNEL(f64_avg, double, v_f64, SR_PRE_FIRST, SR_PRE_STEP, SR_ID)
SR_HOST_KERNEL(i32_sum, int32_t, v_i32, SR_ID, SR_ADD_U32, SR_ID)
SR_HOST_KERNEL(i32_prod, int32_t, v_i32, SR_ID, SR_MUL_U32, SR_ID)
SR_HOST_KERNEL(i32_min, int32_t, v_i32, SR_ID, SR_MIN32, SR_ID)
SR_HOST_KERNEL(i32_max, int32_t, v_i32, SR_ID, SR_MAX32, SR_ID)
SR_HOST_KERNEL(i32_avg, int32_t, v_i32, SR_ID, SR_ADD_U32, SR_DIV_G)
SR_HOST_KERNEL(i64_sum, int64_t, v_i64, SR_ID, SR_ADD_U64, SR_ID)
SR_HOST_KERNEL(i64_prod, int64_t, v_i64, SR_ID, SR_MUL_U64, SR_ID)
SR_HOST_KERNEL(i64_min, int64_t, v_i64, SR_ID, SR_MIN64, SR_ID)
SR_HOST_KERNEL(i64_max, int64_t, v_i64, SR_ID, SR_MAX64, SR_ID)
SR_HOST_KERNEL(i64_avg, int64_t, v_i64, SR_ID, SR_ADD_U64, SR_DIV_G)

typedef void (*kernel_fn)(const span *sp, size_t lo, size_t n);

/* The kernel of a reduction, all-reduce or average of dtype dt. */
static kernel_fn
kernel_of(const sr__gpu_coll *c)
{
    static const kernel_fn table[4][5] = {
        {f32_sum, f32_prod, f32_min, f32_max, f32_avg},
        {f64_sum, f64_prod, f64_min, f64_max, f64_avg},
        {i32_sum, i32_prod, i32_min, i32_max, i32_avg},
        {i64_sum, i64_prod, i64_min, i64_max, i64_avg},
    };
    int op = c->kind == SR_GPU_AVERAGE ? 4 : (int)(c->op - SR_GPU_SUM);
    return table[c->dtype - SR_FLOAT32][op];
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

/* Broadcast of elements [lo, lo + n): the root's bytes to every other
 * participant, a block at a time. */
static void
broadcast_range(const sr__gpu_coll *c, void *const *bufs, int G, size_t lo, size_t n, int stream)
{
    size_t      es = sr_dtype_size(c->dtype);
    const char *src = (const char *)bufs[c->root] + lo * es;

    for (size_t at = 0; at < n * es; at += BLOCK_BYTES) {
        size_t len = n * es - at < BLOCK_BYTES ? n * es - at : BLOCK_BYTES;
        for (int i = 0; i < G; i++) {
            if (i != c->root && bufs[i] != bufs[c->root]) {
                copy_out((char *)bufs[i] + lo * es + at, src + at, len, stream);
            }
        }
    }
}

/* Work unit j of collective c: UNIT_BYTES of elements; different units
 * touch disjoint elements. */
static void
coll_unit(const sr__gpu_plan *plan, const sr__gpu_coll *c, int G, size_t j)
{
    size_t       es = sr_dtype_size(c->dtype);
    size_t       unit = UNIT_BYTES / es;
    size_t       lo = j * unit, n = c->count - lo < unit ? c->count - lo : unit;
    int          stream = c->count * es >= STREAM_MIN_BYTES;
    void *const *send = sr__gpu_ptrs(plan, c->send_at);
    void *const *recv = sr__gpu_ptrs(plan, c->recv_at);
    span         sp;

    if (c->kind == SR_GPU_BROADCAST) {
        broadcast_range(c, send, G, lo, n, stream);
        return;
    }
    int first = c->kind == SR_GPU_ALLREDUCE ? 0 : c->root;
    sp.in[0] = send[first];
    sp.nin = 1;
    for (int i = 0; i < G; i++) {
        if (i != first) {
            sp.in[sp.nin++] = send[i];
        }
    }
    sp.nout = 0;
    for (int i = 0; i < G; i++) {
        if (c->kind == SR_GPU_ALLREDUCE || i == c->root) {
            sp.out[sp.nout++] = recv[i];
        }
    }
    sp.G = G;
    sp.scale = 1.0 / G;
    sp.stream = stream;
    sp.ahead = PREFETCH_WINDOW_BYTES / (size_t)G / LINE_BYTES * LINE_BYTES;
    kernel_of(c)(&sp, lo, n);
}

static size_t
blocks_of(const sr__gpu_coll *c)
{
    size_t unit = UNIT_BYTES / sr_dtype_size(c->dtype);
    return (c->count + unit - 1) / unit;
}

/* Past the deadline (CLOCK_MONOTONIC)? */
static int
past(const struct timespec *deadline)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > deadline->tv_sec ||
           (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec);
}

/* Take units of stage s until none are left (or the run is aborted).
 * Returns 0, or -1 when `deadline` (the caller's) passed first. */
static int
stage_blocks(host_state *h, const sr__gpu_plan *plan, size_t s, const struct timespec *deadline)
{
    const sr__gpu_stage *st = &plan->stages[s];
    size_t               k = st->coll_lo;
    int                  rc = 0;

    for (;;) {
        if (deadline != NULL && past(deadline)) {
            rc = -1;
            break;
        }
        size_t j = atomic_fetch_add_explicit(&h->next[s], 1, memory_order_relaxed);
        if (j >= h->stage_blks[s] || atomic_load_explicit(&h->abort, memory_order_relaxed)) {
            break;
        }
        /* Units are taken in increasing order: the collective only moves on. */
        while (k + 1 < st->coll_hi && h->first_blk[k + 1] <= j) {
            k++;
        }
        coll_unit(plan, &plan->colls[k], h->g->ndev, j - h->first_blk[k]);
    }
#ifdef HAVE_STREAM_STORES
    _mm_sfence(); /* the barrier or the end of the run publishes streamed stores */
#endif
    return rc;
}

/* Which barriers the run needs, into bars[stage] (BAR_BEFORE, BAR_AFTER).
 * A stage's collectives read and write every participant's buffers, so they
 * wait for the copies that came before them (and for the previous stage's
 * collectives, which may read the fusion buffers those copies refill), and
 * whatever follows them waits for them.  Nothing else does: a run that is
 * one stage of collectives, like every large single-tensor call, needs no
 * barrier at all — the caller's dispatch orders the inputs before it and
 * its final wait orders the outputs after it.  The answer
 * depends only on the plan, so every thread takes the same barriers. */
static void
plan_barriers(const sr__gpu_plan *plan, unsigned char *bars)
{
    int dirty = 0; /* something ran since the last barrier */

    for (size_t s = 0; s < plan->nstages; s++) {
        const sr__gpu_stage *st = &plan->stages[s];
        bars[s] = 0;
        dirty |= st->pre_hi > st->pre_lo;
        if (st->coll_hi > st->coll_lo) {
            int later = st->post_hi > st->post_lo;
            for (size_t t = s + 1; t < plan->nstages && !later; t++) {
                const sr__gpu_stage *nx = &plan->stages[t];
                later = nx->pre_hi > nx->pre_lo || nx->coll_hi > nx->coll_lo ||
                        nx->post_hi > nx->post_lo;
            }
            bars[s] = (unsigned char)((dirty ? BAR_BEFORE : 0) | (later ? BAR_AFTER : 0));
            dirty = !later;
        }
        dirty |= st->post_hi > st->post_lo;
    }
}

/* Number the units of every stage's collectives for stage_blocks(). */
static sr_err
prepare_blocks(host_state *h, const sr__gpu_plan *plan)
{
    if (plan->nstages > h->cap_stages) {
        atomic_size_t *n = realloc(h->next, plan->nstages * sizeof(*n));
        size_t        *t = n != NULL ? realloc(h->stage_blks, plan->nstages * sizeof(*t)) : NULL;
        unsigned char *b = t != NULL ? realloc(h->bars, plan->nstages * sizeof(*b)) : NULL;
        if (n != NULL) {
            h->next = n;
        }
        if (t != NULL) {
            h->stage_blks = t;
        }
        if (b == NULL) {
            return sr_fail(SR_ENOMEM, "host backend: tables for %zu stages", plan->nstages);
        }
        h->bars = b;
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
    plan_barriers(plan, h->bars);
    return SR_OK;
}

/* ---- threads -------------------------------------------------------------- *
 *
 * The caller of a collective is participant 0's thread; participants 1 ..
 * G-1 have a worker thread each.  A run is one of two kinds:
 *
 *   shared   no copies and no barriers (one stage of collectives: every
 *            large single-tensor call).  Its units are one pool: the caller
 *            starts on them at once, and up to `helpers` - 1 workers join
 *            while the run is open.  When the caller finds the pool empty it
 *            closes the run and waits only for the workers inside it; a
 *            worker that wakes after that skips the run.  So a worker that
 *            is slow to be scheduled never delays a run it has no part in,
 *            and no more threads take units than there are CPUs.
 *   joint    everything else (copies belong to their participant's thread;
 *            a barrier needs all G).  Every participant runs its part and
 *            the caller waits for all of them.  The test seam's stall makes
 *            a run joint, so the stalled participant is waited for.
 *
 * A run, as host_run drives it (workers join and leave in worker_main):
 *
 *   idle ──dispatch──▶ open ──part 0 done──▶ closing ──complete──▶ idle
 *                       │                      │
 *                       └──deadline──▶ aborting ◀┘ (then idle, handle sticky)
 *
 *   state     workers that may join          the caller          leaves when
 *   open      any (shared: part < helpers)   runs part 0          its part is done
 *   closing   joint: the rest; shared: none  waits on done_cv     run_complete()
 *   aborting  none new                       raises abort, waits  run_complete()
 *
 * The caller checks its deadline in barriers, between units and in its
 * final wait; past it, it raises `abort`, workers stop at their next unit
 * or barrier, and the caller waits for them to leave its buffers (short)
 * before returning SR_ETIMEDOUT. */

/* Returns 0 when all G participants arrived, -1 when the run was aborted or
 * (with a deadline: the caller) the deadline passed. */
static int
barrier(host_state *h, int part, const struct timespec *deadline)
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
            if (deadline == NULL) {
                pthread_cond_wait(&h->bar_cv, &h->mu);
            } else if (pthread_cond_timedwait(&h->bar_cv, &h->mu, deadline) == ETIMEDOUT) {
                break;
            }
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

/* Participant part's share of the run; 0, or -1 when it was aborted or (the
 * caller, with a deadline) the deadline passed. */
static int
run_part(host_state *h, const sr__gpu_plan *plan, int part, const struct timespec *deadline)
{
    for (size_t s = 0; s < plan->nstages; s++) {
        const sr__gpu_stage *st = &plan->stages[s];
        do_copies(plan, st->pre_lo, st->pre_hi, part);
        if (st->coll_hi > st->coll_lo) {
            if ((h->bars[s] & BAR_BEFORE) && barrier(h, part, deadline) != 0) {
                return -1;
            }
            if (stage_blocks(h, plan, s, deadline) != 0) {
                return -1;
            }
            if ((h->bars[s] & BAR_AFTER) && barrier(h, part, deadline) != 0) {
                return -1;
            }
        }
        do_copies(plan, st->post_lo, st->post_hi, part);
    }
    return 0;
}

static void *
worker_main(void *arg)
{
    host_worker *w = arg;
    host_state  *h = w->h;
    uint64_t     seen = 0;

    pthread_mutex_lock(&h->mu);
    for (;;) {
        /* Shared runs take at most `helpers` threads: the others sleep
         * through them on joint_cv, so they cost no wake-ups. */
        int             helper = w->part < h->helpers;
        pthread_cond_t *cv = helper ? &h->work_cv : &h->joint_cv;
        while (!h->quit && (h->gen == seen || !h->open || (h->shared && !helper))) {
            pthread_cond_wait(cv, &h->mu);
        }
        if (h->quit) {
            break;
        }
        seen = h->gen;
        const sr__gpu_plan *plan = h->plan;
        if (h->stall == w->part + 1) {
            /* Test seam: behave like a participant that never shows up. */
            while (!atomic_load(&h->abort)) {
                pthread_cond_wait(&h->bar_cv, &h->mu);
            }
        } else {
            h->active++;
            h->arrived[w->part]++; /* started */
            pthread_mutex_unlock(&h->mu);
            run_part(h, plan, w->part, NULL);
            pthread_mutex_lock(&h->mu);
            h->arrived[w->part]++; /* finished */
            h->active--;
        }
        h->done++;
        pthread_cond_signal(&h->done_cv);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* The caller's wait is over: a shared run has no worker inside it (the pool
 * is empty once the caller leaves it), a joint run has all G-1 workers done. */
static int
run_complete(const host_state *h)
{
    return h->shared ? h->active == 0 : h->done == h->g->ndev - 1;
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
    pthread_cond_broadcast(&h->joint_cv);
    pthread_mutex_unlock(&h->mu);
    for (int i = 1; i <= h->nthreads; i++) {
        pthread_join(h->threads[i], NULL);
    }
    pthread_cond_destroy(&h->work_cv);
    pthread_cond_destroy(&h->joint_cv);
    pthread_cond_destroy(&h->done_cv);
    pthread_cond_destroy(&h->bar_cv);
    pthread_mutex_destroy(&h->mu);
    free(h->threads);
    free(h->workers);
    free(h->arrived);
    free(h->next);
    free(h->stage_blks);
    free(h->bars);
    free(h->first_blk);
    free(h);
    g->be_state = NULL;
}

/* CPUs this process may run on (at least 1). */
static int
online_cpus(void)
{
    cpu_set_t set;

    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
        return CPU_COUNT(&set);
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
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
    /* The caller's timed waits use the monotonic clock, like everything else. */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->work_cv, NULL);
    pthread_cond_init(&h->joint_cv, NULL);
    pthread_cond_init(&h->done_cv, &ca);
    pthread_cond_init(&h->bar_cv, &ca);
    pthread_condattr_destroy(&ca);
    h->helpers = G < online_cpus() ? G : online_cpus();
    g->be_state = h;
    if (G == 1) {
        return SR_OK; /* a single participant never needs a thread */
    }
    for (int i = 1; i < G; i++) {
        h->workers[i] = (host_worker){.h = h, .part = i};
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

/* Names the participants that reached the fewest points of the run (start,
 * barriers, end): the ones the others were waiting for. */
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
    int             G = g->ndev, timed_out = 0, shared, stall0;
    size_t          ncolls = 0, units = 0;

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
    shared = plan->ncopies == 0 && g->test_stall == 0;
    for (size_t s = 0; s < plan->nstages; s++) {
        shared = shared && h->bars[s] == 0;
        units += h->stage_blks[s];
    }
    pthread_mutex_lock(&h->mu);
    h->plan = plan;
    h->shared = shared;
    h->active = 0;
    h->done = 0;
    h->bar_count = 0;
    memset(h->arrived, 0, (size_t)G * sizeof(*h->arrived));
    h->stall = g->test_stall;
    stall0 = h->stall == 1;
    h->open = 1;
    h->gen++;
    if (shared) {
        /* One helper per unit beyond the caller's first: a run of one unit
         * (every small tensor) wakes nobody. */
        for (size_t k = 1; k < units && k < (size_t)h->helpers; k++) {
            pthread_cond_signal(&h->work_cv);
        }
    } else {
        pthread_cond_broadcast(&h->work_cv);
        pthread_cond_broadcast(&h->joint_cv);
    }
    if (!stall0) {
        h->arrived[0]++; /* started */
        pthread_mutex_unlock(&h->mu);
        timed_out = run_part(h, plan, 0, &ts) != 0;
        pthread_mutex_lock(&h->mu);
        h->arrived[0] += !timed_out; /* finished */
    }
    /* Shared: the pool is empty, so no worker may join any more. */
    h->open = !shared;
    while (!timed_out && (stall0 || !run_complete(h))) {
        if (pthread_cond_timedwait(&h->done_cv, &h->mu, &ts) == ETIMEDOUT) {
            timed_out = stall0 || !run_complete(h);
        }
    }
    if (timed_out) {
        char laggards[256];
        describe_laggards(h, laggards, sizeof(laggards));
        atomic_store(&h->abort, 1);
        pthread_cond_broadcast(&h->bar_cv);
        /* Wait for the workers to leave the caller's buffers: they stop at
         * the next unit or barrier, so this is short. */
        while (!run_complete(h)) {
            pthread_cond_wait(&h->done_cv, &h->mu);
        }
        h->open = 0;
        pthread_mutex_unlock(&h->mu);
        SR_LOG(SR_LOG_WARN, "GPU-ABORT", "backend=host timeout_ms=%d behind=%s", g->timeout_ms,
               laggards);
        return sr_fail(SR_ETIMEDOUT,
                       "host collective did not complete within %d ms: "
                       "participant(s) %s behind; run aborted",
                       g->timeout_ms, laggards);
    }
    h->open = 0;
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
