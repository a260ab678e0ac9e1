/* SPDX-License-Identifier: MIT */
/*
 * rt/inject.c: the runtime-wide injection queue: remote spawns and wakes,
 * ring overflow and budget-forced yields. A mutex guards an intrusive FIFO
 * list; workers pop batches into their prefetch buffer. Blocking (mutex),
 * any thread, never fails; after close every push is refused.
 *
 * Ordering:
 *   head, tail, closed*, task->next of queued tasks: under `lock` (the mutex
 *   gives the happens-before between pusher and popper).
 *   len: written under lock (relaxed store: the lock orders writers), read
 *   without it as a hint. The "is there work" reads that must not miss a push
 *   are ordered by seq_cst fences in worker.c ([W4]/[W5]).
 */
#include "rt/internal.h"

void vrt__inject_init(struct vrt_inject *q)
{
	pthread_mutex_init(&q->lock, NULL);
	q->head = q->tail = NULL;
	q->closed_remote = q->closed = false;
	atomic_init(&q->len, 0);
}

void vrt__inject_fini(struct vrt_inject *q)
{
	pthread_mutex_destroy(&q->lock);
}

static void append_locked(struct vrt_inject *q, struct vrt_task *first,
			  struct vrt_task *last, uint64_t n)
{
	last->next = NULL;
	if (q->tail)
		q->tail->next = first;
	else
		q->head = first;
	q->tail = last;
	/* relaxed: writers are serialised by the lock; readers use it as a hint. */
	atomic_store_explicit(&q->len,
		atomic_load_explicit(&q->len, memory_order_relaxed) + n, memory_order_relaxed);
}

bool vrt__inject_push_batch(struct vrt_inject *q, struct vrt_task *first,
			    struct vrt_task *last, uint64_t n)
{
	bool ok;

	pthread_mutex_lock(&q->lock);
	ok = !q->closed;
	if (ok)
		append_locked(q, first, last, n);
	pthread_mutex_unlock(&q->lock);
	return ok;
}

bool vrt__inject_push_spawn(struct vrt_inject *q, struct vrt_task *t)
{
	bool ok;

	pthread_mutex_lock(&q->lock);
	ok = !q->closed && !q->closed_remote;
	if (ok)
		append_locked(q, t, t, 1);
	pthread_mutex_unlock(&q->lock);
	return ok;
}

unsigned vrt__inject_pop_batch(struct vrt_inject *q, struct vrt_task **out,
			       unsigned max, unsigned share)
{
	unsigned n = 0, want;
	uint64_t len;

	if (vrt__inject_len(q) == 0)
		return 0;
	pthread_mutex_lock(&q->lock);
	/* relaxed: under the lock that serialises writers. */
	len = atomic_load_explicit(&q->len, memory_order_relaxed);
	want = vrt__inject_batch_size(len, share, max);
	while (n < want) {
		struct vrt_task *t = q->head;
		q->head = t->next;
		out[n++] = t;
	}
	if (!q->head)
		q->tail = NULL;
	/* relaxed: under the lock that serialises writers. */
	atomic_store_explicit(&q->len, len - n, memory_order_relaxed);
	pthread_mutex_unlock(&q->lock);
	return n;
}

void vrt__inject_close_remote(struct vrt_inject *q)
{
	pthread_mutex_lock(&q->lock);
	q->closed_remote = true;
	pthread_mutex_unlock(&q->lock);
}

struct vrt_task *vrt__inject_close(struct vrt_inject *q)
{
	struct vrt_task *list;

	pthread_mutex_lock(&q->lock);
	q->closed = q->closed_remote = true;
	list = q->head;
	q->head = q->tail = NULL;
	/* relaxed: under the lock that serialises writers. */
	atomic_store_explicit(&q->len, 0, memory_order_relaxed);
	pthread_mutex_unlock(&q->lock);
	return list;
}
