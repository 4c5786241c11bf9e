#include "sr_test.h"

#include <string.h>

#include "core/error.h"

static void
test_error_fail_records_detail(void **state)
{
    (void)state;
    assert_int_equal(sr_fail(SR_EPROTO, "frame len %u > max %u", 9u, 8u), SR_EPROTO);
    assert_string_equal(sr_errdetail(), "frame len 9 > max 8");
    sr_clear_error();
    assert_string_equal(sr_errdetail(), "");
}

static void
test_error_corrupt_carries_file_line(void **state)
{
    (void)state;
    assert_int_equal(SR_CORRUPT("bad chunk %d", 3), SR_ECORRUPT);
    assert_non_null(strstr(sr_errdetail(), "error_test.c:"));
    assert_non_null(strstr(sr_errdetail(), "bad chunk 3"));
}

static void
test_error_codes_are_stable(void **state)
{
    (void)state;
    /* These values are on the wire and in stores: they must never change. */
    assert_int_equal(SR_OK, 0);
    assert_int_equal(SR_EINVAL, -1);
    assert_int_equal(SR_ESTALE, -6);
    assert_int_equal(SR_ENOTSUP, -10);
    assert_int_equal(SR_ENONFINITE, -18);
    assert_int_equal(SR_EBUSY, -19);
    assert_string_equal(sr_errname(SR_EBUSY), "SR_EBUSY");
    assert_string_equal(sr_errname(SR_ETIMEDOUT), "SR_ETIMEDOUT");
    assert_string_equal(sr_strerror(12345), "unknown error");
}

static void
test_error_snprintf_reports_truncation(void **state)
{
    char buf[4];
    (void)state;
    assert_sr_ok(sr_snprintf(buf, sizeof(buf), "%s", "abc"));
    assert_sr_err(sr_snprintf(buf, sizeof(buf), "%s", "abcd"), SR_EINVAL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_fail_records_detail),
        cmocka_unit_test(test_error_corrupt_carries_file_line),
        cmocka_unit_test(test_error_codes_are_stable),
        cmocka_unit_test(test_error_snprintf_reports_truncation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
