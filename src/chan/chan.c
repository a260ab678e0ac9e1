/* SPDX-License-Identifier: MIT */
/*
 * chan/chan.c: the ring (Dmitry Vyukov's bounded MPMC queue), try_send /
 * try_recv, close, statistics, and the blocking operations for threads.
 *
 * Threading: any number of senders and receivers on any threads. A send
 * claims a position with a CAS on tail, then fills the slot and publishes it
 * through the slot's stamp; a receive claims with a CAS on head, empties the
 * slot and frees it for the next lap through the stamp. Senders touch the
 * tail line, receivers the head line; they meet only in the slots.
 *
 * Ordering:
 *   ch->tail: senders (CAS, position | closed bit) and close (fetch_or).
 *   ch->head: receivers (CAS).
 *   slot->stamp: the sender or receiver that claimed the slot's position.
 *   slot->value: plain; owned by the claimer between the stamp edges below.
 *   [CR1] send: acquire load of the stamp; pairs with [CR6]: the previous
 *        receiver's read of the value happens before our write.
 *   [CR2] send: seq_cst CAS tail -> tail + 2 claims the position. seq_cst
 *        because it is the ring side of the Dekker pair with waiting
 *        receivers ([CW2]/[CW3] in waitq.c); also fails if close set bit 0.
 *   [CR3] send: release store stamp = pos + 1 publishes the value; pairs
 *        with [CR4].
 *   [CR4] recv: acquire load of the stamp; pairs with [CR3].
 *   [CR5] recv: seq_cst CAS head -> head + 2 claims the position; the ring
 *        side of the Dekker pair with waiting senders ([CW2]/[CW3]).
 *   [CR6] recv: release store stamp = pos + 2*size frees the slot; pairs
 *        with [CR1].
 *   [CR7] close: seq_cst fetch_or of the closed bit; Dekker partner of the
 *        waiters' [CW3] like [CR2] (the waiters' queues are then emptied by
 *        seq_cst exchanges in notify_all).
 *   Loads of head/tail to tell "full"/"empty" from "claimed, not finished"
 *   are relaxed: a stale value only sends us round the retry loop once more,
 *   and a waiter's re-check comes after its seq_cst fence [CW3], which makes
 *   any relaxed load that follows see every seq_cst RMW ordered before it.
 *   Blocked threads, phase 1 (slot_ready): relaxed loads of the own side's
 *   position and of its slot's stamp. Only a hint of when to attempt: the
 *   attempt re-reads them with [CR1]/[CR4] and claims with [CR2]/[CR5]; a thread
 *   never sleeps on what a relaxed look told it, only after [CW1] + [CW3] and a
 *   failed attempt, so the Dekker argument of waitq.c is unchanged.
 *   wait_hint, gap_avg, vch__pause_ps, spun and the other side statistics:
 *   relaxed (heuristics and counters; no other data is published through
 *   them).
 */
#include "chan/internal.h"
#include "base/time.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

const char *vch_status_name(enum vch_status s)
{
	switch (s) {
	case VCH_OK: return "ok";
	case VCH_FULL: return "full";
	case VCH_EMPTY: return "empty";
	case VCH_CLOSED: return "closed";
	case VCH_PENDING: return "pending";
	case VCH_YIELD: return "yield";
	case VCH_TIMEDOUT: return "timedout";
	}
	return "?";
}

static uint32_t pause_ps(void);

