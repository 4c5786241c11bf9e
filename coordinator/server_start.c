/*
 * Start-up and shutdown: an empty coordinator with the real I/O
 * (sr__coord_init), the store locked, opened and checked against the
 * options (sr__coord_open_store, nothing written yet), the socket bound
 * (sr__coord_open_socket), then the incarnation begun, the rewind asked for
 * and the model loaded (sr__coord_start); sr__coord_free releases all of
 * it.  A start refused before sr__coord_start leaves the store as it was.
 * Before all of it, sr_coord_resolve_opts merges the job's recipe the store
 * recorded (optimizer, learning rate, ...) into the options and refuses a
 * silent change of it; sr__coord_start records the recipe in force.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coordinator/exclusive.h"
#include "coordinator/lr_schedule.h"
#include "coordinator/server_int.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/strbuf.h"
#include "core/text.h"

/* --resume-from-step S: S must be a retained checkpoint.  Checked before
 * anything is written (a new incarnation included), so a refused start
 * changes nothing; the message lists the steps there are. */
static sr_err
check_resume_step(coord *c, int64_t step)
{
    int64_t *steps = NULL;
    size_t   n = 0, len = 0;
    char     have[256] = "none";
    sr_err   rc = sr_store_list_checkpoints(c->st, &steps, &n);

    for (size_t i = 0; rc == SR_OK && i < n; i++) {
        if (steps[i] == step) {
            free(steps);
            return SR_OK;
        }
        if (len < sizeof(have)) { /* snprintf truncates what does not fit */
            len += (size_t)snprintf(have + len, sizeof(have) - len, "%s%" PRId64, i ? " " : "",
                                    steps[i]);
        }
    }
    free(steps);
    return rc != SR_OK ? rc
                       : sr_fail(SR_ENOENT,
                                 "%s: step %" PRId64 " is not a retained checkpoint (retained: %s)",
                                 c->o->store_path, step, have);
}

/* A double as the shortest of %.15g/%.17g that reads back as the same
 * value: "0.1", not "0.10000000000000001". */
static void
fmt_num(char *out, size_t cap, double v)
{
    snprintf(out, cap, "%.15g", v);
    if (strtod(out, NULL) != v) {
        snprintf(out, cap, "%.17g", v);
    }
}

/* The value of "key" in the flat JSON object the coordinator stores (its
 * own writing: no nesting, no escapes in the values it reads back) as
 * text: a string without its quotes, a number or true/false.  0 when the
 * key is absent (a store written before the key was). */
static int
cfg_get(const char *json, const char *key, char *out, size_t cap)
{
    char        pat[64];
    const char *p;
    size_t      n = 0;

    snprintf(pat, sizeof(pat), "\"%s\":", key);
    if ((p = strstr(json, pat)) == NULL) {
        return 0;
    }
    p += strlen(pat);
    if (*p == '"') {
        for (p++; p[n] != '\0' && p[n] != '"'; n++) {
        }
    } else {
        for (; p[n] != '\0' && p[n] != ',' && p[n] != '}'; n++) {
        }
    }
    if (n == 0 || n >= cap) {
        return 0;
    }
    memcpy(out, p, n);
    out[n] = '\0';
    return 1;
}

/* The recipe options: the name on the command line, the key in the stored
 * config, and the bit in sr_coord_opts.given. */
enum {
    RC_OPTIMIZER,
    RC_LR,
    RC_MOMENTUM,
    RC_BETA1,
    RC_BETA2,
    RC_EPSILON,
    RC_EMA,
    RC_SPARSE,
    RC_NONFINITE,
    RC_PARTITION,
    /* issue 25 */
    RC_NESTEROV,
    RC_WEIGHT_DECAY,
    RC_LR_SCHEDULE,
    RC_WARMUP,
    RC_DECAY_STEPS,
    RC_LR_MIN,
    RC_STEP_EVERY,
    RC_STEP_GAMMA,
    RC_CLIP_NORM,
    RC_COUNT
};
static const struct {
    const char *opt, *key;
    unsigned    bit;
} recipe[RC_COUNT] = {
    {"--optimizer", "optimizer", SR_COORD_GIVEN_OPTIMIZER},
    {"--learning-rate", "learning_rate", SR_COORD_GIVEN_LR},
    {"--momentum", "momentum", SR_COORD_GIVEN_MOMENTUM},
    {"--beta1", "beta1", SR_COORD_GIVEN_BETA1},
    {"--beta2", "beta2", SR_COORD_GIVEN_BETA2},
    {"--epsilon", "epsilon", SR_COORD_GIVEN_EPSILON},
    {"--ema-decay", "ema_decay", SR_COORD_GIVEN_EMA},
    {"--sparse-mean", "sparse_mean", SR_COORD_GIVEN_SPARSE_MEAN},
    {"--nonfinite", "nonfinite", SR_COORD_GIVEN_NONFINITE},
    {"--partition-bytes", "partition_bytes", SR_COORD_GIVEN_PARTITION},
    {"--nesterov", "nesterov", SR_COORD_GIVEN_NESTEROV},
    {"--weight-decay", "weight_decay", SR_COORD_GIVEN_WEIGHT_DECAY},
    {"--lr-schedule", "lr_schedule", SR_COORD_GIVEN_LR_SCHEDULE},
    {"--warmup-steps", "warmup_steps", SR_COORD_GIVEN_WARMUP},
    {"--decay-steps", "decay_steps", SR_COORD_GIVEN_DECAY_STEPS},
    {"--lr-min", "lr_min", SR_COORD_GIVEN_LR_MIN},
    {"--step-every", "step_every", SR_COORD_GIVEN_STEP_EVERY},
    {"--step-gamma", "step_gamma", SR_COORD_GIVEN_STEP_GAMMA},
    {"--clip-norm", "clip_norm", SR_COORD_GIVEN_CLIP_NORM},
};

