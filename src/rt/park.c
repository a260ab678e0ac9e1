/* SPDX-License-Identifier: MIT */
/*
 * rt/park.c: searching and parking: the idle word (searching and parked
 * counts), the parked-worker bitmap, "last searcher must notify", the I/O
 * phase (vrt__io_phase: the only caller of the park ops' poll and park),
 * the park path with its re-checks, and the default futex park ops. Functions taking
 * a struct vrt_worker * run on that worker's thread; vrt__notify_parked and
 * vrt__unpark_all on any thread.
 *
 * Ordering (labels shared with worker.c):
 *   rt->idle          [searching:32 | parked:32]; RMW (seq_cst) by workers
 *                     entering/leaving searching, by parkers and notifiers
 *                     (the parked half only under park_lock)
 *   rt->parked_bits   written under park_lock; read under it (stats: relaxed)
 *   [W4] notifier: push work, then seq_cst fence, then read idle. Parker:
 *        RMW idle (seq_cst), then seq_cst fence [W5], then read the queues.
 *        Either the notifier sees the parker (and wakes it) or the parker
 *        sees the work (and does not sleep): the Dekker pattern.
 *   [W6] searcher leaving with work: RMW idle seq_cst; if it was the last
 *        searcher it notifies (which runs [W4]). A searcher about to park
 *        leaves searching the same way BEFORE it polls its driver; if it
 *        was the last one it owes the re-check of every queue: after the
 *        poll when that gave it work (after_driver), else as part of
 *        parking (work_visible with all).
 *   The owed wake-up (vrt__should_wake, vrt__wake_owed_due) adds no
 *   shared variable: wake_owed is owner-only, and the wake-up it makes is
 *   vrt__notify_parked, the notifier's side of [W4].
 */
#include "rt/internal.h"
#include "base/lineaudit.h"
#include "base/time.h"

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
	vrt__dekker_fence(rt);
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
		VB_LINE_WRITE(rt_idle);
		atomic_fetch_add_explicit(&rt->idle, VRT_IDLE_SEARCH_ONE - VRT_IDLE_PARK_ONE,
					  memory_order_seq_cst);
	}
	pthread_mutex_unlock(&rt->park_lock);
	if (id >= 0)
		unpark_worker(rt, (unsigned)id);
}

bool vrt__try_become_searcher(struct vrt_worker *w)
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
		VB_LINE_WRITE(rt_idle);
		if (atomic_compare_exchange_weak_explicit(&rt->idle, &v, v + VRT_IDLE_SEARCH_ONE,
				memory_order_seq_cst, memory_order_relaxed)) /* failure relaxed: retried */
			break;
	}
	w->searching = true;
	vrt__ctr_add(&w->c.searching_transitions, 1);
	return true;
}

/* Leaving searching because we found work: the last searcher wakes another
 * so that the rest of the work (if any) is not left to sleeping workers. */
void vrt__transition_from_searching(struct vrt_worker *w)
{
	uint64_t prev;

	if (!w->searching)
		return;
	w->searching = false;
	/* [W6] seq_cst: see the Ordering block. */
	VB_LINE_WRITE(rt_idle);
	prev = atomic_fetch_sub_explicit(&w->rt->idle, VRT_IDLE_SEARCH_ONE, memory_order_seq_cst);
	if (vrt__idle_searching(prev) == 1)
		vrt__notify_parked(w->rt);
}

bool vrt__local_has_work(struct vrt_worker *w)
{
	return w->lifo || w->resume || w->pf_len || w->yq_len || vrt__wsq_len(&w->q) != 0 ||
	       vrt__cont_waiting(w);
}

/* Runnable tasks this worker holds. */
static unsigned local_runnable(struct vrt_worker *w)
{
	return (w->lifo != NULL) + (w->resume != NULL) + (w->cont_cur != NULL) + w->pf_len +
	       w->yq_len + vrt__wsq_len(&w->q) + vrt__wsq_len(&w->cq);
}

/*
 * The owed wake-up (vrt__should_wake): this worker left its park by its
 * driver, not by a notifier. A sibling that parked while every other
 * worker was parked sleeps with no bound (the park rule), and nobody told
 * it this worker is awake: only a wake-up brings it, or a task queued here
 * waits for this worker's next poll to end, however long that poll runs
 * (Tokio wakes a sibling after its driver's park for the same reason:
 * should_notify_others). Due once a sibling could steal a task here beyond
 * the one this worker runs next: inside a poll every task on the rings;
 * outside, all but the ring's head unless the next task comes from an
 * owner-only slot. Owner only.
 */
bool vrt__wake_owed_due(struct vrt_worker *w)
{
	unsigned n = vrt__wsq_len(&w->q) + vrt__wsq_len(&w->cq);

	if (n && !vrt__tls_task && !w->lifo && !w->resume && !w->cont_cur && !w->pf_len)
		n--; /* the ring's head is this worker's next task */
	if (!n)
		return false;
	w->wake_owed = false;
	return true;
}

/* A sibling may sleep with no bound (c.park_unbounded): the gather rule
 * holds no wake-up then. Relaxed reads, ordered by park_lock: this
 * worker's last unmark_parked came after the section that set the flag,
 * or the sibling saw this worker awake and bounded its park. */
