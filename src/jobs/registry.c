/* SPDX-License-Identifier: MIT */
/*
 * jobs/registry.c: the registry: the started modules and their kinds, in
 * start order (no cap); frozen before the workers start into the routing
 * table (exact routes in an open-addressing hash table, then the prefix
 * routes longest first) and the per-thread counter blocks of count().
 *
 * Threading: built on the main thread (vjob_mod_start, vjob_registry_freeze)
 * before any worker runs; immutable after, so routing and lookups are plain
 * reads on any thread (the workers were started after the freeze: thread
 * creation orders their reads after it). The counters are the one shared
 * state written after the freeze: each thread adds to its own block
 * (relaxed fetch_add: statistics, summed by vjob_kind_counter, which may
 * read a count a moment old).
 */
#include "jobs/internal.h"
#include "base/compiler.h"
#include "rt/rt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct vjob_kind **kinds;
static size_t n_kinds, cap_kinds;
static struct vjob_mod **mods;
static size_t n_mods, cap_mods;
static bool frozen;

/* The routing table (vjob_registry_freeze). */
static struct vjob_kind **exact; /* [exact_mask + 1], NULL: free slot */
static size_t exact_mask;
static struct vjob_kind **prefixes; /* longest first */
static size_t n_prefixes;

/* count(): per thread a block of every kind's counters (kind->counter_base
 * + index), on cache lines of its own. */
static unsigned n_workers = 1;
static unsigned n_blocking;
/* 1 + i on the blocking pool's thread i (vjob_thread_blocking), else 0. */
static __thread unsigned blocking_index;
static _Atomic uint64_t *counters;
static size_t counter_stride; /* uint64_t per thread block */

static const char *const reserved[] = { "/healthz", "/readyz", "/livez" };

bool vjob__route_reserved(const char *path, size_t len)
{
	for (size_t i = 0; i < VB_ARRAY_SIZE(reserved); i++)
		if (strlen(reserved[i]) == len && memcmp(reserved[i], path, len) == 0)
			return true;
	return false;
}

bool vjob__frozen(void)
{
	return frozen;
}

/* Two kinds clash by name, or by route: the same path, both exact or both
 * prefix (an exact route and a prefix one may be equal: the exact wins). */
static bool clash(const struct vjob_kind *a, const struct vjob_kind *b, char *why, size_t len)
{
	if (strcmp(a->name, b->name) == 0) {
		snprintf(why, len, "the name is taken by kind \"%s\" of module %s (kind names are unique across "
				   "modules)", b->name, vjob_mod_name(b->mod));
		return true;
	}
	if (a->prefix == b->prefix && a->path_len == b->path_len && memcmp(a->path, b->path, a->path_len) == 0) {
		snprintf(why, len, "%sroute \"%s\" is served already by kind \"%s\" of module %s",
			 a->prefix ? "prefix " : "", a->path, b->name, vjob_mod_name(b->mod));
		return true;
	}
	return false;
}

const struct vjob_kind *vjob__registry_clash(const struct vjob_kind *k, const struct vjob_kind *pending,
					     size_t n, char *why, size_t len)
{
	for (size_t i = 0; i < n_kinds; i++)
		if (kinds[i] != k && clash(k, kinds[i], why, len))
			return kinds[i];
	for (size_t i = 0; i < n; i++)
		if (&pending[i] != k && clash(k, &pending[i], why, len))
			return &pending[i];
	return NULL;
}

static int grow(void *arr, size_t *cap, size_t need, size_t elem)
{
	void **a = arr;
	size_t c = *cap ? *cap : 8;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	void *n = realloc(*a, c * elem);
	if (!n)
		return -ENOMEM;
	*a = n;
	*cap = c;
	return 0;
}

int vjob__modules_add(struct vjob_mod *m)
{
	if (grow(&mods, &cap_mods, n_mods + 1, sizeof(*mods)) < 0)
		return -ENOMEM;
	mods[n_mods++] = m;
	return 0;
}

int vjob__registry_add(struct vjob_mod *m)
{
	if (grow(&kinds, &cap_kinds, n_kinds + m->n_kinds, sizeof(*kinds)) < 0) {
		n_mods--; /* vjob__modules_add's, just before */
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->n_kinds; i++) {
		m->kinds[i].index = (unsigned)n_kinds;
		kinds[n_kinds++] = &m->kinds[i];
	}
	return 0;
}

size_t vjob_mod_count(void)
{
	return n_mods;
}

const struct vjob_mod *vjob_mod_at(size_t i)
{
	return i < n_mods ? mods[i] : NULL;
}

/* FNV-1a: the exact routes' hash. */
static size_t route_hash(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
	return (size_t)(h ^ (h >> 32));
}

static int by_length_desc(const void *a, const void *b)
{
	const struct vjob_kind *x = *(struct vjob_kind *const *)a, *y = *(struct vjob_kind *const *)b;

	return x->path_len < y->path_len ? 1 : x->path_len > y->path_len ? -1 : strcmp(x->path, y->path);
}

void vjob_threads_set(unsigned workers)
{
	VB_BUG_ON(frozen || n_mods);
	n_workers = workers ? workers : 1;
}

