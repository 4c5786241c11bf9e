/*
 * Optimizer kernels: average + apply fused into one pass over the variable
 * and its slots, written so GCC vectorises them at -O3 (restrict pointers,
 * no calls in the loop but sqrt).  Arithmetic happens in the variable's own
 * dtype, like TensorFlow's kernels; hyper-parameters are cast once.
 *
 *   sgd       var -= lr * g
 *   momentum  accum = momentum * accum + g;  var -= lr * accum
 *   adam      m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
 *             var -= lr_t m / (sqrt(v) + eps),  lr_t = lr sqrt(1 - b2^t) / (1 - b1^t)
 *   ema       shadow -= (1 - decay) (shadow - var)
 *
 * with g = sum / div (div = R less the absent (non-finite) gradients, or the
 * per-row count for sparse rows).
 */
#include <math.h>
#include <string.h>

#include "coordinator/coord_int.h"
#include "core/dtype.h"

int
sr__optim_slots(const sr_optim *o, const char *names[3])
{
    int n = 0;
    if (o->kind == SR_OPT_MOMENTUM) {
        names[n++] = "momentum";
    } else if (o->kind == SR_OPT_ADAM) {
        names[n++] = "adam_m";
        names[n++] = "adam_v";
    }
    if (o->ema) {
        names[n++] = "ema";
    }
    return n;
}

sr_err
sr__optim_parse(const char *s, int *kind)
{
    if (strcmp(s, "sgd") == 0) {
        *kind = SR_OPT_SGD;
    } else if (strcmp(s, "momentum") == 0) {
        *kind = SR_OPT_MOMENTUM;
    } else if (strcmp(s, "adam") == 0) {
        *kind = SR_OPT_ADAM;
    } else {
        return sr_fail(SR_EINVAL, "unknown optimizer '%s' (sgd|momentum|adam)", s);
    }
    return SR_OK;
}

const char *
sr__optim_name(int kind)
{
    switch (kind) {
    case SR_OPT_SGD:
        return "sgd";
    case SR_OPT_MOMENTUM:
        return "momentum";
    case SR_OPT_ADAM:
        return "adam";
    default:
        return "?";
    }
}

static double
adam_lr_t(const sr_optim *o, int64_t t)
{
    double b1t = pow(o->beta1, (double)t);
    double b2t = pow(o->beta2, (double)t);
    return o->lr * sqrt(1.0 - b2t) / (1.0 - b1t);
}

/* The update loops, once for all three forms: DST[i] = SRC[i] - step, with
 * SRC either DST itself (in place) or the previous value buffer (out of
 * place: the coordinator writes a new value next to one a pull or the async
 * writer still reads, instead of copying it first), and DST the value or the
 * sums themselves (the accumulator's memory becomes the value; sum[i] is
 * read before DST[i] is written).  Same arithmetic, same bits. */
#define SR_APPLY_LOOPS(T, SQRT, DST, SRC)                                \
    const T d = (T)div;                                                  \
    const T lr = (T)o->lr;                                               \
    if (o->kind == SR_OPT_SGD) {                                         \
        for (uint64_t i = 0; i < n; i++) {                               \
            DST[i] = SRC[i] - lr * (sum[i] / d);                         \
        }                                                                \
    } else if (o->kind == SR_OPT_MOMENTUM) {                             \
        const T mom = (T)o->momentum;                                    \
        for (uint64_t i = 0; i < n; i++) {                               \
            s1[i] = mom * s1[i] + sum[i] / d;                            \
            DST[i] = SRC[i] - lr * s1[i];                                \
        }                                                                \
    } else {                                                             \
        const T b1 = (T)o->beta1, b2 = (T)o->beta2, eps = (T)o->epsilon; \
        const T lrt = (T)adam_lr_t(o, t);                                \
        const T one = (T)1;                                              \
        for (uint64_t i = 0; i < n; i++) {                               \
            T g = sum[i] / d;                                            \
            s1[i] = b1 * s1[i] + (one - b1) * g;                         \
            s2[i] = b2 * s2[i] + (one - b2) * g * g;                     \
            DST[i] = SRC[i] - lrt * s1[i] / (SQRT(s2[i]) + eps);         \
        }                                                                \
    }

#define SR_DEFINE_APPLY(T, SUF, SQRT)                                                             \
    void sr__optim_apply_##SUF(const sr_optim *o, int64_t    t, T *restrict var,                  \
                               const T *restrict sum, double div, T *restrict s1, T *restrict s2, \
                               uint64_t n)                                                        \
    {                                                                                             \
        SR_APPLY_LOOPS(T, SQRT, var, var)                                                         \
    }                                                                                             \
    static void apply_from_##SUF(const sr_optim *o, int64_t t, T *restrict var,                   \
                                 const T *restrict src, const T *restrict sum, double div,        \
                                 T *restrict s1, T *restrict s2, uint64_t             n)          \
    {                                                                                             \
        SR_APPLY_LOOPS(T, SQRT, var, src)                                                         \
    }                                                                                             \
    static void apply_into_sum_##SUF(const sr_optim *o, int64_t    t, T *restrict sum,            \
                                     const T *restrict src, double div, T *restrict s1,           \
                                     T *restrict s2, uint64_t      n)                             \
    {                                                                                             \
        SR_APPLY_LOOPS(T, SQRT, sum, src)                                                         \
    }                                                                                             \
    void sr__ema_##SUF(double decay, T *restrict shadow, const T *restrict var, uint64_t n)       \
    {                                                                                             \
        const T k = (T)(1.0 - decay);                                                             \
        for (uint64_t i = 0; i < n; i++) {                                                        \
            shadow[i] -= k * (shadow[i] - var[i]);                                                \
        }                                                                                         \
    }

