/*
 * Issue 27, without root: chaos/chaos_net.c's names (prefixes, hosts,
 * addresses) and its refusals of bad input; chaos_plan.c's network faults
 * (drawn from the seed alone, hosts in range, durations before the quiet
 * tail); chaos_report.c's network section and timeline bands.  The network
 * itself (namespaces, nftables) is tested by tests/net (net_chaos, root).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chaos/chaos_int.h"
#include "sr_test.h"

static void
test_chaos_net_names(void **state)
{
    char b[32];
    (void)state;
    assert_true(sr__chaos_net_prefix_ok("srnet-123-"));
    assert_false(sr__chaos_net_prefix_ok("srnet--"));
    assert_false(sr__chaos_net_prefix_ok("srnet-12a-"));
    assert_false(sr__chaos_net_prefix_ok("srnet-123"));
    assert_false(sr__chaos_net_prefix_ok("other-123-"));
    assert_false(sr__chaos_net_prefix_ok(""));
    assert_int_equal(sr__chaos_net_host_index("c", 3), 0);
    assert_int_equal(sr__chaos_net_host_index("w0", 3), 1);
    assert_int_equal(sr__chaos_net_host_index("w1", 3), 2);
    assert_int_equal(sr__chaos_net_host_index("w2", 3), -1); /* only 3 hosts */
    assert_int_equal(sr__chaos_net_host_index("x", 3), -1);
    assert_int_equal(sr__chaos_net_host_index("w-1", 3), -1);
    assert_string_equal(sr__chaos_net_host_name(0, b, sizeof(b)), "c");
    assert_string_equal(sr__chaos_net_host_name(3, b, sizeof(b)), "w2");
    assert_string_equal(sr__chaos_net_host_addr(0, b, sizeof(b)), "198.18.0.1");
    assert_string_equal(sr__chaos_net_host_addr(3, b, sizeof(b)), "198.18.0.4");
}

/* Bad input is refused with exit 2 before anything is looked at or made. */
static void
test_chaos_net_cli_refuses_bad_input(void **state)
{
    (void)state;
    char *a1[] = {"netns", "up", "srnet-x-", "3", NULL};
    char *a2[] = {"netns", "up", "srnet-1-", "0", NULL};
    char *a3[] = {"netns", "loss", "srnet-1-", "c", "101", NULL};
    char *a4[] = {"netns", "oneway", "srnet-1-", "c", "to-coord", NULL};
    char *a5[] = {"netns", "link", "srnet-1-", "w0", "sideways", NULL};
    char *a6[] = {"netns", "bogus", "srnet-1-", "w0", "x", NULL};
    char *a7[] = {"netns", "down", "/etc", NULL};
    assert_int_equal(sr__chaos_net_cli(4, a1), 2);
    assert_int_equal(sr__chaos_net_cli(4, a2), 2);
    assert_int_equal(sr__chaos_net_cli(5, a3), 2);
    assert_int_equal(sr__chaos_net_cli(5, a4), 2);
    assert_int_equal(sr__chaos_net_cli(5, a5), 2);
    assert_int_equal(sr__chaos_net_cli(5, a6), 2);
    assert_int_equal(sr__chaos_net_cli(3, a7), 2);
}

static chaos *
net_chaos(uint64_t seed)
{
    chaos *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    c->workers = c->R = c->M = 3;
    c->duration = 120;
    c->kill_every = 1.0;
    c->seed = seed;
    c->targets[0] = c->targets[1] = c->targets[2] = 1;
    c->net_target = 1;
    return c;
}

