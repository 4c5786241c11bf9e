/*
 * Conditional gradient accumulators (see the state diagram in coord_int.h).
 * A dense step copies the first gradient and adds the others in arrival
 * order; a sparse step adds rows into an all-zero shadow and counts, per
 * row, the gradients that touched it.  The summation order is the arrival
 * order (and, within a sparse push, row order then position), so a replay
 * that re-adds the logged contributions in order reproduces the bits.
 * With the deterministic rule the gradients are kept as they come and
 * summed at the take in task order, and `contrib` is put in that order: the
 * same replay reproduces those bits too.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/coord_int.h"
#include "core/dtype.h"

sr_err
sr__accum_init(sr_accum *a, int dtype, uint64_t elems, uint64_t nrows, int R, int64_t step)
{
    if (!sr_dtype_is_float(dtype) || R < 1 || nrows == 0 || elems % nrows != 0) {
        return sr_fail(SR_EINVAL, "accumulator: bad dtype %d, R %d or rows %llu", dtype, R,
                       (unsigned long long)nrows);
    }
    memset(a, 0, sizeof(*a));
    a->dtype = dtype;
    a->elems = elems;
    a->nrows = nrows;
    a->row_elems = elems / nrows;
    a->R = R;
    a->cap = R;
    a->step = step;
    if ((a->contrib = calloc((size_t)R, sizeof(*a->contrib))) == NULL) {
        return sr_fail(SR_ENOMEM, "accumulator: %d contributions", R);
    }
    return SR_OK;
}

void
sr__accum_destroy(sr_accum *a)
{
    if (a == NULL) {
        return;
    }
    if (!a->sum_ext) {
        free(a->sum);
    }
    free(a->row_count);
    free(a->touched);
    free(a->contrib);
    free(a->order);
    for (int i = 0; a->kept != NULL && i < a->cap; i++) {
        free(a->kept[i].data);
        free(a->kept[i].idx);
    }
    free(a->kept);
    free(a->keys);
    memset(a, 0, sizeof(*a));
}

void
sr__accum_set_rules(sr_accum *a, int share, int deterministic)
{
    a->share = share > 0 ? share : 0;
    a->deterministic = deterministic != 0;
}

/* The sums are allocated on first use, zero-filled. */
static sr_err
ensure_sum(sr_accum *a)
{
    if (a->sum == NULL) {
        size_t bytes = (size_t)a->elems * sr_dtype_size(a->dtype);
        if ((a->sum = calloc(1, bytes ? bytes : 1)) == NULL) {
            return sr_fail(SR_ENOMEM, "accumulator: %zu bytes", bytes);
        }
    }
    return SR_OK;
}

static void sum_kept(sr_accum *a);
static void sumsq_at_take(sr_accum *a);

/* The take: later pushes for this step are stale from now on. */
static void
take(sr_accum *a)
{
    if (a->deterministic) {
        sum_kept(a);
    }
    if (a->sumsq_on && !a->sumsq_done) {
        sumsq_at_take(a);
    }
    a->taken = 1;
    a->step++;
}

static void
record(sr_accum *a, int64_t local_step, int32_t task, int absent)
{
    a->contrib[a->count].task_index = task;
    a->contrib[a->count].absent = absent;
    a->contrib[a->count].local_step = local_step;
    a->nabsent += absent;
    a->count++;
    if (a->count >= a->R) {
        take(a);
    }
}

static int
is_stale(const sr_accum *a, int64_t local_step)
{
    return a->taken || local_step != a->step;
}

/* The task has given its share of the open step already. */
static int
over_share(const sr_accum *a, int32_t task)
{
    int n = 0;
    for (int i = 0; a->share > 0 && i < a->count; i++) {
        n += a->contrib[i].task_index == task;
    }
    return a->share > 0 && n >= a->share;
}

/* Room for R kept gradients, and in kept[count] for `bytes` of values and
 * n indices (idx_n 0: a dense gradient). */
