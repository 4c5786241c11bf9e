/*
 * The learning rate of a step (issue 25): a pure function of the global
 * step and the recipe's options, so a restarted coordinator, the chaos
 * verifier's replay and --resume-from-step all compute the same bits.
 * The update that takes the global step from s to s + 1 uses the rate of
 * step s, as torch's schedulers do (optimizer.step() then
 * scheduler.step()).  docs/optimizers.md.
 *
 *   warm-up   s < W:  lr * s / W  (0 at step 0)
 *   then t = s - W:
 *   constant  lr
 *   step      lr * G^floor(t / S)                       (torch StepLR)
 *   cosine    t < T: lr_min + (lr - lr_min) (1 + cos(pi t / T)) / 2
 *   linear    t < T: lr_min + (lr - lr_min) (1 - t / T)
 *             t >= T: lr_min                            (both)
 */
#ifndef SR_LR_SCHEDULE_H
#define SR_LR_SCHEDULE_H

#include <stdint.h>

#include "core/error.h"

typedef enum {
    SR_LR_CONSTANT = 0,
    SR_LR_STEP = 1,
    SR_LR_COSINE = 2,
    SR_LR_LINEAR = 3,
} sr_lr_kind;

/* The parameters of a schedule; base is the --learning-rate. */
typedef struct {
    int     kind; /* sr_lr_kind */
    double  base;
    int64_t warmup_steps; /* W >= 0 */
    int64_t decay_steps;  /* T >= 1 for cosine and linear */
    double  lr_min;       /* the floor of cosine and linear */
    int64_t step_every;   /* S >= 1 for step */
    double  step_gamma;   /* G */
} sr_lr_sched;

/* The learning rate of global step `step` (< 0 reads as 0). */
double sr__lr_at(const sr_lr_sched *s, int64_t step);

/* SR_EINVAL naming what is wrong: W < 0, T < 1 for cosine/linear, S < 1 for
 * step, a negative or non-finite value, lr_min above the base. */
sr_err sr__lr_check(const sr_lr_sched *s);

/* sr_lr_kind from "constant|step|cosine|linear", and back. */
sr_err      sr__lr_parse(const char *text, int *kind);
const char *sr__lr_name(int kind);

#endif
