/* SPDX-License-Identifier: MIT */
/*
 * rt/rt.h: the voltd runtime: tasks, wakers, spawning, the work-stealing
 * worker pool, its park/unpark seam, statistics and live tunables.
 *
 * Threading contract:
 * - A task is polled by at most one worker at a time; its poll function runs
 *   on a worker thread and may migrate between workers between polls.
 * - vrt_task_wake / vrt_task_cancel / vrt_spawn / vrt_task_ref / unref may be
 *   called from any thread at any time (for wake: the caller holds a ref).
 * - vrt_current(), vrt_budget_consume() and vrt_worker_id() describe the
 *   calling thread; outside a worker they return NULL / true / -1.
 * Memory: a task is embedded in a caller-owned struct; the runtime never
 * allocates per task. The task's vtable drop() frees it when the last
 * reference goes away (on whatever thread drops that reference). From spawn
 * until completion the runtime holds a reference of its own; a pending task
 * also sits in the runtime's registry (one mutex per worker), so that
 * vrt_shutdown can finish or drop it: after vrt_shutdown every task spawned
 * on the runtime is complete, and wakes of complete tasks are ignored.
 * Scheduling: see doc/runtime.md and the Ordering blocks of worker.c,
 * task.c and wsq.c.
 */
#ifndef VOLTD_RT_RT_H
#define VOLTD_RT_RT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/histogram.h"
#include "base/metric.h"

struct vrt;
struct vrt_task;

enum vrt_poll {
	VRT_PENDING = 0, /* waiting: some waker will fire vrt_task_wake() */
	VRT_READY = 1,   /* finished: never polled again */
	VRT_YIELD = 2,   /* wants to run again soon, behind other work */
};

struct vrt_task_vtable {
	/* Runs on a worker thread; never concurrently with itself. */
	enum vrt_poll (*poll)(struct vrt_task *t);
	/* The last reference is gone: release the memory. Any thread. May be
	 * NULL for tasks whose memory outlives the runtime (static tasks). */
	void (*drop)(struct vrt_task *t);
	/* Optional static name of this kind of task ("conn", "exec"): the
	 * stall monitor names the task a stalled worker is stuck in. */
	const char *name;
};

/*
 * Task header: embed it in your own struct and recover yours with
 * vb_container_of. Exposed for embedding only; every field is private to
 * src/rt.
 */
struct vrt_task {
	_Atomic uint64_t state;                   /* private: lifecycle|flags|refcount */
	int64_t sched_ns;                         /* private: sampled schedule time, 0 = none */
	struct vrt_task *next;                    /* private: injection-queue link */
	const struct vrt_task_vtable *vt;         /* private */
	struct vrt *rt;                           /* private: set by spawn */
	_Atomic(struct vrt_task *) join_waiter;   /* private: a task awaiting completion */
	_Atomic uint32_t join_futex;              /* private: a thread awaiting completion */
	uint16_t reg_shard;                       /* private: registry shard or UINT16_MAX */
	uint16_t slices;                          /* private: VRT_YIELDs in a row (owner of the poll) */
	struct vrt_task *reg_prev, *reg_next;     /* private: registry links */
};

/* Prepare a task; it holds one reference, owned by the caller (the
 * "handle"). Release it with vrt_task_unref when the caller no longer needs
 * to join or cancel the task. */
void vrt_task_init(struct vrt_task *t, const struct vrt_task_vtable *vt);

/* Schedule a new task. From a worker: the LIFO slot of that worker (local
 * spawn); from any other thread: the injection queue, waking a parked worker.
 * The runtime takes its own reference. Returns 0, or -ESHUTDOWN once the
 * runtime no longer accepts spawns (the task is then not scheduled and may be
 * spawned elsewhere). Remote spawns are refused from the start of
 * vrt_shutdown; local spawns (from tasks being drained) are accepted until
 * the workers stop, and with VRT_SHUTDOWN_DROP such a task may be dropped
 * without ever being polled (it still ends complete and cancelled). */
