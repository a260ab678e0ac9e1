/* SPDX-License-Identifier: MIT */
/*
 * chan/set.c: a set of channels, one member per worker, with stealing
 * across (chan.h, vch_set). Each member is a whole channel (chan.c, its own
 * ring, waiter queues and statistics); this file adds where a sender puts a
 * value (its own member, else the next with room: spill), where a receiver
 * looks (the member its wakeup named, its own, then those that asked for
 * help: steal), and the wakeup across members: a value whose member has no
 * waiting receiver marks the member in the help mask and wakes a receiver
 * waiting on another member.
 *
 * Threading: as a channel's (any operation on any thread, any home); the
 * help mask is the only state of the set itself that anyone writes.
 *
 * Ordering (with chan.c's [CR*] and waitq.c's [CW*]):
 *   s->help[]: bit i is set by a sender of member i that woke no receiver of
 *     member i's queue ([CS1]), cleared by a receiver that found member i
 *     empty ([CS3]) and set again by that receiver when its second look
 *     found a value after all ([CS4]). All its RMWs and the loads that
 *     decide anything are seq_cst.
 *   [CS1] sender: after its claim ([CR2]) and its look at its own member's
 *        queue ([CW2]) found no waiter: seq_cst load of its bit and, if
 *        clear, seq_cst fetch_or; then [CS2].
 *   [CS2] the same sender: seq_cst loads of the other members' receive
 *        queues' has_waiters (the partner of their [CW1]), claiming ([CW5])
 *        and waking the first waiter found, with the member to look at.
 *   [CS3] receiver: found member i empty with bit i set: seq_cst fetch_and
 *        clears it, then a seq_cst fence, then a second look at member i,
 *        which therefore sees every claim [CR2] that precedes the clear in
 *        the single order S.
 *   [CS4] that receiver, when the second look took a value: seq_cst
 *        fetch_or sets bit i again and, with values left, runs [CS2].
 *   [CS5] receiver, re-checking after its registration ([CW1]) and fence
 *        ([CW3]): seq_cst loads of the mask, then a look at every member
 *        whose bit is set.
 *   The mask's relaxed loads (before a receiver registers; whether a member
 *   found empty is worth a clear) are hints: a stale one costs a look.
 *
 * The rule: no value waits in a member behind that member's busy receivers
 * while a receiver of another member waits. Take a value v sent into member
 * i (its claim a, [CR2]).
 * (1) Its sender woke a waiter of member i's queue ([CW2]): that waiter's
 *     next receive looks at member i first (the wakeup names it).
 * (2) Otherwise [CS1] then [CS2]. Let R be a receiver that registers on
 *     member x's queue (its [CW1], event r), fences ([CW3]) and reads the
 *     mask ([CS5], event m). If the sender's load of x's has_waiters comes
 *     after r in S, it sees a waiter there and wakes one, for member i (or
 *     the waiters it saw were woken or withdrew meanwhile, so they are awake
 *     and will look at the mask). Otherwise [CS1] <S that load <S r <S
 *     [CW3] <S m, so m sees bit i, unless a receiver C cleared it ([CS3])
 *     in between: C's second look follows a in S and sees v (or that v was
 *     taken); if it takes a value and values are left, [CS4] sets the bit
 *     again and runs [CS2]; if m read the cleared word it precedes that set
 *     in S, so C's load of x's has_waiters follows r and sees R's queue
 *     occupied: C wakes a receiver there.
 * So for every value either a receiver was woken to look at its member, or
 * its member's bit is seen by every receiver that registers after it; the
 * runtime's "last searcher must notify", for channels. A wakeup a receiver
 * does not use is passed on for the member it named (vch__pass_on), as one
 * more case (1) or (2).
 * Closing sets every member's closed bit ([CR7]) before it wakes any queue,
 * so a receiver that registers on a closed member and re-checks either is
 * woken by the close or sees every member closed.
 */
#include "chan/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static inline _Atomic uint64_t *help_word(struct vch_set *s, unsigned i)
{
	return &s->help[i / 64];
}

static inline uint64_t help_bit(unsigned i)
{
	return (uint64_t)1 << (i % 64);
}

