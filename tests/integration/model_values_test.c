/*
 * Where sr_client_model_pull / sr_client_model_step put the values (issue
 * 23): each tensor into the caller's values[i], once, straight from the
 * reply; the client's own copy (sr_client_model_value) is never seen
 * stale: the first call brings it up to date, and from then on every pull
 * keeps it, with or without the caller's buffers.  The model has two packs
 * (float32 and float64) whose tensors are declared interleaved, and a not
 * trainable tensor.  And the push: a pack's gradients gathered a partition
 * at a time.  One worker, R = 1, SGD with learning rate 1, so each step's
 * values are exact: v -= g.
 */
#include "sr_test.h"

#include <string.h>

#include "harness.h"
#include "syncrep/syncrep.h"

enum { T_W, T_S, T_B, T_MEAN, NT };

static const int64_t shape_w[] = {2, 3}, shape_b[] = {3}, shape_mean[] = {4};
static const float   w0[6] = {1, 2, 3, 4, 5, 6}, b0[3] = {-1, -2, -3}, mean0[4] = {9, 8, 7, 6};
static const double  s0 = 10;
static const float   gw[6] = {0.5f, 0.25f, 1, 2, 0.125f, 4}, gb[3] = {1, 0.5f, 0.25f};
static const double  gs = 0.75;

typedef struct {
    float  w[6], b[3];
    double s;
} values;

/* The values after k steps, exactly. */
static void
after(int k, values *v)
{
    for (int i = 0; i < 6; i++) {
        v->w[i] = w0[i] - (float)k * gw[i];
    }
    for (int i = 0; i < 3; i++) {
        v->b[i] = b0[i] - (float)k * gb[i];
    }
    v->s = s0 - k * gs;
}

/* The caller's buffers hold the values after k steps. */
static void
assert_buffers(const float *w, const float *b, const double *s, int k)
{
    values v;
    after(k, &v);
    assert_memory_equal(w, v.w, sizeof(v.w));
    assert_memory_equal(b, v.b, sizeof(v.b));
    assert_memory_equal(s, &v.s, sizeof(v.s));
}

/* The own copy holds them. */
static void
assert_own(sr_client *c, int k)
{
    assert_buffers(sr_client_model_value(c, T_W), sr_client_model_value(c, T_B),
                   sr_client_model_value(c, T_S), k);
    assert_memory_equal(sr_client_model_value(c, T_MEAN), mean0, sizeof(mean0));
}

static sr_client *
open_model(sr_harness *h)
{
    sr_tensor_spec t[NT] = {
        {"layer.w", SR_FLOAT32, 2, shape_w, w0, 0},
        {"layer.s", SR_FLOAT64, 0, NULL, &s0, 0},
        {"layer.b", SR_FLOAT32, 1, shape_b, b0, 0},
        {"bn.mean", SR_FLOAT32, 1, shape_mean, mean0, SR_DECLARE_NOT_TRAINABLE},
    };
    sr_client *c;

    sr_harness_start(h, "--replicas-to-aggregate", "1", "--learning-rate", "1", "--init-tokens",
                     "0", NULL);
    c = sr_harness_client(h, 0);
    assert_sr_ok(sr_client_declare_model(c, NT, t));
    assert_sr_ok(sr_client_ready(c));
    return c;
}

/* A program that passes its buffers every time and asks for the own copy
 * only after a few steps sees it up to date then, and at every step after
 * (through the pointer it got once). */