int vrt_spawn(struct vrt *rt, struct vrt_task *t);
/* Same, handing the caller's reference (from vrt_task_init) to the runtime:
 * a fire-and-forget task, equivalent to vrt_spawn + vrt_task_unref without
 * the two atomic operations. The caller must not touch the task afterwards
 * unless it took a reference of its own before. On -ESHUTDOWN the caller
 * still owns its reference. */
int vrt_spawn_detached(struct vrt *rt, struct vrt_task *t);

void vrt_task_ref(struct vrt_task *t);
void vrt_task_unref(struct vrt_task *t);

/* Wake: an idle task is scheduled; a scheduled or running one is marked
 * notified and polled again after its current poll returns. A completed
 * task ignores it. Any thread; the caller must hold a reference. */
void vrt_task_wake(struct vrt_task *t);

/* Ask a task that has not completed to stop: sets the cancelled flag and
 * wakes it. Its poll function sees vrt_task_is_cancelled(), releases what
 * it waits on (e.g. removes its channel waiter) and returns VRT_READY. */
void vrt_task_cancel(struct vrt_task *t);
bool vrt_task_is_cancelled(const struct vrt_task *t);
bool vrt_task_is_complete(const struct vrt_task *t);

/* Join from a task: true when `target` has completed; otherwise registers
 * the current task to be woken at completion and returns false (the caller
 * returns VRT_PENDING). One joiner per target. */
bool vrt_task_join_poll(struct vrt_task *target);
/* Join from a plain (non-worker) thread: block until `target` completes.
 * Completion is announced before the runtime drops its own reference, so
 * drop() may run just after this returns (on a worker). */
void vrt_task_join_wait(struct vrt_task *target);

/* The task being polled on this thread, or NULL outside a poll. */
struct vrt_task *vrt_current(void);
/* The runtime of the calling worker thread, or NULL. */
struct vrt *vrt_current_rt(void);
/* Index of the calling worker thread in [0, workers), or -1. */
int vrt_worker_id(void);

/* From a poll function: name what the current poll is doing (a static
 * string, e.g. the job kind an executor runs) for the stall monitor's
 * report. Cleared when the poll returns. No-op outside a worker. */
void vrt_poll_label(const char *label);

/* From a poll function: the current task starts a new piece of work (an
 * executor took its next job), so the slices it ran for the last one no
 * longer count: it is fresh again for the mixed-work policy
 * (doc/runtime.md). No-op outside a worker. */
void vrt_service_reset(void);

/* From a poll function that returns VRT_YIELD after running n slices of
 * work in a row (n >= 1, e.g. steps of a job): they count as n slices for
 * the mixed-work policy, not one, so a task that takes several slices in
 * one poll gets a continuation's turn of VRT_CONT_QUANTUM slices of work,
 * like a task that yields after each, not that many polls. No-op outside a
 * worker. */
void vrt_service_slices(unsigned n);

/*
 * Cooperative budget: each poll may perform `budget` channel/I/O operations.
 * An operation calls this first; false means the budget is spent: the
 * operation reports "would block" without doing anything and the task should
 * return VRT_YIELD (it then goes to the injection queue, not the LIFO slot).
 * Always true outside a worker.
 */
bool vrt_budget_consume(void);

/*
 * One-shot value from one sender to one receiver (a task or a thread).
 * Embed it; fields private. send() once from any thread.
 */
struct vrt_oneshot {
	_Atomic uint32_t state;                /* private: empty / waiting / full */
	uint64_t value;                        /* private */
	_Atomic(struct vrt_task *) waiter;     /* private */
};
void vrt_oneshot_init(struct vrt_oneshot *o);
void vrt_oneshot_send(struct vrt_oneshot *o, uint64_t value);
/* From a task: true with *value set, or false after registering the current
 * task for a wakeup (return VRT_PENDING). */
bool vrt_oneshot_poll(struct vrt_oneshot *o, uint64_t *value);
/* From a plain thread: block until sent. */
uint64_t vrt_oneshot_wait(struct vrt_oneshot *o);
/* Receiver task gives up (e.g. it was cancelled): drops the registration of
 * an earlier vrt_oneshot_poll. Returns true when the value had already been
 * sent (it can still be read with vrt_oneshot_poll). */
bool vrt_oneshot_unregister(struct vrt_oneshot *o);

