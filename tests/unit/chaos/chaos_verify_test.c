/*
 * The chaos verifier judged without a live job.  A small in-process
 * "coordinator" trains the chaos model through the coordinator's own
 * accumulator and optimizer kernels and commits every step, with its step
 * log and one incarnation (R, N) per era, through the store API.  Each test
 * says which tasks contribute at each step, so a store can hold exactly the
 * violation under test, with every other invariant intact.  Mainly:
 * distinct_tasks, "R replicas are R tasks" (docs/chaos.md).  Issue 23: a
 * store of the --model-api model's packs and member table, judged tensor
 * by tensor.
 */
#include "sr_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chaos/chaos.h"
#include "chaos/chaos_model.h"
#include "coordinator/coord_int.h"
#include "core/dtype.h"
#include "store/store.h"

#define MAX_R     8
#define MAX_STEPS 8
#define SEED      7

/* From from_step on, a coordinator incarnation with R and N. */
typedef struct {
    int     R, N;
    int64_t from_step;
} era;

/* A job: its incarnations, and at step s the R tasks whose gradients are
 * taken, in arrival order (a repeated index is the bug under test). */
typedef struct {
    era     eras[3];
    int     neras;
    int64_t nsteps;
    int32_t tasks[MAX_STEPS][MAX_R];
    /* issue 26: gradients taken at step s (0: R), and the step_replicas
     * rows committed (when nrep: one a step). */
    int                    took[MAX_STEPS];
    sr_store_step_replicas rep[MAX_STEPS];
    int                    nrep;
} job;

typedef struct {
    char *dir;
    char  path[600];
} fixture;

