/* The checkpoint policy (issue 28) on injected times: the fixed interval,
 * the budget's k from measured costs (sync: the commit's own time; async:
 * the overlapped steps' slow-down, the writer's time until a clean step
 * exists), k following changed costs, the two bounds, and the measured
 * overhead. */
#include "sr_test.h"

#include <string.h>

#include "coordinator/ckpt_policy.h"

#define MS 1000000LL

/* A --commit sync coordinator: each step takes step_ms; a due step is
 * committed at once, its commit (commit_us) holding the next step back;
 * every pass_every-th commit (0: never) the store's WAL checkpoint thread
 * has spent pass_us beside the steps since the commit before.  Returns the
 * number of commits; *now advances; *max_k (when not NULL) is the largest
 * interval seen after a pass. */
static int
run_sync_passes(sr_ckpt *p, int64_t *step, int64_t *now, int nsteps, int64_t step_ms,
                int64_t commit_us, int pass_every, int64_t pass_us, int64_t *max_k)
{
    int commits = 0, passed = 0;
    for (int i = 0; i < nsteps; i++) {
        *now += step_ms * MS;
        ++*step;
        if (sr__ckpt_step(p, *step, *now, 0)) {
            commits++;
            int pass = pass_every > 0 && commits % pass_every == 0;
            sr__ckpt_started(p, *step, *now);
            sr__ckpt_cost(p, commit_us * 1000, pass ? pass_us * 1000 : 0);
            *now += commit_us * 1000;
            passed |= pass;
            if (max_k != NULL && passed && sr__ckpt_interval(p) > *max_k) {
                *max_k = sr__ckpt_interval(p);
            }
        }
    }
    return commits;
}

static int
run_sync(sr_ckpt *p, int64_t *step, int64_t *now, int nsteps, int64_t step_ms, int64_t commit_us)
{
    return run_sync_passes(p, step, now, nsteps, step_ms, commit_us, 0, 0, NULL);
}

static sr_ckpt_opts
budget(double pct)
{
    sr_ckpt_opts o;
    memset(&o, 0, sizeof(o));
    o.budget_pct = pct;
    return o;
}

static void
test_ckpt_fixed_commits_every_k_and_measures(void **state)
{
    sr_ckpt_opts o = budget(0);
    sr_ckpt      p;
    int64_t      step = 0, now = MS;
    (void)state;

    o.every = 3;
    sr__ckpt_init(&p, &o, 0, now);
    assert_int_equal(p.state, SR_CKPT_FIXED);
    assert_int_equal(run_sync(&p, &step, &now, 9, 100, 30000), 3); /* steps 3, 6, 9 */
    assert_int_equal(sr__ckpt_interval(&p), 3);
    assert_near(sr__ckpt_overhead(&p), 0.1, 1e-9); /* 30 ms per 3 x 100 ms */
    assert_int_equal(p.state, SR_CKPT_FIXED);

    o.every = 0; /* only at shutdown */
    sr__ckpt_init(&p, &o, 0, now);
    assert_int_equal(run_sync(&p, &step, &now, 50, 100, 30000), 0);
    assert_int_equal(sr__ckpt_interval(&p), 0);
    assert_near(sr__ckpt_overhead(&p), 0, 0);
}

static void
test_ckpt_budget_sync_probes_then_k_from_costs(void **state)
{
    sr_ckpt_opts o = budget(3);
    sr_ckpt      p;
    int64_t      step = 40, now = MS;
    (void)state;

    sr__ckpt_init(&p, &o, 40, now);
    assert_int_equal(p.state, SR_CKPT_PROBE);
    assert_int_equal(sr__ckpt_interval(&p), 1);
    /* The first step is committed to measure C; the second measures T
     * without the 30 ms its predecessor's commit held it. */
    assert_int_equal(run_sync(&p, &step, &now, 1, 100, 30000), 1);
    assert_int_equal(p.state, SR_CKPT_PROBE);
    assert_int_equal(run_sync(&p, &step, &now, 1, 100, 30000), 0);
    assert_int_equal(p.state, SR_CKPT_STEADY);
    assert_near(p.t_ns, 100.0 * MS, 1);
    /* 30 ms within 3 % of 100 ms steps: every ceil(30 / 3) = 10 steps. */
    assert_int_equal(sr__ckpt_interval(&p), 10);
    assert_int_equal(run_sync(&p, &step, &now, 9, 100, 30000), 1); /* step 51 */
    assert_int_equal(p.last_step, 51);
    assert_int_equal(run_sync(&p, &step, &now, 100, 100, 30000), 10);
    assert_near(sr__ckpt_overhead(&p), 0.03, 1e-3);
}