/* 1 for the recipe options stored as JSON strings, 0 for numbers. */
static int
recipe_is_text(int i)
{
    return i == RC_OPTIMIZER || i == RC_EMA || i == RC_SPARSE || i == RC_NONFINITE ||
           i == RC_NESTEROV || i == RC_LR_SCHEDULE;
}

/* Recipe option i of o as the text the stored config holds. */
static void
recipe_text(const sr_coord_opts *o, int i, char *out, size_t cap)
{
    switch (i) {
    case RC_OPTIMIZER:
        snprintf(out, cap, "%s", sr__optim_name(o->optim.kind));
        break;
    case RC_LR:
        fmt_num(out, cap, o->optim.lr);
        break;
    case RC_MOMENTUM:
        fmt_num(out, cap, o->optim.momentum);
        break;
    case RC_BETA1:
        fmt_num(out, cap, o->optim.beta1);
        break;
    case RC_BETA2:
        fmt_num(out, cap, o->optim.beta2);
        break;
    case RC_EPSILON:
        fmt_num(out, cap, o->optim.epsilon);
        break;
    case RC_EMA:
        if (o->optim.ema) {
            fmt_num(out, cap, o->optim.ema_decay);
        } else {
            snprintf(out, cap, "off");
        }
        break;
    case RC_SPARSE:
        snprintf(out, cap, "%s",
                 o->optim.sparse_mean == SR_SPARSE_MEAN_PER_REPLICA ? "per-replica" : "per-row");
        break;
    case RC_NONFINITE:
        snprintf(out, cap, "%s", o->nonfinite_allow ? "allow" : "reject");
        break;
    case RC_NESTEROV:
        snprintf(out, cap, "%s", o->optim.nesterov ? "on" : "off");
        break;
    case RC_WEIGHT_DECAY:
        fmt_num(out, cap, o->optim.weight_decay);
        break;
    case RC_LR_SCHEDULE:
        snprintf(out, cap, "%s", sr__lr_name(o->optim.lr_schedule));
        break;
    case RC_WARMUP:
        snprintf(out, cap, "%" PRId64, o->optim.warmup_steps);
        break;
    case RC_DECAY_STEPS:
        snprintf(out, cap, "%" PRId64, o->optim.decay_steps);
        break;
    case RC_LR_MIN:
        fmt_num(out, cap, o->optim.lr_min);
        break;
    case RC_STEP_EVERY:
        snprintf(out, cap, "%" PRId64, o->optim.step_every);
        break;
    case RC_STEP_GAMMA:
        fmt_num(out, cap, o->optim.step_gamma);
        break;
    case RC_CLIP_NORM:
        fmt_num(out, cap, o->optim.clip_norm);
        break;
    default:
        snprintf(out, cap, "%" PRIu64, o->partition_bytes);
        break;
    }
}

/* Set recipe option i of o from its stored text; SR_ECORRUPT when the
 * text is not one this coordinator writes. */
