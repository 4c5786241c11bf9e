/* tools/coord_argv.c: the coordinator's command line, in order, copied. */
#include "sr_test.h"

#include <stdio.h>
#include <string.h>

#include "tools/coord_argv.h"

static void
test_coord_argv_options_in_order_copied(void **state)
{
    sr_coord_argv a;
    char          store[32];
    (void)state;

    snprintf(store, sizeof(store), "%s", "/tmp/s.db");
    sr_coord_argv_init(&a, "/bin/syncrep", store, "ipc:///tmp/c.sock");
    store[0] = 'X'; /* the builder holds its own copy */
    sr_coord_argv_opt(&a, "--replicas-to-aggregate", "%d", 4);
    sr_coord_argv_add(&a, "--step-log");
    sr_coord_argv_opt(&a, "--learning-rate", "%.17g", 0.5);

    char *const *argv = sr_coord_argv_get(&a);
    const char  *want[] = {"/bin/syncrep",
                           "coordinator",
                           "--store",
                           "/tmp/s.db",
                           "--bind",
                           "ipc:///tmp/c.sock",
                           "--replicas-to-aggregate",
                           "4",
                           "--step-log",
                           "--learning-rate",
                           "0.5"};
    assert_non_null(argv);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        assert_string_equal(argv[i], want[i]);
    }
    assert_null(argv[sizeof(want) / sizeof(want[0])]);
}

static void
test_coord_argv_overflow_is_null_not_truncated(void **state)
{
    sr_coord_argv a;
    char          big[SR_COORD_ARGV_TEXT];
    (void)state;

    sr_coord_argv_init(&a, "/bin/syncrep", "s.db", "ipc://x");
    for (int i = 0; i < SR_COORD_ARGV_MAX; i++) {
        sr_coord_argv_add(&a, "--x");
    }
    assert_null(sr_coord_argv_get(&a)); /* too many arguments */

    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    sr_coord_argv_init(&a, "/bin/syncrep", "s.db", "ipc://x");
    sr_coord_argv_opt(&a, "--store-page-kib", "%s", big);
    assert_null(sr_coord_argv_get(&a)); /* too much text */
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coord_argv_options_in_order_copied),
        cmocka_unit_test(test_coord_argv_overflow_is_null_not_truncated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
