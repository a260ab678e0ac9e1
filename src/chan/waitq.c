/* SPDX-License-Identifier: MIT */
/*
 * chan/waitq.c: the waiter queues of a channel (one per side) and the
 * delivery of a wakeup to a task or a sleeping thread.
 *
 * Threading: register / remove run on the waiter's own thread; notify_one /
 * notify_all on any thread (a waker of the other side, or close). One waiter
 * waits lock-free in the fast slot; a second one moves both to a list under
 * a mutex that guards nothing but that list (adaptive: a contender spins
 * briefly before it sleeps, as the lock is held for a few pointer writes).
 * Waiters join the list at the tail; a wake takes the tail of a LIFO queue
 * (receivers: the most recently parked task is the warm one) and the head
 * of a FIFO queue (senders). Wakeups (vrt_task_wake, futex wake) are always
 * issued after the lock is released.
 *
 * Ordering:
 *   q->has_waiters: written by registering waiters (CAS 0 -> w, and under the
 *     lock w -> LIST), by wakers claiming the fast waiter (CAS w -> 0), by a
 *     waiter withdrawing from the fast slot (CAS w -> 0), and under the lock
 *     when the list empties (LIST -> 0) or on close (exchange -> 0). Every one
 *     of these, and every read of it, is seq_cst, so has_waiters has one place
 *     in the single total order S of seq_cst operations.
 *   w->state: owner writes IDLE/WAITING (before publishing) and SLEEPING;
 *     the one waker that claimed w writes WAKING/NOTIFIED (and w->from
 *     before it, plain: published by [CW4]).
 *   list links and w->linked: under q->lock only.
 *
 *   [CW1] register: the seq_cst RMW on has_waiters publishes the waiter (its
 *        release half makes task/state/dir visible to the claimer, [CW5]).
 *   [CW2] waker (chan.c): its ring update is a seq_cst RMW of head or tail
 *        ([CR2]/[CR5]; close: [CR7]); then it loads has_waiters seq_cst. It
 *        does so after every single successful operation, so one value (free
 *        slot) wakes one registered waiter: wakers never wait for a batch.
 *   [CW3] waiter, after [CW1]: seq_cst fence, then re-reads the ring.
 *        Dekker: this is the store-buffering pattern. Waiter: store flag;
 *        load ring. Waker: store ring; load flag. With acquire/release (or
 *        relaxed plus acquire fences) nothing forbids both loads returning the
 *        old value: neither load reads from the other thread's store, so no
 *        synchronises-with edge exists, and on x86 each store may sit in its
 *        core's store buffer past the following load. Then the waiter sleeps
 *        on a full/empty ring while the waker sees nobody to wake: a lost
 *        wakeup. seq_cst puts both RMWs/loads/fences in one order S: if the
 *        waker's load [CW2] precedes the waiter's flag store in S, the ring RMW
 *        precedes the fence [CW3] in S and the waiter's re-check sees it;
 *        otherwise [CW2] sees the flag. (A waiter that appends to an existing
 *        list writes nothing seq_cst itself, but the LIST store it observed
 *        under the lock happens-before its fence, so the same argument holds.)
 *        Whatever a blocked thread did before [CW1] (chan.c's spin phase, with
 *        relaxed looks at the ring) plays no part: only the re-check after
 *        [CW3] decides whether it sleeps.
 *   [CW4] deliver: the waker copies w->task first, writes w->from (the set
 *        member the wakeup is for, set.c), then stores NOTIFIED with
 *        release; after that store it never touches w again. Pairs with the
 *        owner's acquire load [CW6]: from then on the owner may free w, and
 *        it reads w->from.
 *   [CW5] claim: a waker's successful CAS w -> 0 (seq_cst, so acquire) reads
 *        from [CW1] and sees the waiter's fields; list claims see them through
 *        the lock.
 *   [CW6] owner: acquire load of w->state == NOTIFIED, pairs with [CW4].
 */
#include "chan/internal.h"
#include "base/futex.h"
#include "base/time.h"
#include "rt/rt.h"

#include <errno.h>
#include <sched.h>
#include <stdalign.h>

/* A waiter's address never collides with the LIST marker. Reuse of a
 * waiter's address (withdraw, register again) is harmless for the CAS
 * claims below: a claim takes whatever registration occupies the slot at
 * the CAS and reads its fields only afterwards, so there is no ABA. */
static_assert(alignof(struct vch_waiter) > VCH_WQ_LIST, "waiter alignment");

void vch__backoff(unsigned *step)
{
	if (*step <= 6) {
		for (unsigned i = 0; i < (1u << *step); i++)
			vb_cpu_relax();
		++*step;
	} else {
		sched_yield();
	}
}

void vch__waitq_init(struct vch_waitq *q, int home, bool lifo)
{
	pthread_mutexattr_t a;

	atomic_init(&q->has_waiters, 0);
	q->home = home;
	q->lifo = lifo;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
	pthread_mutex_init(&q->lock, &a);
	pthread_mutexattr_destroy(&a);
	q->head = q->tail = NULL;
}

