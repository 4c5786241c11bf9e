/*
 * Never a silent change (issue 22): a store keeps its job's recipe (the
 * optimizer and its settings, the learning rate, ...).  A restart without
 * them continues the job as it was; one that gives another value is refused,
 * before the store counts an incarnation, unless --reconfigure; options the
 * optimizer does not use are refused; and a variable is added to a ready
 * model only with --allow-new-variables.  docs/operations.md, "Restarting".
 */
#include "sr_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "store/store.h"
#include "syncrep/syncrep.h"

/* `syncrep coordinator --store S --bind E --replicas-to-aggregate 1` plus
 * up to four more arguments (NULL ends them), run until it exits; its wait
 * status.  Output into log. */
static int
run_coordinator(const sr_harness *h, const char *log, const char *a1, const char *a2,
                const char *a3, const char *a4)
{
    char *argv[] = {(char *)sr_test_syncrep_bin(),
                    "coordinator",
                    "--store",
                    (char *)h->store,
                    "--bind",
                    (char *)h->endpoint,
                    "--replicas-to-aggregate",
                    "1",
                    (char *)a1,
                    (char *)a2,
                    (char *)a3,
                    (char *)a4,
                    NULL};
    pid_t pid = sr_test_spawn(argv, log);
    assert_true(pid > 0);
    return sr_test_reap(pid, 20000);
}

/* The store's incarnation count and its config text (into cfg). */
static uint64_t
store_incarnation(const sr_harness *h, char *cfg, size_t cap)
{
    sr_store     *st;
    sr_store_opts o;
    sr_store_info info;
    char         *text = NULL;

    memset(&o, 0, sizeof(o));
    o.readonly = 1;
    assert_sr_ok(sr_store_open(h->store, &o, &st));
    assert_sr_ok(sr_store_get_info(st, &info));
    assert_sr_ok(sr_store_get_config(st, &text));
    snprintf(cfg, cap, "%s", text);
    free(text);
    sr_store_close(st);
    return info.incarnation;
}

/* One worker (R = 1) steps the scalar x `steps` times. */
static void
train(sr_harness *h, int steps, int declare)
{
    sr_client *c = sr_harness_client(h, 0);
    double     x = 1.0, g = 1.0;

    if (declare) {
        assert_sr_ok(sr_client_declare(c, "x", SR_FLOAT64, 0, NULL, &x));
        assert_sr_ok(sr_client_ready(c));
    } else {
        assert_sr_ok(sr_client_declare(c, "x", SR_FLOAT64, 0, NULL, NULL));
        assert_sr_ok(sr_client_ready(c));
    }
    for (int i = 0; i < steps; i++) {
        assert_sr_ok(sr_client_pull(c, "x", &x, sizeof(x)));
        assert_sr_ok(sr_client_push(c, "x", &g, sizeof(g)));
        assert_sr_ok(sr_client_step(c));
    }
    sr_client_close(c);
}

/* Trained with Adam; restarted without --optimizer (or --learning-rate) it
 * goes on as Adam; with --optimizer sgd it is refused, naming both, and the
 * store is left as it was; with --reconfigure as well it starts, saying
 * what changed, and the incarnation's config records it. */