/*
 * Park/unpark seam. The default parks on a futex. The I/O driver installs
 * its own so that a parked worker sleeps in io_uring_enter / ev_run and is
 * woken by a completion as well as by unpark.
 */
struct vrt_park_ops {
	/* On the worker thread before its loop starts / after it ends. */
	int (*worker_start)(void *ctx, unsigned worker);
	void (*worker_stop)(void *ctx, unsigned worker);
	/* Worker thread: sleep until unpark(worker), a driver event, or
	 * timeout_ns (< 0: no bound). Must return promptly if unpark came
	 * before the call. The park rule: the runtime passes
	 * park_timeout_ms only while a task may be queued somewhere (the
	 * injection queue, or another worker is awake: its ring may hold a
	 * task it did not advertise); with every other worker parked and
	 * nothing injected it passes -1, so the driver must end the park by
	 * itself for its own events (completions, timers, requests from other
	 * threads). */
	void (*park)(void *ctx, unsigned worker, int64_t timeout_ns);
	/* Any thread: end the current or next park of `worker`. */
	void (*unpark)(void *ctx, unsigned worker);
	/* Worker thread, never blocks: process ready driver events (these may
	 * wake tasks). Called every io_poll_interval ticks, at a slice
	 * boundary io_reap_us after the last call, and before parking.
	 * May be NULL. worker_start / worker_stop may be NULL too; a
	 * worker_start < 0 makes vrt_new fail with that error. */
	void (*poll)(void *ctx, unsigned worker);
	/* Worker thread, after every task poll, never blocks: hand work the
	 * driver queued to the kernel if it has waited long enough (the
	 * driver's rule; io_uring: 16 queued submissions or 200 us), so that
	 * a send is not held until the next poll() or park. May be NULL. */
	void (*flush)(void *ctx, unsigned worker);
	/* Worker thread, never blocks: poll() as the first half of a park
	 * (the park follows unless it or a re-check finds work). A driver may
	 * leave what it has queued to the park, which hands it over and
	 * sleeps in one call; when the worker runs a task instead, the flush
	 * after it hands it over. May be NULL: poll() is called. */
	void (*poll_park)(void *ctx, unsigned worker);
};

/* Bounds of struct vrt_config's fields, inclusive (a minimum not named is
 * 1): vrt_new and the vrt_set_* setters refuse values outside them, and
 * voltd.conf's schema (src/voltd/cfg_schema.c) takes its bounds from here. */
#define VRT_MAX_WORKERS 256u
#define VRT_GLOBAL_INTERVAL_MAX 255u
#define VRT_GLOBAL_BATCH_MAX 128u
#define VRT_LIFO_POLL_CAP_MAX 16u
#define VRT_BUDGET_MAX 4096u
#define VRT_PARK_TIMEOUT_MS_MAX 1000u
#define VRT_IO_POLL_INTERVAL_MAX 4096u /* from 0 */
#define VRT_IO_REAP_US_MAX 1000000u /* from 0 */
#define VRT_STALL_WARN_MS_MAX 3600000u /* from 0 */

/* Embedded in the daemon's struct vcfg and filled from voltd.conf's
 * [scheduler] section (src/voltd/cfg_schema.c is the only place its defaults are
 * written); tests and benchmarks fill it themselves
 * (tests/helpers/test_config.h). vrt_new copies it. */
struct vrt_config {
	unsigned workers;              /* 1..VRT_MAX_WORKERS */
	bool stealing;
	unsigned global_interval_min;  /* 1..VRT_GLOBAL_INTERVAL_MAX, <= max */
	unsigned global_interval_max;
	unsigned global_batch_max;
	bool lifo_slot;
	unsigned lifo_poll_cap;
	unsigned budget;
	unsigned park_timeout_ms;      /* bound of a park while work may be
					* queued somewhere (see vrt_park_ops.park) */
	unsigned io_poll_interval;     /* ticks between park ops poll() while busy;
					* 0: only before parking */
	unsigned io_reap_us;           /* at a slice boundary (a poll
					* that yields) poll() if none ran for this
					* long; 0: only by io_poll_interval */
	bool gather;                   /* the gather rule (doc/runtime.md): a
					* worker's work stays on it (no sibling
					* woken for it, none stealing it) unless
					* a worker is saturated or held up, as
					* the stall monitor measures them;
					* false, or no monitor: spread whenever
					* a wake-up is worth it */
	const struct vrt_park_ops *park_ops; /* NULL: futex parking */
	void *park_ctx;
	unsigned stall_warn_ms;        /* stall monitor threshold; 0: no monitor
					* thread; voltd.conf: control.stall_warn_ms */
};


