/* A coordinator's command line.  See coord_argv.h. */
#include "tools/coord_argv.h"

#include <inttypes.h>
#include <stdlib.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "coordinator/coord_int.h"
#include "coordinator/lr_schedule.h"

/* Copy the formatted text into a->text as the next argument. */
static void push(sr_coord_argv *a, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void
push(sr_coord_argv *a, const char *fmt, va_list ap)
{
    size_t room = sizeof(a->text) - a->used;
    int    k;

    if (a->overflow || a->n >= SR_COORD_ARGV_MAX) {
        a->overflow = 1;
        return;
    }
    k = vsnprintf(a->text + a->used, room, fmt, ap);
    if (k < 0 || (size_t)k >= room) {
        a->overflow = 1;
        return;
    }
    a->argv[a->n++] = a->text + a->used;
    a->argv[a->n] = NULL;
    a->used += (size_t)k + 1;
}

static void pushf(sr_coord_argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
pushf(sr_coord_argv *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    push(a, fmt, ap);
    va_end(ap);
}

void
sr_coord_argv_init(sr_coord_argv *a, const char *syncrep, const char *store, const char *endpoint)
{
    memset(a, 0, sizeof(*a));
    sr_coord_argv_add(a, syncrep);
    sr_coord_argv_add(a, "coordinator");
    sr_coord_argv_opt(a, "--store", "%s", store);
    sr_coord_argv_opt(a, "--bind", "%s", endpoint);
}

void
sr_coord_argv_add(sr_coord_argv *a, const char *arg)
{
    pushf(a, "%s", arg);
}

void
sr_coord_argv_opt(sr_coord_argv *a, const char *opt, const char *fmt, ...)
{
    va_list ap;
    sr_coord_argv_add(a, opt);
    va_start(ap, fmt);
    push(a, fmt, ap);
    va_end(ap);
}

char *const *
sr_coord_argv_get(sr_coord_argv *a)
{
    return a->overflow ? NULL : a->argv;
}

void
sr_coord_argv_recipe(sr_coord_argv *a, const sr_optim *o)
{
    int decays = o->lr_schedule == SR_LR_COSINE || o->lr_schedule == SR_LR_LINEAR;

    sr_coord_argv_opt(a, "--weight-decay", "%.17g", o->weight_decay);
    if (o->nesterov) {
        sr_coord_argv_add(a, "--nesterov");
    }
    if (o->lr_schedule != SR_LR_CONSTANT) {
        sr_coord_argv_opt(a, "--lr-schedule", "%s", sr__lr_name(o->lr_schedule));
    }
    if (o->warmup_steps > 0) {
        sr_coord_argv_opt(a, "--warmup-steps", "%" PRId64, o->warmup_steps);
    }
    if (decays) {
        sr_coord_argv_opt(a, "--decay-steps", "%" PRId64, o->decay_steps);
        sr_coord_argv_opt(a, "--lr-min", "%.17g", o->lr_min);
    }
    if (o->lr_schedule == SR_LR_STEP) {
        sr_coord_argv_opt(a, "--step-every", "%" PRId64, o->step_every);
        sr_coord_argv_opt(a, "--step-gamma", "%.17g", o->step_gamma);
    }
    if (o->clip_norm > 0) {
        sr_coord_argv_opt(a, "--clip-norm", "%.17g", o->clip_norm);
    }
}

/* A finite double >= 0 from all of text: 0, or -1. */
static int
nonneg(const char *text, double *out)
{
    char *end = NULL;
    *out = text != NULL ? strtod(text, &end) : -1;
    return text != NULL && end != text && *end == '\0' && *out >= 0 && *out < 1e300 ? 0 : -1;
}

int
sr_coord_argv_parse_recipe(sr_optim *o, const char *opt, const char *val)
{
    double d = 0;
    int    bad;

    if (strcmp(opt, "--nesterov") == 0) {
        o->nesterov = 1;
        return 1;
    }
    if (strcmp(opt, "--lr-schedule") == 0) {
        return val != NULL && sr__lr_parse(val, &o->lr_schedule) == SR_OK ? 1 : -1;
    }
    bad = nonneg(val, &d);
    if (strcmp(opt, "--weight-decay") == 0) {
        o->weight_decay = d;
    } else if (strcmp(opt, "--lr-min") == 0) {
        o->lr_min = d;
    } else if (strcmp(opt, "--step-gamma") == 0) {
        o->step_gamma = d;
    } else if (strcmp(opt, "--clip-norm") == 0) {
        o->clip_norm = d;
    } else if (strcmp(opt, "--warmup-steps") == 0 || strcmp(opt, "--decay-steps") == 0 ||
               strcmp(opt, "--step-every") == 0) {
        bad = bad || d != (double)(int64_t)d || d > 1e15;
        *(strcmp(opt, "--warmup-steps") == 0  ? &o->warmup_steps
          : strcmp(opt, "--decay-steps") == 0 ? &o->decay_steps
                                              : &o->step_every) = (int64_t)d;
    } else {
        return 0;
    }
    return bad ? -1 : 1;
}
