/* SPDX-License-Identifier: MIT */
/*
 * io/timer.c: deadlines for tasks. Each worker keeps a binary min-heap of
 * armed timers under a mutex; the worker fires due timers after every poll
 * and park, and sleeps no longer than its earliest deadline (one kernel
 * timeout per worker: the io_uring_enter wait or the loop's ev_timer), so
 * 10,000 armed connection deadlines cost one heap entry each and no
 * kernel object.
 *
 * Threading: a timer is armed / re-armed / disarmed by its task on any
 * worker; it stays in the heap it was first armed in (its home) until it
 * fires or is disarmed. The heap's mutex guards deadline, idx, and the heap
 * array; firing collects tasks under the lock and wakes them after it.
 *
 * Ordering: t->home is written under the home heap's lock (set on insert,
 * cleared on removal) and read unlocked by the arming task, which re-checks
 * it under that lock when it is not NULL. When it reads NULL the task goes
 * on to write t->deadline, t->task and t->fired without any lock, so the
 * firing worker's last accesses to the timer must happen before that read:
 * [IT1] owner, firing: store fired = 1 (release) after the timer left the
 *      heap; pairs with [IT2], the task's acquire load in vio_timer_expired.
 * [IT3] owner, firing: store home = NULL (release) as its very last access
 *      to the timer (after reading t->task and storing fired); pairs with
 *      [IT4], the task's acquire loads of home in arm / disarm / sleep_until.
 */
#include "config.h"

#include "io/internal.h"
#include "base/time.h"

#include <errno.h>
#include <stdlib.h>

#define THEAP_INITIAL 256

int vio__theap_init(struct vio_theap *h, struct vio_worker *w)
{
	h->v = malloc(THEAP_INITIAL * sizeof(*h->v));
	if (!h->v)
		return -ENOMEM;
	h->n = 0;
	h->cap = THEAP_INITIAL;
	h->sleep_until = INT64_MAX;
	h->w = w;
	pthread_mutex_init(&h->mu, NULL);
	return 0;
}

void vio__theap_fini(struct vio_theap *h)
{
	/* Timers still armed hold task references: release them. */
	for (uint32_t i = 0; i < h->n; i++) {
		atomic_store_explicit(&h->v[i]->home, NULL, memory_order_relaxed);
		vrt_task_unref(h->v[i]->task);
	}
	free(h->v);
	h->v = NULL;
	h->n = 0;
	pthread_mutex_destroy(&h->mu);
}

static void heap_set(struct vio_theap *h, uint32_t i, struct vio_timer *t)
{
	h->v[i] = t;
	t->idx = i;
}

static void sift_up(struct vio_theap *h, uint32_t i)
{
	struct vio_timer *t = h->v[i];

	while (i > 0) {
		uint32_t p = (i - 1) / 2;
		if (h->v[p]->deadline <= t->deadline)
			break;
		heap_set(h, i, h->v[p]);
		i = p;
	}
	heap_set(h, i, t);
}

static void sift_down(struct vio_theap *h, uint32_t i)
{
	struct vio_timer *t = h->v[i];

	for (;;) {
		uint32_t l = 2 * i + 1, m = i;
		int64_t best = t->deadline;

		if (l < h->n && h->v[l]->deadline < best) {
			m = l;
			best = h->v[l]->deadline;
		}
		if (l + 1 < h->n && h->v[l + 1]->deadline < best)
			m = l + 1;
		if (m == i)
			break;
		heap_set(h, i, h->v[m]);
		i = m;
	}
	heap_set(h, i, t);
}

static void heap_remove(struct vio_theap *h, struct vio_timer *t)
{
	uint32_t i = t->idx;
	struct vio_timer *last = h->v[--h->n];

	if (i == h->n)
		return;
	heap_set(h, i, last);
	if (i > 0 && h->v[(i - 1) / 2]->deadline > last->deadline)
		sift_up(h, i);
	else
		sift_down(h, i);
}

int64_t vio__theap_next(struct vio_theap *h, bool parking, int64_t limit)
{
	int64_t next;

	pthread_mutex_lock(&h->mu);
	next = h->n ? h->v[0]->deadline : INT64_MAX;
	h->sleep_until = parking ? (next < limit ? next : limit) : INT64_MAX;
	pthread_mutex_unlock(&h->mu);
	return next;
}

unsigned vio__theap_run(struct vio_theap *h, int64_t now)
{
	struct vrt_task *due[64];
	unsigned n, total = 0;

	do {
		n = 0;
		pthread_mutex_lock(&h->mu);
		while (h->n && h->v[0]->deadline <= now && n < VB_ARRAY_SIZE(due)) {
			struct vio_timer *t = h->v[0];

			heap_remove(h, t);
			due[n++] = t->task; /* the armed timer's reference moves here */
			/* [IT1] release: pairs with [IT2] in vio_timer_expired. */
			atomic_store_explicit(&t->fired, 1, memory_order_release);
			/* [IT3] release: our last touch of t; pairs with [IT4]. */
			atomic_store_explicit(&t->home, NULL, memory_order_release);
		}
		pthread_mutex_unlock(&h->mu);
		/* Wake outside the lock (wake may run runtime code). */
		for (unsigned i = 0; i < n; i++) {
			vrt_task_wake(due[i]);
			vrt_task_unref(due[i]);
		}
		total += n;
	} while (n == VB_ARRAY_SIZE(due));
	if (total)
		VIO_STAT_ADD(h->w, timers_fired, total);
	return total;
}

