/* SPDX-License-Identifier: MIT */
/*
 * rt/wsq.c: the WorkStealQueue, a fixed 256-slot ring per worker.
 * Owner: push at tail, pop at head (FIFO). Other workers: steal half.
 * Lock-free; a steal can lose a race and then says RETRY, never "empty".
 *
 * Ordering:
 *   tail     written by the owner only (push, and steal_into of its own ring)
 *   head     [steal:32 | real:32], CAS by the owner (pop, overflow claim) and
 *            by stealers (claim, release)
 *   buf[i]   written by the owner of the ring while slot i is outside
 *            [steal_head, tail); read by the owner and by a stealer that has
 *            claimed it.
 *   [Q1] push: slot write, then tail store release; pairs with [Q3] (the
 *        stealer's acquire load of tail) so the stealer reads the task.
 *   [Q2] stealer's release CAS that moves steal_head forward (phase 3), after
 *        it copied the slots; pairs with the owner's acquire load of head in
 *        push [Q4], so the owner overwrites a slot only after the copy read it.
 *   [Q3] stealer: acquire load of the victim's tail (pairs with [Q1]).
 *   [Q4] owner push: acquire load of head (pairs with [Q2]).
 *   [Q5] claim CAS (stealer phase 1, owner pop, owner overflow) is acq_rel:
 *        CASes on head form one modification order, so claims never overlap;
 *        acquire also orders the following slot reads after the claim.
 *   [Q6] steal_into publishes the copied slots of the stealer's own ring
 *        with a release store of its tail (same role as [Q1]).
 */
#include "rt/internal.h"
#include "base/lineaudit.h"

void vrt__wsq_init(struct vrt_wsq *q, uint32_t start)
{
	atomic_init(&q->head, vrt__wsq_pack(start, start));
	atomic_init(&q->tail, start);
	atomic_init(&q->stolen_from, 0);
	for (unsigned i = 0; i < VRT_WSQ_CAP; i++)
		q->buf[i] = NULL;
}

uint32_t vrt__wsq_len(struct vrt_wsq *q)
{
	/* relaxed: a depth estimate for stats and "is there work" hints; the
	 * callers that must not miss work order it with a seq_cst fence. */
	uint64_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
	uint32_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);
	uint32_t n = t - vrt__wsq_real_of(h);

	return n > VRT_WSQ_CAP ? 0 : n; /* torn read across a wrap: say empty */
}

/* Move the 128 oldest tasks (claimed at `real`) plus t to the injection
 * queue: link them through next, one lock acquisition. */
static bool overflow_to_inject(struct vrt_wsq *q, uint32_t real, struct vrt_task *t,
			       struct vrt_inject *inj)
{
	struct vrt_task *first = q->buf[real & VRT_WSQ_MASK];
	struct vrt_task *prev = first;

	for (uint32_t i = 1; i < VRT_WSQ_HALF; i++) {
		struct vrt_task *cur = q->buf[(real + i) & VRT_WSQ_MASK];
		prev->next = cur;
		prev = cur;
	}
	prev->next = t;
	t->next = NULL;
	return vrt__inject_push_batch(inj, first, t, VRT_WSQ_HALF + 1);
}

struct vrt_wsq_push_res vrt__wsq_push(struct vrt_wsq *q, struct vrt_task *t,
				      struct vrt_inject *inj)
{
	struct vrt_wsq_push_res res = { 0, false, false };
	/* relaxed: tail is written only by this thread (the owner). */
	uint32_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);

	for (;;) {
		/* [Q4] acquire: pairs with [Q2] (a stealer's release of
		 * steal_head) so slots it copied are free to overwrite. */
		uint64_t h = atomic_load_explicit(&q->head, memory_order_acquire);
		uint32_t steal = vrt__wsq_steal_of(h), real = vrt__wsq_real_of(h);

		if (tail - steal < VRT_WSQ_CAP) {
			q->buf[tail & VRT_WSQ_MASK] = t;
			/* [Q1] release: publishes the slot; pairs with [Q3]. */
			atomic_store_explicit(&q->tail, tail + 1, memory_order_release);
			return res;
		}
		if (steal != real) {
			/* A stealer is copying: its slots are not ours to move, and
			 * it will free room; only the new task goes to the queue. */
			t->next = NULL;
			res.overflowed = 1;
			res.to_inject_only = true;
			res.dropped = !vrt__inject_push_batch(inj, t, t, 1);
			return res;
		}
		/* Full and no steal in flight: claim the 128 oldest. [Q5] acq_rel:
		 * orders against concurrent claims by stealers. */
		uint64_t next = vrt__wsq_pack(real + VRT_WSQ_HALF, real + VRT_WSQ_HALF);
		if (!atomic_compare_exchange_strong_explicit(&q->head, &h, next,
				memory_order_acq_rel, memory_order_relaxed)) /* failure relaxed: reloaded [Q4] */
			continue; /* a stealer claimed first: there may be room now */
		res.overflowed = VRT_WSQ_HALF + 1;
		res.dropped = !overflow_to_inject(q, real, t, inj);
		return res;
	}
}

