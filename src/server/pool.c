/* SPDX-License-Identifier: MIT */
/*
 * server/pool.c: the connection pool and the spares: memory that returns to
 * the system. (The blocking pool, threads for blocking kinds, is blocking.c.)
 *  - Connection objects come from a pool of mmap'd chunks (VSRV_POOL_CHUNK
 *    objects each), not from malloc: the buffers connections take while
 *    busy (busy block, parser, batch: see conn.c) and give back when idle are
 *    then not wedged between long-lived connection objects, so the pages
 *    they free are whole pages. The pool keeps its chunks (bounded by the
 *    peak of max_connections) until vsrv_free.
 *  - Bodies of 64 KiB and more are mmap'd by malloc, so freeing one
 *    returns it to the system: the process's malloc policy (a fixed
 *    M_MMAP_THRESHOLD) is the daemon's (src/voltd/malloc_policy.c, vd_mem_policy).
 *  - Spares: busy blocks (a connection's send operation, reorder slots and
 *    the rest of its state while it has work: struct vsrv_busy), parsers
 *    and send batches that idle connections give back, and the jobs
 *    (struct vsrv_job with its vjob inside; a parser keeps its last
 *    request's memory) wait in per-worker stashes for the next request on
 *    that worker: a request on the hot path
 *    allocates nothing once the stashes are warm. A stash is used only by
 *    its own worker's thread, so what another worker frees goes to that
 *    worker's stash; a worker that frees more than it takes (connections
 *    move between workers) passes half a stash to the kind's depot, where a
 *    worker that runs dry takes half a stash: the depot's mutex is taken
 *    once per half a stash at most, never per request, and no stash needs
 *    an atomic. Other threads (drop() after a non-worker's release,
 *    vsrv_free) allocate and free directly. Everything is bounded.
 *  - vsrv_freed_mark tells whoever trims malloc's arenas (the daemon's
 *    main loop, src/voltd/life.c) whether the server freed anything since
 *    its last look.
 *
 * Threading: the pool is taken by acceptors (any worker) and filled by
 * drop() (any thread) under pool_mu; a stash by its own worker only; a
 * depot under its mutex, never held while calling out; vsrv_freed_mark,
 * any thread.
 */
#include "config.h"
#include "server/internal.h"
#include "base/time.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void vsrv__mem_init(struct vsrv *srv)
{
	uint32_t nslots = 1;

	/* A connection's reorder slots (in its busy block): one spare, so a
	 * late answer (408) never shares a slot. */
	while (nslots < srv->cfg.max_pipeline + 1)
		nslots <<= 1;
	srv->slot_mask = nslots - 1;
	pthread_mutex_init(&srv->pool_mu, NULL);
	for (unsigned k = 0; k < VSRV_SPARE_COUNT; k++)
		pthread_mutex_init(&srv->depot[k].mu, NULL);
}

struct vsrv_conn *vsrv__conn_alloc(struct vsrv *srv)
{
	struct vsrv_conn *c = NULL;
	size_t sz = sizeof(struct vsrv_conn);

