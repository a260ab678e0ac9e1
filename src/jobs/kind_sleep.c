/* SPDX-License-Identifier: MIT */
/*
 * jobs/kind_sleep.c: GET /v1/sleep?ms=N -> 200 "slept N ms\n" at least N ms
 * after the job was created. The job never blocks: its step asks to be
 * stepped again at the wake time (sleep_until, VOLTD_STEP_SLEEP) and the
 * exec stage waits on an I/O timer. 400 when ms is missing, not a strict
 * decimal, given twice or above [jobs] sleep_max_ms. Threading: the job
 * contract of <voltd/module.h>.
 */
#include "jobs/builtin.h"

#include <errno.h>
#include <inttypes.h>

#define NS_PER_MS 1000000

struct sleep_state {
	uint64_t ms;
	int64_t until_ns;
};

static int sleep_start(struct voltd_job *job, void *state)
{
	struct sleep_state *s = state;
	uint64_t ms;
	int rc = voltd->query_u64(job, "ms", &ms);

	if (rc == -ENOENT)
		return voltd->respondf(job, 400, "ms: missing (/v1/sleep?ms=N)\n");
	if (rc < 0)
		return voltd->respondf(job, 400, "ms: not a decimal\n");
	/* Read once per job: the key is live. The second test keeps
	 * ms * 1e6 within int64 whatever the key's bounds. */
	int64_t max = voltd->key_int(voltd->mod_of(job), VJOB_KEY_SLEEP_MAX_MS);
	if (ms > (uint64_t)max || ms > (uint64_t)INT64_MAX / NS_PER_MS / 2)
		return voltd->respondf(job, 400, "ms: above sleep_max_ms (%" PRId64 ")\n", max);
	s->ms = ms;
	s->until_ns = voltd->now_ns() + (int64_t)ms * NS_PER_MS;
	return VOLTD_STEP_MORE;
}

static int sleep_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	struct sleep_state *s = state;

	(void)deadline_ns;
	if (voltd->now_ns() < s->until_ns) {
		voltd->sleep_until(job, s->until_ns);
		return VOLTD_STEP_SLEEP;
	}
	return voltd->respondf(job, 200, "slept %" PRIu64 " ms\n", s->ms);
}

const struct voltd_kind vjob_builtin_sleep = {
	.name = "sleep",
	.route = "/v1/sleep",
	.methods = "GET",
	.state_size = sizeof(struct sleep_state),
	.start = sleep_start,
	.step = sleep_step,
	.doc = "answers after ms milliseconds, holding no thread meanwhile",
};
