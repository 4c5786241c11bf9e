/* The `syncrep` command's subcommands.  Each takes the arguments after its
 * name (argv[0] is the subcommand) and returns the process exit code:
 * 0 success, 1 failure, 2 usage error. */
#ifndef SR_CLI_H
#define SR_CLI_H

int sr__cli_store(int argc, char **argv);
int sr__cli_coordinator(int argc, char **argv);
int sr__cli_status(int argc, char **argv);
int sr__cli_keygen(int argc, char **argv);

/* Print "syncrep <cmd>: <msg>" to stderr and return 2 (usage error). */
int sr__cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Parse a decimal integer / float option value; 0 on success, -1 on junk. */
int sr__cli_parse_i64(const char *s, long long min, long long max, long long *out);
int sr__cli_parse_f64(const char *s, double *out);

#endif
