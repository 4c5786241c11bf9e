/*
 * Logging: one event per line, a stable <COMPONENT>-<EVENT> id and key=value
 * fields.  Levels are RFC 5424.  SR_LOG checks the level before evaluating
 * its arguments.  Libraries never print: the sink decides (default: stderr
 * with a timestamp; sr_log_set_sink replaces it).
 */
#ifndef SR_CORE_LOG_H
#define SR_CORE_LOG_H

#include "core/error.h"

typedef enum {
    SR_LOG_ERR = 3,
    SR_LOG_WARN = 4,
    SR_LOG_NOTICE = 5,
    SR_LOG_INFO = 6,
    SR_LOG_DEBUG = 7,
} sr_log_level;

typedef void (*sr_log_sink)(void *arg, int level, const char *id, const char *msg);

/* Current threshold; messages with level > threshold are dropped. */
extern int sr_log_threshold;

/* Replace the sink (NULL restores the default stderr sink).  Not thread-safe
 * against concurrent logging: call at start-up. */
void sr_log_set_sink(sr_log_sink sink, void *arg);
/* Set the threshold (SR_LOG_ERR .. SR_LOG_DEBUG). */
void sr_log_set_level(int level);
/* Parse "err|warn|notice|info|debug"; SR_EINVAL for anything else. */
sr_err sr_log_parse_level(const char *s, int *out);

void sr_log_emit(int level, const char *id, const char *fmt, ...) SR_PRINTF(3, 4);

#define SR_LOG(level, id, ...)                       \
    do {                                             \
        if ((level) <= sr_log_threshold) {           \
            sr_log_emit((level), (id), __VA_ARGS__); \
        }                                            \
    } while (0)

#endif
