/*
 * `syncrep store inspect|verify|export`: look at a store from outside.
 * The store is opened read-only (and never created), so these work while a
 * coordinator holds it open in WAL mode.  Exit codes: 0 ok, 1 failure (or
 * verify found problems), 2 usage error.  See docs/store.md.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/strbuf.h"
#include "core/text.h"
#include "store/store.h"

static const char usage_text[] =
    "usage: syncrep store <subcommand> [options]   (syncrep store <subcommand> --help)\n"
    "\n"
    "subcommands:\n"
    "  inspect PATH [--json]          global step, incarnation, variables, workers,\n"
    "                                 retained checkpoints, rewinds and incarnations\n"
    "  verify PATH                    integrity and consistency check; exit 1 on problems\n"
    "  export PATH OUT [--step S]     consistent copy to the new file OUT (mode 0600),\n"
    "                                 rewound to retained step S if given\n"
    "\n"
    "The store is opened read-only: safe while a coordinator is running on it.\n";

static const char inspect_usage[] =
    "usage: syncrep store inspect PATH [--json]\n"
    "\n"
    "Prints the global step, incarnation, model-ready flag, variables (name, dtype,\n"
    "shape, bytes, trainable, optimizer slots), workers (task index, local step, last\n"
    "seen, incarnation), retained checkpoints, recorded rewinds and incarnations.\n"
    "--json prints one object with the keys global_step, incarnation, model_ready,\n"
    "schema_version, variables, workers, checkpoints, rewinds, incarnations, config,\n"
    "rollbacks (accepted ones) and mark (state, step, behind).\n";

static const char verify_usage[] =
    "usage: syncrep store verify PATH\n"
    "\n"
    "Runs SQLite's integrity_check and syncrep's own checks (every chunk of every\n"
    "tensor present at the right size and matching its checksum for each retained\n"
    "checkpoint, the global step equal to the newest checkpoint, the meta table\n"
    "present, the store not behind the step its PATH-mark says was committed).\n"
    "Prints one line per problem and which retained steps are intact.  Exit 0 when\n"
    "clean, 1 when a problem was found or the store could not be read.\n";

static const char export_usage[] =
    "usage: syncrep store export PATH OUT [--step S]\n"
    "\n"
    "Copies a consistent snapshot of the store to OUT, which must not exist, with\n"
    "SQLite's online backup (the store may be in use).  OUT is created mode 0600.\n"
    "With --step S the copy is then rewound to the retained step S (see inspect's\n"
    "checkpoints); the original is never changed.\n";

static int
failed(const char *cmd, sr_err rc)
{
    fprintf(stderr, "syncrep store %s: %s: %s\n", cmd, sr_strerror(rc), sr_errdetail());
    return 1;
}

static int
wants_help(const char *a)
{
    return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

/* "2024-06-11T09:30:00.123Z" (UTC). */
static void
iso_time(int64_t ms, char *buf, size_t len)
{
    time_t    t = (time_t)(ms / 1000);
    struct tm tm;

    if (ms <= 0 || gmtime_r(&t, &tm) == NULL) {
        snprintf(buf, len, "-");
        return;
    }
    size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, len - n, ".%03dZ", (int)(ms % 1000));
}

static const char *
mark_state_name(int state)
{
    return state == SR_STORE_MARK_OK        ? "ok"
           : state == SR_STORE_MARK_MISSING ? "missing"
           : state == SR_STORE_MARK_DAMAGED ? "unreadable"
                                            : "another store's";
}

static sr_err
open_ro(const char *path, int skip_quick_check, sr_store **st)
{
    sr_store_opts o;

    memset(&o, 0, sizeof(o));
    o.readonly = 1;
    o.skip_quick_check = skip_quick_check;
    return sr_store_open(path, &o, st);
}

/* Everything inspect shows, read through the public API. */
typedef struct {
    sr_store_info          info;
    char                  *config;
    sr_store_var          *vars;
    size_t                 nvars;
    char                ***slots; /* per variable */
    size_t                *nslots;
    size_t                *nchunks;
    sr_store_worker       *workers;
    size_t                 nworkers;
    int64_t               *ckpts;
    size_t                 nckpts;
    sr_store_rewind_rec   *rewinds;
    size_t                 nrewinds;
    sr_store_incarnation  *incs; /* one block */
    size_t                 nincs;
    sr_store_rollback_rec *rollbacks;
    size_t                 nrollbacks;
    sr_store_rollback      mark;
} inspection;

