/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_chan.c: the channel against a trivial model queue, on one
 * thread: random sequences of try_send / try_recv / timed ops / close for
 * capacities 1, 2, 3, 100, 1024 (power of two and not), with positions
 * starting at 0 and just before the 64-bit wrap; close in every fill state;
 * statistics; argument checks; the blocked-thread spin estimator driven
 * with given gaps. Seed: VOLTD_TEST_SEED (printed).
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

#include "base/rng.h"
#include "base/time.h"
#include "chan/internal.h"

static uint64_t seed;

/* The model: a plain array queue. */
struct model {
	uint64_t *v;
	size_t cap, head, len;
	bool closed;
	uint64_t sends, recvs, full, empty;
};

static void model_init(struct model *m, size_t cap)
{
	memset(m, 0, sizeof(*m));
	m->v = calloc(cap, sizeof(uint64_t));
	assert_non_null(m->v);
	m->cap = cap;
}

static enum vch_status model_send(struct model *m, uint64_t x)
{
	if (m->closed)
		return VCH_CLOSED;
	if (m->len == m->cap) {
		m->full++;
		return VCH_FULL;
	}
	m->v[(m->head + m->len) % m->cap] = x;
	m->len++;
	m->sends++;
	return VCH_OK;
}

static enum vch_status model_recv(struct model *m, uint64_t *x)
{
	if (m->len == 0) {
		if (m->closed)
			return VCH_CLOSED;
		m->empty++;
		return VCH_EMPTY;
	}
	*x = m->v[m->head];
	m->head = (m->head + 1) % m->cap;
	m->len--;
	m->recvs++;
	return VCH_OK;
}

static void check_stats(struct vch *ch, const struct model *m)
{
	struct vch_stats st;

	vch_stats_get(ch, &st);
	assert_int_equal(st.capacity, m->cap);
	assert_int_equal(st.len, m->len);
	assert_int_equal(vch_len(ch), m->len);
	assert_int_equal(st.sends, m->sends);
	assert_int_equal(st.recvs, m->recvs);
	assert_int_equal(st.full_events, m->full);
	assert_int_equal(st.empty_events, m->empty);
	assert_int_equal(st.closed, m->closed);
	assert_int_equal(vch_is_closed(ch), m->closed);
}

/* One random sequence of `steps` operations; `fill_bias` in [0, 100] is the
 * percentage of sends among sends + receives, so runs spend time both near
 * full and near empty. */
static void run_sequence(size_t cap, uint64_t start, unsigned steps, struct vb_rng *rng)
{
	struct vch *ch;
	struct model m;
	uint64_t next = 1;
	unsigned bias = 50;

	assert_int_equal(vch__new_at(cap, start, &ch), 0);
	model_init(&m, cap);
	for (unsigned i = 0; i < steps; i++) {
		unsigned op = vb_rng_below(rng, 1000);
		uint64_t got = 0, want = 0;
		enum vch_status r, e;

		if (i % 512 == 0)
			bias = 10 + vb_rng_below(rng, 81);
		if (op < 2 && i > steps / 2) {
			vch_close(ch);
			m.closed = true;
		} else if (op < 12) {
			/* Blocking forms with a zero or tiny timeout act as try. */
			if (vb_rng_below(rng, 2)) {
				e = model_send(&m, next);
				r = vch_send_timed(ch, next, vb_rng_below(rng, 2) ? 0 : 1000);
				if (e == VCH_FULL)
					e = VCH_TIMEDOUT;
				assert_int_equal(r, e);
				next++;
			} else {
				e = model_recv(&m, &want);
				r = vch_recv_timed(ch, &got, vb_rng_below(rng, 2) ? 0 : 1000);
				if (e == VCH_EMPTY)
					e = VCH_TIMEDOUT;
				assert_int_equal(r, e);
				if (r == VCH_OK)
					assert_int_equal(got, want);
			}
		} else if (op < 12 + bias * 988 / 100) {
			e = model_send(&m, next);
			r = vch_try_send(ch, next);
			if (r != e)
				fail_msg("step %u cap %zu: try_send %s, model %s", i, cap,
					 vch_status_name(r), vch_status_name(e));
			next++;
		} else {
			e = model_recv(&m, &want);
			r = vch_try_recv(ch, &got);
			if (r != e)
				fail_msg("step %u cap %zu: try_recv %s, model %s", i, cap,
					 vch_status_name(r), vch_status_name(e));
			if (r == VCH_OK)
				assert_int_equal(got, want);
		}
		if (i % 7 == 0)
			check_stats(ch, &m);
	}
	check_stats(ch, &m);
	/* Drain: every value the model still holds, in order, then CLOSED. */
	vch_close(ch);
	m.closed = true;
	for (;;) {
		uint64_t got = 0, want = 0;
		enum vch_status e = model_recv(&m, &want);
		enum vch_status r = vch_try_recv(ch, &got);
		assert_int_equal(r, e);
		if (r != VCH_OK)
			break;
		assert_int_equal(got, want);
	}
	assert_int_equal(vch_try_send(ch, 7), VCH_CLOSED);
	assert_int_equal(vch_send(ch, 7), VCH_CLOSED);
	check_stats(ch, &m);
	assert_int_equal(atomic_load(&ch->sendq.has_waiters), 0);
	assert_int_equal(atomic_load(&ch->recvq.has_waiters), 0);
	vch_free(ch);
	free(m.v);
}

