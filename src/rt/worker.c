/* SPDX-License-Identifier: MIT */
/*
 * rt/worker.c: the worker loop: find_work, polling a task, spawning and
 * scheduling, yielded tasks, the global-interval maintenance and the DRAIN
 * shutdown's quiescence detection. Searching and parking: park.c.
 *
 * The loop (vrt__worker_main): find_work, poll the task, the I/O phase when
 * due (io_due: every io_poll_interval polls, or at a slice boundary once
 * io_reap_us passed), place the task (place_polled: the slice rule of the
 * mixed-work policy decides whether a yielded task runs on at once).
 *
 * find_work order (doc/runtime.md, "Finding work"): every global_interval ticks the
 * injection queue first (checked before local work, or a busy worker would
 * never look at it); the resume slot; a continuation after VRT_CQ_FRESH_NS
 * of fresh work (aging); the prefetched global batch; the LIFO slot (at most
 * lifo_poll_cap in a row, then its task goes to the back of the ring); the
 * ring; then, local work exhausted: this worker's yielded fresh tasks are
 * placed (see flush_yields); with continuations queued, a sibling's backlog,
 * the injection queue, then its oldest continuation; steal (random first
 * victim, every other worker once, fresh rings then continuation rings;
 * skipped with stealing = off or when ~half the workers already search); the
 * injection queue; park (the I/O phase, park.c).
 *
 * Threading: every function taking a struct vrt_worker * runs on that
 * worker's thread. vrt_spawn and vrt__schedule run on any thread.
 *
 * Ordering:
 *   rt->idle, parked bitmap: see park.c ([W4]..[W6])
 *   rt->phase         written by vrt_shutdown; read by workers
 *   rt->drain_*       workers during a DRAIN shutdown
 *   task state        see task.c ([T1]..[T6])
 *   [W1] spawn/wake publication: a task reaches another worker through the
 *        ring ([Q1]/[Q3], wsq.c) or the injection mutex; its fields written
 *        before the push are visible to the worker that pops it.
 *   [W2] the worker's CAS to RUNNING is acquire ([T2]): pairs with [T1]
 *        and [T3] of the previous poll.
 *   [W3] after poll: CAS release ([T3]).
 *   [W4]/[W5] the Dekker pattern between a pusher that notifies and a
 *        worker that parks; [W6] the searching count (park.c).
 *   [W7] phase store release (vrt_shutdown) pairs with the workers' acquire
 *        loads; drain_done likewise.
 *   [W8] start_pending: each worker's acq_rel decrement; the last one sets
 *        the `started` event for vrt_new.
 *   [W9] drain_idle: acq_rel increments/decrements by workers of a DRAIN
 *        shutdown. A worker counts itself idle only with its local queues
 *        empty, and leaves the count BEFORE any task is queued on it
 *        (schedule_local: its driver, polled inside the park, wakes tasks
 *        while it is counted). The worker that brings the count to
 *        `nworkers` may decide "quiescent" only by a CAS from exactly
 *        `nworkers` to `nworkers | VRT_DRAIN_DONE`: an un-count in between
 *        makes the CAS fail. A worker handed a task after a successful CAS
 *        (it sees DONE in its un-count) runs its local queues dry before it
 *        exits, so no task queued by a driver is left unpolled.
 *   [W10] drain_cancelled: the deciding worker's release store, before it
 *        asks every pending task to finish, pairs with the acquire load of
 *        whoever acts on it (tests/stress/stress_rt_drain.c's park hook
 *        fires its completion only once the drain cancelled).
 */
#include "rt/internal.h"
#include "base/time.h"

#include <errno.h>

/* drain_idle: bit set by the quiescence decision (see [W9]). */
#define VRT_DRAIN_DONE (UINT32_C(1) << 31)

/* Leave the DRAIN idle count ([W9]). */
static void drain_uncount(struct vrt_worker *w)
{
	w->drain_counted = false;
	/* [W9] acq_rel: ordered against the decider's CAS. */
	atomic_fetch_sub_explicit(&w->rt->drain_idle, 1, memory_order_acq_rel);
}

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

