/* core/text.c: the UTF-8 decoder and the printable escaper. */
#include "sr_test.h"

#include <string.h>

#include "core/text.h"

static void
test_text_utf8_decode_lengths_and_code_points(void **state)
{
    const unsigned char *s;
    const char          *why = NULL;
    uint32_t             cp = 0;
    (void)state;

    assert_int_equal(sr_utf8_decode((const unsigned char *)"A", 1, &cp, NULL), 1);
    assert_int_equal(cp, 0x41);
    s = (const unsigned char *)"\xc3\xb6";
    assert_int_equal(sr_utf8_decode(s, 2, &cp, NULL), 2);
    assert_int_equal(cp, 0xf6);
    s = (const unsigned char *)"\xe9\x87\x8d";
    assert_int_equal(sr_utf8_decode(s, 3, &cp, NULL), 3);
    assert_int_equal(cp, 0x91cd);
    s = (const unsigned char *)"\xf0\x9f\x94\xa5";
    assert_int_equal(sr_utf8_decode(s, 4, &cp, NULL), 4);
    assert_int_equal(cp, 0x1f525);
    /* A valid sequence is not read past len. */
    assert_int_equal(sr_utf8_decode(s, 3, &cp, &why), 0);
    assert_non_null(strstr(why, "cut short"));
    assert_int_equal(sr_utf8_decode(s, 0, &cp, &why), 0);
    assert_string_equal(why, "end of text");
}

typedef struct {
    const char *in;
    size_t      len; /* 0: strlen(in) */
    const char *out;
} esc_case;

static void
test_text_escape_controls_quotes_and_bad_bytes(void **state)
{
    static const esc_case cases[] = {
        {"layer1.0.conv1.weight", 0, "layer1.0.conv1.weight"},
        {"with space", 0, "with space"},
        {"a\"b\\c", 0, "a\\\"b\\\\c"},
        {"a\nCOORD-FAKE x=1", 0, "a\\x0aCOORD-FAKE x=1"},
        {"\x1b[31mred", 0, "\\x1b[31mred"},
        {"del\x7f", 0, "del\\x7f"},
        {"nul\0x", 5, "nul\\x00x"},
        {"Gr\xc3\xb6\xc3\x9f"
         "e",
         0,
         "Gr\xc3\xb6\xc3\x9f"
         "e"},
        {"\xe9\x87\x8d\xe3\x81\xbf", 0, "\xe9\x87\x8d\xe3\x81\xbf"},
        {"\xf0\x9f\x94\xa5", 0, "\xf0\x9f\x94\xa5"},
        {"c1\xc2\x85", 0, "c1\\u0085"},
        {"rlo\xe2\x80\xae", 0, "rlo\\u202e"},
        {"ls\xe2\x80\xa8", 0, "ls\\u2028"},
        {"ff\xff", 0, "ff\\xff"},
        {"\xc0\xaf", 0, "\\xc0\\xaf"},
        {"\xed\xa0\x80", 0, "\\xed\\xa0\\x80"},
        {"cut\xe9\x87", 0, "cut\\xe9\\x87"},
        {"\xe9x", 0, "\\xe9x"},
        {"", 0, ""},
    };
    char out[64];
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t len = cases[i].len ? cases[i].len : strlen(cases[i].in);
        size_t n = sr_text_escape(out, sizeof(out), cases[i].in, len);
        if (strcmp(out, cases[i].out) != 0) {
            fail_msg("case %zu: got '%s', want '%s'", i, out, cases[i].out);
        }
        assert_int_equal(n, strlen(out));
    }
}

static void
test_text_escape_truncates_at_a_character_boundary(void **state)
{
    char out[8];
    (void)state;

    /* Fits exactly: 7 characters and the NUL. */
    assert_int_equal(sr_text_escape(out, sizeof(out), "abcdefg", 7), 7);
    assert_string_equal(out, "abcdefg");
    /* Too long: "..." says so. */
    assert_int_equal(sr_text_escape(out, sizeof(out), "abcdefgh", 8), 7);
    assert_string_equal(out, "abcd...");
    /* Neither an escape nor a UTF-8 sequence is cut in half. */
    sr_text_escape(out, sizeof(out), "ab\n\n\n", 5);
    assert_string_equal(out, "ab...");
    sr_text_escape(out, sizeof(out), "abc\xe9\x87\x8dxyz", 9);
    assert_string_equal(out, "abc...");
    /* Tiny buffers. */
    assert_int_equal(sr_text_escape(out, 1, "abc", 3), 0);
    assert_string_equal(out, "");
    sr_text_escape(out, 3, "abcdef", 6);
    assert_string_equal(out, "..");
    assert_int_equal(sr_text_escape(out, 0, "abc", 3), 0);
}

static void
test_text_esc_by_value_in_a_format_argument(void **state)
{
    char line[256];
    char worst[256];
    (void)state;

    snprintf(line, sizeof(line), "variable=\"%s\" slot=\"%s\"", SR_ESC("a\nb"), SR_ESC("m\"x"));
    assert_string_equal(line, "variable=\"a\\x0ab\" slot=\"m\\\"x\"");
    assert_string_equal(SR_ESC(NULL), "(null)");
    /* The longest name, all bad bytes, fits without truncation. */
    memset(worst, 0xff, 255);
    worst[255] = '\0';
    assert_int_equal(strlen(SR_ESC(worst)), 4 * 255);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_utf8_decode_lengths_and_code_points),
        cmocka_unit_test(test_text_escape_controls_quotes_and_bad_bytes),
        cmocka_unit_test(test_text_escape_truncates_at_a_character_boundary),
        cmocka_unit_test(test_text_esc_by_value_in_a_format_argument),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
