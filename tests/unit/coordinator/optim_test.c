/* Optimizer kernels against hand-computed values (float64, so exact enough
 * to compare to 1e-12), sparse apply per row and per replica, EMA; issue
 * 25: adamw, nesterov, weight decay, clipping (the norm and the scale), the
 * step's learning rate, and sparse rows under every optimizer. */
#include "sr_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/coord_int.h"

static sr_optim
optim(int kind)
{
    sr_optim o;
    memset(&o, 0, sizeof(o));
    o.kind = kind;
    o.lr = 0.1;
    o.momentum = 0.9;
    o.beta1 = 0.9;
    o.beta2 = 0.999;
    o.epsilon = 1e-8;
    return o;
}

static void
test_optim_sgd_averages_then_steps(void **state)
{
    sr_optim o = optim(SR_OPT_SGD);
    double   var[2] = {1.0, -1.0};
    double   sum[2] = {0.5, 1.0}; /* two replicas: averages 0.25 and 0.5 */
    (void)state;

    sr__optim_apply_f64(&o, 1, var, sum, 2.0, NULL, NULL, 2);
    assert_near(var[0], 0.975, 1e-15);
    assert_near(var[1], -1.05, 1e-15);
}

static void
test_optim_momentum_accumulates(void **state)
{
    sr_optim o = optim(SR_OPT_MOMENTUM);
    double   var[1] = {1.0}, sum[1] = {0.5}, acc[1] = {0.5};
    (void)state;

    sr__optim_apply_f64(&o, 1, var, sum, 2.0, acc, NULL, 1);
    assert_near(acc[0], 0.7, 1e-15);  /* 0.9 * 0.5 + 0.25 */
    assert_near(var[0], 0.93, 1e-15); /* 1 - 0.1 * 0.7 */
}

static void
test_optim_adam_two_steps_with_bias_correction(void **state)
{
    sr_optim o = optim(SR_OPT_ADAM);
    double   var[1] = {1.0}, sum[1] = {0.5}, m[1] = {0}, v[1] = {0};
    (void)state;

    /* torch.optim.Adam's form: eps added to sqrt(v) / sqrt(1 - b2^t). */
    sr__optim_apply_f64(&o, 1, var, sum, 2.0, m, v, 1);
    assert_near(m[0], 0.025, 1e-15);
    assert_near(v[0], 6.25e-5, 1e-18);
    assert_near(var[0], 0.9000000039999998, 1e-15);
    sr__optim_apply_f64(&o, 2, var, sum, 2.0, m, v, 1);
    assert_near(var[0], 0.8000000080000004, 1e-15);
}

static void
sparse_setup(sr_accum *a)
{
    sr_accum_outcome out;
    const int64_t    i1[2] = {0, 1}, i2[1] = {1};
    const float      r1[2] = {1, 2}, r2[1] = {4};

    /* 3 rows x 1; R = 2: row 0 touched once, row 1 twice, row 2 never. */
    assert_sr_ok(sr__accum_init(a, SR_FLOAT32, 3, 3, 2, 0));
    assert_sr_ok(sr__accum_push_sparse(a, i1, r1, 2, 0, 0, &out));
    assert_sr_ok(sr__accum_push_sparse(a, i2, r2, 1, 0, 1, &out));
    assert_int_equal(a->taken, 1);
}

/* Issue 25, each against the formula of torch.optim (1.13) in double. */
static void
test_optim_weight_decay_is_l2_for_sgd_and_adam(void **state)
{
    sr_optim o = optim(SR_OPT_SGD);
    double   var[1] = {2.0}, sum[1] = {0.5};
    double   m[1] = {0}, v[1] = {0};
    (void)state;

    o.weight_decay = 0.1; /* g = 0.5 + 0.1 * 2 = 0.7 */
    sr__optim_apply_f64(&o, 1, var, sum, 1.0, NULL, NULL, 1);
    assert_near(var[0], 2.0 - 0.1 * 0.7, 1e-15);

    o = optim(SR_OPT_ADAM);
    o.weight_decay = 0.1;
    var[0] = 2.0;
    sr__optim_apply_f64(&o, 1, var, sum, 1.0, m, v, 1);
    double g = 0.5 + 0.1 * 2.0;
    double mm = (1 - 0.9) * g, vv = (1 - 0.999) * g * g;
    assert_near(m[0], mm, 1e-15);
    assert_near(v[0], vv, 1e-15);
    assert_near(var[0], 2.0 - (0.1 / (1 - 0.9)) * mm / (sqrt(vv) / sqrt(1 - 0.999) + 1e-8), 1e-15);
}