int vch__new_at(size_t capacity, uint64_t start, struct vch **out)
{
	struct vch *ch = NULL;
	void *buf = NULL;
	uint64_t size = 2;

	*out = NULL;
	if (capacity > VCH_CAPACITY_MAX)
		return -EINVAL;
	while (size < capacity)
		size <<= 1;
	start &= ~(uint64_t)VCH_CLOSED_BIT;

	if (posix_memalign((void **)&ch, VB_CACHELINE, sizeof(*ch)))
		goto err;
	if (posix_memalign(&buf, VB_CACHELINE, size * sizeof(struct vch_slot)))
		goto err_free_ch;
	memset(ch, 0, sizeof(*ch));
	ch->buf = buf;
	ch->mask = size - 1;
	ch->size2 = size * VCH_POS_STEP;
	ch->cap2 = (uint64_t)capacity * VCH_POS_STEP;
	ch->start = start;
	ch->set = NULL;
	ch->home = -1;
	ch->check_len = (size != capacity);
	/* Slot i serves positions i, i + size, ...: the first of them is the
	 * position p >= start with p = i (mod size). */
	for (uint64_t k = 0; k < size; k++) {
		uint64_t pos = start + k * VCH_POS_STEP;
		struct vch_slot *s = &ch->buf[(pos / VCH_POS_STEP) & ch->mask];
		atomic_init(&s->stamp, pos);
		s->value = 0;
	}
	atomic_init(&ch->tail, start);
	atomic_init(&ch->head, start);
	atomic_init(&ch->send_stats.blocked_events, 0);
	atomic_init(&ch->send_stats.waits, 0);
	atomic_init(&ch->recv_stats.blocked_events, 0);
	atomic_init(&ch->recv_stats.waits, 0);
	atomic_init(&ch->send_stats.task_waits, 0);
	atomic_init(&ch->recv_stats.task_waits, 0);
	atomic_init(&ch->send_stats.spun, 0);
	atomic_init(&ch->recv_stats.spun, 0);
	atomic_init(&ch->send_stats.wait_hint, 0);
	atomic_init(&ch->recv_stats.wait_hint, 0);
	atomic_init(&ch->send_stats.gap_avg, vch__gap_init);
	atomic_init(&ch->recv_stats.gap_avg, vch__gap_init);
	atomic_init(&ch->send_stats.crossed, 0);
	atomic_init(&ch->recv_stats.crossed, 0);
	atomic_init(&ch->send_stats.cross_wakes, 0);
	atomic_init(&ch->recv_stats.cross_wakes, 0);
	vch__waitq_init(&ch->sendq, -1, false);
	vch__waitq_init(&ch->recvq, -1, true);
	(void)pause_ps();   /* calibrated once per process, not in a wait */
	*out = ch;
	return 0;

err_free_ch:
	free(ch);
err:
	return -ENOMEM;
}

int vch_new(size_t capacity, struct vch **out)
{
	if (capacity == 0) {
		*out = NULL;
		return -EINVAL;
	}
	return vch__new_at(capacity, 0, out);
}

void vch_free(struct vch *ch)
{
	if (!ch)
		return;
	vch__waitq_fini(&ch->sendq);
	vch__waitq_fini(&ch->recvq);
	free(ch->buf);
	free(ch);
}

/*
 * A claim CAS lost to another sender (receiver): that party made progress,
 * so step aside for a while. Two parties on different CPUs that retry at
 * once move the tail (head) line between their caches on every operation;
 * backing off lets the winner run a batch with the line in its own cache.
 * Measured on the 2-CPU project VM (chan_bench mpmc): immediate retry or a
 * 1-pause start left runs where every message cost a line transfer.
 */
#define VCH_CAS_BACKOFF_PAUSES 64

static inline void cas_backoff(void)
{
	for (unsigned i = 0; i < VCH_CAS_BACKOFF_PAUSES; i++)
		vb_cpu_relax();
}

static inline __attribute__((always_inline))
enum vch_status send_attempt(struct vch *ch, uint64_t value)
{
	/* Relaxed: only a guess; the CAS [CR2] validates it. */
	uint64_t tail = atomic_load_explicit(&ch->tail, memory_order_relaxed);
	unsigned step = 0;

	for (;;) {
		if (vb_unlikely(tail & VCH_CLOSED_BIT))
			return VCH_CLOSED;
		struct vch_slot *s = &ch->buf[(tail / VCH_POS_STEP) & ch->mask];
		/* [CR1] acquire: pairs with [CR6]. */
		uint64_t stamp = atomic_load_explicit(&s->stamp, memory_order_acquire);
		int64_t dif = (int64_t)(stamp - tail);

		if (vb_likely(dif == 0)) {
			if (ch->check_len) {
				/* Capacity below the buffer size: the stamp says the slot
				 * is free, the length must say there is room. Relaxed:
				 * see the Ordering block. */
				uint64_t head = atomic_load_explicit(&ch->head, memory_order_relaxed);
				if ((int64_t)(tail - head) >= (int64_t)ch->cap2)
					return VCH_FULL;
			}
			VCH_LINE_WRITE(ch->home, chan_tail);
			/* [CR2] seq_cst: claims the position; Dekker with [CW3].
			 * Relaxed on failure: the value read is only a new guess. */
			if (vb_likely(atomic_compare_exchange_weak_explicit(&ch->tail, &tail,
					tail + VCH_POS_STEP, memory_order_seq_cst,
					memory_order_relaxed))) {
				VCH_LINE_WRITE(ch->home, chan_slot);
				s->value = value;
				/* [CR3] release: publishes the value; pairs with [CR4]. */
				atomic_store_explicit(&s->stamp, tail + 1, memory_order_release);
				return VCH_OK;
			}
			cas_backoff();
			continue;   /* the failed CAS reloaded tail */
		}
		if (dif < 0) {
			/* The slot still holds the value of the previous lap: full,
			 * unless its receiver has claimed it and is still reading.
			 * Relaxed: see the Ordering block. */
			uint64_t head = atomic_load_explicit(&ch->head, memory_order_relaxed);
			if ((int64_t)(tail - head) >= (int64_t)ch->cap2)
				return VCH_FULL;
			vch__backoff(&step);
		}
		/* Relaxed: another guess for the next CAS. */
		tail = atomic_load_explicit(&ch->tail, memory_order_relaxed);
	}
}

