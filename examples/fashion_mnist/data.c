/* Data set loading, shards and batch order (data.h). */
#include "examples/fashion_mnist/data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "examples/fashion_mnist/idx.h"
#include "examples/fashion_mnist/rng.h"

/* Prefer the .gz the Debian package ships; accept an uncompressed copy. */
static sr_err
find_file(const char *dir, const char *set, const char *kind, char *path, size_t len, char *err,
          size_t err_len)
{
    static const char *const suffix[] = {".gz", ""};

    for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
        int n = snprintf(path, len, "%s/%s-%s%s", dir, set, kind, suffix[i]);
        if (n < 0 || (size_t)n >= len) {
            snprintf(err, err_len, "data directory path too long: %s", dir);
            return SR_EINVAL;
        }
        if (access(path, R_OK) == 0) {
            return SR_OK;
        }
    }
    snprintf(err, err_len,
             "no readable %s/%s-%s(.gz): install Debian's dataset-fashion-mnist package "
             "(files in " EX_DATA_DEFAULT_DIR ") or pass --data-dir DIR",
             dir, set, kind);
    return SR_ENOENT;
}

sr_err
ex_dataset_load(const char *dir, const char *set, ex_dataset *out, char *err, size_t err_len)
{
    char   ipath[1024], lpath[1024];
    ex_idx img = {{0}, NULL}, lab = {{0}, NULL};
    sr_err rc;

    if (dir == NULL || set == NULL || out == NULL) {
        snprintf(err, err_len, "ex_dataset_load: NULL argument");
        return SR_EINVAL;
    }
    if ((rc = find_file(dir, set, "images-idx3-ubyte", ipath, sizeof(ipath), err, err_len)) !=
            SR_OK ||
        (rc = find_file(dir, set, "labels-idx1-ubyte", lpath, sizeof(lpath), err, err_len)) !=
            SR_OK) {
        return rc;
    }
    if ((rc = ex_idx_load(ipath, &img, err, err_len)) != SR_OK ||
        (rc = ex_idx_load(lpath, &lab, err, err_len)) != SR_OK) {
        goto fail;
    }
    rc = SR_ECORRUPT;
    if (img.h.ndim != 3) {
        snprintf(err, err_len, "%s: images must have 3 dimensions (count, rows, cols), not %d",
                 ipath, img.h.ndim);
        goto fail;
    }
    if (lab.h.ndim != 1) {
        snprintf(err, err_len, "%s: labels must have 1 dimension, not %d", lpath, lab.h.ndim);
        goto fail;
    }
    if (img.h.dims[0] != lab.h.dims[0]) {
        snprintf(err, err_len, "%s holds %u images but %s %u labels", ipath, img.h.dims[0], lpath,
                 lab.h.dims[0]);
        goto fail;
    }
    for (size_t i = 0; i < lab.h.count; i++) {
        if (lab.data[i] >= EX_DATA_CLASSES) {
            snprintf(err, err_len, "%s: label %zu is %u (classes are 0..%d)", lpath, i, lab.data[i],
                     EX_DATA_CLASSES - 1);
            goto fail;
        }
    }
    out->n = img.h.dims[0];
    out->pixels = (int)(img.h.dims[1] * img.h.dims[2]);
    out->images = img.data;
    out->labels = lab.data;
    return SR_OK;
fail:
    ex_idx_free(&img);
    ex_idx_free(&lab);
    return rc;
}

void
ex_dataset_free(ex_dataset *d)
{
    if (d == NULL) {
        return;
    }
    free(d->images);
    free(d->labels);
    memset(d, 0, sizeof(*d));
}

void
ex_dataset_to_float(const ex_dataset *d, const size_t *idx, size_t first, size_t n, float *x,
                    uint8_t *labels)
{
    const size_t px = (size_t)d->pixels;

    for (size_t i = 0; i < n; i++) {
        size_t         k = idx != NULL ? idx[i] : first + i;
        const uint8_t *src = d->images + k * px;
        float         *dst = x + i * px;
        for (size_t j = 0; j < px; j++) {
            dst[j] = (float)src[j] * (1.0f / 255.0f);
        }
        if (labels != NULL) {
            labels[i] = d->labels[k];
        }
    }
}

sr_err
ex_sampler_init(ex_sampler *s, size_t n_examples, int task, int ntasks, uint64_t seed, size_t batch)
{
    size_t *all = NULL;
    size_t  lo, hi;
    ex_rng  r;

    if (s == NULL || ntasks < 1 || task < 0 || task >= ntasks || batch < 1) {
        return SR_EINVAL;
    }
    lo = n_examples * (size_t)task / (size_t)ntasks;
    hi = n_examples * (size_t)(task + 1) / (size_t)ntasks;
    if (hi - lo < batch) {
        return SR_EINVAL;
    }
    memset(s, 0, sizeof(*s));
    if ((all = malloc(n_examples * sizeof(size_t))) == NULL ||
        (s->order = malloc((hi - lo) * sizeof(size_t))) == NULL) {
        free(all);
        return SR_ENOMEM;
    }
    for (size_t i = 0; i < n_examples; i++) {
        all[i] = i;
    }
    /* Every task draws the same permutation (it depends on the seed only), so
     * the shards are disjoint and cover the set. */
    r = ex_rng_seed(seed, 2 /* shards */, 0, 0);
    ex_rng_shuffle(&r, all, n_examples);
    memmove(all, all + lo, (hi - lo) * sizeof(size_t));
    s->shard = all;
    s->n = hi - lo;
    s->seed = seed;
    s->task = task;
    s->batch = batch;
    s->per_epoch = s->n / batch;
    s->epoch = -1;
    return SR_OK;
}

void
ex_sampler_free(ex_sampler *s)
{
    if (s == NULL) {
        return;
    }
    free(s->shard);
    free(s->order);
    memset(s, 0, sizeof(*s));
}

const size_t *
ex_sampler_batch(ex_sampler *s, int64_t step)
{
    uint64_t st = step < 0 ? 0 : (uint64_t)step;
    int64_t  epoch = (int64_t)(st / s->per_epoch);

    if (epoch != s->epoch) {
        ex_rng r = ex_rng_seed(s->seed, 3 /* batch order */, (uint64_t)s->task, (uint64_t)epoch);
        memcpy(s->order, s->shard, s->n * sizeof(size_t));
        ex_rng_shuffle(&r, s->order, s->n);
        s->epoch = epoch;
    }
    return s->order + (st % s->per_epoch) * s->batch;
}