static int
setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    if (f == NULL || (f->dir = sr_test_mkdtemp("chaosv")) == NULL) {
        free(f);
        return -1;
    }
    snprintf(f->path, sizeof(f->path), "%s/store.db", f->dir);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    fixture *f = *state;
    sr_test_rmdir_rf(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static sr_optim
sgd(void)
{
    sr_optim o;
    memset(&o, 0, sizeof(o));
    o.kind = SR_OPT_SGD;
    o.lr = 0.05;
    return o;
}

/* A new incarnation with the config JSON the coordinator stores. */
static void
start_incarnation(sr_store *st, const era *r)
{
    char     cfg[256];
    uint64_t inc;

    assert_sr_ok(sr_store_new_incarnation(st, &inc));
    snprintf(cfg, sizeof(cfg),
             "{\"replicas_to_aggregate\":%d,\"total_replicas\":%d,\"optimizer\":\"sgd\","
             "\"step_log\":true,\"partition_bytes\":2097152}",
             r->R, r->N);
    assert_sr_ok(sr_store_set_config(st, cfg));
}

/* Train j's steps as a coordinator would and commit each with its log. */
static void
build_store(const char *path, const job *j)
{
    const sr_chaos_var *cv = sr_chaos_vars();
    sr_optim            o = sgd();
    sr_store_opts       so;
    sr_store           *st = NULL;
    uint8_t             val[SR_CHAOS_NVARS][4096], grad[4096];
    int64_t             id[SR_CHAOS_NVARS], idx[SR_CHAOS_SPARSE_ROWS];
    int                 e = 0;

    memset(&so, 0, sizeof(so));
    so.create = 1;
    assert_sr_ok(sr_store_open(path, &so, &st));
    start_incarnation(st, &j->eras[0]);
    for (int v = 0; v < SR_CHAOS_NVARS; v++) {
        sr_chaos_init(SEED, v, val[v]);
        assert_sr_ok(sr_store_declare(st, cv[v].name, cv[v].dtype, cv[v].ndim, cv[v].shape, 1,
                                      val[v], sr_chaos_bytes(&cv[v]), &id[v], NULL));
    }
    assert_sr_ok(sr_store_set_ready(st));
    for (int64_t s = 0; s < j->nsteps; s++) {
        sr_store_contrib log[SR_CHAOS_NVARS * MAX_R];
        sr_store_tensor  t[SR_CHAOS_NVARS];
        size_t           n = 0;
        if (e + 1 < j->neras && j->eras[e + 1].from_step == s) {
            start_incarnation(st, &j->eras[++e]);
        }
        int R = j->took[s] > 0 ? j->took[s] : j->eras[e].R;
        for (int v = 0; v < SR_CHAOS_NVARS; v++) {
            uint64_t         rows = cv[v].ndim > 0 ? (uint64_t)cv[v].shape[0] : 1;
            sr_accum         a;
            sr_accum_outcome out;
            memset(&a, 0, sizeof(a));
            assert_sr_ok(sr__accum_init(&a, cv[v].dtype, sr_chaos_elems(&cv[v]), rows, R, s));
            for (int k = 0; k < R; k++) {
                int32_t task = j->tasks[s][k];
                if (cv[v].sparse) {
                    sr_chaos_grad_sparse(SEED, v, task, val[v], idx, grad);
                    assert_sr_ok(
                        sr__accum_push_sparse(&a, idx, grad, SR_CHAOS_SPARSE_ROWS, s, task, &out));
                } else {
                    sr_chaos_grad_dense(SEED, v, task, val[v], grad);
                    assert_sr_ok(sr__accum_push_dense(&a, grad, s, task, &out));
                }
                assert_int_equal(out, SR_ACC_ACCEPTED);
                log[n++] = (sr_store_contrib){.step = s,
                                              .var_id = id[v],
                                              .part = 0,
                                              .pos = k,
                                              .task_index = task,
                                              .local_step = s};
            }
            sr__optim_apply_accum(&o, s + 1, &a, val[v], NULL, NULL, NULL, 0, 0);
            sr__accum_destroy(&a);
            t[v] = (sr_store_tensor){
                .var_id = id[v], .data = val[v], .len_bytes = sr_chaos_bytes(&cv[v])};
        }
        sr_store_commit c = {.global_step = s + 1,
                             .tensors = t,
                             .ntensors = SR_CHAOS_NVARS,
                             .log = log,
                             .nlog = n,
                             .replicas = j->nrep ? &j->rep[s] : NULL,
                             .nreplicas = j->nrep ? 1 : 0};
        assert_sr_ok(sr_store_commit_step(st, &c));
    }
    sr_store_close(st);
}

/* Build the store, load it as `syncrep chaos` does and judge it; returns
 * sr_chaos_verify's verdict and fills checks. */
static int
judge(const char *path, const job *j, sr_chaos_check *checks)
{
    sr_chaos_evidence e;
    sr_optim          o = sgd();

    build_store(path, j);
    assert_sr_ok(sr_chaos_load(path, SEED, &o, &e));
    assert_int_equal(e.global_step, j->nsteps);
    assert_int_equal(e.nincs, (size_t)j->neras);
    memset(checks, 0, SR_CHAOS_NCHECKS * sizeof(*checks));
    int passed = sr_chaos_verify(&e, checks);
    sr_chaos_evidence_free(&e);
    return passed;
}

static const sr_chaos_check *
check_named(const sr_chaos_check *checks, const char *name)
{
    for (int i = 0; i < SR_CHAOS_NCHECKS; i++) {
        if (checks[i].name != NULL && strcmp(checks[i].name, name) == 0) {
            return &checks[i];
        }
    }
    fail_msg("no check named %s", name);
    return NULL;
}

/* Every check but `failing` passed; `failing` failed and its detail holds
 * each of the NULL-terminated strings. */
static void
assert_only_failure(const sr_chaos_check *checks, const char *failing, const char *const *want)
{
    for (int i = 0; i < SR_CHAOS_NCHECKS; i++) {
        int is_failing = strcmp(checks[i].name, failing) == 0;
        if (checks[i].passed == is_failing) {
            fail_msg("check %s %s: %s", checks[i].name, is_failing ? "passed" : "failed",
                     checks[i].detail);
        }
    }
    const char *detail = check_named(checks, failing)->detail;
    for (; *want != NULL; want++) {
        if (strstr(detail, *want) == NULL) {
            fail_msg("%s detail \"%s\" lacks \"%s\"", failing, detail, *want);
        }
    }
}

static void
test_chaos_verify_check_names_are_stable(void **state)
{
    (void)state;
    assert_string_equal(sr__chaos_check_name(SR_CHAOS_REPLAY), "replay");
    assert_string_equal(sr__chaos_check_name(SR_CHAOS_STRICTNESS), "strictness");
    assert_string_equal(sr__chaos_check_name(SR_CHAOS_EXACTLY_R), "exactly_r");
    assert_string_equal(sr__chaos_check_name(SR_CHAOS_DISTINCT_TASKS), "distinct_tasks");
    assert_string_equal(sr__chaos_check_name(SR_CHAOS_NO_LOST_COMMITS), "no_lost_commits");
    assert_string_equal(sr__chaos_check_name(SR_CHAOS_NCHECKS), "?");
}

static void
test_chaos_verify_r3_n3_distinct_tasks_passes(void **state)
{
    sr_chaos_check checks[SR_CHAOS_NCHECKS];
    job            j = {.eras = {{3, 3, 0}},
                        .neras = 1,
                        .nsteps = 5,
                        .tasks = {{0, 1, 2}, {2, 0, 1}, {1, 2, 0}, {0, 2, 1}, {2, 1, 0}}};

    assert_int_equal(judge(((fixture *)*state)->path, &j, checks), 1);
    for (int i = 0; i < SR_CHAOS_NCHECKS; i++) {
        assert_true(checks[i].passed);
        assert_string_equal(checks[i].detail, "ok");
    }
    assert_true(check_named(checks, "distinct_tasks")->passed);
}

/* Issue 20: R = N = 3, a worker dead for good, and a survivor's second
 * gradient fills the step ("0@3 1@3 0@3").  Replay, strictness and
 * exactly_r all hold (the store is self-consistent and has R gradients);
 * only distinct_tasks sees it. */
static void
test_chaos_verify_task_twice_at_r3_n3_fails_distinct_tasks(void **state)
{
    sr_chaos_check    checks[SR_CHAOS_NCHECKS];
    job               j = {.eras = {{3, 3, 0}},
                           .neras = 1,
                           .nsteps = 5,
                           .tasks = {{0, 1, 2}, {2, 0, 1}, {1, 2, 0}, {0, 1, 0}, {0, 1, 0}}};
    const char *const want[] = {
        "step 3 ", "variable dense_a", "tasks 0@3 1@3 0@3", "task 0 contributed 2",
        "R 3 N 3", "allow 1",          "incarnation 1",     NULL};

    assert_int_equal(judge(((fixture *)*state)->path, &j, checks), 0);
    assert_only_failure(checks, "distinct_tasks", want);
}

/* N < R: each task gives ceil(R / N) gradients; more is a violation. */
static void
test_chaos_verify_n_below_r_allows_ceil_r_over_n(void **state)
{
    sr_chaos_check checks[SR_CHAOS_NCHECKS];
    job            j = {.eras = {{4, 2, 0}},
                        .neras = 1,
                        .nsteps = 3,
                        .tasks = {{0, 1, 0, 1}, {0, 0, 1, 1}, {1, 0, 1, 0}}};

    assert_int_equal(judge(((fixture *)*state)->path, &j, checks), 1);
}

static void
test_chaos_verify_n_below_r_task_over_ceil_fails(void **state)
{
    sr_chaos_check    checks[SR_CHAOS_NCHECKS];
    job               j = {.eras = {{4, 2, 0}},
                           .neras = 1,
                           .nsteps = 3,
                           .tasks = {{0, 1, 0, 1}, {1, 1, 1, 0}, {0, 1, 0, 1}}};
    const char *const want[] = {"step 1 ", "tasks 1@1 1@1 1@1 0@1", "task 1 contributed 3",
                                "R 4 N 2 allow 2", NULL};

    assert_int_equal(judge(((fixture *)*state)->path, &j, checks), 0);
    assert_only_failure(checks, "distinct_tasks", want);
}

/* R and N come from the incarnation that applied each step: a resize from
 * N = 1 (one task gives both gradients) to N = 2 (it may not). */
static void
test_chaos_verify_r_and_n_from_the_applying_incarnation(void **state)
{
    fixture          *f = *state;
    sr_chaos_check    checks[SR_CHAOS_NCHECKS];
    job               ok = {.eras = {{2, 1, 0}, {2, 2, 3}},
                            .neras = 2,
                            .nsteps = 6,
                            .tasks = {{0, 0}, {0, 0}, {0, 0}, {0, 1}, {1, 0}, {0, 1}}};
    job               bad = ok;
    const char *const want[] = {"step 4 ", "tasks 1@4 1@4", "R 2 N 2 allow 1", "incarnation 2",
                                NULL};

    char bad_path[700];

    assert_int_equal(judge(f->path, &ok, checks), 1);
    bad.tasks[4][1] = 1; /* {1, 0} -> {1, 1} */
    snprintf(bad_path, sizeof(bad_path), "%s/bad.db", f->dir);
    assert_int_equal(judge(bad_path, &bad, checks), 0);
    assert_only_failure(checks, "distinct_tasks", want);
}

/* issue 26: R = N = 3 with --min-replicas 2, task 2 gone during step 1:
 * steps 1 and 2 took two gradients each, as their step_replicas rows say;
 * replay divides by what each step took, bit for bit, and every check
 * holds.  The same store without the rows fails exactly_r; a row whose M
 * is above what the step took fails it too. */
static void
test_chaos_verify_elastic_steps_judged_by_recorded_replicas(void **state)
{
    fixture       *f = *state;
    sr_chaos_check checks[SR_CHAOS_NCHECKS];
    job            j = {
                   .eras = {{3, 3, 0}},
                   .neras = 1,
                   .nsteps = 4,
                   .tasks = {{0, 1, 2}, {1, 0}, {0, 1}, {2, 0, 1}},
                   .took = {0, 2, 2, 0},
                   .rep = {{0, 3, 3, 3, 2, 3}, {1, 2, 3, 3, 2, 2}, {2, 2, 2, 3, 2, 2}, {3, 3, 3, 3, 2, 3}},
                   .nrep = 4};
    char path[700];

    assert_int_equal(judge(f->path, &j, checks), 1);
    job none = j;
    none.nrep = 0;
    snprintf(path, sizeof(path), "%s/none.db", f->dir);
    const char *const want[] = {"step 1 ", "2 contributions, R in force 3", NULL};
    assert_int_equal(judge(path, &none, checks), 0);
    assert_only_failure(checks, "exactly_r", want);
    job high = j;
    high.rep[2].min_replicas = 3;
    snprintf(path, sizeof(path), "%s/high.db", f->dir);
    const char *const want_m[] = {"step 2 ", "fewer than the step's min replicas 3", NULL};
    assert_int_equal(judge(path, &high, checks), 0);
    assert_only_failure(checks, "exactly_r", want_m);
}

/* ---- issue 23: the --model-api model, packed as the coordinator does ----
 * Its packs: 0 float32 trainable, 1 float64 trainable, 2 float32 not
 * trainable, members 64-byte aligned in table order; the sparse tensor a
 * variable of its own.  R tasks 0..R-1 contribute at every step (SGD). */
typedef struct {
    uint8_t         val[3][4096];
    uint64_t        bytes[3];
    int64_t         id[3];
    sr_store_member m[SR_CHAOS_NTENSORS];
    size_t          nm;
} packed;

static int
pack_index(const sr_chaos_var *t)
{
    return t->frozen ? 2 : t->dtype == SR_FLOAT32 ? 0 : 1;
}

static void
lay_out(packed *p)
{
    const sr_chaos_var *tv = sr_chaos_tensors();
    memset(p, 0, sizeof(*p));
    for (int t = 0; t < SR_CHAOS_NTENSORS; t++) {
        if (tv[t].sparse) {
            continue;
        }
        int                      k = pack_index(&tv[t]);
        sr_store_member         *m = &p->m[p->nm];
        static const char *const pack_names[3] = {
            SR_STORE_PACK_PREFIX "0", SR_STORE_PACK_PREFIX "1", SR_STORE_PACK_PREFIX "2"};
        m->name = tv[t].name;
        m->pack = pack_names[k];
        m->offset = p->bytes[k];
        m->dtype = tv[t].dtype;
        m->ndim = tv[t].ndim;
        memcpy(m->shape, tv[t].shape, sizeof(tv[t].shape));
        m->nbytes = sr_chaos_bytes(&tv[t]);
        m->trainable = !tv[t].frozen;
        m->pos = (int32_t)p->nm++;
        p->bytes[k] = (m->offset + m->nbytes + 63) / 64 * 64;
        sr_chaos_var_init(SEED, &tv[t], p->val[k] + m->offset);
    }
}

/* Pack k's gradient of task `task`: each member's at its offset. */
static void
pack_grad(const packed *p, int k, int32_t task, uint8_t *grad)
{
    memset(grad, 0, p->bytes[k]);
    for (size_t i = 0; i < p->nm; i++) {
        const sr_chaos_var *t = &sr_chaos_tensors()[sr_chaos_tensor_index(p->m[i].name)];
        if (pack_index(t) == k) {
            sr_chaos_var_grad_dense(SEED, t, task, p->val[k] + p->m[i].offset,
                                    grad + p->m[i].offset);
        }
    }
}

static void
build_model_store(const char *path, int R, int64_t nsteps)
{
    const sr_chaos_var *tv = sr_chaos_tensors();
    const sr_chaos_var *emb = &tv[sr_chaos_tensor_index("embedding")];
    era                 r = {R, R, 0};
    sr_optim            o = sgd();
    sr_store_opts       so = {.create = 1};
    sr_store           *st = NULL;
    packed              p;
    uint8_t             ev[4096], grad[4096];
    int64_t             eid, idx[SR_CHAOS_SPARSE_ROWS];

    lay_out(&p);
    assert_sr_ok(sr_store_open(path, &so, &st));
    start_incarnation(st, &r);
    for (int k = 0; k < 3; k++) {
        char    name[64];
        int64_t elems = (int64_t)(p.bytes[k] / (k == 1 ? 8 : 4));
        snprintf(name, sizeof(name), SR_STORE_PACK_PREFIX "%d", k);
        assert_sr_ok(sr_store_declare(st, name, k == 1 ? SR_FLOAT64 : SR_FLOAT32, 1, &elems, k < 2,
                                      p.val[k], p.bytes[k], &p.id[k], NULL));
    }
    sr_chaos_var_init(SEED, emb, ev);
    assert_sr_ok(sr_store_declare(st, emb->name, emb->dtype, emb->ndim, emb->shape, 1, ev,
                                  sr_chaos_bytes(emb), &eid, NULL));
    assert_sr_ok(sr_store_add_members(st, p.m, p.nm));
    assert_sr_ok(sr_store_set_ready(st));
    for (int64_t s = 0; s < nsteps; s++) {
        sr_store_contrib log[3 * MAX_R];
        sr_store_tensor  t[3];
        size_t           n = 0;
        for (int v = 0; v < 3; v++) { /* the two trainable packs, the sparse tensor */
            int64_t          id = v < 2 ? p.id[v] : eid;
            uint8_t         *val = v < 2 ? p.val[v] : ev;
            uint64_t         bytes = v < 2 ? p.bytes[v] : sr_chaos_bytes(emb);
            int              es = v == 1 ? 8 : 4;
            sr_accum         a;
            sr_accum_outcome out;
            memset(&a, 0, sizeof(a));
            assert_sr_ok(sr__accum_init(&a, v == 1 ? SR_FLOAT64 : SR_FLOAT32, bytes / (size_t)es,
                                        v < 2 ? bytes / (size_t)es : (uint64_t)emb->shape[0], R,
                                        s));
            for (int k = 0; k < R; k++) {
                if (v < 2) {
                    pack_grad(&p, v, k, grad);
                    assert_sr_ok(sr__accum_push_dense(&a, grad, s, k, &out));
                } else {
                    sr_chaos_var_grad_sparse(SEED, emb, k, ev, idx, grad);
                    assert_sr_ok(
                        sr__accum_push_sparse(&a, idx, grad, SR_CHAOS_SPARSE_ROWS, s, k, &out));
                }
                log[n++] = (sr_store_contrib){
                    .step = s, .var_id = id, .pos = k, .task_index = k, .local_step = s};
            }
            sr__optim_apply_accum(&o, s + 1, &a, val, NULL, NULL, NULL, 0, 0);
            sr__accum_destroy(&a);
            t[v] = (sr_store_tensor){.var_id = id, .data = val, .len_bytes = bytes};
        }
        /* The step log is ordered by (step, var_id, pos). */
        sr_store_commit c = {
            .global_step = s + 1, .tensors = t, .ntensors = 3, .log = log, .nlog = n};
        assert_sr_ok(sr_store_commit_step(st, &c));
    }
    sr_store_close(st);
}

/* The verifier replays the packs and checks every tensor by name: a byte
 * of one member changed in a copy of the evidence is reported as that
 * tensor (the frozen one too), a byte of a pack's padding as the pack. */
static void
test_chaos_verify_model_api_names_the_tensor(void **state)
{
    fixture          *f = *state;
    sr_chaos_evidence e;
    sr_chaos_check    checks[SR_CHAOS_NCHECKS];
    sr_optim          o = sgd();

    build_model_store(f->path, 3, 6);
    assert_sr_ok(sr_chaos_load(f->path, SEED, &o, &e));
    assert_int_equal(e.nvars, 4);
    assert_int_equal(e.nmembers, SR_CHAOS_NTENSORS - 1);
    assert_int_equal(sr_chaos_verify(&e, checks), 1);
    const char *const names[] = {"conv1.weight", "fc1.bias", "gain", "temperature", "frozen.mask"};
    for (size_t n = 0; n < sizeof(names) / sizeof(names[0]); n++) {
        size_t m = 0;
        int    v = 0;
        while (strcmp(e.members[m].name, names[n]) != 0) {
            m++;
        }
        while (strcmp(e.var[v].name, e.members[m].pack) != 0) {
            v++;
        }
        uint8_t *b = (uint8_t *)e.value[v] + e.members[m].offset + e.members[m].nbytes - 1;
        *b ^= 0x01;
        const char *const want[] = {names[n], "after step 6", NULL};
        assert_int_equal(sr_chaos_verify(&e, checks), 0);
        assert_only_failure(checks, "replay", want);
        *b ^= 0x01;
    }
    /* conv1.bias (32 bytes) is followed by 32 bytes of padding. */
    size_t m = 0;
    while (strcmp(e.members[m].name, "conv1.bias") != 0) {
        m++;
    }
    uint8_t *pad = (uint8_t *)e.value[0] + e.members[m].offset + e.members[m].nbytes;
    *pad = 1;
    const char *const want_pack[] = {e.members[m].pack, NULL};
    assert_int_equal(sr_chaos_verify(&e, checks), 0);
    assert_only_failure(checks, "replay", want_pack);
    *pad = 0;
    /* The first step-log row (step 0, the float32 pack) dropped: exactly_r
     * names the pack. */
    sr_store_contrib first = e.log[0];
    memmove(&e.log[0], &e.log[1], (e.nlog - 1) * sizeof(*e.log));
    e.nlog--;
    const char *const want_r[] = {"step 0 ", SR_STORE_PACK_PREFIX "0", "2 contributions", NULL};
    assert_int_equal(sr_chaos_verify(&e, checks), 0);
    assert_false(check_named(checks, "exactly_r")->passed);
    for (int k = 0; want_r[k] != NULL; k++) {
        assert_non_null(strstr(check_named(checks, "exactly_r")->detail, want_r[k]));
    }
    memmove(&e.log[1], &e.log[0], e.nlog * sizeof(*e.log));
    e.log[0] = first;
    e.nlog++;
    /* The last row (the last step's sparse tensor) moved to the not
     * trainable pack, which takes no gradient. */
    int frozen = 0;
    while (!e.var[frozen].frozen) {
        frozen++;
    }
    int64_t saved_id = e.log[e.nlog - 1].var_id;
    e.log[e.nlog - 1].var_id = e.var_id[frozen];
    assert_int_equal(sr_chaos_verify(&e, checks), 0);
    assert_non_null(strstr(check_named(checks, "exactly_r")->detail, "(not trainable)"));
    e.log[e.nlog - 1].var_id = saved_id;
    assert_int_equal(sr_chaos_verify(&e, checks), 1);
    sr_chaos_evidence_free(&e);
}

/* A store whose members are not the chaos model's is refused, naming the
 * member (never judged against the wrong layout). */
static void
test_chaos_verify_model_api_foreign_member_is_refused(void **state)
{
    fixture          *f = *state;
    sr_chaos_evidence e;
    sr_optim          o = sgd();
    sr_store_opts     so = {.create = 1};
    sr_store         *st = NULL;
    int64_t           id, n = 4;
    float             zero[4] = {0};
    sr_store_member   m = {.name = "not.chaos",
                           .pack = SR_STORE_PACK_PREFIX "0",
                           .dtype = SR_FLOAT32,
                           .ndim = 1,
                           .shape = {4},
                           .nbytes = 16,
                           .trainable = 1};

    assert_sr_ok(sr_store_open(f->path, &so, &st));
    assert_sr_ok(sr_store_declare(st, SR_STORE_PACK_PREFIX "0", SR_FLOAT32, 1, &n, 1, zero,
                                  sizeof(zero), &id, NULL));
    assert_sr_ok(sr_store_add_members(st, &m, 1));
    sr_store_close(st);
    assert_int_equal(sr_chaos_load(f->path, SEED, &o, &e), SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), "not.chaos"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chaos_verify_check_names_are_stable),
        cmocka_unit_test_setup_teardown(test_chaos_verify_r3_n3_distinct_tasks_passes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_chaos_verify_task_twice_at_r3_n3_fails_distinct_tasks,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_chaos_verify_n_below_r_allows_ceil_r_over_n, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_chaos_verify_n_below_r_task_over_ceil_fails, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_chaos_verify_r_and_n_from_the_applying_incarnation,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_chaos_verify_elastic_steps_judged_by_recorded_replicas,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_chaos_verify_model_api_names_the_tensor, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_chaos_verify_model_api_foreign_member_is_refused,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