static sr_err
kept_reserve(sr_accum *a, size_t bytes, uint64_t idx_n)
{
    sr_kept *k;

    if (a->kept == NULL) {
        a->kept = calloc((size_t)a->cap, sizeof(*a->kept));
        a->keys = calloc((size_t)a->cap, sizeof(*a->keys));
        if (a->kept == NULL || a->keys == NULL) {
            free(a->kept);
            free(a->keys);
            a->kept = NULL;
            a->keys = NULL;
            return sr_fail(SR_ENOMEM, "accumulator: %d kept gradients", a->R);
        }
    }
    k = &a->kept[a->count];
    if (k->data_cap < bytes || k->data == NULL) {
        void *p = realloc(k->data, bytes ? bytes : 1);
        if (p == NULL) {
            return sr_fail(SR_ENOMEM, "accumulator: %zu bytes to keep a gradient", bytes);
        }
        k->data = p;
        k->data_cap = bytes;
    }
    if (k->idx_cap < idx_n) {
        int64_t *p = realloc(k->idx, (size_t)idx_n * sizeof(*p));
        if (p == NULL) {
            return sr_fail(SR_ENOMEM, "accumulator: %llu row indices to keep",
                           (unsigned long long)idx_n);
        }
        k->idx = p;
        k->idx_cap = (size_t)idx_n;
    }
    return SR_OK;
}

/* The CPU's vector width for the loops over a gradient: where it has AVX2,
 * the same loops compiled for 256-bit vectors (GCC 12 at -O3 without it
 * uses 128-bit SSE2).  The adds are the same operations in the same order
 * (elementwise; -std=c11 fuses no multiply-add), so the same bits either
 * way; a scan gives the same answer.  Measured on this machine's EPYC
 * (a /tmp program, 50 KiB in cache): the non-finite scan 15-18 -> 84-88 GB/s
 * for float32, 15 -> 43-52 GB/s for float64. */
#if defined(__x86_64__) || defined(__i386__)
#define SR_WIDE      1
#define SR_WIDE_ATTR __attribute__((target("avx2")))
#else
#define SR_WIDE 0
#define SR_WIDE_ATTR
#endif

static int
wide_ok(void)
{
    return SR_WIDE && __builtin_cpu_supports("avx2");
}

/* add_<dtype>[_wide]: dst += src.  nonfinite_<dtype>[_wide]: any NaN or
 * Inf, with no early exit (the loop vectorises and costs one read). */
#define SR_DEFINE_GRAD_LOOPS(T, SUF, W, ATTR)                                         \
    ATTR static void add_##SUF##W(T *restrict dst, const T *restrict src, uint64_t n) \
    {                                                                                 \
        for (uint64_t i = 0; i < n; i++) {                                            \
            dst[i] += src[i];                                                         \
        }                                                                             \
    }                                                                                 \
    ATTR static int nonfinite_##SUF##W(const T *p, uint64_t n)                        \
    {                                                                                 \
        int bad = 0;                                                                  \
        for (uint64_t i = 0; i < n; i++) {                                            \
            bad |= !isfinite(p[i]);                                                   \
        }                                                                             \
        return bad;                                                                   \
    }

SR_DEFINE_GRAD_LOOPS(float, f32, , )
SR_DEFINE_GRAD_LOOPS(double, f64, , )
SR_DEFINE_GRAD_LOOPS(float, f32, _wide, SR_WIDE_ATTR)
SR_DEFINE_GRAD_LOOPS(double, f64, _wide, SR_WIDE_ATTR)

static void
add_values(int dtype, void *dst, const void *src, uint64_t n)
{
    int wide = wide_ok();
    if (dtype == SR_FLOAT32) {
        (wide ? add_f32_wide : add_f32)(dst, src, n);
    } else {
        (wide ? add_f64_wide : add_f64)(dst, src, n);
    }
}

int
sr__nonfinite(int dtype, const void *p, uint64_t n)
{
    int wide = wide_ok();
    if (dtype == SR_FLOAT32) {
        return (wide ? nonfinite_f32_wide : nonfinite_f32)(p, n);
    }
    if (dtype == SR_FLOAT64) {
        return (wide ? nonfinite_f64_wide : nonfinite_f64)(p, n);
    }
    return 0;
}

/* issue 25: the sum of the squares of sum / div, one pass that may also
 * form the sums: s = dst[i] (SQ_READ), src[i] (SQ_COPY) or dst[i] + src[i]
 * (SQ_ADD), stored, and s * s added up in double; the total is divided by
 * div * div at the end (no division in the loop, which is the last push's
 * add: it stays about as fast as the add alone).  Eight partial sums
 * (element index mod 8 over blocks of 8) added in lane order, then the
 * tail: the loop vectorises, and the three forms give the same bits for
 * the same sums, so a take that reads its sums once more agrees with one
 * whose last add summed them (and the chaos verifier with both).  Where
 * the CPU has AVX2 the same loop runs on 256-bit vectors: the same
 * operations in the same order (-std=c11 fuses no multiply-add), so the
 * same bits. */
