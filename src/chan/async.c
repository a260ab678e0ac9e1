/* SPDX-License-Identifier: MIT */
/*
 * chan/async.c: send / receive for tasks. A task that finds the channel full
 * (send) or empty (recv) registers its waiter, which lives in the task's own
 * memory, and returns PENDING; the next operation of the other side (or
 * close) claims the waiter and wakes the task, which then calls again.
 *
 * Threading: each waiter is driven by its owning task's poll (never two at
 * once, per the runtime's contract); wakers of the other side touch it only
 * between claiming it and marking it NOTIFIED (waitq.c).
 *
 * Ordering (labels of waitq.c and chan.c):
 *   w->state: the owner moves IDLE -> WAITING before [CW1] publishes w, and
 *   NOTIFIED -> IDLE after reading NOTIFIED with acquire [CW6] (pairs with the
 *   waker's release [CW4]); the waker writes NOTIFIED.
 *   [CW3] seq_cst fence between registering and re-checking the ring.
 *   The task reference a registered waiter holds is released by whoever takes
 *   the waiter off its queue: the waker (after the wake) or the owner.
 */
#include "chan/internal.h"

/* A task that registers found the channel empty (full) and waits: both
 * statistics in one counter (task_waits, added to both by vch_stats_get),
 * so an idle executor going back to wait writes the statistics line once. */
static void side_count(struct vch *ch, unsigned dir, bool task_waits)
{
	struct vch_side_stats *st = dir == VCH_DIR_SEND ? &ch->send_stats : &ch->recv_stats;

	VCH_LINE_WRITE(ch->home, chan_stats);
	/* Relaxed: statistics. */
	atomic_fetch_add_explicit(task_waits ? &st->task_waits : &st->blocked_events, 1,
				  memory_order_relaxed);
}

static inline enum vch_status attempt(struct vch *ch, unsigned dir, uint64_t *v)
{
	return dir == VCH_DIR_SEND ? vch__send_attempt(ch, *v) : vch__recv_attempt(ch, v);
}

void vch__count_task_wait(struct vch *ch, unsigned dir)
{
	side_count(ch, dir, true);
}

void vch__pass_on(struct vch_waiter *w)
{
	struct vch *ch = w->ch;

	if (w->dir == VCH_DIR_RECV && ch->set) {
		/* For the member whose value it announced: its own queue's
		 * newest waiter, else (set.c) another member's. */
		vch__wake_recv(vch_set_member(ch->set, w->from));
		return;
	}
	vch__waitq_notify_one(vch__queue_of(ch, w->dir), ch->home < 0 ? 0 : (unsigned)ch->home);
}

/* Take w off its queue after the operation finished while w was still
 * registered. If a waker had claimed w in the meantime, the wakeup it
 * carried is handed to the next waiter, so it is not lost. */
void vch__withdraw(struct vch_waiter *w)
{
	struct vch_waitq *q = vch__queue_of(w->ch, w->dir);

	if (vch__waitq_remove(q, w)) {
		vrt_task_unref(w->task);   /* the queue's reference */
	} else {
		vch__pass_on(w);           /* the waker dropped the reference */
	}
	w->task = NULL;
	/* Relaxed: the owner's own field from now on (no waker holds w). */
	atomic_store_explicit(&w->state, VCH_W_IDLE, memory_order_relaxed);
}

static enum vch_status op_poll(struct vch *ch, unsigned dir, struct vch_waiter *w, uint64_t *v)
{
	const enum vch_status busy = dir == VCH_DIR_SEND ? VCH_FULL : VCH_EMPTY;
	enum vch_status r;
	uint32_t s;
	struct vrt_task *t;

	if (!vrt_budget_consume())
		return VCH_YIELD;

	/* [CW6] acquire: pairs with [CW4] when a waker notified us. */
	s = atomic_load_explicit(&w->state, memory_order_acquire);
	if (s == VCH_W_NOTIFIED) {
		/* Woken: this attempt uses the wakeup. Relaxed: owner-only now. */
		atomic_store_explicit(&w->state, VCH_W_IDLE, memory_order_relaxed);
		w->task = NULL;
		s = VCH_W_IDLE;
	}

	r = attempt(ch, dir, v);
	if (s == VCH_W_WAITING) {
		/* Polled while still registered (woken by something else). */
		VB_BUG_ON(w->ch != ch || w->dir != dir);
		if (r == busy)
			return VCH_PENDING;
		vch__withdraw(w);
		return r;
	}
	if (r != busy)
		return r;

	t = vrt_current();
	if (!t) {
		side_count(ch, dir, false);
		return busy;   /* not in a task: behave like try_ */
	}

	vrt_task_ref(t);   /* owned by the queue while w is registered */
	w->task = t;
	w->ch = ch;
	w->dir = (uint8_t)dir;
	/* Relaxed: published by the seq_cst register [CW1]. */
	atomic_store_explicit(&w->state, VCH_W_WAITING, memory_order_relaxed);
	vch__waitq_register(vch__queue_of(ch, dir), w);
	side_count(ch, dir, true);   /* an empty (full) event and a wait: one write */
	/* [CW3] seq_cst fence: the re-check sees every ring RMW whose waker may
	 * have missed the registration; see waitq.c. */
	atomic_thread_fence(memory_order_seq_cst);
	r = attempt(ch, dir, v);
	if (r == busy)
		return VCH_PENDING;
	vch__withdraw(w);
	return r;
}

enum vch_status vch_send_poll(struct vch *ch, struct vch_waiter *w, uint64_t value)
{
	return op_poll(ch, VCH_DIR_SEND, w, &value);
}

enum vch_status vch_recv_poll(struct vch *ch, struct vch_waiter *w, uint64_t *value)
{
	return op_poll(ch, VCH_DIR_RECV, w, value);
}

void vch_waiter_cancel(struct vch_waiter *w)
{
	/* [CW6] acquire: pairs with [CW4]. */
	uint32_t s = atomic_load_explicit(&w->state, memory_order_acquire);

	if (s == VCH_W_IDLE)
		return;
	if (s == VCH_W_WAITING) {
		vch__withdraw(w);
		return;
	}
	/* NOTIFIED: a wakeup arrived that this waiter will not use. */
	w->task = NULL;
	/* Relaxed: owner-only once NOTIFIED. */
	atomic_store_explicit(&w->state, VCH_W_IDLE, memory_order_relaxed);
	vch__pass_on(w);
}
