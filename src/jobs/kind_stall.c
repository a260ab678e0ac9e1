/* SPDX-License-Identifier: MIT */
/*
 * jobs/kind_stall.c: TEST BUILDS ONLY (voltd-test, VOLTD_TEST_KINDS; never
 * in the installed voltd): GET /v1/stall?ms=N busy-loops N ms in one slice,
 * ignoring the slice deadline and never yielding, so the worker running it
 * is stuck in one poll: what the stall monitor (rt/monitor.c) must flag.
 * 200 "stalled N ms\n"; 400 when ms is missing, not a decimal or above
 * 60000. Threading: the job contract of <voltd/module.h> (which it breaks
 * on purpose: a step that never yields).
 */
#include "jobs/builtin.h"

#include <errno.h>
#include <inttypes.h>

#define STALL_MAX_MS 60000u
#define NS_PER_MS 1000000

struct stall_state {
	uint64_t ms;
};

static int stall_start(struct voltd_job *job, void *state)
{
	struct stall_state *s = state;
	uint64_t ms;
	int rc = voltd->query_u64(job, "ms", &ms);

	if (rc == -ENOENT)
		return voltd->respondf(job, 400, "ms: missing (/v1/stall?ms=N)\n");
	if (rc < 0)
		return voltd->respondf(job, 400, "ms: not a decimal\n");
	if (ms > STALL_MAX_MS)
		return voltd->respondf(job, 400, "ms: above %u\n", STALL_MAX_MS);
	s->ms = ms;
	return VOLTD_STEP_MORE;
}

static int stall_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	struct stall_state *s = state;
	int64_t end = voltd->now_ns() + (int64_t)s->ms * NS_PER_MS;

	(void)deadline_ns; /* the point: no yield */
	while (voltd->now_ns() < end)
		;
	return voltd->respondf(job, 200, "stalled %" PRIu64 " ms\n", s->ms);
}

const struct voltd_kind vjob_builtin_stall = {
	.name = "stall",
	.route = "/v1/stall",
	.methods = "GET",
	.state_size = sizeof(struct stall_state),
	.start = stall_start,
	.step = stall_step,
	.doc = "test builds only: stalls its worker for ms milliseconds",
};
