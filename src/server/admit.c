/* SPDX-License-Identifier: MIT */
/*
 * server/admit.c: admission by measured delay (stages.on_full = codel),
 * CoDel's rule applied to the jobs channel, and the same rule, with a
 * state of its own, to the blocking pool's queue (the _on forms; its
 * threads report the waits, blocking_shed counts its refusals).
 *
 * What is measured: each job's wait in `jobs`, from its parse (when it is
 * queued; codel never holds a job back) to the moment an exec task takes
 * it, reported by that task (vsrv__admit_sample) - where CoDel measures a
 * packet's sojourn, at the dequeue. It is exact and per job; the runtime's
 * schedule latency is sampled (1 poll in 64, every task's, connections'
 * too) and measures the run queue, which a job waiting for an executor
 * never enters.
 *
 * The rule: time is cut into intervals of codel_interval_ms (the first job
 * taken after an interval's end closes it). When the least wait of a whole
 * interval was above codel_target_ms, the queue is standing, not a burst
 * (a burst drains within the interval and leaves one short wait in it):
 * the server is *overloaded*. It stays so while an interval's least wait
 * is above the target or jobs had to be refused in it; an interval with a
 * short wait and no refusal ends it. While overloaded, a job that waited
 * more than twice the target is refused (503 with Retry-After, counted in
 * `delay_shed` and `shed`): by its exec task when taken, unrun (CoDel's
 * drop at the dequeue: a backlog admitted before the overload was seen
 * goes at once, not at the executors' pace), and by the connections at
 * dispatch while the last job taken waited that long and `jobs` is not
 * empty (the cheap path: the job is never queued). So the jobs that run
 * wait at most about twice the target while the overload lasts, and
 * nothing is refused once the load falls (the jobs' waits are short
 * again, or the channel is empty).
 * - Twice the target, not the target: refusing at the target holds the
 *   queue there and about half of the intervals' least waits fall under
 *   it. (The idea is the "slough" of folly's CoDel.)
 * - Refusals keep the overload: a controlled queue is short, and its least
 *   wait falls under the target although the load has not; ending the
 *   overload then would let a population of clients in at once, a backlog
 *   that takes an interval to see and the executors' pace to run.
 * - Not CoDel's drop spacing (the next drop interval/sqrt(count) later):
 *   that law is made for TCP senders, which halve their rate per drop; a
 *   client refused with a 503 sends its next request anyway (an open
 *   loop), so the refusals must match the excess at once, and the queue's
 *   own wait says when they do.
 * - `jobs` not empty at dispatch: samples come only when a job is taken.
 *   Refusals at dispatch that went on with the channel empty would let no
 *   job in, so no sample would ever end them; an empty channel is no
 *   standing queue now, and the job admitted brings the next sample.
 * Which requests: only those that become jobs (echo, spin, sleep, hash,
 * gzip). What the connection answers itself (healthz, readyz, livez, 404,
 * 405, every 400 a kind decides at parse) never waits in `jobs` and is
 * never refused, so health checks keep their answers under overload. A
 * job cannot be answered sooner than an executor frees up: with every
 * executor on a long job, the jobs admitted wait for the next to finish
 * whatever the target.
 *
 * Ordering
 * Shared: struct vsrv_admit (admit.h). interval_end, min_wait, standing,
 * overloaded and shed_at_close are written by exec tasks on any worker; refusing by the
 * same, read by every connection that queues a job. All relaxed: they are
 * estimates that publish no memory; a connection that reads a stale
 * `refusing` admits or refuses one job as of a moment earlier, and two
 * exec tasks racing over an interval's end are decided by the CAS on
 * interval_end (one closes the interval; a sample that lands in the next
 * interval's minimum instead of this one's moves it by one job's wait).
 */
#include "config.h"
#include "server/internal.h"
#include "base/time.h"

