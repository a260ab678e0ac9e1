/* SPDX-License-Identifier: MIT */
/*
 * tests/modules/pool.c: the module "pool" 1.0 that the blocking pool's and
 * the per-kind statistics' tests load (tests/integration/test_blocking.py):
 *   GET /block?ms=N[&more=K][&sleep=S][&id=I]
 *       a blocking kind: start counts itself; the step returns MORE K
 *       times, then sleeps S ms with SLEEP (a timer; on the pool its
 *       thread sleeps), then blocks its thread N ms in nanosleep(2) (what
 *       a blocking client library does), then answers "block I on
 *       thread T\n" (T: thread_index()); fini counts itself. Counters
 *       starts, finis, more_steps.
 *   GET /hog?us=N
 *       not blocking: one step busy-loops N us, ignoring its deadline
 *       (overruns, quarantine); answers "hog N us\n". Counter spins.
 *   GET /slices?more=K[&sleep=S][&id=I]
 *       not blocking: start returns MORE (so the job outlasts its first
 *       slice and runs on the heavy lane), the step returns MORE K times,
 *       sleeps S ms once with SLEEP, then answers "slices I on thread T\n".
 * Built as a shared object at check time (tests/modules/local.mk), against
 * <voltd/module.h> alone. Never installed.
 */
#include <voltd/module.h>

#include <errno.h>
#include <inttypes.h>
#include <time.h>

#define NS_PER_MS 1000000LL

enum { C_STARTS, C_FINIS, C_MORE };
static const struct voltd_counter block_counters[] = {
	[C_STARTS] = { .name = "starts", .help = "jobs whose start ran" },
	[C_FINIS] = { .name = "finis", .help = "jobs whose fini ran" },
	[C_MORE] = { .name = "more_steps", .help = "steps that returned MORE" },
	{ .name = NULL },
};

static const struct voltd_counter hog_counters[] = {
	{ .name = "spins", .help = "hog steps run" },
	{ .name = NULL },
};

struct block_state {
	uint64_t ms, more, sleep, id;
	int slept;
};

static int opt(struct voltd_job *job, const char *name, uint64_t *v)
{
	int rc = voltd->query_u64(job, name, v);

	if (rc == -ENOENT) {
		*v = 0;
		return 0;
	}
	return rc;
}

static int block_start(struct voltd_job *job, void *state)
{
	struct block_state *s = state;

	voltd->count(job, C_STARTS, 1);
	if (opt(job, "ms", &s->ms) < 0 || opt(job, "more", &s->more) < 0 || opt(job, "sleep", &s->sleep) < 0 ||
	    opt(job, "id", &s->id) < 0 || s->ms > 60000 || s->sleep > 60000)
		return voltd->respondf(job, 400, "ms, more, sleep, id: decimals (ms, sleep at most 60000)\n");
	return VOLTD_STEP_MORE;
}

static int block_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	struct block_state *s = state;

	(void)deadline_ns;
	if (s->more) {
		s->more--;
		voltd->count(job, C_MORE, 1);
		return VOLTD_STEP_MORE;
	}
	if (s->sleep && !s->slept) {
		s->slept = 1;
		voltd->sleep_until(job, voltd->now_ns() + (int64_t)s->sleep * NS_PER_MS);
		return VOLTD_STEP_SLEEP;
	}
	struct timespec ts = { .tv_sec = (time_t)(s->ms / 1000), .tv_nsec = (long)(s->ms % 1000) * NS_PER_MS };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	return voltd->respondf(job, 200, "block %" PRIu64 " on thread %u\n", s->id, voltd->thread_index());
}

static void block_fini(struct voltd_job *job, void *state)
{
	(void)state;
	voltd->count(job, C_FINIS, 1);
}

static int hog_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	uint64_t us;
	int64_t end;

	(void)state;
	(void)deadline_ns; /* the point: a step far over its slice */
	if (voltd->query_u64(job, "us", &us) < 0 || us > 10000000)
		return voltd->respondf(job, 400, "us: a decimal, at most 10000000\n");
	end = voltd->now_ns() + (int64_t)us * 1000;
	while (voltd->now_ns() < end)
		;
	voltd->count(job, 0, 1);
	return voltd->respondf(job, 200, "hog %" PRIu64 " us\n", us);
}

static int slices_start(struct voltd_job *job, void *state)
{
	struct block_state *s = state;

	if (opt(job, "more", &s->more) < 0 || opt(job, "sleep", &s->sleep) < 0 || opt(job, "id", &s->id) < 0 ||
	    s->sleep > 60000)
		return voltd->respondf(job, 400, "more, sleep, id: decimals (sleep at most 60000)\n");
	return VOLTD_STEP_MORE;
}

static int slices_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	struct block_state *s = state;

	(void)deadline_ns;
	if (s->more) {
		s->more--;
		return VOLTD_STEP_MORE;
	}
	if (s->sleep && !s->slept) {
		s->slept = 1;
		voltd->sleep_until(job, voltd->now_ns() + (int64_t)s->sleep * NS_PER_MS);
		return VOLTD_STEP_SLEEP;
	}
	return voltd->respondf(job, 200, "slices %" PRIu64 " on thread %u\n", s->id, voltd->thread_index());
}

static const struct voltd_kind kinds[] = {
	{ .name = "block", .route = "/block", .methods = "GET", .flags = VOLTD_KIND_BLOCKING,
	  .state_size = sizeof(struct block_state), .start = block_start, .step = block_step,
	  .fini = block_fini, .counters = block_counters, .doc = "blocks a pool thread" },
	{ .name = "hog", .route = "/hog", .methods = "GET", .step = hog_step, .counters = hog_counters,
	  .doc = "one step over its slice" },
	{ .name = "slices", .route = "/slices", .methods = "GET", .state_size = sizeof(struct block_state),
	  .start = slices_start, .step = slices_step, .doc = "MORE steps on the heavy lane" },
	{ .name = NULL },
};

static const struct voltd_module pool = {
	VOLTD_MODULE_HEAD,
	.name = "pool",
	.version = "1.0",
	.kinds = kinds,
};

VOLTD_MODULE(pool)
