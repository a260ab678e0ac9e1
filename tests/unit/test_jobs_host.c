/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_jobs_host.c: every call of the host table of
 * <voltd/module.h>, made by kinds of a module written in this file (checked
 * and started as any module: vjob__mod_new, the loader's checks after the
 * entry, then vjob_mod_start): the request (method, path, query, header
 * fields, body), the response (status, header fields and their refusals up
 * to VOLTD_HEADERS_MAX, each way of setting a body, respond, respondf),
 * time and sleeping, the module (data, keys, counters, threads, log), the
 * job's life (fini once, failures answered for the kind), and the routing
 * table with exact and prefix routes. Single-threaded but for the worker
 * index check, which runs a task on a runtime.
 */
#include "jobs/internal.h"
#include "base/compiler.h"
#include "base/time.h"
#include "rt/rt.h"
#include "tests/helpers/test_config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* ----------------------------------------------------------- the module */

/* What the kinds saw and did, for the tests to check. */
static struct {
	int fini_calls;
	int rc[32];
	const char *s[8];
	size_t len[8];
	uint64_t u;
	void *data;
	int64_t key_i;
	const char *key_s;
	unsigned tindex, tcount;
} seen;

/* Which check the kind "probe" runs (set by the test before the job). */
static int (*probe_fn)(struct voltd_job *job);

static int probe_start(struct voltd_job *job, void *state)
{
	(void)state;
	return probe_fn(job);
}

static int probe_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	(void)state;
	(void)deadline_ns;
	return probe_fn(job);
}

static void probe_fini(struct voltd_job *job, void *state)
{
	(void)state;
	seen.fini_calls++;
	/* the response is fixed by now */
	seen.rc[31] = voltd->set_status(job, 404);
}

/* "later": start does nothing, the step runs probe_fn. */
static int later_start(struct voltd_job *job, void *state)
{
	(void)job;
	(void)state;
	return VOLTD_STEP_MORE;
}

/* "blocky", a blocking kind: start counts itself, then as later. */
static int blocky_starts;

static int blocky_start(struct voltd_job *job, void *state)
{
	(void)job;
	(void)state;
	blocky_starts++;
	return VOLTD_STEP_MORE;
}

static const struct voltd_counter probe_counters[] = {
	{ .name = "hits", .help = "probes run" },
	{ .name = "bytes", .help = "bytes seen" },
	{ .name = NULL },
};

static const struct voltd_kind kinds[] = {
	{ .name = "probe", .route = "/probe", .methods = "GET, HEAD, POST", .start = probe_start,
	  .step = probe_step, .fini = probe_fini, .counters = probe_counters, .state_size = 64 },
	{ .name = "later", .route = "/later", .methods = "GET", .start = later_start, .step = probe_step,
	  .fini = probe_fini },
	{ .name = "files", .route = "/files/", .methods = "GET", .flags = VOLTD_KIND_PREFIX,
	  .step = probe_step },
	{ .name = "files_big", .route = "/files/big/", .methods = "GET", .flags = VOLTD_KIND_PREFIX,
	  .step = probe_step },
	{ .name = "files_exact", .route = "/files/big/one", .methods = "PUT", .step = probe_step },
	{ .name = "everything", .route = "/", .methods = "GET", .flags = VOLTD_KIND_PREFIX, .step = probe_step },
	{ .name = "heavy", .route = "/heavy", .methods = "GET", .state_size = 100000, .step = probe_step },
	{ .name = "blocky", .route = "/blocky", .methods = "GET", .flags = VOLTD_KIND_BLOCKING,
	  .start = blocky_start, .step = probe_step, .fini = probe_fini },
	{ .name = NULL },
};

enum { KEY_LIMIT, KEY_FLAG, KEY_WORD, KEY_FIXED };
static const struct voltd_key keys[] = {
	[KEY_LIMIT] = { .name = "limit", .type = VOLTD_KEY_INT, .flags = VOLTD_KEY_LIVE, .def = "-5",
			.min = -10, .max = 1000, .doc = "a live number" },
	[KEY_FLAG] = { .name = "flag", .type = VOLTD_KEY_BOOL, .flags = VOLTD_KEY_LIVE, .def = "yes",
		       .doc = "a live switch" },
	[KEY_WORD] = { .name = "word", .type = VOLTD_KEY_STRING, .def = "hello", .max = 8,
		       .doc = "a word" },
	[KEY_FIXED] = { .name = "fixed", .type = VOLTD_KEY_INT, .def = "7", .min = 0, .max = 9,
			.unit = "ms", .doc = "restart only" },
	{ .name = NULL },
};

static int the_data;

static int mod_init(struct voltd_mod *mod, uint32_t flags, void **data, char *err, size_t errlen)
{
	(void)flags;
	(void)err;
	(void)errlen;
	*data = &the_data;
	/* init reads its keys, logs from the main thread */
	seen.key_i = voltd->key_int(mod, KEY_LIMIT);
	seen.key_s = voltd->key_str(mod, KEY_WORD);
	seen.tindex = voltd->thread_index();
	seen.tcount = voltd->thread_count();
	return 0;
}

static int shutdowns;

static void mod_shutdown(struct voltd_mod *mod, void *data)
{
	(void)mod;
	assert_ptr_equal(data, &the_data);
	shutdowns++;
}

static const struct voltd_module desc = {
	VOLTD_MODULE_HEAD,
	.name = "hosttest",
	.version = "1.2.3",
	.kinds = kinds,
	.keys = keys,
	.init = mod_init,
	.shutdown = mod_shutdown,
};

static struct vjob_mod *mod;

/* ---------------------------------------------------------------- jobs */

struct req {
	const char *method, *path, *query, *fields;
	const char *body;
};

static const char *std_fields = "Host:example.org\nX-Thing:one\nAccept:*/*\nx-thing:two\nEmpty:\n";

static struct vjob *make(const char *kind, const struct req *r)
{
	struct vjob_input in = {
		.method = r->method ? r->method : "GET",
		.path = r->path ? r->path : "/probe",
		.query = r->query ? r->query : "",
		.fields = r->fields ? r->fields : std_fields,
	};
	struct vjob *j;

