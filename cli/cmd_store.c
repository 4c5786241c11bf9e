/*
 * `syncrep store inspect|verify|export`: look at a store from outside.
 * The store is opened read-only (and never created), so these work while a
 * coordinator holds it open in WAL mode.  Exit codes: 0 ok, 1 failure (or
 * verify found problems), 2 usage error.  See docs/store.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "coordinator/exclusive.h"
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
    "  export PATH OUT [--step S] [--format store|npz|safetensors]\n"
    "                                 store (the default): a consistent copy to the new\n"
    "                                 file OUT, rewound to retained step S if given;\n"
    "                                 npz, safetensors: the weights of the latest or\n"
    "                                 retained step S for numpy and PyTorch\n"
    "  drop-variable PATH NAME        remove variable NAME (value, slots, history);\n"
    "                                 the coordinator must be stopped\n"
    "  vacuum PATH                    give the pages retention and drop-variable freed\n"
    "                                 back to the file system; coordinator stopped\n"
    "\n"
    "inspect, verify and export open the store read-only: safe while a coordinator is\n"
    "running on it.  drop-variable and vacuum take the store's writer lock (PATH-lock) and is\n"
    "refused while a coordinator holds it.\n";

static const char vacuum_usage[] =
    "usage: syncrep store vacuum PATH\n"
    "\n"
    "Rebuilds the store file from its live rows (SQLite VACUUM, then the WAL copied\n"
    "in and emptied): the pages of versions retention dropped and of dropped\n"
    "variables go back to the file system.  Nothing stored changes.  Prints the size\n"
    "of the file and its -wal before and after.  Takes the store's writer lock\n"
    "(PATH-lock) first: refused while a coordinator runs on the store.  Needs free\n"
    "disk space about the size of the store while it runs.\n";

static const char drop_usage[] =
    "usage: syncrep store drop-variable PATH NAME\n"
    "\n"
    "Removes the variable NAME from the store: its value, its optimizer slots and\n"
    "EMA shadow, every retained version of them and its step-log rows, in one durable\n"
    "transaction.  The other variables and the retained checkpoints are untouched (a\n"
    "rewind still works).  Takes the store's writer lock (PATH-lock) first: refused,\n"
    "changing nothing, while a coordinator runs on the store.  A chief that declares\n"
    "the variable again later is refused unless the coordinator runs with\n"
    "--allow-new-variables.  `store inspect` shows each variable's step of creation.\n";

static const char inspect_usage[] =
    "usage: syncrep store inspect PATH [--json]\n"
    "\n"
    "Prints the global step, incarnation, model-ready flag, variables (name, dtype,\n"
    "shape, bytes, trainable, optimizer slots), the tensors of a model declared as a\n"
    "whole (name, dtype, shape, bytes, trainable, the pack variable and byte offset\n"
    "that hold them), workers (task index, local step, last seen, incarnation),\n"
    "retained checkpoints (with --keep-every-steps, the sparse history among them),\n"
    "recorded rewinds and incarnations.\n"
    "--json prints one object with the keys global_step, incarnation, model_ready,\n"
    "keep_every_steps, schema_version, variables, members (name, dtype, shape, bytes,\n"
    "trainable, pack, offset, pos, created_step), workers, checkpoints, rewinds,\n"
    "incarnations, config, rollbacks (accepted ones) and mark (state, step, behind).\n";

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
    "usage: syncrep store export PATH OUT [--step S] [--format store|npz|safetensors]\n"
    "\n"
    "--format store (the default when --format is absent): copies a consistent\n"
    "snapshot of the store to OUT with SQLite's online backup (the store may be in\n"
    "use).  With --step S the copy is then rewound to the retained step S (see\n"
    "inspect's checkpoints); the original is never changed.\n"
    "\n"
    "--format npz | safetensors: writes the tensors of the latest step, or of the\n"
    "retained step S, in a file numpy.load or safetensors/PyTorch read directly:\n"
    "each variable under its name, each optimizer slot and EMA shadow as VAR/slot\n"
    "(layer/w/momentum); a model declared as a whole as its own tensors, each\n"
    "under its name with its dtype and shape (never the packs that hold them).  Every chunk's "
    "checksum is verified on the way.  npz is a\n"
    "zip of stored .npy files (no zip64: refused over 4 GiB); safetensors records\n"
    "the step in __metadata__.global_step.\n"
    "\n"
    "OUT must not exist and is created mode 0600, complete or not at all (written\n"
    "to a temp file beside it first).  An unknown or no longer retained step is an\n"
    "error that names the retained ones.\n";

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
    sr_store_member       *members; /* issue 23: a model's tensors, in declared order */
    size_t                 nmembers;
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
    free(in->members);
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
        (rc = sr_store_get_rollback(st, &in->mark)) != SR_OK ||
        (rc = sr_store_list_members(st, &in->members, &in->nmembers)) != SR_OK) {
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
                     ",\"model_ready\":%s,\"keep_every_steps\":%" PRId64 ",\"config\":",
                     in->info.schema_version, in->info.global_step, in->info.incarnation,
                     in->info.model_ready ? "true" : "false", in->info.keep_every_steps);
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
    sr_strbuf_printf(&b, "],\"members\":[");
    for (size_t i = 0; i < in->nmembers; i++) {
        const sr_store_member *m = &in->members[i];
        sr_strbuf_printf(&b, "%s{\"name\":", i ? "," : "");
        sr_strbuf_json_str(&b, m->name);
        sr_strbuf_printf(&b, ",\"dtype\":\"%s\",\"shape\":[", sr_dtype_name(m->dtype));
        for (int d = 0; d < m->ndim; d++) {
            sr_strbuf_printf(&b, "%s%" PRId64, d ? "," : "", m->shape[d]);
        }
        sr_strbuf_printf(&b, "],\"bytes\":%" PRIu64 ",\"trainable\":%s,\"pack\":", m->nbytes,
                         m->trainable ? "true" : "false");
        sr_strbuf_json_str(&b, m->pack);
        sr_strbuf_printf(&b, ",\"offset\":%" PRIu64 ",\"pos\":%d,\"created_step\":%" PRId64 "}",
                         m->offset, (int)m->pos, m->created_step);
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
               "bytes", "trainable", "added_at", "chunks", "slots");
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
    if (in->nmembers > 0) {
        /* A model declared as a whole: its tensors live in the packs above. */
        printf("\nmodel tensors (%zu, stored in the %s variables)\n", in->nmembers,
               SR_STORE_PACK_PREFIX "*");
        printf("  %-5s %-32s %-8s %-16s %14s %-9s %8s  %s\n", "pos", "name", "dtype", "shape",
               "bytes", "trainable", "added_at", "pack@offset");
    }
    for (size_t i = 0; i < in->nmembers; i++) {
        const sr_store_member *m = &in->members[i];
        sr_shape_format(m->ndim, m->shape, shape, sizeof(shape));
        printf("  %-5d %-32s %-8s %-16s %14" PRIu64 " %-9s %8" PRId64 "  %s@%" PRIu64 "\n",
               (int)m->pos, SR_ESC(m->name), sr_dtype_name(m->dtype), shape, m->nbytes,
               m->trainable ? "yes" : "no", m->created_step, SR_ESC(m->pack), m->offset);
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
    if (in->info.keep_every_steps > 0) {
        printf("\n  (the newest ones, and the first committed step of every %" PRId64
               " steps: --keep-every-steps)",
               in->info.keep_every_steps);
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

/*
 * export --format npz|safetensors: a step's tensors in files numpy and
 * PyTorch read directly.  Every variable's value is named as the variable,
 * each optimizer slot and EMA shadow "VAR/slot".  The tensors are read
 * through sr_store_read_tensor (every chunk checksum-verified) and held in
 * memory, then written to a temp file beside OUT that is fsync'd and linked
 * to OUT only when complete, so a failed export leaves no OUT behind.
 * Formats: docs/store.md, "Export".
 */

/* One tensor to write: a variable's value or one of its slots. */
typedef struct {
    char    *name; /* "VAR" or "VAR/slot", malloc'd */
    int      dtype;
    int      ndim;
    int64_t  shape[SR_MAX_NDIM];
    uint64_t nbytes;
    void    *data; /* nbytes, malloc'd */
} weight;

typedef struct {
    weight *w;
    size_t  n, cap;
    int64_t step; /* the step exported */
} weights;

static void
weights_free(weights *ws)
{
    for (size_t i = 0; i < ws->n; i++) {
        free(ws->w[i].name);
        free(ws->w[i].data);
    }
    free(ws->w);
}

/* Append the tensor NAME[/slot] (its bytes `data`, malloc'd, which ws then
 * owns; freed here on failure). */
static sr_err
weights_push(weights *ws, const char *name, const char *slot, int dtype, int ndim,
             const int64_t *shape, uint64_t nbytes, void *data)
{
    sr_strbuf   b;
    const char *full;
    weight      w;

    memset(&w, 0, sizeof(w));
    sr_strbuf_init(&b);
    sr_strbuf_printf(&b, "%s%s%s", name, slot[0] ? "/" : "", slot);
    if (sr_strbuf_result(&b, &full) != SR_OK || (w.name = strdup(full)) == NULL) {
        sr_strbuf_free(&b);
        free(data);
        return sr_fail(SR_ENOMEM, "export: name of '%s'", name);
    }
    sr_strbuf_free(&b);
    w.dtype = dtype;
    w.ndim = ndim;
    memcpy(w.shape, shape, sizeof(w.shape));
    w.nbytes = nbytes;
    w.data = data;
    if (ws->n == ws->cap) {
        size_t  cap = ws->cap ? ws->cap * 2 : 16;
        weight *p = realloc(ws->w, cap * sizeof(*p));
        if (p == NULL) {
            free(w.name);
            free(w.data);
            return sr_fail(SR_ENOMEM, "export: %zu tensors", cap);
        }
        ws->w = p;
        ws->cap = cap;
    }
    ws->w[ws->n++] = w;
    return SR_OK;
}

/* Variable v's tensor `slot` ("" = its value) at `step`, malloc'd into
 * *out; SR_ENOENT when it did not exist at that step. */
static sr_err
read_whole(sr_store *st, const sr_store_var *v, const char *slot, int64_t step, void **out)
{
    void  *data;
    sr_err rc;

    if (v->nbytes > SIZE_MAX || (data = malloc(v->nbytes ? (size_t)v->nbytes : 1)) == NULL) {
        return sr_fail(SR_ENOMEM, "export: %" PRIu64 " bytes for '%s'", v->nbytes, v->name);
    }
    if ((rc = sr_store_read_tensor(st, v->id, slot, step, data, (size_t)v->nbytes)) != SR_OK) {
        free(data);
        return rc;
    }
    *out = data;
    return SR_OK;
}

/* Read variable v's tensor `slot` at `step` into ws.  A pack's tensor is
 * written as its members instead (those declared by `at_step`, the step
 * exported), each the slice [offset, offset + nbytes) under its own name,
 * dtype and shape.  A tensor that did not exist at that step is left out. */
static sr_err
weights_add(sr_store *st, const sr_store_var *v, const char *slot, int64_t step, int64_t at_step,
            const sr_store_member *m, size_t nm, weights *ws)
{
    void  *data = NULL;
    sr_err rc = read_whole(st, v, slot, step, &data);

    if (rc == SR_ENOENT) {
        return SR_OK;
    }
    if (rc != SR_OK) {
        return rc;
    }
    if (!sr_store_is_pack_name(v->name)) {
        return weights_push(ws, v->name, slot, v->dtype, v->ndim, v->shape, v->nbytes, data);
    }
    for (size_t i = 0; i < nm && rc == SR_OK; i++) {
        if (strcmp(m[i].pack, v->name) != 0 || m[i].created_step > at_step) {
            continue;
        }
        if (m[i].offset > v->nbytes || m[i].nbytes > v->nbytes - m[i].offset) {
            rc = sr_fail(
                SR_ECORRUPT,
                "export: tensor '%s' is bytes %" PRIu64 "..%" PRIu64 " of '%s', which has %" PRIu64,
                SR_ESC(m[i].name), m[i].offset, m[i].offset + m[i].nbytes, v->name, v->nbytes);
            break;
        }
        void *part = malloc(m[i].nbytes ? (size_t)m[i].nbytes : 1);
        if (part == NULL) {
            rc = sr_fail(SR_ENOMEM, "export: %" PRIu64 " bytes for '%s'", m[i].nbytes,
                         SR_ESC(m[i].name));
            break;
        }
        memcpy(part, (const uint8_t *)data + m[i].offset, (size_t)m[i].nbytes);
        rc =
            weights_push(ws, m[i].name, slot, m[i].dtype, m[i].ndim, m[i].shape, m[i].nbytes, part);
    }
    free(data);
    return rc;
}

/* The retained step `step` (-1: the latest) must be restorable. */
static sr_err
weights_resolve_step(sr_store *st, int64_t step, int64_t *out, int *current)
{
    sr_store_info info;
    int64_t      *ckpts = NULL;
    size_t        n = 0;
    sr_err        rc;

    if ((rc = sr_store_get_info(st, &info)) != SR_OK) {
        return rc;
    }
    if (step < 0 || step == info.global_step) {
        *out = info.global_step;
        *current = 1;
        return SR_OK;
    }
    if ((rc = sr_store_list_checkpoints(st, &ckpts, &n)) != SR_OK) {
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        if (ckpts[i] == step) {
            free(ckpts);
            *out = step;
            *current = 0;
            return SR_OK;
        }
    }
    sr_strbuf b;
    sr_strbuf_init(&b);
    for (size_t i = 0; i < n; i++) {
        sr_strbuf_printf(&b, " %" PRId64, ckpts[i]);
    }
    const char *list = "";
    (void)sr_strbuf_result(&b, &list);
    rc = sr_fail(SR_ENOENT, "step %" PRId64 " is not retained (retained:%s)", step,
                 n ? list : " none");
    sr_strbuf_free(&b);
    free(ckpts);
    return rc;
}

static sr_err
weights_read(sr_store *st, int64_t step, weights *ws)
{
    sr_store_var    *vars = NULL;
    sr_store_member *mem = NULL;
    size_t           nvars = 0, nmem = 0;
    sr_err           rc;

    int current = 0;

    if ((rc = weights_resolve_step(st, step, &ws->step, &current)) != SR_OK ||
        (rc = sr_store_list_members(st, &mem, &nmem)) != SR_OK) {
        return rc;
    }
    if ((rc = sr_store_list_vars(st, &vars, &nvars)) != SR_OK) {
        free(mem);
        return rc;
    }
    /* The current step is the committed state itself (-1), which exists even
     * when checkpoints are sparse; an older step is read from its checkpoint. */
    int64_t at = current ? -1 : ws->step;
    for (size_t i = 0; i < nvars && rc == SR_OK; i++) {
        char **slots = NULL;
        size_t nslots = 0;
        if ((rc = weights_add(st, &vars[i], "", at, ws->step, mem, nmem, ws)) != SR_OK ||
            (rc = sr_store_list_slots(st, vars[i].id, &slots, &nslots)) != SR_OK) {
            break;
        }
        for (size_t k = 0; k < nslots && rc == SR_OK; k++) {
            rc = weights_add(st, &vars[i], slots[k], at, ws->step, mem, nmem, ws);
        }
        sr_store_free_names(slots, nslots);
    }
    free(vars);
    free(mem);
    for (size_t i = 0; i < ws->n && rc == SR_OK; i++) {
        for (size_t j = i + 1; j < ws->n; j++) {
            if (strcmp(ws->w[i].name, ws->w[j].name) == 0) {
                rc = sr_fail(SR_EEXIST,
                             "two tensors would be named '%s' (a variable or model tensor and "
                             "a slot)",
                             SR_ESC(ws->w[i].name));
                break;
            }
        }
    }
    return rc;
}

/* A fixed-width little-endian field. */
static void
put_le(uint8_t *p, uint64_t v, int nbytes)
{
    for (int i = 0; i < nbytes; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

/* CRC-32 (ISO-HDLC, zip's), table-driven. */
static uint32_t
crc32_update(const uint32_t table[256], uint32_t crc, const void *buf, size_t len)
{
    const uint8_t *p = buf;

    crc = ~crc;
    for (size_t i = 0; i < len; i++) {
        crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    }
    return ~crc;
}

static void
crc32_table(uint32_t table[256])
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
        }
        table[i] = c;
    }
}

static const char *
npy_descr(int dtype)
{
    return dtype == SR_FLOAT32   ? "<f4"
           : dtype == SR_FLOAT64 ? "<f8"
           : dtype == SR_INT32   ? "<i4"
                                 : "<i8";
}

static const char *
st_dtype(int dtype)
{
    return dtype == SR_FLOAT32   ? "F32"
           : dtype == SR_FLOAT64 ? "F64"
           : dtype == SR_INT32   ? "I32"
                                 : "I64";
}

/* The .npy header (format 1.0): magic, version, header length, the dict
 * padded with spaces to a multiple of 64 bytes and ended by '\n'. */
static sr_err
npy_header(const weight *w, sr_strbuf *out)
{
    sr_strbuf   d;
    const char *dict;
    uint8_t     pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};

    sr_strbuf_init(&d);
    sr_strbuf_printf(&d, "{'descr': '%s', 'fortran_order': False, 'shape': (", npy_descr(w->dtype));
    for (int i = 0; i < w->ndim; i++) {
        sr_strbuf_printf(&d, "%" PRId64 "%s", w->shape[i],
                         w->ndim == 1      ? ","
                         : i + 1 < w->ndim ? ", "
                                           : "");
    }
    sr_strbuf_printf(&d, "), }");
    if (sr_strbuf_result(&d, &dict) != SR_OK) {
        sr_strbuf_free(&d);
        return sr_fail(SR_ENOMEM, "export: npy header");
    }
    size_t len = strlen(dict), total = 10 + len + 1;
    size_t pad = (64 - total % 64) % 64;
    put_le(pre + 8, len + pad + 1, 2);
    sr_strbuf_append(out, (const char *)pre, sizeof(pre));
    sr_strbuf_append(out, dict, len);
    for (size_t i = 0; i < pad; i++) {
        sr_strbuf_append(out, " ", 1);
    }
    sr_strbuf_append(out, "\n", 1);
    sr_strbuf_free(&d);
    return SR_OK;
}

