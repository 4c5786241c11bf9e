/*
 * The chaos verifier: from the store alone (plus the committed steps the
 * harness saw before each restart) it proves that nothing was lost.
 *
 *   replay           re-apply every logged step from the initial values,
 *                    recomputing each contribution's gradient, through the
 *                    coordinator's own accumulator and optimizer kernels
 *                    (the step's learning rate and clipping factor too:
 *                    sr__optim_at_step);
 *                    the result must equal the stored variables and slots
 *                    bit for bit
 *   strictness       every contribution was computed at the step it was
 *                    applied in
 *   exactly_r        every variable (every partition of a partitioned one)
 *                    got exactly R contributions at every step, R and the
 *                    partitions as in force in the incarnation that applied it;
 *                    with elastic membership (issue 26) R is the step's
 *                    recorded R' (step_replicas: an accumulator taken before
 *                    R' was lowered during the step took up to the R' it
 *                    opened with), and never fewer than the step's M
 *   distinct_tasks   R replicas are R tasks: in every such accumulator no task
 *                    contributed more than ceil(R / N) gradients (with N >= R:
 *                    the R task indexes are distinct), R and N as in force in
 *                    the incarnation that applied the step
 *   no_lost_commits  no incarnation restored a step older than one already
 *                    committed before it started (an operator's
 *                    --resume-from-step excepted: that is a recorded rewind)
 *
 * With --model-api (issue 23) the store holds the model's packs and its
 * layout (the member table): the replay runs each pack as the variable it
 * is, its gradient laid out from every member's, and then compares each
 * tensor's bytes by name (and the pack's padding), so every tensor of every
 * step is checked exactly; the not-trainable pack must hold its initial
 * values.  The other checks count a pack's contributions as a variable's.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chaos/chaos.h"
#include "chaos/chaos_model.h"
#include "core/dtype.h"
#include "wire/wire.h"

/* A chaos variable's partitions under a --partition-bytes, computed as the
 * coordinator does (sr_wire_partition_layout). */
typedef struct {
    uint64_t rows, row_elems, part_rows;
    uint32_t nparts;
} layout;

static layout
var_layout(const sr_chaos_var *cv, uint64_t partition_bytes)
{
    layout         l;
    sr_wire_layout w =
        sr_wire_partition_layout(sr_chaos_bytes(cv), cv->ndim, cv->shape[0], partition_bytes);

    l.rows = w.rows;
    l.row_elems = sr_chaos_elems(cv) / w.rows;
    l.part_rows = w.part_rows;
    l.nparts = (uint32_t)w.nparts;
    return l;
}

void
sr_chaos_evidence_free(sr_chaos_evidence *e)
{
    if (e == NULL) {
        return;
    }
    free(e->log);
    free(e->rep); /* issue 26 */
    for (int v = 0; v < 8; v++) {
        free(e->value[v]);
        for (int s = 0; s < 3; s++) {
            free(e->slot[v][s]);
        }
    }
    free(e->incs);
    free(e->min_restore);
    free(e->members); /* issue 23 */
    free(e->member_tensor);
    memset(e, 0, sizeof(*e));
}

int
sr__chaos_json_i64(const char *json, const char *key, int64_t *out)
{
    char        pat[80];
    const char *p;

    snprintf(pat, sizeof(pat), "\"%s\":", key);
    if (json == NULL || (p = strstr(json, pat)) == NULL) {
        return -1;
    }
    *out = strtoll(p + strlen(pat), NULL, 10);
    return 0;
}

/* Variable v of the evidence: the store variable vars[k] as d. */
static sr_err
add_var(sr_chaos_evidence *e, const sr_store_var *sv, const sr_chaos_var *d, int tensor)
{
    if (e->nvars >= (int)(sizeof(e->var) / sizeof(e->var[0]))) {
        return sr_fail(SR_EINVAL, "chaos evidence: more than %zu variables to replay",
                       sizeof(e->var) / sizeof(e->var[0]));
    }
    e->var[e->nvars] = *d;
    e->tensor[e->nvars] = tensor;
    e->var_id[e->nvars++] = sv->id;
    return SR_OK;
}

static const sr_store_var *
find_var(const sr_store_var *vars, size_t n, const char *name)
{
    for (size_t k = 0; k < n; k++) {
        if (strcmp(vars[k].name, name) == 0) {
            return &vars[k];
        }
    }
    return NULL;
}

/* --model-api: the packs (each as a 1-D variable named by a member's
 * record, which the evidence owns) and the sparse tensor, each member
 * matched with its chaos tensor. */
