/*
 * What a chaos run leaves behind: DIR/timeline.svg, the global step over
 * time with every fault marked (sr__chaos_report_svg), and DIR/report.json,
 * the checks with the run's counts (sr__chaos_report_write).  docs/chaos.md.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chaos/chaos.h"
#include "chaos/chaos_model.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/strbuf.h"
#include "tools/coord_argv.h"
#include "tools/proc.h"
#include "tools/status_client.h"
#include "wire/wire.h"

#include "chaos/chaos_int.h"

const char *const        sr__chaos_role_name[3] = {"coordinator", "chief", "worker"};
static const char *const role_color[3] = {"#d62728", "#1f77b4", "#ff7f0e"};
static const char *const net_color[NET_KINDS] = {"#2ca02c", "#9467bd", "#8c564b", "#17becf"};

/* ---- report ------------------------------------------------------------- */

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void
sr__chaos_report_svg(chaos *c)
{
    char  path[PATH_MAX + 32];
    FILE *f;
    /* Rm: the legend's column, wide enough for its longest entry at about
     * 7 px a character of 12 px sans-serif (issue 22: it ran past W). */
    double  W = 960, H = 420, L = 70, B = 50, T = 40, Rm = SR__CHAOS_LEGEND_W;
    double  tmax = c->duration > 0 ? c->duration : 1;
    int64_t smax = 1;

    for (int i = 0; i < c->nsamples; i++) {
        if (c->samples[i].step > smax) {
            smax = c->samples[i].step;
        }
    }
    snprintf(path, sizeof(path), "%s/timeline.svg", c->out);
    if ((f = fopen(path, "w")) == NULL) {
        return;
    }
    double pw = W - L - Rm, ph = H - T - B;
#define X(t) (L + (t) / tmax * pw)
#define Y(s) (T + ph - (double)(s) / (double)smax * ph)
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n",
            W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f,
            "<text x=\"%.0f\" y=\"22\" font-size=\"15\">syncrep chaos: seed %" PRIu64
            ", %d kills, %d restarts, global step %" PRId64 "</text>\n",
            L, c->seed, c->kills[0] + c->kills[1] + c->kills[2],
            c->restarts[0] + c->restarts[1] + c->restarts[2], c->gstep);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", L,
            T + ph, L + pw, T + ph);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", L, T,
            L, T + ph);
    for (int k = 0; k <= 5; k++) {
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0fs</text>\n",
                X(tmax * k / 5), T + ph + 18, tmax * k / 5);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%" PRId64 "</text>\n", L - 6,
                Y(smax * k / 5) + 4, smax * k / 5);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">time</text>\n", L + pw / 2,
            H - 10);
    fprintf(f,
            "<text x=\"16\" y=\"%.1f\" transform=\"rotate(-90 16 %.1f)\" "
            "text-anchor=\"middle\">global step</text>\n",
            T + ph / 2, T + ph / 2);
    for (int i = 0; i < c->nev; i++) {
        const event *e = &c->ev[i];
        if (strcmp(e->what, "stop") == 0) {
            /* A stop is drawn as what it is: a band from SIGSTOP to its
             * SIGCONT (or the end), not a kill's line. */
            double end = tmax;
            for (int j = i + 1; j < c->nev; j++) {
                const event *x = &c->ev[j];
                if (strcmp(x->what, "cont") == 0 && x->role == e->role && x->task == e->task) {
                    end = x->t;
                    break;
                }
            }
            fprintf(f,
                    "<rect class=\"stop\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                    "fill=\"%s\" opacity=\"0.18\"><title>%.2fs-%.2fs %s %d stopped "
                    "(SIGSTOP..SIGCONT)</title></rect>\n",
                    X(e->t), T, X(end) - X(e->t) > 1 ? X(end) - X(e->t) : 1, ph,
                    role_color[e->role], e->t, end, sr__chaos_role_name[e->role], e->task);
            continue;
        }
        if (strcmp(e->what, "resize") == 0 || strcmp(e->what, "resume") == 0) {
            /* Resizes and rewinds (--resume-from-step): a marker on top. */
            int rewind = strcmp(e->what, "resume") == 0;
            fprintf(f,
                    "<text class=\"%s\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                    "font-size=\"11\">%s<title>%.2fs %s</title></text>\n",
                    rewind ? "rewind" : "resize", X(e->t), T - 4, rewind ? "R" : "N", e->t,
                    rewind ? "rewind (--resume-from-step)" : "resize (workers changed)");
            continue;
        }
        int restart = strcmp(e->what, "restart") == 0;
        if (strcmp(e->what, "kill") && !restart) {
            continue;
        }
        fprintf(f,
                "<line class=\"%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                "stroke=\"%s\" stroke-width=\"%s\" %s opacity=\"0.8\"><title>%.2fs %s %s "
                "%d</title></line>\n",
                e->what, X(e->t), T, X(e->t), T + ph, role_color[e->role], restart ? "1" : "2",
                restart ? "stroke-dasharray=\"4 3\"" : "", e->t, sr__chaos_role_name[e->role],
                e->what, e->task);
    }
    /* issue 27: a network fault is a band from its start to its end, in a
     * colour of its kind, thin on top of the plot (under the step line). */
    for (int i = 0; i < c->nnetrec; i++) {
        const netrec *r = &c->netrec[i];
        double        end = r->end >= 0 ? r->end : tmax;
        fprintf(f,
                "<rect class=\"net-%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                "fill=\"%s\" opacity=\"0.22\"><title>%.2fs-%.2fs network %s, host %d%s; next "
                "step %.3f s after</title></rect>\n",
                sr__chaos_net_kind_name[r->kind], X(r->start), T + ph * 0.5,
                X(end) - X(r->start) > 1 ? X(end) - X(r->start) : 1, ph * 0.5, net_color[r->kind],
                r->start, end, sr__chaos_net_kind_name[r->kind], r->host,
                r->kind == 1 ? (r->dir == 1 ? " (to c dropped)" : " (from c dropped)") : "",
                r->next_s);
    }
    if (c->interrupted) {
        fprintf(f,
                "<text class=\"interrupted\" x=\"%.1f\" y=\"%.1f\" fill=\"#d62728\">"
                "INTERRUPTED (%s) at %.1fs</text>\n",
                L + 8, T + 14, c->interrupted == SIGINT ? "SIGINT" : "SIGTERM", c->interrupted_t);
    }
    fprintf(f, "<polyline fill=\"none\" stroke=\"black\" stroke-width=\"1.5\" points=\"");
    for (int i = 0; i < c->nsamples; i++) {
        fprintf(f, "%.1f,%.1f ", X(c->samples[i].t), Y(c->samples[i].step));
    }
    fprintf(f, "\"/>\n");
    /* The legend: per role a kill, a restart and a stop; then the markers. */
    for (int r = 0; r < 3; r++) {
        double y = T + 10 + r * 54, x0 = L + pw + 14, xt = L + pw + 40;
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"2\"/>\n",
                x0, y, x0 + 20, y, role_color[r]);
        fprintf(f, "<text class=\"legend\" x=\"%.1f\" y=\"%.1f\">%s kill</text>\n", xt, y + 4,
                sr__chaos_role_name[r]);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-dasharray=\"4 3\"/>\n",
                x0, y + 16, x0 + 20, y + 16, role_color[r]);
        fprintf(f, "<text class=\"legend\" x=\"%.1f\" y=\"%.1f\">%s restart</text>\n", xt, y + 20,
                sr__chaos_role_name[r]);
        fprintf(f,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"20\" height=\"10\" fill=\"%s\" "
                "opacity=\"0.18\"/>\n",
                x0, y + 27, role_color[r]);
        fprintf(f, "<text class=\"legend\" x=\"%.1f\" y=\"%.1f\">%s stopped</text>\n", xt, y + 36,
                sr__chaos_role_name[r]);
    }
    {
        double y = T + 10 + 3 * 54, x0 = L + pw + 14, xt = L + pw + 40;
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">N</text>\n", x0 + 6, y + 4);
        fprintf(f, "<text class=\"legend\" x=\"%.1f\" y=\"%.1f\">resize</text>\n", xt, y + 4);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">R</text>\n", x0 + 6, y + 20);
        fprintf(f, "<text class=\"legend\" x=\"%.1f\" y=\"%.1f\">rewind</text>\n", xt, y + 20);
    }
    for (int k = 0; c->net_up && k < NET_KINDS; k++) { /* issue 27 */
        double y = T + 10 + 3 * 54 + 34 + k * 16, x0 = L + pw + 14, xt = L + pw + 40;
        fprintf(f,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"20\" height=\"10\" fill=\"%s\" "
                "opacity=\"0.22\"/>\n",
                x0, y - 5, net_color[k]);
        fprintf(f, "<text class=\"legend\" x=\"%.1f\" y=\"%.1f\">network %s</text>\n", xt, y + 4,
                sr__chaos_net_kind_name[k]);
    }
    fprintf(f, "</svg>\n");
