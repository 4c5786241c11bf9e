/* The learning rate of a step.  See lr_schedule.h. */
#include "coordinator/lr_schedule.h"

#include <math.h>
#include <string.h>

#define SR_PI 3.14159265358979323846 /* Python's math.pi, to the last bit */

double
sr__lr_at(const sr_lr_sched *s, int64_t step)
{
    int64_t t;

    if (step < 0) {
        step = 0;
    }
    if (step < s->warmup_steps) {
        return s->base * (double)step / (double)s->warmup_steps;
    }
    t = step - s->warmup_steps;
    switch (s->kind) {
    case SR_LR_STEP:
        return s->base * pow(s->step_gamma, (double)(t / s->step_every));
    case SR_LR_COSINE:
        if (t >= s->decay_steps) {
            return s->lr_min;
        }
        return s->lr_min + (s->base - s->lr_min) *
                               (1.0 + cos(SR_PI * (double)t / (double)s->decay_steps)) / 2.0;
    case SR_LR_LINEAR:
        if (t >= s->decay_steps) {
            return s->lr_min;
        }
        return s->lr_min + (s->base - s->lr_min) * (1.0 - (double)t / (double)s->decay_steps);
    default:
        return s->base;
    }
}

sr_err
sr__lr_check(const sr_lr_sched *s)
{
    if (s->warmup_steps < 0) {
        return sr_fail(SR_EINVAL, "--warmup-steps %lld: must be >= 0", (long long)s->warmup_steps);
    }
    if ((s->kind == SR_LR_COSINE || s->kind == SR_LR_LINEAR) && s->decay_steps < 1) {
        return sr_fail(SR_EINVAL, "--lr-schedule %s needs --decay-steps T >= 1 (given %lld)",
                       sr__lr_name(s->kind), (long long)s->decay_steps);
    }
    if (s->kind == SR_LR_STEP && s->step_every < 1) {
        return sr_fail(SR_EINVAL, "--lr-schedule step needs --step-every S >= 1 (given %lld)",
                       (long long)s->step_every);
    }
    if (!(s->step_gamma >= 0) || !isfinite(s->step_gamma)) {
        return sr_fail(SR_EINVAL, "--step-gamma %g: must be a finite value >= 0", s->step_gamma);
    }
    if (!(s->lr_min >= 0) || !isfinite(s->lr_min)) {
        return sr_fail(SR_EINVAL, "--lr-min %g: must be a finite value >= 0", s->lr_min);
    }
    if ((s->kind == SR_LR_COSINE || s->kind == SR_LR_LINEAR) && s->lr_min > s->base) {
        return sr_fail(SR_EINVAL, "--lr-min %g is above --learning-rate %g", s->lr_min, s->base);
    }
    return SR_OK;
}

sr_err
sr__lr_parse(const char *text, int *kind)
{
    static const char *const names[] = {"constant", "step", "cosine", "linear"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(text, names[i]) == 0) {
            *kind = i;
            return SR_OK;
        }
    }
    return sr_fail(SR_EINVAL, "unknown --lr-schedule '%s' (constant|step|cosine|linear)", text);
}

const char *
sr__lr_name(int kind)
{
    switch (kind) {
    case SR_LR_CONSTANT:
        return "constant";
    case SR_LR_STEP:
        return "step";
    case SR_LR_COSINE:
        return "cosine";
    case SR_LR_LINEAR:
        return "linear";
    default:
        return "?";
    }
}