	in.path_len = strlen(in.path);
	in.query_len = strlen(in.query);
	in.fields_len = strlen(in.fields);
	for (const char *p = in.fields; *p; p++)
		in.n_fields += *p == '\n';
	if (r->body) {
		in.body_len = strlen(r->body);
		in.body = malloc(in.body_len + 1);
		memcpy(in.body, r->body, in.body_len + 1);
	}
	assert_int_equal(vjob_new(vjob_kind_by_name(kind), &in, &j), 0);
	return j;
}

/* Run a probe whose start does everything; the job is done after it. */
static const struct vjob_result *run_probe(struct vjob **out, int (*fn)(struct voltd_job *), const struct req *r)
{
	probe_fn = fn;
	memset(&seen, 0, sizeof(seen));
	*out = make("probe", r);
	for (int i = 0; i < 100 && !vjob_done(*out); i++)
		vjob_step(*out, 0);
	assert_true(vjob_done(*out));
	return vjob_result(*out);
}

static bool hdrs_are(const struct vjob_result *res, const char *want)
{
	return res->hdrs_len == strlen(want) && memcmp(res->hdrs, want, res->hdrs_len) == 0 &&
	       memcmp(res->hdrs + res->hdrs_len, "\r\n", 2) == 0;
}

static bool body_is(const struct vjob_result *res, const char *want)
{
	return res->body_len == strlen(want) && (!res->body_len || memcmp(res->body, want, res->body_len) == 0);
}

/* -------------------------------------------------------------- request */

static int probe_request(struct voltd_job *job)
{
	seen.s[0] = voltd->method(job);
	seen.s[1] = voltd->path(job, &seen.len[1]);
	seen.s[2] = voltd->query(job, &seen.len[2]);
	seen.rc[0] = voltd->query_param(job, "b", &seen.s[3], &seen.len[3]);
	seen.rc[1] = voltd->query_param(job, "nope", &seen.s[4], &seen.len[4]);
	seen.rc[2] = voltd->query_u64(job, "a", &seen.u);
	seen.rc[3] = voltd->query_u64(job, "nope", &seen.u);
	seen.rc[4] = voltd->query_u64(job, "b", &seen.u);  /* "x y" */
	seen.rc[5] = voltd->query_u64(job, "d", &seen.u);  /* given twice */
	seen.rc[6] = voltd->query_u64(job, "big", &seen.u);
	seen.rc[7] = voltd->query_param(job, "k", &seen.s[5], &seen.len[5]); /* "k" alone */
	return voltd->respond(job, 200, NULL, NULL, 0, VOLTD_BODY_STATIC);
}

static void test_request_line_and_query(void **state)
{
	struct vjob *j;
	struct req r = { .method = "POST", .path = "/probe",
			 .query = "a=42&b=x%20y&d=1&d=2&big=18446744073709551616&k" };

	(void)state;
	run_probe(&j, probe_request, &r);
	assert_string_equal(seen.s[0], "POST");
	assert_int_equal(seen.len[1], 6);
	assert_memory_equal(seen.s[1], "/probe", 6);
	assert_int_equal(seen.len[2], strlen(r.query));
	assert_memory_equal(seen.s[2], r.query, seen.len[2]);
	assert_int_equal(seen.rc[0], 0);
	assert_int_equal(seen.len[3], 5);
	assert_memory_equal(seen.s[3], "x%20y", 5); /* as sent */
	assert_int_equal(seen.rc[1], -ENOENT);
	assert_int_equal(seen.rc[2], 0);
	assert_int_equal(seen.rc[3], -ENOENT);
	assert_int_equal(seen.rc[4], -EINVAL);
	assert_int_equal(seen.rc[5], -EINVAL);
	assert_int_equal(seen.rc[6], -ERANGE);
	assert_int_equal(seen.rc[7], 0);
	assert_int_equal(seen.len[5], 0);
	vjob_free(j);
	/* no query: "" */
	r = (struct req){ .method = "GET" };
	run_probe(&j, probe_request, &r);
	assert_int_equal(seen.len[2], 0);
	assert_string_equal(seen.s[2], "");
	vjob_free(j);
}

static int probe_headers(struct voltd_job *job)
{
	const char *n, *v;
	size_t nl, vl;

	seen.s[0] = voltd->header(job, "x-THING", &seen.len[0]);
	seen.s[1] = voltd->header(job, "empty", &seen.len[1]);
	seen.s[2] = voltd->header(job, "missing", &seen.len[2]);
	seen.s[3] = voltd->header(job, "Host", &seen.len[3]);
	/* in order, then back to the start, then one past the end */
	char all[256] = "";
	for (size_t i = 0; voltd->header_at(job, i, &n, &nl, &v, &vl) == 0; i++)
		snprintf(all + strlen(all), sizeof(all) - strlen(all), "[%.*s=%.*s]", (int)nl, n, (int)vl, v);
	seen.rc[0] = voltd->header_at(job, 1, &n, &nl, &v, &vl);
	seen.rc[1] = nl == 7 && memcmp(n, "X-Thing", 7) == 0 && vl == 3 && memcmp(v, "one", 3) == 0;
	seen.rc[2] = voltd->header_at(job, 5, &n, &nl, &v, &vl);
	seen.rc[3] = voltd->header_at(job, 0, &n, &nl, &v, &vl) == 0 && nl == 4;
	seen.rc[4] = strcmp(all, "[Host=example.org][X-Thing=one][Accept=*/*][x-thing=two][Empty=]") == 0;
	return voltd->respond(job, 200, NULL, NULL, 0, VOLTD_BODY_STATIC);
}

