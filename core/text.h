/*
 * Text that came from outside (variable names from a peer or an old store,
 * error details quoting them) on its way into a log line, an error reply or a
 * terminal.  One UTF-8 decoder, and one escaper whose output is printable: it
 * never holds a control character, invalid UTF-8 or an unescaped quote, so a
 * name cannot end a log line, forge a field or send a terminal escape code.
 * JSON strings are written by sr_strbuf_json_str (core/strbuf.h), with the
 * same decoder.  docs/protocol.md (DECLARE) has the rule for names.
 */
#ifndef SR_CORE_TEXT_H
#define SR_CORE_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* Decode the UTF-8 sequence at s[0..len).  Returns its length (1..4) and
 * sets *cp, or returns 0 when the bytes there are not well-formed UTF-8 (a
 * stray continuation byte, a byte that never starts a sequence, a sequence
 * cut short, an overlong encoding, a surrogate U+D800..U+DFFF, a code point
 * above U+10FFFF); then *why (when not NULL) gets a static description.
 * len 0 returns 0 with *why "end of text".  Never reads past s[len - 1]. */
size_t sr_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp, const char **why);

/* Write s[0..len) into dst (cap bytes, NUL-terminated when cap > 0) as
 * printable text: valid UTF-8 other than the controls below is copied;
 * '"' and '\' become \" and \\ (so the text may stand inside quotes); C0
 * controls, DEL and every byte that is not part of valid UTF-8 become \xNN;
 * C1 controls (U+0080..U+009F), the line and paragraph separators
 * U+2028/U+2029 and the bidirectional overrides (U+202A..U+202E,
 * U+2066..U+2069) become \uXXXX.  Text that does not fit ends in "..." at a
 * character boundary.  Returns the length written (excluding the NUL). */
size_t sr_text_escape(char *dst, size_t cap, const char *s, size_t len);

/* Room for any name of up to 255 bytes, escaped (at most 4 bytes per byte). */
#define SR_TEXT_ESC_CAP 1024

typedef struct {
    char s[SR_TEXT_ESC_CAP];
} sr_text_escbuf;

/* sr_text_escape of the NUL-terminated s ("(null)" for NULL), by value, so
 * that a format argument needs no buffer of its own:
 *     SR_LOG(SR_LOG_INFO, "X", "variable=\"%s\"", SR_ESC(name));
 * The array lives until the end of the full expression (C11 6.2.4p8). */
sr_text_escbuf sr_text_esc(const char *s);
/* Its argument (an out-of-line identity: the escaped text is usually far
 * shorter than the array, and snprintf's truncation warnings need not know
 * the array's size). */
const char *sr_text_str(const char *escaped);
#define SR_ESC(text) sr_text_str(sr_text_esc(text).s)

#endif
