/* SPDX-License-Identifier: MIT */
/*
 * delay: a kind that waits on a timer. GET /v1/delay?ms=N answers
 * "waited N ms\n" at least N ms after the request, with the header
 * X-Delay-Late-Us: how much later than asked the job was stepped again.
 *
 * What it shows: a job that sleeps without holding a thread (start asks
 * voltd->sleep_until for the wake time and returns VOLTD_STEP_SLEEP;
 * meanwhile its worker runs other jobs); a step that may be run early and
 * checks the clock; a response header; a restart-only key (max_ms: a change
 * needs `systemctl restart voltd`); a counter (late_us).
 */
#include <voltd/module.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

enum { KEY_MAX_MS };
enum { COUNTER_LATE_US };

#define NS_PER_MS 1000000

struct delay_state {
	uint64_t ms;
	int64_t until_ns;
};

static int delay_start(struct voltd_job *job, void *state)
{
	struct delay_state *s = state;
	/* A restart-only key: its value is the same for every job. */
	uint64_t max = (uint64_t)voltd->key_int(voltd->mod_of(job), KEY_MAX_MS);
	uint64_t ms;
	int rc = voltd->query_u64(job, "ms", &ms);

	if (rc == -ENOENT)
		return voltd->respondf(job, 400, "ms: missing (/v1/delay?ms=N)\n");
	if (rc < 0)
		return voltd->respondf(job, 400, "ms: not a decimal\n");
	if (ms > max)
		return voltd->respondf(job, 400, "ms: above max_ms (%" PRIu64 ")\n", max);
	s->ms = ms;
	s->until_ns = voltd->now_ns() + (int64_t)ms * NS_PER_MS;
	voltd->sleep_until(job, s->until_ns);
	return VOLTD_STEP_SLEEP;
}

static int delay_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	struct delay_state *s = state;
	int64_t now = voltd->now_ns();
	char late[24];
	int rc;

	(void)deadline_ns;
	/* A sleeping job may be stepped before its time: sleep again. */
	if (now < s->until_ns) {
		voltd->sleep_until(job, s->until_ns);
		return VOLTD_STEP_SLEEP;
	}
	uint64_t late_us = (uint64_t)(now - s->until_ns) / 1000;
	voltd->count(job, COUNTER_LATE_US, late_us);
	snprintf(late, sizeof(late), "%" PRIu64, late_us);
	rc = voltd->set_header(job, "X-Delay-Late-Us", late);
	if (rc < 0)
		return rc;
	return voltd->respondf(job, 200, "waited %" PRIu64 " ms\n", s->ms);
}

static const struct voltd_counter delay_counters[] = {
	{ .name = "late_us", .help = "microseconds the jobs woke later than asked, summed" },
	{ .name = NULL },
};

static const struct voltd_kind delay_kinds[] = {
	{
		.name = "delay",
		.route = "/v1/delay",
		.methods = "GET",
		.state_size = sizeof(struct delay_state),
		.start = delay_start,
		.step = delay_step,
		.counters = delay_counters,
		.doc = "answers after ms milliseconds, sleeping on a timer",
	},
	{ .name = NULL },
};

static const struct voltd_key delay_keys[] = {
	{
		.name = "max_ms",
		.type = VOLTD_KEY_INT,
		.def = "60000",
		.min = 1,
		.max = 3600000,
		.unit = "ms",
		.doc = "largest ms of /v1/delay (400 above)",
	},
	{ .name = NULL },
};

static const struct voltd_module delay_module = {
	VOLTD_MODULE_HEAD,
	.name = "delay",
	.version = "1.0.0",
	.kinds = delay_kinds,
	.keys = delay_keys,
};

VOLTD_MODULE(delay_module)
