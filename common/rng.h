/*
 * rng.h - the seeded pseudo-random generator of the tools and tests: splitmix64 to seed (and to
 * derive well-mixed 64-bit values), xoshiro256** to draw. Deterministic for a seed on every
 * host, so a benchmark or a generated trace is reproducible from its seed alone.
 *
 * Not for anything that must be unguessable (consumer ids use getrandom).
 */
#ifndef LANESCHED_RNG_H
#define LANESCHED_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s[4];
} rng_t;

/* Advances *state and returns its next splitmix64 output. */
uint64_t rng_splitmix64(uint64_t *state);
void rng_seed(rng_t *r, uint64_t seed);
uint64_t rng_next(rng_t *r);
/* Uniform in [0, 1) with 53 random bits. */
double rng_uniform(rng_t *r);
/* Standard normal (Box-Muller; one of the pair is used). */
double rng_normal(rng_t *r);
/* An index in [0, n) drawn with the weights whose running sums cdf[0..n-1] holds (borrowed;
 * nondecreasing, cdf[n-1] > 0, n > 0): the first k with cdf[k] > u * cdf[n-1]. One uniform. */
uint32_t rng_cdf_draw(rng_t *r, const double *cdf, uint32_t n);

#endif