static void
test_optim_adamw_decays_the_variable_first(void **state)
{
    sr_optim o = optim(SR_OPT_ADAMW);
    double   var[1] = {2.0}, sum[1] = {0.5}, m[1] = {0}, v[1] = {0};
    double   want = 2.0, mm = 0, vv = 0;
    (void)state;

    o.weight_decay = 0.01;
    for (int t = 1; t <= 3; t++) {
        sr__optim_apply_f64(&o, t, var, sum, 1.0, m, v, 1);
        want *= 1 - 0.1 * 0.01; /* decoupled: the gradient is untouched */
        mm = mm * 0.9 + (1 - 0.9) * 0.5;
        vv = vv * 0.999 + (1 - 0.999) * 0.5 * 0.5;
        want += -(0.1 / (1 - pow(0.9, t))) * mm / (sqrt(vv) / sqrt(1 - pow(0.999, t)) + 1e-8);
        assert_near(m[0], mm, 1e-15);
        assert_near(v[0], vv, 1e-15);
        assert_near(var[0], want, 1e-14);
    }
    /* Without weight decay adamw is adam. */
    double   a[1] = {1.0}, b[1] = {1.0}, ma[1] = {0}, va[1] = {0}, mb[1] = {0}, vb[1] = {0};
    sr_optim adam = optim(SR_OPT_ADAM);
    o.weight_decay = 0;
    sr__optim_apply_f64(&o, 1, a, sum, 1.0, ma, va, 1);
    sr__optim_apply_f64(&adam, 1, b, sum, 1.0, mb, vb, 1);
    assert_memory_equal(a, b, sizeof(a));
}

static void
test_optim_nesterov_looks_ahead(void **state)
{
    sr_optim o = optim(SR_OPT_MOMENTUM);
    double   var[1] = {1.0}, sum[1] = {0.5}, buf[1] = {0.5};
    (void)state;

    o.nesterov = 1; /* buf = 0.9 * 0.5 + 0.5 = 0.95; var -= 0.1 * (0.5 + 0.9 * 0.95) */
    sr__optim_apply_f64(&o, 2, var, sum, 1.0, buf, NULL, 1);
    assert_near(buf[0], 0.95, 1e-15);
    assert_near(var[0], 1.0 - 0.1 * (0.5 + 0.9 * 0.95), 1e-15);
}

static void
test_optim_step_rate_and_clipping_factor(void **state)
{
    sr_optim o = optim(SR_OPT_SGD);
    sr_optim s;
    (void)state;

    o.lr_schedule = 1; /* SR_LR_STEP */
    o.step_every = 2;
    o.step_gamma = 0.5;
    s = sr__optim_at_step(&o, 3, 100.0);
    assert_near(s.lr, 0.05, 1e-17); /* the rate of step 3: one halving */
    assert_near(s.grad_scale, 1.0, 0);
    o.clip_norm = 1.0; /* norm 10: 1 / (10 + 1e-6) */
    s = sr__optim_at_step(&o, 0, 100.0);
    assert_near(s.lr, 0.1, 0);
    assert_near(s.grad_scale, 1.0 / (10.0 + 1e-6), 1e-17);
    s = sr__optim_at_step(&o, 0, 0.25); /* norm 0.5 <= 1: untouched */
    assert_near(s.grad_scale, 1.0, 0);

    /* The scale multiplies the averaged gradient before anything else. */
    double var[1] = {1.0}, sum[1] = {4.0};
    s = sr__optim_at_step(&o, 0, 4.0); /* averaged g = 2 (div 2): norm 2 */
    s.grad_scale = 0.5;
    sr__optim_apply_f64(&s, 1, var, sum, 2.0, NULL, NULL, 1);
    assert_near(var[0], 1.0 - 0.1 * (2.0 * 0.5), 1e-15);
}

/* Sparse rows under every optimizer: only the touched rows of the
 * variable and of its slots change (torch.optim.SparseAdam, TF's sparse
 * apply); weight decay, adamw's included, reaches the touched rows only. */