enum { SQ_READ = 0, SQ_COPY = 1, SQ_ADD = 2 };

#define SR_SUMSQ_LOOP(T, HOW)                                                                     \
    {                                                                                             \
        double   acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, total = 0;                                    \
        uint64_t i = 0;                                                                           \
        for (; i + 8 <= n; i += 8) {                                                              \
            for (int k = 0; k < 8; k++) {                                                         \
                uint64_t j = i + (uint64_t)k;                                                     \
                T        s = HOW == SQ_READ ? dst[j] : HOW == SQ_COPY ? src[j] : dst[j] + src[j]; \
                if (HOW != SQ_READ) {                                                             \
                    dst[j] = s;                                                                   \
                }                                                                                 \
                acc[k] += (double)s * (double)s;                                                  \
            }                                                                                     \
        }                                                                                         \
        for (int k = 0; k < 8; k++) {                                                             \
            total += acc[k];                                                                      \
        }                                                                                         \
        for (; i < n; i++) {                                                                      \
            T s = HOW == SQ_READ ? dst[i] : HOW == SQ_COPY ? src[i] : dst[i] + src[i];            \
            if (HOW != SQ_READ) {                                                                 \
                dst[i] = s;                                                                       \
            }                                                                                     \
            total += (double)s * (double)s;                                                       \
        }                                                                                         \
        return total;                                                                             \
    }

/* One function per dtype, form and width. */
#define SR_DEFINE_SUMSQ_FORM(T, SUF, HOW, FORM, W, ATTR)                                        \
    ATTR static double sq_##FORM##_##SUF##W(T *restrict dst, const T *restrict src, uint64_t n) \
        SR_SUMSQ_LOOP(T, HOW)

#define SR_DEFINE_SUMSQ(T, SUF)                                                           \
    SR_DEFINE_SUMSQ_FORM(T, SUF, SQ_READ, read, , )                                       \
    SR_DEFINE_SUMSQ_FORM(T, SUF, SQ_COPY, copy, , )                                       \
    SR_DEFINE_SUMSQ_FORM(T, SUF, SQ_ADD, add, , )                                         \
    SR_DEFINE_SUMSQ_FORM(T, SUF, SQ_READ, read, _wide, SR_WIDE_ATTR)                      \
    SR_DEFINE_SUMSQ_FORM(T, SUF, SQ_COPY, copy, _wide, SR_WIDE_ATTR)                      \
    SR_DEFINE_SUMSQ_FORM(T, SUF, SQ_ADD, add, _wide, SR_WIDE_ATTR)                        \
    static double sumsq_##SUF(T *dst, const T *src, int how, int wide, uint64_t n)        \
    {                                                                                     \
        if (how == SQ_READ) {                                                             \
            return wide ? sq_read_##SUF##_wide(dst, src, n) : sq_read_##SUF(dst, src, n); \
        }                                                                                 \
        if (how == SQ_COPY) {                                                             \
            return wide ? sq_copy_##SUF##_wide(dst, src, n) : sq_copy_##SUF(dst, src, n); \
        }                                                                                 \
        return wide ? sq_add_##SUF##_wide(dst, src, n) : sq_add_##SUF(dst, src, n);       \
    }

SR_DEFINE_SUMSQ(float, f32)
SR_DEFINE_SUMSQ(double, f64)

static double
sumsq_values(int dtype, void *dst, const void *src, int how, double div, uint64_t n)
{
    int    wide = wide_ok();
    double t =
        dtype == SR_FLOAT32 ? sumsq_f32(dst, src, how, wide, n) : sumsq_f64(dst, src, how, wide, n);
    return t / (div * div);
}

/* Form the sums from the step's last present dense gradient (a copy when
 * it is the only one, else an add), with the squares when asked. */
static void
add_last(sr_accum *a, const void *grad, int first, int present)
{
    if (a->sumsq_on) {
        a->sumsq = sumsq_values(a->dtype, a->sum, grad, first ? SQ_COPY : SQ_ADD, (double)present,
                                a->elems);
        a->sumsq_done = 1;
    } else if (first) {
        memcpy(a->sum, grad, (size_t)a->elems * sr_dtype_size(a->dtype));
    } else {
        add_values(a->dtype, a->sum, grad, a->elems);
    }
}

