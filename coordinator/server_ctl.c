/*
 * Issue 26, elastic: CTL, an operator's change of a running job
 * (`syncrep ctl`, docs/protocol.md "CTL (12)", docs/operations.md).
 *
 * A change is checked completely, then recorded durably (table
 * ctl_change, its own transaction) and only then answered and queued: it
 * applies at the next step boundary (sr__coord_members_step_applied), no
 * process restarted.  A coordinator restarted with the same options keeps
 * it (sr__coord_ctl_restore: a change whose base, the option's value when
 * it was made, is what the options give again); options that give another
 * value win, and the log says so.  With CURVE on, only the keys of
 * --admin-keys may send CTL (the ZAP handler puts the client's key in the
 * message's "User-Id" property, coordinator/auth.c).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/server_int.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/strbuf.h"

sr_err
sr__coord_ctl_open(coord *c)
{
    c->el_base = c->el_opts;
    if (c->o->admin_keys == NULL) {
        return SR_OK;
    }
    if (c->auth == NULL) {
        return sr_fail(SR_EINVAL,
                       "--admin-keys %s needs CURVE (--curve-secret-key-file): "
                       "without it anyone who reaches the endpoint may use ctl",
                       c->o->admin_keys);
    }
    return sr__auth_load_admin_keys(c->auth, c->o->admin_keys);
}

/* The value of `key` in a set of options. */
static double
opt_value(const sr_coord_opts *o, const char *key)
{
    if (strcmp(key, "replicas_to_aggregate") == 0) {
        return o->R;
    }
    if (strcmp(key, "total_replicas") == 0) {
        return o->N;
    }
    if (strcmp(key, "min_replicas") == 0) {
        return o->min_replicas;
    }
    return o->optim.lr;
}

static void
opt_set(sr_coord_opts *o, const char *key, double v)
{
    if (strcmp(key, "replicas_to_aggregate") == 0) {
        o->R = (int)v;
    } else if (strcmp(key, "total_replicas") == 0) {
        o->N = (int)v;
    } else if (strcmp(key, "min_replicas") == 0) {
        o->min_replicas = (int)v;
    } else if (strcmp(key, "learning_rate") == 0) {
        o->optim.lr = v;
    }
}

static const char *const keys[] = {"replicas_to_aggregate", "total_replicas", "min_replicas",
                                   "learning_rate"};

/* The options restored must still make a job: else the command line wins. */
static int
opts_valid(const sr_coord_opts *o)
{
    return o->R >= 1 && o->N >= 1 && o->min_replicas >= 0 && o->min_replicas <= o->R &&
           isfinite(o->optim.lr) && o->optim.lr > 0 && (o->max_tasks == 0 || o->N <= o->max_tasks);
}

sr_err
sr__coord_ctl_restore(coord *c)
{
    sr_store_ctl_change *l = NULL;
    size_t               n = 0;
    sr_coord_opts        o = c->el_opts;
    sr_err               rc;

    if ((rc = sr_store_list_ctl_changes(c->st, &l, &n)) != SR_OK) {
        return rc;
    }
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
        const sr_store_ctl_change *last = NULL;
        for (size_t i = 0; i < n; i++) {
            if (strcmp(l[i].key, keys[k]) == 0) {
                last = &l[i];
            }
        }
        if (last == NULL) {
            continue;
        }
        double given = opt_value(&c->el_base, keys[k]);
        if (given != last->base) {
            SR_LOG(SR_LOG_NOTICE, "COORD-CTL-OVERRIDDEN",
                   "%s=%.17g from the options; the ctl change to %.17g (incarnation %" PRIu64
                   ", step %" PRId64 ") was made when they gave %.17g",
                   keys[k], given, last->value, last->incarnation, last->step, last->base);
            continue;
        }
        opt_set(&o, keys[k], last->value);
        SR_LOG(SR_LOG_NOTICE, "COORD-CTL-RESTORED",
               "%s=%.17g (was %.17g in the options) from the ctl change of incarnation %" PRIu64
               " at step %" PRId64,
               keys[k], last->value, given, last->incarnation, last->step);
    }
    free(l);
    if (!opts_valid(&o)) {
        SR_LOG(SR_LOG_WARN, "COORD-CTL-OVERRIDDEN",
               "the stored ctl changes together give R=%d N=%d M=%d learning_rate=%g, not a "
               "valid job with these options: the options are used as given",
               o.R, o.N, o.min_replicas, o.optim.lr);
        return SR_OK;
    }
    c->el_opts = o;
    return SR_OK;
}

/* The values after the pending changes and r's: what the next boundary gives. */
static void
next_values(const coord *c, const sr_wire_ctl_req *q, el_ctl *out)
{
    *out = c->el_pending;
    if (!out->has_R) {
        out->R = c->o->R;
    }
    if (!out->has_N) {
        out->N = c->o->N;
    }
    if (!out->has_M) {
        out->M = c->o->min_replicas;
    }
    if (!out->has_lr) {
        out->lr = c->o->optim.lr;
    }
    if (q->fields & SR_WIRE_CTL_R) {
        out->has_R = 1;
        out->R = q->replicas_to_aggregate;
    }
    if (q->fields & SR_WIRE_CTL_N) {
        out->has_N = 1;
        out->N = q->total_replicas;
    }
    if (q->fields & SR_WIRE_CTL_M) {
        out->has_M = 1;
        out->M = q->min_replicas;
    }
    if (q->fields & SR_WIRE_CTL_LR) {
        out->has_lr = 1;
        out->lr = q->learning_rate;
    }
}

