/* SPDX-License-Identifier: MIT */
/*
 * rt/internal.h: private to src/rt (and its tests): the task state word, the
 * WorkStealQueue, the injection queue, the worker and runtime structs, and
 * the small pure helpers (packed head, EWMA, interval, batch size) that the
 * unit tests check against a model.
 *
 * Ownership: a struct vrt_worker's "owner" fields are touched only by its
 * thread (and by vrt_shutdown after that thread was joined); fields written
 * by other threads sit on their own cache lines (static_asserts below).
 */
#ifndef VOLTD_RT_INTERNAL_H
#define VOLTD_RT_INTERNAL_H

#include "rt/rt.h"
#include "base/compiler.h"
#include "base/futex.h"
#include "base/rng.h"
#include "base/time.h"

#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

/* ------------------------------------------------------------ state word */
/*
 * bits 0-1  lifecycle: IDLE, SCHEDULED (in exactly one queue), RUNNING,
 *           COMPLETE
 * bit  2    NOTIFIED: woken while scheduled/running; poll again afterwards
 * bit  3    CANCELLED
 * bit  4    JOIN: a joiner (task or thread) registered interest
 * bit  5    NEW: initialised, not yet spawned
 * bit  6    REGISTERED: in the runtime's registry (polled once, not done)
 * bits 16+  reference count
 */
#define VRT_ST_LIFE       UINT64_C(3)
#define VRT_ST_IDLE       UINT64_C(0)
#define VRT_ST_SCHEDULED  UINT64_C(1)
#define VRT_ST_RUNNING    UINT64_C(2)
#define VRT_ST_COMPLETE   UINT64_C(3)
#define VRT_ST_NOTIFIED   UINT64_C(4)
#define VRT_ST_CANCELLED  UINT64_C(8)
#define VRT_ST_JOIN       UINT64_C(16)
#define VRT_ST_NEW        UINT64_C(32)
#define VRT_ST_REF_SHIFT  16
#define VRT_ST_REF_ONE    (UINT64_C(1) << VRT_ST_REF_SHIFT)

static inline uint64_t vrt__st_refs(uint64_t s)
{
	return s >> VRT_ST_REF_SHIFT;
}

/* --------------------------------------------------------- injection queue */
/*
 * Mutex + intrusive singly linked list through vrt_task.next. `len` is also
 * an atomic so that workers can look for work without the lock.
 * Blocking (mutex), never fails. Any thread.
 *
 * Group marks: the pusher records the last task of every VRT_INJ_GROUP
 * queued tasks (with the group's size), so that a batch pop detaches whole
 * groups with O(1) reads under the lock and walks the tasks after unlocking.
 * Walking them under the lock would hold it for one cache miss per task
 * (the tasks were written by another core), which is what the spawning
 * thread would then wait for.
 */
#define VRT_INJ_GROUP 16u
#define VRT_INJ_MARKS 256u

struct vrt_inj_mark {
	struct vrt_task *last; /* last task of the group */
	uint32_t n;            /* tasks in the group */
};

struct vrt_inject {
	pthread_mutex_t lock;
	struct vrt_task *head, *tail;  /* under lock */
	bool closed_remote;            /* under lock: remote spawns refused */
	bool closed;                   /* under lock: pushes are discarded */
	uint32_t mh, mn;               /* under lock: first mark, number of marks */
	uint64_t tail_fill;            /* under lock: tasks after the last mark */
	struct vrt_inj_mark *marks;    /* under lock: ring of VRT_INJ_MARKS */
	_Atomic uint64_t len vb_cacheline_aligned; /* written under lock; read anywhere */
	/* Tasks in the queue that are not yielded tasks (spawns, wakes,
	 * overflow), counted as if they sat in front (pops subtract from it):
	 * yields go behind global work only while there is some. */
	_Atomic uint64_t fresh;        /* written under lock; read anywhere */
} vb_cacheline_aligned;
static_assert(offsetof(struct vrt_inject, len) >= VB_CACHELINE,
	      "lock-free readers of len would disturb the lock's line");

/* 0 or -ENOMEM. */
int vrt__inject_init(struct vrt_inject *q);
void vrt__inject_fini(struct vrt_inject *q);
/* Append the list first..last (n tasks, linked through next). Returns false
 * (and links nothing) once the queue is closed. */