int vch_set_new(unsigned n, size_t capacity, struct vch_set **out)
{
	struct vch_set *s = NULL;
	int rc;

	*out = NULL;
	if (n == 0 || n > VCH_SET_MAX || capacity == 0 || capacity > VCH_CAPACITY_MAX)
		return -EINVAL;
	if (posix_memalign((void **)&s, VB_CACHELINE, sizeof(*s)))
		return -ENOMEM;
	memset(s, 0, sizeof(*s));
	for (unsigned k = 0; k < VCH_SET_WORDS; k++)
		atomic_init(&s->help[k], 0);
	s->m = calloc(n, sizeof(*s->m));
	if (!s->m) {
		free(s);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < n; i++) {
		size_t cap = capacity / n + (i < capacity % n);

		rc = vch__new_at(cap, 0, &s->m[i]);
		if (rc < 0) {
			vch_set_free(s);
			return rc;
		}
		s->n = i + 1;
		s->m[i]->set = s;
		s->m[i]->home = (int32_t)i;
		s->m[i]->sendq.home = (int32_t)i;
		s->m[i]->recvq.home = (int32_t)i;
	}
	s->capacity = capacity;
	*out = s;
	return 0;
}

void vch_set_free(struct vch_set *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < s->n; i++)
		vch_free(s->m[i]);
	free(s->m);
	free(s);
}

unsigned vch_set_size(const struct vch_set *s)
{
	return s->n;
}

struct vch *vch_set_member(const struct vch_set *s, unsigned i)
{
	VB_BUG_ON(i >= s->n);
	return s->m[i];
}

/* One more in a member's own counter, written by its worker. Relaxed: a
 * statistic. */