static sr_err
load_model_layout(const char *path, const sr_store_var *vars, size_t nvars, sr_chaos_evidence *e)
{
    const sr_chaos_var *tv = sr_chaos_tensors();
    sr_err              rc;

    if ((e->member_tensor = calloc(e->nmembers, sizeof(*e->member_tensor))) == NULL) {
        return sr_fail(SR_ENOMEM, "chaos evidence");
    }
    for (size_t m = 0; m < e->nmembers; m++) {
        const sr_store_member *sm = &e->members[m];
        int                    t = sr_chaos_tensor_index(sm->name);
        if (t < 0 || sm->nbytes != sr_chaos_bytes(&tv[t]) || sm->dtype != tv[t].dtype ||
            sm->ndim != tv[t].ndim || (sm->trainable == 0) != (tv[t].frozen != 0)) {
            return sr_fail(SR_EINVAL, "%s: member %s is not the chaos model's tensor", path,
                           sm->name);
        }
        e->member_tensor[m] = t;
    }
    for (size_t k = 0; k < nvars; k++) {
        const sr_store_member *first = NULL;
        int                    t = sr_chaos_tensor_index(vars[k].name);
        if (t >= 0 && tv[t].sparse) {
            if ((rc = add_var(e, &vars[k], &tv[t], t)) != SR_OK) {
                return rc;
            }
            continue;
        }
        for (size_t m = 0; m < e->nmembers && first == NULL; m++) {
            first = strcmp(e->members[m].pack, vars[k].name) == 0 ? &e->members[m] : NULL;
        }
        if (!sr_store_is_pack_name(vars[k].name) || first == NULL || vars[k].ndim != 1) {
            return sr_fail(SR_EINVAL,
                           "%s: variable %s is neither a pack nor a sparse tensor of "
                           "the chaos model",
                           path, vars[k].name);
        }
        sr_chaos_var pack = {.name = first->pack,
                             .dtype = vars[k].dtype,
                             .ndim = 1,
                             .shape = {vars[k].shape[0], 0},
                             .frozen = !vars[k].trainable,
                             .id = -1};
        if ((rc = add_var(e, &vars[k], &pack, -1)) != SR_OK) {
            return rc;
        }
    }
    for (size_t m = 0; m < e->nmembers; m++) {
        int held = 0;
        for (int v = 0; v < e->nvars; v++) {
            held |= e->tensor[v] < 0 && strcmp(e->var[v].name, e->members[m].pack) == 0;
        }
        if (!held) {
            return sr_fail(SR_ECORRUPT, "%s: member %s is in pack %s, which is not stored", path,
                           e->members[m].name, e->members[m].pack);
        }
    }
    for (int t = 0; t < SR_CHAOS_NTENSORS; t++) {
        int found = 0;
        for (size_t m = 0; m < e->nmembers; m++) {
            found |= e->member_tensor[m] == t;
        }
        for (int v = 0; v < e->nvars; v++) {
            found |= e->tensor[v] == t;
        }
        if (!found) {
            return sr_fail(SR_ENOENT, "%s: no tensor %s in the model", path, tv[t].name);
        }
    }
    return SR_OK;
}

/* The variables to replay, ascending by store id (the order of a step's
 * commit and of clipping's sum): the chaos model's, or (the store has
 * members) the --model-api model's packs and sparse tensor. */
static sr_err
load_layout(sr_store *st, const char *path, const sr_store_var *vars, size_t nvars,
            sr_chaos_evidence *e)
{
    const sr_chaos_var *cv = sr_chaos_vars();
    sr_err              rc = sr_store_list_members(st, &e->members, &e->nmembers);

    if (rc != SR_OK) {
        return rc;
    }
    if (e->nmembers > 0) {
        rc = load_model_layout(path, vars, nvars, e);
    }
    for (int v = 0; e->nmembers == 0 && v < SR_CHAOS_NVARS && rc == SR_OK; v++) {
        const sr_store_var *sv = find_var(vars, nvars, cv[v].name);
        rc = sv == NULL ? sr_fail(SR_ENOENT, "%s: no variable %s (was the chief ever up?)", path,
                                  cv[v].name)
                        : add_var(e, sv, &cv[v], v);
    }
    for (int i = 1; i < e->nvars && rc == SR_OK; i++) { /* insertion sort by id */
        for (int j = i; j > 0 && e->var_id[j - 1] > e->var_id[j]; j--) {
            sr_chaos_var d = e->var[j];
            int64_t      id = e->var_id[j];
            int          t = e->tensor[j];
            e->var[j] = e->var[j - 1];
            e->var_id[j] = e->var_id[j - 1];
            e->tensor[j] = e->tensor[j - 1];
            e->var[j - 1] = d;
            e->var_id[j - 1] = id;
            e->tensor[j - 1] = t;
        }
    }
    return rc;
}