static void test_header_and_header_at(void **state)
{
	struct vjob *j;
	struct req r = { 0 };

	(void)state;
	run_probe(&j, probe_headers, &r);
	assert_int_equal(seen.len[0], 3);
	assert_memory_equal(seen.s[0], "one", 3); /* the first of several, any case */
	assert_non_null(seen.s[1]);
	assert_int_equal(seen.len[1], 0);
	assert_null(seen.s[2]);
	assert_int_equal(seen.len[3], 11);
	assert_int_equal(seen.rc[0], 0);
	assert_true(seen.rc[1]);
	assert_int_equal(seen.rc[2], -ENOENT);
	assert_true(seen.rc[3]);
	assert_true(seen.rc[4]);
	vjob_free(j);
	/* no fields at all */
	r.fields = "";
	run_probe(&j, probe_headers, &r);
	assert_null(seen.s[0]);
	assert_int_equal(seen.rc[2], -ENOENT);
	vjob_free(j);
}

static int probe_body(struct voltd_job *job)
{
	size_t n;

	seen.s[0] = (const char *)voltd->body(job, &seen.len[0]);
	char *b = voltd->body_take(job, &seen.len[1]);
	seen.s[1] = b;
	seen.s[2] = (const char *)voltd->body(job, &seen.len[2]);
	seen.s[3] = voltd->body_take(job, &n); /* taken: none */
	seen.len[3] = n;
	/* the taken body is the module's: hand it back as the response */
	return voltd->respond(job, 200, "text/x-echo", b, seen.len[1], VOLTD_BODY_MALLOC);
}

static void test_body_and_body_take(void **state)
{
	struct vjob *j;
	struct req r = { .body = "payload" };

	(void)state;
	const struct vjob_result *res = run_probe(&j, probe_body, &r);
	assert_int_equal(seen.len[0], 7);
	assert_memory_equal(seen.s[0], "payload", 7);
	assert_ptr_equal(seen.s[1], seen.s[0]); /* the same buffer, now the module's */
	assert_int_equal(seen.len[1], 7);
	assert_null(seen.s[2]);
	assert_int_equal(seen.len[2], 0);
	assert_null(seen.s[3]);
	assert_int_equal(seen.len[3], 0);
	assert_true(body_is(res, "payload"));
	assert_true(hdrs_are(res, "Content-Type: text/x-echo\r\n"));
	vjob_free(j); /* frees the MALLOC body (ASan) */
	/* no body */
	r.body = NULL;
	res = run_probe(&j, probe_body, &r);
	assert_null(seen.s[0]);
	assert_null(seen.s[1]);
	assert_true(body_is(res, ""));
	vjob_free(j);
}

/* ------------------------------------------------------------- response */

static int probe_status(struct voltd_job *job)
{
	seen.rc[0] = voltd->set_status(job, 199);
	seen.rc[1] = voltd->set_status(job, 600);
	seen.rc[2] = voltd->set_status(job, 418);
	return VOLTD_STEP_DONE; /* no body, no header: the defaults */
}

static void test_set_status(void **state)
{
	struct vjob *j;
	struct req r = { 0 };

	(void)state;
	const struct vjob_result *res = run_probe(&j, probe_status, &r);
	assert_int_equal(seen.rc[0], -EINVAL);
	assert_int_equal(seen.rc[1], -EINVAL);
	assert_int_equal(seen.rc[2], 0);
	assert_int_equal(res->status, 418);
	assert_int_equal(res->hdrs_len, 0);
	assert_int_equal(res->body_len, 0);
	assert_int_equal(seen.fini_calls, 1);
	assert_int_equal(seen.rc[31], -EINVAL); /* fini may not change the response */
	vjob_free(j);
	/* the default status is 200 */
	probe_fn = NULL;
}

static int probe_default(struct voltd_job *job)
{
	(void)job;
	return VOLTD_STEP_DONE;
}

static int probe_bad_headers(struct voltd_job *job)
{
	static const char *const names[] = { "", "Bad Name", "a:b", "x\ty", "Date", "server", "Content-Length",
					     "transfer-encoding", "Connection", "KEEP-ALIVE", "Upgrade", "te",
					     "Trailer", "Proxy-Authenticate", "proxy-anything" };
	int i = 0;

	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
		seen.rc[i++] = voltd->set_header(job, names[k], "v");
	seen.rc[i++] = voltd->set_header(job, "X-Ok", "a\r\nInjected: 1");
	seen.rc[i++] = voltd->set_header(job, "X-Ok", "a\nb");
	seen.rc[i++] = voltd->set_header(job, "X-Ok", "bell\x07");
	seen.rc[i++] = voltd->set_header(job, "X-Ok", "del\x7f");
	seen.rc[i++] = voltd->set_header(job, NULL, "v");
	seen.rc[i++] = voltd->set_header(job, "X-Ok", NULL);
	seen.u = (uint64_t)i;
	/* what is fine: a tab, obs-text, an empty value, token specials */
	seen.rc[i++] = voltd->set_header(job, "X-Ok", "a\tb \xc3\xa9");
	seen.rc[i++] = voltd->set_header(job, "X-Empty", "");
	seen.rc[i++] = voltd->set_header(job, "x!#$%&'*+-.^_`|~1", "t");
	return VOLTD_STEP_DONE;
}

static void test_set_header_refusals(void **state)
{
	struct vjob *j;
	struct req r = { 0 };

	(void)state;
	const struct vjob_result *res = run_probe(&j, probe_bad_headers, &r);
	for (uint64_t i = 0; i < seen.u; i++)
		if (seen.rc[i] != -EINVAL)
			fail_msg("bad header %llu: %d, want -EINVAL", (unsigned long long)i, seen.rc[i]);
	for (uint64_t i = seen.u; i < seen.u + 3; i++)
		assert_int_equal(seen.rc[i], 0);
	/* refused fields left nothing behind */
	assert_true(hdrs_are(res, "X-Ok: a\tb \xc3\xa9\r\nX-Empty: \r\nx!#$%&'*+-.^_`|~1: t\r\n"));
	vjob_free(j);
}

