/* SPDX-License-Identifier: MIT */
/*
 * server/lane.c: the heavy lane. Every job's first slice runs on an
 * executor; a job that outlasts it (VJOB_MORE) leaves that executor for
 * the lane, a first-come-first-served queue that one runner per worker
 * (an executor whose source is the lane, not `jobs`) takes from, one job
 * at a time, stepping it to the end in slices between everything else its
 * worker runs. So light jobs never wait for a free executor behind heavy
 * ones (an executor gives a heavy job up after one slice), and heavy jobs
 * do not share their workers round-robin among themselves: at most one per
 * worker runs at a time, the rest wait in order, so a heavy job's latency
 * is its own work stretched by the light work beside it plus the heavy
 * jobs that came before it — not the work of every heavy job in flight.
 *
 * Placement: a job entering the lane goes to the runner of the worker it
 * is on when that runner is idle (no hand-over to another CPU). When that
 * runner is busy the job waits for it, first in line, until it has waited
 * stages.heavy_spread_us; from then on an idle runner of another worker
 * takes it, woken there through that worker's mailbox (vio_wake_on), so
 * a second heavy job uses a second CPU whatever the gather rule holds.
 * The wait is for the case where one worker's runner keeps up: heavy jobs
 * that come one after another (an open loop) mostly find their runner
 * free again within a millisecond, and a second worker woken for each
 * overlap is a third thread busy on the CPUs, beside the worker with the
 * connections and the clients, for nothing: on two CPUs it was what made
 * both classes' tails (bench/README.md, "E"). A backlog still spreads
 * after heavy_spread_us, checked where a job enters and by every busy
 * runner after each slice; with every runner busy a job waits its turn.
 * A runner stays on its worker: the runtime's stealing does not know
 * runners from other tasks and now and then moves one, queued behind
 * light work, to the other worker, where it then takes turns with that
 * worker's own runner, two heavy jobs on one CPU and none on the other
 * (bench/README.md, "B"). So a runner polled on another worker's thread
 * asks its own worker's mailbox to wake it there and ends its poll
 * (vsrv__lane_away, counted in lane_homes): one wake-up across per steal.
 *
 * Turns: a runner yields after each slice, and the runtime lets light work
 * (fresh tasks) run first, giving a continuation its turn after at most
 * VRT_CQ_FRESH_NS of it (doc/runtime.md, "Mixed work"): about two thirds
 * of a worker for heavy work while both classes are backlogged. While jobs
 * wait in the lane, that is too little for the heavy class to keep up (a
 * closed loop of light requests then holds heavy jobs queued for tens of
 * milliseconds), so a runner whose lane has jobs waiting takes its next
 * slice at once, without yielding, while its share of its worker's time
 * lately (both decaying over VSRV_LANE_TAU_NS) is below
 * stages.heavy_share, at most VSRV_LANE_TURN_MAX slices in a row (its
 * worker reaps I/O only between polls). Light work that comes now and then
 * leaves the runner above its share, so it still runs first. Jobs that
 * wait while another runner is idle wait for their spread (above), not
 * for want of runners, and do not start such a run: it took light work's
 * turn for a job that another worker's runner takes within a millisecond.
 * With nothing waiting, a runner still takes a short run of slices
 * (VSRV_LANE_SATURATED_TURN in a row, within its share) while the runtime
 * finds its CPUs saturated (vrt_saturated, the gather rule's verdict, as
 * in a closed loop of light requests beside heavy ones). There light work waits at
 * every slice's end, a heavy job gets about half its worker, and the next
 * heavy jobs queue behind it while it is stretched so: at 64 connections
 * of the 1 %-heavy mix the heavy p99 was 12-13 ms (a run to its end: 5-8
 * ms) and the light p99 no better for it (bench/README.md, "B: a lone
 * heavy job's short turn"). Where the CPUs have room (the gather rule's
 * verdict holds, as in an open loop) light work that comes during a run
 * would wait for it: there every slice still yields. So it does with the
 * gather rule off (nothing measures saturation then; in E's mix the runs
 * doubled the light p50 with gather off), with one worker and with
 * scheduler.stealing off: light work queued behind a run has no sibling to
 * take it (vsrv__lane_saturated). Near one worker's capacity (E's mix) the
 * runs took the light p50 from 0.35-0.43 ms to 1-4.5 with one worker; with
 * stealing off the light p99 was 7.7 ms against 3.8 (medians of 7 runs).
 * Counted: lane_turn_slices (jobs waiting), lane_run_slices (short runs).
 *
 * Behind: in a closed loop that saturates the CPUs, light-first scheduling
 * leaves the slack in the lane (clients held by heavy jobs: the lane grew
 * to ~90 jobs, 230 ms, at 256 connections of the 1 %-heavy mix). So while
 * the lane's first job has waited stages.heavy_wait_ms, a job that
 * outlasts its slice stays with its executor and takes turns there, as
 * with the lane off: heavy work then holds executors, light jobs wait in
 * `jobs` behind it, and the overload shows where back pressure, CoDel and
 * /readyz look. The runners meanwhile take their slices in a row (at most
 * VSRV_LANE_TURN_MAX) whatever their share, to drain what came first;
 * the runtime counts each of them toward a continuation's turn
 * (vrt_service_slices), so a job an executor keeps still gets its turns.
 *
 * Threading: the queue, the runners' idle flags and `closed` are under
 * lane.mu, taken when a job enters the lane and when a runner looks for
 * its next one (a few times per heavy job, never per light request), never
 * held while waking. A job in the queue belongs to the lane; the mutex
 * orders its contents between the executor that put it and the runner
 * that takes it. `waiting` and `head_t` (the first job's entry time) are
 * written under it and read relaxed by the turn rule: advice only.
 */
