/* SPDX-License-Identifier: MIT */
/*
 * rt/task.c: the task state word (lifecycle, flags, reference count), wake,
 * cancel, join, completion and the one-shot value. Every function here may
 * run on any thread unless it says otherwise; all are lock-free except the
 * registry removal at completion (a per-shard mutex, rt.c).
 *
 * Ordering:
 *   state        RMW by wakers (any thread), the polling worker, joiners,
 *                ref/unref (any thread)
 *   join_waiter  written by the joiner before [T4], taken by whoever wins
 *                the exchange (completer or the joiner itself)
 *   join_futex   0 -> 2 by a waiting thread, -> 1 by the completer
 *   oneshot      state by sender and receiver; value by the sender before
 *                [O1]; waiter by the receiver before [O3]
 *   [T1] wake's CAS is acq_rel: the waker's earlier writes (a channel slot, a
 *        flag) reach the poll that follows (pairs with [T2]); it also
 *        acquires the last poll's [T3] before re-queueing the task.
 *   [T2] the worker's CAS to RUNNING is acquire (worker.c); pairs with [T1],
 *        [T3] and with the queue's publication of the task.
 *   [T3] the worker's CAS after poll (to IDLE / SCHEDULED / COMPLETE) is
 *        release: the poll's writes reach the next poll, the next waker and
 *        the joiners; acquire too, so it sees a NOTIFIED set by [T1].
 *   [T4] joiner: fetch_or(JOIN) acq_rel after storing join_waiter; the
 *        completer's [T3] RMW is ordered with it in the state's modification
 *        order: either the joiner sees COMPLETE, or the completer sees JOIN
 *        (and, by release/acquire, the stored waiter).
 *   [T5] unref: fetch_sub acq_rel; the last one's acquire sees every other
 *        holder's release, so their writes happen before the free.
 *   [T6] join_futex exchange release by the completer; pairs with the
 *        waiting thread's acquire load.
 *   [O1] oneshot send: exchange(FULL) acq_rel publishes value; pairs with
 *        [O2]; acquire so the sender sees the waiter stored before [O3].
 *   [O2] receiver's acquire load of state; pairs with [O1].
 *   [O3] receiver's CAS EMPTY->WAITING release publishes waiter; pairs with
 *        [O1]'s acquire.
 *   [T7] cancel's fetch_or release; is_cancelled's acquire load pairs with it.
 */
#include "rt/internal.h"

#include <errno.h>
#include <limits.h>

#define OS_EMPTY   0u
#define OS_WAITING 1u
#define OS_FULL    2u
#define OS_THREAD  3u

#define REG_NONE UINT16_MAX

void vrt_task_init(struct vrt_task *t, const struct vrt_task_vtable *vt)
{
	atomic_init(&t->state, VRT_ST_NEW | VRT_ST_REF_ONE);
	t->sched_ns = 0;
	t->next = NULL;
	t->vt = vt;
	t->rt = NULL;
	atomic_init(&t->join_waiter, NULL);
	atomic_init(&t->join_futex, 0);
	t->reg_shard = REG_NONE;
	t->slices = 0;
	t->reg_prev = t->reg_next = NULL;
}

void vrt_task_ref(struct vrt_task *t)
{
	/* relaxed: the caller already holds a reference, so the task cannot
	 * be freed concurrently; nothing is published by taking a ref. */
	uint64_t old = atomic_fetch_add_explicit(&t->state, VRT_ST_REF_ONE, memory_order_relaxed);
	VB_BUG_ON(vrt__st_refs(old) == 0);
}

void vrt_task_unref(struct vrt_task *t)
{
	/* (An acquire RMW instead of a release RMW + acquire fence: the same
	 * cost on x86-64, and ThreadSanitizer understands it.)
	 * [T5] acq_rel: release publishes our writes to whoever drops the
	 * task; acquire (used by the last one) sees every other holder's. */
	uint64_t old = atomic_fetch_sub_explicit(&t->state, VRT_ST_REF_ONE, memory_order_acq_rel);

	VB_BUG_ON(vrt__st_refs(old) == 0);
	if (vrt__st_refs(old) != 1)
		return;
	if (t->vt->drop)
		t->vt->drop(t);
}

