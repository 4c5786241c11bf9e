/* A coordinator's command line.  See coord_argv.h. */
#include "tools/coord_argv.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Copy the formatted text into a->text as the next argument. */
static void push(sr_coord_argv *a, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void
push(sr_coord_argv *a, const char *fmt, va_list ap)
{
    size_t room = sizeof(a->text) - a->used;
    int    k;

    if (a->overflow || a->n >= SR_COORD_ARGV_MAX) {
        a->overflow = 1;
        return;
    }
    k = vsnprintf(a->text + a->used, room, fmt, ap);
    if (k < 0 || (size_t)k >= room) {
        a->overflow = 1;
        return;
    }
    a->argv[a->n++] = a->text + a->used;
    a->argv[a->n] = NULL;
    a->used += (size_t)k + 1;
}

static void pushf(sr_coord_argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
pushf(sr_coord_argv *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    push(a, fmt, ap);
    va_end(ap);
}

void
sr_coord_argv_init(sr_coord_argv *a, const char *syncrep, const char *store, const char *endpoint)
{
    memset(a, 0, sizeof(*a));
    sr_coord_argv_add(a, syncrep);
    sr_coord_argv_add(a, "coordinator");
    sr_coord_argv_opt(a, "--store", "%s", store);
    sr_coord_argv_opt(a, "--bind", "%s", endpoint);
}

void
sr_coord_argv_add(sr_coord_argv *a, const char *arg)
{
    pushf(a, "%s", arg);
}

void
sr_coord_argv_opt(sr_coord_argv *a, const char *opt, const char *fmt, ...)
{
    va_list ap;
    sr_coord_argv_add(a, opt);
    va_start(ap, fmt);
    push(a, fmt, ap);
    va_end(ap);
}

char *const *
sr_coord_argv_get(sr_coord_argv *a)
{
    return a->overflow ? NULL : a->argv;
}
