/* The chaos model.  See chaos_model.h. */
#include "chaos/chaos_model.h"

#include <string.h>

#include "core/dtype.h"

static const sr_chaos_var vars[SR_CHAOS_NVARS] = {
    {"dense_a", SR_FLOAT32, 1, {16, 0}, 0, 0, 0},
    {"dense_b", SR_FLOAT64, 2, {4, 3}, 0, 0, 1},
    {"bias", SR_FLOAT32, 0, {0, 0}, 0, 0, 2},
    {"embedding", SR_FLOAT32, 2, {32, 4}, 1, 0, 3},
};

/* --model-api.  Ids from 16, so no tensor shares a variable's values. */
static const sr_chaos_var tensors[SR_CHAOS_NTENSORS] = {
    {"conv1.weight", SR_FLOAT32, 2, {8, 9}, 0, 0, 16},
    {"conv1.bias", SR_FLOAT32, 1, {8, 0}, 0, 0, 17},
    {"fc1.weight", SR_FLOAT64, 2, {6, 5}, 0, 0, 18},
    {"bn1.scale", SR_FLOAT32, 1, {5, 0}, 0, 0, 19},
    {"block.weight", SR_FLOAT32, 2, {16, 16}, 0, 0, 20},
    {"fc1.bias", SR_FLOAT64, 1, {5, 0}, 0, 0, 21},
    {"frozen.mask", SR_FLOAT32, 2, {4, 3}, 0, 1, 22},
    {"gain", SR_FLOAT32, 0, {0, 0}, 0, 0, 23},
    {"head.weight", SR_FLOAT64, 2, {3, 7}, 0, 0, 24},
    {"embedding", SR_FLOAT32, 2, {32, 4}, 1, 0, 25},
    {"block.bias", SR_FLOAT32, 1, {16, 0}, 0, 0, 26},
    {"temperature", SR_FLOAT64, 0, {0, 0}, 0, 0, 27},
};

const sr_chaos_var *
sr_chaos_vars(void)
{
    return vars;
}

const sr_chaos_var *
sr_chaos_tensors(void)
{
    return tensors;
}

int
sr_chaos_tensor_index(const char *name)
{
    for (int t = 0; t < SR_CHAOS_NTENSORS; t++) {
        if (strcmp(tensors[t].name, name) == 0) {
            return t;
        }
    }
    return -1;
}

uint64_t
sr_chaos_elems(const sr_chaos_var *v)
{
    uint64_t n = 1;
    for (int i = 0; i < v->ndim; i++) {
        n *= (uint64_t)v->shape[i];
    }
    return n;
}

size_t
sr_chaos_bytes(const sr_chaos_var *v)
{
    return (size_t)sr_chaos_elems(v) * sr_dtype_size(v->dtype);
}

void
sr_chaos_rng_seed(sr_chaos_rng *r, uint64_t seed)
{
    /* splitmix64 of the seed, so nearby seeds give unrelated streams */
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    r->s = (z ^ (z >> 31)) | 1;
}

uint64_t
sr_chaos_rng_next(sr_chaos_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545f4914f6cdd1dULL;
}

double
sr_chaos_rng_unit(sr_chaos_rng *r)
{
    return (double)(sr_chaos_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* A value in [-1, 1] with three decimals, from (seed, a, b, i). */
static double
value_at(uint64_t seed, uint64_t a, uint64_t b, uint64_t i)
{
    sr_chaos_rng r;
    sr_chaos_rng_seed(&r, seed ^ (a * 0x100000001b3ULL) ^ (b << 20) ^ (i << 40) ^ i);
    return (double)((int64_t)(sr_chaos_rng_next(&r) % 2001) - 1000) / 1000.0;
}

static void
put(int dtype, void *p, uint64_t i, double v)
{
    if (dtype == SR_FLOAT32) {
        ((float *)p)[i] = (float)v;
    } else {
        ((double *)p)[i] = v;
    }
}

static double
get(int dtype, const void *p, uint64_t i)
{
    return dtype == SR_FLOAT32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

void
sr_chaos_var_init(uint64_t seed, const sr_chaos_var *cv, void *dst)
{
    for (uint64_t i = 0; i < sr_chaos_elems(cv); i++) {
        put(cv->dtype, dst, i, value_at(seed, 1, (uint64_t)cv->id, i));
    }
}

void
sr_chaos_init(uint64_t seed, int v, void *dst)
{
    sr_chaos_var_init(seed, &vars[v], dst);
}

/* The target y_t of task t for element i of variable (or tensor) id. */
static double
target(uint64_t seed, int id, int32_t task, uint64_t i)
{
    return value_at(seed, 2 + (uint64_t)task, (uint64_t)id, i);
}

void
sr_chaos_var_grad_dense(uint64_t seed, const sr_chaos_var *cv, int32_t task, const void *val,
                        void *grad)
{
    for (uint64_t i = 0; i < sr_chaos_elems(cv); i++) {
        /* Computed in the variable's dtype, as a worker would. */
        if (cv->dtype == SR_FLOAT32) {
            ((float *)grad)[i] = ((const float *)val)[i] - (float)target(seed, cv->id, task, i);
        } else {
            ((double *)grad)[i] = ((const double *)val)[i] - target(seed, cv->id, task, i);
        }
    }
}

void
sr_chaos_grad_dense(uint64_t seed, int v, int32_t task, const void *val, void *grad)
{
    sr_chaos_var_grad_dense(seed, &vars[v], task, val, grad);
}

void
sr_chaos_var_grad_sparse(uint64_t seed, const sr_chaos_var *cv, int32_t task, const void *val,
                         int64_t *idx, void *rows)
{
    uint64_t nrows = (uint64_t)cv->shape[0];
    uint64_t width = sr_chaos_elems(cv) / nrows;

    /* Rows depend on the task; the last repeats the first (summed by the
     * coordinator and counted once for the row). */
    idx[0] = (int64_t)(((uint64_t)task * 7 + 3) % nrows);
    idx[1] = (int64_t)(((uint64_t)task * 13 + 11) % nrows);
    idx[2] = idx[0];
    for (int k = 0; k < SR_CHAOS_SPARSE_ROWS; k++) {
        for (uint64_t j = 0; j < width; j++) {
            uint64_t e = (uint64_t)idx[k] * width + j;
            double   g = get(cv->dtype, val, e) - target(seed, cv->id, task, e);
            put(cv->dtype, rows, (uint64_t)k * width + j, k == 2 ? 0.5 * g : g);
        }
    }
}

void
sr_chaos_grad_sparse(uint64_t seed, int v, int32_t task, const void *val, int64_t *idx, void *rows)
{
    sr_chaos_var_grad_sparse(seed, &vars[v], task, val, idx, rows);
}
