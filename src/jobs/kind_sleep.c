/* SPDX-License-Identifier: MIT */
/*
 * jobs/kind_sleep.c: GET /v1/sleep?ms=N -> 200 "slept N ms\n" at least N ms
 * after the job was created. The job never blocks: its step returns
 * VJOB_SLEEP with the wake time and the exec stage waits on an I/O timer.
 * 400 when ms is missing, not a strict decimal or above sleep_max_ms.
 * Threading: a job is stepped by one thread at a time (job.h).
 */
#include "jobs/internal.h"
#include "base/time.h"
#include "base/query.h"

#include <errno.h>
#include <inttypes.h>

struct sleep_state {
	uint64_t ms;
	int64_t until_ns;
};

static int sleep_start(struct vjob *job, const struct vjob_config *cfg)
{
	struct sleep_state *s = vjob__state(job);
	uint64_t ms;
	int rc = vb_query_u64(job->query, job->query_len, "ms", &ms);
	if (rc == -ENOENT)
		return vjob__finish_fmt(job, 400, "ms: missing (/v1/sleep?ms=N)\n");
	if (rc < 0)
		return vjob__finish_fmt(job, 400, "ms: not a decimal\n");
	/* the second test keeps ms * 1e6 within int64 whatever the config */
	if (ms > cfg->sleep_max_ms || ms > (uint64_t)INT64_MAX / VB_NS_PER_MS / 2)
		return vjob__finish_fmt(job, 400, "ms: above sleep_max_ms (%" PRIu64 ")\n",
					cfg->sleep_max_ms);
	s->ms = ms;
	s->until_ns = vb_now_ns() + (int64_t)ms * VB_NS_PER_MS;
	return VJOB_MORE;
}

static int sleep_step(struct vjob *job, int64_t deadline_ns)
{
	(void)deadline_ns;
	struct sleep_state *s = vjob__state(job);
	if (vb_now_ns() < s->until_ns) {
		job->wake_ns = s->until_ns;
		return VJOB_SLEEP;
	}
	return vjob__finish_fmt(job, 200, "slept %" PRIu64 " ms\n", s->ms);
}

const struct vjob_kind vjob_kind_sleep = {
	.name = "sleep",
	.path = "/v1/sleep",
	.allow = "GET",
	.state_size = sizeof(struct sleep_state),
	.start = sleep_start,
	.step = sleep_step,
};
