/* SPDX-License-Identifier: MIT */
/*
 * jobs/kind_spin.c: GET /v1/spin?n=N -> 200 text/plain, decimal of the
 * reference xorshift loop after N rounds and "\n" (the loop the HTTP peers
 * of bench/README.md run, bit for bit). 400 when n is missing, not a strict
 * decimal or above spin_max_n. Runs in slices: the clock is read every
 * SPIN_CHUNK rounds (about 7 us) and the slice ends at the deadline.
 * Threading: a job is stepped by one thread at a time (job.h).
 */
#include "jobs/internal.h"
#include "base/time.h"
#include "base/query.h"

#include <errno.h>
#include <inttypes.h>

#define SPIN_SEED 0x9E3779B97F4A7C15ull
#define SPIN_CHUNK 4096

struct spin_state {
	uint64_t x;
	uint64_t left;
};

static int spin_start(struct vjob *job, const struct vjob_config *cfg)
{
	struct spin_state *s = vjob__state(job);
	uint64_t n;
	int rc = vb_query_u64(job->query, job->query_len, "n", &n);
	if (rc == -ENOENT)
		return vjob__finish_fmt(job, 400, "n: missing (/v1/spin?n=N)\n");
	if (rc < 0)
		return vjob__finish_fmt(job, 400, "n: not a decimal\n");
	if (n > cfg->spin_max_n)
		return vjob__finish_fmt(job, 400, "n: above spin_max_n (%" PRIu64 ")\n",
					cfg->spin_max_n);
	s->x = SPIN_SEED;
	s->left = n;
	return VJOB_MORE;
}

static int spin_step(struct vjob *job, int64_t deadline_ns)
{
	struct spin_state *s = vjob__state(job);
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
			return vjob__finish_fmt(job, 200, "%" PRIu64 "\n", x);
		if (vb_now_ns() >= deadline_ns)
			break;
	}
	s->x = x;
	s->left = left;
	return VJOB_MORE;
}

const struct vjob_kind vjob_kind_spin = {
	.name = "spin",
	.path = "/v1/spin",
	.allow = "GET",
	.state_size = sizeof(struct spin_state),
	.start = spin_start,
	.step = spin_step,
};
