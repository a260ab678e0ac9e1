/* SPDX-License-Identifier: MIT */
/*
 * server/memory.c: memory that returns to the system.
 *  - Connection objects come from a pool of mmap'd chunks (VSRV_POOL_CHUNK
 *    objects each), not from malloc: the buffers connections take while
 *    busy (parser, slots, batch: see conn.c) and give back when idle are
 *    then not wedged between long-lived connection objects, so the pages
 *    they free are whole pages. The pool keeps its chunks (bounded by the
 *    peak of max_connections) until vsrv_free.
 *  - Bodies of 64 KiB and more are mmap'd by malloc, so freeing one
 *    returns it to the system: the process's malloc policy (a fixed
 *    M_MMAP_THRESHOLD) is the daemon's (src/voltd/main.c).
 *  - Parsers, reorder-slot arrays and send batches that idle connections
 *    give back wait in per-worker caches (bounded) for the next connection
 *    that receives bytes on that worker.
 *  - vsrv_freed_mark tells whoever trims malloc's arenas (the daemon's
 *    main loop, src/voltd/life.c) whether the server freed anything since
 *    its last look.
 *
 * Threading: the pool is taken by acceptors (any worker) and filled by
 * drop() (any thread) under pool_mu; vsrv_freed_mark, any thread.
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
	pthread_mutex_init(&srv->pool_mu, NULL);
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

/* This worker's cache block; NULL on another thread (no cache there). */
static struct vsrv_wstats *cache_ws(struct vsrv *srv)
{
	int w = vrt_worker_id();

	return w >= 0 && (unsigned)w < srv->nworkers ? &srv->ws[w] : NULL;
}

struct vhttp_parser *vsrv__parser_get(struct vsrv *srv)
{
	struct vsrv_wstats *ws = cache_ws(srv);
	struct vhttp_parser *p;

	if (ws && ws->n_parsers)
		return ws->parsers[--ws->n_parsers];
	return vhttp_parser_new(&srv->limits, &p) < 0 ? NULL : p;
}

void vsrv__parser_put(struct vsrv *srv, struct vhttp_parser *p)
{
	struct vsrv_wstats *ws = cache_ws(srv);

	if (ws && ws->n_parsers < VSRV_PARSER_CACHE) {
		vhttp_parser_reset(p);
		ws->parsers[ws->n_parsers++] = p;
	} else {
		vhttp_parser_free(p);
	}
}

void *vsrv__slots_get(struct vsrv *srv, size_t n)
{
	struct vsrv_wstats *ws = cache_ws(srv);

	if (ws && ws->n_slots)
		return ws->slots[--ws->n_slots];
	return calloc(n, sizeof(struct vsrv_job *));
}

void vsrv__slots_put(struct vsrv *srv, void *slots)
{
	struct vsrv_wstats *ws = cache_ws(srv);

	if (ws && ws->n_slots < VSRV_CACHE)
		ws->slots[ws->n_slots++] = slots;
	else
		free(slots);
}

struct vsrv_batch *vsrv__batch_alloc(struct vsrv *srv)
{
	struct vsrv_wstats *ws = cache_ws(srv);

	if (ws && ws->n_batches)
		return ws->batches[--ws->n_batches];
	return malloc(sizeof(struct vsrv_batch));
}

void vsrv__batch_dealloc(struct vsrv *srv, struct vsrv_batch *b)
{
	struct vsrv_wstats *ws = cache_ws(srv);

	if (ws && ws->n_batches < VSRV_CACHE)
		ws->batches[ws->n_batches++] = b;
	else
		free(b);
}

void vsrv__cache_free(struct vsrv_wstats *ws)
{
	while (ws->n_parsers)
		vhttp_parser_free(ws->parsers[--ws->n_parsers]);
	while (ws->n_slots)
		free(ws->slots[--ws->n_slots]);
	while (ws->n_batches)
		free(ws->batches[--ws->n_batches]);
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