static void
test_config_restart_keeps_the_recipe_changes_only_with_reconfigure(void **state)
{
    sr_harness h;
    char       cfg[2048], log2[600];
    int        ws;
    (void)state;

    sr_harness_init(&h, "recipe");
    snprintf(log2, sizeof(log2), "%s/refused.log", h.dir);
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--optimizer", "adam", "--learning-rate",
                     "0.25", "--beta1", "0.8", NULL);
    train(&h, 2, 1);
    assert_int_equal(sr_harness_stop(&h), 0);
    assert_int_equal(store_incarnation(&h, cfg, sizeof(cfg)), 1);
    assert_non_null(strstr(cfg, "\"optimizer\":\"adam\""));
    assert_non_null(strstr(cfg, "\"beta1\":0.8"));

    /* No --optimizer, no --learning-rate: the store's. */
    sr_harness_start(&h, "--replicas-to-aggregate", "1", NULL);
    train(&h, 1, 0);
    assert_int_equal(sr_harness_stop(&h), 0);
    assert_int_equal(store_incarnation(&h, cfg, sizeof(cfg)), 2);
    assert_non_null(strstr(cfg, "\"optimizer\":\"adam\""));
    assert_non_null(strstr(cfg, "\"learning_rate\":0.25"));
    assert_non_null(strstr(cfg, "\"beta1\":0.8"));
    assert_int_equal(sr_harness_log_count(&h, "optimizer=adam"), 2);
    assert_int_equal(sr_harness_log_count(&h, "optimizer=sgd"), 0);

    /* Another optimizer, another learning rate: refused, nothing written. */
    ws = run_coordinator(&h, log2, "--optimizer", "sgd", NULL, NULL);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
    assert_true(
        sr_harness_file_count(log2, "trained with --optimizer adam, given --optimizer sgd"));
    ws = run_coordinator(&h, log2, "--learning-rate", "0.5", NULL, NULL);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
    assert_true(sr_harness_file_count(
        log2, "trained with --learning-rate 0.25, given --learning-rate 0.5"));
    /* The same values given again are no change. */
    assert_int_equal(store_incarnation(&h, cfg, sizeof(cfg)), 2);

    /* --momentum with sgd or adam, --beta1 with sgd: refused. */
    ws = run_coordinator(&h, log2, "--momentum", "0.9", NULL, NULL);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
    assert_true(sr_harness_file_count(
        log2, "--momentum applies to --optimizer momentum only (the optimizer "
              "is adam)"));
    ws = run_coordinator(&h, log2, "--optimizer", "sgd", "--beta1", "0.5");
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
    assert_int_equal(store_incarnation(&h, cfg, sizeof(cfg)), 2);

    /* With --reconfigure: applied, logged, recorded. */
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--optimizer", "sgd", "--reconfigure",
                     NULL);
    train(&h, 1, 0);
    assert_int_equal(sr_harness_stop(&h), 0);
    assert_int_equal(sr_harness_log_count(&h, "COORD-RECONFIGURE"), 1);
    assert_int_equal(sr_harness_log_count(&h, "optimizer adam->sgd"), 1);
    assert_int_equal(sr_harness_log_count(&h, "optimizer=sgd"), 1);
    assert_int_equal(store_incarnation(&h, cfg, sizeof(cfg)), 3);
    assert_non_null(strstr(cfg, "\"optimizer\":\"sgd\""));
    assert_non_null(strstr(cfg, "\"reconfigured\":\"optimizer adam->sgd\""));
    sr_harness_fini(&h);
}

/* A new store: --momentum with sgd refused before the store is made, and
 * --learning-rate is required. */
static void
test_config_new_store_momentum_with_sgd_refused(void **state)
{
    sr_harness h;
    char       log2[600];
    int        ws;
    (void)state;

    sr_harness_init(&h, "sgdmom");
    snprintf(log2, sizeof(log2), "%s/refused.log", h.dir);
    ws = run_coordinator(&h, log2, "--learning-rate", "0.1", "--momentum", "0.9");
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
    assert_true(sr_harness_file_count(
        log2, "--momentum applies to --optimizer momentum only (the optimizer "
              "is sgd)"));
    assert_int_equal(access(h.store, F_OK), -1);
    ws = run_coordinator(&h, log2, NULL, NULL, NULL, NULL);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
    assert_true(sr_harness_file_count(log2, "--learning-rate is required"));
    assert_int_equal(access(h.store, F_OK), -1);
    sr_harness_fini(&h);
}

/* A chief declaring a variable the ready model lacks: refused, saying how
 * to opt in, and the model keeps its one variable; with
 * --allow-new-variables the variable is added. */
static void
test_config_new_variable_on_ready_model_needs_the_option(void **state)
{
    sr_harness    h;
    const int64_t shape[2] = {4, 3};
    float         w[12] = {0};
    char          out[4096], log2[600];
    (void)state;

    sr_harness_init(&h, "newvar");
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--learning-rate", "0.5", NULL);
    train(&h, 1, 1);
    sr_client *c = sr_harness_client(&h, 0);
    assert_sr_err(sr_client_declare(c, "w", SR_FLOAT32, 2, shape, w), SR_EINVAL);
    assert_non_null(strstr(sr_client_error(c), "the model is ready"));
    assert_non_null(strstr(sr_client_error(c), "--allow-new-variables"));
    assert_int_equal(sr_harness_status(&h, out, sizeof(out)), 0);
    assert_null(strstr(out, "\"w\""));
    /* A second coordinator without --learning-rate while this one runs:
     * refused for the store in use, not for the learning rate it could not
     * read. */
    snprintf(log2, sizeof(log2), "%s/second.log", h.dir);
    int ws = run_coordinator(&h, log2, NULL, NULL, NULL, NULL);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
    assert_true(sr_harness_file_count(log2, "is in use by another coordinator"));
    assert_false(sr_harness_file_count(log2, "--learning-rate is required"));
    sr_client_close(c);
    assert_int_equal(sr_harness_stop(&h), 0);

    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--allow-new-variables", NULL);
    c = sr_harness_client(&h, 0);
    assert_sr_ok(sr_client_declare(c, "w", SR_FLOAT32, 2, shape, w));
    sr_client_close(c);
    assert_int_equal(sr_harness_stop(&h), 0);
    assert_int_equal(sr_harness_log_count(&h, "(added to a ready model)"), 1);
    sr_harness_fini(&h);
}

