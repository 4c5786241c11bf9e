/*
 * gpu/ on the host backend: the shared suite (gpu_suite.c) plus what only
 * the host backend or the common layer can show on a machine without GPUs:
 * option checks, backend selection, integer averaging.  Label `unit`.
 */
#include "sr_test.h"

#include <string.h>

#include "gpu_suite.h"
#include "syncrep/gpu.h"

static void
test_gpu_open_bad_options_are_einval(void **state)
{
    sr_gpu *g = NULL;
    (void)state;

    assert_sr_err(sr_gpu_open(&g, &(sr_gpu_options){.backend = SR_GPU_HOST, .ndev = -1}),
                  SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), "ndev -1"));
    assert_sr_err(sr_gpu_open(&g, &(sr_gpu_options){.backend = SR_GPU_HOST, .ndev = 65}),
                  SR_EINVAL);
    assert_sr_err(sr_gpu_open(&g, &(sr_gpu_options){.backend = SR_GPU_HOST, .timeout_ms = -5}),
                  SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), "timeout_ms"));
    assert_sr_err(sr_gpu_open(&g, &(sr_gpu_options){.backend = SR_GPU_HOST,
                                                    .fuse_threshold_bytes = 4096,
                                                    .fuse_buffer_bytes = 1024}),
                  SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), "fuse_buffer_bytes"));
    assert_sr_err(sr_gpu_open(&g, &(sr_gpu_options){.backend = (sr_gpu_backend_kind)7}), SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), "unknown backend 7"));
    assert_sr_err(sr_gpu_open(NULL, NULL), SR_EINVAL);
    assert_null(g);
}

static void
test_gpu_open_defaults_and_accessors(void **state)
{
    sr_gpu      *g = NULL;
    sr_gpu_stats st;
    (void)state;

    assert_sr_ok(sr_gpu_open(&g, &(sr_gpu_options){.backend = SR_GPU_HOST}));
    assert_int_equal(sr_gpu_ndev(g), 1);
    assert_int_equal(sr_gpu_backend(g), SR_GPU_HOST);
    assert_int_equal(sr_gpu_device(g, 0), -1);
    assert_int_equal(sr_gpu_device(g, 1), -1);
    assert_string_equal(sr_gpu_error(g), "");
    assert_sr_ok(sr_gpu_stats_get(g, &st));
    assert_int_equal(st.calls, 0);
    assert_string_equal(sr_gpu_backend_name(SR_GPU_NCCL), "nccl");
    assert_string_equal(sr_gpu_backend_name(SR_GPU_HOST), "host");
    assert_string_equal(sr_gpu_backend_name((sr_gpu_backend_kind)9), "?");
    sr_gpu_close(g);
    sr_gpu_close(NULL);
}

/* Built without CUDA the nccl backend is SR_ENOTSUP; with CUDA but no
 * usable GPU it is SR_EGPU with the reason; auto falls back to host.  With
 * GPUs, nccl and auto open on them (this part can fail only there). */