sr_err
sr_chaos_load(const char *store_path, uint64_t seed, const sr_optim *optim, sr_chaos_evidence *out)
{
    sr_store             *st = NULL;
    sr_store_opts         o;
    sr_store_info         info;
    sr_store_var         *vars = NULL;
    sr_store_incarnation *incs = NULL;
    sr_store_rewind_rec  *rw = NULL;
    size_t                nvars = 0, nincs = 0, nrw = 0;
    sr_err                rc;

    memset(out, 0, sizeof(*out));
    memset(&o, 0, sizeof(o));
    o.readonly = 1;
    out->seed = seed;
    out->optim = *optim;
    out->nslots = sr__optim_slots(optim, out->slot_name);
    if ((rc = sr_store_open(store_path, &o, &st)) != SR_OK ||
        (rc = sr_store_get_info(st, &info)) != SR_OK ||
        (rc = sr_store_list_vars(st, &vars, &nvars)) != SR_OK ||
        (rc = sr_store_read_log(st, 0, info.global_step, &out->log, &out->nlog)) != SR_OK ||
        (rc = sr_store_list_incarnations(st, &incs, &nincs)) != SR_OK ||
        (rc = sr_store_list_rewinds(st, &rw, &nrw)) != SR_OK ||
        (rc = sr_store_read_step_replicas(st, 0, info.global_step, &out->rep, &out->nrep)) !=
            SR_OK) { /* issue 26 */
        goto out;
    }
    out->global_step = info.global_step;
    if ((rc = load_layout(st, store_path, vars, nvars, out)) != SR_OK) {
        goto out;
    }
    for (int v = 0; v < out->nvars; v++) {
        size_t bytes = sr_chaos_bytes(&out->var[v]);
        if ((out->value[v] = malloc(bytes ? bytes : 1)) == NULL) {
            rc = sr_fail(SR_ENOMEM, "chaos evidence");
            goto out;
        }
        if ((rc = sr_store_read_tensor(st, out->var_id[v], "", -1, out->value[v], bytes)) !=
            SR_OK) {
            goto out;
        }
        for (int s = 0; s < out->nslots && !out->var[v].frozen; s++) {
            if ((out->slot[v][s] = calloc(1, bytes ? bytes : 1)) == NULL) {
                rc = sr_fail(SR_ENOMEM, "chaos evidence");
                goto out;
            }
            rc = sr_store_read_tensor(st, out->var_id[v], out->slot_name[s], -1, out->slot[v][s],
                                      bytes);
            if (rc == SR_ENOENT && out->global_step == 0) {
                rc = SR_OK; /* nothing applied yet: no slot was ever written */
            } else if (rc != SR_OK) {
                goto out;
            }
        }
    }
    if ((out->incs = calloc(nincs + 1, sizeof(*out->incs))) == NULL ||
        (out->min_restore = calloc(nincs + 1, sizeof(*out->min_restore))) == NULL) {
        rc = sr_fail(SR_ENOMEM, "chaos evidence");
        goto out;
    }
    for (size_t i = 0; i < nincs; i++) {
        out->incs[i].incarnation = incs[i].incarnation;
        out->incs[i].restored_step = incs[i].restored_step;
        int64_t r = 0;
        sr__chaos_json_i64(incs[i].config, "replicas_to_aggregate", &r);
        out->incs[i].R = (int)r;
        r = 0;
        sr__chaos_json_i64(incs[i].config, "total_replicas", &r);
        out->incs[i].N = (int)r;
        r = 0;
        sr__chaos_json_i64(incs[i].config, "partition_bytes", &r);
        out->incs[i].partition_bytes = (uint64_t)r;
        for (size_t k = 0; k < nrw; k++) {
            if (rw[k].incarnation == incs[i].incarnation) {
                out->incs[i].rewound = 1;
            }
        }
        out->min_restore[i] = -1;
    }
    out->nincs = nincs;
out:
    free(vars);
    free(incs);
    free(rw);
    sr_store_close(st);
    if (rc != SR_OK) {
        sr_chaos_evidence_free(out);
    }
    return rc;
}

/* The incarnation that applied step s on the surviving branch: the last
 * one that started at or before s. */
static const sr_chaos_inc *
inc_for_step(const sr_chaos_evidence *e, int64_t s)
{
    const sr_chaos_inc *best = NULL;
    for (size_t i = 0; i < e->nincs; i++) {
        if (e->incs[i].restored_step <= s) {
            best = &e->incs[i];
        }
    }
    return best;
}

