/*
 * The metrics' histograms and the pure renderer of a snapshot into
 * Prometheus' text exposition format 0.0.4 (docs/metrics.md lists every
 * metric).  Conventions kept: base units in names (seconds, bytes),
 * `_total` on counters, a HELP and a TYPE line before each family, label
 * values escaped, no label whose values grow with the step (only `result`,
 * four values, and `task`, bounded by --max-tasks).  Output is a function
 * of the snapshot alone, so metrics_test.c checks it byte for byte.
 */
#include "coordinator/metrics.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

const double sr_metrics_step_bounds_s[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                           0.25,   0.5,   1,      2.5,   5,    10,    30,   60};
const size_t sr_metrics_step_nbounds =
    sizeof(sr_metrics_step_bounds_s) / sizeof(sr_metrics_step_bounds_s[0]);
const double sr_metrics_commit_bounds_s[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                             0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                             1,      2.5,     5,      10};
const size_t sr_metrics_commit_nbounds =
    sizeof(sr_metrics_commit_bounds_s) / sizeof(sr_metrics_commit_bounds_s[0]);

void
sr_metrics_hist_init(sr_metrics_hist *h, const double *bounds_s, size_t nbounds)
{
    SR_ASSERT(nbounds <= SR_METRICS_MAX_BUCKETS);
    h->bounds_s = bounds_s;
    h->nbounds = nbounds <= SR_METRICS_MAX_BUCKETS ? nbounds : SR_METRICS_MAX_BUCKETS;
    for (size_t i = 0; i <= SR_METRICS_MAX_BUCKETS; i++) {
        atomic_init(&h->counts[i], 0);
    }
    atomic_init(&h->sum_ns, 0);
}

void
sr_metrics_hist_observe_ns(sr_metrics_hist *h, int64_t ns)
{
    size_t i = 0;
    double s;

    if (ns < 0) {
        ns = 0;
    }
    s = (double)ns / 1e9;
    while (i < h->nbounds && s > h->bounds_s[i]) {
        i++;
    }
    /* The sum first: a reader that sees the new count sees its sum too. */
    atomic_fetch_add(&h->sum_ns, (uint64_t)ns);
    atomic_fetch_add(&h->counts[i], 1);
}

void
sr_metrics_hist_read(const sr_metrics_hist *h, sr_metrics_hist_snap *out)
{
    memset(out, 0, sizeof(*out));
    out->bounds_s = h->bounds_s;
    out->nbounds = h->nbounds;
    for (size_t i = 0; i <= h->nbounds; i++) {
        out->counts[i] = atomic_load(&h->counts[i]);
    }
    out->sum_s = (double)atomic_load(&h->sum_ns) / 1e9;
}

void
sr_metrics_escape_label(sr_strbuf *b, const char *v)
{
    const char *run = v != NULL ? v : "";
    const char *p = run;

    for (; *p != '\0'; p++) {
        const char *esc = *p == '\\' ? "\\\\" : *p == '"' ? "\\\"" : *p == '\n' ? "\\n" : NULL;
        if (esc != NULL) {
            sr_strbuf_append(b, run, (size_t)(p - run));
            sr_strbuf_append(b, esc, 2);
            run = p + 1;
        }
    }
    sr_strbuf_append(b, run, (size_t)(p - run));
}

