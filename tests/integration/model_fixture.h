/* The model of the model API's integration tests (model_test.c,
 * model_replicas_test.c): trainable float32 w[2,3] and b[3], trainable
 * float64 s (a scalar), not trainable float32 mean[4] and int64 count[2]. */
#ifndef SR_MODEL_FIXTURE_H
#define SR_MODEL_FIXTURE_H

#include <stdint.h>

#include "harness.h"
#include "syncrep/syncrep.h"

enum { T_W, T_B, T_S, T_MEAN, T_COUNT, NT };

extern const float   w0[6], b0[3], mean0[4]; /* the chief's initial values */
extern const double  s0;
extern const int64_t count0[2];

/* Task k's gradients (exact in binary): w: (k+1) * 0.25 * (i+1), b: k+1,
 * s: 0.5 * (k+1). */
typedef struct {
    float  gw[6], gb[3];
    double gs;
} grads;

typedef struct {
    sr_client *c;
    int        task;
    int        reversed; /* declared its tensors in reverse order */
    int64_t    until;    /* train until the local step reaches it */
    int64_t    at;       /* its local step after the last round (atomic) */
    int        rc;
    float      w[6], b[3], mean[4];
    double     s;
    int64_t    count[2];
} worker;

/* The tensors in declared order (reversed: the other way round). */
void specs(sr_tensor_spec t[NT], int reversed);
void grads_of(int k, grads *g);
/* The gradient and value pointers of w in its declared order. */
void pointers(worker *w, const grads *g, const void **gp, void **vp);
/* A thread: w trains (pull, then model steps) until its local step is w->until. */
void *train(void *arg);
/* A client for task `task` that has declared the model. */
void open_worker(sr_harness *h, worker *w, int task, int reversed);
/* Two workers train `steps` rounds together (R = N = 2). */
void run_pair(sr_harness *h, worker *w, int64_t until);
/* The values after `steps` SGD steps (lr 0.5) of the two tasks' mean
 * gradient: the per-variable API's arithmetic, in float32 as the apply. */
void expect_values(const worker *w, int steps);

#endif
