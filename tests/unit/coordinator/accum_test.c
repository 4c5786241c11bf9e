/* Accumulators: staleness, averaging inputs, backups, N < R, sparse rows. */
#include "sr_test.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "coordinator/coord_int.h"

static void
test_accum_dense_takes_at_R_and_advances_step(void **state)
{
    sr_accum         a;
    sr_accum_outcome out;
    const float      g1[2] = {1.0f, 2.0f}, g2[2] = {3.0f, 5.0f}, g3[2] = {100.0f, 100.0f};
    (void)state;

    assert_sr_ok(sr__accum_init(&a, SR_FLOAT32, 2, 2, 2, 7));
    assert_sr_ok(sr__accum_push_dense(&a, g1, 7, 0, &out));
    assert_int_equal(out, SR_ACC_ACCEPTED);
    assert_int_equal(a.taken, 0);
    assert_int_equal(a.step, 7);
    assert_sr_ok(sr__accum_push_dense(&a, g2, 7, 1, &out));
    assert_int_equal(out, SR_ACC_ACCEPTED);
    assert_int_equal(a.taken, 1);
    assert_int_equal(a.step, 8); /* advanced at the take */
    /* A backup replica's late gradient for step 7 is stale before the apply. */
    assert_sr_ok(sr__accum_push_dense(&a, g3, 7, 2, &out));
    assert_int_equal(out, SR_ACC_STALE);
    assert_true(((float *)a.sum)[0] == 4.0f && ((float *)a.sum)[1] == 7.0f);
    assert_int_equal(a.contrib[0].task_index, 0);
    assert_int_equal(a.contrib[1].task_index, 1);
    sr__accum_destroy(&a);
}

static void
test_accum_dense_older_and_newer_steps_are_stale(void **state)
{
    sr_accum         a;
    sr_accum_outcome out;
    const double     g[1] = {1.0};
    (void)state;

    assert_sr_ok(sr__accum_init(&a, SR_FLOAT64, 1, 1, 1, 5));
    assert_sr_ok(sr__accum_push_dense(&a, g, 4, 0, &out));
    assert_int_equal(out, SR_ACC_STALE);
    /* Stricter than TensorFlow: a newer step is dropped too. */
    assert_sr_ok(sr__accum_push_dense(&a, g, 6, 0, &out));
    assert_int_equal(out, SR_ACC_STALE);
    assert_int_equal(a.count, 0);
    sr__accum_destroy(&a);
}

static void
test_accum_dense_one_replica_several_batches_when_N_below_R(void **state)
{
    sr_accum         a;
    sr_accum_outcome out;
    const float      g[1] = {2.0f};
    (void)state;

    /* R = 3 from a single worker (task 0) computing three batches. */
    assert_sr_ok(sr__accum_init(&a, SR_FLOAT32, 1, 1, 3, 0));
    for (int i = 0; i < 3; i++) {
        assert_sr_ok(sr__accum_push_dense(&a, g, 0, 0, &out));
        assert_int_equal(out, SR_ACC_ACCEPTED);
    }
    assert_int_equal(a.taken, 1);
    assert_true(((float *)a.sum)[0] == 6.0f);
    sr__accum_reset(&a);
    assert_int_equal(a.count, 0);
    assert_int_equal(a.taken, 0);
    assert_int_equal(a.step, 1);
    sr__accum_destroy(&a);
}

static void
test_accum_sparse_repeats_summed_counted_once_per_push(void **state)
{
    sr_accum         a;
    sr_accum_outcome out;
    /* Variable of 4 rows x 2. */
    const int64_t idx1[3] = {2, 0, 2};
    const float   rows1[6] = {1, 1, 10, 10, 2, 2};
    const int64_t idx2[1] = {2};
    const float   rows2[2] = {4, 4};
    const float  *s;
    (void)state;

    assert_sr_ok(sr__accum_init(&a, SR_FLOAT32, 8, 4, 2, 0));
    assert_sr_ok(sr__accum_push_sparse(&a, idx1, rows1, 3, 0, 0, &out));
    assert_int_equal(out, SR_ACC_ACCEPTED);
    assert_int_equal(a.row_count[2], 1); /* two rows at index 2, one gradient */
    assert_int_equal(a.row_count[0], 1);
    assert_sr_ok(sr__accum_push_sparse(&a, idx2, rows2, 1, 0, 1, &out));
    assert_int_equal(a.taken, 1);
    s = a.sum;
    assert_true(s[0] == 10 && s[1] == 10);
    assert_true(s[4] == 7 && s[5] == 7);
    assert_int_equal(a.row_count[2], 2);
    assert_int_equal(a.ntouched, 2);
    sr__accum_reset(&a);
    for (int i = 0; i < 8; i++) {
        assert_true(s[i] == 0.0f);
    }
    assert_int_equal(a.row_count[2], 0);
    sr__accum_destroy(&a);
}

