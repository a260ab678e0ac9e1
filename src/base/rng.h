/* SPDX-License-Identifier: MIT */
/*
 * base/rng.h: xorshift64 PRNG (per owner, not shared) and Lemire's
 * multiply-shift reduction to [0, n) without division.
 */
#ifndef VOLTD_BASE_RNG_H
#define VOLTD_BASE_RNG_H

#include <stdint.h>

struct vb_rng {
	uint64_t s; /* never 0 */
};

static inline void vb_rng_seed(struct vb_rng *r, uint64_t seed)
{
	/* splitmix64 step so that nearby seeds give unrelated streams */
	uint64_t z = seed + 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	z ^= z >> 31;
	r->s = z ? z : 0x9E3779B97F4A7C15ull;
}

static inline uint32_t vb_rng_next32(struct vb_rng *r)
{
	uint64_t x = r->s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	r->s = x;
	return (uint32_t)(x >> 32);
}

/* Uniform-enough value in [0, n) for n >= 1: (x * n) >> 32 (Lemire). */
static inline uint32_t vb_rng_below(struct vb_rng *r, uint32_t n)
{
	return (uint32_t)(((uint64_t)vb_rng_next32(r) * n) >> 32);
}

#endif
