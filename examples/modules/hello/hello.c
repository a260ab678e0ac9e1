/* SPDX-License-Identifier: MIT */
/*
 * hello: the smallest module. GET /v1/hello?name=NAME answers
 * "hello, NAME\n" ("hello, world\n" without a name), at once: the job
 * ends in start, its step never runs.
 */
#include <voltd/module.h>

#include <errno.h>

static int hello_start(struct voltd_job *job, void *state)
{
	const char *name;
	size_t len;

	(void)state;
	if (voltd->query_param(job, "name", &name, &len) < 0) {
		name = "world";
		len = 5;
	}
	return voltd->respondf(job, 200, "hello, %.*s\n", (int)len, name);
}

/* Required, even when start always answers. */
static int hello_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	(void)job;
	(void)state;
	(void)deadline_ns;
	return -EINVAL;
}

static const struct voltd_kind hello_kinds[] = {
	{
		.name = "hello",
		.route = "/v1/hello",
		.methods = "GET, HEAD",
		.start = hello_start,
		.step = hello_step,
		.doc = "says hello",
	},
	{ .name = NULL },
};

static const struct voltd_module hello_module = {
	VOLTD_MODULE_HEAD,
	.name = "hello",
	.version = "1.0.0",
	.kinds = hello_kinds,
};

VOLTD_MODULE(hello_module)