bool vrt__inject_push_batch(struct vrt_inject *q, struct vrt_task *first,
			    struct vrt_task *last, uint64_t n);
/* As push, for yielded tasks (not counted as fresh work). */
bool vrt__inject_push_yields(struct vrt_inject *q, struct vrt_task *first,
			     struct vrt_task *last, uint64_t n);
/* As push, for a remote spawn: also refused after close_remote. */
bool vrt__inject_push_spawn(struct vrt_inject *q, struct vrt_task *t);
/* Pop up to `max` tasks into out[]; returns the count. `share` divides the
 * queue length between workers: the batch is clamp(ceil(len/share), 4, max)
 * (never more than len). */
unsigned vrt__inject_pop_batch(struct vrt_inject *q, struct vrt_task **out,
			       unsigned max, unsigned share);
/* Close; returns the detached list (the caller disposes of it). */
struct vrt_task *vrt__inject_close(struct vrt_inject *q);
void vrt__inject_close_remote(struct vrt_inject *q);

static inline uint64_t vrt__inject_fresh(struct vrt_inject *q)
{
	/* relaxed: a hint for where yielded tasks go (either is correct). */
	return atomic_load_explicit(&q->fresh, memory_order_relaxed);
}

static inline uint64_t vrt__inject_len(struct vrt_inject *q)
{
	/* relaxed: a hint; callers that must not miss a push order this load
	 * with a seq_cst fence (see worker.c [W4]). */
	return atomic_load_explicit(&q->len, memory_order_relaxed);
}

/* Batch size for a pop: clamp(ceil(len / share), 4, max), never above len. */
static inline unsigned vrt__inject_batch_size(uint64_t len, unsigned share, unsigned max)
{
	uint64_t b;
	unsigned lo = max < 4 ? max : 4;

	if (share == 0)
		share = 1;
	b = (len + share - 1) / share;
	if (b < lo)
		b = lo;
	if (b > max)
		b = max;
	if (b > len)
		b = len;
	return (unsigned)b;
}

/* ----------------------------------------------------------- WorkStealQueue */
#define VRT_WSQ_CAP   256u
#define VRT_WSQ_MASK  (VRT_WSQ_CAP - 1)
#define VRT_WSQ_HALF  (VRT_WSQ_CAP / 2)

enum vrt_steal {
	VRT_STEAL_EMPTY = 0, /* nothing to take */
	VRT_STEAL_OK = 1,    /* *out is a task, maybe more were moved */
	VRT_STEAL_RETRY = 2, /* lost a race or another steal is in flight */
};

/*
 * Fixed ring of 256 task pointers. Owner: push (tail), pop (head, FIFO).
 * Any thread: steal_into (moves half, at most 128, into the stealer's own
 * ring). head packs [steal_head:32 | real_head:32]; steal_head != real_head
 * while a steal copies slots. Lock-free; steal may fail spuriously (RETRY).
 */
struct vrt_wsq {
	_Atomic uint64_t head vb_cacheline_aligned; /* owner pop + stealers */
	_Atomic uint64_t stolen_from;               /* stealers (stat, relaxed) */
	_Atomic uint32_t tail vb_cacheline_aligned; /* owner only writes */
	struct vrt_task *buf[VRT_WSQ_CAP] vb_cacheline_aligned;
};
static_assert(offsetof(struct vrt_wsq, tail) - offsetof(struct vrt_wsq, head) >= VB_CACHELINE,
	      "wsq head and tail share a cache line");
static_assert(offsetof(struct vrt_wsq, buf) - offsetof(struct vrt_wsq, tail) >= VB_CACHELINE,
	      "wsq tail and buffer share a cache line");

static inline uint64_t vrt__wsq_pack(uint32_t steal, uint32_t real)
{
	return ((uint64_t)steal << 32) | real;
}
static inline uint32_t vrt__wsq_steal_of(uint64_t h)
{
	return (uint32_t)(h >> 32);
}
static inline uint32_t vrt__wsq_real_of(uint64_t h)
{
	return (uint32_t)h;
}

/* Empty queue whose indices all start at `start` (tests use values near
 * 2^32 to cross the wrap). */
void vrt__wsq_init(struct vrt_wsq *q, uint32_t start);

