/* SPDX-License-Identifier: MIT */
/*
 * jobs/builtin.h: the built-in module "voltd"'s own header, shared by its
 * files (builtin.c, kind_*.c) and nothing else: like any module, they are
 * written against <voltd/module.h> alone. Its kinds, its keys' indexes, and
 * a helper two kinds use.
 */
#ifndef VOLTD_JOBS_BUILTIN_H
#define VOLTD_JOBS_BUILTIN_H

#include <voltd/module.h>

#include <string.h>

/* The kinds, one per file; builtin.c puts them side by side. */
extern const struct voltd_kind vjob_builtin_echo;
extern const struct voltd_kind vjob_builtin_spin;
extern const struct voltd_kind vjob_builtin_sleep;
extern const struct voltd_kind vjob_builtin_hash;
extern const struct voltd_kind vjob_builtin_gzip;
/* Test builds only (voltd-test): a kind that stalls its worker. */
extern const struct voltd_kind vjob_builtin_stall;

/* The module's entry: what VOLTD_MODULE() writes for a module file, but
 * not exported, and named for voltd, which calls it as it calls a file's. */
const struct voltd_module *vjob__builtin_entry(const struct voltd_host *host);

/* The module's keys, in its keys array (builtin.c): [jobs] in voltd.conf. */
enum { VJOB_KEY_SPIN_MAX_N, VJOB_KEY_SLEEP_MAX_MS };

/* How many query parameters are called `name` (a parameter given twice is
 * a 400 for the kinds that take it). */
static inline size_t vjob_builtin_query_count(struct voltd_job *job, const char *name)
{
	size_t qlen, nlen = strlen(name), count = 0;
	const char *q = voltd->query(job, &qlen), *end = q + qlen;

	while (q < end) {
		const char *amp = memchr(q, '&', (size_t)(end - q));
		const char *pe = amp ? amp : end;
		const char *eq = memchr(q, '=', (size_t)(pe - q));
		size_t klen = (size_t)((eq ? eq : pe) - q);

		count += klen == nlen && memcmp(q, name, nlen) == 0;
		q = amp ? amp + 1 : end;
	}
	return count;
}

#endif
