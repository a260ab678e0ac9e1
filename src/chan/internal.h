/* SPDX-License-Identifier: MIT */
/*
 * chan/internal.h: private to src/chan (and its tests): the channel layout,
 * the waiter queues and the helpers the ring, blocking and async files share.
 *
 * Ownership: struct vch is allocated by vch_new (or by vch_set_new, one per
 * member); tail and its line belong to senders, head and its line to
 * receivers (nothing else is on them), each side's statistics line to that
 * side's slow path, each waiter queue to the waiters of one side and the
 * wakers of the other. A set's member belongs to one worker (its `home`):
 * on the common path only that worker's tasks write its lines. See the
 * Ordering blocks of chan.c, waitq.c and set.c for who writes what.
 */
#ifndef VOLTD_CHAN_INTERNAL_H
#define VOLTD_CHAN_INTERNAL_H

#include "base/compiler.h"
#include "base/lineaudit.h"
#include "chan/chan.h"
#include "rt/rt.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/*
 * Positions. head and tail count in steps of 2 so bit 0 of tail is free for
 * the closed flag: position p of the ring is the word value 2p. Slot stamps
 * use the same units: a slot whose stamp equals the (even) tail value is free
 * for that send; stamp == pos + 1 (odd) holds a value for the receive at pos;
 * a receive at pos frees the slot for the next lap with stamp = pos + 2*size.
 * All arithmetic wraps modulo 2^64 and compares signed differences, so a
 * position may wrap without ABA (a stale stamp is 2*size away, never equal).
 */
#define VCH_POS_STEP 2u
#define VCH_CLOSED_BIT 1u

/* Waiter states. Task waiters use IDLE -> WAITING -> NOTIFIED -> IDLE;
 * thread waiters may also pass WAITING -> SLEEPING -> WAKING -> NOTIFIED. */
enum {
	VCH_W_IDLE = 0,
	VCH_W_WAITING = 1,   /* registered on a queue */
	VCH_W_SLEEPING = 2,  /* thread: about to sleep / asleep on the futex */
	VCH_W_WAKING = 3,    /* thread: waker between futex wake and NOTIFIED */
	VCH_W_NOTIFIED = 4,  /* claimed and woken; the waker no longer touches it */
};

enum { VCH_DIR_SEND = 0, VCH_DIR_RECV = 1 };

/* has_waiters value meaning "the waiters are on the locked list". */
#define VCH_WQ_LIST ((uintptr_t)1)

struct vch_slot {
	_Atomic uint64_t stamp;
	uint64_t value;   /* owned by whoever claimed the slot's current stamp */
};

/*
 * One side's waiters. `has_waiters` is the design's has_send_waiters /
 * has_recv_waiters flag and the lock-free single-waiter fast slot in one
 * word: 0 = nobody waits; a waiter pointer = exactly that waiter waits (fast
 * slot, no lock taken); VCH_WQ_LIST = the waiters are on `head`..`tail`, under
 * `lock`. Wakers read it on every operation, so it lives on its own line and
 * is written only when waiters come and go. Waiters join the list at its
 * tail; a wake takes the tail when `lifo` (receivers: the most recently
 * parked, warmest task, whose cache lines and worker are still hot, while
 * the others stay parked) and the head otherwise (senders: the oldest, so
 * no sender waits for room for ever while others come and go).
 */
struct vch_waitq {
	_Atomic uintptr_t has_waiters;
	int32_t home;                           /* read-only: the owning worker, -1: none (audit) */
	bool lifo;                              /* read-only: wake the newest waiter */
	char pad0[VB_CACHELINE - sizeof(_Atomic uintptr_t) - sizeof(int32_t) - sizeof(bool)];
	pthread_mutex_t lock;                   /* guards only the list below (adaptive) */
	struct vch_waiter *head, *tail;         /* under lock; non-empty iff LIST */
	char pad1[VB_CACHELINE - sizeof(pthread_mutex_t) - 2 * sizeof(void *)];
};

struct vch_side_stats {
	_Atomic uint64_t blocked_events;  /* full_events (send side) / empty_events */
	_Atomic uint64_t waits;           /* send_waits / recv_waits (threads) */
	_Atomic uint64_t task_waits;      /* tasks: counts in both of the above (async.c) */
	_Atomic uint64_t spun;            /* send_spins / recv_spins */
	_Atomic uint32_t wait_hint;       /* blocked threads: log2 of the first pause (chan.c) */
	_Atomic uint32_t gap_avg;         /* blocked threads: recent gap estimate (vch__gap_note) */
	/* A set's member (set.c), counted by the member's own worker: */
	_Atomic uint64_t crossed;         /* send: spilled; recv: stolen */
	_Atomic uint64_t cross_wakes;     /* send: waiters of other members this worker woke; recv: unused */
};