sr_err
sr__accum_push_dense(sr_accum *a, const void *grad, int64_t local_step, int32_t task,
                     sr_accum_outcome *outcome)
{
    size_t bytes = (size_t)a->elems * sr_dtype_size(a->dtype);
    sr_err rc;

    if (is_stale(a, local_step)) {
        *outcome = SR_ACC_STALE;
        return SR_OK;
    }
    if (over_share(a, task)) {
        *outcome = SR_ACC_OVER_SHARE;
        return SR_OK;
    }
    if (a->mode == SR_ACC_SPARSE) {
        return sr_fail(SR_EINVAL, "variable receives sparse gradients this step; dense refused");
    }
    if ((rc = ensure_sum(a)) != SR_OK) {
        return rc;
    }
    if (a->deterministic) {
        if ((rc = kept_reserve(a, bytes, 0)) != SR_OK) {
            return rc;
        }
        if (bytes > 0) {
            memcpy(a->kept[a->count].data, grad, bytes);
        }
        a->kept[a->count].n = 0;
    } else if (a->count + 1 >= a->R) { /* the last: record() takes it */
        add_last(a, grad, a->count == a->nabsent, a->count - a->nabsent + 1);
    } else if (a->count == a->nabsent) { /* the first present gradient */
        memcpy(a->sum, grad, bytes);
    } else {
        add_values(a->dtype, a->sum, grad, a->elems);
    }
    a->mode = SR_ACC_DENSE;
    record(a, local_step, task, 0);
    *outcome = SR_ACC_ACCEPTED;
    return SR_OK;
}

typedef struct {
    uint64_t row;
    uint64_t pos;
} row_pos;

static int
cmp_row_pos(const void *x, const void *y)
{
    const row_pos *a = x, *b = y;
    if (a->row != b->row) {
        return a->row < b->row ? -1 : 1;
    }
    return a->pos < b->pos ? -1 : (a->pos > b->pos);
}

static sr_err
ensure_sparse(sr_accum *a, uint64_t n)
{
    sr_err rc;

    if ((rc = ensure_sum(a)) != SR_OK) {
        return rc;
    }
    if (a->row_count == NULL) {
        a->row_count = calloc((size_t)a->nrows, sizeof(*a->row_count));
        a->touched = calloc((size_t)a->nrows, sizeof(*a->touched));
        if (a->row_count == NULL || a->touched == NULL) {
            return sr_fail(SR_ENOMEM, "sparse accumulator: %llu rows",
                           (unsigned long long)a->nrows);
        }
    }
    if (a->order_cap < n) {
        row_pos *p = realloc(a->order, (size_t)n * sizeof(row_pos));
        if (p == NULL) {
            return sr_fail(SR_ENOMEM, "sparse accumulator: %llu rows scratch",
                           (unsigned long long)n);
        }
        a->order = (uint64_t *)p;
        a->order_cap = (size_t)n;
    }
    return SR_OK;
}

/* Add n rows at idx (checked) into the sums, in row order then position,
 * counting each row once per gradient.  The scratch holds n entries. */
static void
sparse_add(sr_accum *a, const int64_t *idx, const void *rows, uint64_t n)
{
    size_t   row_bytes = (size_t)a->row_elems * sr_dtype_size(a->dtype);
    row_pos *ord = (row_pos *)a->order;

    if (a->sum_dirty) {
        /* A dense step left its sums behind; sparse rows add into zeros. */
        memset(a->sum, 0, (size_t)a->elems * sr_dtype_size(a->dtype));
        a->sum_dirty = 0;
    }
    for (uint64_t i = 0; i < n; i++) {
        ord[i].row = (uint64_t)idx[i];
        ord[i].pos = i;
    }
    if (n > 1) { /* an empty push (a partition no row fell into) has no scratch */
        qsort(ord, (size_t)n, sizeof(*ord), cmp_row_pos);
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = ord[i].row;
        if (i == 0 || ord[i - 1].row != r) {
            if (a->row_count[r] == 0) {
                a->touched[a->ntouched++] = r;
            }
            a->row_count[r]++;
        }
        add_values(a->dtype, (char *)a->sum + r * row_bytes,
                   (const char *)rows + ord[i].pos * row_bytes, a->row_elems);
    }
}