void vrt__task_release(struct vrt_task *t)
{
	vrt_task_unref(t);
}

void vrt_task_wake(struct vrt_task *t)
{
	/* relaxed: only a starting guess for the CAS below, which orders. */
	uint64_t s = atomic_load_explicit(&t->state, memory_order_relaxed);

	for (;;) {
		uint64_t life = s & VRT_ST_LIFE, ns;

		if (life == VRT_ST_COMPLETE || (s & VRT_ST_NEW))
			return; /* done, or spawn will poll it anyway */
		if (life == VRT_ST_IDLE)
			ns = (s & ~VRT_ST_LIFE) | VRT_ST_SCHEDULED;
		else if (life == VRT_ST_RUNNING)
			ns = s | VRT_ST_NOTIFIED;
		else
			ns = s; /* scheduled: the coming poll sees our writes via [T1] */
		/* [T1] acq_rel: release publishes the waker's writes (pairs
		 * with [T2]); acquire pairs with [T3] so that the last poll's
		 * use of the task's links happens before we queue it again. */
		if (atomic_compare_exchange_weak_explicit(&t->state, &s, ns,
				memory_order_acq_rel, memory_order_relaxed)) { /* failure relaxed: retried */
			if (life == VRT_ST_IDLE)
				vrt__schedule(t, false);
			return;
		}
	}
}

void vrt_task_cancel(struct vrt_task *t)
{
	/* release: the canceller's writes before the flag reach the poll that
	 * sees it (the poll's acquire [T2] reads this RMW or a later one). */
	atomic_fetch_or_explicit(&t->state, VRT_ST_CANCELLED, memory_order_release);
	vrt_task_wake(t);
}

bool vrt_task_is_cancelled(const struct vrt_task *t)
{
	/* [T7] acquire: pairs with the release in vrt_task_cancel. */
	return atomic_load_explicit(&((struct vrt_task *)t)->state, memory_order_acquire)
		& VRT_ST_CANCELLED;
}

bool vrt_task_is_complete(const struct vrt_task *t)
{
	/* acquire: pairs with [T3] of the completing poll, so the task's
	 * results are visible to whoever sees it complete. */
	return (atomic_load_explicit(&((struct vrt_task *)t)->state, memory_order_acquire)
		& VRT_ST_LIFE) == VRT_ST_COMPLETE;
}

bool vrt_task_join_poll(struct vrt_task *target)
{
	struct vrt_task *cur = vrt__tls_task, *w;
	uint64_t s;

	VB_BUG_ON(cur == NULL);
	/* acquire: pairs with [T3] of the completer (see is_complete). */
	s = atomic_load_explicit(&target->state, memory_order_acquire);
	if ((s & VRT_ST_LIFE) == VRT_ST_COMPLETE)
		return true;
	/* relaxed: join_waiter is ours to write until [T4] publishes it; a
	 * stale value only means a registration from our earlier poll. */
	w = atomic_load_explicit(&target->join_waiter, memory_order_relaxed);
	if (w != cur) {
		VB_BUG_ON(w != NULL); /* one joiner per target */
		vrt_task_ref(cur);
		/* relaxed: published by [T4] below. */
		atomic_store_explicit(&target->join_waiter, cur, memory_order_relaxed);
	}
	/* [T4] acq_rel: publishes join_waiter to the completer, or sees COMPLETE. */
	s = atomic_fetch_or_explicit(&target->state, VRT_ST_JOIN, memory_order_acq_rel);
	if ((s & VRT_ST_LIFE) != VRT_ST_COMPLETE)
		return false;
	/* Completed before our flag: the completer did not look; take the
	 * registration back ([T4] acquire side: orders it after the flag). */
	w = atomic_exchange_explicit(&target->join_waiter, NULL, memory_order_acquire);
	if (w)
		vrt_task_unref(w);
	return true;
}

/* Bounded spin of a thread joiner before it sleeps: a task being waited for
 * often completes within a few microseconds, and a futex sleep and wake-up
 * costs both sides more than that. */
#define VRT_JOIN_SPIN 256

