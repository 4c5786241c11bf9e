/* Growable text buffer.  See core/strbuf.h. */
#include "core/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text.h"

void
sr_strbuf_init(sr_strbuf *b)
{
    memset(b, 0, sizeof(*b));
}

void
sr_strbuf_free(sr_strbuf *b)
{
    free(b->data);
    sr_strbuf_init(b);
}

static int
reserve(sr_strbuf *b, size_t extra)
{
    if (b->failed) {
        return -1;
    }
    if (b->len + extra + 1 <= b->cap) {
        return 0;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (p == NULL) {
        b->failed = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

void
sr_strbuf_append(sr_strbuf *b, const char *s, size_t len)
{
    if (reserve(b, len) != 0) {
        return;
    }
    memcpy(b->data + b->len, s, len);
    b->len += len;
    b->data[b->len] = '\0';
}

void
sr_strbuf_printf(sr_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || reserve(b, (size_t)n) != 0) {
        b->failed = b->failed || n < 0;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void
sr_strbuf_json_str(sr_strbuf *b, const char *s)
{
    sr_strbuf_json_strn(b, s, s != NULL ? strlen(s) : 0);
}

/* Valid UTF-8 passes through; '"', '\\', C0 controls, DEL, C1 controls and
 * U+2028/U+2029 (line ends to JavaScript) are escaped; a byte that is not
 * part of valid UTF-8 becomes \ufffd, so the result is always valid JSON. */
void
sr_strbuf_json_strn(sr_strbuf *b, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    uint32_t             cp;
    size_t               n;

    sr_strbuf_append(b, "\"", 1);
    for (size_t i = 0; i < len; i += n) {
        if ((n = sr_utf8_decode(p + i, len - i, &cp, NULL)) == 0) {
            sr_strbuf_append(b, "\\ufffd", 6);
            n = 1;
        } else if (cp == '"' || cp == '\\') {
            char esc[2] = {'\\', (char)cp};
            sr_strbuf_append(b, esc, 2);
        } else if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029) {
            sr_strbuf_printf(b, "\\u%04x", (unsigned)cp);
        } else {
            sr_strbuf_append(b, (const char *)p + i, n);
        }
    }
    sr_strbuf_append(b, "\"", 1);
}

sr_err
sr_strbuf_result(const sr_strbuf *b, const char **out)
{
    if (b->failed) {
        return sr_fail(SR_ENOMEM, "text buffer allocation failed");
    }
    *out = b->data ? b->data : "";
    return SR_OK;
}
