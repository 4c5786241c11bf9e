/* Command-line option values for the programs in cli/ and chaos/ (the
 * `syncrep` subcommands): usage errors and number parsing.  See args.h. */
#include "tools/args.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int
sr_args_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "syncrep %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see syncrep %s --help)\n", cmd);
    return 2;
}

int
sr_args_parse_i64(const char *s, long long min, long long max, long long *out)
{
    char     *end;
    long long v;

    if (s == NULL || *s == '\0') {
        return -1;
    }
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max) {
        return -1;
    }
    *out = v;
    return 0;
}

int
sr_args_parse_f64(const char *s, double *out)
{
    char  *end;
    double v;

    if (s == NULL || *s == '\0') {
        return -1;
    }
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || *end != '\0') {
        return -1;
    }
    *out = v;
    return 0;
}
