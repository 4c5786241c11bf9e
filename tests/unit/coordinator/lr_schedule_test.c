/* The learning rate of a step (issue 25): warm-up, constant, step, cosine,
 * linear against their formulas, the floor after --decay-steps, and the
 * refusals of settings that do not fit. */
#include "sr_test.h"

#include <math.h>
#include <string.h>

#include "coordinator/lr_schedule.h"

static sr_lr_sched
sched(int kind)
{
    sr_lr_sched s;
    memset(&s, 0, sizeof(s));
    s.kind = kind;
    s.base = 0.1;
    s.step_gamma = 0.1;
    return s;
}

static void
test_lr_constant_and_warmup(void **state)
{
    sr_lr_sched s = sched(SR_LR_CONSTANT);
    (void)state;

    assert_near(sr__lr_at(&s, 0), 0.1, 0); /* the first update uses the initial rate */
    assert_near(sr__lr_at(&s, 123456), 0.1, 0);
    s.warmup_steps = 4; /* 0, 0.025, 0.05, 0.075, then 0.1 */
    assert_near(sr__lr_at(&s, 0), 0.0, 0);
    assert_near(sr__lr_at(&s, 1), 0.1 * 1 / 4, 0);
    assert_near(sr__lr_at(&s, 3), 0.1 * 3 / 4, 0);
    assert_near(sr__lr_at(&s, 4), 0.1, 0);
    assert_near(sr__lr_at(&s, -5), 0.0, 0); /* read as step 0 */
}

static void
test_lr_step_multiplies_every_s(void **state)
{
    sr_lr_sched s = sched(SR_LR_STEP);
    (void)state;

    s.step_every = 3;
    s.step_gamma = 0.5;
    assert_near(sr__lr_at(&s, 0), 0.1, 0);
    assert_near(sr__lr_at(&s, 2), 0.1, 0);
    assert_near(sr__lr_at(&s, 3), 0.05, 0);
    assert_near(sr__lr_at(&s, 8), 0.025, 0);
    s.warmup_steps = 2; /* the decay counts from the end of the warm-up */
    assert_near(sr__lr_at(&s, 1), 0.05, 0);
    assert_near(sr__lr_at(&s, 4), 0.1, 0);
    assert_near(sr__lr_at(&s, 5), 0.05, 0);
}

static void
test_lr_cosine_and_linear_reach_the_floor(void **state)
{
    sr_lr_sched c = sched(SR_LR_COSINE), l = sched(SR_LR_LINEAR);
    (void)state;

    c.decay_steps = l.decay_steps = 10;
    c.lr_min = l.lr_min = 0.01;
    assert_near(sr__lr_at(&c, 0), 0.1, 1e-17);
    assert_near(sr__lr_at(&c, 5), 0.01 + 0.09 * 0.5, 1e-17);
    assert_near(sr__lr_at(&c, 3), 0.01 + 0.09 * (1 + cos(M_PI * 3 / 10)) / 2, 1e-17);
    assert_near(sr__lr_at(&c, 10), 0.01, 0);
    assert_near(sr__lr_at(&c, 1000), 0.01, 0); /* stays at the floor, unlike torch's period */
    assert_near(sr__lr_at(&l, 0), 0.1, 0);
    assert_near(sr__lr_at(&l, 4), 0.01 + 0.09 * 0.6, 1e-17);
    assert_near(sr__lr_at(&l, 10), 0.01, 0);
    assert_near(sr__lr_at(&l, 11), 0.01, 0);
    c.warmup_steps = 5; /* warm-up to the base, then the decay over T steps */
    assert_near(sr__lr_at(&c, 0), 0.0, 0);
    assert_near(sr__lr_at(&c, 5), 0.1, 1e-17);
    assert_near(sr__lr_at(&c, 10), 0.01 + 0.09 * 0.5, 1e-17);
    assert_near(sr__lr_at(&c, 15), 0.01, 0);
}

static void
test_lr_check_and_names(void **state)
{
    sr_lr_sched s = sched(SR_LR_COSINE);
    int         k = -1;
    (void)state;

    assert_int_equal(sr__lr_check(&s), SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), "--decay-steps"));
    s.decay_steps = 5;
    assert_sr_ok(sr__lr_check(&s));
    s.lr_min = 0.5;
    assert_int_equal(sr__lr_check(&s), SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), "--lr-min"));
    s = sched(SR_LR_STEP);
    assert_int_equal(sr__lr_check(&s), SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), "--step-every"));
    s.step_every = 1;
    s.warmup_steps = -1;
    assert_int_equal(sr__lr_check(&s), SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), "--warmup-steps"));
    for (int i = SR_LR_CONSTANT; i <= SR_LR_LINEAR; i++) {
        assert_sr_ok(sr__lr_parse(sr__lr_name(i), &k));
        assert_int_equal(k, i);
    }
    assert_int_equal(sr__lr_parse("exponential", &k), SR_EINVAL);
    assert_non_null(strstr(sr_errdetail(), "exponential"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lr_constant_and_warmup),
        cmocka_unit_test(test_lr_step_multiplies_every_s),
        cmocka_unit_test(test_lr_cosine_and_linear_reach_the_floor),
        cmocka_unit_test(test_lr_check_and_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