static void
inspection_free(inspection *in)
{
    for (size_t i = 0; in->slots != NULL && i < in->nvars; i++) {
        sr_store_free_names(in->slots[i], in->nslots[i]);
    }
    free(in->slots);
    free(in->nslots);
    free(in->nchunks);
    free(in->config);
    free(in->vars);
    free(in->workers);
    free(in->ckpts);
    free(in->rewinds);
    free(in->incs);
    free(in->rollbacks);
}

static sr_err
inspect_read(sr_store *st, inspection *in)
{
    sr_err rc;

    if ((rc = sr_store_get_info(st, &in->info)) != SR_OK ||
        (rc = sr_store_get_config(st, &in->config)) != SR_OK ||
        (rc = sr_store_list_vars(st, &in->vars, &in->nvars)) != SR_OK ||
        (rc = sr_store_list_workers(st, &in->workers, &in->nworkers)) != SR_OK ||
        (rc = sr_store_list_checkpoints(st, &in->ckpts, &in->nckpts)) != SR_OK ||
        (rc = sr_store_list_rewinds(st, &in->rewinds, &in->nrewinds)) != SR_OK ||
        (rc = sr_store_list_incarnations(st, &in->incs, &in->nincs)) != SR_OK ||
        (rc = sr_store_list_rollbacks(st, &in->rollbacks, &in->nrollbacks)) != SR_OK ||
        (rc = sr_store_get_rollback(st, &in->mark)) != SR_OK) {
        return rc;
    }
    in->slots = calloc(in->nvars + 1, sizeof(*in->slots));
    in->nslots = calloc(in->nvars + 1, sizeof(*in->nslots));
    in->nchunks = calloc(in->nvars + 1, sizeof(*in->nchunks));
    if (in->slots == NULL || in->nslots == NULL || in->nchunks == NULL) {
        return sr_fail(SR_ENOMEM, "inspect: %zu variables", in->nvars);
    }
    for (size_t i = 0; i < in->nvars; i++) {
        if ((rc = sr_store_list_slots(st, in->vars[i].id, &in->slots[i], &in->nslots[i])) !=
                SR_OK ||
            (rc = sr_store_nchunks(st, in->vars[i].id, &in->nchunks[i])) != SR_OK) {
            return rc;
        }
    }
    return SR_OK;
}