	VB_LINE_WRITE(srv_pool);
	pthread_mutex_lock(&srv->pool_mu);
	if (srv->pool_free) {
		c = srv->pool_free;
		srv->pool_free = *(struct vsrv_conn **)c;
	} else {
		if (!srv->pool_n || srv->pool_used == VSRV_POOL_CHUNK) {
			if (srv->pool_n == srv->pool_cap) {
				unsigned cap = srv->pool_cap ? 2 * srv->pool_cap : 16;
				void **n = realloc(srv->pool_chunks, cap * sizeof(*n));
				if (!n)
					goto out;
				srv->pool_chunks = n;
				srv->pool_cap = cap;
			}
			void *m = mmap(NULL, VSRV_POOL_CHUNK * sz, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (m == MAP_FAILED)
				goto out;
			srv->pool_chunks[srv->pool_n++] = m;
			srv->pool_used = 0;
		}
		c = (struct vsrv_conn *)((char *)srv->pool_chunks[srv->pool_n - 1] +
					 srv->pool_used++ * sz);
	}
out:
	pthread_mutex_unlock(&srv->pool_mu);
	if (c)
		memset(c, 0, sz);
	return c;
}

void vsrv__conn_dealloc(struct vsrv *srv, struct vsrv_conn *c)
{
	VB_LINE_WRITE(srv_pool);
	pthread_mutex_lock(&srv->pool_mu);
	*(struct vsrv_conn **)c = srv->pool_free;
	srv->pool_free = c;
	pthread_mutex_unlock(&srv->pool_mu);
}

/* ------------------------------------------------- per-worker caches */

/* Per kind: how many a worker keeps, how many the depot keeps, how one is
 * made and freed. Parsers are large (their buffers): few are kept. */
static const struct {
	unsigned keep, depot;
} limits[VSRV_SPARE_COUNT] = {
	[VSRV_SPARE_PARSER] = { 4, 16 },
	[VSRV_SPARE_BUSY] = { VSRV_STASH, VSRV_DEPOT },
	[VSRV_SPARE_BATCH] = { VSRV_STASH, 128 },
	[VSRV_SPARE_JOB] = { VSRV_STASH, VSRV_DEPOT },
	[VSRV_SPARE_REQ] = { VSRV_STASH, VSRV_DEPOT },
};

static void spare_free(enum vsrv_spare k, void *p)
{
	struct vsrv_busy *b = p;

	switch (k) {
	case VSRV_SPARE_PARSER:
		vhttp_parser_free(p);
		break;
	case VSRV_SPARE_BUSY:
		free(b->alog);
		free(b->trace);
		free(b);
		break;
	default:
		free(p);
		break;
	}
}

/* This worker's stash of kind k; NULL on another thread (none there). */
static struct vsrv_stash *stash(struct vsrv *srv, enum vsrv_spare k)
{
	int w = vrt_worker_id();

	return w >= 0 && (unsigned)w < srv->nworkers ? &srv->ws[w].stash[k] : NULL;
}

/* Move up to n spares from one stack to the other (the depot's mutex held). */
static void move_spares(void **from, unsigned *from_n, void **to, unsigned *to_n, unsigned to_max,
			unsigned n)
{
	while (n-- && *from_n && *to_n < to_max)
		to[(*to_n)++] = from[--*from_n];
}

void *vsrv__spare_get(struct vsrv *srv, enum vsrv_spare k)
{
	struct vsrv_stash *s = stash(srv, k);
	struct vsrv_depot *d = &srv->depot[k];

	if (!s) {
		VSRV_INC(srv, spares_made); /* not a worker: the caller makes one */
		return NULL;
	}
	if (!s->n) {
		/* Run dry: take half a stash from what other workers gave
		 * back (a worker that frees more than it takes fills it). */
		pthread_mutex_lock(&d->mu);
		move_spares(d->v, &d->n, s->v, &s->n, limits[k].keep, limits[k].keep / 2);
		pthread_mutex_unlock(&d->mu);
	}
	if (!s->n) {
		VSRV_INC(srv, spares_made); /* the pool grows: the caller makes one */
		return NULL;
	}
	return s->v[--s->n];
}

void vsrv__spare_put(struct vsrv *srv, enum vsrv_spare k, void *p)
{
	struct vsrv_stash *s = stash(srv, k);
	struct vsrv_depot *d = &srv->depot[k];

	if (!s) {
		spare_free(k, p);
		VSRV_INC(srv, spares_freed);
		return;
	}
	if (s->n == limits[k].keep) {
		/* Full: half of it to the depot for the workers that take
		 * more than they free; what the depot has no room for is freed. */
		pthread_mutex_lock(&d->mu);
		move_spares(s->v, &s->n, d->v, &d->n, limits[k].depot, limits[k].keep / 2);
		pthread_mutex_unlock(&d->mu);
		while (s->n > limits[k].keep / 2) {
			spare_free(k, s->v[--s->n]);
			VSRV_INC(srv, spares_freed);
		}
	}
	s->v[s->n++] = p;
}

struct vhttp_parser *vsrv__parser_get(struct vsrv *srv)
{
	struct vhttp_parser *p = vsrv__spare_get(srv, VSRV_SPARE_PARSER);