/* 0 if vrt_new accepts cfg's values, else -EINVAL. Any thread. */
int vrt_config_check(const struct vrt_config *cfg);

/* Create the runtime and start its worker threads. 0 or -errno. */
int vrt_new(const struct vrt_config *cfg, struct vrt **out);

enum vrt_shutdown_mode {
	/* Run until no task is runnable; then cancel every pending task
	 * (vrt_task_cancel) and run again until none is runnable; tasks still
	 * pending after that are completed without another poll. A task that
	 * a worker's park ops (the I/O driver) queue on that worker while the
	 * decision is made is polled before the worker exits. */
	VRT_SHUTDOWN_DRAIN,
	/* Workers stop after their current poll; queued and pending tasks are
	 * completed (cancelled flag set) without being polled again. */
	VRT_SHUTDOWN_DROP,
};
/* Stop accepting spawns, finish or drop tasks as the mode says, join the
 * workers. Joiners of dropped tasks are woken. From a non-worker thread.
 * Afterwards only vrt_free, stats calls and operations on tasks (wakes are
 * ignored, spawns refused). vrt_free without it shuts down with DROP. */
void vrt_shutdown(struct vrt *rt, enum vrt_shutdown_mode mode);
void vrt_free(struct vrt *rt);

/* Live tunables (control socket). Any thread; 0 or -EINVAL out of bounds. */
int vrt_set_stealing(struct vrt *rt, bool on);
int vrt_set_global_interval(struct vrt *rt, unsigned min, unsigned max);
int vrt_set_lifo_poll_cap(struct vrt *rt, unsigned cap);
int vrt_set_budget(struct vrt *rt, unsigned budget);
/* The tunables as the workers read them now, into out's stealing,
 * global_interval_min, global_interval_max, lifo_poll_cap, budget,
 * io_reap_us, gather and stall_warn_ms (0 without a monitor); out's other fields are untouched.
 * Any thread. */
void vrt_get_tunables(struct vrt *rt, struct vrt_config *out);
/* 0..VRT_IO_REAP_US_MAX (live: [scheduler] io_reap_us). */
int vrt_set_io_reap_us(struct vrt *rt, unsigned us);
/* Live: [scheduler] gather. */
int vrt_set_gather(struct vrt *rt, bool on);
/* How many workers new work (new connections) should go to, the first of
 * them: all of them with gather off or no monitor; else the workers busy
 * at least VRT_GATHER_BUSY_PCT of their time lately, one more while the
 * gather rule spreads, at least 1. Any thread. */
unsigned vrt_spread_width(struct vrt *rt);
/* The monitor's verdict that the CPUs are where work waits: a worker
 * saturated lately, two busy, or one held up in a poll (what the gather
 * rule spreads on). Measured only while gather is on: false with gather
 * off or no monitor. Any thread; a hint that changes at most once a
 * monitor tick. */
bool vrt_saturated(struct vrt *rt);
/* Live: [scheduler] stealing as the workers read it now (a task queued on
 * a busy worker can be run by an idle sibling). Any thread. */
bool vrt_stealing(struct vrt *rt);
/* fn(ctx) is called on the monitor's thread whenever vrt_spread_width's
 * answer changes (a new connection placement is due at once: a worker
 * saturated or held up in one poll must not keep receiving them until a
 * slower tick). NULL fn: none. fn must not call back into the runtime's
 * shutdown; it may run until vrt_shutdown has stopped the monitor. */
void vrt_set_spread_hook(struct vrt *rt, void (*fn)(void *ctx), void *ctx);
/* 0 (detection off; the thread stays) .. VRT_STALL_WARN_MS_MAX; -EINVAL also when the
 * runtime was created without a monitor (stall_warn_ms = 0 at vrt_new). */
