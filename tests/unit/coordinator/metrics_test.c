/* The metrics renderer (coordinator/metrics.c): the exact exposition text
 * of a given snapshot, label escaping, histogram bucketing; and the HTTP
 * endpoint (metrics_http.c) on a loopback port: 503 before the first
 * text, the latest text after, 404/405, a refused address. */
#include "sr_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "coordinator/metrics.h"

static const double bounds[] = {0.01, 0.1};

static const char expected[] =
    "# HELP syncrep_info Constant 1, labelled with the coordinator's version, store, endpoint "
    "and optimizer.\n"
    "# TYPE syncrep_info gauge\n"
    "syncrep_info{version=\"0.1.0\",store=\"C:\\\\x \\\"q\\\"\\nz\",bind=\"tcp://h:1\","
    "optimizer=\"\"} 1\n"
    "# HELP syncrep_incarnation The coordinator's incarnation: it grows by one at every start "
    "on the store.\n"
    "# TYPE syncrep_incarnation gauge\n"
    "syncrep_incarnation 3\n"
    "# HELP syncrep_restarts_total Starts of a coordinator on this store before the running "
    "one.\n"
    "# TYPE syncrep_restarts_total counter\n"
    "syncrep_restarts_total 2\n"
    "# HELP syncrep_start_time_seconds Unix time the coordinator started.\n"
    "# TYPE syncrep_start_time_seconds gauge\n"
    "syncrep_start_time_seconds 1700000000.250\n"
    "# HELP syncrep_model_ready 1 once the model is ready (restored, or marked ready by the "
    "chief).\n"
    "# TYPE syncrep_model_ready gauge\n"
    "syncrep_model_ready 1\n"
    "# HELP syncrep_job_done 1 once the job has ended (--max-steps reached, or the chief "
    "finished it).\n"
    "# TYPE syncrep_job_done gauge\n"
    "syncrep_job_done 0\n"
    "# HELP syncrep_global_step Steps applied to the model.\n"
    "# TYPE syncrep_global_step gauge\n"
    "syncrep_global_step 42\n"
    "# HELP syncrep_committed_step The latest step committed durably to the store.\n"
    "# TYPE syncrep_committed_step gauge\n"
    "syncrep_committed_step 41\n"
    "# HELP syncrep_checkpoint_interval_steps Steps between commits the checkpoint policy uses "
    "now (0: only at shutdown).\n"
    "# TYPE syncrep_checkpoint_interval_steps gauge\n"
    "syncrep_checkpoint_interval_steps 12\n"
    "# HELP syncrep_checkpoint_overhead_ratio The measured commit cost as a fraction of the "
    "steps' time.\n"
    "# TYPE syncrep_checkpoint_overhead_ratio gauge\n"
    "syncrep_checkpoint_overhead_ratio 0.029500\n"
    "# HELP syncrep_replicas_to_aggregate R (--replicas-to-aggregate): gradients averaged per "
    "variable per step, as configured.\n"
    "# TYPE syncrep_replicas_to_aggregate gauge\n"
    "syncrep_replicas_to_aggregate 2\n"
    "# HELP syncrep_replicas_effective The number of gradients steps are taken with now.\n"
    "# TYPE syncrep_replicas_effective gauge\n"
    "syncrep_replicas_effective 2\n"
    "# HELP syncrep_total_replicas N (--total-replicas): the workers taking part (R plus "
    "backups).\n"
    "# TYPE syncrep_total_replicas gauge\n"
    "syncrep_total_replicas 3\n"
    "# HELP syncrep_workers_live Tasks with a client heard from within --worker-timeout-ms.\n"
    "# TYPE syncrep_workers_live gauge\n"
    "syncrep_workers_live 1\n"
    "# HELP syncrep_tokens_available Step tokens queued and not yet taken.\n"
    "# TYPE syncrep_tokens_available gauge\n"
    "syncrep_tokens_available 4\n"
    "# HELP syncrep_pushes_total Gradient pushes answered, by result: accepted (counted in a "
    "step), stale (computed at another step, or beyond the task's share), duplicate (a resend), "
    "rejected (refused with an error).\n"
    "# TYPE syncrep_pushes_total counter\n"
    "syncrep_pushes_total{result=\"accepted\"} 80\n"
    "syncrep_pushes_total{result=\"stale\"} 5\n"
    "syncrep_pushes_total{result=\"duplicate\"} 1\n"
    "syncrep_pushes_total{result=\"rejected\"} 2\n"
    "# HELP syncrep_nonfinite_gradients_total Gradients refused because they hold NaN or Inf "
    "(--nonfinite reject).\n"
    "# TYPE syncrep_nonfinite_gradients_total counter\n"
    "syncrep_nonfinite_gradients_total 2\n"
    "# HELP syncrep_malformed_requests_total Requests that could not be decoded or made no "
    "sense.\n"
    "# TYPE syncrep_malformed_requests_total counter\n"
    "syncrep_malformed_requests_total 7\n"
    "# HELP syncrep_refused_requests_total Requests refused from clients outside the job (task "
    "index, client limit).\n"
    "# TYPE syncrep_refused_requests_total counter\n"
    "syncrep_refused_requests_total 8\n"
    "# HELP syncrep_received_bytes_total Bytes of the ZeroMQ messages the coordinator "
    "received.\n"
    "# TYPE syncrep_received_bytes_total counter\n"
    "syncrep_received_bytes_total 1000\n"
    "# HELP syncrep_sent_bytes_total Bytes of the ZeroMQ messages the coordinator sent.\n"
    "# TYPE syncrep_sent_bytes_total counter\n"
    "syncrep_sent_bytes_total 2000\n"
    "# HELP syncrep_commits_total Store commits that succeeded.\n"
    "# TYPE syncrep_commits_total counter\n"
    "syncrep_commits_total 41\n"
    "# HELP syncrep_commit_failures_total Store commits that failed.\n"
    "# TYPE syncrep_commit_failures_total counter\n"
    "syncrep_commit_failures_total 0\n"
    "# HELP syncrep_step_duration_seconds Time from one step's apply to the next one's (the "
    "first step of an incarnation is not observed).\n"
    "# TYPE syncrep_step_duration_seconds histogram\n"
    "syncrep_step_duration_seconds_bucket{le=\"0.01\"} 1\n"
    "syncrep_step_duration_seconds_bucket{le=\"0.1\"} 3\n"
    "syncrep_step_duration_seconds_bucket{le=\"+Inf\"} 4\n"
    "syncrep_step_duration_seconds_sum 1.500000000\n"
    "syncrep_step_duration_seconds_count 4\n"
    "# HELP syncrep_commit_duration_seconds Time of one store commit (the loop's, or the "
    "--commit async writer's).\n"
    "# TYPE syncrep_commit_duration_seconds histogram\n"
    "syncrep_commit_duration_seconds_bucket{le=\"0.01\"} 0\n"
    "syncrep_commit_duration_seconds_bucket{le=\"0.1\"} 0\n"
    "syncrep_commit_duration_seconds_bucket{le=\"+Inf\"} 0\n"
    "syncrep_commit_duration_seconds_sum 0.000000000\n"
    "syncrep_commit_duration_seconds_count 0\n"
    "# HELP syncrep_worker_live 1 if a client of the task was heard from within "
    "--worker-timeout-ms, else 0.\n"
    "# TYPE syncrep_worker_live gauge\n"
    "syncrep_worker_live{task=\"0\"} 1\n"
    "syncrep_worker_live{task=\"7\"} 0\n"
    "# HELP syncrep_worker_last_seen_seconds Unix time of the task's last request to the "
    "coordinator.\n"
    "# TYPE syncrep_worker_last_seen_seconds gauge\n"
    "syncrep_worker_last_seen_seconds{task=\"0\"} 1700000001.500\n"
    "# HELP syncrep_worker_local_step_lag The global step minus the task's local step (0: it "
    "computes the open step).\n"
    "# TYPE syncrep_worker_local_step_lag gauge\n"
    "syncrep_worker_local_step_lag{task=\"0\"} 0\n"
    "syncrep_worker_local_step_lag{task=\"7\"} 12\n"
    "# HELP syncrep_straggler_total Steps completed by the task's push: it was the last one the "
    "step waited for.\n"
    "# TYPE syncrep_straggler_total counter\n"
    "syncrep_straggler_total{task=\"0\"} 30\n"
    "syncrep_straggler_total{task=\"7\"} 11\n";