/* Result of an owner push. */
struct vrt_wsq_push_res {
	unsigned overflowed; /* tasks moved to the injection queue (0, 1 or 129) */
	bool to_inject_only; /* the new task alone went there (steal in flight) */
	bool dropped;        /* the injection queue was closed */
};
/* Owner only. Full ring: move the 128 oldest + t to `inj` in one lock
 * acquisition, or only t when a steal is in flight. */
struct vrt_wsq_push_res vrt__wsq_push(struct vrt_wsq *q, struct vrt_task *t,
				      struct vrt_inject *inj);
/* Owner only. NULL when empty. */
struct vrt_task *vrt__wsq_pop(struct vrt_wsq *q);
/* Any thread but dst's owner is the caller: steal half (<= 128) of src into
 * dst, return one of them in *out; *n = tasks taken (incl. *out). */
enum vrt_steal vrt__wsq_steal_into(struct vrt_wsq *src, struct vrt_wsq *dst,
				   struct vrt_task **out, uint32_t *n);
/* Approximate length (any thread; exact for the owner when no steal runs). */
uint32_t vrt__wsq_len(struct vrt_wsq *q);
/* How many a steal of a ring holding `avail` would take: ceil(avail/2), <=128. */
static inline uint32_t vrt__wsq_steal_count(uint32_t avail)
{
	uint32_t n = avail - avail / 2;
	return n > VRT_WSQ_HALF ? VRT_WSQ_HALF : n;
}

/* The runtime's mutexes guard a few pointer updates each: on contention a
 * waiter spins briefly (glibc's adaptive mutex: bounded, then futex) rather
 * than paying a futex sleep and wake-up for a lock held for nanoseconds. */
static inline void vrt__mutex_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
	pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
}

/* ------------------------------------------------------------- pure math */
/* EWMA with alpha = 0.1. */
static inline double vrt__ewma(double avg, double sample)
{
	return avg + 0.1 * (sample - avg);
}
/* clamp(1 ms / avg_ns, min, max); avg <= 0 gives max. */
static inline unsigned vrt__global_interval(double avg_ns, unsigned min, unsigned max)
{
	double v;

	if (avg_ns <= 0.0)
		return max;
	v = 1e6 / avg_ns;
	if (v < (double)min)
		return min;
	if (v > (double)max)
		return max;
	return (unsigned)v;
}

/* ------------------------------------------------------------------ worker */
#define VRT_PREFETCH_MAX VRT_GLOBAL_BATCH_MAX

struct vrt_worker_counters {
	/* Single writer (the worker, relaxed load+store), read by snapshots:
	 * the slots of VRT_WORKER_METRICS (rt.h), then what the snapshot sums. */
	VRT_WORKER_METRICS(VB_METRIC_SLOT)
	_Atomic uint64_t spawned_local, completed;
	/* Read by the stall monitor and snapshots (single writer, relaxed):
	 * the vtable of the task being polled (NULL between polls), its
	 * vrt_poll_label, and whether the thread sleeps in park ops. */
	_Atomic(const struct vrt_task_vtable *) cur_vt;
	_Atomic(const char *) label;
	_Atomic uint32_t parked;
	_Atomic uint64_t cpu_final_ns; /* thread CPU time when the loop ended */
	/* 1 from the park section in which the worker found every sibling
	 * parked (it may sleep with no bound) until it leaves that park;
	 * written under park_lock, so a sibling that leaves its own park
	 * (unmark_parked, under the lock) after that section reads 1. A
	 * stale 1 only wakes it as before the gather rule. */
	_Atomic uint32_t park_unbounded;
};

/* What a worker saw of a sibling at its last look (vrt__held_in_poll). */
struct vrt_seen {
	uint64_t polls;
	int64_t at;
	bool in_poll;
};

struct vrt_worker {
	struct vrt_wsq q;  /* fresh tasks: head/tail/buffer, each on its own line */
	struct vrt_wsq cq; /* continuations (doc/runtime.md, "Mixed work") */