static const size_t caps[] = { 1, 2, 3, 100, 1024 };

static void test_model_random(void **state)
{
	struct vb_rng rng;

	vb_rng_seed(&rng, seed);
	for (size_t c = 0; c < VB_ARRAY_SIZE(caps); c++) {
		for (unsigned rep = 0; rep < 6; rep++) {
			unsigned steps = caps[c] >= 100 ? 60000 : 8000;
			run_sequence(caps[c], 0, steps, &rng);
		}
	}
}

/* Positions start a few laps before 2^64, so they wrap mid-sequence. */
static void test_model_wrap(void **state)
{
	struct vb_rng rng;

	vb_rng_seed(&rng, seed ^ 0x77);
	for (size_t c = 0; c < VB_ARRAY_SIZE(caps); c++) {
		uint64_t start = UINT64_MAX - 2 * (3 * caps[c] + 5) + 1;
		for (unsigned rep = 0; rep < 3; rep++)
			run_sequence(caps[c], start, 20000, &rng);
	}
}

/* Exact capacity: fill with try_send until FULL, for every capacity. */
static void test_exact_capacity(void **state)
{
	static const size_t more[] = { 1, 2, 3, 5, 7, 100, 127, 128, 129, 1000, 1024 };

	for (size_t c = 0; c < VB_ARRAY_SIZE(more); c++) {
		struct vch *ch;
		uint64_t x;

		assert_int_equal(vch_new(more[c], &ch), 0);
		assert_int_equal(vch_capacity(ch), more[c]);
		for (int lap = 0; lap < 3; lap++) {
			for (size_t i = 0; i < more[c]; i++)
				assert_int_equal(vch_try_send(ch, i), VCH_OK);
			assert_int_equal(vch_try_send(ch, 99), VCH_FULL);
			assert_int_equal(vch_len(ch), more[c]);
			/* One out, one in, still exactly full. */
			assert_int_equal(vch_try_recv(ch, &x), VCH_OK);
			assert_int_equal(x, 0);
			assert_int_equal(vch_try_send(ch, more[c]), VCH_OK);
			assert_int_equal(vch_try_send(ch, 99), VCH_FULL);
			for (size_t i = 1; i <= more[c]; i++) {
				assert_int_equal(vch_try_recv(ch, &x), VCH_OK);
				assert_int_equal(x, i);
			}
			assert_int_equal(vch_try_recv(ch, &x), VCH_EMPTY);
		}
		vch_free(ch);
	}
}

/* Close with 0, 1, half, cap-1 and cap values queued, at several ring
 * offsets (so the live region straddles the buffer's end and the wrap). */