/* The length of the bytes a strbuf holds (it may hold NULs: the npy magic). */
static size_t
strbuf_len(const sr_strbuf *b)
{
    return b->len;
}

static sr_err
write_all(FILE *f, const void *p, size_t len, const char *path)
{
    if (len > 0 && fwrite(p, 1, len, f) != len) {
        return sr_fail(errno == ENOSPC ? SR_ENOSPC : SR_EACCES, "writing %s: %s", path,
                       strerror(errno));
    }
    return SR_OK;
}

#define ZIP_MAX 0xffffffffu /* without zip64: sizes and offsets are 32-bit */

/* A zip of stored (uncompressed) .npy entries, names UTF-8 (flag bit 11),
 * the time fixed at 1980-01-01 so the same step gives the same bytes. */
static sr_err
write_npz(FILE *f, const char *path, const weights *ws)
{
    uint32_t  table[256];
    sr_strbuf cd;
    uint64_t  off = 0;
    sr_err    rc = SR_OK;

    crc32_table(table);
    sr_strbuf_init(&cd);
    if (ws->n > 0xffff) {
        sr_strbuf_free(&cd);
        return sr_fail(SR_ENOTSUP,
                       "npz: %zu tensors need zip64, which syncrep does not write; "
                       "use --format safetensors",
                       ws->n);
    }
    for (size_t i = 0; i < ws->n && rc == SR_OK; i++) {
        const weight *w = &ws->w[i];
        sr_strbuf     h;
        char          entry[SR_STORE_MAX_NAME * 2 + 8];
        uint8_t       lh[30];

        snprintf(entry, sizeof(entry), "%s.npy", w->name);
        size_t nlen = strlen(entry);
        sr_strbuf_init(&h);
        if ((rc = npy_header(w, &h)) != SR_OK) {
            sr_strbuf_free(&h);
            break;
        }
        const char *hb;
        if ((rc = sr_strbuf_result(&h, &hb)) != SR_OK) {
            sr_strbuf_free(&h);
            break;
        }
        uint64_t size = strbuf_len(&h) + w->nbytes;
        if (size >= ZIP_MAX || off + 30 + nlen + size >= ZIP_MAX) {
            sr_strbuf_free(&h);
            rc = sr_fail(SR_ENOTSUP,
                         "npz: the export passes 4 GiB at '%s' and needs zip64, "
                         "which syncrep does not write; use --format safetensors",
                         SR_ESC(w->name));
            break;
        }
        uint32_t crc = crc32_update(table, 0, hb, strbuf_len(&h));
        crc = crc32_update(table, crc, w->data, (size_t)w->nbytes);
        put_le(lh, 0x04034b50u, 4);
        put_le(lh + 4, 20, 2);      /* version needed: 2.0 */
        put_le(lh + 6, 0x0800, 2);  /* UTF-8 names */
        put_le(lh + 8, 0, 2);       /* stored */
        put_le(lh + 10, 0, 2);      /* time 00:00:00 */
        put_le(lh + 12, 0x0021, 2); /* date 1980-01-01 */
        put_le(lh + 14, crc, 4);
        put_le(lh + 18, size, 4);
        put_le(lh + 22, size, 4);
        put_le(lh + 26, nlen, 2);
        put_le(lh + 28, 0, 2);
        /* The central directory entry repeats the local header's fields. */
        uint8_t ce[46];
        put_le(ce, 0x02014b50u, 4);
        put_le(ce + 4, (3u << 8) | 20, 2); /* made by: Unix, 2.0 */
        memcpy(ce + 6, lh + 4, 26);
        put_le(ce + 32, 0, 2); /* comment length */
        put_le(ce + 34, 0, 2); /* disk */
        put_le(ce + 36, 0, 2); /* internal attributes */
        put_le(ce + 38, 0100644u << 16, 4);
        put_le(ce + 42, off, 4);
        sr_strbuf_append(&cd, (const char *)ce, sizeof(ce));
        sr_strbuf_append(&cd, entry, nlen);
        if ((rc = write_all(f, lh, sizeof(lh), path)) == SR_OK &&
            (rc = write_all(f, entry, nlen, path)) == SR_OK &&
            (rc = write_all(f, hb, strbuf_len(&h), path)) == SR_OK) {
            rc = write_all(f, w->data, (size_t)w->nbytes, path);
        }
        off += 30 + nlen + size;
        sr_strbuf_free(&h);
    }
    if (rc == SR_OK) {
        const char *cb;
        uint8_t     eocd[22];
        if (sr_strbuf_result(&cd, &cb) != SR_OK) {
            sr_strbuf_free(&cd);
            return sr_fail(SR_ENOMEM, "npz: central directory");
        }
        if (off + strbuf_len(&cd) >= ZIP_MAX) {
            sr_strbuf_free(&cd);
            return sr_fail(SR_ENOTSUP, "npz: the export passes 4 GiB and needs zip64, which "
                                       "syncrep does not write; use --format safetensors");
        }
        put_le(eocd, 0x06054b50u, 4);
        put_le(eocd + 4, 0, 4); /* this disk, the directory's disk */
        put_le(eocd + 8, ws->n, 2);
        put_le(eocd + 10, ws->n, 2);
        put_le(eocd + 12, strbuf_len(&cd), 4);
        put_le(eocd + 16, off, 4);
        put_le(eocd + 20, 0, 2);
        if ((rc = write_all(f, cb, strbuf_len(&cd), path)) == SR_OK) {
            rc = write_all(f, eocd, sizeof(eocd), path);
        }
    }
    sr_strbuf_free(&cd);
    return rc;
}