/* Fill the header fields to exactly VOLTD_HEADERS_MAX, then one byte more. */
static int probe_headers_max(struct voltd_job *job)
{
	char v[200];
	size_t used = 0;
	int n = 0;

	memset(v, 'v', sizeof(v) - 1);
	v[sizeof(v) - 1] = '\0';
	/* "X-Fill-NN: " + 199 + "\r\n" = 212 bytes a line */
	while (used + 212 <= VOLTD_HEADERS_MAX) {
		char name[16];
		snprintf(name, sizeof(name), "X-Fill-%02d", n++);
		if (voltd->set_header(job, name, v) != 0)
			return -EIO;
		used += 212;
	}
	/* the rest, exactly: "X-Last: " (8) + value + "\r\n" (2) */
	size_t left = VOLTD_HEADERS_MAX - used - 10;
	char *last = malloc(left + 1);
	memset(last, 'l', left);
	last[left] = '\0';
	seen.rc[0] = voltd->set_header(job, "X-Last", last);
	free(last);
	seen.rc[1] = voltd->set_header(job, "X", ""); /* 5 bytes more */
	seen.rc[2] = voltd->set_header(job, "Content-Type", "text/plain"); /* counted too */
	seen.u = used + left + 10;
	return voltd->respond(job, 200, NULL, "ok", 2, VOLTD_BODY_STATIC);
}

static void test_set_header_at_headers_max(void **state)
{
	struct vjob *j;
	struct req r = { 0 };

	(void)state;
	const struct vjob_result *res = run_probe(&j, probe_headers_max, &r);
	assert_int_equal(seen.rc[0], 0);
	assert_int_equal(seen.rc[1], -E2BIG);
	assert_int_equal(seen.rc[2], -E2BIG);
	assert_int_equal(seen.u, VOLTD_HEADERS_MAX);
	assert_int_equal(res->status, 200);
	assert_int_equal(res->hdrs_len, VOLTD_HEADERS_MAX);
	assert_memory_equal(res->hdrs + res->hdrs_len, "\r\n", 2);
	assert_true(body_is(res, "ok"));
	vjob_free(j);
}

static int probe_content_type(struct voltd_job *job)
{
	seen.rc[0] = voltd->set_header(job, "content-type", "text/a");
	seen.rc[1] = voltd->set_header(job, "X-A", "1");
	seen.rc[2] = voltd->set_header(job, "Content-Type", "text/b");
	return voltd->respond(job, 201, "text/c", "c", 1, VOLTD_BODY_COPY);
}

static void test_content_type_replaces(void **state)
{
	struct vjob *j;
	struct req r = { 0 };

	(void)state;
	const struct vjob_result *res = run_probe(&j, probe_content_type, &r);
	assert_true(hdrs_are(res, "X-A: 1\r\nContent-Type: text/c\r\n"));
	assert_int_equal(res->status, 201);
	vjob_free(j);
}

static char long_text[1000];

static int probe_body_copy(struct voltd_job *job)
{
	char local[8] = "stack";

	seen.rc[0] = voltd->set_body(job, local, 5, VOLTD_BODY_COPY);
	memcpy(local, "XXXXX", 5); /* copied: the change does not show */
	return VOLTD_STEP_DONE;
}

static int probe_body_copy_long(struct voltd_job *job)
{
	seen.rc[0] = voltd->set_body(job, long_text, sizeof(long_text), VOLTD_BODY_COPY);
	return VOLTD_STEP_DONE;
}

static int probe_body_static(struct voltd_job *job)
{
	seen.rc[0] = voltd->set_body(job, long_text, sizeof(long_text), VOLTD_BODY_STATIC);
	return VOLTD_STEP_DONE;
}

static int probe_body_replace(struct voltd_job *job)
{
	/* each replaces the last; MALLOC ones are freed (ASan) */
	void *m = malloc(3000);
	memset(m, 'm', 3000);
	seen.rc[0] = voltd->set_body(job, m, 3000, VOLTD_BODY_MALLOC);
	seen.rc[1] = voltd->set_body(job, long_text, sizeof(long_text), VOLTD_BODY_COPY);
	seen.rc[2] = voltd->set_body(job, NULL, 5, VOLTD_BODY_COPY);
	seen.rc[3] = voltd->set_body(job, "x", 1, 7);
	seen.rc[4] = voltd->set_body(job, NULL, 10, VOLTD_BODY_MALLOC);
	void *again = malloc(4);
	memcpy(again, "last", 4);
	seen.rc[5] = voltd->set_body(job, again, 4, VOLTD_BODY_MALLOC);
	return VOLTD_STEP_DONE;
}

static void test_set_body_ways(void **state)
{
	struct vjob *j;
	struct req r = { 0 };
	const struct vjob_result *res;

	(void)state;
	memset(long_text, 'L', sizeof(long_text));
	res = run_probe(&j, probe_body_copy, &r);
	assert_int_equal(seen.rc[0], 0);
	assert_true(body_is(res, "stack"));
	/* short: the job's own memory */
	assert_true((const char *)res->body >= (const char *)j &&
		    (const char *)res->body < (const char *)j + sizeof(struct vjob));
	vjob_free(j);

	res = run_probe(&j, probe_body_copy_long, &r);
	assert_int_equal(seen.rc[0], 0);
	assert_int_equal(res->body_len, sizeof(long_text));
	assert_true(res->body != (const uint8_t *)long_text);
	assert_memory_equal(res->body, long_text, sizeof(long_text));
	vjob_free(j);

	res = run_probe(&j, probe_body_static, &r);
	assert_ptr_equal(res->body, long_text);
	vjob_free(j);

	res = run_probe(&j, probe_body_replace, &r);
	assert_int_equal(seen.rc[0], 0);
	assert_int_equal(seen.rc[1], 0);
	assert_int_equal(seen.rc[2], -EINVAL);
	assert_int_equal(seen.rc[3], -EINVAL);
	assert_int_equal(seen.rc[4], -EINVAL);
	assert_int_equal(seen.rc[5], 0);
	assert_true(body_is(res, "last"));
	vjob_free(j);
}