	/* owner-only */
	struct vrt *rt vb_cacheline_aligned;
	unsigned id;
	struct vrt_task *lifo;
	unsigned lifo_run;
	/* The task whose slice ended with nothing waiting: it runs again at
	 * once (next_local). */
	struct vrt_task *resume;
	/* The continuation that gave way to fresh work before its turn
	 * (VRT_CONT_QUANTUM) ended: it keeps its place, ahead of cq. */
	struct vrt_task *cont_cur;
	int64_t cq_due;             /* while a continuation waits: when it goes
				     * first (aging by fresh work's time); 0: the
				     * clock starts at the next look */
	int64_t io_last;            /* end of the last I/O phase (reap by time) */
	int64_t reap_ns;            /* cached tunable io_reap_us, in ns; 0: off */
	struct vrt_task *prefetch[VRT_PREFETCH_MAX];
	unsigned pf_head, pf_len;
	/* yielded tasks on their way to the injection queue (through next) */
	struct vrt_task *yq_head, *yq_tail;
	unsigned yq_len;
	bool yq_forced;             /* a budget-forced yield is in the list */
	struct vb_rng rng;
	unsigned gi_countdown, io_countdown;
	unsigned interval;          /* current global interval */
	double ewma_ns;
	int64_t batch_start;        /* start of the current poll-time sample */
	unsigned batch_polls;
	int64_t active_start;       /* end of the last park */
	bool gather;                /* cached tunable */
	struct vrt_seen *seen;      /* per sibling: vrt__held_in_poll's last look */
	bool searching;
	bool in_io;                 /* inside the I/O phase: no notify on push */
	bool drain_counted;         /* in rt->drain_idle (DRAIN shutdown, [W9]) */
	bool unparked_idle;         /* woken by a notifier, no task run since */
	bool wake_owed;             /* left its park by its driver: owes its
				     * siblings one wake-up (the wake rule) */
	bool exiting;
	unsigned budget_left;
	bool budget_hit;
	/* cached tunables, reloaded every maintenance tick */
	bool stealing, lifo_on;
	unsigned lifo_cap, budget, gi_min, gi_max, batch_max;
	/* measurements (rt/monitor.c): sampling counters, label set */
	unsigned sched_samp, poll_samp;
	bool labelled;
	clockid_t cpu_clock;        /* set before vrt_new returns; read-only then */
	pid_t tid;                  /* likewise */

	struct vrt_worker_counters c vb_cacheline_aligned;

	/* written by unparkers */
	struct vb_event park_ev vb_cacheline_aligned;

	pthread_t thread;

	/* Sampled histograms: written by this worker only (owner record),
	 * read by vrt_hist_snapshot. */
	struct vb_hist h_sched vb_cacheline_aligned;
	struct vb_hist h_poll;
};
static_assert(offsetof(struct vrt_worker, park_ev) - offsetof(struct vrt_worker, c) >= VB_CACHELINE,
	      "park event shares a line with the counters");

/* The stall monitor's view of one worker (rt/monitor.c). Private fields
 * are the monitor thread's; published ones are written by it (relaxed
 * stores) and read by snapshots and vrt_health on any thread. */
struct vrt_mon_worker {
	/* monitor-private */
	uint64_t last_polls;
	bool seen_in_poll;          /* in a poll with last_polls at the last tick */
	int64_t first_seen_ns;      /* first tick that saw this poll */
	uint64_t cpu_at_first_ns;   /* UINT64_MAX until confirmed */
	int64_t cpu_since_ns;       /* when cpu_at_first_ns was read */
	bool flagged;
	uint64_t gather_cpu_ns;     /* thread CPU time at the last tick */
	uint64_t gather_sched_n, gather_sched_sum; /* h_sched's count and sum then */
	uint64_t queue_ns;          /* its tasks' wait to run lately (EWMA) */
	uint64_t gather_parks;      /* c.parks at the last tick */
	bool unparked;              /* it did not park since the last tick */
	bool held;                  /* in one poll at two ticks (tick) */
	unsigned busy_pct;          /* its CPU share lately (EWMA over ticks) */
	/* published */
	_Atomic int64_t stall_since_ns; /* first_seen of a flagged stall; 0: none */
	_Atomic uint32_t stall_kind;    /* enum vrt_stall_kind */
	_Atomic uint64_t poll_age_ns;   /* age of the current poll at the last tick */
	_Atomic uint64_t stalls;        /* flagged so far */
} vb_cacheline_aligned;

