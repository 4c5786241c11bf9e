/*
 * Optimizer kernels: average + apply fused into one pass over the variable
 * and its slots, written so GCC vectorises them at -O3 (restrict pointers,
 * no calls in the loop but sqrt; loop-invariant branches are unswitched).
 * Arithmetic happens in the variable's own dtype, like torch's and
 * TensorFlow's kernels; hyper-parameters are cast once.  The order of
 * operations is torch.optim's (1.13, single-tensor; docs/optimizers.md):
 *
 *   g         = sum / div, then * grad_scale (clipping), then + wd var
 *               (sgd, momentum, adam: L2 weight decay)
 *   sgd       var -= lr * g
 *   momentum  buf = momentum * buf + g;  var -= lr * buf
 *             nesterov: var -= lr * (g + momentum * buf)
 *   adam      m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g;
 *             var += (-lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 *   adamw     var *= 1 - lr wd first (decoupled), then adam without the L2
 *   ema       shadow -= (1 - decay) (shadow - var)
 *
 * with div = R less the absent (non-finite) gradients, or the per-row count
 * for sparse rows.  lr is the step's rate (sr__optim_at_step).
 */
#include <math.h>
#include <string.h>

#include "coordinator/coord_int.h"
#include "coordinator/lr_schedule.h"
#include "core/dtype.h"

int
sr__optim_slots(const sr_optim *o, const char *names[3])
{
    int n = 0;
    if (o->kind == SR_OPT_MOMENTUM) {
        names[n++] = "momentum";
    } else if (o->kind == SR_OPT_ADAM || o->kind == SR_OPT_ADAMW) {
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
    } else if (strcmp(s, "adamw") == 0) {
        *kind = SR_OPT_ADAMW;
    } else {
        return sr_fail(SR_EINVAL, "unknown optimizer '%s' (sgd|momentum|adam|adamw)", s);
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
    case SR_OPT_ADAMW:
        return "adamw";
    default:
        return "?";
    }
}

static sr_lr_sched
sched_of(const sr_optim *o)
{
    sr_lr_sched s = {.kind = o->lr_schedule,
                     .base = o->lr,
                     .warmup_steps = o->warmup_steps,
                     .decay_steps = o->decay_steps,
                     .lr_min = o->lr_min,
                     .step_every = o->step_every,
                     .step_gamma = o->step_gamma};
    return s;
}

double
sr__optim_lr_at(const sr_optim *o, int64_t step)
{
    sr_lr_sched s = sched_of(o);
    return sr__lr_at(&s, step);
}

sr_optim
sr__optim_at_step(const sr_optim *o, int64_t step, double sumsq)
{
    sr_optim r = *o;

    r.lr = sr__optim_lr_at(o, step);
    r.grad_scale = 1.0;
    if (o->clip_norm > 0) {
        /* torch.nn.utils.clip_grad_norm_: max_norm / (total_norm + 1e-6),
         * clamped at 1. */
        double coef = o->clip_norm / (sqrt(sumsq) + 1e-6);
        r.grad_scale = coef < 1.0 ? coef : 1.0;
    }
    return r;
}

sr_err
sr__optim_check(const sr_optim *o)
{
    sr_lr_sched s = sched_of(o);

    if (o->nesterov && o->kind != SR_OPT_MOMENTUM) {
        return sr_fail(SR_EINVAL,
                       "--nesterov applies to --optimizer momentum only (the "
                       "optimizer is %s)",
                       sr__optim_name(o->kind));
    }
    if (o->nesterov && !(o->momentum > 0)) {
        return sr_fail(SR_EINVAL, "--nesterov needs --momentum above 0 (as torch.optim.SGD)");
    }
    if (!(o->weight_decay >= 0) || !isfinite(o->weight_decay)) {
        return sr_fail(SR_EINVAL, "--weight-decay %g: must be a finite value >= 0",
                       o->weight_decay);
    }
    if (!(o->clip_norm >= 0) || !isfinite(o->clip_norm)) {
        return sr_fail(SR_EINVAL, "--clip-norm %g: must be a finite value >= 0 (0: off)",
                       o->clip_norm);
    }
    return sr__lr_check(&s);
}

static double
grad_scale(const sr_optim *o)
{
    return o->grad_scale > 0 ? o->grad_scale : 1.0;
}