static void
print_json(const char *path, const inspection *in)
{
    sr_strbuf   b;
    char        t[64];
    const char *text;

    sr_strbuf_init(&b);
    sr_strbuf_printf(&b, "{\"path\":");
    sr_strbuf_json_str(&b, path);
    sr_strbuf_printf(&b,
                     ",\"schema_version\":%d,\"global_step\":%" PRId64 ",\"incarnation\":%" PRIu64
                     ",\"model_ready\":%s,\"config\":",
                     in->info.schema_version, in->info.global_step, in->info.incarnation,
                     in->info.model_ready ? "true" : "false");
    sr_strbuf_json_str(&b, in->config);
    sr_strbuf_printf(&b, ",\"variables\":[");
    for (size_t i = 0; i < in->nvars; i++) {
        const sr_store_var *v = &in->vars[i];
        sr_strbuf_printf(&b, "%s{\"id\":%" PRId64 ",\"name\":", i ? "," : "", v->id);
        sr_strbuf_json_str(&b, v->name);
        sr_strbuf_printf(&b, ",\"dtype\":\"%s\",\"shape\":[", sr_dtype_name(v->dtype));
        for (int d = 0; d < v->ndim; d++) {
            sr_strbuf_printf(&b, "%s%" PRId64, d ? "," : "", v->shape[d]);
        }
        sr_strbuf_printf(&b,
                         "],\"bytes\":%" PRIu64 ",\"trainable\":%s,\"created_step\":%" PRId64
                         ",\"chunk_bytes\":%u,\"chunks\":%zu,\"slots\":[",
                         v->nbytes, v->trainable ? "true" : "false", v->created_step,
                         (unsigned)v->chunk_bytes, in->nchunks[i]);
        for (size_t k = 0; k < in->nslots[i]; k++) {
            sr_strbuf_printf(&b, "%s", k ? "," : "");
            sr_strbuf_json_str(&b, in->slots[i][k]);
        }
        sr_strbuf_printf(&b, "]}");
    }
    sr_strbuf_printf(&b, "],\"workers\":[");
    for (size_t i = 0; i < in->nworkers; i++) {
        const sr_store_worker *w = &in->workers[i];
        iso_time(w->last_seen_ms, t, sizeof(t));
        sr_strbuf_printf(
            &b,
            "%s{\"task_index\":%d,\"local_step\":%" PRId64
            ",\"last_seen\":\"%s\",\"last_seen_ms\":%" PRId64 ",\"incarnation\":%" PRIu64 "}",
            i ? "," : "", (int)w->task_index, w->local_step, t, w->last_seen_ms, w->incarnation);
    }
    sr_strbuf_printf(&b, "],\"checkpoints\":[");
    for (size_t i = 0; i < in->nckpts; i++) {
        sr_strbuf_printf(&b, "%s%" PRId64, i ? "," : "", in->ckpts[i]);
    }
    sr_strbuf_printf(&b, "],\"rewinds\":[");
    for (size_t i = 0; i < in->nrewinds; i++) {
        const sr_store_rewind_rec *r = &in->rewinds[i];
        iso_time(r->at_ms, t, sizeof(t));
        sr_strbuf_printf(&b,
                         "%s{\"incarnation\":%" PRIu64 ",\"from_step\":%" PRId64
                         ",\"to_step\":%" PRId64 ",\"at\":\"%s\"}",
                         i ? "," : "", r->incarnation, r->from_step, r->to_step, t);
    }
    sr_strbuf_printf(&b, "],\"incarnations\":[");
    for (size_t i = 0; i < in->nincs; i++) {
        const sr_store_incarnation *e = &in->incs[i];
        iso_time(e->started_ms, t, sizeof(t));
        sr_strbuf_printf(&b,
                         "%s{\"incarnation\":%" PRIu64 ",\"restored_step\":%" PRId64
                         ",\"started\":\"%s\",\"config\":",
                         i ? "," : "", e->incarnation, e->restored_step, t);
        sr_strbuf_json_str(&b, e->config);
        sr_strbuf_printf(&b, "}");
    }
    sr_strbuf_printf(&b, "],\"rollbacks\":[");
    for (size_t i = 0; i < in->nrollbacks; i++) {
        const sr_store_rollback_rec *r = &in->rollbacks[i];
        iso_time(r->at_ms, t, sizeof(t));
        sr_strbuf_printf(&b,
                         "%s{\"incarnation\":%" PRIu64 ",\"from_step\":%" PRId64
                         ",\"to_step\":%" PRId64 ",\"at\":\"%s\",\"cause\":",
                         i ? "," : "", r->incarnation, r->from_step, r->to_step, t);
        sr_strbuf_json_str(&b, r->cause);
        sr_strbuf_printf(&b, "}");
    }
    sr_strbuf_printf(&b, "],\"mark\":{\"state\":\"%s\",\"step\":%" PRId64 ",\"behind\":%s}}\n",
                     mark_state_name(in->mark.state), in->mark.mark_step,
                     in->mark.behind ? "true" : "false");
    if (sr_strbuf_result(&b, &text) == SR_OK) {
        fputs(text, stdout);
    }
    sr_strbuf_free(&b);
}

