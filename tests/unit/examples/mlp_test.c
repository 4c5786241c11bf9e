/*
 * examples/fashion_mnist: the MLP.  The analytic gradient (backprop through
 * cblas_sgemm) must match central finite differences of the loss on a tiny
 * model, for every parameter element; prediction and argument checks too.
 */
#include "sr_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "examples/fashion_mnist/mlp.h"
#include "examples/fashion_mnist/rng.h"

enum { IN = 7, HID = 5, OUT = 4, N = 3 };

static const ex_mlp_dims dims = {IN, HID, OUT};

static void
fill(ex_rng *r, float *v, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) {
        v[i] = (2.0f * ex_rng_uniform(r) - 1.0f) * scale;
    }
}

static void
test_mlp_grad_matches_finite_differences(void **state)
{
    ex_mlp_params p, g;
    ex_mlp_work  *w;
    float         x[N * IN], loss, lp, lm;
    const uint8_t y[N] = {0, 3, 2};
    const float   eps = 1e-2f;
    ex_rng        r = ex_rng_seed(7, 99, 0, 0);
    (void)state;

    assert_sr_ok(ex_mlp_params_new(&dims, &p));
    assert_sr_ok(ex_mlp_params_new(&dims, &g));
    assert_sr_ok(ex_mlp_work_new(&dims, N, &w));
    ex_mlp_init(&dims, 3, &p);
    /* Non-zero biases, so their gradients and the ReLU mask are exercised. */
    fill(&r, p.b1, HID, 0.3f);
    fill(&r, p.b2, OUT, 0.3f);
    fill(&r, x, N * IN, 1.0f);
    assert_sr_ok(ex_mlp_loss_grad(&dims, &p, x, y, N, w, &g, &loss));
    assert_true(loss > 0.0f && isfinite(loss));

    int checked = 0, active = 0;
    for (int k = 0; k < EX_MLP_NPARAMS; k++) {
        float *v = ex_mlp_param(&p, k), *gv = ex_mlp_param(&g, k);
        for (size_t i = 0; i < ex_mlp_param_count(&dims, k); i++) {
            const float keep = v[i];
            v[i] = keep + eps;
            assert_sr_ok(ex_mlp_loss(&dims, &p, x, y, N, w, &lp));
            v[i] = keep - eps;
            assert_sr_ok(ex_mlp_loss(&dims, &p, x, y, N, w, &lm));
            v[i] = keep;
            double num = ((double)lp - (double)lm) / (2.0 * eps);
            double tol = 2e-3 + 2e-2 * fabs(num);
            if (fabs(num - gv[i]) > tol) {
                fail_msg("%s[%zu]: backprop %.6f, finite difference %.6f", ex_mlp_param_name(k), i,
                         (double)gv[i], num);
            }
            checked++;
            active += gv[i] != 0.0f;
        }
    }
    assert_int_equal(checked, IN * HID + HID + HID * OUT + OUT);
    assert_true(active > checked / 2); /* not a vacuous match of zeros */
    ex_mlp_work_destroy(w);
    ex_mlp_params_free(&p);
    ex_mlp_params_free(&g);
}

static void
test_mlp_loss_of_uniform_logits_is_log_classes(void **state)
{
    ex_mlp_params p;
    ex_mlp_work  *w;
    float         x[N * IN] = {0}, loss;
    const uint8_t y[N] = {1, 1, 3};
    (void)state;

    assert_sr_ok(ex_mlp_params_new(&dims, &p)); /* all zero: every logit equal */
    assert_sr_ok(ex_mlp_work_new(&dims, N, &w));
    assert_sr_ok(ex_mlp_loss(&dims, &p, x, y, N, w, &loss));
    assert_near(loss, log(OUT), 1e-6);
    ex_mlp_work_destroy(w);
    ex_mlp_params_free(&p);
}

