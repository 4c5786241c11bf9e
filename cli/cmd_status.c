/*
 * `syncrep status`: ask a running coordinator for its state (the STATUS
 * message) once, or every --interval seconds with --watch (a live view that
 * redraws as top does on a terminal, one block per interval otherwise).
 * Speaks CURVE when given keys (options, or the SYNCREP_* environment
 * variables the Python client reads too).  docs/operations.md, "Watching a
 * job"; the JSON's fields: docs/protocol.md, STATUS.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "cli/cli.h"
#include "coordinator/auth.h"
#include "core/clock.h"
#include "core/error.h"
#include "tools/status_client.h"

static const char usage_text[] =
    "usage: syncrep status [--connect ENDPOINT] [--json] [--tensors] [--timeout-ms MS]\n"
    "                      [--watch [--interval S] [--count N]]\n"
    "                      [--curve-server-key-file F --curve-secret-key-file F\n"
    "                       [--curve-public-key-file F]]\n"
    "\n"
    "Asks the coordinator at ENDPOINT (default tcp://127.0.0.1:7070) for its\n"
    "incarnation, global and committed step, R and N, the step rate over the last\n"
    "5 s, its store commits (how many, how long, how long ago), the live workers,\n"
    "the pushes accepted, stale, duplicate and rejected, the accumulators' fill for\n"
    "the open step and the tasks it waits for, and per worker its local step, when\n"
    "it was last heard from, its push counts and how many steps it completed last\n"
    "(straggler).  --json prints the coordinator's JSON as it is.\n"
    "\n"
    "  --tensors       also list every tensor of a model declared as a whole\n"
    "                  (sr_client_declare_model): its pack, offset, dtype and shape\n"
    "  --watch         refresh every --interval S seconds (default 1): on a terminal\n"
    "                  the view is redrawn in place (q or Ctrl-C quits); otherwise\n"
    "                  one block (with --json one JSON line) per interval\n"
    "  --count N       with --watch: stop after N refreshes\n"
    "  --timeout-ms MS how long to wait for an answer (default 5000)\n"
    "\n"
    "CURVE (a coordinator started with --curve-secret-key-file): the coordinator's\n"
    "public key and a client key pair whose public half is in its --authorized-keys:\n"
    "  --curve-server-key-file F   the coordinator's .public (or SYNCREP_SERVER_PUBLIC_KEY)\n"
    "  --curve-secret-key-file F   this client's .secret (or SYNCREP_SECRET_KEY)\n"
    "  --curve-public-key-file F   this client's .public (or SYNCREP_PUBLIC_KEY;\n"
    "                              by default derived from the secret key)\n"
    "The environment variables hold the 40-character keys themselves.\n";

/* ---- reading the STATUS JSON (flat, as the coordinator writes it) ------- */

/* The value of "key": after `json` (a number, true/false, or a string's
 * characters up to its closing quote) into buf; "?" when absent. */