#include "config.h"
#include "server/internal.h"
#include "base/time.h"

#include <errno.h>
#include <stdlib.h>

int vsrv__lane_init(struct vsrv *srv)
{
	struct vsrv_lane *l = &srv->lane;

	pthread_mutex_init(&l->mu, NULL);
	l->runner = calloc(srv->nworkers, sizeof(*l->runner));
	if (!l->runner)
		return -ENOMEM;
	for (unsigned w = 0; w < srv->nworkers; w++) {
		struct vsrv_exec *x = vsrv__exec_new(srv, (int)w);

		if (!x)
			return -ENOMEM;
		vio_wake_init(&x->wake, &x->task);
		l->runner[w] = x;
	}
	return 0;
}

/* The lane's first job, in at head_t (0: none), has waited `ns` by `now`. */
static bool head_waited(int64_t head_t, int64_t now, int64_t ns)
{
	return head_t && now - head_t >= ns;
}

/* "Placement" above: that job has waited stages.heavy_spread_us (0 us:
 * at once). */
static bool spread_due(struct vsrv *srv, int64_t head_t, int64_t now)
{
	return head_waited(head_t, now, (int64_t)vsrv__live(srv, heavy_spread_us) * VB_NS_PER_US);
}

/* A runner leaves or enters its idle state (under lane.mu). */
static void runner_idle(struct vsrv_lane *l, struct vsrv_exec *x, bool idle)
{
	if (x->lane_idle == idle)
		return;
	x->lane_idle = idle;
	atomic_store_explicit(&l->idle_n, l->idle_n + (idle ? 1 : -1), memory_order_relaxed);
}

/* Wake runner x on its own worker (at once there, else by that worker's
 * mailbox), outside lane.mu. */
static void wake_runner(struct vsrv *srv, struct vsrv_exec *x)
{
	vio_wake_on(srv->io, (unsigned)x->lane_w, &x->wake);
}

/* An idle runner for the lane's first job: this worker's runner first,
 * then the others' in turn, another worker's only once that job is due
 * to spread (under lane.mu, the lane not empty; NULL: none). Marked
 * busy: the caller wakes it once the mutex is released. */
static struct vsrv_exec *pick_runner(struct vsrv *srv, int64_t now)
{
	struct vsrv_lane *l = &srv->lane;
	int self = vrt_worker_id();
	unsigned n = srv->nworkers, from = (unsigned)(self < 0 ? 0 : self);
	/* Only this worker's runner until the first job is due to spread. */
	unsigned look = spread_due(srv, l->head->lane_t, now) ? n : 1;

