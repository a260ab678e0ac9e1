/* SPDX-License-Identifier: MIT */
/*
 * chan/chan.h: bounded multi-producer multi-consumer channel of 64-bit values
 * (Vyukov's ring), with non-blocking, blocking (threads) and async (tasks)
 * operations, close, and statistics.
 *
 * Threading contract: every operation may run on any thread concurrently
 * with every other operation on the same channel, except vch_free (no other
 * call may be in flight or follow). Values are plain uint64_t; pointers travel
 * as (uintptr_t) casts (vch_ptr / vch_val below), so no message allocates.
 *
 * Progress: try_send / try_recv are lock-free in the usual Vyukov sense: they
 * never wait for a lock, but an operation whose slot is still being filled or
 * emptied by a thread that already claimed it waits (spins, then yields) for
 * that claim to finish; a lost claim race backs off briefly. FULL / EMPTY
 * mean the ring positions showed no room / no value during the call (a claim
 * in flight is waited for, not reported). Blocking and async waits re-check
 * after registering and cannot miss a wakeup.
 * Waiter registration takes a mutex (adaptive: spins briefly, then sleeps)
 * that guards only the waiter lists, and only when more than one waiter
 * waits on the same side. A value wakes the receiver that registered last
 * (the warm one); room wakes the sender that registered first.
 *
 * A set (vch_set_*, below) is one such channel per worker with stealing
 * across: the stages of the server use sets, so that a request's path
 * writes only its own worker's lines.
 */
#ifndef VOLTD_CHAN_CHAN_H
#define VOLTD_CHAN_CHAN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/metric.h"

struct vch;
struct vrt_task;

/*
 * Results of channel operations. These are outcomes, not failures, so the
 * operations return this enum instead of -errno (doc/conventions.md:
 * when a convention fights clarity, clarity wins).
 */
enum vch_status {
	VCH_OK = 0,       /* the value was sent / received */
	VCH_FULL,         /* try_send: no room */
	VCH_EMPTY,        /* try_recv: nothing to receive, not closed */
	VCH_CLOSED,       /* send: closed; recv: closed and drained */
	VCH_PENDING,      /* *_poll: waiter registered; return VRT_PENDING */
	VCH_YIELD,        /* *_poll: the task's budget is spent; return VRT_YIELD */
	VCH_TIMEDOUT,     /* *_timed: the deadline passed first */
};

const char *vch_status_name(enum vch_status s);

/* Largest capacity vch_new accepts. */
#define VCH_CAPACITY_MAX ((size_t)1 << 30)

/* New channel holding exactly `capacity` values (1..VCH_CAPACITY_MAX).
 * 0 or -EINVAL / -ENOMEM. */
int vch_new(size_t capacity, struct vch **out);
/* Free a channel nobody uses any more (no waiter may be registered). */
void vch_free(struct vch *ch);

static inline uint64_t vch_val(const void *p) { return (uint64_t)(uintptr_t)p; }
static inline void *vch_ptr(uint64_t v) { return (void *)(uintptr_t)v; }

/* Never wait (beyond an in-flight claim, see above). OK / FULL / CLOSED. */
enum vch_status vch_try_send(struct vch *ch, uint64_t value);
/* OK / EMPTY / CLOSED (closed and nothing left). */
enum vch_status vch_try_recv(struct vch *ch, uint64_t *value);

/*
 * Close: later sends see CLOSED; receivers take what is left, then CLOSED.
 * Wakes every waiter of both sides. Idempotent; any thread, any time.
 */
void vch_close(struct vch *ch);
bool vch_is_closed(const struct vch *ch);

/*
 * Blocking operations for plain threads (never from a task's poll: they
 * would block a worker). A blocked thread spins on the ring slot it waits
 * for, looking at it after 1, 2, then every 4 PAUSEs, then retries after
 * sched_yield 4 times, then sleeps on a futex until the other side's next
 * operation wakes it. How long it spins adapts to the gaps its side has
 * waited recently: twice the recent gap, at least 128 PAUSEs and at most 512
 * (one PAUSE is ~24 ns on the project's AMD EPYC VM when it is quiet, so
 * ~3 to ~12 us; 47-57 ns per PAUSE was measured while the other vCPU was
 * busy); when the recent gaps are longer than 1.5 times that cap it does not
 * spin or yield at all and sleeps at once (chan.c explains the estimate).
 * One value (free slot) is enough to end the wait: there is no batch
 * threshold. Batching is adaptive: while the other side keeps a backlog
 * ahead of us, a side's first look comes up to 64 PAUSEs (~1.5 us) later,
 * so values arrive in runs instead of one cache-line chase per message; a
 * lone value resets it (chan.c explains the rule).
 * Timeouts are checked between the phases, so a _timed call may overrun a
 * short timeout by the spin phase (at most ~12 us); likewise a receiver
 * that found the ring empty notices a close only after its spin phase. The
 * async forms neither spin nor batch.
 * send: OK / CLOSED; recv: OK / CLOSED. The _timed forms also return
 * TIMEDOUT after timeout_ns (< 0: no limit).
 */