static sr_err
recipe_apply(sr_coord_opts *o, int i, const char *text)
{
    char  *end = NULL;
    double d = strtod(text, &end);
    int    num = end != text && *end == '\0';

    switch (i) {
    case RC_OPTIMIZER:
        return sr__optim_parse(text, &o->optim.kind) == SR_OK
                   ? SR_OK
                   : sr_fail(SR_ECORRUPT, "stored optimizer \"%s\" is unknown", SR_ESC(text));
    case RC_EMA:
        o->optim.ema = strcmp(text, "off") != 0;
        if (o->optim.ema && !num) {
            break;
        }
        if (o->optim.ema) {
            o->optim.ema_decay = d;
        }
        return SR_OK;
    case RC_SPARSE:
        o->optim.sparse_mean =
            strcmp(text, "per-replica") == 0 ? SR_SPARSE_MEAN_PER_REPLICA : SR_SPARSE_MEAN_PER_ROW;
        return SR_OK;
    case RC_NONFINITE:
        o->nonfinite_allow = strcmp(text, "allow") == 0;
        return SR_OK;
    case RC_NESTEROV:
        o->optim.nesterov = strcmp(text, "on") == 0;
        return SR_OK;
    case RC_LR_SCHEDULE:
        return sr__lr_parse(text, &o->optim.lr_schedule) == SR_OK
                   ? SR_OK
                   : sr_fail(SR_ECORRUPT, "stored lr_schedule \"%s\" is unknown", SR_ESC(text));
    default:
        if (!num) {
            break;
        }
        if (i == RC_LR) {
            o->optim.lr = d;
        } else if (i == RC_MOMENTUM) {
            o->optim.momentum = d;
        } else if (i == RC_BETA1) {
            o->optim.beta1 = d;
        } else if (i == RC_BETA2) {
            o->optim.beta2 = d;
        } else if (i == RC_EPSILON) {
            o->optim.epsilon = d;
        } else if (i == RC_WEIGHT_DECAY) {
            o->optim.weight_decay = d;
        } else if (i == RC_WARMUP) {
            o->optim.warmup_steps = (int64_t)d;
        } else if (i == RC_DECAY_STEPS) {
            o->optim.decay_steps = (int64_t)d;
        } else if (i == RC_LR_MIN) {
            o->optim.lr_min = d;
        } else if (i == RC_STEP_EVERY) {
            o->optim.step_every = (int64_t)d;
        } else if (i == RC_STEP_GAMMA) {
            o->optim.step_gamma = d;
        } else if (i == RC_CLIP_NORM) {
            o->optim.clip_norm = d;
        } else {
            o->partition_bytes = (uint64_t)d;
        }
        return SR_OK;
    }
    return sr_fail(SR_ECORRUPT, "stored %s \"%s\" is not a value", recipe[i].key, SR_ESC(text));
}

/* The stored config text of the store at o->store_path into *cfg
 * (malloc'd; "" for none), or *cfg NULL when there is none to read: the
 * store is absent.  An error when it exists but cannot be read without
 * changing it: held by another coordinator, refused by sr_store_open (the
 * same refusal sr_coord_run would give).  Nothing is written. */
static sr_err
read_stored_config(const sr_coord_opts *o, char **cfg)
{
    sr_store_opts so;
    sr_store     *st = NULL;
    int           fd = -1;
    sr_err        rc;

    *cfg = NULL;
    if (access(o->store_path, F_OK) != 0) {
        return SR_OK;
    }
    if ((rc = sr__coord_lock_store(o->store_path, &fd)) != SR_OK) {
        return rc;
    }
    /* Opened as sr__coord_open_store will (a read-only handle would make
     * an empty -wal beside a store whose -wal is lost, hiding the loss). */
    sr__coord_store_opts(o, &so);
    so.create = 0;
    so.accept_rollback = o->accept_rollback;
    if ((rc = sr_store_open(o->store_path, &so, &st)) == SR_OK) {
        rc = sr_store_get_config(st, cfg);
    }
    sr_store_close(st);
    sr__coord_unlock_store(fd);
    return rc;
}

/* Options the optimizer in o does not use, given anyway. */
static sr_err
check_recipe_consistent(const sr_coord_opts *o)
{
    const char *kind = sr__optim_name(o->optim.kind);

    if ((o->given & SR_COORD_GIVEN_MOMENTUM) && o->optim.kind != SR_OPT_MOMENTUM) {
        return sr_fail(SR_EINVAL,
                       "--momentum applies to --optimizer momentum only (the optimizer "
                       "is %s)",
                       kind);
    }
    for (int i = RC_BETA1; i <= RC_EPSILON; i++) {
        if ((o->given & recipe[i].bit) && o->optim.kind != SR_OPT_ADAM &&
            o->optim.kind != SR_OPT_ADAMW) {
            return sr_fail(SR_EINVAL,
                           "%s applies to --optimizer adam and adamw only (the optimizer is %s)",
                           recipe[i].opt, kind);
        }
    }
    /* issue 25: schedule options the schedule does not use. */
    const char *sched = sr__lr_name(o->optim.lr_schedule);
    int decays = o->optim.lr_schedule == SR_LR_COSINE || o->optim.lr_schedule == SR_LR_LINEAR;
    for (int i = RC_DECAY_STEPS; i <= RC_STEP_GAMMA; i++) {
        int step_opt = i == RC_STEP_EVERY || i == RC_STEP_GAMMA;
        if ((o->given & recipe[i].bit) &&
            (step_opt ? o->optim.lr_schedule != SR_LR_STEP : !decays)) {
            return sr_fail(SR_EINVAL, "%s applies to --lr-schedule %s only (the schedule is %s)",
                           recipe[i].opt, step_opt ? "step" : "cosine or linear", sched);
        }
    }
    return sr__optim_check(&o->optim);
}