struct vch {
	/* read-only after vch_new */
	struct vch_slot *buf;
	uint64_t mask;         /* size - 1, size = buffer slots (power of two, >= 2) */
	uint64_t size2;        /* 2 * size: a stamp's step from one lap to the next */
	uint64_t cap2;         /* 2 * capacity: positions a full ring spans */
	uint64_t start;        /* initial head/tail (tests start near the wrap) */
	struct vch_set *set;   /* the set it is a member of, or NULL */
	int32_t home;          /* its index in the set (its worker), -1: not a member */
	bool check_len;        /* capacity != size: bound the length explicitly */
	char pad0[VB_CACHELINE - 5 * sizeof(uint64_t) - sizeof(void *) - sizeof(int32_t) - sizeof(bool)];

	_Atomic uint64_t tail;  /* senders: next send position | closed bit */
	char pad1[VB_CACHELINE - sizeof(uint64_t)];

	_Atomic uint64_t head;  /* receivers: next receive position */
	char pad2[VB_CACHELINE - sizeof(uint64_t)];

	/* Each side's slow-path statistics and blocking hints on a line of their
	 * own: a task that registers (an idle executor, once per job) writes
	 * them, and on the head / tail line every such write would take that
	 * line from the thread about to claim the next position. */
	struct vch_side_stats send_stats;  /* senders, slow path only */
	char pad3[VB_CACHELINE - sizeof(struct vch_side_stats)];
	struct vch_side_stats recv_stats;  /* receivers, slow path only */
	char pad4[VB_CACHELINE - sizeof(struct vch_side_stats)];

	struct vch_waitq sendq;  /* senders waiting for room */
	struct vch_waitq recvq;  /* receivers waiting for a value */
};

/*
 * A set of channels, one member per worker (set.c). The help mask has bit i
 * set while member i's senders found no waiting receiver of their own (its
 * receivers are all busy): receivers of other members look only at members
 * whose bit is set, so an idle receiver reads one line, not every member's
 * head and tail. Written only on the way into and out of that state, read
 * by every receiver that runs out of work: a line of its own.
 */
#define VCH_SET_WORDS ((VCH_SET_MAX + 63) / 64)
struct vch_set {
	unsigned n;                    /* read-only: members */
	struct vch **m;                /* read-only: m[i]->set == this, m[i]->home == i */
	size_t capacity;               /* read-only: the members' sum */
	vb_cacheline_aligned _Atomic uint64_t help[VCH_SET_WORDS];
	char pad[VB_CACHELINE - VCH_SET_WORDS * sizeof(uint64_t)];
};

static_assert(offsetof(struct vch_set, help) % VB_CACHELINE == 0 &&
	      sizeof(struct vch_set) - offsetof(struct vch_set, help) == VB_CACHELINE,
	      "the help mask shares a line");
static_assert(sizeof(struct vch_waitq) == 2 * VB_CACHELINE, "waitq lines");
static_assert(offsetof(struct vch, tail) == 1 * VB_CACHELINE, "tail line");
static_assert(offsetof(struct vch, head) == 2 * VB_CACHELINE, "head line");
static_assert(offsetof(struct vch, send_stats) == 3 * VB_CACHELINE, "send statistics line");
static_assert(offsetof(struct vch, recv_stats) == 4 * VB_CACHELINE, "receive statistics line");
static_assert(offsetof(struct vch, sendq) == 5 * VB_CACHELINE, "sendq lines");
static_assert(offsetof(struct vch, recvq) == 7 * VB_CACHELINE, "recvq lines");

/*
 * The shared-line audit (base/lineaudit.h) of a channel's lines: a member of
 * a set counts only the writes made off its home worker (a stealer's, a
 * spilling sender's, a waker's from elsewhere): its own worker's writes stay
 * in that core's cache. A channel outside a set (home -1) counts every
 * write, as any thread may make it.
 */
#ifdef VOLTD_LINE_AUDIT
#define VCH_LINE_WRITE(home, name) \
	do { if ((home) < 0 || (home) != vrt_worker_id()) VB_LINE_WRITE(name); } while (0)
#else
#define VCH_LINE_WRITE(home, name) ((void)0)
#endif

/* chan.c: one attempt, no statistics; waits only for an in-flight claim.
 * A successful one wakes a waiter of the other side (vch__wake_recv, the
 * sendq's notify). */
enum vch_status vch__send_attempt(struct vch *ch, uint64_t value);
enum vch_status vch__recv_attempt(struct vch *ch, uint64_t *value);
/* A channel of `capacity` values (0 allowed: a set's member that is always
 * full and empty) whose positions start at `start` (tests cross the wrap). */
int vch__new_at(size_t capacity, uint64_t start, struct vch **out);
/* Close's two halves: the closed bit ([CR7]), then every waiter woken. */
void vch__close_bit(struct vch *ch);
void vch__close_wake(struct vch *ch);

/* async.c: take a waiter that is still registered off its queue (the
 * operation finished without its wakeup); a wakeup it was given meanwhile
 * goes to another waiter (vch__pass_on). */
void vch__withdraw(struct vch_waiter *w);
/* async.c: count a task's registration (an empty / full event and a wait). */
void vch__count_task_wait(struct vch *ch, unsigned dir);