static void
fill(sr_metrics_snapshot *s, sr_metrics_task *t)
{
    memset(s, 0, sizeof(*s));
    s->version = "0.1.0";
    s->store = "C:\\x \"q\"\nz"; /* every character a label value escapes */
    s->bind = "tcp://h:1";
    s->optimizer = NULL; /* NULL is "" */
    s->incarnation = 3;
    s->restarts = 2;
    s->start_time_unix_s = 1700000000.25;
    s->model_ready = 1;
    s->global_step = 42;
    s->committed_step = 41;
    s->checkpoint_interval_steps = 12; /* issue 28 */
    s->checkpoint_overhead_ratio = 0.0295;
    s->replicas_configured = 2;
    s->replicas_effective = 2;
    s->total_replicas = 3;
    s->workers_live = 1;
    s->tokens_available = 4;
    s->pushes_accepted = 80;
    s->pushes_stale = 5;
    s->pushes_duplicate = 1;
    s->pushes_rejected = 2;
    s->nonfinite = 2;
    s->malformed = 7;
    s->refused = 8;
    s->bytes_in = 1000;
    s->bytes_out = 2000;
    s->commits = 41;
    s->step.bounds_s = bounds;
    s->step.nbounds = 2;
    s->step.counts[0] = 1; /* per bucket: rendered cumulative 1, 3, 4 */
    s->step.counts[1] = 2;
    s->step.counts[2] = 1;
    s->step.sum_s = 1.5;
    s->commit.bounds_s = bounds;
    s->commit.nbounds = 2;
    t[0] = (sr_metrics_task){.task = 0,
                             .live = 1,
                             .last_seen_unix_s = 1700000001.5,
                             .local_step_lag = 0,
                             .stragglers = 30};
    /* Never seen: no last_seen sample, the other families still have it. */
    t[1] = (sr_metrics_task){
        .task = 7, .live = 0, .last_seen_unix_s = -1, .local_step_lag = 12, .stragglers = 11};
    s->tasks = t;
    s->ntasks = 2;
}