static inline __attribute__((always_inline))
enum vch_status recv_attempt(struct vch *ch, uint64_t *value)
{
	/* Relaxed: only a guess; the CAS [CR5] validates it. */
	uint64_t head = atomic_load_explicit(&ch->head, memory_order_relaxed);
	unsigned step = 0;

	for (;;) {
		struct vch_slot *s = &ch->buf[(head / VCH_POS_STEP) & ch->mask];
		/* [CR4] acquire: pairs with [CR3]. */
		uint64_t stamp = atomic_load_explicit(&s->stamp, memory_order_acquire);
		int64_t dif = (int64_t)(stamp - (head + 1));

		if (vb_likely(dif == 0)) {
			VCH_LINE_WRITE(ch->home, chan_head);
			/* [CR5] seq_cst: claims the position; Dekker with [CW3].
			 * Relaxed on failure: the value read is only a new guess. */
			if (vb_likely(atomic_compare_exchange_weak_explicit(&ch->head, &head,
					head + VCH_POS_STEP, memory_order_seq_cst,
					memory_order_relaxed))) {
				*value = s->value;
				VCH_LINE_WRITE(ch->home, chan_slot);
				/* [CR6] release: frees the slot; pairs with [CR1]. */
				atomic_store_explicit(&s->stamp, head + ch->size2, memory_order_release);
				return VCH_OK;
			}
			cas_backoff();
			continue;   /* the failed CAS reloaded head */
		}
		if (dif < 0) {
			/* No value at head yet: empty, unless a sender claimed the
			 * position and is still writing. Relaxed: see Ordering. */
			uint64_t tail = atomic_load_explicit(&ch->tail, memory_order_relaxed);
			if ((int64_t)((tail & ~(uint64_t)VCH_CLOSED_BIT) - head) <= 0)
				return (tail & VCH_CLOSED_BIT) ? VCH_CLOSED : VCH_EMPTY;
			vch__backoff(&step);
		}
		/* Relaxed: another guess for the next CAS. */
		head = atomic_load_explicit(&ch->head, memory_order_relaxed);
	}
}

enum vch_status vch__send_attempt(struct vch *ch, uint64_t value)
{
	enum vch_status r = send_attempt(ch, value);

	if (r == VCH_OK)
		vch__wake_recv(ch);
	return r;
}

enum vch_status vch__recv_attempt(struct vch *ch, uint64_t *value)
{
	enum vch_status r = recv_attempt(ch, value);

	if (r == VCH_OK)
		vch__wake_send(ch);
	return r;
}

enum vch_status vch_try_send(struct vch *ch, uint64_t value)
{
	enum vch_status r = send_attempt(ch, value);

	if (vb_likely(r == VCH_OK)) {
		vch__wake_recv(ch);
	} else if (r == VCH_FULL) {
		VCH_LINE_WRITE(ch->home, chan_stats);
		/* Relaxed: a statistic. */
		atomic_fetch_add_explicit(&ch->send_stats.blocked_events, 1, memory_order_relaxed);
	}
	return r;
}

enum vch_status vch_try_recv(struct vch *ch, uint64_t *value)
{
	enum vch_status r = recv_attempt(ch, value);

	if (vb_likely(r == VCH_OK)) {
		vch__wake_send(ch);
	} else if (r == VCH_EMPTY) {
		VCH_LINE_WRITE(ch->home, chan_stats);
		/* Relaxed: a statistic. */
		atomic_fetch_add_explicit(&ch->recv_stats.blocked_events, 1, memory_order_relaxed);
	}
	return r;
}

void vch__close_bit(struct vch *ch)
{
	VCH_LINE_WRITE(ch->home, chan_tail);
	/* [CR7] seq_cst: Dekker partner of [CW3], like [CR2]. */
	atomic_fetch_or_explicit(&ch->tail, VCH_CLOSED_BIT, memory_order_seq_cst);
}

void vch__close_wake(struct vch *ch)
{
	vch__waitq_notify_all(&ch->sendq);
	vch__waitq_notify_all(&ch->recvq);
}

void vch_close(struct vch *ch)
{
	vch__close_bit(ch);
	vch__close_wake(ch);
}