bool vsrv__admit_refuses(struct vsrv *srv)
{
	/* Relaxed: advice, see the Ordering block. The channels' length
	 * (their head and tail lines, this worker's member first, up to the
	 * first that holds a job) is read only while refusing. */
	return atomic_load_explicit(&srv->admit.refusing, memory_order_relaxed) &&
	       vch_set_any(srv->jobs, vsrv__home(srv));
}

bool vsrv__admit_refuses_on(struct vsrv *srv, struct vsrv_admit *a, struct vch *ch)
{
	(void)srv;
	/* Relaxed: advice, see the Ordering block. The channel's length
	 * (its head and tail lines) is read only while refusing. */
	return atomic_load_explicit(&a->refusing, memory_order_relaxed) && vch_len(ch) > 0;
}

/* Refusals of a's queue so far, all workers (read only when an interval
 * closes): delay_shed for `jobs`, blocking_shed for the pool's. */
static uint64_t delay_shed_total(struct vsrv *srv, const struct vsrv_admit *a)
{
	enum vsrv_counter c = a == &srv->admit ? VSRV_C_delay_shed : VSRV_C_blocking_shed;
	uint64_t n = 0;

	for (unsigned w = 0; w <= srv->nworkers; w++)
		/* Relaxed: a statistic, compared with its value an interval ago. */
		n += atomic_load_explicit(&srv->ws[w].c[c], memory_order_relaxed);
	return n;
}

bool vsrv__admit_sample(struct vsrv *srv, int64_t waited_ns, int64_t now)
{
	return vsrv__admit_sample_on(srv, &srv->admit, waited_ns, now);
}

bool vsrv__admit_sample_on(struct vsrv *srv, struct vsrv_admit *a, int64_t waited_ns, int64_t now)
{
	int64_t target = (int64_t)vsrv__live(srv, codel_target_ms) * VB_NS_PER_MS;
	int64_t interval = (int64_t)vsrv__live(srv, codel_interval_ms) * VB_NS_PER_MS;
	/* Relaxed throughout: see the Ordering block. */
	int64_t end = atomic_load_explicit(&a->interval_end, memory_order_relaxed);
	bool over, refuse;

	if (waited_ns < 0)
		waited_ns = 0; /* queued after the exec task read its clock */
	if (now >= end && atomic_compare_exchange_strong_explicit(&a->interval_end, &end, now + interval,
								  memory_order_relaxed, memory_order_relaxed)) {
		/* This job closes the interval and opens the next one. */
		int64_t least = atomic_exchange_explicit(&a->min_wait, waited_ns, memory_order_relaxed);
		uint64_t shed = delay_shed_total(srv, a);
		bool refused = shed != atomic_exchange_explicit(&a->shed_at_close, shed, memory_order_relaxed);

		atomic_store_explicit(&a->standing, least, memory_order_relaxed);
		over = least > target ||
		       (refused && atomic_load_explicit(&a->overloaded, memory_order_relaxed));
		atomic_store_explicit(&a->overloaded, over, memory_order_relaxed);
	} else {
		int64_t least = atomic_load_explicit(&a->min_wait, memory_order_relaxed);

		while (waited_ns < least &&
		       !atomic_compare_exchange_weak_explicit(&a->min_wait, &least, waited_ns,
							      memory_order_relaxed, memory_order_relaxed))
			;
		over = atomic_load_explicit(&a->overloaded, memory_order_relaxed);
	}
	refuse = over && waited_ns > 2 * target;
	/* Written only when it changes: every dispatch reads this line. */
	if (atomic_load_explicit(&a->refusing, memory_order_relaxed) != refuse)
		atomic_store_explicit(&a->refusing, refuse, memory_order_relaxed);
	return refuse;
}

void vsrv__admit_stats(struct vsrv *srv, struct vsrv_stats *out)
{
	/* Relaxed: gauges. */
	int64_t standing = atomic_load_explicit(&srv->admit.standing, memory_order_relaxed);

	out->queue_delay_ns = standing > 0 ? (uint64_t)standing : 0;
	out->delay_overload = atomic_load_explicit(&srv->admit.overloaded, memory_order_relaxed);
}