/* safetensors: u64 LE header length, the JSON header (padded with spaces to
 * a multiple of 8), then the tensors' bytes back to back in header order. */
static sr_err
write_safetensors(FILE *f, const char *path, const weights *ws)
{
    sr_strbuf   h;
    const char *hb;
    uint64_t    off = 0;
    uint8_t     len8[8];
    sr_err      rc = SR_OK;

    sr_strbuf_init(&h);
    sr_strbuf_printf(&h,
                     "{\"__metadata__\":{\"format\":\"pt\",\"global_step\":\"%" PRId64
                     "\",\"writer\":\"syncrep store export\"}",
                     ws->step);
    for (size_t i = 0; i < ws->n; i++) {
        const weight *w = &ws->w[i];
        sr_strbuf_printf(&h, ",");
        sr_strbuf_json_str(&h, w->name);
        sr_strbuf_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype(w->dtype));
        for (int d = 0; d < w->ndim; d++) {
            sr_strbuf_printf(&h, "%s%" PRId64, d ? "," : "", w->shape[d]);
        }
        sr_strbuf_printf(&h, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", off, off + w->nbytes);
        off += w->nbytes;
    }
    sr_strbuf_printf(&h, "}");
    while (strbuf_len(&h) % 8 != 0) {
        sr_strbuf_append(&h, " ", 1);
    }
    if (sr_strbuf_result(&h, &hb) != SR_OK) {
        sr_strbuf_free(&h);
        return sr_fail(SR_ENOMEM, "safetensors: header");
    }
    put_le(len8, strbuf_len(&h), 8);
    if ((rc = write_all(f, len8, sizeof(len8), path)) == SR_OK) {
        rc = write_all(f, hb, strbuf_len(&h), path);
    }
    for (size_t i = 0; i < ws->n && rc == SR_OK; i++) {
        rc = write_all(f, ws->w[i].data, (size_t)ws->w[i].nbytes, path);
    }
    sr_strbuf_free(&h);
    return rc;
}