	for (unsigned i = 0; i < look; i++) {
		struct vsrv_exec *x = l->runner[(from + i) % n];

		if (x->lane_idle) {
			runner_idle(l, x, false);
			if (i > 0)
				VSRV_INC(srv, lane_spreads);
			return x;
		}
	}
	return NULL;
}

bool vsrv__lane_away(struct vsrv *srv, struct vsrv_exec *x)
{
	int self = vrt_worker_id();

	/* Closed: it only drops what is left, wherever it runs. */
	if (self < 0 || self == x->lane_w || x->recv_closed)
		return false;
	VSRV_INC(srv, lane_homes);
	wake_runner(srv, x);
	return true;
}

/* "Behind" above: that job has waited stages.heavy_wait_ms (0 ms: never). */
static bool lane_behind(struct vsrv *srv, int64_t head_t, int64_t now)
{
	int64_t aged = (int64_t)vsrv__live(srv, heavy_wait_ms) * VB_NS_PER_MS;

	return aged && head_waited(head_t, now, aged);
}

bool vsrv__lane_put(struct vsrv *srv, struct vsrv_job *job)
{
	struct vsrv_lane *l = &srv->lane;
	struct vsrv_exec *r;

	if (!vsrv__live(srv, heavy_lane))
		return false;
	job->next = NULL;
	job->lane_t = vb_now_ns();
	pthread_mutex_lock(&l->mu);
	/* Full for heavy_wait_ms: see "Behind" above (head_t is exact under mu). */
	if (l->closed || lane_behind(srv, atomic_load_explicit(&l->head_t, memory_order_relaxed), job->lane_t)) {
		pthread_mutex_unlock(&l->mu);
		return false;
	}
	if (l->tail) {
		l->tail->next = job;
	} else {
		l->head = job;
		atomic_store_explicit(&l->head_t, job->lane_t, memory_order_relaxed);
	}
	l->tail = job;
	atomic_store_explicit(&l->waiting, l->waiting + 1, memory_order_relaxed);
	r = pick_runner(srv, job->lane_t);
	pthread_mutex_unlock(&l->mu);
	VSRV_INC(srv, lane_jobs);
	if (r)
		wake_runner(srv, r);
	return true;
}

struct vsrv_job *vsrv__lane_take(struct vsrv *srv, struct vsrv_exec *x)
{
	struct vsrv_lane *l = &srv->lane;
	struct vsrv_job *job;

	pthread_mutex_lock(&l->mu);
	job = l->head;
	if (job) {
		l->head = job->next;
		if (!l->head)
			l->tail = NULL;
		atomic_store_explicit(&l->head_t, l->head ? l->head->lane_t : 0, memory_order_relaxed);
		atomic_store_explicit(&l->waiting, l->waiting - 1, memory_order_relaxed);
		runner_idle(l, x, false);
	} else if (l->closed) {
		x->recv_closed = true;
	} else {
		/* Whoever puts the next job, or finds it due to spread,
		 * clears this and wakes us. */
		runner_idle(l, x, true);
	}
	pthread_mutex_unlock(&l->mu);
	if (job) {
		job->next = NULL;
		VSRV_ADD(srv, lane_wait_ns, (uint64_t)(vb_now_ns() - job->lane_t));
	}
	return job;
}

void vsrv__lane_account(struct vsrv_exec *x, int64_t now, int64_t ran)
{
	int64_t el = now - x->sh_t;

	x->sh_t = now;
	if (el < ran) { /* the first slice */
		x->sh_busy = x->sh_wall = ran;
		return;
	}
	if (el >= VSRV_LANE_TAU_NS) { /* idle for a whole window before it */
		x->sh_busy = ran;
		x->sh_wall = VSRV_LANE_TAU_NS;
		return;
	}
	/* Both decay linearly over VSRV_LANE_TAU_NS. */
	x->sh_busy = x->sh_busy - x->sh_busy * el / VSRV_LANE_TAU_NS + ran;
	x->sh_wall = x->sh_wall - x->sh_wall * el / VSRV_LANE_TAU_NS + el;
}

