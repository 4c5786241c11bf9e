/* Error table, thread-local failure detail.  See core/error.h. */
#include "core/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char detail[1024];

const char *
sr_strerror(int e)
{
    switch (e) {
#define SR_ERR_TEXT_(name, val, text) \
    case val:                         \
        return text;
        SR_ERR_MAP(SR_ERR_TEXT_)
#undef SR_ERR_TEXT_
    default:
        return "unknown error";
    }
}

const char *
sr_errname(int e)
{
    switch (e) {
#define SR_ERR_NAME_(name, val, text) \
    case val:                         \
        return "SR_" #name;
        SR_ERR_MAP(SR_ERR_NAME_)
#undef SR_ERR_NAME_
    default:
        return "SR_E?";
    }
}

const char *
sr_errdetail(void)
{
    return detail;
}

void
sr_clear_error(void)
{
    detail[0] = '\0';
}

sr_err
sr_vfail(sr_err e, const char *fmt, va_list ap)
{
    int n = vsnprintf(detail, sizeof(detail), fmt, ap);
    if (n < 0) {
        detail[0] = '\0';
    }
    return e;
}

sr_err
sr_fail(sr_err e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sr_vfail(e, fmt, ap);
    va_end(ap);
    return e;
}

sr_err
sr_fail_at(sr_err e, const char *file, int line, const char *fmt, ...)
{
    char    msg[sizeof(detail) - 64];
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(msg, sizeof(msg), fmt, ap) < 0) {
        msg[0] = '\0';
    }
    va_end(ap);
    const char *base = strrchr(file, '/');
    return sr_fail(e, "%s:%d: %s", base ? base + 1 : file, line, msg);
}

sr_err
sr_snprintf(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len) {
        return sr_fail(SR_EINVAL, "text too long for a %zu-byte buffer", len);
    }
    return SR_OK;
}

sr_err
sr_err_from_errno(int e, sr_err otherwise)
{
    switch (e) {
    case EACCES:
    case EPERM:
    case EROFS:
        return SR_EACCES;
    case ENOENT:
    case ENOTDIR:
        return SR_ENOENT;
    case ENOSPC:
    case EDQUOT:
        return SR_ENOSPC;
    case ENOMEM:
        return SR_ENOMEM;
    default:
        return otherwise;
    }
}