struct vrt_monitor {
	pthread_t thread;
	bool running;                   /* thread created (vrt_new / shutdown thread) */
	struct vb_event stop_ev;
	_Atomic uint32_t stop;
	_Atomic uint32_t warn_ms;       /* live threshold (vrt_set_stall_warn_ms) */
	/* 1 while the monitor sleeps long because every worker was parked
	 * ([M3]/[M4]); the first worker to leave its park wakes it. Its own
	 * line: workers read it at every unpark, the monitor writes it rarely. */
	_Atomic uint32_t deep vb_cacheline_aligned;
	struct vrt_mon_worker *w;       /* nworkers entries */
	int64_t gather_ns;              /* the gather rule's last tick */
	int64_t saturated_ns;           /* its last tick with a worker saturated */
	struct vb_hist_snap snap;       /* gather_tick's scratch copy of a histogram */
};

/* ------------------------------------------------------------- registry */
struct vrt_shard {
	pthread_mutex_t lock;
	struct vrt_task *head; /* doubly linked through reg_prev/reg_next */
} vb_cacheline_aligned;

/* --------------------------------------------------------------- runtime */
/* idle word: searching count in the low 32 bits, parked count in the high. */
#define VRT_IDLE_SEARCH_ONE UINT64_C(1)
#define VRT_IDLE_PARK_ONE   (UINT64_C(1) << 32)
static inline uint32_t vrt__idle_searching(uint64_t v)
{
	return (uint32_t)v;
}
static inline uint32_t vrt__idle_parked(uint64_t v)
{
	return (uint32_t)(v >> 32);
}

enum vrt_phase {
	VRT_RUNNING = 0,
	VRT_CLOSING_DRAIN = 1,
	VRT_CLOSING_DROP = 2,
};

struct vrt {
	/* read-mostly after vrt_new */
	unsigned nworkers;
	struct vrt_worker **workers;
	struct vrt_shard *shards;
	unsigned nshards;
	const struct vrt_park_ops *ops;
	void *park_ctx;
	unsigned io_poll_interval;
	int64_t park_timeout_ns;
	unsigned nwords;                 /* parked bitmap words */

	/* live tunables: written by vrt_set_* (any thread), read relaxed */
	_Atomic bool t_stealing vb_cacheline_aligned;
	_Atomic bool t_lifo;
	_Atomic uint32_t t_gi_min, t_gi_max, t_lifo_cap, t_budget, t_batch_max;
	_Atomic uint32_t t_reap_us;
	_Atomic bool t_gather;
	/* The gather rule's verdict, from the monitor's tick (only stored when
	 * it changes: workers read `spreading` at every wake-up decision). */
	_Atomic bool spreading;
	_Atomic uint32_t spread_width;
	_Atomic uint64_t spreads;       /* monitor-written statistic */
	/* vrt_set_spread_hook: ctx stored before fn ([G1] release on fn,
	 * acquire in gather_tick), so a caller that sees fn sees its ctx. */
	_Atomic(void (*)(void *)) spread_fn;
	_Atomic(void *) spread_ctx;
	_Atomic uint32_t phase;          /* enum vrt_phase */

	struct vrt_inject inject;        /* own line */

	_Atomic uint64_t idle vb_cacheline_aligned; /* searching | parked << 32 */

	pthread_mutex_t park_lock vb_cacheline_aligned;
	_Atomic uint64_t *parked_bits;   /* nwords; written under park_lock */
	unsigned wake_word;              /* under park_lock: next word to look at */

	_Atomic uint64_t spawned_remote vb_cacheline_aligned;
	_Atomic uint64_t force_completed;

	_Atomic uint32_t start_pending vb_cacheline_aligned;
	_Atomic int start_err;
	struct vb_event started;

	struct vrt_monitor mon vb_cacheline_aligned;
	_Atomic uint32_t workers_joined; /* vrt_shutdown joined them: CPU clocks gone */

	_Atomic uint32_t drain_idle vb_cacheline_aligned;
	_Atomic uint32_t drain_done;
	_Atomic uint32_t drain_cancelled;
	bool shut;                       /* vrt_shutdown ran (caller thread) */
};

/* Single-writer counter: relaxed load + store (no RMW needed); the
 * snapshot reader only needs each value eventually. */