/* issue 25: adamw's weight decay is torch.optim.AdamW's 0.01 unless given
 * or stored (`stored`: the store's recipe records one). */
static void
adamw_default(sr_coord_opts *o, int stored)
{
    if (o->optim.kind == SR_OPT_ADAMW && !(o->given & SR_COORD_GIVEN_WEIGHT_DECAY) && !stored) {
        o->optim.weight_decay = 0.01;
    }
}

/* issue 25: the formula the store's adam was trained with (its recipe's
 * "optim_formula"; a store without it but with issue 25's "weight_decay"
 * was written by formula 2, one without either by formula 1, TensorFlow's
 * epsilon).  Continuing an adam store of an older formula changes every
 * update by the order of --epsilon: refused unless --reconfigure, which
 * records it.  *len: the length of o->reconfigured so far. */
static sr_err
check_formula(sr_coord_opts *o, const char *cfg, size_t *len)
{
    char have[64];
    long stored = cfg_get(cfg, "optim_formula", have, sizeof(have))  ? strtol(have, NULL, 10)
                  : cfg_get(cfg, "weight_decay", have, sizeof(have)) ? 2
                                                                     : 1;

    if (stored >= SR_OPTIM_FORMULA || o->optim.kind != SR_OPT_ADAM ||
        !cfg_get(cfg, "optimizer", have, sizeof(have)) || strcmp(have, "adam") != 0) {
        return SR_OK; /* sgd's and momentum's formulas did not change */
    }
    if (!o->reconfigure) {
        return sr_fail(SR_EINVAL,
                       "%s: the store's adam was trained with syncrep's formula %ld (epsilon "
                       "outside the bias correction, as TensorFlow); this coordinator applies "
                       "formula %d (torch.optim.Adam's), which changes every update by the order "
                       "of --epsilon (add --reconfigure to go on with it, recorded; "
                       "docs/optimizers.md)",
                       o->store_path, stored, SR_OPTIM_FORMULA);
    }
    if (*len < sizeof(o->reconfigured)) {
        *len +=
            (size_t)snprintf(o->reconfigured + *len, sizeof(o->reconfigured) - *len,
                             "%soptim_formula %ld->%d", *len ? " " : "", stored, SR_OPTIM_FORMULA);
    }
    return SR_OK;
}

sr_err
sr_coord_resolve_opts(sr_coord_opts *o)
{
    char  *cfg;
    char   have[64], want[64];
    size_t len = 0;
    sr_err rc = SR_OK;

    int stored_wd = 0;

    o->reconfigured[0] = '\0';
    if (o->store_path == NULL) {
        adamw_default(o, 0);
        return check_recipe_consistent(o);
    }
    if ((rc = read_stored_config(o, &cfg)) != SR_OK) {
        /* Without the store's learning rate the start cannot go on; with
         * one given, sr_coord_run refuses it, logging why. */
        adamw_default(o, 0);
        return !(o->given & SR_COORD_GIVEN_LR) ? rc : check_recipe_consistent(o);
    }
    if (cfg == NULL) {
        adamw_default(o, 0);
        return check_recipe_consistent(o);
    }
    for (int i = 0; i < RC_COUNT && rc == SR_OK; i++) {
        if (!cfg_get(cfg, recipe[i].key, have, sizeof(have))) {
            continue; /* a store from before the option was kept, or a new one */
        }
        stored_wd |= i == RC_WEIGHT_DECAY;
        recipe_text(o, i, want, sizeof(want));
        char  *end = NULL;
        double d = strtod(have, &end);
        if (end != have && *end == '\0') {
            fmt_num(have, sizeof(have), d); /* an older store's %.17g */
        }
        if (strcmp(have, want) == 0) {
            continue;
        }
        if (!(o->given & recipe[i].bit)) {
            rc = recipe_apply(o, i, have);
        } else if (!o->reconfigure) {
            rc = sr_fail(SR_EINVAL,
                         "%s: the store's job was trained with %s %s, given %s %s (restart "
                         "without %s to keep it, or add --reconfigure to change it)",
                         o->store_path, recipe[i].opt, SR_ESC(have), recipe[i].opt, want,
                         recipe[i].opt);
        } else if (len < sizeof(o->reconfigured)) {
            len += (size_t)snprintf(o->reconfigured + len, sizeof(o->reconfigured) - len,
                                    "%s%s %s->%s", len ? " " : "", recipe[i].key, have, want);
        }
    }
    if (rc == SR_OK) {
        rc = check_formula(o, cfg, &len);
    }
    free(cfg);
    adamw_default(o, stored_wd);
    return rc != SR_OK ? rc : check_recipe_consistent(o);
}

