/* SPDX-License-Identifier: MIT */
/*
 * jobs/kind_echo.c: POST /v1/echo -> 200, the request body back
 * (application/octet-stream). The body buffer moves from the input to the
 * result: no copy. Done in one step, in the exec stage like every job.
 * Threading: a job is stepped by one thread at a time (job.h).
 */
#include "jobs/internal.h"

static int echo_start(struct vjob *job, const struct vjob_config *cfg)
{
	(void)job;
	(void)cfg;
	return VJOB_MORE;
}

static int echo_step(struct vjob *job, int64_t deadline_ns)
{
	(void)deadline_ns;
	uint8_t *b = job->in_body;
	size_t n = job->in_len;
	job->in_body = NULL;
	job->in_len = 0;
	if (!b)
		return vjob__finish_static(job, 200, "application/octet-stream", "");
	return vjob__finish_owned(job, 200, "application/octet-stream", b, n);
}

const struct vjob_kind vjob_kind_echo = {
	.name = "echo",
	.path = "/v1/echo",
	.allow = "POST",
	.start = echo_start,
	.step = echo_step,
};
