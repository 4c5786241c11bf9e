/*
 * The coordinator's Prometheus endpoint against a real Prometheus (issue
 * 26): a coordinator with --metrics-bind 127.0.0.1:0, two workers train 8
 * steps, `promtool check metrics` passes on the endpoint's text, the text's
 * values agree with STATUS, and a Prometheus started on a free loopback
 * port with a 1 s scrape_interval gives back syncrep_global_step through
 * its HTTP query API (/api/v1/query) equal to the step STATUS reports.
 * Every process is this test's own child, ended by its PID.  Without
 * prometheus/promtool, or when Prometheus cannot start, the test says
 * "SKIPPED: why" and exits 77 (ctest shows it as skipped).  A second case
 * runs --commit async, whose writer thread observes the commit histogram.
 */
#include "sr_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "harness.h"
#include "syncrep/syncrep.h"

#define ROUNDS 8 /* per worker: with --init-tokens 0, the global step after them */

static int         skipped;
static const char *prometheus_bin = "/usr/bin/prometheus";
static const char *promtool_bin = "/usr/bin/promtool";

/* One HTTP/1.1 request to 127.0.0.1:port (Connection: close), the whole
 * response (headers and body) into out; 0, or -1 if it could not connect. */
static int
http_get(int port, const char *path, char *out, size_t cap)
{
    struct sockaddr_in a;
    char               req[512];
    size_t             got = 0;
    ssize_t            n;
    int                fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    out[0] = '\0';
    if (fd < 0) {
        return -1;
    }
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    int len = snprintf(req, sizeof(req),
                       "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
    if (write(fd, req, (size_t)len) != len) {
        close(fd);
        return -1;
    }
    while (got + 1 < cap && (n = read(fd, out + got, cap - 1 - got)) > 0) {
        got += (size_t)n;
    }
    out[got] = '\0';
    close(fd);
    return 0;
}

/* A loopback TCP port nobody listens on now (bound to port 0 and closed:
 * Prometheus takes it a moment later). */
static int
free_port(void)
{
    struct sockaddr_in a;
    socklen_t          al = sizeof(a);
    int                fd = socket(AF_INET, SOCK_STREAM, 0), port;

    assert_true(fd >= 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* The port of the coordinator's "COORD-METRICS serving ... at
 * http://127.0.0.1:PORT/metrics" line; 0 while it is not logged. */
static int
metrics_port(const sr_harness *h)
{
    FILE *f = fopen(h->log, "r");
    char  line[1024];
    int   port = 0;

    while (f != NULL && port == 0 && fgets(line, sizeof(line), f) != NULL) {
        const char *at = strstr(line, "COORD-METRICS serving");
        if (at != NULL && (at = strstr(at, "http://127.0.0.1:")) != NULL) {
            port = atoi(at + strlen("http://127.0.0.1:"));
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return port;
}

/* The value of the sample `name` (exact, with its labels) in exposition
 * text; -1 if it is absent. */
static long long
sample(const char *text, const char *name)
{
    char        pat[256];
    const char *at;

    snprintf(pat, sizeof(pat), "\n%s ", name);
    at = strstr(text, pat);
    return at != NULL ? strtoll(at + strlen(pat), NULL, 10) : -1;
}

typedef struct {
    sr_client *c;
    int        rc;
} looper;

static void *
train(void *arg)
{
    looper      *l = arg;
    const double g = 1.0;
    for (int i = 0; i < ROUNDS && l->rc == 0; i++) {
        if ((l->rc = sr_client_push(l->c, "x", &g, sizeof(g))) == 0) {
            l->rc = sr_client_step(l->c);
        }
    }
    return NULL;
}

typedef struct {
    int       port;
    long long want;
    int       committed; /* also syncrep_committed_step == want */
    char      resp[65536];
} scrape_wait;

/* The endpoint's text shows syncrep_global_step `want` (the loop publishes
 * at most every 100 ms), and with `committed` syncrep_committed_step too
 * (--commit async: the writer commits after the step's tokens are out, so
 * a scrape right after the last round can come before its commit). */
static int
endpoint_at(void *arg)
{
    scrape_wait *w = arg;
    return http_get(w->port, "/metrics", w->resp, sizeof(w->resp)) == 0 &&
           strstr(w->resp, "HTTP/1.1 200") != NULL &&
           sample(w->resp, "syncrep_global_step") == w->want &&
           (!w->committed || sample(w->resp, "syncrep_committed_step") == w->want);
}

/* Prometheus' query API answers syncrep_global_step with `want`:
 * {"status":"success","data":{"resultType":"vector","result":[{"metric":
 * {...},"value":[<time>,"<value>"]}]}}. */
static int
prometheus_has(void *arg)
{
    scrape_wait *w = arg;
    const char  *v;

    if (http_get(w->port, "/api/v1/query?query=syncrep_global_step", w->resp, sizeof(w->resp)) !=
            0 ||
        strstr(w->resp, "\"status\":\"success\"") == NULL ||
        (v = strstr(w->resp, "\"value\":[")) == NULL || (v = strstr(v, ",\"")) == NULL) {
        return 0;
    }
    return strtoll(v + 2, NULL, 10) == w->want;
}

static int
prometheus_ready(void *arg)
{
    scrape_wait *w = arg;
    return http_get(w->port, "/-/ready", w->resp, sizeof(w->resp)) == 0 &&
           strstr(w->resp, "HTTP/1.1 200") != NULL;
}

static void
write_file(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void
print_file(const char *path)
{
    FILE *f = fopen(path, "r");
    char  line[1024];
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        fputs(line, stderr);
    }
    if (f != NULL) {
        fclose(f);
    }
}

/* `promtool check metrics` reads the text from its stdin (a shell of
 * our own redirects it); its exit status. */
static int
promtool_check(const char *dir, const char *text)
{
    char path[600], log[600], cmd[1400];

    snprintf(path, sizeof(path), "%s/metrics.txt", dir);
    snprintf(log, sizeof(log), "%s/promtool.log", dir);
    write_file(path, text, strlen(text));
    snprintf(cmd, sizeof(cmd), "exec %s check metrics < '%s'", promtool_bin, path);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    pid_t pid = sr_test_spawn(argv, log);
    assert_true(pid > 0);
    int st = sr_test_reap(pid, 20000);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        print_file(log);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void
test_metrics_prometheus_scrapes_global_step(void **state)
{
    sr_harness   h;
    sr_client   *c[2];
    looper       l[2];
    pthread_t    t[2];
    char         status[16384];
    scrape_wait  w = {0};
    const double x0 = 0.0;
    (void)state;

    sr_harness_init(&h, "metrics");
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "1.0", "--init-tokens",
                     "0", "--metrics-bind", "127.0.0.1:0", NULL);
    for (int i = 0; i < 2; i++) {
        c[i] = sr_harness_client(&h, i); /* returns once the coordinator answers */
        assert_sr_ok(sr_client_declare(c[i], "x", SR_FLOAT64, 0, NULL, i == 0 ? &x0 : NULL));
    }
    assert_sr_ok(sr_client_ready(c[0]));
    assert_sr_ok(sr_client_ready(c[1]));
    int mport = metrics_port(&h);
    assert_true(mport > 0);
    for (int i = 0; i < 2; i++) {
        l[i] = (looper){c[i], 0};
        assert_int_equal(pthread_create(&t[i], NULL, train, &l[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        assert_sr_ok(l[i].rc);
    }
    assert_int_equal(sr_harness_status(&h, status, sizeof(status)), 0);
    long long gs = sr_harness_json_num(status, "\"global_step\":");
    assert_int_equal(gs, ROUNDS);

    /* The endpoint's own text: valid for promtool, and what STATUS says. */
    w.port = mport;
    w.want = gs;
    assert_true(sr_test_wait_until(endpoint_at, &w, 5000));
    const char *text = strstr(w.resp, "\r\n\r\n") + 4;
    assert_int_equal(promtool_check(h.dir, text), 0);
    assert_int_equal(sample(text, "syncrep_committed_step"),
                     sr_harness_json_num(status, "\"committed_step\":"));
    assert_int_equal(sample(text, "syncrep_incarnation"), 1);
    assert_int_equal(sample(text, "syncrep_restarts_total"), 0);
    assert_int_equal(sample(text, "syncrep_workers_live"), 2);
    assert_int_equal(sample(text, "syncrep_replicas_effective"), 2);
    assert_int_equal(sample(text, "syncrep_pushes_total{result=\"accepted\"}"), 2 * ROUNDS);
    assert_int_equal(sample(text, "syncrep_pushes_total{result=\"stale\"}"), 0);
    /* One straggler a step; the first step of the incarnation has no duration. */
    assert_int_equal(sample(text, "syncrep_straggler_total{task=\"0\"}") +
                         sample(text, "syncrep_straggler_total{task=\"1\"}"),
                     ROUNDS);
    assert_int_equal(sample(text, "syncrep_step_duration_seconds_count"), ROUNDS - 1);
    assert_int_equal(sample(text, "syncrep_commit_duration_seconds_count"),
                     sample(text, "syncrep_commits_total"));
    const char *cm = strstr(status, "\"commits\":{");
    assert_non_null(cm);
    assert_int_equal(sample(text, "syncrep_commits_total"), sr_harness_json_num(cm, "\"count\":"));
    assert_int_equal(sample(text, "syncrep_worker_local_step_lag{task=\"1\"}"), 0);
    assert_true(sample(text, "syncrep_received_bytes_total") > 0);
    assert_true(sample(text, "syncrep_sent_bytes_total") > 0);

    /* A real Prometheus scraping it every second. */
    char cfg[600], data[600], plog[600], listen[64], config[512];
    int  pport = free_port();
    snprintf(cfg, sizeof(cfg), "%s/prometheus.yml", h.dir);
    snprintf(data, sizeof(data), "--storage.tsdb.path=%s/tsdb", h.dir);
    snprintf(plog, sizeof(plog), "%s/prometheus.log", h.dir);
    snprintf(listen, sizeof(listen), "--web.listen-address=127.0.0.1:%d", pport);
    int n = snprintf(config, sizeof(config),
                     "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                     "scrape_configs:\n  - job_name: syncrep\n    static_configs:\n"
                     "      - targets: ['127.0.0.1:%d']\n",
                     mport);
    write_file(cfg, config, (size_t)n);
    char cfgopt[700];
    snprintf(cfgopt, sizeof(cfgopt), "--config.file=%s", cfg);
    char *argv[] = {(char *)prometheus_bin, cfgopt, data, listen, "--log.level=warn", NULL};
    pid_t ppid = sr_test_spawn(argv, plog);
    assert_true(ppid > 0);
    w.port = pport;
    if (!sr_test_wait_until(prometheus_ready, &w, 15000)) {
        print_file(plog);
        printf("SKIPPED: prometheus did not start on 127.0.0.1:%d within 15 s (its log above)\n",
               pport);
        skipped = 1;
    } else {
        /* The first scrape comes within a scrape_interval or two of start. */
        int found = sr_test_wait_until(prometheus_has, &w, 15000);
        if (!found) {
            fprintf(stderr, "last answer: %s\n", w.resp);
            print_file(plog);
        }
        assert_true(found);
    }
    sr_test_kill(ppid, SIGTERM);
    sr_test_reap(ppid, 10000);
    for (int i = 0; i < 2; i++) {
        sr_client_close(c[i]);
    }
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

/* --commit async: the writer thread observes the commit histogram (under
 * TSan in `SANITIZE=thread ./run test`); the endpoint still agrees with
 * STATUS and passes promtool. */
static void
test_metrics_async_commit_writer_observes(void **state)
{
    sr_harness   h;
    sr_client   *c[2];
    looper       l[2];
    pthread_t    t[2];
    char         status[16384];
    scrape_wait  w = {0};
    const double x0 = 0.0;
    (void)state;

    sr_harness_init(&h, "metricsasync");
    sr_harness_start(&h, "--replicas-to-aggregate", "2", "--learning-rate", "1.0", "--init-tokens",
                     "0", "--commit", "async", "--metrics-bind", "127.0.0.1:0", NULL);
    for (int i = 0; i < 2; i++) {
        c[i] = sr_harness_client(&h, i);
        assert_sr_ok(sr_client_declare(c[i], "x", SR_FLOAT64, 0, NULL, i == 0 ? &x0 : NULL));
    }
    assert_sr_ok(sr_client_ready(c[0]));
    assert_sr_ok(sr_client_ready(c[1]));
    for (int i = 0; i < 2; i++) {
        l[i] = (looper){c[i], 0};
        assert_int_equal(pthread_create(&t[i], NULL, train, &l[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        assert_sr_ok(l[i].rc);
    }
    w.port = metrics_port(&h);
    w.want = ROUNDS;
    w.committed = 1;
    assert_true(w.port > 0);
    assert_true(sr_test_wait_until(endpoint_at, &w, 5000));
    const char *text = strstr(w.resp, "\r\n\r\n") + 4;
    assert_int_equal(promtool_check(h.dir, text), 0);
    assert_true(sample(text, "syncrep_commits_total") > 0);
    assert_int_equal(sample(text, "syncrep_commit_duration_seconds_count"),
                     sample(text, "syncrep_commits_total"));
    assert_int_equal(sr_harness_status(&h, status, sizeof(status)), 0);
    assert_int_equal(sr_harness_json_num(status, "\"global_step\":"), ROUNDS);
    for (int i = 0; i < 2; i++) {
        sr_client_close(c[i]);
    }
    assert_int_equal(sr_harness_stop(&h), 0);
    sr_harness_fini(&h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_prometheus_scrapes_global_step),
        cmocka_unit_test(test_metrics_async_commit_writer_observes),
    };
    if (access(prometheus_bin, X_OK) != 0 || access(promtool_bin, X_OK) != 0) {
        printf("SKIPPED: %s or %s is missing (Debian package prometheus; ./run test installs "
               "it)\n",
               prometheus_bin, promtool_bin);
        return 77;
    }
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    return failed == 0 && skipped ? 77 : failed;
}