bool vch_is_closed(const struct vch *ch)
{
	/* Relaxed: a snapshot; the bit never clears. */
	return atomic_load_explicit(&((struct vch *)ch)->tail, memory_order_relaxed) & VCH_CLOSED_BIT;
}

size_t vch_capacity(const struct vch *ch)
{
	return ch->cap2 / VCH_POS_STEP;
}

size_t vch_len(const struct vch *ch)
{
	struct vch *c = (struct vch *)ch;
	/* Relaxed: a snapshot. Head first, so tail is at least as new and the
	 * difference is not negative unless the loads interleave with a burst;
	 * clamp to [0, capacity] either way. */
	uint64_t head = atomic_load_explicit(&c->head, memory_order_relaxed);
	uint64_t tail = atomic_load_explicit(&c->tail, memory_order_relaxed) & ~(uint64_t)VCH_CLOSED_BIT;
	int64_t d = (int64_t)(tail - head);

	if (d < 0)
		return 0;
	if ((uint64_t)d > ch->cap2)
		d = (int64_t)ch->cap2;
	return (size_t)d / VCH_POS_STEP;
}

#define ROW(...) VB_METRIC_ROW(struct vch_stats, __VA_ARGS__)
const struct vb_metric vch_metrics[] = { VCH_METRICS(ROW) };
const size_t vch_metrics_n = VB_ARRAY_SIZE(vch_metrics);
#undef ROW

void vch_stats_get(const struct vch *ch, struct vch_stats *out)
{
	struct vch *c = (struct vch *)ch;
	/* Relaxed throughout: each counter is a snapshot on its own. */
	uint64_t head = atomic_load_explicit(&c->head, memory_order_relaxed);
	uint64_t tail = atomic_load_explicit(&c->tail, memory_order_relaxed);

	out->capacity = vch_capacity(ch);
	out->len = vch_len(ch);
	out->closed = (tail & VCH_CLOSED_BIT) != 0;
	out->sends = ((tail & ~(uint64_t)VCH_CLOSED_BIT) - ch->start) / VCH_POS_STEP;
	out->recvs = (head - ch->start) / VCH_POS_STEP;
	uint64_t stw = atomic_load_explicit(&c->send_stats.task_waits, memory_order_relaxed);
	uint64_t rtw = atomic_load_explicit(&c->recv_stats.task_waits, memory_order_relaxed);
	out->full_events = atomic_load_explicit(&c->send_stats.blocked_events, memory_order_relaxed) + stw;
	out->empty_events = atomic_load_explicit(&c->recv_stats.blocked_events, memory_order_relaxed) + rtw;
	out->send_waits = atomic_load_explicit(&c->send_stats.waits, memory_order_relaxed) + stw;
	out->recv_waits = atomic_load_explicit(&c->recv_stats.waits, memory_order_relaxed) + rtw;
	out->send_spins = atomic_load_explicit(&c->send_stats.spun, memory_order_relaxed);
	out->recv_spins = atomic_load_explicit(&c->recv_stats.spun, memory_order_relaxed);
	out->stolen = atomic_load_explicit(&c->recv_stats.crossed, memory_order_relaxed);
	out->spilled = atomic_load_explicit(&c->send_stats.crossed, memory_order_relaxed);
	out->cross_wakes = atomic_load_explicit(&c->send_stats.cross_wakes, memory_order_relaxed);
}

void vch_waiter_init(struct vch_waiter *w)
{
	w->next = w->prev = NULL;
	w->task = NULL;
	w->ch = NULL;
	atomic_init(&w->state, VCH_W_IDLE);
	w->dir = 0;
	w->linked = 0;
	w->from = 0;
}

/* ------------------------------------------------------------------ blocking */

