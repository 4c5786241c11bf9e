/* core/name.c: the rule for variable names, table-driven. */
#include "sr_test.h"

#include <string.h>

#include "core/name.h"

typedef struct {
    const char *name;
    size_t      len; /* 0: strlen(name) */
} name_case;

static size_t
case_len(const name_case *c)
{
    return c->len ? c->len : strlen(c->name);
}

static void
test_name_check_pytorch_and_unicode_names_accepted(void **state)
{
    static const name_case ok[] = {
        {"w", 0},
        {"layer1.0.conv1.weight", 0},
        {"module.encoder.layers.11.self_attn.in_proj_bias", 0},
        {"with spaces and \"quotes\" and \\backslashes\\", 0},
        {"a/b/c:0", 0},
        {"Gewichte/Gr\xc3\xb6\xc3\x9f"
         "e",
         0},                             /* Größe */
        {"\xe9\x87\x8d\xe3\x81\xbf", 0}, /* 重み */
        {"\xf0\x9f\x94\xa5 fire", 0},    /* emoji, 4 bytes */
        {"\xc2\xa0nbsp", 0},             /* U+00A0, just past C1 */
        {"\xef\xbf\xbd", 0},             /* U+FFFD itself */
        {"\xf4\x8f\xbf\xbf", 0},         /* U+10FFFF, the last */
        {"\xed\x9f\xbf", 0},             /* U+D7FF, before surrogates */
        {"\xee\x80\x80", 0},             /* U+E000, after them */
        {"~", 0},                        /* 0x7e, before DEL */
    };
    char longest[SR_NAME_MAX + 1];
    (void)state;

    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        if (sr_name_check(ok[i].name, case_len(&ok[i])) != SR_OK) {
            fail_msg("case %zu refused: %s", i, sr_errdetail());
        }
    }
    memset(longest, 'x', SR_NAME_MAX);
    longest[SR_NAME_MAX] = '\0';
    assert_sr_ok(sr_name_check(longest, SR_NAME_MAX));
}

typedef struct {
    const char *name;
    size_t      len;
    const char *detail; /* a substring of the detail */
} bad_case;

static void
test_name_check_controls_and_bad_utf8_refused_with_offset(void **state)
{
    static const bad_case bad[] = {
        {"", 0, "empty"},
        {"a\nb", 0, "control character 0x0a at byte 1"},
        {"\x1b[31mred", 0, "control character 0x1b at byte 0"},
        {"tab\there", 0, "control character 0x09 at byte 3"},
        {"del\x7f", 0, "control character 0x7f at byte 3"},
        {"nul\0x", 5, "NUL at byte 3"},
        {"c1\xc2\x85", 0, "C1 control character U+0085 at byte 2"},
        {"c1\xc2\x9f", 0, "U+009F at byte 2"},
        {"ff\xff", 0, "byte 2 (0xff: a byte that never occurs"},
        {"\xfe", 0, "byte 0 (0xfe"},
        {"x\x80", 0, "byte 1 (0x80: a continuation byte without a lead"},
        {"\xc0\xaf", 0, "byte 0 (0xc0: an overlong encoding"},
        {"\xc1\xbf", 0, "overlong"},
        {"\xe0\x80\xaf", 0, "overlong"},
        {"\xf0\x80\x80\xaf", 0, "overlong"},
        {"ab\xed\xa0\x80", 0, "byte 2 (0xed: a UTF-16 surrogate"},
        {"\xed\xbf\xbf", 0, "surrogate"},
        {"\xf4\x90\x80\x80", 0, "above U+10FFFF"},
        {"\xf5\x80\x80\x80", 0, "above U+10FFFF"},
        {"cut\xe9\x87", 0, "byte 3 (0xe9: a multi-byte sequence cut short"},
        {"cut\xf0\x9f\x94", 0, "cut short"},
        {"\xe9x\x87", 0, "cut short"},
        {"\xc3", 0, "cut short"},
    };
    char toolong[SR_NAME_MAX + 2];
    (void)state;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t len = bad[i].len ? bad[i].len : strlen(bad[i].name);
        if (sr_name_check(bad[i].name, len) != SR_EINVAL) {
            fail_msg("case %zu accepted", i);
        }
        if (strstr(sr_errdetail(), bad[i].detail) == NULL) {
            fail_msg("case %zu: detail '%s' lacks '%s'", i, sr_errdetail(), bad[i].detail);
        }
        /* The detail never quotes the name's bytes: printable ASCII only. */
        for (const char *p = sr_errdetail(); *p; p++) {
            assert_true(*p >= 0x20 && *p < 0x7f);
        }
    }
    memset(toolong, 'x', SR_NAME_MAX + 1);
    toolong[SR_NAME_MAX + 1] = '\0';
    assert_sr_err(sr_name_check(toolong, SR_NAME_MAX + 1), SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), "256 bytes, more than 255"));
    assert_sr_err(sr_name_check(NULL, 1), SR_EINVAL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_check_pytorch_and_unicode_names_accepted),
        cmocka_unit_test(test_name_check_controls_and_bad_utf8_refused_with_offset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
