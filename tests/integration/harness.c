/* Integration-test harness.  See harness.h. */
#include "harness.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "sr_test.h"
#include "tools/coord_argv.h"
#include "tools/status_client.h"

void
sr_harness_init(sr_harness *h, const char *tag)
{
    memset(h, 0, sizeof(*h));
    h->dir = sr_test_mkdtemp(tag);
    assert_non_null(h->dir);
    snprintf(h->store, sizeof(h->store), "%s/store.db", h->dir);
    snprintf(h->log, sizeof(h->log), "%s/coordinator.log", h->dir);
    sr_test_ipc_endpoint(h->dir, "coord.sock", h->endpoint, sizeof(h->endpoint));
}

void
sr_harness_start(sr_harness *h, ...)
{
    sr_coord_argv a;
    va_list       ap;

    sr_coord_argv_init(&a, sr_test_syncrep_bin(), h->store, h->endpoint);
    sr_coord_argv_opt(&a, "--log-level", "debug");
    va_start(ap, h);
    for (const char *arg; (arg = va_arg(ap, const char *)) != NULL;) {
        sr_coord_argv_add(&a, arg);
    }
    va_end(ap);
    assert_non_null(sr_coord_argv_get(&a));
    h->pid = sr_test_spawn(sr_coord_argv_get(&a), h->log);
    assert_true(h->pid > 0);
}

void
sr_harness_kill9(sr_harness *h)
{
    if (h->pid > 0) {
        sr_test_kill(h->pid, SIGKILL);
        sr_test_reap(h->pid, 10000);
        h->pid = 0;
    }
}

int
sr_harness_stop(sr_harness *h)
{
    int st;
    if (h->pid <= 0) {
        return -1;
    }
    kill(h->pid, SIGTERM);
    st = sr_test_reap(h->pid, 15000);
    h->pid = 0;
    return st;
}

void
sr_harness_fini(sr_harness *h)
{
    sr_harness_kill9(h);
    if (getenv("SR_TEST_KEEP") != NULL) {
        fprintf(stderr, "kept %s\n", h->dir);
    } else {
        sr_test_rmdir_rf(h->dir);
    }
    free(h->dir);
    h->dir = NULL;
}

sr_client *
sr_harness_client(sr_harness *h, int task)
{
    sr_client        *c = NULL;
    sr_client_options o;

    memset(&o, 0, sizeof(o));
    o.endpoint = h->endpoint;
    o.task_index = task;
    o.timeout_ms = 20000;
    int rc = sr_client_open(&c, &o);
    if (rc != SR_OK) {
        FILE *f = fopen(h->log, "r");
        char  line[512];
        while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
            fputs(line, stderr);
        }
        if (f != NULL) {
            fclose(f);
        }
    }
    assert_sr_ok(rc);
    return c;
}

int
sr_harness_status(sr_harness *h, char *out, size_t cap)
{
    sr_status_client *c = NULL;
    char             *text = NULL;
    size_t            len = 0;
    int               status = SR_OK, rc = -1;

    /* The STATUS client `syncrep status --json` uses (tools/), in process. */
    if (sr_status_client_open(&c, h->endpoint) != SR_OK) {
        return -1;
    }
    if (sr_status_client_ask(c, 5000, &status, &text, &len) == SR_OK && status == SR_OK) {
        snprintf(out, cap, "%s", text);
        rc = 0;
    }
    free(text);
    sr_status_client_close(c);
    return rc;
}

long long
sr_harness_json_num(const char *json, const char *key)
{
    const char *at = strstr(json, key);
    return at != NULL ? strtoll(at + strlen(key), NULL, 10) : -1;
}

int
sr_harness_file_count(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    char  line[4096];
    int   n = 0;

    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        n += strstr(line, needle) != NULL;
    }
    if (f != NULL) {
        fclose(f);
    }
    return n;
}

int
sr_harness_log_count(const sr_harness *h, const char *needle)
{
    return sr_harness_file_count(h->log, needle);
}

int
sr_harness_cli(const char *env, const char *args, char *out, size_t cap)
{
    char   cmd[4096];
    size_t got = 0, n;
    FILE  *p;

    snprintf(cmd, sizeof(cmd), "%s %s %s 2>&1", env, sr_test_syncrep_bin(), args);
    p = popen(cmd, "r");
    assert_non_null(p);
    while (got + 1 < cap && (n = fread(out + got, 1, cap - 1 - got, p)) > 0) {
        got += n;
    }
    out[got] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