static void
test_metrics_render_snapshot_is_exact_text(void **state)
{
    sr_metrics_snapshot s;
    sr_metrics_task     t[2];
    sr_strbuf           b;
    (void)state;

    fill(&s, t);
    sr_strbuf_init(&b);
    assert_sr_ok(sr_metrics_render(&s, &b));
    assert_string_equal(b.data, expected);
    /* Pure: the same snapshot renders the same bytes again. */
    b.len = 0;
    assert_sr_ok(sr_metrics_render(&s, &b));
    assert_string_equal(b.data, expected);
    sr_strbuf_free(&b);
}

static void
test_metrics_escape_label_escapes_backslash_quote_newline_only(void **state)
{
    sr_strbuf b;
    (void)state;

    sr_strbuf_init(&b);
    sr_metrics_escape_label(&b, "a\\b\"c\nd\te{}=,\xc3\xa9");
    assert_string_equal(b.data, "a\\\\b\\\"c\\nd\te{}=,\xc3\xa9");
    b.len = 0;
    sr_metrics_escape_label(&b, NULL);
    sr_metrics_escape_label(&b, "\\\\");
    assert_string_equal(b.data, "\\\\\\\\");
    sr_strbuf_free(&b);
}

static void
test_metrics_hist_bounds_are_inclusive_upper(void **state)
{
    sr_metrics_hist      h;
    sr_metrics_hist_snap s;
    (void)state;

    sr_metrics_hist_init(&h, bounds, 2);
    sr_metrics_hist_observe_ns(&h, 10000000);  /* exactly 0.01 s: le="0.01" */
    sr_metrics_hist_observe_ns(&h, 10000001);  /* just above: le="0.1" */
    sr_metrics_hist_observe_ns(&h, 100000000); /* 0.1 s: le="0.1" */
    sr_metrics_hist_observe_ns(&h, 2000000000);
    sr_metrics_hist_observe_ns(&h, -5); /* counts as 0 */
    sr_metrics_hist_read(&h, &s);
    assert_int_equal(s.nbounds, 2);
    assert_int_equal(s.counts[0], 2);
    assert_int_equal(s.counts[1], 2);
    assert_int_equal(s.counts[2], 1);
    assert_true(s.sum_s > 2.120000000 && s.sum_s < 2.120000002);
}

