/* Growable text buffer.  See core/strbuf.h. */
#include "core/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    sr_strbuf_append(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char esc[2] = {'\\', (char)*p};
            sr_strbuf_append(b, esc, 2);
        } else if (*p < 0x20) {
            sr_strbuf_printf(b, "\\u%04x", *p);
        } else {
            sr_strbuf_append(b, (const char *)p, 1);
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
