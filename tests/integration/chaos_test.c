/*
 * `syncrep chaos` in the suite: a 30 s run with at least 15 kills over all
 * three roles and a resize, a run with --checkpoint-every-steps 5, and the
 * verifier itself: evidence from a real run is corrupted in six ways and
 * each must be caught (a verifier that cannot fail proves nothing), and a
 * run of workers on the model API (--model-api) whose evidence is
 * corrupted tensor by tensor.  The
 * verifier's unit test (tests/unit/chaos/) judges stores built in-process.
 */
#include "sr_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "chaos/chaos.h"
#include "chaos/chaos_model.h"

static char *run_dir; /* the 30 s run's output, reused by the verifier test */

static char *
read_file(const char *path)
{
    FILE  *f = fopen(path, "r");
    char  *buf;
    size_t n;
    if (f == NULL) {
        return NULL;
    }
    buf = calloc(1, 1 << 20);
    n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static long
json_int(const char *json, const char *key)
{
    char        pat[80];
    const char *p;
    snprintf(pat, sizeof(pat), "\"%s\": ", key);
    p = strstr(json, pat);
    assert_non_null(p);
    return strtol(p + strlen(pat), NULL, 10);
}

/* Run `syncrep chaos` with args; returns its exit status and the report. */
static int
chaos(const char *out, const char *args, char **report)
{
    char cmd[2048], path[1024];
    snprintf(cmd, sizeof(cmd), "%s chaos --out %s %s", sr_test_syncrep_bin(), out, args);
    int st = system(cmd);
    snprintf(path, sizeof(path), "%s/report.json", out);
    *report = read_file(path);
    assert_non_null(*report);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void
test_chaos_30s_all_roles_resize_passes(void **state)
{
    char  out[600];
    char *rep;
    (void)state;

    run_dir = sr_test_mkdtemp("chaos");
    snprintf(out, sizeof(out), "%s/run", run_dir);
    int rc = chaos(out,
                   "--workers 4 --replicas-to-aggregate 4 --duration 30 --seed 11 "
                   "--kill-every 1.2 --resize 4,3,5 --targets coordinator,chief,worker",
                   &rep);
    if (rc != 0) {
        fprintf(stderr, "%s\n", rep);
    }
    assert_int_equal(rc, 0);
    assert_non_null(strstr(rep, "\"passed\": true"));
    const char *k = strstr(rep, "\"kills\"");
    assert_non_null(k);
    long kc = json_int(k, "coordinator"), kch = json_int(k, "chief"), kw = json_int(k, "worker");
    fprintf(stderr, "kills: coordinator %ld chief %ld worker %ld\n", kc, kch, kw);
    assert_true(kc + kch + kw >= 15);
    assert_true(kc >= 1 && kch >= 1 && kw >= 1);
    assert_true(json_int(rep, "resizes") >= 1);
    assert_true(json_int(rep, "resumes") >= 1);
    assert_true(json_int(rep, "global_step") > 20);
    char svg[700];
    snprintf(svg, sizeof(svg), "%s/timeline.svg", out);
    char *s = read_file(svg);
    assert_non_null(s);
    assert_non_null(strstr(s, "<polyline"));
    free(s);
    free(rep);
}

/* A run in a fresh directory (returned; out: its output, cap bytes) that
 * must pass every invariant. */
static char *
run_passing(const char *tag, const char *args, char *out, size_t cap)
{
    char *dir = sr_test_mkdtemp(tag), *rep;

    snprintf(out, cap, "%s/run", dir);
    int rc = chaos(out, args, &rep);
    if (rc != 0) {
        fprintf(stderr, "%s\n", rep);
    }
    assert_int_equal(rc, 0);
    assert_non_null(strstr(rep, "\"passed\": true"));
    free(rep);
    return dir;
}

static void
expect_pass(const char *tag, const char *args)
{
    char  out[600];
    char *dir = run_passing(tag, args, out, sizeof(out));
    sr_test_rmdir_rf(dir);
    free(dir);
}

/* The recipe `syncrep chaos` runs without recipe options. */
static sr_optim
harness_recipe(void)
{
    sr_optim o;
    memset(&o, 0, sizeof(o));
    o.kind = SR_OPT_ADAM;
    o.lr = 0.05;
    o.beta1 = 0.9;
    o.beta2 = 0.999;
    o.epsilon = 1e-8;
    o.ema = 1;
    o.ema_decay = 0.9;
    return o;
}

/* Also with partitions of 32 bytes: dense_a 2, dense_b 4, embedding 16
 * accumulators (the verifier checks R per partition from the layout). */
static void
test_chaos_checkpoint_every_5_partitioned_passes(void **state)
{
    (void)state;
    expect_pass("chaos5", "--workers 3 --replicas-to-aggregate 2 --total-replicas 3 --duration 20 "
                          "--seed 5 --kill-every 1.5 --checkpoint-every-steps 5 "
                          "--partition-bytes 32");
}

/* issue 28: the adaptive policy (--checkpoint-budget 3) under coordinator,
 * chief and worker kills for 15 s: every invariant holds, and each judged
 * coordinator kill lost fewer steps than the interval STATUS gave just
 * before it (the report's steps_lost_per_kill). */
static void
test_chaos_checkpoint_budget_passes_and_reports_losses(void **state)
{
    char out[600], path[700];
    (void)state;

    char *dir = run_passing("chaosb",
                            "--workers 3 --replicas-to-aggregate 3 --duration 15 --seed 28 "
                            "--kill-every 1.0 --checkpoint-budget 3",
                            out, sizeof(out));
    snprintf(path, sizeof(path), "%s/report.json", out);
    char *rep = read_file(path);
    assert_non_null(rep);
    assert_non_null(strstr(rep, "\"checkpoint_budget_pct\": 3,"));
    const char *l = strstr(rep, "\"steps_lost_per_kill\"");
    assert_non_null(l);
    fprintf(stderr, "steps lost per kill: %ld judged, max %ld, largest interval %ld\n",
            json_int(l, "count"), json_int(l, "max"), json_int(l, "max_interval"));
    assert_true(json_int(l, "count") >= 1);
    assert_int_equal(json_int(l, "over_interval"), 0);
    assert_true(json_int(l, "max") < json_int(l, "max_interval") || json_int(l, "max") == 0);
    free(rep);
    sr_test_rmdir_rf(dir);
    free(dir);
}

/* issue 26: a worker lost for several timeouts under --min-replicas 2,
 * new task indexes joining, resizes through ctl and coordinator kills, in
 * 20 s; every invariant holds (replay with each step's recorded R', no step
 * below M, two steps within the timeout + 1 s of each judged loss), and
 * the coordinator's log shows N grown for the joins and the ctl changes
 * (R' lowered for good is elastic_test's: here a loss may meet a backup). */
static void
test_chaos_elastic_loss_join_ctl_resize_passes(void **state)
{
    char *dir = sr_test_mkdtemp("chaose"), out[600], path[700], *rep, *log;
    (void)state;

    snprintf(out, sizeof(out), "%s/run", dir);
    int rc = chaos(out,
                   "--workers 4 --replicas-to-aggregate 4 --duration 20 --seed 21 "
                   "--kill-every 1.2 --targets coordinator,worker-loss,join --resize 3,5 "
                   "--resize-runtime --min-replicas 2",
                   &rep);
    if (rc != 0) {
        fprintf(stderr, "%s\n", rep);
    }
    assert_int_equal(rc, 0);
    assert_non_null(strstr(rep, "\"passed\": true"));
    snprintf(path, sizeof(path), "%s/coordinator.log", out);
    assert_non_null(log = read_file(path));
    assert_non_null(strstr(log, "COORD-MEMBER-GROW"));
    assert_non_null(strstr(log, "COORD-CTL "));
    free(log);
    free(rep);
    sr_test_rmdir_rf(dir);
    free(dir);
}

static void
test_chaos_async_commit_passes(void **state)
{
    (void)state;
    expect_pass("chaosa", "--workers 3 --replicas-to-aggregate 3 --duration 15 --seed 9 "
                          "--kill-every 1.0 --commit async --resize 3,4");
}

/* Issue 25: a recipe with a warm-up and cosine schedule, adamw and global
 * norm clipping (over partitions of 32 bytes) passes every invariant, the
 * replay bit for bit; and the replay depends on each: verified with a
 * constant rate, or without the clipping, it fails. */
static void
test_chaos_adamw_cosine_clip_passes(void **state)
{
    char             *dir = sr_test_mkdtemp("chaosr"), out[600], store[700], *rep;
    sr_chaos_evidence e;
    sr_chaos_check    checks[SR_CHAOS_NCHECKS];
    sr_optim          o;
    (void)state;

    snprintf(out, sizeof(out), "%s/run", dir);
    int rc = chaos(out,
                   "--workers 3 --replicas-to-aggregate 3 --duration 12 --seed 25 "
                   "--kill-every 1.0 --optimizer adamw --weight-decay 0.01 --clip-norm 0.5 "
                   "--lr-schedule cosine --warmup-steps 5 --decay-steps 1500 --lr-min 0.001 "
                   "--partition-bytes 32",
                   &rep);
    if (rc != 0) {
        fprintf(stderr, "%s\n", rep);
    }
    assert_int_equal(rc, 0);
    assert_non_null(strstr(rep, "\"passed\": true"));
    free(rep);

    memset(&o, 0, sizeof(o)); /* the harness's recipe */
    o.kind = SR_OPT_ADAMW;
    o.lr = 0.05;
    o.beta1 = 0.9;
    o.beta2 = 0.999;
    o.epsilon = 1e-8;
    o.ema = 1;
    o.ema_decay = 0.9;
    o.weight_decay = 0.01;
    o.clip_norm = 0.5;
    o.lr_schedule = 2; /* cosine */
    o.warmup_steps = 5;
    o.decay_steps = 1500;
    o.lr_min = 0.001;
    o.step_gamma = 0.1;
    snprintf(store, sizeof(store), "%s/store.db", out);
    assert_sr_ok(sr_chaos_load(store, 25, &o, &e));
    assert_true(e.global_step > 6);
    assert_int_equal(sr_chaos_verify(&e, checks), 1);
    e.optim.lr_schedule = 0; /* constant: the warm-up's steps differ */
    e.optim.warmup_steps = 0;
    assert_int_equal(sr_chaos_verify(&e, checks), 0);
    assert_false(checks[0].passed);
    e.optim = o;
    e.optim.clip_norm = 0; /* the chaos model's gradients are clipped at 0.5 */
    assert_int_equal(sr_chaos_verify(&e, checks), 0);
    assert_false(checks[0].passed);
    sr_chaos_evidence_free(&e);
    sr_test_rmdir_rf(dir);
    free(dir);
}

static void
load(sr_chaos_evidence *e)
{
    char     store[700];
    sr_optim o = harness_recipe();

    snprintf(store, sizeof(store), "%s/run/store.db", run_dir);
    assert_sr_ok(sr_chaos_load(store, 11, &o, e));
    assert_true(e->global_step > 0);
}

static const sr_chaos_check *
verdict(sr_chaos_evidence *e, const char *name, sr_chaos_check *checks)
{
    sr_chaos_verify(e, checks);
    for (int i = 0; i < SR_CHAOS_NCHECKS; i++) {
        if (strcmp(checks[i].name, name) == 0) {
            return &checks[i];
        }
    }
    fail_msg("no check %s", name);
    return NULL;
}

static int
same_accum(const sr_store_contrib *a, const sr_store_contrib *b)
{
    return a->step == b->step && a->var_id == b->var_id && a->part == b->part;
}

static void
test_chaos_verifier_catches_each_corruption(void **state)
{
    sr_chaos_evidence     e;
    sr_chaos_check        checks[SR_CHAOS_NCHECKS];
    const sr_chaos_check *c;
    (void)state;

    assert_non_null(run_dir);
    load(&e);
    assert_int_equal(sr_chaos_verify(&e, checks), 1);

    /* A stored value off by one bit. */
    ((uint8_t *)e.value[1])[3] ^= 0x01;
    c = verdict(&e, "replay", checks);
    assert_false(c->passed);
    assert_non_null(strstr(c->detail, "dense_b"));
    ((uint8_t *)e.value[1])[3] ^= 0x01;
    /* An optimizer slot changed. */
    float saved_slot = ((float *)e.slot[0][0])[0];
    ((float *)e.slot[0][0])[0] += 1.0f;
    assert_false(verdict(&e, "replay", checks)->passed);
    ((float *)e.slot[0][0])[0] = saved_slot;
    assert_int_equal(sr_chaos_verify(&e, checks), 1);

    /* A step-log row dropped (the middle one). */
    size_t           mid = e.nlog / 2;
    sr_store_contrib saved = e.log[mid];
    memmove(&e.log[mid], &e.log[mid + 1], (e.nlog - mid - 1) * sizeof(*e.log));
    e.nlog--;
    c = verdict(&e, "exactly_r", checks);
    assert_false(c->passed);
    assert_non_null(strstr(c->detail, "contributions"));
    memmove(&e.log[mid + 1], &e.log[mid], (e.nlog - mid) * sizeof(*e.log));
    e.log[mid] = saved;
    e.nlog++;
    assert_int_equal(sr_chaos_verify(&e, checks), 1);

    /* A contribution computed at another step. */
    e.log[mid].local_step -= 1;
    assert_false(verdict(&e, "strictness", checks)->passed);
    e.log[mid].local_step += 1;

    /* One task's gradient twice in an accumulator (R = N in this run, so a
     * task may give one): mid's neighbour in its accumulator takes mid's
     * task (the run is unpartitioned and R >= 3, so mid + 1 or mid - 1 is). */
    size_t twin = mid + 1 < e.nlog && same_accum(&e.log[mid + 1], &e.log[mid]) ? mid + 1 : mid - 1;
    assert_true(same_accum(&e.log[twin], &e.log[mid]));
    int32_t saved_task = e.log[twin].task_index;
    e.log[twin].task_index = e.log[mid].task_index;
    c = verdict(&e, "distinct_tasks", checks);
    assert_false(c->passed);
    assert_non_null(strstr(c->detail, "contributed 2"));
    e.log[twin].task_index = saved_task;
    assert_int_equal(sr_chaos_verify(&e, checks), 1);

    /* A restart that lost a committed step. */
    assert_true(e.nincs >= 2);
    size_t k;
    for (k = 1; k < e.nincs && e.incs[k].rewound; k++) {
    }
    assert_true(k < e.nincs);
    e.min_restore[k] = e.incs[k].restored_step + 1;
    c = verdict(&e, "no_lost_commits", checks);
    assert_false(c->passed);
    assert_non_null(strstr(c->detail, "had been committed"));

    sr_chaos_evidence_free(&e);
    sr_test_rmdir_rf(run_dir);
    free(run_dir);
}

static char *
plan(const char *seed)
{
    char  cmd[1024];
    FILE *p;
    char *out = calloc(1, 65536);
    snprintf(cmd, sizeof(cmd),
             "%s chaos --workers 4 --replicas-to-aggregate 4 --duration 60 --kill-every 1 "
             "--resize 4,3,5 --seed %s --print-plan",
             sr_test_syncrep_bin(), seed);
    p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, 65535, p);
    out[n] = '\0';
    assert_int_equal(pclose(p), 0);
    return out;
}

static void
test_chaos_same_seed_same_schedule(void **state)
{
    (void)state;
    char *a = plan("42"), *b = plan("42"), *c = plan("43");
    assert_true(strlen(a) > 0);
    assert_string_equal(a, b);
    assert_true(strcmp(a, c) != 0);
    /* all three roles, a resize and the one rewind are in a 60 s plan */
    assert_non_null(strstr(a, "coordinator"));
    assert_non_null(strstr(a, "chief"));
    assert_non_null(strstr(a, "worker "));
    assert_non_null(strstr(a, "resume 1"));
    free(a);
    free(b);
    free(c);
}

/* issue 23: workers that declare the chaos tensors as one model and train
 * with sr_client_model_step (--model-api), under kills of all three roles,
 * with backup replicas (R 2 of N 3: each pack may take its own replica
 * set) and packs split into partitions of 256 bytes.  Every invariant
 * holds, and the replay checks each tensor by name: one byte of a member
 * changed in a copy of the evidence (its value, a slot, the not-trainable
 * tensor), or of a pack's padding, is caught, naming it. */
static void
test_chaos_model_api_checks_every_tensor(void **state)
{
    char                  out[600], store[700];
    sr_chaos_evidence     e;
    sr_chaos_check        checks[SR_CHAOS_NCHECKS];
    const sr_chaos_check *c;
    sr_optim              o = harness_recipe();
    (void)state;

    char *dir = run_passing("chaosm",
                            "--workers 3 --replicas-to-aggregate 2 --total-replicas 3 "
                            "--duration 12 --seed 23 --kill-every 1.0 "
                            "--targets coordinator,chief,worker --partition-bytes 256 --model-api",
                            out, sizeof(out));
    snprintf(store, sizeof(store), "%s/report.json", out);
    char *rep = read_file(store);
    assert_non_null(rep);
    assert_non_null(strstr(rep, "\"model_api\": true"));
    free(rep);
    snprintf(store, sizeof(store), "%s/store.db", out);
    assert_sr_ok(sr_chaos_load(store, 23, &o, &e));
    assert_true(e.global_step > 5);
    assert_int_equal(e.nmembers, SR_CHAOS_NTENSORS - 1); /* the sparse one is a variable */
    assert_int_equal(e.nvars, 4);                        /* three packs and the sparse one */
    assert_int_equal(sr_chaos_verify(&e, checks), 1);

    const char *names[] = {"fc1.bias", "gain", "frozen.mask", "block.weight"};
    for (size_t n = 0; n < sizeof(names) / sizeof(names[0]); n++) {
        size_t m;
        int    v;
        for (m = 0; m < e.nmembers && strcmp(e.members[m].name, names[n]) != 0; m++) {
        }
        assert_true(m < e.nmembers);
        for (v = 0; v < e.nvars && strcmp(e.var[v].name, e.members[m].pack) != 0; v++) {
        }
        assert_true(v < e.nvars);
        /* The last byte of the member's value; of block.weight's first slot. */
        int      in_slot = strcmp(names[n], "block.weight") == 0;
        uint8_t *b = (uint8_t *)(in_slot ? e.slot[v][0] : e.value[v]) + e.members[m].offset +
                     e.members[m].nbytes - 1;
        *b ^= 0x01;
        c = verdict(&e, "replay", checks);
        assert_false(c->passed);
        assert_non_null(strstr(c->detail, names[n]));
        if (in_slot) {
            assert_non_null(strstr(c->detail, e.slot_name[0]));
        }
        *b ^= 0x01;
        assert_int_equal(sr_chaos_verify(&e, checks), 1);
    }
    /* A byte between two members (conv1.bias is 32 bytes, its slot 64). */
    for (size_t m = 0; m < e.nmembers; m++) {
        if (strcmp(e.members[m].name, "conv1.bias") != 0) {
            continue;
        }
        for (int v = 0; v < e.nvars; v++) {
            if (strcmp(e.var[v].name, e.members[m].pack) == 0) {
                uint8_t *b = (uint8_t *)e.value[v] + e.members[m].offset + e.members[m].nbytes;
                *b ^= 0x40;
                c = verdict(&e, "replay", checks);
                assert_false(c->passed);
                assert_non_null(strstr(c->detail, e.members[m].pack));
                *b ^= 0x40;
            }
        }
    }
    sr_chaos_evidence_free(&e);
    sr_test_rmdir_rf(dir);
    free(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chaos_same_seed_same_schedule),
        cmocka_unit_test(test_chaos_30s_all_roles_resize_passes),
        cmocka_unit_test(test_chaos_verifier_catches_each_corruption),
        cmocka_unit_test(test_chaos_checkpoint_every_5_partitioned_passes),
        cmocka_unit_test(test_chaos_checkpoint_budget_passes_and_reports_losses),
        cmocka_unit_test(test_chaos_async_commit_passes),
        cmocka_unit_test(test_chaos_adamw_cosine_clip_passes),
        cmocka_unit_test(test_chaos_elastic_loss_join_ctl_resize_passes),
        cmocka_unit_test(test_chaos_model_api_checks_every_tensor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