enum { FMT_STORE = 0, FMT_NPZ = 1, FMT_SAFETENSORS = 2 };

/* Write to a temp file beside `out`, fsync it, link it to `out` (which
 * must not exist: link refuses atomically), fsync the directory. */
static sr_err
weights_write(const char *out, int fmt, const weights *ws)
{
    size_t len = strlen(out);
    char  *tmp = malloc(len + 16), *dir = NULL;
    FILE  *f = NULL;
    int    fd = -1;
    sr_err rc;

    if (tmp == NULL) {
        return sr_fail(SR_ENOMEM, "export: temp path");
    }
    snprintf(tmp, len + 16, "%s.tmp.XXXXXX", out);
    if (access(out, F_OK) == 0) {
        free(tmp);
        return sr_fail(SR_EEXIST, "%s already exists", out);
    }
    if ((fd = mkstemp(tmp)) < 0) {
        rc = sr_fail(errno == ENOSPC   ? SR_ENOSPC
                     : errno == ENOENT ? SR_ENOENT
                                       : SR_EACCES,
                     "cannot create %s: %s", out, strerror(errno));
        free(tmp);
        return rc;
    }
    if ((f = fdopen(fd, "wb")) == NULL) {
        rc = sr_fail(SR_ENOMEM, "fdopen %s: %s", tmp, strerror(errno));
        close(fd);
        goto fail;
    }
    rc = fmt == FMT_NPZ ? write_npz(f, out, ws) : write_safetensors(f, out, ws);
    if (rc != SR_OK) {
        goto fail;
    }
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        rc = sr_fail(errno == ENOSPC ? SR_ENOSPC : SR_EACCES, "writing %s: %s", out,
                     strerror(errno));
        goto fail;
    }
    if (fclose(f) != 0) {
        f = NULL;
        rc = sr_fail(SR_EACCES, "closing %s: %s", out, strerror(errno));
        goto fail;
    }
    f = NULL;
    if (link(tmp, out) != 0) {
        rc = sr_fail(errno == EEXIST ? SR_EEXIST : SR_EACCES, "cannot create %s: %s", out,
                     strerror(errno));
        goto fail;
    }
    unlink(tmp);
    if ((dir = strdup(out)) != NULL) {
        int dfd = open(dirname(dir), O_RDONLY);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
    }
    free(dir);
    free(tmp);
    return SR_OK;
