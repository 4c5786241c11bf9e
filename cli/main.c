/* `syncrep`: one command, subcommands.  `syncrep help` lists them; each
 * takes --help (`syncrep help COMMAND` prints it too); `syncrep --version`
 * prints the version of CMake's project() (SYNCREP_VERSION, a compile
 * definition of this file).  Exit codes: 0 ok, 1 failure, 2 usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chaos/chaos.h"
#include "chaos/chaos_net.h"
#include "cli/cli.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *what;
} commands[] = {
    {"coordinator", sr__cli_coordinator, "run the coordinator (parameter server) on a store"},
    {"chaos", sr__chaos_main, "kill and restart a real job at random; verify nothing was lost"},
    {"chaos-worker", sr__chaos_worker_cli, "the chaos harness's deterministic worker"},
    {"netns", sr__chaos_net_cli, "the namespace network of tests/net and chaos (root)"},
    {"status", sr__cli_status, "ask a running coordinator for its state"},
    {"keygen", sr__cli_keygen, "write a CURVE key pair (OUT.public, OUT.secret)"},
    {"store", sr__cli_store, "inspect, verify, export, drop-variable or vacuum a store"},
    {"ctl", sr__cli_ctl, "change a running job at its next step (set-replicas, set)"},
};

static void
usage(FILE *f)
{
    fprintf(f, "usage: syncrep <command> [options]   (syncrep <command> --help)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].what);
    }
    fprintf(f, "  %-12s %s\n", "help", "this text; help COMMAND: that command's usage");
    fprintf(f, "\n  --version    print the version (syncrep %s)\n", SYNCREP_VERSION);
}

/* `syncrep help COMMAND`: the command's own --help. */
static int
help_for(const char *name)
{
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(name, commands[i].name) == 0) {
            char *av[] = {(char *)commands[i].name, "--help", NULL};
            return commands[i].fn(2, av);
        }
    }
    fprintf(stderr, "syncrep help: unknown command '%s'\n", name);
    usage(stderr);
    return 2;
}

int
main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("syncrep %s\n", SYNCREP_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "help") == 0 && argc > 2) {
        return help_for(argv[2]);
    }
    if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(argv[1], commands[i].name) == 0) {
            return commands[i].fn(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "syncrep: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