/* Lock and open the store, check what the options ask of it, and note the
 * largest variable (the socket's message limit): nothing written yet but a
 * new store's empty schema. */
sr_err
sr__coord_open_store(coord *c)
{
    sr_store_opts        so;
    sr_store_var        *metas = NULL;
    size_t               n = 0;
    sr_err               rc;
    const sr_coord_opts *o = c->o;

    if (o->keep_every_steps < -1) {
        return sr_fail(SR_EINVAL, "--keep-every-steps %lld: must be 0 (none) or more",
                       (long long)o->keep_every_steps);
    }
    sr__coord_store_opts(o, &so);
    so.create = 1;
    /* A store behind its mark is refused here, before anything is written,
     * unless the operator accepted it (recorded by sr__coord_start). */
    so.accept_rollback = o->accept_rollback;
    if ((rc = sr__coord_lock_store(o->store_path, &c->lock_fd)) != SR_OK ||
        (rc = sr_store_open(o->store_path, &so, &c->st)) != SR_OK) {
        return rc;
    }
    if (o->resume_from_step >= 0 && (rc = check_resume_step(c, o->resume_from_step)) != SR_OK) {
        return rc;
    }
    if ((rc = sr_store_list_vars(c->st, &metas, &n)) != SR_OK) {
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        c->largest_var = metas[i].nbytes > c->largest_var ? metas[i].nbytes : c->largest_var;
    }
    free(metas);
    return SR_OK;
}

/* The store opened and the socket bound: a new incarnation, the rewind
 * asked for, the model loaded. */
/* The model failed its checksums at load (the detail says where): say
 * which retained steps are intact, the ones --resume-from-step can
 * restore.  Nothing is served from a corrupt step. */
static void
log_intact_steps(coord *c)
{
    char        why[1024];
    int64_t    *steps = NULL;
    size_t      n = 0;
    sr_strbuf   b;
    const char *text = NULL;

    snprintf(why, sizeof(why), "%s", sr_errdetail());
    sr_strbuf_init(&b);
    if (sr_store_intact_steps(c->st, &steps, &n) == SR_OK) {
        for (size_t i = 0; i < n; i++) {
            sr_strbuf_printf(&b, "%s%" PRId64, i ? "," : "", steps[i]);
        }
    }
    if (sr_strbuf_result(&b, &text) != SR_OK || n == 0) {
        text = "none";
    }
    SR_LOG(SR_LOG_ERR, "COORD-CORRUPT",
           "the store's latest step fails its checksums; intact retained steps: %s (restart "
           "with --resume-from-step S on one of them, or restore the store from a copy)",
           text);
    sr_fail(SR_ECORRUPT, "%s; intact retained steps: %s", why, text);
    free(steps);
    sr_strbuf_free(&b);
}