sr_err
sr__accum_push_sparse(sr_accum *a, const int64_t *idx, const void *rows, uint64_t n,
                      int64_t local_step, int32_t task, sr_accum_outcome *outcome)
{
    size_t row_bytes = (size_t)a->row_elems * sr_dtype_size(a->dtype);
    sr_err rc;

    for (uint64_t i = 0; i < n; i++) {
        if (idx[i] < 0 || (uint64_t)idx[i] >= a->nrows) {
            return sr_fail(SR_EINVAL, "sparse row index %lld out of range [0, %llu) at %llu",
                           (long long)idx[i], (unsigned long long)a->nrows, (unsigned long long)i);
        }
    }
    if (is_stale(a, local_step)) {
        *outcome = SR_ACC_STALE;
        return SR_OK;
    }
    if (over_share(a, task)) {
        *outcome = SR_ACC_OVER_SHARE;
        return SR_OK;
    }
    if (a->mode == SR_ACC_DENSE) {
        return sr_fail(SR_EINVAL, "variable receives dense gradients this step; sparse refused");
    }
    if ((rc = ensure_sparse(a, n)) != SR_OK) {
        return rc;
    }
    if (a->deterministic) {
        sr_kept *k;
        if ((rc = kept_reserve(a, (size_t)n * row_bytes, n)) != SR_OK) {
            return rc;
        }
        k = &a->kept[a->count];
        if (n > 0) {
            memcpy(k->idx, idx, (size_t)n * sizeof(*idx));
            memcpy(k->data, rows, (size_t)n * row_bytes);
        }
        k->n = n;
    } else {
        sparse_add(a, idx, rows, n);
    }
    a->mode = SR_ACC_SPARSE;
    record(a, local_step, task, 0);
    *outcome = SR_ACC_ACCEPTED;
    return SR_OK;
}

/* The deterministic take: the kept gradients summed in task order, arrival
 * order within a task, and contrib put in that order.  Every buffer it
 * needs was reserved by the pushes. */
static int
cmp_key(const void *x, const void *y)
{
    const sr_contrib_key *a = x, *b = y;
    if (a->task_index != b->task_index) {
        return a->task_index < b->task_index ? -1 : 1;
    }
    return a->pos < b->pos ? -1 : (a->pos > b->pos);
}

static void
sum_kept(sr_accum *a)
{
    sr_contrib_key *keys = a->keys;

    /* count == R, or more when R was lowered during the step (sr__accum_set_replicas). */
    for (int i = 0; i < a->count; i++) {
        keys[i] = (sr_contrib_key){a->contrib[i].local_step, a->contrib[i].task_index, i,
                                   a->contrib[i].absent};
    }
    qsort(keys, (size_t)a->count, sizeof(*keys), cmp_key);
    int npresent = a->count - a->nabsent;
    for (int i = 0, present = 0; i < a->count; i++) {
        const sr_kept *k = &a->kept[keys[i].pos];
        int            absent = keys[i].absent;
        if (absent || a->mode == SR_ACC_NONE) {
            /* nothing to add */
        } else if (a->mode == SR_ACC_SPARSE) {
            sparse_add(a, k->idx, k->data, k->n);
        } else if (present + 1 == npresent) {
            add_last(a, k->data, present == 0, npresent);
        } else if (present == 0) {
            memcpy(a->sum, k->data, (size_t)a->elems * sr_dtype_size(a->dtype));
        } else {
            add_values(a->dtype, a->sum, k->data, a->elems);
        }
        present += !absent;
        a->contrib[i].task_index = keys[i].task_index;
        a->contrib[i].absent = absent;
        a->contrib[i].local_step = keys[i].local_step;
    }
}

sr_err
sr__accum_push_absent(sr_accum *a, int64_t local_step, int32_t task, sr_accum_outcome *outcome)
{
    sr_err rc;

    if (is_stale(a, local_step)) {
        *outcome = SR_ACC_STALE;
        return SR_OK;
    }
    if (over_share(a, task)) {
        *outcome = SR_ACC_OVER_SHARE;
        return SR_OK;
    }
    if (a->deterministic && (rc = kept_reserve(a, 0, 0)) != SR_OK) {
        return rc;
    }
    record(a, local_step, task, 1);
    *outcome = SR_ACC_ACCEPTED;
    return SR_OK;
}

int
sr__accum_divisor(const sr_accum *a)
{
    return a->count - a->nabsent;
}

double
sr__accum_row_divisor(const sr_accum *a, uint64_t r, int sparse_mean)
{
    return sparse_mean == SR_SPARSE_MEAN_PER_REPLICA ? (double)sr__accum_divisor(a)
                                                     : (double)a->row_count[r];
}

void
sr__accum_set_sumsq(sr_accum *a, int on, int sparse_mean)
{
    a->sumsq_on = on != 0;
    a->sparse_mean = sparse_mean;
}