const char *
sr__chaos_check_name(int i)
{
    static const char *const names[SR_CHAOS_NCHECKS] = {
        [SR_CHAOS_REPLAY] = "replay",
        [SR_CHAOS_STRICTNESS] = "strictness",
        [SR_CHAOS_EXACTLY_R] = "exactly_r",
        [SR_CHAOS_DISTINCT_TASKS] = "distinct_tasks",
        [SR_CHAOS_NO_LOST_COMMITS] = "no_lost_commits",
    };
    return i >= 0 && i < SR_CHAOS_NCHECKS ? names[i] : "?";
}

static void
set(sr_chaos_check *c, int which, int passed)
{
    c->name = sr__chaos_check_name(which);
    c->passed = passed;
    if (passed) {
        snprintf(c->detail, sizeof(c->detail), "ok");
    }
}

/* issue 26: the recorded replicas of step s, or NULL (the step took R). */
static const sr_store_step_replicas *
rep_for_step(const sr_chaos_evidence *e, int64_t s, size_t *at)
{
    while (*at < e->nrep && e->rep[*at].step < s) {
        (*at)++;
    }
    return *at < e->nrep && e->rep[*at].step == s ? &e->rep[*at] : NULL;
}

/* issue 26: count contributions against the step's recorded R' (and M):
 * 1 if they fit; else the reason in why. */
static int
fits_replicas(const sr_store_step_replicas *r, int count, char *why, size_t cap)
{
    if (count < r->min_replicas) {
        snprintf(why, cap, "%d contributions, fewer than the step's min replicas %d", count,
                 r->min_replicas);
        return 0;
    }
    if (count == r->replicas || (count > r->replicas && count <= r->replicas_open)) {
        return 1;
    }
    snprintf(why, cap, "%d contributions, the step's recorded R' %d (opened at %d)", count,
             r->replicas, r->replicas_open);
    return 0;
}

/* A not-trainable pack takes no gradient: a step-log row of it at step s
 * (rows from i on) fails exactly_r. */
static void
frozen_pushed(const sr_chaos_evidence *e, int v, int64_t s, size_t i, sr_chaos_check *exact)
{
    for (size_t k = i; k < e->nlog && e->log[k].step == s && exact->passed; k++) {
        if (e->log[k].var_id == e->var_id[v]) {
            exact->passed = 0;
            snprintf(exact->detail, sizeof(exact->detail),
                     "step %" PRId64 " variable %s (not trainable): a contribution of task %d", s,
                     e->var[v].name, e->log[k].task_index);
        }
    }
}

static void
check_strict_and_r(const sr_chaos_evidence *e, sr_chaos_check *strict, sr_chaos_check *exact)
{
    size_t i = 0, at_rep = 0;

    set(strict, SR_CHAOS_STRICTNESS, 1);
    set(exact, SR_CHAOS_EXACTLY_R, 1);
    for (int64_t s = 0; s < e->global_step; s++) {
        const sr_chaos_inc           *inc = inc_for_step(e, s);
        const sr_store_step_replicas *rr = rep_for_step(e, s, &at_rep);
        for (int v = 0; v < e->nvars; v++) {
            if (e->var[v].frozen) {
                frozen_pushed(e, v, s, i, exact); /* its values: the replay checks them */
                continue;
            }
            layout l = var_layout(&e->var[v], inc ? inc->partition_bytes : 0);
            int    total = 0, in_parts = 0;
            for (size_t k = i; k < e->nlog && e->log[k].step == s; k++) {
                total += e->log[k].var_id == e->var_id[v];
            }
            for (uint32_t p = 0; p < l.nparts; p++) {
                int64_t e0 = (int64_t)(p * l.part_rows * l.row_elems);
                int     count = 0;
                for (size_t k = i; k < e->nlog && e->log[k].step == s; k++) {
                    count += e->log[k].var_id == e->var_id[v] && e->log[k].part == e0;
                }
                in_parts += count;
                int  want = inc ? inc->R : -1;
                char why[160];
                if (rr != NULL) {
                    if (!fits_replicas(rr, count, why, sizeof(why)) && exact->passed) {
                        exact->passed = 0;
                        snprintf(exact->detail, sizeof(exact->detail),
                                 "step %" PRId64 " variable %s partition at %" PRId64 ": %s", s,
                                 e->var[v].name, e0, why);
                    }
                } else if (count != want && exact->passed) {
                    exact->passed = 0;
                    snprintf(exact->detail, sizeof(exact->detail),
                             "step %" PRId64 " variable %s partition at %" PRId64
                             ": %d contributions, R in force %d (incarnation %" PRIu64 ")",
                             s, e->var[v].name, e0, count, want, inc ? inc->incarnation : 0);
                }
            }
            if (in_parts != total && exact->passed) {
                exact->passed = 0;
                snprintf(exact->detail, sizeof(exact->detail),
                         "step %" PRId64 " variable %s: %d contributions in no partition of %u", s,
                         e->var[v].name, total - in_parts, l.nparts);
            }
            for (size_t k = i; k < e->nlog && e->log[k].step == s; k++) {
                if (e->log[k].var_id != e->var_id[v]) {
                    continue;
                }
                if (e->log[k].local_step != s && strict->passed) {
                    strict->passed = 0;
                    snprintf(strict->detail, sizeof(strict->detail),
                             "step %" PRId64 " variable %s: contribution %d of task %d was "
                             "computed at step %" PRId64,
                             s, e->var[v].name, e->log[k].pos, e->log[k].task_index,
                             e->log[k].local_step);
                }
            }
        }
        while (i < e->nlog && e->log[i].step == s) {
            i++;
        }
    }
    if (i != e->nlog && exact->passed) {
        exact->passed = 0;
        snprintf(exact->detail, sizeof(exact->detail),
                 "%zu step-log rows beyond the global step %" PRId64, e->nlog - i, e->global_step);
    }
}