static void
test_optim_sparse_touches_only_rows_under_every_optimizer(void **state)
{
    (void)state;
    for (int k = SR_OPT_SGD; k <= SR_OPT_ADAMW; k++) {
        sr_optim o = optim(k);
        sr_accum a;
        float    var[3] = {10, 10, 10}, s1[3] = {0.5f, 0.5f, 0.5f}, s2[3] = {0.25f, 0.25f, 0.25f};
        o.weight_decay = 0.01;
        o.nesterov = k == SR_OPT_MOMENTUM;
        o.clip_norm = 1.0;
        o.grad_scale = 0.25;
        sparse_setup(&a);
        sr__optim_apply_accum(&o, 1, &a, var, k == SR_OPT_SGD ? NULL : s1,
                              k >= SR_OPT_ADAM ? s2 : NULL, NULL, 0, 0);
        assert_true(var[0] != 10.0f);
        assert_true(var[1] != 10.0f);
        assert_near(var[2], 10.0f, 0);
        if (k != SR_OPT_SGD) {
            assert_true(s1[0] != 0.5f && s1[1] != 0.5f);
            assert_near(s1[2], 0.5f, 0);
        }
        if (k >= SR_OPT_ADAM) {
            assert_near(s2[2], 0.25f, 0);
        }
        sr__accum_destroy(&a);
    }
}

/* The fused kernels (one rounding for a * b + c, as torch's AVX2 code) and
 * the plain ones compute the same formula: within a few ulps of each other
 * after 20 adamw and nesterov steps with weight decay; on a CPU without
 * FMA asking for the fused ones keeps the plain ones. */
static void
test_optim_fused_and_plain_kernels_agree(void **state)
{
    enum { N = 37 };
    int was = sr__optim_set_fused(-1);
    (void)state;

    for (int k = SR_OPT_MOMENTUM; k <= SR_OPT_ADAMW; k++) {
        float    v[2][N], m[2][N], s2[2][N], g[N];
        sr_optim o = optim(k);
        o.weight_decay = 0.05;
        o.nesterov = k == SR_OPT_MOMENTUM;
        for (int f = 0; f < 2; f++) {
            for (int i = 0; i < N; i++) {
                v[f][i] = (float)sin(i + 1.0);
                m[f][i] = s2[f][i] = 0;
            }
            sr__optim_set_fused(f);
            for (int t = 1; t <= 20; t++) {
                for (int i = 0; i < N; i++) {
                    g[i] = (float)cos(i * 0.3 + t);
                }
                sr__optim_apply_f32(&o, t, v[f], g, 1.0, m[f], k >= SR_OPT_ADAM ? s2[f] : NULL, N);
            }
        }
        for (int i = 0; i < N; i++) {
            assert_near(v[0][i], v[1][i], 1e-6 * (1 + fabs(v[0][i])));
        }
    }
    sr__optim_set_fused(was);
}

static void
test_optim_check_refuses_what_does_not_fit(void **state)
{
    sr_optim o = optim(SR_OPT_SGD);
    (void)state;

    assert_sr_ok(sr__optim_check(&o));
    o.nesterov = 1;
    assert_int_equal(sr__optim_check(&o), SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), "--nesterov"));
    o.kind = SR_OPT_MOMENTUM;
    assert_sr_ok(sr__optim_check(&o));
    o.weight_decay = -1;
    assert_int_equal(sr__optim_check(&o), SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), "--weight-decay"));
    o.weight_decay = 0;
    o.clip_norm = NAN;
    assert_int_equal(sr__optim_check(&o), SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), "--clip-norm"));
    o.clip_norm = 0;
    o.lr_schedule = 2; /* cosine without --decay-steps */
    assert_int_equal(sr__optim_check(&o), SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), "--decay-steps"));
    int kind = -1;
    assert_sr_ok(sr__optim_parse("adamw", &kind));
    assert_int_equal(kind, SR_OPT_ADAMW);
    assert_string_equal(sr__optim_name(SR_OPT_ADAMW), "adamw");
    const char *names[3];
    o.kind = SR_OPT_ADAMW;
    assert_int_equal(sr__optim_slots(&o, names), 2);
    assert_string_equal(names[1], "adam_v");
}

static void
test_optim_f32_matches_seed_numbers(void **state)
{
    /* Seed 000: v0 = 0 - (0.1 + 0.3) / 2 * 2.0 with lr 2.0. */
    sr_optim o = optim(SR_OPT_SGD);
    float    var[1] = {0.0f}, sum[1] = {0.1f + 0.3f};
    (void)state;

    o.lr = 2.0;
    sr__optim_apply_f32(&o, 1, var, sum, 2.0, NULL, NULL, 1);
    assert_near(var[0], -0.4f, 1e-6);
}

static void
test_optim_ema_moves_towards_variable(void **state)
{
    double shadow[2] = {1.0, 2.0}, var[2] = {0.0, 2.0};
    (void)state;

    sr__ema_f64(0.9, shadow, var, 2);
    assert_near(shadow[0], 0.9, 1e-15);
    assert_near(shadow[1], 2.0, 1e-15);
}

