/*
 * gpu/ on the NCCL backend: the shared suite (gpu_suite.c) plus NCCL-only
 * checks (host memory refused naming the participant, device options, the
 * benchmark's raw baseline).  Label `gpu`; built wherever CUDA was found.
 * Without a GPU every test skips with a printed reason and the program exits
 * 77 (ctest: Skipped); SR_TEST_REQUIRE_GPU=1 turns that into a failure.
 */
#include "sr_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu_raw.h"
#include "gpu_suite.h"
#include "syncrep/gpu.h"

static sr_gpu *
open_nccl(int ndev)
{
    sr_gpu *g = NULL;
    assert_sr_ok(sr_gpu_open(&g, &(sr_gpu_options){.backend = SR_GPU_NCCL, .ndev = ndev}));
    assert_int_equal(sr_gpu_backend(g), SR_GPU_NCCL);
    return g;
}

static void
expect_detail(const char *needle)
{
    if (strstr(sr_errdetail(), needle) == NULL) {
        fail_msg("detail \"%s\" does not mention \"%s\"", sr_errdetail(), needle);
    }
}

/* A buffer that is not device memory is refused before anything launches,
 * and the detail names the participant it was given for. */
static void
test_gpu_nccl_host_buffer_is_einval_naming_participant(void **state)
{
    int          have = gpu_suite_device_count();
    int          G = have >= 2 ? 2 : 1;
    sr_gpu      *g;
    void        *send[2] = {0}, *pinned = NULL, *out = NULL;
    float       *plain;
    char         who[64];
    sr_gpu_stats a, b;
    (void)state;

    gpu_suite_require_gpus(1);
    plain = calloc(64, sizeof(float));
    assert_non_null(plain);
    g = open_nccl(G);
    for (int i = 0; i < G; i++) {
        assert_sr_ok(sr_gpu_alloc(g, i, 64 * sizeof(float), &send[i]));
    }
    assert_sr_ok(sr_gpu_alloc(g, 0, 64 * sizeof(float), &out));
    assert_sr_ok(sr_gpu_stats_get(g, &a));

    /* Plain malloc memory for the last participant. */
    void *saved = send[G - 1];
    send[G - 1] = plain;
    snprintf(who, sizeof(who), "participant %d (cuda:%d)", G - 1, sr_gpu_device(g, G - 1));
    assert_sr_err(sr_gpu_allreduce(g, send, NULL, 64, SR_FLOAT32, SR_GPU_SUM), SR_EINVAL);
    expect_detail(who);
    expect_detail("not device memory");
    assert_sr_err(sr_gpu_reduce(g, send, out, 64, SR_FLOAT32, SR_GPU_SUM, 0), SR_EINVAL);
    expect_detail(who);
    assert_sr_err(sr_gpu_broadcast(g, send, 64, SR_FLOAT32, 0), SR_EINVAL);
    expect_detail(who);

    /* Pinned host memory is not device memory either. */
    assert_sr_ok(sr_gpu_host_alloc(g, 64 * sizeof(float), &pinned));
    send[G - 1] = pinned;
    assert_sr_err(sr_gpu_average(g, send, out, 64, SR_FLOAT32, 0), SR_EINVAL);
    expect_detail("pinned host memory");
    send[G - 1] = saved;

    /* The result buffer of a reduce is checked on the root. */
    assert_sr_err(sr_gpu_reduce(g, send, plain, 64, SR_FLOAT32, SR_GPU_SUM, 0), SR_EINVAL);
    expect_detail("participant 0");
    expect_detail("result buffer");
    /* And the device side of a copy. */
    assert_sr_err(sr_gpu_copy_to_host(g, 0, pinned, plain, 16), SR_EINVAL);
    expect_detail("not device memory");

    /* Nothing was launched and the handle still works. */
    assert_sr_ok(sr_gpu_stats_get(g, &b));
    assert_int_equal(b.launches, a.launches);
    assert_sr_ok(sr_gpu_allreduce(g, send, NULL, 64, SR_FLOAT32, SR_GPU_SUM));

    for (int i = 0; i < G; i++) {
        sr_gpu_free(g, i, send[i]);
    }
    sr_gpu_free(g, 0, out);
    sr_gpu_host_free(g, pinned);
    sr_gpu_close(g);
    free(plain);
}

