/* SPDX-License-Identifier: MIT */
/*
 * jobs/registry.c: the list of kinds and the routing table built from it.
 * Immutable: any thread, any time.
 */
#include "jobs/internal.h"

#include <string.h>

extern const struct vjob_kind vjob_kind_echo;
extern const struct vjob_kind vjob_kind_spin;
extern const struct vjob_kind vjob_kind_sleep;
extern const struct vjob_kind vjob_kind_hash;
extern const struct vjob_kind vjob_kind_gzip;
#ifdef VOLTD_TEST_KINDS
/* Test builds only (voltd-test): a kind that stalls its worker. */
extern const struct vjob_kind vjob_kind_stall;
#endif

/* The order is the kinds' index (statistics arrays): append new kinds. */
static const struct vjob_kind *const kinds[] = {
	&vjob_kind_echo,
	&vjob_kind_spin,
	&vjob_kind_sleep,
	&vjob_kind_hash,
	&vjob_kind_gzip,
#ifdef VOLTD_TEST_KINDS
	&vjob_kind_stall,
#endif
};

#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))

void vjob_warm_up(void)
{
	for (size_t i = 0; i < N_KINDS; i++)
		if (kinds[i]->warm_up)
			kinds[i]->warm_up();
}

size_t vjob_kind_count(void)
{
	return N_KINDS;
}

const struct vjob_kind *vjob_kind_at(size_t i)
{
	return i < N_KINDS ? kinds[i] : NULL;
}

int vjob_kind_index(const struct vjob_kind *k)
{
	for (size_t i = 0; i < N_KINDS; i++)
		if (kinds[i] == k)
			return (int)i;
	return -1;
}

const struct vjob_kind *vjob_kind_by_name(const char *name)
{
	for (size_t i = 0; i < N_KINDS; i++)
		if (strcmp(kinds[i]->name, name) == 0)
			return kinds[i];
	return NULL;
}

/* Is `method` one of the comma-separated tokens of `allow`? */
static bool allows(const char *allow, const char *method)
{
	size_t ml = strlen(method);
	const char *p = allow;
	while (*p) {
		while (*p == ' ' || *p == ',')
			p++;
		size_t tl = strcspn(p, ", ");
		if (tl == ml && memcmp(p, method, ml) == 0)
			return true;
		p += tl;
	}
	return false;
}

enum vjob_route vjob_route(const char *path, size_t path_len, const char *method,
			   const struct vjob_kind **kind)
{
	/* A handful of kinds: a linear scan over lengths first is as fast as
	 * any table and needs none. */
	for (size_t i = 0; i < N_KINDS; i++) {
		const char *kp = kinds[i]->path;
		if (strlen(kp) != path_len || memcmp(kp, path, path_len) != 0)
			continue;
		*kind = kinds[i];
		return allows(kinds[i]->allow, method) ? VJOB_ROUTE_OK : VJOB_ROUTE_BAD_METHOD;
	}
	*kind = NULL;
	return VJOB_ROUTE_NOT_FOUND;
}