/*
 * Waiting strategy of a blocked thread (a send that found the ring full, a
 * receive that found it empty). Figures: one PAUSE is ~24 ns on the project
 * CPU (AMD EPYC, 2 vCPUs) when it is quiet, up to ~50 ns under load (see
 * chan.h); the budgets are PAUSE counts, like crossbeam-channel's Backoff
 * (1..64 PAUSEs per step), so both scale alike with the machine's state.
 *
 * 1. Spin on the slot itself, for a bound that adapts to the gaps this side
 *    has seen (below). The thread watches the ring position it would claim
 *    next (its own side's head or tail word and the slot's stamp; never the
 *    other side's line) and attempts the operation as soon as the stamp says
 *    the value (free slot) is there. Between two looks it pauses
 *    exponentially longer, 1, 2, then at most VCH_SPIN_PROBE_MAX (4)
 *    pauses, so a value that arrives while the thread spins is taken within
 *    about 100 ns of its arrival, whatever else is queued. There is no batch
 *    threshold: one value is enough.
 * 2. A few sched_yield retries (VCH_BLOCK_YIELDS): on a machine with fewer
 *    CPUs than runnable threads, the party we wait for may need our CPU.
 * 3. Register a waiter, re-check ([CW3]), sleep on its futex. The other side
 *    wakes one registered waiter (the newest receiver, the oldest sender)
 *    after every single operation that makes a value (slot) available
 *    (vch__wake_recv / _send), so a sleeper is woken for one value too.
 *
 * The spin bound. A gap is how long a blocked operation waited until it got
 * its value (free slot), in PAUSEs: counted by phase 1 itself while it
 * spins (no clock on the fast path), and by the clock from the end of phase
 * 1 when phase 2 or 3 finished it (vch__pause_ps converts; calibrated once
 * per process). Each side keeps a running estimate of its recent gaps,
 * gap_avg on its statistics line (vch__gap_note: it rises by 1/8 of the
 * difference and falls by 1/2, so one slow value among fast ones does not
 * stop the spinning and a burst after a pause is spun for again after two
 * short gaps; a gap counts as at most 4 caps). vch__spin_bound turns it into
 * phase 1's bound: twice the estimate, at least VCH_SPIN_MIN (128, ~3 us:
 * ping-pong and streams, whose gaps are a few PAUSEs, spin that long and
 * ride out a preemption or an interrupt) and at most the cap
 * VCH_SPIN_CAP (512, ~12 us); and 0 when the estimate is past 1.5 caps: the
 * gaps are long, spinning would only burn the CPU, so phases 1 and 2 are
 * skipped and the thread sleeps at once. Paced traffic (a value every
 * 10 us, chan_bench's paced rows) is then caught while spinning instead of
 * through a futex wake (~6 us at the median, 36 us at p99 pinned, with the
 * fixed 128). The 1.5 (not 1) leaves room for the futex wake's own latency,
 * which a slept gap includes: 10 us gaps measured through sleeps (~16 us,
 * ~670 PAUSEs) still count as short, so a side that once fell back to
 * sleeping spins again.
 *
 * Batching is adaptive, not a threshold. When the other side streams faster
 * than we consume, taking each value the moment it appears makes both sides
 * chase each other through the same slot lines (one or more cache-line
 * transfers per message; ~120 ns each here). So each side keeps a hint,
 * wait_hint, read at the start of phase 1: the first look comes after
 * 2^wait_hint pauses (1 .. 64, i.e. 24 ns .. 1.5 us), the later ones as
 * above. After a wait that ended in phase 1:
 *   - the next position was ready too (another value / free slot besides
 *     ours, seen by one more look at our own word and the next slot): the
 *     backlog is real, waiting longer next time yields a batch: wait_hint + 1
 *     (at most 6);
 *   - only ours, and it was there at the first look while wait_hint < 2: the
 *     other side may be streaming at our pace: probe with wait_hint + 1;
 *   - only ours otherwise (a lone value, ping-pong): wait_hint = 0.
 * A wait that needed phase 2 or 3 also resets it to 0. A lone value
 * therefore waits at most one first pause (<= 1.5 us, only right after a
 * stream); in ping-pong and paced traffic the hint stays at 0. Batches of
 * ~64 values then emerge only while the other side really keeps ahead.
 */
#define VCH_SPIN_MIN       128  /* pauses: the least phase 1 spins when it spins (~3 us) */
#define VCH_SPIN_CAP       512  /* pauses: the most (~12 us); vch__spin_budget */
#define VCH_SPIN_PROBE_MAX 4    /* pauses between two looks after the second */
#define VCH_BLOCK_YIELDS   4    /* sched_yield retries in phase 2 */
#define VCH_HINT_MAX       6    /* first look after at most 2^6 = 64 pauses */
#define VCH_HINT_PROBE     2    /* a lone value at the first look raises the hint below this */
static_assert(VCH_SPIN_PROBE_MAX == 1u << 2, "looks after the second are VCH_SPIN_PROBE_MAX apart");

bool vch__test_park_at_once;
unsigned vch__spin_budget = VCH_SPIN_CAP;
unsigned vch__spin_yields = VCH_BLOCK_YIELDS;
/* Before any gap: the estimate whose bound is VCH_SPIN_MIN (the floor). */
const uint32_t vch__gap_init = (VCH_SPIN_MIN / 2) << VCH_GAP_FRAC;