enum vch_status vch_send(struct vch *ch, uint64_t value);
enum vch_status vch_recv(struct vch *ch, uint64_t *value);
enum vch_status vch_send_timed(struct vch *ch, uint64_t value, int64_t timeout_ns);
enum vch_status vch_recv_timed(struct vch *ch, uint64_t *value, int64_t timeout_ns);

/*
 * A waiter: one pending send or receive of one task (or, internally, of a
 * blocked thread). Embed it in the task's own memory and vch_waiter_init it
 * once. Exposed for embedding only; every field is private to src/chan.
 *
 * Lifetime: while registered, the channel holds a reference on the task; a
 * waker copies what it needs and marks the waiter notified *before* it wakes
 * the task, so the owner may free or reuse the waiter as soon as a poll call
 * returns OK / CLOSED / FULL / EMPTY or vch_waiter_cancel returns.
 */
struct vch_waiter {
	struct vch_waiter *next, *prev;   /* private: list links (queue lock) */
	struct vrt_task *task;            /* private: woken task (ref held); NULL: thread */
	struct vch *ch;                   /* private: channel registered on */
	_Atomic uint32_t state;           /* private: idle / waiting / notified ... */
	uint8_t dir;                      /* private: send or recv queue */
	uint8_t linked;                   /* private: on the list (queue lock) */
	uint16_t from;                    /* private: set member the wakeup is for (waker) */
};

void vch_waiter_init(struct vch_waiter *w);

/*
 * Async operations, from a task's poll function only (vrt_current() != NULL).
 * Each call first takes one unit of the task's budget (vrt_budget_consume);
 * without budget it returns YIELD and changes nothing.
 *   OK       done; the waiter is idle again.
 *   CLOSED   send: channel closed; recv: closed and drained. Waiter idle.
 *   PENDING  full (send) / empty (recv): the waiter is registered; the task
 *            returns VRT_PENDING and is woken when room / a value appears or
 *            the channel closes; then it calls the same function again with
 *            the same waiter (the waiter does not hold the value).
 *   YIELD    budget spent: return VRT_YIELD and call again when polled.
 * Called outside a task, they behave like try_send / try_recv (FULL / EMPTY).
 * A waiter serves one channel and one direction until it is idle again.
 */
enum vch_status vch_send_poll(struct vch *ch, struct vch_waiter *w, uint64_t value);
enum vch_status vch_recv_poll(struct vch *ch, struct vch_waiter *w, uint64_t *value);

/*
 * Withdraw a waiter (the task was cancelled, or gave up waiting). Safe in
 * any state; afterwards the waiter is idle and the channel holds no reference
 * to it or to its task. A wakeup the waiter had already received is passed on
 * to another waiter of the same side, so none is lost. From the owning task.
 */
void vch_waiter_cancel(struct vch_waiter *w);

/*
 * Statistics: cheap, safe while the channel is in use; each field is read
 * on its own (the snapshot is not atomic as a whole).
 *   sends / recvs: values sent / received (claims, counted from the ring
 *   positions). full_events / empty_events: send / receive operations that
 *   found the channel full / empty (once per operation, not per retry).
 *   send_waits / recv_waits: times a sender / receiver (task or thread)
 *   registered a waiter and waited.
 *   send_spins / recv_spins: blocking sends / receives (threads) that found
 *   the channel full / empty and completed while spinning or yielding,
 *   without registering. stolen / spilled / cross_wakes: a set's crossings
 *   between members (0 outside sets; see vch_set below). closed: 1 once
 *   closed.
 * One line per field: X(field, kind, unit, help[, name]) (base/metric.h).
 * Every value is computed by vch_stats_get (_SNAP): most come from the ring
 * positions, the others are the sum of a side's counters (chan/internal.h).
 */