/* One accumulator's contributions at a step, described for a report:
 * "0@914 1@914 0@914" (task@local_step, arrival order). */
static void
describe_tasks(char *buf, size_t len, const sr_store_contrib *rows, const size_t *ks, size_t n)
{
    size_t at = 0, j;

    buf[0] = '\0';
    for (j = 0; j < n && at + 48 < len; j++) {
        int w = snprintf(buf + at, len - at, "%s%d@%" PRId64, j ? " " : "", rows[ks[j]].task_index,
                         rows[ks[j]].local_step);
        at += w > 0 ? (size_t)w : 0;
    }
    if (j < n) { /* 48 bytes left: room for this */
        snprintf(buf + at, len - at, " ... (%zu in all)", n);
    }
}

/* R replicas are R tasks (DESIGN.md): no task gave more than ceil(R / N) of
 * an accumulator's gradients at a step, which with N >= R is R distinct task
 * indexes.  exactly_r counts gradients and cannot see a survivor whose
 * second gradient filled a dead worker's place. */
static void
check_distinct(const sr_chaos_evidence *e, sr_chaos_check *c)
{
    size_t i = 0, *ks = NULL, cap = 0;

    set(c, SR_CHAOS_DISTINCT_TASKS, 1);
    for (int64_t s = 0; s < e->global_step && c->passed; s++) {
        const sr_chaos_inc *inc = inc_for_step(e, s);
        size_t              first = i;
        while (i < e->nlog && e->log[i].step == s) {
            i++;
        }
        if (i - first > cap) {
            size_t *grown = realloc(ks, (i - first) * sizeof(*ks));
            if (grown == NULL) {
                c->passed = 0;
                snprintf(c->detail, sizeof(c->detail), "out of memory at step %" PRId64, s);
                break;
            }
            ks = grown;
            cap = i - first;
        }
        for (int v = 0; v < e->nvars && c->passed; v++) {
            layout l = var_layout(&e->var[v], inc ? inc->partition_bytes : 0);
            for (uint32_t p = 0; p < l.nparts && c->passed && !e->var[v].frozen; p++) {
                int64_t e0 = (int64_t)(p * l.part_rows * l.row_elems);
                size_t  n = 0;
                for (size_t k = first; k < i; k++) {
                    if (e->log[k].var_id == e->var_id[v] && e->log[k].part == e0) {
                        ks[n++] = k;
                    }
                }
                if (n == 0) {
                    continue; /* exactly_r reports it */
                }
                if (inc == NULL || inc->R < 1 || inc->N < 1) {
                    c->passed = 0;
                    snprintf(c->detail, sizeof(c->detail),
                             "step %" PRId64 ": no R and N in force (incarnation %" PRIu64
                             " R %d N %d)",
                             s, inc ? inc->incarnation : 0, inc ? inc->R : 0, inc ? inc->N : 0);
                    break;
                }
                int most = (inc->R + inc->N - 1) / inc->N;
                for (size_t j = 0; j < n && c->passed; j++) {
                    int32_t t = e->log[ks[j]].task_index;
                    int     times = 0;
                    for (size_t q = 0; q < n; q++) {
                        times += e->log[ks[q]].task_index == t;
                    }
                    if (times > most) {
                        char tasks[300];
                        describe_tasks(tasks, sizeof(tasks), e->log, ks, n);
                        c->passed = 0;
                        snprintf(c->detail, sizeof(c->detail),
                                 "step %" PRId64 " variable %s partition at %" PRId64
                                 ": tasks %s (task@local_step): task %d contributed %d, "
                                 "R %d N %d allow %d (incarnation %" PRIu64 ")",
                                 s, e->var[v].name, e0, tasks, t, times, inc->R, inc->N, most,
                                 inc->incarnation);
                    }
                }
            }
        }
    }
    free(ks);
}