void vio_timer_init(struct vio_timer *t)
{
	t->deadline = 0;
	atomic_init(&t->home, NULL);
	t->idx = 0;
	atomic_init(&t->fired, 0);
	t->task = NULL;
}

int vio_timer_arm(struct vio_timer *t, int64_t deadline_ns)
{
	struct vio_worker *self = vio__self();
	struct vrt_task *task = vrt_current();
	struct vio_theap *h;
	bool kick;

	if (!self || !task)
		return -EPERM;
	for (;;) {
		/* [IT4] acquire: a NULL here means the firing worker is done with
		 * t ([IT3]), so the unlocked insert below does not race it. */
		h = atomic_load_explicit(&t->home, memory_order_acquire);
		if (!h)
			break;
		pthread_mutex_lock(&h->mu);
		if (atomic_load_explicit(&t->home, memory_order_relaxed) != h) {
			pthread_mutex_unlock(&h->mu); /* fired meanwhile */
			continue;
		}
		/* Armed in h: move it there. The reference stays. */
		VB_BUG_ON(t->task != task); /* one task per timer */
		t->deadline = deadline_ns;
		atomic_store_explicit(&t->fired, 0, memory_order_relaxed); /* task-written only while armed */
		if (t->idx > 0 && h->v[(t->idx - 1) / 2]->deadline > deadline_ns)
			sift_up(h, t->idx);
		else
			sift_down(h, t->idx);
		kick = deadline_ns < h->sleep_until;
		pthread_mutex_unlock(&h->mu);
		if (kick && h->w != self)
			vio__notify(h->w); /* it sleeps past the new deadline */
		return 0;
	}
	/* Not armed: only this task arms it, so nobody races the insert. */
	h = &self->heap;
	pthread_mutex_lock(&h->mu);
	if (h->n == h->cap) {
		uint32_t cap = h->cap * 2;
		struct vio_timer **v = realloc(h->v, cap * sizeof(*v));
		if (!v) {
			pthread_mutex_unlock(&h->mu);
			return -ENOMEM;
		}
		h->v = v;
		h->cap = cap;
	}
	vrt_task_ref(task);
	t->task = task;
	t->deadline = deadline_ns;
	atomic_store_explicit(&t->fired, 0, memory_order_relaxed); /* not armed: no reader but us */
	heap_set(h, h->n++, t);
	sift_up(h, t->idx);
	atomic_store_explicit(&t->home, h, memory_order_relaxed); /* under h->mu; see the block */
	pthread_mutex_unlock(&h->mu);
	return 0;
}

void vio_timer_disarm(struct vio_timer *t)
{
	struct vio_theap *h;

	for (;;) {
		/* [IT4] acquire: pairs with [IT3]; see vio_timer_arm. */
		h = atomic_load_explicit(&t->home, memory_order_acquire);
		if (!h)
			break;
		pthread_mutex_lock(&h->mu);
		if (atomic_load_explicit(&t->home, memory_order_relaxed) == h) {
			heap_remove(h, t);
			atomic_store_explicit(&t->home, NULL, memory_order_relaxed);
			t->deadline = 0;
			pthread_mutex_unlock(&h->mu);
			/* Not the last reference: the caller is that task. */
			vrt_task_unref(t->task);
			break;
		}
		pthread_mutex_unlock(&h->mu);
	}
	/* Out of every heap now: only this task reads or writes these. */
	t->deadline = 0;
	atomic_store_explicit(&t->fired, 0, memory_order_relaxed);
}

bool vio_timer_expired(const struct vio_timer *t)
{
	if (t->deadline == 0)
		return false;
	/* [IT2] acquire: pairs with [IT1]. */
	return atomic_load_explicit(&t->fired, memory_order_acquire) || vb_now_ns() >= t->deadline;
}

enum vrt_poll vio_sleep_until(struct vio_timer *t, int64_t deadline_ns)
{
	if (!vrt_budget_consume())
		return VRT_YIELD;
	if (vb_now_ns() >= deadline_ns) {
		vio_timer_disarm(t);
		return VRT_READY;
	}
	/* [IT4] acquire: pairs with [IT3]; the deadline read below then does
	 * not race a firing worker. */
	if (atomic_load_explicit(&t->home, memory_order_acquire) && t->deadline == deadline_ns)
		return VRT_PENDING; /* armed for it already */
	if (vio_timer_arm(t, deadline_ns) < 0)
		return VRT_YIELD; /* no memory for the heap: try again, never early */
	return VRT_PENDING;
}
