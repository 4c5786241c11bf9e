/*
 * syncrep error codes.  Success is 0 and every error is negative, so callers
 * test `rc < 0`.  The values travel on the wire and into the store: never
 * renumber or reuse one; add new codes at the end.
 */
#ifndef SYNCREP_ERROR_H
#define SYNCREP_ERROR_H

#include "syncrep/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SR_ERR_MAP(X)                                               \
    X(OK, 0, "success")                                             \
    X(EINVAL, -1, "invalid argument")                               \
    X(ENOMEM, -2, "out of memory")                                  \
    X(ETIMEDOUT, -3, "timed out")                                   \
    X(EPROTO, -4, "malformed or unexpected message")                \
    X(ECORRUPT, -5, "persistent state is corrupt")                  \
    X(ESTALE, -6, "request from a stale incarnation")               \
    X(ESTORE, -7, "store (SQLite) failure")                         \
    X(EMSG, -8, "messaging (ZeroMQ) failure")                       \
    X(EGPU, -9, "CUDA/NCCL failure")                                \
    X(ENOTSUP, -10, "not supported in this build")                  \
    X(ENOENT, -11, "no such variable, step or file")                \
    X(EEXIST, -12, "already exists with different properties")      \
    X(ENOSPC, -13, "no space left (disk full or store size limit)") \
    X(EACCES, -14, "permission denied or read-only location")       \
    X(ENOTREADY, -15, "model not ready")                            \
    X(EVERSION, -16, "made by a newer version of syncrep")          \
    X(ECLOSED, -17, "shutting down")                                \
    X(ENONFINITE, -18, "gradient contains NaN or Inf")              \
    X(EBUSY, -19, "in use by another process")                      \
    X(EROLLBACK, -20, "store is behind the step it last committed") \
    X(ELIMIT, -21, "over a limit of the coordinator")               \
    X(EDONE, -22, "the job has ended")

typedef enum {
#define SR_ERR_ENUM_(name, val, text) SR_##name = val,
    SR_ERR_MAP(SR_ERR_ENUM_)
#undef SR_ERR_ENUM_
} sr_err;

/* Static English text for `e`; never NULL ("unknown error" for values not
 * in the table).  Thread-safe. */
SR_API const char *sr_strerror(int e);

/* Stable symbolic name for `e` ("SR_ETIMEDOUT"); never NULL.  Thread-safe. */
SR_API const char *sr_errname(int e);

/* Detail of the last failure recorded on this thread (thread-local); "" when
 * none.  Valid until the next syncrep call on this thread: read it at once. */
SR_API const char *sr_errdetail(void);

#ifdef __cplusplus
}
#endif
#endif
