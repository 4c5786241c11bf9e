/* The rule for variable names.  See core/name.h. */
#include "core/name.h"

#include <stdint.h>

#include "core/text.h"

#define RULE "a name is 1..255 bytes of UTF-8 without control characters"

sr_err
sr_name_check(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    const char          *why = "";
    uint32_t             cp;
    size_t               n;

    if (s == NULL) {
        return sr_fail(SR_EINVAL, "name is NULL");
    }
    if (len == 0) {
        return sr_fail(SR_EINVAL, "name is empty (" RULE ")");
    }
    if (len > SR_NAME_MAX) {
        return sr_fail(SR_EINVAL, "name is %zu bytes, more than %d (" RULE ")", len, SR_NAME_MAX);
    }
    for (size_t i = 0; i < len; i += n) {
        if ((n = sr_utf8_decode(p + i, len - i, &cp, &why)) == 0) {
            return sr_fail(SR_EINVAL, "name is not UTF-8 at byte %zu (0x%02x: %s; " RULE ")", i,
                           p[i], why);
        }
        if (cp == 0) {
            return sr_fail(SR_EINVAL, "name has a NUL at byte %zu (" RULE ")", i);
        }
        if (cp < 0x20 || cp == 0x7f) {
            return sr_fail(SR_EINVAL,
                           "name has the control character 0x%02x at byte %zu (" RULE ")",
                           (unsigned)cp, i);
        }
        if (cp >= 0x80 && cp <= 0x9f) {
            return sr_fail(SR_EINVAL,
                           "name has the C1 control character U+%04X at byte %zu (" RULE ")",
                           (unsigned)cp, i);
        }
    }
    return SR_OK;
}
