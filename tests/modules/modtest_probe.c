/* SPDX-License-Identifier: MIT */
/*
 * tests/modules/modtest_probe.c: the module tests/modules/test_modtest.sh
 * runs through voltd-modtest, to see the harness pass a request through as
 * voltd does and report what a kind did: probe_echo answers what it was
 * given (method, path, query, the header fields in order and one by name,
 * the body), probe_prefix its path under a prefix route, probe_fail fails
 * its step (-EIO), probe_slow runs one step of 30 ms (over any slice),
 * probe_status answers the status its query asks for with a body. Its
 * key limit is there to be set, or refused; with fail_init on, its init
 * refuses to start.
 */
#include <voltd/module.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static int echo_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	const char *path, *query, *one, *n, *v;
	size_t plen, qlen, olen, nl, vl, blen, off = 0, cap = 4096;
	const uint8_t *body = voltd->body(job, &blen);
	char *out = malloc(cap);
	int rc;

	(void)state;
	(void)deadline_ns;
	if (!out)
		return -ENOMEM;
	path = voltd->path(job, &plen);
	query = voltd->query(job, &qlen);
	one = voltd->header(job, "x-one", &olen);
	off += (size_t)snprintf(out + off, cap - off, "method %s\npath %.*s\nquery %.*s\nx-one %.*s\n",
				voltd->method(job), (int)plen, path, (int)qlen, query, (int)olen,
				one ? one : "(none)");
	for (size_t i = 0; off < cap && voltd->header_at(job, i, &n, &nl, &v, &vl) == 0; i++)
		off += (size_t)snprintf(out + off, cap - off, "header %zu %.*s=%.*s\n", i, (int)nl, n, (int)vl, v);
	if (off < cap)
		off += (size_t)snprintf(out + off, cap - off, "body %zu %.*s\n", blen, (int)blen,
					body ? (const char *)body : "");
	if (off >= cap)
		off = cap - 1;
	rc = voltd->set_header(job, "X-Probe", "yes");
	if (rc < 0) {
		free(out);
		return rc;
	}
	return voltd->respond(job, 200, "text/plain", out, off, VOLTD_BODY_MALLOC);
}

static int prefix_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	size_t len;
	const char *path = voltd->path(job, &len);

	(void)state;
	(void)deadline_ns;
	return voltd->respondf(job, 200, "under the prefix: %.*s\n", (int)len, path);
}

static int fail_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	(void)job;
	(void)state;
	(void)deadline_ns;
	return -EIO;
}

static int slow_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	int64_t until = voltd->now_ns() + 30 * 1000000;

	(void)state;
	(void)deadline_ns;
	while (voltd->now_ns() < until)
		;
	return voltd->respondf(job, 200, "slow\n");
}

static int status_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	uint64_t status = 200;

	(void)state;
	(void)deadline_ns;
	voltd->query_u64(job, "s", &status);
	return voltd->respondf(job, (int)status, "status %d\n", (int)status);
}

static const struct voltd_kind kinds[] = {
	{ .name = "probe_echo", .route = "/t/echo", .methods = "POST, PUT", .step = echo_step },
	{ .name = "probe_prefix", .route = "/t/p/", .methods = "GET", .flags = VOLTD_KIND_PREFIX,
	  .step = prefix_step },
	{ .name = "probe_fail", .route = "/t/fail", .methods = "GET", .step = fail_step },
	{ .name = "probe_slow", .route = "/t/slow", .methods = "GET", .step = slow_step },
	{ .name = "probe_status", .route = "/t/status", .methods = "GET, HEAD", .step = status_step },
	{ .name = NULL },
};

enum { KEY_LIMIT, KEY_FAIL_INIT };

static const struct voltd_key keys[] = {
	[KEY_LIMIT] = { .name = "limit", .type = VOLTD_KEY_INT, .flags = VOLTD_KEY_LIVE, .def = "10", .min = 1,
			.max = 100, .doc = "a number, unused" },
	[KEY_FAIL_INIT] = { .name = "fail_init", .type = VOLTD_KEY_BOOL, .def = "off",
			    .doc = "on: init refuses" },
	{ .name = NULL },
};

static int probe_init(struct voltd_mod *mod, uint32_t flags, void **data, char *err, size_t errlen)
{
	(void)flags;
	(void)data;
	if (voltd->key_int(mod, KEY_FAIL_INIT)) {
		snprintf(err, errlen, "fail_init is on");
		return -EINVAL;
	}
	return 0;
}

static const struct voltd_module probe = {
	VOLTD_MODULE_HEAD,
	.name = "probe",
	.version = "1",
	.kinds = kinds,
	.keys = keys,
	.init = probe_init,
};

VOLTD_MODULE(probe)