/* "Placement" above: the lane's first job has waited heavy_spread_us for
 * a busy runner while another is idle: wake that one for it. */
static void spread(struct vsrv *srv, int64_t now)
{
	struct vsrv_lane *l = &srv->lane;
	struct vsrv_exec *r = NULL;

	pthread_mutex_lock(&l->mu);
	if (l->head && !l->closed)
		r = pick_runner(srv, now);
	pthread_mutex_unlock(&l->mu);
	if (r)
		wake_runner(srv, r);
}

/* Its share of its worker lately is below stages.heavy_share. */
static bool below_share(struct vsrv *srv, const struct vsrv_exec *x)
{
	return x->sh_busy * 100 < (int64_t)vsrv__live(srv, heavy_share) * x->sh_wall;
}

bool vsrv__lane_saturated(struct vsrv *srv)
{
	return srv->nworkers > 1 && vrt_stealing(srv->rt) && vrt_saturated(srv->rt);
}

enum vsrv_lane_next vsrv__lane_more(struct vsrv *srv, struct vsrv_exec *x, int64_t now, bool saturated,
				    unsigned *turn)
{
	/* Relaxed: advice; a stale count or time moves the turn by a slice,
	 * or the spread to the next slice (spread() looks again under mu). */
	uint64_t waiting = atomic_load_explicit(&srv->lane.waiting, memory_order_relaxed);
	int64_t head_t = atomic_load_explicit(&srv->lane.head_t, memory_order_relaxed);
	uint32_t idle = atomic_load_explicit(&srv->lane.idle_n, memory_order_relaxed);

	if (waiting && idle && spread_due(srv, head_t, now))
		spread(srv, now);

	/* Saturated (see "Turns"): a short run of slices, within the share. */
	if (!waiting) {
		if (saturated && ++*turn < VSRV_LANE_SATURATED_TURN && below_share(srv, x))
			return VSRV_LANE_RUN;
		return VSRV_LANE_YIELD;
	}
	if (++*turn >= VSRV_LANE_TURN_MAX)
		return VSRV_LANE_YIELD;
	/* Behind (see above): the heavy class is where the CPUs fall
	 * short, so a runner takes its slices in a row whatever its share. */
	if (lane_behind(srv, head_t, now))
		return VSRV_LANE_TURN;
	/* A job that waits while another runner is idle waits for its
	 * spread ("Placement"), not for want of runners: the light work
	 * beside this one comes first, as with nothing waiting. */
	if (idle)
		return VSRV_LANE_YIELD;
	return below_share(srv, x) ? VSRV_LANE_TURN : VSRV_LANE_YIELD;
}

void vsrv__lane_close(struct vsrv *srv)
{
	struct vsrv_lane *l = &srv->lane;

	if (!l->runner)
		return;
	pthread_mutex_lock(&l->mu);
	l->closed = true;
	pthread_mutex_unlock(&l->mu);
	/* Every runner looks again: it ends once the queue is empty. */
	for (unsigned w = 0; w < srv->nworkers; w++)
		if (l->runner[w] && l->runner[w]->spawned)
			vrt_task_wake(&l->runner[w]->task);
}

uint64_t vsrv__lane_waiting(struct vsrv *srv)
{
	uint64_t n;

	if (!srv->lane.runner)
		return 0;
	/* Relaxed: a gauge. */
	n = atomic_load_explicit(&srv->lane.waiting, memory_order_relaxed);
	return n;
}

void vsrv__lane_free(struct vsrv *srv)
{
	struct vsrv_lane *l = &srv->lane;
	struct vsrv_job *job;

	if (!l->runner)
		return;
	/* Jobs left behind by cancelled runners. */
	while ((job = l->head)) {
		l->head = job->next;
		vsrv__job_free(srv, job);
	}
	for (unsigned w = 0; w < srv->nworkers; w++)
		if (l->runner[w])
			vrt_task_unref(&l->runner[w]->task);
	free(l->runner);
	l->runner = NULL;
	pthread_mutex_destroy(&l->mu);
}