static void
test_accum_sparse_row_out_of_range_changes_nothing(void **state)
{
    sr_accum         a;
    sr_accum_outcome out;
    const int64_t    idx[2] = {0, 4};
    const int64_t    neg[1] = {-1};
    const float      rows[4] = {1, 1, 1, 1};
    (void)state;

    assert_sr_ok(sr__accum_init(&a, SR_FLOAT32, 8, 4, 2, 0));
    assert_sr_err(sr__accum_push_sparse(&a, idx, rows, 2, 0, 0, &out), SR_EINVAL);
    assert_sr_err(sr__accum_push_sparse(&a, neg, rows, 1, 0, 0, &out), SR_EINVAL);
    assert_int_equal(a.count, 0);
    assert_int_equal(a.mode, SR_ACC_NONE);
    sr__accum_destroy(&a);
}

/* A push with no rows (a partition none of the worker's rows fell into) is
 * a contribution like any other, also as the accumulator's first push. */
static void
test_accum_sparse_empty_push_counts(void **state)
{
    sr_accum         a;
    sr_accum_outcome out;
    const int64_t    idx[1] = {1};
    const float      rows[2] = {2, 3};
    (void)state;

    assert_sr_ok(sr__accum_init(&a, SR_FLOAT32, 8, 4, 2, 0));
    assert_sr_ok(sr__accum_push_sparse(&a, NULL, NULL, 0, 0, 0, &out));
    assert_int_equal(out, SR_ACC_ACCEPTED);
    assert_int_equal(a.count, 1);
    assert_int_equal(a.ntouched, 0);
    assert_sr_ok(sr__accum_push_sparse(&a, idx, rows, 1, 0, 1, &out));
    assert_int_equal(a.taken, 1);
    assert_int_equal(a.ntouched, 1);
    assert_int_equal(a.row_count[1], 1);
    assert_true(((float *)a.sum)[2] == 2.0f && ((float *)a.sum)[3] == 3.0f);
    sr__accum_destroy(&a);
}

static void
test_accum_mixing_dense_and_sparse_in_one_step_is_einval(void **state)
{
    sr_accum         a;
    sr_accum_outcome out;
    const int64_t    idx[1] = {1};
    const float      rows[2] = {1, 1};
    const float      dense[8] = {0};
    (void)state;

    assert_sr_ok(sr__accum_init(&a, SR_FLOAT32, 8, 4, 2, 0));
    assert_sr_ok(sr__accum_push_sparse(&a, idx, rows, 1, 0, 0, &out));
    assert_sr_err(sr__accum_push_dense(&a, dense, 0, 1, &out), SR_EINVAL);
    assert_int_equal(a.count, 1);
    sr__accum_destroy(&a);
}

static void
test_accum_sparse_after_dense_step_starts_from_zero(void **state)
{
    sr_accum         a;
    sr_accum_outcome out;
    const float      dense[4] = {5, 5, 5, 5};
    const int64_t    idx[1] = {0};
    const float      rows[2] = {1, 2};
    (void)state;

    assert_sr_ok(sr__accum_init(&a, SR_FLOAT32, 4, 2, 1, 0));
    assert_sr_ok(sr__accum_push_dense(&a, dense, 0, 0, &out));
    sr__accum_reset(&a);
    assert_sr_ok(sr__accum_push_sparse(&a, idx, rows, 1, 1, 0, &out));
    const float *s = a.sum;
    assert_true(s[0] == 1 && s[1] == 2 && s[2] == 0 && s[3] == 0);
    sr__accum_destroy(&a);
}

/* Sums in the caller's memory (the coordinator hands the previous value
 * over): whatever it held, a dense step starts from its first gradient and
 * a sparse one from zeros; destroy leaves the memory alone; NULL gives the
 * accumulator memory of its own again. */
