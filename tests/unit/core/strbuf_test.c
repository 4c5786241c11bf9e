/* core/strbuf.c: the growable buffer and its JSON string writer, which must
 * give valid JSON whatever bytes a name holds. */
#include "sr_test.h"

#include <string.h>

#include "core/strbuf.h"
#include "core/text.h"

typedef struct {
    const char *in;
    size_t      len; /* 0: strlen(in) */
    const char *out;
} json_case;

static void
test_strbuf_json_str_always_valid_json(void **state)
{
    static const json_case cases[] = {
        {"layer1.0.conv1.weight", 0, "\"layer1.0.conv1.weight\""},
        {"a\"b\\c/d", 0, "\"a\\\"b\\\\c/d\""},
        {"a\nb\r\t", 0, "\"a\\u000ab\\u000d\\u0009\""},
        {"\x1b[31m", 0, "\"\\u001b[31m\""},
        {"del\x7f", 0, "\"del\\u007f\""},
        {"nul\0x", 5, "\"nul\\u0000x\""},
        {"c1\xc2\x85", 0, "\"c1\\u0085\""},
        {"ls\xe2\x80\xa8", 0, "\"ls\\u2028\""},
        {"Gr\xc3\xb6\xc3\x9f"
         "e",
         0,
         "\"Gr\xc3\xb6\xc3\x9f"
         "e\""},
        {"\xe9\x87\x8d\xe3\x81\xbf", 0, "\"\xe9\x87\x8d\xe3\x81\xbf\""},
        {"\xf0\x9f\x94\xa5", 0, "\"\xf0\x9f\x94\xa5\""},
        {"ff\xff", 0, "\"ff\\ufffd\""},
        {"\xc0\xaf", 0, "\"\\ufffd\\ufffd\""},
        {"\xed\xa0\x80", 0, "\"\\ufffd\\ufffd\\ufffd\""},
        {"cut\xe9\x87", 0, "\"cut\\ufffd\\ufffd\""},
        {"", 0, "\"\""},
    };
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sr_strbuf   b;
        const char *text;
        size_t      len = cases[i].len ? cases[i].len : strlen(cases[i].in);

        sr_strbuf_init(&b);
        sr_strbuf_json_strn(&b, cases[i].in, len);
        assert_sr_ok(sr_strbuf_result(&b, &text));
        if (strcmp(text, cases[i].out) != 0) {
            fail_msg("case %zu: got '%s', want '%s'", i, text, cases[i].out);
        }
        /* Well-formed UTF-8 without a raw control character: valid JSON text. */
        for (size_t k = 0, n; k < b.len; k += n) {
            uint32_t cp;
            n = sr_utf8_decode((const unsigned char *)text + k, b.len - k, &cp, NULL);
            assert_true(n > 0);
            assert_true(cp >= 0x20);
        }
        sr_strbuf_free(&b);
    }
}

static void
test_strbuf_json_str_null_is_empty_string(void **state)
{
    sr_strbuf   b;
    const char *text;
    (void)state;

    sr_strbuf_init(&b);
    sr_strbuf_json_str(&b, NULL);
    sr_strbuf_printf(&b, ",%d", 7);
    assert_sr_ok(sr_strbuf_result(&b, &text));
    assert_string_equal(text, "\"\",7");
    sr_strbuf_free(&b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strbuf_json_str_always_valid_json),
        cmocka_unit_test(test_strbuf_json_str_null_is_empty_string),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
