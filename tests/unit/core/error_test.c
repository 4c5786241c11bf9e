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

/* The whole table, written out here and not derived from SR_ERR_MAP (which
 * it checks): every code's value, name and text.  A code added to the map
 * must be added here too (the count is checked). */
static const struct {
    int         code; /* the enum constant */
    int         value;
    const char *name, *text;
} pinned[] = {
    {SR_OK, 0, "SR_OK", "success"},
    {SR_EINVAL, -1, "SR_EINVAL", "invalid argument"},
    {SR_ENOMEM, -2, "SR_ENOMEM", "out of memory"},
    {SR_ETIMEDOUT, -3, "SR_ETIMEDOUT", "timed out"},
    {SR_EPROTO, -4, "SR_EPROTO", "malformed or unexpected message"},
    {SR_ECORRUPT, -5, "SR_ECORRUPT", "persistent state is corrupt"},
    {SR_ESTALE, -6, "SR_ESTALE", "request from a stale incarnation"},
    {SR_ESTORE, -7, "SR_ESTORE", "store (SQLite) failure"},
    {SR_EMSG, -8, "SR_EMSG", "messaging (ZeroMQ) failure"},
    {SR_EGPU, -9, "SR_EGPU", "CUDA/NCCL failure"},
    {SR_ENOTSUP, -10, "SR_ENOTSUP", "not supported in this build"},
    {SR_ENOENT, -11, "SR_ENOENT", "no such variable, step or file"},
    {SR_EEXIST, -12, "SR_EEXIST", "already exists with different properties"},
    {SR_ENOSPC, -13, "SR_ENOSPC", "no space left (disk full or store size limit)"},
    {SR_EACCES, -14, "SR_EACCES", "permission denied or read-only location"},
    {SR_ENOTREADY, -15, "SR_ENOTREADY", "model not ready"},
    {SR_EVERSION, -16, "SR_EVERSION", "made by a newer version of syncrep"},
    {SR_ECLOSED, -17, "SR_ECLOSED", "shutting down"},
    {SR_ENONFINITE, -18, "SR_ENONFINITE", "gradient contains NaN or Inf"},
    {SR_EBUSY, -19, "SR_EBUSY", "in use by another process"},
    {SR_EROLLBACK, -20, "SR_EROLLBACK", "store is behind the step it last committed"},
    {SR_ELIMIT, -21, "SR_ELIMIT", "over a limit of the coordinator"},
    {SR_EDONE, -22, "SR_EDONE", "the job has ended"},
};

static void
test_error_table_every_code_pinned(void **state)
{
    const size_t npinned = sizeof(pinned) / sizeof(pinned[0]);
    size_t       nmap = 0;
    (void)state;

#define COUNT_(name, val, text) nmap++;
    SR_ERR_MAP(COUNT_)
#undef COUNT_
    assert_int_equal(nmap, npinned);
    for (size_t i = 0; i < npinned; i++) {
        assert_int_equal(pinned[i].code, pinned[i].value);
        assert_string_equal(sr_errname(pinned[i].value), pinned[i].name);
        assert_string_equal(sr_strerror(pinned[i].value), pinned[i].text);
    }
    /* Past either end: no name, no text. */
    assert_string_equal(sr_errname(1), "SR_E?");
    assert_string_equal(sr_errname(-23), "SR_E?");
    assert_string_equal(sr_strerror(-23), "unknown error");
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
        cmocka_unit_test(test_error_table_every_code_pinned),
        cmocka_unit_test(test_error_snprintf_reports_truncation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
