/* SPDX-License-Identifier: MIT */
/*
 * rt/worker.c: the worker loop: find_work, polling a task, spawning, the
 * searching/parked accounting and the default futex park ops.
 *
 * find_work order (DESIGN.md section 2): every global_interval ticks the
 * injection queue first (checked before local work, or a busy worker would
 * never look at it); the prefetched global batch; the LIFO slot (at most
 * lifo_poll_cap in a row, then its task goes to the back of the ring); the
 * ring; then, local work exhausted: this worker's yielded tasks are flushed
 * (to the injection queue - then a batch is taken back at once, since there
 * is known work there - or, when that queue is empty, to the back of the
 * ring); steal (random first victim, every other worker once; skipped with
 * stealing = off or when ~half the workers already search); the injection
 * queue; park.
 *
 * Threading: every function taking a struct vrt_worker * runs on that
 * worker's thread. vrt_spawn, vrt__schedule and vrt__notify_parked run on
 * any thread.
 *
 * Ordering:
 *   rt->idle          [searching:32 | parked:32]; RMW (seq_cst) by workers
 *                     entering/leaving searching, by parkers and notifiers
 *                     (the parked half only under park_lock)
 *   rt->parked_bits   written under park_lock; read under it (stats: relaxed)
 *   rt->phase         written by vrt_shutdown; read by workers
 *   rt->drain_*       workers during a DRAIN shutdown
 *   task state        see task.c ([T1]..[T6])
 *   [W1] spawn/wake publication: a task reaches another worker through the
 *        ring ([Q1]/[Q3], wsq.c) or the injection mutex; its fields written
 *        before the push are visible to the worker that pops it.
 *   [W2] the worker's CAS to RUNNING is acquire ([T2]): pairs with [T1]
 *        and [T3] of the previous poll.
 *   [W3] after poll: CAS release ([T3]).
 *   [W4] notifier: push work, then seq_cst fence, then read idle. Parker:
 *        RMW idle (seq_cst), then seq_cst fence [W5], then read the queues.
 *        Either the notifier sees the parker (and wakes it) or the parker
 *        sees the work (and does not sleep): the Dekker pattern.
 *   [W6] searcher leaving with work: RMW idle seq_cst; if it was the last
 *        searcher it notifies (which runs [W4]).
 *   [W7] phase store release (vrt_shutdown) pairs with the workers' acquire
 *        loads; drain_done likewise.
 *   [W8] start_pending: each worker's acq_rel decrement; the last one sets
 *        the `started` event for vrt_new.
 *   [W9] drain_idle: acq_rel increments/decrements by workers of a DRAIN
 *        shutdown; the one that brings it to `nworkers` decides (no other
 *        worker runs a task while counted, so the count is exact).
 */
#include "rt/internal.h"
#include "base/time.h"

#include <errno.h>

/* Ring length from which a local push wakes a parked worker (push_ring). */
#define VRT_RING_NOTIFY_MIN 2

__thread struct vrt_worker *vrt__tls_worker;
__thread struct vrt_task *vrt__tls_task;

struct vrt_task *vrt_current(void)
{
	return vrt__tls_task;
}

struct vrt *vrt_current_rt(void)
{
	return vrt__tls_worker ? vrt__tls_worker->rt : NULL;
}

int vrt_worker_id(void)
{
	return vrt__tls_worker ? (int)vrt__tls_worker->id : -1;
}

bool vrt_budget_consume(void)
{
	struct vrt_worker *w = vrt__tls_worker;

	if (!w || !vrt__tls_task)
		return true;
	if (w->budget_left == 0) {
		w->budget_hit = true;
		return false;
	}
	w->budget_left--;
	return true;
}