static const char *
field(const char *json, const char *key, char *buf, size_t len)
{
    char        pat[64];
    const char *p;
    size_t      n = 0;

    snprintf(pat, sizeof(pat), "\"%s\":", key);
    if (json == NULL || (p = strstr(json, pat)) == NULL) {
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

/* The number after "key": (NAN when absent). */
static double
num(const char *json, const char *key)
{
    char        pat[64];
    const char *p;

    snprintf(pat, sizeof(pat), "\"%s\":", key);
    if (json == NULL || (p = strstr(json, pat)) == NULL) {
        return NAN;
    }
    return strtod(p + strlen(pat), NULL);
}

/* A JSON string starting at p (its opening quote) into buf, escapes
 * resolved crudely (\x -> x; names are plain text), truncated to len. */
static void
json_string(const char *p, char *buf, size_t len)
{
    size_t n = 0;

    if (*p == '"') {
        p++;
    }
    for (; *p && *p != '"' && n + 1 < len; p++) {
        if (*p == '\\' && p[1] != '\0') {
            p++;
        }
        buf[n++] = *p;
    }
    buf[n] = '\0';
}

/* One worker's row, parsed from its {"task_index":...} object. */
typedef struct {
    long long task, local_step, accepted, stale, duplicate, rejected, stragglers;
    double    seen_s;
    int       connected, waiting;
} wrow;

/* The workers' rows (at most cap), in the JSON's order; how many. */
static size_t
workers(const char *json, wrow *rows, size_t cap)
{
    const char *w = strstr(json, "\"workers\":[");
    const char *stop = w;
    size_t      n = 0;
    int         depth = 0, quoted = 0;

    /* The array's end (the "elastic" section lists members by task_index too). */
    for (; stop != NULL && *stop != '\0'; stop++) {
        if (*stop == '"' && stop[-1] != '\\') {
            quoted = !quoted;
        } else if (!quoted && (*stop == '[' || *stop == '{')) {
            depth++;
        } else if (!quoted && (*stop == ']' || *stop == '}') && --depth == 0) {
            break;
        }
    }
    while (w != NULL && n < cap && (w = strstr(w, "{\"task_index\":")) != NULL &&
           (stop == NULL || w < stop)) {
        const char *end = strchr(w, '}');
        char        b[16];
        wrow       *r = &rows[n++];
        r->task = (long long)num(w, "task_index");
        r->local_step = (long long)num(w, "local_step");
        r->seen_s = num(w, "seconds_since_seen");
        r->accepted = (long long)num(w, "accepted");
        r->stale = (long long)num(w, "stale");
        r->duplicate = (long long)num(w, "duplicate");
        r->rejected = (long long)num(w, "rejected");
        double s = num(w, "stragglers");
        r->stragglers =
            isnan(s) || (end != NULL && strstr(w, "\"stragglers\":") > end) ? -1 : (long long)s;
        r->connected = strcmp(field(w, "connected", b, sizeof(b)), "true") == 0;
        r->waiting = strcmp(field(w, "waiting_for_token", b, sizeof(b)), "true") == 0;
        w++;
    }
    return n;
}

/* "x 1/2, b 2/2 taken, ..." for the accumulators (at most `show`), the
 * step they are at in *step. */
static void
accumulators(const char *json, int R, char *out, size_t cap, int show, long long *step)
{
    const char *a = strstr(json, "\"accumulators\":[");
    const char *end = strstr(json, "\"step_waits_for\":");
    size_t      n = 0;
    int         shown = 0, more = 0, more_open = 0;

    out[0] = '\0';
    *step = -1;
    while (a != NULL && (a = strstr(a, "{\"name\":")) != NULL && (end == NULL || a < end)) {
        char name[128], t[16];
        int  count = (int)num(a, "count");
        int  taken = strcmp(field(a, "taken", t, sizeof(t)), "true") == 0;
        json_string(a + strlen("{\"name\":"), name, sizeof(name));
        if (*step < 0) {
            *step = (long long)num(a, "step");
        }
        if (shown < show) {
            int k = snprintf(out + n, cap - n, "%s%s %d/%d%s", shown ? ", " : "", name,
                             taken ? R : count, R, taken ? " taken" : "");
            n += k > 0 && (size_t)k < cap - n ? (size_t)k : 0;
            shown++;
        } else {
            more++;
            more_open += !taken && count < R;
        }
        a++;
    }
    if (more > 0) {
        snprintf(out + n, cap - n, " and %d more (%d of them not full)", more, more_open);
    }
    if (shown == 0) {
        snprintf(out, cap, "none");
    }
}

/* ---- the views ---------------------------------------------------------- */

/* The end of the JSON array whose '[' is at `open` (its ']'), or NULL. */
static const char *
array_end(const char *open)
{
    int depth = 0, in_str = 0;

    for (const char *q = open; *q != '\0'; q++) {
        if (in_str) {
            q += *q == '\\' && q[1] != '\0';
            in_str = *q != '"';
        } else if (*q == '"') {
            in_str = 1;
        } else if (*q == '[') {
            depth++;
        } else if (*q == ']' && --depth == 0) {
            return q;
        }
    }
    return NULL;
}

/* Issue 23: "model: 161 tensors in 2 packs (syncrep:pack/0 float32
 * trainable 97.5 MiB 159 tensors, ...)" when a model was declared as a
 * whole; with `list`, a line per tensor. */
static void
print_model(const char *json, int list)
{
    const char *p = strstr(json, "\"packs\":[");
    const char *t = strstr(json, "\"tensors\":[");
    char        name[256], pack[256], a[32], b[32], c[32];
    int         npacks = 0;
    long long   ntensors = 0;

    if (p == NULL || t == NULL || p[strlen("\"packs\":[")] == ']') {
        return;
    }
    for (const char *q = p; (q = strstr(q, "{\"name\":")) != NULL && q < t; q++) {
        ntensors += (long long)num(q, "tensors");
        npacks++;
    }
    printf("model: %lld tensors in %d pack%s (", ntensors, npacks, npacks == 1 ? "" : "s");
    for (const char *q = p; (q = strstr(q, "{\"name\":")) != NULL && q < t; q++) {
        json_string(q + strlen("{\"name\":"), name, sizeof(name));
        printf("%s%s %s %s %.1f MiB %s tensors", q == strstr(p, "{\"name\":") ? "" : ", ", name,
               field(q, "dtype", a, sizeof(a)),
               strcmp(field(q, "trainable", b, sizeof(b)), "true") == 0 ? "trainable" : "frozen",
               num(q, "bytes") / (1024.0 * 1024.0), field(q, "tensors", c, sizeof(c)));
    }
    printf(")\n");
    if (!list) {
        return;
    }
    printf("%-40s %-20s %-12s %-8s %s\n", "tensor", "pack", "offset", "dtype", "shape");
    const char *end = array_end(t + strlen("\"tensors\":"));
    for (const char *q = t; end != NULL && (q = strstr(q, "{\"name\":")) != NULL && q < end; q++) {
        const char *sh = strstr(q, "\"shape\":[");
        if (sh == NULL) {
            break;
        }
        sh += strlen("\"shape\":[");
        json_string(q + strlen("{\"name\":"), name, sizeof(name));
        const char *pk = strstr(q, "\"pack\":");
        json_string(pk != NULL ? pk + strlen("\"pack\":") : "\"?\"", pack, sizeof(pack));
        printf("%-40s %-20s %-12s %-8s [%.*s]%s\n", name, pack, field(q, "offset", a, sizeof(a)),
               field(q, "dtype", b, sizeof(b)), (int)strcspn(sh, "]"), sh,
               strcmp(field(q, "trainable", c, sizeof(c)), "true") == 0 ? "" : " frozen");
    }
}

#define MAX_ROWS 4096

/* What the previous refresh saw (--watch): the rate and the stragglers
 * since then come from the differences. */
typedef struct {
    int       have;
    double    t_s;
    long long incarnation, global_step;
    wrow      rows[MAX_ROWS];
    size_t    nrows;
} watch_prev;

static long long
prev_stragglers(const watch_prev *p, long long task)
{
    for (size_t i = 0; p != NULL && p->have && i < p->nrows; i++) {
        if (p->rows[i].task == task) {
            return p->rows[i].stragglers;
        }
    }
    return 0;
}

/* The human view of one STATUS answer.  prev (--watch) gives the step
 * rate between refreshes and the stragglers of the last interval; NULL for
 * a single answer. */
static void
print_human(const char *json, const watch_prev *prev, double now_s, int list_tensors)
{
    static wrow rows[MAX_ROWS];
    char        a[64], b[64], c2[64], d[64], e[64], acc[1024];
    int         R = (int)num(json, "replicas_to_aggregate");
    long long   gs = (long long)num(json, "global_step"), inc = (long long)num(json, "incarnation");
    long long   astep;
    size_t      nrows = workers(json, rows, MAX_ROWS);

    printf("incarnation %s, global step %s (committed %s), R=%s N=%s",
           field(json, "incarnation", a, sizeof(a)), field(json, "global_step", b, sizeof(b)),
           field(json, "committed_step", c2, sizeof(c2)),
           field(json, "replicas_to_aggregate", d, sizeof(d)),
           field(json, "total_replicas", e, sizeof(e)));
    double reff = num(json, "replicas_effective");
    if (!isnan(reff) && (int)reff != R) {
        printf(" (steps taken with %d now)", (int)reff);
    }
    printf("\n");
    if (prev != NULL && prev->have && prev->incarnation == inc && gs >= prev->global_step &&
        now_s > prev->t_s) {
        printf("model ready %s, optimizer %s, %.2f steps/s (last %.1f s), %s tokens queued\n",
               field(json, "model_ready", a, sizeof(a)), field(json, "optimizer", b, sizeof(b)),
               (double)(gs - prev->global_step) / (now_s - prev->t_s), now_s - prev->t_s,
               field(json, "tokens_available", d, sizeof(d)));
    } else {
        printf("model ready %s, optimizer %s, %s steps/s (last 5 s), %s tokens queued\n",
               field(json, "model_ready", a, sizeof(a)), field(json, "optimizer", b, sizeof(b)),
               field(json, "steps_per_s", c2, sizeof(c2)),
               field(json, "tokens_available", d, sizeof(d)));
    }
    const char *cm = strstr(json, "\"commits\":{");
    if (cm != NULL) {
        double ago = num(json, "seconds_since_commit");
        printf("store commits %s (mean %s ms, max %s ms, %s failed)",
               field(cm, "count", a, sizeof(a)), field(cm, "mean_ms", b, sizeof(b)),
               field(cm, "max_ms", c2, sizeof(c2)), field(cm, "failures", d, sizeof(d)));
        if (!isnan(ago) && ago >= 0) {
            printf(", the last %s ms long, %.1f s ago", field(cm, "last_ms", e, sizeof(e)), ago);
        }
        printf("\n");
    }
    const char *ck = strstr(json, "\"checkpoint\":{"); /* issue 28: the steps at risk */
    if (ck != NULL) {
        char pol[16], st[16], k[32], risk[32];
        field(ck, "policy", pol, sizeof(pol));
        if (strcmp(pol, "budget") == 0) {
            printf("checkpoint budget %s %% (%s): ", field(ck, "budget_pct", a, sizeof(a)),
                   field(ck, "state", st, sizeof(st)));
        } else {
            printf("checkpoint every-steps: ");
        }
        field(ck, "interval_steps", k, sizeof(k));
        if (strcmp(k, "0") == 0) {
            printf("only at shutdown");
        } else {
            printf("a commit every %s step%s", k, strcmp(k, "1") == 0 ? "" : "s");
        }
        printf(", measured overhead %.2f %% (commit %s ms, step %s ms); %s steps at risk "
               "(global %lld, committed %s)\n",
               100 * num(ck, "overhead_ratio"), field(ck, "commit_cost_ms", b, sizeof(b)),
               field(ck, "step_ms", d, sizeof(d)), field(ck, "steps_at_risk", risk, sizeof(risk)),
               gs, field(json, "committed_step", e, sizeof(e)));
    }
    long long sum[4] = {0, 0, 0, 0};
    int       live = 0;
    for (size_t i = 0; i < nrows; i++) {
        sum[0] += rows[i].accepted;
        sum[1] += rows[i].stale;
        sum[2] += rows[i].duplicate;
        sum[3] += rows[i].rejected;
        live += rows[i].connected;
    }
    printf("workers live %d of %zu known; pushes accepted %lld, stale %lld, duplicate %lld, "
           "rejected %lld (non-finite %s)\n",
           live, nrows, sum[0], sum[1], sum[2], sum[3], field(json, "nonfinite", a, sizeof(a)));
    accumulators(json, R, acc, sizeof(acc), 6, &astep);
    if (astep >= 0) {
        printf("accumulators (step %lld): %s\n", astep, acc);
    } else {
        printf("accumulators: %s\n", acc);
    }
    print_model(json, list_tensors);
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
    printf("%-6s %-11s %-6s %-10s %-9s %-7s %-9s %-8s %-9s %s\n", "task", "local_step", "lag",
           "seen_s_ago", "accepted", "stale", "duplicate", "rejected",
           prev != NULL && prev->have ? "straggled" : "straggler", "state");
    for (size_t i = 0; i < nrows; i++) {
        const wrow *r = &rows[i];
        long long   st = r->stragglers;
        if (st >= 0 && prev != NULL && prev->have && prev->incarnation == inc) {
            st -= prev_stragglers(prev, r->task); /* in the last interval */
        }
        char sts[24];
        snprintf(sts, sizeof(sts), st >= 0 ? "%lld" : "-", st);
        printf("%-6lld %-11lld %-6lld %-10.3f %-9lld %-7lld %-9lld %-8lld %-9s %s\n", r->task,
               r->local_step, gs - r->local_step, r->seen_s, r->accepted, r->stale, r->duplicate,
               r->rejected, sts,
               !r->connected ? "gone"
               : r->waiting  ? "waiting for token"
                             : "connected");
    }
}

/* Remember this answer for the next refresh's differences. */
static void
remember(watch_prev *p, const char *json, double now_s)
{
    p->have = 1;
    p->t_s = now_s;
    p->incarnation = (long long)num(json, "incarnation");
    p->global_step = (long long)num(json, "global_step");
    p->nrows = workers(json, p->rows, MAX_ROWS);
}

/* ---- CURVE keys ---------------------------------------------------------- */

typedef struct {
    char server[41], pub[41], sec[41];
    int  on;
} curve_keys;

/* One key from a file (option) or an environment variable; 1 found, 0
 * not given, -1 after printing why it is bad. */
static int
one_key(const char *file, const char *env, const char *what, char out[41])
{
    const char *v;

    if (file != NULL) {
        if (sr__auth_read_key_file(file, out) != SR_OK) {
            fprintf(stderr, "syncrep status: %s: %s\n", what, sr_errdetail());
            return -1;
        }
        return 1;
    }
    if ((v = getenv(env)) == NULL || *v == '\0') {
        return 0;
    }
    uint8_t bin[32];
    if (strlen(v) != 40 || zmq_z85_decode(bin, v) == NULL) {
        fprintf(stderr, "syncrep status: %s: $%s is not a 40-character Z85 key\n", what, env);
        return -1;
    }
    memcpy(out, v, 41);
    return 1;
}

/* 0 (k->on says whether CURVE is used), or -1 after printing why not. */
static int
resolve_keys(const char *server_file, const char *secret_file, const char *public_file,
             curve_keys *k)
{
    int s, sec, pub;

    memset(k, 0, sizeof(*k));
    if ((s = one_key(server_file, "SYNCREP_SERVER_PUBLIC_KEY", "the coordinator's public key",
                     k->server)) < 0 ||
        (sec = one_key(secret_file, "SYNCREP_SECRET_KEY", "the client secret key", k->sec)) < 0 ||
        (pub = one_key(public_file, "SYNCREP_PUBLIC_KEY", "the client public key", k->pub)) < 0) {
        return -1;
    }
    if (!s && !sec && !pub) {
        return 0;
    }
    if (!s || !sec) {
        fprintf(stderr,
                "syncrep status: CURVE needs %s: give --curve-server-key-file (the "
                "coordinator's .public) and --curve-secret-key-file (this client's .secret), "
                "or SYNCREP_SERVER_PUBLIC_KEY and SYNCREP_SECRET_KEY\n",
                !s ? "the coordinator's public key" : "this client's secret key");
        return -1;
    }
    if (!pub && zmq_curve_public(k->pub, k->sec) != 0) {
        fprintf(stderr, "syncrep status: cannot derive the public key: %s\n", zmq_strerror(errno));
        return -1;
    }
    k->on = 1;
    return 0;
}

/* ---- asking, once or in a loop ------------------------------------------ */

static volatile sig_atomic_t interrupted;

static void
on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* Ask once: 0 and *text (malloc'd) on success, else print why (to stderr,
 * or into the view when watching) and return 1 (no answer) or 2 (refused). */
static int
ask(sr_status_client *sc, const char *endpoint, int timeout_ms, int keys_on, char **text,
    size_t *len)
{
    int    status = SR_OK;
    sr_err rc = sr_status_client_ask(sc, timeout_ms, &status, text, len);

    if (rc == SR_ETIMEDOUT) {
        fprintf(stderr, "syncrep status: no answer from %s within %d ms%s\n", endpoint, timeout_ms,
                keys_on ? " (with CURVE: is this client's public key in the coordinator's "
                          "--authorized-keys, and the server key the coordinator's?)"
                        : " (a coordinator with CURVE answers only clients with keys: "
                          "--curve-server-key-file, --curve-secret-key-file)");
        return 1;
    }
    if (rc == SR_EPROTO) {
        fprintf(stderr, "syncrep status: malformed reply from %s\n", endpoint);
        return 1;
    }
    if (rc != SR_OK) {
        fprintf(stderr, "syncrep status: %s\n", sr_errdetail());
        return 1;
    }
    if (status != SR_OK) {
        fprintf(stderr, "syncrep status: %s: %.*s\n", sr_strerror(status), (int)*len, *text);
        free(*text);
        *text = NULL;
        return 2;
    }
    return 0;
}

/* Wait interval_ms, or until q is typed on a terminal stdin or a signal
 * comes; 1 when it is time to quit. */
static int
wait_or_quit(int interval_ms, int keys)
{
    int64_t deadline = sr_clock_now_ms() + interval_ms;

    for (;;) {
        int64_t       left = deadline - sr_clock_now_ms();
        struct pollfd p = {STDIN_FILENO, POLLIN, 0};
        if (interrupted) {
            return 1;
        }
        if (left <= 0) {
            return 0;
        }
        int n = poll(&p, keys ? 1 : 0, (int)left);
        if (n > 0 && (p.revents & POLLIN)) {
            char ch;
            if (read(STDIN_FILENO, &ch, 1) == 1 && (ch == 'q' || ch == 'Q')) {
                return 1;
            }
        }
    }
}

static void
timestamp(char *buf, size_t len)
{
    time_t    now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int
watch(sr_status_client *sc, const char *endpoint, int timeout_ms, int keys_on, int json,
      int list_tensors, double interval_s, long long count)
{
    static watch_prev prev;
    int               tty_out = isatty(STDOUT_FILENO), tty_in = isatty(STDIN_FILENO);
    struct termios    saved, raw;
    struct sigaction  sa;
    int               keys = 0, answered = 0;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: poll returns at once */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (tty_in && tty_out && tcgetattr(STDIN_FILENO, &saved) == 0) {
        raw = saved;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        keys = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    for (long long i = 0; (count <= 0 || i < count) && !interrupted; i++) {
        char  *text = NULL, ts[32];
        size_t len = 0;
        int    rc = ask(sc, endpoint, timeout_ms, keys_on, &text, &len);
        double now_s = (double)sr_clock_now_ms() / 1000.0;

        timestamp(ts, sizeof(ts));
        answered += rc == 0;
        if (rc == 0 && json) {
            printf("%.*s\n", (int)len, text);
        } else if (rc == 0) {
            if (tty_out) {
                fputs("\033[H\033[2J", stdout); /* home, clear: redraw as top does */
            } else if (i > 0) {
                putchar('\n');
            }
            printf("syncrep status %s at %s%s\n", endpoint, ts,
                   tty_out ? (keys ? "  (q quits)" : "  (Ctrl-C quits)") : "");
            print_human(text, &prev, now_s, list_tensors);
            remember(&prev, text, now_s);
        }
        fflush(stdout);
        free(text);
        if ((count <= 0 || i + 1 < count) && wait_or_quit((int)(interval_s * 1000.0 + 0.5), keys)) {
            break;
        }
    }
    if (keys) {
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    }
    return answered > 0 ? 0 : 1;
}

int
sr__cli_status(int argc, char **argv)
{
    const char       *endpoint = "tcp://127.0.0.1:7070";
    const char       *server_file = NULL, *secret_file = NULL, *public_file = NULL;
    int               json = 0, watching = 0, tensors = 0, rc = 1;
    long long         timeout_ms = 5000, count = 0;
    double            interval_s = 1.0;
    sr_status_client *sc = NULL;
    curve_keys        k;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int         has = i + 1 < argc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--tensors") == 0) {
            tensors = 1;
        } else if (strcmp(a, "--watch") == 0) {
            watching = 1;
        } else if (strcmp(a, "--connect") == 0 && has) {
            endpoint = argv[++i];
        } else if (strcmp(a, "--timeout-ms") == 0 && has) {
            if (sr_args_parse_i64(argv[++i], 1, 3600000, &timeout_ms) != 0) {
                return sr_args_usage_error("status", "bad --timeout-ms '%s'", argv[i]);
            }
        } else if (strcmp(a, "--interval") == 0 && has) {
            char *end = NULL;
            interval_s = strtod(argv[++i], &end);
            if (end == argv[i] || *end != '\0' || !(interval_s >= 0.05 && interval_s <= 3600)) {
                return sr_args_usage_error("status", "bad --interval '%s' (seconds, 0.05..3600)",
                                           argv[i]);
            }
        } else if (strcmp(a, "--count") == 0 && has) {
            if (sr_args_parse_i64(argv[++i], 1, INT64_MAX, &count) != 0) {
                return sr_args_usage_error("status", "bad --count '%s'", argv[i]);
            }
        } else if (strcmp(a, "--curve-server-key-file") == 0 && has) {
            server_file = argv[++i];
        } else if (strcmp(a, "--curve-secret-key-file") == 0 && has) {
            secret_file = argv[++i];
        } else if (strcmp(a, "--curve-public-key-file") == 0 && has) {
            public_file = argv[++i];
        } else {
            return sr_args_usage_error("status", "unknown or incomplete option '%s'", a);
        }
    }
    if (!watching && count > 0) {
        return sr_args_usage_error("status", "--count is for --watch");
    }
    if (resolve_keys(server_file, secret_file, public_file, &k) != 0) {
        return 2;
    }
    if (sr_status_client_open_curve(&sc, endpoint, k.on ? k.server : NULL, k.on ? k.pub : NULL,
                                    k.on ? k.sec : NULL) != SR_OK) {
        fprintf(stderr, "syncrep status: %s\n", sr_errdetail());
        return 2;
    }
    if (watching) {
        rc = watch(sc, endpoint, (int)timeout_ms, k.on, json, tensors, interval_s, count);
    } else {
        char  *text = NULL;
        size_t len = 0;
        rc = ask(sc, endpoint, (int)timeout_ms, k.on, &text, &len);
        if (rc == 0 && json) {
            printf("%.*s\n", (int)len, text);
        } else if (rc == 0) {
            print_human(text, NULL, 0, tensors);
        }
        rc = rc != 0;
        free(text);
    }
    sr_status_client_close(sc);
    return rc;
}
