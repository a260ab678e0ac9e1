/* SPDX-License-Identifier: MIT */
/*
 * jobs/kind_livez.c: GET|HEAD /livez -> 200 "alive\n", or 503 "stalled\n"
 * when the daemon's stall check says a worker has been stalled past
 * control.stall_fail_ms (vjob_input.alive). Distinct from /readyz: a
 * draining or overloaded instance is alive but not ready; a stalled one is
 * neither, and a liveness probe should restart it. Finishes in vjob_new.
 * Stateless. Threading: a job is stepped by one thread at a time (job.h).
 */
#include "jobs/internal.h"

static int livez_start(struct vjob *job, const struct vjob_config *cfg)
{
	(void)cfg;
	if (job->alive)
		return vjob__finish_static(job, 200, "text/plain", "alive\n");
	return vjob__finish_static(job, 503, "text/plain", "stalled\n");
}

static int livez_step(struct vjob *job, int64_t deadline_ns)
{
	(void)job;
	(void)deadline_ns;
	return VJOB_DONE; /* never reached: done at start */
}

const struct vjob_kind vjob_kind_livez = {
	.name = "livez",
	.path = "/livez",
	.allow = "GET, HEAD",
	.start = livez_start,
	.step = livez_step,
};