/* HELP and TYPE of one family. */
static void
family(sr_strbuf *b, const char *name, const char *type, const char *help)
{
    sr_strbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
scalar_u(sr_strbuf *b, const char *name, const char *type, const char *help, uint64_t v)
{
    family(b, name, type, help);
    sr_strbuf_printf(b, "%s %" PRIu64 "\n", name, v);
}

static void
scalar_i(sr_strbuf *b, const char *name, const char *type, const char *help, int64_t v)
{
    family(b, name, type, help);
    sr_strbuf_printf(b, "%s %" PRId64 "\n", name, v);
}

/* A histogram's _bucket (cumulative, le="+Inf" last), _sum and _count. */
static void
histogram(sr_strbuf *b, const char *name, const char *help, const sr_metrics_hist_snap *h)
{
    uint64_t cum = 0;

    family(b, name, "histogram", help);
    for (size_t i = 0; i < h->nbounds; i++) {
        cum += h->counts[i];
        sr_strbuf_printf(b, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", name, h->bounds_s[i], cum);
    }
    cum += h->counts[h->nbounds];
    sr_strbuf_printf(b, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", name, cum);
    sr_strbuf_printf(b, "%s_sum %.9f\n%s_count %" PRIu64 "\n", name, h->sum_s, name, cum);
}

static void
info(sr_strbuf *b, const sr_metrics_snapshot *s)
{
    family(b, "syncrep_info", "gauge",
           "Constant 1, labelled with the coordinator's version, store, endpoint and optimizer.");
    sr_strbuf_printf(b, "syncrep_info{version=\"");
    sr_metrics_escape_label(b, s->version);
    sr_strbuf_printf(b, "\",store=\"");
    sr_metrics_escape_label(b, s->store);
    sr_strbuf_printf(b, "\",bind=\"");
    sr_metrics_escape_label(b, s->bind);
    sr_strbuf_printf(b, "\",optimizer=\"");
    sr_metrics_escape_label(b, s->optimizer);
    sr_strbuf_printf(b, "\"} 1\n");
}

static void
pushes(sr_strbuf *b, const sr_metrics_snapshot *s)
{
    family(b, "syncrep_pushes_total", "counter",
           "Gradient pushes answered, by result: accepted (counted in a step), stale (computed "
           "at another step, or beyond the task's share), duplicate (a resend), rejected (refused "
           "with an error).");
    sr_strbuf_printf(b,
                     "syncrep_pushes_total{result=\"accepted\"} %" PRIu64 "\n"
                     "syncrep_pushes_total{result=\"stale\"} %" PRIu64 "\n"
                     "syncrep_pushes_total{result=\"duplicate\"} %" PRIu64 "\n"
                     "syncrep_pushes_total{result=\"rejected\"} %" PRIu64 "\n",
                     s->pushes_accepted, s->pushes_stale, s->pushes_duplicate, s->pushes_rejected);
}

/* The per-task families, each with one sample per task. */
static void
tasks(sr_strbuf *b, const sr_metrics_snapshot *s)
{
    family(b, "syncrep_worker_live", "gauge",
           "1 if a client of the task was heard from within --worker-timeout-ms, else 0.");
    for (size_t i = 0; i < s->ntasks; i++) {
        sr_strbuf_printf(b, "syncrep_worker_live{task=\"%" PRId32 "\"} %d\n", s->tasks[i].task,
                         s->tasks[i].live ? 1 : 0);
    }
    family(b, "syncrep_worker_last_seen_seconds", "gauge",
           "Unix time of the task's last request to the coordinator.");
    for (size_t i = 0; i < s->ntasks; i++) {
        if (s->tasks[i].last_seen_unix_s >= 0) {
            sr_strbuf_printf(b, "syncrep_worker_last_seen_seconds{task=\"%" PRId32 "\"} %.3f\n",
                             s->tasks[i].task, s->tasks[i].last_seen_unix_s);
        }
    }
    family(b, "syncrep_worker_local_step_lag", "gauge",
           "The global step minus the task's local step (0: it computes the open step).");
    for (size_t i = 0; i < s->ntasks; i++) {
        sr_strbuf_printf(b, "syncrep_worker_local_step_lag{task=\"%" PRId32 "\"} %" PRId64 "\n",
                         s->tasks[i].task, s->tasks[i].local_step_lag);
    }
    family(b, "syncrep_straggler_total", "counter",
           "Steps completed by the task's push: it was the last one the step waited for.");
    for (size_t i = 0; i < s->ntasks; i++) {
        sr_strbuf_printf(b, "syncrep_straggler_total{task=\"%" PRId32 "\"} %" PRIu64 "\n",
                         s->tasks[i].task, s->tasks[i].stragglers);
    }
}

sr_err
sr_metrics_render(const sr_metrics_snapshot *s, sr_strbuf *b)
{
    if (s == NULL || b == NULL) {
        return sr_fail(SR_EINVAL, "sr_metrics_render: NULL argument");
    }
    if (s->step.nbounds > SR_METRICS_MAX_BUCKETS || s->commit.nbounds > SR_METRICS_MAX_BUCKETS) {
        return sr_fail(SR_EINVAL, "sr_metrics_render: a histogram has more than %d buckets",
                       SR_METRICS_MAX_BUCKETS);
    }
    info(b, s);
    scalar_u(b, "syncrep_incarnation", "gauge",
             "The coordinator's incarnation: it grows by one at every start on the store.",
             s->incarnation);
    scalar_u(b, "syncrep_restarts_total", "counter",
             "Starts of a coordinator on this store before the running one.", s->restarts);
    family(b, "syncrep_start_time_seconds", "gauge", "Unix time the coordinator started.");
    sr_strbuf_printf(b, "syncrep_start_time_seconds %.3f\n", s->start_time_unix_s);
    scalar_u(b, "syncrep_model_ready", "gauge",
             "1 once the model is ready (restored, or marked ready by the chief).",
             s->model_ready ? 1 : 0);
    scalar_u(b, "syncrep_job_done", "gauge",
             "1 once the job has ended (--max-steps reached, or the chief finished it).",
             s->done ? 1 : 0);
    scalar_i(b, "syncrep_global_step", "gauge", "Steps applied to the model.", s->global_step);
    scalar_i(b, "syncrep_committed_step", "gauge",
             "The latest step committed durably to the store.", s->committed_step);
    /* issue 28: the steps at risk are global - committed, at most this many. */
    scalar_i(b, "syncrep_checkpoint_interval_steps", "gauge",
             "Steps between commits the checkpoint policy uses now (0: only at shutdown).",
             s->checkpoint_interval_steps);
    family(b, "syncrep_checkpoint_overhead_ratio", "gauge",
           "The measured commit cost as a fraction of the steps' time.");
    sr_strbuf_printf(b, "syncrep_checkpoint_overhead_ratio %.6f\n", s->checkpoint_overhead_ratio);
    scalar_i(b, "syncrep_replicas_to_aggregate", "gauge",
             "R (--replicas-to-aggregate): gradients averaged per variable per step, as "
             "configured.",
             s->replicas_configured);
    scalar_i(b, "syncrep_replicas_effective", "gauge",
             "The number of gradients steps are taken with now.", s->replicas_effective);
    scalar_i(b, "syncrep_total_replicas", "gauge",
             "N (--total-replicas): the workers taking part (R plus backups).", s->total_replicas);
    scalar_u(b, "syncrep_workers_live", "gauge",
             "Tasks with a client heard from within --worker-timeout-ms.", s->workers_live);
    scalar_u(b, "syncrep_tokens_available", "gauge", "Step tokens queued and not yet taken.",
             s->tokens_available);
    pushes(b, s);
    scalar_u(b, "syncrep_nonfinite_gradients_total", "counter",
             "Gradients refused because they hold NaN or Inf (--nonfinite reject).", s->nonfinite);
    scalar_u(b, "syncrep_malformed_requests_total", "counter",
             "Requests that could not be decoded or made no sense.", s->malformed);
    scalar_u(b, "syncrep_refused_requests_total", "counter",
             "Requests refused from clients outside the job (task index, client limit).",
             s->refused);
    scalar_u(b, "syncrep_received_bytes_total", "counter",
             "Bytes of the ZeroMQ messages the coordinator received.", s->bytes_in);
    scalar_u(b, "syncrep_sent_bytes_total", "counter",
             "Bytes of the ZeroMQ messages the coordinator sent.", s->bytes_out);
    scalar_u(b, "syncrep_commits_total", "counter", "Store commits that succeeded.", s->commits);
    scalar_u(b, "syncrep_commit_failures_total", "counter", "Store commits that failed.",
             s->commit_failures);
    histogram(b, "syncrep_step_duration_seconds",
              "Time from one step's apply to the next one's (the first step of an incarnation "
              "is not observed).",
              &s->step);
    histogram(b, "syncrep_commit_duration_seconds",
              "Time of one store commit (the loop's, or the --commit async writer's).", &s->commit);
    tasks(b, s);
    const char *text;
    return sr_strbuf_result(b, &text);
}