void vch__waitq_fini(struct vch_waitq *q)
{
	/* Relaxed: vch_free's caller guarantees nobody else uses the channel. */
	VB_BUG_ON(atomic_load_explicit(&q->has_waiters, memory_order_relaxed) != 0);
	pthread_mutex_destroy(&q->lock);
}

/* Under q->lock. */
static void list_append(struct vch_waitq *q, struct vch_waiter *w)
{
	w->next = NULL;
	w->prev = q->tail;
	if (q->tail)
		q->tail->next = w;
	else
		q->head = w;
	q->tail = w;
	w->linked = 1;
}

/* Under q->lock. */
static void list_unlink(struct vch_waitq *q, struct vch_waiter *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		q->head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		q->tail = w->prev;
	w->next = w->prev = NULL;
	w->linked = 0;
}

/* Under q->lock, after the list lost an element. */
static void list_emptied_check(struct vch_waitq *q)
{
	if (!q->head) {
		VCH_LINE_WRITE(q->home, chan_waiters);
		/* [CW1] seq_cst: every write of has_waiters is in S (see above). */
		atomic_store_explicit(&q->has_waiters, 0, memory_order_seq_cst);
	}
}

void vch__waitq_register(struct vch_waitq *q, struct vch_waiter *w)
{
	uintptr_t cur = 0;

	w->linked = 0;
	VCH_LINE_WRITE(q->home, chan_waiters);
	/* [CW1] seq_cst: publishes w into the fast slot; pairs with [CW5]/[CW2]. */
	if (atomic_compare_exchange_strong_explicit(&q->has_waiters, &cur, (uintptr_t)w,
			memory_order_seq_cst, memory_order_seq_cst))
		return;

	pthread_mutex_lock(&q->lock);
	VCH_LINE_WRITE(q->home, chan_waitq_lock);
	for (;;) {
		/* [CW1] seq_cst read (all has_waiters accesses are; see above). */
		cur = atomic_load_explicit(&q->has_waiters, memory_order_seq_cst);
		if (cur == VCH_WQ_LIST) {
			/* Stable while we hold the lock: only lock holders leave LIST. */
			list_append(q, w);
			break;
		}
		VCH_LINE_WRITE(q->home, chan_waiters);
		if (cur == 0) {
			/* [CW1] seq_cst publish, as above. */
			if (atomic_compare_exchange_strong_explicit(&q->has_waiters, &cur,
					(uintptr_t)w, memory_order_seq_cst, memory_order_seq_cst))
				break;
			continue;
		}
		/* One waiter sits in the fast slot: move it and w to the list.
		 * [CW1]/[CW5] seq_cst: reads the fast waiter's [CW1] (acquire) and
		 * publishes LIST. Fails if a waker or the waiter took it back. */
		if (atomic_compare_exchange_strong_explicit(&q->has_waiters, &cur, VCH_WQ_LIST,
				memory_order_seq_cst, memory_order_seq_cst)) {
			list_append(q, (struct vch_waiter *)cur);
			list_append(q, w);
			break;
		}
	}
	pthread_mutex_unlock(&q->lock);
}

/* Owner: wait until the waker that claimed w is done with it. */
static void wait_notified(struct vch_waiter *w)
{
	unsigned step = 0;

	/* [CW6] acquire: pairs with [CW4]; afterwards w is ours again. */
	while (atomic_load_explicit(&w->state, memory_order_acquire) != VCH_W_NOTIFIED)
		vch__backoff(&step);
}

bool vch__waitq_remove(struct vch_waitq *q, struct vch_waiter *w)
{
	uintptr_t me = (uintptr_t)w;
	bool removed = false;

	VCH_LINE_WRITE(q->home, chan_waiters);
	/* [CW1] seq_cst (all has_waiters writes are): take w back from the fast slot. */
	if (atomic_compare_exchange_strong_explicit(&q->has_waiters, &me, 0,
			memory_order_seq_cst, memory_order_seq_cst))
		return true;

	pthread_mutex_lock(&q->lock);
	VCH_LINE_WRITE(q->home, chan_waitq_lock);
	if (w->linked) {
		list_unlink(q, w);
		list_emptied_check(q);
		removed = true;
	}
	pthread_mutex_unlock(&q->lock);
	if (!removed)
		wait_notified(w);   /* claimed: a waker is delivering to w */
	return removed;
}

/* The claimer of w delivers the wakeup, for set member `from` (the owner
 * reads it after [CW6]). w's owner may free w as soon as NOTIFIED is
 * visible, so everything needed is copied first. */