/* a * b + c, rounded twice (plain) or once (fused, as torch's AVX2 kernels
 * compute add(x, alpha) and addcmul: vfmadd).  The kernels exist in both
 * forms and run the one torch itself runs on this CPU: fused where the CPU
 * has AVX2 and FMA, plain elsewhere, so a recipe gives torch.optim's bits
 * (docs/optimizers.md lists which combinations).  The choice is made once
 * per process (a constructor), so the coordinator and a verifier replaying
 * its steps on the same machine agree bit for bit.  -std=c11 keeps GCC
 * from fusing anything else (-ffp-contract=off). */
#define MADD_PLAIN(a, b, c)  ((a) * (b) + (c))
#define MADD_float(a, b, c)  __builtin_fmaf((a), (b), (c))
#define MADD_double(a, b, c) __builtin_fma((a), (b), (c))
#if defined(__x86_64__) || defined(__i386__)
#define SR_HAVE_FUSED 1
#define SR_FUSED_ATTR __attribute__((target("avx2,fma")))
#else
#define SR_HAVE_FUSED 0
#define SR_FUSED_ATTR
#endif

static int fused_kernels;

#if SR_HAVE_FUSED
__attribute__((constructor)) static void
detect_fused(void)
{
    __builtin_cpu_init();
    fused_kernels = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

int
sr__optim_set_fused(int on)
{
    int was = fused_kernels;
    if (on >= 0) {
        fused_kernels = on && SR_HAVE_FUSED;
    }
    return was;
}

/* The update loops, once for all three forms: DST[i] = the new value from
 * SRC[i], with SRC either DST itself (in place) or the previous value
 * buffer (out of place: the coordinator writes a new value next to one a
 * pull or the async writer still reads, instead of copying it first), and
 * DST the value or the sums themselves (the accumulator's memory becomes
 * the value; sum[i] and SRC[i] are read before DST[i] is written).  Same
 * arithmetic, same bits.  Clipping and adamw's decay multiply by exactly 1
 * when off (no change to any bit), so the only branch in a loop is the L2
 * term's, a loop invariant GCC unswitches: the loops stay vectorised.  Each line is one torch
 * tensor op (optim/sgd.py, adam.py, adamw.py of 1.13), MADD where torch's is a fused add(x,
 * alpha=a). */
#define SR_APPLY_LOOPS(T, SQRT, MADD, DST, SRC)                                 \
    const T   d = (T)div;                                                       \
    const T   nlr = (T)-o->lr;                                                  \
    const T   cs = (T)(o->clip_norm > 0 ? grad_scale(o) : 1.0);                 \
    const T   wd = (T)o->weight_decay;                                          \
    const int l2 = o->weight_decay != 0 && o->kind != SR_OPT_ADAMW;             \
    if (o->kind == SR_OPT_SGD) {                                                \
        for (uint64_t i = 0; i < n; i++) {                                      \
            T g = sum[i] / d;                                                   \
            g = g * cs; /* 1 without clipping: exact */                         \
            if (l2) {                                                           \
                g = MADD(wd, SRC[i], g);                                        \
            }                                                                   \
            DST[i] = MADD(nlr, g, SRC[i]);                                      \
        }                                                                       \
    } else if (o->kind == SR_OPT_MOMENTUM) {                                    \
        const T   mom = (T)o->momentum;                                         \
        const int nest = o->nesterov;                                           \
        for (uint64_t i = 0; i < n; i++) {                                      \
            T g = sum[i] / d;                                                   \
            g = g * cs; /* 1 without clipping: exact */                         \
            if (l2) {                                                           \
                g = MADD(wd, SRC[i], g);                                        \
            }                                                                   \
            T b = mom * s1[i]; /* buf.mul_(momentum).add_(g): two roundings */  \
            s1[i] = b + g;                                                      \
            DST[i] = MADD(nlr, nest ? MADD(mom, s1[i], g) : s1[i], SRC[i]);     \
        }                                                                       \
    } else {                                                                    \
        const T   b1 = (T)o->beta1, b2 = (T)o->beta2, eps = (T)o->epsilon;      \
        const T   c1 = (T)(1.0 - o->beta1), c2 = (T)(1.0 - o->beta2);           \
        const T   nss = (T)(-(o->lr / (1.0 - pow(o->beta1, (double)t))));       \
        const T   bc2s = (T)sqrt(1.0 - pow(o->beta2, (double)t));               \
        const int decoupled = o->kind == SR_OPT_ADAMW && o->weight_decay != 0;  \
        const T   keep = decoupled ? (T)(1.0 - o->lr * o->weight_decay) : (T)1; \
        for (uint64_t i = 0; i < n; i++) {                                      \
            T g = sum[i] / d;                                                   \
            T p = SRC[i];                                                       \
            g = g * cs; /* 1 without clipping: exact */                         \
            if (l2) {                                                           \
                g = MADD(wd, p, g);                                             \
            }                                                                   \
            p = p * keep; /* 1 unless adamw: exact */                           \
            s1[i] = MADD(c1, g, s1[i] * b1);                                    \
            s2[i] = MADD(c2 * g, g, s2[i] * b2);                                \
            DST[i] = p + nss * s1[i] / (SQRT(s2[i]) / bc2s + eps);              \
        }                                                                       \
    }

/* The three forms of one variant (plain or fused) of one dtype. */
#define SR_DEFINE_VARIANT(T, SUF, SQRT, MADD, V, ATTR)                                               \
    ATTR static void apply_in_##SUF##V(const sr_optim *o, int64_t    t, T *restrict var,             \
                                       const T *restrict sum, double div, T *restrict s1,            \
                                       T *restrict s2, uint64_t      n){SR_APPLY_LOOPS(                   \
        T, SQRT, MADD, var,                                                                          \
        var)} ATTR static void apply_from_##SUF##V(const sr_optim *o, int64_t t, T *restrict var,    \
                                                   const T *restrict src, const T *restrict sum,     \
                                                   double   div, T *restrict s1, T *restrict s2,     \
                                                   uint64_t n){SR_APPLY_LOOPS(                       \
        T, SQRT, MADD, var,                                                                          \
        src)} ATTR static void apply_into_sum_##SUF##V(const sr_optim *o, int64_t t,                 \
                                                       T *restrict sum, const T *restrict src,       \
                                                       double   div, T *restrict s1, T *restrict s2, \
                                                       uint64_t n)                                   \
    {                                                                                                \
        SR_APPLY_LOOPS(T, SQRT, MADD, sum, src)                                                      \
    }