#undef X
#undef Y
    fclose(f);
}

/* issue 27: the network faults, each with its start, end and the time from
 * its end to the next applied step (null: none seen before the run ended). */
static void
report_net(const chaos *c, sr_strbuf *b)
{
    double v[MAX_NETREC];
    int    n = 0;

    if (!c->net_up) {
        return;
    }
    for (int i = 0; i < c->nnetrec; i++) {
        if (c->netrec[i].next_s >= 0) {
            v[n++] = c->netrec[i].next_s;
        }
    }
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    sr_strbuf_printf(b,
                     ",\n  \"network\": {\"faults\": {\"link\": %d, \"oneway\": %d, \"loss\": %d, "
                     "\"power\": %d}, \"skipped\": %d, \"not_applied\": %d, "
                     "\"next_step_seconds\": {\"count\": %d, \"p50\": %.3f, \"max\": %.3f}},\n"
                     "  \"network_faults\": [",
                     c->net_faults[0], c->net_faults[1], c->net_faults[2], c->net_faults[3],
                     c->net_skipped, c->net_errors, n, n ? v[(n - 1) / 2] : 0.0,
                     n ? v[n - 1] : 0.0);
    for (int i = 0; i < c->nnetrec; i++) {
        const netrec *r = &c->netrec[i];
        sr_strbuf_printf(b,
                         "%s\n    {\"kind\": \"%s\", \"host\": %d, \"direction\": %s, "
                         "\"loss_pct\": %d, \"start\": %.3f, \"end\": %.3f, \"next_step_s\": ",
                         i ? "," : "", sr__chaos_net_kind_name[r->kind], r->host,
                         r->kind != 1  ? "null"
                         : r->dir == 1 ? "\"to-coordinator\""
                                       : "\"from-coordinator\"",
                         r->pct, r->start, r->end);
        if (r->next_s >= 0) {
            sr_strbuf_printf(b, "%.3f}", r->next_s);
        } else {
            sr_strbuf_printf(b, "null}");
        }
    }
    sr_strbuf_printf(b, "\n  ]");
}