static void
check_commits(const sr_chaos_evidence *e, sr_chaos_check *c)
{
    set(c, SR_CHAOS_NO_LOST_COMMITS, 1);
    for (size_t i = 1; i < e->nincs; i++) {
        const sr_chaos_inc *inc = &e->incs[i];
        if (inc->rewound) {
            continue; /* an operator's explicit rewind, recorded in the store */
        }
        if (inc->restored_step < e->incs[i - 1].restored_step) {
            c->passed = 0;
            snprintf(c->detail, sizeof(c->detail),
                     "incarnation %" PRIu64 " restored step %" PRId64
                     ", older than incarnation %" PRIu64 "'s start %" PRId64,
                     inc->incarnation, inc->restored_step, e->incs[i - 1].incarnation,
                     e->incs[i - 1].restored_step);
            return;
        }
        if (e->min_restore != NULL && e->min_restore[i] >= 0 &&
            inc->restored_step < e->min_restore[i]) {
            c->passed = 0;
            snprintf(c->detail, sizeof(c->detail),
                     "incarnation %" PRIu64 " restored step %" PRId64 " but step %" PRId64
                     " had been committed before it started",
                     inc->incarnation, inc->restored_step, e->min_restore[i]);
            return;
        }
    }
}

/* The first differing element, described. */
static void
describe_mismatch(char *buf, size_t len, int64_t step, const char *var, const char *slot, int dtype,
                  const void *want, const void *have, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        size_t es = sr_dtype_size(dtype);
        if (memcmp((const char *)want + i * es, (const char *)have + i * es, es) != 0) {
            double w = dtype == SR_FLOAT32 ? ((const float *)want)[i] : ((const double *)want)[i];
            double h = dtype == SR_FLOAT32 ? ((const float *)have)[i] : ((const double *)have)[i];
            snprintf(buf, len,
                     "after step %" PRId64 ": %s%s%s element %" PRIu64 ": replay %.9g, stored %.9g",
                     step, var, *slot ? "/" : "", slot, i, w, h);
            return;
        }
    }
}

/* Is member m held by variable v (a pack)? */
static int
member_of(const sr_chaos_evidence *e, size_t m, int v)
{
    return e->tensor[v] < 0 && strcmp(e->members[m].pack, e->var[v].name) == 0;
}

/* Variable v's initial value: a pack's is its members' at their offsets,
 * zeros between them (as the chief's declaration laid it out). */
static void
replay_init(const sr_chaos_evidence *e, int v, void *dst)
{
    if (e->tensor[v] >= 0) {
        sr_chaos_var_init(e->seed, &e->var[v], dst);
        return;
    }
    memset(dst, 0, sr_chaos_bytes(&e->var[v]));
    for (size_t m = 0; m < e->nmembers; m++) {
        if (member_of(e, m, v)) {
            sr_chaos_var_init(e->seed, &sr_chaos_tensors()[e->member_tensor[m]],
                              (uint8_t *)dst + e->members[m].offset);
        }
    }
}

/* Task t's dense gradient of variable v at val: a pack's is each member's
 * at its offset and zero between them (sr_client_model_step's arena). */
static void
replay_grad_dense(const sr_chaos_evidence *e, int v, int32_t task, const void *val, void *grad)
{
    if (e->tensor[v] >= 0) {
        sr_chaos_var_grad_dense(e->seed, &e->var[v], task, val, grad);
        return;
    }
    memset(grad, 0, sr_chaos_bytes(&e->var[v]));
    for (size_t m = 0; m < e->nmembers; m++) {
        if (member_of(e, m, v)) {
            uint64_t off = e->members[m].offset;
            sr_chaos_var_grad_dense(e->seed, &sr_chaos_tensors()[e->member_tensor[m]], task,
                                    (const uint8_t *)val + off, (uint8_t *)grad + off);
        }
    }
}

/* The replay's bytes of variable v (its value, or a slot) against the
 * stored ones: a pack's tensor by tensor, by name, then the padding
 * between them (named as the pack's elements). */