static void
test_optim_sparse_per_row_mean_touches_only_rows(void **state)
{
    sr_optim o = optim(SR_OPT_SGD);
    sr_accum a;
    float    var[3] = {10, 10, 10};
    uint8_t  dirty[3] = {0, 0, 0};
    (void)state;

    sparse_setup(&a);
    o.lr = 1.0;
    sr__optim_apply_accum(&o, 1, &a, var, NULL, NULL, dirty, 1, 0);
    assert_near(var[0], 9.0f, 0);  /* 10 - 1/1 */
    assert_near(var[1], 7.0f, 0);  /* 10 - (2+4)/2 */
    assert_near(var[2], 10.0f, 0); /* untouched */
    assert_int_equal(dirty[0], 1);
    assert_int_equal(dirty[1], 1);
    assert_int_equal(dirty[2], 0);
    sr__accum_destroy(&a);

    /* The same accumulator as the partition at elements [4, 7) of a
     * 7-element variable in chunks of 2: chunks 2 and 2 (rows 4, 5) marked. */
    float   big[7] = {0, 0, 0, 0, 10, 10, 10};
    uint8_t dirty4[4] = {0, 0, 0, 0};
    sparse_setup(&a);
    sr__optim_apply_accum(&o, 1, &a, big + 4, NULL, NULL, dirty4, 2, 4);
    assert_near(big[4], 9.0f, 0);
    assert_near(big[5], 7.0f, 0);
    assert_near(big[6], 10.0f, 0);
    assert_int_equal(dirty4[0] + dirty4[1] + dirty4[3], 0);
    assert_int_equal(dirty4[2], 1);
    sr__accum_destroy(&a);
}

static void
test_optim_sparse_per_replica_mean_divides_by_R(void **state)
{
    sr_optim o = optim(SR_OPT_SGD);
    sr_accum a;
    float    var[3] = {10, 10, 10};
    (void)state;

    sparse_setup(&a);
    o.lr = 1.0;
    o.sparse_mean = SR_SPARSE_MEAN_PER_REPLICA;
    sr__optim_apply_accum(&o, 1, &a, var, NULL, NULL, NULL, 1, 0);
    assert_near(var[0], 9.5f, 0); /* 10 - 1/2 */
    assert_near(var[1], 7.0f, 0);
    assert_near(var[2], 10.0f, 0);
    sr__accum_destroy(&a);
}

/* The out-of-place apply (the coordinator's when a pull or the async writer
 * still reads the value) writes exactly the bits of the in-place one, for
 * every optimizer and dtype, leaves the source untouched, and copies the rows
 * a sparse step did not touch; so does the apply into the accumulator's own
 * sums (the coordinator's --commit sync hand-over). */
