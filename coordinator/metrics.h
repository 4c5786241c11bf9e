/*
 * The coordinator's Prometheus metrics (issue 26; docs/metrics.md): the
 * histograms the loop and the commit writer observe into, the snapshot the
 * loop fills (server_metrics.c), the pure renderer of a snapshot into the
 * text exposition format (version 0.0.4), and the HTTP endpoint that serves
 * the latest rendering from a thread of its own (metrics_http.c).
 *
 * Threading: the loop owns the snapshot and renders it; the HTTP thread
 * only ever reads the text the loop last published (a copy under a mutex),
 * so the loop never waits on a scrape and shares no other state with it.
 * A histogram is the one thing two threads write (the loop and, with
 * --commit async, the writer): its fields are atomic.
 */
#ifndef SR_COORDINATOR_METRICS_H
#define SR_COORDINATOR_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/strbuf.h"

#define SR_METRICS_MAX_BUCKETS 24 /* finite upper bounds of a histogram */

/* ---- histograms --------------------------------------------------------- */

/* A histogram of durations.  counts[i] holds the observations in
 * (bounds[i-1], bounds[i]], counts[nbounds] those above the last bound
 * (not cumulative: the renderer accumulates).  Observing is thread-safe
 * and lock-free; a snapshot read while another thread observes may see the
 * sum a moment ahead of the buckets, never a bucket ahead of the count. */
typedef struct sr_metrics_hist {
    const double    *bounds_s; /* ascending upper bounds, seconds; static storage */
    size_t           nbounds;  /* <= SR_METRICS_MAX_BUCKETS */
    _Atomic uint64_t counts[SR_METRICS_MAX_BUCKETS + 1];
    _Atomic uint64_t sum_ns; /* of every observation */
} sr_metrics_hist;

/* A histogram's values at one moment: what the renderer reads. */
typedef struct {
    const double *bounds_s;
    size_t        nbounds;
    uint64_t      counts[SR_METRICS_MAX_BUCKETS + 1]; /* per bucket, as in sr_metrics_hist */
    double        sum_s;
} sr_metrics_hist_snap;

/* The bounds of syncrep_step_duration_seconds and
 * syncrep_commit_duration_seconds (docs/metrics.md). */
extern const double sr_metrics_step_bounds_s[];
extern const size_t sr_metrics_step_nbounds;
extern const double sr_metrics_commit_bounds_s[];
extern const size_t sr_metrics_commit_nbounds;

/* Empty h with these bounds (at most SR_METRICS_MAX_BUCKETS, ascending;
 * borrowed for h's lifetime).  Not thread-safe: before anyone observes. */
void sr_metrics_hist_init(sr_metrics_hist *h, const double *bounds_s, size_t nbounds);
/* Count one duration of `ns` nanoseconds (negative counts as 0).
 * Thread-safe, lock-free. */
void sr_metrics_hist_observe_ns(sr_metrics_hist *h, int64_t ns);
/* Copy h's values into *out.  Thread-safe. */
void sr_metrics_hist_read(const sr_metrics_hist *h, sr_metrics_hist_snap *out);

/* ---- the snapshot -------------------------------------------------------- */

/* One task of the job as the metrics show it (labelled task="N"). */
typedef struct {
    int32_t  task;
    int      live;             /* a client of the task was heard from within the timeout */
    double   last_seen_unix_s; /* wall clock of its last request, Unix seconds; < 0: never */
    int64_t  local_step_lag;   /* global step - its local step */
    uint64_t stragglers;       /* steps its push completed (it came last) */
} sr_metrics_task;

/* Everything one scrape shows, filled by the loop (server_metrics.c). */
typedef struct {
    /* syncrep_info's labels (escaped by the renderer; NULL is ""). */
    const char            *version, *store, *bind, *optimizer;
    uint64_t               incarnation;
    uint64_t               restarts; /* incarnations of the store before this one */
    double                 start_time_unix_s;
    int                    model_ready, done;
    int64_t                global_step, committed_step;
    int64_t                checkpoint_interval_steps; /* issue 28: the policy's k (0: never) */
    double                 checkpoint_overhead_ratio; /* its measured overhead, a fraction */
    int                    replicas_configured;       /* R */
    int                    replicas_effective;        /* the R steps are taken with now */
    int                    total_replicas;            /* N */
    uint64_t               workers_live;
    uint64_t               tokens_available;
    uint64_t               pushes_accepted, pushes_stale, pushes_duplicate, pushes_rejected;
    uint64_t               nonfinite, malformed, refused;
    uint64_t               bytes_in, bytes_out;
    uint64_t               commits, commit_failures;
    sr_metrics_hist_snap   step, commit;
    const sr_metrics_task *tasks; /* ascending task index */
    size_t                 ntasks;
} sr_metrics_snapshot;

/* Append s as Prometheus text exposition format (0.0.4) to b: every
 * metric with its HELP and TYPE lines, label values escaped
 * (sr_metrics_escape_label).  Pure: no clock, no I/O; the same snapshot
 * always gives the same bytes.  Errors: SR_EINVAL (NULL argument or a
 * histogram with more than SR_METRICS_MAX_BUCKETS bounds: nothing
 * appended), SR_ENOMEM (b's sticky failure). */
sr_err sr_metrics_render(const sr_metrics_snapshot *s, sr_strbuf *b);

/* Append v (NULL is "") escaped as a label value: backslash, double quote
 * and line feed become \\, \" and \n; other bytes are copied. */
void sr_metrics_escape_label(sr_strbuf *b, const char *v);

/* ---- the HTTP endpoint (metrics_http.c, libmicrohttpd) ------------------- */

typedef struct sr_metrics_http sr_metrics_http;

/* Bind `addr_port` ("ADDR:PORT": 127.0.0.1:9464, [::1]:9464, 0.0.0.0:9464,
 * a host name; port 0 picks a free one) and serve GET /metrics from
 * libmicrohttpd's own thread: the text last given to sr_metrics_http_publish
 * (503 until the first).  Success: *out owns the server; release with
 * sr_metrics_http_close.  Errors: SR_EINVAL (not ADDR:PORT, a bad port, an
 * address that does not resolve, or one that cannot be bound: in use, not
 * local; the detail names it and the reason), SR_ENOMEM, SR_ENOTSUP
 * (libmicrohttpd would not start; the detail says so).  Nothing is left
 * open on failure. */
sr_err sr_metrics_http_open(sr_metrics_http **out, const char *addr_port);

/* The address actually bound, "ADDR:PORT" with the real port (borrowed,
 * lives as long as m). */
const char *sr_metrics_http_address(const sr_metrics_http *m);

/* Replace the text served (copied; the caller keeps text).  Never waits for
 * a scrape in progress longer than the copy of one text.  SR_ENOMEM leaves
 * the previous text served. */
sr_err sr_metrics_http_publish(sr_metrics_http *m, const char *text, size_t len);

/* Requests for /metrics answered so far (any thread). */
uint64_t sr_metrics_http_scrapes(const sr_metrics_http *m);

/* Stop the HTTP thread, close the socket, free m.  NULL is a no-op. */
void sr_metrics_http_close(sr_metrics_http *m);

#endif
