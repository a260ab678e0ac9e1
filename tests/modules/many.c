/* SPDX-License-Identifier: MIT */
/*
 * tests/modules/many.c: a module of 40 kinds, "many": with voltd's own rows
 * the server's per-kind tables then hold far more than the old cap of 16
 * (tests/integration/test_modules.py). GET /many/N answers "N\n".
 */
#include <voltd/module.h>

#include <stdlib.h>
#include <string.h>

static int step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	size_t len;
	const char *path = voltd->path(job, &len);

	(void)state;
	(void)deadline_ns;
	/* "/many/N" -> "N\n" */
	return voltd->respondf(job, 200, "%.*s\n", (int)(len - 6), path + 6);
}

#define K(n) { .name = "many_" #n, .route = "/many/" #n, .methods = "GET", .step = step },
#define K10(t) K(t##0) K(t##1) K(t##2) K(t##3) K(t##4) K(t##5) K(t##6) K(t##7) K(t##8) K(t##9)
static const struct voltd_kind kinds[] = {
	K(0) K(1) K(2) K(3) K(4) K(5) K(6) K(7) K(8) K(9) K10(1) K10(2) K10(3)
	{ .name = NULL },
};

static const struct voltd_module many = {
	VOLTD_MODULE_HEAD,
	.name = "many",
	.version = "40",
	.kinds = kinds,
};

VOLTD_MODULE(many)
