/*
 * chaos/chaos_report.c (issue 22): the timeline's legend fits its width,
 * a stop is drawn as a stop (a band from SIGSTOP to SIGCONT, not a kill's
 * line), resizes and rewinds are marked, and an interrupted run says so in
 * report.json and on the timeline.  Built from a chaos struct filled
 * in-process: no job runs.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chaos/chaos_int.h"
#include "sr_test.h"

static char *
slurp(const char *dir, const char *name)
{
    char  path[700];
    FILE *f;
    long  n;
    char *b;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "r");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = calloc(1, (size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return b;
}

static void
add_ev(chaos *c, double t, int role, int task, const char *what)
{
    event *e = &c->ev[c->nev++];
    e->t = t;
    e->role = role;
    e->task = task;
    snprintf(e->what, sizeof(e->what), "%s", what);
}

static chaos *
make_run(const char *dir)
{
    chaos *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    snprintf(c->out, sizeof(c->out), "%s", dir);
    c->duration = 10;
    c->seed = 7;
    c->workers = c->R = c->M = 2;
    c->targets[0] = c->targets[1] = c->targets[2] = 1;
    for (int i = 0; i < 20; i++) {
        c->samples[c->nsamples++] = (sample){.t = i * 0.5, .step = i * 3};
    }
    add_ev(c, 1.0, ROLE_COORD, 0, "kill");
    add_ev(c, 1.5, ROLE_COORD, 0, "restart");
    add_ev(c, 1.5, ROLE_COORD, 3, "resize");
    add_ev(c, 3.0, ROLE_WORKER, 1, "stop");
    add_ev(c, 4.0, ROLE_WORKER, 1, "cont");
    add_ev(c, 5.0, ROLE_COORD, 0, "kill");
    add_ev(c, 5.5, ROLE_COORD, 0, "restart");
    add_ev(c, 5.5, ROLE_COORD, 0, "resume");
    return c;
}

/* The width attribute of the <svg> element. */
static double
svg_width(const char *svg)
{
    const char *p = strstr(svg, "width=\"");
    assert_non_null(p);
    return atof(p + 7);
}

static void
test_chaos_report_legend_fits_stops_bands_markers(void **state)
{
    (void)state;
    char  *dir = sr_test_mkdtemp("chaos-report");
    chaos *c = make_run(dir);
    char  *svg;

    sr__chaos_report_svg(c);
    svg = slurp(dir, "timeline.svg");
    double w = svg_width(svg);
    int    nlegend = 0;
    /* Every legend text, at ~7 px a character, ends inside the picture. */
    for (const char *p = svg; (p = strstr(p, "class=\"legend\" x=\"")) != NULL; p++) {
        double      x = atof(p + strlen("class=\"legend\" x=\""));
        const char *gt = strchr(p, '>'), *lt = strchr(gt, '<');
        assert_true(x + 7.0 * (double)(lt - gt - 1) <= w);
        nlegend++;
    }
    assert_int_equal(nlegend, 11); /* 3 roles x (kill, restart, stopped), resize, rewind */
    /* The stop: one band from 3 s to 4 s, no line drawn for it or its cont. */
    assert_non_null(strstr(svg, "<rect class=\"stop\""));
    assert_non_null(strstr(svg, "3.00s-4.00s worker 1 stopped"));
    assert_null(strstr(svg, "class=\"stop\" x1="));
    assert_null(strstr(svg, "class=\"cont\""));
    assert_non_null(strstr(svg, "class=\"kill\""));
    assert_non_null(strstr(svg, "class=\"restart\""));
    /* The resize and the rewind are marked. */
    assert_non_null(strstr(svg, "class=\"resize\""));
    assert_non_null(strstr(svg, "class=\"rewind\""));
    assert_null(strstr(svg, "INTERRUPTED"));
    free(svg);
    free(c);
    sr_test_rmdir_rf(dir);
    free(dir);
}

static void
test_chaos_report_interrupted_run_says_so(void **state)
{
    (void)state;
    char          *dir = sr_test_mkdtemp("chaos-report");
    chaos         *c = make_run(dir);
    sr_chaos_check ok = {.name = "replay", .passed = 1};
    char          *txt;

    assert_int_equal(sr__chaos_report_write(c, &ok, 1, 1, 57), 0);
    txt = slurp(dir, "report.json");
    assert_non_null(strstr(txt, "\"interrupted\": null"));
    free(txt);

    c->interrupted = SIGINT;
    c->interrupted_t = 4.2;
    assert_int_equal(sr__chaos_report_write(c, &ok, 1, 0, 57), 0);
    txt = slurp(dir, "report.json");
    assert_non_null(strstr(txt, "\"interrupted\": \"SIGINT\""));
    assert_non_null(strstr(txt, "\"passed\": false"));
    free(txt);
    sr__chaos_report_svg(c);
    txt = slurp(dir, "timeline.svg");
    assert_non_null(strstr(txt, "INTERRUPTED (SIGINT) at 4.2s"));
    free(txt);
    free(c);
    sr_test_rmdir_rf(dir);
    free(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chaos_report_legend_fits_stops_bands_markers),
        cmocka_unit_test(test_chaos_report_interrupted_run_says_so),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