static void
out_of_place_case(int kind, int dtype, int recipe)
{
    enum { N = 1003 };
    sr_optim o = optim(kind);
    if (recipe) {
        o.weight_decay = 0.01;
        o.nesterov = kind == SR_OPT_MOMENTUM;
        o.clip_norm = 1.0;
        o.grad_scale = 0.375;
    }
    sr_accum         a;
    size_t           es = sr_dtype_size(dtype), nb = N * es;
    uint8_t         *in = malloc(nb), *src = malloc(nb), *dst = malloc(nb), *grad = malloc(nb);
    uint8_t         *s1a = malloc(nb), *s2a = malloc(nb), *s1b = malloc(nb), *s2b = malloc(nb);
    uint8_t         *s1c = malloc(nb), *s2c = malloc(nb), *sums = malloc(nb);
    sr_accum         b;
    sr_accum_outcome out;

    assert_true(in && src && dst && grad && s1a && s2a && s1b && s2b && s1c && s2c && sums);
    for (size_t i = 0; i < N; i++) {
        double v = sin((double)i) * 3.0, g = cos((double)i * 0.7), m = 0.01 * (double)(i % 7);
        if (dtype == SR_FLOAT32) {
            ((float *)in)[i] = (float)v;
            ((float *)grad)[i] = (float)g;
            ((float *)s1a)[i] = (float)m;
            ((float *)s2a)[i] = (float)(m * m);
        } else {
            ((double *)in)[i] = v;
            ((double *)grad)[i] = g;
            ((double *)s1a)[i] = m;
            ((double *)s2a)[i] = m * m;
        }
    }
    memcpy(src, in, nb);
    memcpy(s1b, s1a, nb);
    memcpy(s2b, s2a, nb);
    memcpy(s1c, s1a, nb);
    memcpy(s2c, s2a, nb);
    memset(dst, 0xA5, nb); /* whatever the spare buffer held */
    for (int t = 1; t <= 3; t++) {
        assert_sr_ok(sr__accum_init(&a, dtype, N, N, 2, t - 1));
        assert_sr_ok(sr__accum_push_dense(&a, grad, t - 1, 0, &out));
        assert_sr_ok(sr__accum_push_dense(&a, grad, t - 1, 1, &out));
        sr__optim_apply_accum(&o, t, &a, in, s1a, s2a, NULL, 0, 0);
        sr__optim_apply_accum_from(&o, t, &a, dst, src, s1b, s2b, NULL, 0, 0);
        assert_memory_equal(dst, in, nb);
        assert_memory_equal(s1b, s1a, nb);
        assert_memory_equal(s2b, s2a, nb);
        /* Into the sums: they hold an old value before the first push. */
        assert_sr_ok(sr__accum_init(&b, dtype, N, N, 2, t - 1));
        memset(sums, 0x3C, nb);
        sr__accum_set_sum(&b, sums);
        assert_sr_ok(sr__accum_push_dense(&b, grad, t - 1, 0, &out));
        assert_sr_ok(sr__accum_push_dense(&b, grad, t - 1, 1, &out));
        sr__optim_apply_accum_from(&o, t, &b, sums, src, s1c, s2c, NULL, 0, 0);
        assert_memory_equal(sums, in, nb);
        assert_memory_equal(s1c, s1a, nb);
        assert_memory_equal(s2c, s2a, nb);
        sr__accum_destroy(&b); /* leaves the caller's sums alone */
        memcpy(src, dst, nb);  /* the buffers swap, as in the coordinator */
        memset(dst, 0x5A, nb);
        sr__accum_destroy(&a);
    }
    free(s1c);
    free(s2c);
    free(sums);
    free(in);
    free(src);
    free(dst);
    free(grad);
    free(s1a);
    free(s2a);
    free(s1b);
    free(s2b);
}

static void
test_optim_out_of_place_apply_is_bit_identical(void **state)
{
    (void)state;
    int was = sr__optim_set_fused(-1);
    for (int fused = 0; fused <= 1; fused++) { /* both kernel variants (issue 25) */
        sr__optim_set_fused(fused);
        for (int k = SR_OPT_SGD; k <= SR_OPT_ADAMW; k++) {
            out_of_place_case(k, SR_FLOAT32, 0);
            out_of_place_case(k, SR_FLOAT64, 0);
            out_of_place_case(k, SR_FLOAT32, 1); /* weight decay, nesterov, clipping */
            out_of_place_case(k, SR_FLOAT64, 1);
        }
    }
    sr__optim_set_fused(was);

    /* Sparse: the untouched row comes from the source. */
    sr_optim o = optim(SR_OPT_SGD);
    sr_accum a;
    float    src[3] = {10, 10, 10}, dst[3] = {-1, -1, -1};
    sparse_setup(&a);
    o.lr = 1.0;
    sr__optim_apply_accum_from(&o, 1, &a, dst, src, NULL, NULL, NULL, 1, 0);
    assert_near(dst[0], 9.0f, 0);
    assert_near(dst[1], 7.0f, 0);
    assert_near(dst[2], 10.0f, 0);
    assert_near(src[0], 10.0f, 0);
    sr__accum_destroy(&a);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_optim_sgd_averages_then_steps),
        cmocka_unit_test(test_optim_momentum_accumulates),
        cmocka_unit_test(test_optim_adam_two_steps_with_bias_correction),
        cmocka_unit_test(test_optim_weight_decay_is_l2_for_sgd_and_adam),
        cmocka_unit_test(test_optim_adamw_decays_the_variable_first),
        cmocka_unit_test(test_optim_nesterov_looks_ahead),
        cmocka_unit_test(test_optim_step_rate_and_clipping_factor),
        cmocka_unit_test(test_optim_sparse_touches_only_rows_under_every_optimizer),
        cmocka_unit_test(test_optim_check_refuses_what_does_not_fit),
        cmocka_unit_test(test_optim_fused_and_plain_kernels_agree),
        cmocka_unit_test(test_optim_f32_matches_seed_numbers),
        cmocka_unit_test(test_optim_ema_moves_towards_variable),
        cmocka_unit_test(test_optim_sparse_per_row_mean_touches_only_rows),
        cmocka_unit_test(test_optim_sparse_per_replica_mean_divides_by_R),
        cmocka_unit_test(test_optim_out_of_place_apply_is_bit_identical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