static void
test_accum_caller_sums_start_clean_and_stay_the_callers(void **state)
{
    sr_accum         a;
    sr_accum_outcome out;
    float            mem[4] = {9, 9, 9, 9};
    const float      dense[4] = {1, 2, 3, 4};
    const int64_t    idx[1] = {1};
    const float      rows[2] = {7, 8};
    (void)state;

    assert_sr_ok(sr__accum_init(&a, SR_FLOAT32, 4, 2, 2, 0));
    sr__accum_set_sum(&a, mem);
    assert_sr_ok(sr__accum_push_dense(&a, dense, 0, 0, &out));
    assert_sr_ok(sr__accum_push_dense(&a, dense, 0, 1, &out));
    assert_true(a.sum == mem && mem[0] == 2 && mem[1] == 4 && mem[2] == 6 && mem[3] == 8);
    sr__accum_reset(&a);
    for (int i = 0; i < 4; i++) {
        mem[i] = 9; /* the previous value, handed over */
    }
    sr__accum_set_sum(&a, mem);
    assert_sr_ok(sr__accum_push_sparse(&a, idx, rows, 1, 1, 0, &out));
    assert_true(mem[0] == 0 && mem[1] == 0 && mem[2] == 7 && mem[3] == 8);
    sr__accum_reset(&a); /* zeroes the touched row, in mem */
    assert_true(mem[2] == 0 && mem[3] == 0);
    sr__accum_set_sum(&a, NULL);
    assert_sr_ok(sr__accum_push_sparse(&a, idx, rows, 1, 1, 0, &out));
    assert_int_equal(out, SR_ACC_ACCEPTED);
    const float *s = a.sum;
    assert_true(s != NULL && s != mem && s[0] == 0 && s[1] == 0 && s[2] == 7 && s[3] == 8);
    assert_true(mem[2] == 0); /* no longer written */
    sr__accum_destroy(&a);    /* frees its own sums only: mem is on the stack */
}

/* R replicas are R tasks: with share 1 a task's second gradient for the
 * open step is not counted, whatever else it would be. */
static void
test_accum_task_beyond_its_share_is_not_counted(void **state)
{
    sr_accum         a;
    sr_accum_outcome out;
    const float      g[1] = {1.0f}, big[1] = {100.0f};
    (void)state;

    assert_sr_ok(sr__accum_init(&a, SR_FLOAT32, 1, 1, 3, 4));
    sr__accum_set_rules(&a, 1, 0);
    assert_sr_ok(sr__accum_push_dense(&a, g, 4, 0, &out));
    assert_int_equal(out, SR_ACC_ACCEPTED);
    assert_sr_ok(sr__accum_push_dense(&a, g, 4, 1, &out));
    assert_int_equal(out, SR_ACC_ACCEPTED);
    int over = 0;
    assert_int_equal(sr__accum_would_accept(&a, 4, 0, SR_ACC_DENSE, &over), 0);
    assert_int_equal(over, 1);
    over = 0;
    assert_int_equal(sr__accum_would_accept(&a, 4, 2, SR_ACC_DENSE, &over), 1);
    assert_int_equal(over, 0);
    /* Task 0 again, dense or sparse: not counted, nothing changes. */
    assert_sr_ok(sr__accum_push_dense(&a, big, 4, 0, &out));
    assert_int_equal(out, SR_ACC_OVER_SHARE);
    assert_int_equal(a.count, 2);
    assert_int_equal(a.taken, 0);
    assert_true(((float *)a.sum)[0] == 2.0f);
    /* A stale push is stale, not beyond its share. */
    assert_sr_ok(sr__accum_push_dense(&a, big, 3, 0, &out));
    assert_int_equal(out, SR_ACC_STALE);
    assert_sr_ok(sr__accum_push_dense(&a, g, 4, 2, &out));
    assert_int_equal(a.taken, 1);
    assert_true(((float *)a.sum)[0] == 3.0f);
    assert_int_equal(a.contrib[0].task_index, 0);
    assert_int_equal(a.contrib[1].task_index, 1);
    assert_int_equal(a.contrib[2].task_index, 2);
    /* The next step: task 0 has a share again. */
    sr__accum_reset(&a);
    assert_sr_ok(sr__accum_push_dense(&a, g, 5, 0, &out));
    assert_int_equal(out, SR_ACC_ACCEPTED);
    sr__accum_destroy(&a);
}