static void
test_chaos_net_plan(void **state)
{
    chaos *a = net_chaos(27), *b = net_chaos(27), *p = net_chaos(27);
    int    kinds[NET_KINDS] = {0}, dirs[3] = {0}, n = 0;
    (void)state;
    p->net_target = 0;
    sr__chaos_plan_make(a);
    sr__chaos_plan_make(b);
    sr__chaos_plan_make(p);
    assert_int_equal(a->nplan, b->nplan);
    assert_memory_equal(a->plan, b->plan, sizeof(fault) * (size_t)a->nplan); /* the seed alone */
    for (int i = 0; i < a->nplan; i++) {
        const fault *f = &a->plan[i];
        if (f->action < ACT_NET_LINK) {
            continue;
        }
        n++;
        assert_true(f->action <= ACT_NET_POWER);
        kinds[f->action - ACT_NET_LINK]++;
        assert_true(f->net_host >= 0 && f->net_host <= a->workers);
        assert_int_equal(f->role, f->net_host == 0   ? ROLE_COORD
                                  : f->net_host == 1 ? ROLE_CHIEF
                                                     : ROLE_WORKER);
        if (f->action == ACT_NET_ONEWAY) {
            assert_true(f->net_host >= 1); /* a worker's host */
            dirs[f->dir]++;
        }
        if (f->action == ACT_NET_LOSS) {
            assert_true(f->pct >= 5 && f->pct <= 30);
        }
        assert_true(f->down_s >= 0.5 && f->down_s <= 8.0);
        assert_true(f->t + f->down_s <= a->duration - QUIET_TAIL_S + 1e-9 || f->down_s == 0.5);
    }
    /* About a quarter of the faults (one target in four); every kind, both directions. */
    assert_true(n > a->nplan / 8 && n < a->nplan / 2);
    for (int k = 0; k < NET_KINDS; k++) {
        assert_true(kinds[k] > 0);
    }
    assert_true(dirs[1] > 0 && dirs[2] > 0);
    for (int i = 0; i < p->nplan; i++) {
        assert_true(p->plan[i].action < ACT_NET_LINK); /* without the target: none */
    }
    free(a);
    free(b);
    free(p);
}

static char *
slurp(const char *dir, const char *name)
{
    char  path[700];
    FILE *f;
    long  n;
    char *buf;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    assert_non_null(f = fopen(path, "r"));
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = calloc(1, (size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return buf;
}

static void
test_chaos_net_report(void **state)
{
    char          *dir = sr_test_mkdtemp("chaos-net");
    chaos         *c = net_chaos(5);
    sr_chaos_check ok = {.name = "replay", .passed = 1};
    char          *txt;
    (void)state;
    snprintf(c->out, sizeof(c->out), "%s", dir);
    c->duration = 10;
    c->net_up = 1;
    c->net_faults[1] = c->net_faults[3] = 1;
    c->self_exits = 1;
    c->netrec[0] = (netrec){.kind = 1, .host = 2, .dir = 2, .start = 1, .end = 3.5, .next_s = 0.25};
    c->netrec[1] = (netrec){.kind = 3, .host = 0, .start = 5, .end = 7, .next_s = -1};
    c->nnetrec = 2;
    assert_int_equal(sr__chaos_report_write(c, &ok, 1, 1, 40), 0);
    txt = slurp(dir, "report.json");
    assert_non_null(strstr(txt, "\"self_exits\": 1"));
    assert_non_null(
        strstr(txt, "\"faults\": {\"link\": 0, \"oneway\": 1, \"loss\": 0, \"power\": 1}"));
    assert_non_null(
        strstr(txt, "\"next_step_seconds\": {\"count\": 1, \"p50\": 0.250, \"max\": 0.250}"));
    assert_non_null(strstr(txt, "{\"kind\": \"oneway\", \"host\": 2, \"direction\": "
                                "\"from-coordinator\", \"loss_pct\": 0, \"start\": 1.000, "
                                "\"end\": 3.500, \"next_step_s\": 0.250}"));
    assert_non_null(strstr(txt, "\"kind\": \"power\", \"host\": 0, \"direction\": null"));
    assert_non_null(strstr(txt, "\"next_step_s\": null}"));
    free(txt);
    sr__chaos_report_svg(c);
    txt = slurp(dir, "timeline.svg");
    assert_non_null(strstr(txt, "<rect class=\"net-oneway\""));
    assert_non_null(strstr(txt, "<rect class=\"net-power\""));
    assert_non_null(strstr(txt, ">network loss</text>")); /* the legend has every kind */
    free(txt);
    free(c);
    sr_test_rmdir_rf(dir);
    free(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chaos_net_names),
        cmocka_unit_test(test_chaos_net_cli_refuses_bad_input),
        cmocka_unit_test(test_chaos_net_plan),
        cmocka_unit_test(test_chaos_net_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
