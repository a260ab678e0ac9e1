/* SPDX-License-Identifier: MIT */
/*
 * rt/monitor.c: the runtime's measurements beyond counters: each worker's
 * thread CPU time, the sampled schedule-latency and poll-duration
 * histograms (recorded in worker.c, read here), and the stall monitor: a
 * thread outside the workers that flags a worker stuck in one poll.
 *
 * A stall: a worker that is in a poll (cur_vt set, not parked) whose poll
 * count has not moved for stall_warn_ms. The monitor ticks every
 * stall_warn_ms / 2 (10 ms .. 1 s); a poll is first "seen" at a tick and
 * confirmed at the next one with the same count, so the age it reports is a
 * lower bound (the poll began up to one tick earlier). The thread's CPU time
 * over the confirmed window tells a spinning task (at least 1/16 of the wall
 * time on CPU) from a thread that sleeps in the poll (state S or D in
 * /proc: a blocking call; flagged too) and from a runnable thread that gets
 * no CPU (state R, little CPU: the machine is overloaded; not a stall of
 * voltd's making, reported by no flag, re-judged at every tick). A flagged
 * stall is logged once (and its end once), counted, published for stats
 * and vrt_health. A worker seen in one poll at two ticks (flagged or not)
 * whose ring (fresh or continuations) is not empty gets a parked sibling
 * woken, every such tick, to steal it. The LIFO slot, a global batch
 * prefetched at the injection-queue tick while local work was queued (a
 * batch taken with an empty ring goes to the ring, stealable) and the
 * yielded-task list are owner-only and wait for the poll to end (at most
 * 1 + global_batch_max - 1 tasks plus the yields of the current tick), as
 * do completions on the worker's own io_uring.
 *
 * Threading: vrt__worker_measure_* on the worker thread; the tick on the
 * monitor thread; vrt_health / vrt_hist_snapshot / vrt__worker_cpu_ns on
 * any thread.
 *
 * Ordering: every shared variable here is a statistic or a hint, accessed
 * relaxed, each with one writer: the worker's counters, cur_vt, label and
 * parked (worker.c, internal.h) and the published vrt_mon_worker fields
 * (monitor thread). A stale read costs at most one tick of detection delay
 * or a snapshot value one event old; nothing is published through them.
 *   [M1] stop: the stopper's release store pairs with the monitor's
 *        acquire load after its event wait (the event orders too).
 *   [M3]/[M4] idle: a tick that finds every worker parked stores
 *        mon.deep = 1, then a seq_cst fence [M4], then reads every parked
 *        flag again; a worker leaving its park stores parked = 0, then a
 *        seq_cst fence [M3] (internal.h, vrt__park_wait), then reads
 *        mon.deep. Store buffering: at least one side sees the other's
 *        store, so either the monitor keeps its short period or the worker
 *        wakes it. A poll (and so a stall) starts only after an unpark, so
 *        an idle runtime costs no monitor ticks but MON_DEEP_MS apart.
 *   cpu_clock / tid: written by the worker before [W8] (worker.c), read
 *   after vrt_new returned; workers_joined: release store after the joins
 *   in vrt_shutdown pairs with the acquire load in vrt__worker_cpu_ns [M2].
 */
#include "config.h"
#include "rt/internal.h"
#include "base/log.h"
#include "base/time.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MON_TICK_MIN_MS 10u
#define MON_TICK_MAX_MS 1000u
#define MON_DEEP_MS 10000u /* sleep while every worker is parked (a safety bound) */

const char *const vrt_worker_state_names[] = {
	[VRT_WS_RUNNING] = "running", [VRT_WS_SEARCHING] = "searching", [VRT_WS_PARKED] = "parked", NULL,
};

const char *const vrt_stall_kind_names[] = {
	[VRT_STALL_NONE] = "none", [VRT_STALL_SPINNING] = "spinning", [VRT_STALL_BLOCKED] = "blocked", NULL,
};

