#include "sr_test.h"

#include "core/dtype.h"

static void
test_dtype_sizes_and_names(void **state)
{
    sr_dtype d;
    (void)state;
    assert_int_equal(sr_dtype_size(SR_FLOAT32), 4);
    assert_int_equal(sr_dtype_size(SR_FLOAT64), 8);
    assert_int_equal(sr_dtype_size(SR_INT32), 4);
    assert_int_equal(sr_dtype_size(SR_INT64), 8);
    assert_int_equal(sr_dtype_size(99), 0);
    assert_sr_ok(sr_dtype_parse("int64", &d));
    assert_int_equal(d, SR_INT64);
    assert_sr_err(sr_dtype_parse("bfloat16", &d), SR_EINVAL);
}

static void
test_shape_bytes_scalar_empty_and_overflow(void **state)
{
    uint64_t      n;
    const int64_t empty[2] = {3, 0};
    const int64_t big[2] = {INT64_MAX, INT64_MAX};
    const int64_t neg[1] = {-1};
    (void)state;
    assert_sr_ok(sr_shape_bytes(SR_FLOAT64, 0, NULL, &n));
    assert_int_equal(n, 8);
    assert_sr_ok(sr_shape_bytes(SR_FLOAT32, 2, empty, &n));
    assert_int_equal(n, 0);
    assert_sr_err(sr_shape_bytes(SR_FLOAT32, 2, big, &n), SR_EINVAL);
    assert_sr_err(sr_shape_bytes(SR_FLOAT32, 1, neg, &n), SR_EINVAL);
    assert_sr_err(sr_shape_bytes(SR_FLOAT32, SR_MAX_NDIM + 1, big, &n), SR_EINVAL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_sizes_and_names),
        cmocka_unit_test(test_shape_bytes_scalar_empty_and_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