uint32_t vch__gap_note(uint32_t avg, uint64_t gap_pauses, unsigned cap)
{
	uint64_t most = 4 * (uint64_t)cap;
	uint64_t g = (gap_pauses < most ? gap_pauses : most) << VCH_GAP_FRAC;
	uint64_t a = avg;

	if (g > a)
		a += (g - a) / 8;
	else
		a -= (a - g) / 2;
	return a > UINT32_MAX ? UINT32_MAX : (uint32_t)a;
}

unsigned vch__spin_bound(uint32_t avg, unsigned cap)
{
	uint64_t a = avg >> VCH_GAP_FRAC;
	uint64_t b = 2 * a;

	if (a > (uint64_t)cap + cap / 2)
		return 0;
	if (b < VCH_SPIN_MIN)
		b = VCH_SPIN_MIN;
	return (unsigned)(b < cap ? b : cap);
}

/* Picoseconds per PAUSE, measured once (0: not yet). Relaxed: any value
 * measured by any thread will do; it only converts slept time to PAUSEs. */
static _Atomic uint32_t vch__pause_ps;

static uint32_t pause_ps(void)
{
	uint32_t ps = atomic_load_explicit(&vch__pause_ps, memory_order_relaxed);
	int64_t best = INT64_MAX;

	if (vb_likely(ps))
		return ps;
	/* The fastest of three runs of 256: a preemption makes one slower. */
	for (unsigned k = 0; k < 3; k++) {
		int64_t t0 = vb_now_ns();
		for (unsigned i = 0; i < 256; i++)
			vb_cpu_relax();
		int64_t dt = vb_now_ns() - t0;
		if (dt < best)
			best = dt;
	}
	/* Nothing sensible measured (no clock, no PAUSE): the nominal 24 ns. */
	ps = best > 0 && best < 256 * 1000 ? (uint32_t)(best * 1000 / 256) : 24000;
	/* Relaxed: see above. */
	atomic_store_explicit(&vch__pause_ps, ps ? ps : 1, memory_order_relaxed);
	return ps ? ps : 1;
}

static inline enum vch_status attempt(struct vch *ch, unsigned dir, uint64_t *v)
{
	return dir == VCH_DIR_SEND ? vch__send_attempt(ch, *v) : vch__recv_attempt(ch, v);
}

/*
 * Phase 1 look: could an attempt succeed now? Reads our side's position and
 * the stamp of its slot only. Relaxed: a hint; the attempt that follows
 * re-reads both with its own ordering ([CR1]/[CR4], [CR2]/[CR5]). A stale
 * position reads as "ready" (the stamp moved on) and costs one attempt.
 */
static inline bool slot_ready(struct vch *ch, unsigned dir)
{
	if (dir == VCH_DIR_SEND) {
		uint64_t tail = atomic_load_explicit(&ch->tail, memory_order_relaxed);
		const struct vch_slot *s = &ch->buf[(tail / VCH_POS_STEP) & ch->mask];

		return (tail & VCH_CLOSED_BIT) ||
		       (int64_t)(atomic_load_explicit(&s->stamp, memory_order_relaxed) - tail) >= 0;
	}
	uint64_t head = atomic_load_explicit(&ch->head, memory_order_relaxed);
	const struct vch_slot *s = &ch->buf[(head / VCH_POS_STEP) & ch->mask];

	return (int64_t)(atomic_load_explicit(&s->stamp, memory_order_relaxed) - (head + 1)) >= 0;
}

static inline void set_hint(struct vch_side_stats *st, unsigned old, unsigned hint)
{
	if (hint != old) {
		VB_LINE_WRITE(chan_stats);
		/* Relaxed: a heuristic shared by the side's blocked threads; any
		 * value in 0..VCH_HINT_MAX is safe, a lost update costs one wait. */
		atomic_store_explicit(&st->wait_hint, hint, memory_order_relaxed);
	}
}

/* Phase 1, at most `bound` pauses. Returns `busy` when it ran out; *spent:
 * the pauses it took. */
static enum vch_status spin_phase(struct vch *ch, unsigned dir, uint64_t *v,
				  struct vch_side_stats *st, unsigned bound, unsigned *spent)
{
	const enum vch_status busy = dir == VCH_DIR_SEND ? VCH_FULL : VCH_EMPTY;
	/* Relaxed: see set_hint. */
	unsigned hint = atomic_load_explicit(&st->wait_hint, memory_order_relaxed);
	unsigned pauses = 1u << (hint < VCH_HINT_MAX ? hint : VCH_HINT_MAX);
	unsigned looks = 0;
	enum vch_status r;