/* N < R: each task gives up to ceil(R / N) gradients (R = 3, N = 2: 2). */
static void
test_accum_share_above_one_when_N_below_R(void **state)
{
    sr_accum         a;
    sr_accum_outcome out;
    const int64_t    idx[1] = {0};
    const float      rows[1] = {1.0f};
    (void)state;

    assert_sr_ok(sr__accum_init(&a, SR_FLOAT32, 2, 2, 3, 0));
    sr__accum_set_rules(&a, 2, 0);
    assert_sr_ok(sr__accum_push_sparse(&a, idx, rows, 1, 0, 1, &out));
    assert_int_equal(out, SR_ACC_ACCEPTED);
    assert_sr_ok(sr__accum_push_sparse(&a, idx, rows, 1, 0, 1, &out));
    assert_int_equal(out, SR_ACC_ACCEPTED);
    assert_sr_ok(sr__accum_push_sparse(&a, idx, rows, 1, 0, 1, &out));
    assert_int_equal(out, SR_ACC_OVER_SHARE);
    assert_int_equal(a.row_count[0], 2);
    assert_sr_ok(sr__accum_push_sparse(&a, idx, rows, 1, 0, 0, &out));
    assert_int_equal(out, SR_ACC_ACCEPTED);
    assert_int_equal(a.taken, 1);
    assert_true(((float *)a.sum)[0] == 3.0f);
    sr__accum_destroy(&a);
}

/* Gradients whose float sum depends on the order: 1e8 + 1 - 1e8. */
static const float det_g[3] = {1e8f, 1.0f, -1e8f};

/* Push det_g[task] from tasks in `order`; the taken sum. */
static float
det_dense_sum(const int order[3], int deterministic)
{
    sr_accum         a;
    sr_accum_outcome out;
    float            sum;

    assert_sr_ok(sr__accum_init(&a, SR_FLOAT32, 1, 1, 3, 0));
    sr__accum_set_rules(&a, 1, deterministic);
    for (int i = 0; i < 3; i++) {
        assert_sr_ok(sr__accum_push_dense(&a, &det_g[order[i]], 0, order[i], &out));
        assert_int_equal(out, SR_ACC_ACCEPTED);
    }
    assert_int_equal(a.taken, 1);
    sum = ((float *)a.sum)[0];
    if (deterministic) { /* contrib lists the summation order */
        for (int i = 0; i < 3; i++) {
            assert_int_equal(a.contrib[i].task_index, i);
        }
    } else {
        for (int i = 0; i < 3; i++) {
            assert_int_equal(a.contrib[i].task_index, order[i]);
        }
    }
    sr__accum_destroy(&a);
    return sum;
}

static void
test_accum_deterministic_sum_is_in_task_order(void **state)
{
    const int in_order[3] = {0, 1, 2}, other[3] = {2, 0, 1}, third[3] = {0, 2, 1};
    (void)state;

    /* Arrival order decides the bits without the rule... */
    float a = det_dense_sum(in_order, 0), b = det_dense_sum(third, 0);
    assert_true(a != b); /* (1e8 + 1) - 1e8 = 0 in float32; 1e8 - 1e8 + 1 = 1 */
    /* ...and not with it: always (g0 + g1) + g2. */
    assert_true(det_dense_sum(other, 1) == a);
    assert_true(det_dense_sum(third, 1) == a);
}

/* Sparse: the rows are summed in task order too, counted once per push. */
static void
test_accum_deterministic_sparse_in_task_order(void **state)
{
    sr_accum         a;
    sr_accum_outcome out;
    const int64_t    idx[2] = {1, 1}; /* one row, twice in each push */
    const float      rows[3][2] = {{1e8f, 0}, {1.0f, 0}, {-1e8f, 0}};
    const int        order[3] = {0, 2, 1};
    const float     *s;
    (void)state;

    assert_sr_ok(sr__accum_init(&a, SR_FLOAT32, 2, 2, 3, 0));
    sr__accum_set_rules(&a, 1, 1);
    for (int i = 0; i < 3; i++) {
        const float r[2] = {rows[order[i]][0], rows[order[i]][1]};
        assert_sr_ok(sr__accum_push_sparse(&a, idx, r, 2, 0, order[i], &out));
        assert_int_equal(out, SR_ACC_ACCEPTED);
        assert_int_equal(a.ntouched, i == 2 ? 1 : 0); /* summed only at the take */
    }
    s = a.sum;
    assert_true(s[1] == (1e8f + 0.0f + 1.0f + 0.0f) + -1e8f);
    assert_true(s[0] == 0.0f);
    assert_int_equal(a.row_count[1], 3);
    assert_int_equal(a.contrib[1].task_index, 1);
    /* The next step reuses the kept buffers. */
    sr__accum_reset(&a);
    assert_sr_ok(sr__accum_push_sparse(&a, idx, rows[0], 2, 1, 2, &out));
    assert_int_equal(out, SR_ACC_ACCEPTED);
    sr__accum_destroy(&a);
}

/* A refused (non-finite) gradient takes its task's place but adds nothing:
 * the take averages the present ones; with all absent the mode stays NONE
 * (the apply leaves the variable as it was). */