static int probe_body_alloc(struct voltd_job *job)
{
	char *s = voltd->body_alloc(job, 10);
	memcpy(s, "0123456789", 10);
	seen.s[0] = s;
	char *l = voltd->body_alloc(job, 5000); /* replaces the short one */
	memset(l, 'b', 5000);
	seen.s[1] = l;
	return VOLTD_STEP_DONE;
}

static int probe_body_alloc_short(struct voltd_job *job)
{
	char *s = voltd->body_alloc(job, 3);
	memcpy(s, "abc", 3);
	seen.s[0] = s;
	return voltd->respond(job, 200, "text/plain", s, 3, VOLTD_BODY_COPY); /* its own buffer: kept */
}

static void test_body_alloc(void **state)
{
	struct vjob *j;
	struct req r = { 0 };

	(void)state;
	const struct vjob_result *res = run_probe(&j, probe_body_alloc, &r);
	assert_true(seen.s[0] >= (const char *)j && seen.s[0] < (const char *)j + sizeof(struct vjob));
	assert_ptr_equal(res->body, seen.s[1]);
	assert_int_equal(res->body_len, 5000);
	vjob_free(j);
	res = run_probe(&j, probe_body_alloc_short, &r);
	assert_ptr_equal(res->body, seen.s[0]);
	assert_true(body_is(res, "abc"));
	vjob_free(j);
}

static int probe_respondf(struct voltd_job *job)
{
	seen.rc[0] = voltd->respondf(job, 700, "x");
	return voltd->respondf(job, 202, "%s=%d %0500d|", "n", 42, 7);
}

static void test_respond_and_respondf(void **state)
{
	struct vjob *j;
	struct req r = { 0 };

	(void)state;
	const struct vjob_result *res = run_probe(&j, probe_respondf, &r);
	assert_int_equal(seen.rc[0], -EINVAL);
	assert_int_equal(res->status, 202);
	assert_true(hdrs_are(res, "Content-Type: text/plain\r\n"));
	assert_int_equal(res->body_len, 5 + 500 + 1);
	assert_memory_equal(res->body, "n=42 ", 5);
	assert_int_equal(((const char *)res->body)[res->body_len - 1], '|');
	vjob_free(j);
}

/* ---------------------------------------------------- HEAD, time, sleep */

static int probe_head(struct voltd_job *job)
{
	seen.s[0] = voltd->method(job);
	return voltd->respond(job, 200, "text/plain", "a body\n", 7, VOLTD_BODY_STATIC);
}

static void test_head_is_the_kinds_answer(void **state)
{
	struct vjob *j;
	struct req r = { .method = "HEAD" };
	const struct vjob_kind *k;

	(void)state;
	/* routed (the kind allows HEAD), answered as for GET: the server
	 * sends the head only (tests/integration) */
	assert_int_equal(vjob_route("/probe", 6, "HEAD", &k), VJOB_ROUTE_OK);
	const struct vjob_result *res = run_probe(&j, probe_head, &r);
	assert_string_equal(seen.s[0], "HEAD");
	assert_true(body_is(res, "a body\n"));
	vjob_free(j);
	assert_int_equal(vjob_route("/later", 6, "HEAD", &k), VJOB_ROUTE_BAD_METHOD);
}

static int sleep_calls;

static int probe_sleep(struct voltd_job *job)
{
	int64_t now = voltd->now_ns();

	seen.u = (uint64_t)now;
	if (sleep_calls++ == 0) {
		/* from start: park before the first step */
		voltd->sleep_until(job, now + 1000 * 1000);
		return VOLTD_STEP_SLEEP;
	}
	return voltd->respond(job, 200, NULL, NULL, 0, VOLTD_BODY_STATIC);
}

static void test_sleep_from_start(void **state)
{
	struct vjob *j;
	struct req r = { 0 };

	(void)state;
	sleep_calls = 0;
	probe_fn = probe_sleep;
	j = make("probe", &r);
	int64_t t = vb_now_ns();
	assert_false(vjob_done(j));
	/* the first step parks without running the kind */
	assert_int_equal(vjob_step(j, 0), VJOB_SLEEP);
	assert_int_equal(sleep_calls, 1);
	assert_int_equal(vjob_slices(j), 0);
	assert_true(vjob_wake_ns(j) > t - 1000 * 1000 && vjob_wake_ns(j) <= t + 1000 * 1000);
	assert_int_equal(vjob_step(j, 0), VJOB_DONE);
	assert_int_equal(sleep_calls, 2);
	assert_true((int64_t)seen.u >= t);
	vjob_free(j);
}

/* ---------------------------------------------------------- life, fails */

static int fail_with;

static int probe_fail(struct voltd_job *job)
{
	/* a response set before failing is dropped (a MALLOC body freed) */
	voltd->set_header(job, "X-Gone", "1");
	voltd->set_body(job, malloc(4000), 4000, VOLTD_BODY_MALLOC);
	return fail_with;
}

static void test_failures_answered_for_the_kind(void **state)
{
	static const struct {
		int rc, status;
	} cases[] = { { -ENOMEM, 503 }, { -EIO, 500 }, { -1, 500 }, { 3, 500 }, { 77, 500 } };
	struct req r = { 0 };
	struct vjob *j;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fail_with = cases[i].rc;
		/* in a step: fini runs once */
		probe_fn = probe_fail;
		memset(&seen, 0, sizeof(seen));
		j = make("later", &r);
		assert_false(vjob_done(j));
		assert_int_equal(vjob_step(j, 0), VJOB_DONE);
		const struct vjob_result *res = vjob_result(j);
		assert_int_equal(res->status, cases[i].status);
		assert_true(hdrs_are(res, "Content-Type: text/plain\r\n"));
		assert_true(body_is(res, cases[i].status == 503 ? "out of memory\n" : "internal error\n"));
		assert_int_equal(seen.fini_calls, 1);
		vjob_free(j);
		assert_int_equal(seen.fini_calls, 1);
		/* in start: fini runs unless start refused with -errno */
		memset(&seen, 0, sizeof(seen));
		res = run_probe(&j, probe_fail, &r);
		assert_int_equal(res->status, cases[i].status);
		vjob_free(j);
		assert_int_equal(seen.fini_calls, cases[i].rc < 0 ? 0 : 1);
	}
}