void vjob_blocking_threads_set(unsigned n)
{
	VB_BUG_ON(frozen || n_mods);
	n_blocking = n;
}

void vjob_thread_blocking(unsigned i)
{
	VB_BUG_ON(i >= n_blocking);
	blocking_index = i + 1;
}

void vjob_registry_freeze(void)
{
	size_t slots = 16, n_exact = 0, n_counters = 0;

	if (frozen)
		return;
	for (size_t i = 0; i < n_kinds; i++) {
		n_exact += !kinds[i]->prefix;
		kinds[i]->counter_base = (unsigned)n_counters;
		n_counters += kinds[i]->n_counters;
	}
	/* Load factor at most 1/2: a miss ends at a free slot soon. */
	while (slots < 2 * n_exact)
		slots *= 2;
	exact = calloc(slots, sizeof(*exact));
	prefixes = calloc(n_kinds ? n_kinds : 1, sizeof(*prefixes));
	counter_stride = (n_counters + VB_CACHELINE / sizeof(uint64_t) - 1) /
			 (VB_CACHELINE / sizeof(uint64_t)) * (VB_CACHELINE / sizeof(uint64_t));
	if (counter_stride)
		counters = aligned_alloc(VB_CACHELINE, counter_stride * sizeof(*counters) * vjob__thread_count());
	/* At start, before anything serves: nothing to fall back to. */
	VB_BUG_ON(!exact || !prefixes || (counter_stride && !counters));
	for (size_t i = 0; counter_stride && i < counter_stride * vjob__thread_count(); i++)
		atomic_init(&counters[i], 0);
	exact_mask = slots - 1;
	for (size_t i = 0; i < n_kinds; i++) {
		struct vjob_kind *k = kinds[i];
		if (k->prefix) {
			prefixes[n_prefixes++] = k;
			continue;
		}
		size_t s = route_hash(k->path, k->path_len) & exact_mask;
		while (exact[s])
			s = (s + 1) & exact_mask;
		exact[s] = k;
	}
	qsort(prefixes, n_prefixes, sizeof(*prefixes), by_length_desc);
	frozen = true;
	vjob__log_start();
}

/* ------------------------------------------------------------- threads */

unsigned vjob__thread_count(void)
{
	return n_workers + n_blocking + 1;
}

unsigned vjob__thread_index(void)
{
	int w = vrt_worker_id();

	if (w >= 0 && (unsigned)w < n_workers)
		return (unsigned)w;
	return blocking_index ? n_workers + blocking_index - 1 : n_workers + n_blocking;
}

void vjob__count(const struct vjob_kind *k, uint32_t c, uint64_t n)
{
	if (c >= k->n_counters || !counters)
		return;
	/* Relaxed: a statistic, see the top of the file. */
	atomic_fetch_add_explicit(&counters[vjob__thread_index() * counter_stride + k->counter_base + c], n,
				  memory_order_relaxed);
}

uint64_t vjob_kind_counter(const struct vjob_kind *k, unsigned c)
{
	uint64_t sum = 0;

	if (c >= k->n_counters || !counters)
		return 0;
	for (unsigned t = 0; t < vjob__thread_count(); t++)
		/* Relaxed: a statistic, see the top of the file. */
		sum += atomic_load_explicit(&counters[t * counter_stride + k->counter_base + c], memory_order_relaxed);
	return sum;
}

unsigned vjob_kind_counter_count(const struct vjob_kind *k)
{
	return k->n_counters;
}

struct voltd_counter vjob_kind_counter_decl(const struct vjob_kind *k, unsigned c)
{
	struct voltd_counter d = { 0 };
	size_t stride = k->mod->desc.counter_size;

	if (c < k->n_counters)
		memcpy(&d, (const char *)k->def.counters + c * stride, stride < sizeof(d) ? stride : sizeof(d));
	return d;
}

/* ------------------------------------------------------------- lookups */

size_t vjob_kind_count(void)
{
	return n_kinds;
}

const struct vjob_kind *vjob_kind_at(size_t i)
{
	return i < n_kinds ? kinds[i] : NULL;
}

int vjob_kind_index(const struct vjob_kind *k)
{
	return k && k->index < n_kinds && kinds[k->index] == k ? (int)k->index : -1;
}

const struct vjob_kind *vjob_kind_by_name(const char *name)
{
	for (size_t i = 0; i < n_kinds; i++)
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
	VB_BUG_ON(!frozen);
	const struct vjob_kind *k = NULL;

	for (size_t s = route_hash(path, path_len) & exact_mask; exact[s]; s = (s + 1) & exact_mask) {
		if (exact[s]->path_len == path_len && memcmp(exact[s]->path, path, path_len) == 0) {
			k = exact[s];
			break;
		}
	}
	for (size_t i = 0; !k && i < n_prefixes; i++)
		if (prefixes[i]->path_len <= path_len && memcmp(prefixes[i]->path, path, prefixes[i]->path_len) == 0)
			k = prefixes[i];
	*kind = k;
	if (!k)
		return VJOB_ROUTE_NOT_FOUND;
	return allows(k->allow, method) ? VJOB_ROUTE_OK : VJOB_ROUTE_BAD_METHOD;
}