static void
test_ckpt_budget_small_model_commits_every_step(void **state)
{
    sr_ckpt_opts o = budget(3);
    sr_ckpt      p;
    int64_t      step = 0, now = MS;
    (void)state;

    /* A 4 KiB model: 0.1 ms commits, 10 ms steps: 1 % each step. */
    sr__ckpt_init(&p, &o, 0, now);
    int n = run_sync(&p, &step, &now, 200, 10, 100);
    assert_int_equal(n, 200);
    assert_int_equal(sr__ckpt_interval(&p), 1);
    assert_near(sr__ckpt_overhead(&p), 0.01, 1e-6);
}

static void
test_ckpt_budget_k_follows_changed_costs(void **state)
{
    sr_ckpt_opts o = budget(3);
    sr_ckpt      p;
    int64_t      step = 0, now = MS;
    (void)state;

    sr__ckpt_init(&p, &o, 0, now);
    run_sync(&p, &step, &now, 100, 100, 30000);
    assert_int_equal(sr__ckpt_interval(&p), 10);
    run_sync(&p, &step, &now, 600, 100, 60000); /* the disk got slower */
    assert_int_equal(sr__ckpt_interval(&p), 20);
    run_sync(&p, &step, &now, 300, 50, 60000); /* and the steps faster */
    assert_int_equal(sr__ckpt_interval(&p), 40);
    run_sync(&p, &step, &now, 300, 100, 3000); /* a faster disk */
    assert_int_equal(sr__ckpt_interval(&p), 1);
}

static void
test_ckpt_budget_bounds_steps_and_seconds(void **state)
{
    sr_ckpt_opts o = budget(1);
    sr_ckpt      p;
    int64_t      step = 0, now = MS;
    (void)state;

    o.max_steps = 8; /* the budget alone would say ceil(50 / 1) = 50 */
    sr__ckpt_init(&p, &o, 0, now);
    run_sync(&p, &step, &now, 20, 100, 50000);
    assert_int_equal(sr__ckpt_interval(&p), 8);
    assert_int_equal(run_sync(&p, &step, &now, 80, 100, 50000), 10);

    o.max_steps = 0;
    o.max_ns = 1000 * MS; /* at least every second: every 10 steps of 100 ms */
    sr__ckpt_init(&p, &o, 0, now);
    run_sync(&p, &step, &now, 20, 100, 50000);
    assert_int_equal(sr__ckpt_interval(&p), 50);
    int64_t before = p.last_step;
    int     n = run_sync(&p, &step, &now, 100, 100, 50000);
    assert_true(n >= 9 && n <= 10);
    assert_true(p.last_step - before <= 100);
    assert_true(now - p.last_ns < 1100 * MS);
}

