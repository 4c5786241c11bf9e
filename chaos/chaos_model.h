/*
 * The chaos model: a few dense variables and one sparse one (or, with
 * --model-api, a model of a dozen tensors) whose gradients
 * are pure functions of (task index, the variable's current value), so the
 * verifier can recompute every applied step from the step log.  Each task
 * solves its own least-squares problem: loss_t(w) = 0.5 |w - y_t|^2, so the
 * gradient is w - y_t; the sparse variable gets rows chosen by the task
 * (with one index repeated, to exercise in-push summing).
 */
#ifndef SR_CHAOS_MODEL_H
#define SR_CHAOS_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define SR_CHAOS_NVARS       4
#define SR_CHAOS_SPARSE_ROWS 3 /* row indices per sparse push (one repeated) */

typedef struct {
    const char *name;
    int         dtype; /* SR_FLOAT32 / SR_FLOAT64 */
    int         ndim;
    int64_t     shape[2];
    int         sparse; /* pushed as rows */
    int         frozen; /* --model-api: declared SR_DECLARE_NOT_TRAINABLE */
    int         id;     /* salts its values and targets (distinct per tensor) */
} sr_chaos_var;

/* The model's variables, in declaration order. */
const sr_chaos_var *sr_chaos_vars(void);
/* Elements of variable v. */
uint64_t sr_chaos_elems(const sr_chaos_var *v);
/* Bytes of variable v. */
size_t sr_chaos_bytes(const sr_chaos_var *v);

/* The initial value of variable v for a seed (into dst, sr_chaos_bytes). */
void sr_chaos_init(uint64_t seed, int v, void *dst);

/* Dense gradient of task t for variable v at value `val` (into grad). */
void sr_chaos_grad_dense(uint64_t seed, int v, int32_t task, const void *val, void *grad);

/* Sparse gradient: SR_CHAOS_SPARSE_ROWS row indices and their rows. */
void sr_chaos_grad_sparse(uint64_t seed, int v, int32_t task, const void *val, int64_t *idx,
                          void *rows);

/* --model-api (issue 23): the model the workers declare as a whole with
 * sr_client_declare_model and train with sr_client_model_step.  Tensors of
 * mixed sizes (64-byte alignment leaves gaps in their packs) in float32 and
 * float64, one not trainable (its own pack, never pushed) and one sparse
 * (a variable of its own, pushed beside the step call): three packs and a
 * variable in the store.  Every tensor fits 4096 bytes. */
#define SR_CHAOS_NTENSORS 12
const sr_chaos_var *sr_chaos_tensors(void);
/* The index of the tensor called `name` in sr_chaos_tensors(), or -1. */
int sr_chaos_tensor_index(const char *name);

/* sr_chaos_init / sr_chaos_grad_dense / sr_chaos_grad_sparse for any
 * variable or tensor of either table (the values depend on cv->id). */
void sr_chaos_var_init(uint64_t seed, const sr_chaos_var *cv, void *dst);
void sr_chaos_var_grad_dense(uint64_t seed, const sr_chaos_var *cv, int32_t task, const void *val,
                             void *grad);
void sr_chaos_var_grad_sparse(uint64_t seed, const sr_chaos_var *cv, int32_t task, const void *val,
                              int64_t *idx, void *rows);

/* A small deterministic PRNG (xorshift64*), for schedules and values. */
typedef struct {
    uint64_t s;
} sr_chaos_rng;
void     sr_chaos_rng_seed(sr_chaos_rng *r, uint64_t seed);
uint64_t sr_chaos_rng_next(sr_chaos_rng *r);
/* Uniform in [0, 1). */
double sr_chaos_rng_unit(sr_chaos_rng *r);

#endif
