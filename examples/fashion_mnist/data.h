/*
 * Fashion-MNIST as the example trains on it: a set's images and labels from
 * the IDX files in a directory, each task's shard of the training set, and
 * the batch of every step, all from the seed.  See docs/example.md.
 */
#ifndef EX_DATA_H
#define EX_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "syncrep/error.h"

/* Where Debian's dataset-fashion-mnist package puts the files. */
#define EX_DATA_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
#define EX_DATA_CLASSES     10

/* Images with their labels. */
typedef struct {
    size_t   n;      /* examples */
    int      pixels; /* per image (rows x cols) */
    uint8_t *images; /* n x pixels, 0..255, owned */
    uint8_t *labels; /* n, each < EX_DATA_CLASSES, owned */
} ex_dataset;

/* Load <dir>/<set>-images-idx3-ubyte[.gz] and <dir>/<set>-labels-idx1-ubyte[.gz]
 * (set is "train" or "t10k") and check they match: 3-d images, 1-d labels,
 * the same count, labels < EX_DATA_CLASSES.  Failure: *out untouched, the
 * reason in err.  Errors: SR_EINVAL, SR_ENOENT (files missing: the message
 * says which package provides them), SR_ECORRUPT, SR_ENOTSUP, SR_ENOMEM. */
sr_err ex_dataset_load(const char *dir, const char *set, ex_dataset *out, char *err,
                       size_t err_len);
void   ex_dataset_free(ex_dataset *d);

/* Convert n images, given by their indices (or the first n from `first` when
 * idx is NULL), to floats in [0, 1]: x[n x pixels]. */
void ex_dataset_to_float(const ex_dataset *d, const size_t *idx, size_t first, size_t n, float *x,
                         uint8_t *labels);

/* One task's shard and its batch order.  The training set is permuted once
 * with the seed and cut into ntasks contiguous shards; each epoch of a shard
 * is a fresh permutation from (seed, task, epoch).  The batch of step s is
 * the (s mod per_epoch)-th batch of epoch s / per_epoch, so the data a worker
 * trains on at a step does not depend on timing, restarts or which pushes
 * the coordinator accepted. */
typedef struct {
    uint64_t seed;
    int      task;
    size_t   batch;     /* examples per step */
    size_t  *shard;     /* this task's example indices, owned */
    size_t   n;         /* shard size */
    size_t   per_epoch; /* batches per epoch: n / batch (the remainder is skipped) */
    size_t  *order;     /* the current epoch's permutation of shard, owned */
    int64_t  epoch;     /* epoch `order` holds, -1 before the first */
} ex_sampler;

/* Errors: SR_EINVAL (task outside [0, ntasks), a shard smaller than one batch),
 * SR_ENOMEM. */
sr_err ex_sampler_init(ex_sampler *s, size_t n_examples, int task, int ntasks, uint64_t seed,
                       size_t batch);
void   ex_sampler_free(ex_sampler *s);

/* The batch indices (into the data set) for step `step` >= 0; borrowed until
 * the next call. */
const size_t *ex_sampler_batch(ex_sampler *s, int64_t step);

#endif