static void
test_ckpt_budget_async_measures_overlapped_slowdown(void **state)
{
    sr_ckpt_opts o = budget(3);
    sr_ckpt      p;
    int64_t      step = 0, now = MS;
    (void)state;

    o.async = 1;
    sr__ckpt_init(&p, &o, 0, now);
    /* Step 1 is committed (probe); the writer takes 200 ms and overlaps
     * steps 2 and 3, which take 130 ms instead of 100. */
    now += 100 * MS;
    assert_true(sr__ckpt_step(&p, ++step, now, 0));
    sr__ckpt_started(&p, step, now);
    now += 130 * MS;
    assert_true(sr__ckpt_step(&p, ++step, now, 1)); /* still probing */
    now += 130 * MS;
    sr__ckpt_step(&p, ++step, now, 1);
    sr__ckpt_cost(&p, 200 * MS, 0);
    /* No clean step yet: the next start judges by the writer's 200 ms. */
    sr__ckpt_started(&p, step, now);
    assert_near(p.c_ns, 200.0 * MS, 1);
    assert_int_equal(p.state, SR_CKPT_STEADY);
    int64_t k_writer = sr__ckpt_interval(&p);
    assert_true(k_writer >= 50); /* 200 ms against 3 % of ~130 ms */
    /* Its steps: two overlapped at 130 ms, then clean ones at 100 ms. */
    now += 130 * MS;
    assert_false(sr__ckpt_step(&p, ++step, now, 1));
    now += 130 * MS;
    sr__ckpt_step(&p, ++step, now, 1);
    sr__ckpt_cost(&p, 200 * MS, 0);
    for (int i = 0; i < 4; i++) {
        now += 100 * MS;
        sr__ckpt_step(&p, ++step, now, 0);
    }
    assert_false(p.ovl_open);
    /* T from the clean steps only; this commit's C is the slow-down,
     * 2 x 30 ms, far below the writer's time (EWMA: 200 + (60 - 200) / 4). */
    assert_true(p.t_ns >= 100.0 * MS && p.t_ns < 110.0 * MS);
    assert_near(p.c_ns, 165.0 * MS, 1);
    /* ... and k falls toward ceil(60 / 3) = 20. */
    for (int round = 0; round < 30; round++) {
        while (!sr__ckpt_step(&p, ++step, now += 100 * MS, 0)) {
        }
        sr__ckpt_started(&p, step, now);
        for (int i = 0; i < 2; i++) {
            sr__ckpt_step(&p, ++step, now += 130 * MS, 1);
        }
        sr__ckpt_cost(&p, 200 * MS, 0);
    }
    assert_near(p.c_ns, 60.0 * MS, 1.0 * MS);
    /* 20, or 21 while the EWMA still holds a trace of the writer's time. */
    assert_in_range(sr__ckpt_interval(&p), 20, 21);
    assert_near(sr__ckpt_overhead(&p), 0.03, 0.005);
}

static void
test_ckpt_one_pause_is_not_a_step_time(void **state)
{
    sr_ckpt_opts o = budget(3);
    sr_ckpt      p;
    int64_t      step = 0, now = MS;
    (void)state;

    sr__ckpt_init(&p, &o, 0, now);
    run_sync(&p, &step, &now, 50, 100, 30000);
    assert_int_equal(sr__ckpt_interval(&p), 10);
    now += 60000 * MS; /* a minute with no worker */
    run_sync(&p, &step, &now, 1, 100, 30000);
    /* Counted as 4 x 100 ms at most: T about 175 ms, not 15 s. */
    assert_true(p.t_ns < 200.0 * MS);
    assert_true(sr__ckpt_interval(&p) >= 5);
    assert_string_equal(sr__ckpt_state_name(p.state), "steady");
    assert_string_equal(sr__ckpt_state_name(SR_CKPT_PROBE), "probe");
    assert_string_equal(sr__ckpt_state_name(SR_CKPT_FIXED), "fixed");
}

/* sync: a WAL checkpoint pass (13 ms, every 20th commit) is shared among
 * the commits whose pages it copied: C = 0.1 + 13 / 20 = 0.75 ms against
 * 1 ms steps gives k = 25, steadily.  Charged whole to the commit it
 * followed, it made C jump by a quarter of 13 ms at each pass (k above
 * 100, then decaying); and the pass, not on the step's path, is not taken
 * out of the next step's time. */
static void
test_ckpt_budget_sync_shares_wal_checkpoint_passes(void **state)
{
    sr_ckpt_opts o = budget(3);
    sr_ckpt      p;
    int64_t      step = 0, now = MS, max_k = 0;
    (void)state;

    sr__ckpt_init(&p, &o, 0, now);
    run_sync_passes(&p, &step, &now, 20000, 1, 100, 20, 13000, &max_k);
    assert_in_range(sr__ckpt_interval(&p), 24, 26);
    assert_in_range(max_k, 24, 30);
    assert_near(p.t_ns, 1.0 * MS, 0.01 * MS);
    assert_near(sr__ckpt_overhead(&p), 0.03, 0.003);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ckpt_fixed_commits_every_k_and_measures),
        cmocka_unit_test(test_ckpt_budget_sync_probes_then_k_from_costs),
        cmocka_unit_test(test_ckpt_budget_small_model_commits_every_step),
        cmocka_unit_test(test_ckpt_budget_k_follows_changed_costs),
        cmocka_unit_test(test_ckpt_budget_bounds_steps_and_seconds),
        cmocka_unit_test(test_ckpt_budget_async_measures_overlapped_slowdown),
        cmocka_unit_test(test_ckpt_one_pause_is_not_a_step_time),
        cmocka_unit_test(test_ckpt_budget_sync_shares_wal_checkpoint_passes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
