/*
 * Variable names are data: 1..SR_NAME_MAX bytes of well-formed UTF-8 without
 * control characters.  One check, used by libsyncrep before it sends a
 * DECLARE, by the coordinator on every message that carries a name, and by
 * the store when it declares.  docs/protocol.md (DECLARE) has the rule.
 */
#ifndef SR_CORE_NAME_H
#define SR_CORE_NAME_H

#include <stddef.h>

#include "core/error.h"

/* Bytes in a name; SR_WIRE_MAX_NAME and SR_STORE_MAX_NAME are the same. */
#define SR_NAME_MAX 255

/* SR_OK when s[0..len) is a valid name: 1..SR_NAME_MAX bytes, well-formed
 * UTF-8 (no overlong encoding, surrogate, code point above U+10FFFF or cut
 * sequence), no C0 control (U+0000..U+001F, NUL included), no DEL (U+007F),
 * no C1 control (U+0080..U+009F).  Anything else is allowed: spaces, quotes,
 * backslashes, slashes, dots, any letter, emoji.  Otherwise SR_EINVAL, with
 * a detail saying what is wrong and at which byte offset (it never quotes
 * the name's bytes).  Thread-safe. */
sr_err sr_name_check(const char *s, size_t len);

#endif