static inline void vrt__ctr_add(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

/*
 * The seq_cst fence of the Dekker pattern [W4]/[W5]. ThreadSanitizer does
 * not model fences (gcc warns, -Wtsan); there a seq_cst RMW on the idle word
 * gives the same guarantee (both sides then RMW one location, whose
 * modification order they observe), at the cost of a contended line that
 * the production build avoids.
 */
static inline void vrt__dekker_fence(struct vrt *rt)
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

/*
 * The store-buffering fence of [M3]/[M4] (monitor.c). ThreadSanitizer does
 * not model fences, so its build uses a seq_cst RMW on mon.deep instead
 * (both sides' RMWs are totally ordered; the later one reads from the
 * earlier, which then happens-before it), as vrt__dekker_fence does.
 */
static inline void vrt__mon_fence(struct vrt *rt)
{
#if defined(__SANITIZE_THREAD__)
	/* [M3]/[M4] seq_cst RMW, see above. */
	atomic_fetch_add_explicit(&rt->mon.deep, 0, memory_order_seq_cst);
#else
	(void)rt;
	/* [M3]/[M4] seq_cst fence, see above. */
	atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* Sleep in the park ops, visible to the stall monitor and snapshots as
 * "parked" (a parked worker is never stalled). Worker thread. */
static inline void vrt__park_wait(struct vrt_worker *w, int64_t timeout_ns)
{
	struct vrt *rt = w->rt;

	/* relaxed (both): a state hint for the monitor; a tick that reads it
	 * stale sees the poll count move or not move at the next tick. */
	atomic_store_explicit(&w->c.parked, 1, memory_order_relaxed);
	rt->ops->park(rt->park_ctx, w->id, timeout_ns);
	atomic_store_explicit(&w->c.parked, 0, memory_order_relaxed);
	/* [M3] seq_cst fence: orders the parked = 0 store above before the
	 * load of mon.deep; pairs with the monitor's [M4] (store buffering:
	 * either the monitor sees this worker unparked and does not sleep
	 * long, or this worker sees deep = 1 and wakes it). One fence per
	 * unpark, which has just left a system call anyway. */
	vrt__mon_fence(rt);
	/* relaxed (both): the fence above orders the load; the exchange only
	 * picks the one worker that sets the event. */
	if (atomic_load_explicit(&rt->mon.deep, memory_order_relaxed) &&
	    atomic_exchange_explicit(&rt->mon.deep, 0, memory_order_relaxed))
		vb_event_set(&rt->mon.stop_ev);
}

/*
 * Is a backlog of `n` runnable tasks on this worker worth waking a sleeper
 * for (n >= min, and the backlog outlasts a wake-up)? A woken worker arrives
 * after a futex wake and a context switch (tens of microseconds on a loaded
 * machine); tasks that this worker runs in less time than that would be
 * gone when it arrives (a futile wakeup). The estimate is n times
 * the EWMA of this worker's poll time; with no estimate yet, wake. Not
 * waking never strands a task: the owner is awake and runs it, a sleeper
 * parked while this worker was awake wakes within park_timeout, and one
 * that parked with no bound before this worker's driver woke it gets the
 * owed wake-up (vrt__should_wake).
 */
#define VRT_WAKE_WORTH_NS (100 * 1000)
static inline bool vrt__worth_waking(const struct vrt_worker *w, unsigned n, unsigned min)
{
	if (n < min)
		return false;
	return w->ewma_ns <= 0.0 || (double)n * w->ewma_ns >= (double)VRT_WAKE_WORTH_NS;
}

/*
 * Mixed work (doc/runtime.md): a task that returned VRT_YIELD this
 * many times in a row is a continuation: it waits in the worker's
 * continuation ring (cq), behind fresh work. Once fresh work has run for
 * VRT_CQ_FRESH_NS while a continuation waits, a worker takes the
 * continuation first (aging by time, not by count: fresh work cannot
 * starve one, and many short fresh tasks are not each charged a slice of
 * it - aging every 8 picks made 10,000 50-ns tasks wait behind a 10 us
 * slice every 8, rt_bench busy1 25x slower). A
 * continuation's turn is VRT_CONT_QUANTUM of its slices: at the end of a
 * turn, with another continuation waiting, it goes to the back of cq; when
 * it gives way to fresh work before that, it keeps its place (cont_cur),
 * so continuations take FIFO turns however often fresh work comes.
 */
#define VRT_FRESH_SLICES 4u
#define VRT_CQ_FRESH_NS (25 * 1000)
#define VRT_CONT_QUANTUM 200u
/* t->slices is 16 bits (struct vrt_task stays 72 bytes): it wraps from
 * this multiple of VRT_CONT_QUANTUM back to VRT_CONT_QUANTUM. */
#define VRT_SLICES_WRAP (300u * VRT_CONT_QUANTUM)
static_assert(VRT_SLICES_WRAP <= UINT16_MAX && VRT_SLICES_WRAP % VRT_CONT_QUANTUM == 0,
	      "t->slices wraps at a turn boundary");
static_assert(VRT_MAX_WORKERS < UINT16_MAX, "registry shards fit t->reg_shard");
static_assert(sizeof(void *) != 8 || sizeof(struct vrt_task) == 72,
	      "the task header grew (bench/rt_bench keeps its tasks in 120-byte fast bins)");

/* The I/O phase: the one place the worker loop hands control to its driver
 * (park ops poll and park). VRT_IO_REAP: run what the driver has ready,
 * never sleeping (every io_poll_interval polls, and at a slice boundary
 * io_reap_us after the last phase); VRT_IO_PARK: the same, then sleep in
 * the driver when nothing is runnable (find_work found nothing). */
enum vrt_io_step { VRT_IO_REAP, VRT_IO_PARK };
void vrt__io_phase(struct vrt_worker *w, enum vrt_io_step step);

/* A continuation of this worker waits (its slot or ring). Owner only. */
static inline bool vrt__cont_waiting(struct vrt_worker *w)
{
	return w->cont_cur || vrt__wsq_len(&w->cq) != 0;
}

/* park.c (worker thread unless noted) */
extern const struct vrt_park_ops vrt__futex_park_ops;
void vrt__notify_parked(struct vrt *rt);      /* any thread */
void vrt__unpark_all(struct vrt *rt);         /* any thread */
bool vrt__try_become_searcher(struct vrt_worker *w);
void vrt__transition_from_searching(struct vrt_worker *w);
bool vrt__local_has_work(struct vrt_worker *w);
bool vrt__sibling_backlog(struct vrt_worker *w);
bool vrt__wake_owed_due(struct vrt_worker *w);
bool vrt__sibling_sleeps_unbounded(struct vrt_worker *w);

/*
 * The gather rule (doc/runtime.md): with `gather` on, a worker's work is
 * spread (a parked sibling woken for it, a sibling stealing it) only while
 * the monitor finds a worker saturated (busy VRT_GATHER_SATURATED_PCT of
 * its time lately, and its tasks waiting VRT_GATHER_QUEUE_NS to run or no
 * park since the monitor's last tick: it cannot keep up alone), two workers busy (VRT_GATHER_BUSY_PCT: the work
 * spread before and still takes both), or a worker held up in one poll
 * (rt->spreading). Otherwise a second worker woken for work
 * the first would have finished costs more than it gives: on a machine
 * whose CPUs are shared (with the clients, with other processes) it makes
 * one runnable thread more, and the kernel delays one of them (often the
 * one with the light request) by a whole time slice.
 *
 * A held wake-up strands nothing for long: a worker that parks keeps
 * nothing queued; a sibling that sleeps with no bound (c.park_unbounded)
 * is woken as before; a sibling that looks again (its park is bounded
 * while some worker is awake) takes work from a worker it finds in the
 * same poll VRT_HELD_POLL_NS after its last look (vrt__held_in_poll).
 *
 * vrt__may_spread: may w take (steal) or be woken for a sibling's work?
 * vrt__spread_here: may this worker (owner) wake a sibling for its work;
 * counted in spreads_held when it holds. Relaxed reads: rt->spreading
 * changes at most once a monitor tick; a stale value moves one decision.
 */
#define VRT_GATHER_SATURATED_PCT 90u
#define VRT_GATHER_BUSY_PCT 50u
#define VRT_GATHER_QUEUE_NS (500 * 1000) /* a saturated worker's tasks wait this long */
#define VRT_GATHER_LINGER_NS (1000 * 1000 * 1000) /* spreading after a saturation */

/* Tests only: -1 (default) the monitor measures; 0 or 1 its verdict is
 * that, whatever it measures or finds held up (busy shares and width are
 * still measured). */
extern _Atomic int vrt__test_spreading;

static inline bool vrt__may_spread(const struct vrt_worker *w)
{
	/* relaxed: a hint, see above. */
	return !w->gather || atomic_load_explicit(&w->rt->spreading, memory_order_relaxed);
}

/* Sibling v has been in one poll since w's look at least
 * VRT_HELD_POLL_NS ago (the same poll count, in a poll at both looks):
 * its queued work would wait for that poll's end, so w may take it
 * whatever the gather rule says. Relaxed reads of v's single-writer
 * counters; w's record is its own. */
#define VRT_HELD_POLL_NS (1000 * 1000)

static inline bool vrt__held_in_poll(struct vrt_worker *w, unsigned v)
{
	const struct vrt_worker *o = w->rt->workers[v];
	struct vrt_seen *s = &w->seen[v];
	/* relaxed (both): single-writer hints (the stall monitor reads them
	 * the same way). */
	uint64_t polls = atomic_load_explicit(&o->c.polls, memory_order_relaxed);
	bool in_poll = atomic_load_explicit(&o->c.cur_vt, memory_order_relaxed) != NULL;
	int64_t now = vb_now_ns();

	if (in_poll && s->in_poll && polls == s->polls)
		return now - s->at >= VRT_HELD_POLL_NS;
	s->polls = polls;
	s->in_poll = in_poll;
	s->at = now;
	return false;
}

/* May w take sibling v's queued work now? */
static inline bool vrt__may_take(struct vrt_worker *w, unsigned v)
{
	return vrt__may_spread(w) || vrt__held_in_poll(w, v);
}

static inline bool vrt__spread_here(struct vrt_worker *w)
{
	if (vrt__may_spread(w) || vrt__sibling_sleeps_unbounded(w))
		return true;
	vrt__ctr_add(&w->c.spreads_held, 1);
	return false;
}

/*
 * The wake rule (doc/runtime.md): wake a parked sibling for a
 * backlog of `n` tasks here when it is worth a wake-up
 * (vrt__worth_waking), or when this worker owes one: it left its park by
 * its driver, which unparks nobody, so a sibling that parked meanwhile may
 * sleep with no bound, and it now holds a task a sibling could steal
 * beyond the one it runs next (vrt__wake_owed_due). Either way the debt is
 * paid: one wake-up per driver wake-up at most. Owner only.
 */
static inline bool vrt__should_wake(struct vrt_worker *w, unsigned n, unsigned min)
{
	if (vrt__worth_waking(w, n, min)) {
		if (!vrt__spread_here(w))
			return false;
		w->wake_owed = false;
		return true;
	}
	return vb_unlikely(w->wake_owed) && vrt__wake_owed_due(w) && vrt__spread_here(w);
}

/* worker.c */
void vrt__reload_tunables(struct vrt_worker *w);
extern __thread struct vrt_worker *vrt__tls_worker;
extern __thread struct vrt_task *vrt__tls_task;
void *vrt__worker_main(void *arg);
void vrt__schedule(struct vrt_task *t, bool yield);

/* task.c */
void vrt__task_complete(struct vrt_worker *w, struct vrt_task *t);
void vrt__task_force_complete(struct vrt *rt, struct vrt_task *t);
void vrt__task_release(struct vrt_task *t);

/* monitor.c */
int vrt__monitor_start(struct vrt *rt, unsigned warn_ms);  /* vrt_new; 0 or -errno */
void vrt__monitor_stop(struct vrt *rt);                    /* vrt_shutdown / vrt_free */
void vrt__worker_measure_start(struct vrt_worker *w);      /* worker thread, at start */
void vrt__worker_measure_stop(struct vrt_worker *w);       /* worker thread, at exit */
uint64_t vrt__worker_cpu_ns(struct vrt *rt, struct vrt_worker *w); /* any thread */

/* rt.c */
void vrt__registry_add(struct vrt *rt, struct vrt_task *t, unsigned shard);
void vrt__registry_remove(struct vrt *rt, struct vrt_task *t);
void vrt__registry_cancel_all(struct vrt *rt);

#endif
