/* SPDX-License-Identifier: MIT */
/*
 * server/blocking.c: the blocking pool, where the jobs of blocking kinds
 * (VOLTD_KIND_BLOCKING: a database driver, a synchronous SDK) run every
 * callback (start, each step, fini), so that nothing they do can hold a
 * runtime worker. [modules] blocking_threads plain threads, started only
 * when a registered kind is blocking, each taking jobs from one bounded
 * channel, the pool's queue ([modules] blocking_queue values): the
 * connection sends a blocking kind's job there as it sends any other job
 * to `jobs` (request.c), so a full queue pushes back the same way
 * (stages.on_full: wait stops reading that connection until there is
 * room, shed answers 503 with Retry-After, codel sheds as shed and by the
 * queue's measured wait, its own CoDel state). A thread runs the job it
 * took to its end:
 *   MORE  - steps it again at once (the thread is the job's; a blocking
 *           kind's slice is whatever it blocks for);
 *   SLEEP - sleeps the thread until the wake time (clock_nanosleep),
 *           looking at the job's connection every VSRV_POOL_SLEEP_CHECK_NS;
 *   DONE  - does a writer's work itself: encodes the head and deposits the
 *           job in its connection's reorder slot, waking the connection
 *           ([S1], stages.c); no `replies` hop, and nothing to wait for.
 * A job whose connection is gone is dropped at the next callback boundary
 * (fini runs here, on this thread). Each callback is timed (kinds.c), the
 * wait in the queue is counted and recorded (blocking_jobs,
 * blocking_wait_ns, `hist blocking_wait`), busy threads are a gauge.
 *
 * Shutdown (vsrv_stop, after the connections are done or cut): the queue
 * closes, the threads drop what is still queued and end; a thread still
 * inside a step after VSRV_POOL_JOIN_MS is left running and named in the
 * log (pool.stuck: vsrv_free then frees nothing it could touch). Every
 * job is thus answered, or counted by its cut connection
 * (requests_dropped) and dropped here (results_dropped).
 *
 * Threading: the pool's threads; vsrv__pool_* on the control thread as
 * vsrv_new, _start, _stop and _free. A job is one thread's at a time,
 * handed over by the queue and by its connection's reorder slot.
 *
 * Ordering: `busy` and `doing` are relaxed (a gauge, and a name for a log
 * line); the queue orders a job's contents to the thread that takes it,
 * and the slot's [S1] (vsrv__job_deposit) to its connection.
 */
#include "config.h"
#include "server/internal.h"
#include "base/time.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A job whose connection is gone: count and free it (on this thread:
 * fini, when owed, is the kind's to run here). */
static void pool_drop(struct vsrv *srv, struct vsrv_job *job)
{
	VSRV_INC(srv, results_dropped);
	vsrv__job_free(srv, job);
}

/* A finished job (or one refused by codel): this thread does a writer's
 * work (encode, deposit in the connection's slot, wake it) rather than
 * send it to `replies`, whose sets have no blocking form for a thread. */
static void pool_reply(struct vsrv *srv, struct vsrv_job *job)
{
	if (vsrv__job_dead(job)) {
		pool_drop(srv, job);
		return;
	}
	vsrv__job_stage(srv, job, VSRV_J_WRITE);
	vsrv__trace_job(job, VSRV_TP_WRITER);
	vsrv__job_encode(srv, job);
	vsrv__job_deposit(srv, job);
}

/* Sleep until wake_ns (SLEEP). false: the connection went meanwhile. */
static bool pool_sleep(const struct vsrv_job *job, int64_t wake_ns)
{
	for (;;) {
		int64_t now = vb_now_ns();

		if (vsrv__job_dead(job))
			return false;
		if (now >= wake_ns)
			return true;
		int64_t until = wake_ns - now > VSRV_POOL_SLEEP_CHECK_NS ? now + VSRV_POOL_SLEEP_CHECK_NS : wake_ns;
		struct timespec ts = { .tv_sec = until / (1000 * VB_NS_PER_MS), .tv_nsec = until % (1000 * VB_NS_PER_MS) };
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
	}
}

/* Run a job to its end: every callback on this thread. */
static void pool_run(struct vsrv *srv, struct vsrv_job *job, int64_t now)
{
	const struct vjob_kind *k = vjob_kind_of(job->vj);

	for (;;) {
		if (vsrv__job_dead(job)) {
			pool_drop(srv, job);
			return;
		}
		enum vjob_step js = vjob_step(job->vj, vjob_slice_deadline(&srv->jcfg, now));
		int64_t end = vb_now_ns();

		vsrv__kind_slice(srv, k, end - now);
		vsrv__trace_job_slice(job, now, js == VJOB_DONE);
		switch (js) {
		case VJOB_DONE:
			pool_reply(srv, job);
			return;
		case VJOB_MORE:
			now = end;
			break;
		case VJOB_SLEEP:
			if (!pool_sleep(job, vjob_wake_ns(job->vj))) {
				pool_drop(srv, job);
				return;
			}
			now = vb_now_ns();
			break;
		}
	}
}