static void
print_human(const char *path, const inspection *in)
{
    char t[64], shape[128];

    printf("store         %s\n", path);
    printf("schema        %d\n", in->info.schema_version);
    printf("global step   %" PRId64 "\n", in->info.global_step);
    printf("incarnation   %" PRIu64 "\n", in->info.incarnation);
    printf("model ready   %s\n", in->info.model_ready ? "yes" : "no");
    if (in->mark.state == SR_STORE_MARK_OK) {
        printf("mark          step %" PRId64 "%s\n", in->mark.mark_step,
               in->mark.behind ? " (the store is BEHIND it: run verify)" : "");
    } else {
        printf("mark          %s\n", mark_state_name(in->mark.state));
    }
    if (in->config[0] != '\0') {
        printf("config        %s\n", in->config);
    }
    printf("\nvariables (%zu)\n", in->nvars);
    if (in->nvars > 0) {
        printf("  %-5s %-24s %-8s %-16s %14s %-9s %8s %7s  %s\n", "id", "name", "dtype", "shape",
               "bytes", "trainable", "created", "chunks", "slots");
    }
    for (size_t i = 0; i < in->nvars; i++) {
        const sr_store_var *v = &in->vars[i];
        sr_shape_format(v->ndim, v->shape, shape, sizeof(shape));
        printf("  %-5" PRId64 " %-24s %-8s %-16s %14" PRIu64 " %-9s %8" PRId64 " %7zu  ", v->id,
               SR_ESC(v->name), sr_dtype_name(v->dtype), shape, v->nbytes,
               v->trainable ? "yes" : "no", v->created_step, in->nchunks[i]);
        for (size_t k = 0; k < in->nslots[i]; k++) {
            printf("%s%s", k ? "," : "", SR_ESC(in->slots[i][k]));
        }
        printf("%s\n", in->nslots[i] ? "" : "-");
    }
    printf("\nworkers (%zu)\n", in->nworkers);
    if (in->nworkers > 0) {
        printf("  %-6s %-12s %-26s %s\n", "task", "local_step", "last_seen", "incarnation");
    }
    for (size_t i = 0; i < in->nworkers; i++) {
        const sr_store_worker *w = &in->workers[i];
        iso_time(w->last_seen_ms, t, sizeof(t));
        printf("  %-6d %-12" PRId64 " %-26s %" PRIu64 "\n", (int)w->task_index, w->local_step, t,
               w->incarnation);
    }
    printf("\ncheckpoints (%zu):", in->nckpts);
    for (size_t i = 0; i < in->nckpts; i++) {
        printf(" %" PRId64, in->ckpts[i]);
    }
    printf("\n\nrewinds (%zu)\n", in->nrewinds);
    for (size_t i = 0; i < in->nrewinds; i++) {
        const sr_store_rewind_rec *r = &in->rewinds[i];
        iso_time(r->at_ms, t, sizeof(t));
        printf("  incarnation %" PRIu64 ": step %" PRId64 " -> %" PRId64 " at %s\n", r->incarnation,
               r->from_step, r->to_step, t);
    }
    printf("\nrollbacks (%zu)\n", in->nrollbacks);
    for (size_t i = 0; i < in->nrollbacks; i++) {
        const sr_store_rollback_rec *r = &in->rollbacks[i];
        iso_time(r->at_ms, t, sizeof(t));
        printf("  incarnation %" PRIu64 ": accepted step %" PRId64 " -> %" PRId64 " at %s (%s)\n",
               r->incarnation, r->from_step, r->to_step, t, r->cause);
    }
    printf("\nincarnations (%zu)\n", in->nincs);
    for (size_t i = 0; i < in->nincs; i++) {
        const sr_store_incarnation *e = &in->incs[i];
        iso_time(e->started_ms, t, sizeof(t));
        printf("  %-6" PRIu64 " from step %-10" PRId64 " at %s  %s\n", e->incarnation,
               e->restored_step, t, e->config);
    }
}

static int
cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    int         json = 0;
    sr_store   *st = NULL;
    inspection  in;
    sr_err      rc;

    for (int i = 1; i < argc; i++) {
        if (wants_help(argv[i])) {
            fputs(inspect_usage, stdout);
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return sr_args_usage_error("store inspect", "unknown option '%s'", argv[i]);
        } else if (path == NULL) {
            path = argv[i];
        } else {
            return sr_args_usage_error("store inspect", "unexpected argument '%s'", argv[i]);
        }
    }
    if (path == NULL) {
        return sr_args_usage_error("store inspect", "missing PATH");
    }
    memset(&in, 0, sizeof(in));
    if ((rc = open_ro(path, 1, &st)) != SR_OK) {
        return failed("inspect", rc);
    }
    if ((rc = inspect_read(st, &in)) != SR_OK) {
        inspection_free(&in);
        sr_store_close(st);
        return failed("inspect", rc);
    }
    if (json) {
        print_json(path, &in);
    } else {
        print_human(path, &in);
    }
    inspection_free(&in);
    sr_store_close(st);
    return 0;
}

