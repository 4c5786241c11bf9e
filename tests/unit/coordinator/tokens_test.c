/* The token queue: FIFO, growth across the ring's end, unget at the front. */
#include "sr_test.h"

#include "coordinator/coord_int.h"

static void
test_tokens_fifo_across_growth(void **state)
{
    sr_tokens q;
    int64_t   v;
    (void)state;

    sr__tokens_init(&q);
    assert_int_equal(sr__tokens_take(&q, &v), -1);
    assert_sr_ok(sr__tokens_put(&q, 0, 10));
    for (int i = 0; i < 7; i++) {
        assert_int_equal(sr__tokens_take(&q, &v), 0);
        assert_int_equal(v, 0);
    }
    /* The ring now wraps; growing must keep the order. */
    assert_sr_ok(sr__tokens_put(&q, 1, 20));
    assert_int_equal(q.len, 23);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sr__tokens_take(&q, &v), 0);
        assert_int_equal(v, 0);
    }
    for (int i = 0; i < 20; i++) {
        assert_int_equal(sr__tokens_take(&q, &v), 0);
        assert_int_equal(v, 1);
    }
    assert_int_equal(sr__tokens_take(&q, &v), -1);
    sr__tokens_destroy(&q);
}

static void
test_tokens_unget_goes_first(void **state)
{
    sr_tokens q;
    int64_t   v;
    (void)state;

    sr__tokens_init(&q);
    assert_sr_ok(sr__tokens_put(&q, 5, 2));
    assert_sr_ok(sr__tokens_unget(&q, 4));
    assert_int_equal(sr__tokens_take(&q, &v), 0);
    assert_int_equal(v, 4);
    assert_int_equal(sr__tokens_take(&q, &v), 0);
    assert_int_equal(v, 5);
    sr__tokens_destroy(&q);
}

/* A worker that must wait for a later step's token takes the oldest one of
 * that step and leaves the older ones, in order, to the others. */
static void
test_tokens_take_min_leaves_older_ones_in_order(void **state)
{
    sr_tokens q;
    int64_t   v;
    (void)state;

    sr__tokens_init(&q);
    for (int i = 0; i < 15; i++) { /* move the ring's head off 0 */
        assert_sr_ok(sr__tokens_put(&q, 0, 1));
        assert_int_equal(sr__tokens_take(&q, &v), 0);
    }
    assert_sr_ok(sr__tokens_put(&q, 3, 2));
    assert_sr_ok(sr__tokens_put(&q, 4, 2));
    assert_int_equal(sr__tokens_take_min(&q, 5, &v), -1);
    assert_int_equal(q.len, 4);
    assert_int_equal(sr__tokens_take_min(&q, 4, &v), 0);
    assert_int_equal(v, 4);
    assert_int_equal(sr__tokens_take_min(&q, 0, &v), 0);
    assert_int_equal(v, 3);
    assert_int_equal(sr__tokens_take(&q, &v), 0);
    assert_int_equal(v, 3);
    assert_int_equal(sr__tokens_take(&q, &v), 0);
    assert_int_equal(v, 4);
    assert_int_equal(sr__tokens_take(&q, &v), -1);
    sr__tokens_destroy(&q);
}

static void
test_tokens_drop_below_takes_the_oldest_only(void **state)
{
    sr_tokens q;
    int64_t   v;
    (void)state;

    sr__tokens_init(&q);
    assert_sr_ok(sr__tokens_put(&q, 3, 2));
    assert_sr_ok(sr__tokens_put(&q, 5, 1));
    assert_sr_ok(sr__tokens_put(&q, 6, 2));
    assert_int_equal(sr__tokens_drop_below(&q, 5), 2);
    assert_int_equal(sr__tokens_drop_below(&q, 5), 0);
    assert_int_equal(q.len, 3);
    assert_int_equal(sr__tokens_take(&q, &v), 0);
    assert_int_equal(v, 5);
    assert_int_equal(sr__tokens_drop_below(&q, 100), 2);
    assert_int_equal(sr__tokens_take(&q, &v), -1);
    sr__tokens_destroy(&q);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens_fifo_across_growth),
        cmocka_unit_test(test_tokens_unget_goes_first),
        cmocka_unit_test(test_tokens_take_min_leaves_older_ones_in_order),
        cmocka_unit_test(test_tokens_drop_below_takes_the_oldest_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
