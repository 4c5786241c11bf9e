/* Command-line option values, shared by the `syncrep` subcommands (cli/)
 * and the chaos harness (chaos/): one copy. */
#ifndef SR_TOOLS_ARGS_H
#define SR_TOOLS_ARGS_H

/* Print "syncrep <cmd>: <msg> (see syncrep <cmd> --help)" to stderr and
 * return 2 (the usage-error exit code). */
int sr_args_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Parse a decimal integer in [min, max] / a float; 0 on success, -1 on junk
 * (*out untouched). */
int sr_args_parse_i64(const char *s, long long min, long long max, long long *out);
int sr_args_parse_f64(const char *s, double *out);

#endif
