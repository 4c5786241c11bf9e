/*
 * Where sr_client_model_pull / sr_client_model_step put the values (issue
 * 23): into the caller's values[i] straight from the message, or, for a
 * tensor given no buffer, into the client's own copy
 * (sr_client_model_value).  A pull that writes values[i] leaves the own
 * copy of that trainable tensor as it was; a not trainable tensor's own
 * copy is always kept.  One worker, R = 1, SGD with learning rate 1, so
 * each step's values are exact: w -= g.
 */
#include "sr_test.h"

#include <string.h>

#include "harness.h"
#include "syncrep/syncrep.h"

enum { T_W, T_MEAN, NT };

static const int64_t shape_w[] = {2, 3}, shape_mean[] = {4};
static const float   w0[6] = {1, 2, 3, 4, 5, 6}, mean0[4] = {9, 8, 7, 6};
static const float   gw[6] = {0.5f, 0.25f, 1, 2, 0.125f, 4};

/* w0 - k * gw, exactly. */
static void
w_after(int k, float out[6])
{
    for (int i = 0; i < 6; i++) {
        out[i] = w0[i] - (float)k * gw[i];
    }
}

static void
test_model_values_go_to_the_callers_buffers_or_the_own_copy(void **state)
{
    sr_harness     h;
    sr_client     *c;
    float          w[6], mean[4], want[6];
    const void    *grads[NT] = {gw, NULL};
    void          *both[NT] = {w, mean}, *mean_only[NT] = {NULL, mean};
    sr_tensor_spec t[NT] = {
        {"layer.w", SR_FLOAT32, 2, shape_w, w0, 0},
        {"bn.mean", SR_FLOAT32, 1, shape_mean, mean0, SR_DECLARE_NOT_TRAINABLE},
    };
    (void)state;

    sr_harness_init(&h, "modelvalues");
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--learning-rate", "1", "--init-tokens",
                     "0", NULL);
    c = sr_harness_client(&h, 0);
    assert_sr_ok(sr_client_declare_model(c, NT, t));
    assert_sr_ok(sr_client_ready(c));

    /* The first pull into the caller's buffers: every tensor. */
    memset(w, 0, sizeof(w));
    memset(mean, 0, sizeof(mean));
    assert_sr_ok(sr_client_model_pull(c, both));
    assert_memory_equal(w, w0, sizeof(w0));
    assert_memory_equal(mean, mean0, sizeof(mean0));

    /* A step into the caller's buffers: w there; the own copy of w is the
     * one before (the chief's initial value), the frozen tensor's is kept. */
    assert_sr_ok(sr_client_model_step(c, grads, both));
    w_after(1, want);
    assert_memory_equal(w, want, sizeof(want));
    assert_memory_equal(sr_client_model_value(c, T_W), w0, sizeof(w0));
    assert_memory_equal(sr_client_model_value(c, T_MEAN), mean0, sizeof(mean0));

    /* No buffers: the own copy takes the step's values. */
    assert_sr_ok(sr_client_model_step(c, grads, NULL));
    w_after(2, want);
    assert_memory_equal(sr_client_model_value(c, T_W), want, sizeof(want));
    w_after(1, want);
    assert_memory_equal(w, want, sizeof(want)); /* the caller's w is not touched */

    /* A buffer for one tensor only: the other goes to the own copy. */
    assert_sr_ok(sr_client_model_step(c, grads, mean_only));
    w_after(3, want);
    assert_memory_equal(sr_client_model_value(c, T_W), want, sizeof(want));
    assert_memory_equal(mean, mean0, sizeof(mean0));

    sr_client_close(c);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_values_go_to_the_callers_buffers_or_the_own_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