/* Drop `,"key":value` from the store's config: a store written before the
 * key was. */
static void
forget_config_keys(const sr_harness *h, const char *const *keys, int n)
{
    sr_store     *st;
    sr_store_opts o;
    char         *text = NULL;

    memset(&o, 0, sizeof(o));
    assert_sr_ok(sr_store_open(h->store, &o, &st));
    assert_sr_ok(sr_store_get_config(st, &text));
    for (int k = 0; k < n; k++) {
        char  pat[64];
        char *p;
        snprintf(pat, sizeof(pat), ",\"%s\":", keys[k]);
        assert_non_null(p = strstr(text, pat));
        size_t e = strcspn(p + 1, ",}") + 1;
        memmove(p, p + e, strlen(p + e) + 1);
    }
    assert_sr_ok(sr_store_set_config(st, text));
    free(text);
    sr_store_close(st);
}

/* issue 25: adam moved epsilon to torch.optim's place (formula 2).  A
 * store its older formula trained (its recipe has neither "optim_formula"
 * nor issue 25's keys) is not continued silently: refused, naming both
 * formulas; with --reconfigure it goes on, recorded.  An sgd store of
 * formula 1 starts as before (sgd's formula did not change). */
static void
test_config_old_adam_formula_needs_reconfigure(void **state)
{
    static const char *const old_keys[] = {"optim_formula", "weight_decay", "lr_schedule"};
    sr_harness               h;
    char                     cfg[2048], log2[600];
    int                      ws;
    (void)state;

    sr_harness_init(&h, "formula");
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--optimizer", "adam", "--learning-rate",
                     "0.25", NULL);
    train(&h, 2, 1);
    assert_int_equal(sr_harness_stop(&h), 0);
    assert_int_equal(store_incarnation(&h, cfg, sizeof(cfg)), 1);
    assert_non_null(strstr(cfg, "\"optim_formula\":2"));
    /* Formula 2 written: a restart is no change. */
    sr_harness_start(&h, "--replicas-to-aggregate", "1", NULL);
    train(&h, 1, 0);
    assert_int_equal(sr_harness_stop(&h), 0);
    assert_int_equal(store_incarnation(&h, cfg, sizeof(cfg)), 2);
    assert_int_equal(sr_harness_log_count(&h, "COORD-RECONFIGURE"), 0);

    forget_config_keys(&h, old_keys, 3);
    snprintf(log2, sizeof(log2), "%s/refused.log", h.dir);
    ws = run_coordinator(&h, log2, NULL, NULL, NULL, NULL);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
    assert_true(sr_harness_file_count(log2, "the store's adam was trained with syncrep's formula "
                                            "1 (epsilon outside the bias correction"));
    assert_true(sr_harness_file_count(log2, "add --reconfigure to go on with it"));
    assert_int_equal(store_incarnation(&h, cfg, sizeof(cfg)), 2); /* nothing written */

    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--reconfigure", NULL);
    train(&h, 1, 0);
    assert_int_equal(sr_harness_stop(&h), 0);
    assert_int_equal(sr_harness_log_count(&h, "optim_formula 1->2"), 1);
    assert_int_equal(store_incarnation(&h, cfg, sizeof(cfg)), 3);
    assert_non_null(strstr(cfg, "\"optim_formula\":2"));
    assert_non_null(strstr(cfg, "\"reconfigured\":\"optim_formula 1->2\""));

    /* sgd of formula 1: no refusal. */
    sr_harness_start(&h, "--replicas-to-aggregate", "1", "--optimizer", "sgd", "--reconfigure",
                     NULL);
    train(&h, 1, 0);
    assert_int_equal(sr_harness_stop(&h), 0);
    forget_config_keys(&h, old_keys, 3);
    sr_harness_start(&h, "--replicas-to-aggregate", "1", NULL);
    train(&h, 1, 0);
    assert_int_equal(sr_harness_stop(&h), 0);
    assert_int_equal(store_incarnation(&h, cfg, sizeof(cfg)), 5);
    assert_null(strstr(cfg, "reconfigured"));
    sr_harness_fini(&h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_restart_keeps_the_recipe_changes_only_with_reconfigure),
        cmocka_unit_test(test_config_new_store_momentum_with_sgd_refused),
        cmocka_unit_test(test_config_new_variable_on_ready_model_needs_the_option),
        cmocka_unit_test(test_config_old_adam_formula_needs_reconfigure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