static void
test_gpu_nccl_buffer_of_another_device_is_einval(void **state)
{
    sr_gpu *g;
    void   *a = NULL, *b = NULL;
    (void)state;

    gpu_suite_require_gpus(2);
    g = open_nccl(2);
    assert_sr_ok(sr_gpu_alloc(g, 0, 256, &a));
    assert_sr_ok(sr_gpu_alloc(g, 0, 256, &b)); /* both on participant 0's GPU */
    void *bufs[2] = {a, b};
    assert_sr_err(sr_gpu_allreduce(g, bufs, NULL, 64, SR_INT32, SR_GPU_MAX), SR_EINVAL);
    expect_detail("participant 1");
    expect_detail("is device memory of cuda:");
    sr_gpu_free(g, 0, a);
    sr_gpu_free(g, 0, b);
    sr_gpu_close(g);
}

static void
test_gpu_nccl_bad_device_options_are_einval(void **state)
{
    int     have = gpu_suite_device_count();
    sr_gpu *g = NULL;
    int     twice[2] = {0, 0}, outside[1];
    (void)state;

    gpu_suite_require_gpus(1);
    outside[0] = have;
    assert_sr_err(sr_gpu_open(&g, &(sr_gpu_options){.backend = SR_GPU_NCCL, .ndev = have + 1}),
                  SR_EINVAL);
    expect_detail("visible");
    assert_sr_err(
        sr_gpu_open(&g, &(sr_gpu_options){.backend = SR_GPU_NCCL, .ndev = 2, .devices = twice}),
        SR_EINVAL);
    expect_detail(have >= 1 ? "listed twice" : "outside");
    assert_sr_err(
        sr_gpu_open(&g, &(sr_gpu_options){.backend = SR_GPU_NCCL, .ndev = 1, .devices = outside}),
        SR_EINVAL);
    expect_detail("outside");
    assert_null(g);
}

/* The benchmark's baseline (ncclAllReduce called directly) runs, also on a
 * single GPU through its private one-rank communicator. */
static void
test_gpu_nccl_raw_baseline_allreduce_runs(void **state)
{
    int     have = gpu_suite_device_count();
    int     G = have >= 2 ? 2 : 1;
    sr_gpu *g;
    void   *send[2], *recv[2];
    float   host[256], back[256];
    double  us = 0;
    (void)state;

    gpu_suite_require_gpus(1);
    g = open_nccl(G);
    for (int k = 0; k < 256; k++) {
        host[k] = (float)(k % 13);
    }
    for (int i = 0; i < G; i++) {
        assert_sr_ok(sr_gpu_alloc(g, i, sizeof(host), &send[i]));
        assert_sr_ok(sr_gpu_alloc(g, i, sizeof(host), &recv[i]));
        assert_sr_ok(sr_gpu_copy_from_host(g, i, send[i], host, sizeof(host)));
    }
    assert_sr_ok(sr__gpu_raw_allreduce(g, send, recv, 256, SR_FLOAT32, 3, &us));
    assert_true(us > 0);
    assert_sr_ok(sr_gpu_copy_to_host(g, 0, back, recv[0], sizeof(back)));
    for (int k = 0; k < 256; k++) {
        assert_true(back[k] == (float)G * host[k]);
    }
    for (int i = 0; i < G; i++) {
        sr_gpu_free(g, i, send[i]);
        sr_gpu_free(g, i, recv[i]);
    }
    sr_gpu_close(g);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_nccl_host_buffer_is_einval_naming_participant),
        cmocka_unit_test(test_gpu_nccl_buffer_of_another_device_is_einval),
        cmocka_unit_test(test_gpu_nccl_bad_device_options_are_einval),
        cmocka_unit_test(test_gpu_nccl_raw_baseline_allreduce_runs),
    };
    int have = gpu_suite_device_count();
    int failed;

    print_message("gpu_nccl_test: %d CUDA GPU(s) visible\n", have);
    failed = cmocka_run_group_tests_name("gpu_nccl_only", tests, NULL, NULL);
    failed += gpu_suite_run(SR_GPU_NCCL, "gpu_nccl_suite");
    if (failed == 0 && have == 0) {
        print_message("gpu_nccl_test: every test skipped: no CUDA GPU visible\n");
        return 77; /* ctest SKIP_RETURN_CODE: shown as Skipped, never as Passed */
    }
    return failed;
}
