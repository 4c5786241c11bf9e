/* Integration-test harness: a coordinator process of the test's own on an
 * ipc:// endpoint in a fresh directory, and clients connected to it. */
#ifndef SR_HARNESS_H
#define SR_HARNESS_H

#include <sys/types.h>

#include "syncrep/syncrep.h"

typedef struct {
    char *dir;           /* temp dir, removed at teardown */
    char  store[512];    /* dir/store.db */
    char  endpoint[600]; /* ipc://dir/coord.sock */
    char  log[512];      /* dir/coordinator.log */
    pid_t pid;           /* the coordinator, or 0 */
} sr_harness;

/* Make the directory and paths. */
void sr_harness_init(sr_harness *h, const char *tag);
/* Start `syncrep coordinator --store S --bind E` plus extra args (NULL-ended). */
void sr_harness_start(sr_harness *h, ...);
/* SIGKILL the coordinator and reap it. */
void sr_harness_kill9(sr_harness *h);
/* SIGTERM and wait for a clean exit; returns the exit status (or -1). */
int sr_harness_stop(sr_harness *h);
/* Kill what is left and remove the directory (keeps it, and prints the log,
 * if the test failed: set keep). */
void sr_harness_fini(sr_harness *h);

/* The coordinator's STATUS JSON (what `syncrep status --connect ENDPOINT
 * --json` prints) into out, truncated to cap; 0 on success. */
int sr_harness_status(sr_harness *h, char *out, size_t cap);

/* The integer after `key` in a STATUS (JSON) text; -1 if `key` is absent. */
long long sr_harness_json_num(const char *json, const char *key);

/* The number of lines of the file at path containing `needle` (0 when it
 * cannot be read). */
int sr_harness_file_count(const char *path, const char *needle);

/* The number of lines of the coordinator's log containing `needle`. */
int sr_harness_log_count(const sr_harness *h, const char *needle);

/* Run `ENV syncrep ARGS 2>&1` through a shell of our own (env: variable
 * assignments or ""): its output into out (truncated to cap), and its
 * exit status (-1 when it did not exit). */
int sr_harness_cli(const char *env, const char *args, char *out, size_t cap);

/* Open a client for task `task` (fails the test on error). */
sr_client *sr_harness_client(sr_harness *h, int task);

#endif