static void
test_gpu_nccl_unavailable_is_reported_and_auto_falls_back(void **state)
{
    sr_gpu *g = NULL;
    int     n = -1;
    (void)state;

    assert_sr_ok(sr_gpu_device_count(&n));
    assert_true(n >= 0);
#ifndef SR_TEST_HAVE_CUDA
    assert_int_equal(n, 0);
    assert_sr_err(sr_gpu_open(&g, &(sr_gpu_options){.backend = SR_GPU_NCCL}), SR_ENOTSUP);
    assert_non_null(strstr(sr_errdetail(), "without CUDA"));
#else
    if (n == 0) {
        assert_sr_err(sr_gpu_open(&g, &(sr_gpu_options){.backend = SR_GPU_NCCL}), SR_EGPU);
        assert_non_null(strstr(sr_errdetail(), "no CUDA device"));
    } else {
        /* GPUs visible: nccl opens, auto takes it whenever enough GPUs are
         * there (NULL options: all of them), and falls back to host only
         * when more are wanted than visible. */
        int all = n < SR_GPU_MAX_DEV ? n : SR_GPU_MAX_DEV;
        assert_sr_ok(sr_gpu_open(&g, &(sr_gpu_options){.backend = SR_GPU_NCCL, .ndev = 1}));
        assert_int_equal(sr_gpu_backend(g), SR_GPU_NCCL);
        assert_int_equal(sr_gpu_ndev(g), 1);
        sr_gpu_close(g);
        g = NULL;
        assert_sr_ok(sr_gpu_open(&g, NULL));
        assert_int_equal(sr_gpu_backend(g), SR_GPU_NCCL);
        assert_int_equal(sr_gpu_ndev(g), all);
        sr_gpu_close(g);
        g = NULL;
        if (n < SR_GPU_MAX_DEV) {
            assert_sr_ok(sr_gpu_open(&g, &(sr_gpu_options){.backend = SR_GPU_AUTO, .ndev = n + 1}));
            assert_int_equal(sr_gpu_backend(g), SR_GPU_HOST);
            assert_int_equal(sr_gpu_ndev(g), n + 1);
            sr_gpu_close(g);
            g = NULL;
        }
    }
#endif
    if (n == 0) {
        assert_null(g);
        assert_sr_ok(sr_gpu_open(&g, &(sr_gpu_options){.backend = SR_GPU_AUTO, .ndev = 3}));
        assert_int_equal(sr_gpu_backend(g), SR_GPU_HOST);
        assert_int_equal(sr_gpu_ndev(g), 3);
        sr_gpu_close(g);
        assert_sr_ok(sr_gpu_open(&g, NULL));
        assert_int_equal(sr_gpu_backend(g), SR_GPU_HOST);
        assert_int_equal(sr_gpu_ndev(g), 1);
        sr_gpu_close(g);
    }
}

/* Integer averages truncate toward zero, as NCCL's ncclAvg does. */
static void
test_gpu_integer_average_truncates_toward_zero(void **state)
{
    sr_gpu *g = NULL;
    int32_t in[3][4] = {{1, -4, 7, -1}, {1, 0, 0, -1}, {-3, 0, 1, 0}};
    int32_t out[4], want[4] = {0, -1, 2, 0}; /* -1/3, -4/3, 8/3, -2/3 */
    void   *bufs[3];
    (void)state;

    assert_sr_ok(sr_gpu_open(&g, &(sr_gpu_options){.backend = SR_GPU_HOST, .ndev = 3}));
    for (int i = 0; i < 3; i++) {
        bufs[i] = in[i];
    }
    assert_sr_ok(sr_gpu_average(g, bufs, out, 4, SR_INT32, 1));
    assert_memory_equal(out, want, sizeof(want));
    sr_gpu_close(g);
}

/* Float averages multiply each input by (T)(1/G) and sum in participant
 * order, so the host backend matches NCCL's ncclAvg formula. */
static void
test_gpu_float_average_premultiplies_inputs(void **state)
{
    sr_gpu *g = NULL;
    float   in[3][2] = {{1.0f, 0.1f}, {1.0f, 0.2f}, {1.0f, 0.7f}};
    float   out[2], s = (float)(1.0 / 3);
    void   *bufs[3] = {in[0], in[1], in[2]};
    (void)state;

    assert_sr_ok(sr_gpu_open(&g, &(sr_gpu_options){.backend = SR_GPU_HOST, .ndev = 3}));
    assert_sr_ok(sr_gpu_average(g, bufs, out, 2, SR_FLOAT32, 0));
    for (int k = 0; k < 2; k++) {
        float a = in[0][k] * s, b = in[1][k] * s, c = in[2][k] * s;
        float ab = a + b;
        float want = ab + c;
        assert_memory_equal(&out[k], &want, sizeof(float));
    }
    sr_gpu_close(g);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_open_bad_options_are_einval),
        cmocka_unit_test(test_gpu_open_defaults_and_accessors),
        cmocka_unit_test(test_gpu_nccl_unavailable_is_reported_and_auto_falls_back),
        cmocka_unit_test(test_gpu_integer_average_truncates_toward_zero),
        cmocka_unit_test(test_gpu_float_average_premultiplies_inputs),
    };
    int failed = cmocka_run_group_tests_name("gpu_host_api", tests, NULL, NULL);
    return failed + gpu_suite_run(SR_GPU_HOST, "gpu_host_suite");
}
