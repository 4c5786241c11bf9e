/*
 * A two-layer perceptron, in -> hidden (ReLU) -> out, trained with softmax
 * cross-entropy: forward, backward and prediction on float32 row-major
 * buffers, with every matrix product done by BLAS (cblas_sgemm).  The
 * parameters are four separate buffers because they travel to the
 * coordinator as four variables.  See docs/example.md.
 */
#ifndef EX_MLP_H
#define EX_MLP_H

#include <stddef.h>
#include <stdint.h>

#include "syncrep/error.h"

/* Layer sizes. */
typedef struct {
    int in;     /* inputs per example (784 for 28 x 28 images) */
    int hidden; /* ReLU units */
    int out;    /* classes */
} ex_mlp_dims;

/* Parameters (or gradients of the same shape), row-major. */
typedef struct {
    float *w1; /* in x hidden */
    float *b1; /* hidden */
    float *w2; /* hidden x out */
    float *b2; /* out */
} ex_mlp_params;

/* Which parameter, for ex_mlp_param_*. */
enum { EX_MLP_W1, EX_MLP_B1, EX_MLP_W2, EX_MLP_B2, EX_MLP_NPARAMS };

/* Scratch for up to max_batch examples (activations and their gradients). */
typedef struct ex_mlp_work ex_mlp_work;

/* Elements of parameter k (EX_MLP_W1 ..), its rank and shape (shape holds 2). */
size_t ex_mlp_param_count(const ex_mlp_dims *d, int k);
int    ex_mlp_param_shape(const ex_mlp_dims *d, int k, int64_t shape[2]);
/* The buffer of parameter k in p. */
float *ex_mlp_param(const ex_mlp_params *p, int k);
/* Stable variable name of parameter k ("w1", "b1", "w2", "b2"). */
const char *ex_mlp_param_name(int k);

/* Allocate zeroed parameters (or gradient buffers).  Success: *out owns four
 * buffers; free with ex_mlp_params_free.  Errors: SR_EINVAL (a size < 1),
 * SR_ENOMEM. */
sr_err ex_mlp_params_new(const ex_mlp_dims *d, ex_mlp_params *out);
void   ex_mlp_params_free(ex_mlp_params *p);

/* He initialisation from the seed: w ~ U(-a, a) with a = sqrt(6 / fan_in),
 * biases 0.  The same seed gives the same values everywhere. */
void ex_mlp_init(const ex_mlp_dims *d, uint64_t seed, ex_mlp_params *p);

/* Scratch for batches of up to max_batch examples.  Errors: SR_EINVAL,
 * SR_ENOMEM.  Free with ex_mlp_work_destroy (NULL is fine). */
sr_err ex_mlp_work_new(const ex_mlp_dims *d, int max_batch, ex_mlp_work **out);
void   ex_mlp_work_destroy(ex_mlp_work *w);

/* Mean cross-entropy of the n examples x[n x in] with labels y[n] (each
 * < out), and its gradient with respect to every parameter, written to g
 * (overwritten, not accumulated).  1 <= n <= max_batch.  Errors: SR_EINVAL
 * (n out of range, a label >= out). */
sr_err ex_mlp_loss_grad(const ex_mlp_dims *d, const ex_mlp_params *p, const float *x,
                        const uint8_t *y, int n, ex_mlp_work *w, ex_mlp_params *g, float *loss);

/* The mean cross-entropy only (forward pass). */
sr_err ex_mlp_loss(const ex_mlp_dims *d, const ex_mlp_params *p, const float *x, const uint8_t *y,
                   int n, ex_mlp_work *w, float *loss);

/* Predicted class of each of the n examples into pred[n]. */
sr_err ex_mlp_predict(const ex_mlp_dims *d, const ex_mlp_params *p, const float *x, int n,
                      ex_mlp_work *w, uint8_t *pred);

#endif
