/* `syncrep status --connect ENDPOINT [--json]`: ask a running coordinator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/error.h"
#include "tools/status_client.h"

static const char usage_text[] =
    "usage: syncrep status [--connect ENDPOINT] [--json] [--timeout-ms MS]\n"
    "\n"
    "Asks the coordinator at ENDPOINT (default tcp://127.0.0.1:7070) for its\n"
    "incarnation, global step, R and N, the accumulators' fill for the current step,\n"
    "the workers with their local steps, last seen and push counts, steps/s, and its\n"
    "store commits (how many, how long).\n";

/* Pull a number or string value out of flat JSON text for the summary. */
static const char *
field(const char *json, const char *key, char *buf, size_t len)
{
    char        pat[64];
    const char *p;
    size_t      n = 0;

    snprintf(pat, sizeof(pat), "\"%s\":", key);
    if ((p = strstr(json, pat)) == NULL) {
        return "?";
    }
    p += strlen(pat);
    if (*p == '"') {
        p++;
    }
    while (p[n] && p[n] != ',' && p[n] != '}' && p[n] != '"' && n + 1 < len) {
        n++;
    }
    memcpy(buf, p, n);
    buf[n] = '\0';
    return buf;
}

static void
print_human(const char *json)
{
    char        a[64], b[64], c2[64], d[64], e[64];
    const char *w;

    printf("incarnation %s, global step %s (committed %s), R=%s N=%s\n",
           field(json, "incarnation", a, sizeof(a)), field(json, "global_step", b, sizeof(b)),
           field(json, "committed_step", c2, sizeof(c2)),
           field(json, "replicas_to_aggregate", d, sizeof(d)),
           field(json, "total_replicas", e, sizeof(e)));
    printf("model ready %s, optimizer %s, %s steps/s, %s tokens queued\n",
           field(json, "model_ready", a, sizeof(a)), field(json, "optimizer", b, sizeof(b)),
           field(json, "steps_per_s", c2, sizeof(c2)),
           field(json, "tokens_available", d, sizeof(d)));
    if (strstr(json, "\"learning_rate\":") != NULL) { /* issue 25 */
        printf("learning rate %s (the next update's)\n",
               field(json, "learning_rate", a, sizeof(a)));
    }
    const char *sw = strstr(json, "\"step_waits_for\":[");
    if (sw != NULL) {
        sw += strlen("\"step_waits_for\":[");
        int n = (int)strcspn(sw, "]");
        if (n > 0) {
            printf("the open step waits for task(s) %.*s\n", n, sw);
        }
    }
    if (strstr(json, "\"done\":true") != NULL) {
        printf("the job has ended\n");
    }
    const char *cm = strstr(json, "\"commits\":{");
    if (cm != NULL) {
        printf("store commits %s (mean %s ms, max %s ms, %s failed)\n",
               field(cm, "count", a, sizeof(a)), field(cm, "mean_ms", b, sizeof(b)),
               field(cm, "max_ms", c2, sizeof(c2)), field(cm, "failures", d, sizeof(d)));
    }
    printf("%-6s %-12s %-10s %-10s %-10s %-10s %s\n", "task", "local_step", "seen_s_ago",
           "accepted", "stale", "duplicate", "state");
    w = strstr(json, "\"workers\":[");
    while (w != NULL && (w = strstr(w, "{\"task_index\":")) != NULL) {
        char st[32], t[32];
        printf("%-6s %-12s %-10s %-10s %-10s %-10s %s\n", field(w, "task_index", t, sizeof(t)),
               field(w, "local_step", a, sizeof(a)), field(w, "seconds_since_seen", b, sizeof(b)),
               field(w, "accepted", c2, sizeof(c2)), field(w, "stale", d, sizeof(d)),
               field(w, "duplicate", e, sizeof(e)),
               strcmp(field(w, "connected", st, sizeof(st)), "true") == 0 ? "connected" : "gone");
        w++;
    }
}

int
sr__cli_status(int argc, char **argv)
{
    const char       *endpoint = "tcp://127.0.0.1:7070";
    int               json = 0, rc = 1;
    long long         timeout_ms = 5000;
    sr_status_client *sc = NULL;
    sr_err            rc_ask;
    int               status = SR_OK;
    char             *text = NULL;
    size_t            len = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage_text, stdout);
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--connect") == 0 && i + 1 < argc) {
            endpoint = argv[++i];
        } else if (strcmp(argv[i], "--timeout-ms") == 0 && i + 1 < argc) {
            if (sr_args_parse_i64(argv[++i], 1, 3600000, &timeout_ms) != 0) {
                return sr_args_usage_error("status", "bad --timeout-ms '%s'", argv[i]);
            }
        } else {
            return sr_args_usage_error("status", "unknown or incomplete option '%s'", argv[i]);
        }
    }
    if (sr_status_client_open(&sc, endpoint) != SR_OK) {
        fprintf(stderr, "syncrep status: %s\n", sr_errdetail());
        return 2;
    }
    rc_ask = sr_status_client_ask(sc, (int)timeout_ms, &status, &text, &len);
    if (rc_ask == SR_ETIMEDOUT) {
        fprintf(stderr, "syncrep status: no answer from %s within %lld ms\n", endpoint, timeout_ms);
    } else if (rc_ask == SR_EPROTO) {
        fprintf(stderr, "syncrep status: malformed reply from %s\n", endpoint);
    } else if (rc_ask != SR_OK) {
        fprintf(stderr, "syncrep status: %s\n", sr_errdetail());
    } else if (status != SR_OK) {
        fprintf(stderr, "syncrep status: %s: %.*s\n", sr_strerror(status), (int)len, text);
    } else if (json) {
        printf("%.*s\n", (int)len, text);
        rc = 0;
    } else {
        print_human(text);
        rc = 0;
    }
    free(text);
    sr_status_client_close(sc);
    return rc;
}