static void
test_model_own_copy_is_never_stale_behind_the_callers_buffers(void **state)
{
    sr_harness  h;
    float       w[6], b[3], mean[4];
    double      s;
    const void *grads[NT] = {gw, &gs, gb, NULL};
    void       *bufs[NT] = {w, &s, b, mean};
    (void)state;

    sr_harness_init(&h, "modelvalues");
    sr_client *c = open_model(&h);

    memset(mean, 0, sizeof(mean));
    assert_sr_ok(sr_client_model_pull(c, bufs));
    assert_buffers(w, b, &s, 0);
    assert_memory_equal(mean, mean0, sizeof(mean0));
    for (int k = 1; k <= 2; k++) {
        assert_sr_ok(sr_client_model_step(c, grads, bufs));
        assert_buffers(w, b, &s, k);
    }
    /* Asked for the first time: the values of the last step, not the
     * chief's initial ones. */
    const float  *own_w = sr_client_model_value(c, T_W);
    const double *own_s = sr_client_model_value(c, T_S);
    assert_own(c, 2);
    for (int k = 3; k <= 4; k++) {
        assert_sr_ok(sr_client_model_step(c, grads, bufs));
        assert_buffers(w, b, &s, k);
        assert_buffers(own_w, sr_client_model_value(c, T_B), own_s, k);
    }
    sr_client_close(c);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

/* Without buffers the own copy takes the values, the caller's stay as they
 * were; with a buffer for some tensors, the others go to the own copy. */
static void
test_model_values_without_buffers_go_to_the_own_copy(void **state)
{
    sr_harness  h;
    float       w[6], b[3];
    double      s = 0;
    const void *grads[NT] = {gw, &gs, gb, NULL};
    void       *bufs[NT] = {w, &s, b, NULL}, *b_only[NT] = {NULL, NULL, b, NULL};
    (void)state;

    sr_harness_init(&h, "modelown");
    sr_client *c = open_model(&h);

    assert_sr_ok(sr_client_model_pull(c, bufs));
    assert_sr_ok(sr_client_model_step(c, grads, bufs));
    assert_buffers(w, b, &s, 1);
    assert_sr_ok(sr_client_model_step(c, grads, NULL));
    assert_own(c, 2);
    assert_buffers(w, b, &s, 1); /* not touched */
    assert_sr_ok(sr_client_model_step(c, grads, b_only));
    assert_own(c, 3);
    values v;
    after(3, &v);
    assert_memory_equal(b, v.b, sizeof(v.b));
    sr_client_close(c);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

/* A pack of several partitions (--partition-bytes 1024) whose tensors
 * straddle the partitions' bounds: the gradients are gathered a partition
 * at a time as each is sent (a NULL one: zeros), and every byte lands. */
static void
test_model_gradients_are_gathered_across_partitions(void **state)
{
    enum { NA = 300, NB = 100, NC = 500 };
    static float   a0[NA], c0[NC], ga[NA], gc[NC], a[NA], b[NB], c[NC];
    const int64_t  sa[] = {NA}, sb[] = {NB}, sc[] = {NC};
    sr_harness     h;
    sr_tensor_spec t[3] = {
        {"x.a", SR_FLOAT32, 1, sa, a0, 0},
        {"x.b", SR_FLOAT32, 1, sb, NULL, 0},
        {"x.c", SR_FLOAT32, 1, sc, c0, 0},
    };
    const void *grads[3] = {ga, NULL, gc};
    void       *bufs[3] = {a, b, c};
    (void)state;

    for (int i = 0; i < NA; i++) {
        a0[i] = (float)i;
        ga[i] = 0.25f * (float)(1 + i % 8);
    }
    for (int i = 0; i < NC; i++) {
        c0[i] = -(float)i;
        gc[i] = 0.5f * (float)(1 + i % 5);
    }
    sr_harness_init(&h, "modelparts");
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--learning-rate", "1", "--init-tokens",
                     "0", "--partition-bytes", "1024", NULL);
    sr_client *cl = sr_harness_client(&h, 0);
    assert_sr_ok(sr_client_declare_model(cl, 3, t));
    assert_sr_ok(sr_client_ready(cl));
    assert_sr_ok(sr_client_model_pull(cl, bufs));
    for (int k = 1; k <= 3; k++) {
        assert_sr_ok(sr_client_model_step(cl, grads, bufs));
        for (int i = 0; i < NA; i++) {
            assert_true(a[i] == a0[i] - (float)k * ga[i]);
        }
        for (int i = 0; i < NB; i++) {
            assert_true(b[i] == 0.0f);
        }
        for (int i = 0; i < NC; i++) {
            assert_true(c[i] == c0[i] - (float)k * gc[i]);
        }
    }
    sr_client_close(cl);
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_own_copy_is_never_stale_behind_the_callers_buffers),
        cmocka_unit_test(test_model_values_without_buffers_go_to_the_own_copy),
        cmocka_unit_test(test_model_gradients_are_gathered_across_partitions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