struct vrt_task *vrt__wsq_pop(struct vrt_wsq *q)
{
	/* [Q5] acquire load + acq_rel CAS below. */
	uint64_t h = atomic_load_explicit(&q->head, memory_order_acquire);
	/* relaxed: tail is written only by this thread (the owner). */
	uint32_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);

	for (;;) {
		uint32_t steal = vrt__wsq_steal_of(h), real = vrt__wsq_real_of(h);
		uint64_t next;

		if (real == tail)
			return NULL;
		/* While a steal is in flight only real_head moves; the
		 * stealer sets steal_head when it is done. */
		next = steal == real ? vrt__wsq_pack(real + 1, real + 1)
				     : vrt__wsq_pack(steal, real + 1);
		/* [Q5] acq_rel: the claim is ordered with stealers' claims. */
		if (atomic_compare_exchange_weak_explicit(&q->head, &h, next,
				memory_order_acq_rel, memory_order_acquire))
			return q->buf[real & VRT_WSQ_MASK];
	}
}

enum vrt_steal vrt__wsq_steal_into(struct vrt_wsq *src, struct vrt_wsq *dst,
				   struct vrt_task **out, uint32_t *n_out)
{
	/* relaxed: dst is the caller's own ring; only the caller writes its tail. */
	uint32_t dtail = atomic_load_explicit(&dst->tail, memory_order_relaxed);
	/* acquire: pairs with [Q2] of stealers of our own ring, as [Q4]. */
	uint64_t dh = atomic_load_explicit(&dst->head, memory_order_acquire);
	uint32_t n, first;
	uint64_t h, next;
	int tries = 0;

	*n_out = 0;
	/* Keep at least half our ring free for what we take. */
	if (dtail - vrt__wsq_steal_of(dh) > VRT_WSQ_HALF)
		return VRT_STEAL_EMPTY;

	/* Phase 1: claim [real, real + n) by advancing real_head only. */
	h = atomic_load_explicit(&src->head, memory_order_acquire); /* [Q5] */
	for (;;) {
		uint32_t steal = vrt__wsq_steal_of(h), real = vrt__wsq_real_of(h);

		if (steal != real)
			return VRT_STEAL_RETRY; /* another steal is copying */
		/* [Q3] acquire: pairs with [Q1]; the slots up to tail are written. */
		uint32_t stail = atomic_load_explicit(&src->tail, memory_order_acquire);
		uint32_t avail = stail - real;
		if (avail == 0)
			return VRT_STEAL_EMPTY;
		if (avail <= VRT_WSQ_CAP) {
			n = vrt__wsq_steal_count(avail);
			next = vrt__wsq_pack(steal, real + n);
			VB_LINE_WRITE(rt_steal);
			/* [Q5] acq_rel: claim ordered with the owner's pops/overflow
			 * and other stealers; acquire orders the slot reads below. */
			if (atomic_compare_exchange_weak_explicit(&src->head, &h, next,
					memory_order_acq_rel, memory_order_acquire)) {
				first = real;
				break;
			}
		} else {
			/* Our head is older than the tail we read: reload. [Q5] */
			h = atomic_load_explicit(&src->head, memory_order_acquire);
		}
		if (++tries >= 8)
			return VRT_STEAL_RETRY;
	}

	/* Phase 2: copy into our ring's free slots (not yet published). */
	for (uint32_t i = 0; i < n; i++)
		dst->buf[(dtail + i) & VRT_WSQ_MASK] = src->buf[(first + i) & VRT_WSQ_MASK];

	/* Phase 3: release steal_head up to the current real_head (the owner
	 * may have popped meanwhile). */
	h = next;
	for (;;) {
		uint32_t real = vrt__wsq_real_of(h);
		uint64_t done = vrt__wsq_pack(real, real);
		VB_LINE_WRITE(rt_steal);
		/* [Q2] release: our slot reads are done; pairs with [Q4]. */
		if (atomic_compare_exchange_weak_explicit(&src->head, &h, done,
				memory_order_acq_rel, memory_order_acquire))
			break;
	}
	VB_LINE_WRITE(rt_steal);
	/* relaxed: statistics only. */
	atomic_fetch_add_explicit(&src->stolen_from, n, memory_order_relaxed);

	/* Run the newest stolen task now; publish the others. */
	*out = dst->buf[(dtail + n - 1) & VRT_WSQ_MASK];
	*n_out = n;
	if (n > 1)
		/* [Q6] release: publishes the copied slots; pairs with [Q3]. */
		atomic_store_explicit(&dst->tail, dtail + n - 1, memory_order_release);
	return VRT_STEAL_OK;
}
