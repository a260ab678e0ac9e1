/* SPDX-License-Identifier: MIT */
/*
 * jobs/kind_readyz.c: GET|HEAD /readyz -> 200 "ready\n", or 503 "not ready\n"
 * when the server says it is not ready (vjob_input.ready: jobs channel at
 * least 90 % full, drained by the daemon, or stopping). Finishes in vjob_new, like healthz: a
 * readiness probe must not wait behind the queue it reports on. Stateless.
 * Threading: a job is stepped by one thread at a time (job.h).
 */
#include "jobs/internal.h"

static int readyz_start(struct vjob *job, const struct vjob_config *cfg)
{
	(void)cfg;
	if (job->ready)
		return vjob__finish_static(job, 200, "text/plain", "ready\n");
	return vjob__finish_static(job, 503, "text/plain", "not ready\n");
}

static int readyz_step(struct vjob *job, int64_t deadline_ns)
{
	(void)job;
	(void)deadline_ns;
	return VJOB_DONE; /* never reached: done at start */
}

const struct vjob_kind vjob_kind_readyz = {
	.name = "readyz",
	.path = "/readyz",
	.allow = "GET, HEAD",
	.reads_ready = true,
	.start = readyz_start,
	.step = readyz_step,
};