double
sr__accum_sumsq(const sr_accum *a)
{
    return a->sumsq_on && a->taken ? a->sumsq : 0;
}

/* The squares when no add formed them: a dense take whose last gradient
 * added nothing reads its sums once more; a sparse one reads the touched
 * rows (only they are applied), each by its divisor. */
static void
sumsq_at_take(sr_accum *a)
{
    size_t row_bytes = (size_t)a->row_elems * sr_dtype_size(a->dtype);

    a->sumsq = 0;
    if (a->mode == SR_ACC_DENSE) {
        a->sumsq =
            sumsq_values(a->dtype, a->sum, NULL, SQ_READ, (double)sr__accum_divisor(a), a->elems);
    }
    for (uint64_t i = 0; a->mode == SR_ACC_SPARSE && i < a->ntouched; i++) {
        uint64_t r = a->touched[i];
        a->sumsq += sumsq_values(a->dtype, (char *)a->sum + r * row_bytes, NULL, SQ_READ,
                                 sr__accum_row_divisor(a, r, a->sparse_mean), a->row_elems);
    }
    a->sumsq_done = 1;
}

int
sr__accum_would_accept(const sr_accum *a, int64_t local_step, int32_t task, int mode, int *over)
{
    if (is_stale(a, local_step)) {
        return 0;
    }
    if (over_share(a, task)) {
        if (over != NULL) {
            *over = 1;
        }
        return 0;
    }
    return a->mode == SR_ACC_NONE || a->mode == mode ? 1 : -1;
}

/* Room for r entries in contrib (and kept, keys once used); new ones zeroed. */
static sr_err
grow_room(sr_accum *a, int r)
{
    sr_contrib *c = realloc(a->contrib, (size_t)r * sizeof(*c));
    if (c == NULL) {
        return sr_fail(SR_ENOMEM, "accumulator: %d contributions", r);
    }
    a->contrib = c;
    memset(c + a->cap, 0, (size_t)(r - a->cap) * sizeof(*c));
    if (a->kept != NULL) {
        sr_kept        *k = realloc(a->kept, (size_t)r * sizeof(*k));
        sr_contrib_key *y;
        if (k == NULL) {
            return sr_fail(SR_ENOMEM, "accumulator: %d kept gradients", r);
        }
        a->kept = k;
        memset(k + a->cap, 0, (size_t)(r - a->cap) * sizeof(*k));
        if ((y = realloc(a->keys, (size_t)r * sizeof(*y))) == NULL) {
            /* kept has grown, the cap not yet: its new entries are never read. */
            return sr_fail(SR_ENOMEM, "accumulator: %d sort keys", r);
        }
        a->keys = y;
    }
    a->cap = r;
    return SR_OK;
}

sr_err
sr__accum_set_replicas(sr_accum *a, int r, int *took)
{
    sr_err rc;

    if (r < 1) {
        return sr_fail(SR_EINVAL, "accumulator: %d replicas to aggregate (at least 1)", r);
    }
    if (r > a->cap && (rc = grow_room(a, r)) != SR_OK) {
        return rc;
    }
    a->R = r;
    *took = 0;
    if (!a->taken && a->count > 0 && a->count >= r) {
        take(a);
        *took = 1;
    }
    return SR_OK;
}

void
sr__accum_set_sum(sr_accum *a, void *sum)
{
    if (!a->sum_ext) {
        free(a->sum);
    }
    a->sum = sum;
    a->sum_ext = sum != NULL;
    a->sum_dirty = sum != NULL; /* calloc'd sums start at zero */
}

void
sr__accum_reset(sr_accum *a)
{
    if (a->mode == SR_ACC_SPARSE) {
        size_t row_bytes = (size_t)a->row_elems * sr_dtype_size(a->dtype);
        for (uint64_t i = 0; i < a->ntouched; i++) {
            uint64_t r = a->touched[i];
            memset((char *)a->sum + r * row_bytes, 0, row_bytes);
            a->row_count[r] = 0;
        }
        a->ntouched = 0;
    } else if (a->mode == SR_ACC_DENSE) {
        /* The next dense step overwrites the sums; a sparse one clears them. */
        a->sum_dirty = 1;
    }
    a->mode = SR_ACC_NONE;
    a->count = 0;
    a->nabsent = 0;
    a->taken = 0;
    a->sumsq_done = 0;
    a->sumsq = 0;
}