bool vrt__sibling_sleeps_unbounded(struct vrt_worker *w)
{
	struct vrt *rt = w->rt;

	for (unsigned i = 0; i < rt->nworkers; i++)
		/* relaxed: see above. */
		if (i != w->id && atomic_load_explicit(&rt->workers[i]->c.park_unbounded,
						       memory_order_relaxed))
			return true;
	return false;
}

/* A sibling's ring holds fresh tasks it has not started: work an idle or
 * slicing worker could steal (the slice rule, worker.c). A relaxed look at
 * each ring's indices (vrt__wsq_len): a stale answer costs one slice its
 * yield, or one yield that finds nothing to steal. */
bool vrt__sibling_backlog(struct vrt_worker *w)
{
	struct vrt *rt = w->rt;

	for (unsigned i = 0; i < rt->nworkers; i++)
		if (i != w->id && vrt__wsq_len(&rt->workers[i]->q) != 0 &&
		    vrt__may_take(w, i)) /* the gather rule */
			return true;
	return false;
}

/* Work queued where another worker could take it: the injection queue or,
 * with stealing, another worker's ring. */
static bool work_elsewhere(struct vrt_worker *w)
{
	struct vrt *rt = w->rt;

	if (vrt__inject_len(&rt->inject) != 0)
		return true;
	/* Only what the gather rule lets a thief take. */
	if (w->stealing) {
		for (unsigned i = 0; i < rt->nworkers; i++)
			if (i != w->id && (vrt__wsq_len(&rt->workers[i]->q) != 0 ||
					   vrt__wsq_len(&rt->workers[i]->cq) != 0) &&
			    vrt__may_take(w, i))
				return true;
	}
	return false;
}

/* Is there work a parker must not sleep on? `all` = also other rings (the
 * last searcher re-checks every queue). */
static bool work_visible(struct vrt_worker *w, bool all)
{
	if (vrt__local_has_work(w) || vrt__inject_len(&w->rt->inject) != 0)
		return true;
	return all && work_elsewhere(w);
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
		VB_LINE_WRITE(rt_idle);
		atomic_fetch_sub_explicit(&rt->idle, VRT_IDLE_PARK_ONE, memory_order_seq_cst);
	}
	pthread_mutex_unlock(&rt->park_lock);
	if (notified) {
		w->searching = true;
		vrt__ctr_add(&w->c.searching_transitions, 1);
	}
	return notified;
}

/*
 * The driver (park ops poll / park) queued tasks on this worker, with
 * notifications suppressed (in_io). Wake a sibling only when this worker
 * now holds more runnable tasks than the one it runs next, and they are
 * worth a wake-up (vrt__worth_waking): those can be stolen while it runs
 * (an I/O burst spreads over the workers). One task is ours to run: waking
 * a sibling for it is a futile wakeup. A worker that
 * was the last searcher ([W6]) still owes the re-check of the other
 * queues: it left searching before the driver ran.
 */
static void after_driver(struct vrt_worker *w, bool last)
{
	if (vrt__should_wake(w, local_runnable(w) - 1, 1)) {
		vrt__notify_parked(w->rt);
		return;
	}
	if (last) {
		/* [W5] seq_cst fence: our searching RMW is ordered before the
		 * queue reads; pairs with [W4]. */
		vrt__dekker_fence(w->rt);
		if (work_elsewhere(w))
			vrt__notify_parked(w->rt);
	}
}

/* The driver ran (poll or park): the next REAP is due io_reap_us or
 * io_poll_interval polls from now. */
static void io_ran(struct vrt_worker *w, int64_t now)
{
	w->io_last = now;
	w->io_countdown = w->rt->ops->poll ? w->rt->io_poll_interval : 0;
}

/* VRT_IO_REAP from the run loop: the task just polled is in hand, not
 * queued; the wake rule applies to what the driver queued. */
static void io_reap(struct vrt_worker *w)
{
	struct vrt *rt = w->rt;

	if (!rt->ops->poll)
		return;
	w->in_io = true;
	rt->ops->poll(rt->park_ctx, w->id);
	io_ran(w, vb_now_ns());
	if (vrt__local_has_work(w))
		after_driver(w, false);
	w->in_io = false;
}

