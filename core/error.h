/*
 * Recording failures: sr_fail() keeps a thread-local detail and returns the
 * code, so `return sr_fail(SR_EPROTO, "frame len %u > max %u", n, max);`
 * both reports and propagates.  Corruption carries file:line.
 */
#ifndef SR_CORE_ERROR_H
#define SR_CORE_ERROR_H

#include <stdarg.h>
#include <stdio.h>

#include "syncrep/error.h"

#if defined(__GNUC__)
#define SR_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define SR_PRINTF(f, a)
#endif

/* Record the detail for `e` on this thread and return `e`. */
sr_err sr_fail(sr_err e, const char *fmt, ...) SR_PRINTF(2, 3);
sr_err sr_vfail(sr_err e, const char *fmt, va_list ap) SR_PRINTF(2, 0);
/* As sr_fail, prefixing "file:line: ". */
sr_err sr_fail_at(sr_err e, const char *file, int line, const char *fmt, ...) SR_PRINTF(4, 5);
/* Clear this thread's detail. */
void sr_clear_error(void);

#define SR_CORRUPT(...) sr_fail_at(SR_ECORRUPT, __FILE__, __LINE__, __VA_ARGS__)

/* Invariants.  SR_ASSERT compiles out of release builds; SR_ALWAYS/SR_NEVER
 * assert in debug builds but still evaluate (and return the condition) in
 * release, so the code can recover. */
#ifdef NDEBUG
#define SR_ASSERT(x) ((void)0)
#define SR_ALWAYS(x) (x)
#define SR_NEVER(x)  (x)
#else
#include <assert.h>
#define SR_ASSERT(x) assert(x)
#define SR_ALWAYS(x) ((x) ? 1 : (assert(0 && #x), 0))
#define SR_NEVER(x)  ((x) ? (assert(0 && #x), 1) : 0)
#endif

/* Checked snprintf into a fixed buffer: truncation is reported, not silent.
 * Returns SR_OK or SR_EINVAL (with detail) when `buf` was too small. */
sr_err sr_snprintf(char *buf, size_t len, const char *fmt, ...) SR_PRINTF(3, 4);

/* The sr_err for a file-system errno: EACCES/EPERM/EROFS SR_EACCES,
 * ENOENT/ENOTDIR SR_ENOENT, ENOSPC/EDQUOT SR_ENOSPC, ENOMEM SR_ENOMEM, any
 * other `otherwise`. */
sr_err sr_err_from_errno(int e, sr_err otherwise);

#endif