static void
test_metrics_render_too_many_buckets_is_einval(void **state)
{
    sr_metrics_snapshot s;
    sr_metrics_task     t[2];
    sr_strbuf           b;
    (void)state;

    fill(&s, t);
    s.commit.nbounds = SR_METRICS_MAX_BUCKETS + 1;
    sr_strbuf_init(&b);
    assert_sr_err(sr_metrics_render(&s, &b), SR_EINVAL);
    assert_int_equal(b.len, 0); /* nothing appended */
    assert_sr_err(sr_metrics_render(NULL, &b), SR_EINVAL);
    sr_strbuf_free(&b);
}

/* ---- the HTTP endpoint ---- */

/* GET path from 127.0.0.1:port (a test client: one request, read to EOF);
 * the whole response in out. */
static void
http_get(int port, const char *method, const char *path, char *out, size_t cap)
{
    struct sockaddr_in a;
    char               req[256];
    size_t             got = 0;
    ssize_t            n;
    int                fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    int len = snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                       method, path);
    assert_int_equal(write(fd, req, (size_t)len), len);
    while (got + 1 < cap && (n = read(fd, out + got, cap - 1 - got)) > 0) {
        got += (size_t)n;
    }
    out[got] = '\0';
    close(fd);
}

static int
port_of(const sr_metrics_http *m)
{
    const char *colon = strrchr(sr_metrics_http_address(m), ':');
    assert_non_null(colon);
    return atoi(colon + 1);
}

static void
test_metrics_http_serves_latest_text(void **state)
{
    sr_metrics_http *m = NULL;
    char             resp[4096];
    (void)state;

    assert_sr_ok(sr_metrics_http_open(&m, "127.0.0.1:0"));
    int port = port_of(m);
    assert_true(port > 0);
    http_get(port, "GET", "/metrics", resp, sizeof(resp));
    assert_non_null(strstr(resp, "HTTP/1.1 503"));
    assert_sr_ok(sr_metrics_http_publish(m, "a 1\n", 4));
    assert_sr_ok(sr_metrics_http_publish(m, "a 2\nb 3\n", 8));
    http_get(port, "GET", "/metrics", resp, sizeof(resp));
    assert_non_null(strstr(resp, "HTTP/1.1 200"));
    assert_non_null(strstr(resp, "Content-Type: text/plain; version=0.0.4; charset=utf-8"));
    assert_non_null(strstr(resp, "\r\n\r\na 2\nb 3\n"));
    http_get(port, "GET", "/nothing", resp, sizeof(resp));
    assert_non_null(strstr(resp, "HTTP/1.1 404"));
    http_get(port, "DELETE", "/metrics", resp, sizeof(resp));
    assert_non_null(strstr(resp, "HTTP/1.1 405"));
    assert_int_equal(sr_metrics_http_scrapes(m), 2);

    /* The same port again: refused, naming the address and the reason. */
    char             addr[64];
    sr_metrics_http *m2 = NULL;
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    assert_sr_err(sr_metrics_http_open(&m2, addr), SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), addr));
    assert_non_null(strstr(sr_errdetail(), "in use"));
    assert_null(m2);
    sr_metrics_http_close(m);
    sr_metrics_http_close(NULL);
}

static void
test_metrics_http_bad_address_is_einval(void **state)
{
    static const char *bad[] = {"127.0.0.1",    ":9464",        "127.0.0.1:", "127.0.0.1:65536",
                                "127.0.0.1:-1", "127.0.0.1:9x", "[::1:9464",  "::1:9464"};
    sr_metrics_http   *m = NULL;
    (void)state;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_sr_err(sr_metrics_http_open(&m, bad[i]), SR_EINVAL);
        assert_non_null(strstr(sr_errdetail(), bad[i]));
        assert_null(m);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_render_snapshot_is_exact_text),
        cmocka_unit_test(test_metrics_escape_label_escapes_backslash_quote_newline_only),
        cmocka_unit_test(test_metrics_hist_bounds_are_inclusive_upper),
        cmocka_unit_test(test_metrics_render_too_many_buckets_is_einval),
        cmocka_unit_test(test_metrics_http_serves_latest_text),
        cmocka_unit_test(test_metrics_http_bad_address_is_einval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