/* waitq.c */
void vch__waitq_init(struct vch_waitq *q, int home, bool lifo);
void vch__waitq_fini(struct vch_waitq *q);
/* Publish w (state already WAITING). The caller then issues the seq_cst
 * fence [CW3] and re-checks the ring before it may sleep. */
void vch__waitq_register(struct vch_waitq *q, struct vch_waiter *w);
/* Withdraw w: true when it was still queued (nobody will touch it); false
 * when a waker claimed it: this returns only once the waker marked it
 * NOTIFIED and no longer touches it. */
bool vch__waitq_remove(struct vch_waitq *q, struct vch_waiter *w);
/* Slow path of a waker: claim and wake one waiter, if any (true). `from`
 * is the set member whose value (room) the wakeup announces, handed to the
 * woken waiter (vch_waiter.from); 0 outside sets. */
bool vch__waitq_notify_one(struct vch_waitq *q, unsigned from);
/* Claim and wake every waiter (close). */
void vch__waitq_notify_all(struct vch_waitq *q);
/* Thread waiter: sleep until NOTIFIED or the absolute deadline (< 0: none).
 * 0, or -ETIMEDOUT with the waiter possibly still queued. */
int vch__waiter_sleep(struct vch_waiter *w, int64_t deadline_ns);

static inline struct vch_waitq *vch__queue_of(struct vch *ch, unsigned dir)
{
	return dir == VCH_DIR_SEND ? &ch->sendq : &ch->recvq;
}

/*
 * Waker fast path, after every successful send (recvq) or receive (sendq):
 * [CW2] seq_cst load: the Dekker partner of [CW1]/[CW3]; see waitq.c.
 * True when a waiter was woken.
 */
static inline bool vch__waitq_notify(struct vch_waitq *q, unsigned from)
{
	/* [CW2] seq_cst: Dekker read; pairs with [CW1]/[CW3] (waitq.c). */
	if (vb_unlikely(atomic_load_explicit(&q->has_waiters, memory_order_seq_cst) != 0))
		return vch__waitq_notify_one(q, from);
	return false;
}

/* set.c: a value arrived in member ch and no receiver of ch's own queue was
 * woken: mark ch as needing help and wake a receiver of another member
 * ([CS1]/[CS2]). */
void vch__set_wake_other(struct vch *ch);

/*
 * A value arrived in ch (a send, or a wakeup passed on): wake one receiver.
 * A set's member wakes its own queue's newest waiter (the warm one, on this
 * worker); with none there, one of another member's (set.c: the rule that
 * leaves no value behind busy receivers while others wait).
 */
static inline void vch__wake_recv(struct vch *ch)
{
	if (vb_likely(!ch->set)) {
		vch__waitq_notify(&ch->recvq, 0);
		return;
	}
	if (!vch__waitq_notify(&ch->recvq, (unsigned)ch->home))
		vch__set_wake_other(ch);
}

/* Room appeared in ch: wake one sender (its own queue only, oldest first). */
static inline void vch__wake_send(struct vch *ch)
{
	vch__waitq_notify(&ch->sendq, ch->home < 0 ? 0 : (unsigned)ch->home);
}

/* A waiter that was given a wakeup it will not use (cancelled, or it got
 * its value otherwise) hands it on: to another waiter of the same side, for
 * the member the wakeup was about (a set's receivers: w->from). */
void vch__pass_on(struct vch_waiter *w);

/* Test hook: blocking waits skip the spin and yield phases and park at
 * once, so stress tests exercise the sleeping path. Set it only while no
 * blocking operation is in flight. */
extern bool vch__test_park_at_once;

/* Bench hook (chan_bench --spin-pauses / --spin-yields, for exploring the
 * trade-off; not a voltd setting): the most a blocked thread spins in
 * phase 1, in PAUSEs (the cap of the adaptive bound), and the phase 2 yield
 * count (chan.c: VCH_SPIN_CAP, VCH_BLOCK_YIELDS). Set only while no
 * blocking operation is in flight. */
extern unsigned vch__spin_budget;
extern unsigned vch__spin_yields;

/*
 * The blocked-thread spin estimator (chan.c "blocking"), pure functions so
 * a test can drive it. A gap is how long a blocked operation waited for its
 * value (free slot), in PAUSEs; the side keeps a running estimate `avg`
 * (fixed point, VCH_GAP_FRAC fraction bits; VCH_GAP_INIT before any gap).
 * vch__gap_note returns the estimate after one more gap; vch__spin_bound
 * the PAUSEs to spin for the next wait given the estimate and the cap
 * (vch__spin_budget): 0 means "gaps are long: do not spin, sleep at once".
 */
#define VCH_GAP_FRAC 3u
uint32_t vch__gap_note(uint32_t avg, uint64_t gap_pauses, unsigned cap);
unsigned vch__spin_bound(uint32_t avg, unsigned cap);
extern const uint32_t vch__gap_init;

/* Bounded exponential back-off (an in-flight claim, a waker finishing):
 * pause 2^step times up to 2^6, then yield. */
void vch__backoff(unsigned *step);

#endif