#define SR_DEFINE_APPLY(T, SUF, SQRT)                                                              \
    SR_DEFINE_VARIANT(T, SUF, SQRT, MADD_PLAIN, _plain, )                                          \
    SR_DEFINE_VARIANT(T, SUF, SQRT, MADD_##T, _fused, SR_FUSED_ATTR)                               \
    void sr__optim_apply_##SUF(const sr_optim *o, int64_t t, T *var, const T *sum, double div,     \
                               T *s1, T *s2, uint64_t n)                                           \
    {                                                                                              \
        (fused_kernels ? apply_in_##SUF##_fused : apply_in_##SUF##_plain)(o, t, var, sum, div, s1, \
                                                                          s2, n);                  \
    }                                                                                              \
    static void apply_from_##SUF(const sr_optim *o, int64_t t, T *var, const T *src, const T *sum, \
                                 double div, T *s1, T *s2, uint64_t n)                             \
    {                                                                                              \
        (fused_kernels ? apply_from_##SUF##_fused : apply_from_##SUF##_plain)(o, t, var, src, sum, \
                                                                              div, s1, s2, n);     \
    }                                                                                              \
    static void apply_into_sum_##SUF(const sr_optim *o, int64_t t, T *sum, const T *src,           \
                                     double div, T *s1, T *s2, uint64_t n)                         \
    {                                                                                              \
        (fused_kernels ? apply_into_sum_##SUF##_fused                                              \
                       : apply_into_sum_##SUF##_plain)(o, t, sum, src, div, s1, s2, n);            \
    }                                                                                              \
    void sr__ema_##SUF(double decay, T *restrict shadow, const T *restrict var, uint64_t n)        \
    {                                                                                              \
        const T k = (T)(1.0 - decay);                                                              \
        for (uint64_t i = 0; i < n; i++) {                                                         \
            shadow[i] -= k * (shadow[i] - var[i]);                                                 \
        }                                                                                          \
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
        double   div = sr__accum_row_divisor(a, r, o->sparse_mean);
        apply_range(o, t, a->dtype, var, NULL, a->sum, div, s1, s2, r * a->row_elems, a->row_elems);
        mark_dirty(dirty, chunk_elems, elem_base + r * a->row_elems, a->row_elems);
    }
}
