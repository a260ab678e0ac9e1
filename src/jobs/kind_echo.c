/* SPDX-License-Identifier: MIT */
/*
 * jobs/kind_echo.c: POST /v1/echo -> 200, the request body back
 * (application/octet-stream). The body buffer moves from the request to
 * the response: no copy. Done in one step, in the exec stage like every
 * job. Threading: the job contract of <voltd/module.h>.
 */
#include "jobs/builtin.h"

static int echo_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	size_t n;
	void *b = voltd->body_take(job, &n);

	(void)state;
	(void)deadline_ns;
	if (!b)
		return voltd->respond(job, 200, "application/octet-stream", "", 0, VOLTD_BODY_STATIC);
	return voltd->respond(job, 200, "application/octet-stream", b, n, VOLTD_BODY_MALLOC);
}

const struct voltd_kind vjob_builtin_echo = {
	.name = "echo",
	.route = "/v1/echo",
	.methods = "POST",
	.step = echo_step,
	.doc = "the request body back",
};
