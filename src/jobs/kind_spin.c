/* SPDX-License-Identifier: MIT */
/*
 * jobs/kind_spin.c: GET /v1/spin?n=N -> 200 text/plain, decimal of the
 * reference xorshift loop after N rounds and "\n" (the loop the HTTP peers
 * of bench/README.md run, bit for bit). 400 when n is missing, not a strict
 * decimal, given twice or above [jobs] spin_max_n. Runs in slices: the
 * clock is read every SPIN_CHUNK rounds (about 7 us) and the slice ends at
 * the deadline. Threading: the job contract of <voltd/module.h>.
 */
#include "jobs/builtin.h"

#include <errno.h>
#include <inttypes.h>

#define SPIN_SEED 0x9E3779B97F4A7C15ull
#define SPIN_CHUNK 4096

struct spin_state {
	uint64_t x;
	uint64_t left;
};

static int spin_start(struct voltd_job *job, void *state)
{
	struct spin_state *s = state;
	uint64_t n;
	int rc = voltd->query_u64(job, "n", &n);

	if (rc == -ENOENT)
		return voltd->respondf(job, 400, "n: missing (/v1/spin?n=N)\n");
	if (rc < 0)
		return voltd->respondf(job, 400, "n: not a decimal\n");
	/* Read once per job: the key is live. */
	int64_t max = voltd->key_int(voltd->mod_of(job), VJOB_KEY_SPIN_MAX_N);
	if (n > (uint64_t)max)
		return voltd->respondf(job, 400, "n: above spin_max_n (%" PRId64 ")\n", max);
	s->x = SPIN_SEED;
	s->left = n;
	return VOLTD_STEP_MORE;
}

static int spin_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	struct spin_state *s = state;
	uint64_t x = s->x, left = s->left;

	for (;;) {
		uint64_t k = left < SPIN_CHUNK ? left : SPIN_CHUNK;
		left -= k;
		while (k--) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
		if (left == 0)
			return voltd->respondf(job, 200, "%" PRIu64 "\n", x);
		if (voltd->now_ns() >= deadline_ns)
			break;
	}
	s->x = x;
	s->left = left;
	return VOLTD_STEP_MORE;
}

const struct voltd_kind vjob_builtin_spin = {
	.name = "spin",
	.route = "/v1/spin",
	.methods = "GET",
	.state_size = sizeof(struct spin_state),
	.start = spin_start,
	.step = spin_step,
	.doc = "n rounds of the reference xorshift loop, in slices",
};