static void test_fini_once_when_abandoned(void **state)
{
	struct req r = { 0 };
	struct vjob *j;

	(void)state;
	memset(&seen, 0, sizeof(seen));
	j = make("later", &r); /* started, never stepped: the client left */
	assert_int_equal(seen.fini_calls, 0);
	vjob_free(j);
	assert_int_equal(seen.fini_calls, 1);
	/* done at start: fini at once, not again at free */
	memset(&seen, 0, sizeof(seen));
	run_probe(&j, probe_default, &r);
	assert_int_equal(seen.fini_calls, 1);
	assert_int_equal(vjob_result(j)->status, 200);
	vjob_free(j);
	assert_int_equal(seen.fini_calls, 1);
	/* a state too large for the caller's memory: allocated, zeroed */
	_Alignas(max_align_t) static unsigned char mem[VJOB_BLOCK];
	struct vjob_input in = { .method = "GET" };
	probe_fn = probe_default;
	assert_int_equal(vjob_new_at(mem, sizeof(mem), vjob_kind_by_name("heavy"), &in, &j), 0);
	assert_true((unsigned char *)j < mem || (unsigned char *)j >= mem + sizeof(mem));
	assert_int_equal(vjob_step(j, 0), VJOB_DONE);
	vjob_free(j);
}

/* A blocking kind's start runs in its first vjob_step (on the pool's
 * thread), not in vjob_new (on the connection's worker); fini is owed only
 * once a callback ran. */
static void test_blocking_start_deferred(void **state)
{
	struct req r = { .path = "/blocky" };
	struct vjob *j;

	(void)state;
	assert_true(vjob_kind_by_name("blocky")->blocking && vjob_kind_by_name("blocky")->has_start);
	assert_false(vjob_kind_by_name("probe")->blocking);
	assert_false(vjob_kind_by_name("files")->has_start);
	memset(&seen, 0, sizeof(seen));
	blocky_starts = 0;
	j = make("blocky", &r);
	assert_int_equal(blocky_starts, 0);
	assert_false(vjob_done(j));
	vjob_free(j); /* refused or dropped before the pool: nothing ran */
	assert_int_equal(seen.fini_calls, 0);
	j = make("blocky", &r);
	assert_int_equal(vjob_step(j, 0), VJOB_MORE); /* start's answer */
	assert_int_equal(blocky_starts, 1);
	assert_int_equal(vjob_slices(j), 0);
	probe_fn = probe_default;
	assert_int_equal(vjob_step(j, 0), VJOB_DONE);
	assert_int_equal(blocky_starts, 1);
	assert_int_equal(vjob_slices(j), 1);
	assert_int_equal(seen.fini_calls, 1);
	vjob_free(j);
	assert_int_equal(seen.fini_calls, 1);
	/* started, then abandoned: fini at free */
	memset(&seen, 0, sizeof(seen));
	j = make("blocky", &r);
	assert_int_equal(vjob_step(j, 0), VJOB_MORE);
	vjob_free(j);
	assert_int_equal(seen.fini_calls, 1);
	/* the stall report's label names kind, module and version */
	assert_string_equal(vjob_kind_by_name("blocky")->label, "blocky, module hosttest 1.2.3");
}

/* --------------------------------------------------------------- module */

static int probe_module(struct voltd_job *job)
{
	struct voltd_mod *m = voltd->mod_of(job);

	seen.data = voltd->mod_data(m);
	seen.key_i = voltd->key_int(m, KEY_LIMIT);
	seen.rc[0] = (int)voltd->key_int(m, KEY_FLAG);
	seen.key_s = voltd->key_str(m, KEY_WORD);
	seen.rc[1] = (int)voltd->key_int(m, KEY_FIXED);
	seen.rc[2] = (int)voltd->key_int(m, KEY_WORD);    /* not an INT: 0 */
	seen.s[0] = voltd->key_str(m, KEY_LIMIT);         /* not a STRING: NULL */
	seen.rc[3] = (int)voltd->key_int(m, 99);
	seen.s[1] = voltd->key_str(m, 99);
	voltd->count(job, 0, 1);
	voltd->count(job, 1, 1000);
	voltd->count(job, 2, 5); /* no such counter: ignored */
	seen.tindex = voltd->thread_index();
	seen.tcount = voltd->thread_count();
	return voltd->respond(job, 200, NULL, NULL, 0, VOLTD_BODY_STATIC);
}