SR_DEFINE_APPLY(float, f32, sqrtf)
SR_DEFINE_APPLY(double, f64, sqrt)

static void
apply_range(const sr_optim *o, int64_t t, int dtype, void *var, const void *src, const void *sum,
            double div, void *s1, void *s2, uint64_t off, uint64_t n)
{
    if (src != NULL && dtype == SR_FLOAT32) {
        apply_from_f32(o, t, (float *)var + off, (const float *)src + off, (const float *)sum + off,
                       div, s1 ? (float *)s1 + off : NULL, s2 ? (float *)s2 + off : NULL, n);
    } else if (src != NULL) {
        apply_from_f64(o, t, (double *)var + off, (const double *)src + off,
                       (const double *)sum + off, div, s1 ? (double *)s1 + off : NULL,
                       s2 ? (double *)s2 + off : NULL, n);
    } else if (dtype == SR_FLOAT32) {
        sr__optim_apply_f32(o, t, (float *)var + off, (const float *)sum + off, div,
                            s1 ? (float *)s1 + off : NULL, s2 ? (float *)s2 + off : NULL, n);
    } else {
        sr__optim_apply_f64(o, t, (double *)var + off, (const double *)sum + off, div,
                            s1 ? (double *)s1 + off : NULL, s2 ? (double *)s2 + off : NULL, n);
    }
}

static void
mark_dirty(uint8_t *dirty, uint64_t chunk_elems, uint64_t off, uint64_t n)
{
    if (dirty == NULL || chunk_elems == 0 || n == 0) {
        return;
    }
    for (uint64_t c = off / chunk_elems; c <= (off + n - 1) / chunk_elems; c++) {
        dirty[c] = 1;
    }
}

void
sr__optim_apply_accum(const sr_optim *o, int64_t t, const sr_accum *a, void *var, void *s1,
                      void *s2, uint8_t *dirty, uint64_t chunk_elems, uint64_t elem_base)
{
    sr__optim_apply_accum_from(o, t, a, var, var, s1, s2, dirty, chunk_elems, elem_base);
}

void
sr__optim_apply_accum_from(const sr_optim *o, int64_t t, const sr_accum *a, void *var,
                           const void *src, void *s1, void *s2, uint8_t *dirty,
                           uint64_t chunk_elems, uint64_t elem_base)
{
    if (src == var) {
        src = NULL; /* in place */
    }
    if (a->mode == SR_ACC_DENSE && var == a->sum && src != NULL) {
        if (a->dtype == SR_FLOAT32) {
            apply_into_sum_f32(o, t, a->sum, src, (double)sr__accum_divisor(a), s1, s2, a->elems);
        } else {
            apply_into_sum_f64(o, t, a->sum, src, (double)sr__accum_divisor(a), s1, s2, a->elems);
        }
        mark_dirty(dirty, chunk_elems, elem_base, a->elems);
        return;
    }
    if (a->mode == SR_ACC_DENSE) {
        apply_range(o, t, a->dtype, var, src, a->sum, (double)sr__accum_divisor(a), s1, s2, 0,
                    a->elems);
        mark_dirty(dirty, chunk_elems, elem_base, a->elems);
        return;
    }
    if (src != NULL) { /* untouched rows keep their value */
        memcpy(var, src, (size_t)(a->elems * sr_dtype_size(a->dtype)));
    }
    for (uint64_t i = 0; i < a->ntouched; i++) {
        uint64_t r = a->touched[i];
        double   div = o->sparse_mean == SR_SPARSE_MEAN_PER_REPLICA ? (double)sr__accum_divisor(a)
                                                                    : (double)a->row_count[r];
        apply_range(o, t, a->dtype, var, NULL, a->sum, div, s1, s2, r * a->row_elems, a->row_elems);
        mark_dirty(dirty, chunk_elems, elem_base + r * a->row_elems, a->row_elems);
    }
}

int
sr__nonfinite(int dtype, const void *p, uint64_t n)
{
    int bad = 0;
    /* No early exit: the loop vectorises and costs one read of the data. */
    if (dtype == SR_FLOAT32) {
        const float *f = p;
        for (uint64_t i = 0; i < n; i++) {
            bad |= !isfinite(f[i]);
        }
    } else if (dtype == SR_FLOAT64) {
        const double *d = p;
        for (uint64_t i = 0; i < n; i++) {
            bad |= !isfinite(d[i]);
        }
    }
    return bad;
}
