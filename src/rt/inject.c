/* SPDX-License-Identifier: MIT */
/*
 * rt/inject.c: the runtime-wide injection queue: remote spawns and wakes,
 * ring overflow and yielded tasks. A mutex guards an intrusive FIFO list
 * plus its group marks (internal.h); workers pop batches into their prefetch
 * buffer. Blocking (mutex), any thread, never fails; after close every push
 * is refused.
 *
 * Ordering:
 *   head, tail, marks, closed*, task->next of queued tasks: under `lock`
 *   (the mutex gives the happens-before between pusher and popper; a popper
 *   walks the tasks it detached after unlocking: they are its own by then,
 *   their links were written before the pusher's unlock).
 *   len, fresh: written under lock (relaxed stores: the lock orders
 *   writers), read without it as hints. The "is there work" reads that must
 *   not miss a push are ordered by seq_cst fences in worker.c ([W4]/[W5]).
 */
#include "rt/internal.h"
#include "base/lineaudit.h"

#include <errno.h>
#include <stdlib.h>

int vrt__inject_init(struct vrt_inject *q)
{
	q->marks = calloc(VRT_INJ_MARKS, sizeof(*q->marks));
	if (!q->marks)
		return -ENOMEM;
	vrt__mutex_init(&q->lock);
	q->head = q->tail = NULL;
	q->closed_remote = q->closed = false;
	q->mh = q->mn = 0;
	q->tail_fill = 0;
	atomic_init(&q->len, 0);
	atomic_init(&q->fresh, 0);
	return 0;
}

void vrt__inject_fini(struct vrt_inject *q)
{
	pthread_mutex_destroy(&q->lock);
	free(q->marks);
	q->marks = NULL;
}

/* Under lock: the tail group is full, mark its last task `t`. */
static void mark_locked(struct vrt_inject *q, struct vrt_task *t)
{
	struct vrt_inj_mark *m;

	if (q->mn == VRT_INJ_MARKS)
		return; /* ring full: the tail group keeps growing (walked when popped) */
	m = &q->marks[(q->mh + q->mn) % VRT_INJ_MARKS];
	m->last = t;
	m->n = (uint32_t)q->tail_fill;
	q->mn++;
	q->tail_fill = 0;
}

static void append_locked(struct vrt_inject *q, struct vrt_task *first,
			  struct vrt_task *last, uint64_t n, bool fresh)
{
	last->next = NULL;
	if (q->tail)
		q->tail->next = first;
	else
		q->head = first;
	q->tail = last;
	if (n == 1) {
		if (++q->tail_fill >= VRT_INJ_GROUP)
			mark_locked(q, last);
	} else {
		/* A batch was linked by its pusher, whose cache holds it: the
		 * walk that places the marks is cheap. */
		for (struct vrt_task *t = first; t; t = t->next)
			if (++q->tail_fill >= VRT_INJ_GROUP)
				mark_locked(q, t);
	}
	/* relaxed: writers are serialised by the lock; readers use it as a hint. */
	atomic_store_explicit(&q->len,
		atomic_load_explicit(&q->len, memory_order_relaxed) + n, memory_order_relaxed);
	if (fresh) /* relaxed: as len */
		atomic_store_explicit(&q->fresh,
			atomic_load_explicit(&q->fresh, memory_order_relaxed) + n, memory_order_relaxed);
}

static bool push(struct vrt_inject *q, struct vrt_task *first, struct vrt_task *last,
		 uint64_t n, bool fresh)
{
	bool ok;

	pthread_mutex_lock(&q->lock);
	VB_LINE_WRITE(rt_inject);
	ok = !q->closed;
	if (ok)
		append_locked(q, first, last, n, fresh);
	pthread_mutex_unlock(&q->lock);
	return ok;
}

bool vrt__inject_push_batch(struct vrt_inject *q, struct vrt_task *first,
			    struct vrt_task *last, uint64_t n)
{
	return push(q, first, last, n, true);
}

bool vrt__inject_push_yields(struct vrt_inject *q, struct vrt_task *first,
			     struct vrt_task *last, uint64_t n)
{
	return push(q, first, last, n, false);
}

bool vrt__inject_push_spawn(struct vrt_inject *q, struct vrt_task *t)
{
	bool ok;

	pthread_mutex_lock(&q->lock);
	VB_LINE_WRITE(rt_inject);
	ok = !q->closed && !q->closed_remote;
	if (ok)
		append_locked(q, t, t, 1, true);
	pthread_mutex_unlock(&q->lock);
	return ok;
}

/* Under lock: detach k (1 <= k <= len) tasks from the head; *first is the
 * first of them. Whole groups cost one read of a mark's next; only the part
 * of one group that does not fit whole (< VRT_INJ_GROUP tasks, unless the
 * mark ring overflowed) is walked here. */
static void detach_locked(struct vrt_inject *q, uint64_t k, uint64_t len,
			  struct vrt_task **first)
{
	struct vrt_task *last = NULL;
	uint64_t n = 0;

	*first = q->head;
	if (k >= len) {
		/* everything: O(1) */
		q->head = q->tail = NULL;
		q->mh = q->mn = 0;
		q->tail_fill = 0;
		return;
	}
	while (q->mn && n + q->marks[q->mh].n <= k) {
		last = q->marks[q->mh].last;
		n += q->marks[q->mh].n;
		q->mh = (q->mh + 1) % VRT_INJ_MARKS;
		q->mn--;
	}
	if (n < k) {
		/* The rest from the next group (or the unmarked tail). */
		uint64_t r = k - n;

		last = last ? last->next : q->head;
		for (uint64_t i = 1; i < r; i++)
			last = last->next;
		if (q->mn)
			q->marks[q->mh].n -= (uint32_t)r;
		else
			q->tail_fill -= r;
	}
	q->head = last->next;
	if (!q->head)
		q->tail = NULL;
}

unsigned vrt__inject_pop_batch(struct vrt_inject *q, struct vrt_task **out,
			       unsigned max, unsigned share)
{
	struct vrt_task *t;
	uint64_t len, n;

	if (vrt__inject_len(q) == 0 || max == 0)
		return 0;
	pthread_mutex_lock(&q->lock);
	VB_LINE_WRITE(rt_inject);
	/* relaxed: under the lock that serialises writers. */
	len = atomic_load_explicit(&q->len, memory_order_relaxed);
	if (len == 0) {
		pthread_mutex_unlock(&q->lock);
		return 0;
	}
	n = vrt__inject_batch_size(len, share, max);
	detach_locked(q, n, len, &t);
	/* relaxed: under the lock that serialises writers. */
	atomic_store_explicit(&q->len, len - n, memory_order_relaxed);
	uint64_t fresh = atomic_load_explicit(&q->fresh, memory_order_relaxed);
	atomic_store_explicit(&q->fresh, fresh > n ? fresh - n : 0, memory_order_relaxed);
	pthread_mutex_unlock(&q->lock);
	/* The detached tasks are ours: walk them without the lock. */
	for (uint64_t i = 0; i < n; i++, t = t->next)
		out[i] = t;
	return (unsigned)n;
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
	q->mh = q->mn = 0;
	q->tail_fill = 0;
	/* relaxed: under the lock that serialises writers. */
	atomic_store_explicit(&q->len, 0, memory_order_relaxed);
	atomic_store_explicit(&q->fresh, 0, memory_order_relaxed);
	pthread_mutex_unlock(&q->lock);
	return list;
}
