/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_chan_set.c: the channel set (one member per worker,
 * stealing across). On one thread against a model (one FIFO per member):
 * random try_send / try_recv with random homes and close for 1..5 members
 * and capacities that leave some members empty-handed; where each value
 * lands (home unless full, then any member with room), which one a receive
 * takes (home first, then the next members in turn), FULL only when every
 * member is full, the statistics (stolen, spilled). With tasks on a
 * 1-worker runtime (a blocker holds the worker while the test looks at the
 * waiters' states, so the order is known): a value wakes a receiver of its
 * own member first, the newest; with none there it marks its member in the
 * help mask and wakes another member's receiver, which takes it (the rule);
 * a receiver that starts later finds a marked member's value; a member
 * found empty is unmarked; a wakeup given to a cancelled receiver passes on
 * for the member it named; a sender waits on its home member (on a member
 * that holds values when its home holds none) and is woken by room there;
 * close wakes everyone, receivers drain first; the budget. Seed:
 * VOLTD_TEST_SEED (printed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/rng.h"
#include "base/time.h"
#include "chan/internal.h"
#include "rt/rt.h"
#include "tests/helpers/test_config.h"

#define WAIT_LIMIT_NS (10 * 1000 * VB_NS_PER_MS)

static uint64_t seed;

/* ------------------------------------------------------------ the model */

#define MAXM 5
#define MAXCAP 16

struct model {
	unsigned n;
	size_t cap[MAXM], head[MAXM], len[MAXM];
	uint64_t v[MAXM][MAXCAP];
	bool closed;
	uint64_t sends, recvs, stolen, spilled, full, empty;
};

static size_t model_total(const struct model *m)
{
	size_t t = 0;

	for (unsigned i = 0; i < m->n; i++)
		t += m->len[i];
	return t;
}

static void check_lens(struct vch_set *s, const struct model *m)
{
	struct vch_stats st;

	for (unsigned i = 0; i < m->n; i++) {
		assert_int_equal(vch_len(vch_set_member(s, i)), m->len[i]);
		assert_int_equal(vch_capacity(vch_set_member(s, i)), m->cap[i]);
	}
	vch_set_stats_get(s, &st);
	assert_int_equal(st.len, model_total(m));
	assert_int_equal(vch_set_len(s), model_total(m));
	assert_int_equal(st.sends, m->sends);
	assert_int_equal(st.recvs, m->recvs);
	assert_int_equal(st.stolen, m->stolen);
	assert_int_equal(st.spilled, m->spilled);
	assert_int_equal(st.full_events, m->full);
	assert_int_equal(st.empty_events, m->empty);
	assert_int_equal(st.closed, m->closed);
	assert_int_equal(st.cross_wakes, 0);   /* nobody waits on this thread */
}

/* try_send with home h: the member it lands in must be h unless h was
 * full, then any member that had room; FULL exactly when all were full. */
static void model_send(struct vch_set *s, struct model *m, unsigned h, uint64_t x)
{
	size_t before[MAXM];
	enum vch_status r;
	unsigned landed = MAXM;

	for (unsigned i = 0; i < m->n; i++)
		before[i] = vch_len(vch_set_member(s, i));
	r = vch_set_try_send(s, h, x);
	if (m->closed) {
		assert_int_equal(r, VCH_CLOSED);
		return;
	}
	if (model_total(m) == vch_set_capacity(s)) {
		assert_int_equal(r, VCH_FULL);
		m->full++;
		return;
	}
	assert_int_equal(r, VCH_OK);
	for (unsigned i = 0; i < m->n; i++)
		if (vch_len(vch_set_member(s, i)) == before[i] + 1)
			landed = i;
	assert_true(landed < m->n);
	if (m->len[h] < m->cap[h])
		assert_int_equal(landed, h);
	assert_true(m->len[landed] < m->cap[landed]);
	m->v[landed][(m->head[landed] + m->len[landed]) % m->cap[landed]] = x;
	m->len[landed]++;
	m->sends++;
	m->spilled += landed != h;
}

/* try_recv with home h: the head of the first member holding a value in
 * the order h, h+1, ...; EMPTY (or CLOSED once closed) with none. */
static void model_recv(struct vch_set *s, struct model *m, unsigned h)
{
	uint64_t got = 0;
	enum vch_status r = vch_set_try_recv(s, h, &got);

	for (unsigned k = 0; k < m->n; k++) {
		unsigned i = (h + k) % m->n;

		if (!m->len[i])
			continue;
		assert_int_equal(r, VCH_OK);
		assert_int_equal(got, m->v[i][m->head[i]]);
		m->head[i] = (m->head[i] + 1) % m->cap[i];
		m->len[i]--;
		m->recvs++;
		m->stolen += i != h;
		return;
	}
	if (m->closed) {
		assert_int_equal(r, VCH_CLOSED);
		return;
	}
	assert_int_equal(r, VCH_EMPTY);
	m->empty++;
}

static void run_model(unsigned n, size_t cap, unsigned steps, struct vb_rng *rng)
{
	struct vch_set *s;
	struct model m;
	uint64_t next = 1;
	unsigned bias = 50;

	assert_int_equal(vch_set_new(n, cap, &s), 0);
	memset(&m, 0, sizeof(m));
	m.n = n;
	for (unsigned i = 0; i < n; i++)
		m.cap[i] = cap / n + (i < cap % n);
	for (unsigned i = 0; i < steps; i++) {
		unsigned op = vb_rng_below(rng, 1000), h = vb_rng_below(rng, n);

		if (i % 256 == 0)
			bias = 10 + vb_rng_below(rng, 81);
		if (op < 2 && i > steps / 2) {
			vch_set_close(s);
			m.closed = true;
		} else if (op < bias * 10) {
			model_send(s, &m, h, next++);
		} else {
			model_recv(s, &m, h);
		}
		if (i % 5 == 0)
			check_lens(s, &m);
	}
	vch_set_close(s);
	m.closed = true;
	while (model_total(&m))
		model_recv(s, &m, vb_rng_below(rng, n));
	model_recv(s, &m, 0);
	model_send(s, &m, 0, 7);
	check_lens(s, &m);
	vch_set_free(s);
}

static void test_model_random(void **state)
{
	static const size_t caps[] = { 1, 2, 3, 5, 7, 16 };
	struct vb_rng rng;

	vb_rng_seed(&rng, seed);
	for (unsigned n = 1; n <= MAXM; n++)
		for (size_t c = 0; c < VB_ARRAY_SIZE(caps); c++)
			for (unsigned k = 0; k < 4; k++)
				run_model(n, caps[c], 2000, &rng);
}

static void test_capacity_split(void **state)
{
	struct vch_set *s;

	assert_int_equal(vch_set_new(3, 7, &s), 0);
	assert_int_equal(vch_set_size(s), 3);
	assert_int_equal(vch_set_capacity(s), 7);
	assert_int_equal(vch_capacity(vch_set_member(s, 0)), 3);
	assert_int_equal(vch_capacity(vch_set_member(s, 1)), 2);
	assert_int_equal(vch_capacity(vch_set_member(s, 2)), 2);
	vch_set_free(s);
	/* Fewer values than members: some members hold none. */
	assert_int_equal(vch_set_new(3, 1, &s), 0);
	assert_int_equal(vch_capacity(vch_set_member(s, 2)), 0);
	assert_int_equal(vch_set_try_send(s, 2, 5), VCH_OK);   /* spills to member 0 */
	assert_int_equal(vch_len(vch_set_member(s, 0)), 1);
	assert_int_equal(vch_set_try_send(s, 1, 6), VCH_FULL);
	assert_true(vch_set_any(s, 2));
	vch_set_free(s);
	assert_int_equal(vch_set_new(0, 4, &s), -EINVAL);
	assert_int_equal(vch_set_new(VCH_SET_MAX + 1, 4096, &s), -EINVAL);
	assert_int_equal(vch_set_new(2, 0, &s), -EINVAL);
	assert_int_equal(vch_set_new(VCH_SET_MAX, VCH_SET_MAX, &s), 0);
	vch_set_free(s);
}

/* -------------------------------------------------------------- tasks */

static struct vrt *rt;

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

struct stask {
	struct vrt_task task;
	struct vch_set *set;
	unsigned home;
	struct vch_waiter w;
	bool send;
	unsigned ops, done, yields;
	uint64_t value;           /* send: first value; recv: last value */
	enum vch_status last;
	_Atomic int *freed;
};

static void stask_drop(struct vrt_task *t)
{
	struct stask *c = vb_container_of(t, struct stask, task);

	if (c->freed)
		atomic_fetch_add(c->freed, 1);
	memset(c, 0xa5, sizeof(*c));
	free(c);
}

static enum vrt_poll stask_poll(struct vrt_task *t)
{
	struct stask *c = vb_container_of(t, struct stask, task);

	if (vrt_task_is_cancelled(t)) {
		vch_waiter_cancel(&c->w);
		c->last = VCH_CLOSED;
		return VRT_READY;
	}
	while (c->done < c->ops) {
		uint64_t v = c->value + c->done;
		enum vch_status r = c->send ? vch_set_send_poll(c->set, c->home, &c->w, v)
					    : vch_set_recv_poll(c->set, c->home, &c->w, &v);
		c->last = r;
		if (r == VCH_PENDING)
			return VRT_PENDING;
		if (r == VCH_YIELD) {
			c->yields++;
			return VRT_YIELD;
		}
		if (r != VCH_OK)
			return VRT_READY;
		if (!c->send)
			c->value = v;
		c->done++;
	}
	return VRT_READY;
}

static const struct vrt_task_vtable stask_vt = { .poll = stask_poll, .drop = stask_drop };

static struct stask *stask_spawn(struct vch_set *s, unsigned home, bool send, unsigned ops, uint64_t value,
				 _Atomic int *freed)
{
	struct stask *c = calloc(1, sizeof(*c));

	assert_non_null(c);
	c->set = s;
	c->home = home;
	c->send = send;
	c->ops = ops;
	c->value = value;
	c->freed = freed;
	vch_waiter_init(&c->w);
	vrt_task_init(&c->task, &stask_vt);
	assert_int_equal(vrt_spawn(rt, &c->task), 0);
	return c;
}

/* Join; the caller looks at the task, then lets it go (stask_put). */
static void stask_finish(struct stask *c)
{
	vrt_task_join_wait(&c->task);
}

static void stask_put(struct stask *c)
{
	vrt_task_unref(&c->task);
}

/* Wait (bounded) until member i counted n waits on a side. */
static void wait_for_waits(struct vch_set *s, unsigned i, bool send_side, uint64_t n)
{
	int64_t end = vb_now_ns() + WAIT_LIMIT_NS;
	struct vch_stats st;

	for (;;) {
		vch_stats_get(vch_set_member(s, i), &st);
		if ((send_side ? st.send_waits : st.recv_waits) >= n)
			return;
		if (vb_now_ns() > end)
			fail_msg("waiters never registered on member %u (want %llu)", i, (unsigned long long)n);
		sleep_ms(1);
	}
}

static void wait_freed(_Atomic int *freed, int n)
{
	int64_t end = vb_now_ns() + WAIT_LIMIT_NS;

	while (atomic_load(freed) < n) {
		if (vb_now_ns() > end)
			fail_msg("only %d of %d tasks dropped: a reference leaked", atomic_load(freed), n);
		sleep_ms(1);
	}
}

/* A task that occupies the only worker until released. */
struct blocker {
	struct vrt_task task;
	_Atomic int go, running;
};

static enum vrt_poll blocker_poll(struct vrt_task *t)
{
	struct blocker *b = vb_container_of(t, struct blocker, task);
	int64_t end = vb_now_ns() + WAIT_LIMIT_NS;

	atomic_store(&b->running, 1);
	while (!atomic_load(&b->go) && vb_now_ns() < end)
		sched_yield();
	return VRT_READY;
}

static const struct vrt_task_vtable blocker_vt = { .poll = blocker_poll };

static void blocker_start(struct blocker *b)
{
	int64_t end = vb_now_ns() + WAIT_LIMIT_NS;

	memset(b, 0, sizeof(*b));
	vrt_task_init(&b->task, &blocker_vt);
	assert_int_equal(vrt_spawn(rt, &b->task), 0);
	while (!atomic_load(&b->running))
		if (vb_now_ns() > end)
			fail_msg("blocker never ran");
}

static void blocker_stop(struct blocker *b)
{
	atomic_store(&b->go, 1);
	vrt_task_join_wait(&b->task);
	vrt_task_unref(&b->task);
}

static bool helped(struct vch_set *s, unsigned i)
{
	return atomic_load(&s->help[i / 64]) & ((uint64_t)1 << (i % 64));
}

static struct vch_stats member_stats(struct vch_set *s, unsigned i)
{
	struct vch_stats st;

	vch_stats_get(vch_set_member(s, i), &st);
	return st;
}

/* A value wakes its own member's receiver, the newest first; the others
 * stay parked. */
static void test_task_own_member_newest(void **state)
{
	struct vch_set *s;
	_Atomic int freed = 0;
	struct stask *a, *b, *c;
	struct blocker blk;

	assert_int_equal(vch_set_new(2, 8, &s), 0);
	a = stask_spawn(s, 0, false, 1, 0, &freed);
	wait_for_waits(s, 0, false, 1);
	b = stask_spawn(s, 0, false, 1, 0, &freed);
	wait_for_waits(s, 0, false, 2);
	c = stask_spawn(s, 1, false, 1, 0, &freed);
	wait_for_waits(s, 1, false, 1);
	blocker_start(&blk);
	assert_int_equal(vch_set_try_send(s, 0, 11), VCH_OK);
	assert_int_equal(atomic_load(&b->w.state), VCH_W_NOTIFIED);
	assert_int_equal(b->w.from, 0);
	assert_int_equal(atomic_load(&a->w.state), VCH_W_WAITING);
	assert_int_equal(atomic_load(&c->w.state), VCH_W_WAITING);
	assert_false(helped(s, 0));
	assert_int_equal(vch_set_try_send(s, 1, 12), VCH_OK);
	assert_int_equal(atomic_load(&c->w.state), VCH_W_NOTIFIED);
	assert_int_equal(atomic_load(&a->w.state), VCH_W_WAITING);
	blocker_stop(&blk);
	stask_finish(b);
	stask_finish(c);
	assert_int_equal(b->value, 11);
	assert_int_equal(c->value, 12);
	assert_int_equal(vch_set_try_send(s, 0, 13), VCH_OK);
	stask_finish(a);
	assert_int_equal(a->value, 13);
	assert_int_equal(member_stats(s, 0).cross_wakes + member_stats(s, 1).cross_wakes, 0);
	assert_int_equal(member_stats(s, 0).stolen + member_stats(s, 1).stolen, 0);
	stask_put(a);
	stask_put(b);
	stask_put(c);
	wait_freed(&freed, 3);
	vch_set_free(s);
}

/* The rule: member 0 has no waiting receiver (its receivers are busy), a
 * receiver of member 2 waits: the value marks member 0 and wakes that
 * receiver, which looks at member 0 first and takes it. */
static void test_task_wake_across(void **state)
{
	struct vch_set *s;
	_Atomic int freed = 0;
	struct stask *r;
	struct blocker blk;

	assert_int_equal(vch_set_new(3, 9, &s), 0);
	r = stask_spawn(s, 2, false, 1, 0, &freed);
	wait_for_waits(s, 2, false, 1);
	blocker_start(&blk);
	assert_int_equal(vch_set_try_send(s, 0, 21), VCH_OK);
	assert_true(helped(s, 0));
	assert_int_equal(atomic_load(&r->w.state), VCH_W_NOTIFIED);
	assert_int_equal(r->w.from, 0);
	assert_int_equal(member_stats(s, 0).cross_wakes, 1);
	blocker_stop(&blk);
	stask_finish(r);
	assert_int_equal(r->value, 21);
	assert_int_equal(member_stats(s, 2).stolen, 1);
	/* Member 0 is empty now; its mark goes at the next look that finds it so. */
	uint64_t v;
	assert_int_equal(vch_set_try_recv(s, 1, &v), VCH_EMPTY);
	assert_false(helped(s, 0));
	stask_put(r);
	wait_freed(&freed, 1);
	vch_set_free(s);
}

/* Nobody waits anywhere when the value comes: its member is marked, and a
 * receiver of another member that starts later takes it without waiting. */
static void test_task_marked_member_seen(void **state)
{
	struct vch_set *s;
	_Atomic int freed = 0;
	struct stask *r;

	assert_int_equal(vch_set_new(2, 4, &s), 0);
	assert_int_equal(vch_set_try_send(s, 0, 31), VCH_OK);
	assert_true(helped(s, 0));
	assert_int_equal(member_stats(s, 0).cross_wakes, 0);
	r = stask_spawn(s, 1, false, 1, 0, &freed);
	stask_finish(r);
	assert_int_equal(r->value, 31);
	assert_int_equal(member_stats(s, 1).stolen, 1);
	assert_int_equal(member_stats(s, 1).recv_waits, 0);
	stask_put(r);
	/* Without the mark, a member's value is its own receivers' (a
	 * receiver elsewhere that starts waits, it does not look). */
	atomic_store(&s->help[0], 0);
	assert_int_equal(vch_set_try_send(s, 1, 32), VCH_OK);
	atomic_store(&s->help[0], 0);
	r = stask_spawn(s, 0, false, 1, 0, &freed);
	wait_for_waits(s, 0, false, 1);
	assert_int_equal(vch_len(vch_set_member(s, 1)), 1);
	assert_int_equal(vch_set_try_send(s, 0, 33), VCH_OK);
	stask_finish(r);
	assert_int_equal(r->value, 33);
	stask_put(r);
	wait_freed(&freed, 2);
	vch_set_free(s);
}

/* A wakeup given to a receiver that is cancelled before it runs passes on
 * for the member it named: to that member's own waiter when there is one,
 * else across. */
static void test_task_pass_on_across(void **state)
{
	struct vch_set *s;
	_Atomic int freed = 0;
	struct stask *a, *b;
	struct blocker blk;

	assert_int_equal(vch_set_new(3, 9, &s), 0);
	b = stask_spawn(s, 2, false, 1, 0, &freed);
	wait_for_waits(s, 2, false, 1);
	a = stask_spawn(s, 1, false, 1, 0, &freed);
	wait_for_waits(s, 1, false, 1);
	blocker_start(&blk);
	/* Member 0 has no waiter: the scan from member 1 on wakes A. */
	assert_int_equal(vch_set_try_send(s, 0, 41), VCH_OK);
	assert_int_equal(atomic_load(&a->w.state), VCH_W_NOTIFIED);
	assert_int_equal(atomic_load(&b->w.state), VCH_W_WAITING);
	vrt_task_cancel(&a->task);
	blocker_stop(&blk);
	stask_finish(a);
	stask_finish(b);
	assert_int_equal(a->done, 0);
	assert_int_equal(b->done, 1);
	assert_int_equal(b->value, 41);
	stask_put(a);
	stask_put(b);
	wait_freed(&freed, 2);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(atomic_load(&vch_set_member(s, i)->recvq.has_waiters), 0);
	vch_set_free(s);
}

/* A sender that finds every member full waits on its home member, and a
 * receive there wakes it; a sender whose home holds nothing waits on a
 * member that holds values. */
static void test_task_sender_waits(void **state)
{
	struct vch_set *s;
	_Atomic int freed = 0;
	struct stask *a, *b;
	uint64_t v;

	assert_int_equal(vch_set_new(2, 2, &s), 0);
	assert_int_equal(vch_set_try_send(s, 0, 1), VCH_OK);
	assert_int_equal(vch_set_try_send(s, 1, 2), VCH_OK);
	a = stask_spawn(s, 1, true, 1, 50, &freed);
	wait_for_waits(s, 1, true, 1);
	assert_int_equal(vch_set_try_recv(s, 1, &v), VCH_OK);
	assert_int_equal(v, 2);
	stask_finish(a);
	assert_int_equal(a->done, 1);
	stask_put(a);
	assert_int_equal(vch_len(vch_set_member(s, 1)), 1);
	vch_set_free(s);

	assert_int_equal(vch_set_new(2, 1, &s), 0);   /* member 1 holds nothing */
	assert_int_equal(vch_set_try_send(s, 0, 1), VCH_OK);
	b = stask_spawn(s, 1, true, 1, 60, &freed);
	wait_for_waits(s, 0, true, 1);
	assert_int_equal(vch_set_try_recv(s, 0, &v), VCH_OK);
	stask_finish(b);
	assert_int_equal(b->done, 1);
	stask_put(b);
	assert_int_equal(vch_set_try_recv(s, 1, &v), VCH_OK);
	assert_int_equal(v, 60);
	assert_int_equal(member_stats(s, 1).spilled, 1);
	wait_freed(&freed, 2);
	vch_set_free(s);
}

/* Close wakes every waiter of every member: receivers take what is left
 * first, then see CLOSED; senders see CLOSED. */
static void test_task_close(void **state)
{
	struct vch_set *s, *f;
	_Atomic int freed = 0;
	struct stask *r[3], *w;

	assert_int_equal(vch_set_new(3, 3, &s), 0);
	assert_int_equal(vch_set_new(2, 2, &f), 0);
	assert_int_equal(vch_set_try_send(f, 0, 1), VCH_OK);
	assert_int_equal(vch_set_try_send(f, 1, 2), VCH_OK);
	for (unsigned i = 0; i < 3; i++) {
		r[i] = stask_spawn(s, i, false, 2, 0, &freed);
		wait_for_waits(s, i, false, 1);
	}
	w = stask_spawn(f, 0, true, 1, 9, &freed);
	wait_for_waits(f, 0, true, 1);
	/* Three values go to the receivers, each of which then waits again. */
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(vch_set_try_send(s, i, 100 + i), VCH_OK);
	for (unsigned i = 0; i < 3; i++)
		wait_for_waits(s, i, false, 2);
	vch_set_close(s);
	vch_set_close(f);
	for (unsigned i = 0; i < 3; i++) {
		stask_finish(r[i]);
		assert_int_equal(r[i]->done, 1);
		assert_int_equal(r[i]->last, VCH_CLOSED);
		stask_put(r[i]);
	}
	stask_finish(w);
	assert_int_equal(w->last, VCH_CLOSED);
	stask_put(w);
	wait_freed(&freed, 4);
	vch_set_free(s);
	vch_set_free(f);
}

/* Budget 4: a task sending 100 values yields on the way. */
static void test_task_budget(void **state)
{
	struct vch_set *s;
	_Atomic int freed = 0;
	struct stask *c;
	uint64_t x;

	assert_int_equal(vrt_set_budget(rt, 4), 0);
	assert_int_equal(vch_set_new(2, 128, &s), 0);
	c = stask_spawn(s, 1, true, 100, 0, &freed);
	stask_finish(c);
	assert_int_equal(c->done, 100);
	assert_true(c->yields >= 100 / 4 - 1);
	stask_put(c);
	wait_freed(&freed, 1);
	for (uint64_t i = 0; i < 100; i++) {
		assert_int_equal(vch_set_try_recv(s, 1, &x), VCH_OK);
		assert_int_equal(x, i);
	}
	vrt_set_budget(rt, 128);
	vch_set_free(s);
}

static int rt_setup(void **state)
{
	struct vrt_config cfg;

	tcfg_rt(&cfg);
	cfg.workers = 1;
	return vrt_new(&cfg, &rt);
}

static int rt_teardown(void **state)
{
	vrt_shutdown(rt, VRT_SHUTDOWN_DRAIN);
	vrt_free(rt);
	rt = NULL;
	return 0;
}

int main(void)
{
	const char *senv = getenv("VOLTD_TEST_SEED");
	const struct CMUnitTest model[] = {
		cmocka_unit_test(test_model_random),
		cmocka_unit_test(test_capacity_split),
	};
	const struct CMUnitTest tasks[] = {
		cmocka_unit_test(test_task_own_member_newest),
		cmocka_unit_test(test_task_wake_across),
		cmocka_unit_test(test_task_marked_member_seen),
		cmocka_unit_test(test_task_pass_on_across),
		cmocka_unit_test(test_task_sender_waits),
		cmocka_unit_test(test_task_close),
		cmocka_unit_test(test_task_budget),
	};
	int fails;

	seed = senv ? strtoull(senv, NULL, 0) : (uint64_t)time(NULL);
	printf("# test_chan_set seed=%" PRIu64 " (VOLTD_TEST_SEED)\n", seed);
	alarm(120);   /* a lost wakeup hangs a join; fail instead */
	fails = cmocka_run_group_tests_name("model", model, NULL, NULL);
	fails += cmocka_run_group_tests_name("tasks", tasks, rt_setup, rt_teardown);
	return fails ? 1 : 0;
}
