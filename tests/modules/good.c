/* SPDX-License-Identifier: MIT */
/*
 * tests/modules/good.c: a well-formed module, "good", for the loader's
 * tests (tests/unit/test_jobs_loader.c) and the daemon's (a module kind
 * served, counted and kept allocation-free like a built-in one). Built as
 * a shared object at check time (tests/modules/local.mk), against
 * <voltd/module.h> alone.
 *   GET /good/spin?n=N  spin's loop (the built-in kind's bit for bit), in
 *                       slices; 400 above the live key max_n; counts rounds
 *   GET|HEAD /good/hdrs?n=N&len=L  N header fields of L bytes' value, and
 *                       a body; -E2BIG past VOLTD_HEADERS_MAX is a 500
 *   GET /good/files/...  a prefix route: the path back
 */
#include <voltd/module.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define SPIN_SEED 0x9E3779B97F4A7C15ull
#define SPIN_CHUNK 4096

enum { KEY_MAX_N, KEY_GREETING };

static const struct voltd_key keys[] = {
	[KEY_MAX_N] = { .name = "max_n", .type = VOLTD_KEY_INT, .flags = VOLTD_KEY_LIVE, .def = "1000000000",
			.min = 1, .max = 1000000000000, .doc = "largest n of /good/spin" },
	[KEY_GREETING] = { .name = "greeting", .type = VOLTD_KEY_STRING, .def = "hello", .max = 32,
			   .doc = "said by init" },
	{ .name = NULL },
};

static const struct voltd_counter spin_counters[] = {
	{ .name = "rounds", .help = "xorshift rounds run" },
	{ .name = NULL },
};

struct spin_state {
	uint64_t x, left;
};

static int spin_start(struct voltd_job *job, void *state)
{
	struct spin_state *s = state;
	uint64_t n;
	int rc = voltd->query_u64(job, "n", &n);

	if (rc < 0)
		return voltd->respondf(job, 400, "n: missing or not a decimal\n");
	if (n > (uint64_t)voltd->key_int(voltd->mod_of(job), KEY_MAX_N))
		return voltd->respondf(job, 400, "n: above max_n\n");
	s->x = SPIN_SEED;
	s->left = n;
	voltd->count(job, 0, n);
	return VOLTD_STEP_MORE;
}

static int spin_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	struct spin_state *s = state;
	uint64_t x = s->x, left = s->left;

	for (;;) {
		uint64_t k = left < SPIN_CHUNK ? left : SPIN_CHUNK;
		left -= k;
		while (k--) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
		if (left == 0)
			return voltd->respondf(job, 200, "%" PRIu64 "\n", x);
		if (voltd->now_ns() >= deadline_ns)
			break;
	}
	s->x = x;
	s->left = left;
	return VOLTD_STEP_MORE;
}

static int hdrs_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	uint64_t n = 1, len = 8;
	char name[32], value[VOLTD_HEADERS_MAX + 1];
	int rc;

	(void)state;
	(void)deadline_ns;
	(void)voltd->query_u64(job, "n", &n);
	(void)voltd->query_u64(job, "len", &len);
	if (len > VOLTD_HEADERS_MAX)
		len = VOLTD_HEADERS_MAX;
	memset(value, 'v', len);
	value[len] = '\0';
	for (uint64_t i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "X-Good-%03" PRIu64, i);
		if ((rc = voltd->set_header(job, name, value)) < 0)
			return rc;
	}
	return voltd->respond(job, 200, "text/plain", "headers\n", 8, VOLTD_BODY_STATIC);
}

static int files_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	size_t len;
	const char *path = voltd->path(job, &len);

	(void)state;
	(void)deadline_ns;
	return voltd->respond(job, 200, "text/plain", path, len, VOLTD_BODY_COPY);
}

static const struct voltd_kind kinds[] = {
	{ .name = "good_spin", .route = "/good/spin", .methods = "GET", .state_size = sizeof(struct spin_state),
	  .start = spin_start, .step = spin_step, .counters = spin_counters, .doc = "spin's loop, in a module" },
	{ .name = "good_hdrs", .route = "/good/hdrs", .methods = "GET, HEAD", .step = hdrs_step,
	  .doc = "header fields on demand" },
	{ .name = "good_files", .route = "/good/files/", .methods = "GET", .flags = VOLTD_KIND_PREFIX,
	  .step = files_step, .doc = "the path back" },
	{ .name = NULL },
};

static int good_init(struct voltd_mod *mod, uint32_t flags, void **data, char *err, size_t errlen)
{
	(void)flags;
	(void)data;
	(void)err;
	(void)errlen;
	voltd->log(mod, VOLTD_LOG_INFO, "%s from good", voltd->key_str(mod, KEY_GREETING));
	return 0;
}

static const struct voltd_module good = {
	VOLTD_MODULE_HEAD,
	.name = "good",
	.version = "1.0.0-test",
	.kinds = kinds,
	.keys = keys,
	.init = good_init,
};

VOLTD_MODULE(good)
