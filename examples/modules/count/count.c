/* SPDX-License-Identifier: MIT */
/*
 * count: a sliced CPU kind. GET /v1/count?n=N answers the decimal of the
 * xorshift loop after N rounds and "\n": the loop of voltd's own /v1/spin,
 * bit for bit, so the two serve the same answers for the same n and a
 * benchmark of one against the other compares like with like.
 *
 * What it shows: per-job state that carries the loop from one step to the
 * next; a step that watches its deadline and returns VOLTD_STEP_MORE when
 * its slice is used up; a live key (max_n: `voltctl set module.count.max_n
 * 5000` takes effect on the next request); a declared counter (rounds),
 * shown per kind by `voltctl stats kinds`.
 */
#include <voltd/module.h>

#include <errno.h>
#include <inttypes.h>

/* Indexes into keys[] and counters[] below. */
enum { KEY_MAX_N };
enum { COUNTER_ROUNDS };

#define SEED 0x9E3779B97F4A7C15ull
/* Rounds between two looks at the clock: about 7 us of work. */
#define CHUNK 4096

struct count_state {
	uint64_t x;    /* the loop's value so far */
	uint64_t left; /* rounds still to run */
};

static int count_start(struct voltd_job *job, void *state)
{
	struct count_state *s = state;
	/* A live key: read it once per job, here. */
	uint64_t max = (uint64_t)voltd->key_int(voltd->mod_of(job), KEY_MAX_N);
	uint64_t n;
	int rc = voltd->query_u64(job, "n", &n);

	if (rc == -ENOENT)
		return voltd->respondf(job, 400, "n: missing (/v1/count?n=N)\n");
	if (rc < 0)
		return voltd->respondf(job, 400, "n: not a decimal\n");
	if (n > max)
		return voltd->respondf(job, 400, "n: above max_n (%" PRIu64 ")\n", max);
	s->x = SEED;
	s->left = n;
	return VOLTD_STEP_MORE;
}

static int count_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	struct count_state *s = state;
	uint64_t x = s->x, left = s->left, ran = 0;

	for (;;) {
		uint64_t k = left < CHUNK ? left : CHUNK;

		left -= k;
		ran += k;
		while (k--) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
		if (left == 0) {
			voltd->count(job, COUNTER_ROUNDS, ran);
			return voltd->respondf(job, 200, "%" PRIu64 "\n", x);
		}
		if (voltd->now_ns() >= deadline_ns)
			break;
	}
	voltd->count(job, COUNTER_ROUNDS, ran);
	s->x = x;
	s->left = left;
	return VOLTD_STEP_MORE;
}

static const struct voltd_counter count_counters[] = {
	{ .name = "rounds", .help = "xorshift rounds run" },
	{ .name = NULL },
};

static const struct voltd_kind count_kinds[] = {
	{
		.name = "count",
		.route = "/v1/count",
		.methods = "GET",
		.state_size = sizeof(struct count_state),
		.start = count_start,
		.step = count_step,
		.counters = count_counters,
		.doc = "the xorshift loop of /v1/spin, n rounds in slices",
	},
	{ .name = NULL },
};

static const struct voltd_key count_keys[] = {
	{
		.name = "max_n",
		.type = VOLTD_KEY_INT,
		.flags = VOLTD_KEY_LIVE,
		.def = "1000000000",
		.min = 1,
		.max = 1000000000000,
		.doc = "largest n of /v1/count (400 above)",
	},
	{ .name = NULL },
};

static const struct voltd_module count_module = {
	VOLTD_MODULE_HEAD,
	.name = "count",
	.version = "1.0.0",
	.kinds = count_kinds,
	.keys = count_keys,
};

VOLTD_MODULE(count_module)