/* "PATH: ok (global step 40, mark 40, retained steps 38 39 40 intact)". */
static void
print_verified(const char *path, sr_store *st)
{
    sr_store_info     info;
    sr_store_rollback rb;
    int64_t          *steps = NULL;
    size_t            n = 0;

    if (sr_store_get_info(st, &info) != SR_OK || sr_store_get_rollback(st, &rb) != SR_OK ||
        sr_store_list_checkpoints(st, &steps, &n) != SR_OK) {
        printf("%s: ok\n", path);
        return;
    }
    printf("%s: ok (global step %" PRId64 ", ", path, info.global_step);
    if (rb.state == SR_STORE_MARK_OK) {
        printf("mark %" PRId64 ", ", rb.mark_step);
    } else {
        printf("mark %s, ", mark_state_name(rb.state));
    }
    printf("retained steps");
    for (size_t i = 0; i < n; i++) {
        printf(" %" PRId64, steps[i]);
    }
    printf("%s)\n", n ? " intact" : " none");
    free(steps);
}

static int
cmd_verify(int argc, char **argv)
{
    const char *path = NULL;
    sr_store   *st = NULL;
    char       *report = NULL;
    sr_err      rc;

    for (int i = 1; i < argc; i++) {
        if (wants_help(argv[i])) {
            fputs(verify_usage, stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return sr_args_usage_error("store verify", "unknown option '%s'", argv[i]);
        } else if (path == NULL) {
            path = argv[i];
        } else {
            return sr_args_usage_error("store verify", "unexpected argument '%s'", argv[i]);
        }
    }
    if (path == NULL) {
        return sr_args_usage_error("store verify", "missing PATH");
    }
    /* integrity_check is a superset of the quick_check open would run. */
    if ((rc = open_ro(path, 1, &st)) != SR_OK) {
        return failed("verify", rc);
    }
    rc = sr_store_verify(st, &report);
    if (rc == SR_OK) {
        print_verified(path, st);
    } else if (rc == SR_ECORRUPT && report != NULL) {
        fputs(report, stdout);
        fprintf(stderr, "syncrep store verify: %s: %s\n", sr_strerror(rc), sr_errdetail());
    } else {
        failed("verify", rc);
    }
    free(report);
    sr_store_close(st);
    return rc == SR_OK ? 0 : 1;
}

static int
cmd_export(int argc, char **argv)
{
    const char *path = NULL, *out = NULL;
    long long   step = -1;
    sr_store   *st = NULL;
    sr_err      rc;

    for (int i = 1; i < argc; i++) {
        if (wants_help(argv[i])) {
            fputs(export_usage, stdout);
            return 0;
        } else if (strcmp(argv[i], "--step") == 0) {
            if (i + 1 >= argc || sr_args_parse_i64(argv[i + 1], 0, INT64_MAX, &step) != 0) {
                return sr_args_usage_error("store export", "--step needs a step number >= 0");
            }
            i++;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return sr_args_usage_error("store export", "unknown option '%s'", argv[i]);
        } else if (path == NULL) {
            path = argv[i];
        } else if (out == NULL) {
            out = argv[i];
        } else {
            return sr_args_usage_error("store export", "unexpected argument '%s'", argv[i]);
        }
    }
    if (path == NULL || out == NULL) {
        return sr_args_usage_error("store export", "needs PATH and OUT");
    }
    if ((rc = open_ro(path, 0, &st)) != SR_OK) {
        return failed("export", rc);
    }
    rc = sr_store_export(st, out, (int64_t)step);
    sr_store_close(st);
    if (rc != SR_OK) {
        return failed("export", rc);
    }
    if (step >= 0) {
        printf("exported %s to %s at step %lld\n", path, out, step);
    } else {
        printf("exported %s to %s\n", path, out);
    }
    return 0;
}

int
sr__cli_store(int argc, char **argv)
{
    if (argc < 2) {
        return sr_args_usage_error("store", "missing subcommand (inspect|verify|export)");
    }
    if (wants_help(argv[1]) || strcmp(argv[1], "help") == 0) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (strcmp(argv[1], "inspect") == 0) {
        return cmd_inspect(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "verify") == 0) {
        return cmd_verify(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "export") == 0) {
        return cmd_export(argc - 1, argv + 1);
    }
    return sr_args_usage_error("store", "unknown subcommand '%s'", argv[1]);
}