static void park(struct vrt_worker *w)
{
	struct vrt *rt = w->rt;
	bool last = false, queued;
	int64_t now, timeout;
	uint64_t idle;

	w->in_io = true;
	if (w->unparked_idle) {
		/* Woken by a notifier and about to sleep again without having
		 * run a task: that unpark was futile. */
		w->unparked_idle = false;
		vrt__ctr_add(&w->c.futile_wakeups, 1);
	}
	/*
	 * The searching rule: leave searching before touching the driver. A
	 * completion the poll delivers is this worker's own work, not work
	 * found by searching; as a searcher that "found work" it would wake
	 * another worker for nothing (one unpark per I/O completion).
	 */
	if (w->searching) {
		uint64_t prev;

		w->searching = false;
		/* [W6] seq_cst: leaving searching; pairs with [W4]. */
		VB_LINE_WRITE(rt_idle);
		prev = atomic_fetch_sub_explicit(&rt->idle, VRT_IDLE_SEARCH_ONE, memory_order_seq_cst);
		last = vrt__idle_searching(prev) == 1;
	}
	if (rt->ops->poll) {
		(rt->ops->poll_park ? rt->ops->poll_park : rt->ops->poll)(rt->park_ctx, w->id);
		io_ran(w, vb_now_ns());
		if (vrt__local_has_work(w)) {
			after_driver(w, last);
			goto out;
		}
	}
	/* Nothing is queued here: we are parking, so the owed wake-up is
	 * cancelled only now, not before the poll above. A park that ended
	 * with nothing owes it too, and the tasks its wake-up was for may
	 * come with this poll (a completion in the microseconds between two
	 * parks). */
	w->wake_owed = false;
	pthread_mutex_lock(&rt->park_lock);
	{
		/* seq_cst: [W5] with the fence below; pairs with [W4]. */
		VB_LINE_WRITE(rt_idle);
		idle = atomic_fetch_add_explicit(&rt->idle, VRT_IDLE_PARK_ONE, memory_order_seq_cst);
		_Atomic uint64_t *word = &rt->parked_bits[w->id / 64];
		/* relaxed: written only under park_lock, which we hold. */
		atomic_store_explicit(word, atomic_load_explicit(word, memory_order_relaxed)
				      | (UINT64_C(1) << (w->id % 64)), memory_order_relaxed);
		/* relaxed: ordered by park_lock (vrt__sibling_sleeps_unbounded);
		 * 1 whenever the park rule below may choose no bound. */
		atomic_store_explicit(&w->c.park_unbounded,
				      !w->stealing || vrt__idle_parked(idle) + 1 >= rt->nworkers,
				      memory_order_relaxed);
	}
	pthread_mutex_unlock(&rt->park_lock);
	/* [W5] seq_cst fence: our idle RMW is ordered before the queue reads
	 * below; pairs with [W4]. */
	vrt__dekker_fence(rt);
	if (work_visible(w, last)) {
		/* relaxed: as after the wait below. */
		atomic_store_explicit(&w->c.park_unbounded, 0, memory_order_relaxed);
		unmark_parked(w);
		goto out;
	}
	/*
	 * The park rule: with a task queued anywhere (another worker's ring,
	 * which a busy owner does not advertise for a single task), sleep at
	 * most park_timeout; with nothing queued anywhere, sleep until an
	 * unpark or the driver (a completion, a timer, which set its own
	 * wake-up): no tick on an idle runtime. The [W4]/[W5] pattern makes
	 * sure new work wakes a sleeper; stress_rt_idle checks it without
	 * any timeout.
	 *
	 * Only a worker that is not parked can hold such a task: only the
	 * owner pushes onto its ring, and a parked owner emptied it before
	 * it parked (what its driver queues during the park it runs itself
	 * when it returns). So "some other worker is awake" stands for "a
	 * ring may hold a task", read from the idle word our RMW above
	 * returned: O(1), where scanning every ring was O(workers) remote
	 * reads on every park (scaling-on-paper.md row 21). It may say
	 * "queued" when the awake worker's ring is empty: that costs a
	 * park_timeout wake-up while some worker is awake, never on an idle
	 * runtime. Like the scan, it is a look at one moment: a worker that
	 * wakes later by its driver owes us a wake-up once it queues a task
	 * it will not run next (vrt__wake_owed_due), so we may sleep with no
	 * bound.
	 */
	queued = vrt__inject_len(&rt->inject) != 0 ||
		 (w->stealing && vrt__idle_parked(idle) + 1 < rt->nworkers);
	timeout = queued ? rt->park_timeout_ns : -1;
	now = vb_now_ns();
	vrt__ctr_add(&w->c.busy_ns, (uint64_t)(now - w->active_start));
	vrt__ctr_add(&w->c.parks, 1);
	vrt__park_wait(w, timeout);
	/* relaxed: owner's hint; a stale 1 costs a sibling one wake-up. */
	atomic_store_explicit(&w->c.park_unbounded, 0, memory_order_relaxed);
	if (unmark_parked(w)) {
		vrt__ctr_add(&w->c.unparks, 1);
		w->unparked_idle = true;
	} else {
		/* Not a searcher: the driver, a kick or the timeout ended the
		 * park, and no sibling knows we are awake
		 * (vrt__wake_owed_due), whether the driver gave us tasks now
		 * or gives them at the next park's first poll. */
		w->wake_owed = true;
		if (vrt__local_has_work(w))
			after_driver(w, false);
	}
	now = vb_now_ns();
	io_ran(w, now); /* the park ops poll the driver as they leave */
	w->active_start = now;
	w->batch_start = now;
	w->batch_polls = 0;
	vrt__reload_tunables(w); /* a vrt_set_* may have come while we slept */
out:
	w->in_io = false;
}

void vrt__io_phase(struct vrt_worker *w, enum vrt_io_step step)
{
	if (step == VRT_IO_REAP)
		io_reap(w);
	else
		park(w);
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
	.flush = NULL,
};