	*spent = 0;
	while (*spent < bound) {
		for (unsigned i = 0; i < pauses; i++)
			vb_cpu_relax();
		*spent += pauses;
		looks++;
		if (slot_ready(ch, dir)) {
			r = attempt(ch, dir, v);
			if (r != busy) {
				/* Is the next position ready too (another value / free
				 * slot besides ours)? The same look as above, on our
				 * own word and a slot line we are about to need anyway;
				 * the other side's word would cost a line transfer. */
				bool more = r == VCH_OK && slot_ready(ch, dir);

				if (r != VCH_OK)
					set_hint(st, hint, 0);
				else if (more)
					set_hint(st, hint, hint < VCH_HINT_MAX ? hint + 1 : VCH_HINT_MAX);
				else if (looks == 1 && hint < VCH_HINT_PROBE)
					set_hint(st, hint, hint + 1);
				else
					set_hint(st, hint, 0);
				VCH_LINE_WRITE(ch->home, chan_stats);
				/* Relaxed: a statistic. */
				atomic_fetch_add_explicit(&st->spun, 1, memory_order_relaxed);
				return r;
			}
		}
		pauses = looks < 2 ? 1u << looks : VCH_SPIN_PROBE_MAX;
	}
	set_hint(st, hint, 0);
	return busy;
}

/* Phase 2. Returns `busy` when the thread should register and sleep. */
static enum vch_status yield_phase(struct vch *ch, unsigned dir, uint64_t *v,
				   struct vch_side_stats *st, int64_t deadline_ns)
{
	const enum vch_status busy = dir == VCH_DIR_SEND ? VCH_FULL : VCH_EMPTY;
	enum vch_status r;

	for (unsigned i = 0; i < vch__spin_yields; i++) {
		if (deadline_ns >= 0 && vb_now_ns() >= deadline_ns)
			return VCH_TIMEDOUT;
		sched_yield();
		r = attempt(ch, dir, v);
		if (r != busy) {
			VCH_LINE_WRITE(ch->home, chan_stats);
			/* Relaxed: a statistic. */
			atomic_fetch_add_explicit(&st->spun, 1, memory_order_relaxed);
			return r;
		}
	}
	return busy;
}

/* One more gap for the side's estimate. Relaxed: a heuristic like
 * wait_hint; a lost update between two blocked threads of one side drops
 * one sample. */
static void note_gap(struct vch_side_stats *st, uint64_t pauses)
{
	uint32_t avg = atomic_load_explicit(&st->gap_avg, memory_order_relaxed);
	uint32_t next = vch__gap_note(avg, pauses, vch__spin_budget);

	if (next != avg) {
		VB_LINE_WRITE(chan_stats);
		atomic_store_explicit(&st->gap_avg, next, memory_order_relaxed);
	}
}

static enum vch_status block_wait(struct vch *ch, unsigned dir, uint64_t *v,
				  int64_t deadline_ns)
{
	const enum vch_status busy = dir == VCH_DIR_SEND ? VCH_FULL : VCH_EMPTY;
	struct vch_waitq *q = vch__queue_of(ch, dir);
	struct vch_side_stats *st = dir == VCH_DIR_SEND ? &ch->send_stats : &ch->recv_stats;
	/* Relaxed: see note_gap. */
	unsigned bound = vch__spin_bound(atomic_load_explicit(&st->gap_avg, memory_order_relaxed),
					 vch__spin_budget);
	uint64_t spun = 0;      /* pauses of phase 1 before t_slow */
	int64_t t_slow = -1;    /* when phase 1 first ran out (or was skipped) */
	struct vch_waiter w;
	enum vch_status r;

	vch_waiter_init(&w);
	w.ch = ch;
	w.dir = (uint8_t)dir;
	for (;;) {
		if (!vch__test_park_at_once) {
			if (bound) {
				unsigned spent;

				r = spin_phase(ch, dir, v, st, bound, &spent);
				if (t_slow < 0)
					spun += spent;
				if (r != busy)
					goto done;
			}
			if (t_slow < 0)
				t_slow = vb_now_ns();
			if (bound) {
				/* Long gaps skip the yields too: sleep at once. */
				r = yield_phase(ch, dir, v, st, deadline_ns);
				if (r != busy)
					goto done;
			}
		}
		if (deadline_ns >= 0 && vb_now_ns() >= deadline_ns)
			return VCH_TIMEDOUT;

		/* Relaxed: w is published by the seq_cst register [CW1]. */
		atomic_store_explicit(&w.state, VCH_W_WAITING, memory_order_relaxed);
		vch__waitq_register(q, &w);
		VCH_LINE_WRITE(ch->home, chan_stats);
		/* Relaxed: a statistic. */
		atomic_fetch_add_explicit(&st->waits, 1, memory_order_relaxed);
		/* [CW3] seq_cst fence: the re-check below sees every ring RMW whose
		 * waker may have missed our registration; see waitq.c. */
		atomic_thread_fence(memory_order_seq_cst);
		r = attempt(ch, dir, v);
		if (r != busy) {
			/* Done without sleeping. If a waker claimed us meanwhile, its
			 * wakeup was meant for some waiter: pass it on. */
			if (!vch__waitq_remove(q, &w))
				vch__pass_on(&w);
			goto done;
		}
		if (vch__waiter_sleep(&w, deadline_ns) < 0) {
			if (vch__waitq_remove(q, &w))
				return VCH_TIMEDOUT;
			/* Woken as the deadline passed: use the wakeup. */
			r = attempt(ch, dir, v);
			if (r == busy)
				return VCH_TIMEDOUT;
			goto done;
		}
		/* Notified: the waker is done with w. The value (slot) it announced
		 * may already be gone to a spinning thread: then wait again. */
		r = attempt(ch, dir, v);
		if (r != busy)
			goto done;
	}
done:
	if (r == VCH_OK && !vch__test_park_at_once) {
		uint64_t gap = spun;

		if (t_slow >= 0)
			gap += (uint64_t)(vb_now_ns() - t_slow) * 1000 / pause_ps();
		note_gap(st, gap);
	}
	return r;
}