static void test_close_every_state(void **state)
{
	for (size_t c = 0; c < VB_ARRAY_SIZE(caps); c++) {
		size_t cap = caps[c];
		size_t fills[] = { 0, 1, cap / 2, cap - 1, cap };
		uint64_t starts[] = { 0, 2 * (cap / 2 + 1), UINT64_MAX - 2 * cap + 1 };

		for (size_t f = 0; f < VB_ARRAY_SIZE(fills); f++) {
			for (size_t s = 0; s < VB_ARRAY_SIZE(starts); s++) {
				struct vch *ch;
				struct vch_stats st;
				uint64_t x;

				assert_int_equal(vch__new_at(cap, starts[s], &ch), 0);
				for (size_t i = 0; i < fills[f]; i++)
					assert_int_equal(vch_try_send(ch, 1000 + i), VCH_OK);
				vch_close(ch);
				vch_close(ch);   /* idempotent */
				assert_true(vch_is_closed(ch));
				assert_int_equal(vch_try_send(ch, 1), VCH_CLOSED);
				assert_int_equal(vch_send_timed(ch, 1, 1000), VCH_CLOSED);
				assert_int_equal(vch_len(ch), fills[f]);
				for (size_t i = 0; i < fills[f]; i++) {
					assert_int_equal(vch_recv(ch, &x), VCH_OK);
					assert_int_equal(x, 1000 + i);
				}
				assert_int_equal(vch_try_recv(ch, &x), VCH_CLOSED);
				assert_int_equal(vch_recv(ch, &x), VCH_CLOSED);
				assert_int_equal(vch_recv_timed(ch, &x, 1000), VCH_CLOSED);
				vch_close(ch);
				vch_stats_get(ch, &st);
				assert_int_equal(st.sends, fills[f]);
				assert_int_equal(st.recvs, fills[f]);
				assert_int_equal(st.len, 0);
				assert_true(st.closed);
				vch_free(ch);
			}
		}
	}
}

/* A timed wait that runs out registers a waiter and leaves none behind. */
static void test_timeouts(void **state)
{
	struct vch *ch;
	struct vch_stats st;
	uint64_t x;
	int64_t t0;

	assert_int_equal(vch_new(2, &ch), 0);
	/* Sleep at once (a loaded machine could otherwise spend the whole
	 * timeout in the spin and yield rounds and never register). */
	vch__test_park_at_once = true;
	t0 = vb_now_ns();
	assert_int_equal(vch_recv_timed(ch, &x, 20 * VB_NS_PER_MS), VCH_TIMEDOUT);
	assert_true(vb_now_ns() - t0 >= 20 * VB_NS_PER_MS);
	assert_int_equal(atomic_load(&ch->recvq.has_waiters), 0);
	assert_int_equal(vch_try_send(ch, 1), VCH_OK);
	assert_int_equal(vch_try_send(ch, 2), VCH_OK);
	t0 = vb_now_ns();
	assert_int_equal(vch_send_timed(ch, 3, 20 * VB_NS_PER_MS), VCH_TIMEDOUT);
	assert_true(vb_now_ns() - t0 >= 20 * VB_NS_PER_MS);
	assert_int_equal(atomic_load(&ch->sendq.has_waiters), 0);
	vch_stats_get(ch, &st);
	assert_int_equal(st.full_events, 1);
	assert_int_equal(st.empty_events, 1);
	assert_int_equal(st.send_waits, 1);
	assert_int_equal(st.recv_waits, 1);
	vch__test_park_at_once = false;
	vch_free(ch);
}

static void test_args(void **state)
{
	struct vch *ch = (struct vch *)1;

	assert_int_equal(vch_new(0, &ch), -EINVAL);
	assert_null(ch);
	assert_int_equal(vch_new(VCH_CAPACITY_MAX + 1, &ch), -EINVAL);
	assert_int_equal(vch_new(VCH_CAPACITY_MAX / 1024, &ch), 0);
	vch_free(ch);
	vch_free(NULL);
	assert_string_equal(vch_status_name(VCH_CLOSED), "closed");
	/* Pointers round-trip through values. */
	assert_ptr_equal(vch_ptr(vch_val(&seed)), &seed);
}

/* Outside a task, the poll forms act like try_ and never register. */
static void test_poll_outside_task(void **state)
{
	struct vch *ch;
	struct vch_waiter w;
	uint64_t x;

	vch_waiter_init(&w);
	assert_int_equal(vch_new(1, &ch), 0);
	assert_int_equal(vch_recv_poll(ch, &w, &x), VCH_EMPTY);
	assert_int_equal(vch_send_poll(ch, &w, 5), VCH_OK);
	assert_int_equal(vch_send_poll(ch, &w, 6), VCH_FULL);
	assert_int_equal(vch_recv_poll(ch, &w, &x), VCH_OK);
	assert_int_equal(x, 5);
	vch_waiter_cancel(&w);   /* idle: nothing to do */
	assert_int_equal(atomic_load(&ch->sendq.has_waiters), 0);
	assert_int_equal(atomic_load(&ch->recvq.has_waiters), 0);
	vch_free(ch);
}

