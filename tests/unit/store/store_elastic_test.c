/* store_elastic.c (issue 26): the replicas each step averaged over, committed
 * with the step and dropped by a rewind, and the ctl changes, durable. */
#include "store_test_util.h"

/* Commit steps 1..4 of one variable, each with its step_replicas row
 * (step g - 1 averaged over 4 - g replicas... down to 1). */
static void
commit_four(sr_store *st, int64_t id)
{
    float v[2] = {1, 2};
    for (int64_t g = 1; g <= 4; g++) {
        sr_store_tensor        t = {.var_id = id, .data = v, .len_bytes = sizeof(v)};
        sr_store_step_replicas r = {g - 1, (int32_t)(5 - g), 4, 4, 1, (int32_t)(5 - g)};
        sr_store_commit        c = {
                   .global_step = g, .tensors = &t, .ntensors = 1, .replicas = &r, .nreplicas = 1};
        assert_sr_ok(sr_store_commit_step(st, &c));
    }
}

static void
test_store_step_replicas_commit_with_step_and_rewind_drops_them(void **state)
{
    store_fixture          *f = *state;
    sr_store               *st = open_small(f->path, 64, 5);
    sr_store_step_replicas *r = NULL;
    int64_t                 shape[1] = {2}, id;
    size_t                  n;

    assert_sr_ok(sr_store_declare(st, "w", SR_FLOAT32, 1, shape, 1, NULL, 8, &id, NULL));
    assert_sr_ok(sr_store_set_ready(st));
    commit_four(st, id);
    assert_sr_ok(sr_store_read_step_replicas(st, 0, 10, &r, &n));
    assert_int_equal(n, 4);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(r[i].step, (int64_t)i);
        assert_int_equal(r[i].replicas, 4 - (int)i);
        assert_int_equal(r[i].replicas_open, 4);
        assert_int_equal(r[i].total, 4);
        assert_int_equal(r[i].min_replicas, 1);
        assert_int_equal(r[i].live, 4 - (int)i);
    }
    free(r);
    /* Rewind to step 2: the rows of steps 2 and 3 (applied after it) go. */
    assert_sr_ok(sr_store_rewind(st, 2));
    assert_sr_ok(sr_store_read_step_replicas(st, 0, 10, &r, &n));
    assert_int_equal(n, 2);
    assert_int_equal(r[1].step, 1);
    free(r);
    sr_store_close(st);
}

/* A failed commit (a bad tensor) writes no step_replicas row either. */
static void
test_store_step_replicas_failed_commit_writes_none(void **state)
{
    store_fixture          *f = *state;
    sr_store               *st = open_small(f->path, 64, 3);
    sr_store_step_replicas *r = NULL, row = {0, 2, 3, 3, 2, 2};
    int64_t                 shape[1] = {2}, id;
    float                   v[2] = {1, 2};
    size_t                  n;

    assert_sr_ok(sr_store_declare(st, "w", SR_FLOAT32, 1, shape, 1, NULL, 8, &id, NULL));
    assert_sr_ok(sr_store_set_ready(st));
    sr_store_tensor bad = {.var_id = id, .data = v, .len_bytes = 4}; /* short */
    sr_store_commit c = {
        .global_step = 1, .tensors = &bad, .ntensors = 1, .replicas = &row, .nreplicas = 1};
    assert_sr_err(sr_store_commit_step(st, &c), SR_EINVAL);
    assert_sr_ok(sr_store_read_step_replicas(st, 0, 10, &r, &n));
    assert_int_equal(n, 0);
    free(r);
    sr_store_close(st);
}

static void
test_store_ctl_changes_are_durable_in_order(void **state)
{
    store_fixture       *f = *state;
    sr_store            *st = open_small(f->path, 64, 3);
    sr_store_ctl_change  a = {0, 1, 5, 1000, "replicas_to_aggregate", 3, 2};
    sr_store_ctl_change  b = {0, 2, 9, 2000, "learning_rate", 0.5, 0.25};
    sr_store_ctl_change *l = NULL;
    size_t               n;

    assert_sr_ok(sr_store_add_ctl_change(st, &a));
    assert_sr_ok(sr_store_add_ctl_change(st, &b));
    sr_store_close(st);
    st = open_small(f->path, 64, 3);
    assert_sr_ok(sr_store_list_ctl_changes(st, &l, &n));
    assert_int_equal(n, 2);
    assert_true(l[0].id < l[1].id);
    assert_string_equal(l[0].key, "replicas_to_aggregate");
    assert_int_equal(l[0].incarnation, 1);
    assert_int_equal(l[0].step, 5);
    assert_int_equal(l[0].at_ms, 1000);
    assert_true(l[0].base == 3 && l[0].value == 2);
    assert_string_equal(l[1].key, "learning_rate");
    assert_true(l[1].base == 0.5 && l[1].value == 0.25);
    free(l);
    /* An empty key is refused and writes nothing. */
    sr_store_ctl_change e = {0};
    assert_sr_err(sr_store_add_ctl_change(st, &e), SR_EINVAL);
    assert_sr_ok(sr_store_list_ctl_changes(st, &l, &n));
    assert_int_equal(n, 2);
    free(l);
    sr_store_close(st);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_store_step_replicas_commit_with_step_and_rewind_drops_them, store_fixture_setup,
            store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_store_step_replicas_failed_commit_writes_none,
                                        store_fixture_setup, store_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_store_ctl_changes_are_durable_in_order,
                                        store_fixture_setup, store_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
