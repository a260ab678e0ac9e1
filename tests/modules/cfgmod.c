/* SPDX-License-Identifier: MIT */
/*
 * tests/modules/cfgmod.c: the module the configuration's tests load
 * (tests/unit/test_cfg, tests/integration/test_module_config.py): one key
 * of each type, live and restart-only, and a kind GET /v1/cfgmod that
 * answers their current values, so a test sees `voltctl set` and a reload
 * reach the module. Its init refuses while fail_init is on (with a reason
 * that names greeting, so the test sees the keys reached the module before
 * init ran), and logs its flags; its shutdown logs once.
 */
#include <errno.h>
#include <stdio.h>
#include <voltd/module.h>

enum { K_LIMIT, K_VERBOSE, K_GREETING, K_OFFSET, K_FAIL_INIT };

static const struct voltd_key keys[] = {
	[K_LIMIT] = { .name = "limit", .type = VOLTD_KEY_INT, .flags = VOLTD_KEY_LIVE, .def = "10",
		      .min = 0, .max = 1000, .unit = "ms", .doc = "a live number /v1/cfgmod answers" },
	[K_VERBOSE] = { .name = "verbose", .type = VOLTD_KEY_BOOL, .flags = VOLTD_KEY_LIVE, .def = "off",
			.doc = "a live boolean /v1/cfgmod answers" },
	[K_GREETING] = { .name = "greeting", .type = VOLTD_KEY_STRING, .def = "hello", .max = 64,
			 .doc = "a restart-only text /v1/cfgmod answers" },
	[K_OFFSET] = { .name = "offset", .type = VOLTD_KEY_INT, .def = "0", .min = -100, .max = 100,
		       .doc = "a restart-only signed number /v1/cfgmod answers" },
	[K_FAIL_INIT] = { .name = "fail_init", .type = VOLTD_KEY_BOOL, .def = "off",
			  .doc = "on: init refuses to start, with a reason" },
	{ 0 },
};

static int step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	const struct voltd_mod *m = voltd->mod_of(job);

	(void)state;
	(void)deadline_ns;
	return voltd->respondf(job, 200, "limit=%lld verbose=%lld greeting=%s offset=%lld\n",
			       (long long)voltd->key_int(m, K_LIMIT), (long long)voltd->key_int(m, K_VERBOSE),
			       voltd->key_str(m, K_GREETING), (long long)voltd->key_int(m, K_OFFSET));
}

static const struct voltd_kind kinds[] = {
	{ .name = "cfgmod", .route = "/v1/cfgmod", .methods = "GET", .step = step,
	  .doc = "answers the module's key values" },
	{ 0 },
};

static int init(struct voltd_mod *mod, uint32_t flags, void **data, char *err, size_t errlen)
{
	(void)data;
	if (voltd->key_int(mod, K_FAIL_INIT)) {
		snprintf(err, errlen, "fail_init is on (greeting %s)", voltd->key_str(mod, K_GREETING));
		return -EINVAL;
	}
	voltd->log(mod, VOLTD_LOG_NOTICE, "init%s: limit %lld", (flags & VOLTD_INIT_CHECK) ? " (check)" : "",
		   (long long)voltd->key_int(mod, K_LIMIT));
	return 0;
}

static void shutdown(struct voltd_mod *mod, void *data)
{
	(void)data;
	voltd->log(mod, VOLTD_LOG_NOTICE, "shutdown");
}

static const struct voltd_module cfgmod = {
	VOLTD_MODULE_HEAD,
	.name = "cfgmod",
	.version = "1.0",
	.kinds = kinds,
	.keys = keys,
	.init = init,
	.shutdown = shutdown,
};

VOLTD_MODULE(cfgmod)