static void
test_accum_absent_gradient_takes_a_place_adds_nothing(void **state)
{
    sr_accum         a;
    sr_accum_outcome out;
    const float      g[1] = {4.0f};
    (void)state;

    assert_sr_ok(sr__accum_init(&a, SR_FLOAT32, 1, 1, 2, 0));
    sr__accum_set_rules(&a, 1, 0);
    assert_sr_ok(sr__accum_push_absent(&a, 0, 1, &out));
    assert_int_equal(out, SR_ACC_ACCEPTED);
    assert_sr_ok(sr__accum_push_absent(&a, 0, 1, &out)); /* its share is used */
    assert_int_equal(out, SR_ACC_OVER_SHARE);
    assert_sr_ok(sr__accum_push_dense(&a, g, 0, 0, &out));
    assert_int_equal(a.taken, 1);
    assert_int_equal(sr__accum_divisor(&a), 1);
    assert_true(((float *)a.sum)[0] == 4.0f); /* copied, not added to stale sums */
    assert_int_equal(a.contrib[0].absent, 1);
    assert_int_equal(a.contrib[1].absent, 0);
    sr__accum_reset(&a);
    assert_sr_ok(sr__accum_push_absent(&a, 1, 0, &out));
    assert_sr_ok(sr__accum_push_absent(&a, 1, 1, &out));
    assert_int_equal(a.taken, 1);
    assert_int_equal(a.mode, SR_ACC_NONE);
    assert_int_equal(sr__accum_divisor(&a), 0);
    sr__accum_destroy(&a);
}

/* issue 26: R lowered during a step (a worker left) takes the accumulator at
 * once with the gradients it has; the divisor is how many it took. */
static void
test_accum_replicas_lowered_to_count_takes_with_what_it_has(void **state)
{
    sr_accum         a;
    sr_accum_outcome out;
    const float      g1[2] = {1.0f, 2.0f}, g2[2] = {3.0f, 6.0f};
    int              took = -1;
    (void)state;

    assert_sr_ok(sr__accum_init(&a, SR_FLOAT32, 2, 2, 3, 4));
    sr__accum_set_rules(&a, 1, 0);
    assert_sr_ok(sr__accum_push_dense(&a, g1, 4, 0, &out));
    assert_sr_ok(sr__accum_push_dense(&a, g2, 4, 2, &out));
    assert_int_equal(a.taken, 0);
    /* R' = 3 still: nothing happens. */
    assert_sr_ok(sr__accum_set_replicas(&a, 3, &took));
    assert_int_equal(took, 0);
    assert_sr_ok(sr__accum_set_replicas(&a, 2, &took));
    assert_int_equal(took, 1);
    assert_int_equal(a.taken, 1);
    assert_int_equal(a.step, 5);
    assert_int_equal(sr__accum_divisor(&a), 2);
    assert_true(((float *)a.sum)[0] == 4.0f && ((float *)a.sum)[1] == 8.0f);
    /* Taken: a late push for step 4 is stale. */
    assert_sr_ok(sr__accum_push_dense(&a, g1, 4, 1, &out));
    assert_int_equal(out, SR_ACC_STALE);
    sr__accum_reset(&a);
    /* The next step takes at 2. */
    assert_sr_ok(sr__accum_push_dense(&a, g1, 5, 1, &out));
    assert_int_equal(a.taken, 0);
    assert_sr_ok(sr__accum_push_dense(&a, g2, 5, 0, &out));
    assert_int_equal(a.taken, 1);
    sr__accum_destroy(&a);
}

/* Lowered below the count (R 3 -> 1 with two gradients): both are taken;
 * with nothing accepted yet, nothing is taken until the first push. */
static void
test_accum_replicas_lowered_below_count_takes_all(void **state)
{
    sr_accum         a;
    sr_accum_outcome out;
    const double     g1[1] = {1.0}, g2[1] = {2.0};
    int              took = -1;
    (void)state;

    assert_sr_ok(sr__accum_init(&a, SR_FLOAT64, 1, 1, 3, 0));
    assert_sr_ok(sr__accum_set_replicas(&a, 1, &took));
    assert_int_equal(took, 0);
    assert_int_equal(a.taken, 0);
    assert_sr_ok(sr__accum_set_replicas(&a, 3, &took));
    assert_sr_ok(sr__accum_push_dense(&a, g1, 0, 0, &out));
    assert_sr_ok(sr__accum_push_dense(&a, g2, 0, 1, &out));
    assert_sr_ok(sr__accum_set_replicas(&a, 1, &took));
    assert_int_equal(took, 1);
    assert_int_equal(sr__accum_divisor(&a), 2);
    assert_true(((double *)a.sum)[0] == 3.0);
    assert_sr_err(sr__accum_set_replicas(&a, 0, &took), SR_EINVAL);
    sr__accum_destroy(&a);
}

