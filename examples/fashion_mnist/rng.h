/*
 * A small seeded PRNG for the example (splitmix64): weights, shards and batch
 * order are functions of the seed alone, on every platform, so a run is
 * reproducible without depending on the C library's rand().
 */
#ifndef EX_RNG_H
#define EX_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t s; /* state; any value is valid */
} ex_rng;

/* Mix a seed with a stream tag and up to two numbers (task index, epoch...),
 * so different uses of one seed get independent streams. */
static inline ex_rng
ex_rng_seed(uint64_t seed, uint64_t tag, uint64_t a, uint64_t b)
{
    ex_rng r = {seed ^ 0x9e3779b97f4a7c15ull};

    r.s ^= tag * 0xbf58476d1ce4e5b9ull;
    r.s ^= (a + 1) * 0x94d049bb133111ebull;
    r.s ^= (b + 1) * 0xd6e8feb86659fd93ull;
    return r;
}

static inline uint64_t
ex_rng_next(ex_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 24 random bits (exact in float). */
static inline float
ex_rng_uniform(ex_rng *r)
{
    return (float)(ex_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

/* Uniform integer in [0, n), n > 0, without modulo bias. */
static inline size_t
ex_rng_below(ex_rng *r, size_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % (uint64_t)n;
    uint64_t x;

    do {
        x = ex_rng_next(r);
    } while (x >= limit);
    return (size_t)(x % (uint64_t)n);
}

/* Fisher-Yates shuffle of v[0..n). */
static inline void
ex_rng_shuffle(ex_rng *r, size_t *v, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = ex_rng_below(r, i);
        size_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

#endif
