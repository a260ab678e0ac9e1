/* SPDX-License-Identifier: MIT */
/*
 * tests/modules/bad.c: modules voltd must refuse, one per BAD_* macro (the
 * build makes one shared object of each, tests/modules/local.mk), and one
 * it must take although built against a later minor (FUTURE). Each refusal
 * is tested in tests/unit/test_jobs_loader.c, with its line.
 */
#include <voltd/module.h>

#include <errno.h>
#include <stdio.h>

__attribute__((unused)) static int step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	(void)state;
	(void)deadline_ns;
	return voltd->respond(job, 200, NULL, NULL, 0, VOLTD_BODY_STATIC);
}

#if defined(BAD_NOSYM)
/* A shared object, but no entry: not a voltd module. */
__attribute__((visibility("default"))) int not_a_module(void);
__attribute__((visibility("default"))) int not_a_module(void)
{
	return 1;
}

#elif defined(BAD_V2)
/* Built for a later major: its entry carries that major. */
static const struct voltd_kind kinds[] = { { .name = "v2", .route = "/v2", .methods = "GET", .step = step },
					   { .name = NULL } };
static const struct voltd_module v2 = { VOLTD_MODULE_HEAD, .name = "bad", .version = "2", .kinds = kinds };
const struct voltd_host *voltd;
__attribute__((visibility("default"))) const struct voltd_module *voltd_module_v2(const struct voltd_host *h);
__attribute__((visibility("default"))) const struct voltd_module *voltd_module_v2(const struct voltd_host *h)
{
	voltd = h;
	return &v2;
}

#elif defined(FUTURE)
/* Built against minor 3 of this major, running on minor 0 and later: its
 * descriptors are longer (fields a later minor appends), which voltd reads
 * through the strides it gives and ignores. */
struct kind_3 {
	struct voltd_kind k;
	uint64_t appended[3];
};
struct module_3 {
	struct voltd_module m;
	uint64_t appended[5];
};
static const struct kind_3 kinds[] = {
	{ .k = { .name = "future_a", .route = "/future/a", .methods = "GET", .step = step }, .appended = { 1, 2, 3 } },
	{ .k = { .name = "future_b", .route = "/future/b", .methods = "GET", .step = step }, .appended = { 4, 5, 6 } },
	{ .k = { .name = NULL } },
};
static const struct module_3 future = {
	.m = { .size = sizeof(struct module_3), .abi_major = VOLTD_MODULE_ABI_MAJOR, .abi_minor = 3, .min_minor = 0,
	       .kind_size = sizeof(struct kind_3), .key_size = sizeof(struct voltd_key),
	       .counter_size = sizeof(struct voltd_counter), .name = "bad", .version = "3",
	       .kinds = &kinds[0].k },
	.appended = { 7, 7, 7, 7, 7 },
};
VOLTD_MODULE(future.m)

#else
/* A descriptor with one thing wrong, by its macro. */
#if defined(BAD_INIT)
static int mod_init(struct voltd_mod *mod, uint32_t flags, void **data, char *err, size_t errlen)
{
	(void)mod;
	(void)flags;
	(void)data;
	snprintf(err, errlen, "no database at %s", "db.example:5432");
	return -ECONNREFUSED;
}
#else
#define mod_init NULL
#endif

static const struct voltd_counter counters[] = {
#if defined(BAD_COUNTER)
	{ .name = "same", .help = "one" },
	{ .name = "same", .help = "two" },
#endif
	{ .name = NULL },
};

static const struct voltd_kind kinds[] = {
	{ .name = "bad_ok", .route = "/bad/ok", .methods = "GET", .step = step, .counters = counters },
#if defined(BAD_DUPKIND)
	{ .name = "spin", .route = "/bad/spin", .methods = "GET", .step = step },
#elif defined(BAD_ROUTE)
	{ .name = "bad_hash", .route = "/v1/hash", .methods = "POST", .step = step },
#elif defined(BAD_SERVER_ROUTE)
	{ .name = "bad_livez", .route = "/livez", .methods = "GET", .step = step },
#elif defined(BAD_OWN_CLASH)
	{ .name = "bad_again", .route = "/bad/ok", .methods = "GET", .step = step },
#elif defined(BAD_NOSTEP)
	{ .name = "bad_nostep", .route = "/bad/nostep", .methods = "GET" },
#elif defined(BAD_METHODS)
	{ .name = "bad_methods", .route = "/bad/methods", .methods = "GET;POST", .step = step },
#elif defined(BAD_KINDNAME)
	{ .name = "Bad Kind", .route = "/bad/kind", .methods = "GET", .step = step },
#elif defined(BAD_ROUTE_SYNTAX)
	{ .name = "bad_query", .route = "/bad?x=1", .methods = "GET", .step = step },
#elif defined(BAD_GOOD_CLASH)
	{ .name = "good_spin", .route = "/bad/spin", .methods = "GET", .step = step },
#endif
	{ .name = NULL },
};

static const struct voltd_key keys[] = {
#if defined(BAD_KEY_BOUNDS)
	{ .name = "limit", .type = VOLTD_KEY_INT, .def = "100", .min = 1, .max = 10, .doc = "a limit" },
#elif defined(BAD_KEY_PATH)
	{ .name = "path", .type = VOLTD_KEY_STRING, .def = "x", .max = 10, .doc = "voltd's own" },
#elif defined(BAD_KEY_TYPE)
	{ .name = "odd", .type = 9, .def = "x", .doc = "no such type" },
#elif defined(BAD_KEY_LIVE_STRING)
	{ .name = "word", .type = VOLTD_KEY_STRING, .flags = VOLTD_KEY_LIVE, .def = "x", .max = 10, .doc = "live" },
#endif
	{ .name = "fine", .type = VOLTD_KEY_BOOL, .def = "off", .doc = "a fine key" },
	{ .name = NULL },
};

/* VOLTD_MODULE_HEAD with one field changed (an override would warn). */
#define HEAD(size_, major, minor, oldest, kind_size_)                                              \
	.size = (size_), .abi_major = (major), .abi_minor = (minor), .min_minor = (oldest),         \
	.kind_size = (kind_size_), .key_size = sizeof(struct voltd_key),                            \
	.counter_size = sizeof(struct voltd_counter)
#define SZ sizeof(struct voltd_module)
#define KSZ sizeof(struct voltd_kind)
#define MAJ VOLTD_MODULE_ABI_MAJOR
#define MIN VOLTD_MODULE_ABI_MINOR

static const struct voltd_module bad = {
#if defined(BAD_MAJOR)
	HEAD(SZ, 2, 0, 0, KSZ),
#elif defined(BAD_MINOR)
	HEAD(SZ, MAJ, 5, 5, KSZ),
#elif defined(BAD_SMALL)
	HEAD(40, MAJ, MIN, MIN, KSZ),
#elif defined(BAD_STRIDE)
	HEAD(SZ, MAJ, MIN, MIN, 16),
#else
	VOLTD_MODULE_HEAD,
#endif
#if defined(BAD_NAME)
	.name = "Bad-Name",
#else
	.name = "bad",
#endif
#if defined(BAD_VERSION)
	.version = NULL,
#else
	.version = "0.0.1",
#endif
	.kinds = kinds,
	.keys = keys,
	.init = mod_init,
};

VOLTD_MODULE(bad)
#endif