static void deliver(struct vch_waitq *q, struct vch_waiter *w, unsigned from)
{
	struct vrt_task *t = w->task;
	uint32_t s = VCH_W_WAITING;

	VCH_LINE_WRITE(q->home, chan_wake);
	w->from = (uint16_t)from;
	if (t) {
		/* [CW4] release: last touch of w; pairs with [CW6]. The reference
		 * taken at registration keeps t alive for wake + unref. */
		atomic_store_explicit(&w->state, VCH_W_NOTIFIED, memory_order_release);
		vrt_task_wake(t);
		vrt_task_unref(t);
		return;
	}
	/* A thread that is not asleep yet sees NOTIFIED before it sleeps.
	 * [CW4] release on success; relaxed on failure (we only learn SLEEPING). */
	if (atomic_compare_exchange_strong_explicit(&w->state, &s, VCH_W_NOTIFIED,
			memory_order_release, memory_order_relaxed))
		return;
	/* Asleep (or about to be): WAKING keeps the thread from returning
	 * before our futex_wake is done with the word's address. Relaxed: the
	 * thread only acts on NOTIFIED, published below. */
	atomic_store_explicit(&w->state, VCH_W_WAKING, memory_order_relaxed);
	vb_futex_wake(&w->state, 1);
	/* [CW4] release: last touch of w; pairs with [CW6]. */
	atomic_store_explicit(&w->state, VCH_W_NOTIFIED, memory_order_release);
}

bool vch__waitq_notify_one(struct vch_waitq *q, unsigned from)
{
	/* [CW2] seq_cst: Dekker partner of [CW3] (the caller's fast check already
	 * read it once; this re-read starts the claim loop). */
	uintptr_t cur = atomic_load_explicit(&q->has_waiters, memory_order_seq_cst);
	struct vch_waiter *w = NULL;

	while (cur != 0) {
		if (cur != VCH_WQ_LIST) {
			VCH_LINE_WRITE(q->home, chan_waiters);
			/* [CW5] seq_cst (acquire): claim the fast waiter. */
			if (atomic_compare_exchange_weak_explicit(&q->has_waiters, &cur, 0,
					memory_order_seq_cst, memory_order_seq_cst)) {
				w = (struct vch_waiter *)cur;
				break;
			}
			continue;
		}
		pthread_mutex_lock(&q->lock);
		VCH_LINE_WRITE(q->home, chan_waitq_lock);
		/* [CW1] seq_cst read; LIST cannot change under the lock. */
		cur = atomic_load_explicit(&q->has_waiters, memory_order_seq_cst);
		if (cur == VCH_WQ_LIST) {
			w = q->lifo ? q->tail : q->head;
			list_unlink(q, w);
			list_emptied_check(q);
		}
		pthread_mutex_unlock(&q->lock);
		if (w)
			break;
	}
	if (!w)
		return false;
	deliver(q, w, from);
	return true;
}

void vch__waitq_notify_all(struct vch_waitq *q)
{
	struct vch_waiter *chain = NULL, *w;
	uintptr_t cur;

	pthread_mutex_lock(&q->lock);
	VCH_LINE_WRITE(q->home, chan_waitq_lock);
	VCH_LINE_WRITE(q->home, chan_waiters);
	/* [CW2]/[CW5] seq_cst: claims whatever is there (fast waiter or list). */
	cur = atomic_exchange_explicit(&q->has_waiters, 0, memory_order_seq_cst);
	if (cur == VCH_WQ_LIST) {
		chain = q->head;
		for (w = chain; w; w = w->next)
			w->linked = 0;
		q->head = q->tail = NULL;
	} else if (cur != 0) {
		chain = (struct vch_waiter *)cur;
		chain->next = NULL;
	}
	pthread_mutex_unlock(&q->lock);
	/* The claimed waiters' owners cannot touch them until NOTIFIED, so the
	 * links stay valid; read next before deliver hands each one back. */
	while (chain) {
		w = chain;
		chain = w->next;
		deliver(q, w, q->home < 0 ? 0 : (unsigned)q->home);
	}
}

int vch__waiter_sleep(struct vch_waiter *w, int64_t deadline_ns)
{
	unsigned step = 0;

	for (;;) {
		/* [CW6] acquire: pairs with [CW4]. */
		uint32_t s = atomic_load_explicit(&w->state, memory_order_acquire);

		if (s == VCH_W_NOTIFIED)
			return 0;
		if (s == VCH_W_WAKING) {
			vch__backoff(&step);
			continue;
		}
		if (s == VCH_W_WAITING) {
			/* Relaxed: announces the sleeper to deliver(); the futex
			 * syscall re-reads the word under the kernel's lock, and
			 * NOTIFIED is only ever consumed through [CW6]. */
			if (!atomic_compare_exchange_strong_explicit(&w->state, &s, VCH_W_SLEEPING,
					memory_order_relaxed, memory_order_relaxed))
				continue;
		}
		int64_t left = -1;
		if (deadline_ns >= 0) {
			left = deadline_ns - vb_now_ns();
			if (left <= 0)
				return -ETIMEDOUT;
		}
		vb_futex_wait(&w->state, VCH_W_SLEEPING, left);
	}
}