static void
compare_var(const sr_chaos_evidence *e, sr_chaos_check *c, int v, const char *slot,
            const void *want, const void *have)
{
    const sr_chaos_var *cv = &e->var[v];
    size_t              es = sr_dtype_size(cv->dtype);

    for (size_t m = 0; m < e->nmembers && c->passed; m++) {
        const sr_store_member *sm = &e->members[m];
        if (member_of(e, m, v) && memcmp((const uint8_t *)want + sm->offset,
                                         (const uint8_t *)have + sm->offset, sm->nbytes) != 0) {
            c->passed = 0;
            describe_mismatch(c->detail, sizeof(c->detail), e->global_step, sm->name, slot,
                              sm->dtype, (const uint8_t *)want + sm->offset,
                              (const uint8_t *)have + sm->offset, sm->nbytes / es);
        }
    }
    if (c->passed && memcmp(want, have, sr_chaos_bytes(cv)) != 0) {
        c->passed = 0;
        describe_mismatch(c->detail, sizeof(c->detail), e->global_step, cv->name, slot, cv->dtype,
                          want, have, sr_chaos_elems(cv));
    }
}

static void
check_replay(const sr_chaos_evidence *e, sr_chaos_check *c)
{
    const sr_chaos_var *cv = e->var;
    void               *val[8] = {0}, *slot[8][3] = {{0}};
    uint8_t            *grad = NULL;
    size_t              most = 1;
    int64_t             idx[SR_CHAOS_SPARSE_ROWS];
    size_t              i = 0;
    int                 ema_slot = -1, s1 = -1, s2 = -1;

    set(c, SR_CHAOS_REPLAY, 1);
    for (int k = 0; k < e->nslots; k++) {
        if (strcmp(e->slot_name[k], "ema") == 0) {
            ema_slot = k;
        } else if (strcmp(e->slot_name[k], "adam_v") == 0) {
            s2 = k;
        } else {
            s1 = k;
        }
    }
    for (int v = 0; v < e->nvars; v++) {
        size_t bytes = sr_chaos_bytes(&cv[v]);
        most = bytes > most ? bytes : most;
        val[v] = malloc(bytes ? bytes : 1);
        for (int k = 0; k < e->nslots; k++) {
            slot[v][k] = calloc(1, bytes ? bytes : 1);
        }
        replay_init(e, v, val[v]);
        if (ema_slot >= 0) {
            memcpy(slot[v][ema_slot], val[v], bytes);
        }
    }
    if ((grad = malloc(most)) == NULL) {
        c->passed = 0;
        snprintf(c->detail, sizeof(c->detail), "out of memory (%zu bytes)", most);
    }
    for (int64_t s = 0; s < e->global_step && c->passed; s++) {
        const sr_chaos_inc *inc = inc_for_step(e, s);
        sr_accum           *acc[8] = {0};
        layout              lay[8];
        size_t              first = i;
        while (i < e->nlog && e->log[i].step == s) {
            i++;
        }
        /* Every partition's gradients, computed from the values of step s,
         * before any partition is applied (as the coordinator does). */
        for (int v = 0; v < e->nvars && c->passed; v++) {
            size_t es = sr_dtype_size(cv[v].dtype);
            lay[v] = var_layout(&cv[v], inc ? inc->partition_bytes : 0);
            if (cv[v].frozen) {
                continue; /* never pushed, never applied */
            }
            acc[v] = calloc(lay[v].nparts, sizeof(sr_accum));
            for (uint32_t p = 0; acc[v] != NULL && p < lay[v].nparts; p++) {
                uint64_t r0 = p * lay[v].part_rows;
                uint64_t nr =
                    lay[v].rows - r0 < lay[v].part_rows ? lay[v].rows - r0 : lay[v].part_rows;
                int64_t e0 = (int64_t)(r0 * lay[v].row_elems);
                int     count = 0;
                for (size_t k = first; k < i; k++) {
                    count += e->log[k].var_id == e->var_id[v] && e->log[k].part == e0;
                }
                if (count == 0) {
                    c->passed = 0;
                    snprintf(c->detail, sizeof(c->detail),
                             "step %" PRId64
                             ": no logged contribution for %s partition at %" PRId64,
                             s, cv[v].name, e0);
                    break;
                }
                sr__accum_init(&acc[v][p], cv[v].dtype, nr * lay[v].row_elems, nr, count, s);
                sr__accum_set_sumsq(&acc[v][p], e->optim.clip_norm > 0, e->optim.sparse_mean);
                for (size_t k = first; k < i; k++) {
                    sr_accum_outcome outcome;
                    if (e->log[k].var_id != e->var_id[v] || e->log[k].part != e0) {
                        continue;
                    }
                    if (cv[v].sparse) {
                        /* This partition's rows of the push, in push order. */
                        int64_t lidx[SR_CHAOS_SPARSE_ROWS];
                        uint8_t lrows[4096];
                        size_t  rb = (size_t)lay[v].row_elems * es, n = 0;
                        sr_chaos_var_grad_sparse(e->seed, &cv[v], e->log[k].task_index, val[v], idx,
                                                 grad);
                        for (int j = 0; j < SR_CHAOS_SPARSE_ROWS; j++) {
                            if ((uint64_t)idx[j] >= r0 && (uint64_t)idx[j] < r0 + nr) {
                                lidx[n] = idx[j] - (int64_t)r0;
                                memcpy(lrows + n * rb, grad + (size_t)j * rb, rb);
                                n++;
                            }
                        }
                        sr__accum_push_sparse(&acc[v][p], lidx, lrows, n, s, e->log[k].task_index,
                                              &outcome);
                    } else {
                        replay_grad_dense(e, v, e->log[k].task_index, val[v], grad);
                        sr__accum_push_dense(&acc[v][p], grad + (size_t)e0 * es, s,
                                             e->log[k].task_index, &outcome);
                    }
                }
            }
        }
        /* The step's optimizer, as the coordinator's apply_step: the
         * learning rate of step s and, with --clip-norm, the factor of the
         * squares of every averaged gradient, each accumulator's summed at
         * its take (sr__accum_set_sumsq, the coordinator's own code) and
         * added in the store's order (variables by id, partitions in order). */
        double sumsq = 0;
        for (int v = 0; v < e->nvars && c->passed && e->optim.clip_norm > 0; v++) {
            for (uint32_t p = 0; acc[v] != NULL && p < lay[v].nparts; p++) {
                sumsq += sr__accum_sumsq(&acc[v][p]);
            }
        }
        sr_optim so = sr__optim_at_step(&e->optim, s, sumsq);
        for (int v = 0; v < e->nvars; v++) {
            uint64_t n = sr_chaos_elems(&cv[v]);
            size_t   es = sr_dtype_size(cv[v].dtype);
            for (uint32_t p = 0; c->passed && acc[v] != NULL && p < lay[v].nparts; p++) {
                size_t off = (size_t)(p * lay[v].part_rows * lay[v].row_elems) * es;
                sr__optim_apply_accum(&so, s + 1, &acc[v][p], (uint8_t *)val[v] + off,
                                      s1 >= 0 ? (uint8_t *)slot[v][s1] + off : NULL,
                                      s2 >= 0 ? (uint8_t *)slot[v][s2] + off : NULL, NULL, 0, 0);
            }
            if (c->passed && ema_slot >= 0 && !cv[v].frozen) {
                if (cv[v].dtype == SR_FLOAT32) {
                    sr__ema_f32(e->optim.ema_decay, slot[v][ema_slot], val[v], n);
                } else {
                    sr__ema_f64(e->optim.ema_decay, slot[v][ema_slot], val[v], n);
                }
            }
            for (uint32_t p = 0; acc[v] != NULL && p < lay[v].nparts; p++) {
                sr__accum_destroy(&acc[v][p]);
            }
            free(acc[v]);
        }
    }
    for (int v = 0; v < e->nvars && c->passed; v++) {
        compare_var(e, c, v, "", val[v], e->value[v]);
        for (int k = 0; k < e->nslots && c->passed && e->global_step > 0 && !cv[v].frozen; k++) {
            compare_var(e, c, v, e->slot_name[k], slot[v][k], e->slot[v][k]);
        }
    }
    for (int v = 0; v < e->nvars; v++) {
        free(val[v]);
        for (int k = 0; k < 3; k++) {
            free(slot[v][k]);
        }
    }
    free(grad);
}

int
sr_chaos_verify(const sr_chaos_evidence *e, sr_chaos_check *checks)
{
    check_replay(e, &checks[SR_CHAOS_REPLAY]);
    check_strict_and_r(e, &checks[SR_CHAOS_STRICTNESS], &checks[SR_CHAOS_EXACTLY_R]);
    check_distinct(e, &checks[SR_CHAOS_DISTINCT_TASKS]);
    check_commits(e, &checks[SR_CHAOS_NO_LOST_COMMITS]);
    for (int i = 0; i < SR_CHAOS_NCHECKS; i++) {
        if (!checks[i].passed) {
            return 0;
        }
    }
    return 1;
}