#define VCH_METRICS(X) \
	X(capacity, GAUGE_SNAP, "", "values the channel holds at most") \
	X(len, GAUGE_SNAP, "", "values queued now") \
	X(sends, COUNTER_SNAP, "", "values sent") \
	X(recvs, COUNTER_SNAP, "", "values received") \
	X(full_events, COUNTER_SNAP, "", "send operations that found the channel full") \
	X(empty_events, COUNTER_SNAP, "", "receive operations that found the channel empty") \
	X(send_waits, COUNTER_SNAP, "", "times a sender waited for room") \
	X(recv_waits, COUNTER_SNAP, "", "times a receiver waited for a value") \
	X(send_spins, COUNTER_SNAP, "", "blocked thread sends that found room while spinning (no sleep)") \
	X(recv_spins, COUNTER_SNAP, "", "blocked thread receives that found a value while spinning (no sleep)") \
	X(stolen, COUNTER_SNAP, "", "set: values this member's receivers took from another member") \
	X(spilled, COUNTER_SNAP, "", "set: values this member's senders put in another member, theirs being full") \
	X(cross_wakes, COUNTER_SNAP, "", \
	  "set: receivers waiting on another member that this member's worker woke, the value's member having none") \
	X(closed, GAUGE_SNAP, "", "1 once the channel is closed")

struct vch_stats {
	VCH_METRICS(VB_METRIC_FIELD)
};
extern const struct vb_metric vch_metrics[];
extern const size_t vch_metrics_n;

void vch_stats_get(const struct vch *ch, struct vch_stats *out);
size_t vch_capacity(const struct vch *ch);
/* Values currently queued (a snapshot, in [0, capacity]). */
size_t vch_len(const struct vch *ch);

/*
 * A set of channels with stealing across: n members (one per worker, the
 * caller says which is whose by passing `home`, its worker's index), each a
 * bounded MPMC channel as above with its own ring, waiter queues and
 * statistics, so the operations of one worker's tasks on their own member
 * write no line that another worker writes.
 *   send: to the home member; when it is full, to the next member with room
 *     (spill), so the set holds `capacity` values in all before a send
 *     finds it FULL: full means the whole set is full. A waiting sender
 *     waits for room in its home member (oldest first).
 *   receive: the member the last wakeup named, then the home member, then
 *     (steal) the members whose senders found no receiver of their own.
 *   wakeups: a value wakes the newest waiting receiver of its member; when
 *     that member has none, it marks the member as needing help and wakes a
 *     waiting receiver of another member, which takes it (the rule that no
 *     value waits behind busy receivers while another member's receiver
 *     waits: set.c proves it).
 * Every operation may run on any thread with any `home` < n (the home only
 * decides where to look first and whose lines are written); values are
 * received once, and each member is FIFO, so values one sender puts in one
 * member reach one receiver in order; spills and steals do not keep order
 * across members. Receive and send with waiters are for tasks (_poll), like
 * a single channel's; there is no blocking thread form. Progress and
 * ordering are those of the channel above plus the set's help mask
 * (set.c's Ordering block).
 */
struct vch_set;

/* Most members a set has (the runtime's worker limit). */
#define VCH_SET_MAX 256u

/* A set of n members (1..VCH_SET_MAX) holding `capacity` values in all
 * (1..VCH_CAPACITY_MAX): member i holds capacity / n, plus one for the
 * first capacity % n (a member may hold none: its senders always spill and
 * its receivers always steal). 0, -EINVAL or -ENOMEM. */
int vch_set_new(unsigned n, size_t capacity, struct vch_set **out);
/* Free a set nobody uses any more (no waiter registered). */
void vch_set_free(struct vch_set *s);
unsigned vch_set_size(const struct vch_set *s);
/* Member i (i < n): for its statistics, length and try_ operations. */
struct vch *vch_set_member(const struct vch_set *s, unsigned i);

/* OK / FULL (every member full) / CLOSED. Never waits. */
enum vch_status vch_set_try_send(struct vch_set *s, unsigned home, uint64_t value);
/* OK / EMPTY / CLOSED (every member closed and drained). Never waits;
 * looks at every member, not only those that asked for help. */
enum vch_status vch_set_try_recv(struct vch_set *s, unsigned home, uint64_t *value);
/* Tasks: as vch_send_poll / vch_recv_poll, on the set. The waiter waits
 * on its home member's queue and serves one set and direction until idle;
 * vch_waiter_cancel withdraws it as for a single channel. */
enum vch_status vch_set_send_poll(struct vch_set *s, unsigned home, struct vch_waiter *w,
				  uint64_t value);
enum vch_status vch_set_recv_poll(struct vch_set *s, unsigned home, struct vch_waiter *w,
				  uint64_t *value);
/* Close every member (every waiter of the set woken). Idempotent. */
void vch_set_close(struct vch_set *s);
/* Values queued in all members (a snapshot; reads every member). */
size_t vch_set_len(const struct vch_set *s);
size_t vch_set_capacity(const struct vch_set *s);
/* Is some value queued? Looks from the home member on and stops at the
 * first that holds one (a snapshot). */
bool vch_set_any(const struct vch_set *s, unsigned home);
/* The members' statistics summed (closed: 1 once every member is). */
void vch_set_stats_get(const struct vch_set *s, struct vch_stats *out);

#endif