/* The sender's CURVE key may use ctl: 1, or 0 after the refusal's reply. */
static int
admitted(coord *c, req_ctx *r)
{
    if (c->auth == NULL) {
        return 1; /* no CURVE: whoever reaches the endpoint (docs/security.md) */
    }
    const char *key = r->nbody > 0 ? zmq_msg_gets(&r->body[0], "User-Id") : NULL;
    if (key == NULL || !sr__auth_is_admin(c->auth, key)) {
        char why[160];
        snprintf(why, sizeof(why), "ctl from key %.40s, not an admin key",
                 key != NULL ? key : "(none)");
        sr__coord_count_bad(c, &c->refused, &c->last_refused_log_ms, "COORD-CTL-REFUSED", why);
        REPLY_ERR(r, SR_EACCES,
                  "%s: only the keys in --admin-keys may change a running job (docs/security.md)",
                  why);
        return 0;
    }
    return 1;
}

/* Record one changed key durably: 0, or -1 after the error reply. */
static int
record(coord *c, req_ctx *r, const char *key, double value)
{
    sr_store_ctl_change ch;

    memset(&ch, 0, sizeof(ch));
    ch.incarnation = c->incarnation;
    ch.step = c->global_step + 1;
    ch.at_ms = sr_clock_wall_ms();
    snprintf(ch.key, sizeof(ch.key), "%s", key);
    ch.base = opt_value(&c->el_base, key);
    ch.value = value;
    if (sr_store_add_ctl_change(c->st, &ch) != SR_OK) {
        SR_LOG(SR_LOG_ERR, "COORD-CTL-FAIL", "%s=%.17g not recorded: %s", key, value,
               sr_errdetail());
        REPLY_ERR(r, SR_ESTORE, "ctl %s: the store could not record the change: %s", key,
                  sr_errdetail());
        return -1;
    }
    return 0;
}

void
sr__coord_handle_ctl(coord *c, req_ctx *r)
{
    sr_wire_ctl_req q;
    el_ctl          nv;

    if (!admitted(c, r)) {
        return;
    }
    if (r->nbody != 1 ||
        sr_wire_ctl_req_decode(zmq_msg_data(&r->body[0]), zmq_msg_size(&r->body[0]), &q) != SR_OK) {
        const char *why = r->nbody != 1 ? "CTL takes one body frame" : sr_errdetail();
        char        msg[256];
        snprintf(msg, sizeof(msg), "%s", why);
        sr__coord_count_bad(c, &c->malformed, &c->last_malformed_log_ms, "COORD-MALFORMED", msg);
        REPLY_ERR(r, SR_EPROTO, "ctl: %s", msg);
        return;
    }
    if (c->state != COORD_SERVING && c->state != COORD_WAIT_MODEL) {
        REPLY_ERR(r, c->state == COORD_DONE ? SR_EDONE : SR_ECLOSED,
                  "ctl: the job is %s: nothing more to change",
                  c->state == COORD_DONE ? "over" : "shutting down");
        return;
    }
    next_values(c, &q, &nv);
    int m = nv.M > 0 ? nv.M : nv.R;
    if (m > nv.R) {
        REPLY_ERR(r, SR_EINVAL,
                  "ctl: min replicas %d is above replicas to aggregate %d (give "
                  "--min-replicas too)",
                  nv.M, nv.R);
        return;
    }
    if (nv.R > (1 << 20) || nv.N > (1 << 20)) {
        REPLY_ERR(r, SR_EINVAL, "ctl: at most %d replicas", 1 << 20);
        return;
    }
    if (c->o->max_tasks > 0 && nv.N > c->o->max_tasks) {
        REPLY_ERR(r, SR_EINVAL,
                  "ctl: total replicas %d is above --max-tasks %d (task indexes 0..%d are "
                  "admitted)",
                  nv.N, c->o->max_tasks, c->o->max_tasks - 1);
        return;
    }
    /* Durable first: an answered change survives a crash of the coordinator. */
    if (((q.fields & SR_WIRE_CTL_R) && record(c, r, "replicas_to_aggregate", nv.R) != 0) ||
        ((q.fields & SR_WIRE_CTL_N) && record(c, r, "total_replicas", nv.N) != 0) ||
        ((q.fields & SR_WIRE_CTL_M) && record(c, r, "min_replicas", nv.M) != 0) ||
        ((q.fields & SR_WIRE_CTL_LR) && record(c, r, "learning_rate", nv.lr) != 0)) {
        return;
    }
    c->el_pending = nv;
    char text[256];
    snprintf(text, sizeof(text),
             "from step %" PRId64 ": replicas_to_aggregate=%d total_replicas=%d min_replicas=%d "
             "learning_rate=%.17g",
             c->global_step + 1, nv.R, nv.N, m, nv.lr);
    SR_LOG(SR_LOG_NOTICE, "COORD-CTL", "%s (asked at global_step=%" PRId64 ")", text,
           c->global_step);
    frame f = {text, strlen(text)};
    sr__coord_send_reply(c, r->rid, r->rid_len, &r->h, SR_OK, c->global_step, &f, 1);
}