sr_err
sr__coord_start(coord *c)
{
    sr_store_info        info;
    sr_strbuf            cfg;
    const char          *cfg_text;
    sr_err               rc;
    const sr_coord_opts *o = c->o;

    /* The new incarnation first, so a rewind is recorded as its own (and an
     * accepted rollback, in the same transaction). */
    sr_store_rollback rb;
    if ((rc = sr__coord_ctl_open(c)) != SR_OK) { /* issue 26: --admin-keys */
        return rc;
    }
    if ((rc = sr_store_new_incarnation(c->st, &c->incarnation)) != SR_OK ||
        (rc = sr_store_get_rollback(c->st, &rb)) != SR_OK) {
        return rc;
    }
    if (rb.behind) {
        SR_LOG(SR_LOG_WARN, "COORD-ROLLBACK-ACCEPTED",
               "store=%s incarnation=%" PRIu64 " mark_step=%" PRId64 " store_step=%" PRId64
               " cause=\"%s\"",
               o->store_path, c->incarnation, rb.mark_step, rb.store_step, rb.cause);
    }
    if (o->resume_from_step >= 0) {
        sr_store_info before;
        if ((rc = sr_store_get_info(c->st, &before)) != SR_OK ||
            (rc = sr_store_rewind(c->st, o->resume_from_step)) != SR_OK) {
            return rc;
        }
        SR_LOG(SR_LOG_NOTICE, "COORD-REWIND",
               "store=%s incarnation=%" PRIu64 " from_step=%" PRId64 " to_step=%" PRId64,
               o->store_path, c->incarnation, before.global_step, o->resume_from_step);
    }
    if ((rc = sr_store_get_info(c->st, &info)) != SR_OK) {
        return rc;
    }
    c->global_step = info.global_step;
    c->committed_step = info.global_step;
    c->restored_step = info.global_step;
    sr__coord_ckpt_init(c); /* issue 28: the restored step counts as committed */
    sr_strbuf_init(&cfg);
    sr_strbuf_printf(&cfg,
                     "{\"replicas_to_aggregate\":%d,\"total_replicas\":%d,"
                     "\"checkpoint_every_steps\":%d,\"step_log\":%s,\"commit\":\"%s\","
                     "\"sync\":\"%s\"",
                     o->R, o->N, o->checkpoint_every, o->step_log ? "true" : "false",
                     o->commit_async ? "async" : "sync", o->sync_normal ? "normal" : "full");
    sr_strbuf_printf(&cfg, ",\"optim_formula\":%d", SR_OPTIM_FORMULA); /* issue 25 */
    /* issue 28: operational, like --checkpoint-every-steps: recorded, free
     * to change on a restart (not part of the recipe). */
    sr_strbuf_printf(&cfg,
                     ",\"checkpoint_budget_pct\":%g,\"checkpoint_max_steps\":%" PRId64
                     ",\"checkpoint_max_seconds\":%g",
                     o->checkpoint_budget_pct, o->checkpoint_max_steps, o->checkpoint_max_seconds);
    /* The recipe, read back by the next start (sr_coord_resolve_opts). */
    for (int i = 0; i < RC_COUNT; i++) {
        char v[64];
        recipe_text(o, i, v, sizeof(v));
        if (recipe_is_text(i)) {
            sr_strbuf_printf(&cfg, ",\"%s\":\"%s\"", recipe[i].key, v);
        } else {
            sr_strbuf_printf(&cfg, ",\"%s\":%s", recipe[i].key, v);
        }
    }
    if (o->reconfigured[0] != '\0') {
        SR_LOG(SR_LOG_WARN, "COORD-RECONFIGURE", "store=%s incarnation=%" PRIu64 " changed=\"%s\"",
               o->store_path, c->incarnation, SR_ESC(o->reconfigured));
        /* The old values are the store's text: escaped, whatever it held. */
        sr_strbuf_printf(&cfg, ",\"reconfigured\":");
        sr_strbuf_json_str(&cfg, o->reconfigured);
    }
    sr_strbuf_printf(&cfg, "}");
    rc = sr_strbuf_result(&cfg, &cfg_text);
    if (rc == SR_OK) {
        rc = sr_store_set_config(c->st, cfg_text);
    }
    sr_strbuf_free(&cfg);
    if (rc == SR_OK) {
        rc = sr__coord_ctl_restore(c); /* issue 26: changes made by ctl */
    }
    if (rc == SR_OK && (rc = sr__coord_load_model(c)) == SR_ECORRUPT) {
        log_intact_steps(c);
    }
    if (rc != SR_OK) {
        return rc;
    }
    SR_LOG(SR_LOG_NOTICE, "COORD-START",
           "store=%s incarnation=%" PRIu64 " restored_step=%" PRId64 " variables=%zu ready=%d "
           "R=%d N=%d optimizer=%s lr_schedule=%s lr=%.9g keep_checkpoints=%d "
           "keep_every_steps=%" PRId64 " checkpoint=%s checkpoint_every_steps=%d "
           "checkpoint_budget_pct=%g checkpoint_max_steps=%" PRId64
           " checkpoint_max_seconds=%g commit=%s",
           o->store_path, c->incarnation, c->global_step, c->nvars, info.model_ready, o->R, o->N,
           sr__optim_name(o->optim.kind), sr__lr_name(o->optim.lr_schedule),
           sr__optim_lr_at(&o->optim, c->global_step), o->keep_checkpoints, info.keep_every_steps,
           o->checkpoint_budget_pct > 0 ? "budget" : "every",
           o->checkpoint_budget_pct > 0 ? 0 : o->checkpoint_every, o->checkpoint_budget_pct,
           o->checkpoint_max_steps, o->checkpoint_max_seconds, o->commit_async ? "async" : "sync");
    sr__coord_wait_model(c);
    if (info.model_ready) {
        sr__coord_serve(c);
    }
    return SR_OK;
}