	return p || vhttp_parser_new(&srv->limits, &p) == 0 ? p : NULL;
}

void vsrv__parser_put(struct vsrv *srv, struct vhttp_parser *p)
{
	vhttp_parser_reset(p);
	vsrv__spare_put(srv, VSRV_SPARE_PARSER, p);
}

struct vsrv_busy *vsrv__busy_get(struct vsrv *srv)
{
	struct vsrv_busy *b = vsrv__spare_get(srv, VSRV_SPARE_BUSY);

	return b ? b : calloc(1, sizeof(*b) + ((size_t)srv->slot_mask + 1) * sizeof(b->slots[0]));
}

struct vsrv_batch *vsrv__batch_alloc(struct vsrv *srv)
{
	struct vsrv_batch *b = vsrv__spare_get(srv, VSRV_SPARE_BATCH);

	return b ? b : malloc(sizeof(*b));
}

struct vsrv_job *vsrv__job_alloc(struct vsrv *srv)
{
	struct vsrv_job *job = vsrv__spare_get(srv, VSRV_SPARE_JOB);

	return job ? job : malloc(sizeof(*job)); /* aligned for max_align_t */
}

void vsrv__req_put(struct vsrv *srv, struct vhttp_request *r)
{
	if (!r)
		return;
	if (vhttp_request_cap(r) != VHTTP_REQUEST_MIN) {
		vhttp_request_free(r);
		return;
	}
	free(vhttp_request_take_body(r, &(size_t){ 0 }));
	vsrv__spare_put(srv, VSRV_SPARE_REQ, r);
}

void *vsrv__req_alloc(void *ctx, size_t size)
{
	void *r = size == VHTTP_REQUEST_MIN ? vsrv__spare_get(ctx, VSRV_SPARE_REQ) : NULL;

	return r ? r : malloc(size);
}

void vsrv__cache_free(struct vsrv *srv)
{
	for (unsigned k = 0; k < VSRV_SPARE_COUNT; k++) {
		struct vsrv_depot *d = &srv->depot[k];

		for (unsigned w = 0; w < srv->nworkers; w++) {
			struct vsrv_stash *s = &srv->ws[w].stash[k];
			while (s->n)
				spare_free(k, s->v[--s->n]);
		}
		while (d->n)
			spare_free(k, d->v[--d->n]);
		pthread_mutex_destroy(&d->mu);
	}
}

/* ------------------------------------------------------------ trimming */

uint64_t vsrv_freed_mark(struct vsrv *srv)
{
	uint64_t sum = 0;

	for (unsigned w = 0; w <= srv->nworkers; w++) {
		/* Relaxed: statistics, a hint for when to trim. */
		sum += atomic_load_explicit(&srv->ws[w].c[VSRV_C_conns_closed], memory_order_relaxed);
		sum += atomic_load_explicit(&srv->ws[w].c[VSRV_C_bytes_out], memory_order_relaxed);
	}
	return sum;
}

void vsrv__mem_fini(struct vsrv *srv)
{
	for (unsigned i = 0; i < srv->pool_n; i++)
		munmap(srv->pool_chunks[i], VSRV_POOL_CHUNK * sizeof(struct vsrv_conn));
	free(srv->pool_chunks);
	srv->pool_chunks = NULL;
	srv->pool_n = srv->pool_cap = 0;
	pthread_mutex_destroy(&srv->pool_mu);
}