fail:
    if (f != NULL) {
        fclose(f);
    }
    unlink(tmp);
    free(tmp);
    return rc;
}

static sr_err
export_weights(sr_store *st, int64_t step, int fmt, const char *out, int64_t *exported)
{
    weights ws;
    sr_err  rc;

    memset(&ws, 0, sizeof(ws));
    if ((rc = weights_read(st, step, &ws)) == SR_OK &&
        (rc = weights_write(out, fmt, &ws)) == SR_OK) {
        *exported = ws.step;
    }
    weights_free(&ws);
    return rc;
}

static int
cmd_export(int argc, char **argv)
{
    const char *path = NULL, *out = NULL;
    long long   step = -1;
    int         fmt = FMT_STORE;
    int64_t     exported = -1;
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
        } else if (strcmp(argv[i], "--format") == 0) {
            const char *v = i + 1 < argc ? argv[i + 1] : "";
            if (strcmp(v, "store") == 0) {
                fmt = FMT_STORE;
            } else if (strcmp(v, "npz") == 0) {
                fmt = FMT_NPZ;
            } else if (strcmp(v, "safetensors") == 0) {
                fmt = FMT_SAFETENSORS;
            } else {
                return sr_args_usage_error("store export",
                                           "--format needs store, npz or safetensors");
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
    if (fmt == FMT_STORE) {
        rc = sr_store_export(st, out, (int64_t)step);
    } else {
        rc = export_weights(st, (int64_t)step, fmt, out, &exported);
    }
    sr_store_close(st);
    if (rc != SR_OK) {
        return failed("export", rc);
    }
    if (fmt != FMT_STORE) {
        printf("exported %s to %s (%s) at step %" PRId64 "\n", path, out,
               fmt == FMT_NPZ ? "npz" : "safetensors", exported);
    } else if (step >= 0) {
        printf("exported %s to %s at step %lld\n", path, out, step);
    } else {
        printf("exported %s to %s\n", path, out);
    }
    return 0;
}

/* The store at path opened read-write under its writer lock (*lock),
 * for cmd; 0, or the exit code of the refusal. */
static int
open_locked(const char *cmd, const char *path, sr_store **st, int *lock)
{
    sr_store_opts o;
    sr_err        rc;

    if (access(path, F_OK) != 0) {
        fprintf(stderr, "syncrep store %s: %s: %s\n", cmd, path, strerror(errno));
        return 1;
    }
    if ((rc = sr__coord_lock_store(path, lock)) != SR_OK) {
        fprintf(stderr, "syncrep store %s: %s: %s (stop it first)\n", cmd, sr_strerror(rc),
                sr_errdetail());
        return 1;
    }
    memset(&o, 0, sizeof(o));
    if ((rc = sr_store_open(path, &o, st)) != SR_OK) {
        sr__coord_unlock_store(*lock);
        *lock = -1;
        return failed(cmd, rc);
    }
    return 0;
}

/* `store vacuum PATH` (issue 22): under the writer lock. */
static int
cmd_vacuum(int argc, char **argv)
{
    const char *path = NULL;
    sr_store   *st = NULL;
    int         lock = -1, x;
    int64_t     before = 0, after = 0;

    for (int i = 1; i < argc; i++) {
        if (wants_help(argv[i])) {
            fputs(vacuum_usage, stdout);
            return 0;
        }
        if (argv[i][0] == '-' || path != NULL) {
            return sr_args_usage_error("store vacuum", "unexpected argument '%s'", argv[i]);
        }
        path = argv[i];
    }
    if (path == NULL) {
        return sr_args_usage_error("store vacuum", "PATH is required");
    }
    if ((x = open_locked("vacuum", path, &st, &lock)) != 0) {
        return x;
    }
    sr_err rc = sr_store_vacuum(st, &before, &after);
    if (rc == SR_OK) {
        printf("vacuumed %s: %" PRId64 " bytes before, %" PRId64 " after (file and -wal)\n", path,
               before, after);
    }
    sr_store_close(st);
    sr__coord_unlock_store(lock);
    return rc == SR_OK ? 0 : failed("vacuum", rc);
}

/* `store drop-variable PATH NAME` (issue 22): under the writer lock. */
static int
cmd_drop_variable(int argc, char **argv)
{
    const char   *path = NULL, *name = NULL;
    sr_store_opts o;
    sr_store     *st = NULL;
    sr_store_var  v;
    char          shape[128];
    int           lock = -1;
    sr_err        rc;

    for (int i = 1; i < argc; i++) {
        if (wants_help(argv[i])) {
            fputs(drop_usage, stdout);
            return 0;
        }
        if (argv[i][0] == '-') {
            return sr_args_usage_error("store drop-variable", "unknown option '%s'", argv[i]);
        }
        if (path == NULL) {
            path = argv[i];
        } else if (name == NULL) {
            name = argv[i];
        } else {
            return sr_args_usage_error("store drop-variable", "unexpected argument '%s'", argv[i]);
        }
    }
    if (path == NULL || name == NULL) {
        return sr_args_usage_error("store drop-variable", "PATH and NAME are required");
    }
    if (access(path, F_OK) != 0) {
        fprintf(stderr, "syncrep store drop-variable: %s: %s\n", path, strerror(errno));
        return 1;
    }
    if ((rc = sr__coord_lock_store(path, &lock)) != SR_OK) {
        fprintf(stderr, "syncrep store drop-variable: %s: %s (stop it first)\n", sr_strerror(rc),
                sr_errdetail());
        return 1;
    }
    memset(&o, 0, sizeof(o));
    if ((rc = sr_store_open(path, &o, &st)) == SR_OK) {
        rc = sr_store_drop_variable(st, name, &v);
    }
    if (rc == SR_OK) {
        sr_shape_format(v.ndim, v.shape, shape, sizeof(shape));
        printf("dropped variable '%s' (%s %s, added at step %" PRId64 ") from %s\n", SR_ESC(v.name),
               sr_dtype_name(v.dtype), shape, v.created_step, path);
    }
    sr_store_close(st);
    sr__coord_unlock_store(lock);
    return rc == SR_OK ? 0 : failed("drop-variable", rc);
}

int
sr__cli_store(int argc, char **argv)
{
    if (argc < 2) {
        return sr_args_usage_error(
            "store", "missing subcommand (inspect|verify|export|drop-variable|vacuum)");
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
    if (strcmp(argv[1], "vacuum") == 0) {
        return cmd_vacuum(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "drop-variable") == 0) {
        return cmd_drop_variable(argc - 1, argv + 1);
    }
    return sr_args_usage_error("store", "unknown subcommand '%s'", argv[1]);
}
