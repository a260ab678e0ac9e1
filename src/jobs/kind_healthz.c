/* SPDX-License-Identifier: MIT */
/*
 * jobs/kind_healthz.c: GET|HEAD /healthz -> 200 "ok\n". Finishes in
 * vjob_new, so the parse stage answers it without queueing. Stateless.
 * Threading: a job is stepped by one thread at a time (job.h).
 */
#include "jobs/internal.h"

static int healthz_start(struct vjob *job, const struct vjob_config *cfg)
{
	(void)cfg;
	return vjob__finish_static(job, 200, "text/plain", "ok\n");
}

static int healthz_step(struct vjob *job, int64_t deadline_ns)
{
	(void)job;
	(void)deadline_ns;
	return VJOB_DONE; /* never reached: done at start */
}

const struct vjob_kind vjob_kind_healthz = {
	.name = "healthz",
	.path = "/healthz",
	.allow = "GET, HEAD",
	.start = healthz_start,
	.step = healthz_step,
};