void vrt_task_join_wait(struct vrt_task *target)
{
	/* [T4] acq_rel: as join_poll; a thread joiner has no waiter pointer. */
	uint64_t s = atomic_fetch_or_explicit(&target->state, VRT_ST_JOIN, memory_order_acq_rel);

	if ((s & VRT_ST_LIFE) == VRT_ST_COMPLETE)
		return;
	for (unsigned i = 0; i < VRT_JOIN_SPIN; i++) {
		/* [T6] acquire: pairs with the completer's release exchange. */
		if (atomic_load_explicit(&target->join_futex, memory_order_acquire) == 1)
			return;
		vb_cpu_relax();
	}
	for (;;) {
		/* [T6] acquire: pairs with the completer's release exchange. */
		uint32_t v = atomic_load_explicit(&target->join_futex, memory_order_acquire);
		if (v == 1)
			return;
		if (v == 0) {
			/* relaxed: the futex syscall re-checks the word; [T6] orders. */
			if (!atomic_compare_exchange_strong_explicit(&target->join_futex, &v, 2,
					memory_order_relaxed, memory_order_relaxed))
				continue;
		}
		vb_futex_wait(&target->join_futex, 2, -1);
	}
}

static void fire_joiners(struct vrt_task *t)
{
	/* acquire: pairs with [T4] (the joiner stored the pointer before). */
	struct vrt_task *w = atomic_exchange_explicit(&t->join_waiter, NULL, memory_order_acquire);

	if (w) {
		vrt_task_wake(w);
		vrt_task_unref(w);
	}
	/* [T6] release: the task's results reach the thread joiner. */
	if (atomic_exchange_explicit(&t->join_futex, 1, memory_order_release) == 2)
		vb_futex_wake(&t->join_futex, INT_MAX);
}

/* Lifecycle -> COMPLETE; returns the previous state. */
static uint64_t mark_complete(struct vrt_task *t, uint64_t extra)
{
	/* relaxed: starting guess for the CAS. */
	uint64_t s = atomic_load_explicit(&t->state, memory_order_relaxed);

	for (;;) {
		uint64_t ns = (s & ~(VRT_ST_LIFE | VRT_ST_NOTIFIED)) | VRT_ST_COMPLETE | extra;
		/* [T3] acq_rel: publishes the task's last poll to joiners and
		 * sees a JOIN flag set by [T4]. */
		if (atomic_compare_exchange_weak_explicit(&t->state, &s, ns,
				memory_order_acq_rel, memory_order_relaxed)) /* failure relaxed: retried */
			return s;
	}
}

void vrt__task_complete(struct vrt_worker *w, struct vrt_task *t)
{
	/* relaxed: starting guess for the CAS. */
	uint64_t s = atomic_load_explicit(&t->state, memory_order_relaxed), old;

	/* relaxed load+store: single writer (this worker). */
	atomic_store_explicit(&w->c.completed,
		atomic_load_explicit(&w->c.completed, memory_order_relaxed) + 1,
		memory_order_relaxed);
	if (t->reg_shard != REG_NONE)
		vrt__registry_remove(t->rt, t);
	/* Fast path, nobody joins: COMPLETE and the release of the runtime's
	 * reference in one CAS (after it another holder may free the task). */
	while (!(s & VRT_ST_JOIN)) {
		uint64_t ns = ((s & ~(VRT_ST_LIFE | VRT_ST_NOTIFIED)) | VRT_ST_COMPLETE) - VRT_ST_REF_ONE;
		/* [T3]+[T5] acq_rel: publishes the last poll (to whoever sees
		 * COMPLETE or drops the task); acquire as the last unref. */
		if (atomic_compare_exchange_weak_explicit(&t->state, &s, ns,
				memory_order_acq_rel, memory_order_relaxed)) { /* failure relaxed: retried */
			if (vrt__st_refs(s) == 1 && t->vt->drop)
				t->vt->drop(t);
			return;
		}
	}
	old = mark_complete(t, 0);
	if (old & VRT_ST_JOIN)
		fire_joiners(t);
	vrt__task_release(t); /* the runtime's reference */
}