/* R raised above what it was made for (ctl set-replicas up) grows its room;
 * the deterministic sum still goes in task order over all of them. */
static void
test_accum_replicas_raised_grows_room_deterministic(void **state)
{
    sr_accum         a;
    sr_accum_outcome out;
    const float      g[4][1] = {{1.0f}, {1e8f}, {-1e8f}, {0.5f}};
    int              took = -1;
    (void)state;

    assert_sr_ok(sr__accum_init(&a, SR_FLOAT32, 1, 1, 2, 0));
    sr__accum_set_rules(&a, 1, 1);
    assert_sr_ok(sr__accum_push_dense(&a, g[0], 0, 3, &out));
    assert_sr_ok(sr__accum_push_dense(&a, g[1], 0, 0, &out));
    assert_int_equal(a.taken, 1);
    sr__accum_reset(&a);
    assert_sr_ok(sr__accum_set_replicas(&a, 4, &took));
    assert_int_equal(took, 0);
    assert_true(a.cap >= 4);
    /* Arrival order (tasks 3, 2, 1, 0) would sum 1 + 1e8 - 1e8 + 0.5 = 0.5 in
     * float; task order sums 0.5 - 1e8 + 1e8 + 1 = 1. */
    for (int t = 3; t >= 0; t--) {
        assert_sr_ok(sr__accum_push_dense(&a, g[3 - t], 1, t, &out));
        assert_int_equal(out, SR_ACC_ACCEPTED);
    }
    assert_int_equal(a.taken, 1);
    assert_int_equal(a.contrib[0].task_index, 0);
    assert_int_equal(a.contrib[3].task_index, 3);
    float want = 0.5f;
    want += -1e8f;
    want += 1e8f;
    want += 1.0f;
    assert_true(((float *)a.sum)[0] == want);
    sr__accum_destroy(&a);
}

/* issue 25, --clip-norm: the squares of the averaged gradient summed at
 * the take.  37 elements: the 8-lane loop and its tail. */
#define SQ_N 37

static void
sq_grads(float g[3][SQ_N])
{
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < SQ_N; i++) {
            g[k][i] = (float)((i * 7 + k * 3) % 11 - 5) * 0.1f + (float)k * 1e-3f;
        }
    }
}

/* The sum of the squares of sum / div as the take must form it (the
 * squares of the sums, lane by lane, then / div^2), written out here apart
 * from the code under test. */
static double
sq_want(const float *sum, int div)
{
    double lane[8] = {0}, total = 0;
    int    i = 0;
    for (; i + 8 <= SQ_N; i += 8) {
        for (int k = 0; k < 8; k++) {
            lane[k] += (double)sum[i + k] * (double)sum[i + k];
        }
    }
    for (int k = 0; k < 8; k++) {
        total += lane[k];
    }
    for (; i < SQ_N; i++) {
        total += (double)sum[i] * (double)sum[i];
    }
    return total / ((double)div * (double)div);
}

static double
sq_take(float g[3][SQ_N], int how)
{
    sr_accum         a;
    sr_accum_outcome out;
    int              took = 0;
    double           r;

    /* how: 0 the last push takes it; 1 R lowered after three; 2 the last of
     * four is absent; 3 the deterministic take. */
    assert_sr_ok(sr__accum_init(&a, SR_FLOAT32, SQ_N, SQ_N, how == 0 || how == 3 ? 3 : 4, 0));
    sr__accum_set_rules(&a, 0, how == 3);
    sr__accum_set_sumsq(&a, 1, SR_SPARSE_MEAN_PER_ROW);
    for (int k = 0; k < 3; k++) {
        assert_sr_ok(sr__accum_push_dense(&a, g[k], 0, k, &out));
    }
    if (how == 1 || how == 2) {
        assert_int_equal(a.sumsq_done, 0); /* no push so far was the last */
    }
    if (how == 1) {
        assert_sr_ok(sr__accum_set_replicas(&a, 3, &took));
        assert_int_equal(took, 1);
    } else if (how == 2) {
        assert_sr_ok(sr__accum_push_absent(&a, 0, 3, &out));
    }
    assert_int_equal(a.taken, 1);
    assert_int_equal(sr__accum_divisor(&a), 3);
    assert_int_equal(a.sumsq_done, 1);
    r = sr__accum_sumsq(&a);
    assert_true(r == sq_want(a.sum, 3));
    sr__accum_destroy(&a);
    return r;
}