static void count(struct vch *ch, _Atomic uint64_t *c)
{
	VCH_LINE_WRITE(ch->home, chan_stats);
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* The member whose statistics the calling thread writes: its worker's
 * (so a member's statistics line stays on its worker), else `dflt`. */
static struct vch *counted(struct vch_set *s, unsigned dflt)
{
	int w = vrt_worker_id();

	return s->m[w >= 0 && (unsigned)w < s->n ? (unsigned)w : dflt];
}

/* [CS2]: wake a receiver waiting on a member other than i, for member i.
 * True when one was woken. */
static bool wake_other(struct vch_set *s, unsigned i)
{
	for (unsigned k = 1; k < s->n; k++) {
		struct vch *o = s->m[(i + k) % s->n];

		/* [CS2] seq_cst: pairs with the waiters' [CW1] (and their [CW3] +
		 * [CS5]); see the Ordering block. */
		if (atomic_load_explicit(&o->recvq.has_waiters, memory_order_seq_cst) != 0 &&
		    vch__waitq_notify_one(&o->recvq, i)) {
			struct vch *c = counted(s, i);

			count(c, &c->send_stats.cross_wakes);
			return true;
		}
	}
	return false;
}

void vch__set_wake_other(struct vch *ch)
{
	struct vch_set *s = ch->set;
	unsigned i = (unsigned)ch->home;
	_Atomic uint64_t *word = help_word(s, i);

	if (s->n == 1)
		return;   /* nobody else to ask */
	/* [CS1] seq_cst: the bit is asked for before the other queues are
	 * looked at (a set bit is left alone: its line stays shared); pairs
	 * with [CS3], which clears it. */
	if (!(atomic_load_explicit(word, memory_order_seq_cst) & help_bit(i))) {
		VB_LINE_WRITE(chan_help);
		/* [CS1] seq_cst: pairs with the receivers' [CS5] and [CS3]. */
		atomic_fetch_or_explicit(word, help_bit(i), memory_order_seq_cst);
	}
	wake_other(s, i);
}

/*
 * One look at member i for a receiver whose home is `home`. A member found
 * empty with its bit set has it cleared and is looked at again ([CS3]); a
 * value that second look finds sets the bit again ([CS4]) and, with more
 * left, wakes a receiver of another member ([CS2]).
 */
static enum vch_status take(struct vch_set *s, unsigned i, unsigned home, uint64_t *v)
{
	struct vch *ch = s->m[i];
	_Atomic uint64_t *word = help_word(s, i);
	uint64_t bit = help_bit(i);
	enum vch_status r = vch__recv_attempt(ch, v);

	/* Relaxed: a hint; the clear below is what decides. */
	if (r == VCH_EMPTY && (atomic_load_explicit(word, memory_order_relaxed) & bit)) {
		VB_LINE_WRITE(chan_help);
		/* [CS3] seq_cst clear (pairs with the senders' [CS1]), then the
		 * [CS3] fence: the second look sees every claim [CR2] ordered
		 * before the clear. */
		atomic_fetch_and_explicit(word, ~bit, memory_order_seq_cst);
		atomic_thread_fence(memory_order_seq_cst);
		r = vch__recv_attempt(ch, v);
		if (r == VCH_OK) {
			VB_LINE_WRITE(chan_help);
			/* [CS4] seq_cst: a value came after all; pairs with [CS5]. */
			atomic_fetch_or_explicit(word, bit, memory_order_seq_cst);
			if (vch_len(ch) > 0 && s->n > 1)
				wake_other(s, i);
		}
	}
	if (r == VCH_OK && i != home)
		count(s->m[home], &s->m[home]->recv_stats.crossed);
	return r;
}

/*
 * A receiver's look: `first` (the member its wakeup named, else its home),
 * its home, then every member whose bit is set ([CS5]); with `all` (or once
 * a member says closed) every member. OK, EMPTY, or CLOSED when every
 * member is closed and drained.
 */
static enum vch_status take_any(struct vch_set *s, unsigned first, unsigned home, uint64_t *v, bool all)
{
	enum vch_status r = take(s, first, home, v);
	bool closing = r == VCH_CLOSED;

	if (r == VCH_OK)
		return r;
	if (home != first) {
		r = take(s, home, home, v);
		if (r == VCH_OK)
			return r;
		closing |= r == VCH_CLOSED;
	}
	if (!all && !closing) {
		for (unsigned k = 0; k < VCH_SET_WORDS && k * 64 < s->n; k++) {
			/* [CS5] seq_cst: pairs with [CS1] / [CS4]; see the Ordering block. */
			uint64_t m = atomic_load_explicit(&s->help[k], memory_order_seq_cst);

			while (m) {
				unsigned i = k * 64 + (unsigned)__builtin_ctzll(m);

				m &= m - 1;
				if (i == first || i == home)
					continue;
				r = take(s, i, home, v);
				if (r == VCH_OK)
					return r;
				if (r == VCH_CLOSED) {
					closing = true;
					break;
				}
			}
		}
		if (!closing)
			return VCH_EMPTY;
	}
	/* Every member, from the one after home: a drain, or a close. */
	bool all_closed = true;
	for (unsigned k = 0; k < s->n; k++) {
		unsigned i = (home + k) % s->n;

		if (i == first || i == home) {
			/* Looked at above; closed once it said so. */
			all_closed &= vch_is_closed(s->m[i]) && vch_len(s->m[i]) == 0;
			continue;
		}
		r = take(s, i, home, v);
		if (r == VCH_OK)
			return r;
		all_closed &= r == VCH_CLOSED;
	}
	return all_closed ? VCH_CLOSED : VCH_EMPTY;
}

/* `first` (the member whose room woke the sender, else its home), then
 * home, then the other members from a place the value picks (so one
 * worker's spills spread over the others). A woken sender looks at the
 * member that woke it first, so the room its wakeup announced is used:
 * taking room elsewhere would leave that member's room to senders that
 * wait for it and were not woken. OK / FULL / CLOSED. */
static enum vch_status put_at(struct vch_set *s, unsigned i, unsigned home, uint64_t v)
{
	enum vch_status r = vch__send_attempt(s->m[i], v);

	if (r == VCH_OK && i != home)
		count(s->m[home], &s->m[home]->send_stats.crossed);
	return r;
}

static enum vch_status put(struct vch_set *s, unsigned first, unsigned home, uint64_t v)
{
	enum vch_status r = put_at(s, first, home, v);

	if (r != VCH_FULL)
		return r;
	if (first != home && (r = put_at(s, home, home, v)) != VCH_FULL)
		return r;
	if (s->n == 1)
		return VCH_FULL;
	unsigned start = (unsigned)(((v >> 6) * 0x9E3779B97F4A7C15ull) >> 32) % (s->n - 1);
	for (unsigned k = 0; k < s->n - 1; k++) {
		unsigned i = (home + 1 + (start + k) % (s->n - 1)) % s->n;

		if (i != first && (r = put_at(s, i, home, v)) != VCH_FULL)
			return r;
	}
	return VCH_FULL;
}

enum vch_status vch_set_try_send(struct vch_set *s, unsigned home, uint64_t value)
{
	VB_BUG_ON(home >= s->n);
	enum vch_status r = put(s, home, home, value);

	if (r == VCH_FULL)
		count(s->m[home], &s->m[home]->send_stats.blocked_events);
	return r;
}

enum vch_status vch_set_try_recv(struct vch_set *s, unsigned home, uint64_t *value)
{
	VB_BUG_ON(home >= s->n);
	enum vch_status r = take_any(s, home, home, value, true);

	if (r == VCH_EMPTY)
		count(s->m[home], &s->m[home]->recv_stats.blocked_events);
	return r;
}

/* The member a sender that found the set full waits on: its home, unless
 * the home holds nothing (capacity 0: no receive there would ever wake it),
 * then the next member that holds values. Every member was full at the
 * sender's re-check, so that one is not empty, and its next receive wakes
 * the sender. */
static unsigned send_wait_member(const struct vch_set *s, unsigned home)
{
	for (unsigned k = 0; k < s->n; k++) {
		unsigned i = (home + k) % s->n;

		if (s->m[i]->cap2)
			return i;
	}
	return home;   /* not reached: the capacity is at least 1 */
}

/* The set's _poll operations: async.c's op_poll with the set's put / take
 * and the registration on the home member's queue (a sender's: see
 * send_wait_member). */
static enum vch_status set_poll(struct vch_set *s, unsigned dir, unsigned home, struct vch_waiter *w,
				uint64_t *v)
{
	const enum vch_status busy = dir == VCH_DIR_SEND ? VCH_FULL : VCH_EMPTY;
	struct vch *own = s->m[dir == VCH_DIR_SEND ? send_wait_member(s, home) : home];
	unsigned first = home;
	enum vch_status r;
	uint32_t st;
	struct vrt_task *t;

	VB_BUG_ON(home >= s->n);
	if (!vrt_budget_consume())
		return VCH_YIELD;

	/* [CW6] acquire: pairs with [CW4]; w->from is the waker's. */
	st = atomic_load_explicit(&w->state, memory_order_acquire);
	if (st == VCH_W_NOTIFIED) {
		if (w->from < s->n)
			first = w->from;
		/* Woken: this attempt uses the wakeup. Relaxed: owner-only now. */
		atomic_store_explicit(&w->state, VCH_W_IDLE, memory_order_relaxed);
		w->task = NULL;
		st = VCH_W_IDLE;
	}

	r = dir == VCH_DIR_SEND ? put(s, first, home, *v) : take_any(s, first, home, v, false);
	if (st == VCH_W_WAITING) {
		/* Polled while still registered (woken by something else). */
		VB_BUG_ON(w->ch->set != s || w->dir != dir);
		if (r == busy)
			return VCH_PENDING;
		vch__withdraw(w);
		return r;
	}
	if (r != busy)
		return r;

	t = vrt_current();
	if (!t) {
		count(own, dir == VCH_DIR_SEND ? &own->send_stats.blocked_events
					       : &own->recv_stats.blocked_events);
		return busy;   /* not in a task: behave like try_ */
	}

	vrt_task_ref(t);   /* owned by the queue while w is registered */
	w->task = t;
	w->ch = own;
	w->dir = (uint8_t)dir;
	/* Relaxed: published by the seq_cst register [CW1]. */
	atomic_store_explicit(&w->state, VCH_W_WAITING, memory_order_relaxed);
	vch__waitq_register(vch__queue_of(own, dir), w);
	vch__count_task_wait(own, dir);
	/* [CW3] seq_cst fence: the re-check sees every claim whose waker may
	 * have missed the registration (its own member's, [CW2], and every
	 * other member's through the mask, [CS5]); see the Ordering block. */
	atomic_thread_fence(memory_order_seq_cst);
	r = dir == VCH_DIR_SEND ? put(s, home, home, *v) : take_any(s, home, home, v, false);
	if (r == busy)
		return VCH_PENDING;
	vch__withdraw(w);
	return r;
}

enum vch_status vch_set_send_poll(struct vch_set *s, unsigned home, struct vch_waiter *w, uint64_t value)
{
	return set_poll(s, VCH_DIR_SEND, home, w, &value);
}

enum vch_status vch_set_recv_poll(struct vch_set *s, unsigned home, struct vch_waiter *w, uint64_t *value)
{
	return set_poll(s, VCH_DIR_RECV, home, w, value);
}

void vch_set_close(struct vch_set *s)
{
	/* Every closed bit before any wakeup: see the Ordering block. */
	for (unsigned i = 0; i < s->n; i++)
		vch__close_bit(s->m[i]);
	for (unsigned i = 0; i < s->n; i++)
		vch__close_wake(s->m[i]);
}

size_t vch_set_len(const struct vch_set *s)
{
	size_t n = 0;

	for (unsigned i = 0; i < s->n; i++)
		n += vch_len(s->m[i]);
	return n;
}

size_t vch_set_capacity(const struct vch_set *s)
{
	return s->capacity;
}

bool vch_set_any(const struct vch_set *s, unsigned home)
{
	for (unsigned k = 0; k < s->n; k++)
		if (vch_len(s->m[(home + k) % s->n]) > 0)
			return true;
	return false;
}

void vch_set_stats_get(const struct vch_set *s, struct vch_stats *out)
{
	struct vch_stats m;

	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < s->n; i++) {
		vch_stats_get(s->m[i], &m);
#define SUM(field, ...) out->field += m.field;
		VCH_METRICS(SUM)
#undef SUM
	}
	/* Closed: every member is. */
	out->closed = out->closed == s->n;
}