static void
test_mlp_predict_picks_the_largest_logit(void **state)
{
    ex_mlp_params p;
    ex_mlp_work  *w;
    float         x[2 * IN] = {0};
    uint8_t       pred[2];
    (void)state;

    assert_sr_ok(ex_mlp_params_new(&dims, &p));
    assert_sr_ok(ex_mlp_work_new(&dims, 2, &w));
    /* Input 0 drives hidden unit 0, which votes for class 2 ; input 1 drives
     * unit 1, which votes for class 1; b2 prefers class 3 slightly. */
    p.w1[0 * HID + 0] = 1.0f;
    p.w1[1 * HID + 1] = 1.0f;
    p.w2[0 * OUT + 2] = 2.0f;
    p.w2[1 * OUT + 1] = 2.0f;
    p.b2[3] = 0.5f;
    x[0] = 1.0f;
    x[IN + 1] = 1.0f;
    assert_sr_ok(ex_mlp_predict(&dims, &p, x, 2, w, pred));
    assert_int_equal(pred[0], 2);
    assert_int_equal(pred[1], 1);
    x[0] = -1.0f; /* the ReLU cuts it off: only the bias is left */
    assert_sr_ok(ex_mlp_predict(&dims, &p, x, 1, w, pred));
    assert_int_equal(pred[0], 3);
    ex_mlp_work_destroy(w);
    ex_mlp_params_free(&p);
}

static void
test_mlp_init_depends_on_the_seed_only(void **state)
{
    ex_mlp_params a, b;
    (void)state;

    assert_sr_ok(ex_mlp_params_new(&dims, &a));
    assert_sr_ok(ex_mlp_params_new(&dims, &b));
    ex_mlp_init(&dims, 11, &a);
    ex_mlp_init(&dims, 11, &b);
    assert_memory_equal(a.w1, b.w1, IN * HID * sizeof(float));
    assert_memory_equal(a.w2, b.w2, HID * OUT * sizeof(float));
    ex_mlp_init(&dims, 12, &b);
    assert_memory_not_equal(a.w1, b.w1, IN * HID * sizeof(float));
    for (int i = 0; i < IN * HID; i++) {
        assert_true(fabsf(a.w1[i]) <= sqrtf(6.0f / IN));
    }
    ex_mlp_params_free(&a);
    ex_mlp_params_free(&b);
}

static void
test_mlp_bad_arguments_are_einval(void **state)
{
    ex_mlp_params     p, g;
    ex_mlp_work      *w;
    const ex_mlp_dims bad = {0, HID, OUT};
    float             x[N * IN] = {0}, loss;
    uint8_t           y[N] = {0, 1, OUT};
    (void)state;

    assert_sr_err(ex_mlp_params_new(&bad, &p), SR_EINVAL);
    assert_sr_err(ex_mlp_work_new(&dims, 0, &w), SR_EINVAL);
    assert_sr_ok(ex_mlp_params_new(&dims, &p));
    assert_sr_ok(ex_mlp_params_new(&dims, &g));
    assert_sr_ok(ex_mlp_work_new(&dims, N, &w));
    assert_sr_err(ex_mlp_loss_grad(&dims, &p, x, y, N, w, &g, &loss), SR_EINVAL); /* label */
    y[2] = 0;
    assert_sr_err(ex_mlp_loss_grad(&dims, &p, x, y, N + 1, w, &g, &loss), SR_EINVAL);
    assert_sr_err(ex_mlp_loss_grad(&dims, &p, x, y, 0, w, &g, &loss), SR_EINVAL);
    assert_sr_ok(ex_mlp_loss_grad(&dims, &p, x, y, N, w, &g, &loss));
    ex_mlp_work_destroy(w);
    ex_mlp_params_free(&p);
    ex_mlp_params_free(&g);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_grad_matches_finite_differences),
        cmocka_unit_test(test_mlp_loss_of_uniform_logits_is_log_classes),
        cmocka_unit_test(test_mlp_predict_picks_the_largest_logit),
        cmocka_unit_test(test_mlp_init_depends_on_the_seed_only),
        cmocka_unit_test(test_mlp_bad_arguments_are_einval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