int vrt_set_stall_warn_ms(struct vrt *rt, unsigned ms);

/* What a worker does now (stats; a snapshot of a moving target). */
enum vrt_worker_state {
	VRT_WS_RUNNING = 0,   /* polling a task, or between polls */
	VRT_WS_SEARCHING = 1, /* looking for work to steal */
	VRT_WS_PARKED = 2,    /* asleep (futex or the I/O driver's wait) */
};
const char *vrt_worker_state_name(enum vrt_worker_state s);
/* The names by value, NULL-terminated (the metric table's state set). */
extern const char *const vrt_worker_state_names[];

/* Why the monitor thinks a worker is stuck (DESIGN.md section 6). */
enum vrt_stall_kind {
	VRT_STALL_NONE = 0,
	VRT_STALL_SPINNING = 1, /* the thread burns CPU in one poll */
	VRT_STALL_BLOCKED = 2,  /* the thread sleeps in one poll (a blocking call) */
};
const char *vrt_stall_kind_name(enum vrt_stall_kind k);
extern const char *const vrt_stall_kind_names[];

/* Counters since vrt_new; each worker writes its own, a snapshot reads them
 * one by one (not an atomic picture of the whole runtime). One line per
 * field: X(field, kind, unit, help[, name]) (base/metric.h). A slot kind
 * (COUNTER, GAUGE) is an atomic of that name in the worker's counters
 * (internal.h), bumped with vrt__ctr_add and copied by vrt_stats_snapshot;
 * a _SNAP value is computed there. */
#define VRT_WORKER_METRICS(X) \
	X(polls, COUNTER, "", "tasks polled") \
	X(lifo_polls, COUNTER, "", "polls of the task in the LIFO slot") \
	X(steal_ops, COUNTER, "", "successful steal operations by this worker") \
	X(tasks_stolen, COUNTER, "", "tasks this worker stole from others") \
	X(tasks_stolen_from, COUNTER_SNAP, "", "tasks other workers stole from this one") \
	X(overflows, COUNTER, "", "times the local queue overflowed into the injection queue") \
	X(tasks_overflowed, COUNTER, "", "tasks moved to the injection queue by overflows") \
	X(global_batches, COUNTER, "", "batches taken from the injection queue") \
	X(global_tasks, COUNTER, "", "tasks taken from the injection queue") \
	X(parks, COUNTER, "", "times the worker went to sleep") \
	X(unparks, COUNTER, "", "times the worker was woken") \
	X(futile_wakeups, COUNTER, "", "unparks after which the worker found no task and parked again") \
	X(spreads_held, COUNTER, "", \
	  "wake-ups of a sibling and steals not made by the gather rule (no worker saturated or held up)") \
	X(searching_transitions, COUNTER, "", "times the worker started searching for work") \
	X(budget_yields, COUNTER, "", "polls ended because the task spent its budget") \
	X(yields, COUNTER, "", "slices that ended behind waiting work (the task was queued)") \
	X(resumes, COUNTER, "", "slices followed at once by the same task's next: nothing waited") \
	X(reaps_timed, COUNTER, "", "I/O phases at a slice boundary because io_reap_us had passed") \
	X(local_queue_depth, GAUGE_SNAP, "", "tasks in the local queue now") \
	X(global_interval, GAUGE, "", "ticks between injection-queue checks now") \
	X(ewma_poll_ns, GAUGE, "nanoseconds", "moving average (alpha 0.1) of the time one poll takes", \
	  "poll_ewma") \
	X(busy_ns, COUNTER, "nanoseconds", "time the worker was not parked", "busy") \
	X(state, STATES_SNAP(vrt_worker_state_names), "", \
	  "what the worker does now: 0 running, 1 searching, 2 parked") \
	X(poll_age_ns, GAUGE_SNAP, "nanoseconds", \
	  "age of the current poll at the stall monitor's last tick (0: none)", "poll_age") \
	X(cpu_ns, COUNTER_SNAP, "nanoseconds", "CPU time of the worker thread", "cpu") \
	X(stall, STATES_SNAP(vrt_stall_kind_names), "", \
	  "stalled now: 0 no, 1 spinning in one poll, 2 blocked in one poll") \
	X(stall_ns, GAUGE_SNAP, "nanoseconds", "age of the current stall (0: none)", "stall_age") \
	X(stalls, COUNTER_SNAP, "", "stalls the monitor flagged on this worker")

