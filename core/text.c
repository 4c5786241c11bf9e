/* UTF-8 decoding and printable escaping.  See core/text.h. */
#include "core/text.h"

#include <stdio.h>
#include <string.h>

size_t
sr_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp, const char **why)
{
    /* The smallest code point each length may carry: less is overlong. */
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    const char           *w;
    uint32_t              c;
    size_t                n;

    if (len == 0) {
        w = "end of text";
        goto bad;
    }
    c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c < 0xc0) {
        w = "a continuation byte without a lead byte";
        goto bad;
    } else if (c < 0xe0) {
        n = 2;
        c &= 0x1f;
    } else if (c < 0xf0) {
        n = 3;
        c &= 0x0f;
    } else if (c < 0xf8) {
        n = 4;
        c &= 0x07;
    } else {
        w = "a byte that never occurs in UTF-8";
        goto bad;
    }
    for (size_t i = 1; i < n; i++) {
        if (i >= len || (s[i] & 0xc0) != 0x80) {
            w = "a multi-byte sequence cut short";
            goto bad;
        }
        c = (c << 6) | (uint32_t)(s[i] & 0x3f);
    }
    if (c < min_cp[n]) {
        w = "an overlong encoding";
        goto bad;
    }
    if (c >= 0xd800 && c <= 0xdfff) {
        w = "a UTF-16 surrogate (U+D800..U+DFFF)";
        goto bad;
    }
    if (c > 0x10ffff) {
        w = "a code point above U+10FFFF";
        goto bad;
    }
    *cp = c;
    return n;
bad:
    if (why != NULL) {
        *why = w;
    }
    return 0;
}

/* Code points shown as \uXXXX although they are valid: C1 controls, and
 * those that move or reorder the text around them in a terminal or viewer. */
static int
shown_as_u(uint32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
           (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* The escaped form of the character at s[i]: into tmp (or pointing into s);
 * *n gets the input bytes it stands for, the return its output length. */
static size_t
piece(const unsigned char *s, size_t len, size_t i, char tmp[8], const char **out, size_t *n)
{
    uint32_t cp;
    size_t   k = sr_utf8_decode(s + i, len - i, &cp, NULL);

    if (k == 0) {
        *n = 1;
        *out = tmp;
        return (size_t)snprintf(tmp, 8, "\\x%02x", s[i]);
    }
    *n = k;
    *out = tmp;
    if (cp == '"' || cp == '\\') {
        tmp[0] = '\\';
        tmp[1] = (char)cp;
        tmp[2] = '\0';
        return 2;
    }
    if (cp < 0x20 || cp == 0x7f) {
        return (size_t)snprintf(tmp, 8, "\\x%02x", (unsigned)cp);
    }
    if (shown_as_u(cp)) {
        return (size_t)snprintf(tmp, 8, "\\u%04x", (unsigned)cp);
    }
    *out = (const char *)s + i;
    return k;
}

size_t
sr_text_escape(char *dst, size_t cap, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    const char          *src;
    char                 tmp[8];
    size_t               total = 0, o = 0, n, k;

    if (cap == 0) {
        return 0;
    }
    for (size_t i = 0; i < len; i += n) {
        total += piece(p, len, i, tmp, &src, &n);
    }
    /* Too long: keep room for the "..." that says so. */
    size_t room = total <= cap - 1 ? cap - 1 : (cap - 1 >= 3 ? cap - 4 : 0);
    for (size_t i = 0; i < len; i += n) {
        k = piece(p, len, i, tmp, &src, &n);
        if (o + k > room) {
            break;
        }
        memcpy(dst + o, src, k);
        o += k;
    }
    if (total > cap - 1) {
        for (int d = 0; d < 3 && o + 1 < cap; d++) {
            dst[o++] = '.';
        }
    }
    dst[o] = '\0';
    return o;
}

sr_text_escbuf
sr_text_esc(const char *s)
{
    sr_text_escbuf b;

    if (s == NULL) {
        s = "(null)";
    }
    sr_text_escape(b.s, sizeof(b.s), s, strlen(s));
    return b;
}

const char *
sr_text_str(const char *escaped)
{
    return escaped;
}