static void
test_accum_sumsq_dense_same_bits_fused_or_not(void **state)
{
    float  g[3][SQ_N];
    double last, lowered, absent, det;
    (void)state;

    sq_grads(g);
    last = sq_take(g, 0);
    assert_true(last > 0);
    lowered = sq_take(g, 1);
    absent = sq_take(g, 2);
    det = sq_take(g, 3);
    /* Four paths to the same sums give the same bits (the chaos verifier
     * replays whichever one the coordinator took with the first). */
    assert_memory_equal(&last, &lowered, sizeof(last));
    assert_memory_equal(&last, &absent, sizeof(last));
    assert_memory_equal(&last, &det, sizeof(last));
}

static void
test_accum_sumsq_off_and_one_replica(void **state)
{
    sr_accum         a;
    sr_accum_outcome out;
    const double     g[3] = {3.0, -4.0, 12.0};
    (void)state;

    /* Off: nothing summed. */
    assert_sr_ok(sr__accum_init(&a, SR_FLOAT64, 3, 3, 1, 0));
    assert_sr_ok(sr__accum_push_dense(&a, g, 0, 0, &out));
    assert_int_equal(a.sumsq_done, 0);
    assert_true(sr__accum_sumsq(&a) == 0);
    sr__accum_destroy(&a);
    /* R = 1: the copy of the only gradient sums the squares. */
    assert_sr_ok(sr__accum_init(&a, SR_FLOAT64, 3, 3, 1, 0));
    sr__accum_set_sumsq(&a, 1, SR_SPARSE_MEAN_PER_ROW);
    assert_sr_ok(sr__accum_push_dense(&a, g, 0, 0, &out));
    assert_int_equal(a.sumsq_done, 1);
    assert_true(sr__accum_sumsq(&a) == 169.0);
    assert_memory_equal(a.sum, g, sizeof(g));
    /* The next step starts again. */
    sr__accum_reset(&a);
    assert_true(sr__accum_sumsq(&a) == 0);
    assert_sr_ok(sr__accum_push_dense(&a, g, 1, 0, &out));
    assert_true(sr__accum_sumsq(&a) == 169.0);
    sr__accum_destroy(&a);
}

static void
test_accum_sumsq_sparse_touched_rows_by_their_divisor(void **state)
{
    sr_accum_outcome out;
    const int64_t    i1[2] = {0, 1}, i2[1] = {1};
    const float      r1[2] = {1, 2}, r2[1] = {4};
    (void)state;

    /* 3 rows x 1; R = 2: row 0 touched once, row 1 twice, row 2 never.
     * Per row: 1 / 1 and (2 + 4) / 2; per replica: / 2 both. */
    for (int mean = 0; mean < 2; mean++) {
        sr_accum a;
        assert_sr_ok(sr__accum_init(&a, SR_FLOAT32, 3, 3, 2, 0));
        sr__accum_set_sumsq(&a, 1, mean ? SR_SPARSE_MEAN_PER_REPLICA : SR_SPARSE_MEAN_PER_ROW);
        assert_sr_ok(sr__accum_push_sparse(&a, i1, r1, 2, 0, 0, &out));
        assert_sr_ok(sr__accum_push_sparse(&a, i2, r2, 1, 0, 1, &out));
        assert_int_equal(a.taken, 1);
        assert_true(sr__accum_sumsq(&a) == (mean ? 0.25 + 9.0 : 1.0 + 9.0));
        sr__accum_destroy(&a);
    }
}

/* The scan for NaN and Inf (the vector loop and its tail): one bad value at
 * any position of any length is found; large, tiny and negative-zero
 * values are not bad. */