struct vrt_worker_stats {
	VRT_WORKER_METRICS(VB_METRIC_FIELD)
};
extern const struct vb_metric vrt_worker_metrics[];
extern const size_t vrt_worker_metrics_n;

/* The whole runtime, computed by vrt_stats_snapshot from the workers'
 * counters and the shared queues. */
#define VRT_METRICS(X) \
	X(workers, GAUGE_SNAP, "", "worker threads") \
	X(injection_depth, GAUGE_SNAP, "", "tasks in the injection queue now") \
	X(searching, GAUGE_SNAP, "", "workers searching for work now") \
	X(parked, GAUGE_SNAP, "", "workers parked now") \
	X(spawned_local, COUNTER_SNAP, "", "tasks spawned from a worker") \
	X(spawned_remote, COUNTER_SNAP, "", "tasks spawned from other threads") \
	X(tasks_alive, GAUGE_SNAP, "", "tasks spawned and not yet complete") \
	X(stalled, GAUGE_SNAP, "", "workers stalled now (stall monitor)") \
	X(stalls, COUNTER_SNAP, "", "stalls the monitor flagged") \
	X(spreads, COUNTER_SNAP, "", "times the gather rule started to let work spread") \
	X(spreading, GAUGE_SNAP, "", "1 while the gather rule lets work spread (a worker saturated or held up, or two busy)") \
	X(spread_width, GAUGE_SNAP, "", "workers new connections go to now (the gather rule)")

struct vrt_stats {
	VRT_METRICS(VB_METRIC_FIELD)
};
extern const struct vb_metric vrt_metrics[];
extern const size_t vrt_metrics_n;

/* Snapshot without stopping workers. `per_worker` has room for `n` entries
 * (may be NULL); returns the number of workers. */
unsigned vrt_stats_snapshot(struct vrt *rt, struct vrt_stats *out,
			    struct vrt_worker_stats *per_worker, unsigned n);

/*
 * Sampled histograms (nanoseconds): VRT_HIST_SCHED is the schedule latency
 * (a task becomes runnable -> its poll starts), VRT_HIST_POLL the poll
 * duration. One task schedule in VRT_HIST_SAMPLE_EVERY and one poll in
 * VRT_HIST_SAMPLE_EVERY is timed (per thread counters), so counts are about
 * 1/VRT_HIST_SAMPLE_EVERY of the events. Each worker records its own
 * (single writer); `worker` selects one, or VRT_HIST_ALL for the merge.
 * Any thread. 0, or -EINVAL for a bad kind or worker.
 */
#define VRT_HIST_SAMPLE_EVERY 64u
/* The static names of the task worker `worker` polls now (the vtable's name)
 * and of its vrt_poll_label; NULL when none (or not in a poll). Any thread;
 * a hint (the poll may end meanwhile). */
void vrt_worker_task(struct vrt *rt, unsigned worker, const char **task, const char **label);
enum vrt_hist_kind { VRT_HIST_SCHED = 0, VRT_HIST_POLL = 1 };
#define VRT_HIST_ALL (-1)
int vrt_hist_snapshot(struct vrt *rt, enum vrt_hist_kind kind, int worker,
		      struct vb_hist_snap *out);

/*
 * Health for the watchdog and /livez (any thread, any time, also after
 * vrt_shutdown): stalled = workers stalled now; max_stall_ms = age of the
 * longest current stall (0 if none) and max_stall_worker its worker;
 * stalls_total = stalls flagged since vrt_new. All zero without a monitor.
 */
struct vrt_health {
	unsigned stalled;
	uint64_t max_stall_ms;
	unsigned max_stall_worker;
	uint64_t stalls_total;
};
void vrt_health(struct vrt *rt, struct vrt_health *out);

#endif