static inline void ctr_add(_Atomic uint64_t *c, uint64_t n)
{
	/* Single-writer counter: relaxed load + store (no RMW needed); the
	 * snapshot reader only needs each value eventually. */
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

/* ---------------------------------------------------------- notify / park */

/*
 * The seq_cst fence of the Dekker pattern [W4]/[W5]. ThreadSanitizer does
 * not model fences (gcc warns, -Wtsan); there a seq_cst RMW on the idle word
 * gives the same guarantee (both sides then RMW one location, whose
 * modification order they observe), at the cost of a contended line that
 * the production build avoids.
 */
static inline void dekker_fence(struct vrt *rt)
{
#if defined(__SANITIZE_THREAD__)
	/* [W4]/[W5] seq_cst RMW, see above. */
	atomic_fetch_add_explicit(&rt->idle, 0, memory_order_seq_cst);
#else
	(void)rt;
	/* [W4]/[W5] seq_cst fence, see above. */
	atomic_thread_fence(memory_order_seq_cst);
#endif
}

static void unpark_worker(struct vrt *rt, unsigned id)
{
	rt->ops->unpark(rt->park_ctx, id);
}

void vrt__unpark_all(struct vrt *rt)
{
	for (unsigned i = 0; i < rt->nworkers; i++)
		unpark_worker(rt, i);
}

/* Under park_lock: take one parked worker out of the bitmap (ctz). With
 * more than 64 workers the first word looked at rotates, so that every
 * word's sleepers get their turn. */
static int pop_parked_locked(struct vrt *rt)
{
	unsigned start = rt->wake_word;

	if (rt->nwords > 1)
		rt->wake_word = start + 1 == rt->nwords ? 0 : start + 1;
	for (unsigned k = 0, i = start; k < rt->nwords; k++, i = i + 1 == rt->nwords ? 0 : i + 1) {
		/* relaxed: written only under park_lock, which we hold. */
		uint64_t b = atomic_load_explicit(&rt->parked_bits[i], memory_order_relaxed);
		if (b) {
			unsigned bit = (unsigned)__builtin_ctzll(b);
			/* relaxed: under park_lock (stats read it relaxed). */
			atomic_store_explicit(&rt->parked_bits[i], b & ~(UINT64_C(1) << bit),
					      memory_order_relaxed);
			return (int)(i * 64 + bit);
		}
	}
	return -1;
}

void vrt__notify_parked(struct vrt *rt)
{
	uint64_t v;
	int id = -1;

	/* [W4] seq_cst fence: the work pushed before is ordered before the
	 * read of idle; pairs with the parker's [W5]. */
	dekker_fence(rt);
	/* relaxed: ordered by the fence above (fence-to-fence rule). */
	v = atomic_load_explicit(&rt->idle, memory_order_relaxed);
	if (vrt__idle_searching(v) != 0 || vrt__idle_parked(v) == 0)
		return;
	pthread_mutex_lock(&rt->park_lock);
	/* relaxed: the parked half changes only under the lock we hold; the
	 * searching half is re-read and a stale non-zero only skips a wake
	 * that the running searcher makes unnecessary. */
	v = atomic_load_explicit(&rt->idle, memory_order_relaxed);
	if (vrt__idle_searching(v) == 0 && vrt__idle_parked(v) > 0) {
		id = pop_parked_locked(rt);
		VB_BUG_ON(id < 0);
		/* The woken worker starts out searching: counted here so
		 * that no second notifier wakes another one for the same work.
		 * seq_cst: part of [W4]/[W6]. */
		atomic_fetch_add_explicit(&rt->idle, VRT_IDLE_SEARCH_ONE - VRT_IDLE_PARK_ONE,
					  memory_order_seq_cst);
	}
	pthread_mutex_unlock(&rt->park_lock);
	if (id >= 0)
		unpark_worker(rt, (unsigned)id);
}

static bool try_become_searcher(struct vrt_worker *w)
{
	struct vrt *rt = w->rt;
	/* relaxed: a guess for the CAS. */
	uint64_t v = atomic_load_explicit(&rt->idle, memory_order_relaxed);

	if (w->searching)
		return true;
	for (;;) {
		/* At most about half the workers search (ceil(n/2)). */
		if (2 * vrt__idle_searching(v) >= rt->nworkers)
			return false;
		/* seq_cst: [W6] the searcher count takes part in the Dekker
		 * pattern with notifiers ([W4]). */
		if (atomic_compare_exchange_weak_explicit(&rt->idle, &v, v + VRT_IDLE_SEARCH_ONE,
				memory_order_seq_cst, memory_order_relaxed)) /* failure relaxed: retried */
			break;
	}
	w->searching = true;
	ctr_add(&w->c.searching_transitions, 1);
	return true;
}

/* Leaving searching because we found work: the last searcher wakes another
 * so that the rest of the work (if any) is not left to sleeping workers. */
static void transition_from_searching(struct vrt_worker *w)
{
	uint64_t prev;

	if (!w->searching)
		return;
	w->searching = false;
	/* [W6] seq_cst: see the Ordering block. */
	prev = atomic_fetch_sub_explicit(&w->rt->idle, VRT_IDLE_SEARCH_ONE, memory_order_seq_cst);
	if (vrt__idle_searching(prev) == 1)
		vrt__notify_parked(w->rt);
}

static bool local_has_work(struct vrt_worker *w)
{
	return w->lifo || w->pf_len || w->yq_len || vrt__wsq_len(&w->q) != 0;
}

/* Is there work a parker must not sleep on? `all` = also other rings (the
 * last searcher re-checks every queue). */
static bool work_visible(struct vrt_worker *w, bool all)
{
	struct vrt *rt = w->rt;

	if (local_has_work(w) || vrt__inject_len(&rt->inject) != 0)
		return true;
	if (all && w->stealing) {
		for (unsigned i = 0; i < rt->nworkers; i++)
			if (i != w->id && vrt__wsq_len(&rt->workers[i]->q) != 0)
				return true;
	}
	return false;
}

/* Clear our parked bit after a park (or an aborted one). Returns true when
 * someone else cleared it: a notifier woke us and counted us as searching. */
static bool unmark_parked(struct vrt_worker *w)
{
	struct vrt *rt = w->rt;
	uint64_t bit = UINT64_C(1) << (w->id % 64);
	_Atomic uint64_t *word = &rt->parked_bits[w->id / 64];
	bool notified;

	pthread_mutex_lock(&rt->park_lock);
	/* relaxed: written only under park_lock, which we hold. */
	uint64_t b = atomic_load_explicit(word, memory_order_relaxed);
	notified = !(b & bit);
	if (!notified) {
		/* relaxed: under park_lock. */
		atomic_store_explicit(word, b & ~bit, memory_order_relaxed);
		/* seq_cst: the parked half of [W4]/[W5]. */
		atomic_fetch_sub_explicit(&rt->idle, VRT_IDLE_PARK_ONE, memory_order_seq_cst);
	}
	pthread_mutex_unlock(&rt->park_lock);
	if (notified) {
		w->searching = true;
		ctr_add(&w->c.searching_transitions, 1);
	}
	return notified;
}

static void reload_tunables(struct vrt_worker *w);

static void park(struct vrt_worker *w)
{
	struct vrt *rt = w->rt;
	bool last;
	int64_t now;

	w->in_park = true;
	if (rt->ops->poll) {
		rt->ops->poll(rt->park_ctx, w->id);
		if (local_has_work(w))
			goto out;
	}
	pthread_mutex_lock(&rt->park_lock);
	{
		uint64_t delta = VRT_IDLE_PARK_ONE - (w->searching ? VRT_IDLE_SEARCH_ONE : 0);
		/* seq_cst: [W5] with the fence below; pairs with [W4]. */
		uint64_t prev = atomic_fetch_add_explicit(&rt->idle, delta, memory_order_seq_cst);
		last = w->searching && vrt__idle_searching(prev) == 1;
		w->searching = false;
		_Atomic uint64_t *word = &rt->parked_bits[w->id / 64];
		/* relaxed: written only under park_lock, which we hold. */
		atomic_store_explicit(word, atomic_load_explicit(word, memory_order_relaxed)
				      | (UINT64_C(1) << (w->id % 64)), memory_order_relaxed);
	}
	pthread_mutex_unlock(&rt->park_lock);
	/* [W5] seq_cst fence: our idle RMW is ordered before the queue reads
	 * below; pairs with [W4]. */
	dekker_fence(rt);
	if (work_visible(w, last)) {
		unmark_parked(w);
		goto out;
	}
	now = vb_now_ns();
	ctr_add(&w->c.busy_ns, (uint64_t)(now - w->active_start));
	ctr_add(&w->c.parks, 1);
	rt->ops->park(rt->park_ctx, w->id, rt->park_timeout_ns);
	if (unmark_parked(w))
		ctr_add(&w->c.unparks, 1);
	now = vb_now_ns();
	w->active_start = now;
	w->batch_start = now;
	w->batch_polls = 0;
	reload_tunables(w); /* a vrt_set_* may have come while we slept */
out:
	w->in_park = false;
}

/* ------------------------------------------------------------- scheduling */

static void push_ring(struct vrt_worker *w, struct vrt_task *t, bool notify)
{
	struct vrt_wsq_push_res r = vrt__wsq_push(&w->q, t, &w->rt->inject);

	if (r.overflowed) {
		ctr_add(&w->c.overflows, 1);
		ctr_add(&w->c.tasks_overflowed, r.overflowed);
		notify = true;
	}
	/* The injection queue closes only after every worker was joined. */
	VB_BUG_ON(r.dropped);
	/* A single task in our ring is not worth waking a sleeper for: we are
	 * awake and run it soon, while the sleeper would pay a futex wake-up
	 * (and often a context switch on our core) to steal half of one task.
	 * From VRT_RING_NOTIFY_MIN tasks on, or on overflow, one parked
	 * worker is woken. */
	if (notify && !w->in_park && (r.overflowed || vrt__wsq_len(&w->q) >= VRT_RING_NOTIFY_MIN))
		vrt__notify_parked(w->rt);
}

static void schedule_remote(struct vrt *rt, struct vrt_task *t)
{
	t->next = NULL;
	/* [W1] the injection mutex publishes the task. A closed queue means
	 * vrt_shutdown is sweeping: the task is registered (it was polled) and
	 * the sweep completes it. */
	if (vrt__inject_push_batch(&rt->inject, t, t, 1))
		vrt__notify_parked(rt);
}

/*
 * A task that returned VRT_YIELD (or ran out of budget) goes behind the work
 * already queued, never to the LIFO slot. The worker keeps yielded tasks in
 * a private list (a yield costs no lock) and places them all at once when
 * its local queues run dry or at the global-interval tick:
 *  - while the injection queue holds fresh work (spawns, wakes, overflow:
 *    anything but yielded tasks), they go to its tail, behind that work, and
 *    the worker takes a batch from its head; budget-forced yields always go
 *    there (DESIGN.md);
 *  - otherwise to the back of the worker's own ring, where idle workers can
 *    steal them. Only yielded tasks would be queued globally then, and
 *    sending them through the shared queue would move each of them between
 *    cores (and, the queue never emptying, keep doing so).
 * Returns the first task of a batch taken from the injection queue, if any.
 */
static void push_ring(struct vrt_worker *w, struct vrt_task *t, bool notify);
static struct vrt_task *pull_inject(struct vrt_worker *w);

static struct vrt_task *flush_yields(struct vrt_worker *w, bool tick)
{
	struct vrt_task *t, *next;
	bool global;

	if (!w->yq_len)
		return NULL;
	global = w->yq_forced || vrt__inject_fresh(&w->rt->inject) != 0;
	if (global) {
		/* Closed only after every worker was joined (we are one). */
		VB_BUG_ON(!vrt__inject_push_yields(&w->rt->inject, w->yq_head, w->yq_tail, w->yq_len));
	} else {
		for (t = w->yq_head; t; t = next) {
			next = t->next;
			push_ring(w, t, false);
		}
	}
	w->yq_head = w->yq_tail = NULL;
	w->yq_len = 0;
	w->yq_forced = false;
	if (!w->in_park)
		vrt__notify_parked(w->rt);
	return global && !tick ? pull_inject(w) : NULL;
}

static void defer_yield(struct vrt_worker *w, struct vrt_task *t, bool forced)
{
	t->next = NULL;
	if (w->yq_tail)
		w->yq_tail->next = t;
	else
		w->yq_head = t;
	w->yq_tail = t;
	w->yq_forced |= forced;
	w->yq_len++;
}

static void schedule_local(struct vrt_worker *w, struct vrt_task *t, bool yield)
{
	struct vrt_task *prev;

	if (yield || !w->lifo_on) {
		push_ring(w, t, true);
		return;
	}
	prev = w->lifo;
	w->lifo = t;
	if (prev)
		push_ring(w, prev, true);
}

void vrt__schedule(struct vrt_task *t, bool yield)
{
	struct vrt_worker *w = vrt__tls_worker;

	if (w && w->rt == t->rt)
		schedule_local(w, t, yield);
	else
		schedule_remote(t->rt, t);
}

/* `ref`: VRT_ST_REF_ONE when the runtime takes its own reference, 0 when
 * the caller's reference becomes the runtime's (detached). */
static int spawn(struct vrt *rt, struct vrt_task *t, uint64_t ref)
{
	struct vrt_worker *w = vrt__tls_worker;
	/* relaxed: the task is not shared yet (only the caller holds it). */
	uint64_t s = atomic_load_explicit(&t->state, memory_order_relaxed);

	t->rt = rt;
	for (;;) {
		VB_BUG_ON(!(s & VRT_ST_NEW)); /* spawned twice */
		uint64_t ns = ((s & ~(VRT_ST_NEW | VRT_ST_LIFE)) | VRT_ST_SCHEDULED) + ref;
		/* relaxed: [W1] the queue push below publishes the task. */
		if (atomic_compare_exchange_weak_explicit(&t->state, &s, ns,
				memory_order_relaxed, memory_order_relaxed))
			break;
	}
	if (w && w->rt == rt) {
		ctr_add(&w->c.spawned_local, 1);
		schedule_local(w, t, false);
		return 0;
	}
	t->next = NULL;
	if (!vrt__inject_push_spawn(&rt->inject, t)) {
		/* Refused: back to a never-spawned task, minus our ref
		 * (relaxed: nobody else can have seen the task). */
		s = atomic_load_explicit(&t->state, memory_order_relaxed);
		for (;;) {
			uint64_t ns = ((s & ~(VRT_ST_LIFE | VRT_ST_NOTIFIED)) | VRT_ST_NEW) - ref;
			/* relaxed: nobody else can have seen the task. */
			if (atomic_compare_exchange_weak_explicit(&t->state, &s, ns,
					memory_order_relaxed, memory_order_relaxed))
				break;
		}
		return -ESHUTDOWN;
	}
	/* relaxed: statistics only. */
	atomic_fetch_add_explicit(&rt->spawned_remote, 1, memory_order_relaxed);
	vrt__notify_parked(rt);
	return 0;
}

int vrt_spawn(struct vrt *rt, struct vrt_task *t)
{
	return spawn(rt, t, VRT_ST_REF_ONE);
}

int vrt_spawn_detached(struct vrt *rt, struct vrt_task *t)
{
	return spawn(rt, t, 0);
}

/* ------------------------------------------------------------- find_work */

static void reload_tunables(struct vrt_worker *w)
{
	struct vrt *rt = w->rt;

	/* relaxed: independent knobs; a worker acting on a stale value for
	 * one more interval is harmless. */
	w->stealing = atomic_load_explicit(&rt->t_stealing, memory_order_relaxed);
	w->lifo_on = atomic_load_explicit(&rt->t_lifo, memory_order_relaxed);
	/* relaxed (all of these): see above. */
	w->lifo_cap = atomic_load_explicit(&rt->t_lifo_cap, memory_order_relaxed);
	w->budget = atomic_load_explicit(&rt->t_budget, memory_order_relaxed);
	w->gi_min = atomic_load_explicit(&rt->t_gi_min, memory_order_relaxed);
	w->gi_max = atomic_load_explicit(&rt->t_gi_max, memory_order_relaxed);
	w->batch_max = atomic_load_explicit(&rt->t_batch_max, memory_order_relaxed);
	if (w->gi_min > w->gi_max)
		w->gi_min = w->gi_max; /* torn pair during a vrt_set_global_interval */
}

static void maintenance(struct vrt_worker *w)
{
	int64_t now = vb_now_ns();

	if (w->batch_polls) {
		double sample = (double)(now - w->batch_start) / w->batch_polls;
		w->ewma_ns = w->ewma_ns > 0.0 ? vrt__ewma(w->ewma_ns, sample) : sample;
	}
	w->batch_start = now;
	w->batch_polls = 0;
	ctr_add(&w->c.busy_ns, (uint64_t)(now - w->active_start));
	w->active_start = now;
	reload_tunables(w);
	w->interval = vrt__global_interval(w->ewma_ns, w->gi_min, w->gi_max);
	w->gi_countdown = w->interval;
	/* relaxed: single-writer statistics. */
	atomic_store_explicit(&w->c.ewma_poll_ns, (uint64_t)w->ewma_ns, memory_order_relaxed);
	atomic_store_explicit(&w->c.global_interval, w->interval, memory_order_relaxed);
	/* [W7] acquire: pairs with vrt_shutdown's release store. */
	if (atomic_load_explicit(&w->rt->phase, memory_order_acquire) == VRT_CLOSING_DROP)
		w->exiting = true;
}

static struct vrt_task *pull_inject(struct vrt_worker *w)
{
	struct vrt *rt = w->rt;
	unsigned n;

	if (w->pf_len)
		return NULL;
	n = vrt__inject_pop_batch(&rt->inject, w->prefetch, w->batch_max, rt->nworkers);
	if (!n)
		return NULL;
	ctr_add(&w->c.global_batches, 1);
	ctr_add(&w->c.global_tasks, n);
	w->pf_head = 1;
	w->pf_len = n - 1;
	return w->prefetch[0];
}

static struct vrt_task *next_local(struct vrt_worker *w)
{
	struct vrt_task *t;

	if (w->io_countdown && --w->io_countdown == 0) {
		w->io_countdown = w->rt->io_poll_interval;
		w->rt->ops->poll(w->rt->park_ctx, w->id);
	}
	if (--w->gi_countdown == 0) {
		maintenance(w);
		if (w->exiting)
			return NULL;
		flush_yields(w, true);
		t = pull_inject(w);
		if (t)
			goto non_lifo;
	}
	if (w->pf_len) {
		t = w->prefetch[w->pf_head++];
		w->pf_len--;
		goto non_lifo;
	}
	if (w->lifo) {
		t = w->lifo;
		w->lifo = NULL;
		if (w->lifo_run < w->lifo_cap) {
			w->lifo_run++;
			ctr_add(&w->c.lifo_polls, 1);
			return t;
		}
		/* Cap reached: the ring is served first; no notify, we run it. */
		push_ring(w, t, false);
	}
	t = vrt__wsq_pop(&w->q);
	if (!t)
		return NULL;
non_lifo:
	w->lifo_run = 0;
	return t;
}

static struct vrt_task *steal_work(struct vrt_worker *w, bool *retry)
{
	struct vrt *rt = w->rt;
	unsigned n = rt->nworkers, start;

	if (n < 2 || !w->stealing || !try_become_searcher(w))
		return NULL;
	start = vb_rng_below(&w->rng, n);
	for (unsigned i = 0; i < n; i++) {
		unsigned v = start + i < n ? start + i : start + i - n;
		struct vrt_task *t;
		uint32_t got;

		if (v == w->id)
			continue;
		switch (vrt__wsq_steal_into(&rt->workers[v]->q, &w->q, &t, &got)) {
		case VRT_STEAL_OK:
			ctr_add(&w->c.steal_ops, 1);
			ctr_add(&w->c.tasks_stolen, got);
			return t;
		case VRT_STEAL_RETRY:
			*retry = true;
			break;
		case VRT_STEAL_EMPTY:
			break;
		}
	}
	return NULL;
}

/* DRAIN shutdown, nothing runnable here: returns true to exit the loop. */
static bool drain_idle(struct vrt_worker *w)
{
	struct vrt *rt = w->rt;
	/* [W9] acq_rel: orders our "nothing found" with the other workers'. */
	uint32_t n = atomic_fetch_add_explicit(&rt->drain_idle, 1, memory_order_acq_rel) + 1;

	if (n == rt->nworkers) {
		/* Every worker found nothing; idle workers' queues stay empty
		 * (only an owner fills its ring). Only the injection queue
		 * can still receive work (wakes from other threads). */
		dekker_fence(rt); /* [W5] as in park; pairs with [W4] */
		if (vrt__inject_len(&rt->inject) == 0) {
			/* relaxed: only the deciding worker (n == nworkers) writes. */
			if (!atomic_load_explicit(&rt->drain_cancelled, memory_order_relaxed)) {
				atomic_store_explicit(&rt->drain_cancelled, 1, memory_order_relaxed);
				/* [W9] acq_rel: we leave the idle count. */
				atomic_fetch_sub_explicit(&rt->drain_idle, 1, memory_order_acq_rel);
				/* Ask every pending task to finish; they land in our queues. */
				vrt__registry_cancel_all(rt);
				return false;
			}
			/* [W7] release: pairs with the waiters' acquire below. */
			atomic_store_explicit(&rt->drain_done, 1, memory_order_release);
			vrt__unpark_all(rt);
			return true;
		}
		/* [W9] acq_rel: we leave the idle count. */
		atomic_fetch_sub_explicit(&rt->drain_idle, 1, memory_order_acq_rel);
		return false;
	}
	park(w);
	/* [W7] acquire: pairs with the release store above. */
	if (atomic_load_explicit(&rt->drain_done, memory_order_acquire))
		return true;
	/* [W9] acq_rel: we leave the idle count. */
	atomic_fetch_sub_explicit(&rt->drain_idle, 1, memory_order_acq_rel);
	return false;
}

static struct vrt_task *find_work(struct vrt_worker *w)
{
	struct vrt *rt = w->rt;
	unsigned spins = 0;

	for (;;) {
		struct vrt_task *t;
		bool retry = false;
		uint32_t phase;

		if (w->exiting)
			return NULL;
		t = next_local(w);
		if (!t && !w->exiting && w->yq_len) {
			/* Our yielded tasks: a batch of global work first, if any;
			 * else they are in our ring now. */
			t = flush_yields(w, false);
			if (!t)
				continue;
		}
		if (!t && !w->exiting) {
			t = steal_work(w, &retry);
			if (!t)
				t = pull_inject(w);
		}
		if (t) {
			transition_from_searching(w);
			return t;
		}
		if (w->exiting)
			return NULL;
		if (retry && spins++ < 16) {
			vb_cpu_relax();
			continue;
		}
		spins = 0;
		/* [W7] acquire: pairs with vrt_shutdown's release store. */
		phase = atomic_load_explicit(&rt->phase, memory_order_acquire);
		if (phase == VRT_CLOSING_DROP) {
			w->exiting = true;
			return NULL;
		}
		if (phase == VRT_CLOSING_DRAIN) {
			if (w->searching) {
				/* Idle workers of a drain do not search. [W6] seq_cst. */
				w->searching = false;
				atomic_fetch_sub_explicit(&rt->idle, VRT_IDLE_SEARCH_ONE,
							  memory_order_seq_cst);
			}
			if (drain_idle(w)) {
				w->exiting = true;
				return NULL;
			}
			continue;
		}
		park(w);
	}
}

/* ------------------------------------------------------------------ poll */

static void run_task(struct vrt_worker *w, struct vrt_task *t)
{
	/* relaxed: a guess for the CAS, which orders. */
	uint64_t s = atomic_load_explicit(&t->state, memory_order_relaxed);
	enum vrt_poll r;

	for (;;) {
		VB_BUG_ON((s & VRT_ST_LIFE) != VRT_ST_SCHEDULED);
		uint64_t ns = (s & ~(VRT_ST_LIFE | VRT_ST_NOTIFIED)) | VRT_ST_RUNNING;
		/* [W2] acquire: pairs with [T1] (wakers) and [T3] (last poll). */
		if (atomic_compare_exchange_weak_explicit(&t->state, &s, ns,
				memory_order_acquire, memory_order_relaxed)) /* failure relaxed: retried */
			break;
	}
	vrt__tls_task = t;
	w->budget_left = w->budget;
	w->budget_hit = false;
	r = t->vt->poll(t);
	vrt__tls_task = NULL;
	ctr_add(&w->c.polls, 1);
	w->batch_polls++;

	if (r == VRT_READY) {
		vrt__task_complete(w, t);
		return;
	}
	if (t->reg_shard == UINT32_MAX)
		vrt__registry_add(w->rt, t, w->id);
	/* relaxed: a guess for the CAS, which orders. */
	s = atomic_load_explicit(&t->state, memory_order_relaxed);
	for (;;) {
		uint64_t ns;
		if (r == VRT_YIELD || (s & VRT_ST_NOTIFIED))
			ns = (s & ~(VRT_ST_LIFE | VRT_ST_NOTIFIED)) | VRT_ST_SCHEDULED;
		else
			ns = s & ~VRT_ST_LIFE; /* IDLE */
		/* [W3]/[T3] release: publishes the poll's writes; acquire: sees
		 * a NOTIFIED set by a waker ([T1]). */
		if (atomic_compare_exchange_weak_explicit(&t->state, &s, ns,
				memory_order_acq_rel, memory_order_relaxed)) { /* failure relaxed: retried */
			if ((ns & VRT_ST_LIFE) == VRT_ST_IDLE)
				return;
			break;
		}
	}
	if (w->budget_hit || r == VRT_YIELD) {
		/* Behind everything (see flush_yields). */
		if (w->budget_hit)
			ctr_add(&w->c.budget_yields, 1);
		defer_yield(w, t, w->budget_hit);
	} else {
		/* Woken during its own poll: back of the local ring. */
		push_ring(w, t, true);
	}
}

/* --------------------------------------------------------- worker thread */

void *vrt__worker_main(void *arg)
{
	struct vrt_worker *w = arg;
	struct vrt *rt = w->rt;
	struct vrt_task *t;
	int64_t now = vb_now_ns();

	int rc = 0;

	vrt__tls_worker = w;
	if (rt->ops->worker_start)
		rc = rt->ops->worker_start(rt->park_ctx, w->id);
	if (rc < 0) {
		int zero = 0;
		/* relaxed: read by vrt_new after [W8]. */
		atomic_compare_exchange_strong_explicit(&rt->start_err, &zero, rc,
			memory_order_relaxed, memory_order_relaxed);
	}
	/* [W8] acq_rel: the last starter's release publishes start_err to vrt_new
	 * (through the event's own release/acquire, [E1]/[E2] in futex.c). */
	if (atomic_fetch_sub_explicit(&rt->start_pending, 1, memory_order_acq_rel) == 1)
		vb_event_set(&rt->started);
	if (rc < 0) {
		vrt__tls_worker = NULL;
		return NULL;
	}
	w->active_start = w->batch_start = now;
	reload_tunables(w);
	w->interval = vrt__global_interval(0, w->gi_min, w->gi_max);
	w->gi_countdown = w->interval;
	w->io_countdown = rt->ops->poll ? rt->io_poll_interval : 0;

	while ((t = find_work(w)) != NULL)
		run_task(w, t);
	if (w->yq_len) /* vrt_shutdown disposes of what is queued */
		VB_BUG_ON(!vrt__inject_push_yields(&rt->inject, w->yq_head, w->yq_tail, w->yq_len));

	ctr_add(&w->c.busy_ns, (uint64_t)(vb_now_ns() - w->active_start));
	if (w->searching) {
		w->searching = false;
		/* seq_cst: [W6]; keeps the count exact for the stats after stop. */
		atomic_fetch_sub_explicit(&rt->idle, VRT_IDLE_SEARCH_ONE, memory_order_seq_cst);
	}
	if (rt->ops->worker_stop)
		rt->ops->worker_stop(rt->park_ctx, w->id);
	vrt__tls_worker = NULL;
	return NULL;
}

/* ------------------------------------------------------ default park ops */

static void futex_park(void *ctx, unsigned worker, int64_t timeout_ns)
{
	struct vrt *rt = ctx;

	vb_event_wait(&rt->workers[worker]->park_ev, timeout_ns);
}

static void futex_unpark(void *ctx, unsigned worker)
{
	struct vrt *rt = ctx;

	vb_event_set(&rt->workers[worker]->park_ev);
}

const struct vrt_park_ops vrt__futex_park_ops = {
	.worker_start = NULL,
	.worker_stop = NULL,
	.park = futex_park,
	.unpark = futex_unpark,
	.poll = NULL,
};
