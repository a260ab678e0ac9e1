/* SPDX-License-Identifier: MIT */
/*
 * jobs/kind_stall.c: TEST BUILDS ONLY (voltd-test, VOLTD_TEST_KINDS; never
 * in the installed voltd): GET /v1/stall?ms=N busy-loops N ms in one slice,
 * ignoring the slice deadline and never yielding, so the worker running it
 * is stuck in one poll: what the stall monitor (rt/monitor.c) must flag.
 * 200 "stalled N ms\n"; 400 when ms is missing, not a decimal or above
 * 60000. Threading: a job is stepped by one thread at a time (job.h).
 */
#include "jobs/internal.h"
#include "base/compiler.h"
#include "base/time.h"
#include "base/query.h"

#include <errno.h>
#include <inttypes.h>

#define STALL_MAX_MS 60000u

struct stall_state {
	uint64_t ms;
};

static int stall_start(struct vjob *job, const struct vjob_config *cfg)
{
	struct stall_state *s = vjob__state(job);
	uint64_t ms;
	int rc = vb_query_u64(job->query, job->query_len, "ms", &ms);

	(void)cfg;
	if (rc == -ENOENT)
		return vjob__finish_fmt(job, 400, "ms: missing (/v1/stall?ms=N)\n");
	if (rc < 0)
		return vjob__finish_fmt(job, 400, "ms: not a decimal\n");
	if (ms > STALL_MAX_MS)
		return vjob__finish_fmt(job, 400, "ms: above %u\n", STALL_MAX_MS);
	s->ms = ms;
	return VJOB_MORE;
}

static int stall_step(struct vjob *job, int64_t deadline_ns)
{
	struct stall_state *s = vjob__state(job);
	int64_t end = vb_now_ns() + (int64_t)s->ms * VB_NS_PER_MS;

	(void)deadline_ns; /* the point: no yield */
	while (vb_now_ns() < end)
		vb_cpu_relax();
	return vjob__finish_fmt(job, 200, "stalled %" PRIu64 " ms\n", s->ms);
}

const struct vjob_kind vjob_kind_stall = {
	.name = "stall",
	.path = "/v1/stall",
	.allow = "GET",
	.state_size = sizeof(struct stall_state),
	.start = stall_start,
	.step = stall_step,
};