int
sr__chaos_report_write(chaos *c, const sr_chaos_check *checks, int nchecks, int passed,
                       int64_t gstep)
{
    sr_strbuf   b;
    const char *text;
    char        path[PATH_MAX + 32];
    double      p50 = 0, mx = 0;
    FILE       *f;

    if (c->nrecovery > 0) {
        qsort(c->recovery, (size_t)c->nrecovery, sizeof(double), cmp_double);
        p50 = c->recovery[(c->nrecovery - 1) / 2];
        mx = c->recovery[c->nrecovery - 1];
    }
    sr_strbuf_init(&b);
    sr_strbuf_printf(&b,
                     "{\n  \"passed\": %s,\n  \"seed\": %" PRIu64 ",\n  \"global_step\": %" PRId64
                     ",\n  \"config\": {\"workers\": %d, \"replicas_to_aggregate\": %d, "
                     "\"total_replicas\": %d, \"duration_s\": %.1f, \"kill_every_s\": %.2f, "
                     "\"checkpoint_every_steps\": %d, \"checkpoint_budget_pct\": %g, "
                     "\"optimizer\": \"%s\", \"commit\": \"%s\", "
                     "\"partition_bytes\": %" PRId64 ", \"model_api\": %s, \"targets\": [",
                     passed ? "true" : "false", c->seed, gstep, c->workers, c->R, c->M, c->duration,
                     c->kill_every, c->checkpoint_budget > 0 ? 0 : c->checkpoint_every,
                     c->checkpoint_budget, sr__optim_name(c->optim.kind),
                     c->commit_async ? "async" : "sync", c->partition_bytes,
                     c->model_api ? "true" : "false");
    int first = 1;
    for (int i = 0; i < 3; i++) {
        if (c->targets[i]) {
            sr_strbuf_printf(&b, "%s\"%s\"", first ? "" : ", ", sr__chaos_role_name[i]);
            first = 0;
        }
    }
    sr_strbuf_printf(&b, "], \"resize\": [");
    for (int i = 0; i < c->nresize; i++) {
        sr_strbuf_printf(&b, "%s%d", i ? ", " : "", c->resize[i]);
    }
    sr_strbuf_printf(&b,
                     "]},\n  \"kills\": {\"coordinator\": %d, \"chief\": %d, \"worker\": %d},\n"
                     "  \"stops\": %d,\n  \"restarts\": {\"coordinator\": %d, \"chief\": %d, "
                     "\"worker\": %d, \"total\": %d},\n  \"resizes\": %d,\n  \"resumes\": %d,\n"
                     "  \"recovery_seconds\": {\"count\": %d, \"p50\": %.3f, \"max\": %.3f},\n"
                     "  \"steps_lost_per_kill\": {\"count\": %d, \"max\": %" PRId64
                     ", \"mean\": %.2f, \"max_interval\": %" PRId64 ", \"over_interval\": %d},\n"
                     "  \"interrupted\": %s,\n  \"invariants\": [\n",
                     c->kills[0], c->kills[1], c->kills[2], c->stops, c->restarts[0],
                     c->restarts[1], c->restarts[2],
                     c->restarts[0] + c->restarts[1] + c->restarts[2], c->resizes, c->resumes,
                     c->nrecovery, p50, mx, c->crash_n, c->crash_max_lost,
                     c->crash_n ? (double)c->crash_sum_lost / c->crash_n : 0.0,
                     c->crash_max_interval, c->crash_over, /* issue 28 */
                     c->interrupted == 0        ? "null"
                     : c->interrupted == SIGINT ? "\"SIGINT\""
                                                : "\"SIGTERM\"");
    for (int i = 0; i < nchecks; i++) {
        sr_strbuf_printf(&b, "    {\"name\": ");
        sr_strbuf_json_str(&b, checks[i].name);
        sr_strbuf_printf(&b, ", \"passed\": %s, \"detail\": ", checks[i].passed ? "true" : "false");
        sr_strbuf_json_str(&b, checks[i].detail);
        sr_strbuf_printf(&b, "}%s\n", i + 1 < nchecks ? "," : "");
    }
    sr_strbuf_printf(&b, "  ],\n  \"events\": [");
    for (int i = 0; i < c->nev; i++) {
        sr_strbuf_printf(
            &b, "%s\n    {\"t\": %.3f, \"role\": \"%s\", \"task\": %d, \"what\": ", i ? "," : "",
            c->ev[i].t, sr__chaos_role_name[c->ev[i].role], c->ev[i].task);
        sr_strbuf_json_str(&b, c->ev[i].what);
        sr_strbuf_printf(&b, "}");
    }
    sr_strbuf_printf(&b, "\n  ],\n  \"self_exits\": %d", c->self_exits);
    report_net(c, &b); /* issue 27 */
    sr_strbuf_printf(&b, "\n}\n");
    snprintf(path, sizeof(path), "%s/report.json", c->out);
    if (sr_strbuf_result(&b, &text) != SR_OK || (f = fopen(path, "w")) == NULL) {
        sr_strbuf_free(&b);
        return -1;
    }
    fputs(text, f);
    fclose(f);
    sr_strbuf_free(&b);
    return 0;
}