static void pool_take(struct vsrv *srv, struct vsrv_job *job, unsigned i)
{
	struct vsrv_pool *p = &srv->pool;
	int64_t now = vb_now_ns();
	int64_t waited = now > job->to.t0 ? now - job->to.t0 : 0;

	VSRV_INC(srv, blocking_jobs);
	VSRV_ADD(srv, blocking_wait_ns, waited);
	vb_hist_record(&p->wait, (uint64_t)waited);
	vsrv__trace_job(job, VSRV_TP_EXEC);
	if (vsrv__job_dead(job)) {
		pool_drop(srv, job);
		return;
	}
	/* codel: the wait in this queue, as exec tasks measure `jobs`'. */
	if (srv->cfg.on_full == VSRV_ON_FULL_CODEL && vsrv__admit_sample_on(srv, &p->admit, waited, now)) {
		VSRV_INC(srv, delay_shed);
		VSRV_INC(srv, shed);
		VSRV_INC(srv, blocking_shed);
		job->refused = true;
		pool_reply(srv, job);
		return;
	}
	/* Relaxed: a gauge, and a name for vsrv_stop's log line. */
	atomic_fetch_add_explicit(&p->busy, 1, memory_order_relaxed);
	atomic_store_explicit(&p->doing[i], vjob_kind_of(job->vj)->label, memory_order_relaxed);
	pool_run(srv, job, now);
	atomic_store_explicit(&p->doing[i], NULL, memory_order_relaxed);
	atomic_fetch_sub_explicit(&p->busy, 1, memory_order_relaxed);
}

struct pool_arg {
	struct vsrv *srv;
	unsigned i;
};

static void *pool_main(void *arg)
{
	struct pool_arg a = *(struct pool_arg *)arg;
	char name[16];
	uint64_t v;

	free(arg);
	/* Named for top -H and perf sched, as the workers are. */
	snprintf(name, sizeof(name), "vsrv-block%u", a.i);
	pthread_setname_np(pthread_self(), name);
	vjob_thread_blocking(a.i);
	/* Until the queue is closed and empty: what is left at the stop is
	 * dropped by pool_take (its connection is gone). */
	while (vch_recv(a.srv->pool.q, &v) == VCH_OK)
		pool_take(a.srv, vch_ptr(v), a.i);
	return NULL;
}

int vsrv__pool_new(struct vsrv *srv)
{
	struct vsrv_pool *p = &srv->pool;
	bool any = false;

	vb_hist_init(&p->wait);
	atomic_init(&p->busy, 0);
	for (size_t i = 0; i < vjob_kind_count() && !any; i++)
		any = vjob_kind_at(i)->blocking;
	if (!any)
		return 0;
	if (!srv->cfg.blocking_threads || !srv->cfg.blocking_queue)
		return -EINVAL;
	p->threads = calloc(srv->cfg.blocking_threads, sizeof(*p->threads));
	p->doing = calloc(srv->cfg.blocking_threads, sizeof(*p->doing));
	if (!p->threads || !p->doing)
		return -ENOMEM;
	return vch_new(srv->cfg.blocking_queue, &p->q);
}

int vsrv__pool_start(struct vsrv *srv)
{
	struct vsrv_pool *p = &srv->pool;

	for (unsigned i = 0; p->q && i < srv->cfg.blocking_threads; i++) {
		struct pool_arg *a = malloc(sizeof(*a));
		int rc;

		if (!a)
			return -ENOMEM;
		*a = (struct pool_arg){ srv, i };
		rc = pthread_create(&p->threads[i], NULL, pool_main, a);
		if (rc) {
			free(a);
			return -rc;
		}
		p->n++;
	}
	return 0;
}

void vsrv__pool_stop(struct vsrv *srv)
{
	struct vsrv_pool *p = &srv->pool;
	struct timespec ts;

	if (!p->q)
		return;
	vch_close(p->q);
	clock_gettime(CLOCK_REALTIME, &ts); /* pthread_timedjoin_np's clock */
	ts.tv_sec += VSRV_POOL_JOIN_MS / 1000;
	ts.tv_nsec += (long)(VSRV_POOL_JOIN_MS % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	for (unsigned i = 0; i < p->n; i++) {
		if (pthread_timedjoin_np(p->threads[i], NULL, &ts) == 0)
			continue;
		/* Relaxed: a name for the line. */
		const char *doing = atomic_load_explicit(&p->doing[i], memory_order_relaxed);
		vb_err("blocking pool: thread %u is still inside a step%s%s%s %d ms after the drain; leaving it",
		       i, doing ? " of kind " : "", doing ? doing : "", doing ? "," : "", VSRV_POOL_JOIN_MS);
		pthread_detach(p->threads[i]);
		p->stuck++;
	}
	p->n = 0;
}

void vsrv__pool_free(struct vsrv *srv)
{
	struct vsrv_pool *p = &srv->pool;
	uint64_t v;

	if (p->q) {
		/* Jobs never taken (the threads did not start): nothing of
		 * the kind ran for them. */
		while (vch_try_recv(p->q, &v) == VCH_OK)
			vsrv__job_free(srv, vch_ptr(v));
		vch_free(p->q);
	}
	free(p->threads);
	free((void *)p->doing);
}

void vsrv__pool_stats(struct vsrv *srv, struct vsrv_stats *out)
{
	struct vsrv_pool *p = &srv->pool;

	out->blocking_threads = p->q ? srv->cfg.blocking_threads : 0;
	/* Relaxed: a gauge. */
	out->blocking_busy = atomic_load_explicit(&p->busy, memory_order_relaxed);
	if (p->q)
		vch_stats_get(p->q, &out->blocking);
	else
		memset(&out->blocking, 0, sizeof(out->blocking));
}

void vsrv_blocking_wait_hist(struct vsrv *srv, struct vb_hist_snap *out)
{
	vb_hist_snapshot(&srv->pool.wait, out);
}