void vrt__task_force_complete(struct vrt *rt, struct vrt_task *t)
{
	uint64_t old = mark_complete(t, VRT_ST_CANCELLED);

	VB_BUG_ON((old & VRT_ST_LIFE) == VRT_ST_COMPLETE);
	if (old & VRT_ST_JOIN)
		fire_joiners(t);
	/* relaxed: statistics only. */
	atomic_fetch_add_explicit(&rt->force_completed, 1, memory_order_relaxed);
	vrt__task_release(t);
}

/* ---------------------------------------------------------------- oneshot */

void vrt_oneshot_init(struct vrt_oneshot *o)
{
	atomic_init(&o->state, OS_EMPTY);
	o->value = 0;
	atomic_init(&o->waiter, NULL);
}

void vrt_oneshot_send(struct vrt_oneshot *o, uint64_t value)
{
	uint32_t old;

	o->value = value;
	/* [O1] acq_rel: publishes value (pairs with [O2]); sees the waiter
	 * stored before [O3]. */
	old = atomic_exchange_explicit(&o->state, OS_FULL, memory_order_acq_rel);
	VB_BUG_ON(old == OS_FULL);
	if (old == OS_WAITING) {
		/* relaxed: ordered by [O1]/[O3]; only we touch it from now on. */
		struct vrt_task *w = atomic_load_explicit(&o->waiter, memory_order_relaxed);
		atomic_store_explicit(&o->waiter, NULL, memory_order_relaxed);
		vrt_task_wake(w);
		vrt_task_unref(w);
	} else if (old == OS_THREAD) {
		vb_futex_wake(&o->state, INT_MAX);
	}
}

bool vrt_oneshot_poll(struct vrt_oneshot *o, uint64_t *value)
{
	struct vrt_task *cur = vrt__tls_task;
	/* [O2] acquire: pairs with [O1]. */
	uint32_t s = atomic_load_explicit(&o->state, memory_order_acquire);
	uint32_t expect = OS_EMPTY;

	if (s == OS_FULL) {
		*value = o->value;
		return true;
	}
	if (s == OS_WAITING)
		return false; /* registered by an earlier poll of ours */
	VB_BUG_ON(cur == NULL || s != OS_EMPTY);
	vrt_task_ref(cur);
	/* relaxed: published by [O3]. */
	atomic_store_explicit(&o->waiter, cur, memory_order_relaxed);
	/* [O3] release: publishes waiter; acquire on failure pairs with [O1]. */
	if (atomic_compare_exchange_strong_explicit(&o->state, &expect, OS_WAITING,
			memory_order_release, memory_order_acquire))
		return false;
	/* The value arrived first: take our registration back (relaxed: the
	 * sender saw EMPTY and never reads the waiter). */
	atomic_store_explicit(&o->waiter, NULL, memory_order_relaxed);
	vrt_task_unref(cur);
	*value = o->value;
	return true;
}

bool vrt_oneshot_unregister(struct vrt_oneshot *o)
{
	uint32_t expect = OS_WAITING;

	/* [O2] acquire: on failure (FULL) the value is visible; on success
	 * the sender never saw WAITING and never touches the waiter. */
	if (!atomic_compare_exchange_strong_explicit(&o->state, &expect, OS_EMPTY,
			memory_order_acquire, memory_order_acquire))
		return expect == OS_FULL;
	/* relaxed: only we touch the waiter now (see above). */
	struct vrt_task *w = atomic_load_explicit(&o->waiter, memory_order_relaxed);
	atomic_store_explicit(&o->waiter, NULL, memory_order_relaxed);
	vrt_task_unref(w);
	return false;
}

uint64_t vrt_oneshot_wait(struct vrt_oneshot *o)
{
	for (;;) {
		/* [O2] acquire: pairs with [O1]. */
		uint32_t s = atomic_load_explicit(&o->state, memory_order_acquire);
		if (s == OS_FULL)
			return o->value;
		if (s == OS_EMPTY) {
			/* relaxed: the futex syscall re-checks; [O2] orders the value. */
			if (!atomic_compare_exchange_strong_explicit(&o->state, &s, OS_THREAD,
					memory_order_relaxed, memory_order_relaxed))
				continue;
		}
		VB_BUG_ON(s == OS_WAITING);
		vb_futex_wait(&o->state, OS_THREAD, -1);
	}
}