/* Feed n gaps of g PAUSEs to the estimate. */
static uint32_t gaps(uint32_t avg, unsigned n, uint64_t g, unsigned cap)
{
	while (n--)
		avg = vch__gap_note(avg, g, cap);
	return avg;
}

/* The blocked-thread spin bound (chan.c "blocking") from given gaps, with
 * the default cap (512 PAUSEs, ~12 us at 24 ns a PAUSE). */
static void test_spin_estimator(void **state)
{
	const unsigned cap = 512;
	uint32_t a = vch__gap_init;
	unsigned n;

	/* Before any gap: the old fixed budget. */
	assert_int_equal(vch__spin_bound(a, cap), 128);
	assert_int_equal(vch__spin_budget, cap);
	/* Ping-pong or a stream (gaps of a few PAUSEs): the floor. */
	assert_int_equal(vch__spin_bound(gaps(a, 50, 5, cap), cap), 128);
	/* Gaps of 200 PAUSEs: twice that (the estimate stops within a
	 * fraction of a PAUSE of the gap). */
	n = vch__spin_bound(gaps(a, 60, 200, cap), cap);
	assert_in_range(n, 396, 400);
	/* A value every 10 us (~400 PAUSEs): 2 x 400 capped at 512, so the
	 * next value is caught while spinning. */
	a = gaps(a, 60, 400, cap);
	assert_int_equal(vch__spin_bound(a, cap), cap);
	/* One slow value (1 ms) among them does not stop the spinning... */
	assert_int_equal(vch__spin_bound(gaps(a, 1, 41667, cap), cap), cap);
	/* ...two in a row do: the gaps are long, give up at once. */
	a = gaps(a, 2, 41667, cap);
	assert_int_equal(vch__spin_bound(a, cap), 0);
	a = gaps(a, 100, 41667, cap);
	assert_int_equal(vch__spin_bound(a, cap), 0);
	/* Paced again: 10 us gaps measured through futex sleeps (~670 PAUSEs
	 * with the wake's latency) bring the spinning back within 4 gaps... */
	for (n = 0; vch__spin_bound(a, cap) == 0 && n < 100; n++)
		a = vch__gap_note(a, 670, cap);
	assert_in_range(n, 1, 4);
	/* ...and keep it while they are measured that way. */
	a = gaps(a, 100, 670, cap);
	assert_int_equal(vch__spin_bound(a, cap), cap);
	/* Gaps just past 1.5 caps (~19 us): sleep at once. */
	assert_int_equal(vch__spin_bound(gaps(a, 100, 800, cap), cap), 0);
	/* The bench hook --spin-pauses 0 never spins. */
	assert_int_equal(vch__spin_bound(vch__gap_init, 0), 0);
	assert_int_equal(vch__spin_bound(gaps(vch__gap_init, 50, 5, 0), 0), 0);

	/* Random caps and gaps: the bound is 0 exactly when the estimate is
	 * past 1.5 caps, else between min(128, cap) and cap. */
	struct vb_rng r;
	vb_rng_seed(&r, seed);
	for (unsigned i = 0; i < 20000; i++) {
		unsigned c = (unsigned)(vb_rng_next32(&r) % 4096);
		uint64_t g = vb_rng_next32(&r) % (vb_rng_next32(&r) % 2 ? 1000 : 100000);
		uint32_t x = vch__gap_note((uint32_t)(vb_rng_next32(&r) % (1u << 20)), g, c);
		unsigned b = vch__spin_bound(x, c);
		uint64_t est = x >> VCH_GAP_FRAC;

		if (est > c + c / 2) {
			assert_int_equal(b, 0);
		} else {
			assert_true(b <= c);
			assert_true(b >= (c < 128 ? c : 128));
			assert_true(b >= (2 * est < c ? 2 * est : c));
		}
	}
	(void)state;
}

int main(void)
{
	const char *env = getenv("VOLTD_TEST_SEED");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_model_random),
		cmocka_unit_test(test_model_wrap),
		cmocka_unit_test(test_exact_capacity),
		cmocka_unit_test(test_close_every_state),
		cmocka_unit_test(test_timeouts),
		cmocka_unit_test(test_args),
		cmocka_unit_test(test_poll_outside_task),
		cmocka_unit_test(test_spin_estimator),
	};

	seed = env ? strtoull(env, NULL, 0) : (uint64_t)vb_now_ns();
	printf("# test_chan seed=%" PRIu64 " (VOLTD_TEST_SEED)\n", seed);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