const char *vrt_worker_state_name(enum vrt_worker_state s)
{
	return (unsigned)s <= VRT_WS_PARKED ? vrt_worker_state_names[s] : "?";
}

const char *vrt_stall_kind_name(enum vrt_stall_kind k)
{
	return (unsigned)k <= VRT_STALL_BLOCKED ? vrt_stall_kind_names[k] : "?";
}

/* --------------------------------------------------------- worker side */

void vrt__worker_measure_start(struct vrt_worker *w)
{
	vb_hist_init(&w->h_sched);
	vb_hist_init(&w->h_poll);
	if (pthread_getcpuclockid(pthread_self(), &w->cpu_clock) != 0)
		w->cpu_clock = CLOCK_THREAD_CPUTIME_ID; /* never: read as 0 below */
	w->tid = (pid_t)syscall(SYS_gettid);
	/* The thread's name (comm: top -H, perf sched, /proc/PID/task/TID)
	 * says which worker it is. */
	char name[16];
	snprintf(name, sizeof(name), "vrt-w%u", w->id);
	pthread_setname_np(pthread_self(), name);
}

static uint64_t ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

void vrt__worker_measure_stop(struct vrt_worker *w)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
		/* relaxed: statistic (read after the join, or as a fallback). */
		atomic_store_explicit(&w->c.cpu_final_ns, ts_ns(&ts), memory_order_relaxed);
}

uint64_t vrt__worker_cpu_ns(struct vrt *rt, struct vrt_worker *w)
{
	struct timespec ts;

	/* [M2] acquire: pairs with the release store after the joins. */
	if (!atomic_load_explicit(&rt->workers_joined, memory_order_acquire) &&
	    w->cpu_clock != CLOCK_THREAD_CPUTIME_ID &&
	    clock_gettime(w->cpu_clock, &ts) == 0)
		return ts_ns(&ts);
	/* The thread has ended (EINVAL) or is joined: its last value.
	 * relaxed: statistic. */
	return atomic_load_explicit(&w->c.cpu_final_ns, memory_order_relaxed);
}

/* ------------------------------------------------------------- histograms */

int vrt_hist_snapshot(struct vrt *rt, enum vrt_hist_kind kind, int worker,
		      struct vb_hist_snap *out)
{
	unsigned from = worker < 0 ? 0 : (unsigned)worker;
	unsigned to = worker < 0 ? rt->nworkers : (unsigned)worker + 1;

	if ((kind != VRT_HIST_SCHED && kind != VRT_HIST_POLL) ||
	    worker < VRT_HIST_ALL || (worker >= 0 && (unsigned)worker >= rt->nworkers))
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	for (unsigned i = from; i < to; i++) {
		struct vrt_worker *w = rt->workers[i];
		vb_hist_snapshot_add(kind == VRT_HIST_SCHED ? &w->h_sched : &w->h_poll, out);
	}
	return 0;
}

void vrt_worker_task(struct vrt *rt, unsigned worker, const char **task, const char **label)
{
	struct vrt_worker *w;
	const struct vrt_task_vtable *vt;

	*task = *label = NULL;
	if (worker >= rt->nworkers)
		return;
	w = rt->workers[worker];
	/* relaxed (both): hints, see Ordering. */
	vt = atomic_load_explicit(&w->c.cur_vt, memory_order_relaxed);
	if (!vt)
		return;
	*task = vt->name;
	*label = atomic_load_explicit(&w->c.label, memory_order_relaxed);
}

/* ---------------------------------------------------------------- health */

void vrt_health(struct vrt *rt, struct vrt_health *out)
{
	int64_t now = vb_now_ns();

	memset(out, 0, sizeof(*out));
	if (!rt->mon.w)
		return;
	for (unsigned i = 0; i < rt->nworkers; i++) {
		struct vrt_mon_worker *m = &rt->mon.w[i];
		/* relaxed (both): published statistics (see Ordering). */
		int64_t since = atomic_load_explicit(&m->stall_since_ns, memory_order_relaxed);

		out->stalls_total += atomic_load_explicit(&m->stalls, memory_order_relaxed);
		if (since == 0)
			continue;
		uint64_t ms = now > since ? (uint64_t)(now - since) / 1000000u : 0;
		if (out->stalled++ == 0 || ms > out->max_stall_ms) {
			out->max_stall_ms = ms;
			out->max_stall_worker = i;
		}
	}
}