enum vch_status vch_send_timed(struct vch *ch, uint64_t value, int64_t timeout_ns)
{
	enum vch_status r = vch__send_attempt(ch, value);

	if (vb_likely(r != VCH_FULL))
		return r;
	VCH_LINE_WRITE(ch->home, chan_stats);
	/* Relaxed: a statistic. */
	atomic_fetch_add_explicit(&ch->send_stats.blocked_events, 1, memory_order_relaxed);
	if (timeout_ns == 0)
		return VCH_TIMEDOUT;
	return block_wait(ch, VCH_DIR_SEND, &value,
			  timeout_ns < 0 ? -1 : vb_now_ns() + timeout_ns);
}

enum vch_status vch_recv_timed(struct vch *ch, uint64_t *value, int64_t timeout_ns)
{
	enum vch_status r = vch__recv_attempt(ch, value);

	if (vb_likely(r != VCH_EMPTY))
		return r;
	VCH_LINE_WRITE(ch->home, chan_stats);
	/* Relaxed: a statistic. */
	atomic_fetch_add_explicit(&ch->recv_stats.blocked_events, 1, memory_order_relaxed);
	if (timeout_ns == 0)
		return VCH_TIMEDOUT;
	return block_wait(ch, VCH_DIR_RECV, value,
			  timeout_ns < 0 ? -1 : vb_now_ns() + timeout_ns);
}

/*
 * vch_send / vch_recv look at their slot first (slot_ready) and attempt only
 * when it is ready; otherwise they go straight to block_wait, whose spin
 * phase looks at the same slot. An attempt on a slot that is not ready reads
 * the other side's word to tell "full/empty" from "claimed, not finished",
 * which takes that line out of the other side's cache just before it writes
 * it (one more transfer on the path of every ping-pong hop). Close is still
 * seen: by send_attempt for a sender (slot_ready reports the closed bit), by
 * the attempts of phase 2 for a receiver (a few us later).
 */
enum vch_status vch_send(struct vch *ch, uint64_t value)
{
	enum vch_status r = VCH_FULL;

	if (vb_likely(slot_ready(ch, VCH_DIR_SEND)))
		r = send_attempt(ch, value);
	if (vb_likely(r == VCH_OK)) {
		vch__wake_recv(ch);
		return r;
	}
	if (r == VCH_CLOSED)
		return r;
	VCH_LINE_WRITE(ch->home, chan_stats);
	/* Relaxed: a statistic. */
	atomic_fetch_add_explicit(&ch->send_stats.blocked_events, 1, memory_order_relaxed);
	return block_wait(ch, VCH_DIR_SEND, &value, -1);
}

enum vch_status vch_recv(struct vch *ch, uint64_t *value)
{
	enum vch_status r = VCH_EMPTY;

	if (vb_likely(slot_ready(ch, VCH_DIR_RECV)))
		r = recv_attempt(ch, value);

	if (vb_likely(r == VCH_OK)) {
		vch__wake_send(ch);
		return r;
	}
	if (r == VCH_CLOSED)
		return r;
	VCH_LINE_WRITE(ch->home, chan_stats);
	/* Relaxed: a statistic. */
	atomic_fetch_add_explicit(&ch->recv_stats.blocked_events, 1, memory_order_relaxed);
	return block_wait(ch, VCH_DIR_RECV, value, -1);
}
