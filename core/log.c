/* Logging sink and level.  See core/log.h. */
#include "core/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int sr_log_threshold = SR_LOG_INFO;

static sr_log_sink     sink_fn;
static void           *sink_arg;
static pthread_mutex_t stderr_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *
level_name(int level)
{
    switch (level) {
    case SR_LOG_ERR:
        return "ERR";
    case SR_LOG_WARN:
        return "WARN";
    case SR_LOG_NOTICE:
        return "NOTICE";
    case SR_LOG_INFO:
        return "INFO";
    default:
        return "DEBUG";
    }
}

static void
stderr_sink(int level, const char *id, const char *msg)
{
    struct timespec ts;
    struct tm       tm;
    char            when[32];

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    pthread_mutex_lock(&stderr_lock);
    fprintf(stderr, "%s.%03ldZ %-6s %s %s\n", when, ts.tv_nsec / 1000000L, level_name(level), id,
            msg);
    fflush(stderr);
    pthread_mutex_unlock(&stderr_lock);
}

void
sr_log_set_sink(sr_log_sink sink, void *arg)
{
    sink_fn = sink;
    sink_arg = arg;
}

void
sr_log_set_level(int level)
{
    sr_log_threshold = level;
}

sr_err
sr_log_parse_level(const char *s, int *out)
{
    static const struct {
        const char *name;
        int         level;
    } names[] = {
        {"err", SR_LOG_ERR},   {"warn", SR_LOG_WARN},   {"notice", SR_LOG_NOTICE},
        {"info", SR_LOG_INFO}, {"debug", SR_LOG_DEBUG},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].level;
            return SR_OK;
        }
    }
    return sr_fail(SR_EINVAL, "unknown log level '%s' (err|warn|notice|info|debug)", s);
}

void
sr_log_emit(int level, const char *id, const char *fmt, ...)
{
    char    msg[2048];
    va_list ap;

    va_start(ap, fmt);
    if (vsnprintf(msg, sizeof(msg), fmt, ap) < 0) {
        msg[0] = '\0';
    }
    va_end(ap);
    if (sink_fn != NULL) {
        sink_fn(sink_arg, level, id, msg);
    } else {
        stderr_sink(level, id, msg);
    }
}