int vrt_set_stall_warn_ms(struct vrt *rt, unsigned ms)
{
	if (!rt->mon.w || ms > VRT_STALL_WARN_MS_MAX)
		return -EINVAL;
	/* relaxed: a tunable, read at the next tick. */
	atomic_store_explicit(&rt->mon.warn_ms, ms, memory_order_relaxed);
	return 0;
}

/* ---------------------------------------------------------------- monitor */

/* The scheduler state letter of a thread ('R', 'S', 'D', ...), '?' if unknown. */
static char thread_state(pid_t tid)
{
	char path[64], buf[512];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return '?';
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return '?';
	buf[n] = '\0';
	/* "tid (comm) S ...": comm may hold ')' itself, so the last one. */
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] ? p[2] : '?';
}

static enum vrt_stall_kind classify(struct vrt *rt, struct vrt_worker *w,
				    struct vrt_mon_worker *m, int64_t now, uint64_t *cpu_ms)
{
	uint64_t cpu = vrt__worker_cpu_ns(rt, w);
	uint64_t cpu_d = cpu > m->cpu_at_first_ns ? cpu - m->cpu_at_first_ns : 0;
	uint64_t wall = (uint64_t)(now - m->cpu_since_ns);
	char st;

	*cpu_ms = cpu_d / 1000000u;
	if (wall > 0 && cpu_d * 16 >= wall)
		return VRT_STALL_SPINNING;
	st = thread_state(w->tid);
	if (st == 'S' || st == 'D')
		return VRT_STALL_BLOCKED;
	return VRT_STALL_NONE; /* runnable without CPU: the machine is busy */
}

static void flag_stall(struct vrt *rt, unsigned i, struct vrt_mon_worker *m,
		       enum vrt_stall_kind kind, int64_t now, uint64_t cpu_ms)
{
	struct vrt_worker *w = rt->workers[i];
	/* relaxed (all): hints, see Ordering. */
	const struct vrt_task_vtable *vt = atomic_load_explicit(&w->c.cur_vt, memory_order_relaxed);
	const char *label = atomic_load_explicit(&w->c.label, memory_order_relaxed);
	const char *task = vt && vt->name ? vt->name : "?";

