/* A growable text buffer, for JSON and reports.  Allocation failure is
 * sticky: the buffer keeps `failed` set and further appends do nothing. */
#ifndef SR_CORE_STRBUF_H
#define SR_CORE_STRBUF_H

#include <stddef.h>

#include "core/error.h"

typedef struct sr_strbuf {
    char  *data;   /* NUL-terminated when len > 0 */
    size_t len;    /* bytes used, excluding the NUL */
    size_t cap;    /* bytes allocated */
    int    failed; /* an allocation failed */
} sr_strbuf;

void sr_strbuf_init(sr_strbuf *b);
void sr_strbuf_free(sr_strbuf *b);
void sr_strbuf_printf(sr_strbuf *b, const char *fmt, ...) SR_PRINTF(2, 3);
void sr_strbuf_append(sr_strbuf *b, const char *s, size_t len);
/* Append `s` (NUL-terminated; NULL is "") as a JSON string literal, quotes
 * included.  Always valid JSON whatever the bytes: '"' and '\\' are escaped,
 * control characters (C0, DEL, C1) and U+2028/U+2029 become \u00XX / \u20XX,
 * and each byte that is not part of well-formed UTF-8 becomes \ufffd (the
 * replacement character; core/text.h's sr_text_escape shows such bytes as
 * \xNN where the exact bytes matter). */
void sr_strbuf_json_str(sr_strbuf *b, const char *s);
/* The same for s[0..len), which may hold NULs (written as \u0000). */
void sr_strbuf_json_strn(sr_strbuf *b, const char *s, size_t len);
/* The text ("" when empty); SR_ENOMEM if an append failed. */
sr_err sr_strbuf_result(const sr_strbuf *b, const char **out);

#endif