/* 1 for endpoints only this machine can reach. */
static int
is_local_endpoint(const char *ep)
{
    static const char *const local[] = {"ipc://",           "inproc://",    "tcp://127.",
                                        "tcp://localhost:", "tcp://[::1]:", "tcp://lo:"};
    for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++) {
        if (strncmp(ep, local[i], strlen(local[i])) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Heartbeats and TCP keepalive on the ROUTER (docs/network.md): a worker
 * whose host died or whose link went is dropped in seconds rather than the
 * kernel's minutes, and its replies stop queueing for a connection that
 * will never drain.  The worker's client reconnects and resends. */
static void
set_net_opts(void *sock, const sr_coord_opts *o)
{
    if (o->heartbeat_ivl_ms > 0) {
        /* Options made without sr_coord_opts_default: five intervals. */
        int timeout =
            o->heartbeat_timeout_ms > 0 ? o->heartbeat_timeout_ms : 5 * o->heartbeat_ivl_ms;
        int ttl = timeout - timeout % 100; /* ZeroMQ sends it in tenths of seconds */
        zmq_setsockopt(sock, ZMQ_HEARTBEAT_IVL, &o->heartbeat_ivl_ms, sizeof(int));
        zmq_setsockopt(sock, ZMQ_HEARTBEAT_TIMEOUT, &timeout, sizeof(int));
        zmq_setsockopt(sock, ZMQ_HEARTBEAT_TTL, &ttl, sizeof(ttl));
    }
    if (o->tcp_keepalive_idle_s > 0) {
        int one = 1;
        zmq_setsockopt(sock, ZMQ_TCP_KEEPALIVE, &one, sizeof(one));
        zmq_setsockopt(sock, ZMQ_TCP_KEEPALIVE_IDLE, &o->tcp_keepalive_idle_s, sizeof(int));
        zmq_setsockopt(sock, ZMQ_TCP_KEEPALIVE_INTVL, &o->tcp_keepalive_intvl_s, sizeof(int));
        zmq_setsockopt(sock, ZMQ_TCP_KEEPALIVE_CNT, &o->tcp_keepalive_cnt, sizeof(int));
    }
}

sr_err
sr__coord_open_socket(coord *c)
{
    int     one = 1, zero = 0, hwm = SR_COORD_RCVHWM;
    int64_t maxmsg = (int64_t)c->o->max_message_bytes;
    sr_err  rc;

    if ((c->ctx = zmq_ctx_new()) == NULL || (c->sock = zmq_socket(c->ctx, ZMQ_ROUTER)) == NULL) {
        return sr_fail(SR_EMSG, "zmq socket: %s", zmq_strerror(errno));
    }
    zmq_setsockopt(c->sock, ZMQ_ROUTER_MANDATORY, &one, sizeof(one));
    zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_setsockopt(c->sock, ZMQ_RCVHWM, &hwm, sizeof(hwm));
    zmq_setsockopt(c->sock, ZMQ_SNDHWM, &(int){SR_COORD_SNDHWM}, sizeof(int));
    set_net_opts(c->sock, c->o);
    /* A frame may hold the largest variable plus its descriptor. */
    if (c->largest_var > 0 && (int64_t)c->largest_var + (1 << 20) > maxmsg) {
        maxmsg = (int64_t)c->largest_var + (1 << 20);
    }
    zmq_setsockopt(c->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg));
    c->max_msg = maxmsg;
    c->io.ctx = c->sock;
    if (c->o->curve_secret_key_file != NULL) {
        rc = sr__auth_open(c->ctx, c->sock, c->o->curve_secret_key_file, c->o->authorized_keys,
                           &c->auth);
        if (rc != SR_OK) {
            return rc;
        }
    } else if (!is_local_endpoint(c->o->bind)) {
        SR_LOG(SR_LOG_WARN, "COORD-PLAINTEXT",
               "binding %s without CURVE: anyone who can reach it can change the model "
               "(see --curve-secret-key-file, docs/security.md)",
               c->o->bind);
        /* Issue 27: the same, loud, once more under the id operators grep
         * for (docs/network.md): traffic off this host is readable and
         * writable by anyone on the path. */
        SR_LOG(SR_LOG_WARN, "COORD-INSECURE",
               "*** endpoint=%s is not loopback and CURVE is off: the model and every "
               "gradient cross the network in plaintext, unauthenticated; use "
               "--curve-secret-key-file and --authorized-keys off-loopback ***",
               c->o->bind);
    }
    if (zmq_bind(c->sock, c->o->bind) != 0) {
        return sr_fail(SR_EMSG, "bind %s: %s", c->o->bind, zmq_strerror(errno));
    }
    char   ep[256];
    size_t len = sizeof(ep);
    if (zmq_getsockopt(c->sock, ZMQ_LAST_ENDPOINT, ep, &len) == 0) {
        SR_LOG(SR_LOG_NOTICE, "COORD-BIND",
               "endpoint=%s curve=%s max_message_bytes=%" PRId64
               " heartbeat_ivl_ms=%d heartbeat_timeout_ms=%d tcp_keepalive_idle_s=%d",
               ep, c->auth ? "on" : "off", maxmsg,
               c->o->heartbeat_ivl_ms > 0 ? c->o->heartbeat_ivl_ms : 0, c->o->heartbeat_timeout_ms,
               c->o->tcp_keepalive_idle_s > 0 ? c->o->tcp_keepalive_idle_s : 0);
    }
    return SR_OK;
}

/* The real I/O (coord_io): the ROUTER socket and the monotonic clock. */
static int
zmq_io_send(void *sock, const void *data, size_t len, int flags)
{
    return zmq_send(sock, data, len, flags);
}

static int
zmq_io_send_msg(void *sock, zmq_msg_t *m, int flags)
{
    return zmq_msg_send(m, sock, flags);
}

static int64_t
clock_now_ms(void *unused)
{
    (void)unused;
    return sr_clock_now_ms();
}

/* An empty coordinator in STARTING with the real I/O (the socket comes
 * with sr__coord_open_socket); release with sr__coord_free. */
void
sr__coord_init(coord *c, const sr_coord_opts *o)
{
    memset(c, 0, sizeof(*c));
    c->el_opts = *o; /* issue 26: the options in force, changed by ctl */
    c->o = &c->el_opts;
    c->lock_fd = -1;
    c->state = COORD_STARTING;
    c->io.send = zmq_io_send;
    c->io.send_msg = zmq_io_send_msg;
    c->io.now_ms = clock_now_ms;
    sr__tokens_init(&c->tokens);
    sr__coord_ckpt_init(c); /* issue 28: again from the restored step at start */
}

sr_err
sr_coord_check_checkpoint(const sr_coord_opts *o)
{
    if (o->checkpoint_budget_pct != 0 &&
        !(o->checkpoint_budget_pct > 0 && o->checkpoint_budget_pct <= 100)) {
        return sr_fail(SR_EINVAL, "--checkpoint-budget %g is not a percentage in (0, 100]",
                       o->checkpoint_budget_pct);
    }
    if (o->checkpoint_max_steps < 0 || !(o->checkpoint_max_seconds >= 0)) {
        return sr_fail(SR_EINVAL,
                       "--checkpoint-max-steps %" PRId64
                       " and --checkpoint-max-seconds %g must be >= 0",
                       o->checkpoint_max_steps, o->checkpoint_max_seconds);
    }
    if (!(o->checkpoint_budget_pct > 0) &&
        (o->checkpoint_max_steps > 0 || o->checkpoint_max_seconds > 0)) {
        return sr_fail(SR_EINVAL, "--checkpoint-max-steps and --checkpoint-max-seconds bound "
                                  "a --checkpoint-budget; give one (with a fixed interval, "
                                  "--checkpoint-every-steps is the bound)");
    }
    return SR_OK;
}

void
sr_coord_opts_default(sr_coord_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->bind = "tcp://127.0.0.1:7070";
    o->N = -1;
    o->init_tokens = -1;
    o->optim.kind = SR_OPT_SGD;
    o->optim.momentum = 0.9;
    o->optim.beta1 = 0.9;
    o->optim.beta2 = 0.999;
    o->optim.epsilon = 1e-8;
    o->optim.ema_decay = 0.999;
    o->checkpoint_every = 1;
    o->keep_checkpoints = 3;
    o->keep_every_steps = -1;
    o->resume_from_step = -1;
    o->grace_ms = 2000;
    o->log_interval_ms = 5000;
    o->worker_timeout_ms = 10000;
    o->max_message_bytes = 64u << 20;
    o->piggyback_max_bytes = 1u << 20;
    o->commit_interval_ms = 1;
    o->partition_bytes = 2u << 20;
    o->optim.step_gamma = 0.1; /* issue 25: torch's StepLR default */
    o->heartbeat_ivl_ms = 1000;
    o->heartbeat_timeout_ms = 5000;
    o->tcp_keepalive_idle_s = 10;
    o->tcp_keepalive_intvl_s = 2;
    o->tcp_keepalive_cnt = 3;
}

void
sr__coord_free(coord *c)
{
    sr__coord_writer_stop(c);
    for (size_t i = 0; i < c->nvars; i++) {
        sr__coord_free_var(&c->vars[i]);
    }
    free(c->vars);
    free(c->index);
    sr__coord_free_members(c);
    free(c->workers);
    free(c->log);
    sr__coord_members_free(c); /* issue 26 */
    free(c->scratch[0]);
    free(c->scratch[1]);
    free(c->sp_idx);
    free(c->sp_rows);
    free(c->sp_start);
    sr__coord_pdecl_drop(c);
    sr__coord_metrics_close(c); /* issue 26 */
    sr__tokens_destroy(&c->tokens);
    sr__auth_close(c->auth);
    if (c->sock != NULL) {
        zmq_close(c->sock);
    }
    if (c->ctx != NULL) {
        /* After it, no pull slot is written any more.  A signal (a second
         * SIGTERM) interrupts it with EINTR before the I/O thread is done:
         * go on waiting, or the slots below would be freed under it. */
        while (zmq_ctx_term(c->ctx) != 0 && errno == EINTR) {
        }
    }
    for (size_t i = 0; i < c->nclients; i++) {
        free(c->clients[i].held);
        free(c->clients[i].pulls);
    }
    free(c->clients);
    sr_store_close(c->st);
    sr__coord_unlock_store(c->lock_fd);
}