static void
test_accum_nonfinite_found_at_every_position(void **state)
{
    static const uint64_t lens[] = {1, 7, 8, 9, 31, 64, 100};
    float                 f[100];
    double                d[100];
    const double          bad[3] = {NAN, INFINITY, -INFINITY};
    (void)state;

    for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
        uint64_t n = lens[li];
        for (uint64_t i = 0; i < n; i++) {
            f[i] = i % 3 == 0 ? FLT_MAX : i % 3 == 1 ? -0.0f : FLT_TRUE_MIN;
            d[i] = i % 3 == 0 ? -DBL_MAX : i % 3 == 1 ? 1e-310 : 0.5;
        }
        assert_int_equal(sr__nonfinite(SR_FLOAT32, f, n), 0);
        assert_int_equal(sr__nonfinite(SR_FLOAT64, d, n), 0);
        for (uint64_t at = 0; at < n; at++) {
            for (int b = 0; b < 3; b++) {
                float  keep_f = f[at];
                double keep_d = d[at];
                f[at] = (float)bad[b];
                d[at] = bad[b];
                assert_int_equal(sr__nonfinite(SR_FLOAT32, f, n), 1);
                assert_int_equal(sr__nonfinite(SR_FLOAT64, d, n), 1);
                assert_int_equal(sr__nonfinite(SR_FLOAT32, f, at), 0); /* before it */
                f[at] = keep_f;
                d[at] = keep_d;
            }
        }
    }
}

/* A dense sum is the gradients added in arrival order, element by element,
 * whatever vector width the adds run at: the same bits as a plain loop. */
static void
test_accum_dense_sum_is_arrival_order_bits(void **state)
{
    enum { N = 37, R = 3 };
    sr_accum         a;
    sr_accum_outcome out;
    float            gf[R][N], ef[N];
    double           gd[R][N], ed[N];
    (void)state;

    for (int r = 0; r < R; r++) {
        for (int i = 0; i < N; i++) {
            gf[r][i] = (float)((i * 7919 + r * 104729) % 1000) / 7.0f - 70.0f;
            gd[r][i] = (double)gf[r][i] / 3.0 + 1e-9 * r;
        }
    }
    for (int i = 0; i < N; i++) {
        volatile float  sf = gf[0][i];
        volatile double sd = gd[0][i];
        for (int r = 1; r < R; r++) {
            sf = sf + gf[r][i];
            sd = sd + gd[r][i];
        }
        ef[i] = sf;
        ed[i] = sd;
    }
    assert_sr_ok(sr__accum_init(&a, SR_FLOAT32, N, N, R, 0));
    for (int r = 0; r < R; r++) {
        assert_sr_ok(sr__accum_push_dense(&a, gf[r], 0, r, &out));
        assert_int_equal(out, SR_ACC_ACCEPTED);
    }
    assert_int_equal(a.taken, 1);
    assert_memory_equal(a.sum, ef, sizeof(ef));
    sr__accum_destroy(&a);
    assert_sr_ok(sr__accum_init(&a, SR_FLOAT64, N, N, R, 0));
    for (int r = 0; r < R; r++) {
        assert_sr_ok(sr__accum_push_dense(&a, gd[r], 0, r, &out));
    }
    assert_int_equal(a.taken, 1);
    assert_memory_equal(a.sum, ed, sizeof(ed));
    sr__accum_destroy(&a);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accum_dense_takes_at_R_and_advances_step),
        cmocka_unit_test(test_accum_dense_older_and_newer_steps_are_stale),
        cmocka_unit_test(test_accum_dense_one_replica_several_batches_when_N_below_R),
        cmocka_unit_test(test_accum_sparse_repeats_summed_counted_once_per_push),
        cmocka_unit_test(test_accum_sparse_row_out_of_range_changes_nothing),
        cmocka_unit_test(test_accum_sparse_empty_push_counts),
        cmocka_unit_test(test_accum_mixing_dense_and_sparse_in_one_step_is_einval),
        cmocka_unit_test(test_accum_sparse_after_dense_step_starts_from_zero),
        cmocka_unit_test(test_accum_caller_sums_start_clean_and_stay_the_callers),
        cmocka_unit_test(test_accum_task_beyond_its_share_is_not_counted),
        cmocka_unit_test(test_accum_share_above_one_when_N_below_R),
        cmocka_unit_test(test_accum_deterministic_sum_is_in_task_order),
        cmocka_unit_test(test_accum_deterministic_sparse_in_task_order),
        cmocka_unit_test(test_accum_absent_gradient_takes_a_place_adds_nothing),
        cmocka_unit_test(test_accum_replicas_lowered_to_count_takes_with_what_it_has),
        cmocka_unit_test(test_accum_replicas_lowered_below_count_takes_all),
        cmocka_unit_test(test_accum_replicas_raised_grows_room_deterministic),
        cmocka_unit_test(test_accum_sumsq_dense_same_bits_fused_or_not),
        cmocka_unit_test(test_accum_sumsq_off_and_one_replica),
        cmocka_unit_test(test_accum_sumsq_sparse_touched_rows_by_their_divisor),
        cmocka_unit_test(test_accum_nonfinite_found_at_every_position),
        cmocka_unit_test(test_accum_dense_sum_is_arrival_order_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