static void test_module_data_and_keys(void **state)
{
	struct vjob *j;
	struct req r = { 0 };
	char err[160], buf[32];

	(void)state;
	run_probe(&j, probe_module, &r);
	assert_ptr_equal(seen.data, &the_data);
	assert_int_equal(seen.key_i, 250); /* set before start (main) */
	assert_int_equal(seen.rc[0], 1);
	assert_string_equal(seen.key_s, "hi");
	assert_int_equal(seen.rc[1], 7);
	assert_int_equal(seen.rc[2], 0);
	assert_null(seen.s[0]);
	assert_int_equal(seen.rc[3], 0);
	assert_null(seen.s[1]);
	vjob_free(j);
	/* a live key changes while running; the others refuse */
	assert_int_equal(vjob_mod_key_set(mod, KEY_LIMIT, "-10", err, sizeof(err)), 0);
	assert_int_equal(vjob_mod_key_set(mod, KEY_FLAG, "off", err, sizeof(err)), 0);
	assert_int_equal(vjob_mod_key_set(mod, KEY_FIXED, "1", err, sizeof(err)), -EBUSY);
	assert_non_null(strstr(err, "restart"));
	assert_int_equal(vjob_mod_key_set(mod, KEY_WORD, "x", err, sizeof(err)), -EBUSY);
	assert_int_equal(vjob_mod_key_set(mod, KEY_LIMIT, "1001", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "1001 is out of bounds [-10, 1000]");
	run_probe(&j, probe_module, &r);
	assert_int_equal(seen.key_i, -10);
	assert_int_equal(seen.rc[0], 0);
	vjob_free(j);
	vjob_mod_key_format(mod, KEY_LIMIT, buf, sizeof(buf));
	assert_string_equal(buf, "-10");
	vjob_mod_key_format(mod, KEY_FLAG, buf, sizeof(buf));
	assert_string_equal(buf, "off");
	vjob_mod_key_format(mod, KEY_WORD, buf, sizeof(buf));
	assert_string_equal(buf, "hi");
	vjob_mod_key_format(mod, KEY_FIXED, buf, sizeof(buf));
	assert_string_equal(buf, "7");
	assert_int_equal(vjob_mod_key_find(mod, "fixed"), KEY_FIXED);
	assert_int_equal(vjob_mod_key_find(mod, "path"), -1);
	assert_string_equal(vjob_mod_key(mod, KEY_FIXED)->unit, "ms");
}

static void test_count_per_kind(void **state)
{
	const struct vjob_kind *k = vjob_kind_by_name("probe");
	uint64_t hits = vjob_kind_counter(k, 0), bytes = vjob_kind_counter(k, 1);
	struct vjob *j;
	struct req r = { 0 };

	(void)state;
	for (int i = 0; i < 3; i++) {
		run_probe(&j, probe_module, &r);
		vjob_free(j);
	}
	assert_int_equal(vjob_kind_counter(k, 0), hits + 3);
	assert_int_equal(vjob_kind_counter(k, 1), bytes + 3000);
	assert_int_equal(vjob_kind_counter(k, 2), 0);
	assert_int_equal(vjob_kind_counter(vjob_kind_by_name("later"), 0), 0);
}

/* Worker threads get their index; others the last one. */
struct tjob {
	struct vrt_task task;
	unsigned index;
	int worker;
};

static enum vrt_poll tjob_poll(struct vrt_task *t)
{
	struct tjob *x = vb_container_of(t, struct tjob, task);

	x->index = voltd->thread_index();
	x->worker = vrt_worker_id();
	return VRT_READY;
}

static void tjob_drop(struct vrt_task *t)
{
	(void)t;
}

static const struct vrt_task_vtable tjob_vt = { .poll = tjob_poll, .drop = tjob_drop, .name = "tjob" };

static void *blocking_index(void *arg)
{
	vjob_thread_blocking(1);
	*(unsigned *)arg = voltd->thread_index();
	return NULL;
}

static void test_thread_index_and_count(void **state)
{
	struct vrt_config rc;
	struct vrt *rt;
	struct tjob x = { 0 };

	(void)state;
	/* init ran on this thread: the last index of workers + blocking
	 * threads + 1 */
	assert_int_equal(seen.tcount, 2 + 2 + 1);
	assert_int_equal(seen.tindex, 4);
	assert_int_equal(voltd->thread_count(), 5);
	assert_int_equal(voltd->thread_index(), 4);
	/* blocking thread i: the workers' count + i */
	pthread_t th;
	unsigned bi = 0;
	assert_int_equal(pthread_create(&th, NULL, blocking_index, &bi), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(bi, 2 + 1);
	tcfg_rt(&rc);
	rc.workers = 2;
	assert_int_equal(vrt_new(&rc, &rt), 0);
	vrt_task_init(&x.task, &tjob_vt);
	assert_int_equal(vrt_spawn(rt, &x.task), 0);
	vrt_task_join_wait(&x.task);
	assert_true(x.worker == 0 || x.worker == 1);
	assert_int_equal(x.index, (unsigned)x.worker);
	vrt_task_unref(&x.task);
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	vrt_free(rt);
}

/* log(): prefixed with the module's name, rate-limited per module, the
 * lines held back said with the next line that goes. */
static void test_log_rate_limited(void **state)
{
	char path[] = "/tmp/test_jobs_host.XXXXXX";
	int fd = mkstemp(path), saved = dup(STDERR_FILENO);
	char buf[16384];

	(void)state;
	assert_true(fd >= 0 && saved >= 0);
	vb_log_init(false);
	dup2(fd, STDERR_FILENO);
	for (int i = 0; i < VJOB_LOG_BURST + 5; i++)
		voltd->log((struct voltd_mod *)mod, VOLTD_LOG_WARNING, "line %d of %s", i, "many");
	voltd->log((struct voltd_mod *)mod, VOLTD_LOG_DEBUG, "below the level: never");
	dup2(saved, STDERR_FILENO);
	close(saved);
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	unlink(path);
	assert_true(n > 0);
	buf[n] = '\0';
	int lines = 0;
	for (char *p = buf; (p = strstr(p, "module hosttest: line ")); p++)
		lines++;
	assert_int_equal(lines, VJOB_LOG_BURST);
	assert_non_null(strstr(buf, "module hosttest: line 0 of many"));
	assert_null(strstr(buf, "line 10 of many"));
	assert_null(strstr(buf, "never"));
}

/* -------------------------------------------------------------- routing */

static void test_exact_and_prefix_routes(void **state)
{
	static const struct {
		const char *path, *method;
		enum vjob_route rc;
		const char *kind;
	} cases[] = {
		{ "/probe", "GET", VJOB_ROUTE_OK, "probe" },
		{ "/probe", "DELETE", VJOB_ROUTE_BAD_METHOD, "probe" },
		{ "/files/a.png", "GET", VJOB_ROUTE_OK, "files" },
		{ "/files/", "GET", VJOB_ROUTE_OK, "files" },
		{ "/files", "GET", VJOB_ROUTE_OK, "everything" }, /* not under /files/ */
		{ "/files/big/x", "GET", VJOB_ROUTE_OK, "files_big" }, /* the longer prefix */
		{ "/files/big/one", "PUT", VJOB_ROUTE_OK, "files_exact" }, /* exact wins */
		{ "/files/big/one", "GET", VJOB_ROUTE_BAD_METHOD, "files_exact" },
		{ "/files/big/one/more", "GET", VJOB_ROUTE_OK, "files_big" },
		{ "/other", "GET", VJOB_ROUTE_OK, "everything" },
		{ "/other", "POST", VJOB_ROUTE_BAD_METHOD, "everything" },
		{ "/v1/spin", "GET", VJOB_ROUTE_OK, "spin" }, /* the built-in module's */
		{ "", "GET", VJOB_ROUTE_NOT_FOUND, NULL },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct vjob_kind *k = (void *)1;
		enum vjob_route rc = vjob_route(cases[i].path, strlen(cases[i].path), cases[i].method, &k);
		if (rc != cases[i].rc || (cases[i].kind ? !k || strcmp(k->name, cases[i].kind) != 0 : k != NULL))
			fail_msg("%s %s: %d %s, want %d %s", cases[i].method, cases[i].path, rc, k ? k->name : "-",
				 cases[i].rc, cases[i].kind ? cases[i].kind : "-");
	}
	/* kinds in registration order: the built-in module's, then this one's */
	assert_int_equal(vjob_kind_index(vjob_kind_by_name("echo")), 0);
	assert_int_equal(vjob_kind_index(vjob_kind_by_name("probe")), 5);
	assert_int_equal(vjob_mod_count(), 3); /* voltd, hosttest, many */
	assert_ptr_equal(vjob_mod_at(1), mod);
	assert_string_equal(vjob_mod_version(mod), "1.2.3");
	assert_int_equal(vjob_mod_kind_count(mod), 8);
}

/* Many kinds: no cap (one module of 300, the routing table grows). */
#define MANY 300
static struct voltd_kind many[MANY + 1];
static char many_names[MANY][16], many_routes[MANY][24];

static int many_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	(void)state;
	(void)deadline_ns;
	return voltd->respond(job, 200, NULL, NULL, 0, VOLTD_BODY_STATIC);
}

static const struct voltd_module many_desc = {
	VOLTD_MODULE_HEAD,
	.name = "many",
	.version = "1",
	.kinds = many,
};

static void test_shutdown_last_first(void **state)
{
	(void)state;
	vjob_mod_shutdown_all();
	assert_int_equal(shutdowns, 1);
}

int main(void)
{
	char err[512];

	/* The built-in module first, as the daemon does; workers: 2. */
	vjob_threads_set(2);
	vjob_blocking_threads_set(2);
	assert_int_equal(vjob_mod_start(vjob_mod_builtin(), 0, err, sizeof(err)), 0);
	/* This file's module: the loader's checks after the entry. */
	if (vjob__mod_new("hosttest", "(this test)", NULL, &desc, &mod, err, sizeof(err)) < 0) {
		fprintf(stderr, "test_jobs_host: %s\n", err);
		return 99;
	}
	assert_int_equal(vjob_mod_key_set(mod, KEY_LIMIT, "250", err, sizeof(err)), 0);
	assert_int_equal(vjob_mod_key_set(mod, KEY_WORD, "hi", err, sizeof(err)), 0);
	assert_int_equal(vjob_mod_key_set(mod, KEY_WORD, "too long!", err, sizeof(err)), -EINVAL);
	assert_int_equal(vjob_mod_key_set(mod, KEY_FLAG, "maybe", err, sizeof(err)), -EINVAL);
	if (vjob_mod_start(mod, 0, err, sizeof(err)) < 0) {
		fprintf(stderr, "test_jobs_host: %s\n", err);
		return 99;
	}
	/* init saw the keys as set */
	if (seen.key_i != 250 || strcmp(seen.key_s, "hi") != 0) {
		fprintf(stderr, "test_jobs_host: init read %lld '%s'\n", (long long)seen.key_i, seen.key_s);
		return 99;
	}
	for (int i = 0; i < MANY; i++) {
		snprintf(many_names[i], sizeof(many_names[i]), "k%d", i);
		snprintf(many_routes[i], sizeof(many_routes[i]), "/many/%d", i);
		many[i] = (struct voltd_kind){ .name = many_names[i], .route = many_routes[i], .methods = "GET",
					       .step = many_step };
	}
	struct vjob_mod *mm;
	if (vjob__mod_new("many", "(this test)", NULL, &many_desc, &mm, err, sizeof(err)) < 0 ||
	    vjob_mod_start(mm, 0, err, sizeof(err)) < 0) {
		fprintf(stderr, "test_jobs_host: %s\n", err);
		return 99;
	}
	vjob_registry_freeze();
	for (int i = 0; i < MANY; i++) {
		const struct vjob_kind *k;
		if (vjob_route(many_routes[i], strlen(many_routes[i]), "GET", &k) != VJOB_ROUTE_OK ||
		    strcmp(k->name, many_names[i]) != 0) {
			fprintf(stderr, "test_jobs_host: %s not routed\n", many_routes[i]);
			return 1;
		}
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_line_and_query),
		cmocka_unit_test(test_header_and_header_at),
		cmocka_unit_test(test_body_and_body_take),
		cmocka_unit_test(test_set_status),
		cmocka_unit_test(test_set_header_refusals),
		cmocka_unit_test(test_set_header_at_headers_max),
		cmocka_unit_test(test_content_type_replaces),
		cmocka_unit_test(test_set_body_ways),
		cmocka_unit_test(test_body_alloc),
		cmocka_unit_test(test_respond_and_respondf),
		cmocka_unit_test(test_head_is_the_kinds_answer),
		cmocka_unit_test(test_sleep_from_start),
		cmocka_unit_test(test_failures_answered_for_the_kind),
		cmocka_unit_test(test_fini_once_when_abandoned),
		cmocka_unit_test(test_blocking_start_deferred),
		cmocka_unit_test(test_module_data_and_keys),
		cmocka_unit_test(test_count_per_kind),
		cmocka_unit_test(test_thread_index_and_count),
		cmocka_unit_test(test_log_rate_limited),
		cmocka_unit_test(test_exact_and_prefix_routes),
		cmocka_unit_test(test_shutdown_last_first),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