	m->flagged = true;
	atomic_store_explicit(&m->stall_kind, kind, memory_order_relaxed);
	atomic_store_explicit(&m->stall_since_ns, m->first_seen_ns, memory_order_relaxed);
	atomic_store_explicit(&m->stalls, atomic_load_explicit(&m->stalls, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	vb_warn("rt: worker %u stalled (%s): one poll of task %s%s%s%s has run %" PRIu64
		" ms (thread CPU %" PRIu64 " ms in the last %" PRIu64 " ms); waking a sibling to steal its queue",
		i, vrt_stall_kind_name(kind), task, label ? " (" : "", label ? label : "",
		label ? ")" : "", (uint64_t)(now - m->first_seen_ns) / 1000000u, cpu_ms,
		(uint64_t)(now - m->cpu_since_ns) / 1000000u);
}

static void unflag_stall(unsigned i, struct vrt_mon_worker *m, int64_t now)
{
	m->flagged = false;
	/* relaxed: see Ordering. */
	atomic_store_explicit(&m->stall_since_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&m->stall_kind, VRT_STALL_NONE, memory_order_relaxed);
	vb_notice("rt: worker %u: the stalled poll ended after at least %" PRIu64 " ms",
		  i, (uint64_t)(now - m->first_seen_ns) / 1000000u);
}

/* Is every worker parked now? relaxed: hints, see Ordering ([M4] orders
 * the reads that decide a long sleep). */
static bool all_parked(struct vrt *rt)
{
	for (unsigned i = 0; i < rt->nworkers; i++)
		if (!atomic_load_explicit(&rt->workers[i]->c.parked, memory_order_relaxed))
			return false;
	return true;
}

/* The next sleep of the monitor: period, or MON_DEEP_MS while every worker
 * is parked and none is flagged ([M4]; a worker's unpark ends it, [M3]). */
static int64_t next_sleep_ms(struct vrt *rt, unsigned period)
{
	for (unsigned i = 0; i < rt->nworkers; i++)
		if (rt->mon.w[i].flagged)
			return period;
	if (!all_parked(rt))
		return period;
	/* relaxed: ordered by the fence below. */
	atomic_store_explicit(&rt->mon.deep, 1, memory_order_relaxed);
	/* [M4] seq_cst fence: orders the deep = 1 store before the parked
	 * reads below; pairs with the workers' [M3] in vrt__park_wait. */
	vrt__mon_fence(rt);
	if (all_parked(rt))
		return MON_DEEP_MS;
	/* relaxed: a worker woke meanwhile; it may also have cleared it. */
	atomic_store_explicit(&rt->mon.deep, 0, memory_order_relaxed);
	return period;
}

static void tick(struct vrt *rt, uint64_t warn_ns)
{
	int64_t now = vb_now_ns();
	/* [W7]-style acquire not needed: relaxed is enough for a hint whether
	 * waking siblings still makes sense (vrt_shutdown wakes them all). */
	bool running = atomic_load_explicit(&rt->phase, memory_order_relaxed) == VRT_RUNNING;

	for (unsigned i = 0; i < rt->nworkers; i++) {
		struct vrt_worker *w = rt->workers[i];
		struct vrt_mon_worker *m = &rt->mon.w[i];
		/* relaxed (all three): single-writer hints, see Ordering. */
		uint64_t polls = atomic_load_explicit(&w->c.polls, memory_order_relaxed);
		bool in_poll = atomic_load_explicit(&w->c.cur_vt, memory_order_relaxed) != NULL &&
			       !atomic_load_explicit(&w->c.parked, memory_order_relaxed);

		if (in_poll && polls == m->last_polls && m->seen_in_poll) {
			uint64_t age = (uint64_t)(now - m->first_seen_ns);
			uint64_t cpu_ms;
			enum vrt_stall_kind k;

			/* relaxed: statistic. */
			atomic_store_explicit(&m->poll_age_ns, age, memory_order_relaxed);
			if (m->cpu_at_first_ns == UINT64_MAX) {
				/* Confirmed now: the CPU window starts here. */
				m->cpu_at_first_ns = vrt__worker_cpu_ns(rt, w);
				m->cpu_since_ns = now;
			}
			if (!warn_ns && m->flagged)
				unflag_stall(i, m, now); /* detection turned off */
			if (!m->flagged && warn_ns && age >= warn_ns &&
			    (k = classify(rt, w, m, now, &cpu_ms)) != VRT_STALL_NONE)
				flag_stall(rt, i, m, k, now, cpu_ms);
			/* A poll seen at two ticks (flagged or not: the thread
			 * may be runnable without CPU, or detection off) holds
			 * up its ring: wake a parked sibling to steal it. */
			/* The gather rule spreads while a worker is held up
			 * (gather_tick): its queue to siblings, new connections
			 * to the others. */
			m->held = true;
			if (running && (vrt__wsq_len(&w->q) != 0 || vrt__wsq_len(&w->cq) != 0))
				vrt__notify_parked(rt);
			continue;
		}
		if (m->flagged)
			unflag_stall(i, m, now);
		m->held = false;
		m->seen_in_poll = in_poll;
		m->last_polls = polls;
		m->first_seen_ns = now;
		m->cpu_at_first_ns = UINT64_MAX;
		/* relaxed: statistic. */
		atomic_store_explicit(&m->poll_age_ns, 0, memory_order_relaxed);
	}
}

/*
 * The gather rule's measurements (doc/runtime.md, internal.h): each
 * worker's CPU share since the last tick (its thread's CPU time over the
 * wall time), an EWMA over ticks (halved each tick: some 2 periods), and
 * the verdict the workers read: spread while a worker is saturated, while
 * two workers are busy, or while a worker is held up in one poll (tick);
 * and the width for new connections, whose change calls the spread hook.
 */
_Atomic int vrt__test_spreading = -1;

static void gather_tick(struct vrt *rt, int64_t now)
{
	struct vrt_monitor *mon = &rt->mon;
	int64_t dt = now - mon->gather_ns;
	unsigned busy = 0, saturated = 0, width;
	bool spreading, held_up = false, first = mon->gather_ns == 0;
	int test;

	for (unsigned i = 0; i < rt->nworkers; i++) {
		struct vrt_mon_worker *m = &mon->w[i];
		uint64_t cpu = vrt__worker_cpu_ns(rt, rt->workers[i]);

		if (!first && dt > 0) {
			uint64_t pct = cpu > m->gather_cpu_ns ? (cpu - m->gather_cpu_ns) * 100 / (uint64_t)dt : 0;

			m->busy_pct = (m->busy_pct + (unsigned)(pct > 100 ? 100 : pct)) / 2;
		}
		m->gather_cpu_ns = cpu;
		{
			/* relaxed: a single writer's counter. */
			uint64_t parks = atomic_load_explicit(&rt->workers[i]->c.parks, memory_order_relaxed);

			m->unparked = parks == m->gather_parks;
			m->gather_parks = parks;
		}
		{
			/* The tasks' wait to run (the sampled schedule latency,
			 * h_sched): only a worker whose tasks queue gains from a
			 * sibling; one that is busy because its clients keep it
			 * so (each task runs soon after it is woken) does not. */
			struct vb_hist_snap *hs = &mon->snap;
			uint64_t dn, ds;

			vb_hist_snapshot(&rt->workers[i]->h_sched, hs);
			dn = hs->count - m->gather_sched_n;
			ds = hs->sum - m->gather_sched_sum;
			/* One schedule in VRT_HIST_SAMPLE_EVERY is timed: a tick
			 * without a sample keeps the last figure (a worker that
			 * went idle is not busy either). */
			if (!first && dn)
				m->queue_ns = (m->queue_ns + ds / dn) / 2;
			m->gather_sched_n = hs->count;
			m->gather_sched_sum = hs->sum;
		}
		/* Held up in one poll counts as busy, spinning or not: new
		 * connections must go past it. */
		busy += m->busy_pct >= VRT_GATHER_BUSY_PCT || m->held;
		held_up |= m->held;
		/* Saturated: busy, and its work waits (its tasks' wait to run,
		 * or no moment without work since the last tick). */
		saturated += m->busy_pct >= VRT_GATHER_SATURATED_PCT &&
			     (m->queue_ns >= VRT_GATHER_QUEUE_NS || m->unparked);
	}
	mon->gather_ns = now;
	if (first)
		return;
	/* A worker held up in one poll (tick) spreads whatever the shares
	 * say: its queue would wait for the poll's end. Two busy workers keep
	 * it spreading: their work spread before and still takes both
	 * (neither alone is saturated then). And a saturation spreads for
	 * VRT_GATHER_LINGER_NS after it: a load near one worker's capacity
	 * would otherwise turn the verdict at every other tick, and the jobs
	 * queued on one worker at each turn make the heavy class's tail. */
	if (saturated >= 1)
		mon->saturated_ns = now;
	spreading = held_up || busy >= 2 ||
		    (mon->saturated_ns && now - mon->saturated_ns < VRT_GATHER_LINGER_NS);
	/* relaxed: a test's setting. */
	if ((test = atomic_load_explicit(&vrt__test_spreading, memory_order_relaxed)) >= 0)
		spreading = test;
	width = busy + spreading;
	width = width < 1 ? 1 : width > rt->nworkers ? rt->nworkers : width;
	/* relaxed: a verdict read as a hint; stored only when it changes so
	 * that the workers' copies of the line stay valid. */
	if (atomic_load_explicit(&rt->spreading, memory_order_relaxed) != spreading) {
		atomic_store_explicit(&rt->spreading, spreading, memory_order_relaxed);
		if (spreading)
			atomic_store_explicit(&rt->spreads, atomic_load_explicit(&rt->spreads, memory_order_relaxed) + 1,
					      memory_order_relaxed);
	}
	/* relaxed: likewise. */
	if (atomic_load_explicit(&rt->spread_width, memory_order_relaxed) != width) {
		/* [G1] acquire: pairs with vrt_set_spread_hook's release. */
		void (*fn)(void *) = atomic_load_explicit(&rt->spread_fn, memory_order_acquire);

		atomic_store_explicit(&rt->spread_width, width, memory_order_relaxed);
		if (fn)
			/* relaxed: ordered by [G1]. */
			fn(atomic_load_explicit(&rt->spread_ctx, memory_order_relaxed));
	}
}

static void *monitor_main(void *arg)
{
	struct vrt *rt = arg;

	pthread_setname_np(pthread_self(), "vrt-monitor"); /* comm, as the workers' */
	for (;;) {
		/* relaxed: a tunable. */
		unsigned warn = atomic_load_explicit(&rt->mon.warn_ms, memory_order_relaxed);
		unsigned period = warn ? warn / 2 : MON_TICK_MAX_MS;

		if (period < MON_TICK_MIN_MS)
			period = MON_TICK_MIN_MS;
		if (period > MON_TICK_MAX_MS)
			period = MON_TICK_MAX_MS;
		vb_event_wait(&rt->mon.stop_ev, next_sleep_ms(rt, period) * VB_NS_PER_MS);
		/* relaxed: woken or timed out, the monitor ticks now. */
		atomic_store_explicit(&rt->mon.deep, 0, memory_order_relaxed);
		/* [M1] acquire: pairs with vrt__monitor_stop's release store. */
		if (atomic_load_explicit(&rt->mon.stop, memory_order_acquire))
			break;
		tick(rt, (uint64_t)warn * VB_NS_PER_MS);
		/* relaxed: a tunable. */
		if (atomic_load_explicit(&rt->t_gather, memory_order_relaxed))
			gather_tick(rt, vb_now_ns());
	}
	return NULL;
}

int vrt__monitor_start(struct vrt *rt, unsigned warn_ms)
{
	int err;

	if (!warn_ms)
		return 0;
	rt->mon.w = aligned_alloc(VB_CACHELINE, rt->nworkers * sizeof(*rt->mon.w));
	if (!rt->mon.w)
		return -ENOMEM;

	memset(rt->mon.w, 0, rt->nworkers * sizeof(*rt->mon.w));
	for (unsigned i = 0; i < rt->nworkers; i++)
		rt->mon.w[i].cpu_at_first_ns = UINT64_MAX;
	vb_event_init(&rt->mon.stop_ev);
	atomic_init(&rt->mon.stop, 0);
	atomic_init(&rt->mon.warn_ms, warn_ms);
	err = -pthread_create(&rt->mon.thread, NULL, monitor_main, rt);
	if (err)
		return err; /* mon.w is freed with the runtime */
	rt->mon.running = true;
	return 0;
}

void vrt__monitor_stop(struct vrt *rt)
{
	if (!rt->mon.running)
		return;
	/* [M1] release: pairs with the monitor's acquire load. */
	atomic_store_explicit(&rt->mon.stop, 1, memory_order_release);
	vb_event_set(&rt->mon.stop_ev);
	pthread_join(rt->mon.thread, NULL);
	rt->mon.running = false;
	/* No monitor, no current stall (the counts stay). */
	for (unsigned i = 0; i < rt->nworkers; i++)
		/* relaxed: see Ordering. */
		atomic_store_explicit(&rt->mon.w[i].stall_since_ns, 0, memory_order_relaxed);
}
