/* The `syncrep` command's subcommands.  Each takes the arguments after its
 * name (argv[0] is the subcommand) and returns the process exit code:
 * 0 success, 1 failure, 2 usage error. */
#ifndef SR_CLI_H
#define SR_CLI_H

#include <stddef.h>

#include "tools/args.h" /* option values: sr_args_* */

int sr__cli_store(int argc, char **argv);
int sr__cli_coordinator(int argc, char **argv);
int sr__cli_status(int argc, char **argv);
int sr__cli_keygen(int argc, char **argv);
int sr__cli_ctl(int argc, char **argv); /* issue 26 */

/* Issue 22: --bind ENDPOINT checked before the coordinator opens anything
 * (cli/cli_bind.c): its form, and for tcp:// a trial bind.  0 when it can
 * be bound; -1 with the reason, in words, in why (cap bytes). */
int sr__cli_check_bind(const char *endpoint, char *why, size_t cap);

#endif