void vrt_poll_label(const char *label)
{
	struct vrt_worker *w = vrt__tls_worker;

	if (!w || !vrt__tls_task)
		return;
	/* relaxed: a name for the monitor's report (a static string). */
	atomic_store_explicit(&w->c.label, label, memory_order_relaxed);
	w->labelled = true;
}

/* Time one schedule in VRT_HIST_SAMPLE_EVERY (per scheduling thread): the
 * poll that follows records the schedule latency. The caller owns the
 * task's scheduling (it moved it to SCHEDULED, or polled it); the queue push
 * that follows publishes sched_ns with the task ([W1]). */
static __thread unsigned tls_sched_samp;

static inline void sample_sched(struct vrt_worker *w, struct vrt_task *t)
{
	unsigned *n = w ? &w->sched_samp : &tls_sched_samp;

	if (vb_unlikely((++*n & (VRT_HIST_SAMPLE_EVERY - 1)) == 0))
		t->sched_ns = vb_now_ns();
}

void vrt_service_reset(void)
{
	/* Owner of the poll: place_polled reads it after the poll returns. */
	if (vrt__tls_worker && vrt__tls_task)
		vrt__tls_task->slices = 0;
}

void vrt_service_slices(unsigned n)
{
	struct vrt_task *t = vrt__tls_task;
	unsigned room;

	if (!vrt__tls_worker || !t || n < 2)
		return;
	/* Owner of the poll, as above. place_polled counts the last slice;
	 * the others stop short of the end of the turn, which it must see
	 * (slices % VRT_CONT_QUANTUM == 0 at its increment). */
	room = VRT_CONT_QUANTUM - 1 - t->slices % VRT_CONT_QUANTUM;
	t->slices = (uint16_t)(t->slices + (n - 1 < room ? n - 1 : room));
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


/* ------------------------------------------------------------- scheduling */

static void push_ring(struct vrt_worker *w, struct vrt_task *t, bool notify)
{
	struct vrt_wsq_push_res r = vrt__wsq_push(&w->q, t, &w->rt->inject);

	if (r.overflowed) {
		vrt__ctr_add(&w->c.overflows, 1);
		vrt__ctr_add(&w->c.tasks_overflowed, r.overflowed);
		notify = true;
	}
	/* The injection queue closes only after every worker was joined. */
	VB_BUG_ON(r.dropped);
	/* A single task in our ring is not worth waking a sleeper for: we are
	 * awake and run it soon, while the sleeper would pay a futex wake-up
	 * (and often a context switch on our core) to steal half of one task.
	 * From VRT_RING_NOTIFY_MIN tasks on, or on overflow, one parked
	 * worker is woken, if the ring is worth a wake-up (vrt__worth_waking);
	 * after a park its driver ended, one task is enough once
	 * (vrt__should_wake: the owed wake-up). */
	if (notify && !w->in_io &&
	    (r.overflowed || vrt__should_wake(w, vrt__wsq_len(&w->q), VRT_RING_NOTIFY_MIN)))
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
 *    there (doc/runtime.md, "Budget and shutdown");
 *  - otherwise to the back of the worker's own ring, where idle workers can
 *    steal them. Only yielded tasks would be queued globally then, and
 *    sending them through the shared queue would move each of them between
 *    cores (and, the queue never emptying, keep doing so).
 * Returns the first task of a batch taken from the injection queue, if any.
 */
static void push_ring(struct vrt_worker *w, struct vrt_task *t, bool notify);
static struct vrt_task *pull_inject(struct vrt_worker *w);
static void queue_yielded(struct vrt_worker *w, struct vrt_task *t, bool forced);

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
	/* The wake rule, as for any local push: a single yielded task is
	 * this worker's own next task, and waking a sibling for it would be
	 * a futile wake-up per slice. */
	if (!w->in_io && vrt__should_wake(w, global ? w->yq_len : vrt__wsq_len(&w->q),
					  VRT_RING_NOTIFY_MIN))
		vrt__notify_parked(w->rt);
	w->yq_head = w->yq_tail = NULL;
	w->yq_len = 0;
	w->yq_forced = false;
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

	if (vb_unlikely(w->drain_counted))
		drain_uncount(w); /* before the task is visible here: [W9] */
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

	sample_sched(w, t);
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
	sample_sched(w, t);
	if (w && w->rt == rt) {
		vrt__ctr_add(&w->c.spawned_local, 1);
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

void vrt__reload_tunables(struct vrt_worker *w)
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
	w->reap_ns = rt->ops->poll ? (int64_t)atomic_load_explicit(&rt->t_reap_us,
							memory_order_relaxed) * 1000 : 0;
	w->gather = atomic_load_explicit(&rt->t_gather, memory_order_relaxed);
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
	vrt__ctr_add(&w->c.busy_ns, (uint64_t)(now - w->active_start));
	w->active_start = now;
	vrt__reload_tunables(w);
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
	vrt__ctr_add(&w->c.global_batches, 1);
	vrt__ctr_add(&w->c.global_tasks, n);
	w->pf_head = 1;
	w->pf_len = n - 1;
	if (n > 1 && w->stealing && rt->nworkers > 1 && vrt__wsq_len(&w->q) == 0) {
		/* The rest of the batch goes to our ring (empty: the batch
		 * keeps its order, behind only a task the first one puts in
		 * the LIFO slot), where idle workers can steal it while we
		 * run a long task; the prefetch buffer is owner-only, so a
		 * batch left there waits behind that task. With local work
		 * queued (the global-interval tick) it stays in the buffer,
		 * to run before that work.
		 * No notify: the pushers of these tasks notified already. */
		for (unsigned i = 1; i < n; i++)
			push_ring(w, w->prefetch[i], false);
		w->pf_len = 0;
	}
	return w->prefetch[0];
}

/* Aging, asked only while a continuation waits: has fresh work run for
 * VRT_CQ_FRESH_NS since the continuations last ran (or began to wait)?
 * The first look starts the clock. */
static bool cq_aged(struct vrt_worker *w)
{
	int64_t now = vb_now_ns();

	if (!w->cq_due) {
		w->cq_due = now + VRT_CQ_FRESH_NS;
		return false;
	}
	return now >= w->cq_due;
}

/* The next continuation (the one whose turn was cut by fresh work, else
 * the oldest); the aging clock starts again at the next look. */
static struct vrt_task *pop_cont(struct vrt_worker *w)
{
	struct vrt_task *t = w->cont_cur;

	w->cq_due = 0;
	if (t) {
		w->cont_cur = NULL;
		return t;
	}
	return vrt__wsq_pop(&w->cq);
}

static struct vrt_task *next_local(struct vrt_worker *w)
{
	struct vrt_task *t;

	if (--w->gi_countdown == 0) {
		maintenance(w);
		if (w->exiting)
			return NULL; /* vrt_shutdown disposes of w->resume */
		flush_yields(w, true);
		t = pull_inject(w);
		if (t) {
			if (w->resume) {
				/* Fresh global work came first after all. */
				queue_yielded(w, w->resume, false);
				w->resume = NULL;
			}
			goto non_lifo;
		}
	}
	if (w->resume) {
		/* Its slice ended with nothing waiting (place_polled). A
		 * fresh task's slices count towards the aging of a waiting
		 * continuation too: its time (slice_must_yield). */
		t = w->resume;
		w->resume = NULL;
		goto non_lifo;
	}
	if (vrt__cont_waiting(w) && cq_aged(w)) {
		/* Aging: fresh work cannot hold a waiting continuation
		 * back for more than VRT_CQ_FRESH_NS of its time. */
		t = pop_cont(w);
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
			vrt__ctr_add(&w->c.lifo_polls, 1);
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

	if (n < 2 || !w->stealing || !vrt__try_become_searcher(w))
		return NULL;
	start = vb_rng_below(&w->rng, n);
	/* Fresh work first, then (with our own continuations run out) the
	 * siblings' continuations, into our continuation ring. */
	for (unsigned i = 0; i < 2 * n; i++) {
		unsigned k = i < n ? i : i - n;
		unsigned v = start + k < n ? start + k : start + k - n;
		bool cont = i >= n;
		struct vrt_task *t;
		uint32_t got;

		if (v == w->id || (cont && vrt__cont_waiting(w)))
			continue;
		/* The gather rule: while it holds, only a sibling held up in
		 * one poll gives its ring away. */
		if (!vrt__may_spread(w) &&
		    (vrt__wsq_len(cont ? &rt->workers[v]->cq : &rt->workers[v]->q) == 0 ||
		     !vrt__held_in_poll(w, v)))
			continue;
		switch (vrt__wsq_steal_into(cont ? &rt->workers[v]->cq : &rt->workers[v]->q,
					    cont ? &w->cq : &w->q, &t, &got)) {
		case VRT_STEAL_OK:
			vrt__ctr_add(&w->c.steal_ops, 1);
			vrt__ctr_add(&w->c.tasks_stolen, got);
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
	uint32_t n, expected;

	/* [W7] acquire: pairs with the decider's release store. Our local
	 * queues are empty (find_work found nothing): we may go. */
	if (atomic_load_explicit(&rt->drain_done, memory_order_acquire))
		return true;
	w->drain_counted = true;
	/* [W9] acq_rel: orders our "nothing found" with the other workers'. */
	n = atomic_fetch_add_explicit(&rt->drain_idle, 1, memory_order_acq_rel) + 1;
	if (n == rt->nworkers) {
		/* Every worker found nothing and none was handed a task since
		 * (that would have un-counted it). Only the injection queue
		 * can still receive work without un-counting (wakes from other
		 * threads). */
		vrt__dekker_fence(rt); /* [W5] as in park; pairs with [W4] */
		if (vrt__inject_len(&rt->inject) == 0) {
			/* relaxed: only a deciding worker (n == nworkers) writes,
			 * and only one decides at a time (the count is full). */
			if (!atomic_load_explicit(&rt->drain_cancelled, memory_order_relaxed)) {
				/* [W10] release: pairs with the acquire in
				 * tests/stress/stress_rt_drain.c's park hook. */
				atomic_store_explicit(&rt->drain_cancelled, 1, memory_order_release);
				drain_uncount(w);
				/* Ask every pending task to finish; they land in our queues. */
				vrt__registry_cancel_all(rt);
				return false;
			}
			expected = rt->nworkers;
			/* [W9] acq_rel: fails if anyone un-counted since our add. */
			if (atomic_compare_exchange_strong_explicit(&rt->drain_idle, &expected,
					rt->nworkers | VRT_DRAIN_DONE,
					memory_order_acq_rel, memory_order_acquire)) {
				w->drain_counted = false; /* the count is frozen */
				/* [W7] release: pairs with the acquire loads above. */
				atomic_store_explicit(&rt->drain_done, 1, memory_order_release);
				vrt__unpark_all(rt);
				return true;
			}
		}
		drain_uncount(w);
		return false;
	}
	vrt__io_phase(w, VRT_IO_PARK);
	/* Handed a task in the park: schedule_local un-counted us already.
	 * Either way find_work looks at our queues again, and we exit only
	 * when they are empty and the drain is done. */
	if (w->drain_counted)
		drain_uncount(w);
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
		if (!t && !w->exiting && vrt__cont_waiting(w)) {
			/* Fresh work before our continuations: a sibling's
			 * backlog (the reason a slice may have ended), the
			 * injection queue; then the oldest continuation. */
			if (w->stealing && vrt__sibling_backlog(w))
				t = steal_work(w, &retry);
			if (!t)
				t = pull_inject(w);
			if (!t)
				t = pop_cont(w);
		}
		if (!t && !w->exiting) {
			t = steal_work(w, &retry);
			if (!t)
				t = pull_inject(w);
		}
		if (t) {
			w->unparked_idle = false; /* the unpark, if any, was not futile */
			vrt__transition_from_searching(w);
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
		vrt__io_phase(w, VRT_IO_PARK);
	}
}

/* ------------------------------------------------------------------ poll */

/* One poll of t: a slice when it returns VRT_YIELD. */
static enum vrt_poll poll_task(struct vrt_worker *w, struct vrt_task *t)
{
	/* relaxed: a guess for the CAS, which orders. */
	uint64_t s = atomic_load_explicit(&t->state, memory_order_relaxed);
	enum vrt_poll r;
	bool timed;
	int64_t t0 = 0;

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
	/* relaxed: a hint for the stall monitor (see monitor.c). */
	atomic_store_explicit(&w->c.cur_vt, t->vt, memory_order_relaxed);
	timed = vb_unlikely((++w->poll_samp & (VRT_HIST_SAMPLE_EVERY - 1)) == 0);
	if (vb_unlikely(timed || t->sched_ns)) {
		t0 = vb_now_ns();
		if (t->sched_ns) {
			vb_hist_record_owner(&w->h_sched, t0 > t->sched_ns ? (uint64_t)(t0 - t->sched_ns) : 0);
			t->sched_ns = 0;
		}
	}
	r = t->vt->poll(t);
	if (vb_unlikely(timed)) {
		int64_t t1 = vb_now_ns();
		vb_hist_record_owner(&w->h_poll, t1 > t0 ? (uint64_t)(t1 - t0) : 0);
	}
	/* relaxed: as above. */
	atomic_store_explicit(&w->c.cur_vt, NULL, memory_order_relaxed);
	if (vb_unlikely(w->labelled)) {
		w->labelled = false;
		/* relaxed: as in vrt_poll_label. */
		atomic_store_explicit(&w->c.label, NULL, memory_order_relaxed);
	}
	vrt__tls_task = NULL;
	vrt__ctr_add(&w->c.polls, 1);
	w->batch_polls++;
	if (w->rt->ops->flush)
		w->rt->ops->flush(w->rt->park_ctx, w->id);
	return r;
}

/* After a poll: is the I/O phase due? Every io_poll_interval polls, and at
 * a slice boundary (the task yields) once io_reap_us passed since the last
 * phase: completions are reaped by time, not only by count, so a light
 * request on this worker's connections reaches the run queue (and an idle
 * sibling) within io_reap_us of slice time while the worker runs slices. */
static bool io_due(struct vrt_worker *w, enum vrt_poll r)
{
	if (w->io_countdown && --w->io_countdown == 0)
		return true;
	if (w->reap_ns && (r == VRT_YIELD || w->budget_hit) &&
	    vb_now_ns() - w->io_last >= w->reap_ns) {
		vrt__ctr_add(&w->c.reaps_timed, 1);
		return true;
	}
	return false;
}

/*
 * The slice rule (doc/runtime.md, "Mixed work"): a task whose slice
 * ended (VRT_YIELD, or its budget spent) gives way only when something
 * waits: fresh local work (LIFO slot, prefetched batch, ring, yielded fresh
 * tasks), the injection queue, a sibling's unserved backlog (we may steal
 * it), or a waiting continuation: for a continuation, at the end of its
 * turn (every VRT_CONT_QUANTUM of its slices); for a fresh task (fewer than
 * VRT_FRESH_SLICES slices), once the aging is due (VRT_CQ_FRESH_NS of
 * fresh work since the continuations last ran). Completions
 * due were reaped just before (io_due), so what they woke is in the local
 * queues.
 */
static bool slice_must_yield(struct vrt_worker *w, const struct vrt_task *t)
{
	if (w->lifo || w->pf_len || w->yq_len || vrt__wsq_len(&w->q) != 0)
		return true;
	if (vrt__inject_len(&w->rt->inject) != 0)
		return true;
	if (vrt__cont_waiting(w)) {
		/* A continuation waits: a continuation gives way at the end
		 * of its turn, a fresh task when the aging is due (a
		 * task that stays fresh, e.g. an executor taking job after
		 * job, would hold it back for ever otherwise). */
		if (t->slices >= VRT_FRESH_SLICES ? t->slices % VRT_CONT_QUANTUM == 0
						   : cq_aged(w))
			return true;
	}
	return w->stealing && vrt__sibling_backlog(w);
}

/* A continuation goes behind fresh work, into the ring siblings steal
 * continuations from. Worth a wake-up when work waits ahead of it: a
 * sibling may run it meanwhile (a slice is long next to a wake-up). */
static void push_cont(struct vrt_worker *w, struct vrt_task *t)
{
	struct vrt_wsq_push_res r = vrt__wsq_push(&w->cq, t, &w->rt->inject);

	if (r.overflowed) {
		vrt__ctr_add(&w->c.overflows, 1);
		vrt__ctr_add(&w->c.tasks_overflowed, r.overflowed);
	}
	VB_BUG_ON(r.dropped); /* closed only after every worker was joined */
	if (!w->in_io && vrt__should_wake(w, vrt__wsq_len(&w->q) + vrt__wsq_len(&w->cq) +
					  (w->lifo != NULL), VRT_RING_NOTIFY_MIN))
		vrt__notify_parked(w->rt);
}

/* A task that gives way: a fresh one behind the local work (flush_yields);
 * a continuation whose turn ended to the back of the continuation ring;
 * one cut short by fresh work keeps its place (cont_cur) if that is free,
 * so that fresh work arriving often does not make the continuations take
 * turns slice by slice (which would stretch every one of them). */
static void queue_yielded(struct vrt_worker *w, struct vrt_task *t, bool forced)
{
	vrt__ctr_add(&w->c.yields, 1);
	if (t->slices < VRT_FRESH_SLICES) {
		defer_yield(w, t, forced);
		return;
	}
	if (!vrt__cont_waiting(w))
		w->cq_due = 0; /* the first to wait: the aging clock starts at the next look */
	if (t->slices % VRT_CONT_QUANTUM != 0 && !w->cont_cur)
		w->cont_cur = t;
	else
		push_cont(w, t);
}

/* After a poll (and the I/O phase, if due): complete t, leave it idle, run
 * it on at once (the slice rule) or queue it. */
static void place_polled(struct vrt_worker *w, struct vrt_task *t, enum vrt_poll r)
{
	uint64_t s;
	bool sliced = w->budget_hit || r == VRT_YIELD;

	if (r == VRT_READY) {
		vrt__task_complete(w, t);
		return;
	}
	if (t->reg_shard == UINT16_MAX)
		vrt__registry_add(w->rt, t, w->id);
	/* Attained service: slices in a row; a task that waited is fresh.
	 * Written before the CAS below publishes the task. */
	if (!sliced)
		t->slices = 0;
	else if (++t->slices == VRT_SLICES_WRAP)
		t->slices = VRT_CONT_QUANTUM; /* same turn position, still a continuation */
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
	sample_sched(w, t);
	if (sliced) {
		if (w->budget_hit)
			vrt__ctr_add(&w->c.budget_yields, 1);
		if (!slice_must_yield(w, t)) {
			vrt__ctr_add(&w->c.resumes, 1);
			w->resume = t;
			return;
		}
		queue_yielded(w, t, w->budget_hit);
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
	/* Before [W8]: vrt_new's return publishes the CPU clock and tid. */
	vrt__worker_measure_start(w);
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
	vrt__reload_tunables(w);
	w->interval = vrt__global_interval(0, w->gi_min, w->gi_max);
	w->gi_countdown = w->interval;
	/* relaxed: single-writer statistics; shown from the start, not 0
	 * until the first adaptation. */
	atomic_store_explicit(&w->c.global_interval, w->interval, memory_order_relaxed);
	w->io_countdown = rt->ops->poll ? rt->io_poll_interval : 0;
	w->io_last = now;
	w->cq_due = 0;

	/* The loop, as libuv's uv_run reads: find a task (when there is none,
	 * the I/O phase parks in the driver), poll it, the I/O phase when it
	 * is due, then place the task (done, idle, run on, or queued). */
	while ((t = find_work(w)) != NULL) {
		enum vrt_poll r = poll_task(w, t);

		if (io_due(w, r))
			vrt__io_phase(w, VRT_IO_REAP);
		place_polled(w, t, r);
	}
	if (w->yq_len) /* vrt_shutdown disposes of what is queued */
		VB_BUG_ON(!vrt__inject_push_yields(&rt->inject, w->yq_head, w->yq_tail, w->yq_len));

	vrt__ctr_add(&w->c.busy_ns, (uint64_t)(vb_now_ns() - w->active_start));
	vrt__worker_measure_stop(w);
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
